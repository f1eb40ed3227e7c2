/*
 * test_refunds.c - POST /v1/charges/{order_id}/refunds without a socket
 * (SPEC 5a): the outcome table, the key rules, the online path through a
 * fake sync engine, the data layer's "never more than the charge", 16
 * concurrent refunds under different keys, and the fulfilment events.
 */
#include "testutil.h"

#include "charges.h"
#include "err.h"
#include "intake.h"
#include "refunds.h"
#include "store.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[256], path[300];
static struct pt_store *st;
static struct pt_store_writer *writer;
static struct pt_config cfg;
static struct pt_intake in;
static const int64_t t0 = 1700000000000;

/* ---- a fake sync engine: refunds answered by amount ------------------------------- */

static int online, not_sent, sends;

static int fake_reachable(void *ctx, const char *gw)
{
    (void)ctx;
    (void)gw;
    return online;
}

static int fake_claim(void *ctx, struct pt_store *s, struct pt_refund *r, int64_t now)
{
    (void)ctx;
    return pt_refund_transition(s, r, PT_STATE_PROCESSING, NULL, "send", "sync", NULL, now);
}

/* Amounts ending in 51 are refused, 52 are processed later, 53 lose the answer. */
static void fake_send(void *ctx, const struct pt_charge *c, const struct pt_refund *r,
                      struct pt_online_send *out)
{
    (void)ctx;
    (void)c;
    memset(out, 0, sizeof *out);
    if (not_sent) {
        out->verdict = PT_ENOTSENT;
        return;
    }
    sends++;
    out->verdict = r->amount % 100 == 53 ? PT_ENOANSWER : PT_OK;
    out->res.outcome = r->amount % 100 == 51   ? PT_OUTCOME_DECLINED
                       : r->amount % 100 == 52 ? PT_OUTCOME_PENDING
                                               : PT_OUTCOME_SUCCESS;
    snprintf(out->res.trade_no, sizeof out->res.trade_no, "re_%s", r->refund_id);
}

static int fake_settle(void *ctx, struct pt_store *s, const struct pt_charge *c,
                       struct pt_refund *r, const struct pt_online_send *sent)
{
    (void)ctx;
    (void)c;
    enum pt_state to = sent->verdict == PT_ENOTSENT               ? PT_STATE_INIT
                       : sent->verdict != PT_OK                   ? PT_STATE_UNKNOWN
                       : sent->res.outcome == PT_OUTCOME_DECLINED ? PT_STATE_FAILED
                       : sent->res.outcome == PT_OUTCOME_PENDING  ? PT_STATE_PENDING
                                                                  : PT_STATE_SUCCESS;
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    if (sent->res.trade_no[0])
        p.gateway_trade_no = sent->res.trade_no;
    if (to == PT_STATE_FAILED) {
        p.error_code = "ACQ.TRADE_STATUS_ERROR";
        p.error_message = "refused by the gateway";
    }
    int rc = pt_refund_transition(s, r, to, &p, "answer", "sync", NULL, t0);
    return rc == PT_EEXIST ? PT_OK : rc;
}

static void enable_online(void)
{
    in.online.reachable = fake_reachable;
    in.online.refund_claim = fake_claim;
    in.online.refund_send = fake_send;
    in.online.refund_settle = fake_settle;
    online = 1;
}

/* ---- fixture ------------------------------------------------------------------------- */

/* A SUCCESS charge of amount in cur on gateway gw. */
static void paid_charge_in(const char *order, const char *gw, const char *cur, int64_t amount)
{
    struct pt_charge c;
    memset(&c, 0, sizeof c);
    snprintf(c.order_id, sizeof c.order_id, "%s", order);
    snprintf(c.gateway, sizeof c.gateway, "%s", gw);
    snprintf(c.method, sizeof c.method, "%s",
             strcmp(gw, "stripe") == 0 ? "card_on_file" : "barcode");
    snprintf(c.currency, sizeof c.currency, "%s", cur);
    c.amount = amount;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_charge_create(st, &c, "test", t0), PT_OK);
    assert_int_equal(
        pt_charge_transition(st, &c, PT_STATE_PROCESSING, NULL, "send", "test", NULL, t0), PT_OK);
    assert_int_equal(pt_charge_transition(st, &c, PT_STATE_SUCCESS, NULL, "paid", "test", NULL, t0),
                     PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
}

