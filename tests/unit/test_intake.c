/*
 * test_intake.c - the POST /v1/charges outcome table (SPEC section 5) without
 * a socket: validation, replay, conflicts, offline limits, the online path
 * through a fake sync engine, a second request while the first is running,
 * and a full disk.
 */
#include "testutil.h"

#include "charges.h"
#include "err.h"
#include "fallback.h"
#include "intake.h"
#include "store.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char dir[256], path[300];
static struct pt_store *st;
/* The suite runs twice: each store alone, then every store attached to one
 * writer (group commit), as the daemon runs them. */
static int with_writer;
static struct pt_store_writer *writer;

/* Opens st (and, in the second run, the writer it writes through). */
static void open_st(const struct pt_store_options *o)
{
    char err[512];
    assert_int_equal(pt_test_store_open(o, &st, err, sizeof err), PT_OK);
    if (with_writer) {
        assert_int_equal(pt_test_writer_new(o, &writer, err, sizeof err), PT_OK);
        pt_store_attach(st, writer);
    }
}

/* A store of its own (another connection, as another thread has), writing
 * through the writer (its own transactions in the first run). */
static struct pt_store *open_lane(void)
{
    char err[256];
    struct pt_store *s;
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_test_store_open(&o, &s, err, sizeof err), PT_OK);
    pt_store_attach(s, writer);
    return s;
}

static void close_st(void)
{
    pt_store_close(st);
    pt_store_writer_destroy(writer);
    st = NULL;
    writer = NULL;
}
static struct pt_config cfg;
static struct pt_intake in;

/* ---- a fake sync engine ------------------------------------------------------ */

static int online;               /* reachable? */
static int not_sent;             /* the send fails before leaving the device */
static int sends;                /* how many charges were sent */
static const char *reenter_key;  /* retry this key while the first is "at the gateway" */
static int64_t reenter_after_ms; /* how much later than the first request the retry comes */
static struct pt_reply reenter_reply;

static int comes_up; /* > 0: unreachable for this many more questions, then reachable */

static int fake_reachable(void *ctx, const char *gw)
{
    (void)ctx;
    (void)gw;
    if (comes_up > 0 && --comes_up == 0)
        online = 1;
    return comes_up > 0 ? 0 : online;
}

/* The sync engine's three online steps: claim and settle inside the
 * intake's transactions, send in between (where a client retry may arrive). */
static int fake_claim(void *ctx, struct pt_store *s, struct pt_charge *c, int64_t now)
{
    (void)ctx;
    return pt_charge_transition(s, c, PT_STATE_PROCESSING, NULL, "send", "api", NULL, now);
}

static const int64_t send_now = 1700000000000; /* the time post() passes */

static void fake_send(void *ctx, const struct pt_charge *c, struct pt_online_send *out)
{
    (void)ctx;
    memset(out, 0, sizeof *out);
    if (reenter_key) {
        /* A client retry arriving on another connection mid-flight. */
        struct pt_store *other = open_lane();
        const char *body = "{\"order_id\":\"O-INUSE\",\"amount\":100,\"currency\":\"USD\","
                           "\"gateway\":\"stripe\",\"method\":\"card_on_file\","
                           "\"payment_method\":\"pm_1\"}";
        pt_intake_create_charge(&in, other, reenter_key, body, strlen(body),
                                send_now + reenter_after_ms, &reenter_reply);
        pt_store_close(other);
    }
    if (not_sent) {
        out->verdict = PT_ENOTSENT;
        return;
    }
    sends++;
    out->verdict = PT_OK;
    out->res.outcome = c->amount % 100 == 51   ? PT_OUTCOME_DECLINED
                       : c->amount % 100 == 52 ? PT_OUTCOME_PENDING
                                               : PT_OUTCOME_SUCCESS;
    out->res.amount = c->amount;
    memcpy(out->res.currency, c->currency, 4);
    if (c->amount % 100 == 51)
        strcpy(out->res.code, "insufficient_funds");
    if (c->amount % 100 == 53)
        out->verdict = PT_ENOANSWER;
}

static int fake_settle(void *ctx, struct pt_store *s, struct pt_charge *c,
                       const struct pt_online_send *sent)
{
    (void)ctx;
    enum pt_state to = sent->verdict == PT_ENOTSENT               ? PT_STATE_INIT
                       : sent->verdict != PT_OK                   ? PT_STATE_UNKNOWN
                       : sent->res.outcome == PT_OUTCOME_DECLINED ? PT_STATE_FAILED
                       : sent->res.outcome == PT_OUTCOME_PENDING  ? PT_STATE_PENDING
                                                                  : PT_STATE_SUCCESS;
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    if (to == PT_STATE_FAILED) {
        p.error_code = "insufficient_funds";
        p.error_message = "declined by the issuer";
    }
    int rc = pt_charge_transition(s, c, to, &p, "answer", "sync", NULL, send_now);
    return rc == PT_EEXIST ? PT_OK : rc;
}

/* ---- fixture ------------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    pt_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/i.db", dir);
    struct pt_store_options o = {.path = path};
    open_st(&o);
    pt_config_defaults(&cfg);
    cfg.gw[pt_gateway_index("stripe")].configured = 1;
    cfg.gw[pt_gateway_index("alipay")].configured = 1;
    /* Cross-border acquiring: this merchant's Alipay takes USD too. */
    memcpy(cfg.gw[pt_gateway_index("alipay")].currencies[0], "CNY", 4);
    memcpy(cfg.gw[pt_gateway_index("alipay")].currencies[1], "USD", 4);
    cfg.gw[pt_gateway_index("alipay")].ncurrencies = 2;
    cfg.max_amount = 1000000;
    cfg.offline_limits[0] = (struct pt_cfg_offline_limit){"USD", 5000, 10000};
    cfg.n_offline_limits = 1;
    cfg.offline_max_count = 3;
    in = (struct pt_intake){.cfg = &cfg,
                            .idem = {.ttl_ms = 86400000, .lock_timeout_ms = 60000, .instance = 7}};
    online = not_sent = sends = 0;
    reenter_key = NULL;
    reenter_after_ms = 0;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pt_test_disk_set(PT_TEST_DISK_OK); /* a failed case must not leave the disk failing */
    close_st();
    pt_test_rmtree(dir);
    pt_reply_free(&reenter_reply);
    return 0;
}

