/*
 * test_sim_refunds.c - refunds at the gateway simulator (SPEC sections 5a and
 * 9), over real HTTPS through the libcurl transport.
 *
 * The refund requests are built and signed here with the gateways' public
 * wire helpers (core/gateways/{alipay,wechat}.h, the Stripe secret key as a
 * Bearer token), exactly as the gateways' clients sign them, and every answer
 * is verified the way payterm verifies it.  The charges themselves go
 * through payterm's adapters.  What is asserted is what a refund must never
 * get wrong: one refund key is executed once however often it is sent (a
 * replay, a lost answer), what is left to refund is never exceeded, and the
 * simulator's ledger says exactly how much money went back and in how many
 * refunds.
 */
#include "simtest.h"
#include "testutil.h"

#include "crypto.h"
#include "err.h"
#include "gateways/alipay.h"
#include "gateways/form.h"
#include "gateways/wechat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void arm(const char *gw, const char *mode)
{
    char j[160];
    snprintf(j, sizeof j, "{\"gateway\":\"%s\",\"mode\":\"%s\",\"count\":1}", gw, mode);
    simtest_fault(&T, j);
}

/* A charge paid through payterm's own adapter. */
static void paid_charge(struct simtest *t, struct pt_charge *c, int gw, const char *tag,
                        int64_t amount)
{
    static const char *const cur[ST__COUNT] = {"CNY", "CNY", "USD", "THB"};
    char order[64];
    struct pt_gw_result r;
    simtest_order_id(order, sizeof order, tag);
    simtest_charge(c, gw, order, amount, cur[gw]);
    assert_int_equal(simtest_call(t, gw, PT_GW_PAY, c, 5000, &r, NULL), PT_OK);
    for (int i = 0; i < 40 && r.outcome == PT_OUTCOME_PENDING; i++) {
        simtest_sleep_ms(100);
        assert_int_equal(simtest_call(t, gw, PT_GW_QUERY, c, 5000, &r, NULL), PT_OK);
    }
    if (amount % 100 != 51 && amount % 100 != 52)
        assert_int_equal(r.outcome, PT_OUTCOME_SUCCESS);
    snprintf(c->gateway_trade_no, sizeof c->gateway_trade_no, "%s", r.trade_no);
}

/* ---- the ledger ------------------------------------------------------------- */

static int64_t ledger_num(struct simtest *t, const char *gw, const char *order, const char *name)
{
    cJSON *row = simtest_ledger_row(t, gw, order);
    assert_non_null(row);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, name);
    if (!cJSON_IsNumber(v))
        fail_msg("ledger row of %s %s has no number \"%s\"", gw, order, name);
    int64_t n = (int64_t)v->valuedouble;
    cJSON_Delete(row);
    return n;
}

static void assert_ledger(struct simtest *t, const char *gw, const char *order, int64_t refunded,
                          int64_t refunds)
{
    int64_t got_refunded = ledger_num(t, gw, order, "refunded");
    int64_t got_refunds = ledger_num(t, gw, order, "refunds");
    if (got_refunded != refunded || got_refunds != refunds)
        fail_msg("%s %s: ledger refunded %lld in %lld refund(s), want %lld in %lld", gw, order,
                 (long long)got_refunded, (long long)got_refunds, (long long)refunded,
                 (long long)refunds);
    assert_int_equal(ledger_num(t, gw, order, "captures"), 1);
}

static const char *jstr(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsString(v))
        fail_msg("member \"%s\" missing or not a string", name);
    return v->valuestring;
}

static int64_t jint(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsNumber(v))
        fail_msg("member \"%s\" missing or not a number", name);
    return (int64_t)v->valuedouble;
}

/* ---- Alipay: gateway.do signed with the app key ------------------------------- */

/*
 * Calls an Alipay OpenAPI method with biz_content, signed as the SDKs sign;
 * returns the transport's rc and, on PT_OK, the verified response object
 * (`<method>_response`) in *out (caller deletes).
 */
