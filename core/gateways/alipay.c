/*
 * alipay.c - the Alipay adapter: OpenAPI gateway.do with RSA2 (SPEC 8).
 *
 * alipay.trade.pay (barcode: scene=bar_code + auth_code), .precreate (QR),
 * .query, .cancel and .close, all form-encoded POSTs to the configured gateway.do URL
 * with the common parameters app_id, method, charset, sign_type, timestamp,
 * version (and notify_url on pay/precreate), the business fields as the JSON
 * biz_content, and `sign` over the sorted parameters.  Responses are verified
 * with the Alipay public key over the raw `..._response` object text, then
 * classified by code/sub_code/trade_status.  Refunds (SPEC 5a) are
 * alipay.trade.refund and alipay.trade.fastpay.refund.query, built, signed
 * and verified the same way (see "refunds" below).
 */
#include "gateways/alipay.h"
#include "gateways/alipaybill.h"
#include "buf.h"
#include "err.h"
#include "gateway.h"
#include "gateways/gwcli.h"
#include "gateways/gwcommon.h"
#include "gateways/jscan.h"
#include "money.h"
#include "refund.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ALIPAY_MAX_TEXT (64 * 1024)

/* ---- strings to sign --------------------------------------------------- */

static int included(const struct pt_form_pair *p, enum pt_alipay_mode mode)
{
    if (strcmp(p->key, "sign") == 0)
        return 0;
    if (mode == PT_ALIPAY_NOTIFY)
        return strcmp(p->key, "sign_type") != 0;
    return p->value[0] != '\0';
}

char *pt_alipay_string_to_sign(const struct pt_form *params, enum pt_alipay_mode mode, size_t *len)
{
    size_t idx[PT_FORM_MAX_PAIRS], n = 0;
    for (size_t i = 0; i < params->n; i++)
        if (included(&params->pairs[i], mode))
            idx[n++] = i;
    /* Insertion sort by name: at most PT_FORM_MAX_PAIRS pairs, and no
     * file-level comparator state (adapters run on several threads). */
    for (size_t i = 1; i < n; i++) {
        size_t v = idx[i], j = i;
        while (j > 0 && strcmp(params->pairs[idx[j - 1]].key, params->pairs[v].key) > 0) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = v;
    }
    struct pt_buf b;
    pt_buf_init(&b, ALIPAY_MAX_TEXT);
    for (size_t i = 0; i < n; i++) {
        if (i)
            pt_buf_putc(&b, '&');
        pt_buf_puts(&b, params->pairs[idx[i]].key);
        pt_buf_putc(&b, '=');
        pt_buf_puts(&b, params->pairs[idx[i]].value);
    }
    return pt_buf_take(&b, len);
}

int pt_alipay_sign_form(struct pt_pk *key, struct pt_form *params, enum pt_alipay_mode mode)
{
    if (!key || pt_form_get(params, "sign"))
        return PT_EINVAL;
    size_t len = 0;
    char *s = pt_alipay_string_to_sign(params, mode, &len);
    if (!s)
        return PT_ETOOBIG;
    char sig[PT_BASE64_LEN(1024)];
    int rc = pt_pk_sign_base64(key, s, len, sig, sizeof sig);
    free(s);
    if (rc != PT_OK)
        rc = PT_EKEY; /* the caller names the key (pt_gw_build_error) */
    if (rc == PT_OK)
        rc = pt_form_add(params, "sign", sig);
    return rc;
}

int pt_alipay_verify_form(const struct pt_pk *pub, const struct pt_form *params,
                          enum pt_alipay_mode mode)
{
    int rc = PT_ESIG;
    const char *sign = pt_form_get(params, "sign");
    if (!pub || !sign)
        return PT_ESIG;
    size_t len = 0;
    char *s = pt_alipay_string_to_sign(params, mode, &len);
    if (s && pt_pk_verify_base64(pub, s, len, sign, strlen(sign)) == PT_OK)
        rc = PT_OK;
    free(s);
    return rc;
}

/* ---- responses ----------------------------------------------------------- */

int pt_alipay_response_parts(const char *body, size_t len, const char *method, const char **raw,
                             size_t *rawlen, char **sign)
{
    char key[96];
    size_t m = strlen(method);
    if (m + sizeof "_response" > sizeof key)
        return PT_EPARSE;
    for (size_t i = 0; i < m; i++)
        key[i] = method[i] == '.' ? '_' : method[i];
    memcpy(key + m, "_response", sizeof "_response");

    int rc = pt_jscan_member(body, len, key, raw, rawlen);
    if (rc == PT_ENOTFOUND)
        rc = pt_jscan_member(body, len, "error_response", raw, rawlen);
    if (rc != PT_OK || *rawlen == 0 || (*raw)[0] != '{')
        return PT_EPARSE;

    *sign = NULL;
    const char *sv;
    size_t svlen;
    rc = pt_jscan_member(body, len, "sign", &sv, &svlen);
    if (rc == PT_ENOTFOUND)
        return PT_OK;
    if (rc != PT_OK)
        return PT_EPARSE;
    /* The sign is a JSON string: let cJSON undo any escaping ("\/"). */
    cJSON *s = cJSON_ParseWithLength(sv, svlen);
    if (cJSON_IsString(s))
        *sign = strdup(s->valuestring);
    cJSON_Delete(s);
    return *sign ? PT_OK : PT_EPARSE;
}

int pt_alipay_verify_response(const struct pt_pk *pub, const char *body, size_t len,
                              const char *method, const char **raw, size_t *rawlen)
{
    const char *r;
    size_t rl;
    char *sign = NULL;
    int rc = pt_alipay_response_parts(body, len, method, &r, &rl, &sign);
    if (rc != PT_OK)
        return rc;
    rc = PT_ESIG;
    if (pub && sign && pt_pk_verify_base64(pub, r, rl, sign, strlen(sign)) == PT_OK) {
        rc = PT_OK;
        if (raw)
            *raw = r;
        if (rawlen)
            *rawlen = rl;
    }
    free(sign);
    return rc;
}

