/*
 * api.c - the local HTTP API on libmicrohttpd (see api.h).
 *
 * This file only speaks HTTP: it collects the request (bounded at 16 KiB),
 * checks the bearer token, routes, and turns pt_reply into a response.  The
 * guarded write operations live in core/intake.c, the SQL in core/store.c.
 */
#include "api.h"
#include "charges.h"
#include "crypto.h"
#include "err.h"
#include "json.h"
#include "linux.h"
#include "log.h"
#include "metrics.h"
#include "pool.h"
#include "pt_config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#if MHD_VERSION < 0x00097002
typedef int MHD_RESULT;
#else
typedef enum MHD_Result MHD_RESULT;
#endif

#define BODY_MAX (16 * 1024)
#define LIST_MAX 100
#define EVENTS_MAX 100
#define WAIT_MAX_S 60
#define AUDIT_MAX 200
#define POOL_SIZE 8
/* How long a stop waits for requests in flight (a client that stalls in
 * the middle of its body must not hold the daemon forever). */
#define DRAIN_MAX_S 10

struct pt_api {
    struct pt_api_options opt;
    struct MHD_Daemon *main_d, *notify_d;
    struct pt_pool *pool;
    /* The fulfilment feed's wake-up: bumped after a commit that added events. */
    pthread_mutex_t feed_mu;
    pthread_cond_t feed_cv;
    uint64_t feed_version;
    int stopping;
    /* Requests between their headers and the end of their response: a stop
     * waits for them, so what they commit is also what the client hears. */
    pthread_mutex_t flight_mu;
    pthread_cond_t flight_cv;
    int in_flight;
};

/* Per-request state, kept across libmicrohttpd's calls for one request. */
struct request {
    char *body;
    size_t len;
    int too_big;
    int64_t t0_us;
};

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void pt_api_feed_wake(void *p)
{
    struct pt_api *api = p;
    pthread_mutex_lock(&api->feed_mu);
    api->feed_version++;
    pthread_cond_broadcast(&api->feed_cv);
    pthread_mutex_unlock(&api->feed_mu);
}

/* ---- responses -------------------------------------------------------------- */

static MHD_RESULT send_text(struct MHD_Connection *conn, struct request *rq, int status,
                            const char *type, char *body, size_t len, int replayed,
                            int retry_after)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, body ? body : (char *)"", MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    if (replayed)
        MHD_add_response_header(r, "Idempotency-Replayed", "true");
    if (retry_after > 0) {
        char v[16];
        snprintf(v, sizeof v, "%d", retry_after);
        MHD_add_response_header(r, "Retry-After", v);
    }
    if (status == 401)
        MHD_add_response_header(r, "WWW-Authenticate", "Bearer realm=\"payterm\"");
    MHD_RESULT ret = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    pt_metrics_http(status, mono_us() - rq->t0_us);
    return ret;
}

static MHD_RESULT send_reply(struct MHD_Connection *conn, struct request *rq, struct pt_reply *rep)
{
    if (rep->replayed)
        atomic_fetch_add(&pt_metrics.idem_replays, 1);
    if (strcmp(rep->code, "idempotency_key_in_use") == 0)
        atomic_fetch_add(&pt_metrics.idem_in_use, 1);
    if (strcmp(rep->code, "idempotency_key_reused") == 0)
        atomic_fetch_add(&pt_metrics.idem_reused, 1);
    MHD_RESULT ret = send_text(conn, rq, rep->status, "application/json", rep->body, rep->len,
                               rep->replayed, rep->retry_after_s);
    pt_reply_free(rep);
    return ret;
}

static MHD_RESULT send_error(struct MHD_Connection *conn, struct request *rq, int status,
                             const char *code, const char *message)
{
    struct pt_reply rep = {0};
    pt_reply_error(&rep, status, code, "%s", message);
    return send_reply(conn, rq, &rep);
}

/* Sends text as a JSON body and frees it; NULL (out of memory) is a 500. */
static MHD_RESULT send_json_text(struct MHD_Connection *conn, struct request *rq, int status,
                                 char *text)
{
    if (!text)
        return send_error(conn, rq, 500, "internal_error", "out of memory");
    MHD_RESULT ret = send_text(conn, rq, status, "application/json", text, strlen(text), 0, 0);
    free(text);
    return ret;
}

static MHD_RESULT send_json(struct MHD_Connection *conn, struct request *rq, int status, cJSON *o)
{
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return send_json_text(conn, rq, status, text);
}

