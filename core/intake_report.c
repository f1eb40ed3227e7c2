/*
 * intake_report.c - the day's reports through the local API (SPEC 19):
 * GET /v1/reports/x, POST /v1/reports/z (the day's close, guarded by its
 * Idempotency-Key like every write), GET /v1/reports/z/{z}.
 */
#include "intake_impl.h"
#include "report.h"

#include <unistd.h>

/* A close's key is the lane's own: on a shared store (PostgreSQL) the
 * keys of every lane are in one table, and another lane's close under the
 * same key is not this lane's answer.  The lane goes into the scope and the
 * fingerprint after the path, where no request path can put it. */
#define PATH_CLOSE "/v1/reports/z"

void pt_intake_lane_name(const struct pt_intake *in, char out[PT_CFG_LANE_MAX])
{
    /* store.lane_id; a standalone lane without one is named after its host,
     * so two lanes of a shop still tell their reports apart. */
    if (in->cfg && in->cfg->lane_id[0]) {
        snprintf(out, PT_CFG_LANE_MAX, "%s", in->cfg->lane_id);
        return;
    }
    char host[256] = "";
    size_t n = 0;
    if (gethostname(host, sizeof host - 1) == 0)
        for (const char *p = host; *p && n + 1 < PT_CFG_LANE_MAX; p++)
            if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                *p == '_' || *p == '.' || *p == '-')
                out[n++] = *p;
    out[n] = '\0';
    if (!n)
        snprintf(out, PT_CFG_LANE_MAX, "lane");
}

/* A read that failed: nothing was asked to be stored. */
static void unreadable(struct pt_reply *out, struct pt_store *st, int rc)
{
    pt_log_error("reports: storage failure: %s (%s)", pt_strerror(rc), pt_store_errmsg(st));
    pt_reply_error(out, 503, "storage_unavailable", "the reports could not be read (%s); retry",
                   pt_strerror(rc));
    out->retry_after_s = RETRY_STORAGE_S;
}

/* A report's text as the answer (taken over: out frees it). */
static void reply_report(struct pt_reply *out, int status, char *json)
{
    out->status = status;
    pt__intake_set_body(out, json);
    out->len = strlen(json);
}

int pt_intake_report_x(const struct pt_intake *in, struct pt_store *st, int64_t now,
                       struct pt_reply *out)
{
    memset(out, 0, sizeof *out);
    char lane[PT_CFG_LANE_MAX];
    pt_intake_lane_name(in, lane);
    char *json = NULL;
    int rc = pt_report_x(st, lane, now, &json);
    if (rc) {
        unreadable(out, st, rc);
        return rc;
    }
    reply_report(out, 200, json);
    return PT_OK;
}

/* "1".."9007199254740991": a report's number as a path gives it. */
static int64_t report_number(const char *s)
{
    int64_t v = 0;
    if (!s || !*s || *s == '0' || strlen(s) > 16)
        return 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return 0;
        v = v * 10 + (*s - '0');
    }
    return v <= 9007199254740991LL ? v : 0;
}

int pt_intake_report_z(const struct pt_intake *in, struct pt_store *st, const char *number,
                       struct pt_reply *out)
{
    (void)in;
    memset(out, 0, sizeof *out);
    int64_t z = report_number(number);
    if (!z) {
        pt_reply_error(out, 400, "invalid_request",
                       "path: '%s' is not a report number (1, 2, ... without leading zeros)",
                       number ? number : "");
        return PT_OK;
    }
    char *json = NULL;
    int rc = pt_store_z_get(st, z, &json);
    if (rc == PT_ENOTFOUND) {
        int64_t last = 0, to = 0;
        char hash[65];
        int lrc = pt_store_z_last(st, &last, &to, hash);
        pt_reply_error(out, 404, "not_found", "no Z report %lld on this lane (the last is %lld)",
                       (long long)z, lrc == PT_OK ? (long long)last : 0LL);
        return PT_OK;
    }
    if (rc) {
        unreadable(out, st, rc);
        return rc;
    }
    reply_report(out, 200, json);
    return PT_OK;
}

int pt_intake_close_day(const struct pt_intake *in, struct pt_store *st, const char *key_header,
                        const char *body, size_t len, int64_t now, struct pt_reply *out)
{
    memset(out, 0, sizeof *out);
    char lane[PT_CFG_LANE_MAX], scope[PT_CFG_LANE_MAX + 32];
    pt_intake_lane_name(in, lane);
    snprintf(scope, sizeof scope, PATH_CLOSE " lane=%s", lane);
    struct guard g;
    struct pt_idem_result res;
    int64_t z = 0;
    if (!pt__intake_guard_enter(in, st, scope, key_header, body, len, 0, now, &g, out, &res))
        return out->status == 503 ? PT_ESTORAGE : PT_OK;
    int rc = PT_OK;
    if (len > 0) {
        /* The close takes nothing from the client: what it closes is the
         * lane's.  A body is refused (and the refusal is the key's answer)
         * rather than ignored. */
        pt_reply_error(out, 400, "invalid_request",
                       "body: POST /v1/reports/z takes no body (send none, Content-Length: 0)");
    } else {
        char *json = NULL;
        if ((rc = pt_report_close(st, lane, now, &json, &z)) != PT_OK)
            goto storage;
        reply_report(out, 201, json);
    }
    rc = pt__intake_guard_complete(st, &g, out, now);
    if (rc == PT_OK && z && out->status == 201 && !out->replayed)
        pt_log_info("day closed: Z report %lld of lane %s", (long long)z, lane);
    goto out;
storage:
    pt__intake_guard_storage(st, &g, out, rc);
out:
    return pt__intake_guard_end(&g, &res, out, rc);
}