void pt_alipay_timestamp(int64_t now_ms, char out[20])
{
    /* China Standard Time is UTC+8 all year. */
    time_t t = (time_t)(now_ms / 1000 + 8 * 3600);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 20, "%Y-%m-%d %H:%M:%S", &tm);
}

const char *pt_alipay_method_name(int op, const char *charge_method)
{
    switch (op) {
    case PT_GW_PAY:
        return strcmp(charge_method, "qr") == 0 ? "alipay.trade.precreate" : "alipay.trade.pay";
    case PT_GW_QUERY:
        return "alipay.trade.query";
    case PT_GW_CANCEL:
        return "alipay.trade.cancel";
    case PT_GW_CLOSE:
        return "alipay.trade.close";
    }
    return "";
}

/* ---- amounts in Alipay's units ----------------------------------------------
 *
 * Alipay's OpenAPI reference (opendocs.alipay.com, alipay.trade.pay and
 * alipay.trade.precreate): total_amount "订单总金额，单位为元，精确到小数点后两
 * 位" - the major unit, at most two decimals - in trans_currency ("标价币种,
 * total_amount 对应的币种单位") for cross-border acquiring; alipay.trade.refund's
 * refund_amount likewise ("单位为元，支持两位小数").  So an amount is the ISO
 * decimal of the currency, cut to two decimals: every amount of a currency
 * with two decimals or fewer (all of trans_currency's list: CNY, USD, JPY,
 * KRW...), but of a three- or four-decimal currency a merchant lists in
 * gateways.alipay.currencies only the amounts whose extra decimals are 0.
 * Answers' decimals are read exactly with the ISO exponent (pt_jscan_amount).
 */
static const char *alipay_unit(const char *cur, struct pt_money_unit *u)
{
    int iso = pt_money_exponent(cur);
    if (iso <= 2)
        return NULL;
    *u = (struct pt_money_unit){.exp = 2, .step = 1};
    return "Alipay's total_amount and refund_amount have at most two decimals";
}

/* ---- build ---------------------------------------------------------------- */

/*
 * The expiry of a QR code (SPEC 18) as precreate's timeout_express: the
 * official SDK's request model (alipay-sdk-java-all,
 * AlipayTradePrecreateModel) gives it as "订单相对超时时间。从预下单请求时间
 * 开始计算 ... 取值范围：1m～15d ... 该参数数值不接受小数点", whole minutes
 * (or hours, days) counted from the precreate.  Relative, so a repeat of
 * the precreate carries the very same value and no clock or time zone is
 * involved (time_expire, the absolute form, would need both).  Rounded up:
 * Alipay never closes a code before payterm's own deadline, and payterm
 * closes it then with alipay.trade.close.
 */
static void timeout_express(int64_t seconds, char out[24])
{
    snprintf(out, 24, "%lldm", (long long)((seconds + 59) / 60));
}

/* The biz_content JSON, keys in the order the vectors were generated with. */
static char *biz_content(const struct pt_gw_config *cfg, enum pt_gw_op op,
                         const struct pt_charge *c, const struct pt_gw_env *env, int *rc)
{
    struct pt_buf b;
    char amount[PT_MONEY_DECIMAL_MAX];
    pt_buf_init(&b, ALIPAY_MAX_TEXT);
    pt_buf_puts(&b, "{\"out_trade_no\":");
    pt_buf_json_string(&b, c->order_id);
    if (op == PT_GW_PAY) {
        *rc = pt__amount_decimal(&pt_gateway_alipay, c->currency, c->amount, PT_MONEY_FIXED, amount,
                                 sizeof amount);
        if (*rc != PT_OK) {
            pt_buf_free(&b, 0);
            return NULL;
        }
        if (strcmp(c->method, "barcode") == 0) {
            pt_buf_puts(&b, ",\"scene\":\"bar_code\",\"auth_code\":");
            pt_buf_json_string(&b, c->payment_code);
        }
        /* Alipay requires a subject; the order id stands in when none given. */
        pt_buf_puts(&b, ",\"subject\":");
        pt_buf_json_string(&b, c->subject[0] ? c->subject : c->order_id);
        pt_buf_puts(&b, ",\"total_amount\":");
        pt_buf_json_string(&b, amount);
        /* Without trans_currency Alipay reads total_amount as CNY: a USD
         * 10.00 charge would be captured as CNY 10.00.  Domestic (CNY)
         * requests stay exactly as the SDK vectors have them. */
        if (strcmp(c->currency, "CNY") != 0) {
            pt_buf_puts(&b, ",\"trans_currency\":");
            pt_buf_json_string(&b, c->currency);
        }
        if (cfg->settle_currency[0]) {
            pt_buf_puts(&b, ",\"settle_currency\":");
            pt_buf_json_string(&b, cfg->settle_currency);
        }
        if (strcmp(c->method, "qr") == 0 && env && env->expire_in_s > 0) {
            char te[24];
            timeout_express(env->expire_in_s, te);
            pt_buf_puts(&b, ",\"timeout_express\":");
            pt_buf_json_string(&b, te);
        }
    }
    pt_buf_putc(&b, '}');
    char *s = pt_buf_take(&b, NULL);
    *rc = s ? PT_OK : PT_ENOMEM;
    return s;
}

static int check_build(const struct pt_gw_config *cfg, enum pt_gw_op op, const struct pt_charge *c)
{
    if (!cfg->private_key || !cfg->app_id[0] || !cfg->endpoint[0] || !c->order_id[0])
        return PT_EINVAL;
    if (op == PT_GW_PAY && strcmp(c->method, "barcode") == 0 && !c->payment_code[0])
        return PT_EINVAL; /* a barcode payment needs the customer's auth code */
    if (op == PT_GW_PAY && strcmp(c->method, "barcode") != 0 && strcmp(c->method, "qr") != 0)
        return PT_EINVAL;
    if (op == PT_GW_PAY && !pt_gw_currency_allowed(cfg, c->currency))
        return PT_EINVAL; /* not in gateways.alipay.currencies */
    return PT_OK;
}

