/*
 * test_gw_2c2p.c - the 2C2P PGW 4.3 adapter against vectors made with
 * jsonwebtoken (tests/vectors/2c2p.json): request JWTs byte-equal to the
 * SDK's, amounts as exact JSON numbers (1000.00 THB -> 1000), HS256 only
 * (alg none, HS512, wrong secret and swapped payloads refused), the respCode
 * outcome table and backend notifications.
 */
#include "testutil.h"

#include "charge.h"
#include "err.h"
#include "gateway.h"
#include "gateways/2c2p.h"
#include "gateways/jwt.h"

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
    f->v = pt_test_vectors("2c2p.json");
    strcpy(f->cfg.name, "2c2p");
    strcpy(f->cfg.endpoint, "https://sandbox-pgw.2c2p.com");
    snprintf(f->cfg.merchant_id, sizeof f->cfg.merchant_id, "%s", pt_test_str(f->v, "merchant_id"));
    snprintf(f->cfg.notify_url, sizeof f->cfg.notify_url, "%s", pt_test_str(f->v, "notify_url"));
    const char *s = pt_test_str(f->v, "secret");
    memcpy(f->cfg.secret, s, strlen(s));
    f->cfg.secret_len = strlen(s);
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

static void test_requests(void **state)
{
    struct fixture *f = *state;
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, pt_test_cases(f->v, "2c2p.json", "requests"))
    {
        struct pt_charge ch;
        struct pt_http_request req;
        struct pt_gw_env env = {0};
        int pay = strcmp(pt_test_str(c, "op"), "pay") == 0;
        if (pay) {
            env.expire_at_ms = (int64_t)pt_test_int(c, "expire_at_ms"); /* 0: none */
            f->cfg.utc_offset_min = (int)pt_test_int(c, "utc_offset_min");
        }
        pt_test_charge_from(cJSON_GetObjectItem(c, "charge"), "2c2p", &ch);
        assert_int_equal(
            pt_gateway_2c2p.build(&f->cfg, pay ? PT_GW_PAY : PT_GW_QUERY, &ch, &env, &req), PT_OK);
        assert_string_equal(req.url,
                            pay ? "https://sandbox-pgw.2c2p.com/payment/4.3/paymentToken"
                                : "https://sandbox-pgw.2c2p.com/payment/4.3/paymentInquiry");
        if (strcmp(req.body, pt_test_str(c, "body")) != 0)
            fail_msg("%s: body\n  got  %s\n  want %s\n  payload %s", ch.order_id, req.body,
                     pt_test_str(c, "body"), pt_test_str(c, "payload_text"));
        /* and the JWT of the SDK's payload text directly */
        char *tok = NULL;
        const char *p = pt_test_str(c, "payload_text");
        assert_int_equal(pt_jwt_hs256_sign(f->cfg.secret, f->cfg.secret_len, p, strlen(p), &tok),
                         PT_OK);
        assert_string_equal(tok, pt_test_str(c, "token"));
        free(tok);
        pt_http_request_free(&req);
        n++;
    }
    assert_int_equal(n, 4);
    struct pt_charge ch;
    struct pt_http_request req;
    pt_test_charge_from(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f->v, "requests"), 0), "charge"),
        "2c2p", &ch);
    assert_int_equal(pt_gateway_2c2p.build(&f->cfg, PT_GW_CANCEL, &ch, NULL, &req),
                     PT_EUNSUPPORTED);
    assert_int_equal(pt_gateway_2c2p.build(&f->cfg, PT_GW_CLOSE, &ch, NULL, &req), PT_EUNSUPPORTED);
    assert_int_equal(pt_gateway_2c2p.default_utc_offset_min, 7 * 60);
}

/* paymentExpiry in the configured zone, west of UTC included. */
static void test_payment_expiry_zone(void **state)
{
    struct fixture *f = *state;
    struct pt_charge ch;
    struct pt_http_request req;
    struct pt_gw_env env = {.expire_at_ms = 1764478890000}; /* 05:01:30 UTC */
    pt_test_charge_from(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f->v, "requests"), 0), "charge"),
        "2c2p", &ch);
    f->cfg.utc_offset_min = -(3 * 60 + 30);
    assert_int_equal(pt_gateway_2c2p.build(&f->cfg, PT_GW_PAY, &ch, &env, &req), PT_OK);
    char *payload = NULL;
    size_t plen = 0;
    assert_int_equal(
        pt_2c2p_open(f->cfg.secret, f->cfg.secret_len, req.body, req.body_len, &payload, &plen),
        PT_OK);
    if (!strstr(payload, "\"paymentExpiry\":\"2025-11-30 01:31:30\""))
        fail_msg("paymentExpiry at -03:30: payload %s", payload);
    free(payload);
    pt_http_request_free(&req);
}

