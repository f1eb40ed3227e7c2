/*
 * test_sim.c - every gateway adapter against the gateway simulator, through
 * the real libcurl transport over TLS.
 *
 * Round trips (pay, query, cancel/close) for Alipay, WeChat Pay, Stripe and
 * 2C2P; the simulator's amount rules; each fault mode with the transport and
 * outcome class SPEC section 7 expects, followed by the client's retry - and
 * always the ledger's answer to the question that matters: how many times did
 * money move for this order.  Also: signature checks on both sides, Stripe's
 * idempotency-key semantics, notifications verified by payterm's own
 * notification parsers, and state that survives a restart.
 */
#include "simtest.h"
#include "testutil.h"

#include "err.h"
#include "gateways/2c2p.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct simtest T;
#define PAY_DELAY_MS 300

static int setup(void **state)
{
    (void)state;
    struct pt_sim_options o = {.pay_delay_ms = PAY_DELAY_MS};
    simtest_start(&T, &o);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    simtest_stop(&T);
    return 0;
}

static int clear(void **state)
{
    (void)state;
    simtest_fault(&T, "{\"mode\":\"none\"}");
    return 0;
}

static const char *const currency_of[ST__COUNT] = {"CNY", "CNY", "USD", "THB"};

/* One call that must get an answer; returns the outcome. */
static enum pt_outcome call(int gw, enum pt_gw_op op, const struct pt_charge *c,
                            struct pt_gw_result *res)
{
    assert_int_equal(simtest_call(&T, gw, op, c, 5000, res, NULL), PT_OK);
    return res->outcome;
}

/* Queries until the outcome is not PENDING (the simulated customer is
 * paying) or 3 s passed. */
static enum pt_outcome settle(int gw, const struct pt_charge *c, struct pt_gw_result *res)
{
    for (int i = 0; i < 30; i++) {
        if (call(gw, PT_GW_QUERY, c, res) != PT_OUTCOME_PENDING)
            break;
        simtest_sleep_ms(100);
    }
    return res->outcome;
}

static void new_charge(struct pt_charge *c, int gw, const char *tag, int64_t amount)
{
    char order[64];
    simtest_order_id(order, sizeof order, tag);
    simtest_charge(c, gw, order, amount, currency_of[gw]);
}

static int captures(int gw, const struct pt_charge *c, char status[16])
{
    return simtest_captures(&T, simtest_gw_names[gw], c->order_id, status);
}

/* ---- round trips ------------------------------------------------------------- */

static void test_alipay_barcode_pay_query_cancel(void **state)
{
    (void)state;
    struct pt_charge c;
    struct pt_gw_result r;
    char st[16];
    new_charge(&c, ST_ALIPAY, "ali", 8888);
    assert_int_equal(call(ST_ALIPAY, PT_GW_PAY, &c, &r), PT_OUTCOME_SUCCESS);
    assert_int_equal(r.amount, 8888);
    assert_true(strlen(r.trade_no) == 28);
    assert_int_equal(call(ST_ALIPAY, PT_GW_QUERY, &c, &r), PT_OUTCOME_SUCCESS);
    assert_int_equal(r.amount, 8888);
    /* Cancelling a paid barcode trade reverses it (action "refund"). */
    assert_int_equal(call(ST_ALIPAY, PT_GW_CANCEL, &c, &r), PT_OUTCOME_CANCELED);
    assert_string_equal(r.code, "refund");
    assert_int_equal(call(ST_ALIPAY, PT_GW_QUERY, &c, &r), PT_OUTCOME_CANCELED);
    assert_int_equal(captures(ST_ALIPAY, &c, st), 1);
    assert_string_equal(st, "canceled");
}

static void test_alipay_qr_paid_by_the_customer(void **state)
{
    (void)state;
    struct pt_charge c;
    struct pt_gw_result r;
    char st[16];
    new_charge(&c, ST_ALIPAY, "aliqr", 2000);
    snprintf(c.method, sizeof c.method, "qr");
    assert_int_equal(call(ST_ALIPAY, PT_GW_PAY, &c, &r), PT_OUTCOME_PENDING);
    assert_memory_equal(r.action_url, "https://qr.alipay.com/", 22);
    assert_int_equal(captures(ST_ALIPAY, &c, st), 0);
    assert_string_equal(st, "pending");
    /* A resend while unpaid: the same trade, the same QR code. */
    char qr[PT_URL_MAX];
    snprintf(qr, sizeof qr, "%s", r.action_url);
    assert_int_equal(call(ST_ALIPAY, PT_GW_PAY, &c, &r), PT_OUTCOME_PENDING);
    assert_string_equal(r.action_url, qr);
    assert_int_equal(settle(ST_ALIPAY, &c, &r), PT_OUTCOME_SUCCESS);
    assert_int_equal(r.amount, 2000);
    assert_int_equal(captures(ST_ALIPAY, &c, st), 1);
    assert_string_equal(st, "captured");
}

