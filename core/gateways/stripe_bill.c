/*
 * stripe_bill.c - the day's charges and refunds at Stripe (see
 * stripe_bill.h).  Amounts are read back through Stripe's own units
 * (stripe.c's table, SPEC 18), as every other Stripe answer is.
 */
#include "stripe_bill.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "err.h"
#include "gwcommon.h"
#include "stripe.h"

extern const struct pt_gateway pt_gateway_stripe;

__attribute__((format(printf, 4, 5))) static int fail(char *err, size_t errlen, int item,
                                                      const char *fmt, ...)
{
    char where[48];
    if (item < 0)
        snprintf(where, sizeof where, "Stripe list: ");
    else
        snprintf(where, sizeof where, "Stripe list, data[%d]: ", item);
    va_list ap;
    va_start(ap, fmt);
    int rc = pt_recon_vfail(err, errlen, where, fmt, ap);
    va_end(ap);
    return rc;
}

/* A string member that fits cap (NULL or absent: ""); 0 when it does not. */
static int str_member(const cJSON *o, const char *name, char *out, size_t cap)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    out[0] = '\0';
    if (!v || cJSON_IsNull(v))
        return 1;
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= cap)
        return 0;
    memcpy(out, v->valuestring, strlen(v->valuestring) + 1);
    return 1;
}

/* An integer member: exact, within [min, 2^53]. */
static int int_member(const cJSON *o, const char *name, int64_t min, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int64_t)v->valuedouble ||
        v->valuedouble < (double)min || v->valuedouble > 9007199254740992.0)
        return 0;
    *out = (int64_t)v->valuedouble;
    return 1;
}

static struct pt_recon_record *new_row(struct pt_stripe_bill *b)
{
    return pt_recon_push(&b->rows, &b->n, &b->cap);
}

static int item(const cJSON *it, int i, int refunds, int64_t from_s, int64_t to_s,
                struct pt_stripe_bill *b, char *err, size_t errlen)
{
    const char *want = refunds ? "refund" : "charge";
    const char *obj = pt__jstr(it, "object");
    if (!cJSON_IsObject(it) || !obj || strcmp(obj, want) != 0)
        return fail(err, errlen, i, "not a %s object", want);
    char id[PT_SHORT_MAX], status[32], cur_lc[8], pi[PT_SHORT_MAX];
    if (!str_member(it, "id", id, sizeof id) || !id[0])
        return fail(err, errlen, i, "id: missing or longer than %d bytes", PT_SHORT_MAX - 1);
    if (!str_member(it, "status", status, sizeof status) || !status[0])
        return fail(err, errlen, i, "status of %s: missing", id);
    int64_t created = 0, units = 0;
    if (!int_member(it, "created", 0, &created) || created < from_s || created >= to_s)
        return fail(err, errlen, i, "created of %s: not a time of the day asked for", id);
    snprintf(b->last_id, sizeof b->last_id, "%s", id);
    /* pending, failed, canceled, requires_action: no money moved; nor by a
     * charge authorised and not captured (captured: false). */
    const cJSON *captured = cJSON_GetObjectItemCaseSensitive(it, "captured");
    if (!refunds && captured && !cJSON_IsBool(captured))
        return fail(err, errlen, i, "captured of %s: not a boolean", id);
    if (strcmp(status, "succeeded") != 0 || cJSON_IsFalse(captured)) {
        b->skipped++;
        return PT_OK;
    }
    if (!int_member(it, "amount", 1, &units))
        return fail(err, errlen, i, "amount of %s: not an integer above 0", id);
    char cur[4];
    if (!str_member(it, "currency", cur_lc, sizeof cur_lc) || pt__currency_upper(cur_lc, cur))
        return fail(err, errlen, i, "currency of %s: not a currency", id);
    int64_t minor = 0;
    if (pt__amount_in(&pt_gateway_stripe, cur, units, &minor) != PT_OK || minor <= 0)
        return fail(err, errlen, i, "amount of %s: %lld is no amount of %s", id, (long long)units,
                    cur);
    if (!str_member(it, "payment_intent", pi, sizeof pi))
        return fail(err, errlen, i, "payment_intent of %s: not an id", id);
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(it, "metadata");
    if (md && !cJSON_IsObject(md) && !cJSON_IsNull(md))
        return fail(err, errlen, i, "metadata of %s: not an object", id);
    struct pt_recon_record *r = new_row(b);
    if (!r)
        return PT_ENOMEM;
    r->refund = refunds;
    r->amount = minor;
    memcpy(r->currency, cur, 4);
    /* A charge's PaymentIntent is payterm's gateway_trade_no; a charge
     * made without one is named by its own id. */
    const char *trade_no = pi[0] || refunds ? pi : id;
    memcpy(r->gateway_trade_no, trade_no, strlen(trade_no) + 1);
    if ((md && (!str_member(md, "order_id", r->order_id, sizeof r->order_id) ||
                (refunds && !str_member(md, "refund_id", r->refund_id, sizeof r->refund_id))))) {
        b->n--;
        return fail(err, errlen, i, "metadata of %s: order_id or refund_id not an id of 1-%d bytes",
                    id, PT_ORDER_ID_MAX - 1);
    }
    if (refunds)
        memcpy(r->gateway_refund_no, id, strlen(id) + 1);
    return PT_OK;
}

