/*
 * test_gw_wechat.c - the WeChat Pay APIv3 adapter against vectors made with
 * wechatpay-axios-plugin (tests/vectors/wechat.json): the exact message,
 * signature and Authorization of each request, response verification by
 * Wechatpay-Serial, notification decryption (valid, and tampered tag,
 * ciphertext, associated data, amount, key, serial, age) and outcomes.
 */
#include "testutil.h"

#include "charge.h"
#include "err.h"
#include "gateway.h"
#include "gateways/wechat.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fixture {
    cJSON *v;
    struct pt_gw_config cfg;
};

static void config(struct fixture *f, const char *peer)
{
    pt_gw_config_free(&f->cfg);
    strcpy(f->cfg.name, "wechat");
    strcpy(f->cfg.endpoint, "https://api.mch.weixin.qq.com");
    snprintf(f->cfg.app_id, sizeof f->cfg.app_id, "%s", pt_test_str(f->v, "appid"));
    snprintf(f->cfg.merchant_id, sizeof f->cfg.merchant_id, "%s", pt_test_str(f->v, "mchid"));
    snprintf(f->cfg.serial_no, sizeof f->cfg.serial_no, "%s", pt_test_str(f->v, "serial_no"));
    snprintf(f->cfg.notify_url, sizeof f->cfg.notify_url, "%s", pt_test_str(f->v, "notify_url"));
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
    f->v = pt_test_vectors("wechat.json");
    config(f, "wechat_platform_public.pem");
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
    struct pt_gw_env env = {.now_ms = (int64_t)pt_test_int(f->v, "now_ms"),
                            .nonce = pt_test_str(f->v, "nonce")};
    cJSON_ArrayForEach(c, pt_test_cases(f->v, "wechat.json", "requests"))
    {
        struct pt_charge ch;
        struct pt_http_request req;
        const char *name = pt_test_str(c, "name");
        env.expire_at_ms = (int64_t)pt_test_int(c, "expire_at_ms"); /* 0: none */
        pt_test_charge_from(cJSON_GetObjectItem(c, "charge"), "wechat", &ch);
        assert_int_equal(pt_gateway_wechat.build(&f->cfg,
                                                 (enum pt_gw_op)pt_test_op(pt_test_str(c, "op")),
                                                 &ch, &env, &req),
                         PT_OK);
        assert_string_equal(req.method, pt_test_str(c, "method"));
        assert_string_equal(req.url, pt_test_str(c, "url"));
        const char *want_body = pt_test_str(c, "body");
        if (*want_body) {
            assert_int_equal(req.body_len, strlen(want_body));
            assert_memory_equal(req.body, want_body, req.body_len);
        } else {
            assert_int_equal(req.body_len, 0);
        }
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
        struct pt_wechat_auth a;
        assert_int_equal(pt_wechat_parse_authorization(auth, &a), PT_OK);
        assert_string_equal(a.signature, pt_test_str(c, "signature"));
        assert_string_equal(a.nonce_str, env.nonce);
        assert_non_null(pt_http_request_header(&req, "User-Agent"));
        pt_http_request_free(&req);
        n++;
    }
    assert_int_equal(n, 4);

    /* no nonce, no request */
    struct pt_charge ch;
    struct pt_http_request req;
    env.nonce = NULL;
    pt_test_charge_from(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f->v, "requests"), 0), "charge"),
        "wechat", &ch);
    assert_int_equal(pt_gateway_wechat.build(&f->cfg, PT_GW_PAY, &ch, &env, &req), PT_EINVAL);
}

