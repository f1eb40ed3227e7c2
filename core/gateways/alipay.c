/*
 * alipay.c - the Alipay adapter: OpenAPI gateway.do with RSA2 (SPEC 8).
 *
 * alipay.trade.pay (barcode: scene=bar_code + auth_code), .precreate (QR),
 * .query and .cancel, all form-encoded POSTs to the configured gateway.do URL
 * with the common parameters app_id, method, charset, sign_type, timestamp,
 * version (and notify_url on pay/precreate), the business fields as the JSON
 * biz_content, and `sign` over the sorted parameters.  Responses are verified
 * with the Alipay public key over the raw `..._response` object text, then
 * classified by code/sub_code/trade_status.
 */
#include "gateways/alipay.h"
#include "buf.h"
#include "err.h"
#include "gateway.h"
#include "gateways/gwcli.h"
#include "gateways/gwcommon.h"
#include "gateways/jscan.h"
#include "money.h"

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
    }
    return "";
}

/* ---- build ---------------------------------------------------------------- */

/* The biz_content JSON, keys in the order the vectors were generated with. */
static char *biz_content(const struct pt_gw_config *cfg, enum pt_gw_op op,
                         const struct pt_charge *c, int *rc)
{
    struct pt_buf b;
    char amount[PT_MONEY_DECIMAL_MAX];
    pt_buf_init(&b, ALIPAY_MAX_TEXT);
    pt_buf_puts(&b, "{\"out_trade_no\":");
    pt_buf_json_string(&b, c->order_id);
    if (op == PT_GW_PAY) {
        *rc = pt_money_to_decimal(c->amount, c->currency, PT_MONEY_FIXED, amount, sizeof amount);
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

static int alipay_build(const struct pt_gw_config *cfg, enum pt_gw_op op, const struct pt_charge *c,
                        const struct pt_gw_env *env, struct pt_http_request *out)
{
    struct pt_form f;
    struct pt_buf body;
    char ts[20];
    int rc = check_build(cfg, op, c);
    if (rc != PT_OK)
        return rc;
    char *biz = biz_content(cfg, op, c, &rc);
    if (!biz)
        return rc;
    pt_form_init(&f);
    pt_buf_init(&body, ALIPAY_MAX_TEXT * 2);
    pt_alipay_timestamp(env ? env->now_ms : 0, ts);
    rc = pt_form_add(&f, "app_id", cfg->app_id);
    if (rc == PT_OK)
        rc = pt_form_add(&f, "method", pt_alipay_method_name(op, c->method));
    if (rc == PT_OK)
        rc = pt_form_add(&f, "charset", "utf-8");
    if (rc == PT_OK)
        rc = pt_form_add(&f, "sign_type", "RSA2");
    if (rc == PT_OK)
        rc = pt_form_add(&f, "timestamp", ts);
    if (rc == PT_OK)
        rc = pt_form_add(&f, "version", "1.0");
    if (rc == PT_OK && op == PT_GW_PAY && cfg->notify_url[0])
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
    free(biz);
    pt_form_free(&f);
    pt_buf_free(&body, 0);
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

static int alipay_parse(const struct pt_gw_config *cfg, enum pt_gw_op op, const struct pt_charge *c,
                        const struct pt_http_response *resp, struct pt_gw_result *out)
{
    memset(out, 0, sizeof *out);
    if (resp->status != 200 || !resp->body) {
        char code[16];
        snprintf(code, sizeof code, "http_%d", resp->status);
        pt__result(out, PT_OUTCOME_AMBIGUOUS, code, "unexpected HTTP status from Alipay");
        return PT_OK;
    }
    const char *raw;
    size_t rawlen;
    int rc = pt_alipay_verify_response(cfg->peer_key, resp->body, resp->body_len,
                                       pt_alipay_method_name(op, c->method), &raw, &rawlen);
    if (rc != PT_OK) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "invalid_signature",
                   rc == PT_ESIG ? "Alipay response signature does not verify"
                                 : "Alipay response is not the expected JSON");
        return PT_OK;
    }
    cJSON *o = cJSON_ParseWithLength(raw, rawlen);
    if (!cJSON_IsObject(o) || !pt__jstr(o, "code")) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_response", "response without code");
    } else if (op == PT_GW_PAY) {
        classify_pay(raw, rawlen, o, c, out);
    } else if (op == PT_GW_QUERY) {
        classify_query(raw, rawlen, o, c, out);
    } else {
        classify_cancel(o, out);
    }
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
    int rc = pt__gw_load_key("alipay", "private_key_file", in->files[ALIPAY_PRIVATE_KEY], rnd, ctx,
                             &o->private_key, err, errlen);
    if (rc == PT_OK)
        rc = pt__gw_load_key("alipay", "alipay_public_key_file", in->files[ALIPAY_PUBLIC_KEY], rnd,
                             ctx, &o->peer_key, err, errlen);
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
    .build = alipay_build,
    .parse = alipay_parse,
    .parse_notify = alipay_parse_notify,
    /* Alipay retries a notification until it reads exactly `success`. */
    .notify_ok_type = "text/plain",
    .notify_ok_body = "success",
    .notify_fail_type = "text/plain",
    .notify_fail_body = "fail",
};