static void enable_online(void)
{
    in.online = (struct pt_online_ops){
        .reachable = fake_reachable, .claim = fake_claim, .send = fake_send, .settle = fake_settle};
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

/* charge_body() for threads: a malloc'd copy the caller frees. */
static const char *charge_body_r(const char *order)
{
    char buf[512];
    snprintf(buf, sizeof buf,
             "{\"order_id\":\"%s\",\"amount\":100,\"currency\":\"USD\",\"gateway\":"
             "\"stripe\",\"method\":\"card_on_file\",\"payment_method\":\"pm_card_visa\"}",
             order);
    char *b = strdup(buf);
    assert_non_null(b);
    return b;
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
    post("k-wechat",
         "{\"order_id\":\"O-W\",\"amount\":100,\"currency\":\"CNY\","
         "\"gateway\":\"wechat\",\"method\":\"qr\"}",
         &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "not configured"));
    pt_reply_free(&r);
    post("k-nopm",
         "{\"order_id\":\"O-P\",\"amount\":100,\"currency\":\"USD\","
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

/* SPEC section 8: domestic Alipay settles CNY only; another currency needs
 * gateways.alipay.currencies, or the charge is a 400 naming currency. */
static void test_alipay_currency_rule(void **state)
{
    (void)state;
    struct pt_reply r;
    const char *usd = "{\"order_id\":\"O-USD\",\"amount\":1000,\"currency\":\"USD\","
                      "\"gateway\":\"alipay\",\"method\":\"barcode\","
                      "\"payment_code\":\"2876344382566439\",\"offline\":\"force_offline\"}";
    cfg.gw[pt_gateway_index("alipay")].ncurrencies = 0; /* the default: CNY only */
    post("usd-1", usd, &r);
    assert_int_equal(r.status, 400);
    assert_string_equal(err_code(&r), "invalid_request");
    assert_non_null(strstr(r.body, "currency: USD is not accepted by alipay"));
    assert_non_null(strstr(r.body, "gateways.alipay.currencies"));
    pt_reply_free(&r);
    assert_int_equal(count("charges"), 0);
    cfg.gw[pt_gateway_index("alipay")].ncurrencies = 2; /* CNY, USD */
    post("usd-2", usd, &r);
    assert_int_equal(r.status, 202);
    pt_reply_free(&r);
    assert_int_equal(count("charges"), 1);
}

static int recon_runs, recon_rc;
static int fake_reconcile(void *ctx, struct pt_store *s, const char *gateway, const char *date,
                          const char *actor, int64_t now, char **run)
{
    (void)ctx, (void)s, (void)actor, (void)now;
    recon_runs++;
    *run = NULL;
    if (recon_rc)
        return recon_rc;
    char buf[128];
    snprintf(buf, sizeof buf, "{\"gateway\":\"%s\",\"date\":\"%s\",\"state\":\"done\"}", gateway,
             date);
    *run = strdup(buf);
    return *run ? PT_OK : PT_ENOMEM;
}

/* SPEC 19: cross-border Alipay (currencies beyond CNY) is not reconciled -
 * its bill, in yuan, does not cover the lane's other sales: a 422 that
 * names the currency and the key, and no run; domestic Alipay runs. */
static void test_cross_border_alipay_not_reconciled(void **state)
{
    (void)state;
    struct pt_reply r;
    const char *body = "{\"gateway\":\"alipay\",\"date\":\"2023-11-13\"}";
    in.online.reconcile = fake_reconcile;
    recon_runs = 0;
    pt_intake_reconcile(&in, st, "recon-1", body, strlen(body), 1700000000000, &r);
    assert_int_equal(r.status, 422);
    assert_string_equal(err_code(&r), "reconciliation_unsupported");
    assert_non_null(strstr(r.body, "does not cover USD"));
    assert_non_null(strstr(r.body, "gateways.alipay.currencies"));
    assert_int_equal(recon_runs, 0);
    pt_reply_free(&r);
    const char *extra = "{\"gateway\":\"alipay\",\"date\":\"2023-11-13\",\"x\":[]}";
    pt_intake_reconcile(&in, st, "recon-x", extra, strlen(extra), 1700000000000, &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "x: unknown field (gateway, date)"));
    assert_int_equal(recon_runs, 0);
    pt_reply_free(&r);
    cfg.gw[pt_gateway_index("alipay")].ncurrencies = 0; /* domestic: CNY only */
    pt_intake_reconcile(&in, st, "recon-2", body, strlen(body), 1700000000000, &r);
    assert_int_equal(r.status, 201);
    assert_int_equal(recon_runs, 1);
    pt_reply_free(&r);
}

/* A run that could not be stored (the disk) or could not start (another
 * run is on) gives its key back: the same request runs at once, not after
 * the lock's timeout with a 409 idempotency_key_in_use meanwhile. */
static void test_reconcile_key_given_back(void **state)
{
    (void)state;
    struct pt_reply r;
    const char *body = "{\"gateway\":\"stripe\",\"date\":\"2023-11-13\"}";
    in.online.reconcile = fake_reconcile;
    static const struct {
        int rc, status;
        const char *code;
    } cases[] = {{PT_ESTORAGE, 503, "storage_unavailable"},
                 {PT_EBUSY, 409, "reconciliation_running"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char key[32];
        snprintf(key, sizeof key, "recon-back-%zu", i);
        recon_runs = 0;
        recon_rc = cases[i].rc;
        pt_intake_reconcile(&in, st, key, body, strlen(body), 1700000000000, &r);
        assert_int_equal(r.status, cases[i].status);
        assert_string_equal(err_code(&r), cases[i].code);
        assert_true(r.retry_after_s > 0);
        pt_reply_free(&r);
        struct pt_key_row row = {0};
        assert_int_equal(pt_store_key_get(st, "POST /v1/reconciliations", key, &row), PT_ENOTFOUND);
        recon_rc = PT_OK;
        pt_intake_reconcile(&in, st, key, body, strlen(body), 1700000001000, &r);
        assert_int_equal(r.status, 201);
        assert_int_equal(recon_runs, 2);
        pt_reply_free(&r);
    }
}

/* SPEC 18: an amount the gateway cannot represent in its own units is a 400
 * naming amount, before anything is stored (and the 400 is replayed). */
static void test_amount_in_the_gateways_units(void **state)
{
    (void)state;
    struct pt_reply r;
    static const struct {
        const char *cur;
        long amount;
        const char *why;
    } refused[] = {
        {"MGA", 1050, "amount: 1050 MGA cannot be sent to stripe"}, /* zero-decimal at Stripe */
        {"KWD", 1235, "amount: 1235 KWD cannot be sent to stripe"}, /* last digit must be 0 */
    };
    /* Every currency here may wait in the queue: only the units decide. */
    static const char *const curs[] = {"MGA", "KWD", "ISK"};
    for (size_t i = 0; i < 3; i++) {
        cfg.offline_limits[1 + i] =
            (struct pt_cfg_offline_limit){.max_amount = 1000000, .max_total = 1000000};
        memcpy(cfg.offline_limits[1 + i].currency, curs[i], 4);
    }
    cfg.n_offline_limits = 4;
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char body[512], key[32];
        snprintf(key, sizeof key, "units-%zu", i);
        snprintf(body, sizeof body,
                 "{\"order_id\":\"O-UNITS-%zu\",\"amount\":%ld,\"currency\":\"%s\","
                 "\"gateway\":\"stripe\",\"method\":\"card_on_file\","
                 "\"payment_method\":\"pm_card_visa\",\"offline\":\"force_offline\"}",
                 i, refused[i].amount, refused[i].cur);
        post(key, body, &r);
        assert_int_equal(r.status, 400);
        assert_string_equal(err_code(&r), "invalid_request");
        assert_non_null(strstr(r.body, refused[i].why));
        pt_reply_free(&r);
        post(key, body, &r);
        assert_int_equal(r.status, 400);
        assert_true(r.replayed);
        pt_reply_free(&r);
    }
    assert_int_equal(count("charges"), 0);
    /* What the gateway can take goes. */
    post("units-ok-1",
         "{\"order_id\":\"O-UNITS-OK1\",\"amount\":1000,\"currency\":\"MGA\",\"gateway\":"
         "\"stripe\",\"method\":\"card_on_file\",\"payment_method\":\"pm_card_visa\","
         "\"offline\":\"force_offline\"}",
         &r);
    assert_int_equal(r.status, 202);
    pt_reply_free(&r);
    post("units-ok-2",
         "{\"order_id\":\"O-UNITS-OK2\",\"amount\":5,\"currency\":\"ISK\",\"gateway\":"
         "\"stripe\",\"method\":\"card_on_file\",\"payment_method\":\"pm_card_visa\","
         "\"offline\":\"force_offline\"}",
         &r);
    assert_int_equal(r.status, 202);
    pt_reply_free(&r);
    assert_int_equal(count("charges"), 2);
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

/* On PostgreSQL a guarded new charge queued offline is one round trip and
 * one durable commit (SPEC 16), with the answer the usual path gives: the
 * replay is the same bytes, and the key and the order taken make the next
 * requests take the usual path (a replay, a conflict). */
static void test_new_queued_charge_is_one_round_trip(void **state)
{
    (void)state;
    pt_test_pg_only("the round trips of the PostgreSQL store");
    struct pt_reply r, r2;
    post("rt-0", charge_body("O-RT-0", 100, NULL), &r); /* its statement prepared */
    assert_int_equal(r.status, 202);
    pt_reply_free(&r);
    uint64_t trips = pt_store_round_trips(st);
    post("rt-1", charge_body("O-RT-1", 100, NULL), &r);
    assert_int_equal(pt_store_round_trips(st) - trips, 1);
    assert_int_equal(r.status, 202);
    assert_false(r.replayed);
    post("rt-1", charge_body("O-RT-1", 100, NULL), &r2);
    assert_true(r2.replayed);
    assert_int_equal(r2.status, 202);
    assert_int_equal(r2.len, r.len);
    assert_memory_equal(r2.body, r.body, r.len);
    pt_reply_free(&r2);
    /* The same order under a new key: the charge, not a second one. */
    post("rt-2", charge_body("O-RT-1", 100, NULL), &r2);
    assert_int_equal(r2.status, 200);
    pt_reply_free(&r2);
    pt_reply_free(&r);
    assert_int_equal(count("charges"), 2);
    struct pt_audit_row rows[4];
    int n = 0;
    struct pt_charge c;
    assert_int_equal(pt_store_charge_get(st, "O-RT-1", &c), PT_OK);
    assert_int_equal(pt_store_audit_list(st, c.id, 4, rows, &n), PT_OK);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].to_state, "INIT");
    assert_string_equal(rows[0].cause, "created");
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
        "\"subject\":\"Latte\",\"metadata\":{\"a\":\"1\",\"b\":\"2\"},\"offline\":\"force_"
        "offline\"",
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
    assert_int_equal(
        pt_charge_transition(st, &c, PT_STATE_SUCCESS, &p, "answer", "sync", NULL, 1700000000002),
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
    post("cny",
         "{\"order_id\":\"O-CNY\",\"amount\":100,\"currency\":\"CNY\",\"gateway\":"
         "\"alipay\",\"method\":\"barcode\",\"payment_code\":\"2876344382566439\"}",
         &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(err_code(&r), "offline_not_allowed");
    pt_reply_free(&r);
    post("req", charge_body("O-REQ", 100, ",\"offline\":\"require_online\""), &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(err_code(&r), "offline_not_allowed");
    pt_reply_free(&r);
    post("qr",
         "{\"order_id\":\"O-QR\",\"amount\":100,\"currency\":\"USD\",\"gateway\":"
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

/* The first request outlives lock_timeout_s at the gateway; a retry takes
 * the lock over and answers from the charge row.  When the first one comes
 * back, the key must keep one answer: the first request answers with the
 * recoverer's stored response instead of overwriting it. */
static void test_recovered_key_keeps_one_answer(void **state)
{
    (void)state;
    enable_online();
    reenter_key = "slow";
    reenter_after_ms = in.idem.lock_timeout_ms;
    const char *body = "{\"order_id\":\"O-INUSE\",\"amount\":100,\"currency\":\"USD\","
                       "\"gateway\":\"stripe\",\"method\":\"card_on_file\","
                       "\"payment_method\":\"pm_1\"}";
    struct pt_reply r;
    post("slow", body, &r);
    reenter_key = NULL;
    assert_int_equal(reenter_reply.status, 202); /* the recoverer: the charge as it found it */
    assert_int_equal(r.status, reenter_reply.status);
    assert_int_equal(r.len, reenter_reply.len);
    assert_memory_equal(r.body, reenter_reply.body, r.len);
    struct pt_reply again;
    pt_intake_create_charge(&in, st, "slow", body, strlen(body),
                            1700000000000 + 2 * in.idem.lock_timeout_ms, &again);
    assert_true(again.replayed);
    assert_int_equal(again.status, reenter_reply.status);
    assert_int_equal(again.len, reenter_reply.len);
    assert_memory_equal(again.body, reenter_reply.body, again.len);
    pt_reply_free(&again);
    pt_reply_free(&r);
    assert_int_equal(sends, 1);
    /* What the gateway answered the first request is still the charge's. */
    struct pt_charge c;
    assert_int_equal(pt_store_charge_get(st, "O-INUSE", &c), PT_OK);
    assert_int_equal(c.state, PT_STATE_SUCCESS);
}

static void test_disk_full_is_503_and_nothing_half_written(void **state)
{
    (void)state;
    pt_test_sqlite_only("a full local disk is the SQLite file's (the server's: tests/pg)");
    close_st();
    struct pt_store_options o = {.path = path, .max_page_count = 30};
    open_st(&o);
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
    close_st();
    o.max_page_count = 0;
    open_st(&o);
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
    pt_test_sqlite_only("a full local disk is the SQLite file's (the server's: tests/pg)");
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
    const char *extra = "{\"action\":\"hold\",\"operator\":\"ann\",\"by\":1}";
    pt_intake_review(&in, st, "O-C", "rv3", extra, strlen(extra), 5, &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "by: unknown field (action, operator, note)"));
    pt_reply_free(&r);
}

/* ---- strict JSON bodies (SPEC 5, input strictness) ------------------------------ */

/* The reply is an error body that parses as JSON and is clean UTF-8. */
static void expect_clean_400(const struct pt_reply *r, const char *what)
{
    if (r->status != 400)
        fail_msg("%s: status %d, body %s", what, r->status, r->body ? r->body : "(none)");
    if (!pt_test_utf8_clean(r->body, r->len) && !memchr(r->body, 0, r->len))
        fail_msg("%s: reply is not valid UTF-8", what);
    cJSON *o = cJSON_ParseWithLength(r->body, r->len);
    if (!o)
        fail_msg("%s: reply is not JSON: %s", what, r->body);
    cJSON_Delete(o);
    assert_string_equal(err_code(r), "invalid_request");
}

static const char *message_of(const struct pt_reply *r)
{
    static char m[1200];
    cJSON *o = cJSON_Parse(r->body);
    const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "error"), "message");
    snprintf(m, sizeof m, "%s", cJSON_IsString(v) ? v->valuestring : "");
    cJSON_Delete(o);
    return m;
}

/* The message starts with "field: " or has "; field: " in it. */
static void expect_names(const struct pt_reply *r, const char *field, const char *what)
{
    const char *m = message_of(r);
    size_t n = strlen(field);
    for (const char *p = m; (p = strstr(p, field)); p++)
        if ((p == m || (p >= m + 2 && p[-2] == ';' && p[-1] == ' ')) && p[n] == ':')
            return;
    fail_msg("%s: message does not name %s: %s", what, field, m);
}

static void post_n(const char *key, const char *body, size_t len, struct pt_reply *r)
{
    pt_intake_create_charge(&in, st, key, body, len, 1700000000000, r);
}

/* "NUL\u0000X" used to be read as "NUL": order NUL was created, and two
 * bodies that differ after the NUL had the same fingerprint. */
static void test_nul_in_string_is_refused_and_does_not_collide(void **state)
{
    (void)state;
    struct pt_reply r, r2;
    const char *a = "{\"order_id\":\"NUL\\u0000X\",\"amount\":100,\"currency\":\"USD\","
                    "\"gateway\":\"stripe\",\"method\":\"card_on_file\","
                    "\"payment_method\":\"pm_1\"}";
    const char *b = "{\"order_id\":\"NUL\\u0000Y\",\"amount\":100,\"currency\":\"USD\","
                    "\"gateway\":\"stripe\",\"method\":\"card_on_file\","
                    "\"payment_method\":\"pm_1\"}";
    post("nul-k", a, &r);
    expect_clean_400(&r, "order_id with \\u0000");
    expect_names(&r, "order_id", "order_id with \\u0000");
    assert_non_null(strstr(message_of(&r), "U+0000"));
    assert_false(r.replayed);
    /* The same body replays its stored 400; the other one is another request. */
    post("nul-k", a, &r2);
    assert_int_equal(r2.status, 400);
    assert_true(r2.replayed);
    assert_memory_equal(r2.body, r.body, r.len);
    pt_reply_free(&r2);
    post("nul-k", b, &r2);
    assert_int_equal(r2.status, 422);
    assert_string_equal(err_code(&r2), "idempotency_key_reused");
    pt_reply_free(&r2);
    pt_reply_free(&r);
    /* In other strings too, and as a raw byte. */
    post("nul-s", charge_body("O-NUL", 100, ",\"subject\":\"Latte\\u0000 x\""), &r);
    expect_clean_400(&r, "subject with \\u0000");
    expect_names(&r, "subject", "subject with \\u0000");
    pt_reply_free(&r);
    char raw[512];
    int n = snprintf(raw, sizeof raw, "%s", charge_body("O-NUL", 100, ",\"subject\":\"Lat#e\""));
    *strchr(raw, '#') = '\0';
    post_n("nul-raw", raw, (size_t)n, &r);
    expect_clean_400(&r, "subject with a raw NUL byte");
    expect_names(&r, "subject", "subject with a raw NUL byte");
    pt_reply_free(&r);
    struct pt_charge c;
    assert_int_equal(pt_store_charge_get(st, "NUL", &c), PT_ENOTFOUND);
    assert_int_equal(count("charges"), 0);
}

/* A charge body with the amount spelled exactly as given. */
static const char *amount_body(const char *order, const char *amount)
{
    static char body[512];
    snprintf(body, sizeof body,
             "{\"order_id\":\"%s\",\"amount\":%s,\"currency\":\"USD\",\"gateway\":\"stripe\","
             "\"method\":\"card_on_file\",\"payment_method\":\"pm_1\"}",
             order, amount);
    return body;
}

static void test_amount_must_be_a_plain_integer(void **state)
{
    (void)state;
    const char *bad[] = {"0123",
                         "1200.0",
                         "1.2e3",
                         "1E3",
                         "12.5",
                         "9223372036854775808",
                         "18446744073709551616",
                         "1e30",
                         "1e400",
                         "-5",
                         "0",
                         "-0",
                         "\"100\"",
                         "true",
                         "[100]",
                         "{}"};
    char order[32], key[32];
    struct pt_reply r;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(order, sizeof order, "O-AMT-%zu", i);
        snprintf(key, sizeof key, "amt-%zu", i);
        post(key, amount_body(order, bad[i]), &r);
        expect_clean_400(&r, bad[i]);
        expect_names(&r, "amount", bad[i]);
        pt_reply_free(&r);
    }
    /* 2^63-1 is an integer, just above limits.max_amount. */
    post("amt-max", amount_body("O-AMT-MAX", "9223372036854775807"), &r);
    expect_clean_400(&r, "2^63-1");
    assert_non_null(strstr(message_of(&r), "amount: must not exceed limits.max_amount"));
    pt_reply_free(&r);
    assert_int_equal(count("charges"), 0);
    /* A large amount is taken exactly, not through a double. */
    cfg.max_amount = 9007199254740993LL;
    cfg.offline_limits[0].max_amount = cfg.offline_limits[0].max_total = INT64_MAX / 2;
    post("amt-big", amount_body("O-AMT-BIG", "9007199254740993"), &r);
    assert_int_equal(r.status, 202);
    pt_reply_free(&r);
    struct pt_charge c;
    assert_int_equal(pt_store_charge_get(st, "O-AMT-BIG", &c), PT_OK);
    assert_int_equal(c.amount, 9007199254740993LL);
    /* Beyond 2^53 a double cannot tell 2^53 + 1 from 2^53: the two bodies
     * are different requests all the same. */
    post("amt-big", amount_body("O-AMT-BIG", "9007199254740992"), &r);
    assert_int_equal(r.status, 422);
    pt_reply_free(&r);
}

static void test_invalid_utf8_is_refused_with_a_clean_reply(void **state)
{
    (void)state;
    const char *bad[] = {
        "caf\xc3(",         /* truncated sequence */
        "\xc0\xaf",         /* overlong '/' */
        "\xe0\x80\xaf",     /* overlong, 3 bytes */
        "\xed\xa0\x80",     /* encoded surrogate U+D800 */
        "\xf4\x90\x80\x80", /* above U+10FFFF */
        "\xff",             /* never valid */
        "\x80",             /* lone continuation byte */
    };
    char body[512], key[32];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct pt_reply r;
        snprintf(key, sizeof key, "u8-%zu", i);
        char extra[64];
        snprintf(extra, sizeof extra, ",\"subject\":\"%s\"", bad[i]);
        post(key, charge_body("O-U8", 100, extra), &r);
        expect_clean_400(&r, key);
        expect_names(&r, "subject", key);
        pt_reply_free(&r);
        /* The same bytes in a member name, which used to be echoed. */
        snprintf(body, sizeof body, "{\"colo%sur\":\"red\"}", bad[i]);
        snprintf(key, sizeof key, "u8k-%zu", i);
        post(key, body, &r);
        expect_clean_400(&r, key);
        pt_reply_free(&r);
    }
    /* Escaped lone surrogates are refused too; a pair is a character. */
    struct pt_reply r;
    post("sur-1", charge_body("O-U8", 100, ",\"subject\":\"x\\ud800\""), &r);
    expect_clean_400(&r, "lone high surrogate");
    expect_names(&r, "subject", "lone high surrogate");
    pt_reply_free(&r);
    post("sur-2", charge_body("O-U8", 100, ",\"subject\":\"\\udc00x\""), &r);
    expect_clean_400(&r, "lone low surrogate");
    expect_names(&r, "subject", "lone low surrogate");
    pt_reply_free(&r);
    post("sur-3", charge_body("O-U8", 100, ",\"subject\":\"\\ud83d\\ude00 caf\xc3\xa9\""), &r);
    assert_int_equal(r.status, 202);
    assert_true(pt_test_utf8_clean(r.body, r.len) && !memchr(r.body, 0, r.len));
    pt_reply_free(&r);
    /* Stored and replayed over the raw bytes: another invalid byte under
     * the same key is another request. */
    struct pt_reply a, b;
    post("u8-0", charge_body("O-U8", 100, ",\"subject\":\"caf\xc3(\""), &a);
    assert_true(a.replayed);
    pt_reply_free(&a);
    post("u8-0", charge_body("O-U8", 100, ",\"subject\":\"caf\xc3)\""), &b);
    assert_int_equal(b.status, 422);
    pt_reply_free(&b);
    assert_int_equal(count("charges"), 1);
}

