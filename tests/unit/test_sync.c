/*
 * test_sync.c - the sync engine against a fake Stripe behind a fake
 * transport: every transport verdict (not sent, sent without an answer,
 * answered), queries, resends inside the window, review after max_attempts,
 * offline expiry, recovery of an interrupted send, queued runs, and
 * notifications (duplicate, forged, amount mismatch).
 *
 * The fake gateway keeps its own ledger keyed by Idempotency-Key, like
 * Stripe, and counts captures per order: the assertion that matters is
 * "exactly one capture per order".  The clock is ours, so backoff is tested
 * by moving time, not by sleeping.
 */
#include "testutil.h"

#include "charges.h"
#include "config.h"
#include "config_load.h"
#include "crypto.h"
#include "err.h"
#include "gateway.h"
#include "gateways/stripe.h"
#include "gw_config.h"
#include "log.h"
#include "metrics.h"
#include "store.h"
#include "sync.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the fake world ----------------------------------------------------------------- */

static int64_t clock_ms = 1790000000000;

enum fault { F_NONE = 0, F_NOT_SENT, F_DROP_BEFORE, F_DROP_AFTER, F_HTTP500, F_HTTP500_BEFORE };

#define MAX_PI 256
static struct {
    char order[65];
    char id[32];
    int64_t amount;
    int captures;
    int creates; /* POSTs seen for this key (replays included) */
} ledger[MAX_PI];
static int nledger;
static enum fault fault;
static int fault_count;              /* how many requests the fault applies to */
static int fault_skip;               /* requests let through before it applies */
static int in_flight, in_flight_max; /* charges PROCESSING at the last / busiest pay request */
static struct pt_store *st;
static struct pt_sync *sync_engine;
/* When set: a client cancels this order when the request number
 * cancel_at_request arrives (while the drain's run is out). */
static const char *cancel_order;
static int cancel_at_request;
static int64_t report_amount;       /* nonzero: the query reports this amount instead */
static const char *report_currency; /* non-NULL: answers report this currency instead */
static int requests;

static int64_t now_cb(void *ctx)
{
    (void)ctx;
    return clock_ms;
}

static int random_cb(void *ctx, void *buf, size_t len)
{
    (void)ctx;
    memset(buf, 0x5a, len);
    return PT_OK;
}

static int find_pi(const char *order)
{
    for (int i = 0; i < nledger; i++)
        if (strcmp(ledger[i].order, order) == 0)
            return i;
    return -1;
}

static void answer(struct pt_http_response *resp, int status, const char *body)
{
    resp->status = status;
    resp->body = strdup(body);
    resp->body_len = strlen(body);
}

static void pi_json(char *out, size_t cap, int i)
{
    snprintf(out, cap,
             "{\"id\":\"%s\",\"object\":\"payment_intent\",\"status\":\"%s\",\"amount\":%lld,"
             "\"currency\":\"%s\",\"metadata\":{\"order_id\":\"%s\"}}",
             ledger[i].id, ledger[i].amount % 100 == 51 ? "requires_payment_method" : "succeeded",
             (long long)(report_amount ? report_amount : ledger[i].amount),
             report_currency ? report_currency : "usd", ledger[i].order);
}

