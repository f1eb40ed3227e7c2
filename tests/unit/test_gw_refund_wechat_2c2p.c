/*
 * test_gw_refund_wechat_2c2p.c - the refund calls of the WeChat Pay APIv3 and
 * 2C2P adapters.
 *
 * WeChat against vectors made with wechatpay-axios-plugin
 * (tests/vectors/wechat_refund.json, gen/gen_refund_wechat_2c2p.js): the
 * exact body, string to sign, signature and Authorization of each refund and
 * refund query; the outcome of every answer (SUCCESS / PROCESSING / ABNORMAL
 * / CLOSED, each documented error class, forged and unsigned answers, answers
 * about another refund or amount); REFUND.SUCCESS / ABNORMAL / CLOSED
 * notifications decrypted and bound by mchid, tampered ones refused; payment
 * notifications as before.  2C2P: its refund calls are the Payment
 * Maintenance API's, without a refund key (vectors in test_gw_2c2p_pm.c).
 */
#include "testutil.h"

#include "charge.h"
#include "err.h"
#include "gateway.h"
#include "gateways/2c2p.h"
#include "gateways/wechat.h"
#include "refund.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fixture {
    cJSON *v;
    struct pt_gw_config cfg;
    struct pt_charge charge;
};

static void config(struct fixture *f, const char *peer)
{
    pt_gw_config_free(&f->cfg);
    memset(&f->cfg, 0, sizeof f->cfg);
    strcpy(f->cfg.name, "wechat");
    strcpy(f->cfg.endpoint, "https://api.mch.weixin.qq.com");
    snprintf(f->cfg.app_id, sizeof f->cfg.app_id, "%s", pt_test_str(f->v, "appid"));
    snprintf(f->cfg.merchant_id, sizeof f->cfg.merchant_id, "%s", pt_test_str(f->v, "mchid"));
    snprintf(f->cfg.serial_no, sizeof f->cfg.serial_no, "%s", pt_test_str(f->v, "serial_no"));
    const char *k = pt_test_str(f->v, "apiv3_key");
    memcpy(f->cfg.secret, k, strlen(k));
    f->cfg.secret_len = strlen(k);
    f->cfg.private_key = pt_test_key("merchant_wechat_pkcs8.pem");
    f->cfg.peer_key = pt_test_key(peer);
    /* with a public key the serial comes from config; a certificate carries it */
    if (strstr(peer, "cert") == NULL)
        snprintf(f->cfg.platform_serial, sizeof f->cfg.platform_serial, "%s",
                 pt_test_str(f->v, "platform_serial"));
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    f->v = pt_test_vectors("wechat_refund.json");
    config(f, "wechat_platform_public.pem");
    pt_test_charge_from(cJSON_GetObjectItem(f->v, "charge"), "wechat", &f->charge);
    f->charge.state = PT_STATE_SUCCESS;
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

/* A refund of the fixture's charge from a vector's refund object. */
static void refund_from(const cJSON *j, const struct pt_charge *c, struct pt_refund *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->refund_id, sizeof r->refund_id, "%s", pt_test_str(j, "refund_id"));
    snprintf(r->order_id, sizeof r->order_id, "%s", c->order_id);
    snprintf(r->gateway, sizeof r->gateway, "%s", c->gateway);
    snprintf(r->currency, sizeof r->currency, "%s", pt_test_str(j, "currency"));
    snprintf(r->reason, sizeof r->reason, "%s", pt_test_str(j, "reason"));
    r->amount = pt_test_int(j, "amount");
    r->state = PT_STATE_PROCESSING;
}

/* The refund every answer and notification of the vectors is about. */
static void first_refund(struct fixture *f, struct pt_refund *r)
{
    refund_from(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f->v, "requests"), 0), "refund"),
        &f->charge, r);
}