static MHD_RESULT storage_error(struct MHD_Connection *conn, struct request *rq, int rc)
{
    char msg[160];
    snprintf(msg, sizeof msg, "the database cannot be read right now (%s)", pt_strerror(rc));
    struct pt_reply rep = {0};
    pt_reply_error(&rep, 503, "storage_unavailable", "%s", msg);
    rep.retry_after_s = 2;
    return send_reply(conn, rq, &rep);
}

/* ---- query parameters ----------------------------------------------------------- */

/* Parses an optional integer query argument in [min, max]. */
static int query_int(struct MHD_Connection *conn, const char *name, int64_t def, int64_t min,
                     int64_t max, int64_t *out, char *msg, size_t cap)
{
    const char *v = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, name);
    *out = def;
    if (!v || !*v) /* absent or empty ("?after=") means the default */
        return 1;
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (!*v || *end || errno || n < min || n > max) {
        snprintf(msg, cap, "query parameter '%s' must be an integer from %lld to %lld", name,
                 (long long)min, (long long)max);
        return 0;
    }
    *out = n;
    return 1;
}

/* ---- read-only handlers ------------------------------------------------------------ */

static MHD_RESULT get_charge(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                             const char *order_id)
{
    struct pt_store *st = pt_pool_get(api->pool);
    if (!st)
        return storage_error(conn, rq, PT_EIO);
    struct pt_charge c;
    int rc = pt_store_charge_get(st, order_id, &c);
    pt_pool_put(api->pool, st);
    if (rc == PT_ENOTFOUND) {
        char msg[128];
        snprintf(msg, sizeof msg, "no charge with order_id '%s'", order_id);
        return send_error(conn, rq, 404, "not_found", msg);
    }
    if (rc)
        return storage_error(conn, rq, rc);
    return send_json_text(conn, rq, 200, pt_charge_json_text(&c));
}

static MHD_RESULT list_charges(struct pt_api *api, struct MHD_Connection *conn,
                               struct request *rq)
{
    char msg[160];
    int64_t limit, after;
    int state = -1;
    const char *sv = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "state");
    if (sv) {
        enum pt_state s;
        if (pt_state_parse(sv, &s) != PT_OK)
            return send_error(conn, rq, 400, "invalid_request",
                              "query parameter 'state' must be INIT, PROCESSING, PENDING, "
                              "UNKNOWN, SUCCESS, FAILED or CANCELED");
        state = (int)s;
    }
    if (!query_int(conn, "limit", 50, 1, LIST_MAX, &limit, msg, sizeof msg) ||
        !query_int(conn, "after", 0, 0, INT64_MAX, &after, msg, sizeof msg))
        return send_error(conn, rq, 400, "invalid_request", msg);
    struct pt_charge *rows = malloc(sizeof *rows * (size_t)limit);
    if (!rows)
        return send_error(conn, rq, 500, "internal_error", "out of memory");
    struct pt_store *st = pt_pool_get(api->pool);
    int n = 0, more = 0;
    int rc = st ? pt_store_charges_list(st, state, after, (int)limit, rows, &n, &more) : PT_EIO;
    pt_pool_put(api->pool, st);
    if (rc) {
        free(rows);
        return storage_error(conn, rq, rc);
    }
    /* Up to LIST_MAX charge objects of at most ~12 KiB (metadata). */
    struct pt_jw w = {.max = (size_t)LIST_MAX * 16 * 1024};
    pt_jw_raw(&w, "{\"data\":[");
    for (int i = 0; i < n; i++) {
        char *t = pt_charge_json_text(&rows[i]);
        if (i)
            pt_jw_raw(&w, ",");
        if (t)
            pt_jw_raw(&w, t);
        else
            w.failed = 1;
        free(t);
    }
    pt_jw_raw(&w, more ? "],\"has_more\":true}" : "],\"has_more\":false}");
    free(rows);
    return send_json_text(conn, rq, 200, pt_jw_finish(&w));
}