static void test_authorization_parse(void **state)
{
    (void)state;
    struct pt_wechat_auth a;
    static const char *const bad[] = {
        "Bearer x",
        "WECHATPAY2-SHA256-RSA2048 mchid=\"1\"",
        "WECHATPAY2-SHA256-RSA2048 mchid=\"1,serial_no=\"2\"",
        "WECHATPAY2-SHA256-RSA2048 mchid=\"1\",mchid=\"1\",serial_no=\"2\",timestamp=\"3\","
        "nonce_str=\"4\",signature=\"5\"",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(pt_wechat_parse_authorization(bad[i], &a), PT_EPARSE);
    /* the documentation's field order is accepted as well */
    assert_int_equal(pt_wechat_parse_authorization(
                         "WECHATPAY2-SHA256-RSA2048 mchid=\"1900000001\",nonce_str=\"n\","
                         "signature=\"c2ln\",timestamp=\"1554208460\",serial_no=\"1DDE55AD\"",
                         &a),
                     PT_OK);
    assert_string_equal(a.serial_no, "1DDE55AD");
    char out[64];
    assert_int_equal(pt_wechat_authorization("1", "2", "3", "4\"", "5", out, sizeof out),
                     PT_EINVAL);
    assert_int_equal(pt_wechat_authorization("1", "2", "3", "4", "5", out, 10), PT_ETOOBIG);
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

static void run_responses(struct fixture *f)
{
    const cJSON *c;
    struct pt_charge ch;
    pt_test_charge_from(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f->v, "requests"), 0), "charge"),
        "wechat", &ch);
    cJSON_ArrayForEach(c, pt_test_cases(f->v, "wechat.json", "responses"))
    {
        struct pt_http_response resp;
        struct pt_gw_result out;
        const char *name = pt_test_str(c, "name");
        pt_test_response(c, &resp);
        assert_int_equal(pt_gateway_wechat.parse(&f->cfg,
                                                 (enum pt_gw_op)pt_test_op(pt_test_str(c, "op")),
                                                 &ch, &resp, &out),
                         PT_OK);
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
    }
}

static void test_responses(void **state)
{
    run_responses(*state);
}

/* The same table with the platform certificate: the serial comes from it. */
static void test_responses_with_certificate(void **state)
{
    struct fixture *f = *state;
    config(f, "wechat_platform_cert.pem");
    assert_string_equal(f->cfg.platform_serial, "");
    run_responses(f);
    config(f, "wechat_platform_public.pem");
}

static void test_notify(void **state)
{
    struct fixture *f = *state;
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, pt_test_cases(f->v, "wechat.json", "notify"))
    {
        struct pt_http_response msg;
        struct pt_notification out;
        struct pt_gw_env env = {.now_ms = (int64_t)pt_test_int(c, "now_ms")};
        const char *name = pt_test_str(c, "name");
        pt_test_response(c, &msg);
        int rc = pt_gateway_wechat.parse_notify(&f->cfg, &msg, &env, &out);
        if (rc != pt_test_rc(pt_test_str(c, "rc")))
            fail_msg("%s: rc %s, want %s", name, pt_errname(rc), pt_test_str(c, "rc"));
        if (rc == PT_OK) {
            assert_int_equal(out.relevant, cJSON_IsTrue(cJSON_GetObjectItem(c, "relevant")));
            assert_string_equal(out.dedup_id, pt_test_str(c, "dedup_id"));
            if (out.relevant) {
                assert_int_equal(out.status, outcome_of(pt_test_str(c, "status")));
                assert_string_equal(out.order_id, pt_test_str(c, "order_id"));
                assert_string_equal(out.trade_no, pt_test_str(c, "trade_no"));
                assert_int_equal(out.amount, pt_test_int(c, "amount"));
                assert_string_equal(out.currency, pt_test_str(c, "currency"));
                assert_string_equal(out.merchant_id, pt_test_str(c, "merchant_id"));
            }
        }
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
    assert_int_equal(n, 10);
}

/* What the simulator does: encrypt, sign; what payterm does: verify, decrypt. */
static void test_notify_roundtrip(void **state)
{
    struct fixture *f = *state;
    char *ct = NULL, *plain = NULL;
    size_t plen;
    const char *text = "{\"a\":1}";
    assert_int_equal(
        pt_wechat_encrypt(f->cfg.secret, 32, "n0nce", "transaction", text, strlen(text), &ct),
        PT_OK);
    assert_int_equal(
        pt_wechat_decrypt(f->cfg.secret, 32, "n0nce", "transaction", ct, &plain, &plen), PT_OK);
    assert_string_equal(plain, text);
    free(plain);
    assert_int_equal(pt_wechat_decrypt(f->cfg.secret, 32, "n0nce", "other", ct, &plain, &plen),
                     PT_ESIG);
    assert_int_equal(
        pt_wechat_decrypt(f->cfg.secret, 31, "n0nce", "transaction", ct, &plain, &plen), PT_EINVAL);
    assert_int_equal(
        pt_wechat_decrypt(f->cfg.secret, 32, "n0nce", "transaction", "AAAA", &plain, &plen),
        PT_EPARSE);
    free(ct);
}