static void test_duplicate_keys_are_named_at_any_depth(void **state)
{
    (void)state;
    struct pt_reply r;
    post("dup-1", charge_body("O-DUP", 100, ",\"amount\":200"), &r);
    expect_clean_400(&r, "amount twice");
    assert_non_null(strstr(message_of(&r), "amount: given twice"));
    pt_reply_free(&r);
    post("dup-2", charge_body("O-DUP", 100, ",\"metadata\":{\"lane\":\"3\",\"lane\":\"4\"}"), &r);
    expect_clean_400(&r, "metadata.lane twice");
    assert_non_null(strstr(message_of(&r), "metadata.lane: given twice"));
    pt_reply_free(&r);
    /* The same name spelled with an escape is the same name. */
    post("dup-3", charge_body("O-DUP", 100, ",\"metadata\":{\"lane\":\"3\",\"l\\u0061ne\":\"4\"}"),
         &r);
    expect_clean_400(&r, "metadata.lane twice, escaped");
    assert_non_null(strstr(message_of(&r), "metadata.lane: given twice"));
    pt_reply_free(&r);
    post("dup-4", charge_body("O-DUP", 100, ",\"subj\\u0065ct\":\"a\",\"subject\":\"b\""), &r);
    expect_clean_400(&r, "subject twice, escaped");
    assert_non_null(strstr(message_of(&r), "subject: given twice"));
    pt_reply_free(&r);
    /* Nesting is bounded, trailing bytes are not ignored. */
    char deep[512];
    snprintf(deep, sizeof deep, ",\"metadata\":{\"a\":%s1%s}", "[[[[[[[[[[[[[[[[[[[[",
             "]]]]]]]]]]]]]]]]]]]]");
    post("deep", charge_body("O-DUP", 100, deep), &r);
    expect_clean_400(&r, "deep nesting");
    assert_non_null(strstr(message_of(&r), "metadata.a[0][0]"));
    assert_non_null(strstr(message_of(&r), "nests deeper than 16 levels"));
    pt_reply_free(&r);
    char trail[512];
    snprintf(trail, sizeof trail, "%s {\"amount\":1}", charge_body("O-DUP", 100, NULL));
    post("trail", trail, &r);
    expect_clean_400(&r, "trailing bytes");
    expect_names(&r, "body", "trailing bytes");
    pt_reply_free(&r);
    assert_int_equal(count("charges"), 0);
}

