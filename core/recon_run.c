/*
 * recon_run.c - a reconciliation run: the local records of three days, the
 * comparison, the run's JSON, its reviews (see recon_run.h).
 */
#include "recon_run.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "charges.h"
#include "gateway.h"
#include "err.h"
#include "log.h"

#define DAY_MS 86400000LL

int pt_recon_date_after_today(const char *gateway, const char *date, int64_t now_ms)
{
    char today[11];
    pt_recon_previous_date(gateway, now_ms + DAY_MS, today);
    return strcmp(date, today) > 0; /* ISO dates order as text */
}

int pt_recon_date_archived(const char *gateway, const char *date, int64_t now_ms,
                           int64_t retention_days)
{
    int64_t start;
    return pt_recon_day_start(gateway, date, &start) == PT_OK &&
           start - DAY_MS < now_ms - retention_days * DAY_MS;
}

void pt_recon_previous_date(const char *gateway, int64_t now_ms, char out[11])
{
    int off = pt_gateway_bill_offset_min(gateway);
    pt_recon_date_of(now_ms - DAY_MS, off > 0 ? off : 0, out);
}

int pt_recon_day_start(const char *gateway, const char *date, int64_t *start)
{
    int off = pt_gateway_bill_offset_min(gateway);
    return off < 0 ? PT_EINVAL : pt_recon_date_start(date, off, start);
}

struct collect {
    struct pt_recon_record *rows;
    size_t n, cap;
    int64_t start; /* the bill date's 00:00 */
};

static int collect_row(void *ctx, const struct pt_recon_record *r, int64_t at)
{
    struct collect *c = ctx;
    struct pt_recon_record *o = pt_recon_push(&c->rows, &c->n, &c->cap);
    if (!o)
        return PT_ENOMEM;
    *o = *r;
    int64_t off = at - c->start;
    o->day = off < 0 ? -1 : off < DAY_MS ? 0 : 1;
    return PT_OK;
}

int pt_recon_local(struct pt_store *st, const char *gateway, const char *date,
                   struct pt_recon_record **rows, size_t *n)
{
    struct collect c = {0};
    *rows = NULL;
    *n = 0;
    int rc = pt_recon_day_start(gateway, date, &c.start);
    for (int refunds = 0; refunds < 2 && rc == PT_OK; refunds++)
        rc = pt_store_recon_local(st, gateway, refunds, c.start - DAY_MS, c.start + 2 * DAY_MS,
                                  collect_row, &c);
    if (rc) {
        free(c.rows);
        return rc;
    }
    *rows = c.rows;
    *n = c.n;
    return PT_OK;
}

/* ---- the run's JSON ---- */

static int add_text(cJSON *o, const char *name, const char *v)
{
    return !v || !*v || cJSON_AddStringToObject(o, name, v) != NULL;
}

static int add_int(cJSON *o, const char *name, int64_t v)
{
    return cJSON_AddNumberToObject(o, name, (double)v) != NULL;
}

