/*
 * testutil.c - helpers for the unit tests (temp dirs, files).
 */
#define _XOPEN_SOURCE 700
#include "testutil.h"
#include "charge.h"
#include "gateway.h"
#include <cjson/cJSON.h>
#include <stddef.h>
#include "log.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void pt_test_tmpdir(char *out, size_t outlen)
{
    const char *base = getenv("TMPDIR");
    snprintf(out, outlen, "%s/payterm-test-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(out))
        fail_msg("mkdtemp %s failed", out);
}

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void pt_test_rmtree(const char *path)
{
    nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

void pt_test_write_file(const char *path, const char *text, unsigned mode)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        fail_msg("cannot write %s", path);
    fputs(text, f);
    fclose(f);
    chmod(path, mode);
}

char *pt_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        if (len)
            *len = (size_t)n;
    }
    return buf;
}

/* ---- vector files ----------------------------------------------------------- */

#include <cjson/cJSON.h>

#include "crypto.h"
#include "err.h"
#include "platform.h"

void pt_test_data_path(const char *rel, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/%s", PT_TEST_DATA_DIR, rel);
}

struct cJSON *pt_test_vectors(const char *name)
{
    char path[1024];
    size_t len = 0;
    pt_test_data_path(name, path, sizeof path);
    char *text = pt_test_read_file(path, &len);
    if (!text)
        fail_msg("cannot read vector file %s", path);
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    if (!j)
        fail_msg("vector file %s is not JSON", path);
    return j;
}

/*
 * How many cases each array of a vector file holds.  The counts live here,
 * apart from the generated files, so that a vector deleted from a file (or
 * a file regenerated with fewer cases) fails every test that loops over it
 * instead of quietly running fewer cases; a generator that adds cases has
 * its new count written here in the same commit.
 */
static const struct {
    const char *file, *kind;
    int n;
} vector_counts[] = {
    {"2c2p.json", "requests", 4},
    {"2c2p.json", "verify", 5},
    {"2c2p.json", "notify", 8},
    {"2c2p.json", "responses", 13},
    {"2c2p_pm.json", "jose_made", 27},
    {"2c2p_pm.json", "payterm_made", 5},
    {"2c2p_pm.json", "requests", 3},
    {"2c2p_pm.json", "answers", 47},
    {"alipay.json", "requests", 5},
    {"alipay.json", "notify", 8},
    {"alipay.json", "responses", 23},
    {"alipay_refund.json", "requests", 4},
    {"alipay_refund.json", "responses", 43},
    {"stripe.json", "webhooks", 13},
    {"stripe_refund.json", "requests", 3},
    {"stripe_refund.json", "responses", 31},
    {"stripe_refund.json", "webhooks", 16},
    {"wechat.json", "requests", 4},
    {"wechat.json", "responses", 18},
    {"wechat.json", "notify", 10},
    {"wechat_certs.json", "answers", 17},
    {"wechat_refund.json", "requests", 4},
    {"wechat_refund.json", "responses", 39},
    {"wechat_refund.json", "notify", 19},
    {"wechat_v2.json", "requests", 7},
    {"wechat_v2.json", "responses", 65},
    {"wechat_v2.json", "cli.sign", 4},
    {"wechat_v2.json", "cli.verify", 5},
};

const struct cJSON *pt_test_cases(const struct cJSON *v, const char *file, const char *kind)
{
    int want = -1;
    for (size_t i = 0; i < sizeof vector_counts / sizeof vector_counts[0]; i++)
        if (strcmp(vector_counts[i].file, file) == 0 && strcmp(vector_counts[i].kind, kind) == 0)
            want = vector_counts[i].n;
    if (want < 0)
        fail_msg("tests/vectors/%s: no count declared for its \"%s\" cases (testutil.c)", file,
                 kind);
    /* "cli.sign": the member sign of the object cli. */
    const cJSON *a = v;
    char path[64];
    snprintf(path, sizeof path, "%s", kind);
    for (char *part = path, *dot; part; part = dot ? dot + 1 : NULL) {
        dot = strchr(part, '.');
        if (dot)
            *dot = '\0';
        a = cJSON_GetObjectItem(a, part);
    }
    if (!cJSON_IsArray(a))
        fail_msg("tests/vectors/%s: no \"%s\" array, want %d cases", file, kind, want);
    int n = cJSON_GetArraySize(a);
    if (n != want)
        fail_msg("tests/vectors/%s: %d \"%s\" cases, want %d (a deleted vector fails the test; "
                 "a new one updates the count in testutil.c)",
                 file, n, kind, want);
    return a;
}