static int ali(struct simtest *t, const char *method, const char *biz, cJSON **out)
{
    const struct pt_gw_config *cfg = &t->gw[ST_ALIPAY];
    struct pt_form f;
    struct pt_buf b;
    struct pt_http_request rq = {.method = "POST"};
    struct pt_http_response resp = {0};
    char ts[20];
    pt_alipay_timestamp(now_ms(), ts);
    pt_form_init(&f);
    assert_int_equal(pt_form_add(&f, "app_id", cfg->app_id), PT_OK);
    assert_int_equal(pt_form_add(&f, "method", method), PT_OK);
    assert_int_equal(pt_form_add(&f, "charset", "utf-8"), PT_OK);
    assert_int_equal(pt_form_add(&f, "sign_type", "RSA2"), PT_OK);
    assert_int_equal(pt_form_add(&f, "timestamp", ts), PT_OK);
    assert_int_equal(pt_form_add(&f, "version", "1.0"), PT_OK);
    assert_int_equal(pt_form_add(&f, "biz_content", biz), PT_OK);
    assert_int_equal(pt_alipay_sign_form(cfg->private_key, &f, PT_ALIPAY_REQUEST), PT_OK);
    pt_buf_init(&b, 64 * 1024);
    pt_form_encode(&f, &b);
    pt_form_free(&f);
    rq.body = pt_buf_take(&b, &rq.body_len);
    rq.url = strdup(cfg->endpoint);
    pt_http_request_add_header(&rq, "Content-Type",
                               "application/x-www-form-urlencoded;charset=utf-8");
    int rc = pt_curl_send(t->curl, "alipay", &rq, 3000, &resp);
    pt_http_request_free(&rq);
    *out = NULL;
    if (rc == PT_OK && resp.status == 200) {
        const char *raw = NULL;
        size_t rawlen = 0;
        if (pt_alipay_verify_response(cfg->peer_key, resp.body, resp.body_len, method, &raw,
                                      &rawlen) != PT_OK)
            fail_msg("%s: the answer does not verify: %s", method, resp.body);
        *out = cJSON_ParseWithLength(raw, rawlen);
        assert_non_null(*out);
    }
    pt_http_response_free(&resp);
    return rc;
}

static cJSON *ali_ok(const char *method, const char *biz)
{
    cJSON *o = NULL;
    assert_int_equal(ali(&T, method, biz, &o), PT_OK);
    return o;
}

static void ali_refund_biz(char *out, size_t outlen, const char *order, const char *amount,
                           const char *key)
{
    snprintf(out, outlen,
             "{\"out_trade_no\":\"%s\",\"refund_amount\":\"%s\",\"out_request_no\":\"%s\","
             "\"refund_reason\":\"returned item\"}",
             order, amount, key);
}

/* alipay.trade.refund answered 40004 with sub_code. */
static void ali_refused(const char *biz, const char *sub_code)
{
    cJSON *o = ali_ok("alipay.trade.refund", biz);
    assert_string_equal(jstr(o, "code"), "40004");
    assert_string_equal(jstr(o, "sub_code"), sub_code);
    cJSON_Delete(o);
}

/* alipay.trade.refund succeeded: fund_change and the cumulative refund_fee. */
static void ali_refunded(const char *biz, const char *fund_change, const char *refund_fee)
{
    cJSON *o = ali_ok("alipay.trade.refund", biz);
    assert_string_equal(jstr(o, "code"), "10000");
    assert_string_equal(jstr(o, "msg"), "Success");
    assert_string_equal(jstr(o, "fund_change"), fund_change);
    assert_string_equal(jstr(o, "refund_fee"), refund_fee);
    assert_int_equal(strlen(jstr(o, "gmt_refund_pay")), 19);
    assert_int_equal(strlen(jstr(o, "trade_no")), 28);
    cJSON_Delete(o);
}

static void test_alipay_refunds(void **state)
{
    (void)state;
    struct pt_charge c;
    char biz[512];
    paid_charge(&T, &c, ST_ALIPAY, "alirf", 10000);
    assert_ledger(&T, "alipay", c.order_id, 0, 0);

    /* One refund key, sent twice: money goes back once; the repeat says
     * fund_change N, as Alipay does for a repeated out_request_no. */
    ali_refund_biz(biz, sizeof biz, c.order_id, "30.00", "R-ali-1");
    ali_refunded(biz, "Y", "30.00");
    ali_refunded(biz, "N", "30.00");
    assert_ledger(&T, "alipay", c.order_id, 3000, 1);
    /* The same key with another amount is not a new refund. */
    ali_refund_biz(biz, sizeof biz, c.order_id, "40.00", "R-ali-1");
    ali_refused(biz, "ACQ.DISCORDANT_REPEAT_REQUEST");
    /* More than is left (70.00) is refused; exactly what is left is not. */
    ali_refund_biz(biz, sizeof biz, c.order_id, "70.01", "R-ali-2");
    ali_refused(biz, "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL");
    ali_refund_biz(biz, sizeof biz, c.order_id, "70.00", "R-ali-2");
    ali_refunded(biz, "Y", "100.00");
    ali_refund_biz(biz, sizeof biz, c.order_id, "0.01", "R-ali-3");
    ali_refused(biz, "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL");
    assert_ledger(&T, "alipay", c.order_id, 10000, 2);

    /* The refund query finds the refund by its key, and says nothing of one
     * that does not exist. */
    snprintf(biz, sizeof biz, "{\"out_trade_no\":\"%s\",\"out_request_no\":\"R-ali-2\"}",
             c.order_id);
    cJSON *o = ali_ok("alipay.trade.fastpay.refund.query", biz);
    assert_string_equal(jstr(o, "code"), "10000");
    assert_string_equal(jstr(o, "refund_status"), "REFUND_SUCCESS");
    assert_string_equal(jstr(o, "refund_amount"), "70.00");
    assert_string_equal(jstr(o, "total_amount"), "100.00");
    assert_string_equal(jstr(o, "out_request_no"), "R-ali-2");
    assert_string_equal(jstr(o, "out_trade_no"), c.order_id);
    cJSON_Delete(o);
    snprintf(biz, sizeof biz, "{\"out_trade_no\":\"%s\",\"out_request_no\":\"R-ali-3\"}",
             c.order_id);
    o = ali_ok("alipay.trade.fastpay.refund.query", biz);
    assert_string_equal(jstr(o, "code"), "10000");
    assert_null(cJSON_GetObjectItemCaseSensitive(o, "refund_status"));
    cJSON_Delete(o);

    /* A fully refunded trade is TRADE_CLOSED to trade.query, as Alipay says. */
    snprintf(biz, sizeof biz, "{\"out_trade_no\":\"%s\"}", c.order_id);
    o = ali_ok("alipay.trade.query", biz);
    assert_string_equal(jstr(o, "trade_status"), "TRADE_CLOSED");
    cJSON_Delete(o);

    /* Unknown trade; a trade the customer has not paid. */
    ali_refund_biz(biz, sizeof biz, "T-no-such-order", "1.00", "R-ali-4");
    ali_refused(biz, "ACQ.TRADE_NOT_EXIST");
    paid_charge(&T, &c, ST_ALIPAY, "alirf52", 1052);
    ali_refund_biz(biz, sizeof biz, c.order_id, "1.00", "R-ali-5");
    ali_refused(biz, "ACQ.TRADE_STATUS_ERROR");
    assert_int_equal(ledger_num(&T, "alipay", c.order_id, "refunds"), 0);
}