static MHD_RESULT charge_audit(struct pt_api *api, struct MHD_Connection *conn,
                               struct request *rq, const char *order_id)
{
    struct pt_audit_row *rows = malloc(sizeof *rows * AUDIT_MAX);
    if (!rows)
        return send_error(conn, rq, 500, "internal_error", "out of memory");
    struct pt_store *st = pt_pool_get(api->pool);
    struct pt_charge c;
    int n = 0;
    int rc = st ? pt_store_charge_get(st, order_id, &c) : PT_EIO;
    if (rc == PT_OK)
        rc = pt_store_audit_list(st, c.id, AUDIT_MAX, rows, &n);
    pt_pool_put(api->pool, st);
    if (rc == PT_ENOTFOUND) {
        free(rows);
        char msg[128];
        snprintf(msg, sizeof msg, "no charge with order_id '%s'", order_id);
        return send_error(conn, rq, 404, "not_found", msg);
    }
    if (rc) {
        free(rows);
        return storage_error(conn, rq, rc);
    }
    cJSON *o = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(o, "data");
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        char t[32];
        cJSON_AddNumberToObject(e, "seq", (double)rows[i].seq);
        if (rows[i].from_state[0])
            cJSON_AddStringToObject(e, "from", rows[i].from_state);
        else
            cJSON_AddNullToObject(e, "from");
        cJSON_AddStringToObject(e, "to", rows[i].to_state);
        cJSON_AddStringToObject(e, "cause", rows[i].cause);
        cJSON_AddStringToObject(e, "actor", rows[i].actor);
        cJSON_AddBoolToObject(e, "refused", rows[i].refused);
        if (rows[i].detail[0])
            cJSON_AddStringToObject(e, "detail", rows[i].detail);
        else
            cJSON_AddNullToObject(e, "detail");
        pt_rfc3339(rows[i].created_at, t);
        cJSON_AddStringToObject(e, "created_at", t);
        cJSON_AddItemToArray(data, e);
    }
    free(rows);
    return send_json(conn, rq, 200, o);
}

static MHD_RESULT events_feed(struct pt_api *api, struct MHD_Connection *conn,
                              struct request *rq)
{
    char msg[160];
    int64_t after, limit, wait_s;
    if (!query_int(conn, "after", 0, 0, INT64_MAX, &after, msg, sizeof msg) ||
        !query_int(conn, "limit", 100, 1, EVENTS_MAX, &limit, msg, sizeof msg) ||
        !query_int(conn, "wait", 0, 0, WAIT_MAX_S, &wait_s, msg, sizeof msg))
        return send_error(conn, rq, 400, "invalid_request", msg);

