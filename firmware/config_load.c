/*
 * config_load.c - loading and validating payterm's JSON configuration
 * (see config_load.h; the defaults and lookups are core/config.c).
 *
 * The files are checked with pt_json_check (one meaning, integers only) and
 * parsed with cJSON, relative paths are resolved against each
 * file's own directory, the trees are merged (later files win), and then the
 * merged tree is walked section by section.  Each section lists the keys it
 * knows; anything else is an error that names the full key.
 */
#include "config_load.h"
#include "err.h"
#include "host.h"
#include "json.h"
#include "money.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONFIG_FILE_MAX (256 * 1024)

/* ---- error reporting ---------------------------------------------------- */

struct ctx {
    char *err;
    size_t errlen;
    const char *source; /* file name(s) for messages */
};

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int
fail(struct ctx *c, const char *key, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errlen, "config %s: key '%s': %s", c->source, key, msg);
    return PT_ECONFIG;
}

static void join(char *out, size_t cap, const char *prefix, const char *name)
{
    if (prefix && *prefix)
        snprintf(out, cap, "%s.%s", prefix, name);
    else
        snprintf(out, cap, "%s", name);
}

/* Every member of obj must be one of the NULL-terminated names. */
static int check_known(struct ctx *c, const cJSON *obj, const char *prefix,
                       const char *const *names)
{
    for (const cJSON *m = obj->child; m; m = m->next) {
        int ok = 0;
        for (const char *const *n = names; *n; n++)
            ok |= strcmp(m->string, *n) == 0;
        if (!ok) {
            char key[256];
            join(key, sizeof key, prefix, m->string);
            return fail(c, key, "unknown key (check the spelling; see the README for the keys)");
        }
    }
    return PT_OK;
}

static int want_object(struct ctx *c, const cJSON *v, const char *key)
{
    return cJSON_IsObject(v) ? PT_OK : fail(c, key, "must be an object");
}

/* Reads an optional string member; null leaves dst empty when allow_null. */
static int get_string(struct ctx *c, const cJSON *obj, const char *prefix, const char *name,
                      char *dst, size_t cap, int allow_null)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    char key[256];
    join(key, sizeof key, prefix, name);
    if (!v)
        return PT_OK;
    if (cJSON_IsNull(v) && allow_null) {
        dst[0] = '\0';
        return PT_OK;
    }
    if (!cJSON_IsString(v))
        return fail(c, key, allow_null ? "must be a string or null" : "must be a string");
    size_t n = strlen(v->valuestring);
    if (n == 0)
        return fail(c, key, "must not be empty");
    if (n >= cap)
        return fail(c, key, "too long (at most %zu characters)", cap - 1);
    memcpy(dst, v->valuestring, n + 1);
    return PT_OK;
}

static int get_int(struct ctx *c, const cJSON *obj, const char *prefix, const char *name,
                   int64_t *dst, int64_t min, int64_t max)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    char key[256];
    join(key, sizeof key, prefix, name);
    if (!v)
        return PT_OK;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return fail(c, key, "must be an integer between %lld and %lld", (long long)min,
                    (long long)max);
    double d = v->valuedouble;
    if (d < (double)min || d > (double)max)
        return fail(c, key, "must be between %lld and %lld (got %.0f)", (long long)min,
                    (long long)max, d);
    *dst = (int64_t)d;
    return PT_OK;
}

/* ---- value shapes -------------------------------------------------------- */

static int check_listen(struct ctx *c, const char *key, const char *v)
{
    const char *colon = strrchr(v, ':');
    if (!colon || colon == v)
        return fail(c, key, "must be HOST:PORT, e.g. 127.0.0.1:8080 (got \"%s\")", v);
    char *end;
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    if (*end || errno || port < 1 || port > 65535)
        return fail(c, key, "port must be 1-65535 (got \"%s\")", colon + 1);
    return PT_OK;
}

static int check_url(struct ctx *c, const char *key, const char *v, int https_only)
{
    if (strncmp(v, "https://", 8) == 0 && v[8])
        return PT_OK;
    if (!https_only && strncmp(v, "http://", 7) == 0 && v[7])
        return PT_OK;
    return fail(c, key,
                https_only ? "must be an https:// URL (TLS is always on)"
                           : "must be an http:// or https:// URL");
}

/* ---- sections ------------------------------------------------------------ */

static int load_idempotency(struct ctx *c, const cJSON *o, struct pt_config *cfg)
{
    static const char *const known[] = {"ttl_s", "lock_timeout_s", NULL};
    int rc;
    if ((rc = want_object(c, o, "idempotency")) || (rc = check_known(c, o, "idempotency", known)))
        return rc;
    if ((rc = get_int(c, o, "idempotency", "ttl_s", &cfg->idem_ttl_s, 60, 30LL * 86400)) ||
        (rc = get_int(c, o, "idempotency", "lock_timeout_s", &cfg->idem_lock_timeout_s, 1, 3600)))
        return rc;
    return PT_OK;
}