static void test_alipay_amount_rules(void **state)
{
    (void)state;
    struct pt_charge c;
    struct pt_gw_result r;
    char st[16];
    new_charge(&c, ST_ALIPAY, "ali51", 1051);
    assert_int_equal(call(ST_ALIPAY, PT_GW_PAY, &c, &r), PT_OUTCOME_DECLINED);
    assert_string_equal(r.code, "ACQ.BUYER_BALANCE_NOT_ENOUGH");
    assert_int_equal(captures(ST_ALIPAY, &c, st), 0);
    assert_string_equal(st, "declined");

    new_charge(&c, ST_ALIPAY, "ali52", 1052);
    assert_int_equal(call(ST_ALIPAY, PT_GW_PAY, &c, &r), PT_OUTCOME_PENDING);
    assert_string_equal(r.code, "10003");
    assert_int_equal(call(ST_ALIPAY, PT_GW_QUERY, &c, &r), PT_OUTCOME_PENDING);
    assert_string_equal(r.code, "WAIT_BUYER_PAY");
    assert_int_equal(call(ST_ALIPAY, PT_GW_CANCEL, &c, &r), PT_OUTCOME_CANCELED);
    assert_string_equal(r.code, "close");
    assert_int_equal(captures(ST_ALIPAY, &c, st), 0);
    assert_string_equal(st, "canceled");
}

static void test_alipay_resend_of_paid_order_moves_no_money(void **state)
{
    (void)state;
    struct pt_charge c;
    struct pt_gw_result r;
    new_charge(&c, ST_ALIPAY, "aliresend", 1000);
    assert_int_equal(call(ST_ALIPAY, PT_GW_PAY, &c, &r), PT_OUTCOME_SUCCESS);
    /* Alipay answers ACQ.TRADE_HAS_SUCCESS; the adapter asks for a query. */
    assert_int_equal(call(ST_ALIPAY, PT_GW_PAY, &c, &r), PT_OUTCOME_AMBIGUOUS);
    assert_string_equal(r.code, "ACQ.TRADE_HAS_SUCCESS");
    c.amount = 2000; /* the same out_trade_no with another amount */
    assert_int_equal(call(ST_ALIPAY, PT_GW_PAY, &c, &r), PT_OUTCOME_DECLINED);
    assert_string_equal(r.code, "ACQ.CONTEXT_INCONSISTENT");
    assert_int_equal(captures(ST_ALIPAY, &c, NULL), 1);
}

static void test_wechat_native_pay_query_close(void **state)
{
    (void)state;
    struct pt_charge c;
    struct pt_gw_result r;
    char st[16];
    new_charge(&c, ST_WECHAT, "wx", 1200);
    assert_int_equal(call(ST_WECHAT, PT_GW_PAY, &c, &r), PT_OUTCOME_PENDING);
    assert_memory_equal(r.action_url, "weixin://wxpay/bizpayurl?pr=", 28);
    assert_int_equal(call(ST_WECHAT, PT_GW_QUERY, &c, &r), PT_OUTCOME_PENDING);
    assert_string_equal(r.code, "NOTPAY");
    assert_int_equal(settle(ST_WECHAT, &c, &r), PT_OUTCOME_SUCCESS);
    assert_int_equal(r.amount, 1200);
    assert_true(strlen(r.trade_no) == 28);
    /* A paid order cannot be closed (ORDERPAID): the adapter asks to query. */
    assert_int_equal(call(ST_WECHAT, PT_GW_CANCEL, &c, &r), PT_OUTCOME_AMBIGUOUS);
    assert_int_equal(captures(ST_WECHAT, &c, st), 1);
    assert_string_equal(st, "captured");

    new_charge(&c, ST_WECHAT, "wx52", 1252); /* this customer never pays */
    assert_int_equal(call(ST_WECHAT, PT_GW_PAY, &c, &r), PT_OUTCOME_PENDING);
    assert_int_equal(call(ST_WECHAT, PT_GW_CANCEL, &c, &r), PT_OUTCOME_CANCELED);
    assert_int_equal(call(ST_WECHAT, PT_GW_QUERY, &c, &r), PT_OUTCOME_CANCELED);
    assert_int_equal(captures(ST_WECHAT, &c, st), 0);
    assert_string_equal(st, "canceled");

    new_charge(&c, ST_WECHAT, "wx51", 1251); /* this customer's payment fails */
    assert_int_equal(call(ST_WECHAT, PT_GW_PAY, &c, &r), PT_OUTCOME_PENDING);
    assert_int_equal(settle(ST_WECHAT, &c, &r), PT_OUTCOME_DECLINED);
    assert_string_equal(r.code, "PAYERROR");
    assert_int_equal(captures(ST_WECHAT, &c, st), 0);
    assert_string_equal(st, "declined");
}

