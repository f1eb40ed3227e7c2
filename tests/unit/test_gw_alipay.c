/*
 * test_gw_alipay.c - the Alipay adapter against vectors made by alipay-sdk
 * (tests/vectors/alipay.json): exact strings to sign and RSA2 signatures of
 * the requests payterm builds, notification verification (valid and
 * tampered), response verification over the raw `..._response` text and the
 * outcome of every response class.
 */
#include "testutil.h"

#include "charge.h"
#include "err.h"
#include "gateway.h"
#include "gateways/alipay.h"
#include "gateways/form.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fixture {
    cJSON *v;
    struct pt_gw_config cfg;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    f->v = pt_test_vectors("alipay.json");
    strcpy(f->cfg.name, "alipay");
    strcpy(f->cfg.endpoint, "https://openapi.alipay.com/gateway.do");
    strcpy(f->cfg.app_id, "2021000000000001");
    f->cfg.private_key = pt_test_key("merchant_alipay_pkcs1.pem");
    f->cfg.peer_key = pt_test_key("alipay_gateway_public.pem");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    pt_gw_config_free(&f->cfg);
    cJSON_Delete(f->v);
    free(f);
    return 0;
}

/* The adapter's request must carry exactly the SDK's parameters and sign. */
static void test_requests(void **state)
{
    struct fixture *f = *state;
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, pt_test_cases(f->v, "alipay.json", "requests"))
    {
        struct pt_charge ch;
        struct pt_http_request req;
        struct pt_gw_env env = {.now_ms = (int64_t)pt_test_int(c, "now_ms"),
                                .expire_in_s = (int64_t)pt_test_int(c, "expire_in_s")};
        pt_test_charge_from(cJSON_GetObjectItem(c, "charge"), "alipay", &ch);
        snprintf(f->cfg.notify_url, sizeof f->cfg.notify_url, "%s", pt_test_str(c, "notify_url"));
        assert_int_equal(pt_gateway_alipay.build(&f->cfg,
                                                 (enum pt_gw_op)pt_test_op(pt_test_str(c, "op")),
                                                 &ch, &env, &req),
                         PT_OK);
        assert_string_equal(req.method, "POST");
        assert_string_equal(req.url, "https://openapi.alipay.com/gateway.do");
        assert_string_equal(pt_http_request_header(&req, "Content-Type"),
                            "application/x-www-form-urlencoded;charset=utf-8");
        struct pt_form form;
        pt_form_init(&form);
        assert_int_equal(pt_form_parse(req.body, req.body_len, &form), PT_OK);
        const cJSON *params = cJSON_GetObjectItem(c, "params"), *p;
        size_t count = 0;
        cJSON_ArrayForEach(p, params)
        {
            const char *got = pt_form_get(&form, p->string);
            if (!got || strcmp(got, p->valuestring) != 0)
                fail_msg("%s: param %s = '%s', SDK has '%s'", pt_test_str(c, "name"), p->string,
                         got ? got : "(missing)", p->valuestring);
            count++;
        }
        assert_int_equal(form.n, count); /* nothing more than the SDK sends */
        char *sts = pt_alipay_string_to_sign(&form, PT_ALIPAY_REQUEST, NULL);
        assert_string_equal(sts, pt_test_str(c, "string_to_sign"));
        assert_string_equal(pt_form_get(&form, "sign"), pt_test_str(c, "sign"));
        free(sts);
        pt_form_free(&form);
        pt_http_request_free(&req);
        n++;
    }
    assert_int_equal(n, 5);
}

/* The biz_content of a request as built. */
static char *built_biz(struct fixture *f, enum pt_gw_op op, const struct pt_charge *c,
                       int64_t expire_in_s)
{
    struct pt_http_request req;
    struct pt_gw_env env = {.now_ms = 1764478800000, .expire_in_s = expire_in_s};
    assert_int_equal(pt_gateway_alipay.build(&f->cfg, op, c, &env, &req), PT_OK);
    struct pt_form form;
    pt_form_init(&form);
    assert_int_equal(pt_form_parse(req.body, req.body_len, &form), PT_OK);
    char *biz = strdup(pt_form_get(&form, "biz_content"));
    pt_form_free(&form);
    pt_http_request_free(&req);
    return biz;
}

/* A QR code's expiry (SPEC 18): qr_timeout_s as timeout_express in whole
 * minutes, rounded up (Alipay never closes it before payterm's deadline);
 * none on a barcode payment, none when no expiry is asked for.  Closing an
 * expired code is alipay.trade.close, by out_trade_no. */
