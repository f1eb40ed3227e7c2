/*
 * test_gw_refund_alipay_stripe.c - the refund calls of the Alipay and Stripe
 * adapters against vectors made by the vendors' SDKs
 * (tests/vectors/alipay_refund.json, stripe_refund.json, written by
 * tests/vectors/gen/gen_refund_alipay_stripe.js).
 *
 * Alipay: alipay.trade.refund and alipay.trade.fastpay.refund.query carry
 * exactly alipay-sdk's parameters and RSA2 sign; every answer class is
 * classified (fund_change Y/N, each 40004 refusal, 20000, bad signatures,
 * query found / not found / for another refund or amount).
 * Stripe: POST /v1/refunds and GET /v1/refunds byte-equal to what the stripe
 * SDK puts on the wire (form body, Idempotency-Key); refund statuses,
 * over-refund and idempotency errors, 429/5xx; the refund webhooks
 * (refund.updated, refund.failed, charge.refunded) and a payment webhook that
 * must read exactly as before.
 */
#include "testutil.h"

#include "charge.h"
#include "err.h"
#include "gateway.h"
#include "gateways/alipay.h"
#include "gateways/form.h"
#include "gateways/stripe.h"
#include "refund.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fixture {
    cJSON *alipay, *stripe, *stripe_payments;
    struct pt_gw_config acfg, scfg;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    f->alipay = pt_test_vectors("alipay_refund.json");
    f->stripe = pt_test_vectors("stripe_refund.json");
    f->stripe_payments = pt_test_vectors("stripe.json");
    strcpy(f->acfg.name, "alipay");
    strcpy(f->acfg.endpoint, "https://openapi.alipay.com/gateway.do");
    snprintf(f->acfg.app_id, sizeof f->acfg.app_id, "%s", pt_test_str(f->alipay, "app_id"));
    /* A notify_url is configured: refunds must still not send it. */
    strcpy(f->acfg.notify_url, "https://pos.example.com/notify/alipay");
    f->acfg.private_key = pt_test_key("merchant_alipay_pkcs1.pem");
    f->acfg.peer_key = pt_test_key("alipay_gateway_public.pem");
    strcpy(f->scfg.name, "stripe");
    strcpy(f->scfg.endpoint, "https://api.stripe.com");
    const char *sk = pt_test_str(f->stripe, "secret_key");
    const char *wh = pt_test_str(f->stripe, "webhook_secret");
    memcpy(f->scfg.secret, sk, strlen(sk));
    f->scfg.secret_len = strlen(sk);
    memcpy(f->scfg.webhook_secret, wh, strlen(wh));
    f->scfg.webhook_secret_len = strlen(wh);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    pt_gw_config_free(&f->acfg);
    pt_gw_config_free(&f->scfg);
    cJSON_Delete(f->alipay);
    cJSON_Delete(f->stripe);
    cJSON_Delete(f->stripe_payments);
    free(f);
    return 0;
}

/* A refund of charge c from a vector's {refund_id, amount, currency, reason}. */
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

/* The fields of a classified answer a vector case names, each compared. */
static void check_result(const cJSON *c, const struct pt_gw_result *out)
{
    const char *name = pt_test_str(c, "name");
    enum pt_outcome want = outcome_of(pt_test_str(c, "outcome"));
    if (out->outcome != want)
        fail_msg("%s: outcome %s (%s: %s), want %s", name, pt_outcome_name(out->outcome), out->code,
                 out->message, pt_outcome_name(want));
    if (cJSON_GetObjectItem(c, "code") && strcmp(out->code, pt_test_str(c, "code")) != 0)
        fail_msg("%s: code '%s', want '%s'", name, out->code, pt_test_str(c, "code"));
    if (cJSON_GetObjectItem(c, "message") && strcmp(out->message, pt_test_str(c, "message")) != 0)
        fail_msg("%s: message '%s', want '%s'", name, out->message, pt_test_str(c, "message"));
    if (cJSON_GetObjectItem(c, "trade_no") &&
        strcmp(out->trade_no, pt_test_str(c, "trade_no")) != 0)
        fail_msg("%s: trade_no '%s', want '%s'", name, out->trade_no, pt_test_str(c, "trade_no"));
    if (cJSON_GetObjectItem(c, "amount") && out->amount != pt_test_int(c, "amount"))
        fail_msg("%s: amount %lld, want %lld", name, (long long)out->amount,
                 pt_test_int(c, "amount"));
    if (cJSON_GetObjectItem(c, "currency") &&
        strcmp(out->currency, pt_test_str(c, "currency")) != 0)
        fail_msg("%s: currency '%s', want '%s'", name, out->currency, pt_test_str(c, "currency"));
    if (out->review != (int)pt_test_int(c, "review"))
        fail_msg("%s: review %d, want %lld", name, out->review, pt_test_int(c, "review"));
    /* Only a proven refund carries an amount; an answer that is not a
     * success never reports money as moved. */
    if (out->outcome != PT_OUTCOME_SUCCESS && out->amount != 0 &&
        out->outcome != PT_OUTCOME_PENDING && out->outcome != PT_OUTCOME_DECLINED)
        fail_msg("%s: %s with amount %lld", name, pt_outcome_name(out->outcome),
                 (long long)out->amount);
}