/* WeChat payment codes are APIv2: a gateway configured without its key
 * takes none, and the 400 names the keys (nothing stored). */
static void test_wechat_barcode_needs_the_apiv2_key(void **state)
{
    (void)state;
    cfg.gw[pt_gateway_index("wechat")].configured = 1;
    struct pt_reply r;
    const char *body = "{\"order_id\":\"WX-BAR-1\",\"amount\":100,\"currency\":\"CNY\","
                       "\"gateway\":\"wechat\",\"method\":\"barcode\","
                       "\"payment_code\":\"134567890123456789\"}";
    post("k-wxbar", body, &r);
    assert_int_equal(r.status, 400);
    cJSON *o = cJSON_Parse(r.body);
    const char *m = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "error"), "message")->valuestring;
    assert_non_null(strstr(m, "method: wechat.barcode needs gateways.wechat.apiv2_key_file"));
    cJSON_Delete(o);
    pt_reply_free(&r);
    assert_int_equal(count("charges"), 0);
}

static void test_cancel_and_review_bodies_are_strict(void **state)
{
    (void)state;
    struct pt_reply r;
    post("k", charge_body("O-SC", 100, NULL), &r);
    assert_int_equal(r.status, 202);
    pt_reply_free(&r);
    const char *junk = "{} x";
    pt_intake_cancel(&in, st, "O-SC", "sc-1", junk, strlen(junk), 1, &r);
    expect_clean_400(&r, "cancel {} x");
    pt_reply_free(&r);
    const char *dup = "{\"action\":\"hold\",\"operator\":\"ann\",\"action\":\"clear\"}";
    pt_intake_review(&in, st, "O-SC", "rv-1", dup, strlen(dup), 1, &r);
    expect_clean_400(&r, "review action twice");
    assert_non_null(strstr(message_of(&r), "action: given twice"));
    pt_reply_free(&r);
    const char *nul = "{\"action\":\"hold\",\"operator\":\"ann\",\"note\":\"ok\\u0000 really\"}";
    pt_intake_review(&in, st, "O-SC", "rv-2", nul, strlen(nul), 1, &r);
    expect_clean_400(&r, "review note with \\u0000");
    expect_names(&r, "note", "review note with \\u0000");
    pt_reply_free(&r);
    const char *u8 = "{\"action\":\"hold\",\"operator\":\"ann\",\"note\":\"\xed\xa0\x80\"}";
    pt_intake_review(&in, st, "O-SC", "rv-3", u8, strlen(u8), 1, &r);
    expect_clean_400(&r, "review note not UTF-8");
    expect_names(&r, "note", "review note not UTF-8");
    pt_reply_free(&r);
    struct pt_charge c;
    assert_int_equal(pt_store_charge_get(st, "O-SC", &c), PT_OK);
    assert_int_equal(c.state, PT_STATE_INIT);
    assert_false(c.review);
}