static void test_qr_expiry(void **state)
{
    struct fixture *f = *state;
    static const struct {
        int64_t s;
        const char *te;
    } rows[] = {{60, "1m"}, {61, "2m"}, {90, "2m"}, {300, "5m"}, {3599, "60m"}, {86400, "1440m"}};
    struct pt_charge c;
    memset(&c, 0, sizeof c);
    strcpy(c.order_id, "QR-1");
    strcpy(c.method, "qr");
    strcpy(c.currency, "CNY");
    strcpy(c.subject, "Cake");
    c.amount = 1200;
    size_t n = 0;
    for (; n < sizeof rows / sizeof rows[0]; n++) {
        char want[64];
        snprintf(want, sizeof want, ",\"timeout_express\":\"%s\"}", rows[n].te);
        char *biz = built_biz(f, PT_GW_PAY, &c, rows[n].s);
        if (!strstr(biz, want))
            fail_msg("qr_timeout_s %lld: biz_content %s, want it to end %s", (long long)rows[n].s,
                     biz, want);
        free(biz);
    }
    assert_int_equal(n, 6);
    char *biz = built_biz(f, PT_GW_PAY, &c, 0);
    assert_null(strstr(biz, "timeout_express"));
    free(biz);
    strcpy(c.method, "barcode");
    strcpy(c.payment_code, "287634438256643941");
    biz = built_biz(f, PT_GW_PAY, &c, 300);
    assert_null(strstr(biz, "timeout_express"));
    free(biz);
    strcpy(c.method, "qr");
    biz = built_biz(f, PT_GW_CLOSE, &c, 0);
    assert_string_equal(biz, "{\"out_trade_no\":\"QR-1\"}");
    free(biz);
    assert_string_equal(pt_alipay_method_name(PT_GW_CLOSE, "qr"), "alipay.trade.close");
}

static void test_cli_params(void **state)
{
    struct fixture *f = *state;
    const cJSON *cli = cJSON_GetObjectItem(f->v, "cli"), *p;
    struct pt_form form;
    pt_form_init(&form);
    cJSON_ArrayForEach(p, cJSON_GetObjectItem(cli, "params"))
        assert_int_equal(pt_form_add(&form, p->string, p->valuestring), PT_OK);
    char *sts = pt_alipay_string_to_sign(&form, PT_ALIPAY_REQUEST, NULL);
    assert_string_equal(sts, pt_test_str(cli, "string_to_sign"));
    free(sts);
    assert_int_equal(pt_alipay_sign_form(f->cfg.private_key, &form, PT_ALIPAY_REQUEST), PT_OK);
    assert_string_equal(pt_form_get(&form, "sign"), pt_test_str(cli, "sign"));
    /* requests skip empty values; notifications keep them */
    assert_int_equal(pt_form_add(&form, "empty", ""), PT_OK);
    sts = pt_alipay_string_to_sign(&form, PT_ALIPAY_REQUEST, NULL);
    assert_null(strstr(sts, "empty="));
    free(sts);
    sts = pt_alipay_string_to_sign(&form, PT_ALIPAY_NOTIFY, NULL);
    assert_non_null(strstr(sts, "&empty=&"));
    assert_null(strstr(sts, "sign_type="));
    free(sts);
    pt_form_free(&form);
}

static void test_build_errors(void **state)
{
    struct fixture *f = *state;
    struct pt_charge c;
    struct pt_http_request req;
    struct pt_gw_env env = {.now_ms = 1};
    memset(&c, 0, sizeof c);
    strcpy(c.order_id, "O-1");
    strcpy(c.method, "barcode");
    strcpy(c.currency, "CNY");
    c.amount = 100;
    /* barcode without the customer's code */
    assert_int_equal(pt_gateway_alipay.build(&f->cfg, PT_GW_PAY, &c, &env, &req), PT_EINVAL);
    strcpy(c.method, "card_on_file");
    strcpy(c.payment_code, "28");
    assert_int_equal(pt_gateway_alipay.build(&f->cfg, PT_GW_PAY, &c, &env, &req), PT_EINVAL);
    strcpy(c.method, "barcode");
    c.amount = 0;
    assert_int_equal(pt_gateway_alipay.build(&f->cfg, PT_GW_PAY, &c, &env, &req), PT_ERANGE);
}

static void test_timestamp(void **state)
{
    (void)state;
    char ts[20];
    pt_alipay_timestamp(1764478800000, ts); /* 05:00 UTC */
    assert_string_equal(ts, "2025-11-30 13:00:00");
    pt_alipay_timestamp(1767196799000, ts); /* 2025-12-31 15:59:59 UTC */
    assert_string_equal(ts, "2025-12-31 23:59:59");
    pt_alipay_timestamp(1767196800000, ts); /* new year in China first */
    assert_string_equal(ts, "2026-01-01 00:00:00");
}

