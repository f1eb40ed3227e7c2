/*
 * daemon.c - wiring of the daemon (see daemon.h).
 */
#include "daemon.h"
#include "api.h"
#include "cli.h"
#include "clock.h"
#include "config_load.h"
#include "crypto.h"
#include "datadir.h"
#include "gate.h"
#include "err.h"
#include "host.h"
#include "linux.h"
#include "listen.h"
#include "log.h"
#include "gw_config.h"
#include "metrics.h"
#include "pt_config.h"
#include "peer_certs.h"
#include "store.h"
#include "sync.h"
#include "syncer.h"
#include "transport_curl.h"

#include <mbedtls/error.h>
#include <mbedtls/x509_crt.h>

#include <errno.h>
#if PT_HAVE_M_ARENA_MAX
#include <malloc.h>
#endif
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Every thread's stack (SPEC 11): twice musl's default, so that what the
 * suite proves at 128 KiB (PAYTERM_THREAD_STACK_KIB=128) has room to spare
 * on a board.  Big buffers live on the heap. */
#define THREAD_STACK_KIB 256
/* Below this an online charge over TLS overflows a thread (measured: 36 KiB
 * crashes in libcurl/mbedTLS); 64 leaves room and is tested. */
#define THREAD_STACK_KIB_MIN 64
#define THREAD_STACK_KIB_MAX 65536

/* Room for every problem init and serve can find, one line each. */
#define PROBLEMS_MAX 8192

struct pt_daemon {
    struct pt_config cfg;
    char db_path[PT_CFG_PATH_MAX + 16];
    struct pt_store *st;
    /* store.fallback "local": the lane's own SQLite queue while the store
     * server is unreachable (one connection, one request at a time). */
    struct pt_store *local;
    pthread_mutex_t local_mu;
    /* PostgreSQL: the thread that wakes this lane's long-polls when any
     * lane commits an event (LISTEN, feed_listener). */
    pthread_t listener;
    int listener_on;
    atomic_int listener_stop;
    /* The one write connection: every store of the daemon writes through it
     * (group commit, docs/writer.md). */
    struct pt_store_writer *writer;
    struct pt_api *api;
    char token[256];
    struct pt_gw_config gw[PT_GW_MAX];
    int ngw;
    struct pt_curl *curl;
    struct pt_platform platform;
    struct pt_sync *sync;
    struct pt_syncer *syncer; /* guarded by mu: HTTP threads wake it */
    pthread_mutex_t mu;
    int lock_fd; /* <data_dir>/payterm.lock, flock()ed while we run; -1 none */
    /* listen and notify_listen, bound before the database is opened and
     * handed to the API when it starts; -1 none (or handed over). */
    int listen_fd, notify_fd;
    /* cfg and gw[] change only with the gate closed (pt_daemon_reload). */
    struct pt_gate *gate;
    /* Lane time (SPEC 17): the process's platform while the daemon runs;
     * raw_host is the one it replaced. */
    struct pt_clock *clock;
    const struct pt_platform *raw_host;
};

static void *feed_listener(void *p);

static void between(void *p)
{
    struct pt_daemon *d = p;
    pt_gate_pass(d->gate);
}

static int random_cb(void *ctx, void *buf, size_t len)
{
    (void)ctx;
    return pt_host_random(buf, len);
}

/* The sync engine and the API ask for a drain through the daemon, because
 * the syncer thread starts after both exist. */
static void wake_syncer(void *p)
{
    struct pt_daemon *d = p;
    pthread_mutex_lock(&d->mu);
    if (d->syncer)
        pt_syncer_wake(d->syncer);
    pthread_mutex_unlock(&d->mu);
}

static int online(void *p)
{
    struct pt_daemon *d = p;
    return d->sync && pt_sync_online(d->sync);
}

static int64_t last_probe(void *p, const char *gateway)
{
    struct pt_daemon *d = p;
    return d->sync ? pt_sync_last_probe(d->sync, gateway) : 0;
}

static void clock_info(void *p, struct pt_clock_info *out)
{
    struct pt_daemon *d = p;
    pt_clock_info(d->clock, out);
}

static int notify(void *p, struct pt_store *st, const char *gateway,
                  const struct pt_http_response *msg, struct pt_reply *out,
                  const char **content_type)
{
    struct pt_daemon *d = p;
    return pt_sync_notify(d->sync, st, gateway, msg, out, content_type);
}