static void test_stripe_pay_query_cancel(void **state)
{
    (void)state;
    struct pt_charge c;
    struct pt_gw_result r;
    char st[16];
    new_charge(&c, ST_STRIPE, "st", 1200);
    assert_int_equal(call(ST_STRIPE, PT_GW_PAY, &c, &r), PT_OUTCOME_SUCCESS);
    assert_int_equal(r.amount, 1200);
    assert_string_equal(r.currency, "USD");
    assert_memory_equal(r.trade_no, "pi_", 3);
    assert_int_equal(call(ST_STRIPE, PT_GW_QUERY, &c, &r), PT_OUTCOME_SUCCESS);
    snprintf(c.gateway_trade_no, sizeof c.gateway_trade_no, "%s", r.trade_no);
    /* A succeeded PaymentIntent cannot be canceled. */
    assert_int_equal(call(ST_STRIPE, PT_GW_CANCEL, &c, &r), PT_OUTCOME_AMBIGUOUS);
    assert_string_equal(r.code, "payment_intent_unexpected_state");
    assert_int_equal(captures(ST_STRIPE, &c, NULL), 1);

    new_charge(&c, ST_STRIPE, "st52", 1252);
    assert_int_equal(call(ST_STRIPE, PT_GW_PAY, &c, &r), PT_OUTCOME_PENDING);
    assert_string_equal(r.code, "requires_action");
    snprintf(c.gateway_trade_no, sizeof c.gateway_trade_no, "%s", r.trade_no);
    assert_int_equal(call(ST_STRIPE, PT_GW_CANCEL, &c, &r), PT_OUTCOME_CANCELED);
    assert_int_equal(call(ST_STRIPE, PT_GW_QUERY, &c, &r), PT_OUTCOME_CANCELED);
    assert_int_equal(captures(ST_STRIPE, &c, st), 0);
    assert_string_equal(st, "canceled");

    new_charge(&c, ST_STRIPE, "st51", 1251);
    assert_int_equal(call(ST_STRIPE, PT_GW_PAY, &c, &r), PT_OUTCOME_DECLINED);
    assert_string_equal(r.code, "insufficient_funds");
    assert_int_equal(call(ST_STRIPE, PT_GW_QUERY, &c, &r), PT_OUTCOME_DECLINED);
    assert_int_equal(captures(ST_STRIPE, &c, st), 0);
    assert_string_equal(st, "declined");
}

static void test_2c2p_redirect_pay_inquiry(void **state)
{
    (void)state;
    struct pt_charge c;
    struct pt_gw_result r;
    char st[16];
    new_charge(&c, ST_2C2P, "c2p", 100000); /* 1000.00 THB: the JSON number 1000 */
    assert_int_equal(call(ST_2C2P, PT_GW_PAY, &c, &r), PT_OUTCOME_PENDING);
    assert_memory_equal(r.action_url, "https://", 8);
    assert_int_equal(call(ST_2C2P, PT_GW_QUERY, &c, &r), PT_OUTCOME_PENDING);
    assert_string_equal(r.code, "0001");
    assert_int_equal(settle(ST_2C2P, &c, &r), PT_OUTCOME_SUCCESS);
    assert_int_equal(r.amount, 100000);
    assert_string_equal(r.currency, "THB");
    assert_int_equal(captures(ST_2C2P, &c, st), 1);
    /* 2C2P has no cancel for a redirect token; the adapter says so. */
    struct pt_http_request rq = {0};
    struct pt_gw_env env = {.now_ms = 1};
    assert_int_equal(pt_gateway_2c2p.build(&T.gw[ST_2C2P], PT_GW_CANCEL, &c, &env, &rq),
                     PT_EUNSUPPORTED);

    new_charge(&c, ST_2C2P, "c2p51", 10051);
    assert_int_equal(call(ST_2C2P, PT_GW_PAY, &c, &r), PT_OUTCOME_PENDING);
    assert_int_equal(settle(ST_2C2P, &c, &r), PT_OUTCOME_DECLINED);
    assert_int_equal(captures(ST_2C2P, &c, st), 0);
    assert_string_equal(st, "declined");

    new_charge(&c, ST_2C2P, "c2pnf", 10000);
    assert_int_equal(call(ST_2C2P, PT_GW_QUERY, &c, &r), PT_OUTCOME_NOT_FOUND);
}

/* ---- signatures: the simulator checks like the gateways do ---------------------- */

