/*
 * 2c2p.c - the 2C2P PGW v4.3 adapter: hosted payment page by redirect.
 *
 * POST /payment/4.3/paymentToken issues a token and the webPaymentUrl the
 * customer opens (-> PENDING); POST /payment/4.3/paymentInquiry tells what
 * became of an invoice.  respCode meanings chosen from 2C2P's v4.3 response
 * code list (see classify_inquiry below); 2C2P has no API to cancel an unpaid
 * redirect (the token expires), so CANCEL and CLOSE are PT_EUNSUPPORTED: a
 * payment page ends by the paymentExpiry its token was issued with (SPEC
 * 18), confirmed by paymentInquiry once it has passed.
 *
 * Refunds are not part of PGW: 2C2P documents them in its Payment
 * Maintenance API, with keys of their own (2c2p_pm.c).
 */
#include "gateways/2c2p.h"
#include "gateways/2c2p_pm.h"
#include "buf.h"
#include "err.h"
#include "gateway.h"
#include "gateways/gwcli.h"
#include "gateways/gwcommon.h"
#include "gateways/jscan.h"
#include "gateways/jwt.h"
#include "money.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* 2C2P's invoiceNo is at most 50 characters. */
#define C2P_INVOICE_MAX 50

/* ---- sealing ------------------------------------------------------------ */

int pt_2c2p_seal(const void *key, size_t keylen, const char *payload, size_t plen, char **body,
                 size_t *blen)
{
    char *token = NULL;
    int rc = pt_jwt_hs256_sign(key, keylen, payload, plen, &token);
    if (rc != PT_OK)
        return rc;
    struct pt_buf b;
    pt_buf_init(&b, PT_JWT_MAX + 32);
    pt_buf_puts(&b, "{\"payload\":\"");
    pt_buf_puts(&b, token); /* base64url and dots: nothing to escape */
    pt_buf_puts(&b, "\"}");
    free(token);
    *body = pt_buf_take(&b, blen);
    return *body ? PT_OK : PT_ENOMEM;
}

int pt_2c2p_open(const void *key, size_t keylen, const char *body, size_t len, char **payload,
                 size_t *plen)
{
    int rc = PT_EPARSE;
    cJSON *j = cJSON_ParseWithLength(body, len);
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "payload");
    if (!cJSON_IsObject(j))
        goto out;
    rc = PT_ENOTFOUND;
    if (!p)
        goto out;
    rc = PT_EPARSE;
    if (!cJSON_IsString(p))
        goto out;
    rc = pt_jwt_hs256_verify(key, keylen, p->valuestring, strlen(p->valuestring), payload, plen);
out:
    cJSON_Delete(j);
    return rc;
}

size_t pt_2c2p_minify(char *json, size_t len)
{
    size_t o = 0;
    int in_str = 0, esc = 0;
    for (size_t i = 0; i < len; i++) {
        char c = json[i];
        if (in_str) {
            if (esc)
                esc = 0;
            else if (c == '\\')
                esc = 1;
            else if (c == '"')
                in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            continue;
        }
        json[o++] = c;
    }
    if (o < len)
        json[o] = '\0';
    return o;
}

/* ---- build ----------------------------------------------------------------
 *
 * Amounts (SPEC 18): 2C2P's PGW v4.3 Payment Token Request Parameters
 * (developer.2c2p.com/docs/api-payment-token-request-parameter) give amount
 * as D(12,5), a decimal in the major unit, with currencyCode "as specified
 * in ISO 4217": the ISO decimal, whose at most four fraction digits always
 * fit the five 2C2P takes.  So every amount is representable and the
 * adapter has no amount_unit; answers are read back exactly with the ISO
 * exponent (pt_jscan_amount).
 */

/*
 * paymentExpiry, the page's expiry (SPEC 18): 2C2P's Payment Token Request
 * Parameters (developer.2c2p.com/docs/api-payment-token-request-parameter)
 * give it as "yyyy-MM-dd HH:mm:ss" - a local time without a zone.  The
 * copy of that page read for this (and 2C2P's guides) does not say whose
 * local time; 2C2P's own answers write their times in Bangkok time, so the
 * adapter writes it in gateways.2c2p.utc_offset, default +07:00 (the same
 * key SPEC 20 reads 2C2P's zone-less times with), which a merchant whose
 * 2C2P account keeps another zone sets to it.
 */