static void test_alipay_refund_partial_refunds_and_bad_input(void **state)
{
    (void)state;
    struct pt_charge c;
    char biz[512];
    paid_charge(&T, &c, ST_ALIPAY, "alipart", 1000);
    /* Three partial refunds summing to the charge, a fourth refused. */
    ali_refund_biz(biz, sizeof biz, c.order_id, "2.50", "P-1");
    ali_refunded(biz, "Y", "2.50");
    ali_refund_biz(biz, sizeof biz, c.order_id, "5.00", "P-2");
    ali_refunded(biz, "Y", "7.50");
    ali_refund_biz(biz, sizeof biz, c.order_id, "2.50", "P-3");
    ali_refunded(biz, "Y", "10.00");
    ali_refund_biz(biz, sizeof biz, c.order_id, "0.01", "P-4");
    ali_refused(biz, "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL");
    assert_ledger(&T, "alipay", c.order_id, 1000, 3);
    /* Amounts Alipay cannot read. */
    paid_charge(&T, &c, ST_ALIPAY, "alibad", 1000);
    static const char *const bad[] = {"1.001", "-1.00", "0.00", "1e2", "", "abc"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ali_refund_biz(biz, sizeof biz, c.order_id, bad[i], "B-1");
        ali_refused(biz, "ACQ.INVALID_PARAMETER");
    }
    snprintf(biz, sizeof biz,
             "{\"out_trade_no\":\"%s\",\"refund_amount\":1.00,\"out_request_no\":\"B-1\"}",
             c.order_id);
    ali_refused(biz, "ACQ.INVALID_PARAMETER");
    assert_ledger(&T, "alipay", c.order_id, 0, 0);
}

static void test_alipay_refund_faults(void **state)
{
    (void)state;
    struct pt_charge c;
    char biz[512];
    cJSON *o = NULL;
    paid_charge(&T, &c, ST_ALIPAY, "alifault", 2000);
    ali_refund_biz(biz, sizeof biz, c.order_id, "5.00", "F-1");
    /* fail_before_commit: nothing recorded. */
    arm("alipay", "fail_before_commit");
    assert_int_equal(ali(&T, "alipay.trade.refund", biz, &o), PT_ENOANSWER);
    assert_ledger(&T, "alipay", c.order_id, 0, 0);
    /* drop_after_commit: executed, the answer lost; the replay finds it. */
    arm("alipay", "drop_after_commit");
    assert_int_equal(ali(&T, "alipay.trade.refund", biz, &o), PT_ENOANSWER);
    assert_ledger(&T, "alipay", c.order_id, 500, 1);
    ali_refunded(biz, "N", "5.00");
    assert_ledger(&T, "alipay", c.order_id, 500, 1);
    /* http_500_after_commit: executed, answered 500. */
    ali_refund_biz(biz, sizeof biz, c.order_id, "5.00", "F-2");
    arm("alipay", "http_500_after_commit");
    assert_int_equal(ali(&T, "alipay.trade.refund", biz, &o), PT_OK);
    assert_null(o); /* a 500 page is no Alipay answer: it does not verify */
    assert_ledger(&T, "alipay", c.order_id, 1000, 2);
    ali_refunded(biz, "N", "10.00");
    assert_ledger(&T, "alipay", c.order_id, 1000, 2);
    /* delay past the client's timeout: executed all the same, once. */
    ali_refund_biz(biz, sizeof biz, c.order_id, "5.00", "F-3");
    simtest_fault(&T, "{\"gateway\":\"alipay\",\"mode\":\"delay\",\"count\":1,"
                      "\"delay_ms\":4000}");
    assert_int_equal(ali(&T, "alipay.trade.refund", biz, &o), PT_ENOANSWER);
    simtest_sleep_ms(1300);
    ali_refunded(biz, "N", "15.00");
    assert_ledger(&T, "alipay", c.order_id, 1500, 3);
}