/* A SUCCESS charge of amount on gateway gw (Stripe in USD, others in CNY). */
static void paid_charge(const char *order, const char *gw, int64_t amount)
{
    paid_charge_in(order, gw, strcmp(gw, "stripe") == 0 ? "USD" : "CNY", amount);
}

static int setup(void **state)
{
    (void)state;
    pt_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/r.db", dir);
    char err[512];
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    assert_int_equal(pt_test_writer_new(&o, &writer, err, sizeof err), PT_OK);
    pt_store_attach(st, writer);
    pt_config_defaults(&cfg);
    cfg.gw[pt_gateway_index("stripe")].configured = 1;
    cfg.gw[pt_gateway_index("alipay")].configured = 1;
    cfg.max_amount = 1000000;
    in = (struct pt_intake){.cfg = &cfg,
                            .idem = {.ttl_ms = 86400000, .lock_timeout_ms = 60000, .instance = 7}};
    online = not_sent = sends = 0;
    paid_charge("O-PAID", "stripe", 1000);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pt_store_rollback(st); /* a failed case may leave its transaction (and the turn) */
    pt_store_close(st);
    pt_store_writer_destroy(writer);
    st = NULL;
    writer = NULL;
    pt_test_rmtree(dir);
    return 0;
}

static void refund(struct pt_store *s, const char *order, const char *key, const char *body,
                   struct pt_reply *r)
{
    pt_intake_refund(&in, s, order, key, body, body ? strlen(body) : 0, t0, r);
}

static const char *field(const struct pt_reply *r, const char *obj, const char *name)
{
    static char v[1024];
    cJSON *o = cJSON_Parse(r->body);
    const cJSON *x =
        obj ? cJSON_GetObjectItem(cJSON_GetObjectItem(o, obj), name) : cJSON_GetObjectItem(o, name);
    if (cJSON_IsString(x))
        snprintf(v, sizeof v, "%s", x->valuestring);
    else if (cJSON_IsNumber(x))
        snprintf(v, sizeof v, "%lld", (long long)x->valuedouble);
    else
        v[0] = '\0';
    cJSON_Delete(o);
    return v;
}

static int64_t charge_refunded(const char *order, int *count)
{
    struct pt_charge c;
    assert_int_equal(pt_store_charge_get(st, order, &c), PT_OK);
    if (count)
        *count = c.refunds;
    return c.amount_refunded;
}

/* ---- cases ----------------------------------------------------------------------------- */

