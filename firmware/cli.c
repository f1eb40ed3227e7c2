/*
 * cli.c - helpers shared by the subcommands (config options, errors, the
 * database, the running daemon's API).
 */
#include "cli.h"
#include "clock.h"
#include "host.h"
#include "pt_config.h"
#include "crypto.h"
#include "err.h"
#include "refund.h"
#include "linux.h"
#include "store.h"

#include <curl/curl.h>
#include <errno.h>
#include <sys/stat.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define DEFAULT_CONFIG "/etc/payterm/payterm.json"

/* syslog's priorities, as journald reads them from a line's "<N>". */
#define PRIO_ERR 3
#define PRIO_NOTICE 5

#if defined(__GNUC__)
__attribute__((format(printf, 3, 0)))
#endif
static void
say(int priority, const char *cmd, const char *fmt, va_list ap)
{
    char text[8192]; /* init lists every problem of a configuration */
    int n = snprintf(text, sizeof text, "payterm%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    if (n > 0 && (size_t)n < sizeof text)
        vsnprintf(text + n, sizeof text - (size_t)n, fmt, ap);
    pt_linux_say(priority, text);
}

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static void
usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say(PRIO_ERR, NULL, fmt, ap);
    va_end(ap);
}

int pt_cli_take_config(struct pt_cli_common *c, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    const char *file = NULL;
    if (strcmp(a, "-c") == 0 || strcmp(a, "--config") == 0) {
        if (*i + 1 >= argc) {
            usage_error("%s needs a file name", a);
            return -1;
        }
        file = argv[++*i];
    } else if (strncmp(a, "--config=", 9) == 0) {
        file = a + 9;
    } else {
        return 0;
    }
    if (c->nconfigs >= PT_CLI_MAX_CONFIGS) {
        usage_error("at most %d -c/--config files", PT_CLI_MAX_CONFIGS);
        return -1;
    }
    c->configs[c->nconfigs++] = file;
    return 1;
}

int pt_cli_read_config(const struct pt_cli_common *c, struct pt_config *cfg, char *err,
                       size_t errlen)
{
    const char *def = DEFAULT_CONFIG;
    const char *const *paths = c->configs;
    int n = c->nconfigs;
    if (n == 0 && access(def, F_OK) == 0) {
        paths = &def;
        n = 1;
    }
    return pt_config_load(paths, n, cfg, err, errlen) == PT_OK ? 0 : -1;
}

int pt_cli_load_config(const struct pt_cli_common *c, struct pt_config *cfg)
{
    char err[1024];
    if (pt_cli_read_config(c, cfg, err, sizeof err) != 0) {
        usage_error("%s", err);
        return -1;
    }
    return 0;
}

void pt_cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say(PRIO_ERR, cmd, fmt, ap);
    va_end(ap);
}

void pt_cli_notice(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say(PRIO_NOTICE, cmd, fmt, ap);
    va_end(ap);
}

