/*
 * test_sim_2c2p_pm.c - 2C2P's Payment Maintenance API at the gateway
 * simulator (SPEC 5a, 9), over real HTTPS through the libcurl transport,
 * with payterm's own adapter on the client side (the keys and pm_endpoint
 * of the gateways.json the simulator wrote).
 *
 * What is asserted: each refund request is one refund in the ledger (2C2P
 * has no refund key: a resend is a second refund there, which is why the
 * sync engine never resends blindly), RS lists exactly the ledger's refunds
 * with the numbers R answered, nothing above the charge is refunded, RP
 * becomes RF by itself with --pm-refund-pending, a request 2C2P cannot
 * authenticate changes nothing, and the faults narrowed by process_type hit
 * the refund and not its status query (or the reverse).
 */
#include "simtest.h"
#include "testutil.h"

#include "crypto.h"
#include "err.h"
#include "gateways/2c2p_pm.h"
#include "gateways/jose.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static struct pt_gw_config *cfg(void)
{
    return &T.gw[ST_2C2P];
}

/* A 2C2P charge paid through the adapter (the simulated customer pays). */
static void paid(struct pt_charge *c, const char *tag, int64_t amount)
{
    char order[64];
    struct pt_gw_result r;
    simtest_order_id(order, sizeof order, tag);
    simtest_charge(c, ST_2C2P, order, amount, "THB");
    assert_int_equal(simtest_call(&T, ST_2C2P, PT_GW_PAY, c, 5000, &r, NULL), PT_OK);
    for (int i = 0; i < 50 && r.outcome != PT_OUTCOME_SUCCESS; i++) {
        simtest_sleep_ms(100);
        assert_int_equal(simtest_call(&T, ST_2C2P, PT_GW_QUERY, c, 5000, &r, NULL), PT_OK);
    }
    assert_int_equal(r.outcome, PT_OUTCOME_SUCCESS);
    c->state = PT_STATE_SUCCESS;
}

/* Sends R (op REFUND) or RS through the adapter; the transport's rc. */
static int send(enum pt_gw_refund_op op, const struct pt_charge *c, int64_t amount,
                struct pt_gw_result *res, struct pt_gw_refund_list *list)
{
    struct pt_refund r = {.amount = amount};
    struct pt_http_request rq = {0};
    struct pt_http_response resp = {0};
    const struct pt_gateway *g = pt_gateway_find("2c2p");
    assert_int_equal(g->build_refund(cfg(), op, c, &r, NULL, &rq), PT_OK);
    int rc = pt_curl_send(T.curl, "2c2p", &rq, 3000, &resp);
    pt_http_request_free(&rq);
    if (rc == PT_OK && op == PT_GW_REFUND)
        assert_int_equal(g->parse_refund(cfg(), op, c, &r, &resp, res), PT_OK);
    else if (rc == PT_OK)
        assert_int_equal(g->parse_refund_list(cfg(), c, &resp, list), PT_OK);
    pt_http_response_free(&resp);
    return rc;
}

static int64_t ledger(const char *order, const char *name)
{
    cJSON *row = simtest_ledger_row(&T, "2c2p", order);
    assert_non_null(row);
    int64_t n = (int64_t)cJSON_GetObjectItem(row, name)->valuedouble;
    cJSON_Delete(row);
    return n;
}

static void expect_ledger(const char *order, int64_t refunded, int64_t refunds)
{
    int64_t a = ledger(order, "refunded"), b = ledger(order, "refunds");
    if (a != refunded || b != refunds)
        fail_msg("%s: ledger refunded %lld in %lld refund(s), want %lld in %lld", order,
                 (long long)a, (long long)b, (long long)refunded, (long long)refunds);
}