static void test_outcome_table_queued(void **state)
{
    (void)state;
    struct pt_reply r;
    refund(st, "O-PAID", "k1", "{\"refund_id\":\"R-1\",\"amount\":400,\"reason\":\"returned\"}",
           &r);
    assert_int_equal(r.status, 202);
    assert_string_equal(field(&r, NULL, "state"), "INIT");
    assert_string_equal(field(&r, NULL, "refund_id"), "R-1");
    assert_string_equal(field(&r, NULL, "currency"), "USD");
    assert_string_equal(field(&r, NULL, "amount"), "400");
    pt_reply_free(&r);

    /* The same key again: the stored answer, byte for byte. */
    struct pt_reply again;
    refund(st, "O-PAID", "k1", "{\"refund_id\":\"R-1\",\"amount\":400,\"reason\":\"returned\"}",
           &again);
    assert_int_equal(again.status, 202);
    assert_true(again.replayed);
    pt_reply_free(&again);

    /* The same refund_id under another key, same parameters: 200, the refund. */
    refund(st, "O-PAID", "k1b", "{\"refund_id\":\"R-1\",\"amount\":400,\"reason\":\"returned\"}",
           &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(field(&r, NULL, "refund_id"), "R-1");
    pt_reply_free(&r);
    /* ... other parameters: 409. */
    refund(st, "O-PAID", "k1c", "{\"refund_id\":\"R-1\",\"amount\":300}", &r);
    assert_int_equal(r.status, 409);
    assert_string_equal(field(&r, "error", "code"), "refund_id_conflict");
    pt_reply_free(&r);

    /* A second partial refund, then one that would exceed: 409 with what is left. */
    refund(st, "O-PAID", "k2", "{\"refund_id\":\"R-2\",\"amount\":500}", &r);
    assert_int_equal(r.status, 202);
    pt_reply_free(&r);
    refund(st, "O-PAID", "k3", "{\"refund_id\":\"R-3\",\"amount\":101}", &r);
    assert_int_equal(r.status, 409);
    assert_string_equal(field(&r, "error", "code"), "refund_exceeds_charge");
    assert_non_null(strstr(field(&r, "error", "message"), "100 USD left"));
    pt_reply_free(&r);
    /* No amount: everything left. */
    refund(st, "O-PAID", "k4", "{\"refund_id\":\"R-4\"}", &r);
    assert_int_equal(r.status, 202);
    assert_string_equal(field(&r, NULL, "amount"), "100");
    pt_reply_free(&r);
    refund(st, "O-PAID", "k5", "{\"refund_id\":\"R-5\"}", &r);
    assert_int_equal(r.status, 409);
    assert_string_equal(field(&r, "error", "code"), "refund_exceeds_charge");
    pt_reply_free(&r);

    int n = 0;
    assert_int_equal(charge_refunded("O-PAID", &n), 0); /* none SUCCESS yet */
    assert_int_equal(n, 3);
}

/* SPEC 18: a refund the gateway cannot represent in its own units (Stripe:
 * MGA in whole ariary, three-decimal amounts ending in 0) is a 400 naming
 * amount, and nothing is stored; the same refund in units it takes goes. */
static void test_amount_in_the_gateways_units(void **state)
{
    (void)state;
    struct pt_reply r;
    paid_charge_in("O-MGA", "stripe", "MGA", 100000);
    paid_charge_in("O-KWD", "stripe", "KWD", 5000);
    static const struct {
        const char *order, *body, *why;
    } refused[] = {
        {"O-MGA", "{\"refund_id\":\"R-MGA-1\",\"amount\":1050}",
         "amount: 1050 MGA cannot be sent to stripe"},
        {"O-KWD", "{\"refund_id\":\"R-KWD-1\",\"amount\":1235}",
         "amount: 1235 KWD cannot be sent to stripe"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        refund(st, refused[i].order, "k-units", refused[i].body, &r);
        assert_int_equal(r.status, 400);
        assert_string_equal(field(&r, "error", "code"), "invalid_request");
        const char *msg = field(&r, "error", "message");
        assert_non_null(strstr(msg, "amount"));
        assert_non_null(strstr(msg, refused[i].why));
        assert_non_null(strstr(msg, "stripe"));
        pt_reply_free(&r);
        int n = -1;
        charge_refunded(refused[i].order, &n);
        assert_int_equal(n, 0);
    }
    refund(st, "O-MGA", "k-mga-2", "{\"refund_id\":\"R-MGA-2\",\"amount\":1000}", &r);
    assert_int_equal(r.status, 202);
    pt_reply_free(&r);
    refund(st, "O-KWD", "k-kwd-2", "{\"refund_id\":\"R-KWD-2\",\"amount\":1230}", &r);
    assert_int_equal(r.status, 202);
    pt_reply_free(&r);
}

static void test_refused_requests(void **state)
{
    (void)state;
    struct pt_reply r;
    refund(st, "O-NONE", "k1", "{\"refund_id\":\"R-1\"}", &r);
    assert_int_equal(r.status, 404);
    assert_string_equal(field(&r, "error", "code"), "not_found");
    pt_reply_free(&r);

    /* A charge that is not SUCCESS. */
    struct pt_charge c;
    memset(&c, 0, sizeof c);
    strcpy(c.order_id, "O-QUEUED");
    strcpy(c.gateway, "stripe");
    strcpy(c.method, "card_on_file");
    strcpy(c.currency, "USD");
    c.amount = 500;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_charge_create(st, &c, "test", t0), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    refund(st, "O-QUEUED", "k2", "{\"refund_id\":\"R-2\"}", &r);
    assert_int_equal(r.status, 409);
    assert_string_equal(field(&r, "error", "code"), "charge_not_refundable");
    pt_reply_free(&r);

    /* Every bad field named at once. */
    refund(st, "O-PAID", "k3",
           "{\"refund_id\":\"bad id\",\"amount\":1.5,\"colour\":\"red\",\"offline\":\"x\"}", &r);
    assert_int_equal(r.status, 400);
    const char *m = field(&r, "error", "message");
    assert_non_null(strstr(m, "refund_id:"));
    assert_non_null(strstr(m, "amount:"));
    assert_non_null(strstr(m, "colour: unknown field"));
    assert_non_null(strstr(m, "offline:"));
    pt_reply_free(&r);
    refund(st, "O-PAID", "k4", NULL, &r);
    assert_int_equal(r.status, 400);
    pt_reply_free(&r);
    refund(st, "O-PAID", NULL, "{\"refund_id\":\"R-9\"}", &r);
    assert_int_equal(r.status, 400);
    assert_string_equal(field(&r, "error", "code"), "idempotency_key_missing");
    pt_reply_free(&r);

    /* A refund_id is unique across charges. */
    paid_charge("O-OTHER", "stripe", 300);
    refund(st, "O-PAID", "k5", "{\"refund_id\":\"R-X\",\"amount\":100}", &r);
    assert_int_equal(r.status, 202);
    pt_reply_free(&r);
    refund(st, "O-OTHER", "k6", "{\"refund_id\":\"R-X\",\"amount\":100}", &r);
    assert_int_equal(r.status, 409);
    assert_string_equal(field(&r, "error", "code"), "refund_id_conflict");
    pt_reply_free(&r);
    int64_t n = -1;
    assert_int_equal(pt_store_count(st, "charges", &n), PT_OK);
    assert_int_equal(n, 3);
}

static void test_online_outcomes(void **state)
{
    (void)state;
    enable_online();
    struct pt_reply r;
    refund(st, "O-PAID", "k1", "{\"refund_id\":\"R-OK\",\"amount\":300}", &r);
    assert_int_equal(r.status, 201);
    assert_string_equal(field(&r, NULL, "state"), "SUCCESS");
    assert_string_equal(field(&r, NULL, "gateway_refund_no"), "re_R-OK");
    pt_reply_free(&r);
    int n = 0;
    assert_int_equal(charge_refunded("O-PAID", &n), 300);
    assert_int_equal(n, 1);

    refund(st, "O-PAID", "k2", "{\"refund_id\":\"R-NO\",\"amount\":451}", &r);
    assert_int_equal(r.status, 402);
    assert_string_equal(field(&r, NULL, "state"), "FAILED");
    assert_string_equal(field(&r, "error", "code"), "ACQ.TRADE_STATUS_ERROR");
    pt_reply_free(&r);
    /* A FAILED refund does not count against the charge: 700 are left. */
    refund(st, "O-PAID", "k3", "{\"refund_id\":\"R-LATER\",\"amount\":252}", &r);
    assert_int_equal(r.status, 202);
    assert_string_equal(field(&r, NULL, "state"), "PENDING");
    pt_reply_free(&r);
    refund(st, "O-PAID", "k4", "{\"refund_id\":\"R-LOST\",\"amount\":153}", &r);
    assert_int_equal(r.status, 202);
    assert_string_equal(field(&r, NULL, "state"), "UNKNOWN");
    pt_reply_free(&r);
    refund(st, "O-PAID", "k5", "{\"refund_id\":\"R-MORE\",\"amount\":296}", &r);
    assert_int_equal(r.status, 409); /* 300 + 252 + 153 = 705: 295 left */
    pt_reply_free(&r);
    assert_int_equal(sends, 4);

    /* Provably not sent: prefer_online waits in the queue, require_online fails. */
    not_sent = 1;
    refund(st, "O-PAID", "k6", "{\"refund_id\":\"R-Q\",\"amount\":100}", &r);
    assert_int_equal(r.status, 202);
    assert_string_equal(field(&r, NULL, "state"), "INIT");
    pt_reply_free(&r);
    refund(st, "O-PAID", "k7",
           "{\"refund_id\":\"R-MUST\",\"amount\":100,\"offline\":\"require_online\"}", &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(field(&r, "error", "code"), "offline_not_allowed");
    pt_reply_free(&r);
    /* Withdrawn: nothing kept, the refund_id and the key are free again. */
    struct pt_refund rf;
    assert_int_equal(pt_store_refund_get(st, "R-MUST", &rf), PT_ENOTFOUND);
    int nr = 0;
    charge_refunded("O-PAID", &nr);
    assert_int_equal(nr, 5); /* R-OK, R-NO, R-LATER, R-LOST, R-Q */
    refund(st, "O-PAID", "k7",
           "{\"refund_id\":\"R-MUST\",\"amount\":100,\"offline\":\"require_online\"}", &r);
    assert_int_equal(r.status, 503); /* still unreachable: the same answer, not a replay */
    assert_false(r.replayed);
    pt_reply_free(&r);
    not_sent = 0; /* the gateway is back: the same key refunds */
    refund(st, "O-PAID", "k7",
           "{\"refund_id\":\"R-MUST\",\"amount\":100,\"offline\":\"require_online\"}", &r);
    assert_int_equal(r.status, 201);
    assert_string_equal(field(&r, NULL, "state"), "SUCCESS");
    pt_reply_free(&r);

    /* Unreachable and require_online: 503, nothing recorded. */
    online = 0;
    refund(st, "O-PAID", "k8",
           "{\"refund_id\":\"R-DOWN\",\"amount\":50,\"offline\":\"require_online\"}", &r);
    assert_int_equal(r.status, 503);
    pt_reply_free(&r);
    assert_int_equal(pt_store_refund_get(st, "R-DOWN", &rf), PT_ENOTFOUND);
}

/* A refund of a charge still in progress is 409 and not stored: once the
 * charge has succeeded, the same key refunds it. */
static void test_not_yet_refundable_is_not_stored(void **state)
{
    (void)state;
    struct pt_charge c;
    memset(&c, 0, sizeof c);
    strcpy(c.order_id, "O-LATER");
    strcpy(c.gateway, "stripe");
    strcpy(c.method, "card_on_file");
    strcpy(c.currency, "USD");
    c.amount = 500;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_charge_create(st, &c, "test", t0), PT_OK);
    assert_int_equal(
        pt_charge_transition(st, &c, PT_STATE_PROCESSING, NULL, "send", "test", NULL, t0), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    struct pt_reply r;
    refund(st, "O-LATER", "k-later", "{\"refund_id\":\"R-LATER\"}", &r);
    assert_int_equal(r.status, 409);
    assert_string_equal(field(&r, "error", "code"), "charge_not_refundable");
    pt_reply_free(&r);
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_charge_transition(st, &c, PT_STATE_SUCCESS, NULL, "paid", "test", NULL, t0),
                     PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    refund(st, "O-LATER", "k-later", "{\"refund_id\":\"R-LATER\"}", &r);
    assert_int_equal(r.status, 202);
    assert_false(r.replayed);
    assert_string_equal(field(&r, NULL, "amount"), "500");
    pt_reply_free(&r);
}

static void test_data_layer_never_overdraws(void **state)
{
    (void)state;
    struct pt_charge c;
    assert_int_equal(pt_store_charge_get(st, "O-PAID", &c), PT_OK);
    struct pt_refund r;
    memset(&r, 0, sizeof r);
    r.charge_id = c.id;
    r.amount = 600;
    strcpy(r.refund_id, "D-1");
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_refund_create(st, &r, "test", t0), PT_OK);
    /* refund_id is unique forever (while there is room, the UNIQUE
     * constraint is what refuses it). */
    struct pt_refund r3 = r;
    r3.amount = 1;
    assert_int_equal(pt_refund_create(st, &r3, "test", t0), PT_EEXIST);
    struct pt_refund r2 = r;
    strcpy(r2.refund_id, "D-2");
    r2.amount = 401;
    assert_int_equal(pt_refund_create(st, &r2, "test", t0), PT_ERANGE);
    r2.amount = 400;
    assert_int_equal(pt_refund_create(st, &r2, "test", t0), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    /* A FAILED refund gives its amount back. */
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_store_refund_get(st, "D-2", &r2), PT_OK);
    assert_int_equal(
        pt_refund_transition(st, &r2, PT_STATE_PROCESSING, NULL, "send", "test", NULL, t0), PT_OK);
    assert_int_equal(
        pt_refund_transition(st, &r2, PT_STATE_FAILED, NULL, "declined", "test", NULL, t0), PT_OK);
    /* Final is final. */
    assert_int_equal(
        pt_refund_transition(st, &r2, PT_STATE_SUCCESS, NULL, "late", "test", NULL, t0), PT_ESTATE);
    int64_t left = 0;
    assert_int_equal(pt_store_refund_left(st, c.id, &left), PT_OK);
    assert_int_equal(left, 400);
    assert_int_equal(pt_store_commit(st), PT_OK);
    /* Not a SUCCESS charge: refused by the data layer too. */
    struct pt_charge q;
    memset(&q, 0, sizeof q);
    strcpy(q.order_id, "O-INIT");
    strcpy(q.gateway, "stripe");
    strcpy(q.method, "card_on_file");
    strcpy(q.currency, "USD");
    q.amount = 100;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_charge_create(st, &q, "test", t0), PT_OK);
    struct pt_refund r4 = r;
    strcpy(r4.refund_id, "D-4");
    r4.charge_id = q.id;
    r4.amount = 10;
    assert_int_equal(pt_refund_create(st, &r4, "test", t0), PT_ESTATE);
    assert_int_equal(pt_store_commit(st), PT_OK);
}

/* 16 refunds of 300 on a 1000 charge, each from its own thread and
 * connection under its own key: exactly three fit. */
struct lane {
    int i;
    int status;
};

static void *lane_main(void *p)
{
    struct lane *l = p;
    char err[256], key[32], body[96];
    struct pt_store *s;
    struct pt_store_options o = {.path = path};
    if (pt_test_store_open(&o, &s, err, sizeof err) != PT_OK)
        return NULL;
    pt_store_attach(s, writer);
    snprintf(key, sizeof key, "storm-%d", l->i);
    snprintf(body, sizeof body, "{\"refund_id\":\"S-%d\",\"amount\":300}", l->i);
    struct pt_reply r;
    pt_intake_refund(&in, s, "O-PAID", key, body, strlen(body), t0, &r);
    l->status = r.status;
    pt_reply_free(&r);
    pt_store_close(s);
    return NULL;
}

static void test_sixteen_concurrent_refunds_never_exceed(void **state)
{
    (void)state;
    pt_test_skip_without_threads();
    enum { N = 16 };
    pthread_t t[N];
    struct lane l[N];
    for (int i = 0; i < N; i++) {
        l[i] = (struct lane){.i = i};
        assert_int_equal(pthread_create(&t[i], NULL, lane_main, &l[i]), 0);
    }
    int accepted = 0, refused = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        accepted += l[i].status == 202;
        refused += l[i].status == 409;
    }
    assert_int_equal(accepted, 3);
    assert_int_equal(refused, N - 3);
    int64_t left = -1;
    struct pt_charge c;
    assert_int_equal(pt_store_charge_get(st, "O-PAID", &c), PT_OK);
    assert_int_equal(pt_store_refund_left(st, c.id, &left), PT_OK);
    assert_int_equal(left, 100);
    assert_int_equal(c.refunds, 3);
}