static enum pt_gw_refund_op refund_op(const char *s)
{
    if (strcmp(s, "refund") == 0)
        return PT_GW_REFUND;
    if (strcmp(s, "refund_query") != 0)
        fail_msg("unknown refund op %s", s);
    return PT_GW_REFUND_QUERY;
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

static void test_wechat_has_refunds(void **state)
{
    (void)state;
    assert_non_null(pt_gateway_wechat.build_refund);
    assert_non_null(pt_gateway_wechat.parse_refund);
}

/* The request bytes are the SDK's: body, string to sign, signature, header. */
static void test_wechat_refund_requests(void **state)
{
    struct fixture *f = *state;
    const cJSON *c;
    int n = 0;
    struct pt_gw_env env = {.now_ms = (int64_t)pt_test_int(f->v, "now_ms"),
                            .nonce = pt_test_str(f->v, "nonce")};
    assert_non_null(pt_gateway_wechat.build_refund);
    cJSON_ArrayForEach(c, pt_test_cases(f->v, "wechat_refund.json", "requests"))
    {
        struct pt_refund r;
        struct pt_http_request req;
        const char *name = pt_test_str(c, "name");
        refund_from(cJSON_GetObjectItem(c, "refund"), &f->charge, &r);
        snprintf(f->cfg.notify_url, sizeof f->cfg.notify_url, "%s", pt_test_str(c, "notify_url"));
        int rc = pt_gateway_wechat.build_refund(&f->cfg, refund_op(pt_test_str(c, "op")),
                                                &f->charge, &r, &env, &req);
        if (rc != PT_OK)
            fail_msg("%s: build_refund %s", name, pt_errname(rc));
        assert_string_equal(req.method, pt_test_str(c, "method"));
        assert_string_equal(req.url, pt_test_str(c, "url"));
        const char *want_body = pt_test_str(c, "body");
        if (req.body_len != strlen(want_body) ||
            (req.body_len && memcmp(req.body, want_body, req.body_len) != 0))
            fail_msg("%s: body\n  got  %.*s\n  want %s", name, (int)req.body_len,
                     req.body ? req.body : "", want_body);
        size_t len = 0;
        char *msg = pt_wechat_request_message(req.method, pt_wechat_url_path(req.url),
                                              pt_test_str(f->v, "timestamp"), env.nonce, req.body,
                                              req.body_len, &len);
        assert_string_equal(msg, pt_test_str(c, "message"));
        free(msg);
        const char *auth = pt_http_request_header(&req, "Authorization");
        if (!auth || strcmp(auth, pt_test_str(c, "authorization")) != 0)
            fail_msg("%s: Authorization\n  got  %s\n  want %s", name, auth ? auth : "(none)",
                     pt_test_str(c, "authorization"));
        assert_string_equal(pt_http_request_header(&req, "Accept"), "application/json");
        const char *ct = pt_http_request_header(&req, "Content-Type");
        if (*want_body)
            assert_string_equal(ct, "application/json");
        else
            assert_null(ct);
        assert_non_null(pt_http_request_header(&req, "User-Agent"));
        pt_http_request_free(&req);
        n++;
    }
    /* A table that went missing must not pass as "nothing to check". */
    assert_int_equal(n, 4);
}

/* What WeChat would refuse, or what cannot be a refund of this charge, is
 * never built. */
static void test_wechat_refund_build_refuses(void **state)
{
    struct fixture *f = *state;
    struct pt_gw_env env = {.now_ms = (int64_t)pt_test_int(f->v, "now_ms"),
                            .nonce = pt_test_str(f->v, "nonce")};
    struct pt_refund good, r;
    struct pt_http_request req;
    assert_non_null(pt_gateway_wechat.build_refund);
    first_refund(f, &good);
    assert_int_equal(
        pt_gateway_wechat.build_refund(&f->cfg, PT_GW_REFUND, &f->charge, &good, &env, &req),
        PT_OK);
    pt_http_request_free(&req);

    /* '.' is a payterm refund id character, not a WeChat out_refund_no one. */
    r = good;
    strcpy(r.refund_id, "R.20261201.0001");
    assert_int_equal(
        pt_gateway_wechat.build_refund(&f->cfg, PT_GW_REFUND, &f->charge, &r, &env, &req),
        PT_EINVAL);
    assert_int_equal(
        pt_gateway_wechat.build_refund(&f->cfg, PT_GW_REFUND_QUERY, &f->charge, &r, &env, &req),
        PT_EINVAL);
    r = good;
    r.amount = f->charge.amount + 1;
    assert_int_equal(
        pt_gateway_wechat.build_refund(&f->cfg, PT_GW_REFUND, &f->charge, &r, &env, &req),
        PT_EINVAL);
    r = good;
    r.amount = 0;
    assert_int_equal(
        pt_gateway_wechat.build_refund(&f->cfg, PT_GW_REFUND, &f->charge, &r, &env, &req),
        PT_EINVAL);
    r = good;
    strcpy(r.currency, "HKD");
    assert_int_equal(
        pt_gateway_wechat.build_refund(&f->cfg, PT_GW_REFUND, &f->charge, &r, &env, &req),
        PT_EINVAL);
    r = good;
    strcpy(r.order_id, "ORDER-OTHER");
    assert_int_equal(
        pt_gateway_wechat.build_refund(&f->cfg, PT_GW_REFUND, &f->charge, &r, &env, &req),
        PT_EINVAL);
    env.nonce = NULL;
    assert_int_equal(
        pt_gateway_wechat.build_refund(&f->cfg, PT_GW_REFUND, &f->charge, &good, &env, &req),
        PT_EINVAL);
}

static void run_responses(struct fixture *f)
{
    const cJSON *c;
    int n = 0;
    struct pt_refund r;
    assert_non_null(pt_gateway_wechat.parse_refund);
    first_refund(f, &r);
    cJSON_ArrayForEach(c, pt_test_cases(f->v, "wechat_refund.json", "responses"))
    {
        struct pt_http_response resp;
        struct pt_gw_result out;
        const char *name = pt_test_str(c, "name");
        pt_test_response(c, &resp);
        assert_int_equal(pt_gateway_wechat.parse_refund(&f->cfg, refund_op(pt_test_str(c, "op")),
                                                        &f->charge, &r, &resp, &out),
                         PT_OK);
        enum pt_outcome want = outcome_of(pt_test_str(c, "outcome"));
        if (out.outcome != want)
            fail_msg("%s: outcome %s (%s), want %s", name, pt_outcome_name(out.outcome), out.code,
                     pt_outcome_name(want));
        if (cJSON_GetObjectItem(c, "code") && strcmp(out.code, pt_test_str(c, "code")) != 0)
            fail_msg("%s: code %s, want %s", name, out.code, pt_test_str(c, "code"));
        if (cJSON_GetObjectItem(c, "message"))
            assert_string_equal(out.message, pt_test_str(c, "message"));
        if (cJSON_GetObjectItem(c, "amount")) {
            assert_int_equal(out.amount, pt_test_int(c, "amount"));
            assert_string_equal(out.currency, pt_test_str(c, "currency"));
            assert_string_equal(out.trade_no, pt_test_str(c, "trade_no"));
        }
        if (out.review != cJSON_IsTrue(cJSON_GetObjectItem(c, "review")))
            fail_msg("%s: review %d", name, out.review);
        /* Nothing unverified is ever a success. */
        if (!cJSON_IsTrue(cJSON_GetObjectItem(c, "sdk_valid")))
            assert_int_equal(out.outcome, PT_OUTCOME_AMBIGUOUS);
        pt_http_response_free(&resp);
        n++;
    }
    assert_int_equal(n, 39);
}

static void test_wechat_refund_responses(void **state)
{
    run_responses(*state);
}

/* The same table with the platform certificate: the serial comes from it. */
static void test_wechat_refund_responses_with_certificate(void **state)
{
    struct fixture *f = *state;
    config(f, "wechat_platform_cert.pem");
    assert_string_equal(f->cfg.platform_serial, "");
    run_responses(f);
    config(f, "wechat_platform_public.pem");
}

static void check_notification(const cJSON *c, const struct pt_notification *out)
{
    const char *name = pt_test_str(c, "name");
    if (out->relevant != cJSON_IsTrue(cJSON_GetObjectItem(c, "relevant")))
        fail_msg("%s: relevant %d", name, out->relevant);
    if (out->refund != cJSON_IsTrue(cJSON_GetObjectItem(c, "refund")))
        fail_msg("%s: refund %d", name, out->refund);
    assert_string_equal(out->gateway, "wechat");
    assert_string_equal(out->dedup_id, pt_test_str(c, "dedup_id"));
    if (!out->relevant)
        return;
    if (out->status != outcome_of(pt_test_str(c, "status")))
        fail_msg("%s: status %s", name, pt_outcome_name(out->status));
    assert_string_equal(out->order_id, pt_test_str(c, "order_id"));
    assert_string_equal(out->trade_no, pt_test_str(c, "trade_no"));
    assert_int_equal(out->amount, pt_test_int(c, "amount"));
    assert_string_equal(out->currency, pt_test_str(c, "currency"));
    assert_string_equal(out->merchant_id, pt_test_str(c, "merchant_id"));
    if (out->merchant_ok != cJSON_IsTrue(cJSON_GetObjectItem(c, "merchant_ok")))
        fail_msg("%s: merchant_ok %d", name, out->merchant_ok);
    assert_string_equal(out->refund_id, pt_test_str(c, "refund_id"));
    assert_string_equal(out->refund_no, pt_test_str(c, "refund_no"));
}

static void test_wechat_refund_notify(void **state)
{
    struct fixture *f = *state;
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, pt_test_cases(f->v, "wechat_refund.json", "notify"))
    {
        struct pt_http_response msg;
        struct pt_notification out;
        struct pt_gw_env env = {.now_ms = (int64_t)pt_test_int(c, "now_ms")};
        const char *name = pt_test_str(c, "name");
        pt_test_response(c, &msg);
        int rc = pt_gateway_wechat.parse_notify(&f->cfg, &msg, &env, &out);
        if (rc != pt_test_rc(pt_test_str(c, "rc")))
            fail_msg("%s: rc %s, want %s", name, pt_errname(rc), pt_test_str(c, "rc"));
        if (rc == PT_OK)
            check_notification(c, &out);
        else
            assert_int_equal(out.relevant, 0);
        if (cJSON_GetObjectItem(c, "plaintext")) {
            char *plain = NULL;
            size_t plen = 0;
            assert_int_equal(pt_wechat_notify_plaintext(f->cfg.secret, f->cfg.secret_len, msg.body,
                                                        msg.body_len, &plain, &plen),
                             PT_OK);
            assert_string_equal(plain, pt_test_str(c, "plaintext"));
            free(plain);
        }
        pt_http_response_free(&msg);
        n++;
    }
    assert_int_equal(n, 19);
}