    struct pt_event_row rows[EVENTS_MAX];
    int n = 0, rc;
    int64_t deadline = pt_linux_mono_ms() + wait_s * 1000;
    for (;;) {
        pthread_mutex_lock(&api->feed_mu);
        uint64_t seen = api->feed_version;
        pthread_mutex_unlock(&api->feed_mu);

        struct pt_store *st = pt_pool_get(api->pool);
        rc = st ? pt_store_events_list(st, after, (int)limit, rows, &n) : PT_EIO;
        pt_pool_put(api->pool, st);
        if (rc)
            return storage_error(conn, rq, rc);
        int64_t left = deadline - pt_linux_mono_ms();
        if (n > 0 || left <= 0)
            break;
        /* Sleep until a commit adds events, the wait ends, or we stop.  The
         * version read before the query closes the race with a commit that
         * lands between the query and the wait. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += left / 1000;
        ts.tv_nsec += (left % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_mutex_lock(&api->feed_mu);
        while (api->feed_version == seen && !api->stopping &&
               pthread_cond_timedwait(&api->feed_cv, &api->feed_mu, &ts) == 0)
            ;
        int stop = api->stopping;
        pthread_mutex_unlock(&api->feed_mu);
        if (stop)
            break;
    }
    cJSON *o = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(o, "data");
    int64_t next = after;
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        char t[32];
        cJSON_AddNumberToObject(e, "seq", (double)rows[i].seq);
        cJSON_AddStringToObject(e, "type", rows[i].type);
        cJSON_AddStringToObject(e, "order_id", rows[i].order_id);
        pt_rfc3339(rows[i].created_at, t);
        cJSON_AddStringToObject(e, "created_at", t);
        cJSON *charge = cJSON_Parse(rows[i].payload);
        if (charge)
            cJSON_AddItemToObject(e, "charge", charge);
        cJSON_AddItemToArray(data, e);
        next = rows[i].seq;
    }
    pt_event_rows_free(rows, n);
    cJSON_AddNumberToObject(o, "next", (double)next);
    return send_json(conn, rq, 200, o);
}

static MHD_RESULT status(struct pt_api *api, struct MHD_Connection *conn, struct request *rq)
{
    struct pt_store_stats s;
    struct pt_store *st = pt_pool_get(api->pool);
    int rc = st ? pt_store_stats(st, &s) : PT_EIO;
    pt_pool_put(api->pool, st);
    if (rc)
        return storage_error(conn, rq, rc);
    int64_t now = pt_linux_now_ms();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "online",
                          api->opt.hooks.online && api->opt.hooks.online(api->opt.hooks.ctx));
    cJSON *q = cJSON_AddObjectToObject(o, "queue");
    cJSON_AddNumberToObject(q, "count", (double)s.by_state[PT_STATE_INIT]);
    cJSON_AddNumberToObject(q, "oldest_age_s",
                            s.queue_oldest_created_at
                                ? (double)((now - s.queue_oldest_created_at) / 1000)
                                : 0);
    cJSON *bc = cJSON_AddObjectToObject(q, "by_currency");
    for (int i = 0; i < s.ncur; i++) {
        cJSON *c = cJSON_AddObjectToObject(bc, s.queue[i].currency);
        cJSON_AddNumberToObject(c, "count", (double)s.queue[i].count);
        cJSON_AddNumberToObject(c, "amount", (double)s.queue[i].amount);
    }
    cJSON_AddNumberToObject(o, "pending", (double)s.by_state[PT_STATE_PENDING]);
    cJSON_AddNumberToObject(o, "unknown", (double)s.by_state[PT_STATE_UNKNOWN]);
    cJSON_AddNumberToObject(o, "processing", (double)s.by_state[PT_STATE_PROCESSING]);
    cJSON_AddNumberToObject(o, "review", (double)s.review);
    cJSON_AddStringToObject(o, "version", PT_VERSION);
    return send_json(conn, rq, 200, o);
}

static MHD_RESULT healthz(struct pt_api *api, struct MHD_Connection *conn, struct request *rq)
{
    struct pt_store *st = pt_pool_get(api->pool);
    int ok = st && pt_store_writable(st);
    pt_pool_put(api->pool, st);
    const char *body = ok ? "{\"status\":\"ok\"}" : "{\"status\":\"storage_unavailable\"}";
    return send_text(conn, rq, ok ? 200 : 503, "application/json", (char *)body, strlen(body), 0,
                     ok ? 0 : 2);
}

/* Appends to a growing text buffer (metrics output is a few KiB). */
struct text {
    char *buf;
    size_t len, cap;
};

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void tprintf(struct text *t, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        size_t room = t->cap - t->len;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (t->buf && (size_t)n < room) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap ? t->cap * 2 : 8192;
        while (cap < t->len + (size_t)n + 1)
            cap *= 2;
        char *b = realloc(t->buf, cap);
        if (!b)
            return;
        t->buf = b;
        t->cap = cap;
    }
}

static MHD_RESULT metrics(struct pt_api *api, struct MHD_Connection *conn, struct request *rq)
{
    struct pt_store_stats s;
    struct pt_store *st = pt_pool_get(api->pool);
    int rc = st ? pt_store_stats(st, &s) : PT_EIO;
    pt_pool_put(api->pool, st);
    if (rc)
        return storage_error(conn, rq, rc);
    int64_t now = pt_linux_now_ms();
    struct text t = {0};
    tprintf(&t, "# HELP payterm_charges Charges by state.\n# TYPE payterm_charges gauge\n");
    for (int i = 0; i < PT_STATE__COUNT; i++)
        tprintf(&t, "payterm_charges{state=\"%s\"} %lld\n", pt_state_name((enum pt_state)i),
                (long long)s.by_state[i]);
    tprintf(&t, "# HELP payterm_charges_review Charges waiting for an operator.\n"
                "# TYPE payterm_charges_review gauge\npayterm_charges_review %lld\n",
            (long long)s.review);
    tprintf(&t, "# HELP payterm_queue_depth Charges queued offline (INIT).\n"
                "# TYPE payterm_queue_depth gauge\npayterm_queue_depth %lld\n",
            (long long)s.by_state[PT_STATE_INIT]);
    tprintf(&t, "# HELP payterm_queue_oldest_age_seconds Age of the oldest queued charge.\n"
                "# TYPE payterm_queue_oldest_age_seconds gauge\n"
                "payterm_queue_oldest_age_seconds %lld\n",
            s.queue_oldest_created_at ? (long long)((now - s.queue_oldest_created_at) / 1000)
                                      : 0LL);
    tprintf(&t, "# HELP payterm_queue_amount Queued amount by currency, minor units.\n"
                "# TYPE payterm_queue_amount gauge\n");
    for (int i = 0; i < s.ncur; i++)
        tprintf(&t, "payterm_queue_amount{currency=\"%s\"} %lld\n", s.queue[i].currency,
                (long long)s.queue[i].amount);
    tprintf(&t, "# HELP payterm_online 1 when the gateways were reachable at last contact.\n"
                "# TYPE payterm_online gauge\npayterm_online %d\n",
            api->opt.hooks.online && api->opt.hooks.online(api->opt.hooks.ctx) ? 1 : 0);
    tprintf(&t, "# HELP payterm_gateway_online 1 when the gateway answered at last contact.\n"
                "# TYPE payterm_gateway_online gauge\n");
    for (int g = 0; g < PT_MG__COUNT; g++)
        tprintf(&t, "payterm_gateway_online{gateway=\"%s\"} %d\n", pt_metric_gateway_name(g),
                atomic_load(&pt_metrics.online[g]));
    tprintf(&t, "# HELP payterm_sync_attempts_total Gateway sends by outcome.\n"
                "# TYPE payterm_sync_attempts_total counter\n");
    for (int g = 0; g < PT_MG__COUNT; g++)
        for (int o = 0; o < PT_MS__COUNT; o++)
            tprintf(&t, "payterm_sync_attempts_total{gateway=\"%s\",outcome=\"%s\"} %llu\n",
                    pt_metric_gateway_name(g), pt_metric_sync_name(o),
                    (unsigned long long)atomic_load(&pt_metrics.sync_attempts[g][o]));
    tprintf(&t, "# HELP payterm_notifications_total Gateway notifications by result.\n"
                "# TYPE payterm_notifications_total counter\n");
    for (int g = 0; g < PT_MG__COUNT; g++)
        for (int o = 0; o < PT_MN__COUNT; o++)
            tprintf(&t, "payterm_notifications_total{gateway=\"%s\",result=\"%s\"} %llu\n",
                    pt_metric_gateway_name(g), pt_metric_notify_name(o),
                    (unsigned long long)atomic_load(&pt_metrics.notifications[g][o]));
    tprintf(&t, "# HELP payterm_idempotency_total Idempotency guard outcomes.\n"
                "# TYPE payterm_idempotency_total counter\n"
                "payterm_idempotency_total{result=\"replayed\"} %llu\n"
                "payterm_idempotency_total{result=\"in_use\"} %llu\n"
                "payterm_idempotency_total{result=\"reused\"} %llu\n",
            (unsigned long long)atomic_load(&pt_metrics.idem_replays),
            (unsigned long long)atomic_load(&pt_metrics.idem_in_use),
            (unsigned long long)atomic_load(&pt_metrics.idem_reused));
    tprintf(&t, "# HELP payterm_http_responses_total Responses by status class.\n"
                "# TYPE payterm_http_responses_total counter\n");
    for (int c = 1; c <= 5; c++)
        tprintf(&t, "payterm_http_responses_total{class=\"%dxx\"} %llu\n", c,
                (unsigned long long)atomic_load(&pt_metrics.http_by_class[c]));
    tprintf(&t, "# HELP payterm_http_request_duration_seconds Request latency.\n"
                "# TYPE payterm_http_request_duration_seconds histogram\n");
    unsigned long long cum = 0;
    for (int b = 0; b <= PT_LATENCY_BUCKETS; b++) {
        cum += atomic_load(&pt_metrics.latency_bucket[b]);
        if (b < PT_LATENCY_BUCKETS)
            tprintf(&t, "payterm_http_request_duration_seconds_bucket{le=\"%g\"} %llu\n",
                    pt_latency_bounds_us[b] / 1e6, cum);
        else
            tprintf(&t, "payterm_http_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n", cum);
    }
    tprintf(&t, "payterm_http_request_duration_seconds_sum %.6f\n"
                "payterm_http_request_duration_seconds_count %llu\n",
            atomic_load(&pt_metrics.latency_sum_us) / 1e6,
            (unsigned long long)atomic_load(&pt_metrics.latency_count));
    if (!t.buf)
        return send_error(conn, rq, 500, "internal_error", "out of memory");
    MHD_RESULT ret =
        send_text(conn, rq, 200, "text/plain; version=0.0.4; charset=utf-8", t.buf, t.len, 0, 0);
    free(t.buf);
    return ret;
}

/* ---- write handlers ------------------------------------------------------------------ */

typedef int (*order_op)(const struct pt_intake *, struct pt_store *, const char *, const char *,
                        const char *, size_t, int64_t, struct pt_reply *);

static MHD_RESULT guarded(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                          const char *order_id, order_op op)
{
    const char *key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Idempotency-Key");
    struct pt_store *st = pt_pool_get(api->pool);
    if (!st)
        return storage_error(conn, rq, PT_EIO);
    struct pt_reply rep;
    int64_t now = pt_linux_now_ms();
    if (order_id)
        op(&api->opt.intake, st, order_id, key, rq->body, rq->len, now, &rep);
    else
        pt_intake_create_charge(&api->opt.intake, st, key, rq->body, rq->len, now, &rep);
    pt_pool_put(api->pool, st);
    return send_reply(conn, rq, &rep);
}

/* GET /v1/charges/{order_id}/payment (may ask the gateway: an API thread). */
static MHD_RESULT payment_link(struct pt_api *api, struct MHD_Connection *conn,
                               struct request *rq, const char *order_id)
{
    struct pt_store *st = pt_pool_get(api->pool);
    if (!st)
        return storage_error(conn, rq, PT_EIO);
    struct pt_reply rep;
    pt_intake_payment(&api->opt.intake, st, order_id, &rep);
    pt_pool_put(api->pool, st);
    return send_reply(conn, rq, &rep);
}

static MHD_RESULT sync_now(struct pt_api *api, struct MHD_Connection *conn, struct request *rq)
{
    if (api->opt.hooks.sync_now)
        api->opt.hooks.sync_now(api->opt.hooks.ctx);
    const char *body = "{\"status\":\"sync started\"}";
    return send_text(conn, rq, 202, "application/json", (char *)body, strlen(body), 0, 0);
}

/* Collects the request headers as "Name: value" lines for the adapters. */
static MHD_RESULT collect_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
    (void)kind;
    struct pt_http_response *msg = cls;
    pt_http_response_add_header(msg, key, value ? value : "");
    return MHD_YES;
}