static void test_tables(void **state)
{
    (void)state;
    assert_non_null(pt_gateway_alipay.build_refund);
    assert_non_null(pt_gateway_alipay.parse_refund);
    assert_non_null(pt_gateway_stripe.build_refund);
    assert_non_null(pt_gateway_stripe.parse_refund);
    assert_string_equal(pt_alipay_refund_method_name(PT_GW_REFUND), "alipay.trade.refund");
    assert_string_equal(pt_alipay_refund_method_name(PT_GW_REFUND_QUERY),
                        "alipay.trade.fastpay.refund.query");
}

/* ---- Alipay ----------------------------------------------------------------- */

/* The adapter's request must carry exactly the SDK's parameters and sign. */
static void test_alipay_requests(void **state)
{
    struct fixture *f = *state;
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, pt_test_cases(f->alipay, "alipay_refund.json", "requests"))
    {
        const char *name = pt_test_str(c, "name");
        struct pt_charge ch;
        struct pt_refund r;
        struct pt_http_request req;
        struct pt_gw_env env = {.now_ms = (int64_t)pt_test_int(c, "now_ms")};
        pt_test_charge_from(cJSON_GetObjectItem(c, "charge"), "alipay", &ch);
        refund_from(cJSON_GetObjectItem(c, "refund"), &ch, &r);
        int rc = pt_gateway_alipay.build_refund(&f->acfg, refund_op(pt_test_str(c, "op")), &ch, &r,
                                                &env, &req);
        if (rc != PT_OK)
            fail_msg("%s: build_refund %s", name, pt_errname(rc));
        assert_string_equal(req.method, "POST");
        assert_string_equal(req.url, "https://openapi.alipay.com/gateway.do");
        assert_string_equal(pt_http_request_header(&req, "Content-Type"),
                            "application/x-www-form-urlencoded;charset=utf-8");
        struct pt_form form;
        pt_form_init(&form);
        assert_int_equal(pt_form_parse(req.body, req.body_len, &form), PT_OK);
        const cJSON *p;
        size_t count = 0;
        cJSON_ArrayForEach(p, cJSON_GetObjectItem(c, "params"))
        {
            const char *got = pt_form_get(&form, p->string);
            if (!got || strcmp(got, p->valuestring) != 0)
                fail_msg("%s: param %s = '%s', SDK has '%s'", name, p->string,
                         got ? got : "(missing)", p->valuestring);
            count++;
        }
        if (form.n != count) /* nothing more than the SDK sends (no notify_url) */
            fail_msg("%s: %zu params, SDK sends %zu", name, form.n, count);
        char *sts = pt_alipay_string_to_sign(&form, PT_ALIPAY_REQUEST, NULL);
        assert_string_equal(sts, pt_test_str(c, "string_to_sign"));
        assert_string_equal(pt_form_get(&form, "sign"), pt_test_str(c, "sign"));
        free(sts);
        pt_form_free(&form);
        pt_http_request_free(&req);
        n++;
    }
    assert_int_equal(n, 4);
}

