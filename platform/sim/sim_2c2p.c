/*
 * sim_2c2p.c - the simulated 2C2P Payment Gateway (PGW) v4.3.
 *
 *   POST /payment/4.3/paymentToken     {"payload":"<JWT>"} -> {"payload":"<JWT>"}
 *   POST /payment/4.3/paymentInquiry   {"payload":"<JWT>"} -> {"payload":"<JWT>"}
 *
 * Requests and answers are JWTs (HS256) keyed with the merchant's secret
 * string.  A token that does not verify, or announces another algorithm, is
 * answered with a plain, unsigned {"respCode":"9042",...} as 2C2P answers
 * what it cannot authenticate; a malformed body gets 9004.
 *
 * One trade per invoiceNo: a repeat with the same parameters while unpaid
 * returns the same paymentToken; otherwise respCode 9015 (existing invoice
 * number), which the adapter resolves by inquiry.  The simulated customer
 * completes the redirect after the pay delay (...51: declined by the issuer,
 * ...52: never), and the result is POSTed as a backend notification (a JWT
 * payload) to the order's backendReturnUrl, at least twice.  2C2P has no
 * "close" for an unpaid token (it just expires), so there is no cancel: a
 * paymentExpiry ("yyyy-MM-dd HH:mm:ss", read in Bangkok time like 2C2P's
 * own times) is recorded, and past it nobody can pay the page (the inquiry
 * still answers 0001, pending).
 *
 *   POST /PaymentAction/2.0/action   Payment Maintenance (refunds)
 *
 * (also under /2C2PFrontend/, as 2C2P's sandbox writes it): a JWS (PS256,
 * the merchant's key) of a JWE (RSA-OAEP + A256GCM, to 2C2P's key) of a
 * <PaymentProcessRequest>, answered with the mirror image - keys of its own,
 * written into DIR (sim_files.c).  processType R refunds a paid trade: each
 * request is a new refund (2C2P's request carries no refund key, so a
 * resent refund is a second refund here, as it would be there), never more
 * than what is left; RF at once, or RP first and RF after the pay delay
 * with --pm-refund-pending.  RS lists the trade's refunds (refundList,
 * from the ledger); I tells the trade's status.  Faults narrowed by
 * "process_type" apply once the request is read (pt__sim_fault_for).
 */
#include "sim_int.h"

#include "buf.h"
#include "crypto.h"
#include "err.h"
#include "gateways/2c2p.h"
#include "gateways/2c2p_pm.h"
#include "gateways/jose.h"
#include "gateways/pmxml.h"
#include "gateways/jscan.h"
#include "money.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A line POST /_sim/ledger/forget left out of the gateway's books: for
 * 2C2P, which has no bill, what its inquiries no longer know. */
static int forgotten(const char *extra)
{
    cJSON *x = cJSON_Parse(extra);
    int yes = cJSON_GetObjectItemCaseSensitive(x, "bill_forgotten") != NULL;
    cJSON_Delete(x);
    return yes;
}

static void plain(struct sim_resp *rs, const char *code, const char *desc)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "respCode", code);
    cJSON_AddStringToObject(o, "respDesc", desc);
    pt__sim_resp_json(rs, 200, o);
    pt__sim_note(rs, "respCode %s", code);
}

/* Answers {"payload":"<JWT of text>"}. */
static void sealed(struct pt_sim *s, struct sim_resp *rs, const char *text)
{
    char *body = NULL;
    size_t blen = 0;
    if (pt_2c2p_seal(s->k.c2p_secret, strlen(s->k.c2p_secret), text, strlen(text), &body, &blen) !=
        PT_OK) {
        plain(rs, "0999", "System error");
        return;
    }
    pt__sim_resp_set(rs, 200, "application/json", body, blen);
    free(body);
}

static const char *resp_code(const struct sim_trade *t, const char **desc)
{
    if (strcmp(t->status, "captured") == 0) {
        *desc = "Success";
        return "0000";
    }
    if (strcmp(t->status, "declined") == 0) {
        *desc = "Insufficient funds (simulated issuer decline)";
        return "4051";
    }
    if (strcmp(t->status, "canceled") == 0) {
        *desc = "Transaction is cancelled";
        return "0003";
    }
    *desc = "Transaction is pending";
    return "0001";
}

