/*
 * test_gw_units.c - each gateway's own amount units (SPEC 18), through the
 * adapters' real request builders and answer parsers.  The cases are the
 * table in test_gw_units.data: the API's amount (ISO 4217 minor units), what
 * the pay request must carry, and the same wire amount read back from an
 * answer.  Stripe's refunds and webhooks, where the bug of issue 32 (amounts
 * off by 100x) also lived, have cases of their own below.
 */
#include "testutil.h"

#include "charge.h"
#include "crypto.h"
#include "err.h"
#include "gateway.h"
#include "gateways/2c2p.h"
#include "gateways/alipay.h"
#include "gateways/form.h"
#include "gateways/jscan.h"
#include "gateways/stripe.h"
#include "gateways/wechat.h"
#include "gateways/wechat_v2.h"
#include "refund.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rows of test_gw_units.data: deleting one must fail the test. */
#define UNIT_ROWS 46

#define APIV2_KEY "0123456789abcdef0123456789ABCDEF"
#define C2P_SECRET "units-2c2p-secret"
#define STRIPE_WHSEC "whsec_units"

/* ---- the four configured gateways ------------------------------------------ */

static struct pt_gw_config stripe_cfg, alipay_cfg, c2p_cfg, wechat_cfg;
static struct pt_pk *alipay_signer; /* the simulated Alipay's own key: signs answers */

static void set_secret(unsigned char *buf, size_t *len, const char *s)
{
    *len = strlen(s);
    memcpy(buf, s, *len);
}

static int setup(void **state)
{
    (void)state;
    strcpy(stripe_cfg.name, "stripe");
    strcpy(stripe_cfg.endpoint, "https://api.stripe.com");
    set_secret(stripe_cfg.secret, &stripe_cfg.secret_len, "sk_test_units");
    set_secret(stripe_cfg.webhook_secret, &stripe_cfg.webhook_secret_len, STRIPE_WHSEC);

    strcpy(alipay_cfg.name, "alipay");
    strcpy(alipay_cfg.endpoint, "https://openapi.alipay.com/gateway.do");
    strcpy(alipay_cfg.app_id, "2021000000000001");
    alipay_cfg.private_key = pt_test_key("merchant_alipay_pkcs1.pem");
    alipay_cfg.peer_key = pt_test_key("alipay_gateway_public.pem");
    alipay_signer = pt_test_key("alipay_gateway_private.pem");
    /* Cross-border acquiring in every currency of the table. */
    static const char *const listed[] = {"CNY", "USD", "JPY", "KRW", "KWD", "CLF"};
    for (size_t i = 0; i < sizeof listed / sizeof listed[0]; i++)
        memcpy(alipay_cfg.currencies[alipay_cfg.ncurrencies++], listed[i], 4);

    strcpy(c2p_cfg.name, "2c2p");
    strcpy(c2p_cfg.endpoint, "https://sandbox-pgw.2c2p.com");
    strcpy(c2p_cfg.merchant_id, "JT01");
    set_secret(c2p_cfg.secret, &c2p_cfg.secret_len, C2P_SECRET);

    strcpy(wechat_cfg.name, "wechat");
    strcpy(wechat_cfg.endpoint, "https://api.mch.weixin.qq.com");
    strcpy(wechat_cfg.app_id, "wxd678efh567hg6787");
    strcpy(wechat_cfg.merchant_id, "1230000109");
    strcpy(wechat_cfg.client_ip, "127.0.0.1");
    set_secret(wechat_cfg.apiv2_key, &wechat_cfg.apiv2_key_len, APIV2_KEY);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pt_gw_config_free(&stripe_cfg);
    pt_gw_config_free(&alipay_cfg);
    pt_gw_config_free(&c2p_cfg);
    pt_gw_config_free(&wechat_cfg);
    pt_pk_free(alipay_signer);
    return 0;
}

/* The adapter, its configuration and a pay-able charge of cur/amount. */
static const struct pt_gateway *gateway_for(const char *name, struct pt_gw_config **cfg,
                                            struct pt_charge *c, const char *cur, int64_t amount)
{
    memset(c, 0, sizeof *c);
    snprintf(c->gateway, sizeof c->gateway, "%s", name);
    strcpy(c->order_id, "UNITS-0001");
    snprintf(c->currency, sizeof c->currency, "%s", cur);
    c->amount = amount;
    strcpy(c->subject, "Units");
    if (strcmp(name, "stripe") == 0) {
        strcpy(c->method, "card_on_file");
        strcpy(c->payment_method, "pm_card_visa");
        *cfg = &stripe_cfg;
        return &pt_gateway_stripe;
    }
    if (strcmp(name, "alipay") == 0) {
        strcpy(c->method, "barcode");
        strcpy(c->payment_code, "287634438256643941");
        *cfg = &alipay_cfg;
        return &pt_gateway_alipay;
    }
    if (strcmp(name, "2c2p") == 0) {
        strcpy(c->method, "redirect");
        *cfg = &c2p_cfg;
        return &pt_gateway_2c2p;
    }
    strcpy(c->method, "barcode");
    strcpy(c->payment_code, "134567890123456789");
    *cfg = &wechat_cfg;
    return &pt_gateway_wechat;
}

