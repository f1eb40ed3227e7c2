/*
 * test_intake.c - the POST /v1/charges outcome table (SPEC section 5) without
 * a socket: validation, replay, conflicts, offline limits, the online path
 * through a fake sync engine, a second request while the first is running,
 * and a full disk.
 */
#include "testutil.h"

#include "charges.h"
#include "err.h"
#include "intake.h"
#include "store.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[256], path[300];
static struct pt_store *st;
static struct pt_config cfg;
static struct pt_intake in;

/* ---- a fake sync engine ------------------------------------------------------ */

static int online;           /* reachable? */
static int not_sent;         /* the send fails before leaving the device */
static int sends;            /* how many charges were sent */
static const char *reenter_key; /* retry this key while the first is "at the gateway" */
static struct pt_reply reenter_reply;

static int fake_reachable(void *ctx, const char *gw)
{
    (void)ctx;
    (void)gw;
    return online;
}

static int fake_charge_now(void *ctx, struct pt_store *s, struct pt_charge *c, int64_t now)
{
    (void)ctx;
    if (reenter_key) {
        /* A client retry arriving on another connection mid-flight. */
        char err[256];
        struct pt_store *other;
        struct pt_store_options o = {.path = path};
        assert_int_equal(pt_store_open(&o, &other, err, sizeof err), PT_OK);
        const char *body = "{\"order_id\":\"O-INUSE\",\"amount\":100,\"currency\":\"USD\","
                           "\"gateway\":\"stripe\",\"method\":\"card_on_file\","
                           "\"payment_method\":\"pm_1\"}";
        pt_intake_create_charge(&in, other, reenter_key, body, strlen(body), now, &reenter_reply);
        pt_store_close(other);
    }
    int rc = pt_store_begin(s);
    if (rc)
        return rc;
    rc = pt_charge_transition(s, c, PT_STATE_PROCESSING, NULL, "send", "sync", NULL, now);
    if (!rc) {
        if (not_sent) {
            rc = pt_charge_transition(s, c, PT_STATE_INIT, NULL, "not_sent", "sync", NULL, now);
        } else {
            sends++;
            enum pt_state to = c->amount % 100 == 51   ? PT_STATE_FAILED
                               : c->amount % 100 == 52 ? PT_STATE_PENDING
                               : c->amount % 100 == 53 ? PT_STATE_UNKNOWN
                                                       : PT_STATE_SUCCESS;
            struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
            if (to == PT_STATE_FAILED) {
                p.error_code = "insufficient_funds";
                p.error_message = "declined by the issuer";
            }
            rc = pt_charge_transition(s, c, to, &p, "answer", "sync", NULL, now);
        }
    }
    if (rc) {
        pt_store_rollback(s);
        return rc;
    }
    return pt_store_commit(s);
}

/* ---- fixture ------------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    char err[512];
    pt_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/i.db", dir);
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_store_open(&o, &st, err, sizeof err), PT_OK);
    pt_config_defaults(&cfg);
    cfg.stripe.configured = 1;
    cfg.alipay.configured = 1;
    cfg.max_amount = 1000000;
    cfg.offline_limits[0] = (struct pt_cfg_offline_limit){"USD", 5000, 10000};
    cfg.n_offline_limits = 1;
    cfg.offline_max_count = 3;
    in = (struct pt_intake){.cfg = &cfg,
                            .idem = {.ttl_ms = 86400000, .lock_timeout_ms = 60000, .instance = 7}};
    online = not_sent = sends = 0;
    reenter_key = NULL;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pt_test_disk_set(PT_TEST_DISK_OK); /* a failed case must not leave the disk failing */
    pt_store_close(st);
    pt_test_rmtree(dir);
    pt_reply_free(&reenter_reply);
    return 0;
}

static void enable_online(void)
{
    in.online = (struct pt_online_ops){.reachable = fake_reachable, .charge_now = fake_charge_now};
    online = 1;
}

static char *charge_body(const char *order, long amount, const char *extra)
{
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"order_id\":\"%s\",\"amount\":%ld,\"currency\":\"USD\",\"gateway\":\"stripe\","
             "\"method\":\"card_on_file\",\"payment_method\":\"pm_card_visa\"%s}",
             order, amount, extra ? extra : "");
    return buf;
}

static void post(const char *key, const char *body, struct pt_reply *r)
{
    pt_intake_create_charge(&in, st, key, body, body ? strlen(body) : 0, 1700000000000, r);
}