/* The sync engine downloaded a peer certificate (or retired one). */
static int keep_peer_cert(void *p, const char *gateway, const char *serial, const char *pem,
                          size_t len)
{
    struct pt_daemon *d = p;
    return pt_peer_certs_keep(d->cfg.data_dir, gateway, serial, pem, len);
}

/* The peer certificates downloaded by earlier runs, into each gateway's
 * trust store (SPEC 8: they survive a restart, even one while the gateway
 * cannot be asked for them). */
static void load_peer_certs(struct pt_daemon *d)
{
    for (int i = 0; i < pt_gateway_count(); i++) {
        if (!d->gw[i].name[0] || !d->gw[i].peer_keys)
            continue;
        int n =
            pt_peer_certs_load(d->cfg.data_dir, d->gw[i].name, d->gw[i].peer_keys, random_cb, NULL);
        if (n)
            pt_log_info("%s: %d downloaded platform certificate(s) loaded from %s", d->gw[i].name,
                        n, d->cfg.data_dir);
    }
}

/* Starts the sync engine with the gateways load_files() loaded. */
static int start_sync(struct pt_daemon *d, char *err, size_t errlen)
{
    struct pt_sync_options so = {.cfg = &d->cfg,
                                 .wake = wake_syncer,
                                 .ctx = d,
                                 .keep_peer_cert = keep_peer_cert,
                                 .between = between};
    for (int i = 0; i < pt_gateway_count(); i++) {
        if (!d->gw[i].name[0])
            continue;
        so.gw[i] = &d->gw[i];
        d->ngw++;
    }
    d->platform = *pt_host();
    if (d->ngw) {
        struct pt_curl_options co = {.ca_file = d->cfg.ca_file};
        int rc = pt_curl_new(&co, &d->curl);
        if (rc) {
            snprintf(err, errlen, "tls.ca_file %s: cannot be used as the trust store (%s)",
                     d->cfg.ca_file, pt_strerror(rc));
            return rc;
        }
        d->platform.transport = pt_curl_transport(d->curl);
    }
    so.platform = &d->platform;
    return pt_sync_new(&so, &d->sync);
}

/* Reads the API token: one line, trailing line breaks dropped. */
static int read_token(const char *path, char *out, size_t cap, char *err, size_t errlen)
{
    size_t n = 0;
    int rc = pt_secret_read_line(path, out, cap, &n);
    if (rc == PT_ENOTFOUND || rc == PT_EIO) {
        snprintf(err, errlen, "api_token_file %s: cannot read: %s", path, strerror(errno));
        return PT_EIO;
    }
    if (rc != PT_OK || n < 16) {
        pt_zeroize(out, cap);
        snprintf(err, errlen, "api_token_file %s: the token must be one line of 16-%zu characters",
                 path, cap - 1);
        return PT_ECONFIG;
    }
    for (size_t i = 0; i < n; i++) {
        if (out[i] < 0x21 || out[i] > 0x7e) {
            pt_zeroize(out, cap);
            snprintf(err, errlen, "api_token_file %s: the token must be visible ASCII", path);
            return PT_ECONFIG;
        }
    }
    return PT_OK;
}

/* Largest tls.ca_file read (Debian's whole bundle is about 220 KiB). */
#define CA_FILE_MAX (8 * 1024 * 1024)

/* Reads a whole file of at most CA_FILE_MAX bytes, NUL-terminated.  Returns
 * a buffer the caller frees, or NULL with err set. */