static void test_bad_request_signatures_are_refused(void **state)
{
    (void)state;
    struct pt_charge c;
    struct pt_gw_result r;
    struct pt_http_response raw;

    /* Alipay: signed with a key that is not the app's. */
    struct pt_gw_config bad = T.gw[ST_ALIPAY];
    bad.private_key = T.gw[ST_WECHAT].private_key;
    new_charge(&c, ST_ALIPAY, "alibad", 1000);
    assert_int_equal(simtest_call_with(T.curl, &bad, ST_ALIPAY, PT_GW_PAY, &c, 5000, &r, &raw),
                     PT_OK);
    assert_non_null(strstr(raw.body, "\"sub_code\":\"isv.invalid-signature\""));
    assert_true(r.outcome != PT_OUTCOME_SUCCESS);
    pt_http_response_free(&raw);
    assert_int_equal(captures(ST_ALIPAY, &c, NULL), -1);

    /* WeChat: Authorization signed with the wrong key, then naming a wrong serial. */
    bad = T.gw[ST_WECHAT];
    bad.private_key = T.gw[ST_ALIPAY].private_key;
    new_charge(&c, ST_WECHAT, "wxbad", 1000);
    assert_int_equal(simtest_call_with(T.curl, &bad, ST_WECHAT, PT_GW_PAY, &c, 5000, &r, &raw),
                     PT_OK);
    assert_int_equal(raw.status, 401);
    assert_non_null(strstr(raw.body, "\"code\":\"SIGN_ERROR\""));
    assert_true(r.outcome != PT_OUTCOME_SUCCESS && r.outcome != PT_OUTCOME_PENDING);
    pt_http_response_free(&raw);
    bad = T.gw[ST_WECHAT];
    snprintf(bad.serial_no, sizeof bad.serial_no, "0123456789ABCDEF");
    assert_int_equal(simtest_call_with(T.curl, &bad, ST_WECHAT, PT_GW_PAY, &c, 5000, &r, &raw),
                     PT_OK);
    assert_int_equal(raw.status, 401);
    pt_http_response_free(&raw);
    assert_int_equal(captures(ST_WECHAT, &c, NULL), -1);

    /* Stripe: a wrong secret key. */
    bad = T.gw[ST_STRIPE];
    snprintf((char *)bad.secret, sizeof bad.secret, "sk_test_wrong_key_1234");
    bad.secret_len = strlen((char *)bad.secret);
    new_charge(&c, ST_STRIPE, "stbad", 1000);
    assert_int_equal(simtest_call_with(T.curl, &bad, ST_STRIPE, PT_GW_PAY, &c, 5000, &r, &raw),
                     PT_OK);
    assert_int_equal(raw.status, 401);
    assert_non_null(strstr(raw.body, "Invalid API Key provided"));
    assert_null(strstr(raw.body, "sk_test_wrong_key_1234")); /* never echoed whole */
    assert_true(r.outcome != PT_OUTCOME_SUCCESS);
    pt_http_response_free(&raw);
    assert_int_equal(captures(ST_STRIPE, &c, NULL), -1);

    /* 2C2P: a JWT signed with another secret. */
    bad = T.gw[ST_2C2P];
    snprintf((char *)bad.secret, sizeof bad.secret, "not-the-merchant-secret");
    bad.secret_len = strlen((char *)bad.secret);
    new_charge(&c, ST_2C2P, "c2pbad", 1000);
    assert_int_equal(simtest_call_with(T.curl, &bad, ST_2C2P, PT_GW_PAY, &c, 5000, &r, &raw),
                     PT_OK);
    assert_non_null(strstr(raw.body, "\"respCode\":\"9042\""));
    assert_true(r.outcome != PT_OUTCOME_SUCCESS && r.outcome != PT_OUTCOME_PENDING);
    pt_http_response_free(&raw);
    assert_int_equal(captures(ST_2C2P, &c, NULL), -1);
}

static void test_responses_signed_by_another_key_are_never_success(void **state)
{
    (void)state;
    /* payterm configured with the wrong gateway public keys: every answer of
     * the (honest) simulator fails verification and is AMBIGUOUS. */
    struct pt_charge c;
    struct pt_gw_result r;
    struct pt_gw_config a = T.gw[ST_ALIPAY], w = T.gw[ST_WECHAT];
    a.peer_key = T.gw[ST_WECHAT].peer_key;
    w.peer_key = T.gw[ST_ALIPAY].peer_key;
    new_charge(&c, ST_ALIPAY, "alipeer", 1000);
    assert_int_equal(simtest_call_with(T.curl, &a, ST_ALIPAY, PT_GW_PAY, &c, 5000, &r, NULL),
                     PT_OK);
    assert_int_equal(r.outcome, PT_OUTCOME_AMBIGUOUS);
    assert_string_equal(r.code, "invalid_signature");
    new_charge(&c, ST_WECHAT, "wxpeer", 1000);
    assert_int_equal(simtest_call_with(T.curl, &w, ST_WECHAT, PT_GW_PAY, &c, 5000, &r, NULL),
                     PT_OK);
    assert_int_equal(r.outcome, PT_OUTCOME_AMBIGUOUS);
    assert_string_equal(r.code, "invalid_signature");
}

/* ---- faults: SPEC section 1 on demand, for every gateway --------------------------- */

/* The outcome a successful pay has right away: SUCCESS, or PENDING for the
 * methods that wait for the customer. */
static enum pt_outcome pay_ok(int gw)
{
    return gw == ST_ALIPAY || gw == ST_STRIPE ? PT_OUTCOME_SUCCESS : PT_OUTCOME_PENDING;
}

static void arm(int gw, const char *mode, const char *extra)
{
    char j[200];
    snprintf(j, sizeof j, "{\"gateway\":\"%s\",\"mode\":\"%s\",\"count\":1%s}",
             simtest_gw_names[gw], mode, extra ? extra : "");
    simtest_fault(&T, j);
}

/* The client retries with the same order id, the order settles, and the
 * money moved exactly once. */
static void retry_and_settle_once(int gw, const struct pt_charge *c)
{
    struct pt_gw_result r;
    assert_int_equal(simtest_call(&T, gw, PT_GW_PAY, c, 5000, &r, NULL), PT_OK);
    assert_int_equal(settle(gw, c, &r), PT_OUTCOME_SUCCESS);
    assert_int_equal(r.amount, c->amount);
    assert_int_equal(captures(gw, c, NULL), 1);
}