/* ---- batches: several requests in one transaction (group commit) ------------- */

enum { BATCH_LANES = 8 };

/*
 * Runs request i = (keys[i], bodies[i]) on a store of its own, every commit
 * deferred as the HTTP event loop defers them, so all of them land in the
 * writer's open batch; then flushes and settles each answer.  Returns the
 * batches the writer committed meanwhile.
 */
static uint64_t post_batch(int n, const char *const keys[], char *const bodies[],
                           struct pt_reply out[])
{
    assert_true(n <= BATCH_LANES);
    struct pt_store *lane[BATCH_LANES];
    struct pt_store_commit ticket[BATCH_LANES];
    int deferred[BATCH_LANES];
    uint64_t before = pt_store_writer_batches(writer);
    for (int i = 0; i < n; i++) {
        lane[i] = open_lane();
        pt_store_defer_commit(lane[i], &ticket[i]);
        int rc = pt_intake_create_charge_nowait(&in, lane[i], keys[i], bodies[i], strlen(bodies[i]),
                                                1700000000000, &out[i]);
        assert_int_not_equal(rc, PT_EAGAIN);
        deferred[i] = pt_store_commit_deferred(lane[i]);
        pt_store_defer_commit(lane[i], NULL);
    }
    /* Nothing was committed yet: every answer still waits. */
    assert_int_equal(pt_store_writer_batches(writer), before);
    for (int i = 0; i < n; i++) {
        if (deferred[i])
            pt_intake_settle(&in, pt_store_writer_flush(writer, &ticket[i]), &out[i]);
        pt_store_close(lane[i]);
    }
    return pt_store_writer_batches(writer) - before;
}

static char *dup_body(const char *order, long amount)
{
    char *b = strdup(charge_body(order, amount, NULL));
    assert_non_null(b);
    return b;
}

static void free_bodies(int n, char *bodies[], struct pt_reply r[])
{
    for (int i = 0; i < n; i++) {
        free(bodies[i]);
        pt_reply_free(&r[i]);
    }
}

/* Successes and failures in one batch: each gets its own answer, exactly
 * the successful ones are stored, in one commit. */
static void test_batch_answers_each_request(void **state)
{
    (void)state;
    pt_test_sqlite_only("the writer's batches (group commit) are the SQLite store's");
    cfg.offline_max_count = 100;
    const char *keys[] = {"b-ok1", "b-big", "b-ok2", "b-dup-order", "b-bad", "b-ok3"};
    char *bodies[] = {dup_body("O-B1", 100), dup_body("O-BIG", 6000),  dup_body("O-B2", 200),
                      dup_body("O-B1", 999), strdup("{\"order_id\":"), dup_body("O-B3", 300)};
    struct pt_reply r[6];
    assert_int_equal(post_batch(6, keys, bodies, r), 1);
    assert_int_equal(r[0].status, 202);
    assert_int_equal(r[1].status, 503); /* above max_amount: refused, key released */
    assert_string_equal(err_code(&r[1]), "offline_limit_exceeded");
    assert_int_equal(r[2].status, 202);
    assert_int_equal(r[3].status, 409); /* O-B1 exists (in this same batch) */
    assert_int_equal(r[4].status, 400);
    assert_int_equal(r[5].status, 202);
    free_bodies(6, bodies, r);
    assert_int_equal(count("charges"), 3);
    /* Stored: the three charges' keys, the 409 and the 400 (answers are
     * kept for their keys); not the released one. */
    struct pt_key_row row;
    assert_int_equal(pt_store_key_get(st, "POST /v1/charges", "b-big", &row), PT_ENOTFOUND);
    assert_int_equal(count("idempotency_keys"), 5);
    /* Replays answer what the batch answered. */
    struct pt_reply again;
    post("b-ok2", charge_body("O-B2", 200, NULL), &again);
    assert_int_equal(again.status, 202);
    assert_true(again.replayed);
    pt_reply_free(&again);
}

/* The same key eight times in one batch: one charge, the others replay its
 * answer; and the same order under eight keys: one charge. */