static MHD_RESULT notify(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                         const char *gateway)
{
    if (!api->opt.hooks.notify)
        return send_error(conn, rq, 404, "not_found", "notifications are not handled here");
    struct pt_http_response msg = {0};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, collect_header, &msg);
    msg.body = rq->body;
    msg.body_len = rq->len;
    struct pt_store *st = pt_pool_get(api->pool);
    if (!st) {
        msg.body = NULL;
        pt_http_response_free(&msg);
        return storage_error(conn, rq, PT_EIO);
    }
    struct pt_reply rep = {0};
    const char *type = "application/json";
    api->opt.hooks.notify(api->opt.hooks.ctx, st, gateway, &msg, &rep, &type);
    pt_pool_put(api->pool, st);
    msg.body = NULL; /* owned by rq */
    pt_http_response_free(&msg);
    MHD_RESULT ret = send_text(conn, rq, rep.status, type, rep.body, rep.len, 0, 0);
    pt_reply_free(&rep);
    return ret;
}

/* ---- routing ---------------------------------------------------------------------------- */

static int authorized(struct pt_api *api, struct MHD_Connection *conn)
{
    if (!api->opt.token)
        return 1;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return 0;
    h += 7;
    size_t a = strlen(h), b = strlen(api->opt.token);
    /* Constant time over the expected token's length. */
    return a == b && pt_ct_equal(h, api->opt.token, b);
}