static void fault_refuse_connect(int gw)
{
    struct pt_charge c;
    struct pt_gw_result r;
    new_charge(&c, gw, "refuse", 1500);
    arm(gw, "refuse_connect", NULL);
    assert_int_equal(simtest_call(&T, gw, PT_GW_PAY, &c, 5000, &r, NULL), PT_ENOTSENT);
    assert_int_equal(captures(gw, &c, NULL), -1);
    retry_and_settle_once(gw, &c);
}

static void fault_fail_before_commit(int gw)
{
    struct pt_charge c;
    struct pt_gw_result r;
    new_charge(&c, gw, "fbc", 1600);
    arm(gw, "fail_before_commit", NULL);
    assert_int_equal(simtest_call(&T, gw, PT_GW_PAY, &c, 5000, &r, NULL), PT_ENOANSWER);
    assert_int_equal(captures(gw, &c, NULL), -1);
    assert_int_equal(call(gw, PT_GW_QUERY, &c, &r), PT_OUTCOME_NOT_FOUND);
    retry_and_settle_once(gw, &c);
}

static void fault_drop_after_commit(int gw)
{
    struct pt_charge c;
    struct pt_gw_result r;
    new_charge(&c, gw, "dac", 1700);
    arm(gw, "drop_after_commit", NULL);
    assert_int_equal(simtest_call(&T, gw, PT_GW_PAY, &c, 5000, &r, NULL), PT_ENOANSWER);
    /* The query finds what the lost answer would have said. */
    assert_int_equal(call(gw, PT_GW_QUERY, &c, &r), pay_ok(gw));
    assert_int_equal(settle(gw, &c, &r), PT_OUTCOME_SUCCESS);
    assert_int_equal(captures(gw, &c, NULL), 1);
    /* A blind resend (what the spec forbids outside Stripe's window) still
     * cannot move money twice at the gateway. */
    assert_int_equal(simtest_call(&T, gw, PT_GW_PAY, &c, 5000, &r, NULL), PT_OK);
    assert_true(r.outcome != PT_OUTCOME_DECLINED);
    assert_int_equal(captures(gw, &c, NULL), 1);
}

static void fault_http_500_after_commit(int gw)
{
    struct pt_charge c;
    struct pt_gw_result r;
    new_charge(&c, gw, "h500", 1800);
    arm(gw, "http_500_after_commit", NULL);
    assert_int_equal(simtest_call(&T, gw, PT_GW_PAY, &c, 5000, &r, NULL), PT_OK);
    assert_int_equal(r.outcome, PT_OUTCOME_AMBIGUOUS);
    assert_int_equal(call(gw, PT_GW_QUERY, &c, &r), pay_ok(gw));
    assert_int_equal(settle(gw, &c, &r), PT_OUTCOME_SUCCESS);
    assert_int_equal(captures(gw, &c, NULL), 1);
}

static void fault_delay_past_timeout(int gw)
{
    struct pt_charge c;
    struct pt_gw_result r;
    new_charge(&c, gw, "delay", 1900);
    arm(gw, "delay", ",\"delay_ms\":1200");
    assert_int_equal(simtest_call(&T, gw, PT_GW_PAY, &c, 400, &r, NULL), PT_ENOANSWER);
    simtest_sleep_ms(1300);
    assert_int_equal(settle(gw, &c, &r), PT_OUTCOME_SUCCESS);
    assert_int_equal(captures(gw, &c, NULL), 1);
    retry_and_settle_once(gw, &c);
}

static void test_faults_alipay(void **state)
{
    (void)state;
    fault_refuse_connect(ST_ALIPAY);
    fault_fail_before_commit(ST_ALIPAY);
    fault_drop_after_commit(ST_ALIPAY);
    fault_http_500_after_commit(ST_ALIPAY);
    fault_delay_past_timeout(ST_ALIPAY);
}

static void test_faults_wechat(void **state)
{
    (void)state;
    fault_refuse_connect(ST_WECHAT);
    fault_fail_before_commit(ST_WECHAT);
    fault_drop_after_commit(ST_WECHAT);
    fault_http_500_after_commit(ST_WECHAT);
    fault_delay_past_timeout(ST_WECHAT);
}

static void test_faults_stripe(void **state)
{
    (void)state;
    fault_refuse_connect(ST_STRIPE);
    fault_fail_before_commit(ST_STRIPE);
    fault_drop_after_commit(ST_STRIPE);
    fault_http_500_after_commit(ST_STRIPE);
    fault_delay_past_timeout(ST_STRIPE);
}

static void test_faults_2c2p(void **state)
{
    (void)state;
    fault_refuse_connect(ST_2C2P);
    fault_fail_before_commit(ST_2C2P);
    fault_drop_after_commit(ST_2C2P);
    fault_http_500_after_commit(ST_2C2P);
    fault_delay_past_timeout(ST_2C2P);
}