static void test_batch_same_key_and_same_order_storms(void **state)
{
    (void)state;
    pt_test_sqlite_only("the writer's batches (group commit) are the SQLite store's");
    cfg.offline_max_count = 100;
    const char *keys[BATCH_LANES];
    char *bodies[BATCH_LANES];
    struct pt_reply r[BATCH_LANES];
    for (int i = 0; i < BATCH_LANES; i++) {
        keys[i] = "storm-key";
        bodies[i] = dup_body("O-STORM", 100);
    }
    assert_int_equal(post_batch(BATCH_LANES, keys, bodies, r), 1);
    assert_int_equal(r[0].status, 202);
    assert_false(r[0].replayed);
    /* The first completed its key inside the batch: the others replay its
     * answer - once that batch is durable (post_batch flushes them). */
    for (int i = 1; i < BATCH_LANES; i++) {
        assert_int_equal(r[i].status, 202);
        assert_true(r[i].replayed);
        assert_string_equal(r[i].body, r[0].body);
    }
    free_bodies(BATCH_LANES, bodies, r);
    assert_int_equal(count("charges"), 1);

    static char names[BATCH_LANES][16];
    for (int i = 0; i < BATCH_LANES; i++) {
        snprintf(names[i], sizeof names[i], "order-key-%d", i);
        keys[i] = names[i];
        bodies[i] = dup_body("O-SAME", 100);
    }
    assert_int_equal(post_batch(BATCH_LANES, keys, bodies, r), 1);
    assert_int_equal(r[0].status, 202);
    /* The others: the same order with the same parameters - its charge. */
    for (int i = 1; i < BATCH_LANES; i++) {
        assert_int_equal(r[i].status, 200);
        assert_string_equal(state_of(&r[i]), "INIT");
    }
    free_bodies(BATCH_LANES, bodies, r);
    assert_int_equal(count("charges"), 2);
}

/* The offline limits are exact inside a batch: max_count 3 with one
 * queued admits two of five; max_total 10000 admits 4000 + 4000 only. */
static void test_batch_offline_limits_at_the_boundary(void **state)
{
    (void)state;
    pt_test_sqlite_only("the writer's batches (group commit) are the SQLite store's");
    struct pt_reply one;
    post("pre", charge_body("O-PRE", 100, NULL), &one);
    assert_int_equal(one.status, 202);
    pt_reply_free(&one);
    const char *keys[] = {"l1", "l2", "l3", "l4", "l5"};
    char *bodies[] = {dup_body("O-L1", 100), dup_body("O-L2", 100), dup_body("O-L3", 100),
                      dup_body("O-L4", 100), dup_body("O-L5", 100)};
    struct pt_reply r[5];
    assert_int_equal(post_batch(5, keys, bodies, r), 1);
    int ok = 0;
    for (int i = 0; i < 5; i++) {
        ok += r[i].status == 202;
        if (r[i].status != 202) {
            assert_int_equal(r[i].status, 503);
            assert_non_null(strstr(r[i].body, "max_count"));
        }
    }
    assert_int_equal(ok, 2);
    assert_int_equal(r[0].status, 202);
    assert_int_equal(r[1].status, 202);
    free_bodies(5, bodies, r);
    assert_int_equal(count("charges"), 3);

    /* Amounts: the queue is canceled, then 4000 + 4000 + 4000 in a batch. */
    for (int i = 0; i < 3; i++) {
        const char *order = i == 0 ? "O-PRE" : i == 1 ? "O-L1" : "O-L2";
        char ck[16];
        snprintf(ck, sizeof ck, "cancel-%d", i);
        pt_intake_cancel(&in, st, order, ck, "", 0, 1700000000000, &one);
        assert_int_equal(one.status, 200);
        pt_reply_free(&one);
    }
    const char *tkeys[] = {"t1", "t2", "t3"};
    char *tbodies[] = {dup_body("O-T1", 4000), dup_body("O-T2", 4000), dup_body("O-T3", 4000)};
    assert_int_equal(post_batch(3, tkeys, tbodies, r), 1);
    assert_int_equal(r[0].status, 202);
    assert_int_equal(r[1].status, 202);
    assert_int_equal(r[2].status, 503);
    assert_non_null(strstr(r[2].body, "max_total"));
    free_bodies(3, tbodies, r);
    int64_t n = 0, amount = 0;
    assert_int_equal(pt_store_queue_figures(st, "USD", &n, &amount), PT_OK);
    assert_int_equal(n, 2);
    assert_int_equal(amount, 8000);
}

/* The batch's commit fails (the disk fills under it): every member is
 * told 503 storage_unavailable and nothing of any of them is kept. */
static void test_batch_commit_failure_fails_every_member(void **state)
{
    (void)state;
    pt_test_sqlite_only("the writer's batches (group commit) are the SQLite store's");
    cfg.offline_max_count = 100;
    /* f1 again last: a replay of an answer the batch holds. */
    const char *keys[] = {"f1", "f2", "f3", "f1"};
    char *bodies[] = {dup_body("O-F1", 100), dup_body("O-F2", 100), dup_body("O-F3", 100),
                      dup_body("O-F1", 100)};
    struct pt_reply r[4];
    struct pt_store *lane[4];
    struct pt_store_commit ticket[4];
    for (int i = 0; i < 4; i++) {
        lane[i] = open_lane();
        pt_store_defer_commit(lane[i], &ticket[i]);
        pt_intake_create_charge_nowait(&in, lane[i], keys[i], bodies[i], strlen(bodies[i]),
                                       1700000000000, &r[i]);
        assert_int_equal(r[i].status, 202);
        assert_true(pt_store_commit_deferred(lane[i]));
    }
    assert_true(r[3].replayed);
    pt_test_disk_set(PT_TEST_DISK_FULL); /* the WAL append at COMMIT fails */
    for (int i = 0; i < 4; i++) {
        pt_intake_settle(&in, pt_store_writer_flush(writer, &ticket[i]), &r[i]);
        assert_int_equal(r[i].status, 503);
        assert_string_equal(err_code(&r[i]), "storage_unavailable");
        pt_store_close(lane[i]);
    }
    pt_test_disk_set(PT_TEST_DISK_OK);
    free_bodies(4, bodies, r);
    assert_int_equal(count("charges"), 0);
    assert_int_equal(count("idempotency_keys"), 0);
    /* The same keys go through now. */
    struct pt_reply again;
    post("f2", charge_body("O-F2", 100, NULL), &again);
    assert_int_equal(again.status, 202);
    assert_false(again.replayed);
    pt_reply_free(&again);
}

/* A quick request that turns out to need the gateway (PT_EAGAIN) after
 * reading a batch with other requests in it: its rollback waits for that
 * batch like any answer would, so the event loop must flush its ticket
 * before handing the request to a worker (api.c does) - and after that
 * nothing is left open: the worker's own transactions go through. */
static void test_batch_request_handed_to_a_worker(void **state)
{
    (void)state;
    pt_test_sqlite_only("the writer's batches (group commit) are the SQLite store's");
    cfg.offline_max_count = 100;
    enable_online();
    struct pt_store *lane[2];
    struct pt_store_commit ticket[2];
    struct pt_reply r[2];
    for (int i = 0; i < 2; i++) {
        lane[i] = open_lane();
        pt_store_defer_commit(lane[i], &ticket[i]);
    }
    const char *queued = charge_body_r("O-Q1");
    char *forced = strdup(charge_body("O-Q1F", 100, ",\"offline\":\"force_offline\""));
    assert_int_equal(pt_intake_create_charge_nowait(&in, lane[0], "q1", forced, strlen(forced),
                                                    1700000000000, &r[0]),
                     PT_OK);
    assert_int_equal(r[0].status, 202);
    assert_true(pt_store_commit_deferred(lane[0]));
    /* Reachable gateway, prefer_online: not for the event loop. */
    assert_int_equal(pt_intake_create_charge_nowait(&in, lane[1], "o1", queued, strlen(queued),
                                                    1700000000000, &r[1]),
                     PT_EAGAIN);
    assert_true(pt_store_commit_deferred(lane[1])); /* it saw the batch */
    assert_int_equal(pt_store_writer_flush(writer, &ticket[1]), PT_OK);
    assert_true(ticket[0].done); /* the same batch */
    pt_intake_settle(&in, pt_store_writer_flush(writer, &ticket[0]), &r[0]);
    assert_int_equal(r[0].status, 202);
    pt_store_defer_commit(lane[1], NULL);
    /* The worker's turn: the online charge, two commits of its own. */
    pt_intake_create_charge(&in, lane[1], "o1", queued, strlen(queued), 1700000000000, &r[1]);
    assert_int_equal(r[1].status, 201);
    assert_int_equal(sends, 1);
    assert_int_equal(count("charges"), 2);
    for (int i = 0; i < 2; i++) {
        pt_reply_free(&r[i]);
        pt_store_close(lane[i]);
    }
    free(forced);
    free((void *)queued);
}