/*
 * The signed gateway.do request for one call: the common parameters (and
 * notify_url when with_notify and one is configured), biz (the business
 * fields' JSON) and the RSA2 `sign` over all of them.  Shared by the charge
 * and the refund calls, so every call is signed the one way the SDK does.
 */
static int signed_request(const struct pt_gw_config *cfg, const char *method, int with_notify,
                          const char *biz, const struct pt_gw_env *env, struct pt_http_request *out)
{
    struct pt_form f;
    struct pt_buf body;
    char ts[20];
    pt_form_init(&f);
    pt_buf_init(&body, ALIPAY_MAX_TEXT * 2);
    pt_alipay_timestamp(env ? env->now_ms : 0, ts);
    int rc = pt_form_add(&f, "app_id", cfg->app_id);
    if (rc == PT_OK)
        rc = pt_form_add(&f, "method", method);
    if (rc == PT_OK)
        rc = pt_form_add(&f, "charset", "utf-8");
    if (rc == PT_OK)
        rc = pt_form_add(&f, "sign_type", "RSA2");
    if (rc == PT_OK)
        rc = pt_form_add(&f, "timestamp", ts);
    if (rc == PT_OK)
        rc = pt_form_add(&f, "version", "1.0");
    if (rc == PT_OK && with_notify && cfg->notify_url[0])
        rc = pt_form_add(&f, "notify_url", cfg->notify_url);
    if (rc == PT_OK)
        rc = pt_form_add(&f, "biz_content", biz);
    if (rc == PT_OK)
        rc = pt_alipay_sign_form(cfg->private_key, &f, PT_ALIPAY_REQUEST);
    if (rc != PT_OK)
        goto out;
    pt_form_encode(&f, &body);
    rc = pt__request_start(out, "POST", cfg->endpoint, "");
    if (rc == PT_OK)
        rc = pt_http_request_add_header(out, "Content-Type",
                                        "application/x-www-form-urlencoded;charset=utf-8");
    if (rc == PT_OK) {
        size_t len = 0;
        char *text = pt_buf_take(&body, &len);
        rc = text ? PT_OK : PT_ETOOBIG;
        pt__request_body(out, text, len);
    }
    if (rc != PT_OK)
        pt_http_request_free(out);
out:
    pt_form_free(&f);
    pt_buf_free(&body, 0);
    return rc;
}

int pt__alipay_signed_request(const struct pt_gw_config *cfg, const char *method, const char *biz,
                              const struct pt_gw_env *env, struct pt_http_request *out)
{
    return signed_request(cfg, method, 0, biz, env, out);
}

static int alipay_build(const struct pt_gw_config *cfg, enum pt_gw_op op, const struct pt_charge *c,
                        const struct pt_gw_env *env, struct pt_http_request *out)
{
    int rc = check_build(cfg, op, c);
    if (rc != PT_OK)
        return rc;
    char *biz = biz_content(cfg, op, c, env, &rc);
    if (!biz)
        return rc;
    rc = signed_request(cfg, pt_alipay_method_name(op, c->method), op == PT_GW_PAY, biz, env, out);
    free(biz);
    return rc;
}

/* ---- parse ---------------------------------------------------------------- */

/* Fills trade_no and the amount of a response that reports money. */
static void take_amount(const char *raw, size_t rawlen, const cJSON *o, const struct pt_charge *c,
                        struct pt_gw_result *out)
{
    static const char *const path[] = {"total_amount", NULL};
    (void)c;
    pt__copy(out->trade_no, sizeof out->trade_no, pt__jstr(o, "trade_no"));
    /* total_amount is in trans_currency when the answer names one, else in
     * CNY (domestic Alipay says nothing): never assume the charge's own
     * currency, or a capture in the wrong currency would look right. */
    const char *cur = pt__jstr(o, "trans_currency");
    int rc = pt__currency_upper(cur && *cur ? cur : "CNY", out->currency);
    if (rc != PT_OK) {
        out->currency[0] = '\0';
        if (out->outcome == PT_OUTCOME_SUCCESS)
            pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_currency",
                       "Alipay reported a currency payterm cannot read");
        return;
    }
    int64_t minor = 0;
    rc = pt_jscan_amount(raw, rawlen, path, out->currency, &minor);
    if (rc == PT_OK)
        out->amount = minor;
    else if (rc != PT_ENOTFOUND && out->outcome == PT_OUTCOME_SUCCESS)
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_amount",
                   "Alipay reported an amount payterm cannot read exactly");
}

static void decline_or_ambiguous(const cJSON *o, enum pt_outcome other, struct pt_gw_result *out)
{
    const char *code = pt__jstr(o, "code"), *sub = pt__jstr(o, "sub_code");
    const char *msg = pt__jstr(o, "sub_msg");
    if (!msg)
        msg = pt__jstr(o, "msg");
    enum pt_outcome oc = other;
    /* ACQ.SYSTEM_ERROR: Alipay does not know either; TRADE_HAS_SUCCESS: the
     * order was already paid by an earlier send - a query brings the details. */
    if (sub && (strcmp(sub, "ACQ.SYSTEM_ERROR") == 0 || strcmp(sub, "ACQ.TRADE_HAS_SUCCESS") == 0))
        oc = PT_OUTCOME_AMBIGUOUS;
    pt__result(out, oc, sub ? sub : code, msg);
}