/* ---- WeChat Pay APIv3: Authorization signed with the merchant key --------------- */

/*
 * Sends a signed APIv3 request; on PT_OK the answer's platform signature has
 * been verified and *resp holds it (caller frees).
 */
static int wx(struct simtest *t, const char *method, const char *path, const char *body,
              struct pt_http_response *resp)
{
    const struct pt_gw_config *cfg = &t->gw[ST_WECHAT];
    struct pt_http_request rq = {0};
    char url[600], ts[24], nonce[40], sig[PT_WECHAT_SIG_MAX], auth[2048];
    static unsigned counter;
    snprintf(url, sizeof url, "%s%s", cfg->endpoint, path);
    snprintf(ts, sizeof ts, "%lld", (long long)(now_ms() / 1000));
    snprintf(nonce, sizeof nonce, "%08X%024d", ++counter, (int)getpid());
    size_t blen = body ? strlen(body) : 0, mlen = 0;
    char *msg =
        pt_wechat_request_message(method, pt_wechat_url_path(url), ts, nonce, body, blen, &mlen);
    assert_non_null(msg);
    assert_int_equal(pt_pk_sign_base64(cfg->private_key, msg, mlen, sig, sizeof sig), PT_OK);
    free(msg);
    assert_int_equal(pt_wechat_authorization(cfg->merchant_id, cfg->serial_no, ts, nonce, sig, auth,
                                             sizeof auth),
                     PT_OK);
    snprintf(rq.method, sizeof rq.method, "%s", method);
    rq.url = strdup(url);
    pt_http_request_add_header(&rq, "Authorization", auth);
    pt_http_request_add_header(&rq, "Accept", "application/json");
    if (body) {
        rq.body = strdup(body);
        rq.body_len = blen;
        pt_http_request_add_header(&rq, "Content-Type", "application/json");
    }
    memset(resp, 0, sizeof *resp);
    int rc = pt_curl_send(t->curl, "wechat", &rq, 3000, resp);
    pt_http_request_free(&rq);
    if (rc == PT_OK && resp->status != 500 &&
        pt_wechat_verify_message(cfg->peer_key, cfg->platform_serial, resp) != PT_OK)
        fail_msg("%s %s: the answer does not verify: %d %s", method, path, resp->status,
                 resp->body);
    return rc;
}

static void wx_refund_body(char *out, size_t outlen, const char *order, const char *key,
                           int64_t refund, int64_t total, const char *notify_url)
{
    char nu[300] = "";
    if (notify_url)
        snprintf(nu, sizeof nu, ",\"notify_url\":\"%s\"", notify_url);
    snprintf(out, outlen,
             "{\"out_trade_no\":\"%s\",\"out_refund_no\":\"%s\",\"reason\":\"returned item\"%s,"
             "\"amount\":{\"refund\":%lld,\"total\":%lld,\"currency\":\"CNY\"}}",
             order, key, nu, (long long)refund, (long long)total);
}

/* POST /v3/refund/domestic/refunds expecting status; the answer parsed (caller
 * deletes). */
static cJSON *wx_refund(struct simtest *t, const char *body, int status)
{
    struct pt_http_response r;
    assert_int_equal(wx(t, "POST", "/v3/refund/domestic/refunds", body, &r), PT_OK);
    if (r.status != status)
        fail_msg("refund %s -> %d %s, want %d", body, r.status, r.body, status);
    cJSON *j = cJSON_ParseWithLength(r.body, r.body_len);
    assert_non_null(j);
    pt_http_response_free(&r);
    return j;
}

static cJSON *wx_refund_query(struct simtest *t, const char *key, int status)
{
    struct pt_http_response r;
    char path[200];
    snprintf(path, sizeof path, "/v3/refund/domestic/refunds/%s", key);
    assert_int_equal(wx(t, "GET", path, NULL, &r), PT_OK);
    if (r.status != status)
        fail_msg("GET %s -> %d %s, want %d", path, r.status, r.body, status);
    cJSON *j = cJSON_ParseWithLength(r.body, r.body_len);
    assert_non_null(j);
    pt_http_response_free(&r);
    return j;
}

static void wx_refund_refused(struct simtest *t, const char *body, int status, const char *code)
{
    cJSON *j = wx_refund(t, body, status);
    assert_string_equal(jstr(j, "code"), code);
    assert_non_null(cJSON_GetObjectItemCaseSensitive(j, "message"));
    cJSON_Delete(j);
}

/* The REFUND.SUCCESS notifications of refund key among what rcv received:
 * each verified with the platform key and decrypted with the APIv3 key. */