struct pt_pk *pt_test_key(const char *name)
{
    char path[1024], err[PT_PK_ERR_MAX];
    struct pt_pk *pk = NULL;
    snprintf(path, sizeof path, "%s/keys/%s", PT_TEST_DATA_DIR, name);
    if (pt_pk_load_file(path, NULL, NULL, &pk, err, sizeof err) != PT_OK)
        fail_msg("cannot load key: %s", err);
    return pk;
}

const char *pt_test_str(const struct cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : "";
}

long long pt_test_int(const struct cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : 0;
}

void pt_test_response(const struct cJSON *c, struct pt_http_response *out)
{
    memset(out, 0, sizeof *out);
    out->status = (int)pt_test_int(c, "status");
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(c, "headers");
    for (const cJSON *it = h ? h->child : NULL; it; it = it->next)
        pt_http_response_add_header(out, it->string, it->valuestring);
    const char *body = pt_test_str(c, "body");
    out->body = strdup(body);
    out->body_len = strlen(body);
}

int pt_test_rc(const char *name)
{
    static const struct {
        const char *name;
        int rc;
    } map[] = {{"OK", PT_OK}, {"ESIG", PT_ESIG}, {"EPARSE", PT_EPARSE}, {"EINVAL", PT_EINVAL}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(map[i].name, name) == 0)
            return map[i].rc;
    fail_msg("unknown rc name %s", name);
    return 1;
}

/* Core logs every transition at info level; tests only want errors unless
 * PT_TEST_VERBOSE is set. */
__attribute__((constructor)) static void quiet_logs(void)
{
    if (!getenv("PT_TEST_VERBOSE"))
        pt_log_set_level(PT_LOG_ERROR);
}

void pt_test_charge_from(const cJSON *j, const char *gateway, struct pt_charge *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->gateway, sizeof c->gateway, "%s", gateway);
    snprintf(c->order_id, sizeof c->order_id, "%s", pt_test_str(j, "order_id"));
    snprintf(c->method, sizeof c->method, "%s", pt_test_str(j, "method"));
    snprintf(c->currency, sizeof c->currency, "%s", pt_test_str(j, "currency"));
    snprintf(c->subject, sizeof c->subject, "%s", pt_test_str(j, "subject"));
    c->amount = pt_test_int(j, "amount");
    static const struct {
        const char *name;
        size_t off, size;
    } optional[] = {
        {"payment_code", offsetof(struct pt_charge, payment_code), PT_SHORT_MAX},
        {"payment_method", offsetof(struct pt_charge, payment_method), PT_SHORT_MAX},
        {"customer", offsetof(struct pt_charge, customer), PT_SHORT_MAX},
        {"gateway_trade_no", offsetof(struct pt_charge, gateway_trade_no), PT_SHORT_MAX},
    };
    for (size_t i = 0; i < sizeof optional / sizeof optional[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, optional[i].name);
        if (cJSON_IsString(v))
            snprintf((char *)c + optional[i].off, optional[i].size, "%s", v->valuestring);
    }
}

int pt_test_op(const char *s)
{
    if (strcmp(s, "close") == 0)
        return PT_GW_CLOSE;
    return strcmp(s, "pay") == 0 ? PT_GW_PAY : strcmp(s, "query") == 0 ? PT_GW_QUERY : PT_GW_CANCEL;
}