static MHD_RESULT not_allowed(struct MHD_Connection *conn, struct request *rq, const char *allow)
{
    struct pt_reply rep = {0};
    pt_reply_error(&rep, 405, "method_not_allowed", "use %s for this path", allow);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(rep.len, rep.body, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", "application/json");
    MHD_add_response_header(r, "Allow", allow);
    MHD_RESULT ret = MHD_queue_response(conn, 405, r);
    MHD_destroy_response(r);
    pt_metrics_http(405, mono_us() - rq->t0_us);
    pt_reply_free(&rep);
    return ret;
}

static MHD_RESULT route_notify(struct pt_api *api, struct MHD_Connection *conn,
                               struct request *rq, const char *url, const char *method)
{
    static const char *const routes[][2] = {{"/notify/alipay", "alipay"},
                                            {"/notify/wechat", "wechat"},
                                            {"/notify/2c2p", "2c2p"},
                                            {"/webhooks/stripe", "stripe"}};
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (strcmp(url, routes[i][0]) == 0) {
            if (strcmp(method, "POST") != 0)
                return not_allowed(conn, rq, "POST");
            return notify(api, conn, rq, routes[i][1]);
        }
    }
    return send_error(conn, rq, 404, "not_found", "no such path");
}

static MHD_RESULT route(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                        const char *url, const char *method)
{
    int get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
    if (strncmp(url, "/notify/", 8) == 0 || strncmp(url, "/webhooks/", 10) == 0)
        return route_notify(api, conn, rq, url, method);
    if (strcmp(url, "/healthz") == 0)
        return get ? healthz(api, conn, rq) : not_allowed(conn, rq, "GET");
    if (!authorized(api, conn))
        return send_error(conn, rq, 401, "unauthorized",
                          "missing or wrong bearer token (Authorization: Bearer <token from "
                          "api_token_file>)");
    if (strcmp(url, "/metrics") == 0)
        return get ? metrics(api, conn, rq) : not_allowed(conn, rq, "GET");
    if (strcmp(url, "/v1/status") == 0)
        return get ? status(api, conn, rq) : not_allowed(conn, rq, "GET");
    if (strcmp(url, "/v1/sync") == 0)
        return post ? sync_now(api, conn, rq) : not_allowed(conn, rq, "POST");
    if (strcmp(url, "/v1/events") == 0)
        return get ? events_feed(api, conn, rq) : not_allowed(conn, rq, "GET");
    if (strcmp(url, "/v1/charges") == 0) {
        if (post)
            return guarded(api, conn, rq, NULL, NULL);
        return get ? list_charges(api, conn, rq) : not_allowed(conn, rq, "GET, POST");
    }
    if (strncmp(url, "/v1/charges/", 12) == 0) {
        char order[80];
        const char *rest = url + 12, *slash = strchr(rest, '/');
        size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
        if (n == 0 || n >= sizeof order)
            return send_error(conn, rq, 404, "not_found", "no such charge");
        memcpy(order, rest, n);
        order[n] = '\0';
        if (!pt_order_id_valid(order))
            return send_error(conn, rq, 404, "not_found",
                              "no such charge (order ids are 1-64 of A-Z a-z 0-9 _ . -)");
        if (!slash)
            return get ? get_charge(api, conn, rq, order) : not_allowed(conn, rq, "GET");
        if (strcmp(slash, "/events") == 0)
            return get ? charge_audit(api, conn, rq, order) : not_allowed(conn, rq, "GET");
        if (strcmp(slash, "/payment") == 0)
            return get ? payment_link(api, conn, rq, order) : not_allowed(conn, rq, "GET");
        if (strcmp(slash, "/cancel") == 0)
            return post ? guarded(api, conn, rq, order, pt_intake_cancel)
                        : not_allowed(conn, rq, "POST");
        if (strcmp(slash, "/review") == 0)
            return post ? guarded(api, conn, rq, order, pt_intake_review)
                        : not_allowed(conn, rq, "POST");
    }
    return send_error(conn, rq, 404, "not_found", "no such path");
}

