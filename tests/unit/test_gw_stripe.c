/*
 * test_gw_stripe.c - the Stripe adapter: request bodies byte-equal to the
 * stripe Node SDK's encoding, the outcome table for PaymentIntent answers and
 * errors (402 card_error, 400 idempotency_error, 409 idempotency_key_in_use,
 * 5xx), and webhook verification against vectors made with
 * stripe.webhooks.generateTestHeaderString / constructEvent.
 */
#include "testutil.h"

#include "charge.h"
#include "err.h"
#include "gateway.h"
#include "gateways/stripe.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fixture {
    cJSON *v;
    struct pt_gw_config cfg;
    struct pt_charge charge;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    f->v = pt_test_vectors("stripe.json");
    strcpy(f->cfg.name, "stripe");
    strcpy(f->cfg.endpoint, "https://api.stripe.com");
    const char *sk = pt_test_str(f->v, "secret_key"), *wh = pt_test_str(f->v, "webhook_secret");
    memcpy(f->cfg.secret, sk, strlen(sk));
    f->cfg.secret_len = strlen(sk);
    memcpy(f->cfg.webhook_secret, wh, strlen(wh));
    f->cfg.webhook_secret_len = strlen(wh);
    const cJSON *c = cJSON_GetObjectItem(f->v, "charge");
    struct pt_charge *ch = &f->charge;
    strcpy(ch->gateway, "stripe");
    snprintf(ch->order_id, sizeof ch->order_id, "%s", pt_test_str(c, "order_id"));
    snprintf(ch->method, sizeof ch->method, "%s", pt_test_str(c, "method"));
    snprintf(ch->currency, sizeof ch->currency, "%s", pt_test_str(c, "currency"));
    snprintf(ch->payment_method, sizeof ch->payment_method, "%s", pt_test_str(c, "payment_method"));
    snprintf(ch->customer, sizeof ch->customer, "%s", pt_test_str(c, "customer"));
    ch->amount = pt_test_int(c, "amount");
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
    struct pt_http_request req;
    struct pt_gw_env env = {.now_ms = 1};
    assert_int_equal(pt_gateway_stripe.build(&f->cfg, PT_GW_PAY, &f->charge, &env, &req), PT_OK);
    assert_string_equal(req.method, "POST");
    assert_string_equal(req.url, "https://api.stripe.com/v1/payment_intents");
    assert_string_equal(req.body, pt_test_str(f->v, "create_body"));
    assert_string_equal(pt_http_request_header(&req, "Idempotency-Key"), f->charge.order_id);
    assert_string_equal(pt_http_request_header(&req, "Authorization"), "Bearer sk_test_payterm");
    assert_string_equal(pt_http_request_header(&req, "Content-Type"),
                        "application/x-www-form-urlencoded");
    pt_http_request_free(&req);

    /* A card charge shows no code: there is nothing to close (never a cancel). */
    assert_int_equal(pt_gateway_stripe.build(&f->cfg, PT_GW_CLOSE, &f->charge, &env, &req),
                     PT_EUNSUPPORTED);
    assert_null(req.url);
    assert_int_equal(pt_gateway_stripe.build(&f->cfg, PT_GW_QUERY, &f->charge, &env, &req), PT_OK);
    assert_string_equal(req.method, "GET");
    char url[512];
    snprintf(url, sizeof url, "https://api.stripe.com/v1/payment_intents/search?%s",
             pt_test_str(f->v, "search_query"));
    assert_string_equal(req.url, url);
    assert_null(pt_http_request_header(&req, "Idempotency-Key"));
    pt_http_request_free(&req);

    /* cancel needs the PaymentIntent id */
    assert_int_equal(pt_gateway_stripe.build(&f->cfg, PT_GW_CANCEL, &f->charge, &env, &req),
                     PT_EINVAL);
    struct pt_charge c = f->charge;
    strcpy(c.gateway_trade_no, "pi_3MtwBwLkdIwHu7ix28a3tqPa");
    assert_int_equal(pt_gateway_stripe.build(&f->cfg, PT_GW_CANCEL, &c, &env, &req), PT_OK);
    assert_string_equal(
        req.url, "https://api.stripe.com/v1/payment_intents/pi_3MtwBwLkdIwHu7ix28a3tqPa/cancel");
    pt_http_request_free(&req);
    strcpy(c.gateway_trade_no, "pi_1/../../v1/charges");
    assert_int_equal(pt_gateway_stripe.build(&f->cfg, PT_GW_CANCEL, &c, &env, &req), PT_EINVAL);
    c.payment_method[0] = '\0';
    assert_int_equal(pt_gateway_stripe.build(&f->cfg, PT_GW_PAY, &c, &env, &req), PT_EINVAL);
}

struct resp_case {
    const char *name;
    enum pt_gw_op op;
    int status;
    const char *body;
    enum pt_outcome outcome;
    const char *code;
    int review;
    int64_t amount;
};

#define PI(status, extra)                                                                          \
    "{\"id\":\"pi_1\",\"object\":\"payment_intent\",\"amount\":1200,\"currency\":\"usd\","         \
    "\"status\":\"" status "\"" extra "}"