/* ---- a disk that fills up or fails -------------------------------------------- */

#include <sqlite3.h>
#include <stdatomic.h>

/* The unix VFS with its files' xWrite replaced: the files are the unix VFS's
 * own (same size, same state), only their method table is a copy.  The unix
 * VFS has a table per locking style (the database locks, its journals and
 * WAL do not), so each gets its copy. */
#define DISK_TABLES 4
static sqlite3_vfs disk_vfs;
static sqlite3_vfs *disk_unix;
static struct {
    const sqlite3_io_methods *orig;
    sqlite3_io_methods copy;
} disk_tables[DISK_TABLES];
static int disk_ntables;
static atomic_int disk_mode;

static const sqlite3_io_methods *disk_orig(const sqlite3_io_methods *copy)
{
    for (int i = 0; i < disk_ntables; i++)
        if (&disk_tables[i].copy == copy)
            return disk_tables[i].orig;
    return NULL;
}

static int disk_write(sqlite3_file *f, const void *data, int amt, sqlite3_int64 off)
{
    const sqlite3_io_methods *orig = disk_orig(f->pMethods);
    int mode = atomic_load(&disk_mode);
    if (mode == PT_TEST_DISK_EIO)
        return SQLITE_IOERR_WRITE;
    if (mode == PT_TEST_DISK_FULL) {
        sqlite3_int64 size = 0;
        int rc = orig->xFileSize(f, &size);
        /* What the unix VFS answers when write() meets ENOSPC. */
        if (rc != SQLITE_OK || off + amt > size)
            return rc != SQLITE_OK ? rc : SQLITE_FULL;
    }
    return orig->xWrite(f, data, amt, off);
}

static int disk_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
    (void)vfs;
    int rc = disk_unix->xOpen(disk_unix, name, f, flags, out);
    if (rc != SQLITE_OK || !f->pMethods)
        return rc;
    int i = 0;
    while (i < disk_ntables && disk_tables[i].orig != f->pMethods)
        i++;
    if (i == disk_ntables) {
        if (i == DISK_TABLES)
            return SQLITE_OK; /* not seen in SQLite 3.x: writes go through */
        disk_tables[i].orig = f->pMethods;
        disk_tables[i].copy = *f->pMethods;
        disk_tables[i].copy.xWrite = disk_write;
        disk_ntables++;
    }
    f->pMethods = &disk_tables[i].copy;
    return SQLITE_OK;
}

void pt_test_disk_install(void)
{
    disk_unix = sqlite3_vfs_find(NULL);
    if (!disk_unix)
        fail_msg("no default SQLite VFS");
    disk_vfs = *disk_unix;
    disk_vfs.zName = "payterm-test-disk";
    disk_vfs.xOpen = disk_open;
    if (sqlite3_vfs_register(&disk_vfs, 1) != SQLITE_OK)
        fail_msg("cannot register the test disk VFS");
}

void pt_test_disk_set(enum pt_test_disk mode)
{
    atomic_store(&disk_mode, (int)mode);
}