static int load_offline(struct ctx *c, const cJSON *o, struct pt_config *cfg)
{
    static const char *const known[] = {"limits", "max_count", "max_age_s", NULL};
    static const char *const limit_keys[] = {"max_amount", "max_total", NULL};
    int rc;
    if ((rc = want_object(c, o, "offline")) || (rc = check_known(c, o, "offline", known)))
        return rc;
    if ((rc = get_int(c, o, "offline", "max_count", &cfg->offline_max_count, 0, 1000000)))
        return rc;

    const cJSON *limits = cJSON_GetObjectItemCaseSensitive(o, "limits");
    if (limits) {
        if ((rc = want_object(c, limits, "offline.limits")))
            return rc;
        cfg->n_offline_limits = 0;
        for (const cJSON *m = limits->child; m; m = m->next) {
            char key[256];
            join(key, sizeof key, "offline.limits", m->string);
            if (!pt_money_currency_valid(m->string))
                return fail(c, key, "not an ISO 4217 currency code (three upper-case letters)");
            if (cfg->n_offline_limits >= PT_CFG_MAX_CURRENCIES)
                return fail(c, key, "too many currencies (at most %d)", PT_CFG_MAX_CURRENCIES);
            if ((rc = want_object(c, m, key)) || (rc = check_known(c, m, key, limit_keys)))
                return rc;
            struct pt_cfg_offline_limit *l = &cfg->offline_limits[cfg->n_offline_limits];
            memset(l, 0, sizeof *l);
            memcpy(l->currency, m->string, 4);
            if (!cJSON_GetObjectItemCaseSensitive(m, "max_amount") ||
                !cJSON_GetObjectItemCaseSensitive(m, "max_total"))
                return fail(c, key, "needs both max_amount and max_total");
            if ((rc = get_int(c, m, key, "max_amount", &l->max_amount, 1, PT_MONEY_MAX)) ||
                (rc = get_int(c, m, key, "max_total", &l->max_total, 1, PT_MONEY_MAX)))
                return rc;
            cfg->n_offline_limits++;
        }
    }

    const cJSON *ages = cJSON_GetObjectItemCaseSensitive(o, "max_age_s");
    if (ages) {
        if ((rc = want_object(c, ages, "offline.max_age_s")))
            return rc;
        for (const cJSON *m = ages->child; m; m = m->next) {
            char key[256];
            join(key, sizeof key, "offline.max_age_s", m->string);
            const char *dot = strchr(m->string, '.');
            if (!dot || !pt_gateway_method_named(m->string, (size_t)(dot - m->string), dot + 1)) {
                char pairs[256] = "";
                pt_gateway_method_pairs(pairs, sizeof pairs);
                return fail(c, key, "must be <gateway>.<method>: %s", pairs);
            }
            int64_t age = 0;
            struct pt_cfg_offline_age *a = NULL;
            for (int i = 0; i < cfg->n_offline_ages; i++) {
                const struct pt_cfg_offline_age *e = &cfg->offline_ages[i];
                if (strlen(e->gateway) == (size_t)(dot - m->string) &&
                    strncmp(e->gateway, m->string, (size_t)(dot - m->string)) == 0 &&
                    strcmp(e->method, dot + 1) == 0)
                    a = &cfg->offline_ages[i];
            }
            if (!a) {
                if (cfg->n_offline_ages >= PT_CFG_MAX_AGES)
                    return fail(c, key, "too many entries");
                a = &cfg->offline_ages[cfg->n_offline_ages++];
            }
            if (!cJSON_IsNumber(m))
                return fail(c, key, "must be an integer number of seconds");
            if ((rc = get_int(c, ages, "offline.max_age_s", m->string, &age, 1, 30LL * 86400)))
                return rc;
            snprintf(a->gateway, sizeof a->gateway, "%.*s", (int)(dot - m->string), m->string);
            snprintf(a->method, sizeof a->method, "%s", dot + 1);
            a->max_age_s = age;
        }
    }
    return PT_OK;
}

static int load_sync(struct ctx *c, const cJSON *o, struct pt_config *cfg)
{
    static const char *const known[] = {
        "interval_s",        "max_attempts",       "backoff_base_ms", "backoff_max_ms",
        "resolve_timeout_s", "request_timeout_ms", "probe_idle_s",    NULL};
    int rc;
    if ((rc = want_object(c, o, "sync")) || (rc = check_known(c, o, "sync", known)))
        return rc;
    if ((rc = get_int(c, o, "sync", "interval_s", &cfg->sync_interval_s, 1, 86400)) ||
        (rc = get_int(c, o, "sync", "max_attempts", &cfg->sync_max_attempts, 1, 100)) ||
        (rc = get_int(c, o, "sync", "backoff_base_ms", &cfg->sync_backoff_base_ms, 10, 3600000)) ||
        (rc = get_int(c, o, "sync", "backoff_max_ms", &cfg->sync_backoff_max_ms, 10, 86400000)) ||
        (rc = get_int(c, o, "sync", "resolve_timeout_s", &cfg->sync_resolve_timeout_s, 1,
                      30LL * 86400)) ||
        (rc = get_int(c, o, "sync", "request_timeout_ms", &cfg->sync_request_timeout_ms, 100,
                      600000)) ||
        (rc = get_int(c, o, "sync", "probe_idle_s", &cfg->sync_probe_idle_s, 1, 86400)))
        return rc;
    if (cfg->sync_backoff_max_ms < cfg->sync_backoff_base_ms)
        return fail(c, "sync.backoff_max_ms", "must not be smaller than sync.backoff_base_ms");
    return PT_OK;
}

