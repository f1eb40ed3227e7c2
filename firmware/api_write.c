/*
 * api_write.c - the local API's write handlers: the guarded operations of core/intake.c, sync,
 * notifications.
 */
#include "api_impl.h"

/* ---- write handlers ------------------------------------------------------------------ */

api_outcome pt__api_guarded(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                            const char *order_id, order_op op)
{
    const char *key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Idempotency-Key");
    struct pt_store *st = pt_pool_get(api->pool);
    struct pt_reply rep;
    int64_t now = pt_host_now_ms();
    if (!st && api->opt.intake.fallback.st && (!order_id || op == pt_intake_cancel)) {
        /* No connection to the store server at all (store.fallback local):
         * the charge goes to the lane's own queue, and one queued there is
         * canceled there. */
        if (order_id)
            op(&api->opt.intake, NULL, order_id, key, rq->body, rq->len, now, &rep);
        else
            pt_intake_create_charge_locally(&api->opt.intake, key, rq->body, rq->len, now, &rep);
        api_outcome ret = pt__api_send_reply(conn, rq, &rep);
        pt_reply_free(&rep);
        return ret;
    }
    if (!st)
        return pt__api_storage_error(conn, rq, PT_EIO);
    int rc = PT_OK;
    /* On the event loop, the commit joins the writer's batch; the loop
     * commits it once it has read every request that is in (settle_batch). */
    int defer = rq->on_loop && api->opt.writer;
    if (defer)
        pt_store_defer_commit(st, &rq->commit);
    if (order_id)
        op(&api->opt.intake, st, order_id, key, rq->body, rq->len, now, &rep);
    else if (rq->on_loop)
        rc =
            pt_intake_create_charge_nowait(&api->opt.intake, st, key, rq->body, rq->len, now, &rep);
    else
        pt_intake_create_charge(&api->opt.intake, st, key, rq->body, rq->len, now, &rep);
    int deferred = defer && pt_store_commit_deferred(st);
    if (defer)
        pt_store_defer_commit(st, NULL);
    pt_pool_put(api->pool, st);
    if (rc == PT_EAGAIN) { /* it goes to the gateway: a worker's job */
        /* Its rollback may have joined the batch (it read other requests'
         * rows): that place is settled now, not left open for nobody. */
        if (deferred)
            pt_store_writer_flush(api->opt.writer, &rq->commit);
        return A_TO_WORKER;
    }
    if (deferred) {
        rq->reply = rep;
        return A_SETTLING;
    }
    return pt__api_send_reply(conn, rq, &rep);
}

/* GET /v1/charges/{order_id}/payment (may ask the gateway: an API thread). */
api_outcome pt__api_payment_link(struct pt_api *api, struct MHD_Connection *conn,
                                 struct request *rq, const char *order_id)
{
    struct pt_store *st = pt_pool_get(api->pool);
    if (!st)
        return pt__api_storage_error(conn, rq, PT_EIO);
    struct pt_reply rep;
    pt_intake_payment(&api->opt.intake, st, order_id, &rep);
    pt_pool_put(api->pool, st);
    return pt__api_send_reply(conn, rq, &rep);
}

api_outcome pt__api_sync_now(struct pt_api *api, struct MHD_Connection *conn, struct request *rq)
{
    if (api->opt.hooks.sync_now)
        api->opt.hooks.sync_now(api->opt.hooks.ctx);
    const char *body = "{\"status\":\"sync started\"}";
    return pt__api_send_text(conn, rq, 202, "application/json", (char *)body, strlen(body), 0, 0);
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

api_outcome pt__api_notify(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                           const char *gateway)
{
    if (!api->opt.hooks.notify)
        return pt__api_send_error(conn, rq, 404, "not_found", "notifications are not handled here");
    struct pt_http_response msg = {0};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, collect_header, &msg);
    msg.body = rq->body;
    msg.body_len = rq->len;
    struct pt_store *st = pt_pool_get(api->pool);
    if (!st) {
        msg.body = NULL;
        pt_http_response_free(&msg);
        return pt__api_storage_error(conn, rq, PT_EIO);
    }
    struct pt_reply rep = {0};
    const char *type = "application/json";
    api->opt.hooks.notify(api->opt.hooks.ctx, st, gateway, &msg, &rep, &type);
    pt_pool_put(api->pool, st);
    msg.body = NULL; /* owned by rq */
    pt_http_response_free(&msg);
    api_outcome ret = pt__api_send_text(conn, rq, rep.status, type, rep.body, rep.len, 0, 0);
    pt_reply_free(&rep);
    return ret;
}

/* ---- the day's reports (SPEC 19) ------------------------------------------------------ */

api_outcome pt__api_report_x(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                             const char *arg)
{
    (void)arg;
    struct pt_store *st = pt_pool_get(api->pool);
    if (!st)
        return pt__api_storage_error(conn, rq, PT_EIO);
    struct pt_reply rep;
    pt_intake_report_x(&api->opt.intake, st, pt_host_now_ms(), &rep);
    pt_pool_put(api->pool, st);
    return pt__api_send_reply(conn, rq, &rep);
}

api_outcome pt__api_report_z(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                             const char *number)
{
    struct pt_store *st = pt_pool_get(api->pool);
    if (!st)
        return pt__api_storage_error(conn, rq, PT_EIO);
    struct pt_reply rep;
    pt_intake_report_z(&api->opt.intake, st, number, &rep);
    pt_pool_put(api->pool, st);
    return pt__api_send_reply(conn, rq, &rep);
}

/* GET /v1/reconciliations/{gateway}/{date}: arg is "gateway/date". */
api_outcome pt__api_reconciliation(struct pt_api *api, struct MHD_Connection *conn,
                                   struct request *rq, const char *gateway_date)
{
    char gateway[ROUTE_ARG_MAX];
    snprintf(gateway, sizeof gateway, "%s", gateway_date);
    char *date = strchr(gateway, '/');
    if (date)
        *date++ = '\0';
    struct pt_store *st = pt_pool_get(api->pool);
    if (!st)
        return pt__api_storage_error(conn, rq, PT_EIO);
    struct pt_reply rep;
    pt_intake_reconciliation(&api->opt.intake, st, gateway, date ? date : "", &rep);
    pt_pool_put(api->pool, st);
    return pt__api_send_reply(conn, rq, &rep);
}

/* A write of the lane as a whole (no order in its path), under its
 * Idempotency-Key: the intake operation op answers. */
typedef int (*lane_op)(const struct pt_intake *, struct pt_store *, const char *, const char *,
                       size_t, int64_t, struct pt_reply *);
static api_outcome keyed(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                         lane_op op)
{
    const char *key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Idempotency-Key");
    struct pt_store *st = pt_pool_get(api->pool);
    if (!st)
        return pt__api_storage_error(conn, rq, PT_EIO);
    struct pt_reply rep;
    op(&api->opt.intake, st, key, rq->body, rq->len, pt_host_now_ms(), &rep);
    pt_pool_put(api->pool, st);
    return pt__api_send_reply(conn, rq, &rep);
}

/* POST /v1/reconciliations: a worker's (it downloads the gateway's bill). */
api_outcome pt__api_reconcile(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                              const char *arg)
{
    (void)arg;
    return keyed(api, conn, rq, pt_intake_reconcile);
}

/* POST /v1/reports/z: a worker's (a close reads every row of the day). */
api_outcome pt__api_close_day(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                              const char *arg)
{
    (void)arg;
    return keyed(api, conn, rq, pt_intake_close_day);
}