static void test_fault_requests_are_checked(void **state)
{
    (void)state;
    struct pt_http_request rq = {.method = "POST"};
    struct pt_http_response r = {0};
    char url[128];
    static const char *const bad[] = {
        "{\"mode\":\"explode\"}", "{\"gateway\":\"paypal\",\"mode\":\"delay\",\"delay_ms\":5}",
        "{\"mode\":\"delay\"}", "{\"mode\":\"drop_after_commit\",\"count\":0}", "[]"};
    snprintf(url, sizeof url, "https://localhost:%d/_sim/faults", T.port);
    rq.url = url;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rq.body = (char *)bad[i];
        rq.body_len = strlen(bad[i]);
        assert_int_equal(pt_curl_send(T.curl, "_sim", &rq, 5000, &r), PT_OK);
        assert_int_equal(r.status, 400);
        pt_http_response_free(&r);
    }
    rq.url = NULL;
    rq.body = NULL;
}

/* ---- Stripe idempotency keys --------------------------------------------------------- */

struct slow {
    struct pt_charge c;
    int rc;
    struct pt_gw_result r;
};

static void *slow_pay(void *arg)
{
    struct slow *sl = arg;
    sl->rc = simtest_call(&T, ST_STRIPE, PT_GW_PAY, &sl->c, 5000, &sl->r, NULL);
    return NULL;
}

static void test_stripe_idempotency_keys(void **state)
{
    (void)state;
    struct pt_charge c;
    struct pt_gw_result r, first;
    struct pt_http_response raw;

    /* Replay: same key, same parameters -> the first answer, marked. */
    new_charge(&c, ST_STRIPE, "key", 1200);
    assert_int_equal(call(ST_STRIPE, PT_GW_PAY, &c, &first), PT_OUTCOME_SUCCESS);
    assert_int_equal(simtest_call(&T, ST_STRIPE, PT_GW_PAY, &c, 5000, &r, &raw), PT_OK);
    assert_string_equal(pt_http_response_header(&raw, "Idempotent-Replayed"), "true");
    assert_string_equal(r.trade_no, first.trade_no);
    pt_http_response_free(&raw);

    /* Same key, other parameters -> 400 idempotency_error, for an operator. */
    c.amount = 1300;
    assert_int_equal(simtest_call(&T, ST_STRIPE, PT_GW_PAY, &c, 5000, &r, &raw), PT_OK);
    assert_int_equal(raw.status, 400);
    assert_non_null(strstr(raw.body, "\"type\":\"idempotency_error\""));
    assert_int_equal(r.outcome, PT_OUTCOME_AMBIGUOUS);
    assert_int_equal(r.review, 1);
    pt_http_response_free(&raw);
    assert_int_equal(captures(ST_STRIPE, &c, NULL), 1);

    /* Same key while the first request runs -> 409 idempotency_key_in_use
     * (over a second connection), then the first answer is replayed. */
    struct slow sl;
    pthread_t th;
    new_charge(&sl.c, ST_STRIPE, "inflight", 1400);
    arm(ST_STRIPE, "delay", ",\"delay_ms\":1200");
    assert_int_equal(pthread_create(&th, NULL, slow_pay, &sl), 0);
    simtest_sleep_ms(300);
    struct pt_curl *other = NULL;
    struct pt_curl_options co = {.ca_file = T.cfg.ca_file};
    assert_int_equal(pt_curl_new(&co, &other), PT_OK);
    assert_int_equal(
        simtest_call_with(other, &T.gw[ST_STRIPE], ST_STRIPE, PT_GW_PAY, &sl.c, 5000, &r, &raw),
        PT_OK);
    assert_int_equal(raw.status, 409);
    assert_string_equal(r.code, "idempotency_key_in_use");
    assert_int_equal(r.outcome, PT_OUTCOME_AMBIGUOUS);
    pt_http_response_free(&raw);
    pthread_join(th, NULL);
    assert_int_equal(sl.rc, PT_OK);
    assert_int_equal(sl.r.outcome, PT_OUTCOME_SUCCESS);
    assert_int_equal(
        simtest_call_with(other, &T.gw[ST_STRIPE], ST_STRIPE, PT_GW_PAY, &sl.c, 5000, &r, &raw),
        PT_OK);
    assert_string_equal(pt_http_response_header(&raw, "Idempotent-Replayed"), "true");
    assert_string_equal(r.trade_no, sl.r.trade_no);
    pt_http_response_free(&raw);
    pt_curl_destroy(other);
    assert_int_equal(captures(ST_STRIPE, &sl.c, NULL), 1);

    /* The 500 of http_500_after_commit is saved with the key, as Stripe does. */
    new_charge(&c, ST_STRIPE, "key500", 1500);
    arm(ST_STRIPE, "http_500_after_commit", NULL);
    assert_int_equal(simtest_call(&T, ST_STRIPE, PT_GW_PAY, &c, 5000, &r, &raw), PT_OK);
    assert_int_equal(raw.status, 500);
    pt_http_response_free(&raw);
    assert_int_equal(simtest_call(&T, ST_STRIPE, PT_GW_PAY, &c, 5000, &r, &raw), PT_OK);
    assert_int_equal(raw.status, 500);
    assert_string_equal(pt_http_response_header(&raw, "Idempotent-Replayed"), "true");
    pt_http_response_free(&raw);
    assert_int_equal(call(ST_STRIPE, PT_GW_QUERY, &c, &r), PT_OUTCOME_SUCCESS);
    assert_int_equal(captures(ST_STRIPE, &c, NULL), 1);
}