/* The gateway comes up while a request on the event loop (nowait) is
 * being decided: it is asked once, so the request is queued (unreachable
 * when asked) and never sent from the event loop with its first commit
 * still in a batch. */
static void test_nowait_gateway_coming_up_is_not_sent_here(void **state)
{
    (void)state;
    enable_online();
    online = 0;
    comes_up = 2; /* the first question: down; any later one: up */
    struct pt_store *lane = open_lane();
    struct pt_store_commit ticket;
    pt_store_defer_commit(lane, &ticket);
    struct pt_reply r;
    const char *body = charge_body("O-COMING-UP", 100, NULL);
    int rc =
        pt_intake_create_charge_nowait(&in, lane, "up1", body, strlen(body), 1700000000000, &r);
    assert_int_equal(rc, PT_OK);
    assert_int_equal(sends, 0);
    if (pt_store_commit_deferred(lane))
        pt_intake_settle(&in, pt_store_writer_flush(writer, &ticket), &r);
    assert_int_equal(r.status, 202);
    pt_store_defer_commit(lane, NULL);
    pt_reply_free(&r);
    pt_store_close(lane);
    comes_up = 0;
    struct pt_charge c;
    assert_int_equal(pt_store_charge_get(st, "O-COMING-UP", &c), PT_OK);
    assert_int_equal(c.state, PT_STATE_INIT);
}

/* A batch nobody's work is in - a request that took its key and then
 * rolled back (here: it needs the gateway, so not the event loop's) -
 * ends without writing the WAL: a COMMIT of it wrote the pages its
 * savepoint had touched, and synced them. */
static void test_rolled_back_batch_writes_nothing(void **state)
{
    (void)state;
    pt_test_sqlite_only("the writer's batches (group commit) are the SQLite store's");
    enable_online();
    char wal[320];
    snprintf(wal, sizeof wal, "%s-wal", path);
    struct pt_reply r;
    post("warm", charge_body("O-WARM", 100, NULL), &r); /* the WAL exists */
    pt_reply_free(&r);
    struct stat before, after;
    assert_int_equal(stat(wal, &before), 0);
    struct pt_store *lane = open_lane();
    struct pt_store_commit ticket;
    pt_store_defer_commit(lane, &ticket);
    const char *body = charge_body("O-ONLINE", 100, NULL);
    assert_int_equal(
        pt_intake_create_charge_nowait(&in, lane, "online", body, strlen(body), 1700000000000, &r),
        PT_EAGAIN);
    assert_false(pt_store_commit_deferred(lane)); /* alone in its batch */
    pt_store_defer_commit(lane, NULL);
    pt_store_close(lane);
    assert_int_equal(stat(wal, &after), 0);
    assert_int_equal(after.st_size, before.st_size);
    assert_int_equal(count("idempotency_keys"), 1);
}

/* Threads committing at once share batches (the turn is handed on while
 * others wait), and every one of them gets its own charge. */
struct storm_arg {
    int lane, n, ok;
};

static void *storm_main(void *p)
{
    struct storm_arg *a = p;
    char key[32], order[32];
    struct pt_store *s = open_lane();
    for (int i = 0; i < a->n; i++) {
        struct pt_reply r;
        snprintf(key, sizeof key, "th-%d-%d", a->lane, i);
        snprintf(order, sizeof order, "O-TH-%d-%d", a->lane, i);
        const char *body = charge_body_r(order);
        pt_intake_create_charge(&in, s, key, body, strlen(body), 1700000000000, &r);
        a->ok += r.status == 202;
        pt_reply_free(&r);
        free((void *)body);
    }
    pt_store_close(s);
    return NULL;
}

static void test_threads_share_batches(void **state)
{
    (void)state;
    pt_test_sqlite_only("the writer's batches (group commit) are the SQLite store's");
    pt_test_skip_without_threads();
    cfg.offline_max_count = 100000;
    cfg.offline_limits[0].max_total = 1000000000;
    enum { THREADS = 6, EACH = 60 };
    pthread_t th[THREADS];
    struct storm_arg a[THREADS];
    uint64_t before = pt_store_writer_batches(writer);
    for (int i = 0; i < THREADS; i++) {
        a[i] = (struct storm_arg){.lane = i, .n = EACH};
        assert_int_equal(pthread_create(&th[i], NULL, storm_main, &a[i]), 0);
    }
    int ok = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        ok += a[i].ok;
    }
    uint64_t batches = pt_store_writer_batches(writer) - before;
    assert_int_equal(ok, THREADS * EACH);
    assert_int_equal(count("charges"), THREADS * EACH);
    assert_int_equal(count("charge_events"), THREADS * EACH);
    /* Fewer commits than requests: they were grouped. */
    assert_true(batches < (uint64_t)(THREADS * EACH));
    print_message("      %d requests in %llu batches\n", THREADS * EACH,
                  (unsigned long long)batches);
}

/*
 * store.fallback "local" (SPEC 16), the lane's side: a charge queued in the
 * lane's own store while the store server was unreachable, and not moved
 * yet, is the lane's - a retry of its key is the lane's answer (not a new
 * request on the server), and it is read and canceled there.  Canceled, it
 * is never moved (never sent); moved, the server's charge is the one.
 */