/* A tiny Stripe: create (idempotent by key), search by metadata order id. */
static int fake_send(void *ctx, const char *channel, const struct pt_http_request *req,
                     int timeout_ms, struct pt_http_response *resp)
{
    (void)ctx;
    (void)timeout_ms;
    assert_string_equal(channel, "stripe");
    requests++;
    if (cancel_order && requests == cancel_at_request) {
        struct pt_charge x;
        const char *o = cancel_order;
        cancel_order = NULL;
        assert_int_equal(pt_store_charge_get(st, o, &x), PT_OK);
        /* What the API does for a charge on its way (SPEC 18): the cancel is
         * recorded, and carried out by the engine, never beside a send. */
        unsigned on_its_way =
            (1u << PT_STATE_PROCESSING) | (1u << PT_STATE_PENDING) | (1u << PT_STATE_UNKNOWN);
        assert_int_equal(pt_store_begin(st), PT_OK);
        assert_int_equal(pt_store_charge_request_cancel(st, x.id, on_its_way, -1, clock_ms), PT_OK);
        assert_int_equal(pt_store_commit(st), PT_OK);
    }
    enum fault f = F_NONE;
    if (fault_skip > 0) {
        fault_skip--;
    } else if (fault_count > 0) {
        f = fault;
        fault_count--;
    }
    if (strcmp(req->method, "POST") == 0 && !strstr(req->url, "/cancel")) {
        struct pt_store_stats ss;
        assert_int_equal(pt_store_stats(st, 0, &ss), PT_OK);
        in_flight = (int)ss.by_state[PT_STATE_PROCESSING];
        if (in_flight > in_flight_max)
            in_flight_max = in_flight;
    }
    if (f == F_NOT_SENT)
        return PT_ENOTSENT;
    if (f == F_DROP_BEFORE)
        return PT_ENOANSWER; /* arrived, nothing recorded, connection lost */
    if (f == F_HTTP500_BEFORE && strcmp(req->method, "POST") == 0) {
        answer(resp, 500, "{\"error\":{\"type\":\"api_error\",\"message\":\"boom\"}}");
        return PT_OK; /* a create failed before recording anything */
    }
    char body[1024];
    if (strcmp(req->method, "POST") == 0 && strstr(req->url, "/v1/payment_intents") &&
        !strstr(req->url, "/cancel")) {
        const char *key = pt_http_request_header(req, "Idempotency-Key");
        assert_non_null(key);
        int i = find_pi(key);
        if (i < 0) {
            assert_true(nledger < MAX_PI);
            i = nledger++;
            snprintf(ledger[i].order, sizeof ledger[i].order, "%s", key);
            snprintf(ledger[i].id, sizeof ledger[i].id, "pi_%d", i + 1);
            const char *a = strstr(req->body, "amount=");
            ledger[i].amount = a ? atoll(a + 7) : 0;
            ledger[i].captures = ledger[i].amount % 100 == 51 ? 0 : 1;
        }
        ledger[i].creates++;
        if (f == F_DROP_AFTER)
            return PT_ENOANSWER; /* recorded (captured), answer lost */
        if (f == F_HTTP500) {
            answer(resp, 500, "{\"error\":{\"type\":\"api_error\",\"message\":\"boom\"}}");
            return PT_OK;
        }
        pi_json(body, sizeof body, i);
        if (ledger[i].amount % 100 == 51)
            snprintf(body, sizeof body,
                     "{\"error\":{\"type\":\"card_error\",\"code\":\"card_declined\","
                     "\"decline_code\":\"insufficient_funds\",\"message\":\"no money\","
                     "\"payment_intent\":{\"id\":\"%s\"}}}",
                     ledger[i].id);
        answer(resp, ledger[i].amount % 100 == 51 ? 402 : 200, body);
        return PT_OK;
    }
    if (strstr(req->url, "/v1/payment_intents/search")) {
        if (f == F_HTTP500) {
            answer(resp, 500, "{\"error\":{\"type\":\"api_error\"}}");
            return PT_OK;
        }
        /* query=metadata['order_id']:'ORDER' (URL-encoded) */
        int hit = -1;
        for (int i = 0; i < nledger; i++) {
            /* The quotes may arrive escaped or not (encodeURIComponent
             * leaves ' alone). */
            char enc[80], raw[80];
            snprintf(enc, sizeof enc, "%%27%.64s%%27", ledger[i].order);
            snprintf(raw, sizeof raw, "'%.64s'", ledger[i].order);
            if (strstr(req->url, enc) || strstr(req->url, raw))
                hit = i;
        }
        char pi[512] = "";
        if (hit >= 0)
            pi_json(pi, sizeof pi, hit);
        snprintf(body, sizeof body, "{\"object\":\"search_result\",\"data\":[%s]}", pi);
        answer(resp, 200, body);
        return PT_OK;
    }
    /* Anything else (the reachability probe): a 404 is an answer. */
    answer(resp, 404, "{\"error\":{\"type\":\"invalid_request_error\"}}");
    return PT_OK;
}

static const struct pt_transport transport = {.send = fake_send};
static const struct pt_platform platform = {
    .now_ms = now_cb, .mono_ms = now_cb, .random = random_cb, .transport = &transport};

/* ---- fixture --------------------------------------------------------------------------- */

static char dir[256];
static struct pt_config cfg;
static struct pt_gw_config stripe;
static const char whsec[] = "whsec_test_secret";

static int setup(void **state)
{
    (void)state;
    char path[300], err[512];
    pt_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/s.db", dir);
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    pt_config_defaults(&cfg);
    cfg.gw[pt_gateway_index("stripe")].configured = 1;
    cfg.sync_backoff_base_ms = 1000;
    cfg.sync_backoff_max_ms = 8000;
    memset(&stripe, 0, sizeof stripe);
    strcpy(stripe.name, "stripe");
    strcpy(stripe.endpoint, "https://stripe.test");
    memcpy(stripe.secret, "sk_test_123", 11);
    stripe.secret_len = 11;
    memcpy(stripe.webhook_secret, whsec, strlen(whsec));
    stripe.webhook_secret_len = strlen(whsec);
    struct pt_sync_options so = {.cfg = &cfg, .platform = &platform};
    so.gw[pt_gateway_index("stripe")] = &stripe;
    assert_int_equal(pt_sync_new(&so, &sync_engine), PT_OK);
    nledger = 0;
    memset(ledger, 0, sizeof ledger);
    fault = F_NONE;
    fault_count = 0;
    fault_skip = 0;
    in_flight = in_flight_max = 0;
    cancel_order = NULL;
    report_amount = 0;
    report_currency = NULL;
    requests = 0;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pt_sync_destroy(sync_engine);
    pt_store_close(st);
    pt_test_rmtree(dir);
    return 0;
}

static int order_seq;

static void queue_charge(struct pt_charge *c, int64_t amount)
{
    memset(c, 0, sizeof *c);
    snprintf(c->order_id, sizeof c->order_id, "ORD-%04d", ++order_seq);
    strcpy(c->gateway, "stripe");
    strcpy(c->method, "card_on_file");
    strcpy(c->currency, "USD");
    strcpy(c->payment_method, "pm_card_visa");
    c->amount = amount;
    c->next_attempt_at = clock_ms;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_charge_create(st, c, "api", clock_ms), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
}

static enum pt_state state_of(const char *order, struct pt_charge *out)
{
    struct pt_charge c;
    assert_int_equal(pt_store_charge_get(st, order, &c), PT_OK);
    if (out)
        *out = c;
    return c.state;
}