/* reconcile: {"after": "HH:MM", "daily": true} (SPEC 19). */
static int load_reconcile(struct ctx *c, const cJSON *o, struct pt_config *cfg)
{
    static const char *const known[] = {"after", "daily", NULL};
    int rc;
    if ((rc = want_object(c, o, "reconcile")) || (rc = check_known(c, o, "reconcile", known)))
        return rc;
    const cJSON *after = cJSON_GetObjectItemCaseSensitive(o, "after");
    if (after) {
        const char *t = cJSON_IsString(after) ? after->valuestring : "";
        int ok = strlen(t) == 5 && t[2] == ':' && isdigit((unsigned char)t[0]) &&
                 isdigit((unsigned char)t[1]) && isdigit((unsigned char)t[3]) &&
                 isdigit((unsigned char)t[4]);
        int h = ok ? (t[0] - '0') * 10 + (t[1] - '0') : 0,
            m = ok ? (t[3] - '0') * 10 + (t[4] - '0') : 0;
        if (!ok || h > 23 || m > 59)
            return fail(c, "reconcile.after",
                        "must be a time of day \"HH:MM\", 00:00 to 23:59, in the gateway's "
                        "bill time zone (e.g. \"10:30\")");
        cfg->reconcile_after_min = h * 60 + m;
    }
    const cJSON *daily = cJSON_GetObjectItemCaseSensitive(o, "daily");
    if (daily) {
        if (!cJSON_IsBool(daily))
            return fail(c, "reconcile.daily", "must be true or false");
        cfg->reconcile_daily = cJSON_IsTrue(daily);
    }
    return PT_OK;
}

/* Reads a required string of a configured gateway. */
/* A list of ISO 4217 codes (a gateway's currencies). */
static int get_currencies(struct ctx *c, const cJSON *v, const char *key, struct pt_gw_settings *g)
{
    g->ncurrencies = 0;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 1 ||
        cJSON_GetArraySize(v) > PT_GW_MAX_CURRENCIES)
        return fail(c, key, "must be a list of 1 to %d ISO 4217 codes, e.g. [\"CNY\", \"USD\"]",
                    PT_GW_MAX_CURRENCIES);
    for (const cJSON *e = v->child; e; e = e->next) {
        if (!cJSON_IsString(e) || !pt_money_currency_valid(e->valuestring))
            return fail(c, key,
                        "every entry must be an upper-case ISO 4217 code payterm "
                        "knows, such as CNY or USD");
        memcpy(g->currencies[g->ncurrencies++], e->valuestring, 4);
    }
    return PT_OK;
}

/* The list form of a peer key file (WeChat platform keys, SPEC 10):
 * [{"serial": hex, "file": path}, ...], packed into field (cap bytes) as
 * pt_gw_keyfile_at reads it; the files are read by the gateway's load(),
 * which names the entry of a file it cannot use. */
static int get_keyfiles(struct ctx *c, const cJSON *v, const char *key, char *field, size_t cap,
                        struct pt_gw_settings *g)
{
    static const char *const known[] = {"serial", "file", NULL};
    int n = cJSON_GetArraySize(v), i = 0, rc;
    size_t used = 0;
    if (n < 1 || n > PT_GW_MAX_PEER_KEYS)
        return fail(c, key,
                    "must be a file path, or a list of 1 to %d {\"serial\": ..., \"file\": ...}",
                    PT_GW_MAX_PEER_KEYS);
    field[0] = '\0';
    for (const cJSON *e = v->child; e; e = e->next, i++) {
        char p[300], k[320];
        struct pt_gw_keyfile f = {.serial = "", .file = ""};
        snprintf(p, sizeof p, "%s[%d]", key, i);
        if ((rc = want_object(c, e, p)) || (rc = check_known(c, e, p, known)) ||
            (rc = get_string(c, e, p, "serial", f.serial, sizeof f.serial, 0)) ||
            (rc = get_string(c, e, p, "file", f.file, sizeof f.file, 0)))
            return rc;
        join(k, sizeof k, p, f.serial[0] ? "file" : "serial");
        if (!f.serial[0] || !f.file[0])
            return fail(c, k, "required in every entry");
        join(k, sizeof k, p, "file");
        if (strpbrk(f.file, "\t\n"))
            return fail(c, k, "a path with a tab or a line break is not supported");
        join(k, sizeof k, p, "serial");
        if (strspn(f.serial, "0123456789abcdefABCDEF") != strlen(f.serial))
            return fail(c, k,
                        "must be the certificate serial in hex digits, as the gateway shows it");
        for (int j = 0; j < i; j++) {
            struct pt_gw_keyfile o;
            if (pt_gw_keyfile_at(field, j, &o) == PT_OK && strcasecmp(o.serial, f.serial) == 0)
                return fail(c, k, "%s is listed twice", f.serial);
        }
        int w = snprintf(field + used, cap - used, "%s\t%s\n", f.serial, f.file);
        if (w < 0 || (size_t)w >= cap - used)
            return fail(c, key, "the serials and paths of the list take more than %zu bytes",
                        cap - 1);
        used += (size_t)w;
    }
    g->npeer_files = n;
    return PT_OK;
}