static void test_fallback_lane_answers_for_its_own_charges(void **state)
{
    (void)state;
    char lpath[PT_STORE_PATH_MAX];
    struct pt_store *local = pt_test_local_store(dir, lpath);
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    in.fallback = (struct pt_intake_fallback){local, &mu};
    const int64_t now = 1700000000000;
    struct pt_reply r, first;
    char body[1024];
    snprintf(body, sizeof body, "%s", charge_body("FB-1", 700, NULL));
    pt_intake_create_charge_locally(&in, "k-1", body, strlen(body), now, &first);
    assert_int_equal(first.status, 202);

    /* The server is back, the move has not run: the lane's record answers. */
    post("k-1", body, &r);
    assert_int_equal(r.status, 202);
    assert_true(r.replayed);
    assert_int_equal(r.len, first.len);
    assert_memory_equal(r.body, first.body, first.len);
    pt_reply_free(&r);
    post("k-1", charge_body("FB-1", 800, NULL), &r);
    assert_int_equal(r.status, 422);
    assert_string_equal(err_code(&r), "idempotency_key_reused");
    pt_reply_free(&r);
    assert_int_equal(count("charges"), 0);
    assert_int_equal(count("idempotency_keys"), 0);
    struct pt_charge c;
    assert_int_equal(pt_intake_local_charge(&in, "FB-1", &c), PT_LOCAL_OWN);
    assert_int_equal(c.state, PT_STATE_INIT);

    /* Canceled on the lane (the server reachable or not): stays there. */
    pt_intake_cancel(&in, st, "FB-1", "c-1", "", 0, now + 1, &r);
    assert_int_equal(r.status, 200);
    pt_reply_free(&r);
    pt_intake_cancel(&in, NULL, "FB-1", "c-1", "", 0, now + 2, &r);
    assert_int_equal(r.status, 200);
    assert_true(r.replayed);
    pt_reply_free(&r);
    assert_int_equal(pt_intake_local_charge(&in, "FB-1", &c), PT_LOCAL_SHADOW);
    assert_int_equal(c.state, PT_STATE_CANCELED);
    int moved = -1;
    assert_int_equal(pt_fallback_move(local, st, now + 3, &moved), PT_OK);
    assert_int_equal(moved, 0);
    assert_int_equal(count("charges"), 0);
    /* Another lane takes the order_id on the server since: the lane's
     * cancel key still answers what it answered, and cancels nothing there. */
    struct pt_reply lane_answer;
    pt_intake_cancel(&in, NULL, "FB-1", "c-1", "", 0, now + 3, &lane_answer);
    struct pt_charge other;
    memset(&other, 0, sizeof other);
    snprintf(other.order_id, sizeof other.order_id, "FB-1");
    strcpy(other.gateway, "stripe");
    strcpy(other.method, "card_on_file");
    strcpy(other.currency, "USD");
    strcpy(other.payment_method, "pm_card_visa");
    other.amount = 4321;
    other.state = PT_STATE_INIT;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_store_charge_insert(st, &other, now + 3), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    pt_intake_cancel(&in, st, "FB-1", "c-1", "", 0, now + 3, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.len, lane_answer.len);
    assert_memory_equal(r.body, lane_answer.body, r.len);
    pt_reply_free(&r);
    pt_reply_free(&lane_answer);
    assert_int_equal(pt_store_charge_get(st, "FB-1", &other), PT_OK);
    assert_int_equal(other.state, PT_STATE_INIT); /* the other lane's charge, untouched */

    /* Moved: the server's charge is the one, canceled there. */
    snprintf(body, sizeof body, "%s", charge_body("FB-2", 900, NULL));
    pt_reply_free(&first);
    pt_intake_create_charge_locally(&in, "k-2", body, strlen(body), now + 4, &first);
    assert_int_equal(first.status, 202);
    assert_int_equal(pt_fallback_move(local, st, now + 5, &moved), PT_OK);
    assert_int_equal(moved, 1);
    assert_int_equal(pt_intake_local_charge(&in, "FB-2", &c), PT_LOCAL_NONE);
    pt_intake_cancel(&in, NULL, "FB-2", "c-2", "", 0, now + 6, &r);
    assert_int_equal(r.status, 503); /* on the server, which is not there */
    pt_reply_free(&r);
    pt_intake_cancel(&in, st, "FB-2", "c-2", "", 0, now + 7, &r);
    assert_int_equal(r.status, 200);
    pt_reply_free(&r);
    assert_int_equal(pt_store_charge_get(st, "FB-2", &c), PT_OK);
    assert_int_equal(c.state, PT_STATE_CANCELED);
    post("k-2", body, &r); /* the key moved with it: the same bytes */
    assert_int_equal(r.status, 202);
    assert_memory_equal(r.body, first.body, first.len);
    pt_reply_free(&r);
    pt_reply_free(&first);

    /* Being moved when the server's COMMIT went silent (the mark left on
     * the copy): the server may hold it, so it is never canceled on the
     * lane - 503 while the server has no such charge or cannot be asked,
     * canceled there once it has; the next move then only marks it. */
    snprintf(body, sizeof body, "%s", charge_body("FB-3", 300, NULL));
    pt_intake_create_charge_locally(&in, "k-3", body, strlen(body), now + 8, &first);
    assert_int_equal(first.status, 202);
    pt_reply_free(&first);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(lpath, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "UPDATE charges SET error_code = '" PT_FALLBACK_MOVING
                                  "' WHERE order_id = 'FB-3'",
                                  0, 0, 0),
                     SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(pt_intake_local_charge(&in, "FB-3", &c), PT_LOCAL_SHADOW);
#ifdef PT_WITH_PG
    /* A pass while the server is gone leaves the mark alone (the earlier
     * COMMIT may have gone through). */
    struct pt_store_options dead = {.backend = PT_STORE_POSTGRESQL,
                                    .dsn = "postgresql://payterm@/x?host=/nonexistent&port=5432",
                                    .connect_later = 1};
    struct pt_store *gone;
    char err[512];
    assert_int_equal(pt_store_open(&dead, &gone, err, sizeof err), PT_OK);
    assert_int_equal(pt_fallback_move(local, gone, now + 9, &moved), PT_EIO);
    pt_store_close(gone);
    assert_int_equal(pt_intake_local_charge(&in, "FB-3", &c), PT_LOCAL_SHADOW);
    assert_true(pt_fallback_is_moving(&c));
#endif
    pt_intake_cancel(&in, st, "FB-3", "c-3", "", 0, now + 9, &r);
    assert_int_equal(r.status, 503); /* the server has no FB-3 (yet) */
    pt_reply_free(&r);
    pt_intake_cancel(&in, NULL, "FB-3", "c-3", "", 0, now + 9, &r);
    assert_int_equal(r.status, 503); /* the server cannot be asked */
    pt_reply_free(&r);
    assert_int_equal(pt_intake_local_charge(&in, "FB-3", &c), PT_LOCAL_SHADOW);
    assert_int_equal(c.state, PT_STATE_INIT); /* not canceled on the lane */
    struct pt_charge there = c;               /* the server's copy: its COMMIT did go through */
    there.id = 0;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_store_charge_insert(st, &there, now + 10), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    pt_intake_cancel(&in, st, "FB-3", "c-3", "", 0, now + 11, &r);
    assert_int_equal(r.status, 200);
    pt_reply_free(&r);
    assert_int_equal(pt_fallback_move(local, st, now + 12, &moved), PT_OK);
    assert_int_equal(moved, 1);
    assert_int_equal(pt_store_charge_get(st, "FB-3", &c), PT_OK);
    assert_int_equal(c.state, PT_STATE_CANCELED); /* one charge, canceled, never sent */
    assert_int_equal(pt_intake_local_charge(&in, "FB-3", &c), PT_LOCAL_NONE);
    in.fallback = (struct pt_intake_fallback){0};
    pt_store_close(local);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_key_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_body_names_fields_and_is_stored, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_new_queued_charge_is_one_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queued_replayed_and_conflicts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_key_same_order_compares_every_parameter, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_offline_limits_release_the_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alipay_currency_rule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cross_border_alipay_not_reconciled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reconcile_key_given_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_amount_in_the_gateways_units, setup, teardown),
        cmocka_unit_test_setup_teardown(test_online_outcomes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recovered_key_keeps_one_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_sent_queues_or_refuses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_use_while_first_runs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_full_is_503_and_nothing_half_written, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_healthz_follows_a_failing_disk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_and_review, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nul_in_string_is_refused_and_does_not_collide, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_amount_must_be_a_plain_integer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_utf8_is_refused_with_a_clean_reply, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_keys_are_named_at_any_depth, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cancel_and_review_bodies_are_strict, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wechat_barcode_needs_the_apiv2_key, setup, teardown),
    };
    pt_test_disk_install(); /* before the first database is opened */
    int failed = cmocka_run_group_tests_name("alone", tests, NULL, NULL);
    with_writer = 1;
    failed += cmocka_run_group_tests_name("through_the_writer", tests, NULL, NULL);
    const struct CMUnitTest batches[] = {
        cmocka_unit_test_setup_teardown(test_batch_answers_each_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_same_key_and_same_order_storms, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_offline_limits_at_the_boundary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_commit_failure_fails_every_member, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_batch_request_handed_to_a_worker, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rolled_back_batch_writes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nowait_gateway_coming_up_is_not_sent_here, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_threads_share_batches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fallback_lane_answers_for_its_own_charges, setup,
                                        teardown),
    };
    failed += cmocka_run_group_tests_name("batches", batches, NULL, NULL);
    return failed;
}