static const char *err_code(const struct pt_reply *r)
{
    static char code[64];
    cJSON *o = cJSON_Parse(r->body);
    const cJSON *c = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "error"), "code");
    snprintf(code, sizeof code, "%s", cJSON_IsString(c) ? c->valuestring : "");
    cJSON_Delete(o);
    return code;
}

static const char *state_of(const struct pt_reply *r)
{
    static char s[32];
    cJSON *o = cJSON_Parse(r->body);
    const cJSON *v = cJSON_GetObjectItem(o, "state");
    snprintf(s, sizeof s, "%s", cJSON_IsString(v) ? v->valuestring : "");
    cJSON_Delete(o);
    return s;
}

static int64_t count(const char *table)
{
    int64_t n = -1;
    assert_int_equal(pt_store_count(st, table, &n), PT_OK);
    return n;
}

/* ---- cases ---------------------------------------------------------------------- */

static void test_key_errors(void **state)
{
    (void)state;
    struct pt_reply r;
    post(NULL, charge_body("O-1", 100, NULL), &r);
    assert_int_equal(r.status, 400);
    assert_string_equal(err_code(&r), "idempotency_key_missing");
    pt_reply_free(&r);
    post("has space", charge_body("O-1", 100, NULL), &r);
    assert_int_equal(r.status, 400);
    assert_string_equal(err_code(&r), "idempotency_key_invalid");
    pt_reply_free(&r);
    assert_int_equal(count("charges"), 0);
    assert_int_equal(count("idempotency_keys"), 0);
}

static void test_invalid_body_names_fields_and_is_stored(void **state)
{
    (void)state;
    struct pt_reply r, again;
    const char *body = "{\"order_id\":\"bad id\",\"amount\":12.5,\"currency\":\"usd\","
                       "\"gateway\":\"paypal\",\"method\":\"card\",\"colour\":\"red\"}";
    post("k-invalid", body, &r);
    assert_int_equal(r.status, 400);
    assert_string_equal(err_code(&r), "invalid_request");
    const char *fields[] = {"order_id", "amount", "currency", "gateway", "colour"};
    for (int i = 0; i < 5; i++)
        if (!strstr(r.body, fields[i]))
            fail_msg("message does not name %s: %s", fields[i], r.body);
    post("k-invalid", body, &again);
    assert_int_equal(again.status, 400);
    assert_true(again.replayed);
    assert_int_equal(again.len, r.len);
    assert_memory_equal(again.body, r.body, r.len);
    pt_reply_free(&r);
    pt_reply_free(&again);
    assert_int_equal(count("charges"), 0);

    /* Unconfigured gateway and missing method fields. */
    post("k-wechat", "{\"order_id\":\"O-W\",\"amount\":100,\"currency\":\"CNY\","
                     "\"gateway\":\"wechat\",\"method\":\"qr\"}",
         &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "not configured"));
    pt_reply_free(&r);
    post("k-nopm", "{\"order_id\":\"O-P\",\"amount\":100,\"currency\":\"USD\","
                   "\"gateway\":\"stripe\",\"method\":\"card_on_file\"}",
         &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "payment_method"));
    pt_reply_free(&r);
    post("k-notjson", "amount=5", &r);
    assert_int_equal(r.status, 400);
    assert_string_equal(err_code(&r), "invalid_request");
    pt_reply_free(&r);
}

static void test_queued_replayed_and_conflicts(void **state)
{
    (void)state;
    struct pt_reply r, r2;
    post("k1", charge_body("O-1", 1000, NULL), &r);
    assert_int_equal(r.status, 202);
    assert_string_equal(state_of(&r), "INIT");
    assert_false(r.replayed);
    /* Same key, same body with another key order and spacing: replay. */
    const char *reordered = "{ \"payment_method\" : \"pm_card_visa\", \"method\":\"card_on_file\","
                            " \"gateway\":\"stripe\",\"currency\":\"USD\",\"amount\":1000,"
                            "\"order_id\":\"O-1\" }";
    post("k1", reordered, &r2);
    assert_int_equal(r2.status, 202);
    assert_true(r2.replayed);
    assert_memory_equal(r2.body, r.body, r.len);
    pt_reply_free(&r2);
    /* Quoted key is the same key. */
    post("\"k1\"", reordered, &r2);
    assert_true(r2.replayed);
    pt_reply_free(&r2);
    /* Same key, different request: 422. */
    post("k1", charge_body("O-1", 1001, NULL), &r2);
    assert_int_equal(r2.status, 422);
    assert_string_equal(err_code(&r2), "idempotency_key_reused");
    pt_reply_free(&r2);
    /* Another key, same order and parameters (defaults spelled out): 200. */
    post("k2", charge_body("O-1", 1000, ",\"offline\":\"prefer_online\""), &r2);
    assert_int_equal(r2.status, 200);
    assert_string_equal(state_of(&r2), "INIT");
    pt_reply_free(&r2);
    /* Another key, same order, other parameters: 409, stored. */
    post("k3", charge_body("O-1", 999, NULL), &r2);
    assert_int_equal(r2.status, 409);
    assert_string_equal(err_code(&r2), "order_id_conflict");
    pt_reply_free(&r2);
    post("k3", charge_body("O-1", 999, NULL), &r2);
    assert_int_equal(r2.status, 409);
    assert_true(r2.replayed);
    pt_reply_free(&r2);
    pt_reply_free(&r);
    assert_int_equal(count("charges"), 1);
}

