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
    if (pt_recon_bill_offset_min(gateway) < 0) {
        pt_reply_error(out, 400, "invalid_request",
                       "path: gateway '%s' is not one of alipay, wechat, stripe, 2c2p",
                       gateway ? gateway : "");
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