static int wx_refund_notes(struct receiver *rcv, struct simtest *t, const char *key, int64_t amount,
                           int64_t total)
{
    const struct pt_gw_config *cfg = &t->gw[ST_WECHAT];
    int n = 0;
    pthread_mutex_lock(&rcv->lk);
    for (int i = 0; i < rcv->n; i++) {
        struct recv_msg *m = &rcv->msgs[i];
        if (strcmp(m->path, "/notify/wechat-refund") != 0)
            continue;
        assert_int_equal(pt_wechat_verify_message(cfg->peer_key, cfg->platform_serial, &m->msg),
                         PT_OK);
        cJSON *e = cJSON_ParseWithLength(m->msg.body, m->msg.body_len);
        assert_non_null(e);
        assert_string_equal(jstr(e, "event_type"), "REFUND.SUCCESS");
        const cJSON *res = cJSON_GetObjectItemCaseSensitive(e, "resource");
        assert_string_equal(jstr(res, "original_type"), "refund");
        assert_string_equal(jstr(res, "algorithm"), "AEAD_AES_256_GCM");
        char *plain = NULL;
        size_t plen = 0;
        assert_int_equal(pt_wechat_notify_plaintext(cfg->secret, cfg->secret_len, m->msg.body,
                                                    m->msg.body_len, &plain, &plen),
                         PT_OK);
        cJSON *p = cJSON_ParseWithLength(plain, plen);
        assert_non_null(p);
        if (strcmp(jstr(p, "out_refund_no"), key) == 0) {
            assert_string_equal(jstr(p, "mchid"), cfg->merchant_id);
            assert_string_equal(jstr(p, "refund_status"), "SUCCESS");
            assert_int_equal(strlen(jstr(p, "refund_id")) > 0, 1);
            assert_int_equal(strlen(jstr(p, "transaction_id")), 28);
            assert_int_equal(strlen(jstr(p, "success_time")), 25);
            assert_non_null(jstr(p, "user_received_account"));
            assert_non_null(jstr(p, "out_trade_no"));
            const cJSON *a = cJSON_GetObjectItemCaseSensitive(p, "amount");
            assert_int_equal(jint(a, "refund"), amount);
            assert_int_equal(jint(a, "total"), total);
            assert_int_equal(jint(a, "payer_refund"), amount);
            assert_int_equal(jint(a, "payer_total"), total);
            n++;
        }
        cJSON_Delete(p);
        free(plain);
        cJSON_Delete(e);
    }
    pthread_mutex_unlock(&rcv->lk);
    return n;
}