/* ---- the amount on the wire ------------------------------------------------- */

/* Stripe's form `amount`, Alipay's biz_content `total_amount`. */
static int form_field(const char *body, const char *name, char *out, size_t cap)
{
    struct pt_form f;
    pt_form_init(&f);
    const char *v = NULL;
    if (pt_form_parse(body, strlen(body), &f) == PT_OK)
        v = pt_form_get(&f, name);
    if (v)
        snprintf(out, cap, "%s", v);
    pt_form_free(&f);
    return v ? 0 : -1;
}

static int wire_amount(const char *gw, const struct pt_http_request *req, char *out, size_t cap)
{
    int rc = -1;
    if (strcmp(gw, "stripe") == 0)
        return form_field(req->body, "amount", out, cap);
    if (strcmp(gw, "alipay") == 0) {
        char biz[4096];
        if (form_field(req->body, "biz_content", biz, sizeof biz) != 0)
            return -1;
        cJSON *o = cJSON_Parse(biz);
        const cJSON *a = cJSON_GetObjectItem(o, "total_amount");
        if (cJSON_IsString(a)) {
            snprintf(out, cap, "%s", a->valuestring);
            rc = 0;
        }
        cJSON_Delete(o);
        return rc;
    }
    if (strcmp(gw, "2c2p") == 0) {
        char *payload = NULL;
        size_t plen = 0;
        const char *v;
        size_t vlen;
        if (pt_2c2p_open(c2p_cfg.secret, c2p_cfg.secret_len, req->body, req->body_len, &payload,
                         &plen) == PT_OK &&
            pt_jscan_member(payload, plen, "amount", &v, &vlen) == PT_OK) {
            snprintf(out, cap, "%.*s", (int)vlen, v);
            rc = 0;
        }
        free(payload);
        return rc;
    }
    struct pt_wxv2_msg m;
    if (pt_wxv2_parse(req->body, req->body_len, &m) != PT_OK)
        return -1;
    const char *fee = pt_wxv2_get(&m, "total_fee");
    if (fee) {
        snprintf(out, cap, "%s", fee);
        rc = 0;
    }
    pt_wxv2_msg_free(&m);
    return rc;
}

/* ---- an answer carrying the wire amount -------------------------------------- */

static void lower(const char *in, char out[4])
{
    for (int i = 0; i < 4; i++)
        out[i] = (char)tolower((unsigned char)in[i]);
}

/* A signed answer of the gateway: the order paid, for wire in cur (malloc'd). */
static char *answer(const char *gw, const char *cur, const char *wire)
{
    char raw[1024], *body = NULL;
    size_t blen = 0;
    if (strcmp(gw, "stripe") == 0) {
        char lc[4];
        lower(cur, lc);
        snprintf(raw, sizeof raw,
                 "{\"id\":\"pi_units\",\"object\":\"payment_intent\",\"amount\":%s,"
                 "\"amount_received\":%s,\"currency\":\"%s\",\"status\":\"succeeded\","
                 "\"metadata\":{\"order_id\":\"UNITS-0001\"}}",
                 wire, wire, lc);
        return strdup(raw);
    }
    if (strcmp(gw, "alipay") == 0) {
        char sig[1024], whole[4096];
        snprintf(raw, sizeof raw,
                 "{\"code\":\"10000\",\"msg\":\"Success\",\"trade_no\":\"2025120122001400001\","
                 "\"out_trade_no\":\"UNITS-0001\",\"trade_status\":\"TRADE_SUCCESS\","
                 "\"total_amount\":\"%s\",\"trans_currency\":\"%s\"}",
                 wire, cur);
        assert_int_equal(pt_pk_sign_base64(alipay_signer, raw, strlen(raw), sig, sizeof sig),
                         PT_OK);
        snprintf(whole, sizeof whole, "{\"alipay_trade_query_response\":%s,\"sign\":\"%s\"}", raw,
                 sig);
        return strdup(whole);
    }
    if (strcmp(gw, "2c2p") == 0) {
        snprintf(raw, sizeof raw,
                 "{\"merchantID\":\"JT01\",\"invoiceNo\":\"UNITS-0001\",\"amount\":%s,"
                 "\"currencyCode\":\"%s\",\"tranRef\":\"T-1\",\"respCode\":\"0000\","
                 "\"respDesc\":\"Success\"}",
                 wire, cur);
        assert_int_equal(
            pt_2c2p_seal(C2P_SECRET, strlen(C2P_SECRET), raw, strlen(raw), &body, &blen), PT_OK);
        return body;
    }
    struct pt_wxv2_field f[] = {
        {"return_code", "SUCCESS"},
        {"return_msg", "OK"},
        {"appid", wechat_cfg.app_id},
        {"mch_id", wechat_cfg.merchant_id},
        {"nonce_str", "5K8264ILTKCH16CQ"},
        {"result_code", "SUCCESS"},
        {"out_trade_no", "UNITS-0001"},
        {"transaction_id", "4200000001202512010000"},
        {"trade_state", "SUCCESS"},
        {"total_fee", wire},
        {"fee_type", cur},
        {"sign", NULL},
    };
    size_t n = sizeof f / sizeof f[0];
    char sign[PT_WXV2_SIGN_MAX];
    assert_int_equal(pt_wxv2_sign(PT_WXV2_HMAC_SHA256, (const unsigned char *)APIV2_KEY,
                                  strlen(APIV2_KEY), f, n - 1, sign),
                     PT_OK);
    f[n - 1].value = sign;
    assert_int_equal(pt_wxv2_xml(f, n, &body, &blen), PT_OK);
    return body;
}