/* Creates data_dir (mode 0700) when missing. */
int pt_cli_ensure_dir(const char *cmd, const char *dir)
{
    struct stat sb;
    if (stat(dir, &sb) == 0) {
        if (S_ISDIR(sb.st_mode))
            return 0;
        pt_cli_error(cmd, "data_dir %s exists but is not a directory", dir);
        return -1;
    }
    if (mkdir(dir, 0700) != 0) {
        pt_cli_error(cmd, "cannot create data_dir %s: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

int pt_cli_open_store(const char *cmd, const struct pt_config *cfg, struct pt_store **st)
{
    char path[PT_CFG_PATH_MAX + 16], err[768];
    pt_config_db_path(cfg, path, sizeof path);
    struct pt_store_options o;
    pt_config_store_options(cfg, path, &o);
    int rc = pt_store_open(&o, st, err, sizeof err);
    if (rc == PT_EIO && (pt_config_store_caps(cfg) & PT_STORE_CAP_SHARED) &&
        cfg->store_fallback_local) {
        /* A lane rebooted during an outage must reach serve (systemd runs
         * init first). */
        printf("store server not reachable (%s); this lane has store.fallback \"local\": "
               "payterm serve starts on its own store and migrates the server when it answers\n",
               err);
        return 1;
    }
    if (rc != PT_OK) {
        pt_cli_error(cmd, "%s", err);
        return -1;
    }
    return 0;
}

int pt_cli_open_configured(const char *cmd, const struct pt_cli_common *c, struct pt_config *cfg,
                           enum pt_cli_db mode, struct pt_store **st)
{
    return pt_cli_load_config(c, cfg) || pt_cli_open_existing(cmd, cfg, mode, st) ? -1 : 0;
}

int pt_cli_state(const char *cmd, const char *v, int refund, int *state)
{
    enum pt_state s;
    *state = -1;
    if (!v)
        return 0;
    if (pt_state_parse(v, &s) == PT_OK && (!refund || pt_refund_state_valid(s))) {
        *state = (int)s;
        return 0;
    }
    if (refund)
        pt_cli_error(cmd,
                     "--state: '%s' is not a refund state (INIT, PROCESSING, PENDING, UNKNOWN, "
                     "SUCCESS, FAILED)",
                     v);
    else
        pt_cli_error(cmd,
                     "--state: '%s' is not a state (INIT, PROCESSING, PENDING, UNKNOWN, SUCCESS, "
                     "FAILED, CANCELED)",
                     v);
    return -1;
}

int pt_cli_paging(const char *cmd, const char *limit_v, const char *after_v, const char *after_what,
                  long *limit, long long *after)
{
    char *end;
    *limit = limit_v ? strtol(limit_v, &end, 10) : 50;
    if (limit_v && (*end || *limit < 1 || *limit > 1000)) {
        pt_cli_error(cmd, "--limit: must be 1-1000 (got '%s')", limit_v);
        return -1;
    }
    *after = after_v ? strtoll(after_v, &end, 10) : 0;
    if (after_v && (*end || *after < 0)) {
        pt_cli_error(cmd, "--after: must be %s (got '%s')", after_what, after_v);
        return -1;
    }
    return 0;
}

int pt_cli_open_existing(const char *cmd, const struct pt_config *cfg, enum pt_cli_db mode,
                         struct pt_store **st)
{
    char path[PT_CFG_PATH_MAX + 16], err[1024];
    pt_config_db_path(cfg, path, sizeof path);
    *st = NULL;
    /* SQLite would say "unable to open database file"; the operator needs
     * the path, and to know that nothing was created in its place. */
    struct stat sb;
    if ((pt_config_store_caps(cfg) & PT_STORE_CAP_DATADIR_FILE) && stat(path, &sb) != 0) {
        pt_cli_error(cmd, "database %s: %s (data_dir %s; payterm init or payterm serve creates it)",
                     path, strerror(errno), cfg->data_dir);
        return -1;
    }
    struct pt_store_options o;
    pt_config_store_options(cfg, path, &o);
    o.readonly = mode != PT_CLI_DB_MAINTAIN;
    o.existing = mode == PT_CLI_DB_MAINTAIN;
    if (pt_store_open(&o, st, err, sizeof err) != PT_OK) {
        pt_cli_error(cmd, "%s", err);
        return -1;
    }
    int version = 0, latest = pt_store_schema_latest_of(*st);
    if (pt_store_schema_version(*st, &version) != PT_OK) {
        pt_cli_error(cmd, "database %s: cannot read its schema version: %s", path,
                     pt_store_errmsg(*st));
    } else if (version == 0) {
        pt_cli_error(cmd,
                     "%s is not a payterm database (schema version 0); payterm init "
                     "creates one",
                     path);
    } else if (version < latest && mode != PT_CLI_DB_COPY) {
        pt_cli_error(cmd,
                     "database %s has schema version %d, this payterm needs %d: run "
                     "payterm init (or start payterm serve) to migrate it",
                     path, version, latest);
    } else {
        return 0;
    }
    pt_store_close(*st);
    *st = NULL;
    return -1;
}

static int find(const char *const *list, const char *arg)
{
    for (int k = 0; list && list[k] && k < PT_CLI_MAX_OPTS; k++)
        if (strcmp(list[k], arg) == 0)
            return k;
    return -1;
}

int pt_cli_parse(const char *cmd, const char *help, int argc, char **argv, struct pt_cli_args *a)
{
    memset(&a->common, 0, sizeof a->common);
    memset(a->values, 0, sizeof a->values);
    memset(a->flag_set, 0, sizeof a->flag_set);
    a->npos = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(help, stdout);
            return 1;
        }
        int r = pt_cli_take_config(&a->common, argc, argv, &i);
        if (r < 0)
            return -1;
        if (r)
            continue;
        int k;
        if ((k = find(a->names, argv[i])) >= 0) {
            if (i + 1 >= argc) {
                pt_cli_error(cmd, "%s needs a value", argv[i]);
                return -1;
            }
            a->values[k] = argv[++i];
        } else if ((k = find(a->flags, argv[i])) >= 0) {
            a->flag_set[k] = 1;
        } else if (argv[i][0] != '-' && a->npos < a->maxpos && a->npos < 4) {
            a->pos[a->npos++] = argv[i];
        } else {
            pt_cli_error(cmd, "unexpected argument '%s' (see payterm %s --help)", argv[i], cmd);
            return -1;
        }
    }
    return 0;
}

/* ---- the running daemon's API ---------------------------------------------------- */

/* An API answer is a charge, a refund or an error: far below this. */
#define ANSWER_MAX (1024 * 1024)

static size_t on_body(char *p, size_t s, size_t n, void *u)
{
    struct pt_cli_answer *a = u;
    size_t add = s * n;
    if (a->len + add > ANSWER_MAX)
        return 0; /* curl ends the transfer with CURLE_WRITE_ERROR */
    char *b = realloc(a->body, a->len + add + 1);
    if (!b)
        return 0;
    memcpy(b + a->len, p, add);
    a->body = b;
    a->len += add;
    a->body[a->len] = '\0';
    return add;
}

static size_t on_header(char *p, size_t s, size_t n, void *u)
{
    struct pt_cli_answer *a = u;
    size_t len = s * n;
    if (len >= 12 && strncasecmp(p, "Retry-After:", 12) == 0)
        a->retry_after_s = atoi(p + 12);
    else if (len >= 26 && strncasecmp(p, "Idempotency-Replayed: true", 26) == 0)
        a->replayed = 1;
    return len;
}

/* "Authorization: Bearer <token>" from api_token_file, or "" when there is
 * none.  The caller wipes it. */
static int bearer(const char *cmd, const struct pt_config *cfg, char *out, size_t cap)
{
    out[0] = '\0';
    if (!cfg->api_token_file[0])
        return 0;
    char tok[256] = "";
    size_t n = 0;
    int rc = pt_secret_read_line(cfg->api_token_file, tok, sizeof tok, &n);
    if (rc == PT_ETOOBIG)
        pt_cli_error(cmd, "api_token_file %s: longer than %zu characters", cfg->api_token_file,
                     sizeof tok - 1);
    else if (rc != PT_OK)
        pt_cli_error(cmd, "api_token_file %s: cannot read: %s", cfg->api_token_file,
                     strerror(errno));
    if (rc == PT_OK)
        snprintf(out, cap, "Authorization: Bearer %s", tok);
    pt_zeroize(tok, sizeof tok);
    return rc == PT_OK ? 0 : -1;
}

int pt_cli_api(const char *cmd, const struct pt_config *cfg, const char *path, const char *key,
               const char *body, long timeout_ms, struct pt_cli_answer *a)
{
    memset(a, 0, sizeof *a);
    char url[512], auth[300], kh[300];
    snprintf(url, sizeof url, "http://%s%s", cfg->listen, path);
    if (bearer(cmd, cfg, auth, sizeof auth))
        return PT_CLI_API_ERROR;
    CURL *h = curl_easy_init();
    if (!h) {
        pt_cli_error(cmd, "cannot initialise libcurl");
        pt_zeroize(auth, sizeof auth);
        return PT_CLI_API_ERROR;
    }
    /* curl_slist_append copies the string: that copy holds the token too
     * and is wiped below before it is freed. */
    struct curl_slist *hdr = NULL;
    if (body && body[0])
        hdr = curl_slist_append(hdr, "Content-Type: application/json");
    if (auth[0])
        hdr = curl_slist_append(hdr, auth);
    if (key) {
        snprintf(kh, sizeof kh, "Idempotency-Key: %s", key);
        hdr = curl_slist_append(hdr, kh);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, a);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (body)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    CURLcode cc = curl_easy_perform(h);
    long sent = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
    curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &sent);
    for (struct curl_slist *l = hdr; l; l = l->next)
        pt_zeroize(l->data, strlen(l->data));
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    pt_zeroize(auth, sizeof auth);
    if (cc == CURLE_OK && a->status > 0) {
        if (!a->body)
            a->body = calloc(1, 1);
        if (a->body)
            return PT_CLI_API_ANSWER;
        pt_cli_error(cmd, "out of memory");
        return PT_CLI_API_ERROR;
    }
    free(a->body);
    a->body = NULL;
    a->len = 0;
    /* Nothing reached the daemon when not one byte of the request was
     * written (connection refused, or never made); after that, it may have
     * been taken without its answer arriving, and only the caller knows
     * whether a retry is safe. */
    if (sent == 0) {
        pt_cli_error(cmd, "the daemon does not answer at %s (%s): is payterm serve running?",
                     cfg->listen, curl_easy_strerror(cc));
        return PT_CLI_API_NOT_SENT;
    }
    pt_cli_error(cmd, "no answer from the daemon at %s within %ld ms (%s)", cfg->listen, timeout_ms,
                 curl_easy_strerror(cc));
    return PT_CLI_API_NO_ANSWER;
}

void pt_cli_answer_free(struct pt_cli_answer *a)
{
    if (!a)
        return;
    free(a->body);
    a->body = NULL;
    a->len = 0;
}

int64_t pt_cli_now(struct pt_store *st)
{
    struct pt_clock *c = NULL;
    if (pt_clock_open(pt_host(), st, PT_BUILD_EPOCH_MS, 0, &c) != PT_OK)
        return pt_host_now_ms();
    int64_t now = pt_clock_now(c);
    pt_clock_free(c);
    return now;
}