static void test_stripe_key_expiry_allows_a_second_charge(void **state)
{
    (void)state;
    /* Why payterm never resends outside the window and keeps order_id unique
     * itself: once Stripe forgets the key, the same request charges again. */
    struct simtest t2;
    struct pt_sim_options o = {.stripe_key_ttl_s = 1};
    struct pt_charge c;
    struct pt_gw_result r1, r2;
    simtest_start(&t2, &o);
    new_charge(&c, ST_STRIPE, "expiry", 1200);
    assert_int_equal(simtest_call(&t2, ST_STRIPE, PT_GW_PAY, &c, 5000, &r1, NULL), PT_OK);
    simtest_sleep_ms(1300);
    assert_int_equal(simtest_call(&t2, ST_STRIPE, PT_GW_PAY, &c, 5000, &r2, NULL), PT_OK);
    assert_string_not_equal(r1.trade_no, r2.trade_no);
    assert_int_equal(simtest_captures(&t2, "stripe", c.order_id, NULL), 2);
    simtest_stop(&t2);
}

/* ---- notifications ---------------------------------------------------------------------- */

static int verify_all(struct receiver *rcv, const struct simtest *t, const char *path, int gw,
                      const char *order, int *success_seen, char dedup[256])
{
    const struct pt_gateway *g = pt_gateway_find(simtest_gw_names[gw]);
    int n = 0;
    pthread_mutex_lock(&rcv->lk);
    for (int i = 0; i < rcv->n; i++) {
        struct recv_msg *m = &rcv->msgs[i];
        if (strcmp(m->path, path) != 0)
            continue;
        struct pt_notification note;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        struct pt_gw_env env = {.now_ms = (int64_t)now.tv_sec * 1000};
        /* Every notification must verify (WeChat's is encrypted, too). */
        int rc = g->parse_notify(&t->gw[gw], &m->msg, &env, &note);
        if (rc != PT_OK)
            fail_msg("%s notification %d does not verify: %s", g->name, i, pt_strerror(rc));
        if (note.relevant && strcmp(note.order_id, order) != 0)
            continue;
        if (note.relevant && note.status == PT_OUTCOME_SUCCESS) {
            assert_int_equal(note.amount, 2300);
            if (*success_seen)
                assert_string_equal(note.dedup_id, dedup); /* a duplicate: same id */
            snprintf(dedup, 256, "%s", note.dedup_id);
            (*success_seen)++;
        }
        n++;
    }
    pthread_mutex_unlock(&rcv->lk);
    return n;
}

static void test_notifications_verify_and_repeat(void **state)
{
    (void)state;
    struct receiver rcv;
    struct simtest t2;
    char base[64];
    receiver_start(&rcv);
    rcv.wrong_first = 3; /* the first three replies are not the success reply */
    snprintf(base, sizeof base, "http://127.0.0.1:%d", rcv.port);
    struct pt_sim_options o = {.pay_delay_ms = 200, .notify_base = base};
    simtest_start(&t2, &o);
    struct pt_charge c[ST__COUNT];
    struct pt_gw_result r;
    for (int gw = 0; gw < ST__COUNT; gw++) {
        new_charge(&c[gw], gw, "notify", 2300);
        assert_int_equal(simtest_call(&t2, gw, PT_GW_PAY, &c[gw], 5000, &r, NULL), PT_OK);
        assert_int_equal(r.outcome, pay_ok(gw));
    }
    static const char *const paths[ST__COUNT] = {"/notify/alipay", "/notify/wechat",
                                                 "/webhooks/stripe", "/notify/2c2p"};
    for (int gw = 0; gw < ST__COUNT; gw++) {
        /* Each success is delivered at least twice (a deliberate duplicate). */
        for (int wait = 0; wait < 100; wait++) {
            int seen = 0;
            char dedup[256] = "";
            verify_all(&rcv, &t2, paths[gw], gw, c[gw].order_id, &seen, dedup);
            if (seen >= 2)
                break;
            receiver_wait(&rcv, NULL, rcv.n + 1, 200);
        }
        int seen = 0;
        char dedup[256] = "";
        int total = verify_all(&rcv, &t2, paths[gw], gw, c[gw].order_id, &seen, dedup);
        if (seen < 2)
            fail_msg("%s: %d success notification(s) of %d received, want >= 2",
                     simtest_gw_names[gw], seen, total);
    }
    assert_true(rcv.wrong_given == 3);
    /* The wrong replies were retried until the right one: nothing given up. */
    struct pt_http_response resp = {0};
    struct pt_http_request rq = {.method = "GET"};
    char url[128];
    snprintf(url, sizeof url, "https://localhost:%d/_sim/notifications", t2.port);
    rq.url = url;
    assert_int_equal(pt_curl_send(t2.curl, "_sim", &rq, 5000, &resp), PT_OK);
    rq.url = NULL;
    cJSON *j = cJSON_Parse(resp.body);
    int retried = 0;
    cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(j, "data"))
    {
        assert_false(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "gave_up")));
        retried += cJSON_GetObjectItemCaseSensitive(it, "attempts")->valueint > 1;
    }
    assert_true(retried >= 1);
    cJSON_Delete(j);
    pt_http_response_free(&resp);
    simtest_stop(&t2);
    receiver_stop(&rcv);
}

