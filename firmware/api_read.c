/*
 * api_read.c - the local API's read-only handlers: charges, refunds, audit, the fulfilment feed,
 * status, health, metrics.
 */
#include "api_impl.h"
#include "archive.h"
#include "recon_run.h"

/* ---- read-only handlers ------------------------------------------------------------ */

/* A list's paging: limit (1 to LIST_MAX, 50 by default) and after (the
 * last id of the page before); 0 with the problem in msg. */
static int page_query(struct MHD_Connection *conn, int64_t *limit, int64_t *after, char *msg,
                      size_t cap)
{
    return pt__api_query_int(conn, "limit", 50, 1, LIST_MAX, limit, msg, cap) &&
           pt__api_query_int(conn, "after", 0, 0, INT64_MAX, after, msg, cap);
}

typedef char *row_text_fn(const void *row);

static char *charge_text(const void *row)
{
    return pt_charge_json_text(row);
}

static char *refund_text(const void *row)
{
    return pt_refund_json_text(row);
}

/* The answer to a read of one object: 404 naming what ("charge with
 * order_id") and id, 503 for a store error, else text(obj). */
static api_outcome send_read(struct MHD_Connection *conn, struct request *rq, int rc,
                             const char *what, const char *id, row_text_fn *text, const void *obj)
{
    if (rc == PT_ENOTFOUND) {
        char msg[160];
        snprintf(msg, sizeof msg, "no %s '%s'", what, id);
        return pt__api_send_error(conn, rq, 404, "not_found", msg);
    }
    if (rc)
        return pt__api_storage_error(conn, rq, rc);
    return pt__api_send_json_text(conn, rq, 200, text(obj));
}

/* {"data":[...],"has_more":...} of n rows of size bytes each. */
static api_outcome send_page(struct MHD_Connection *conn, struct request *rq, const void *rows,
                             size_t size, int n, int more, row_text_fn *text)
{
    /* Up to LIST_MAX objects of at most ~12 KiB (metadata). */
    struct pt_jw w = {.max = (size_t)LIST_MAX * 16 * 1024};
    pt_jw_raw(&w, "{\"data\":[");
    for (int i = 0; i < n; i++) {
        char *t = text((const char *)rows + (size_t)i * size);
        if (i)
            pt_jw_raw(&w, ",");
        if (t)
            pt_jw_raw(&w, t);
        else
            w.failed = 1;
        free(t);
    }
    pt_jw_raw(&w, more ? "],\"has_more\":true}" : "],\"has_more\":false}");
    return pt__api_send_json_text(conn, rq, 200, pt_jw_finish(&w));
}

api_outcome pt__api_get_charge(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                               const char *order_id)
{
    struct pt_charge c;
    /* store.fallback local: one the lane queued in its own store during an
     * outage, and has not moved to the store server, is read there; one
     * being moved or canceled there, when the server has none or cannot be
     * asked (pt_intake_local_charge). */
    int where = pt_intake_local_charge(&api->opt.intake, order_id, &c);
    if (where == PT_LOCAL_OWN)
        return pt__api_send_json_text(conn, rq, 200, pt_charge_json_text(&c));
    struct pt_store *st = pt_pool_get(api->pool);
    int rc = st ? pt_store_charge_get(st, order_id, &c) : PT_EIO;
    /* Moved to its month's archive by retention (SPEC 19): read there. */
    if (rc == PT_ENOTFOUND &&
        (rc = pt_archive_charge_get(st, api->opt.cfg->data_dir, order_id, &c)) == PT_EUNSUPPORTED)
        rc = PT_ENOTFOUND;
    pt_pool_put(api->pool, st);
    if (where == PT_LOCAL_SHADOW && (rc == PT_ENOTFOUND || rc == PT_EIO) &&
        pt_intake_local_charge(&api->opt.intake, order_id, &c) != PT_LOCAL_NONE)
        return pt__api_send_json_text(conn, rq, 200, pt_charge_json_text(&c));
    return send_read(conn, rq, rc, "charge with order_id", order_id, charge_text, &c);
}