static void classify_pay(const char *raw, size_t rawlen, const cJSON *o, const struct pt_charge *c,
                         struct pt_gw_result *out)
{
    const char *code = pt__jstr(o, "code");
    int qr = strcmp(c->method, "qr") == 0;
    if (strcmp(code, "10000") == 0 && qr) {
        const char *qrc = pt__jstr(o, "qr_code");
        if (!qrc || !qrc[0]) {
            pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_response",
                       "precreate without qr_code");
            return;
        }
        pt__result(out, PT_OUTCOME_PENDING, code, pt__jstr(o, "msg"));
        pt__copy(out->action_url, sizeof out->action_url, qrc);
    } else if (strcmp(code, "10000") == 0) {
        pt__result(out, PT_OUTCOME_SUCCESS, code, pt__jstr(o, "msg"));
        take_amount(raw, rawlen, o, c, out);
    } else if (strcmp(code, "10003") == 0) {
        /* WAIT_BUYER_PAY: the customer confirms on the phone. */
        pt__result(out, PT_OUTCOME_PENDING, code, pt__jstr(o, "msg"));
        pt__copy(out->trade_no, sizeof out->trade_no, pt__jstr(o, "trade_no"));
    } else if (strcmp(code, "20000") == 0) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, code, pt__jstr(o, "sub_msg"));
    } else {
        decline_or_ambiguous(o, PT_OUTCOME_DECLINED, out);
    }
}

static void classify_query(const char *raw, size_t rawlen, const cJSON *o,
                           const struct pt_charge *c, struct pt_gw_result *out)
{
    const char *code = pt__jstr(o, "code"), *sub = pt__jstr(o, "sub_code");
    if (strcmp(code, "10000") != 0) {
        if (sub && strcmp(sub, "ACQ.TRADE_NOT_EXIST") == 0)
            pt__result(out, PT_OUTCOME_NOT_FOUND, sub, pt__jstr(o, "sub_msg"));
        else
            decline_or_ambiguous(o, PT_OUTCOME_AMBIGUOUS, out);
        return;
    }
    const char *st = pt__jstr(o, "trade_status");
    enum pt_outcome oc = PT_OUTCOME_AMBIGUOUS;
    if (st && (strcmp(st, "TRADE_SUCCESS") == 0 || strcmp(st, "TRADE_FINISHED") == 0))
        oc = PT_OUTCOME_SUCCESS;
    else if (st && strcmp(st, "WAIT_BUYER_PAY") == 0)
        oc = PT_OUTCOME_PENDING;
    else if (st && strcmp(st, "TRADE_CLOSED") == 0)
        oc = PT_OUTCOME_CANCELED;
    pt__result(out, oc, st ? st : "missing_trade_status", pt__jstr(o, "msg"));
    take_amount(raw, rawlen, o, c, out);
}

static void classify_cancel(const cJSON *o, struct pt_gw_result *out)
{
    const char *code = pt__jstr(o, "code"), *sub = pt__jstr(o, "sub_code");
    const char *retry = pt__jstr(o, "retry_flag");
    if (strcmp(code, "10000") == 0) {
        /* retry_flag=Y: Alipay wants the cancel repeated; not done yet. */
        int again = retry && strcmp(retry, "Y") == 0;
        pt__result(out, again ? PT_OUTCOME_AMBIGUOUS : PT_OUTCOME_CANCELED,
                   again ? "retry_flag" : pt__jstr(o, "action"), pt__jstr(o, "msg"));
        pt__copy(out->trade_no, sizeof out->trade_no, pt__jstr(o, "trade_no"));
    } else if (sub && strcmp(sub, "ACQ.TRADE_NOT_EXIST") == 0) {
        pt__result(out, PT_OUTCOME_NOT_FOUND, sub, pt__jstr(o, "sub_msg"));
    } else {
        decline_or_ambiguous(o, PT_OUTCOME_AMBIGUOUS, out);
    }
}

/*
 * alipay.trade.close ("用于交易创建后，用户在一定时间内未进行支付，可调用该接口
 * 直接将未付款的交易进行关闭", docs.open.alipay.com/api_1/alipay.trade.close):
 * 10000 closed; ACQ.TRADE_NOT_EXIST - Alipay creates the trade of a
 * precreated code only when a customer scans it, so a code nobody scanned
 * has no trade, and nothing to pay (SPEC 18: counts as closed);
 * ACQ.TRADE_STATUS_ERROR ("只有等待买家付款状态下才能发起交易关闭": paid,
 * or closed already) and anything else: a query tells what it is.
 */
static void classify_close(const cJSON *o, struct pt_gw_result *out)
{
    const char *code = pt__jstr(o, "code"), *sub = pt__jstr(o, "sub_code");
    const char *msg = pt__jstr(o, "sub_msg") ? pt__jstr(o, "sub_msg") : pt__jstr(o, "msg");
    if (strcmp(code, "10000") == 0) {
        pt__result(out, PT_OUTCOME_CANCELED, code, msg);
        pt__copy(out->trade_no, sizeof out->trade_no, pt__jstr(o, "trade_no"));
    } else if (sub && strcmp(sub, "ACQ.TRADE_NOT_EXIST") == 0) {
        pt__result(out, PT_OUTCOME_NOT_FOUND, sub, msg);
    } else {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, sub ? sub : code, msg);
    }
}

/*
 * What every answer of method passes before it is read: HTTP 200 with a
 * body, its signature, and a response object with a code; else ambiguous
 * (out set, 0).  Else 1: *raw and *rawlen the signed response text, *o it
 * parsed (the caller deletes it).
 */
static int answer_body(const struct pt_gw_config *cfg, const struct pt_http_response *resp,
                       const char *method, struct pt_gw_result *out, const char **raw,
                       size_t *rawlen, cJSON **o)
{
    *o = NULL;
    if (resp->status != 200 || !resp->body) {
        char code[16];
        snprintf(code, sizeof code, "http_%d", resp->status);
        pt__result(out, PT_OUTCOME_AMBIGUOUS, code, "unexpected HTTP status from Alipay");
        return 0;
    }
    int rc =
        pt_alipay_verify_response(cfg->peer_key, resp->body, resp->body_len, method, raw, rawlen);
    if (rc != PT_OK) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "invalid_signature",
                   rc == PT_ESIG ? "Alipay response signature does not verify"
                                 : "Alipay response is not the expected JSON");
        return 0;
    }
    *o = cJSON_ParseWithLength(*raw, *rawlen);
    if (!cJSON_IsObject(*o) || !pt__jstr(*o, "code")) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_response", "response without code");
        cJSON_Delete(*o);
        *o = NULL;
        return 0;
    }
    return 1;
}