/* ---- the ledger and restarts ------------------------------------------------------------- */

static void test_ledger_shape(void **state)
{
    (void)state;
    struct pt_charge c;
    struct pt_gw_result r;
    new_charge(&c, ST_STRIPE, "shape", 1200);
    assert_int_equal(call(ST_STRIPE, PT_GW_PAY, &c, &r), PT_OUTCOME_SUCCESS);
    cJSON *row = simtest_ledger_row(&T, "stripe", c.order_id);
    assert_non_null(row);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(row, "gateway")->valuestring, "stripe");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(row, "order_id")->valuestring, c.order_id);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(row, "amount")->valueint, 1200);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(row, "currency")->valuestring, "USD");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(row, "status")->valuestring, "captured");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(row, "captures")->valueint, 1);
    cJSON_Delete(row);
}

static char *read_file(const char *dir, const char *name)
{
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    char *text = pt_test_read_file(p, NULL);
    assert_non_null(text);
    return text;
}

static void test_state_survives_restart(void **state)
{
    (void)state;
    struct pt_charge a, s, w;
    struct pt_gw_result r, sr;
    new_charge(&a, ST_ALIPAY, "restart", 3100);
    new_charge(&s, ST_STRIPE, "restart", 3200);
    new_charge(&w, ST_WECHAT, "restart", 3300);
    assert_int_equal(call(ST_ALIPAY, PT_GW_PAY, &a, &r), PT_OUTCOME_SUCCESS);
    assert_int_equal(call(ST_STRIPE, PT_GW_PAY, &s, &sr), PT_OUTCOME_SUCCESS);
    assert_int_equal(call(ST_WECHAT, PT_GW_PAY, &w, &r), PT_OUTCOME_PENDING);
    char *ca = read_file(T.dir, "ca.pem"), *pub = read_file(T.dir, "alipay_public_key.pem");
    int old_port = T.port;
    simtest_restart(&T); /* the QR customer pays while the simulator is down */
    (void)old_port;
    char *ca2 = read_file(T.dir, "ca.pem"), *pub2 = read_file(T.dir, "alipay_public_key.pem");
    assert_string_equal(ca, ca2);
    assert_string_equal(pub, pub2);
    free(ca);
    free(ca2);
    free(pub);
    free(pub2);
    assert_int_equal(call(ST_ALIPAY, PT_GW_QUERY, &a, &r), PT_OUTCOME_SUCCESS);
    assert_int_equal(captures(ST_ALIPAY, &a, NULL), 1);
    /* The Stripe key is still remembered: replayed, not charged again. */
    struct pt_http_response raw;
    assert_int_equal(simtest_call(&T, ST_STRIPE, PT_GW_PAY, &s, 5000, &r, &raw), PT_OK);
    assert_string_equal(pt_http_response_header(&raw, "Idempotent-Replayed"), "true");
    assert_string_equal(r.trade_no, sr.trade_no);
    pt_http_response_free(&raw);
    assert_int_equal(captures(ST_STRIPE, &s, NULL), 1);
    /* The pending QR order is still paid by its customer after the restart. */
    assert_int_equal(settle(ST_WECHAT, &w, &r), PT_OUTCOME_SUCCESS);
    assert_int_equal(captures(ST_WECHAT, &w, NULL), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_alipay_barcode_pay_query_cancel, clear),
        cmocka_unit_test_setup(test_alipay_qr_paid_by_the_customer, clear),
        cmocka_unit_test_setup(test_alipay_amount_rules, clear),
        cmocka_unit_test_setup(test_alipay_resend_of_paid_order_moves_no_money, clear),
        cmocka_unit_test_setup(test_wechat_native_pay_query_close, clear),
        cmocka_unit_test_setup(test_stripe_pay_query_cancel, clear),
        cmocka_unit_test_setup(test_2c2p_redirect_pay_inquiry, clear),
        cmocka_unit_test_setup(test_bad_request_signatures_are_refused, clear),
        cmocka_unit_test_setup(test_responses_signed_by_another_key_are_never_success, clear),
        cmocka_unit_test_setup(test_faults_alipay, clear),
        cmocka_unit_test_setup(test_faults_wechat, clear),
        cmocka_unit_test_setup(test_faults_stripe, clear),
        cmocka_unit_test_setup(test_faults_2c2p, clear),
        cmocka_unit_test_setup(test_fault_requests_are_checked, clear),
        cmocka_unit_test_setup(test_stripe_idempotency_keys, clear),
        cmocka_unit_test_setup(test_stripe_key_expiry_allows_a_second_charge, clear),
        cmocka_unit_test_setup(test_notifications_verify_and_repeat, clear),
        cmocka_unit_test_setup(test_ledger_shape, clear),
        cmocka_unit_test_setup(test_state_survives_restart, clear),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