static void payment_expiry(int64_t ms, int offset_min, char out[20])
{
    time_t t = (time_t)(ms / 1000) + (time_t)offset_min * 60;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 20, "%Y-%m-%d %H:%M:%S", &tm);
}

static char *token_payload(const struct pt_gw_config *cfg, const struct pt_charge *c,
                           const struct pt_gw_env *env, int *rc)
{
    char amount[PT_MONEY_DECIMAL_MAX];
    *rc = pt_money_to_decimal(c->amount, c->currency, PT_MONEY_TRIM, amount, sizeof amount);
    if (*rc != PT_OK)
        return NULL;
    struct pt_buf b;
    pt_buf_init(&b, 8192);
    pt_buf_puts(&b, "{\"merchantID\":");
    pt_buf_json_string(&b, cfg->merchant_id);
    pt_buf_puts(&b, ",\"invoiceNo\":");
    pt_buf_json_string(&b, c->order_id);
    pt_buf_puts(&b, ",\"description\":");
    pt_buf_json_string(&b, c->subject[0] ? c->subject : c->order_id);
    pt_buf_printf(&b, ",\"amount\":%s,\"currencyCode\":", amount);
    pt_buf_json_string(&b, c->currency);
    if (env && env->expire_at_ms > 0) {
        char pe[20];
        payment_expiry(env->expire_at_ms, cfg->utc_offset_min, pe);
        pt_buf_puts(&b, ",\"paymentExpiry\":");
        pt_buf_json_string(&b, pe);
    }
    if (cfg->notify_url[0]) {
        pt_buf_puts(&b, ",\"backendReturnUrl\":");
        pt_buf_json_string(&b, cfg->notify_url);
    }
    pt_buf_putc(&b, '}');
    char *s = pt_buf_take(&b, NULL);
    *rc = s ? PT_OK : PT_ENOMEM;
    return s;
}

static char *inquiry_payload(const struct pt_gw_config *cfg, const struct pt_charge *c, int *rc)
{
    struct pt_buf b;
    pt_buf_init(&b, 4096);
    pt_buf_puts(&b, "{\"merchantID\":");
    pt_buf_json_string(&b, cfg->merchant_id);
    pt_buf_puts(&b, ",\"invoiceNo\":");
    pt_buf_json_string(&b, c->order_id);
    pt_buf_puts(&b, ",\"locale\":\"en\"}");
    char *s = pt_buf_take(&b, NULL);
    *rc = s ? PT_OK : PT_ENOMEM;
    return s;
}

static int c2p_build(const struct pt_gw_config *cfg, enum pt_gw_op op, const struct pt_charge *c,
                     const struct pt_gw_env *env, struct pt_http_request *out)
{
    int rc = PT_EINVAL;
    char *payload = NULL, *body = NULL;
    size_t blen = 0;
    if (op == PT_GW_CANCEL || op == PT_GW_CLOSE)
        return PT_EUNSUPPORTED;
    if (!cfg->secret_len || !cfg->merchant_id[0] || !cfg->endpoint[0] || !c->order_id[0] ||
        strlen(c->order_id) > C2P_INVOICE_MAX)
        return PT_EINVAL;
    if (op == PT_GW_PAY && strcmp(c->method, "redirect") != 0)
        return PT_EINVAL;
    payload = op == PT_GW_PAY ? token_payload(cfg, c, env, &rc) : inquiry_payload(cfg, c, &rc);
    if (!payload)
        return rc;
    rc = pt_2c2p_seal(cfg->secret, cfg->secret_len, payload, strlen(payload), &body, &blen);
    free(payload);
    if (rc != PT_OK)
        return rc;
    rc = pt__request_start(out, "POST", cfg->endpoint,
                           op == PT_GW_PAY ? "/payment/4.3/paymentToken"
                                           : "/payment/4.3/paymentInquiry");
    if (rc != PT_OK) {
        free(body);
        return rc;
    }
    pt__request_body(out, body, blen);
    rc = pt_http_request_add_header(out, "Content-Type", "application/json");
    if (rc == PT_OK)
        rc = pt_http_request_add_header(out, "Accept", "application/json");
    if (rc != PT_OK)
        pt_http_request_free(out);
    return rc;
}