static int alipay_parse(const struct pt_gw_config *cfg, enum pt_gw_op op, const struct pt_charge *c,
                        const struct pt_http_response *resp, struct pt_gw_result *out)
{
    memset(out, 0, sizeof *out);
    const char *raw;
    size_t rawlen;
    cJSON *o;
    if (!answer_body(cfg, resp, pt_alipay_method_name(op, c->method), out, &raw, &rawlen, &o))
        return PT_OK; /* answered ambiguous */
    if (op == PT_GW_PAY) {
        classify_pay(raw, rawlen, o, c, out);
    } else if (op == PT_GW_QUERY) {
        classify_query(raw, rawlen, o, c, out);
    } else if (op == PT_GW_CLOSE) {
        classify_close(o, out);
    } else {
        classify_cancel(o, out);
    }
    cJSON_Delete(o);
    return PT_OK;
}

/* ---- refunds ---------------------------------------------------------------
 *
 * alipay.trade.refund and alipay.trade.fastpay.refund.query (SPEC 5a, 8),
 * signed and verified exactly like the charge calls.  What the answers mean
 * is taken from the official SDK's models (alipay/alipay-sdk-java-all,
 * v2/src/main/java/com/alipay/api/{domain,response}/AlipayTrade*Refund*):
 *  - out_request_no is the refund's key under the trade: "支付宝会保证同样的
 *    退款请求号多次请求只会退一次" (one refund per number, however often it
 *    is sent), so payterm's refund_id goes there and a resend is safe.
 *  - The refund answer's fund_change ("本次退款是否发生了资金变化") says
 *    whether THIS call moved money; a number Alipay already refunded is
 *    answered with code 10000 and fund_change N (as integrators report it),
 *    so N proves nothing either way: only a query does.
 *  - refund_fee is "该笔交易累计已经退款成功的金额", the trade's cumulative
 *    refunded total, not this refund's amount: it is only checked (at least
 *    this refund, at most the charge), never reported as the amount.
 *  - The query answers refund_status REFUND_SUCCESS when the refund was
 *    executed; without it "退款请求未收到或者退款失败" (never received, or
 *    failed).  Alipay advises querying 10 s or more after the refund: an
 *    earlier query can miss a refund that then succeeds, which is why
 *    NOT_FOUND only ever leads to a resend under the same out_request_no.
 */

const char *pt_alipay_refund_method_name(int op)
{
    switch (op) {
    case PT_GW_REFUND:
        return "alipay.trade.refund";
    case PT_GW_REFUND_QUERY:
        return "alipay.trade.fastpay.refund.query";
    }
    return "";
}

static int check_refund(const struct pt_gw_config *cfg, enum pt_gw_refund_op op,
                        const struct pt_charge *c, const struct pt_refund *r)
{
    if (op != PT_GW_REFUND && op != PT_GW_REFUND_QUERY)
        return PT_EINVAL;
    if (!cfg->private_key || !cfg->app_id[0] || !cfg->endpoint[0] || !c->order_id[0] ||
        !r->refund_id[0])
        return PT_EINVAL;
    /* A refund is in its charge's currency (refund.h); anything else is a
     * caller's bug that must not reach Alipay as a different amount. */
    if (!pt_money_currency_valid(c->currency) || strcmp(r->currency, c->currency) != 0)
        return PT_EINVAL;
    if (op == PT_GW_REFUND && r->amount > c->amount)
        return PT_EINVAL; /* Alipay would refuse it; never send it */
    return PT_OK;
}

/* The biz_content of a refund call, keys in the order of the SDK vectors. */
static char *refund_biz(enum pt_gw_refund_op op, const struct pt_charge *c,
                        const struct pt_refund *r, int *rc)
{
    struct pt_buf b;
    char amount[PT_MONEY_DECIMAL_MAX];
    if (op == PT_GW_REFUND) {
        *rc = pt__amount_decimal(&pt_gateway_alipay, r->currency, r->amount, PT_MONEY_FIXED, amount,
                                 sizeof amount);
        if (*rc != PT_OK)
            return NULL;
    }
    pt_buf_init(&b, ALIPAY_MAX_TEXT);
    pt_buf_puts(&b, "{\"out_trade_no\":");
    pt_buf_json_string(&b, c->order_id);
    if (op == PT_GW_REFUND) {
        pt_buf_puts(&b, ",\"refund_amount\":");
        pt_buf_json_string(&b, amount);
        /* refund_currency ("订单退款币种信息", AlipayTradeRefundModel: CNY and
         * the cross-border currencies) is named for a charge that was not in
         * CNY, as trans_currency was on its pay call: without it the amount
         * would be read in the trade's default currency.  No document found
         * says it is mandatory; domestic (CNY) requests stay exactly as the
         * SDK vectors have them. */
        if (strcmp(r->currency, "CNY") != 0) {
            pt_buf_puts(&b, ",\"refund_currency\":");
            pt_buf_json_string(&b, r->currency);
        }
        pt_buf_puts(&b, ",\"out_request_no\":");
        pt_buf_json_string(&b, r->refund_id);
        if (r->reason[0]) {
            pt_buf_puts(&b, ",\"refund_reason\":");
            pt_buf_json_string(&b, r->reason);
        }
    } else {
        pt_buf_puts(&b, ",\"out_request_no\":");
        pt_buf_json_string(&b, r->refund_id);
        /* gmt_refund_pay only comes back when asked for (the query model). */
        pt_buf_puts(&b, ",\"query_options\":[\"gmt_refund_pay\"]");
    }
    pt_buf_putc(&b, '}');
    char *s = pt_buf_take(&b, NULL);
    *rc = s ? PT_OK : PT_ENOMEM;
    return s;
}