api_outcome pt__api_list_charges(struct pt_api *api, struct MHD_Connection *conn,
                                 struct request *rq)
{
    char msg[160];
    int64_t limit, after;
    int state = -1;
    const char *sv = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "state");
    if (sv) {
        enum pt_state s;
        if (pt_state_parse(sv, &s) != PT_OK)
            return pt__api_send_error(conn, rq, 400, "invalid_request",
                                      "query parameter 'state' must be INIT, PROCESSING, PENDING, "
                                      "UNKNOWN, SUCCESS, FAILED or CANCELED");
        state = (int)s;
    }
    /* review=true: the charges under review (the operator page's list). */
    const char *rv = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "review");
    int review = rv && strcmp(rv, "true") == 0;
    if (rv && (!review || sv))
        return pt__api_send_error(conn, rq, 400, "invalid_request",
                                  sv && review
                                      ? "query parameters 'review' and 'state' cannot be combined"
                                      : "query parameter 'review' must be true");
    if (!page_query(conn, &limit, &after, msg, sizeof msg))
        return pt__api_send_error(conn, rq, 400, "invalid_request", msg);
    struct pt_charge *rows = malloc(sizeof *rows * (size_t)limit);
    if (!rows)
        return pt__api_send_error(conn, rq, 500, "internal_error", "out of memory");
    struct pt_store *st = pt_pool_get(api->pool);
    int n = 0, more = 0;
    int rc = !st      ? PT_EIO
             : review ? pt_store_charges_list_review(st, after, (int)limit, rows, &n, &more)
                      : pt_store_charges_list(st, state, after, (int)limit, rows, &n, &more);
    pt_pool_put(api->pool, st);
    if (rc) {
        free(rows);
        return pt__api_storage_error(conn, rq, rc);
    }
    api_outcome o = send_page(conn, rq, rows, sizeof *rows, n, more, charge_text);
    free(rows);
    return o;
}

/* GET /v1/refunds/{refund_id} */
api_outcome pt__api_get_refund(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                               const char *refund_id)
{
    struct pt_store *st = pt_pool_get(api->pool);
    struct pt_refund r;
    int rc = st ? pt_store_refund_get(st, refund_id, &r) : PT_EIO;
    if (rc == PT_ENOTFOUND &&
        (rc = pt_archive_refund_get(st, api->opt.cfg->data_dir, refund_id, &r)) == PT_EUNSUPPORTED)
        rc = PT_ENOTFOUND;
    pt_pool_put(api->pool, st);
    return send_read(conn, rq, rc, "refund with refund_id", refund_id, refund_text, &r);
}

/* GET /v1/refunds?state=&limit=&after= and GET /v1/charges/{order_id}/refunds:
 * the same paging as the charges (after = the last refund's id). */
api_outcome pt__api_list_refunds(struct pt_api *api, struct MHD_Connection *conn,
                                 struct request *rq, const char *order_id)
{
    char msg[160];
    int64_t limit, after;
    int state = -1;
    const char *sv = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "state");
    if (sv) {
        enum pt_state s;
        if (order_id || pt_state_parse(sv, &s) != PT_OK || !pt_refund_state_valid(s))
            return pt__api_send_error(conn, rq, 400, "invalid_request",
                                      order_id
                                          ? "query parameter 'state' is for GET /v1/refunds"
                                          : "query parameter 'state' must be INIT, PROCESSING, "
                                            "PENDING, UNKNOWN, SUCCESS or FAILED");
        state = (int)s;
    }
    if (!page_query(conn, &limit, &after, msg, sizeof msg))
        return pt__api_send_error(conn, rq, 400, "invalid_request", msg);
    struct pt_refund *rows = malloc(sizeof *rows * (size_t)limit);
    if (!rows)
        return pt__api_send_error(conn, rq, 500, "internal_error", "out of memory");
    struct pt_store *st = pt_pool_get(api->pool);
    int n = 0, more = 0, rc = st ? PT_OK : PT_EIO;
    struct pt_charge c = {0};
    if (rc == PT_OK && order_id)
        rc = pt_store_charge_get(st, order_id, &c);
    if (rc == PT_OK)
        rc = pt_store_refunds_list(st, order_id ? c.id : 0, state, after, (int)limit, rows, &n,
                                   &more);
    pt_pool_put(api->pool, st);
    if (rc) {
        free(rows);
        if (rc == PT_ENOTFOUND) {
            snprintf(msg, sizeof msg, "no charge with order_id '%s'", order_id);
            return pt__api_send_error(conn, rq, 404, "not_found", msg);
        }
        return pt__api_storage_error(conn, rq, rc);
    }
    api_outcome o = send_page(conn, rq, rows, sizeof *rows, n, more, refund_text);
    free(rows);
    return o;
}