/* "Same parameters" is every parameter of the charge as it was created, read
 * back from its row: each one that differs is a conflict, and the same ones
 * still get the charge after the sync engine has moved it on. */
static void test_other_key_same_order_compares_every_parameter(void **state)
{
    (void)state;
    const char *base = "\"order_id\":\"O-P\",\"currency\":\"USD\",\"gateway\":\"stripe\","
                       "\"method\":\"card_on_file\"";
    char full[1024], body[1024], key[32];
    snprintf(full, sizeof full,
             "{%s,\"amount\":1200,\"payment_method\":\"pm_card_visa\",\"customer\":\"cus_1\","
             "\"subject\":\"Latte\",\"metadata\":{\"b\":\"2\",\"a\":\"1\"},"
             "\"offline\":\"prefer_online\"}",
             base);
    struct pt_reply r;
    post("kp-0", full, &r);
    assert_int_equal(r.status, 202);
    pt_reply_free(&r);
    /* Each line differs from `full` in one parameter. */
    const char *other[] = {
        "\"amount\":1201,\"payment_method\":\"pm_card_visa\",\"customer\":\"cus_1\","
        "\"subject\":\"Latte\",\"metadata\":{\"a\":\"1\",\"b\":\"2\"}",
        "\"amount\":1200,\"payment_method\":\"pm_card_other\",\"customer\":\"cus_1\","
        "\"subject\":\"Latte\",\"metadata\":{\"a\":\"1\",\"b\":\"2\"}",
        "\"amount\":1200,\"payment_method\":\"pm_card_visa\","
        "\"subject\":\"Latte\",\"metadata\":{\"a\":\"1\",\"b\":\"2\"}",
        "\"amount\":1200,\"payment_method\":\"pm_card_visa\",\"customer\":\"cus_1\","
        "\"subject\":\"Latte \",\"metadata\":{\"a\":\"1\",\"b\":\"2\"}",
        "\"amount\":1200,\"payment_method\":\"pm_card_visa\",\"customer\":\"cus_1\","
        "\"subject\":\"Latte\",\"metadata\":{\"a\":\"1\"}",
        "\"amount\":1200,\"payment_method\":\"pm_card_visa\",\"customer\":\"cus_1\","
        "\"subject\":\"Latte\",\"metadata\":{\"a\":\"1\",\"b\":\"2\"},\"offline\":\"force_offline\"",
    };
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        snprintf(body, sizeof body, "{%s,%s}", base, other[i]);
        snprintf(key, sizeof key, "kp-x%zu", i);
        post(key, body, &r);
        if (r.status != 409 || strcmp(err_code(&r), "order_id_conflict") != 0)
            fail_msg("variant %zu: %d %s", i, r.status, r.body);
        pt_reply_free(&r);
    }
    /* The same parameters in another order, metadata keys too: 200. */
    snprintf(body, sizeof body,
             "{\"metadata\":{\"a\":\"1\",\"b\":\"2\"},\"subject\":\"Latte\",%s,"
             "\"customer\":\"cus_1\",\"payment_method\":\"pm_card_visa\",\"amount\":1200}",
             base);
    post("kp-same", body, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(state_of(&r), "INIT");
    pt_reply_free(&r);
    /* After the charge succeeded at the gateway, still the same order. */
    struct pt_charge c;
    assert_int_equal(pt_store_charge_get(st, "O-P", &c), PT_OK);
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_charge_transition(st, &c, PT_STATE_PROCESSING, NULL, "send", "sync", NULL,
                                          1700000000001),
                     PT_OK);
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    p.gateway_trade_no = "pi_123";
    assert_int_equal(pt_charge_transition(st, &c, PT_STATE_SUCCESS, &p, "answer", "sync", NULL,
                                          1700000000002),
                     PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    post("kp-after", full, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(state_of(&r), "SUCCESS");
    pt_reply_free(&r);
    snprintf(body, sizeof body, "{%s,%s}", base, other[0]);
    post("kp-after-x", body, &r);
    assert_int_equal(r.status, 409);
    pt_reply_free(&r);
    assert_int_equal(count("charges"), 1);
}

static void test_offline_limits_release_the_key(void **state)
{
    (void)state;
    struct pt_reply r;
    /* One charge above offline.limits.USD.max_amount (5000). */
    post("big", charge_body("O-BIG", 6000, NULL), &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(err_code(&r), "offline_limit_exceeded");
    assert_true(r.retry_after_s > 0);
    pt_reply_free(&r);
    assert_int_equal(count("idempotency_keys"), 0); /* released */
    assert_int_equal(count("charges"), 0);
    /* max_total 10000: 4000 + 4000 fit, a third 4000 does not. */
    post("t1", charge_body("O-T1", 4000, NULL), &r);
    assert_int_equal(r.status, 202);
    pt_reply_free(&r);
    post("t2", charge_body("O-T2", 4000, NULL), &r);
    assert_int_equal(r.status, 202);
    pt_reply_free(&r);
    post("t3", charge_body("O-T3", 4000, NULL), &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(err_code(&r), "offline_limit_exceeded");
    assert_non_null(strstr(r.body, "max_total"));
    pt_reply_free(&r);
    /* The condition passes (a queued charge is canceled): same key works. */
    pt_intake_cancel(&in, st, "O-T1", "c1", "", 0, 1700000000000, &r);
    assert_int_equal(r.status, 200);
    pt_reply_free(&r);
    post("t3", charge_body("O-T3", 4000, NULL), &r);
    assert_int_equal(r.status, 202);
    pt_reply_free(&r);
    /* max_count 3: two queued now (T2, T3); one more fits, then full. */
    post("c-a", charge_body("O-CA", 100, NULL), &r);
    assert_int_equal(r.status, 202);
    pt_reply_free(&r);
    post("c-b", charge_body("O-CB", 100, NULL), &r);
    assert_int_equal(r.status, 503);
    assert_non_null(strstr(r.body, "max_count"));
    pt_reply_free(&r);
    /* A currency without offline limits, and require_online, and qr. */
    post("cny", "{\"order_id\":\"O-CNY\",\"amount\":100,\"currency\":\"CNY\",\"gateway\":"
                "\"alipay\",\"method\":\"barcode\",\"payment_code\":\"2876344382566439\"}",
         &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(err_code(&r), "offline_not_allowed");
    pt_reply_free(&r);
    post("req", charge_body("O-REQ", 100, ",\"offline\":\"require_online\""), &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(err_code(&r), "offline_not_allowed");
    pt_reply_free(&r);
    post("qr", "{\"order_id\":\"O-QR\",\"amount\":100,\"currency\":\"USD\",\"gateway\":"
               "\"alipay\",\"method\":\"qr\"}",
         &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(err_code(&r), "offline_not_allowed");
    pt_reply_free(&r);
    assert_int_equal(count("charges"), 4);
}

static void test_online_outcomes(void **state)
{
    (void)state;
    enable_online();
    struct pt_reply r;
    post("s", charge_body("O-S", 1000, NULL), &r);
    assert_int_equal(r.status, 201);
    assert_string_equal(state_of(&r), "SUCCESS");
    pt_reply_free(&r);
    post("f", charge_body("O-F", 1051, NULL), &r);
    assert_int_equal(r.status, 402);
    assert_string_equal(state_of(&r), "FAILED");
    assert_string_equal(err_code(&r), "insufficient_funds");
    pt_reply_free(&r);
    post("f", charge_body("O-F", 1051, NULL), &r);
    assert_int_equal(r.status, 402);
    assert_true(r.replayed);
    pt_reply_free(&r);
    post("p", charge_body("O-P", 1052, NULL), &r);
    assert_int_equal(r.status, 202);
    assert_string_equal(state_of(&r), "PENDING");
    pt_reply_free(&r);
    post("u", charge_body("O-U", 1053, NULL), &r);
    assert_int_equal(r.status, 202);
    assert_string_equal(state_of(&r), "UNKNOWN");
    pt_reply_free(&r);
    assert_int_equal(sends, 4);
    /* force_offline never sends. */
    post("fo", charge_body("O-FO", 1000, ",\"offline\":\"force_offline\""), &r);
    assert_int_equal(r.status, 202);
    assert_string_equal(state_of(&r), "INIT");
    pt_reply_free(&r);
    assert_int_equal(sends, 4);
}

static void test_not_sent_queues_or_refuses(void **state)
{
    (void)state;
    enable_online();
    not_sent = 1;
    struct pt_reply r;
    /* prefer_online: provably not sent, so it waits in the queue. */
    post("ns", charge_body("O-NS", 1000, NULL), &r);
    assert_int_equal(r.status, 202);
    assert_string_equal(state_of(&r), "INIT");
    pt_reply_free(&r);
    /* require_online: refused; the order is closed before anything left. */
    post("nr", charge_body("O-NR", 1000, ",\"offline\":\"require_online\""), &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(err_code(&r), "offline_not_allowed");
    pt_reply_free(&r);
    struct pt_charge c;
    assert_int_equal(pt_store_charge_get(st, "O-NR", &c), PT_OK);
    assert_int_equal(c.state, PT_STATE_CANCELED);
    assert_int_equal(count("idempotency_keys"), 1); /* only "ns": "nr" was released */
    /* prefer_online, not sent, and the queue cannot take it (max_amount 5000). */
    post("nb", charge_body("O-NB", 6000, NULL), &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(err_code(&r), "offline_limit_exceeded");
    assert_non_null(strstr(r.body, "max_amount"));
    assert_non_null(strstr(r.body, "canceled"));
    pt_reply_free(&r);
    assert_int_equal(pt_store_charge_get(st, "O-NB", &c), PT_OK);
    assert_int_equal(c.state, PT_STATE_CANCELED);
    assert_int_equal(sends, 0);
}

static void test_in_use_while_first_runs(void **state)
{
    (void)state;
    enable_online();
    reenter_key = "same";
    struct pt_reply r;
    const char *body = "{\"order_id\":\"O-INUSE\",\"amount\":100,\"currency\":\"USD\","
                       "\"gateway\":\"stripe\",\"method\":\"card_on_file\","
                       "\"payment_method\":\"pm_1\"}";
    post("same", body, &r);
    assert_int_equal(r.status, 201);
    /* The retry that came in while the gateway call was running: */
    assert_int_equal(reenter_reply.status, 409);
    assert_string_equal(err_code(&reenter_reply), "idempotency_key_in_use");
    assert_true(reenter_reply.retry_after_s > 0);
    reenter_key = NULL;
    /* Afterwards the retry gets the first request's response. */
    struct pt_reply again;
    post("same", body, &again);
    assert_true(again.replayed);
    assert_int_equal(again.status, 201);
    assert_memory_equal(again.body, r.body, r.len);
    pt_reply_free(&again);
    pt_reply_free(&r);
    assert_int_equal(sends, 1);
}

static void test_disk_full_is_503_and_nothing_half_written(void **state)
{
    (void)state;
    pt_store_close(st);
    char err[512];
    struct pt_store_options o = {.path = path, .max_page_count = 30};
    assert_int_equal(pt_store_open(&o, &st, err, sizeof err), PT_OK);
    cfg.offline_limits[0].max_amount = 1000000;
    cfg.offline_limits[0].max_total = 1000000000;
    cfg.offline_max_count = 1000000;
    struct pt_reply r = {0};
    int i;
    char key[32], order[32], extra[600];
    memset(extra, 0, sizeof extra);
    strcpy(extra, ",\"subject\":\"");
    memset(extra + strlen(extra), 'x', 250);
    strcat(extra, "\"");
    for (i = 0; i < 5000; i++) {
        snprintf(key, sizeof key, "full-%d", i);
        snprintf(order, sizeof order, "O-FULL-%d", i);
        pt_reply_free(&r);
        post(key, charge_body(order, 100, extra), &r);
        if (r.status != 202)
            break;
    }
    assert_int_equal(r.status, 503);
    assert_string_equal(err_code(&r), "storage_unavailable");
    pt_reply_free(&r);
    /* Every stored key has its charge; the failed one left nothing. */
    assert_int_equal(count("charges"), i);
    assert_int_equal(count("idempotency_keys"), i);
    assert_int_equal(count("charge_events"), i);
    /* /healthz says what the charge was told. */
    assert_false(pt_store_writable(st));
    /* Room made (the page limit raised): the same key goes through, and
     * /healthz is 200 again. */
    pt_store_close(st);
    o.max_page_count = 0;
    assert_int_equal(pt_store_open(&o, &st, err, sizeof err), PT_OK);
    assert_true(pt_store_writable(st));
    post(key, charge_body(order, 100, extra), &r);
    assert_int_equal(r.status, 202);
    pt_reply_free(&r);
    assert_true(pt_store_writable(st));
}

/* A disk that fills up or fails under the WAL (SQLITE_FULL or an I/O error
 * at commit, as ENOSPC and EIO give them): /healthz follows what a charge
 * gets, and recovers when the disk does, without any charge first. */
static void test_healthz_follows_a_failing_disk(void **state)
{
    (void)state;
    static const enum pt_test_disk modes[] = {PT_TEST_DISK_FULL, PT_TEST_DISK_EIO};
    struct pt_reply r;
    char key[32], order[32];
    cfg.offline_max_count = 100;
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        snprintf(key, sizeof key, "disk-ok-%zu", m);
        snprintf(order, sizeof order, "O-DISK-OK-%zu", m);
        post(key, charge_body(order, 100, NULL), &r);
        assert_int_equal(r.status, 202);
        pt_reply_free(&r);
        assert_true(pt_store_writable(st));

        pt_test_disk_set(modes[m]);
        snprintf(key, sizeof key, "disk-bad-%zu", m);
        snprintf(order, sizeof order, "O-DISK-BAD-%zu", m);
        post(key, charge_body(order, 100, NULL), &r);
        assert_int_equal(r.status, 503);
        assert_string_equal(err_code(&r), "storage_unavailable");
        pt_reply_free(&r);
        if (pt_store_writable(st))
            fail_msg("disk mode %d: a charge got 503 storage_unavailable, /healthz would say 200",
                     (int)modes[m]);
        /* Asking again does not make it so. */
        assert_false(pt_store_writable(st));

        pt_test_disk_set(PT_TEST_DISK_OK);
        assert_true(pt_store_writable(st));
        post(key, charge_body(order, 100, NULL), &r);
        assert_int_equal(r.status, 202);
        pt_reply_free(&r);
    }
    assert_int_equal(count("charges"), 4);
}

static void test_cancel_and_review(void **state)
{
    (void)state;
    struct pt_reply r, again;
    post("k", charge_body("O-C", 100, NULL), &r);
    pt_reply_free(&r);
    pt_intake_cancel(&in, st, "O-C", NULL, "", 0, 1, &r);
    assert_int_equal(r.status, 400);
    assert_string_equal(err_code(&r), "idempotency_key_missing");
    pt_reply_free(&r);
    pt_intake_cancel(&in, st, "O-C", "cx", "{\"why\":1}", 9, 1, &r);
    assert_int_equal(r.status, 400);
    pt_reply_free(&r);
    pt_intake_cancel(&in, st, "O-C", "cc", "{}", 2, 1, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(state_of(&r), "CANCELED");
    /* No body and {} are the same request. */
    pt_intake_cancel(&in, st, "O-C", "cc", "", 0, 2, &again);
    assert_true(again.replayed);
    assert_memory_equal(again.body, r.body, r.len);
    pt_reply_free(&again);
    pt_reply_free(&r);
    pt_intake_cancel(&in, st, "NOPE", "cn", "", 0, 1, &r);
    assert_int_equal(r.status, 404);
    pt_reply_free(&r);
    assert_int_equal(count("idempotency_keys"), 3); /* k, cx (400), cc; 404 not stored */

    const char *hold = "{\"action\":\"hold\",\"operator\":\"ann\",\"note\":\"check ID\"}";
    pt_intake_review(&in, st, "O-C", "rv1", hold, strlen(hold), 5, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"review\":true"));
    pt_reply_free(&r);
    const char *bad = "{\"action\":\"approve\"}";
    pt_intake_review(&in, st, "O-C", "rv2", bad, strlen(bad), 5, &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "action"));
    assert_non_null(strstr(r.body, "operator"));
    pt_reply_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_key_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_body_names_fields_and_is_stored, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_queued_replayed_and_conflicts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_key_same_order_compares_every_parameter, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_offline_limits_release_the_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_online_outcomes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_sent_queues_or_refuses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_use_while_first_runs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_full_is_503_and_nothing_half_written, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_healthz_follows_a_failing_disk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_and_review, setup, teardown),
    };
    pt_test_disk_install(); /* before the first database is opened */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