static char *read_ca_file(const char *path, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    if (!f) {
        snprintf(err, errlen, "tls.ca_file %s: cannot read: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "tls.ca_file %s: not a regular file", path);
        fclose(f);
        return NULL;
    }
    size_t cap = sb.st_size < CA_FILE_MAX ? (size_t)sb.st_size + 1 : CA_FILE_MAX + 1;
    buf = malloc(cap + 1);
    size_t n = buf ? fread(buf, 1, cap, f) : 0; /* one byte more than it holds: did it grow? */
    if (!buf || ferror(f) || n > CA_FILE_MAX || n == cap) {
        snprintf(err, errlen, "tls.ca_file %s: %s", path,
                 !buf              ? "out of memory"
                 : n > CA_FILE_MAX ? "larger than 8 MiB"
                 : n == cap        ? "changed while it was read"
                                   : strerror(errno));
        free(buf);
        buf = NULL;
    } else {
        buf[n] = '\0';
        *len = n;
    }
    fclose(f);
    return buf;
}

/*
 * A trust store libcurl would accept but that verifies nobody (empty, not
 * PEM, a truncated bundle) would let every gateway fail its handshake,
 * forever "not sent": refused at start instead.  One certificate that
 * parses is enough, and only the first is parsed: a whole CA bundle costs
 * milliseconds here, tens of them on a board, one certificate microseconds.
 * A file without any PEM block is tried as one DER certificate.
 */
static int check_ca_file(const char *path, char *err, size_t errlen)
{
    static const char begin[] = "-----BEGIN CERTIFICATE-----";
    static const char end[] = "-----END CERTIFICATE-----";
    if (!path[0]) {
        snprintf(err, errlen,
                 "tls.ca_file: required when a gateway is configured "
                 "(TLS peer verification is always on)");
        return PT_ECONFIG;
    }
    size_t len = 0;
    char *buf = read_ca_file(path, &len, err, errlen);
    if (!buf)
        return PT_EIO;
    mbedtls_x509_crt crt;
    mbedtls_x509_crt_init(&crt);
    int r = MBEDTLS_ERR_X509_INVALID_FORMAT, pem = 0;
    for (char *p = strstr(buf, begin); p && r != 0; p = strstr(p + 1, begin)) {
        char *e = strstr(p, end);
        if (!e)
            break;
        pem = 1;
        e += sizeof end - 1;
        char keep = *e;
        *e = '\0'; /* mbedTLS wants a PEM block NUL-terminated, the NUL counted */
        r = mbedtls_x509_crt_parse(&crt, (const unsigned char *)p, (size_t)(e - p) + 1);
        *e = keep;
    }
    if (!pem && len)
        r = mbedtls_x509_crt_parse_der(&crt, (const unsigned char *)buf, len);
    mbedtls_x509_crt_free(&crt);
    free(buf);
    if (r == 0)
        return PT_OK;
    char why[128] = "the file is empty";
    if (len && !pem)
        snprintf(why, sizeof why, "neither a PEM certificate block nor a DER certificate");
    else if (len)
        mbedtls_strerror(r, why, sizeof why);
    snprintf(err, errlen, "tls.ca_file %s: holds no usable certificate (%s)", path, why);
    return PT_ECONFIG;
}

/* Appends each line of text to the list as "\n  line", counting them. */
static void problem(char *list, size_t cap, int *n, const char *text)
{
    size_t used = strlen(list);
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, "\n");
        if (used < cap)
            used += (size_t)snprintf(list + used, cap - used, "\n  %.*s", (int)len, p);
        ++*n;
        p += len + (p[len] == '\n');
    }
}

/*
 * Everything serve refuses in the files the configuration names, all of it
 * in one go (SPEC 11: init says all that is wrong at once): secret file
 * modes, the API token, every configured gateway's keys, the trust store.
 * What loads is kept in token and gw[] (the caller frees it, also on
 * failure).  On failure err holds one problem per line, after a count when
 * there are several.
 */