api_outcome pt__api_charge_audit(struct pt_api *api, struct MHD_Connection *conn,
                                 struct request *rq, const char *order_id)
{
    struct pt_audit_row *rows = malloc(sizeof *rows * AUDIT_MAX);
    if (!rows)
        return pt__api_send_error(conn, rq, 500, "internal_error", "out of memory");
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
        return pt__api_send_error(conn, rq, 404, "not_found", msg);
    }
    if (rc) {
        free(rows);
        return pt__api_storage_error(conn, rq, rc);
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
        if (rows[i].refund_id[0])
            cJSON_AddStringToObject(e, "refund_id", rows[i].refund_id);
        if (rows[i].detail[0])
            cJSON_AddStringToObject(e, "detail", rows[i].detail);
        else
            cJSON_AddNullToObject(e, "detail");
        pt_rfc3339(rows[i].created_at, t);
        cJSON_AddStringToObject(e, "created_at", t);
        cJSON_AddItemToArray(data, e);
    }
    free(rows);
    return pt__api_send_json(conn, rq, 200, o);
}

/* Parks a long-poll (its connection stays suspended) until a commit adds
 * events, its deadline or a stop; 0 when one of them came since `seen` (the
 * caller queries again).  After a 1, rq belongs to whoever reposts it. */
int pt__api_park(struct pt_api *api, struct request *rq, uint64_t seen)
{
    pthread_mutex_lock(&api->mu);
    int ok = api->feed_version == seen && !api->stopping;
    if (ok) {
        rq->wnext = api->waiters;
        api->waiters = rq;
        pt__api_timer_kick(api, rq->poll_deadline_ms);
    }
    pthread_mutex_unlock(&api->mu);
    return ok;
}

api_outcome pt__api_events_feed(struct pt_api *api, struct MHD_Connection *conn, struct request *rq)
{
    char msg[160];
    int64_t after, limit, wait_s;
    if (!pt__api_query_int(conn, "after", 0, 0, INT64_MAX, &after, msg, sizeof msg) ||
        !pt__api_query_int(conn, "limit", 100, 1, EVENTS_MAX, &limit, msg, sizeof msg) ||
        !pt__api_query_int(conn, "wait", 0, 0, WAIT_MAX_S, &wait_s, msg, sizeof msg))
        return pt__api_send_error(conn, rq, 400, "invalid_request", msg);

    if (!rq->polling) { /* the first run; a parked request keeps its deadline */
        rq->polling = 1;
        rq->poll_deadline_ms = pt_host_mono_ms() + wait_s * 1000;
    }
    struct pt_event_row *rows = malloc(sizeof *rows * EVENTS_MAX);
    if (!rows)
        return pt__api_send_error(conn, rq, 500, "internal_error", "out of memory");
    int n = 0, rc;
    for (;;) {
        pthread_mutex_lock(&api->mu);
        uint64_t seen = api->feed_version;
        int stop = api->stopping;
        pthread_mutex_unlock(&api->mu);

        struct pt_store *st = pt_pool_get(api->pool);
        rc = st ? pt_store_events_list(st, after, (int)limit, rows, &n) : PT_EIO;
        pt_pool_put(api->pool, st);
        if (rc) {
            free(rows);
            return pt__api_storage_error(conn, rq, rc);
        }
        if (n > 0 || stop || pt_host_mono_ms() >= rq->poll_deadline_ms)
            break;
        /* Nothing yet: park until a commit adds events, the wait ends, or
         * we stop, holding no thread.  The version read before the query
         * closes the race with a commit between the query and the park. */
        if (pt__api_park(api, rq, seen)) {
            free(rows);
            return A_PARKED; /* rq is no longer ours to touch */
        }
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
        cJSON *payload = cJSON_Parse(rows[i].payload);
        if (payload && strncmp(rows[i].type, "refund.", 7) == 0) {
            /* {"refund":{...},"charge":{...}} (refunds.c) */
            cJSON *rf = cJSON_DetachItemFromObjectCaseSensitive(payload, "refund");
            cJSON *ch = cJSON_DetachItemFromObjectCaseSensitive(payload, "charge");
            if (rf)
                cJSON_AddItemToObject(e, "refund", rf);
            if (ch)
                cJSON_AddItemToObject(e, "charge", ch);
            cJSON_Delete(payload);
        } else if (payload) {
            cJSON_AddItemToObject(e, "charge", payload);
        }
        cJSON_AddItemToArray(data, e);
        next = rows[i].seq;
    }
    pt_event_rows_free(rows, n);
    free(rows);
    cJSON_AddNumberToObject(o, "next", (double)next);
    return pt__api_send_json(conn, rq, 200, o);
}