/* "+07:00", "-03:30": a UTC offset between -12:00 and +14:00 (the zones
 * that exist), into minutes east of UTC. */
static int get_utc_offset(struct ctx *c, const cJSON *v, const char *key, int *out)
{
    const char *s = cJSON_IsString(v) ? v->valuestring : "";
    int ok = strlen(s) == 6 && (s[0] == '+' || s[0] == '-') && s[3] == ':' &&
             strspn(s + 1, "0123456789") == 2 && strspn(s + 4, "0123456789") == 2;
    int h = ok ? (s[1] - '0') * 10 + (s[2] - '0') : 0,
        m = ok ? (s[4] - '0') * 10 + (s[5] - '0') : 0;
    int min = (s[0] == '-' ? -1 : 1) * (h * 60 + m);
    if (!ok || m > 59 || min < -12 * 60 || min > 14 * 60)
        return fail(c, key,
                    "must be a UTC offset from \"-12:00\" to \"+14:00\", such as \"+07:00\"");
    *out = min;
    return PT_OK;
}

/* One key of a gateway's section, by its table entry (gateway.h). */
static int get_gateway_key(struct ctx *c, const cJSON *sec, const char *p,
                           const struct pt_gw_key *k, struct pt_gw_settings *g)
{
    char key[256];
    join(key, sizeof key, p, k->name);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(sec, k->name);
    char *field = (char *)g + k->offset;
    int rc = PT_OK;
    if (!v || cJSON_IsNull(v)) {
        if (k->required && !(k->kind == PT_GWK_HTTPS && field[0]))
            return fail(c, key, "required when the gateway is configured");
        return PT_OK;
    }
    switch (k->kind) {
    case PT_GWK_SECONDS:
        return get_int(c, sec, p, k->name, (int64_t *)(void *)field, k->min, k->max);
    case PT_GWK_CURRENCIES:
        return get_currencies(c, v, key, g);
    case PT_GWK_UTC_OFFSET:
        return get_utc_offset(c, v, key, (int *)(void *)field);
    case PT_GWK_CURRENCY:
        if (!cJSON_IsString(v) || !pt_money_currency_valid(v->valuestring))
            return fail(c, key, "must be an upper-case ISO 4217 code such as USD");
        memcpy(field, v->valuestring, 4);
        return PT_OK;
    case PT_GWK_KEYFILES:
        if (cJSON_IsArray(v))
            return get_keyfiles(c, v, key, field, k->size, g);
        if (!cJSON_IsString(v))
            return fail(c, key,
                        "must be a file path, or a list of {\"serial\": ..., \"file\": ...}");
        rc = get_string(c, sec, p, k->name, field, k->size, !k->required);
        break;
    default:
        rc = get_string(c, sec, p, k->name, field, k->size, !k->required);
    }
    if (rc == PT_OK && field[0] && (k->kind == PT_GWK_HTTPS || k->kind == PT_GWK_URL))
        rc = check_url(c, key, field, k->kind == PT_GWK_HTTPS);
    return rc;
}

/* gateways.<name>: each key as the gateway's table says. */
static int load_gateway(struct ctx *c, const cJSON *sec, const struct pt_gateway *gw,
                        struct pt_gw_settings *g)
{
    char p[64];
    const char *names[24];
    int n = 0;
    snprintf(p, sizeof p, "gateways.%s", gw->name);
    for (const struct pt_gw_key *k = gw->config_keys; k->name && n < 23; k++)
        names[n++] = k->name;
    names[n] = NULL;
    int rc = want_object(c, sec, p);
    if (rc || (rc = check_known(c, sec, p, names)))
        return rc;
    memset(g, 0, sizeof *g);
    snprintf(g->endpoint, sizeof g->endpoint, "%s", gw->default_endpoint);
    g->barcode_timeout_s = gw->default_barcode_timeout_s;
    g->utc_offset_min = gw->default_utc_offset_min;
    for (const struct pt_gw_key *k = gw->config_keys; k->name; k++)
        if ((rc = get_gateway_key(c, sec, p, k, g)))
            return rc;
    g->configured = 1;
    return PT_OK;
}

static int load_gateways(struct ctx *c, const cJSON *o, struct pt_config *cfg)
{
    const char *known[PT_GW_MAX + 1];
    int n = pt_gateway_count();
    for (int i = 0; i < n; i++)
        known[i] = pt_gateway_at(i)->name;
    known[n] = NULL;
    int rc;
    if ((rc = want_object(c, o, "gateways")) || (rc = check_known(c, o, "gateways", known)))
        return rc;
    for (int i = 0; i < n; i++) {
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(o, pt_gateway_at(i)->name);
        if (g && !cJSON_IsNull(g) && (rc = load_gateway(c, g, pt_gateway_at(i), &cfg->gw[i])))
            return rc;
    }
    return PT_OK;
}