static void test_refund_and_status(void **state)
{
    (void)state;
    struct pt_charge c;
    struct pt_gw_result res;
    struct pt_gw_refund_list *list = malloc(sizeof *list);
    paid(&c, "pm", 10000);
    /* Nothing refunded yet: an empty list. */
    assert_int_equal(send(PT_GW_REFUND_QUERY, &c, 0, NULL, list), PT_OK);
    assert_int_equal(list->res.outcome, PT_OUTCOME_SUCCESS);
    assert_int_equal(list->n, 0);
    /* Two refunds of the same amount are two refunds (no refund key). */
    assert_int_equal(send(PT_GW_REFUND, &c, 2500, &res, NULL), PT_OK);
    assert_int_equal(res.outcome, PT_OUTCOME_SUCCESS);
    assert_int_equal(res.amount, 2500);
    char first[PT_SHORT_MAX];
    snprintf(first, sizeof first, "%s", res.trade_no);
    assert_int_equal(strlen(first), 7);
    assert_int_equal(send(PT_GW_REFUND, &c, 2500, &res, NULL), PT_OK);
    assert_int_equal(res.outcome, PT_OUTCOME_SUCCESS);
    assert_string_not_equal(res.trade_no, first);
    expect_ledger(c.order_id, 5000, 2);
    /* RS lists both, oldest first, with the numbers R gave. */
    assert_int_equal(send(PT_GW_REFUND_QUERY, &c, 0, NULL, list), PT_OK);
    assert_int_equal(list->res.outcome, PT_OUTCOME_SUCCESS);
    assert_int_equal(list->n, 2);
    assert_string_equal(list->e[0].refund_no, first);
    assert_string_equal(list->e[1].refund_no, res.trade_no);
    assert_int_equal(list->e[1].amount, 2500);
    assert_int_equal(list->e[1].status, PT_OUTCOME_SUCCESS);
    /* Never more than the charge: 5000 is left, 5001 is refused (40). */
    assert_int_equal(send(PT_GW_REFUND, &c, 5001, &res, NULL), PT_OK);
    assert_int_equal(res.outcome, PT_OUTCOME_DECLINED);
    assert_string_equal(res.code, "40");
    assert_int_equal(send(PT_GW_REFUND, &c, 5000, &res, NULL), PT_OK);
    assert_int_equal(res.outcome, PT_OUTCOME_SUCCESS);
    expect_ledger(c.order_id, 10000, 3);
    /* An invoice 2C2P does not know. */
    struct pt_charge other = c;
    snprintf(other.order_id, sizeof other.order_id, "T-nobody-%d", 1);
    assert_int_equal(send(PT_GW_REFUND, &other, 100, &res, NULL), PT_OK);
    assert_int_equal(res.outcome, PT_OUTCOME_DECLINED);
    assert_string_equal(res.code, "16");
    free(list);
}

/* A request signed with another key is refused and changes nothing. */
static void test_unauthenticated(void **state)
{
    (void)state;
    struct pt_charge c;
    struct pt_gw_result res;
    paid(&c, "pm-auth", 3000);
    struct pt_gw_config forged = {0};
    memcpy(&forged, cfg(), sizeof forged);
    char err[PT_PK_ERR_MAX], path[1024];
    pt_test_data_path("keys/other_private.pem", path, sizeof path);
    assert_int_equal(pt_pk_load_file(path, NULL, NULL, &forged.private_key, err, sizeof err),
                     PT_OK);
    struct pt_refund r = {.amount = 1000};
    struct pt_http_request rq = {0};
    struct pt_http_response resp = {0};
    const struct pt_gateway *g = pt_gateway_find("2c2p");
    assert_int_equal(g->build_refund(&forged, PT_GW_REFUND, &c, &r, NULL, &rq), PT_OK);
    assert_int_equal(pt_curl_send(T.curl, "2c2p", &rq, 3000, &resp), PT_OK);
    assert_int_equal(g->parse_refund(cfg(), PT_GW_REFUND, &c, &r, &resp, &res), PT_OK);
    assert_int_equal(res.outcome, PT_OUTCOME_AMBIGUOUS);
    assert_string_equal(res.code, "99");
    pt_http_request_free(&rq);
    pt_http_response_free(&resp);
    pt_pk_free(forged.private_key);
    expect_ledger(c.order_id, 0, 0);
}

/* Faults narrowed to a processType: the refund's answer is lost (it was
 * executed), while its status query is answered and shows it. */