/* /v1/status's "clock" (SPEC 17): whether payterm may use the wall clock
 * now (it sends nothing while not), whether what it records is still
 * provisional, and the steps it saw. */
static void add_clock(struct pt_api *api, cJSON *o)
{
    if (!api->opt.hooks.clock)
        return;
    struct pt_clock_info ci;
    api->opt.hooks.clock(api->opt.hooks.ctx, &ci);
    cJSON *k = cJSON_AddObjectToObject(o, "clock");
    char t[32];
    cJSON_AddBoolToObject(k, "trusted", ci.trusted);
    cJSON_AddBoolToObject(k, "synchronized", ci.synced);
    cJSON_AddBoolToObject(k, "provisional", ci.provisional);
    pt_rfc3339(ci.wall_ms, t);
    cJSON_AddStringToObject(k, "wall", t);
    pt_rfc3339(ci.lane_ms, t);
    cJSON_AddStringToObject(k, "payterm", t);
    cJSON_AddNumberToObject(k, "steps", (double)ci.steps);
    cJSON_AddNumberToObject(k, "last_step_ms", (double)ci.last_step_ms);
}

/*
 * The storage as /healthz, /v1/status and /metrics tell it (SPEC 5, 15):
 * the store's, or - while the store server is gone - the lane's own
 * queue's, when that takes the charges.  st may be NULL (no connection).
 */
static void storage_health(struct pt_api *api, struct pt_store *st, struct pt_store_health *h)
{
    if (st) {
        pt_store_health(st, h);
    } else {
        memset(h, 0, sizeof *h);
        h->free_bytes = -1;
        snprintf(h->reason, sizeof h->reason, "no connection to the database");
    }
    const struct pt_intake_fallback *fb = &api->opt.intake.fallback;
    if (!h->writable && fb->st) {
        struct pt_store_health local;
        pthread_mutex_lock(fb->mu);
        pt_store_health(fb->st, &local);
        pthread_mutex_unlock(fb->mu);
        if (local.writable)
            *h = local;
    }
}

/* The counts /v1/status (final_states 0) and /metrics (1) report, and the
 * storage's health; st may be NULL (no connection: PT_EIO). */
static int read_counts(struct pt_api *api, struct pt_store *st, int final_states,
                       struct pt_store_stats *s, struct pt_refund_stats *rs,
                       struct pt_store_health *h)
{
    int rc = st ? pt_store_stats(st, final_states, s) : PT_EIO;
    if (rc == PT_OK)
        rc = pt_store_refund_stats(st, rs);
    if (rc == PT_OK)
        storage_health(api, st, h);
    return rc;
}