static void test_wechat_refund_processing_then_success(void **state)
{
    (void)state;
    struct receiver rcv;
    struct simtest t2;
    struct pt_charge c;
    char base[64], nurl[128], body[512];
    receiver_start(&rcv);
    snprintf(base, sizeof base, "http://127.0.0.1:%d", rcv.port);
    snprintf(nurl, sizeof nurl, "%s/notify/wechat-refund", base);
    struct pt_sim_options o = {.pay_delay_ms = 400, .notify_base = base};
    simtest_start(&t2, &o);
    paid_charge(&t2, &c, ST_WECHAT, "wxrf", 5000);
    assert_ledger(&t2, "wechat", c.order_id, 0, 0);

    /* Accepted: PROCESSING first, with the simulator's refund number. */
    wx_refund_body(body, sizeof body, c.order_id, "R-wx-1", 2000, 5000, nurl);
    cJSON *j = wx_refund(&t2, body, 200);
    assert_string_equal(jstr(j, "status"), "PROCESSING");
    assert_string_equal(jstr(j, "out_refund_no"), "R-wx-1");
    assert_string_equal(jstr(j, "out_trade_no"), c.order_id);
    assert_string_equal(jstr(j, "transaction_id"), c.gateway_trade_no);
    char refund_id[64];
    snprintf(refund_id, sizeof refund_id, "%s", jstr(j, "refund_id"));
    assert_true(strlen(refund_id) > 0);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "amount");
    assert_int_equal(jint(a, "refund"), 2000);
    assert_int_equal(jint(a, "total"), 5000);
    assert_string_equal(jstr(a, "currency"), "CNY");
    cJSON_Delete(j);
    /* The same out_refund_no again: the same refund, not a second one. */
    j = wx_refund(&t2, body, 200);
    assert_string_equal(jstr(j, "refund_id"), refund_id);
    cJSON_Delete(j);
    j = wx_refund_query(&t2, "R-wx-1", 200);
    assert_string_equal(jstr(j, "refund_id"), refund_id);
    assert_string_equal(jstr(j, "status"), "PROCESSING");
    cJSON_Delete(j);
    /* Accepted, no money returned yet. */
    assert_ledger(&t2, "wechat", c.order_id, 0, 1);

    /* What is left counts the refund still PROCESSING. */
    wx_refund_body(body, sizeof body, c.order_id, "R-wx-2", 3001, 5000, nurl);
    wx_refund_refused(&t2, body, 400, "INVALID_REQUEST");
    /* The same out_refund_no with another amount; a wrong order total. */
    wx_refund_body(body, sizeof body, c.order_id, "R-wx-1", 2500, 5000, nurl);
    wx_refund_refused(&t2, body, 400, "INVALID_REQUEST");
    wx_refund_body(body, sizeof body, c.order_id, "R-wx-3", 100, 4999, nurl);
    wx_refund_refused(&t2, body, 400, "INVALID_REQUEST");

    /* After the pay delay: SUCCESS, by query and by notification. */
    for (int i = 0; i < 50; i++) {
        j = wx_refund_query(&t2, "R-wx-1", 200);
        int done = strcmp(jstr(j, "status"), "SUCCESS") == 0;
        if (done)
            assert_int_equal(strlen(jstr(j, "success_time")), 25);
        cJSON_Delete(j);
        if (done)
            break;
        assert_true(i < 49);
        simtest_sleep_ms(100);
    }
    assert_ledger(&t2, "wechat", c.order_id, 2000, 1);
    for (int i = 0; i < 40 && wx_refund_notes(&rcv, &t2, "R-wx-1", 2000, 5000) < 1; i++)
        receiver_wait(&rcv, NULL, rcv.n + 1, 200);
    assert_true(wx_refund_notes(&rcv, &t2, "R-wx-1", 2000, 5000) >= 1);
    /* A replay after SUCCESS shows SUCCESS, still one refund. */
    wx_refund_body(body, sizeof body, c.order_id, "R-wx-1", 2000, 5000, nurl);
    j = wx_refund(&t2, body, 200);
    assert_string_equal(jstr(j, "refund_id"), refund_id);
    assert_string_equal(jstr(j, "status"), "SUCCESS");
    cJSON_Delete(j);

    /* Partial refunds summing to the charge; one more refused. */
    wx_refund_body(body, sizeof body, c.order_id, "R-wx-4", 3000, 5000, nurl);
    cJSON_Delete(wx_refund(&t2, body, 200));
    wx_refund_body(body, sizeof body, c.order_id, "R-wx-5", 1, 5000, nurl);
    wx_refund_refused(&t2, body, 400, "INVALID_REQUEST");
    assert_int_equal(ledger_num(&t2, "wechat", c.order_id, "refunds"), 2);

    /* Unknown refund, unknown order, an order not paid. */
    j = wx_refund_query(&t2, "R-wx-none", 404);
    assert_string_equal(jstr(j, "code"), "RESOURCE_NOT_EXISTS");
    cJSON_Delete(j);
    wx_refund_body(body, sizeof body, "T-no-such-order", "R-wx-6", 1, 5000, NULL);
    wx_refund_refused(&t2, body, 404, "RESOURCE_NOT_EXISTS");
    struct pt_charge u;
    paid_charge(&t2, &u, ST_WECHAT, "wxrf52", 1252);
    wx_refund_body(body, sizeof body, u.order_id, "R-wx-7", 1, 1252, NULL);
    wx_refund_refused(&t2, body, 404, "RESOURCE_NOT_EXISTS");
    /* Malformed: an out_refund_no WeChat does not accept, a fractional amount. */
    wx_refund_body(body, sizeof body, c.order_id, "R.wx.8", 1, 5000, NULL);
    wx_refund_refused(&t2, body, 400, "PARAM_ERROR");
    snprintf(body, sizeof body,
             "{\"out_trade_no\":\"%s\",\"out_refund_no\":\"R-wx-9\","
             "\"amount\":{\"refund\":1.5,\"total\":5000,\"currency\":\"CNY\"}}",
             c.order_id);
    wx_refund_refused(&t2, body, 400, "PARAM_ERROR");
    simtest_stop(&t2);
    receiver_stop(&rcv);
}

static void test_wechat_refund_faults(void **state)
{
    (void)state;
    struct pt_charge c;
    struct pt_http_response r;
    char body[512];
    paid_charge(&T, &c, ST_WECHAT, "wxfault", 3000);
    wx_refund_body(body, sizeof body, c.order_id, "F-wx-1", 1000, 3000, NULL);
    arm("wechat", "fail_before_commit");
    assert_int_equal(wx(&T, "POST", "/v3/refund/domestic/refunds", body, &r), PT_ENOANSWER);
    pt_http_response_free(&r);
    assert_ledger(&T, "wechat", c.order_id, 0, 0);
    arm("wechat", "drop_after_commit");
    assert_int_equal(wx(&T, "POST", "/v3/refund/domestic/refunds", body, &r), PT_ENOANSWER);
    pt_http_response_free(&r);
    assert_int_equal(ledger_num(&T, "wechat", c.order_id, "refunds"), 1);
    cJSON *j = wx_refund(&T, body, 200); /* the replay finds the refund */
    assert_string_equal(jstr(j, "out_refund_no"), "F-wx-1");
    cJSON_Delete(j);
    assert_int_equal(ledger_num(&T, "wechat", c.order_id, "refunds"), 1);
    arm("wechat", "refuse_connect");
    assert_int_equal(wx(&T, "POST", "/v3/refund/domestic/refunds", body, &r), PT_ENOTSENT);
    pt_http_response_free(&r);
    assert_int_equal(ledger_num(&T, "wechat", c.order_id, "refunds"), 1);
}

/* ---- Stripe: POST /v1/refunds with an Idempotency-Key ------------------------------ */