/*
 * One entry of cors_origins: an origin as a browser serializes it in its
 * Origin header (RFC 6454) - "http" or "https", "://", a lower-case host
 * name, IPv4 address or [IPv6] address, and a port only when it is not the
 * scheme's default - so that the header can be compared byte for byte.
 * Returns NULL when s is one, else what is wrong with it.
 */
static const char *origin_problem(const char *s)
{
    const char *host;
    int https = 0;
    if (strncmp(s, "http://", 7) == 0)
        host = s + 7;
    else if (strncmp(s, "https://", 8) == 0)
        host = s + 8, https = 1;
    else
        return "must start with http:// or https:// (an origin, e.g. \"http://kiosk.local:8000\")";
    const char *p = host;
    if (*p == '[') {
        for (p++; *p && *p != ']'; p++)
            if (!strchr("0123456789abcdef:.", *p))
                return "an IPv6 host is lower-case hex digits and colons in brackets";
        if (*p != ']' || p == host + 1)
            return "an IPv6 host needs its closing bracket";
        p++;
    } else {
        for (; *p && *p != ':' && *p != '/'; p++) {
            if (*p >= 'A' && *p <= 'Z')
                return "the host must be lower case, as browsers send it";
            if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
                return "the host may hold only a-z, 0-9, '-' and '.'";
        }
        if (p == host)
            return "the host is missing";
    }
    if (*p == ':') {
        const char *d = ++p;
        long port = 0;
        for (; *p >= '0' && *p <= '9' && p - d < 6; p++)
            port = port * 10 + (*p - '0');
        if (p == d || *d == '0' || port > 65535 || (*p && *p != '/'))
            return "the port must be a number from 1 to 65535";
        if (port == (https ? 443 : 80))
            return "leave the scheme's default port out: browsers do not send it";
    }
    if (*p == '/')
        return "an origin has no path, not even a trailing '/'";
    if (*p)
        return "unexpected characters after the host";
    return NULL;
}

/* cors_origins: a list of distinct origins. */
static int get_origins(struct ctx *c, const cJSON *v, struct pt_config *cfg)
{
    cfg->n_cors_origins = 0;
    if (cJSON_IsNull(v))
        return PT_OK;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > PT_CFG_MAX_ORIGINS)
        return fail(c, "cors_origins",
                    "must be a list of at most %d origins, e.g. [\"http://kiosk.local:8000\"]",
                    PT_CFG_MAX_ORIGINS);
    int i = 0;
    for (const cJSON *e = v->child; e; e = e->next, i++) {
        char key[32];
        snprintf(key, sizeof key, "cors_origins[%d]", i);
        if (!cJSON_IsString(e))
            return fail(c, key, "must be a string, an origin such as \"http://kiosk.local:8000\"");
        if (strlen(e->valuestring) >= PT_CFG_ORIGIN_MAX)
            return fail(c, key, "is longer than %d bytes", PT_CFG_ORIGIN_MAX - 1);
        const char *why = origin_problem(e->valuestring);
        if (why)
            return fail(c, key, "\"%.80s\": %s", e->valuestring, why);
        for (int k = 0; k < cfg->n_cors_origins; k++)
            if (strcmp(cfg->cors_origins[k], e->valuestring) == 0)
                return fail(c, key, "\"%.80s\" is listed twice", e->valuestring);
        snprintf(cfg->cors_origins[cfg->n_cors_origins++], PT_CFG_ORIGIN_MAX, "%s", e->valuestring);
    }
    return PT_OK;
}

/* A DSN that carries its password would put a secret in the config file:
 * postgresql://user:secret@host, or ...?password=... / password=... */
static int dsn_has_password(const char *dsn)
{
    const char *scheme = strstr(dsn, "://");
    if (scheme) {
        const char *auth = scheme + 3, *at = strchr(auth, '@'), *slash = strchr(auth, '/');
        if (at && (!slash || at < slash)) {
            const char *colon = memchr(auth, ':', (size_t)(at - auth));
            if (colon)
                return 1;
        }
    }
    return strstr(dsn, "password=") != NULL;
}