static void test_alipay_build_errors(void **state)
{
    struct fixture *f = *state;
    struct pt_charge c = {0};
    struct pt_refund r = {0};
    struct pt_http_request req;
    struct pt_gw_env env = {.now_ms = 1764583200000};
    strcpy(c.gateway, "alipay");
    strcpy(c.order_id, "O-1");
    strcpy(c.method, "barcode");
    strcpy(c.currency, "CNY");
    c.amount = 1000;
    strcpy(r.refund_id, "R-1");
    strcpy(r.currency, "CNY");
    r.amount = 100;
    assert_int_equal(pt_gateway_alipay.build_refund(&f->acfg, PT_GW_REFUND, &c, &r, &env, &req),
                     PT_OK);
    pt_http_request_free(&req);
    /* a refund in another currency than its charge is never sent */
    strcpy(r.currency, "USD");
    assert_int_equal(pt_gateway_alipay.build_refund(&f->acfg, PT_GW_REFUND, &c, &r, &env, &req),
                     PT_EINVAL);
    strcpy(r.currency, "CNY");
    /* nothing to refund, or more than the charge */
    r.amount = 0;
    assert_int_not_equal(pt_gateway_alipay.build_refund(&f->acfg, PT_GW_REFUND, &c, &r, &env, &req),
                         PT_OK);
    r.amount = 1001;
    assert_int_equal(pt_gateway_alipay.build_refund(&f->acfg, PT_GW_REFUND, &c, &r, &env, &req),
                     PT_EINVAL);
    r.amount = 100;
    /* the refund key is required (it is out_request_no) */
    r.refund_id[0] = '\0';
    assert_int_equal(
        pt_gateway_alipay.build_refund(&f->acfg, PT_GW_REFUND_QUERY, &c, &r, &env, &req),
        PT_EINVAL);
    strcpy(r.refund_id, "R-1");
    c.order_id[0] = '\0';
    assert_int_equal(pt_gateway_alipay.build_refund(&f->acfg, PT_GW_REFUND, &c, &r, &env, &req),
                     PT_EINVAL);
    strcpy(c.order_id, "O-1");
    assert_int_equal(
        pt_gateway_alipay.build_refund(&f->acfg, (enum pt_gw_refund_op)7, &c, &r, &env, &req),
        PT_EINVAL);
}

static void test_alipay_responses(void **state)
{
    struct fixture *f = *state;
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, pt_test_cases(f->alipay, "alipay_refund.json", "responses"))
    {
        struct pt_http_response resp;
        struct pt_gw_result out;
        struct pt_charge ch;
        struct pt_refund r;
        pt_test_charge_from(cJSON_GetObjectItem(c, "charge"), "alipay", &ch);
        refund_from(cJSON_GetObjectItem(c, "refund"), &ch, &r);
        pt_test_response(c, &resp);
        assert_int_equal(pt_gateway_alipay.parse_refund(&f->acfg, refund_op(pt_test_str(c, "op")),
                                                        &ch, &r, &resp, &out),
                         PT_OK);
        check_result(c, &out);
        /* an answer whose signature does not verify is never a success */
        if (!cJSON_IsTrue(cJSON_GetObjectItem(c, "sdk_valid")))
            assert_int_not_equal(out.outcome, PT_OUTCOME_SUCCESS);
        pt_http_response_free(&resp);
        n++;
    }
    assert_int_equal(n, 43);
}

/* An answer for one call is not an answer for the other: a signed refund
 * answer offered as a query answer has no such member and is refused. */
static void test_alipay_answer_for_other_call(void **state)
{
    struct fixture *f = *state;
    const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(f->alipay, "responses"), 0);
    struct pt_http_response resp;
    struct pt_gw_result out;
    struct pt_charge ch;
    struct pt_refund r;
    pt_test_charge_from(cJSON_GetObjectItem(c, "charge"), "alipay", &ch);
    refund_from(cJSON_GetObjectItem(c, "refund"), &ch, &r);
    pt_test_response(c, &resp);
    assert_int_equal(
        pt_gateway_alipay.parse_refund(&f->acfg, PT_GW_REFUND_QUERY, &ch, &r, &resp, &out), PT_OK);
    assert_int_equal(out.outcome, PT_OUTCOME_AMBIGUOUS);
    assert_string_equal(out.code, "invalid_signature");
    pt_http_response_free(&resp);
}

/* ---- Stripe ----------------------------------------------------------------- */