/* ---- parse ---------------------------------------------------------------- */

static int code_is(const char *code, const char *want)
{
    return code && strcmp(code, want) == 0;
}

/* paymentToken: a token means the customer can now pay on 2C2P's page. */
static void classify_token(const cJSON *o, int sig, struct pt_gw_result *out)
{
    const char *code = pt__jstr(o, "respCode"), *desc = pt__jstr(o, "respDesc");
    const char *url = pt__jstr(o, "webPaymentUrl");
    if (sig && code_is(code, "0000") && url && *url) {
        pt__result(out, PT_OUTCOME_PENDING, code, desc);
        pt__copy(out->action_url, sizeof out->action_url, url);
    } else if (code_is(code, "0000")) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_response",
                   sig ? "paymentToken without webPaymentUrl" : "unsigned success");
    } else if (!code || code_is(code, "9015") || code_is(code, "0999")) {
        /* 9015 existing invoice: an earlier send got through; 0999 system error. */
        pt__result(out, PT_OUTCOME_AMBIGUOUS, code ? code : "malformed_response", desc);
    } else {
        pt__result(out, PT_OUTCOME_DECLINED, code, desc);
    }
}

/*
 * paymentInquiry respCodes (PGW 4.3 "Payment Response Code" list):
 * 0000 successful; 0001 pending; 1000-1005 waiting for the customer's
 * redirect/app/QR step; 2001 in progress; 0003 cancelled; 2002 not found;
 * 4xxx declined by the issuer/host (4200 is a tokenisation result, not a
 * payment: ambiguous); 0999/2003 and anything else: ambiguous.
 */
static enum pt_outcome inquiry_outcome(const char *code)
{
    if (!code || strlen(code) != 4)
        return PT_OUTCOME_AMBIGUOUS;
    if (code_is(code, "0000"))
        return PT_OUTCOME_SUCCESS;
    if (code_is(code, "0001") || code_is(code, "2001") ||
        (code[0] == '1' && code[1] == '0' && code[2] == '0' && code[3] <= '5'))
        return PT_OUTCOME_PENDING;
    if (code_is(code, "0003"))
        return PT_OUTCOME_CANCELED;
    if (code_is(code, "2002"))
        return PT_OUTCOME_NOT_FOUND;
    if (code[0] == '4' && !code_is(code, "4200"))
        return PT_OUTCOME_DECLINED;
    return PT_OUTCOME_AMBIGUOUS;
}

static void classify_inquiry(const char *text, size_t len, const cJSON *o, int sig,
                             struct pt_gw_result *out)
{
    static const char *const amount_path[] = {"amount", NULL};
    const char *code = pt__jstr(o, "respCode"), *desc = pt__jstr(o, "respDesc");
    enum pt_outcome oc = inquiry_outcome(code);
    /* An unsigned answer may say "not found" or "declined" but never more. */
    if (!sig && oc != PT_OUTCOME_NOT_FOUND && oc != PT_OUTCOME_DECLINED)
        oc = PT_OUTCOME_AMBIGUOUS;
    pt__result(out, oc, code ? code : "malformed_response", desc);
    /* In progress, or at the customer's redirect/app/QR step: someone is
     * paying - not a page nobody paid, even past its paymentExpiry. */
    out->paying = oc == PT_OUTCOME_PENDING && !code_is(code, "0001");
    if (!sig)
        return;
    pt__copy(out->trade_no, sizeof out->trade_no, pt__jstr(o, "tranRef"));
    const char *cur = pt__jstr(o, "currencyCode");
    if (cur && pt__currency_upper(cur, out->currency) == PT_OK &&
        pt_jscan_amount(text, len, amount_path, out->currency, &out->amount) == PT_OK)
        return;
    out->amount = 0;
    if (oc == PT_OUTCOME_SUCCESS)
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_amount",
                   "2C2P reported an amount payterm cannot read exactly");
}