static int load_store(struct ctx *c, const cJSON *v, struct pt_config *cfg)
{
    static const char *const k[] = {"backend", "dsn", "password_file", "lane_id", "fallback", NULL};
    char backend[16] = "", fallback[16] = "";
    int rc;
    if ((rc = want_object(c, v, "store")) || (rc = check_known(c, v, "store", k)) ||
        (rc = get_string(c, v, "store", "backend", backend, sizeof backend, 0)) ||
        (rc = get_string(c, v, "store", "dsn", cfg->store_dsn, sizeof cfg->store_dsn, 0)) ||
        (rc = get_string(c, v, "store", "password_file", cfg->store_password_file,
                         sizeof cfg->store_password_file, 0)) ||
        (rc = get_string(c, v, "store", "lane_id", cfg->lane_id, sizeof cfg->lane_id, 0)) ||
        (rc = get_string(c, v, "store", "fallback", fallback, sizeof fallback, 0)))
        return rc;
    if (fallback[0] && strcmp(fallback, "local") && strcmp(fallback, "none"))
        return fail(c, "store.fallback", "must be \"local\" or \"none\" (got \"%s\")", fallback);
    cfg->store_fallback_local = strcmp(fallback, "local") == 0;
    if (backend[0] && strcmp(backend, "sqlite") && strcmp(backend, "postgresql"))
        return fail(c, "store.backend", "must be \"sqlite\" or \"postgresql\" (got \"%s\")",
                    backend);
    cfg->store_postgresql = strcmp(backend, "postgresql") == 0;
    for (const char *p = cfg->lane_id; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '.' || *p == '-'))
            return fail(c, "store.lane_id", "only letters, digits, '_', '.' and '-' (got \"%s\")",
                        cfg->lane_id);
    if (!cfg->store_postgresql) {
        if (cfg->store_dsn[0] || cfg->store_password_file[0])
            return fail(c, "store.dsn", "only with store.backend \"postgresql\"");
        if (cfg->store_fallback_local)
            return fail(c, "store.fallback",
                        "only with store.backend \"postgresql\" (SQLite is the local store)");
        return PT_OK;
    }
    if (!cfg->store_dsn[0])
        return fail(c, "store.dsn", "required with store.backend \"postgresql\"");
    if (strncmp(cfg->store_dsn, "postgresql://", 13) && strncmp(cfg->store_dsn, "postgres://", 11))
        return fail(c, "store.dsn", "must be a postgresql:// URI");
    if (dsn_has_password(cfg->store_dsn))
        return fail(c, "store.dsn",
                    "holds a password: put it in the file named by store.password_file (0600)");
    if (!cfg->lane_id[0])
        return fail(c, "store.lane_id",
                    "required with store.backend \"postgresql\": each lane's daemon names itself");
    return PT_OK;
}

static int load_tree(struct ctx *c, const cJSON *root, struct pt_config *cfg)
{
    static const char *const known[] = {"data_dir",
                                        "listen",
                                        "notify_listen",
                                        "api_token_file",
                                        "log_level",
                                        "storage",
                                        "idempotency",
                                        "limits",
                                        "offline",
                                        "sync",
                                        "tls",
                                        "gateways",
                                        "cors_origins",
                                        "store",
                                        "log",
                                        "qr_timeout_s",
                                        "reconcile",
                                        "retention_days",
                                        NULL};
    int rc;
    if (!cJSON_IsObject(root))
        return fail(c, "(top level)", "the file must hold one JSON object");
    if ((rc = check_known(c, root, "", known)))
        return rc;
    char level[16] = "";
    if ((rc = get_string(c, root, "", "data_dir", cfg->data_dir, sizeof cfg->data_dir, 0)) ||
        (rc = get_string(c, root, "", "listen", cfg->listen, sizeof cfg->listen, 0)) ||
        (rc = get_string(c, root, "", "notify_listen", cfg->notify_listen,
                         sizeof cfg->notify_listen, 1)) ||
        (rc = get_string(c, root, "", "api_token_file", cfg->api_token_file,
                         sizeof cfg->api_token_file, 1)) ||
        (rc = get_string(c, root, "", "log_level", level, sizeof level, 0)))
        return rc;
    if ((rc = check_listen(c, "listen", cfg->listen)))
        return rc;
    if (cfg->notify_listen[0] && (rc = check_listen(c, "notify_listen", cfg->notify_listen)))
        return rc;
    if (level[0] && pt_log_level_parse(level, &cfg->log_level) != 0)
        return fail(c, "log_level", "must be one of error, warn, info, debug (got \"%s\")", level);
    /* A minute at least (WeChat Pay moves an earlier time_expire to a minute
     * after the order; Alipay's timeout_express starts at 1m), a day at
     * most. */
    if ((rc = get_int(c, root, "", "qr_timeout_s", &cfg->qr_timeout_s, 60, 86400)))
        return rc;
    /* A day at least (tests), a century at most. */
    if ((rc = get_int(c, root, "", "retention_days", &cfg->retention_days, 1, 36500)))
        return rc;

    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "storage"))) {
        static const char *const k[] = {"synchronous", "wal_vfs", NULL};
        char sync[16] = "";
        if ((rc = want_object(c, v, "storage")) || (rc = check_known(c, v, "storage", k)) ||
            (rc = get_string(c, v, "storage", "synchronous", sync, sizeof sync, 0)))
            return rc;
        if (sync[0] && strcmp(sync, "FULL") && strcmp(sync, "NORMAL"))
            return fail(c, "storage.synchronous", "must be \"FULL\" or \"NORMAL\" (got \"%s\")",
                        sync);
        cfg->synchronous_normal = strcmp(sync, "NORMAL") == 0;
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(v, "wal_vfs");
        if (w && !cJSON_IsBool(w))
            return fail(c, "storage.wal_vfs", "must be true or false");
        cfg->wal_vfs_off = w && cJSON_IsFalse(w);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "store")) && (rc = load_store(c, v, cfg)))
        return rc;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "idempotency")) &&
        (rc = load_idempotency(c, v, cfg)))
        return rc;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "limits"))) {
        static const char *const k[] = {"max_amount", NULL};
        if ((rc = want_object(c, v, "limits")) || (rc = check_known(c, v, "limits", k)) ||
            (rc = get_int(c, v, "limits", "max_amount", &cfg->max_amount, 1, PT_MONEY_MAX)))
            return rc;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "offline")) && (rc = load_offline(c, v, cfg)))
        return rc;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "sync")) && (rc = load_sync(c, v, cfg)))
        return rc;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "reconcile")) &&
        (rc = load_reconcile(c, v, cfg)))
        return rc;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "log"))) {
        static const char *const k[] = {"max_bytes", NULL};
        if ((rc = want_object(c, v, "log")) || (rc = check_known(c, v, "log", k)) ||
            (rc = get_int(c, v, "log", "max_bytes", &cfg->log_max_bytes, 0, 1LL << 40)))
            return rc;
        if (cfg->log_max_bytes && cfg->log_max_bytes < PT_CONFIG_LOG_MIN_BYTES)
            return fail(c, "log.max_bytes", "must be 0 (no limit) or at least %d (got %lld)",
                        PT_CONFIG_LOG_MIN_BYTES, (long long)cfg->log_max_bytes);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "tls"))) {
        static const char *const k[] = {"ca_file", NULL};
        if ((rc = want_object(c, v, "tls")) || (rc = check_known(c, v, "tls", k)) ||
            (rc = get_string(c, v, "tls", "ca_file", cfg->ca_file, sizeof cfg->ca_file, 0)))
            return rc;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "gateways")) && (rc = load_gateways(c, v, cfg)))
        return rc;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "cors_origins")) &&
        (rc = get_origins(c, v, cfg)))
        return rc;
    /* Keys of two sections, so checked once both are read (from any file,
     * defaults included). */
    char why[384];
    if (pt_config_lock_timeout_problem(cfg, why, sizeof why))
        return fail(c, "idempotency.lock_timeout_s", "%s", why);
    return PT_OK;
}