static int alipay_build_refund(const struct pt_gw_config *cfg, enum pt_gw_refund_op op,
                               const struct pt_charge *c, const struct pt_refund *r,
                               const struct pt_gw_env *env, struct pt_http_request *out)
{
    int rc = check_refund(cfg, op, c, r);
    if (rc != PT_OK)
        return rc;
    char *biz = refund_biz(op, c, r, &rc);
    if (!biz)
        return rc;
    /* No notify_url: alipay.trade.refund answers synchronously. */
    rc = signed_request(cfg, pt_alipay_refund_method_name(op), 0, biz, env, out);
    free(biz);
    return rc;
}

/* 1 when the answer names field and it differs from want (absent: 0). */
static int differs(const cJSON *o, const char *field, const char *want)
{
    const char *v = pt__jstr(o, field);
    return v && strcmp(v, want) != 0;
}

/* The identity checks every refund answer passes before it is believed: it
 * is about this charge's trade.  0 when it is, else out is AMBIGUOUS. */
static int same_trade(const cJSON *o, const struct pt_charge *c, int need_out_trade_no,
                      struct pt_gw_result *out)
{
    if ((need_out_trade_no && !pt__jstr(o, "out_trade_no")) ||
        differs(o, "out_trade_no", c->order_id)) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "out_trade_no_mismatch",
                   "Alipay answered about another order");
        return -1;
    }
    if (c->gateway_trade_no[0] && differs(o, "trade_no", c->gateway_trade_no)) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "trade_no_mismatch",
                   "Alipay answered about another trade");
        return -1;
    }
    return 0;
}

/*
 * A 40004 refusal of alipay.trade.refund.  The error table of the
 * alipay.trade.refund document (as its entries and advice are quoted by
 * public integrations; the page itself was not reachable from here) lists
 * (sub_code: what to do):
 *  ACQ.SYSTEM_ERROR 系统错误 - call again with the same parameters: the
 *      refund may or may not have been made, so AMBIGUOUS (a query decides);
 *  ACQ.DISCORDANT_REPEAT_REQUEST 不一致的请求 - "检查该退款号是否已退过款":
 *      the number was already used with other parameters, and what that
 *      earlier request did is unknown: AMBIGUOUS, and an operator looks;
 *  ACQ.INVALID_PARAMETER, ACQ.SELLER_BALANCE_NOT_ENOUGH (top up, then refund
 *      again), ACQ.REFUND_AMT_NOT_EQUAL_TOTAL (over the trade's amount),
 *      ACQ.REASON_TRADE_BEEN_FREEZEN, ACQ.TRADE_NOT_EXIST,
 *      ACQ.TRADE_HAS_FINISHED, ACQ.TRADE_STATUS_ERROR,
 *      ACQ.REASON_TRADE_REFUND_FEE_ERR, ACQ.TRADE_NOT_ALLOW_REFUND - Alipay
 *      refused this refund and moved nothing: DECLINED with its sub_code.
 *      SELLER_BALANCE_NOT_ENOUGH is retryable only after a human tops the
 *      account up; the refund fails, and a new one can be made then.
 * A 40004 without sub_code cannot be told apart from a system error.
 */
static void refund_refusal(const cJSON *o, struct pt_gw_result *out)
{
    const char *sub = pt__jstr(o, "sub_code"), *msg = pt__jstr(o, "sub_msg");
    if (!msg)
        msg = pt__jstr(o, "msg");
    if (!sub || !*sub) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "40004", msg);
    } else if (strcmp(sub, "ACQ.SYSTEM_ERROR") == 0 || strcmp(sub, "AQC.SYSTEM_ERROR") == 0) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, sub, msg); /* AQC.: a spelling Alipay's docs use */
    } else if (strcmp(sub, "ACQ.DISCORDANT_REPEAT_REQUEST") == 0) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, sub, msg);
        out->review = 1;
    } else {
        pt__result(out, PT_OUTCOME_DECLINED, sub, msg);
    }
}

/* Gateway-level refusals (the common public codes): the call was turned down
 * before any business processing - 20001 authorisation, 40001 missing
 * argument, 40002 invalid argument (our signature included), 40003
 * conditions not met, 40006 no permission. */
static int rejected_code(const char *code)
{
    static const char *const codes[] = {"20001", "40001", "40002", "40003", "40006", NULL};
    for (int i = 0; codes[i]; i++)
        if (strcmp(code, codes[i]) == 0)
            return 1;
    return 0;
}

static void classify_refund(const char *raw, size_t rawlen, const cJSON *o,
                            const struct pt_charge *c, const struct pt_refund *r,
                            struct pt_gw_result *out)
{
    static const char *const fee_path[] = {"refund_fee", NULL};
    const char *code = pt__jstr(o, "code"), *sub = pt__jstr(o, "sub_code");
    if (strcmp(code, "20000") == 0) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, code, pt__jstr(o, "sub_msg"));
        return;
    }
    if (strcmp(code, "40004") == 0) {
        refund_refusal(o, out);
        return;
    }
    if (strcmp(code, "10000") != 0) {
        const char *msg = pt__jstr(o, "sub_msg") ? pt__jstr(o, "sub_msg") : pt__jstr(o, "msg");
        pt__result(out, rejected_code(code) ? PT_OUTCOME_DECLINED : PT_OUTCOME_AMBIGUOUS,
                   rejected_code(code) && sub ? sub : code, msg);
        return;
    }
    if (same_trade(o, c, 1, out) != 0)
        return;
    const char *cur = pt__jstr(o, "refund_currency");
    char upper[4];
    if (cur && (pt__currency_upper(cur, upper) != PT_OK || strcmp(upper, r->currency) != 0)) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "currency_mismatch",
                   "Alipay refunded in another currency than the refund's");
        return;
    }
    /* Alipay gives a refund no number of its own: its trade_no names it. */
    pt__copy(out->trade_no, sizeof out->trade_no, pt__jstr(o, "trade_no"));
    const char *fc = pt__jstr(o, "fund_change");
    if (!fc) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "missing_fund_change",
                   "refund answer without fund_change");
        return;
    }
    if (strcmp(fc, "Y") != 0) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS,
                   strcmp(fc, "N") == 0 ? "fund_change_N" : "fund_change",
                   "Alipay did not say this call moved money: a query decides");
        return;
    }
    int64_t total = 0;
    int rc = pt_jscan_amount(raw, rawlen, fee_path, r->currency, &total);
    if (rc != PT_OK && rc != PT_ENOTFOUND) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_amount",
                   "Alipay reported a refund_fee payterm cannot read exactly");
        return;
    }
    if (rc == PT_OK && (total < r->amount || total > c->amount)) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "refund_fee_mismatch",
                   "the trade's refunded total contradicts this refund");
        return;
    }
    pt__result(out, PT_OUTCOME_SUCCESS, code, pt__jstr(o, "msg"));
}