api_outcome pt__api_status(struct pt_api *api, struct MHD_Connection *conn, struct request *rq)
{
    struct pt_store_stats s;
    struct pt_refund_stats rs;
    struct pt_store_health h;
    struct pt_store *st = pt_pool_get(api->pool);
    int rc = read_counts(api, st, 0, &s, &rs, &h);
    pt_pool_put(api->pool, st);
    if (rc)
        return pt__api_storage_error(conn, rq, rc);
    int64_t now = pt_host_now_ms();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "online",
                          api->opt.hooks.online && api->opt.hooks.online(api->opt.hooks.ctx));
    /* Each configured gateway, as the sync engine last saw it (the operator
     * page shows which one is down). */
    cJSON *gws = cJSON_AddObjectToObject(o, "gateways");
    const struct pt_online_ops *on = &api->opt.intake.online;
    for (int i = 0; i < pt_gateway_count(); i++) {
        const char *name = pt_gateway_at(i)->name;
        if (!pt_config_gateway_configured(api->opt.cfg, name))
            continue;
        cJSON *g = cJSON_AddObjectToObject(gws, name);
        cJSON_AddBoolToObject(g, "online", !on->reachable || on->reachable(on->ctx, name));
        /* SPEC 18: when that was last found out (a probe, or a request's
         * verdict); null before the first. */
        int64_t at =
            api->opt.hooks.last_probe ? api->opt.hooks.last_probe(api->opt.hooks.ctx, name) : 0;
        if (at > 0) {
            char t[32];
            pt_rfc3339(at, t);
            cJSON_AddStringToObject(g, "last_probe_at", t);
        } else {
            cJSON_AddNullToObject(g, "last_probe_at");
        }
    }
    pt_queue_json(o, &s, now);
    cJSON_AddNumberToObject(o, "pending", (double)s.by_state[PT_STATE_PENDING]);
    cJSON_AddNumberToObject(o, "unknown", (double)s.by_state[PT_STATE_UNKNOWN]);
    cJSON_AddNumberToObject(o, "processing", (double)s.by_state[PT_STATE_PROCESSING]);
    cJSON_AddNumberToObject(o, "review", (double)s.review);
    cJSON *rf = cJSON_AddObjectToObject(o, "refunds");
    cJSON_AddNumberToObject(rf, "queued", (double)rs.by_state[PT_STATE_INIT]);
    cJSON_AddNumberToObject(rf, "pending", (double)rs.by_state[PT_STATE_PENDING]);
    cJSON_AddNumberToObject(rf, "unknown", (double)rs.by_state[PT_STATE_UNKNOWN]);
    cJSON_AddNumberToObject(rf, "processing", (double)rs.by_state[PT_STATE_PROCESSING]);
    cJSON_AddNumberToObject(rf, "review", (double)rs.review);
    /* Whether a charge would be stored now, as /healthz says it, and why
     * not: the operator page shows it instead of "online". */
    cJSON *sg = cJSON_AddObjectToObject(o, "storage");
    cJSON_AddBoolToObject(sg, "writable", h.writable);
    if (h.free_bytes >= 0)
        cJSON_AddNumberToObject(sg, "free_bytes", (double)h.free_bytes);
    if (!h.writable)
        cJSON_AddStringToObject(sg, "reason", h.reason);
    add_clock(api, o);
    cJSON_AddStringToObject(o, "version", PT_VERSION);
    return pt__api_send_json(conn, rq, 200, o);
}

/* GET /healthz/live: the listener's thread answers, nothing else is
 * asked (no database, no writer turn) - the watchdog's probe, which must
 * not fail because a commit is slow (pt_api_probe). */
api_outcome pt__api_live(struct MHD_Connection *conn, struct request *rq)
{
    static const char body[] = "{\"status\":\"live\"}";
    return pt__api_send_text(conn, rq, 200, "application/json", (char *)body, sizeof body - 1, 0,
                             0);
}

api_outcome pt__api_healthz(struct pt_api *api, struct MHD_Connection *conn, struct request *rq)
{
    struct pt_store_health h;
    struct pt_store *st = pt_pool_get(api->pool);
    storage_health(api, st, &h);
    pt_pool_put(api->pool, st);
    int ok = h.writable;
    const char *body = ok ? "{\"status\":\"ok\"}" : "{\"status\":\"storage_unavailable\"}";
    return pt__api_send_text(conn, rq, ok ? 200 : 503, "application/json", (char *)body,
                             strlen(body), 0, ok ? 0 : 2);
}

/* The metrics text (a few KiB) in the one growable buffer type (buf.h). */
#define METRICS_MAX (256 * 1024)
#define tprintf pt_buf_printf