static enum pt_outcome outcome_of(const char *s)
{
    static const char *const names[] = {"SUCCESS",  "DECLINED",  "PENDING",
                                        "CANCELED", "NOT_FOUND", "AMBIGUOUS"};
    for (int i = 0; i < 6; i++)
        if (strcmp(names[i], s) == 0)
            return (enum pt_outcome)i;
    fail_msg("unknown outcome %s", s);
    return PT_OUTCOME_AMBIGUOUS;
}

static void test_notify(void **state)
{
    struct fixture *f = *state;
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, pt_test_cases(f->v, "alipay.json", "notify"))
    {
        struct pt_http_response msg;
        struct pt_notification out;
        struct pt_gw_env env = {.now_ms = 1764478805000};
        pt_test_response(c, &msg);
        int rc = pt_gateway_alipay.parse_notify(&f->cfg, &msg, &env, &out);
        const char *name = pt_test_str(c, "name");
        if (rc != pt_test_rc(pt_test_str(c, "rc")))
            fail_msg("%s: rc %s, want %s", name, pt_errname(rc), pt_test_str(c, "rc"));
        if (rc == PT_OK) {
            assert_string_equal(out.gateway, "alipay");
            assert_int_equal(out.status, outcome_of(pt_test_str(c, "status")));
            assert_int_equal(out.relevant, cJSON_IsTrue(cJSON_GetObjectItem(c, "relevant")));
            assert_int_equal(out.amount, pt_test_int(c, "amount"));
            assert_string_equal(out.currency, "CNY");
            if (cJSON_GetObjectItem(c, "dedup_id")) {
                assert_string_equal(out.dedup_id, pt_test_str(c, "dedup_id"));
                assert_string_equal(out.order_id, pt_test_str(c, "order_id"));
                assert_string_equal(out.trade_no, pt_test_str(c, "trade_no"));
                assert_string_equal(out.merchant_id, pt_test_str(c, "merchant_id"));
                /* Bound to this merchant only when its app_id is ours. */
                assert_int_equal(out.merchant_ok,
                                 strcmp(pt_test_str(c, "merchant_id"), f->cfg.app_id) == 0);
            }
        }
        pt_http_response_free(&msg);
        n++;
    }
    assert_int_equal(n, 8);
}

static void test_responses(void **state)
{
    struct fixture *f = *state;
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, pt_test_cases(f->v, "alipay.json", "responses"))
    {
        struct pt_http_response resp;
        struct pt_gw_result out;
        struct pt_charge ch;
        pt_test_charge_from(cJSON_GetObjectItem(c, "charge"), "alipay", &ch);
        pt_test_response(c, &resp);
        const char *name = pt_test_str(c, "name");
        assert_int_equal(pt_gateway_alipay.parse(&f->cfg,
                                                 (enum pt_gw_op)pt_test_op(pt_test_str(c, "op")),
                                                 &ch, &resp, &out),
                         PT_OK);
        enum pt_outcome want = outcome_of(pt_test_str(c, "outcome"));
        if (out.outcome != want)
            fail_msg("%s: outcome %s (%s), want %s", name, pt_outcome_name(out.outcome), out.code,
                     pt_outcome_name(want));
        if (cJSON_GetObjectItem(c, "code"))
            assert_string_equal(out.code, pt_test_str(c, "code"));
        if (cJSON_GetObjectItem(c, "amount"))
            assert_int_equal(out.amount, pt_test_int(c, "amount"));
        if (cJSON_GetObjectItem(c, "trade_no"))
            assert_string_equal(out.trade_no, pt_test_str(c, "trade_no"));
        if (cJSON_GetObjectItem(c, "action_url"))
            assert_string_equal(out.action_url, pt_test_str(c, "action_url"));
        /* a response whose signature does not verify is never a success */
        if (!cJSON_IsTrue(cJSON_GetObjectItem(c, "sdk_valid")) &&
            strcmp(name, "pay_success_sign_before_response") != 0)
            assert_int_not_equal(out.outcome, PT_OUTCOME_SUCCESS);
        pt_http_response_free(&resp);
        n++;
    }
    assert_int_equal(n, 23);
}

/* Signing a response the way the simulator does, then verifying it. */
static void test_response_roundtrip(void **state)
{
    struct fixture *f = *state;
    struct pt_pk *gw = pt_test_key("alipay_gateway_private.pem");
    const char *raw = "{\"code\":\"10000\",\"msg\":\"Success\",\"trade_no\":\"T\"}";
    char sig[PT_BASE64_LEN(1024)], body[2048];
    assert_int_equal(pt_pk_sign_base64(gw, raw, strlen(raw), sig, sizeof sig), PT_OK);
    snprintf(body, sizeof body, "{\"alipay_trade_query_response\":%s,\"sign\":\"%s\"}", raw, sig);
    const char *got;
    size_t gotlen;
    assert_int_equal(pt_alipay_verify_response(f->cfg.peer_key, body, strlen(body),
                                               "alipay.trade.query", &got, &gotlen),
                     PT_OK);
    assert_int_equal(gotlen, strlen(raw));
    /* the same body checked as another method's answer has no such member */
    assert_int_equal(pt_alipay_verify_response(f->cfg.peer_key, body, strlen(body),
                                               "alipay.trade.pay", &got, &gotlen),
                     PT_EPARSE);
    pt_pk_free(gw);
}