static int load_files(const struct pt_config *cfg, char *token, size_t tokcap,
                      struct pt_gw_config gw[PT_GW_MAX], char *err, size_t errlen)
{
    int n = 0, first = PT_OK, rc;
    char *list = calloc(1, PROBLEMS_MAX), *line = malloc(PROBLEMS_MAX);
    if (!list || !line) {
        first = PT_ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    if (cfg->api_token_file[0]) {
        rc = pt_config_check_secrets_of(cfg, "api_token_file", line, PROBLEMS_MAX);
        if (rc == PT_OK)
            rc = read_token(cfg->api_token_file, token, tokcap, line, PROBLEMS_MAX);
        if (rc != PT_OK) {
            problem(list, PROBLEMS_MAX, &n, line);
            first = first ? first : rc;
        }
    }
    int ngw = 0;
    for (int i = 0; i < pt_gateway_count(); i++) {
        const char *name = pt_metric_gateway_name(i);
        if (!pt_config_gateway_configured(cfg, name))
            continue;
        ngw++;
        char prefix[32];
        snprintf(prefix, sizeof prefix, "gateways.%s.", name);
        /* A file with a bad mode is not read: one line about it is enough. */
        rc = pt_config_check_secrets_of(cfg, prefix, line, PROBLEMS_MAX);
        if (rc == PT_OK)
            rc = pt_gw_config_load(cfg, name, random_cb, NULL, &gw[i], line, PROBLEMS_MAX);
        if (rc != PT_OK) {
            problem(list, PROBLEMS_MAX, &n, line);
            first = first ? first : rc;
        }
    }
    if (ngw && (rc = check_ca_file(cfg->ca_file, line, PROBLEMS_MAX)) != PT_OK) {
        problem(list, PROBLEMS_MAX, &n, line);
        first = first ? first : rc;
    }
    if (n == 1)
        snprintf(err, errlen, "%s", list + 3);
    else if (n > 1)
        snprintf(err, errlen, "%d problems, all to be fixed:%s", n, list);
out:
    free(line);
    free(list);
    return first;
}

int pt_daemon_check(const struct pt_config *cfg, char *err, size_t errlen)
{
    char token[256] = "";
    struct pt_gw_config *gw = calloc(PT_GW_MAX, sizeof *gw);
    if (!gw) {
        snprintf(err, errlen, "out of memory");
        return PT_ENOMEM;
    }
    int rc = load_files(cfg, token, sizeof token, gw, err, errlen);
    for (int i = 0; i < pt_gateway_count(); i++)
        if (gw[i].name[0])
            pt_gw_config_free(&gw[i]);
    free(gw);
    pt_zeroize(token, sizeof token);
    return rc;
}

/* The stack size of every thread the daemon starts: THREAD_STACK_KIB, or
 * PAYTERM_THREAD_STACK_KIB, a test and board knob (the suite runs with
 * musl's 128 KiB on glibc, whose own default of 8 MiB hides any overflow). */
static int thread_stack(size_t *bytes, char *err, size_t errlen)
{
    const char *v = getenv("PAYTERM_THREAD_STACK_KIB");
    long long kib = THREAD_STACK_KIB;
    if (v) {
        /* Plain decimal digits only: no sign, no blanks, no leading zero. */
        char *end = NULL;
        errno = 0;
        int plain = v[0] >= '1' && v[0] <= '9';
        for (const char *p = v; plain && *p; p++)
            plain = *p >= '0' && *p <= '9';
        kib = plain ? strtoll(v, &end, 10) : -1;
        if (!plain || errno || kib < THREAD_STACK_KIB_MIN || kib > THREAD_STACK_KIB_MAX) {
            snprintf(err, errlen,
                     "environment variable PAYTERM_THREAD_STACK_KIB: must be an integer from "
                     "%d to %d (KiB), got '%s'",
                     THREAD_STACK_KIB_MIN, THREAD_STACK_KIB_MAX, v);
            return PT_ECONFIG;
        }
    }
    *bytes = (size_t)kib * 1024;
    return PT_OK;
}

int pt_daemon_start(const struct pt_config *cfg, struct pt_daemon **out, char *err, size_t errlen)
{
    int rc = PT_ENOMEM;
    struct pt_daemon *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "out of memory");
        return rc;
    }
    d->cfg = *cfg;
    d->lock_fd = d->listen_fd = d->notify_fd = -1;
#if PT_HAVE_M_ARENA_MAX
    /* glibc gives each thread that allocates an arena of its own (up to 8
     * per core), and what a thread frees stays in its arena: a dozen
     * threads kept several MiB each had used once (issue 38).  Two are
     * enough for a lane's concurrency. */
    mallopt(M_ARENA_MAX, 2);