static void test_stripe_requests(void **state)
{
    struct fixture *f = *state;
    const cJSON *c;
    int n = 0;
    /* The SDK keys every POST itself when not told a key: payterm always
     * tells it the refund_id, so a resend is the same refund. */
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(f->stripe, "sdk_keys_every_post")));
    cJSON_ArrayForEach(c, pt_test_cases(f->stripe, "stripe_refund.json", "requests"))
    {
        const char *name = pt_test_str(c, "name");
        struct pt_charge ch;
        struct pt_refund r;
        struct pt_http_request req;
        struct pt_gw_env env = {.now_ms = 1};
        pt_test_charge_from(cJSON_GetObjectItem(c, "charge"), "stripe", &ch);
        refund_from(cJSON_GetObjectItem(c, "refund"), &ch, &r);
        int rc = pt_gateway_stripe.build_refund(&f->scfg, refund_op(pt_test_str(c, "op")), &ch, &r,
                                                &env, &req);
        if (rc != PT_OK)
            fail_msg("%s: build_refund %s", name, pt_errname(rc));
        char url[512];
        snprintf(url, sizeof url, "https://api.stripe.com%s", pt_test_str(c, "path"));
        assert_string_equal(req.method, pt_test_str(c, "method"));
        assert_string_equal(req.url, url);
        assert_int_equal(req.body_len, strlen(pt_test_str(c, "body")));
        if (req.body_len)
            assert_memory_equal(req.body, pt_test_str(c, "body"), req.body_len);
        assert_string_equal(pt_http_request_header(&req, "Authorization"),
                            "Bearer sk_test_payterm");
        const cJSON *key = cJSON_GetObjectItem(c, "idempotency_key");
        if (cJSON_IsString(key)) {
            assert_string_equal(pt_http_request_header(&req, "Idempotency-Key"), key->valuestring);
            assert_string_equal(pt_http_request_header(&req, "Content-Type"),
                                pt_test_str(c, "content_type"));
        } else {
            assert_null(pt_http_request_header(&req, "Idempotency-Key"));
        }
        pt_http_request_free(&req);
        n++;
    }
    assert_int_equal(n, 3);
}

static void test_stripe_build_errors(void **state)
{
    struct fixture *f = *state;
    struct pt_charge c = {0};
    struct pt_refund r = {0};
    struct pt_http_request req;
    struct pt_gw_env env = {.now_ms = 1};
    strcpy(c.gateway, "stripe");
    strcpy(c.order_id, "O-1");
    strcpy(c.method, "card_on_file");
    strcpy(c.currency, "USD");
    c.amount = 1000;
    strcpy(r.refund_id, "R-1");
    strcpy(r.currency, "USD");
    r.amount = 100;
    /* a charge without its PaymentIntent id cannot be refunded */
    assert_int_equal(pt_gateway_stripe.build_refund(&f->scfg, PT_GW_REFUND, &c, &r, &env, &req),
                     PT_EINVAL);
    assert_int_equal(
        pt_gateway_stripe.build_refund(&f->scfg, PT_GW_REFUND_QUERY, &c, &r, &env, &req),
        PT_EINVAL);
    strcpy(c.gateway_trade_no, "pi_1/../../v1/charges");
    assert_int_equal(
        pt_gateway_stripe.build_refund(&f->scfg, PT_GW_REFUND_QUERY, &c, &r, &env, &req),
        PT_EINVAL);
    strcpy(c.gateway_trade_no, "pi_1");
    assert_int_equal(pt_gateway_stripe.build_refund(&f->scfg, PT_GW_REFUND, &c, &r, &env, &req),
                     PT_OK);
    pt_http_request_free(&req);
    strcpy(r.currency, "EUR");
    assert_int_equal(pt_gateway_stripe.build_refund(&f->scfg, PT_GW_REFUND, &c, &r, &env, &req),
                     PT_EINVAL);
    strcpy(r.currency, "USD");
    r.amount = 0;
    assert_int_equal(pt_gateway_stripe.build_refund(&f->scfg, PT_GW_REFUND, &c, &r, &env, &req),
                     PT_EINVAL);
    r.amount = 1001;
    assert_int_equal(pt_gateway_stripe.build_refund(&f->scfg, PT_GW_REFUND, &c, &r, &env, &req),
                     PT_EINVAL);
    r.amount = 100;
    /* the refund_id goes into a header: a line break would add another */
    strcpy(r.refund_id, "R-1\r\nX-Evil: 1");
    assert_int_equal(pt_gateway_stripe.build_refund(&f->scfg, PT_GW_REFUND, &c, &r, &env, &req),
                     PT_EINVAL);
}

static void test_stripe_responses(void **state)
{
    struct fixture *f = *state;
    const cJSON *c, *req0 = cJSON_GetArrayItem(cJSON_GetObjectItem(f->stripe, "requests"), 0);
    struct pt_charge ch;
    struct pt_refund r;
    pt_test_charge_from(cJSON_GetObjectItem(req0, "charge"), "stripe", &ch);
    refund_from(cJSON_GetObjectItem(req0, "refund"), &ch, &r);
    int n = 0;
    cJSON_ArrayForEach(c, pt_test_cases(f->stripe, "stripe_refund.json", "responses"))
    {
        struct pt_http_response resp;
        struct pt_gw_result out;
        pt_test_response(c, &resp);
        assert_int_equal(pt_gateway_stripe.parse_refund(&f->scfg, refund_op(pt_test_str(c, "op")),
                                                        &ch, &r, &resp, &out),
                         PT_OK);
        check_result(c, &out);
        /* what the SDK throws for is never a success either */
        if (strcmp(pt_test_str(c, "sdk_result"), "ok") != 0)
            assert_int_not_equal(out.outcome, PT_OUTCOME_SUCCESS);
        pt_http_response_free(&resp);
        n++;
    }
    assert_int_equal(n, 31);
}