api_outcome pt__api_metrics(struct pt_api *api, struct MHD_Connection *conn, struct request *rq)
{
    struct pt_store_stats s;
    struct pt_refund_stats rs;
    struct pt_store_health h;
    struct pt_store *st = pt_pool_get(api->pool);
    int rc = read_counts(api, st, 1, &s, &rs, &h);
    /* What each gateway's latest reconciled day found (SPEC 19). */
    int64_t recon[PT_GW_MAX][PT_RECON__KINDS];
    char recon_date[PT_GW_MAX][11];
    int recon_has[PT_GW_MAX] = {0};
    for (int g = 0; rc == PT_OK && g < pt_gateway_count() && g < PT_GW_MAX; g++) {
        int r = pt_recon_latest_counts(st, pt_gateway_at(g)->name, recon[g], recon_date[g]);
        recon_has[g] = r == PT_OK;
        rc = r == PT_ENOTFOUND ? PT_OK : r;
    }
    pt_pool_put(api->pool, st);
    if (rc)
        return pt__api_storage_error(conn, rq, rc);
    int64_t now = pt_host_now_ms();
    struct pt_buf t;
    pt_buf_init(&t, METRICS_MAX);
    tprintf(&t, "# HELP payterm_charges Charges by state.\n# TYPE payterm_charges gauge\n");
    for (int i = 0; i < PT_STATE__COUNT; i++)
        tprintf(&t, "payterm_charges{state=\"%s\"} %lld\n", pt_state_name((enum pt_state)i),
                (long long)s.by_state[i]);
    tprintf(&t,
            "# HELP payterm_charges_review Charges waiting for an operator.\n"
            "# TYPE payterm_charges_review gauge\npayterm_charges_review %lld\n",
            (long long)s.review);
    tprintf(&t, "# HELP payterm_refunds Refunds in progress by state.\n"
                "# TYPE payterm_refunds gauge\n");
    for (int i = 0; i < PT_STATE__COUNT; i++)
        if (pt_refund_state_valid((enum pt_state)i) && !pt_state_is_final((enum pt_state)i))
            tprintf(&t, "payterm_refunds{state=\"%s\"} %lld\n", pt_state_name((enum pt_state)i),
                    (long long)rs.by_state[i]);
    tprintf(&t,
            "# HELP payterm_refunds_review Refunds waiting for an operator.\n"
            "# TYPE payterm_refunds_review gauge\npayterm_refunds_review %lld\n",
            (long long)rs.review);
    tprintf(&t, "# HELP payterm_reconciliation_discrepancies What the latest reconciled bill "
                "date of each gateway found, by kind.\n"
                "# TYPE payterm_reconciliation_discrepancies gauge\n");
    for (int g = 0; g < pt_gateway_count() && g < PT_GW_MAX; g++)
        for (int k = 0; recon_has[g] && k < PT_RECON__KINDS; k++)
            tprintf(&t, "payterm_reconciliation_discrepancies{gateway=\"%s\",kind=\"%s\"} %lld\n",
                    pt_gateway_at(g)->name, pt_recon_kind_name((enum pt_recon_kind)k),
                    (long long)recon[g][k]);
    tprintf(&t, "# HELP payterm_reconciliation_bill_date That bill date, as YYYYMMDD.\n"
                "# TYPE payterm_reconciliation_bill_date gauge\n");
    for (int g = 0; g < pt_gateway_count() && g < PT_GW_MAX; g++)
        if (recon_has[g] && strlen(recon_date[g]) == 10)
            tprintf(&t, "payterm_reconciliation_bill_date{gateway=\"%s\"} %.4s%.2s%.2s\n",
                    pt_gateway_at(g)->name, recon_date[g], recon_date[g] + 5, recon_date[g] + 8);
    tprintf(&t,
            "# HELP payterm_queue_depth Charges queued offline (INIT).\n"
            "# TYPE payterm_queue_depth gauge\npayterm_queue_depth %lld\n",
            (long long)s.by_state[PT_STATE_INIT]);
    tprintf(&t,
            "# HELP payterm_queue_oldest_age_seconds Age of the oldest queued charge.\n"
            "# TYPE payterm_queue_oldest_age_seconds gauge\n"
            "payterm_queue_oldest_age_seconds %lld\n",
            s.queue_oldest_created_at ? (long long)((now - s.queue_oldest_created_at) / 1000)
                                      : 0LL);
    tprintf(&t, "# HELP payterm_queue_amount Queued amount by currency, minor units.\n"
                "# TYPE payterm_queue_amount gauge\n");
    for (int i = 0; i < s.ncur; i++)
        tprintf(&t, "payterm_queue_amount{currency=\"%s\"} %lld\n", s.queue[i].currency,
                (long long)s.queue[i].amount);
    tprintf(&t,
            "# HELP payterm_storage_writable 1 when a charge would be stored now (/healthz).\n"
            "# TYPE payterm_storage_writable gauge\npayterm_storage_writable %d\n",
            h.writable ? 1 : 0);
    if (h.free_bytes >= 0)
        tprintf(&t,
                "# HELP payterm_storage_free_bytes Bytes free for the database on its file "
                "system.\n"
                "# TYPE payterm_storage_free_bytes gauge\npayterm_storage_free_bytes %lld\n",
                (long long)h.free_bytes);
    tprintf(&t,
            "# HELP payterm_online 1 when the gateways were reachable at last contact.\n"
            "# TYPE payterm_online gauge\npayterm_online %d\n",
            api->opt.hooks.online && api->opt.hooks.online(api->opt.hooks.ctx) ? 1 : 0);
    if (api->opt.hooks.clock) {
        struct pt_clock_info ci;
        api->opt.hooks.clock(api->opt.hooks.ctx, &ci);
        tprintf(&t,
                "# HELP payterm_clock_trusted 1 when the wall clock may be used (SPEC 17).\n"
                "# TYPE payterm_clock_trusted gauge\npayterm_clock_trusted %d\n"
                "# HELP payterm_clock_provisional 1 while recorded times wait for a trusted "
                "clock.\n"
                "# TYPE payterm_clock_provisional gauge\npayterm_clock_provisional %d\n"
                "# HELP payterm_clock_steps_total Steps of the wall clock seen.\n"
                "# TYPE payterm_clock_steps_total counter\npayterm_clock_steps_total %lld\n",
                ci.trusted, ci.provisional, (long long)ci.steps);
    }
    tprintf(&t, "# HELP payterm_gateway_online 1 when the gateway answered at last contact.\n"
                "# TYPE payterm_gateway_online gauge\n");
    for (int g = 0; g < pt_gateway_count(); g++)
        tprintf(&t, "payterm_gateway_online{gateway=\"%s\"} %d\n", pt_metric_gateway_name(g),
                atomic_load(&pt_metrics.online[g]));
    tprintf(&t, "# HELP payterm_sync_attempts_total Gateway sends by outcome.\n"
                "# TYPE payterm_sync_attempts_total counter\n");
    for (int g = 0; g < pt_gateway_count(); g++)
        for (int o = 0; o < PT_MS__COUNT; o++)
            tprintf(&t, "payterm_sync_attempts_total{gateway=\"%s\",outcome=\"%s\"} %llu\n",
                    pt_metric_gateway_name(g), pt_metric_sync_name(o),
                    (unsigned long long)atomic_load(&pt_metrics.sync_attempts[g][o]));
    tprintf(&t, "# HELP payterm_notifications_total Gateway notifications by result.\n"
                "# TYPE payterm_notifications_total counter\n");
    for (int g = 0; g < pt_gateway_count(); g++)
        for (int o = 0; o < PT_MN__COUNT; o++)
            tprintf(&t, "payterm_notifications_total{gateway=\"%s\",result=\"%s\"} %llu\n",
                    pt_metric_gateway_name(g), pt_metric_notify_name(o),
                    (unsigned long long)atomic_load(&pt_metrics.notifications[g][o]));
    tprintf(&t,
            "# HELP payterm_idempotency_total Idempotency guard outcomes.\n"
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
    tprintf(&t,
            "payterm_http_request_duration_seconds_sum %.6f\n"
            "payterm_http_request_duration_seconds_count %llu\n",
            atomic_load(&pt_metrics.latency_sum_us) / 1e6,
            (unsigned long long)atomic_load(&pt_metrics.latency_count));
    size_t len = 0;
    char *text = pt_buf_take(&t, &len);
    if (!text)
        return pt__api_send_error(conn, rq, 500, "internal_error", "out of memory");
    api_outcome ret = pt__api_send_text(conn, rq, 200, "text/plain; version=0.0.4; charset=utf-8",
                                        text, len, 0, 0);
    free(text);
    return ret;
}