#endif
    pthread_mutex_init(&d->mu, NULL);
    if ((rc = pt_gate_new(&d->gate)) != PT_OK) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    size_t stack = 0;
    if ((rc = thread_stack(&stack, err, errlen)) != PT_OK)
        goto fail;
    if ((rc = load_files(&d->cfg, d->token, sizeof d->token, d->gw, err, errlen)) != PT_OK)
        goto fail;
    rc = PT_EIO;
    if (pt_cli_ensure_dir("serve", d->cfg.data_dir)) {
        snprintf(err, errlen, "data_dir %s is not usable (see above)", d->cfg.data_dir);
        goto fail;
    }
    if ((rc = pt_datadir_lock(d->cfg.data_dir, &d->lock_fd, err, errlen)) != PT_OK)
        goto fail;
    /* The addresses before the database (SPEC 18): a start that cannot
     * listen says where and why, and leaves no new database behind.
     * (After the lock: a second daemon on this data_dir is named as such,
     * not as a port in use.) */
    if ((rc = pt_listen_bind("listen", d->cfg.listen, &d->listen_fd, err, errlen)) != PT_OK ||
        (d->cfg.notify_listen[0] && (rc = pt_listen_bind("notify_listen", d->cfg.notify_listen,
                                                         &d->notify_fd, err, errlen)) != PT_OK))
        goto fail;
    pt_config_db_path(&d->cfg, d->db_path, sizeof d->db_path);
    pt_store_set_wal_vfs(!d->cfg.wal_vfs_off); /* before the first store is opened */
    /* A data_dir that held a database does not start on a new, empty one
     * unless asked to (SPEC 18). */
    unsigned caps = pt_config_store_caps(&d->cfg);
    if ((caps & PT_STORE_CAP_DATADIR_FILE) &&
        (rc = pt_datadir_check_database(d->cfg.data_dir, d->db_path, err, errlen)) != PT_OK)
        goto fail;
    /* A lane with its own queue starts without the store server (a reboot
     * during the outage) and connects when it answers. */
    struct pt_store_options so;
    pt_config_lane_store_options(&d->cfg, d->db_path, PT_LANE_OPEN_FIRST, &so);
    if ((rc = pt_store_open(&so, &d->st, err, errlen)) != PT_OK)
        goto fail;
    /* A backend that commits each connection's transactions itself has no
     * writer. */
    if ((caps & PT_STORE_CAP_GROUP_COMMIT) &&
        (rc = pt_store_writer_new(&so, &d->writer, err, errlen)) != PT_OK)
        goto fail;
    /* Without the marker payterm is only as it was before it: a full disk
     * at an upgrade must not keep the lane from starting. */
    if ((caps & PT_STORE_CAP_DATADIR_FILE) &&
        pt_datadir_mark(d->cfg.data_dir, err, errlen) != PT_OK)
        pt_log_warn("%s: a missing or empty database will not be refused at the next start", err);
    pthread_mutex_init(&d->local_mu, NULL);
    if ((rc = pt_config_open_local_queue(&d->cfg, d->db_path, &d->local, err, errlen)) != PT_OK)
        goto fail;
    if (d->local)
        pt_log_info("store.fallback local: while the store server cannot be reached, charges "
                    "queue in %s",
                    d->db_path);
    pt_store_attach(d->st, d->writer);

    /* From here on every time the daemon records or measures is lane time
     * (core/clock.h), anchored in the lane's own database. */
    d->raw_host = pt_host();
    if ((rc = pt_clock_open(d->raw_host, d->local ? d->local : d->st, PT_BUILD_EPOCH_MS, 1,
                            &d->clock)) != PT_OK) {
        snprintf(err, errlen, "cannot read or write the clock's anchor in %s: %s (%s)", d->db_path,
                 pt_strerror(rc), pt_store_errmsg(d->local ? d->local : d->st));
        goto fail;
    }
    pt_host_set(pt_clock_platform(d->clock));

    /* A random token for this run: a lock held by another token belongs to
     * a process that is gone, and can be recovered at once. */
    int64_t instance = 0;
    if ((rc = pt_host_random(&instance, sizeof instance)) != PT_OK) {
        snprintf(err, errlen, "no randomness from the kernel (getrandom)");
        goto fail;
    }

    load_peer_certs(d);
    if ((rc = start_sync(d, err, errlen)) != PT_OK)
        goto fail;
    /* Nothing of this data directory is on its way now (the lock is ours):
     * sends a crash interrupted are resolved in the first pass, not when
     * their run's window ends. */
    int interrupted = 0;
    rc = pt_store_sends_interrupted(d->st, d->platform.now_ms(d->platform.ctx), &interrupted);
    if (rc == PT_EIO && d->local) {
        pt_log_warn("the store server cannot be reached (%s): charges queue in %s until it "
                    "answers",
                    pt_store_errmsg(d->st), d->db_path);
        rc = PT_OK; /* this lane's interrupted sends: taken up after lock_timeout_s */
    }
    if (rc != PT_OK) {
        snprintf(err, errlen, "cannot read the database %s: %s", d->db_path, pt_strerror(rc));
        goto fail;
    }
    if (interrupted)
        pt_log_info("%d send(s) interrupted by the last stop: resolved by query first",
                    interrupted);

    struct pt_api_options ao = {
        .cfg = &d->cfg,
        .db_path = d->db_path,
        .writer = d->writer,
        .intake = {.cfg = &d->cfg,
                   .idem = {.ttl_ms = d->cfg.idem_ttl_s * 1000,
                            .lock_timeout_ms = d->cfg.idem_lock_timeout_s * 1000,
                            .instance = instance}},
        .hooks = {.sync_now = wake_syncer,
                  .online = online,
                  .notify = notify,
                  .clock = clock_info,
                  .last_probe = last_probe,
                  .ctx = d},
        .token = d->token[0] ? d->token : NULL,
        .thread_stack = stack,
        .gate = d->gate,
        .listen_fd = d->listen_fd,
        .notify_fd = d->notify_fd,
    };
    d->listen_fd = d->notify_fd = -1; /* the API's now, whatever it answers */
    if (d->ngw)
        ao.intake.online = pt_sync_online_ops(d->sync);
    if (d->local)
        ao.intake.fallback = (struct pt_intake_fallback){d->local, &d->local_mu};
    if ((rc = pt_api_start(&ao, &d->api, err, errlen)) != PT_OK)
        goto fail;
    if (caps & PT_STORE_CAP_SHARED) { /* other lanes' events */
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        if (stack)
            pthread_attr_setstacksize(&attr, stack);
        d->listener_on = pthread_create(&d->listener, &attr, feed_listener, d) == 0;
        pthread_attr_destroy(&attr);
        if (!d->listener_on) {
            snprintf(err, errlen, "cannot start the event listener thread");
            rc = PT_ESYS;
            goto fail;
        }
    }
    struct pt_syncer *y = NULL;
    rc = pt_syncer_start(d->sync, &d->cfg, d->db_path, d->writer, d->gate, d->clock, stack,
                         pt_api_feed_wake, d->api, &y);
    pthread_mutex_lock(&d->mu);
    d->syncer = y;
    pthread_mutex_unlock(&d->mu);
    if (rc != PT_OK) {
        snprintf(err, errlen, "cannot start the sync engine: %s", pt_strerror(rc));
        goto fail;
    }
    *out = d;
    return PT_OK;