static void test_faults_by_process_type(void **state)
{
    (void)state;
    struct pt_charge c;
    struct pt_gw_result res;
    struct pt_gw_refund_list *list = malloc(sizeof *list);
    paid(&c, "pm-fault", 8000);
    simtest_fault(&T, "{\"gateway\":\"2c2p\",\"mode\":\"drop_after_commit\",\"count\":1,"
                      "\"process_type\":\"R\"}");
    /* RS first: untouched by an R fault. */
    assert_int_equal(send(PT_GW_REFUND_QUERY, &c, 0, NULL, list), PT_OK);
    assert_int_equal(list->n, 0);
    assert_int_equal(send(PT_GW_REFUND, &c, 3000, &res, NULL), PT_ENOANSWER);
    expect_ledger(c.order_id, 3000, 1);
    assert_int_equal(send(PT_GW_REFUND_QUERY, &c, 0, NULL, list), PT_OK);
    assert_int_equal(list->n, 1);
    assert_int_equal(list->e[0].amount, 3000);
    /* fail_before_commit: the refund never happened. */
    simtest_fault(&T, "{\"gateway\":\"2c2p\",\"mode\":\"fail_before_commit\",\"count\":1,"
                      "\"process_type\":\"R\"}");
    assert_int_equal(send(PT_GW_REFUND, &c, 1000, &res, NULL), PT_ENOANSWER);
    expect_ledger(c.order_id, 3000, 1);
    /* http_500 on RS only: the status query fails, a refund goes through. */
    simtest_fault(&T, "{\"gateway\":\"2c2p\",\"mode\":\"http_500_after_commit\",\"count\":1,"
                      "\"process_type\":\"RS\"}");
    assert_int_equal(send(PT_GW_REFUND, &c, 1000, &res, NULL), PT_OK);
    assert_int_equal(res.outcome, PT_OUTCOME_SUCCESS);
    assert_int_equal(send(PT_GW_REFUND_QUERY, &c, 0, NULL, list), PT_OK);
    assert_int_equal(list->res.outcome, PT_OUTCOME_AMBIGUOUS);
    assert_string_equal(list->res.code, "http_500");
    assert_int_equal(send(PT_GW_REFUND_QUERY, &c, 0, NULL, list), PT_OK);
    assert_int_equal(list->n, 2);
    expect_ledger(c.order_id, 4000, 2);
    /* process_type cannot narrow refuse_connect (nothing is read then). */
    struct pt_http_request rq = {0};
    struct pt_http_response resp = {0};
    char url[128];
    snprintf(url, sizeof url, "https://127.0.0.1:%d/_sim/faults", T.port);
    rq.url = url;
    strcpy(rq.method, "POST");
    rq.body = "{\"gateway\":\"2c2p\",\"mode\":\"refuse_connect\",\"process_type\":\"R\"}";
    rq.body_len = strlen(rq.body);
    assert_int_equal(pt_curl_send(T.curl, "control", &rq, 3000, &resp), PT_OK);
    assert_int_equal(resp.status, 400);
    pt_http_response_free(&resp);
    free(list);
}

/* --pm-refund-pending: RP first, RF after the pay delay, nothing twice. */
static void test_pending_refunds(void **state)
{
    (void)state;
    simtest_stop(&T);
    struct pt_sim_options o = {.pay_delay_ms = PAY_DELAY_MS, .pm_refund_pending = 1};
    simtest_start(&T, &o);
    struct pt_charge c;
    struct pt_gw_result res;
    struct pt_gw_refund_list *list = malloc(sizeof *list);
    paid(&c, "pm-rp", 6000);
    assert_int_equal(send(PT_GW_REFUND, &c, 6000, &res, NULL), PT_OK);
    assert_int_equal(res.outcome, PT_OUTCOME_PENDING);
    assert_string_equal(res.code, "RP");
    assert_int_equal(send(PT_GW_REFUND_QUERY, &c, 0, NULL, list), PT_OK);
    assert_int_equal(list->n, 1);
    assert_int_equal(list->e[0].status, PT_OUTCOME_PENDING);
    assert_string_equal(list->e[0].refund_no, res.trade_no);
    /* A pending refund already holds what it returns. */
    struct pt_gw_result more;
    assert_int_equal(send(PT_GW_REFUND, &c, 1, &more, NULL), PT_OK);
    assert_int_equal(more.outcome, PT_OUTCOME_DECLINED);
    for (int i = 0; i < 50; i++) {
        simtest_sleep_ms(100);
        assert_int_equal(send(PT_GW_REFUND_QUERY, &c, 0, NULL, list), PT_OK);
        if (list->e[0].status == PT_OUTCOME_SUCCESS)
            break;
    }
    assert_int_equal(list->e[0].status, PT_OUTCOME_SUCCESS);
    expect_ledger(c.order_id, 6000, 1);
    free(list);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_refund_and_status, clear),
        cmocka_unit_test_setup(test_unauthenticated, clear),
        cmocka_unit_test_setup(test_faults_by_process_type, clear),
        cmocka_unit_test_setup(test_pending_refunds, clear),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