/* ---- the table ----------------------------------------------------------------- */

/* Splits "a | b | c | d" in place into 4 trimmed columns; 0 when it has 4. */
static int columns(char *line, char *col[4])
{
    int n = 0;
    for (char *p = line; p && n < 4; n++) {
        char *bar = strchr(p, '|');
        if (bar)
            *bar = '\0';
        while (*p == ' ')
            p++;
        char *e = p + strlen(p);
        while (e > p && e[-1] == ' ')
            *--e = '\0';
        col[n] = p;
        p = bar ? bar + 1 : NULL;
    }
    return n == 4 ? 0 : -1;
}

/* One row: the request's amount, then the answer's.  Returns failures. */
static int run_row(char *gw, const char *cur, int64_t amount, const char *want, const char *shown)
{
    struct pt_gw_config *cfg;
    struct pt_charge c;
    struct pt_http_request req;
    struct pt_gw_env env = {.now_ms = 1764554400000, .nonce = "5K8264ILTKCH16CQ2502SI8ZNMTM67VS"};
    const struct pt_gateway *g = gateway_for(gw, &cfg, &c, cur, amount);
    int rc = g->build(cfg, PT_GW_PAY, &c, &env, &req);
    if (strcmp(want, "REFUSED") == 0) {
        if (rc == PT_OK) {
            char got[64] = "?";
            wire_amount(gw, &req, got, sizeof got);
            pt_http_request_free(&req);
            print_error("case %s\n  built a request with amount %s\n", shown, got);
            return 1;
        }
        return 0;
    }
    char got[64] = "";
    if (rc != PT_OK || wire_amount(gw, &req, got, sizeof got) != 0) {
        print_error("case %s\n  no request (rc %d)\n", shown, rc);
        if (rc == PT_OK)
            pt_http_request_free(&req);
        return 1;
    }
    pt_http_request_free(&req);
    if (strcmp(got, want) != 0) {
        print_error("case %s\n  request amount %s\n", shown, got);
        return 1;
    }
    char *body = answer(gw, cur, want);
    struct pt_http_response resp = {.status = 200, .body = body, .body_len = strlen(body)};
    struct pt_gw_result res;
    g->parse(cfg, strcmp(gw, "stripe") == 0 ? PT_GW_PAY : PT_GW_QUERY, &c, &resp, &res);
    free(body);
    if (res.outcome != PT_OUTCOME_SUCCESS || res.amount != amount ||
        strcmp(res.currency, cur) != 0) {
        print_error("case %s\n  answer read as %s %lld %s (%s: %s)\n", shown,
                    pt_outcome_name(res.outcome), (long long)res.amount, res.currency, res.code,
                    res.message);
        return 1;
    }
    return 0;
}

static void test_units_table(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/test_gw_units.data", PT_TEST_UNIT_DIR);
    size_t len;
    char *text = pt_test_read_file(path, &len);
    if (!text)
        fail_msg("cannot read the case table %s", path);
    int rows = 0, failed = 0;
    for (char *p = text, *nl; p && *p; p = nl ? nl + 1 : NULL) {
        nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        if (!*p || *p == '#')
            continue;
        char shown[200], *col[4];
        snprintf(shown, sizeof shown, "%s", p);
        if (columns(p, col) != 0)
            fail_msg("malformed case line: %s", shown);
        rows++;
        failed += run_row(col[0], col[1], strtoll(col[2], NULL, 10), col[3], shown);
    }
    free(text);
    assert_int_equal(rows, UNIT_ROWS);
    if (failed)
        fail_msg("%d of %d cases failed", failed, rows);
}