/* libmicrohttpd's access handler: called once with the headers, then once per
 * body chunk, then once more with *upload_data_size == 0. */
static MHD_RESULT on_request(void *cls, struct MHD_Connection *conn, const char *url,
                             const char *method, const char *version, const char *upload_data,
                             size_t *upload_data_size, void **con_cls)
{
    (void)version;
    struct pt_api *api = cls;
    struct request *rq = *con_cls;
    if (!rq) {
        rq = calloc(1, sizeof *rq);
        if (!rq)
            return MHD_NO;
        rq->t0_us = mono_us();
        *con_cls = rq;
        pthread_mutex_lock(&api->flight_mu);
        api->in_flight++;
        pthread_mutex_unlock(&api->flight_mu);
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > BODY_MAX) {
            rq->too_big = 1;
            return send_error(conn, rq, 413, "payload_too_large",
                              "request bodies are limited to 16 KiB");
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (rq->too_big || rq->len + n > BODY_MAX) {
            rq->too_big = 1; /* chunked body beyond the limit: drop the rest */
            return MHD_YES;
        }
        char *b = realloc(rq->body, rq->len + n + 1);
        if (!b)
            return MHD_NO;
        memcpy(b + rq->len, upload_data, n);
        rq->body = b;
        rq->len += n;
        rq->body[rq->len] = '\0';
        return MHD_YES;
    }
    if (rq->too_big)
        return send_error(conn, rq, 413, "payload_too_large",
                          "request bodies are limited to 16 KiB");
    return route(api, conn, rq, url, method);
}

static MHD_RESULT on_notify_request(void *cls, struct MHD_Connection *conn, const char *url,
                                    const char *method, const char *version,
                                    const char *upload_data, size_t *upload_data_size,
                                    void **con_cls)
{
    /* The notify listener shares the body handling and serves only the
     * notification routes. */
    if (*con_cls && *upload_data_size == 0 && !((struct request *)*con_cls)->too_big &&
        strncmp(url, "/notify/", 8) != 0 && strncmp(url, "/webhooks/", 10) != 0)
        return send_error(conn, *con_cls, 404, "not_found",
                          "this listener serves only /notify/* and /webhooks/*");
    return on_request(cls, conn, url, method, version, upload_data, upload_data_size, con_cls);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    (void)toe;
    struct pt_api *api = cls;
    struct request *rq = *con_cls;
    if (rq) {
        free(rq->body);
        free(rq);
        *con_cls = NULL;
        pthread_mutex_lock(&api->flight_mu);
        if (--api->in_flight == 0)
            pthread_cond_broadcast(&api->flight_cv);
        pthread_mutex_unlock(&api->flight_mu);
    }
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    pt_log_warn("http: %s", line);
}