/* A close of an order WeChat never had: 404 ORDER_NOT_EXIST, signed like
 * every answer.  NOT_FOUND (the sync engine then cancels locally: nothing can
 * be paid), not AMBIGUOUS (which left a client's cancel hanging at 202). */
static void test_close_not_found(void **state)
{
    struct fixture *f = *state;
    static const char body[] = "{\"code\":\"ORDER_NOT_EXIST\",\"message\":\"订单不存在\"}";
    struct pt_pk *platform = pt_test_key("wechat_platform_private.pem");
    size_t mlen = 0;
    char *msg = pt_wechat_response_message("1764478800", "p1Xq9RmKz2", body, strlen(body), &mlen);
    char sig[512];
    assert_non_null(msg);
    assert_int_equal(pt_pk_sign_base64(platform, msg, mlen, sig, sizeof sig), PT_OK);
    struct pt_http_response resp;
    memset(&resp, 0, sizeof resp);
    resp.status = 404;
    pt_http_response_add_header(&resp, "Wechatpay-Timestamp", "1764478800");
    pt_http_response_add_header(&resp, "Wechatpay-Nonce", "p1Xq9RmKz2");
    pt_http_response_add_header(&resp, "Wechatpay-Signature", sig);
    pt_http_response_add_header(&resp, "Wechatpay-Serial", f->cfg.platform_serial);
    resp.body = strdup(body);
    resp.body_len = strlen(body);
    struct pt_charge ch;
    pt_test_charge_from(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f->v, "requests"), 0), "charge"),
        "wechat", &ch);
    struct pt_gw_result out;
    assert_int_equal(pt_gateway_wechat.parse(&f->cfg, PT_GW_CANCEL, &ch, &resp, &out), PT_OK);
    if (out.outcome != PT_OUTCOME_NOT_FOUND)
        fail_msg("close 404: outcome %s (%s), want NOT_FOUND", pt_outcome_name(out.outcome),
                 out.code);
    assert_string_equal(out.code, "ORDER_NOT_EXIST");
    pt_http_response_free(&resp);
    free(msg);
    pt_pk_free(platform);
}

/* time_expire as the Native create page writes it: RFC 3339 in China time,
 * whole seconds; a payment code (APIv2) has no close to expire with. */
static void test_time_expire(void **state)
{
    struct fixture *f = *state;
    static const struct {
        int64_t ms;
        const char *text;
    } rows[] = {
        {1764478890000, "2025-11-30T13:01:30+08:00"},
        {1764478890999, "2025-11-30T13:01:30+08:00"}, /* the fraction is dropped */
        {1767196799000, "2025-12-31T23:59:59+08:00"},
        {1767196800000, "2026-01-01T00:00:00+08:00"}, /* new year in China first */
    };
    size_t n = 0;
    for (; n < sizeof rows / sizeof rows[0]; n++) {
        char out[PT_WECHAT_TIME_LEN];
        pt_wechat_time(rows[n].ms, out);
        assert_string_equal(out, rows[n].text);
    }
    assert_int_equal(n, 4);
    struct pt_charge ch;
    struct pt_http_request req;
    struct pt_gw_env env = {.now_ms = 1764478800000, .nonce = "n", .expire_at_ms = 1};
    pt_test_charge_from(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f->v, "requests"), 0), "charge"),
        "wechat", &ch);
    strcpy(ch.method, "barcode");
    assert_int_equal(pt_gateway_wechat.build(&f->cfg, PT_GW_CLOSE, &ch, &env, &req),
                     PT_EUNSUPPORTED);
    assert_int_equal(pt_gateway_wechat.close_min_age_s, 300);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_time_expire),
        cmocka_unit_test(test_requests),
        cmocka_unit_test(test_authorization_parse),
        cmocka_unit_test(test_responses),
        cmocka_unit_test(test_responses_with_certificate),
        cmocka_unit_test(test_notify),
        cmocka_unit_test(test_notify_roundtrip),
        cmocka_unit_test(test_close_not_found),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