/* The payment result (inquiry answer and notification payload), with the
 * amount written as the JSON number 2C2P uses (1000.00 THB -> 1000). */
static char *result_text(struct pt_sim *s, const struct sim_trade *t)
{
    char amount[PT_MONEY_DECIMAL_MAX], when[20] = "";
    const char *desc, *code = resp_code(t, &desc);
    if (pt_money_to_decimal(t->amount, t->currency, PT_MONEY_TRIM, amount, sizeof amount))
        snprintf(amount, sizeof amount, "0");
    if (t->paid_at || strcmp(code, "4051") == 0) {
        time_t tt = (time_t)((t->paid_at ? t->paid_at : t->updated_at) / 1000) + 7 * 3600;
        struct tm tm;
        gmtime_r(&tt, &tm); /* 2C2P answers in Bangkok time (UTC+7) */
        strftime(when, sizeof when, "%Y%m%d%H%M%S", &tm);
    }
    int done = strcmp(code, "0000") == 0 || strcmp(code, "4051") == 0;
    struct pt_buf b;
    pt_buf_init(&b, 8192);
    pt_buf_puts(&b, "{\"merchantID\":");
    pt_buf_json_string(&b, s->k.c2p_merchant_id);
    pt_buf_puts(&b, ",\"invoiceNo\":");
    pt_buf_json_string(&b, t->order_id);
    pt_buf_printf(&b, ",\"amount\":%s,\"currencyCode\":", amount);
    pt_buf_json_string(&b, t->currency);
    pt_buf_puts(&b, ",\"transactionDateTime\":");
    pt_buf_json_string(&b, when);
    pt_buf_printf(&b, ",\"agentCode\":\"%s\",\"channelCode\":\"%s\"", done ? "KTB" : "",
                  done ? "VI" : "");
    pt_buf_printf(&b, ",\"approvalCode\":\"%s\"", strcmp(code, "0000") == 0 ? "720931" : "");
    pt_buf_puts(&b, ",\"referenceNo\":");
    pt_buf_json_string(&b, done ? t->trade_no + 2 : "");
    pt_buf_puts(&b, ",\"tranRef\":");
    pt_buf_json_string(&b, done ? t->trade_no : "");
    pt_buf_printf(&b,
                  ",\"accountNo\":\"%s\",\"cardToken\":\"\",\"issuerCountry\":\"TH\","
                  "\"eci\":\"05\",\"installmentPeriod\":0,\"interestType\":\"\","
                  "\"interestRate\":0,\"installmentMerchantAbsorbRate\":0,"
                  "\"recurringUniqueID\":\"\",\"fxAmount\":0,\"fxRate\":0,"
                  "\"fxCurrencyCode\":\"\",\"userDefined1\":\"\",\"userDefined2\":\"\","
                  "\"userDefined3\":\"\",\"userDefined4\":\"\",\"userDefined5\":\"\","
                  "\"acquirerReferenceNo\":\"\",\"acquirerMerchantId\":\"\","
                  "\"cardType\":\"CREDIT\",\"idempotencyID\":\"\",\"paymentScheme\":\"VI\"",
                  done ? "411111XXXXXX1111" : "");
    pt_buf_printf(&b, ",\"respCode\":\"%s\",\"respDesc\":", code);
    pt_buf_json_string(&b, desc);
    pt_buf_putc(&b, '}');
    (void)s;
    return pt_buf_take(&b, NULL);
}

/* Queues the backend notification of t's result (lk held). */
static void notify(struct pt_sim *s, const struct sim_trade *t)
{
    cJSON *x = cJSON_Parse(t->extra);
    const char *url = pt__sim_json_str(x, "backend_url");
    char *text = result_text(s, t), *body = NULL;
    size_t blen = 0;
    const char *desc, *code = resp_code(t, &desc);
    if (text && pt_2c2p_seal(s->k.c2p_secret, strlen(s->k.c2p_secret), text, strlen(text), &body,
                             &blen) == PT_OK)
        pt__sim_notify(s, SIM_GW_2C2P, t->order_id, code, url, "application/json", body, blen, 0,
                       1);
    free(body);
    free(text);
    cJSON_Delete(x);
}