static int st(struct simtest *t, const char *method, const char *path, const char *key,
              const char *form, struct pt_http_response *resp)
{
    const struct pt_gw_config *cfg = &t->gw[ST_STRIPE];
    struct pt_http_request rq = {0};
    char url[600], auth[300];
    snprintf(url, sizeof url, "%s%s", cfg->endpoint, path);
    snprintf(auth, sizeof auth, "Bearer %.*s", (int)cfg->secret_len, (const char *)cfg->secret);
    snprintf(rq.method, sizeof rq.method, "%s", method);
    rq.url = strdup(url);
    pt_http_request_add_header(&rq, "Authorization", auth);
    if (key)
        pt_http_request_add_header(&rq, "Idempotency-Key", key);
    if (form) {
        rq.body = strdup(form);
        rq.body_len = strlen(form);
        pt_http_request_add_header(&rq, "Content-Type", "application/x-www-form-urlencoded");
    }
    memset(resp, 0, sizeof *resp);
    int rc = pt_curl_send(t->curl, "stripe", &rq, 3000, resp);
    pt_http_request_free(&rq);
    return rc;
}

static void st_form(char *out, size_t outlen, const char *pi, int64_t amount, const char *key,
                    const char *order)
{
    snprintf(out, outlen,
             "payment_intent=%s&amount=%lld&metadata[refund_id]=%s&metadata[order_id]=%s"
             "&metadata[reason]=returned+item",
             pi, (long long)amount, key, order);
}

/* POST /v1/refunds expecting status; the answer parsed (caller deletes). */
static cJSON *st_refund(const char *key, const char *form, int status, int replayed)
{
    struct pt_http_response r;
    assert_int_equal(st(&T, "POST", "/v1/refunds", key, form, &r), PT_OK);
    if (r.status != status)
        fail_msg("refund %s -> %d %s, want %d", form, r.status, r.body, status);
    const char *rp = pt_http_response_header(&r, "Idempotent-Replayed");
    assert_int_equal(rp && strcmp(rp, "true") == 0, replayed);
    cJSON *j = cJSON_ParseWithLength(r.body, r.body_len);
    assert_non_null(j);
    pt_http_response_free(&r);
    return j;
}

static void st_refused(const char *key, const char *form, const char *type, const char *code)
{
    cJSON *j = st_refund(key, form, 400, 0);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    assert_string_equal(jstr(e, "type"), type);
    if (code)
        assert_string_equal(jstr(e, "code"), code);
    assert_non_null(jstr(e, "message"));
    cJSON_Delete(j);
}

static void test_stripe_refunds(void **state)
{
    (void)state;
    struct pt_charge c;
    char form[512];
    paid_charge(&T, &c, ST_STRIPE, "strf", 1200);
    assert_ledger(&T, "stripe", c.order_id, 0, 0);

    st_form(form, sizeof form, c.gateway_trade_no, 500, "R-st-1", c.order_id);
    cJSON *j = st_refund("R-st-1", form, 200, 0);
    char re[64];
    snprintf(re, sizeof re, "%s", jstr(j, "id"));
    assert_memory_equal(re, "re_", 3);
    assert_string_equal(jstr(j, "object"), "refund");
    assert_int_equal(jint(j, "amount"), 500);
    assert_string_equal(jstr(j, "currency"), "usd");
    assert_string_equal(jstr(j, "payment_intent"), c.gateway_trade_no);
    assert_string_equal(jstr(j, "status"), "succeeded");
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(j, "metadata");
    assert_string_equal(jstr(md, "refund_id"), "R-st-1");
    assert_string_equal(jstr(md, "order_id"), c.order_id);
    assert_string_equal(jstr(md, "reason"), "returned item");
    cJSON_Delete(j);
    /* The key replayed: the first answer, no second refund. */
    j = st_refund("R-st-1", form, 200, 1);
    assert_string_equal(jstr(j, "id"), re);
    cJSON_Delete(j);
    assert_ledger(&T, "stripe", c.order_id, 500, 1);
    /* The key with other parameters. */
    st_form(form, sizeof form, c.gateway_trade_no, 600, "R-st-1", c.order_id);
    st_refused("R-st-1", form, "idempotency_error", NULL);
    /* Above what is left (700); exactly what is left; then nothing is left. */
    st_form(form, sizeof form, c.gateway_trade_no, 701, "R-st-2", c.order_id);
    st_refused("R-st-2", form, "invalid_request_error", "amount_too_large");
    st_form(form, sizeof form, c.gateway_trade_no, 700, "R-st-3", c.order_id);
    cJSON_Delete(st_refund("R-st-3", form, 200, 0));
    st_form(form, sizeof form, c.gateway_trade_no, 1, "R-st-4", c.order_id);
    st_refused("R-st-4", form, "invalid_request_error", "charge_already_refunded");
    assert_ledger(&T, "stripe", c.order_id, 1200, 2);

    /* The intent's refunds, listed. */
    struct pt_http_response r;
    char path[200];
    snprintf(path, sizeof path, "/v1/refunds?payment_intent=%s&limit=10", c.gateway_trade_no);
    assert_int_equal(st(&T, "GET", path, NULL, NULL, &r), PT_OK);
    assert_int_equal(r.status, 200);
    j = cJSON_ParseWithLength(r.body, r.body_len);
    pt_http_response_free(&r);
    assert_string_equal(jstr(j, "object"), "list");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "has_more")));
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data");
    assert_int_equal(cJSON_GetArraySize(data), 2);
    int found = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, data)
    {
        found += strcmp(jstr(it, "id"), re) == 0;
        assert_string_equal(jstr(it, "payment_intent"), c.gateway_trade_no);
    }
    assert_int_equal(found, 1);
    cJSON_Delete(j);
    snprintf(path, sizeof path, "/v1/refunds?payment_intent=%s&limit=1", c.gateway_trade_no);
    assert_int_equal(st(&T, "GET", path, NULL, NULL, &r), PT_OK);
    j = cJSON_ParseWithLength(r.body, r.body_len);
    pt_http_response_free(&r);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "data")), 1);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "has_more")));
    cJSON_Delete(j);

    /* A PaymentIntent that did not succeed; an unknown one; unknown parameters. */
    struct pt_charge d;
    paid_charge(&T, &d, ST_STRIPE, "strf51", 1251);
    st_form(form, sizeof form, d.gateway_trade_no, 100, "R-st-5", d.order_id);
    st_refused("R-st-5", form, "invalid_request_error", NULL);
    assert_int_equal(ledger_num(&T, "stripe", d.order_id, "refunds"), 0);
    st_form(form, sizeof form, "pi_nosuchintent", 100, "R-st-6", d.order_id);
    cJSON_Delete(st_refund("R-st-6", form, 404, 0));
    snprintf(form, sizeof form, "payment_intent=%s&amount=100&colour=red", c.gateway_trade_no);
    st_refused("R-st-7", form, "invalid_request_error", "parameter_unknown");
    snprintf(form, sizeof form, "payment_intent=%s&amount=1.5", c.gateway_trade_no);
    st_refused("R-st-8", form, "invalid_request_error", "parameter_invalid_integer");
}