static void test_verify(void **state)
{
    struct fixture *f = *state;
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, pt_test_cases(f->v, "2c2p.json", "verify"))
    {
        const char *tok = pt_test_str(c, "token");
        char *payload = NULL;
        size_t plen = 0;
        int rc = pt_jwt_hs256_verify(f->cfg.secret, f->cfg.secret_len, tok, strlen(tok), &payload,
                                     &plen);
        if (rc != pt_test_rc(pt_test_str(c, "rc")))
            fail_msg("%s: rc %s, want %s", pt_test_str(c, "name"), pt_errname(rc),
                     pt_test_str(c, "rc"));
        if (rc == PT_OK) {
            assert_string_equal(payload, pt_test_str(c, "payload_text"));
            free(payload);
        }
        n++;
    }
    /* A table that went missing must not pass as "nothing to check". */
    assert_int_equal(n, 5);
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

static void test_responses(void **state)
{
    struct fixture *f = *state;
    const cJSON *c;
    int n = 0;
    struct pt_charge ch;
    pt_test_charge_from(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f->v, "requests"), 0), "charge"),
        "2c2p", &ch);
    cJSON_ArrayForEach(c, pt_test_cases(f->v, "2c2p.json", "responses"))
    {
        struct pt_http_response resp;
        struct pt_gw_result out;
        const char *name = pt_test_str(c, "name");
        int pay = strcmp(pt_test_str(c, "op"), "pay") == 0;
        pt_test_response(c, &resp);
        assert_int_equal(
            pt_gateway_2c2p.parse(&f->cfg, pay ? PT_GW_PAY : PT_GW_QUERY, &ch, &resp, &out), PT_OK);
        enum pt_outcome want = outcome_of(pt_test_str(c, "outcome"));
        if (out.outcome != want)
            fail_msg("%s: outcome %s (%s), want %s", name, pt_outcome_name(out.outcome), out.code,
                     pt_outcome_name(want));
        if (cJSON_GetObjectItem(c, "code"))
            assert_string_equal(out.code, pt_test_str(c, "code"));
        if (cJSON_GetObjectItem(c, "amount")) {
            assert_int_equal(out.amount, pt_test_int(c, "amount"));
            assert_string_equal(out.currency, pt_test_str(c, "currency"));
            assert_string_equal(out.trade_no, pt_test_str(c, "trade_no"));
        }
        if (cJSON_GetObjectItem(c, "action_url"))
            assert_string_equal(out.action_url, pt_test_str(c, "action_url"));
        if (cJSON_GetObjectItem(c, "paying"))
            assert_int_equal(out.paying, cJSON_IsTrue(cJSON_GetObjectItem(c, "paying")));
        pt_http_response_free(&resp);
        n++;
    }
    assert_int_equal(n, 13);
}

static void test_notify(void **state)
{
    struct fixture *f = *state;
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, pt_test_cases(f->v, "2c2p.json", "notify"))
    {
        struct pt_http_response msg;
        struct pt_notification out;
        const char *name = pt_test_str(c, "name");
        pt_test_response(c, &msg);
        int rc = pt_gateway_2c2p.parse_notify(&f->cfg, &msg, NULL, &out);
        if (rc != pt_test_rc(pt_test_str(c, "rc")))
            fail_msg("%s: rc %s, want %s", name, pt_errname(rc), pt_test_str(c, "rc"));
        if (rc == PT_OK) {
            assert_int_equal(out.status, outcome_of(pt_test_str(c, "status")));
            assert_int_equal(out.relevant, cJSON_IsTrue(cJSON_GetObjectItem(c, "relevant")));
            assert_int_equal(out.amount, 100000);
            assert_string_equal(out.currency, "THB");
        }
        if (cJSON_GetObjectItem(c, "dedup_id")) {
            assert_string_equal(out.dedup_id, pt_test_str(c, "dedup_id"));
            assert_string_equal(out.order_id, pt_test_str(c, "order_id"));
            assert_string_equal(out.trade_no, pt_test_str(c, "trade_no"));
            assert_string_equal(out.merchant_id, pt_test_str(c, "merchant_id"));
        }
        pt_http_response_free(&msg);
        n++;
    }
    assert_int_equal(n, 8);
}

static void test_minify(void **state)
{
    (void)state;
    char s[] = "{ \"a\" : \"x y\\\" z\" ,\n \"b\":[1, 2] }";
    size_t n = pt_2c2p_minify(s, strlen(s));
    assert_int_equal(n, strlen("{\"a\":\"x y\\\" z\",\"b\":[1,2]}"));
    assert_string_equal(s, "{\"a\":\"x y\\\" z\",\"b\":[1,2]}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requests),  cmocka_unit_test(test_verify),
        cmocka_unit_test(test_responses), cmocka_unit_test(test_notify),
        cmocka_unit_test(test_minify),    cmocka_unit_test(test_payment_expiry_zone),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