int pt_test_utf8_clean(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        unsigned c = *p++, need, min, cp;
        if (c < 0x80)
            continue;
        if (c >= 0xc2 && c <= 0xdf)
            need = 1, min = 0x80, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef)
            need = 2, min = 0x800, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4)
            need = 3, min = 0x10000, cp = c & 0x07;
        else
            return 0;
        for (unsigned i = 0; i < need; i++) {
            if (p >= end || (*p & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (*p++ & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
    }
    return 1;
}

void pt_test_skip_without_threads(void)
{
    if (getenv("PT_TEST_EMULATED"))
        skip();
}

/* ---- the store on both backends ------------------------------------------- */

#include "store.h"
#ifdef PT_WITH_PG
#include <libpq-fe.h>
#endif

int pt_test_pg(void)
{
    const char *f = getenv("PT_TEST_PG_STATE");
    return f && *f;
}

void pt_test_sqlite_only(const char *why)
{
    if (!pt_test_pg())
        return;
    fprintf(stderr, "[  SKIP    ] on PostgreSQL: %s\n", why);
    skip();
}

void pt_test_pg_only(const char *why)
{
    if (pt_test_pg())
        return;
    fprintf(stderr, "[  SKIP    ] on SQLite: %s\n", why);
    skip();
}

#ifdef PT_WITH_PG
/* The cluster's DSN (line one of the state file) and this program's own
 * database in it. */
static void pg_dsn(char *dsn, size_t cap, const char *dbname)
{
    pt_test_pg_dsn(dsn, cap, dbname);
}

void pt_test_pg_dsn(char *dsn, size_t cap, const char *dbname)
{
    char line[512] = "";
    FILE *f = fopen(getenv("PT_TEST_PG_STATE"), "r");
    if (!f || !fgets(line, sizeof line, f)) {
        fprintf(stderr, "PT_TEST_PG_STATE %s: cannot read it (tests/pg/cluster.sh start)\n",
                getenv("PT_TEST_PG_STATE"));
        abort();
    }
    fclose(f);
    line[strcspn(line, "\n")] = '\0';
    snprintf(dsn, cap, "%s dbname=%s", line, dbname);
}

static void pg_exec(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        fprintf(stderr, "test PostgreSQL: %s: %s", sql, PQerrorMessage(c));
        abort();
    }
    PQclear(r);
}

/* A connection to the cluster's postgres database, as its superuser. */
static PGconn *pg_admin_conn(void)
{
    char dsn[640];
    pg_dsn(dsn, sizeof dsn, "postgres");
    PGconn *c = PQconnectdb(dsn);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "test PostgreSQL: %s", PQerrorMessage(c));
        abort();
    }
    return c;
}

void pt_test_pg_admin(const char *sql)
{
    PGconn *c = pg_admin_conn();
    pg_exec(c, sql);
    PQfinish(c);
}

/* An empty database named after this program (created the first time). */
static void pg_fresh(const char *dbname)
{
    PGconn *c = pg_admin_conn();
    char sql[256];
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", dbname);
    pg_exec(c, sql);
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", dbname);
    pg_exec(c, sql);
    PQfinish(c);
}
#else
/* A board build has no PostgreSQL store: a test that needs one skips
 * first (pt_test_pg_only), so these are never reached. */
void pt_test_pg_dsn(char *dsn, size_t cap, const char *dbname)
{
    (void)dsn;
    (void)cap;
    (void)dbname;
    fail_msg("this build has no PostgreSQL store");
}

void pt_test_pg_admin(const char *sql)
{
    (void)sql;
    fail_msg("this build has no PostgreSQL store");
}
#endif

#ifdef PT_WITH_PG
#include <pthread.h>
static char test_dsn[640]; /* the test database of the last pt_test_store_open */
/* Racing threads open their stores at once (test_idem): test_dsn and the
 * fresh database are set under this lock, and each open reads its own copy
 * (snprintf empties its buffer first: a racer once read "" and was told
 * store.dsn is required). */
static pthread_mutex_t test_dsn_mu = PTHREAD_MUTEX_INITIALIZER;
#endif