static void classify_refund_query(const char *raw, size_t rawlen, const cJSON *o,
                                  const struct pt_charge *c, const struct pt_refund *r,
                                  struct pt_gw_result *out)
{
    static const char *const amount_path[] = {"refund_amount", NULL};
    const char *code = pt__jstr(o, "code"), *sub = pt__jstr(o, "sub_code");
    if (strcmp(code, "10000") != 0) {
        /* No trade, so no refund of it: the refund was never executed.  Any
         * other failure of the query says nothing about the refund. */
        const char *msg = pt__jstr(o, "sub_msg") ? pt__jstr(o, "sub_msg") : pt__jstr(o, "msg");
        if (sub && strcmp(sub, "ACQ.TRADE_NOT_EXIST") == 0)
            pt__result(out, PT_OUTCOME_NOT_FOUND, sub, msg);
        else
            pt__result(out, PT_OUTCOME_AMBIGUOUS, strcmp(code, "20000") != 0 && sub ? sub : code,
                       msg);
        return;
    }
    if (same_trade(o, c, 0, out) != 0)
        return;
    if (differs(o, "out_request_no", r->refund_id)) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "out_request_no_mismatch",
                   "Alipay answered about another refund");
        return;
    }
    const char *st = pt__jstr(o, "refund_status");
    if (!st) {
        pt__result(out, PT_OUTCOME_NOT_FOUND, "no_refund",
                   "Alipay has no executed refund under this out_request_no");
        return;
    }
    if (strcmp(st, "REFUND_SUCCESS") != 0) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, st, "unexpected refund_status");
        return;
    }
    if (!pt__jstr(o, "out_request_no")) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "out_request_no_mismatch",
                   "a refund answer that does not name the refund");
        return;
    }
    /* refund_amount is "本次退款请求，对应的退款金额": this refund's own. */
    int64_t amount = 0;
    int rc = pt_jscan_amount(raw, rawlen, amount_path, r->currency, &amount);
    if (rc != PT_OK && rc != PT_ENOTFOUND) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_amount",
                   "Alipay reported a refund_amount payterm cannot read exactly");
        return;
    }
    if (rc != PT_OK || amount != r->amount) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "refund_amount_mismatch",
                   "Alipay's refund is not of this refund's amount");
        return;
    }
    pt__result(out, PT_OUTCOME_SUCCESS, st, pt__jstr(o, "msg"));
    pt__copy(out->trade_no, sizeof out->trade_no, pt__jstr(o, "trade_no"));
    out->amount = amount;
    pt__copy(out->currency, sizeof out->currency, r->currency);
}

static int alipay_parse_refund(const struct pt_gw_config *cfg, enum pt_gw_refund_op op,
                               const struct pt_charge *c, const struct pt_refund *r,
                               const struct pt_http_response *resp, struct pt_gw_result *out)
{
    memset(out, 0, sizeof *out);
    if (op != PT_GW_REFUND && op != PT_GW_REFUND_QUERY) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "unsupported_operation", NULL);
        return PT_OK;
    }
    const char *raw;
    size_t rawlen;
    cJSON *o;
    if (!answer_body(cfg, resp, pt_alipay_refund_method_name(op), out, &raw, &rawlen, &o))
        return PT_OK; /* answered ambiguous */
    if (op == PT_GW_REFUND)
        classify_refund(raw, rawlen, o, c, r, out);
    else
        classify_refund_query(raw, rawlen, o, c, r, out);
    cJSON_Delete(o);
    return PT_OK;
}

/* ---- notifications ------------------------------------------------------- */

static int notify_status(const char *st, struct pt_notification *n)
{
    n->relevant = 1;
    if (strcmp(st, "TRADE_SUCCESS") == 0 || strcmp(st, "TRADE_FINISHED") == 0)
        n->status = PT_OUTCOME_SUCCESS;
    else if (strcmp(st, "TRADE_CLOSED") == 0)
        n->status = PT_OUTCOME_CANCELED;
    else if (strcmp(st, "WAIT_BUYER_PAY") == 0)
        n->status = PT_OUTCOME_PENDING;
    else
        n->relevant = 0;
    return PT_OK;
}