static int captures(const char *order)
{
    int i = find_pi(order);
    return i < 0 ? 0 : ledger[i].captures;
}

static int events_of(const char *order, const char *type)
{
    struct pt_event_row rows[100];
    int n = 0, k = 0;
    assert_int_equal(pt_store_events_list(st, 0, 100, rows, &n), PT_OK);
    for (int i = 0; i < n; i++)
        k += strcmp(rows[i].order_id, order) == 0 && strcmp(rows[i].type, type) == 0;
    pt_event_rows_free(rows, n);
    return k;
}

static void drain(void)
{
    struct pt_drain_stats ds;
    assert_int_equal(pt_sync_drain(sync_engine, st, &ds), PT_OK);
}

/* ---- cases ------------------------------------------------------------------------------- */

static void test_send_success_and_decline(void **state)
{
    (void)state;
    struct pt_charge a, b;
    queue_charge(&a, 1200);
    queue_charge(&b, 1251);
    drain();
    struct pt_charge got;
    assert_int_equal(state_of(a.order_id, &got), PT_STATE_SUCCESS);
    assert_string_equal(got.gateway_trade_no, "pi_1");
    assert_int_equal(state_of(b.order_id, &got), PT_STATE_FAILED);
    assert_string_equal(got.error_code, "insufficient_funds");
    assert_int_equal(captures(a.order_id), 1);
    assert_int_equal(captures(b.order_id), 0);
    assert_int_equal(events_of(a.order_id, "charge.succeeded"), 1);
    assert_int_equal(events_of(b.order_id, "charge.failed"), 1);
    /* A second pass finds nothing to do. */
    int before = requests;
    drain();
    assert_int_equal(requests, before);
}

static void test_not_sent_waits_for_the_link(void **state)
{
    (void)state;
    struct pt_charge a, b;
    queue_charge(&a, 1200);
    queue_charge(&b, 1300);
    fault = F_NOT_SENT;
    fault_count = 1000;
    drain();
    /* The first send failed before leaving: back in the queue, and the
     * second was not even tried in this pass. */
    assert_int_equal(state_of(a.order_id, NULL), PT_STATE_INIT);
    assert_int_equal(state_of(b.order_id, NULL), PT_STATE_INIT);
    assert_int_equal(requests, 1);
    assert_false(pt_sync_reachable(sync_engine, "stripe"));
    struct pt_charge got;
    state_of(a.order_id, &got);
    assert_int_equal(got.attempts, 0); /* not sent never counts */
    /* While down, drains touch nothing; probes keep failing. */
    clock_ms += 60000;
    drain();
    assert_int_equal(requests, 1);
    assert_int_equal(pt_sync_probe(sync_engine), 1);
    /* The link is back: the probe sees it, the next drain sends both once. */
    fault_count = 0;
    assert_int_equal(pt_sync_probe(sync_engine), 0);
    drain();
    assert_int_equal(state_of(a.order_id, NULL), PT_STATE_SUCCESS);
    assert_int_equal(state_of(b.order_id, NULL), PT_STATE_SUCCESS);
    assert_int_equal(captures(a.order_id), 1);
    assert_int_equal(captures(b.order_id), 1);
}

static void test_answer_lost_resolved_by_query(void **state)
{
    (void)state;
    struct pt_charge a;
    queue_charge(&a, 1200);
    fault = F_DROP_AFTER;
    fault_count = 1;
    drain();
    struct pt_charge got;
    assert_int_equal(state_of(a.order_id, &got), PT_STATE_UNKNOWN);
    assert_int_equal(got.attempts, 1);
    assert_int_equal(captures(a.order_id), 1); /* the money moved */
    /* Not yet due: backoff. */
    int before = requests;
    drain();
    assert_int_equal(requests, before);
    clock_ms += 10000;
    drain();
    assert_int_equal(state_of(a.order_id, &got), PT_STATE_SUCCESS);
    assert_string_equal(got.gateway_trade_no, "pi_1");
    assert_int_equal(captures(a.order_id), 1);
    assert_int_equal(ledger[find_pi(a.order_id)].creates, 1); /* queried, not re-sent */
    assert_int_equal(events_of(a.order_id, "charge.succeeded"), 1);
}

static void test_lost_before_arrival_resent_in_window(void **state)
{
    (void)state;
    struct pt_charge a;
    queue_charge(&a, 1200);
    fault = F_DROP_BEFORE;
    fault_count = 1;
    drain();
    assert_int_equal(state_of(a.order_id, NULL), PT_STATE_UNKNOWN);
    assert_int_equal(captures(a.order_id), 0);
    clock_ms += 10000;
    drain(); /* query: no such PaymentIntent -> resend with the same key */
    assert_int_equal(state_of(a.order_id, NULL), PT_STATE_SUCCESS);
    assert_int_equal(captures(a.order_id), 1);
}