static cJSON *head(const char *gateway, const char *date, const char *state, int64_t now)
{
    char at[32];
    pt_rfc3339(now, at);
    cJSON *o = cJSON_CreateObject();
    if (!o || !add_text(o, "gateway", gateway) || !add_text(o, "date", date) ||
        !add_text(o, "state", state) || !add_text(o, "run_at", at)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static int add_totals(cJSON *o, const char *name, const char *count_name,
                      const struct pt_recon_totals *t)
{
    cJSON *x = cJSON_AddObjectToObject(o, name);
    return x && add_int(x, count_name, t->trades) && add_int(x, "amount", t->amount) &&
           add_int(x, "refunds", t->refunds) && add_int(x, "refunded", t->refunded);
}

static cJSON *discrepancy_json(const struct pt_recon_discrepancy *d)
{
    cJSON *o = cJSON_CreateObject();
    int ok = o && add_text(o, "kind", pt_recon_kind_name(d->kind)) &&
             add_text(o, "order_id", d->order_id) && add_text(o, "refund_id", d->refund_id) &&
             add_text(o, "gateway_trade_no", d->gateway_trade_no) &&
             add_text(o, "gateway_refund_no", d->gateway_refund_no) &&
             add_int(o, "amount", d->amount) && add_text(o, "currency", d->currency);
    /* A currency mismatch names both amounts too: what the shop took and
     * what the gateway's books say, each in its own currency. */
    if (ok && (d->kind == PT_RECON_AMOUNT_MISMATCH || d->kind == PT_RECON_REFUND_AMOUNT_MISMATCH ||
               d->kind == PT_RECON_CURRENCY_MISMATCH))
        ok = add_int(o, "amount_local", d->amount_local) &&
             add_int(o, "amount_gateway", d->amount_gateway);
    if (ok && d->kind == PT_RECON_CURRENCY_MISMATCH)
        ok = add_text(o, "currency_local", d->currency_local) &&
             add_text(o, "currency_gateway", d->currency_gateway);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static char *print(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

static char *done_json(const char *gateway, const char *date, const struct pt_recon_bill *bill,
                       int64_t now, const struct pt_recon_result *res)
{
    cJSON *o = head(gateway, date, "done", now);
    if (!o || !add_text(o, "source", bill->source) ||
        !add_text(o, "coverage", bill->local ? "local" : "bill") ||
        !add_totals(o, "bill", "trades", &res->bill) ||
        !add_totals(o, "local", "charges", &res->local) || !add_int(o, "matched", res->matched)) {
        cJSON_Delete(o);
        return NULL;
    }
    cJSON *a = cJSON_AddArrayToObject(o, "discrepancies");
    for (size_t i = 0; a && i < res->n; i++) {
        cJSON *d = discrepancy_json(&res->d[i]);
        if (!d || !cJSON_AddItemToArray(a, d)) {
            cJSON_Delete(d);
            a = NULL;
        }
    }
    if (!a) {
        cJSON_Delete(o);
        return NULL;
    }
    return print(o);
}

/* ---- reviews ---- */

/* 1 when the charge's trail holds this reason's review_raised since its
 * review was last cleared: an operator who cleared it has seen it, and a
 * new finding of the same kind (another refund, another day) raises it
 * again. */
static int already_audited(struct pt_store *st, int64_t charge_id, const char *reason, int *rc)
{
    enum { MAX = 512 };
    struct pt_audit_row *rows = malloc(MAX * sizeof *rows);
    int n = 0, found = 0;
    if (!rows) {
        *rc = PT_ENOMEM;
        return 0;
    }
    if ((*rc = pt_store_audit_list(st, charge_id, MAX, rows, &n)) == PT_OK)
        for (int i = 0; i < n; i++) {
            const char *d = rows[i].detail;
            size_t dl = strlen(d), rl = strlen(reason);
            if (!strcmp(rows[i].cause, "review_cleared"))
                found = 0;
            else if (!strcmp(rows[i].cause, "review_raised") && dl >= rl &&
                     !strcmp(d + dl - rl, reason))
                found = 1;
        }
    free(rows);
    return found;
}

/* Raises the review of the local charge d concerns, once per kind. */
static int raise_review(struct pt_store *st, const struct pt_recon_discrepancy *d,
                        const char *actor, int64_t now)
{
    if (!d->order_id[0])
        return PT_OK; /* the gateway's money for an order payterm never named */
    struct pt_charge c;
    int rc = pt_store_charge_get(st, d->order_id, &c);
    if (rc == PT_ENOTFOUND)
        return PT_OK; /* money for an order this store never took: gateway_only says it */
    if (rc)
        return rc;
    char reason[64];
    snprintf(reason, sizeof reason, "reconciliation_%s", pt_recon_kind_name(d->kind));
    if (already_audited(st, c.id, reason, &rc) || rc)
        return rc;
    rc = pt_charge_review(st, &c, 1, reason, actor, now);
    return rc == PT_EEXIST ? PT_OK : rc;
}

/* ---- runs ---- */

static int store_run(struct pt_store *st, const char *gateway, const char *date, const char *state,
                     const char *body, const struct pt_recon_result *res, const char *actor,
                     int64_t now)
{
    int rc = pt_store_begin(st);
    if (rc)
        return rc;
    rc = pt_store_recon_insert(st, gateway, date, state, body, now);
    for (size_t i = 0; res && rc == PT_OK && i < res->n; i++)
        rc = raise_review(st, &res->d[i], actor, now);
    if (rc) {
        pt_store_rollback(st);
        return rc;
    }
    return pt_store_commit(st);
}

int pt_recon_run(struct pt_store *st, const char *gateway, const char *date,
                 const struct pt_recon_bill *bill, const char *actor, int64_t now, char **body,
                 size_t *found)
{
    *body = NULL;
    *found = 0;
    if (pt_gateway_bill_offset_min(gateway) < 0 || !pt_recon_date_ok(date))
        return PT_EINVAL;
    struct pt_recon_record *local = NULL;
    size_t nlocal = 0;
    int rc = pt_recon_local(st, gateway, date, &local, &nlocal);
    if (rc)
        return rc;
    struct pt_recon_result res;
    rc = pt_recon_compare(bill->rows, bill->n, local, nlocal, &res);
    free(local);
    if (rc)
        return rc;
    char *json = done_json(gateway, date, bill, now, &res);
    if (!json)
        rc = PT_ENOMEM;
    else
        rc = store_run(st, gateway, date, "done", json, &res, actor, now);
    if (rc == PT_OK) {
        *body = json;
        *found = res.n;
        if (res.n)
            pt_log_warn("reconciliation %s %s: %zu discrepancies, %lld matched", gateway, date,
                        res.n, (long long)res.matched);
        else
            pt_log_info("reconciliation %s %s: %lld matched, no discrepancy", gateway, date,
                        (long long)res.matched);
    } else {
        free(json);
    }
    pt_recon_result_free(&res);
    return rc;
}

int pt_recon_run_unfinished(struct pt_store *st, const char *gateway, const char *date,
                            const char *state, const char *error, int64_t now, char **body)
{
    *body = NULL;
    if (pt_gateway_bill_offset_min(gateway) < 0 || !pt_recon_date_ok(date))
        return PT_EINVAL;
    cJSON *o = head(gateway, date, state, now);
    if (o && !add_text(o, "error", error)) {
        cJSON_Delete(o);
        o = NULL;
    }
    char *json = print(o);
    if (!json)
        return PT_ENOMEM;
    int rc = store_run(st, gateway, date, state, json, NULL, "reconcile", now);
    if (rc) {
        free(json);
        return rc;
    }
    pt_log_warn("reconciliation %s %s: %s%s%s", gateway, date, state, error ? ": " : "",
                error ? error : "");
    *body = json;
    return PT_OK;
}

int pt_recon_latest_counts(struct pt_store *st, const char *gateway,
                           int64_t counts[PT_RECON__KINDS], char date[11])
{
    memset(counts, 0, PT_RECON__KINDS * sizeof *counts);
    date[0] = '\0';
    char *body = NULL;
    int rc = pt_store_recon_latest_done(st, gateway, &body);
    if (rc)
        return rc;
    cJSON *o = cJSON_Parse(body);
    free(body);
    if (!o)
        return PT_ENOMEM; /* the run was stored by this code: only memory fails it */
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "date");
    if (cJSON_IsString(d))
        snprintf(date, 11, "%s", d->valuestring);
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(o, "discrepancies"))
    {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(d, "kind");
        for (int i = 0; i < PT_RECON__KINDS && cJSON_IsString(k); i++)
            if (!strcmp(k->valuestring, pt_recon_kind_name((enum pt_recon_kind)i)))
                counts[i]++;
    }
    cJSON_Delete(o);
    return PT_OK;
}