int pt_stripe_bill_page(const char *json, size_t len, int refunds, int64_t from_s, int64_t to_s,
                        struct pt_stripe_bill *b, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    size_t keep = b->n;
    cJSON *o = cJSON_ParseWithLength(json, len);
    const char *obj = pt__jstr(o, "object");
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(o, "data");
    const cJSON *more = cJSON_GetObjectItemCaseSensitive(o, "has_more");
    int rc = PT_OK;
    if (!cJSON_IsObject(o) || !obj || strcmp(obj, "list") != 0)
        rc = fail(err, errlen, -1, "not a list object");
    else if (!cJSON_IsArray(data))
        rc = fail(err, errlen, -1, "data: not an array");
    else if (!cJSON_IsBool(more))
        rc = fail(err, errlen, -1, "has_more: not a boolean");
    else if (cJSON_GetArraySize(data) > PT_STRIPE_BILL_PAGE)
        rc = fail(err, errlen, -1, "more than %d items on a page", PT_STRIPE_BILL_PAGE);
    int i = 0;
    const cJSON *it;
    if (rc == PT_OK)
        cJSON_ArrayForEach(it, data)
        {
            if ((rc = item(it, i++, refunds, from_s, to_s, b, err, errlen)))
                break;
        }
    if (rc == PT_OK && cJSON_IsTrue(more) && i == 0)
        rc = fail(err, errlen, -1, "has_more with no items: no page to go on from");
    if (rc == PT_OK)
        b->has_more = cJSON_IsTrue(more);
    else
        b->n = keep; /* nothing of a page that does not hold together */
    cJSON_Delete(o);
    return rc;
}

void pt_stripe_bill_free(struct pt_stripe_bill *b)
{
    free(b->rows);
    memset(b, 0, sizeof *b);
}

int pt_stripe_bill_request(const struct pt_gw_config *cfg, int refunds, int64_t from_s,
                           int64_t to_s, const char *after, struct pt_http_request *out)
{
    char path[256];
    if (after && (!after[0] || strlen(after) > 100 || !pt__id_safe(after)))
        return PT_EINVAL;
    int n = snprintf(path, sizeof path,
                     "/v1/%s?created%%5Bgte%%5D=%lld&created%%5Blt%%5D=%lld&limit=%d%s%s",
                     refunds ? "refunds" : "charges", (long long)from_s, (long long)to_s,
                     PT_STRIPE_BILL_PAGE, after ? "&starting_after=" : "", after ? after : "");
    if (n < 0 || (size_t)n >= sizeof path)
        return PT_EINVAL;
    int rc = pt__stripe_get(cfg, path, out);
    if (rc == PT_OK)
        out->max_body = PT_STRIPE_BILL_PAGE_MAX_BYTES; /* 100 objects, pretty-printed */
    return rc;
}

/* Stripe pages one list of a day holds at most (100 objects each). */
#define PAGES_MAX 1000

/* One list of the day, paged, into rows with day. */
static int fetch_list(const struct pt_gw_config *cfg, struct pt_gw_exchange *x, int refunds,
                      int64_t from_s, int64_t to_s, int day, struct pt_recon_rows *rows, char *why,
                      size_t whylen)
{
    struct pt_stripe_bill b = {0};
    int rc = PT_OK;
    for (int page = 0; rc == PT_OK; page++) {
        struct pt_http_request req = {0};
        struct pt_http_response resp = {0};
        if (page == PAGES_MAX) {
            snprintf(why, whylen, "more than %d pages of %s in a day", PAGES_MAX,
                     refunds ? "refunds" : "charges");
            rc = PT_ETOOBIG;
        } else if ((rc = pt_stripe_bill_request(cfg, refunds, from_s, to_s, page ? b.last_id : NULL,
                                                &req)) != PT_OK) {
            snprintf(why, whylen, "the list request cannot be made (%s)", pt_strerror(rc));
        } else if ((rc = x->send(x->ctx, &req, &resp)) == PT_OK) {
            if (resp.status != 200) {
                snprintf(why, whylen, "GET /v1/%s answered HTTP %d: %.200s",
                         refunds ? "refunds" : "charges", resp.status, resp.body ? resp.body : "");
                rc = PT_EPARSE;
            } else {
                rc = pt_stripe_bill_page(resp.body, resp.body_len, refunds, from_s, to_s, &b, why,
                                         whylen);
            }
            pt_http_response_free(&resp);
            if (rc == PT_OK && !b.has_more)
                break;
        }
    }
    for (size_t i = 0; rc == PT_OK && i < b.n; i++) {
        struct pt_recon_record *r = pt_recon_push(&rows->rows, &rows->n, &rows->cap);
        if (!r) {
            rc = PT_ENOMEM;
            break;
        }
        *r = b.rows[i];
        r->day = day;
    }
    pt_stripe_bill_free(&b);
    return rc;
}

int pt__stripe_fetch_bill(const struct pt_gw_config *cfg, struct pt_gw_exchange *x,
                          const char *date, int day, struct pt_recon_rows *rows, char *why,
                          size_t whylen)
{
    int64_t start;
    if (pt_recon_date_start(date, 0, &start) != PT_OK)
        return PT_EINVAL;
    size_t keep = rows->n;
    int64_t from = start / 1000, to = from + 86400;
    int rc = fetch_list(cfg, x, 0, from, to, day, rows, why, whylen);
    if (rc == PT_OK)
        rc = fetch_list(cfg, x, 1, from, to, day, rows, why, whylen);
    if (rc != PT_OK)
        rows->n = keep;
    return rc;
}