static int c2p_parse(const struct pt_gw_config *cfg, enum pt_gw_op op, const struct pt_charge *c,
                     const struct pt_http_response *resp, struct pt_gw_result *out)
{
    char *payload = NULL;
    size_t plen = 0;
    (void)c;
    memset(out, 0, sizeof *out);
    if (resp->status != 200 || !resp->body) {
        char code[16];
        snprintf(code, sizeof code, "http_%d", resp->status);
        pt__result(out, PT_OUTCOME_AMBIGUOUS, code, "unexpected HTTP status from 2C2P");
        return PT_OK;
    }
    int rc =
        pt_2c2p_open(cfg->secret, cfg->secret_len, resp->body, resp->body_len, &payload, &plen);
    int sig = rc == PT_OK;
    if (rc != PT_OK && rc != PT_ENOTFOUND) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "invalid_signature",
                   "2C2P response signature does not verify");
        return PT_OK;
    }
    const char *text = sig ? payload : resp->body;
    size_t len = sig ? plen : resp->body_len;
    cJSON *o = cJSON_ParseWithLength(text, len);
    if (!cJSON_IsObject(o))
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_response", "2C2P answer is not JSON");
    else if (op == PT_GW_PAY)
        classify_token(o, sig, out);
    else
        classify_inquiry(text, len, o, sig, out);
    cJSON_Delete(o);
    free(payload);
    return PT_OK;
}

/* ---- notifications ------------------------------------------------------- */

static int fill_notify(const struct pt_gw_config *cfg, const char *text, size_t len,
                       struct pt_notification *n)
{
    static const char *const amount_path[] = {"amount", NULL};
    int rc = PT_EPARSE;
    cJSON *o = cJSON_ParseWithLength(text, len);
    const char *inv = pt__jstr(o, "invoiceNo"), *ref = pt__jstr(o, "tranRef");
    const char *code = pt__jstr(o, "respCode"), *cur = pt__jstr(o, "currencyCode");
    if (!cJSON_IsObject(o) || !inv || !*inv || !code || strlen(inv) >= sizeof n->order_id)
        goto out;
    if (!ref)
        ref = "";
    if (strlen(inv) + 1 + strlen(ref) >= sizeof n->dedup_id)
        goto out;
    pt__copy(n->gateway, sizeof n->gateway, "2c2p");
    snprintf(n->dedup_id, sizeof n->dedup_id, "%s:%s", inv, ref);
    pt__copy(n->order_id, sizeof n->order_id, inv);
    pt__copy(n->trade_no, sizeof n->trade_no, ref);
    pt__copy(n->merchant_id, sizeof n->merchant_id, pt__jstr(o, "merchantID"));
    n->merchant_ok = pt__same_id(pt__jstr(o, "merchantID"), cfg->merchant_id);
    if (!cur || pt__currency_upper(cur, n->currency) != PT_OK ||
        pt_jscan_amount(text, len, amount_path, n->currency, &n->amount) != PT_OK)
        goto out; /* a malformed amount is refused, never guessed */
    n->status = inquiry_outcome(code);
    n->relevant = n->status != PT_OUTCOME_AMBIGUOUS && n->status != PT_OUTCOME_NOT_FOUND;
    if (!n->relevant)
        n->status = PT_OUTCOME_PENDING;
    rc = PT_OK;
out:
    cJSON_Delete(o);
    return rc;
}

static int c2p_parse_notify(const struct pt_gw_config *cfg, const struct pt_http_response *msg,
                            const struct pt_gw_env *env, struct pt_notification *out)
{
    char *payload = NULL;
    size_t plen = 0;
    (void)env;
    memset(out, 0, sizeof *out);
    int rc = pt_2c2p_open(cfg->secret, cfg->secret_len, msg->body ? msg->body : "", msg->body_len,
                          &payload, &plen);
    if (rc == PT_ESIG || rc == PT_ENOTFOUND)
        return PT_ESIG;
    if (rc != PT_OK)
        return PT_EPARSE;
    rc = fill_notify(cfg, payload, plen, out);
    free(payload);
    if (rc != PT_OK)
        memset(out, 0, sizeof *out);
    return rc;
}

/* gateways.2c2p (SPEC section 10).  The pm_ keys are the Payment
 * Maintenance API's (refunds, SPEC 5a): all three or none. */