fail:
    pt_daemon_stop(d);
    return rc ? rc : PT_EIO;
}

/*
 * The shop has one fulfilment feed (SPEC 16): another lane's event must
 * wake this lane's long-polls as its own commits do.  One connection
 * LISTENs; a second passes between checks of the stop flag (idle: one
 * wake-up a second, as the other timers).  A server gone is waited out and
 * the connection made again.
 */
static void *feed_listener(void *p)
{
    struct pt_daemon *d = p;
    struct pt_store *st = NULL;
    struct pt_store_options so;
    pt_config_store_options(&d->cfg, d->db_path, &so);
    unsigned wait_s = 1; /* after a failed open: doubling to 16 s (a refusing
                          * server must not see a login a second) */
    while (!atomic_load(&d->listener_stop)) {
        char err[512];
        if (!st && pt_store_open(&so, &st, err, sizeof err) != PT_OK) {
            st = NULL;
            for (unsigned i = 0; i < wait_s && !atomic_load(&d->listener_stop); i++)
                sleep(1); /* the stop flag checked each second */
            wait_s = wait_s < 16 ? wait_s * 2 : 16;
            continue;
        }
        wait_s = 1;
        int rc = pt_store_wait_events(st, 1000);
        if (rc == 1)
            pt_api_feed_wake(d->api);
        else if (rc < 0) {
            pt_store_close(st);
            st = NULL;
            sleep(1);
        }
    }
    pt_store_close(st);
    return NULL;
}

struct pt_store *pt_daemon_store(struct pt_daemon *d)
{
    return d->st;
}

void pt_daemon_stop(struct pt_daemon *d)
{
    if (!d)
        return;
    /* The drain in progress first (it wakes the API's long-polls, so the API
     * must still exist), then the listeners (requests in flight finish and
     * may still use the sync engine), then connections and keys. */
    pthread_mutex_lock(&d->mu);
    struct pt_syncer *y = d->syncer;
    d->syncer = NULL;
    pthread_mutex_unlock(&d->mu);
    pt_syncer_stop(y);
    if (d->listener_on) {
        atomic_store(&d->listener_stop, 1);
        pthread_join(d->listener, NULL);
        d->listener_on = 0;
    }
    pt_api_stop(d->api);
    pt_sync_destroy(d->sync);
    pt_curl_destroy(d->curl);
    for (int i = 0; i < pt_gateway_count(); i++)
        if (d->gw[i].name[0])
            pt_gw_config_free(&d->gw[i]);
    pt_store_close(d->local);
    pt_store_close(d->st);
    pt_store_writer_destroy(d->writer);
    if (d->clock) {
        pt_host_set(d->raw_host);
        pt_clock_free(d->clock);
    }
    pt_zeroize(d->token, sizeof d->token);
    pthread_mutex_destroy(&d->mu);
    pt_gate_free(d->gate);
    if (d->listen_fd >= 0)
        close(d->listen_fd);
    if (d->notify_fd >= 0)
        close(d->notify_fd);
    if (d->lock_fd >= 0)
        close(d->lock_fd); /* the lock goes with it; the file stays */
    free(d);
}

