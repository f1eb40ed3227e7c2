/*
 * intake_recon.c - reconciliation runs through the local API (SPEC 19):
 * GET /v1/reconciliations/{gateway}/{date}, the day's latest run as it was
 * stored.
 */
#include "intake_impl.h"
#include "recon_run.h"

int pt_intake_reconciliation(const struct pt_intake *in, struct pt_store *st, const char *gateway,
                             const char *date, struct pt_reply *out)
{
    (void)in;
    memset(out, 0, sizeof *out);
    if (pt_gateway_bill_offset_min(gateway) < 0) {
        pt_reply_error(out, 400, "invalid_request", "path: gateway '%s' is not one of %s",
                       gateway ? gateway : "", pt_gateway_names());
        return PT_OK;
    }
    if (!pt_recon_date_ok(date)) {
        pt_reply_error(out, 400, "invalid_request",
                       "path: date '%s' is not a bill date (YYYY-MM-DD, a real day)",
                       date ? date : "");
        return PT_OK;
    }
    char *json = NULL;
    int rc = pt_store_recon_latest(st, gateway, date, &json);
    if (rc == PT_ENOTFOUND) {
        pt_reply_error(out, 404, "not_found", "no reconciliation of %s for %s has run", gateway,
                       date);
        return PT_OK;
    }
    if (rc) {
        pt_log_error("reconciliation: storage failure: %s (%s)", pt_strerror(rc),
                     pt_store_errmsg(st));
        pt_reply_error(out, 503, "storage_unavailable",
                       "the reconciliation could not be read (%s); retry", pt_strerror(rc));
        out->retry_after_s = RETRY_STORAGE_S;
        return rc;
    }
    out->status = 200;
    pt__intake_set_body(out, json);
    out->len = strlen(json);
    return PT_OK;
}

#define PATH_RUNS "/v1/reconciliations"

/* Gives the key back (its lock committed, nothing else): the same request
 * may come again at once.  PT_OK, or the store's error. */
static int release_lock(struct pt_store *st, struct guard *g)
{
    int rc = pt_store_begin(st);
    if (rc != PT_OK)
        return rc;
    rc = pt_store_key_delete(st, g->scope, g->key, &g->lock);
    if (rc == PT_OK || rc == PT_ESTATE)
        rc = pt_store_commit(st);
    else
        pt_store_rollback(st);
    return rc;
}