static void check_webhook(struct fixture *f, const cJSON *c, int refund_vectors)
{
    const char *name = pt_test_str(c, "name"), *payload = pt_test_str(c, "payload");
    struct pt_http_response msg = {0};
    struct pt_notification out;
    struct pt_gw_env env = {.now_ms = (int64_t)pt_test_int(c, "now") * 1000,
                            .tolerance_s = pt_test_int(c, "tolerance")};
    pt_http_response_add_header(&msg, "Stripe-Signature", pt_test_str(c, "header"));
    msg.body = strdup(payload);
    msg.body_len = strlen(payload);
    int rc = pt_gateway_stripe.parse_notify(&f->scfg, &msg, &env, &out);
    if (rc != pt_test_rc(pt_test_str(c, "rc")))
        fail_msg("%s: rc %s, want %s", name, pt_errname(rc), pt_test_str(c, "rc"));
    int sig_ok = pt_stripe_verify_header(pt_test_str(c, "header"), payload, strlen(payload),
                                         f->scfg.webhook_secret, f->scfg.webhook_secret_len,
                                         pt_test_int(c, "now"), 300, NULL) == PT_OK;
    assert_int_equal(sig_ok, cJSON_IsTrue(cJSON_GetObjectItem(c, "sdk_valid")));
    if (rc == PT_OK) {
        if (cJSON_GetObjectItem(c, "relevant") &&
            out.relevant != cJSON_IsTrue(cJSON_GetObjectItem(c, "relevant")))
            fail_msg("%s: relevant %d", name, out.relevant);
        /* payment events are never refunds (stripe.json predates refunds) */
        int want_refund = refund_vectors && cJSON_IsTrue(cJSON_GetObjectItem(c, "refund"));
        if (out.refund != want_refund)
            fail_msg("%s: refund %d, want %d", name, out.refund, want_refund);
        if (!out.refund) {
            assert_string_equal(out.refund_id, "");
            assert_string_equal(out.refund_no, "");
        }
        if (cJSON_GetObjectItem(c, "status") && out.status != outcome_of(pt_test_str(c, "status")))
            fail_msg("%s: status %s, want %s", name, pt_outcome_name(out.status),
                     pt_test_str(c, "status"));
        if (cJSON_GetObjectItem(c, "dedup_id"))
            assert_string_equal(out.dedup_id, pt_test_str(c, "dedup_id"));
        if (cJSON_GetObjectItem(c, "refund_id")) {
            assert_string_equal(out.refund_id, pt_test_str(c, "refund_id"));
            assert_string_equal(out.refund_no, pt_test_str(c, "refund_no"));
        }
        if (cJSON_GetObjectItem(c, "amount")) {
            assert_int_equal(out.amount, pt_test_int(c, "amount"));
            assert_string_equal(out.currency, pt_test_str(c, "currency"));
            assert_string_equal(out.order_id, pt_test_str(c, "order_id"));
            assert_string_equal(out.trade_no, pt_test_str(c, "trade_no"));
            assert_int_equal(out.merchant_ok, 1);
        }
        assert_string_equal(out.gateway, "stripe");
    }
    pt_http_response_free(&msg);
}

static void test_stripe_webhooks(void **state)
{
    struct fixture *f = *state;
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, pt_test_cases(f->stripe, "stripe_refund.json", "webhooks"))
    {
        check_webhook(f, c, 1);
        n++;
    }
    assert_int_equal(n, 16);
}

/* The payment webhooks of stripe.json read exactly as before refunds. */
static void test_stripe_payment_webhooks_unchanged(void **state)
{
    struct fixture *f = *state;
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, pt_test_cases(f->stripe_payments, "stripe.json", "webhooks"))
    {
        check_webhook(f, c, 0);
        n++;
    }
    assert_int_equal(n, 13);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tables),
        cmocka_unit_test(test_alipay_requests),
        cmocka_unit_test(test_alipay_build_errors),
        cmocka_unit_test(test_alipay_responses),
        cmocka_unit_test(test_alipay_answer_for_other_call),
        cmocka_unit_test(test_stripe_requests),
        cmocka_unit_test(test_stripe_build_errors),
        cmocka_unit_test(test_stripe_responses),
        cmocka_unit_test(test_stripe_webhooks),
        cmocka_unit_test(test_stripe_payment_webhooks_unchanged),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