static void test_stripe_refund_faults(void **state)
{
    (void)state;
    struct pt_charge c;
    struct pt_http_response r;
    char form[512];
    paid_charge(&T, &c, ST_STRIPE, "stfault", 2000);
    st_form(form, sizeof form, c.gateway_trade_no, 800, "F-st-1", c.order_id);
    arm("stripe", "fail_before_commit");
    assert_int_equal(st(&T, "POST", "/v1/refunds", "F-st-1", form, &r), PT_ENOANSWER);
    pt_http_response_free(&r);
    assert_ledger(&T, "stripe", c.order_id, 0, 0);
    arm("stripe", "drop_after_commit");
    assert_int_equal(st(&T, "POST", "/v1/refunds", "F-st-1", form, &r), PT_ENOANSWER);
    pt_http_response_free(&r);
    assert_ledger(&T, "stripe", c.order_id, 800, 1);
    cJSON *j = st_refund("F-st-1", form, 200, 1);
    assert_string_equal(jstr(j, "status"), "succeeded");
    cJSON_Delete(j);
    assert_ledger(&T, "stripe", c.order_id, 800, 1);
    /* http_500_after_commit: executed; the 500 is what the key replays. */
    st_form(form, sizeof form, c.gateway_trade_no, 800, "F-st-2", c.order_id);
    arm("stripe", "http_500_after_commit");
    cJSON_Delete(st_refund("F-st-2", form, 500, 0));
    cJSON_Delete(st_refund("F-st-2", form, 500, 1));
    assert_ledger(&T, "stripe", c.order_id, 1600, 2);
}

/* ---- refunds survive a restart of the simulator ------------------------------------ */

static void test_refunds_survive_restart(void **state)
{
    (void)state;
    struct pt_charge c;
    char biz[512];
    paid_charge(&T, &c, ST_ALIPAY, "alirestart", 3000);
    ali_refund_biz(biz, sizeof biz, c.order_id, "10.00", "S-1");
    ali_refunded(biz, "Y", "10.00");
    simtest_restart(&T);
    ali_refunded(biz, "N", "10.00");
    ali_refund_biz(biz, sizeof biz, c.order_id, "20.01", "S-2");
    ali_refused(biz, "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL");
    assert_ledger(&T, "alipay", c.order_id, 1000, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_alipay_refunds, clear),
        cmocka_unit_test_setup(test_alipay_refund_partial_refunds_and_bad_input, clear),
        cmocka_unit_test_setup(test_alipay_refund_faults, clear),
        cmocka_unit_test_setup(test_wechat_refund_processing_then_success, clear),
        cmocka_unit_test_setup(test_wechat_refund_faults, clear),
        cmocka_unit_test_setup(test_stripe_refunds, clear),
        cmocka_unit_test_setup(test_stripe_refund_faults, clear),
        cmocka_unit_test_setup(test_refunds_survive_restart, clear),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