int pt_test_store_open(const struct pt_store_options *o, struct pt_store **st, char *err,
                       size_t errlen)
{
    if (!pt_test_pg())
        return pt_store_open(o, st, err, errlen);
#ifdef PT_WITH_PG
    static char fresh_for[PT_STORE_PATH_MAX];
    char dsn[sizeof test_dsn];
    char exe[256] = "", dbname[80];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    snprintf(dbname, sizeof dbname, "t_%s", strrchr(exe, '/') ? strrchr(exe, '/') + 1 : "store");
    for (char *p = dbname; *p; p++)
        if (!(*p >= 'a' && *p <= 'z') && !(*p >= '0' && *p <= '9'))
            *p = '_';
    pthread_mutex_lock(&test_dsn_mu);
    if (!o->path || strcmp(fresh_for, o->path) != 0) {
        pg_fresh(dbname);
        snprintf(fresh_for, sizeof fresh_for, "%s", o->path ? o->path : "");
    }
    pg_dsn(test_dsn, sizeof test_dsn, dbname);
    memcpy(dsn, test_dsn, sizeof dsn);
    pthread_mutex_unlock(&test_dsn_mu);
    struct pt_store_options pg = *o;
    pg.backend = PT_STORE_POSTGRESQL;
    pg.dsn = dsn;
    return pt_store_open(&pg, st, err, errlen);
#else
    (void)o;
    *st = NULL;
    snprintf(err, errlen, "PT_TEST_PG_STATE is set but this build has no PostgreSQL store");
    return PT_EUNSUPPORTED;
#endif
}

int pt_test_writer_new(const struct pt_store_options *o, struct pt_store_writer **w, char *err,
                       size_t errlen)
{
    if (pt_test_pg()) {
        *w = NULL;
        return PT_OK;
    }
    return pt_store_writer_new(o, w, err, errlen);
}

/* ---- a lost connection, a held lock (PostgreSQL) ----------------------------- */

#ifdef PT_WITH_PG
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/un.h>

enum { PROXY_PAIRS = 32, PROXY_HELD = 65536 };

/* A client's connection through the proxy: its end (-1 once lost), the
 * server's, and what the client sent while it was held. */
struct proxy_pair {
    int client, server;
    size_t held;
    char buf[PROXY_HELD];
};

struct pt_test_pg_proxy {
    char dir[256];    /* its socket: dir/.s.PGSQL.5432 */
    char target[300]; /* the cluster's socket */
    int listen_fd;
    int ctl[2], ack[2]; /* requests to its thread, and the answers */
    int holding;        /* clients' bytes kept, not forwarded */
    atomic_size_t held; /* bytes kept so far */
    struct proxy_pair *pair[PROXY_PAIRS];
    int npairs;
    pthread_t th;
};

/* The cluster's socket directory (host=) in its DSN. */
static void pg_socket_dir(char *out, size_t cap)
{
    char dsn[640];
    pt_test_pg_dsn(dsn, sizeof dsn, "postgres");
    const char *h = strstr(dsn, "host=");
    if (!h)
        fail_msg("the test cluster's DSN names no socket directory: %s", dsn);
    h += 5;
    snprintf(out, cap, "%.*s", (int)strcspn(h, " "), h);
}

/* A Unix socket's address: path must fit (the test dirs are short). */
static struct sockaddr_un unix_addr(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t n = strlen(path);
    if (n >= sizeof a.sun_path)
        fail_msg("socket path too long: %s", path);
    memcpy(a.sun_path, path, n + 1);
    return a;
}