/* A signed alipay.trade.pay answer around raw (as the simulator signs). */
static void signed_pay_answer(const char *raw, struct pt_http_response *resp)
{
    struct pt_pk *gw = pt_test_key("alipay_gateway_private.pem");
    char sig[PT_BASE64_LEN(1024)], body[2048];
    assert_int_equal(pt_pk_sign_base64(gw, raw, strlen(raw), sig, sizeof sig), PT_OK);
    snprintf(body, sizeof body, "{\"alipay_trade_pay_response\":%s,\"sign\":\"%s\"}", raw, sig);
    memset(resp, 0, sizeof *resp);
    resp->status = 200;
    resp->body = strdup(body);
    resp->body_len = strlen(body);
    pt_pk_free(gw);
}

/* SPEC section 8: a charge in another currency than CNY carries
 * trans_currency (and settle_currency when configured), is only built when
 * the currency is listed, and the answer's currency is read from the answer,
 * never assumed. */
static void test_cross_border_currency(void **state)
{
    struct fixture *f = *state;
    struct pt_charge ch = {0};
    strcpy(ch.order_id, "XB-1");
    strcpy(ch.method, "barcode");
    strcpy(ch.currency, "USD");
    strcpy(ch.payment_code, "287634438256643941");
    ch.amount = 1000;
    struct pt_gw_env env = {.now_ms = 1764478805000};
    struct pt_http_request req;
    /* Not listed: never built (a queued charge from an older config). */
    assert_int_equal(pt_gateway_alipay.build(&f->cfg, PT_GW_PAY, &ch, &env, &req), PT_EINVAL);
    memcpy(f->cfg.currencies[0], "CNY", 4);
    memcpy(f->cfg.currencies[1], "USD", 4);
    f->cfg.ncurrencies = 2;
    memcpy(f->cfg.settle_currency, "USD", 4);
    assert_int_equal(pt_gateway_alipay.build(&f->cfg, PT_GW_PAY, &ch, &env, &req), PT_OK);
    struct pt_form form;
    pt_form_init(&form);
    assert_int_equal(pt_form_parse(req.body, req.body_len, &form), PT_OK);
    const char *biz = pt_form_get(&form, "biz_content");
    assert_non_null(biz);
    assert_non_null(strstr(biz, "\"total_amount\":\"10.00\",\"trans_currency\":\"USD\""));
    assert_non_null(strstr(biz, "\"settle_currency\":\"USD\""));
    pt_form_free(&form);
    pt_http_request_free(&req);

    /* An answer that names no currency is CNY (domestic Alipay). */
    struct pt_http_response resp;
    struct pt_gw_result out;
    signed_pay_answer("{\"code\":\"10000\",\"msg\":\"Success\",\"trade_no\":\"T1\","
                      "\"out_trade_no\":\"XB-1\",\"total_amount\":\"10.00\"}",
                      &resp);
    assert_int_equal(pt_gateway_alipay.parse(&f->cfg, PT_GW_PAY, &ch, &resp, &out), PT_OK);
    assert_int_equal(out.outcome, PT_OUTCOME_SUCCESS);
    assert_string_equal(out.currency, "CNY");
    assert_int_equal(out.amount, 1000);
    pt_http_response_free(&resp);
    signed_pay_answer("{\"code\":\"10000\",\"msg\":\"Success\",\"trade_no\":\"T1\","
                      "\"out_trade_no\":\"XB-1\",\"total_amount\":\"10.00\","
                      "\"trans_currency\":\"USD\"}",
                      &resp);
    assert_int_equal(pt_gateway_alipay.parse(&f->cfg, PT_GW_PAY, &ch, &resp, &out), PT_OK);
    assert_string_equal(out.currency, "USD");
    assert_int_equal(out.amount, 1000);
    pt_http_response_free(&resp);
    f->cfg.ncurrencies = 0;
    f->cfg.settle_currency[0] = '\0';
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requests),
        cmocka_unit_test(test_qr_expiry),
        cmocka_unit_test(test_cli_params),
        cmocka_unit_test(test_build_errors),
        cmocka_unit_test(test_timestamp),
        cmocka_unit_test(test_notify),
        cmocka_unit_test(test_responses),
        cmocka_unit_test(test_response_roundtrip),
        cmocka_unit_test(test_cross_border_currency),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