/* ---- files, paths, merging ------------------------------------------------ */

static char *read_file(const char *path, size_t *len, char *err, size_t errlen)
{
    char why[160];
    char *text =
        pt_host_read_file(path, CONFIG_FILE_MAX, "larger than 256 KiB", len, why, sizeof why);
    if (!text)
        snprintf(err, errlen, "config %s: %s", path, why);
    return text;
}

/* Makes every relative "*_file" / "data_dir" string absolute against dir,
 * and every "file" of an object in a list ([{"serial","file"}]). */
static int resolve_paths(cJSON *node, const char *dir)
{
    for (cJSON *m = node->child; m; m = m->next) {
        if (cJSON_IsObject(m) || cJSON_IsArray(m)) {
            if (resolve_paths(m, dir))
                return -1;
            continue;
        }
        if (!cJSON_IsString(m) || !m->string || m->valuestring[0] == '/' || !m->valuestring[0])
            continue;
        size_t nl = strlen(m->string);
        int is_path = strcmp(m->string, "data_dir") == 0 || strcmp(m->string, "file") == 0 ||
                      (nl > 5 && strcmp(m->string + nl - 5, "_file") == 0);
        if (!is_path)
            continue;
        char full[PT_CFG_PATH_MAX * 2];
        snprintf(full, sizeof full, "%s/%s", dir, m->valuestring);
        if (!cJSON_SetValuestring(m, full))
            return -1;
    }
    return 0;
}

/* Deep merge: members of src replace or extend those of dst (objects merge). */
static int merge(cJSON *dst, cJSON *src)
{
    cJSON *m = src->child;
    while (m) {
        cJSON *next = m->next;
        cJSON *have = cJSON_GetObjectItemCaseSensitive(dst, m->string);
        if (have && cJSON_IsObject(have) && cJSON_IsObject(m)) {
            if (merge(have, m))
                return -1;
        } else {
            cJSON *item = cJSON_DetachItemViaPointer(src, m);
            if (have)
                cJSON_ReplaceItemViaPointer(dst, have, item);
            else
                cJSON_AddItemToObject(dst, item->string, item);
        }
        m = next;
    }
    return 0;
}