/* Opens the request JWT; answers and returns NULL when it cannot. */
static cJSON *open_request(struct pt_sim *s, const struct sim_req *rq, struct sim_resp *rs,
                           char **text, size_t *len)
{
    int rc =
        pt_2c2p_open(s->k.c2p_secret, strlen(s->k.c2p_secret), rq->body, rq->body_len, text, len);
    if (rc == PT_ESIG) {
        plain(rs, "9042",
              "Invalid JWT: the signature does not verify with the merchant secret "
              "key (HS256 only)");
        return NULL;
    }
    if (rc != PT_OK) {
        plain(rs, "9004", "The value is not valid: body must be {\"payload\":\"<JWT>\"}");
        return NULL;
    }
    cJSON *j = cJSON_ParseWithLength(*text, *len);
    const char *mid = pt__sim_json_str(j, "merchantID");
    if (!cJSON_IsObject(j) || !mid || strcmp(mid, s->k.c2p_merchant_id) != 0) {
        plain(rs, "9007", "Invalid merchant (merchantID)");
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

static void payment_token(struct sim_call *c, const struct sim_req *rq, struct sim_resp *rs)
{
    static const char *const amount_path[] = {"amount", NULL};
    struct pt_sim *s = c->s;
    char *text = NULL;
    size_t len = 0;
    struct sim_trade *t = NULL;
    cJSON *j = open_request(s, rq, rs, &text, &len);
    if (!j)
        goto out;
    const char *inv = pt__sim_json_str(j, "invoiceNo"), *desc = pt__sim_json_str(j, "description");
    const char *cur = pt__sim_json_str(j, "currencyCode");
    const char *burl = pt__sim_json_str(j, "backendReturnUrl");
    int64_t minor = 0;
    if (!inv || !*inv || strlen(inv) > 50 || !desc || !cur || strlen(cur) != 3) {
        plain(rs, "9005",
              "Some mandatory fields are missing (invoiceNo, description, amount, "
              "currencyCode)");
        goto out;
    }
    if (!pt_money_currency_valid(cur) ||
        pt_jscan_amount(text, len, amount_path, cur, &minor) != PT_OK || minor <= 0) {
        plain(rs, "9004", "The value is not valid (amount / currencyCode)");
        goto out;
    }
    const char *pe = pt__sim_json_str(j, "paymentExpiry");
    int64_t expire_at = 0;
    if (cJSON_GetObjectItemCaseSensitive(j, "paymentExpiry") &&
        (!pe || pt__sim_local_time(pe, "+07:00", &expire_at) != PT_OK)) {
        plain(rs, "9004", "The value is not valid (paymentExpiry: yyyy-MM-dd HH:mm:ss)");
        goto out;
    }
    char hash[65], basis[640];
    snprintf(basis, sizeof basis, "%lld|%s|%s|%s|%s", (long long)minor, cur, desc, burl ? burl : "",
             pe ? pe : "");
    pt__sim_sha256_hex(basis, strlen(basis), hash);
    if (pt__sim_commit_gate(c, rs))
        goto out;
    t = calloc(1, sizeof *t);
    if (!t) {
        plain(rs, "0999", "System error");
        goto out;
    }
    pt__sim_lock(s);
    int rc = pt__sim_trade_get(s, SIM_GW_2C2P, inv, t);
    char answer[1200];
    if (rc == PT_OK) {
        pt__sim_unlock(s);
        cJSON *x = cJSON_Parse(t->extra);
        if (strcmp(t->params_hash, hash) != 0 || strcmp(t->status, "pending") != 0 ||
            pt__sim_expired(s, t)) {
            plain(rs, "9015", "Existing invoice number");
        } else {
            snprintf(answer, sizeof answer,
                     "{\"webPaymentUrl\":\"%s\",\"paymentToken\":\"%s\",\"respCode\":\"0000\","
                     "\"respDesc\":\"Success\"}",
                     pt__sim_json_str(x, "url"), pt__sim_json_str(x, "token"));
            sealed(s, rs, answer);
            pt__sim_note(rs, "%s repeat, same token", inv);
        }
        cJSON_Delete(x);
        goto out;
    }
    memset(t, 0, sizeof *t);
    t->gw = SIM_GW_2C2P;
    snprintf(t->order_id, sizeof t->order_id, "%s", inv);
    pt__sim_random_digits(s, t->trade_no, 16);
    snprintf(t->method, sizeof t->method, "redirect");
    t->amount = minor;
    memcpy(t->currency, cur, 3);
    snprintf(t->status, sizeof t->status, "pending");
    memcpy(t->params_hash, hash, sizeof hash);
    t->created_at = t->updated_at = pt__sim_now_ms(s);
    char token[80], url[200];
    pt__sim_random_alnum(s, token, 64);
    snprintf(url, sizeof url, "https://sandbox-pgw-ui.2c2p.com/payment/4.3/#/token/%s", token);
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "token", token);
    cJSON_AddStringToObject(x, "url", url);
    cJSON_AddStringToObject(x, "description", desc);
    if (burl && *burl)
        cJSON_AddStringToObject(x, "backend_url", burl);
    char *xt = cJSON_PrintUnformatted(x);
    cJSON_Delete(x);
    snprintf(t->extra, sizeof t->extra, "%s", xt ? xt : "{}");
    free(xt);
    if (pe)
        pt__sim_set_expiry(t, "paymentExpiry", pe, expire_at);
    pt__sim_schedule_pay(s, t);
    rc = pt__sim_trade_insert(s, t);
    pt__sim_unlock(s);
    if (rc != PT_OK) {
        plain(rs, "0999", "System error");
        goto out;
    }
    snprintf(answer, sizeof answer,
             "{\"webPaymentUrl\":\"%s\",\"paymentToken\":\"%s\",\"respCode\":\"0000\","
             "\"respDesc\":\"Success\"}",
             url, token);
    sealed(s, rs, answer);
    pt__sim_note(rs, "%s token issued", inv);
out:
    free(t);
    if (text)
        pt_zeroize(text, len);
    free(text);
    cJSON_Delete(j);
}

static void payment_inquiry(struct sim_call *c, const struct sim_req *rq, struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    char *text = NULL;
    size_t len = 0;
    cJSON *j = open_request(s, rq, rs, &text, &len);
    struct sim_trade *t = NULL;
    if (!j)
        goto out;
    const char *inv = pt__sim_json_str(j, "invoiceNo");
    if (!inv || !*inv) {
        plain(rs, "9005", "Some mandatory fields are missing (invoiceNo)");
        goto out;
    }
    t = calloc(1, sizeof *t);
    if (!t) {
        plain(rs, "0999", "System error");
        goto out;
    }
    pt__sim_lock(s);
    int rc = pt__sim_trade_get(s, SIM_GW_2C2P, inv, t);
    pt__sim_unlock(s);
    if (rc == PT_OK && forgotten(t->extra))
        rc = PT_ENOTFOUND; /* 2C2P's books are its inquiries (SPEC 19) */
    if (rc != PT_OK) {
        char answer[300];
        snprintf(answer, sizeof answer,
                 "{\"merchantID\":\"%s\",\"invoiceNo\":\"%.60s\",\"respCode\":\"2002\","
                 "\"respDesc\":\"Transaction not found\"}",
                 s->k.c2p_merchant_id, inv);
        sealed(s, rs, answer);
        pt__sim_note(rs, "%s not found", inv);
        goto out;
    }
    char *res = result_text(s, t);
    if (res)
        sealed(s, rs, res);
    else
        plain(rs, "0999", "System error");
    free(res);
    const char *desc;
    pt__sim_note(rs, "%s respCode %s", inv, resp_code(t, &desc));
out:
    free(t);
    if (text)
        pt_zeroize(text, len);
    free(text);
    cJSON_Delete(j);
}

/* ---- Payment Maintenance (refunds) ------------------------------------------- */

#define PM_REFUNDS_MAX PT_PMXML_REFUNDS_MAX

/* 2C2P's times, in Bangkok (UTC+7): yyyyMMddHHmmss (transactionDateTime,
 * dateTime), or ddMMyyHHmmss (timeStamp) when stamp is set. */
static void bangkok(int64_t ms, int stamp, char *out, size_t cap)
{
    time_t tt = (time_t)(ms / 1000) + 7 * 3600;
    struct tm tm;
    gmtime_r(&tt, &tm);
    char full[16];
    strftime(full, sizeof full, "%Y%m%d%H%M%S", &tm);
    if (stamp) /* ddMMyy: 2C2P's own two-digit year */
        snprintf(out, cap, "%.2s%.2s%.2s%.6s", full + 6, full + 4, full + 2, full + 8);
    else
        snprintf(out, cap, "%s", full);
}

/* What one answer says, beyond its fields. */
struct pm_answer {
    struct pt_pmxml_field f[24];
    int n;
    struct pt_pmxml_refund r[PM_REFUNDS_MAX];
    char rbuf[PM_REFUNDS_MAX][4][72]; /* the refunds' attribute texts */
    int nr;
    int list_at; /* -1: no refundList */
    char stamp[16];
};

/* A field of the answer; a NULL value (what the request did not say) is
 * left out. */
static void add(struct pm_answer *a, const char *name, const char *value)
{
    if (value && a->n < (int)(sizeof a->f / sizeof a->f[0]))
        a->f[a->n++] = (struct pt_pmxml_field){name, value};
}

static void answer_start(const struct pt_sim *s, struct pm_answer *a, const char *code,
                         const char *desc, const char *pt, const char *inv)
{
    memset(a, 0, sizeof *a);
    a->list_at = -1;
    bangkok(pt__sim_now_ms(s), 1, a->stamp, sizeof a->stamp);
    add(a, "version", PT_2C2P_PM_VERSION);
    add(a, "timeStamp", a->stamp);
    add(a, "respCode", code);
    add(a, "respDesc", desc);
    add(a, "processType", pt);
    add(a, "invoiceNo", inv);
}

/* Seals the answer to the merchant, signed with 2C2P's key. */
static void pm_send(struct pt_sim *s, struct sim_resp *rs, const struct pm_answer *a)
{
    char *xml = NULL, *tok = NULL;
    size_t len = 0, tlen = 0;
    if (pt_pmxml_write("PaymentProcessResponse", a->f, a->n, a->r, a->nr, a->list_at, &xml, &len) !=
            PT_OK ||
        pt_jose_seal(s->k.c2p_pm_key, s->k.c2p_pm_merchant_pub, NULL, NULL, xml, len, &tok,
                     &tlen) != PT_OK)
        pt__sim_resp_set(rs, 500, "text/plain", "cannot seal the answer", 22);
    else
        pt__sim_resp_set(rs, 200, "text/plain", tok, tlen);
    free(xml);
    free(tok);
}

static void pm_fail(struct pt_sim *s, struct sim_resp *rs, const char *code, const char *desc,
                    const char *pt, const char *inv)
{
    struct pm_answer *a = calloc(1, sizeof *a);
    if (!a) {
        pt__sim_resp_set(rs, 500, "text/plain", "out of memory", 13);
        return;
    }
    answer_start(s, a, code, desc, pt, inv);
    pm_send(s, rs, a);
    pt__sim_note(rs, "%s %s respCode %s", pt ? pt : "?", inv ? inv : "?", code);
    free(a);
}

/* The trade's own fields of an answer, in the order of 2C2P's examples;
 * a refund's number (refundReferenceNo) after the payment's. */
static void trade_fields(struct pm_answer *a, const struct sim_trade *t, const char *refund_no,
                         const char *when)
{
    add(a, "approvalCode", "720931");
    add(a, "referenceNo", t->trade_no + 2);
    if (refund_no)
        add(a, "refundReferenceNo", refund_no);
    add(a, "transactionDateTime", when);
    add(a, "maskedPan", "411111XXXXXX1111");
    add(a, "eci", "05");
}

static void card_fields(struct pm_answer *a)
{
    add(a, "paymentScheme", "VI");
    add(a, "processBy", "VI");
}

/* A refund number no refund of the ledger has (the refund's key here). */
static int new_refund_no(struct pt_sim *s, char out[8])
{
    struct sim_refund *old = malloc(sizeof *old);
    int rc = PT_ENOMEM;
    for (int i = 0; old && i < 50; i++) {
        pt__sim_random_digits(s, out, 7);
        if (out[0] == '0')
            out[0] = '3';
        rc = pt__sim_refund_get(s, SIM_GW_2C2P, "", out, old);
        if (rc == PT_ENOTFOUND) {
            rc = PT_OK;
            break;
        }
    }
    free(old);
    return rc;
}

/* Records the refund of minor (lk held): each request a new refund. */
static enum sim_refund_rc pm_refund_take(struct pt_sim *s, const struct sim_trade *t, int64_t minor,
                                         struct sim_refund *r)
{
    memset(r, 0, sizeof *r);
    r->gw = SIM_GW_2C2P;
    if (new_refund_no(s, r->refund_no) != PT_OK)
        return SIM_REFUND_ERROR;
    snprintf(r->refund_key, sizeof r->refund_key, "%s", r->refund_no);
    r->amount = minor;
    snprintf(r->status, sizeof r->status, s->pm_refund_pending ? "processing" : "succeeded");
    r->settle_at = s->pm_refund_pending ? pt__sim_now_ms(s) + s->pay_delay_ms : 0;
    char basis[32];
    snprintf(basis, sizeof basis, "%lld", (long long)minor);
    pt__sim_sha256_hex(basis, strlen(basis), r->params_hash);
    snprintf(r->extra, sizeof r->extra, "{}");
    return pt__sim_refund_take(s, t, r, NULL);
}

static void pm_refund(struct sim_call *c, const char *inv, const char *amount, struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    if (pt__sim_commit_gate(c, rs))
        return;
    struct sim_trade *t = calloc(1, sizeof *t);
    struct sim_refund *r = calloc(1, sizeof *r);
    struct pm_answer *a = calloc(1, sizeof *a);
    if (!t || !r || !a) {
        pm_fail(s, rs, "99", "System error", "R", inv);
        goto out;
    }
    int64_t minor = 0;
    enum sim_refund_rc rrc = SIM_REFUND_ERROR;
    pt__sim_lock(s);
    int rc = pt__sim_trade_get(s, SIM_GW_2C2P, inv, t);
    int bad =
        rc == PT_OK &&
        (!amount || pt_money_from_decimal(amount, strlen(amount), t->currency, &minor) != PT_OK ||
         minor <= 0);
    if (rc == PT_OK && !bad)
        rrc = pm_refund_take(s, t, minor, r);
    pt__sim_unlock(s);
    if (rc != PT_OK)
        pm_fail(s, rs, "16", "Transaction not found", "R", inv);
    else if (bad)
        pm_fail(s, rs, "99", "Invalid actionAmount", "R", inv);
    else if (rrc == SIM_REFUND_NOT_PAID)
        pm_fail(s, rs, "30", "Transaction is not settled and cannot be refunded", "R", inv);
    else if (rrc == SIM_REFUND_EXCEEDS)
        pm_fail(s, rs, "40", "Refund amount exceeds the refundable amount", "R", inv);
    else if (rrc != SIM_REFUND_NEW)
        pm_fail(s, rs, "99", "System error", "R", inv);
    else {
        char amt[PT_MONEY_DECIMAL_MAX], when[20];
        pt_money_to_decimal(minor, t->currency, PT_MONEY_FIXED, amt, sizeof amt);
        bangkok(t->paid_at ? t->paid_at : t->created_at, 0, when, sizeof when);
        answer_start(s, a, "00", "Success", "R", inv);
        add(a, "amount", amt);
        add(a, "status", s->pm_refund_pending ? "RP" : "RF");
        trade_fields(a, t, r->refund_no, when);
        card_fields(a);
        pm_send(s, rs, a);
        pt__sim_note(rs, "%s refund %s %s (%s)", inv, r->refund_no, amt,
                     s->pm_refund_pending ? "RP" : "RF");
    }
out:
    free(a);
    free(r);
    free(t);
}

struct refund_rows {
    struct sim_refund *rows;
    int n, overflow;
};

static int collect(void *ctx, const struct sim_refund *r)
{
    struct refund_rows *rr = ctx;
    if (rr->n == PM_REFUNDS_MAX) {
        rr->overflow = 1;
        return 1;
    }
    rr->rows[rr->n++] = *r;
    return 0;
}

/* The refundList of a trade, oldest first, from the ledger rows; a
 * refund forgotten by /_sim/ledger/forget is not in it. */
static void list_refunds(struct pm_answer *a, const struct refund_rows *rr, const char *cur)
{
    for (int i = rr->n - 1; i >= 0; i--) {
        const struct sim_refund *r = &rr->rows[i];
        if (forgotten(r->extra))
            continue;
        char(*b)[72] = a->rbuf[a->nr];
        if (pt_money_to_decimal(r->amount, cur, PT_MONEY_FIXED, b[0], sizeof b[0]) != PT_OK)
            continue;
        snprintf(b[1], sizeof b[1], "%s", strcmp(r->status, "succeeded") == 0 ? "RF" : "RP");
        snprintf(b[2], sizeof b[2], "%s", r->refund_no);
        bangkok(r->created_at, 0, b[3], sizeof b[3]);
        a->r[a->nr++] = (struct pt_pmxml_refund){b[0], b[1], b[2], b[3]};
    }
}

static void pm_refund_status(struct sim_call *c, const char *inv, const char *amount,
                             struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    struct sim_trade *t = calloc(1, sizeof *t);
    struct refund_rows rr = {.rows = calloc(PM_REFUNDS_MAX, sizeof *rr.rows)};
    struct pm_answer *a = calloc(1, sizeof *a);
    int64_t minor = 0;
    if (!t || !rr.rows || !a) {
        pm_fail(s, rs, "99", "System error", "RS", inv);
        goto out;
    }
    pt__sim_lock(s);
    int rc = pt__sim_trade_get(s, SIM_GW_2C2P, inv, t);
    if (rc == PT_OK)
        rc = pt__sim_refund_each(s, t->id, collect, &rr);
    pt__sim_unlock(s);
    if (rc == PT_ENOTFOUND) {
        pm_fail(s, rs, "16", "Transaction not found", "RS", inv);
        goto out;
    }
    /* RS names the original transaction's amount. */
    if (rc != PT_OK || rr.overflow || !amount ||
        pt_money_from_decimal(amount, strlen(amount), t->currency, &minor) != PT_OK ||
        minor != t->amount) {
        pm_fail(s, rs, "99", rc || rr.overflow ? "System error" : "Invalid actionAmount", "RS",
                inv);
        goto out;
    }
    char amt[PT_MONEY_DECIMAL_MAX], when[20];
    pt_money_to_decimal(t->amount, t->currency, PT_MONEY_FIXED, amt, sizeof amt);
    bangkok(t->paid_at ? t->paid_at : t->created_at, 0, when, sizeof when);
    answer_start(s, a, "00", "Success", "RS", inv);
    add(a, "amount", amt);
    add(a, "status", strcmp(t->status, "captured") == 0 ? "S" : "A");
    trade_fields(a, t, NULL, when);
    a->list_at = a->n;
    list_refunds(a, &rr, t->currency);
    card_fields(a);
    pm_send(s, rs, a);
    pt__sim_note(rs, "%s refund status: %d refund(s)", inv, a->nr);
out:
    free(a);
    free(rr.rows);
    free(t);
}

/* A transaction's status as 2C2P's inquiry writes it. */
static const char *transaction_status(struct pt_sim *s, const struct sim_trade *t)
{
    int64_t refunded = 0;
    if (strcmp(t->status, "captured") == 0) {
        pt__sim_refund_totals(s, t->id, NULL, &refunded, NULL);
        return refunded >= t->amount ? "RF" : "S";
    }
    return strcmp(t->status, "canceled") == 0   ? "V"
           : strcmp(t->status, "declined") == 0 ? "F"
                                                : "P";
}

static void pm_inquiry(struct sim_call *c, const char *inv, struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    struct sim_trade *t = calloc(1, sizeof *t);
    struct pm_answer *a = calloc(1, sizeof *a);
    if (!t || !a) {
        pm_fail(s, rs, "99", "System error", "I", inv);
        goto out;
    }
    pt__sim_lock(s);
    int rc = pt__sim_trade_get(s, SIM_GW_2C2P, inv, t);
    const char *status = rc == PT_OK ? transaction_status(s, t) : NULL;
    pt__sim_unlock(s);
    if (rc != PT_OK) {
        pm_fail(s, rs, "16", "Transaction not found", "I", inv);
        goto out;
    }
    char amt[PT_MONEY_DECIMAL_MAX], when[20];
    pt_money_to_decimal(t->amount, t->currency, PT_MONEY_FIXED, amt, sizeof amt);
    bangkok(t->paid_at ? t->paid_at : t->created_at, 0, when, sizeof when);
    answer_start(s, a, "00", "Success", "I", inv);
    add(a, "amount", amt);
    add(a, "status", status);
    trade_fields(a, t, NULL, when);
    card_fields(a);
    pm_send(s, rs, a);
    pt__sim_note(rs, "%s inquiry: %s", inv, status);
out:
    free(a);
    free(t);
}

/* POST /PaymentAction/2.0/action */
static void payment_action(struct sim_call *c, const struct sim_req *rq, struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    char *xml = NULL;
    size_t len = 0;
    struct pt_pmxml *m = calloc(1, sizeof *m);
    if (!m) {
        pt__sim_resp_set(rs, 500, "text/plain", "out of memory", 13);
        return;
    }
    int rc =
        pt_jose_open(s->k.c2p_pm_merchant_pub, s->k.c2p_pm_key, rq->body, rq->body_len, &xml, &len);
    if (rc != PT_OK) {
        pm_fail(s, rs, "99", pt_jose_why(rc), NULL, NULL);
        goto out;
    }
    if (pt_pmxml_parse(xml, len, "PaymentProcessRequest", m) != PT_OK) {
        pm_fail(s, rs, "99", "Invalid request: not a PaymentProcessRequest", NULL, NULL);
        goto out;
    }
    const char *pt = pt_pmxml_get(m, "processType"), *inv = pt_pmxml_get(m, "invoiceNo");
    const char *mid = pt_pmxml_get(m, "merchantID"), *amount = pt_pmxml_get(m, "actionAmount");
    pt__sim_fault_for(c, pt);
    if (!mid || strcmp(mid, s->k.c2p_merchant_id) != 0)
        pm_fail(s, rs, "99", "Invalid merchant (merchantID)", pt, inv);
    else if (!inv || !*inv || strlen(inv) > 50)
        pm_fail(s, rs, "99", "Invalid invoiceNo", pt, inv);
    else if (pt && strcmp(pt, "R") == 0)
        pm_refund(c, inv, amount, rs);
    else if (pt && strcmp(pt, "RS") == 0)
        pm_refund_status(c, inv, amount, rs);
    else if (pt && strcmp(pt, "I") == 0)
        pm_inquiry(c, inv, rs);
    else
        pm_fail(s, rs, "99", "processType not supported by the simulator (R, RS, I)", pt, inv);
out:
    if (xml)
        pt_zeroize(xml, len);
    free(xml);
    pt_pmxml_free(m);
    free(m);
}

static int pm_path(const char *path)
{
    return strcmp(path, "/PaymentAction/2.0/action") == 0 ||
           strcmp(path, "/2C2PFrontend/PaymentAction/2.0/action") == 0;
}

static void handle(struct sim_call *c, const struct sim_req *rq, struct sim_resp *rs)
{
    if (strcmp(rq->method, "POST") != 0)
        pt__sim_resp_set(rs, 405, "text/plain", "method not allowed", 18);
    else if (pm_path(rq->path))
        payment_action(c, rq, rs);
    else if (strcmp(rq->path, "/payment/4.3/paymentToken") == 0)
        payment_token(c, rq, rs);
    else if (strcmp(rq->path, "/payment/4.3/paymentInquiry") == 0)
        payment_inquiry(c, rq, rs);
    else
        pt__sim_resp_set(rs, 404, "text/plain", "not found", 9);
}

static void autopay(struct pt_sim *s, struct sim_trade *t)
{
    if (pt__sim_customer_pays(s, t, NULL) == PT_OK)
        notify(s, t);
}

static int note_ok(int status, const char *body, size_t len)
{
    (void)body;
    (void)len;
    return status == 200;
}

static void error_500(struct pt_sim *s, struct sim_resp *rs)
{
    (void)s;
    static const char body[] = "<html><body><h1>500 Internal Server Error</h1></body></html>";
    pt__sim_resp_set(rs, 500, "text/html", body, sizeof body - 1);
}

const struct sim_gateway pt__sim_2c2p = {
    .name = "2c2p",
    .handle = handle,
    .autopay = autopay,
    .note_headers = NULL,
    .note_ok = note_ok,
    .error_500 = error_500,
};