/* Starts one listener on "HOST:PORT". */
static struct MHD_Daemon *listen_on(struct pt_api *api, const char *addr, MHD_AccessHandlerCallback h,
                                    char *err, size_t errlen)
{
    char host[128];
    const char *colon = strrchr(addr, ':');
    snprintf(host, sizeof host, "%.*s", (int)(colon - addr), addr);
    size_t hl = strlen(host);
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *ai = NULL;
    int gai = getaddrinfo(host, colon + 1, &hints, &ai);
    if (gai != 0 || !ai) {
        snprintf(err, errlen, "cannot resolve listen address %s: %s", addr, gai_strerror(gai));
        return NULL;
    }
    /* MHD_USE_ITC: needed by MHD_quiesce_daemon() when stopping. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_POLL | MHD_USE_ERROR_LOG | MHD_USE_ITC;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, NULL, NULL, h, api, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, api,
        MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT, (unsigned)64,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(WAIT_MAX_S + 30), MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, api, MHD_OPTION_THREAD_STACK_SIZE, api->opt.thread_stack,
        MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!d)
        snprintf(err, errlen, "cannot listen on %s (in use, or not an address of this host?)",
                 addr);
    return d;
}

int pt_api_start(const struct pt_api_options *opt, struct pt_api **out, char *err, size_t errlen)
{
    struct pt_api *api = calloc(1, sizeof *api);
    if (!api)
        return PT_ENOMEM;
    api->opt = *opt;
    api->opt.intake.cfg = opt->cfg;
    pthread_mutex_init(&api->feed_mu, NULL);
    pthread_cond_init(&api->feed_cv, NULL);
    pthread_mutex_init(&api->flight_mu, NULL);
    pthread_cond_init(&api->flight_cv, NULL);
    int rc = pt_pool_new(opt->db_path, opt->cfg->synchronous_normal, POOL_SIZE, pt_api_feed_wake,
                         api, &api->pool);
    if (rc)
        goto fail;
    rc = PT_EIO;
    api->main_d = listen_on(api, opt->cfg->listen, on_request, err, errlen);
    if (!api->main_d)
        goto fail;
    if (opt->cfg->notify_listen[0]) {
        api->notify_d = listen_on(api, opt->cfg->notify_listen, on_notify_request, err, errlen);
        if (!api->notify_d)
            goto fail;
    }
    *out = api;
    return PT_OK;
fail:
    pt_api_stop(api);
    return rc;
}

/* Stops accepting: new connections are refused at once (the listening
 * socket is shut down) while the connections already open go on.  Returns
 * the socket, which may only be closed after MHD_stop_daemon(). */
static MHD_socket quiesce(struct MHD_Daemon *d)
{
    MHD_socket fd = d ? MHD_quiesce_daemon(d) : MHD_INVALID_SOCKET;
    if (fd != MHD_INVALID_SOCKET)
        shutdown(fd, SHUT_RDWR);
    return fd;
}

/* Waits until no request is between its headers and its response's end. */
static void drain(struct pt_api *api)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += DRAIN_MAX_S;
    pthread_mutex_lock(&api->flight_mu);
    while (api->in_flight > 0 &&
           pthread_cond_timedwait(&api->flight_cv, &api->flight_mu, &ts) == 0)
        ;
    if (api->in_flight > 0)
        pt_log_warn("stopping with %d requests still in flight after %d s", api->in_flight,
                    DRAIN_MAX_S);
    pthread_mutex_unlock(&api->flight_mu);
}

void pt_api_stop(struct pt_api *api)
{
    if (!api)
        return;
    /* Long-polls answer now rather than at the end of their wait. */
    pthread_mutex_lock(&api->feed_mu);
    api->stopping = 1;
    pthread_cond_broadcast(&api->feed_cv);
    pthread_mutex_unlock(&api->feed_mu);
    /* MHD_stop_daemon shuts down every open connection, responses being
     * written included: first stop accepting and let the requests in
     * flight finish, commit and be answered. */
    MHD_socket lfd[2] = {quiesce(api->notify_d), quiesce(api->main_d)};
    drain(api);
    if (api->notify_d)
        MHD_stop_daemon(api->notify_d);
    if (api->main_d)
        MHD_stop_daemon(api->main_d);
    for (int i = 0; i < 2; i++)
        if (lfd[i] != MHD_INVALID_SOCKET)
            close(lfd[i]);
    pt_pool_destroy(api->pool);
    pthread_cond_destroy(&api->flight_cv);
    pthread_mutex_destroy(&api->flight_mu);
    pthread_cond_destroy(&api->feed_cv);
    pthread_mutex_destroy(&api->feed_mu);
    free(api);
}