static int fill_notify(const struct pt_gw_config *cfg, const struct pt_form *f,
                       struct pt_notification *n)
{
    const char *notify_id = pt_form_get(f, "notify_id");
    const char *otn = pt_form_get(f, "out_trade_no");
    const char *st = pt_form_get(f, "trade_status");
    const char *amount = pt_form_get(f, "total_amount");
    const char *cur = pt_form_get(f, "trans_currency");
    if (!notify_id || !*notify_id || !otn || !*otn || !st)
        return PT_EPARSE;
    if (strlen(otn) >= sizeof n->order_id ||
        strlen(otn) + 1 + strlen(notify_id) >= sizeof n->dedup_id)
        return PT_EPARSE;
    pt__copy(n->gateway, sizeof n->gateway, "alipay");
    snprintf(n->dedup_id, sizeof n->dedup_id, "%s:%s", otn, notify_id);
    pt__copy(n->order_id, sizeof n->order_id, otn);
    pt__copy(n->trade_no, sizeof n->trade_no, pt_form_get(f, "trade_no"));
    pt__copy(n->merchant_id, sizeof n->merchant_id, pt_form_get(f, "app_id"));
    /* The app it was paid to, and the seller account when one is
     * configured: another merchant's signed notification binds nothing. */
    n->merchant_ok =
        pt__same_id(pt_form_get(f, "app_id"), cfg->app_id) &&
        (!cfg->merchant_id[0] || pt__same_id(pt_form_get(f, "seller_id"), cfg->merchant_id));
    /* Domestic Alipay settles in CNY and says nothing; cross-border names it. */
    if (pt__currency_upper(cur ? cur : "CNY", n->currency) != PT_OK)
        return PT_EPARSE;
    if (amount && pt_money_from_decimal(amount, strlen(amount), n->currency, &n->amount) != PT_OK)
        return PT_EPARSE; /* a malformed amount is refused, never guessed */
    return notify_status(st, n);
}

static int alipay_parse_notify(const struct pt_gw_config *cfg, const struct pt_http_response *msg,
                               const struct pt_gw_env *env, struct pt_notification *out)
{
    struct pt_form f;
    memset(out, 0, sizeof *out);
    pt_form_init(&f);
    int rc = pt_form_parse(msg->body ? msg->body : "", msg->body_len, &f);
    if (rc != PT_OK)
        return PT_EPARSE;
    rc = pt_alipay_verify_form(cfg->peer_key, &f, PT_ALIPAY_NOTIFY);
    if (rc == PT_OK)
        rc = fill_notify(cfg, &f, out);
    pt_form_free(&f);
    if (rc != PT_OK)
        memset(out, 0, sizeof *out);
    return rc;
}

/* gateways.alipay (SPEC section 10). */
enum { ALIPAY_PRIVATE_KEY, ALIPAY_PUBLIC_KEY };
static const struct pt_gw_key alipay_keys[] = {
    PT_GW_KEY("endpoint", PT_GWK_HTTPS, endpoint, 0),
    PT_GW_KEY("app_id", PT_GWK_TEXT, app_id, 1),
    PT_GW_KEY("private_key_file", PT_GWK_SECRET, files[ALIPAY_PRIVATE_KEY], 1),
    PT_GW_KEY("alipay_public_key_file", PT_GWK_FILE, files[ALIPAY_PUBLIC_KEY], 1),
    PT_GW_KEY("notify_url", PT_GWK_URL, notify_url, 0),
    {.name = "barcode_timeout_s",
     .kind = PT_GWK_SECONDS,
     .offset = offsetof(struct pt_gw_settings, barcode_timeout_s),
     .min = 5,
     .max = 86400},
    /* The seller account (PID): when set, a notification must carry it. */
    PT_GW_KEY("seller_id", PT_GWK_TEXT, merchant_id, 0),
    PT_GW_KEY("currencies", PT_GWK_CURRENCIES, currencies, 0),
    PT_GW_KEY("settle_currency", PT_GWK_CURRENCY, settle_currency, 0),
    {.name = NULL},
};

static int alipay_load(const struct pt_gw_settings *in, pt_gw_random_fn rnd, void *ctx,
                       struct pt_gw_config *o, char *err, size_t errlen)
{
    int rc = pt__gw_load_private_key("alipay", "private_key_file", in->files[ALIPAY_PRIVATE_KEY],
                                     rnd, ctx, o, err, errlen);
    if (rc == PT_OK)
        rc = pt__gw_load_peer_key("alipay", "alipay_public_key_file", in->files[ALIPAY_PUBLIC_KEY],
                                  o, rnd, ctx, &o->peer_key, err, errlen);
    return rc;
}

/* An auth code is valid for about a minute: a queued barcode charge older
 * than that cannot be paid. */
static const struct pt_gw_method alipay_methods[] = {
    {.name = "barcode", .offline_max_age_s = 60, .payment_code = 1},
    {.name = "qr", .interactive = 1},
    {.name = NULL},
};
/* Domestic Alipay settles CNY only (SPEC section 8). */
static const char *const alipay_currencies[] = {"CNY", NULL};

const struct pt_gateway pt_gateway_alipay = {
    .name = "alipay",
    .methods = alipay_methods,
    .action_key = "qr_code",
    .notify_route = "/notify/alipay",
    .default_currencies = alipay_currencies,
    .default_endpoint = "https://openapi.alipay.com/gateway.do",
    .config_keys = alipay_keys,
    .default_barcode_timeout_s = 60,
    .load = alipay_load,
    .cli_sign = pt__cli_sign_alipay,
    .cli_verify = pt__cli_verify_alipay,
    .cli_sign_usage = "--gateway alipay --key merchant.pem < params.json",
    .cli_sign_prints =
        "{\"string_to_sign\":...,\"sign\":...}   params.json is a flat object of strings",
    .cli_verify_usage = "--gateway alipay --pubkey alipay_pub.pem [--method M] < body\n"
                        "    (a notification body (form), or with --method alipay.trade.xxx a\n"
                        "    response body (JSON))",
    .resend_window_s = 0,
    .order_id_min = 1,
    .order_id_max = 64,
    .amount_unit = alipay_unit,
    .build = alipay_build,
    .parse = alipay_parse,
    .parse_notify = alipay_parse_notify,
    .build_refund = alipay_build_refund,
    .parse_refund = alipay_parse_refund,
    /* Alipay retries a notification until it reads exactly `success`. */
    .notify_ok_type = "text/plain",
    .notify_ok_body = "success",
    .notify_fail_type = "text/plain",
    .notify_fail_body = "fail",
    .bill_offset_min = 8 * 60, /* Alipay's bill day: China time */
    .fetch_bill = pt__alipay_fetch_bill,
    .parse_bill = pt__alipay_parse_bill,
    .bill_currencies = (const char *const[]){"CNY", NULL}, /* the bill is in yuan */
};