int pt_config_load(const char *const *paths, int npaths, struct pt_config *cfg, char *err,
                   size_t errlen)
{
    pt_config_defaults(cfg);
    if (npaths == 0)
        return PT_OK;
    cJSON *root = cJSON_CreateObject();
    char sources[600] = "";
    int rc = PT_ENOMEM;
    if (!root) {
        snprintf(err, errlen, "config: out of memory");
        return rc;
    }
    for (int i = 0; i < npaths; i++) {
        size_t len;
        char *text = read_file(paths[i], &len, err, errlen);
        if (!text) {
            rc = PT_EIO;
            goto out;
        }
        /* Text with more than one meaning (a key twice, "\u0000" cutting a
         * string short, invalid UTF-8) never reaches cJSON; every number in
         * the configuration is an integer.  A UTF-8 byte order mark, which
         * some editors write, is skipped (cJSON skips it too). */
        size_t bom = len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
        struct pt_json_check chk = {.integers_only = 1};
        rc = pt_json_check(text + bom, len - bom, &chk);
        if (rc) {
            int line = 1;
            for (size_t k = 0; k < chk.offset; k++)
                line += text[bom + k] == '\n';
            if (chk.field[0])
                snprintf(err, errlen, "config %s, line %d: key '%s': %s", paths[i], line, chk.field,
                         chk.problem);
            else
                snprintf(err, errlen, "config %s, line %d: %s", paths[i], line, chk.problem);
            free(text);
            rc = rc == PT_ENOMEM ? PT_ENOMEM : PT_ECONFIG;
            goto out;
        }
        rc = PT_ENOMEM; /* what the failures below that set no code of their own mean */
        const char *end = NULL;
        cJSON *tree = cJSON_ParseWithLengthOpts(text, len + 1, &end, 1);
        if (!tree) {
            size_t off = end ? (size_t)(end - text) : 0;
            int line = 1;
            for (size_t k = 0; k < off && k < len; k++)
                line += text[k] == '\n';
            snprintf(err, errlen, "config %s: not valid JSON near line %d (byte %zu)", paths[i],
                     line, off);
            free(text);
            rc = PT_ECONFIG;
            goto out;
        }
        free(text);
        if (!cJSON_IsObject(tree)) {
            snprintf(err, errlen, "config %s: the file must hold one JSON object", paths[i]);
            cJSON_Delete(tree);
            rc = PT_ECONFIG;
            goto out;
        }
        char dir[PT_CFG_PATH_MAX];
        snprintf(dir, sizeof dir, "%s", paths[i]);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        else
            snprintf(dir, sizeof dir, ".");
        if (resolve_paths(tree, dir) || merge(root, tree)) {
            cJSON_Delete(tree);
            snprintf(err, errlen, "config: out of memory");
            goto out;
        }
        cJSON_Delete(tree);
        size_t sl = strlen(sources);
        snprintf(sources + sl, sizeof sources - sl, "%s%s", i ? " + " : "", paths[i]);
    }
    struct ctx c = {err, errlen, sources};
    rc = load_tree(&c, root, cfg);
out:
    cJSON_Delete(root);
    return rc;
}

/* ---- secrets --------------------------------------------------------------- */

static int check_secret(const char *what, const char *path, char *err, size_t errlen)
{
    if (!path[0])
        return PT_OK;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        snprintf(err, errlen, "%.100s %.512s: cannot read: %s", what, path, strerror(errno));
        return PT_EIO;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "%.100s %.512s: not a regular file", what, path);
        return PT_EIO;
    }
    /* Owner-only (0600, owned by the service user), or the packaged layout
     * (SPEC 14): owned by root, readable by the group the daemon runs as
     * and nobody else (root:payterm 0640) - the service reads its keys but
     * cannot change them.  Group root does not count (it may have members
     * of its own), and nothing else may be set. */
    unsigned mode = (unsigned)(sb.st_mode & 07777);
    int group_ok = (mode & 040) && sb.st_uid == 0 && sb.st_gid != 0 && sb.st_gid == getegid();
    if ((mode & 037) || ((mode & 040) && !group_ok)) {
        char why[160] = "lets group or others read or write a secret";
        if (!(mode & 037))
            snprintf(why, sizeof why,
                     "is readable by group %u, which is not the group payterm runs as (%u), "
                     "or is not owned by root",
                     (unsigned)sb.st_gid, (unsigned)getegid());
        snprintf(err, errlen,
                 "%.100s %.512s: mode %04o %s; run: chmod 600 %.512s (owned by the service user), "
                 "or chown root:<the service's group> and chmod 640",
                 what, path, mode, why, path);
        return PT_EPERM;
    }
    return PT_OK;
}

int pt_config_check_secrets(const struct pt_config *cfg, char *err, size_t errlen)
{
    return pt_config_check_secrets_of(cfg, "", err, errlen);
}

int pt_config_check_secrets_of(const struct pt_config *cfg, const char *prefix, char *err,
                               size_t errlen)
{
    /* The API token, then every secret file of every configured gateway. */
    struct {
        char what[96];
        const char *path;
    } files[1 + PT_GW_MAX * PT_GW_FILES];
    size_t nfiles = 0;
    snprintf(files[nfiles].what, sizeof files[0].what, "api_token_file");
    files[nfiles++].path = cfg->api_token_file;
    for (int g = 0; g < pt_gateway_count(); g++) {
        const struct pt_gateway *gw = pt_gateway_at(g);
        for (const struct pt_gw_key *k = gw->config_keys; cfg->gw[g].configured && k->name; k++)
            if (k->kind == PT_GWK_SECRET && nfiles < sizeof files / sizeof files[0]) {
                snprintf(files[nfiles].what, sizeof files[0].what, "gateways.%s.%s", gw->name,
                         k->name);
                files[nfiles++].path = (const char *)&cfg->gw[g] + k->offset;
            }
    }
    /* Every file, not only the first bad one: init lists all that is wrong. */
    int first = PT_OK;
    size_t used = 0;
    if (errlen)
        err[0] = '\0';
    for (size_t i = 0; i < nfiles; i++) {
        char line[2 * PT_CFG_PATH_MAX + 400]; /* two paths, the mode, why, what to run */
        if (strncmp(files[i].what, prefix, strlen(prefix)) != 0)
            continue;
        int rc = check_secret(files[i].what, files[i].path, line, sizeof line);
        if (rc == PT_OK)
            continue;
        if (used < errlen)
            used += (size_t)snprintf(err + used, errlen - used, "%s%s", used ? "\n" : "", line);
        first = first ? first : rc;
    }
    return first;
}