int pt_intake_reconcile(const struct pt_intake *in, struct pt_store *st, const char *key_header,
                        const char *body, size_t len, int64_t now, struct pt_reply *out)
{
    memset(out, 0, sizeof *out);
    struct guard g;
    struct pt_idem_result res;
    int committed = 0; /* the key's lock is committed (naming no order) */
    if (!pt__intake_guard_enter(in, st, PATH_RUNS, key_header, body, len, 0, now, &g, out, &res))
        return out->status == 503 ? PT_ESTORAGE : PT_OK;
    int rc = PT_OK;
    char msg[512] = "";
    const cJSON *gw = cJSON_GetObjectItemCaseSensitive(g.json, "gateway");
    const cJSON *date = cJSON_GetObjectItemCaseSensitive(g.json, "date");
    static const char *const fields[] = {"gateway", "date", NULL};
    if (pt__intake_body_fields(&g, fields, msg, sizeof msg)) {
        if (!cJSON_IsString(gw) || pt_gateway_bill_offset_min(gw->valuestring) < 0)
            pt__intake_problem(msg, sizeof msg, "gateway", "required: a gateway's name");
        else if (!pt_gateway_find(gw->valuestring) || !in->cfg ||
                 !pt_config_gateway_configured(in->cfg, gw->valuestring))
            pt__intake_problem(msg, sizeof msg, "gateway", "is not configured on this lane");
        if (!cJSON_IsString(date) || !pt_recon_date_ok(date->valuestring))
            pt__intake_problem(msg, sizeof msg, "date",
                               "required: the bill date, YYYY-MM-DD (a real day)");
        else if (cJSON_IsString(gw) && pt_gateway_bill_offset_min(gw->valuestring) >= 0 &&
                 pt_recon_date_after_today(gw->valuestring, date->valuestring, now))
            pt__intake_problem(msg, sizeof msg, "date",
                               "is after today in the gateway's bill time zone: no bill yet");
        else if (cJSON_IsString(gw) && pt_gateway_bill_offset_min(gw->valuestring) >= 0 &&
                 in->cfg && (pt_store_caps(st) & PT_STORE_CAP_DATADIR_FILE) &&
                 pt_recon_date_archived(gw->valuestring, date->valuestring, now,
                                        in->cfg->retention_days))
            pt__intake_problem(msg, sizeof msg, "date",
                               "is older than retention_days allows (the day before it too): "
                               "its records may have moved to the archive");
    }
    char beyond[4];
    if (msg[0]) {
        pt_reply_error(out, 400, "invalid_request", "%s", msg);
        goto complete;
    }
    if (!pt_config_bill_covers(in->cfg, gw->valuestring, beyond)) {
        pt_reply_error(out, 422, "reconciliation_unsupported",
                       "gateway: %s's bill does not cover %s, which gateways.%s.currencies "
                       "allows (cross-border acquiring): not reconciled on the lane",
                       gw->valuestring, beyond, gw->valuestring);
        goto complete;
    }
    if (!in->online.reconcile) {
        pt_reply_error(out, 503, "offline_not_allowed",
                       "reconciling needs the gateway's bill, which this build cannot fetch");
        out->retry_after_s = RETRY_OFFLINE_S;
        pt__intake_guard_abandon(st, &g);
        goto out;
    }
    /* The key's lock is committed (held, naming no order: a run recovered
     * after a crash is run again, which is what a run is for), the
     * download runs outside any transaction (it takes seconds), the run is
     * stored in its own, then the key takes the run as its answer. */
    if ((rc = pt_store_key_set_order(st, g.scope, g.key, &g.lock, NULL)) ||
        (rc = pt_store_commit(st)))
        goto storage;
    g.in_txn = 0;
    committed = 1;
    char *run = NULL;
    rc = in->online.reconcile(in->online.ctx, st, gw->valuestring, date->valuestring, "api", now,
                              &run);
    if (rc == PT_EBUSY) {
        /* Another run is on (asked for, the daily one, another lane's):
         * the key is given back, so the same request can come again. */
        if ((rc = release_lock(st, &g)) != PT_OK)
            goto storage;
        committed = 0;
        pt_reply_error(out, 409, "reconciliation_running",
                       "a reconciliation is running on this store (%s %s or another): retry "
                       "with the same Idempotency-Key",
                       gw->valuestring, date->valuestring);
        out->retry_after_s = RETRY_OFFLINE_S;
        goto out;
    }
    if (rc == PT_OK && (rc = pt_store_begin(st)) != PT_OK)
        free(run);
    if (rc)
        goto storage;
    g.in_txn = 1;
    out->status = 201;
    pt__intake_set_body(out, run);
    out->len = strlen(run);
complete:
    if ((rc = pt__intake_guard_complete(st, &g, out, now)) == PT_OK || !committed)
        goto out;
    /* The run is stored (its own transaction), its answer is not: the key
     * is given back, and the same request runs the day again. */
storage:
    pt__intake_guard_storage(st, &g, out, rc);
    if (committed && release_lock(st, &g) != PT_OK)
        pt_log_warn("reconciliation key %s: kept until its lock times out (%s)", g.key,
                    pt_strerror(rc)); /* then a retry takes it over and runs again */
    if (committed)
        pt_reply_error(out, 503, "storage_unavailable",
                       "the reconciliation's answer could not be stored (%s); retry with the "
                       "same Idempotency-Key: the day is run again",
                       pt_strerror(rc));
    out->retry_after_s = RETRY_STORAGE_S;
out:
    return pt__intake_guard_end(&g, &res, out, rc);
}