static void test_events_once_per_refund(void **state)
{
    (void)state;
    enable_online();
    struct pt_reply r;
    refund(st, "O-PAID", "k1", "{\"refund_id\":\"E-1\",\"amount\":250}", &r);
    assert_int_equal(r.status, 201);
    pt_reply_free(&r);
    refund(st, "O-PAID", "k2", "{\"refund_id\":\"E-2\",\"amount\":351}", &r);
    assert_int_equal(r.status, 402);
    pt_reply_free(&r);
    struct pt_event_row rows[8];
    int n = 0;
    assert_int_equal(pt_store_events_list(st, 0, 8, rows, &n), PT_OK);
    /* The charge's own success event, then one per final refund. */
    assert_int_equal(n, 3);
    assert_string_equal(rows[1].type, "refund.succeeded");
    assert_string_equal(rows[2].type, "refund.failed");
    cJSON *p = cJSON_Parse(rows[1].payload);
    assert_non_null(p);
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(p, "refund"), "refund_id")->valuestring, "E-1");
    /* The charge as it is after the refund. */
    assert_int_equal(
        (int)cJSON_GetObjectItem(cJSON_GetObjectItem(p, "charge"), "amount_refunded")->valuedouble,
        250);
    cJSON_Delete(p);
    pt_event_rows_free(rows, n);
    /* A repeated SUCCESS does not emit again. */
    struct pt_refund rf;
    assert_int_equal(pt_store_refund_get(st, "E-1", &rf), PT_OK);
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(
        pt_refund_transition(st, &rf, PT_STATE_SUCCESS, NULL, "again", "test", NULL, t0),
        PT_EEXIST);
    assert_int_equal(pt_store_commit(st), PT_OK);
    assert_int_equal(pt_store_events_list(st, 0, 8, rows, &n), PT_OK);
    assert_int_equal(n, 3);
    pt_event_rows_free(rows, n);
    /* The audit trail names the refund. */
    struct pt_audit_row a[16];
    int na = 0;
    struct pt_charge c;
    assert_int_equal(pt_store_charge_get(st, "O-PAID", &c), PT_OK);
    assert_int_equal(pt_store_audit_list(st, c.id, 16, a, &na), PT_OK);
    int refund_rows = 0;
    for (int i = 0; i < na; i++)
        refund_rows += strstr(a[i].cause, "refund") != NULL || strcmp(a[i].cause, "send") == 0;
    assert_true(refund_rows >= 2);
}