static void test_outcomes(void **state)
{
    struct fixture *f = *state;
    static const struct resp_case cases[] = {
        {"succeeded", PT_GW_PAY, 200, PI("succeeded", ""), PT_OUTCOME_SUCCESS, "succeeded", 0,
         1200},
        /* What moved is amount_received, not the amount asked for. */
        {"succeeded_received_less", PT_GW_PAY, 200, PI("succeeded", ",\"amount_received\":700"),
         PT_OUTCOME_SUCCESS, "succeeded", 0, 700},
        {"succeeded_received_none", PT_GW_PAY, 200, PI("succeeded", ",\"amount_received\":0"),
         PT_OUTCOME_SUCCESS, "succeeded", 0, 0},
        {"requires_action", PT_GW_PAY, 200, PI("requires_action", ""), PT_OUTCOME_PENDING,
         "requires_action", 0, 0},
        {"processing", PT_GW_PAY, 200, PI("processing", ""), PT_OUTCOME_PENDING, "processing", 0,
         0},
        {"requires_payment_method", PT_GW_PAY, 200,
         PI("requires_payment_method", ",\"last_payment_error\":{\"code\":\"card_declined\","
                                       "\"decline_code\":\"do_not_honor\"}"),
         PT_OUTCOME_DECLINED, "do_not_honor", 0, 0},
        {"canceled", PT_GW_CANCEL, 200, PI("canceled", ",\"cancellation_reason\":\"abandoned\""),
         PT_OUTCOME_CANCELED, "abandoned", 0, 0},
        {"requires_capture", PT_GW_PAY, 200, PI("requires_capture", ""), PT_OUTCOME_AMBIGUOUS,
         "requires_capture", 0, 0},
        {"card_error_402", PT_GW_PAY, 402,
         "{\"error\":{\"type\":\"card_error\",\"code\":\"card_declined\",\"decline_code\":"
         "\"insufficient_funds\",\"message\":\"Your card has insufficient funds.\","
         "\"payment_intent\":{\"id\":\"pi_2\",\"status\":\"requires_payment_method\"}}}",
         PT_OUTCOME_DECLINED, "insufficient_funds", 0, 0},
        {"card_error_no_decline_code", PT_GW_PAY, 402,
         "{\"error\":{\"type\":\"card_error\",\"code\":\"expired_card\"}}", PT_OUTCOME_DECLINED,
         "expired_card", 0, 0},
        {"idempotency_error_400", PT_GW_PAY, 400,
         "{\"error\":{\"type\":\"idempotency_error\",\"message\":\"Keys for idempotent requests "
         "can only be used with the same parameters they were first used with.\"}}",
         PT_OUTCOME_AMBIGUOUS, "idempotency_error", 1, 0},
        {"idempotency_key_in_use_409", PT_GW_PAY, 409,
         "{\"error\":{\"type\":\"invalid_request_error\",\"code\":\"idempotency_key_in_use\"}}",
         PT_OUTCOME_AMBIGUOUS, "idempotency_key_in_use", 0, 0},
        {"invalid_request_400", PT_GW_PAY, 400,
         "{\"error\":{\"type\":\"invalid_request_error\",\"code\":\"resource_missing\","
         "\"param\":\"payment_method\"}}",
         PT_OUTCOME_DECLINED, "resource_missing", 0, 0},
        {"server_error_500", PT_GW_PAY, 500, "{\"error\":{\"type\":\"api_error\"}}",
         PT_OUTCOME_AMBIGUOUS, "http_500", 0, 0},
        {"not_json", PT_GW_PAY, 200, "<html>", PT_OUTCOME_AMBIGUOUS, "http_200", 0, 0},
        {"rate_limited_429", PT_GW_PAY, 429,
         "{\"error\":{\"type\":\"invalid_request_error\","
         "\"code\":\"rate_limit\"}}",
         PT_OUTCOME_AMBIGUOUS, "rate_limit", 0, 0},
        {"search_empty", PT_GW_QUERY, 200,
         "{\"object\":\"search_result\",\"data\":[],\"has_more\":false}", PT_OUTCOME_NOT_FOUND,
         "no_payment_intent", 0, 0},
        {"search_succeeded_wins", PT_GW_QUERY, 200,
         "{\"object\":\"search_result\",\"data\":[" PI("canceled", "") "," PI(
             "succeeded", "") "],\"has_more\":false}",
         PT_OUTCOME_SUCCESS, "succeeded", 0, 1200},
        {"search_processing", PT_GW_QUERY, 200,
         "{\"object\":\"search_result\",\"data\":[" PI("processing", "") "]}", PT_OUTCOME_PENDING,
         "processing", 0, 0},
        {"succeeded_float_amount", PT_GW_PAY, 200,
         "{\"id\":\"pi_1\",\"amount\":12.5,\"currency\":\"usd\",\"status\":\"succeeded\"}",
         PT_OUTCOME_AMBIGUOUS, "malformed_amount", 0, 0},
        {"cancel_unexpected_state", PT_GW_CANCEL, 400,
         "{\"error\":{\"type\":\"invalid_request_error\",\"code\":"
         "\"payment_intent_unexpected_state\"}}",
         PT_OUTCOME_AMBIGUOUS, "payment_intent_unexpected_state", 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct pt_http_response resp = {.status = cases[i].status};
        struct pt_gw_result out;
        resp.body = strdup(cases[i].body);
        resp.body_len = strlen(cases[i].body);
        assert_int_equal(pt_gateway_stripe.parse(&f->cfg, cases[i].op, &f->charge, &resp, &out),
                         PT_OK);
        if (out.outcome != cases[i].outcome || strcmp(out.code, cases[i].code) != 0)
            fail_msg("%s: %s/%s, want %s/%s", cases[i].name, pt_outcome_name(out.outcome), out.code,
                     pt_outcome_name(cases[i].outcome), cases[i].code);
        assert_int_equal(out.review, cases[i].review);
        assert_int_equal(out.amount, cases[i].amount);
        if (out.outcome == PT_OUTCOME_SUCCESS)
            assert_string_equal(out.currency, "USD");
        pt_http_response_free(&resp);
    }
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

static void test_webhooks(void **state)
{
    struct fixture *f = *state;
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, pt_test_cases(f->v, "stripe.json", "webhooks"))
    {
        const char *name = pt_test_str(c, "name");
        const char *payload = pt_test_str(c, "payload");
        struct pt_http_response msg = {0};
        struct pt_notification out;
        struct pt_gw_env env = {.now_ms = (int64_t)pt_test_int(c, "now") * 1000,
                                .tolerance_s = pt_test_int(c, "tolerance")};
        pt_http_response_add_header(&msg, "stripe-signature", pt_test_str(c, "header"));
        msg.body = strdup(payload);
        msg.body_len = strlen(payload);
        int rc = pt_gateway_stripe.parse_notify(&f->cfg, &msg, &env, &out);
        if (rc != pt_test_rc(pt_test_str(c, "rc")))
            fail_msg("%s: rc %s, want %s", name, pt_errname(rc), pt_test_str(c, "rc"));
        /* signature-level agreement with the SDK, malformed-amount aside */
        int sig_ok = pt_stripe_verify_header(pt_test_str(c, "header"), payload, strlen(payload),
                                             f->cfg.webhook_secret, f->cfg.webhook_secret_len,
                                             pt_test_int(c, "now"), 300, NULL) == PT_OK;
        assert_int_equal(sig_ok, cJSON_IsTrue(cJSON_GetObjectItem(c, "sdk_valid")));
        if (rc == PT_OK) {
            assert_int_equal(out.status, cJSON_GetObjectItem(c, "status")
                                             ? outcome_of(pt_test_str(c, "status"))
                                             : out.status);
            if (cJSON_GetObjectItem(c, "relevant"))
                assert_int_equal(out.relevant, cJSON_IsTrue(cJSON_GetObjectItem(c, "relevant")));
            if (cJSON_GetObjectItem(c, "dedup_id"))
                assert_string_equal(out.dedup_id, pt_test_str(c, "dedup_id"));
            if (cJSON_GetObjectItem(c, "amount")) {
                assert_int_equal(out.amount, pt_test_int(c, "amount"));
                assert_string_equal(out.currency, pt_test_str(c, "currency"));
                assert_string_equal(out.order_id, pt_test_str(c, "order_id"));
                assert_string_equal(out.trade_no, pt_test_str(c, "trade_no"));
            }
        }
        pt_http_response_free(&msg);
        n++;
    }
    assert_int_equal(n, 13);
}

static void test_sign_header(void **state)
{
    struct fixture *f = *state;
    const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(f->v, "webhooks"), 0);
    const char *payload = pt_test_str(c, "payload"), *want = pt_test_str(c, "header");
    int64_t t = strtoll(want + 2, NULL, 10);
    char hdr[256];
    assert_int_equal(pt_stripe_sign_header(f->cfg.webhook_secret, f->cfg.webhook_secret_len, t,
                                           payload, strlen(payload), hdr, sizeof hdr),
                     PT_OK);
    assert_string_equal(hdr, want);
    /* the HMAC key is the whole whsec_ string: without the prefix it fails */
    assert_int_equal(pt_stripe_verify_header(hdr, payload, strlen(payload),
                                             f->cfg.webhook_secret + 6,
                                             f->cfg.webhook_secret_len - 6, t, 300, NULL),
                     PT_ESIG);
    /* two t= items are ambiguous */
    char twice[300];
    snprintf(twice, sizeof twice, "t=1,%s", hdr);
    assert_int_equal(pt_stripe_verify_header(twice, payload, strlen(payload), f->cfg.webhook_secret,
                                             f->cfg.webhook_secret_len, t, 300, NULL),
                     PT_ESIG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requests),
        cmocka_unit_test(test_outcomes),
        cmocka_unit_test(test_webhooks),
        cmocka_unit_test(test_sign_header),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