static void test_ambiguous_sends_until_review(void **state)
{
    (void)state;
    struct pt_charge a;
    queue_charge(&a, 1200);
    fault = F_HTTP500_BEFORE;
    fault_count = 1000; /* Stripe fails every create before recording it */
    drain();
    struct pt_charge got;
    assert_int_equal(state_of(a.order_id, &got), PT_STATE_UNKNOWN);
    assert_int_equal(got.attempts, 1);
    /* Each pass: the query says "no such payment", and the resend (inside
     * Stripe's 24 h window, same key) is ambiguous again. */
    for (int i = 0; i < 20 && !got.review; i++) {
        clock_ms += 10000;
        drain();
        state_of(a.order_id, &got);
    }
    assert_true(got.review);
    assert_string_equal(got.review_reason, "max_attempts");
    assert_true(got.attempts >= cfg.sync_max_attempts);
    assert_int_equal(got.state, PT_STATE_UNKNOWN); /* an operator decides */
    assert_int_equal(events_of(a.order_id, "charge.review"), 1);
    assert_int_equal(captures(a.order_id), 0);
    /* Stripe works again, but payterm does not resend on its own after
     * max_attempts: the order stays UNKNOWN (nothing was charged) until the
     * operator decides, here by canceling it. */
    fault_count = 0;
    clock_ms += 10000;
    drain();
    state_of(a.order_id, &got);
    assert_int_equal(got.state, PT_STATE_UNKNOWN);
    assert_int_equal(captures(a.order_id), 0);
    assert_int_equal(pt_sync_cancel_now(sync_engine, st, &got), PT_OK);
    assert_int_equal(state_of(a.order_id, NULL), PT_STATE_CANCELED);
    assert_int_equal(captures(a.order_id), 0);
    assert_int_equal(events_of(a.order_id, "charge.canceled"), 1);
}

static void test_unresolved_until_resolve_timeout(void **state)
{
    (void)state;
    struct pt_charge a;
    queue_charge(&a, 1200);
    fault = F_DROP_AFTER;
    fault_count = 1;
    drain();
    fault = F_HTTP500; /* every query answers 500: the outcome stays unknown */
    fault_count = 100000;
    struct pt_charge got;
    state_of(a.order_id, &got);
    assert_int_equal(got.attempts, 1); /* queries do not count as sends */
    clock_ms += cfg.sync_resolve_timeout_s * 1000 - 60000;
    drain();
    state_of(a.order_id, &got);
    assert_false(got.review);
    clock_ms += 120000;
    drain();
    state_of(a.order_id, &got);
    assert_true(got.review);
    assert_string_equal(got.review_reason, "resolve_timeout");
    assert_int_equal(got.state, PT_STATE_UNKNOWN);
    assert_int_equal(captures(a.order_id), 1);
}

static void test_offline_expired_is_never_sent(void **state)
{
    (void)state;
    struct pt_charge a;
    queue_charge(&a, 1200);
    clock_ms += 82800 * 1000LL + 1; /* stripe.card_on_file default age limit */
    drain();
    struct pt_charge got;
    assert_int_equal(state_of(a.order_id, &got), PT_STATE_FAILED);
    assert_string_equal(got.error_code, "offline_expired");
    assert_int_equal(requests, 0);
    assert_int_equal(captures(a.order_id), 0);
    assert_int_equal(events_of(a.order_id, "charge.failed"), 1);
}