/* A 2C2P refund (SPEC 5a): without the Payment Maintenance keys a clear
 * 409 naming them (before: "use the merchant portal" whatever the
 * configuration); with them, accepted.  A gateway without refund keys is
 * never sent by the keyed online path: without the engine's refund_now it
 * is queued, and the drain keeps the ordering rule. */
static void test_2c2p_needs_its_keys(void **state)
{
    (void)state;
    struct pt_gw_settings *g = &cfg.gw[pt_gateway_index("2c2p")];
    g->configured = 1;
    paid_charge_in("O-2C2P", "2c2p", "THB", 5000);
    enable_online();
    struct pt_reply r;
    refund(st, "O-2C2P", "k1", "{\"refund_id\":\"C-1\",\"amount\":500}", &r);
    assert_int_equal(r.status, 409);
    assert_string_equal(field(&r, "error", "code"), "charge_not_refundable");
    const char *m = field(&r, "error", "message");
    assert_non_null(strstr(m, "gateways.2c2p.pm_endpoint"));
    assert_non_null(strstr(m, "gateways.2c2p.pm_private_key_file"));
    assert_non_null(strstr(m, "gateways.2c2p.pm_public_key_file"));
    pt_reply_free(&r);
    snprintf(g->refund_endpoint, sizeof g->refund_endpoint, "https://pm.example/action");
    snprintf(g->files[1], sizeof g->files[1], "/k/merchant.pem");
    snprintf(g->files[2], sizeof g->files[2], "/k/2c2p.cer");
    refund(st, "O-2C2P", "k2", "{\"refund_id\":\"C-1\",\"amount\":500}", &r);
    assert_int_equal(r.status, 202);
    assert_string_equal(field(&r, NULL, "state"), "INIT");
    pt_reply_free(&r);
    assert_int_equal(sends, 0); /* not through the keyed path */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_outcome_table_queued, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_amount_in_the_gateways_units, setup, teardown),
        cmocka_unit_test_setup_teardown(test_online_outcomes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_yet_refundable_is_not_stored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_data_layer_never_overdraws, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sixteen_concurrent_refunds_never_exceed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_events_once_per_refund, setup, teardown),
        cmocka_unit_test_setup_teardown(test_2c2p_needs_its_keys, setup, teardown),
    };
    return cmocka_run_group_tests_name("refunds", tests, NULL, NULL);
}