static int unix_connect(const char *path)
{
    struct sockaddr_un a = unix_addr(path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static void proxy_drop(struct pt_test_pg_proxy *p, int i)
{
    if (p->pair[i]->client >= 0)
        close(p->pair[i]->client);
    close(p->pair[i]->server);
    free(p->pair[i]);
    p->pair[i] = p->pair[--p->npairs];
}

/* Writes n bytes: 0, or -1. */
static int write_all(int fd, const char *buf, size_t n)
{
    for (size_t o = 0; o < n;) {
        ssize_t w = send(fd, buf + o, n - o, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        o += (size_t)w;
    }
    return 0;
}

/* Moves what one end has to the other (to -1: a lost client's answer,
 * dropped): 0, or -1 when the pair is done. */
static int proxy_move(int from, int to)
{
    char buf[16384];
    ssize_t n = read(from, buf, sizeof buf);
    return n <= 0 ? -1 : to < 0 ? 0 : write_all(to, buf, (size_t)n);
}

/* Keeps what a held client has sent (without blocking): 0, or -1 at its end. */
static int proxy_keep(struct pt_test_pg_proxy *p, struct proxy_pair *pp)
{
    ssize_t n = recv(pp->client, pp->buf + pp->held, sizeof pp->buf - pp->held, MSG_DONTWAIT);
    if (n > 0) {
        pp->held += (size_t)n;
        atomic_fetch_add(&p->held, (size_t)n);
    }
    return n == 0 ? -1 : 0;
}

/*
 * The requests: 'c' cut every connection (both ends); 'h' hold - what
 * clients send from now on is kept, not forwarded; 'l' lose the clients -
 * their ends closed, the servers' kept open with what was held; 'd'
 * deliver what was held to the servers, then close them; 's' stop.
 */
static void proxy_do(struct pt_test_pg_proxy *p, char c)
{
    for (int i = p->npairs - 1; i >= 0; i--) {
        struct proxy_pair *pp = p->pair[i];
        if (c == 'c' || c == 's') {
            proxy_drop(p, i);
        } else if (c == 'l' && pp->client >= 0) {
            proxy_keep(p, pp);
            close(pp->client);
            pp->client = -1;
        } else if (c == 'd') {
            write_all(pp->server, pp->buf, pp->held);
            usleep(100 * 1000); /* the server reads it before the close */
            proxy_drop(p, i);
        }
    }
    p->holding = c == 'h' || (p->holding && c == 'l');
}

static void *proxy_main(void *arg)
{
    struct pt_test_pg_proxy *p = arg;
    for (;;) {
        struct pollfd fds[2 + 2 * PROXY_PAIRS];
        int n = 0;
        fds[n++] = (struct pollfd){.fd = p->ctl[0], .events = POLLIN};
        fds[n++] = (struct pollfd){.fd = p->listen_fd, .events = POLLIN};
        for (int i = 0; i < p->npairs; i++) {
            fds[n++] = (struct pollfd){.fd = p->pair[i]->client, .events = POLLIN};
            fds[n++] = (struct pollfd){.fd = p->pair[i]->server, .events = POLLIN};
        }
        if (poll(fds, (nfds_t)n, -1) < 0)
            continue;
        if (fds[0].revents) {
            char c = 0;
            if (read(p->ctl[0], &c, 1) != 1)
                c = 's';
            proxy_do(p, c);
            if (write(p->ack[1], &c, 1) != 1 || c == 's')
                return NULL;
            continue;
        }
        for (int i = p->npairs - 1; i >= 0; i--) {
            struct proxy_pair *pp = p->pair[i];
            short in = fds[2 + 2 * i].revents, out = fds[3 + 2 * i].revents;
            int done = 0;
            if (in && pp->client >= 0)
                done = p->holding ? proxy_keep(p, pp) : proxy_move(pp->client, pp->server);
            if (!done && out)
                done = proxy_move(pp->server, pp->client); /* a lost client: dropped */
            if (done)
                proxy_drop(p, i);
        }
        if (fds[1].revents & POLLIN) {
            int c = accept(p->listen_fd, NULL, NULL);
            int sv = c >= 0 ? unix_connect(p->target) : -1;
            struct proxy_pair *pp =
                c >= 0 && sv >= 0 && p->npairs < PROXY_PAIRS ? calloc(1, sizeof *pp) : NULL;
            if (pp) {
                pp->client = c;
                pp->server = sv;
                p->pair[p->npairs++] = pp;
            } else {
                if (c >= 0)
                    close(c);
                if (sv >= 0)
                    close(sv);
            }
        }
    }
}

struct pt_test_pg_proxy *pt_test_pg_proxy_start(void)
{
    struct pt_test_pg_proxy *p = calloc(1, sizeof *p);
    char dir[200];
    pt_test_tmpdir(p->dir, sizeof p->dir);
    pg_socket_dir(dir, sizeof dir);
    snprintf(p->target, sizeof p->target, "%s/.s.PGSQL.5432", dir);
    char sock[300];
    snprintf(sock, sizeof sock, "%s/.s.PGSQL.5432", p->dir);
    struct sockaddr_un a = unix_addr(sock);
    p->listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (p->listen_fd < 0 || bind(p->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(p->listen_fd, 16) != 0 || pipe(p->ctl) != 0 || pipe(p->ack) != 0 ||
        pthread_create(&p->th, NULL, proxy_main, p) != 0)
        fail_msg("the PostgreSQL proxy at %s would not start", a.sun_path);
    return p;
}

static void proxy_ask(struct pt_test_pg_proxy *p, char what)
{
    char c;
    if (write(p->ctl[1], &what, 1) != 1 || read(p->ack[0], &c, 1) != 1)
        fail_msg("the PostgreSQL proxy does not answer");
}

void pt_test_pg_proxy_cut(struct pt_test_pg_proxy *p)
{
    proxy_ask(p, 'c');
}

void pt_test_pg_proxy_hold(struct pt_test_pg_proxy *p)
{
    proxy_ask(p, 'h');
}

void pt_test_pg_proxy_lose_clients(struct pt_test_pg_proxy *p)
{
    proxy_ask(p, 'l');
}

void pt_test_pg_proxy_deliver(struct pt_test_pg_proxy *p)
{
    proxy_ask(p, 'd');
}

size_t pt_test_pg_proxy_held(struct pt_test_pg_proxy *p)
{
    return atomic_load(&p->held);
}

int pt_test_pg_wait_for(const char *path, const char *sql, int timeout_ms)
{
    for (int t = 0; t < timeout_ms; t += 20) {
        if (pt_test_sql_int(path, sql, 0) > 0)
            return 1;
        usleep(20 * 1000);
    }
    return 0;
}

void pt_test_pg_use(const char *state)
{
    static char first[600];
    if (!first[0])
        snprintf(first, sizeof first, "%s",
                 getenv("PT_TEST_PG_STATE") ? getenv("PT_TEST_PG_STATE") : "");
    setenv("PT_TEST_PG_STATE", state ? state : first, 1);
}

void pt_test_pg_proxy_stop(struct pt_test_pg_proxy *p)
{
    proxy_ask(p, 's');
    pthread_join(p->th, NULL);
    close(p->listen_fd);
    close(p->ctl[0]);
    close(p->ctl[1]);
    close(p->ack[0]);
    close(p->ack[1]);
    pt_test_rmtree(p->dir);
    free(p);
}

int pt_test_store_open_via(struct pt_test_pg_proxy *p, const char *more,
                           const struct pt_store_options *o, struct pt_store **st, char *err,
                           size_t errlen)
{
    char dsn[1000];
    if (!test_dsn[0])
        fail_msg("pt_test_store_open_via: open the test database with pt_test_store_open first");
    if (p)
        snprintf(dsn, sizeof dsn, "%s host=%s %s", test_dsn, p->dir, more ? more : "");
    else
        snprintf(dsn, sizeof dsn, "%s %s", test_dsn, more ? more : "");
    struct pt_store_options pg = *o;
    pg.backend = PT_STORE_POSTGRESQL;
    pg.dsn = dsn;
    return pt_store_open(&pg, st, err, errlen);
}

void *pt_test_pg_hold(const char *sql)
{
    PGconn *c = PQconnectdb(test_dsn);
    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("test PostgreSQL: %s", PQerrorMessage(c));
    pg_exec(c, "BEGIN");
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("test PostgreSQL: %s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    return c;
}

void pt_test_pg_release(void *held)
{
    pg_exec(held, "COMMIT");
    PQfinish(held);
}
#else
struct pt_test_pg_proxy *pt_test_pg_proxy_start(void)
{
    fail_msg("this build has no PostgreSQL store");
    return NULL;
}

void pt_test_pg_proxy_cut(struct pt_test_pg_proxy *p)
{
    (void)p;
}

void pt_test_pg_proxy_hold(struct pt_test_pg_proxy *p)
{
    (void)p;
}

void pt_test_pg_proxy_lose_clients(struct pt_test_pg_proxy *p)
{
    (void)p;
}

void pt_test_pg_proxy_deliver(struct pt_test_pg_proxy *p)
{
    (void)p;
}

size_t pt_test_pg_proxy_held(struct pt_test_pg_proxy *p)
{
    (void)p;
    return 0;
}

int pt_test_pg_wait_for(const char *path, const char *sql, int timeout_ms)
{
    (void)path;
    (void)sql;
    (void)timeout_ms;
    return 0;
}

void pt_test_pg_use(const char *state)
{
    (void)state;
}

void pt_test_pg_proxy_stop(struct pt_test_pg_proxy *p)
{
    (void)p;
}

int pt_test_store_open_via(struct pt_test_pg_proxy *p, const char *more,
                           const struct pt_store_options *o, struct pt_store **st, char *err,
                           size_t errlen)
{
    (void)p;
    (void)more;
    (void)o;
    (void)st;
    (void)err;
    (void)errlen;
    fail_msg("this build has no PostgreSQL store");
    return PT_EUNSUPPORTED;
}

void *pt_test_pg_hold(const char *sql)
{
    (void)sql;
    fail_msg("this build has no PostgreSQL store");
    return NULL;
}

void pt_test_pg_release(void *held)
{
    (void)held;
}
#endif

/* want_row: 0 run it, 1 read a row, 2 only say whether it ran (no abort). */
static long long sql_run(const char *path, const char *sql, int col, int want_row)
{
    long long v = 0;
    if (pt_test_pg()) {
#ifdef PT_WITH_PG
        PGconn *c = PQconnectdb(test_dsn);
        PGresult *r = PQexec(c, sql);
        ExecStatusType s = PQresultStatus(r);
        if (want_row == 2) {
            v = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
            PQclear(r);
            PQfinish(c);
            return v;
        }
        if ((s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) || (want_row && PQntuples(r) < 1)) {
            fprintf(stderr, "test SQL %s: %s", sql, PQerrorMessage(c));
            abort();
        }
        if (want_row)
            v = strtoll(PQgetvalue(r, 0, col), NULL, 10);
        PQclear(r);
        PQfinish(c);
#endif
        return v;
    }
    sqlite3 *db;
    sqlite3_stmt *q;
    if (want_row != 1) { /* every statement of sql, as PQexec runs them */
        if (sqlite3_open(path, &db) != SQLITE_OK)
            abort();
        v = sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK;
        if (!v && want_row == 0) {
            fprintf(stderr, "test SQL %s: %s\n", sql, sqlite3_errmsg(db));
            abort();
        }
        sqlite3_close(db);
        return v;
    }
    if (sqlite3_open(path, &db) != SQLITE_OK ||
        sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK) {
        fprintf(stderr, "test SQL %s: %s\n", sql, sqlite3_errmsg(db));
        abort();
    }
    int rc = sqlite3_step(q);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        fprintf(stderr, "test SQL %s: %s\n", sql, sqlite3_errmsg(db));
        abort();
    }
    if (want_row) {
        if (rc != SQLITE_ROW)
            abort();
        v = sqlite3_column_int64(q, col);
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    return v;
}

void pt_test_sql_exec(const char *path, const char *sql)
{
    sql_run(path, sql, 0, 0);
}

long long pt_test_sql_int(const char *path, const char *sql, int col)
{
    return sql_run(path, sql, col, 1);
}

int pt_test_sql_ok(const char *path, const char *sql)
{
    return (int)sql_run(path, sql, 0, 2);
}

struct pt_store *pt_test_local_store(const char *dir, char *path)
{
    char err[512];
    snprintf(path, PT_STORE_PATH_MAX, "%s/local.db", dir);
    struct pt_store_options o = {.path = path};
    struct pt_store *st = NULL;
    if (pt_store_open(&o, &st, err, sizeof err) != PT_OK) {
        fprintf(stderr, "pt_test_local_store: %s\n", err);
        abort();
    }
    return st;
}