static void test_interrupted_send_recovered(void **state)
{
    (void)state;
    struct pt_charge a;
    queue_charge(&a, 1200);
    /* The process died after committing PROCESSING and sending. */
    assert_int_equal(pt_store_begin(st), PT_OK);
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    p.first_sent_at = clock_ms;
    p.next_attempt_at = clock_ms + 1000;
    assert_int_equal(
        pt_charge_transition(st, &a, PT_STATE_PROCESSING, &p, "send", "sync", NULL, clock_ms),
        PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    fault = F_DROP_AFTER;
    fault_count = 1;
    struct pt_http_request req = {0};
    struct pt_gw_env env = {.now_ms = clock_ms};
    assert_int_equal(pt_gateway_stripe.build(&stripe, PT_GW_PAY, &a, &env, &req), PT_OK);
    struct pt_http_response resp = {0};
    fake_send(NULL, "stripe", &req, 1000, &resp);
    pt_http_request_free(&req);
    /* After the restart: */
    clock_ms += 2000;
    drain();
    struct pt_charge got;
    assert_int_equal(state_of(a.order_id, &got), PT_STATE_SUCCESS);
    assert_int_equal(captures(a.order_id), 1);
    assert_int_equal(ledger[find_pi(a.order_id)].creates, 1);
}

static void test_queued_run_in_order_once_each(void **state)
{
    (void)state;
    struct pt_charge c[40];
    for (int i = 0; i < 40; i++)
        queue_charge(&c[i], 1000 + i % 50);
    drain();
    for (int i = 0; i < 40; i++) {
        assert_int_equal(state_of(c[i].order_id, NULL), PT_STATE_SUCCESS);
        assert_int_equal(captures(c[i].order_id), 1);
        /* Oldest first: the fake assigned pi ids in arrival order. */
        char want[32];
        snprintf(want, sizeof want, "pi_%d", i + 1);
        assert_string_equal(ledger[find_pi(c[i].order_id)].id, want);
    }
    assert_int_equal(requests, 40);
}

/* Queued charges go out in runs: one commit marks up to 16 PROCESSING
 * before the first of them is sent (one commit per run, not per charge). */
static void test_queued_charges_go_out_in_runs(void **state)
{
    (void)state;
    struct pt_charge c[40];
    for (int i = 0; i < 40; i++)
        queue_charge(&c[i], 1000 + i % 50);
    drain();
    assert_int_equal(in_flight_max, 16);
    assert_int_equal(in_flight, 8); /* the last run: 40 = 16 + 16 + 8 */
    for (int i = 0; i < 40; i++) {
        struct pt_charge got;
        assert_int_equal(state_of(c[i].order_id, &got), PT_STATE_SUCCESS);
        assert_int_equal(captures(c[i].order_id), 1);
        assert_int_equal(got.attempts, 0);
    }
    assert_int_equal(requests, 40);
}

/* The gateway refuses the connection in the middle of a run: the charges of
 * the run after it were marked PROCESSING but provably never sent, so they
 * go back to the queue (not UNKNOWN, no query, no attempt counted) and go
 * out once when the gateway is back. */
static void test_unreachable_mid_run_back_to_the_queue(void **state)
{
    (void)state;
    struct pt_charge c[20];
    for (int i = 0; i < 20; i++)
        queue_charge(&c[i], 1000 + i);
    fault = F_NOT_SENT;
    fault_skip = 2;
    fault_count = 1;
    drain();
    assert_int_equal(requests, 3);
    for (int i = 0; i < 20; i++) {
        struct pt_charge got;
        assert_int_equal(state_of(c[i].order_id, &got), i < 2 ? PT_STATE_SUCCESS : PT_STATE_INIT);
        assert_int_equal(got.attempts, 0);
    }
    /* One that was marked in the run after the refusal: marked, then back. */
    assert_int_equal(events_of(c[5].order_id, "charge.succeeded"), 0);
    clock_ms += 60000;
    assert_int_equal(pt_sync_probe(sync_engine), 0); /* the link is back */
    drain();
    for (int i = 0; i < 20; i++) {
        assert_int_equal(state_of(c[i].order_id, NULL), PT_STATE_SUCCESS);
        assert_int_equal(captures(c[i].order_id), 1);
        assert_int_equal(ledger[find_pi(c[i].order_id)].creates, 1);
    }
    assert_int_equal(requests, 3 + 1 + 18); /* the probe, then each one once */
}

/* A client cancels a charge that waits for its turn in a run (marked
 * PROCESSING, not sent): the cancel is recorded, the run does not send it,
 * and it ends CANCELED without a word to the gateway. */
static void test_cancel_while_waiting_in_a_run(void **state)
{
    (void)state;
    struct pt_charge c[12];
    for (int i = 0; i < 12; i++)
        queue_charge(&c[i], 1000 + i);
    cancel_order = c[9].order_id;
    cancel_at_request = 3; /* while the third pay request arrives */
    drain();
    struct pt_charge got;
    assert_int_equal(state_of(c[9].order_id, &got), PT_STATE_CANCELED);
    assert_false(got.review);
    assert_int_equal(find_pi(c[9].order_id), -1); /* never sent */
    assert_int_equal(events_of(c[9].order_id, "charge.succeeded"), 0);
    for (int i = 0; i < 12; i++) {
        if (i == 9)
            continue;
        assert_int_equal(state_of(c[i].order_id, NULL), PT_STATE_SUCCESS);
        assert_int_equal(captures(c[i].order_id), 1);
    }
}

static void test_query_amount_mismatch_holds_fulfilment(void **state)
{
    (void)state;
    struct pt_charge a;
    queue_charge(&a, 1200);
    fault = F_DROP_AFTER;
    fault_count = 1;
    drain();
    report_amount = 9999; /* the gateway reports another amount */
    clock_ms += 10000;
    drain();
    struct pt_charge got;
    assert_int_equal(state_of(a.order_id, &got), PT_STATE_SUCCESS);
    assert_true(got.review);
    assert_int_equal(events_of(a.order_id, "charge.succeeded"), 0);
}

static const char *event_type = "payment_intent.succeeded";

static void webhook_pi(const char *order, const char *pi, int64_t amount, const char *event_id,
                       int forge, struct pt_reply *out)
{
    char body[1024], sig[256], hdr[300];
    snprintf(body, sizeof body,
             "{\"id\":\"%s\",\"type\":\"%s\",\"data\":{\"object\":"
             "{\"id\":\"%s\",\"object\":\"payment_intent\",\"status\":\"succeeded\","
             "\"amount\":%lld,\"currency\":\"usd\",\"metadata\":{\"order_id\":\"%s\"}}}}",
             event_id, event_type, pi, (long long)amount, order);
    const char *key = forge ? "whsec_someone_else" : whsec;
    assert_int_equal(pt_stripe_sign_header(key, strlen(key), clock_ms / 1000, body, strlen(body),
                                           sig, sizeof sig),
                     PT_OK);
    struct pt_http_response msg = {0};
    snprintf(hdr, sizeof hdr, "%s", sig);
    pt_http_response_add_header(&msg, "Stripe-Signature", hdr);
    msg.body = body;
    msg.body_len = strlen(body);
    const char *type = NULL;
    pt_sync_notify(sync_engine, st, "stripe", &msg, out, &type);
    msg.body = NULL;
    pt_http_response_free(&msg);
}

/* The PaymentIntent the fake Stripe made for an order ("pi_none" if none). */
static const char *pi_of(const char *order)
{
    int i = find_pi(order);
    return i < 0 ? "pi_none" : ledger[i].id;
}

static void webhook(const char *order, int64_t amount, const char *event_id, int forge,
                    struct pt_reply *out)
{
    webhook_pi(order, pi_of(order), amount, event_id, forge, out);
}

/* A charge sent whose answer was lost: UNKNOWN, and no PaymentIntent id yet. */
static void sent_answer_lost(struct pt_charge *c, int64_t amount)
{
    queue_charge(c, amount);
    fault = F_DROP_AFTER;
    fault_count = 1;
    drain();
    struct pt_charge got;
    assert_int_equal(state_of(c->order_id, &got), PT_STATE_UNKNOWN);
    assert_string_equal(got.gateway_trade_no, "");
}

static int64_t notified(enum pt_metric_notify what)
{
    return (int64_t)pt_metrics.notifications[pt_gateway_index("stripe")][what];
}

static void test_notifications(void **state)
{
    (void)state;
    struct pt_charge a, b;
    sent_answer_lost(&a, 1200);
    sent_answer_lost(&b, 1300);
    struct pt_reply r;
    /* Forged: 400, counted, nothing applied. */
    int64_t bad0 = notified(PT_MN_BAD_SIGNATURE);
    webhook(a.order_id, 1200, "evt_1", 1, &r);
    assert_int_equal(r.status, 400);
    pt_reply_free(&r);
    assert_int_equal(notified(PT_MN_BAD_SIGNATURE), bad0 + 1);
    assert_int_equal(state_of(a.order_id, NULL), PT_STATE_UNKNOWN);
    /* Genuine: the trade is confirmed by a query, applied once, acknowledged
     * again when repeated. */
    webhook(a.order_id, 1200, "evt_2", 0, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{\"received\":true}");
    pt_reply_free(&r);
    webhook(a.order_id, 1200, "evt_2", 0, &r);
    assert_int_equal(r.status, 200);
    pt_reply_free(&r);
    struct pt_charge got;
    assert_int_equal(state_of(a.order_id, &got), PT_STATE_SUCCESS);
    assert_string_equal(got.gateway_trade_no, pi_of(a.order_id));
    assert_int_equal(events_of(a.order_id, "charge.succeeded"), 1);
    /* Another amount than charged: review, no fulfilment. */
    webhook(b.order_id, 99999, "evt_3", 0, &r);
    assert_int_equal(r.status, 200);
    pt_reply_free(&r);
    assert_int_equal(state_of(b.order_id, &got), PT_STATE_UNKNOWN);
    assert_true(got.review);
    assert_non_null(strstr(got.review_reason, "amount_mismatch"));
    assert_int_equal(events_of(b.order_id, "charge.succeeded"), 0);
}

/* The gateway's success for a charge that already succeeded (its answer
 * was stored first) changes nothing, so nothing is written for it - not
 * even a dedup row - and it is counted as the duplicate it is (SPEC 13:
 * an online charge whose gateway also notifies costs 2 durable commits). */
static void test_notification_that_changes_nothing_writes_nothing(void **state)
{
    (void)state;
    struct pt_charge a;
    queue_charge(&a, 1900);
    fault = F_NONE;
    drain();
    struct pt_charge got;
    assert_int_equal(state_of(a.order_id, &got), PT_STATE_SUCCESS);
    int64_t seen0 = 0, seen1 = 0, dup0 = notified(PT_MN_DUPLICATE);
    int64_t applied0 = notified(PT_MN_APPLIED);
    assert_int_equal(pt_store_count(st, "notifications", &seen0), PT_OK);
    struct pt_reply r;
    for (int i = 0; i < 2; i++) { /* delivered, then delivered again */
        webhook(a.order_id, 1900, "evt_n1", 0, &r);
        assert_int_equal(r.status, 200);
        pt_reply_free(&r);
    }
    assert_int_equal(pt_store_count(st, "notifications", &seen1), PT_OK);
    assert_int_equal(seen1, seen0);
    assert_int_equal(notified(PT_MN_DUPLICATE), dup0 + 2);
    assert_int_equal(notified(PT_MN_APPLIED), applied0);
    assert_int_equal(events_of(a.order_id, "charge.succeeded"), 1);
    /* Another amount is not "nothing": it still goes to review. */
    webhook(a.order_id, 1901, "evt_n2", 0, &r);
    assert_int_equal(r.status, 200);
    pt_reply_free(&r);
    assert_int_equal(state_of(a.order_id, &got), PT_STATE_SUCCESS);
    assert_true(got.review);
}

/* A signed webhook binds only to a charge of its own gateway, of the same
 * trade: SPEC section 5's binding rules. */
static void test_notification_binding(void **state)
{
    (void)state;
    struct pt_reply r;
    /* 1. An Alipay charge with the order id a Stripe event names. */
    struct pt_charge ali = {0};
    strcpy(ali.order_id, "LANE-0001");
    strcpy(ali.gateway, "alipay");
    strcpy(ali.method, "qr");
    strcpy(ali.currency, "USD");
    ali.amount = 1200;
    ali.next_attempt_at = clock_ms + 3600000;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_charge_create(st, &ali, "api", clock_ms), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    int64_t foreign0 = notified(PT_MN_FOREIGN);
    webhook_pi("LANE-0001", "pi_lane2", 1200, "evt_b1", 0, &r);
    assert_int_equal(r.status, 200); /* acknowledged, so Stripe stops resending */
    pt_reply_free(&r);
    struct pt_charge got;
    assert_int_equal(state_of("LANE-0001", &got), PT_STATE_INIT);
    assert_string_equal(got.gateway_trade_no, "");
    assert_false(got.review);
    assert_int_equal(notified(PT_MN_FOREIGN), foreign0 + 1);
    assert_int_equal(events_of("LANE-0001", "charge.succeeded"), 0);
    struct pt_audit_row rows[16];
    int n = 0;
    assert_int_equal(pt_store_audit_list(st, got.id, 16, rows, &n), PT_OK);
    assert_int_equal(n, 2);
    assert_string_equal(rows[1].cause, "notification_foreign");
    assert_true(rows[1].refused);
    assert_non_null(strstr(rows[1].detail, "other_gateway"));

    /* 2. Another PaymentIntent with the same metadata.order_id as a Stripe
     * charge whose PaymentIntent is known. */
    struct pt_charge s1;
    queue_charge(&s1, 1500);
    fault = F_NONE;
    drain();
    assert_int_equal(state_of(s1.order_id, &got), PT_STATE_SUCCESS);
    char mine[PT_SHORT_MAX];
    snprintf(mine, sizeof mine, "%s", got.gateway_trade_no);
    webhook_pi(s1.order_id, "pi_other_lane", 1500, "evt_b2", 0, &r);
    assert_int_equal(r.status, 200);
    pt_reply_free(&r);
    assert_int_equal(state_of(s1.order_id, &got), PT_STATE_SUCCESS);
    assert_string_equal(got.gateway_trade_no, mine);
    assert_int_equal(events_of(s1.order_id, "charge.succeeded"), 1);
    assert_int_equal(notified(PT_MN_FOREIGN), foreign0 + 2);

    /* 3. The charge's trade is not known yet and the query shows another
     * one: not bound, nothing learned from the notification. */
    struct pt_charge u;
    sent_answer_lost(&u, 1600);
    webhook_pi(u.order_id, "pi_other_lane_2", 1600, "evt_b3", 0, &r);
    assert_int_equal(r.status, 200);
    pt_reply_free(&r);
    assert_int_equal(state_of(u.order_id, &got), PT_STATE_UNKNOWN);
    assert_string_equal(got.gateway_trade_no, "");
    assert_int_equal(notified(PT_MN_FOREIGN), foreign0 + 3);
    /* The same event delivered again is a duplicate, not a second look. */
    int before = requests;
    webhook_pi(u.order_id, "pi_other_lane_2", 1600, "evt_b3", 0, &r);
    pt_reply_free(&r);
    assert_int_equal(notified(PT_MN_FOREIGN), foreign0 + 3);
    assert_true(requests - before <= 1);
    /* Its own PaymentIntent's event binds after the query confirms it. */
    webhook(u.order_id, 1600, "evt_b4", 0, &r);
    pt_reply_free(&r);
    assert_int_equal(state_of(u.order_id, &got), PT_STATE_SUCCESS);
    assert_int_equal(captures(u.order_id), 1);
}

/* A signed "payment failed" for a charge whose answer was lost, while the
 * gateway's own answer to our query says the money moved: the query wins
 * (SUCCESS) and the contradiction goes to an operator. */
static void test_notification_contradicted_by_query(void **state)
{
    (void)state;
    struct pt_charge a;
    sent_answer_lost(&a, 1700); /* captured at the fake Stripe, UNKNOWN here */
    struct pt_reply r;
    event_type = "payment_intent.payment_failed";
    webhook(a.order_id, 1700, "evt_c1", 0, &r);
    event_type = "payment_intent.succeeded";
    assert_int_equal(r.status, 200);
    pt_reply_free(&r);
    struct pt_charge got;
    assert_int_equal(state_of(a.order_id, &got), PT_STATE_SUCCESS);
    assert_true(got.review);
    assert_non_null(strstr(got.review_reason, "notification_contradicts_query"));
    assert_int_equal(events_of(a.order_id, "charge.failed"), 0);
    assert_int_equal(events_of(a.order_id, "charge.succeeded"), 0); /* held for review */
    assert_int_equal(captures(a.order_id), 1);
}

/* The gateway cannot be asked whether a notification is ours: it is not
 * acknowledged (delivered again later), not recorded as seen, and applied
 * once it can be confirmed. */
static void test_unconfirmed_notification_comes_again(void **state)
{
    (void)state;
    struct pt_charge a;
    sent_answer_lost(&a, 1800);
    struct pt_reply r;
    fault = F_NOT_SENT;
    fault_count = 1;
    webhook(a.order_id, 1800, "evt_u1", 0, &r);
    assert_int_equal(r.status, 503);
    pt_reply_free(&r);
    assert_int_equal(state_of(a.order_id, NULL), PT_STATE_UNKNOWN);
    int64_t seen = 0;
    assert_int_equal(pt_store_count(st, "notifications", &seen), PT_OK);
    assert_int_equal(seen, 0);
    webhook(a.order_id, 1800, "evt_u1", 0, &r); /* the gateway's next delivery */
    assert_int_equal(r.status, 200);
    pt_reply_free(&r);
    assert_int_equal(state_of(a.order_id, NULL), PT_STATE_SUCCESS);
    assert_int_equal(events_of(a.order_id, "charge.succeeded"), 1);
}

/* A success answer in another currency, or naming no amount, is not
 * believed for fulfilment. */
static void test_answer_currency_mismatch_holds_fulfilment(void **state)
{
    (void)state;
    struct pt_charge a;
    queue_charge(&a, 1200);
    report_currency = "eur";
    drain();
    struct pt_charge got;
    assert_int_equal(state_of(a.order_id, &got), PT_STATE_SUCCESS);
    assert_true(got.review);
    assert_non_null(strstr(got.review_reason, "currency_mismatch"));
    assert_int_equal(events_of(a.order_id, "charge.succeeded"), 0);
}

/* ---- a key that cannot sign -------------------------------------------------------------- */

static char logged[4096];

static void capture_errors(void *ctx, enum pt_log_level level, const char *line)
{
    (void)ctx;
    size_t n = strlen(logged);
    if (level == PT_LOG_ERROR)
        snprintf(logged + n, sizeof logged - n, "%s\n", line);
}

/*
 * payterm init and serve refuse a key that cannot sign (issue 32, item
 * 10a); should signing fail anyway, the log says which configuration key
 * and file, not "invalid argument", nothing leaves the device, and the
 * charge waits for an operator.  The gateway is loaded from a
 * configuration file, as the daemon loads it, and its private key is then
 * swapped for a public one.
 */
static void test_key_that_cannot_sign_is_named(void **state)
{
    (void)state;
    char key[512], pub[512], conf[512], text[1600], err[1024];
    snprintf(key, sizeof key, "%s/app_private.pem", dir);
    snprintf(conf, sizeof conf, "%s/payterm.json", dir);
    pt_test_data_path("keys/merchant_alipay_pkcs1.pem", pub, sizeof pub);
    char *pem = pt_test_read_file(pub, NULL);
    pt_test_write_file(key, pem, 0600);
    free(pem);
    pt_test_data_path("keys/alipay_gateway_public.pem", pub, sizeof pub);
    snprintf(text, sizeof text,
             "{\"gateways\":{\"alipay\":{\"endpoint\":\"https://alipay.test/gateway.do\","
             "\"app_id\":\"2021\",\"private_key_file\":\"%s\",\"alipay_public_key_file\":\"%s\"}}}",
             key, pub);
    pt_test_write_file(conf, text, 0600);
    struct pt_config *c = malloc(sizeof *c);
    assert_non_null(c);
    const char *paths[] = {conf};
    if (pt_config_load(paths, 1, c, err, sizeof err) != PT_OK)
        fail_msg("config: %s", err);
    static struct pt_gw_config ali;
    if (pt_gw_config_load(c, "alipay", NULL, NULL, &ali, err, sizeof err) != PT_OK)
        fail_msg("alipay: %s", err);
    pt_pk_free(ali.private_key);
    assert_int_equal(pt_pk_load_file(pub, NULL, NULL, &ali.private_key, err, sizeof err), PT_OK);

    pt_sync_destroy(sync_engine);
    cfg.gw[pt_gateway_index("alipay")] = c->gw[pt_gateway_index("alipay")];
    struct pt_sync_options so = {.cfg = &cfg, .platform = &platform};
    so.gw[pt_gateway_index("stripe")] = &stripe;
    so.gw[pt_gateway_index("alipay")] = &ali;
    assert_int_equal(pt_sync_new(&so, &sync_engine), PT_OK);
    struct pt_charge a;
    memset(&a, 0, sizeof a);
    strcpy(a.order_id, "ALI-KEY-1");
    strcpy(a.gateway, "alipay");
    strcpy(a.method, "barcode");
    strcpy(a.currency, "CNY");
    strcpy(a.payment_code, "286000000000000001");
    a.amount = 1200;
    a.next_attempt_at = clock_ms;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_charge_create(st, &a, "api", clock_ms), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);

    logged[0] = '\0';
    pt_log_set_sink(capture_errors, NULL);
    drain();
    pt_log_set_sink(NULL, NULL);
    assert_int_equal(requests, 0); /* nothing left the device */
    if (!strstr(logged, "charge ALI-KEY-1") ||
        !strstr(logged, "gateways.alipay.private_key_file") || !strstr(logged, key) ||
        !strstr(logged, "public key") || strstr(logged, "invalid argument"))
        fail_msg("the log should name gateways.alipay.private_key_file and %s, it says:\n%s", key,
                 logged);
    struct pt_charge got;
    assert_int_equal(state_of(a.order_id, &got), PT_STATE_INIT);
    assert_true(got.review);
    pt_gw_config_free(&ali);
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_send_success_and_decline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_sent_waits_for_the_link, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answer_lost_resolved_by_query, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lost_before_arrival_resent_in_window, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ambiguous_sends_until_review, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unresolved_until_resolve_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_offline_expired_is_never_sent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interrupted_send_recovered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queued_run_in_order_once_each, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queued_charges_go_out_in_runs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unreachable_mid_run_back_to_the_queue, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cancel_while_waiting_in_a_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_query_amount_mismatch_holds_fulfilment, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_notifications, setup, teardown),
        cmocka_unit_test_setup_teardown(test_notification_that_changes_nothing_writes_nothing,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_notification_binding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_notification_contradicted_by_query, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unconfirmed_notification_comes_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_key_that_cannot_sign_is_named, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answer_currency_mismatch_holds_fulfilment, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