static const struct pt_gw_key c2p_keys[] = {
    PT_GW_KEY("endpoint", PT_GWK_HTTPS, endpoint, 0),
    PT_GW_KEY("merchant_id", PT_GWK_TEXT, merchant_id, 1),
    PT_GW_KEY("secret_key_file", PT_GWK_SECRET, files[C2P_SECRET], 1),
    PT_GW_KEY("notify_url", PT_GWK_URL, notify_url, 0),
    PT_GW_KEY("pm_endpoint", PT_GWK_HTTPS, refund_endpoint, 0),
    PT_GW_KEY("pm_private_key_file", PT_GWK_SECRET, files[C2P_PM_PRIVATE_KEY], 0),
    PT_GW_KEY("pm_public_key_file", PT_GWK_FILE, files[C2P_PM_PUBLIC_KEY], 0),
    /* The zone of 2C2P's zone-less times (paymentExpiry). */
    {.name = "utc_offset",
     .kind = PT_GWK_UTC_OFFSET,
     .offset = offsetof(struct pt_gw_settings, utc_offset_min)},
    {.name = NULL},
};

static int c2p_load(const struct pt_gw_settings *in, pt_gw_random_fn rnd, void *ctx,
                    struct pt_gw_config *o, char *err, size_t errlen)
{
    int rc = pt__gw_load_secret("2c2p", "secret_key_file", in->files[C2P_SECRET], o->secret,
                                sizeof o->secret, &o->secret_len, err, errlen);
    return rc == PT_OK ? pt__c2p_load_pm(in, rnd, ctx, o, err, errlen) : rc;
}

static const struct pt_gw_method c2p_methods[] = {
    {.name = "redirect", .interactive = 1},
    {.name = NULL},
};

const struct pt_gateway pt_gateway_2c2p = {
    .name = "2c2p",
    .methods = c2p_methods,
    .action_key = "payment_url",
    .notify_route = "/notify/2c2p",
    .default_endpoint = "https://pgw.2c2p.com",
    .config_keys = c2p_keys,
    .default_utc_offset_min = 7 * 60, /* Bangkok, as 2C2P writes its times */
    .load = c2p_load,
    .cli_sign = pt__cli_sign_c2p,
    .cli_verify = pt__cli_verify_c2p,
    .cli_sign_usage = "--gateway 2c2p (--secret S | --secret-file F) < payload.json",
    .cli_sign_prints = "{\"token\":...}   (the payload is compacted, then signed HS256)",
    .cli_verify_usage = "--gateway 2c2p (--secret S | --secret-file F) < token\n"
                        "    (a bare JWT or a {\"payload\":\"...\"} body)",
    .resend_window_s = 0,
    .order_id_min = 1,
    .order_id_max = C2P_INVOICE_MAX,
    .build = c2p_build,
    .parse = c2p_parse,
    .parse_notify = c2p_parse_notify,
    /* Refunds through Payment Maintenance (2c2p_pm.c): R and RS.  Its
     * request names the invoice and an amount, nothing that names the
     * refund, so exactly once is the engine's order of operations
     * (refund_keyless; docs/2c2p-refunds.md).  2C2P's asynchronous refund
     * notification is not used: RS resolves a pending refund. */
    .build_refund = pt__c2p_build_refund,
    .parse_refund = pt__c2p_parse_refund,
    .refund_keyless = 1,
    .parse_refund_list = pt__c2p_parse_refund_list,
    .refund_unavailable = pt__c2p_refund_unavailable,
    /* PGW v4.3 voids an authorised card transaction (payment maintenance),
     * but has no call that withdraws an issued payment token: the page
     * stays payable until the token expires. */
    .no_cancel = "2C2P cannot withdraw a payment token once it is issued; the payment page "
                 "stays payable until the token expires. If the customer pays, the charge "
                 "succeeds and is refunded instead",
    /* 2C2P only needs HTTP 200 to stop re-sending a backend notification. */
    .notify_ok_type = "text/plain",
    .notify_ok_body = "",
    .notify_fail_type = "text/plain",
    .notify_fail_body = "invalid signature",
    .bill_offset_min = 0, /* no daily bill: each charge is asked about (UTC days) */
};