/* ---- Stripe's refunds and webhooks ------------------------------------------------ */

struct stripe_case {
    const char *cur;
    int64_t amount; /* ISO minor units */
    const char *wire;
};

/* The refund request and its answer, in Stripe's units. */
static void test_stripe_refunds_in_its_units(void **state)
{
    (void)state;
    static const struct stripe_case cases[] = {
        {"MGA", 500, "5"}, {"ISK", 300, "30000"}, {"KWD", 1230, "1230"}, {"JPY", 700, "700"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct pt_charge c;
        struct pt_gw_config *cfg;
        gateway_for("stripe", &cfg, &c, cases[i].cur, cases[i].amount * 2);
        strcpy(c.gateway_trade_no, "pi_units");
        struct pt_refund r = {.amount = cases[i].amount};
        strcpy(r.refund_id, "R-UNITS-1");
        strcpy(r.order_id, c.order_id);
        memcpy(r.currency, c.currency, 4);
        struct pt_http_request req;
        char got[32] = "";
        assert_int_equal(pt_gateway_stripe.build_refund(cfg, PT_GW_REFUND, &c, &r, NULL, &req),
                         PT_OK);
        assert_int_equal(form_field(req.body, "amount", got, sizeof got), 0);
        pt_http_request_free(&req);
        assert_string_equal(got, cases[i].wire);

        char body[512], lc[4];
        lower(cases[i].cur, lc);
        snprintf(body, sizeof body,
                 "{\"id\":\"re_units\",\"object\":\"refund\",\"amount\":%s,\"currency\":\"%s\","
                 "\"metadata\":{\"refund_id\":\"R-UNITS-1\",\"order_id\":\"UNITS-0001\"},"
                 "\"payment_intent\":\"pi_units\",\"status\":\"succeeded\"}",
                 cases[i].wire, lc);
        struct pt_http_response resp = {.status = 200, .body = body, .body_len = strlen(body)};
        struct pt_gw_result res;
        pt_gateway_stripe.parse_refund(cfg, PT_GW_REFUND, &c, &r, &resp, &res);
        if (res.outcome != PT_OUTCOME_SUCCESS || res.amount != cases[i].amount)
            fail_msg("%s refund answer of %s read as %s %lld (%s)", cases[i].cur, cases[i].wire,
                     pt_outcome_name(res.outcome), (long long)res.amount, res.code);
    }
}

/* A payment_intent.succeeded webhook carries Stripe's units too. */
static void test_stripe_webhook_in_its_units(void **state)
{
    (void)state;
    static const struct stripe_case cases[] = {
        {"MGA", 1000, "10"}, {"UGX", 5000, "500000"}, {"USD", 1234, "1234"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char payload[1024], lc[4], sig[256];
        lower(cases[i].cur, lc);
        snprintf(payload, sizeof payload,
                 "{\"id\":\"evt_units_%zu\",\"object\":\"event\",\"type\":"
                 "\"payment_intent.succeeded\",\"data\":{\"object\":{\"id\":\"pi_units\","
                 "\"object\":\"payment_intent\",\"amount\":%s,\"amount_received\":%s,"
                 "\"currency\":\"%s\",\"status\":\"succeeded\",\"metadata\":{\"order_id\":"
                 "\"UNITS-0001\"}}}}",
                 i, cases[i].wire, cases[i].wire, lc);
        assert_int_equal(pt_stripe_sign_header(STRIPE_WHSEC, strlen(STRIPE_WHSEC), 1764554400,
                                               payload, strlen(payload), sig, sizeof sig),
                         PT_OK);
        char hdr[300];
        snprintf(hdr, sizeof hdr, "Stripe-Signature: %s", sig);
        struct pt_http_response msg = {
            .status = 200, .body = payload, .body_len = strlen(payload), .nheaders = 1};
        msg.headers[0] = hdr;
        struct pt_gw_env env = {.now_ms = 1764554400000};
        struct pt_notification n;
        assert_int_equal(pt_gateway_stripe.parse_notify(&stripe_cfg, &msg, &env, &n), PT_OK);
        if (n.amount != cases[i].amount || strcmp(n.currency, cases[i].cur) != 0)
            fail_msg("%s webhook amount %s read as %lld %s", cases[i].cur, cases[i].wire,
                     (long long)n.amount, n.currency);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_units_table),
        cmocka_unit_test(test_stripe_refunds_in_its_units),
        cmocka_unit_test(test_stripe_webhook_in_its_units),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
