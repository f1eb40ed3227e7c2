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
 */
#include "sim_int.h"

#include "buf.h"
#include "crypto.h"
#include "err.h"
#include "gateways/2c2p.h"
#include "gateways/jscan.h"
#include "money.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    if (pt__sim_commit_gate(c) != 0) {
        rs->drop = 1;
        goto out;
    }
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

static void handle(struct sim_call *c, const struct sim_req *rq, struct sim_resp *rs)
{
    if (strcmp(rq->method, "POST") != 0)
        pt__sim_resp_set(rs, 405, "text/plain", "method not allowed", 18);
    else if (strcmp(rq->path, "/payment/4.3/paymentToken") == 0)
        payment_token(c, rq, rs);
    else if (strcmp(rq->path, "/payment/4.3/paymentInquiry") == 0)
        payment_inquiry(c, rq, rs);
    else
        pt__sim_resp_set(rs, 404, "text/plain", "not found", 9);
}

static void autopay(struct pt_sim *s, struct sim_trade *t)
{
    enum sim_rule rule = pt__sim_amount_rule(t->amount);
    t->pay_at = 0;
    t->updated_at = pt__sim_now_ms(s);
    if (rule == SIM_RULE_PAY) {
        snprintf(t->status, sizeof t->status, "captured");
        t->captures++;
        t->paid_at = t->updated_at;
    } else {
        snprintf(t->status, sizeof t->status, "declined");
    }
    if (pt__sim_trade_update(s, t) == PT_OK)
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