/* ---- SIGHUP: a new configuration ------------------------------------------------------------ */

/* A key that cannot change while the daemon runs: named, and kept. */
static int keep_old(const char *key, int changed)
{
    if (changed)
        pt_log_warn("reload: %s changed; it needs a restart and keeps its running value", key);
    return changed;
}

/*
 * Copies into nc, from the running configuration, every key that needs a
 * restart (SPEC 11): where the database and the lock are, what is listened
 * on, the API token, the storage settings, the trust store libcurl holds,
 * the idempotency timing the API copied at start, qr_timeout_s (codes
 * already shown were created with it), and which gateways exist
 * (the sync engine, the transport and the online path were built for
 * them).  Returns how many were named.
 */
static int keep_restart_keys(const struct pt_config *old, struct pt_config *nc,
                             struct pt_gw_config gw[PT_GW_MAX])
{
    int n = 0;
#define KEEP_STR(key, f)                                                                           \
    do {                                                                                           \
        n += keep_old(key, strcmp(old->f, nc->f) != 0);                                            \
        memcpy(nc->f, old->f, sizeof nc->f);                                                       \
    } while (0)
#define KEEP_NUM(key, f)                                                                           \
    do {                                                                                           \
        n += keep_old(key, old->f != nc->f);                                                       \
        nc->f = old->f;                                                                            \
    } while (0)
    KEEP_STR("data_dir", data_dir);
    KEEP_STR("listen", listen);
    KEEP_STR("notify_listen", notify_listen);
    KEEP_STR("api_token_file", api_token_file);
    KEEP_STR("tls.ca_file", ca_file);
    KEEP_NUM("storage.synchronous", synchronous_normal);
    KEEP_NUM("storage.wal_vfs", wal_vfs_off);
    KEEP_NUM("idempotency.ttl_s", idem_ttl_s);
    KEEP_NUM("idempotency.lock_timeout_s", idem_lock_timeout_s);
    /* Every code's deadline is its send plus this, and its create carried
     * the same expiry: one value for the whole run, not one for the codes
     * on screen and another for the next (SPEC 18). */
    KEEP_NUM("qr_timeout_s", qr_timeout_s);
#undef KEEP_STR
#undef KEEP_NUM
    for (int i = 0; i < pt_gateway_count(); i++) {
        const char *name = pt_metric_gateway_name(i);
        int was = pt_config_gateway_configured(old, name),
            is = pt_config_gateway_configured(nc, name);
        if (was == is)
            continue;
        char key[48];
        snprintf(key, sizeof key, "gateways.%s (%s)", name, was ? "removed" : "added");
        n += keep_old(key, 1);
        nc->gw[i] = old->gw[i];
        if (gw[i].name[0])
            pt_gw_config_free(&gw[i]);
        memset(&gw[i], 0, sizeof gw[i]);
    }
    return n;
}

/* How long a reload waits for the requests and sync steps in progress
 * (the first half while new ones still start, the second while they wait):
 * the main thread, which feeds the watchdog, is blocked meanwhile. */
#define RELOAD_WAIT_MS 4000