/* The payment notifications of tests/vectors/wechat.json decide what they
 * decided before refunds existed, and none of them is a refund. */
static void test_wechat_payment_notify_unchanged(void **state)
{
    struct fixture *f = *state;
    cJSON *pay = pt_test_vectors("wechat.json");
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, pt_test_cases(pay, "wechat.json", "notify"))
    {
        struct pt_http_response msg;
        struct pt_notification out;
        struct pt_gw_env env = {.now_ms = (int64_t)pt_test_int(c, "now_ms")};
        pt_test_response(c, &msg);
        int rc = pt_gateway_wechat.parse_notify(&f->cfg, &msg, &env, &out);
        assert_int_equal(rc, pt_test_rc(pt_test_str(c, "rc")));
        if (rc == PT_OK) {
            assert_int_equal(out.refund, 0);
            assert_string_equal(out.refund_id, "");
            assert_string_equal(out.dedup_id, pt_test_str(c, "dedup_id"));
            assert_int_equal(out.relevant, cJSON_IsTrue(cJSON_GetObjectItem(c, "relevant")));
            if (out.relevant) {
                assert_int_equal(out.merchant_ok, 1);
                assert_string_equal(out.order_id, pt_test_str(c, "order_id"));
                assert_int_equal(out.amount, pt_test_int(c, "amount"));
            }
        }
        pt_http_response_free(&msg);
        n++;
    }
    assert_int_equal(n, 10);
    cJSON_Delete(pay);
}

/* 2C2P refunds go through its Payment Maintenance API, whose request has
 * no refund key (test_gw_2c2p_pm.c has its vectors): the table says so,
 * and the sync engine keeps the ordering rule for it.  WeChat's
 * out_refund_no is a refund key: no ordering rule there. */
static void test_2c2p_refunds_are_keyless(void **state)
{
    (void)state;
    assert_non_null(pt_gateway_2c2p.build_refund);
    assert_non_null(pt_gateway_2c2p.parse_refund);
    assert_true(pt_gateway_2c2p.refund_keyless);
    assert_non_null(pt_gateway_2c2p.parse_refund_list);
    assert_false(pt_gateway_wechat.refund_keyless);
    assert_null(pt_gateway_wechat.parse_refund_list);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wechat_has_refunds),
        cmocka_unit_test(test_wechat_refund_requests),
        cmocka_unit_test(test_wechat_refund_build_refuses),
        cmocka_unit_test(test_wechat_refund_responses),
        cmocka_unit_test(test_wechat_refund_responses_with_certificate),
        cmocka_unit_test(test_wechat_refund_notify),
        cmocka_unit_test(test_wechat_payment_notify_unchanged),
        cmocka_unit_test(test_2c2p_refunds_are_keyless),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