int pt_daemon_reload(struct pt_daemon *d, const struct pt_config *in, char *err, size_t errlen)
{
    struct pt_config *nc = malloc(sizeof *nc);
    struct pt_gw_config *gw = calloc(PT_GW_MAX, sizeof *gw);
    char token[256] = "";
    int rc = PT_ENOMEM;
    if (!nc || !gw) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    *nc = *in;
    /* Everything serve would refuse in the new files, before anything
     * changes: a refused file changes nothing. */
    rc = load_files(nc, token, sizeof token, gw, err, errlen);
    pt_zeroize(token, sizeof token);
    if (rc != PT_OK)
        goto out;
    int kept = keep_restart_keys(&d->cfg, nc, gw);
    /* The file passed the rule with its own lock_timeout_s; the running one
     * stays until a restart, and must still outlive a gateway call of the
     * new sync.request_timeout_ms. */
    char why[384];
    if (pt_config_lock_timeout_problem(nc, why, sizeof why)) {
        snprintf(err, errlen,
                 "idempotency.lock_timeout_s (its running value, kept until a restart): %s", why);
        rc = PT_ECONFIG;
        goto out;
    }

    int busy = 0;
    if (pt_gate_close(d->gate, RELOAD_WAIT_MS, &busy) != 0) {
        snprintf(err, errlen,
                 "%d request(s) or sync step(s) still in progress after %d s (a gateway that "
                 "answers slowly); send SIGHUP again",
                 busy, RELOAD_WAIT_MS / 1000);
        rc = PT_EAGAIN;
        goto out;
    }
    for (int i = 0; i < pt_gateway_count(); i++) {
        if (!gw[i].name[0])
            continue;
        /* The certificates downloaded so far (kept in data_dir), with the
         * gate closed: no download lands in the old keyring meanwhile. */
        if (gw[i].peer_keys)
            pt_peer_certs_load(d->cfg.data_dir, gw[i].name, gw[i].peer_keys, random_cb, NULL);
        if (strcmp(gw[i].endpoint, d->gw[i].endpoint) != 0)
            pt_sync_forget_reach(d->sync, gw[i].name); /* down at the old address */
    }
    d->cfg = *nc;
    for (int i = 0; i < pt_gateway_count(); i++) {
        if (!gw[i].name[0])
            continue;
        struct pt_gw_config t = d->gw[i];
        d->gw[i] = gw[i];
        gw[i] = t; /* the old keys, freed below, after the gate opened */
        pt_zeroize(&t, sizeof t);
    }
    pt_log_set_level(d->cfg.log_level);
    pt_gate_open(d->gate);
    wake_syncer(d); /* a new sync.interval_s or endpoint: look now */
    pt_log_info("reload: configuration reloaded (log_level, limits, offline limits, sync timing, "
                "gateway keys and endpoints)%s",
                kept ? "; the keys named above keep their running values until a restart" : "");
out:
    if (gw)
        for (int i = 0; i < pt_gateway_count(); i++)
            if (gw[i].name[0])
                pt_gw_config_free(&gw[i]);
    free(gw);
    if (nc)
        pt_zeroize(nc, sizeof *nc);
    free(nc);
    return rc;
}

/* ---- health, for the watchdog ---------------------------------------------------------------- */

#define PROBE_TIMEOUT_MS 2000

int pt_daemon_healthy(struct pt_daemon *d, int64_t stall_ms, char *why, size_t len)
{
    pthread_mutex_lock(&d->mu);
    int64_t stalled = d->syncer ? pt_syncer_stalled_ms(d->syncer, pt_host_mono_ms()) : 0;
    pthread_mutex_unlock(&d->mu);
    if (stalled > stall_ms) {
        snprintf(why, len, "the sync thread has made no progress for %lld s",
                 (long long)(stalled / 1000));
        return 0;
    }
    int probe = stall_ms / 4 < PROBE_TIMEOUT_MS ? (int)(stall_ms / 4) : PROBE_TIMEOUT_MS;
    if (probe < 250)
        probe = 250;
    int which = pt_api_probe(d->api, probe);
    if (which) {
        snprintf(why, len, "the HTTP listener %s does not answer GET /healthz/live within %d ms",
                 which == 1 ? d->cfg.listen : d->cfg.notify_listen, probe);
        return 0;
    }
    return 1;
}

int pt_daemon_status_line(struct pt_daemon *d, char *out, size_t len)
{
    struct pt_store_stats s;
    int rc = pt_store_stats(d->st, 0, &s);
    if (rc != PT_OK) {
        snprintf(out, len, "serving; storage: %s", pt_strerror(rc));
        return rc;
    }
    snprintf(out, len, "serving; %lld queued, %lld in progress, %lld in review",
             (long long)s.by_state[PT_STATE_INIT],
             (long long)(s.by_state[PT_STATE_PROCESSING] + s.by_state[PT_STATE_UNKNOWN] +
                         s.by_state[PT_STATE_PENDING]),
             (long long)s.review);
    return PT_OK;
}
