/*
 * test_charges.c - the charge state machine and the fulfilment feed.
 *
 * The legal transitions are written here again, straight from SPEC section
 * 4, so a mistake in core/charge.c's table cannot hide behind itself.
 */
#include "testutil.h"

#include "charges.h"
#include "fallback.h"
#include "err.h"
#include "json.h"
#include "store.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char dir[256], path[300];
static struct pt_store *st;

static const char *const spec_legal[] = {
    "INIT PROCESSING",    "INIT CANCELED",      "INIT FAILED",        "PROCESSING SUCCESS",
    "PROCESSING FAILED",  "PROCESSING PENDING", "PROCESSING UNKNOWN", "PROCESSING INIT",
    "PENDING SUCCESS",    "PENDING FAILED",     "PENDING CANCELED",   "PENDING UNKNOWN",
    "UNKNOWN SUCCESS",    "UNKNOWN FAILED",     "UNKNOWN CANCELED",   "UNKNOWN PENDING",
    "UNKNOWN PROCESSING",
};

static int spec_allows(enum pt_state from, enum pt_state to)
{
    char pair[40];
    snprintf(pair, sizeof pair, "%s %s", pt_state_name(from), pt_state_name(to));
    for (size_t i = 0; i < sizeof spec_legal / sizeof spec_legal[0]; i++)
        if (strcmp(pair, spec_legal[i]) == 0)
            return 1;
    return 0;
}

static int setup(void **state)
{
    (void)state;
    char err[512];
    pt_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/c.db", dir);
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pt_store_close(st);
    pt_test_rmtree(dir);
    return 0;
}

static int counter;

/* A Stripe card charge of amount for order (not stored). */
static void card_charge(struct pt_charge *c, const char *order, int64_t amount)
{
    memset(c, 0, sizeof *c);
    snprintf(c->order_id, sizeof c->order_id, "%s", order);
    strcpy(c->gateway, "stripe");
    strcpy(c->method, "card_on_file");
    strcpy(c->currency, "USD");
    strcpy(c->payment_method, "pm_card_visa");
    c->amount = amount;
}

static void new_charge(struct pt_charge *c)
{
    char order[32];
    snprintf(order, sizeof order, "T-%d", ++counter);
    card_charge(c, order, 1200);
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_charge_create(st, c, "api", 1000), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
}

/* Puts a charge into a state behind the state machine's back (test setup). */
static void force_state(struct pt_charge *c, enum pt_state s)
{
    char sql[160];
    snprintf(sql, sizeof sql, "UPDATE charges SET state='%s' WHERE id=%lld", pt_state_name(s),
             (long long)c->id);
    pt_test_sql_exec(path, sql);
    assert_int_equal(pt_store_charge_get_by_id(st, c->id, c), PT_OK);
}

static int count_events(const char *type, const char *order_id)
{
    struct pt_event_row rows[100];
    int n = 0, found = 0;
    assert_int_equal(pt_store_events_list(st, 0, 100, rows, &n), PT_OK);
    for (int i = 0; i < n; i++)
        if (strcmp(rows[i].type, type) == 0 && strcmp(rows[i].order_id, order_id) == 0)
            found++;
    pt_event_rows_free(rows, n);
    return found;
}

static void test_table_matches_spec(void **state)
{
    (void)state;
    for (int f = 0; f < PT_STATE__COUNT; f++)
        for (int t = 0; t < PT_STATE__COUNT; t++)
            if (pt_state_transition_legal(f, t) != spec_allows(f, t))
                fail_msg("%s -> %s: table says %d, SPEC says %d", pt_state_name(f),
                         pt_state_name(t), pt_state_transition_legal(f, t), spec_allows(f, t));
}

/* Every (from, to) pair through the real conditional UPDATE. */
static void test_every_pair_through_the_store(void **state)
{
    (void)state;
    for (int f = 0; f < PT_STATE__COUNT; f++) {
        for (int t = 0; t < PT_STATE__COUNT; t++) {
            struct pt_charge c;
            new_charge(&c);
            force_state(&c, f);
            int64_t audits_before = 0, audits_after = 0;
            struct pt_audit_row rows[16];
            int n;
            assert_int_equal(pt_store_audit_list(st, c.id, 16, rows, &n), PT_OK);
            audits_before = n;
            assert_int_equal(pt_store_begin(st), PT_OK);
            int rc = pt_charge_transition(st, &c, t, NULL, "test", "api", NULL, 2000);
            assert_int_equal(pt_store_commit(st), PT_OK);
            assert_int_equal(pt_store_audit_list(st, c.id, 16, rows, &n), PT_OK);
            audits_after = n;
            struct pt_charge now;
            assert_int_equal(pt_store_charge_get_by_id(st, c.id, &now), PT_OK);
            if (f == t) {
                assert_int_equal(rc, PT_EEXIST); /* repeated: a no-op, nothing written */
                assert_int_equal(audits_after, audits_before);
                assert_int_equal(now.state, f);
            } else if (spec_allows(f, t)) {
                if (rc != PT_OK)
                    fail_msg("%s -> %s refused (%d)", pt_state_name(f), pt_state_name(t), rc);
                assert_int_equal(now.state, t);
                assert_int_equal(audits_after, audits_before + 1);
                assert_int_equal(rows[n - 1].refused, 0);
            } else {
                if (rc != PT_ESTATE)
                    fail_msg("%s -> %s allowed (%d)", pt_state_name(f), pt_state_name(t), rc);
                assert_int_equal(now.state, f); /* unchanged */
                assert_int_equal(audits_after, audits_before + 1);
                assert_int_equal(rows[n - 1].refused, 1); /* refused and audited */
                assert_string_equal(rows[n - 1].to_state, pt_state_name(t));
            }
        }
    }
}

/* Our belief is stale: someone else moved the charge in between. */
static void test_conditional_update_with_stale_belief(void **state)
{
    (void)state;
    struct pt_charge c, stale;
    new_charge(&c);
    stale = c; /* believes INIT */
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_charge_transition(st, &c, PT_STATE_CANCELED, NULL, "t", "api", NULL, 1),
                     PT_OK);
    /* INIT -> PROCESSING on a charge that is really CANCELED must not happen. */
    assert_int_equal(
        pt_charge_transition(st, &stale, PT_STATE_PROCESSING, NULL, "t", "sync", NULL, 2),
        PT_ESTATE);
    assert_int_equal(pt_store_commit(st), PT_OK);
    assert_int_equal(stale.state, PT_STATE_CANCELED); /* re-read */
}

static void test_events_once(void **state)
{
    (void)state;
    struct pt_charge c;
    new_charge(&c);
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_charge_transition(st, &c, PT_STATE_PROCESSING, NULL, "s", "sync", NULL, 1),
                     PT_OK);
    assert_int_equal(pt_charge_transition(st, &c, PT_STATE_UNKNOWN, NULL, "t", "sync", NULL, 2),
                     PT_OK);
    assert_int_equal(pt_charge_gateway_succeeded(st, &c, NULL, "notify:stripe", NULL, 3), PT_OK);
    /* The duplicate notification and the query result race in: no-ops. */
    assert_int_equal(pt_charge_gateway_succeeded(st, &c, NULL, "notify:stripe", NULL, 4),
                     PT_EEXIST);
    assert_int_equal(pt_charge_gateway_succeeded(st, &c, NULL, "sync", NULL, 5), PT_EEXIST);
    assert_int_equal(pt_store_commit(st), PT_OK);
    assert_int_equal(count_events("charge.succeeded", c.order_id), 1);
}

static void test_success_from_init_and_pending(void **state)
{
    (void)state;
    /* A verified success moves any non-final state to SUCCESS. */
    enum pt_state from[] = {PT_STATE_INIT, PT_STATE_PROCESSING, PT_STATE_PENDING, PT_STATE_UNKNOWN};
    for (size_t i = 0; i < 4; i++) {
        struct pt_charge c;
        new_charge(&c);
        force_state(&c, from[i]);
        assert_int_equal(pt_store_begin(st), PT_OK);
        assert_int_equal(pt_charge_gateway_succeeded(st, &c, NULL, "notify:stripe", NULL, 9),
                         PT_OK);
        assert_int_equal(pt_store_commit(st), PT_OK);
        assert_int_equal(c.state, PT_STATE_SUCCESS);
        assert_int_equal(count_events("charge.succeeded", c.order_id), 1);
    }
}

static void test_success_after_failed_raises_review(void **state)
{
    (void)state;
    struct pt_charge c;
    new_charge(&c);
    force_state(&c, PT_STATE_FAILED);
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_charge_gateway_succeeded(st, &c, NULL, "notify:alipay", NULL, 9),
                     PT_ESTATE);
    assert_int_equal(pt_store_commit(st), PT_OK);
    assert_int_equal(c.state, PT_STATE_FAILED); /* not overwritten */
    assert_true(c.review);
    assert_string_equal(c.review_reason, "succeeded_after_failed");
    assert_int_equal(count_events("charge.review", c.order_id), 1);
    assert_int_equal(count_events("charge.succeeded", c.order_id), 0);
}

static void test_review_holds_fulfilment(void **state)
{
    (void)state;
    struct pt_charge c;
    new_charge(&c);
    force_state(&c, PT_STATE_UNKNOWN);
    assert_int_equal(pt_store_begin(st), PT_OK);
    /* An amount mismatch raised review first... */
    assert_int_equal(pt_charge_review(st, &c, 1, "amount_mismatch", "notify:wechat", 5), PT_OK);
    assert_int_equal(pt_charge_review(st, &c, 1, "again", "notify:wechat", 5), PT_EEXIST);
    /* ...so the success is recorded but not announced. */
    assert_int_equal(pt_charge_gateway_succeeded(st, &c, NULL, "sync", NULL, 6), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    assert_int_equal(count_events("charge.succeeded", c.order_id), 0);
    /* An operator clears it: the held event goes out, once. */
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_charge_review(st, &c, 0, "checked receipt", "operator:ann", 7), PT_OK);
    assert_int_equal(pt_charge_review(st, &c, 1, "second look", "operator:ann", 8), PT_OK);
    assert_int_equal(pt_charge_review(st, &c, 0, "fine", "operator:ann", 9), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    assert_int_equal(count_events("charge.succeeded", c.order_id), 1);
    assert_int_equal(count_events("charge.review", c.order_id), 2);
    /* The audit names the operator. */
    struct pt_audit_row rows[32];
    int n;
    assert_int_equal(pt_store_audit_list(st, c.id, 32, rows, &n), PT_OK);
    int by_ann = 0;
    for (int i = 0; i < n; i++)
        by_ann += strcmp(rows[i].actor, "operator:ann") == 0;
    assert_int_equal(by_ann, 3);
}

static void test_event_seq_increases(void **state)
{
    (void)state;
    for (int i = 0; i < 5; i++) {
        struct pt_charge c;
        new_charge(&c);
        assert_int_equal(pt_store_begin(st), PT_OK);
        assert_int_equal(
            pt_charge_transition(st, &c, PT_STATE_CANCELED, NULL, "t", "api", NULL, 10 + i), PT_OK);
        assert_int_equal(pt_store_commit(st), PT_OK);
    }
    struct pt_event_row rows[100];
    int n;
    assert_int_equal(pt_store_events_list(st, 0, 100, rows, &n), PT_OK);
    assert_int_equal(n, 5);
    for (int i = 1; i < n; i++)
        assert_true(rows[i].seq > rows[i - 1].seq);
    /* after= pages. */
    int64_t third = rows[2].seq;
    pt_event_rows_free(rows, n);
    assert_int_equal(pt_store_events_list(st, third, 100, rows, &n), PT_OK);
    assert_int_equal(n, 2);
    pt_event_rows_free(rows, n);
}

static void test_charge_json(void **state)
{
    (void)state;
    struct pt_charge c;
    new_charge(&c);
    force_state(&c, PT_STATE_FAILED);
    strcpy(c.error_code, "card_declined");
    strcpy(c.error_message, "insufficient funds");
    char *text = pt_charge_json_text(&c);
    cJSON *o = cJSON_Parse(text);
    assert_non_null(o);
    assert_string_equal(cJSON_GetObjectItem(o, "state")->valuestring, "FAILED");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "error"), "code")->valuestring,
                        "card_declined");
    assert_int_equal((int)cJSON_GetObjectItem(o, "amount")->valuedouble, 1200);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(o, "review")));
    assert_string_equal(cJSON_GetObjectItem(o, "created_at")->valuestring,
                        "1970-01-01T00:00:01.000Z");
    /* The customer's code and payment method never appear in the object. */
    assert_null(strstr(text, "pm_card_visa"));
    cJSON_Delete(o);
    free(text);
}

/* The sync engine's work list is read in id order from the lowest charge
 * still in progress (sql/003 dropped the index of active charges): whatever
 * the mix of final and active charges, old and new, and however often the
 * floor moves, every non-final due charge is listed, exactly once. */
static void test_work_list_finds_every_active_charge(void **state)
{
    (void)state;
    enum { N = 300 };
    static struct pt_charge c[N];
    int made = 0;
    unsigned seed = 4242;
    for (int round = 0; round < 40; round++) {
        /* A few new charges... */
        for (int k = 0; k < 8 && made < N; k++)
            new_charge(&c[made++]);
        /* ...and some moves, old charges included. */
        for (int k = 0; k < 10; k++) {
            struct pt_charge *x = &c[(unsigned)rand_r(&seed) % (unsigned)made];
            enum pt_state to = (enum pt_state)((unsigned)rand_r(&seed) % PT_STATE__COUNT);
            assert_int_equal(pt_store_begin(st), PT_OK);
            pt_charge_transition(st, x, to, NULL, "walk", "test", NULL, 2000);
            assert_int_equal(pt_store_commit(st), PT_OK);
        }
        /* The work list, walked the way the sync engine walks it. */
        static struct pt_charge rows[7];
        int listed[N] = {0};
        int64_t cursor = 0;
        for (;;) {
            int n = 0;
            assert_int_equal(pt_store_charges_due(st, 1LL << 50, cursor, 7, rows, &n), PT_OK);
            if (n == 0)
                break;
            for (int i = 0; i < n; i++) {
                assert_true(rows[i].id > cursor);
                cursor = rows[i].id;
                for (int j = 0; j < made; j++)
                    if (c[j].id == rows[i].id)
                        listed[j]++;
            }
        }
        int64_t next = -1;
        assert_int_equal(pt_store_charges_next_due(st, &next), PT_OK);
        int active = 0;
        for (int j = 0; j < made; j++) {
            struct pt_charge now;
            assert_int_equal(pt_store_charge_get(st, c[j].order_id, &now), PT_OK);
            int is_active = !pt_state_is_final(now.state);
            active += is_active;
            if (listed[j] != is_active)
                fail_msg("round %d: %s (%s) listed %d times", round, now.order_id,
                         pt_state_name(now.state), listed[j]);
        }
        assert_true(active == 0 ? next == 0 : next >= 0);
    }
}

/* Timestamps are formatted by hand: the same text as gmtime_r + strftime,
 * across leap years, century rules, the epoch and before it. */
static void test_rfc3339_matches_libc(void **state)
{
    (void)state;
    static const int64_t fixed[] = {0,
                                    1,
                                    999,
                                    1000,
                                    -1,
                                    -1000,
                                    -1001,
                                    951782400000LL,
                                    951868799999LL,
                                    4107542400000LL,
                                    4107456000000LL,
                                    1764460800123LL,
                                    253402300799999LL,
                                    -30610224000000LL};
    unsigned seed = 99;
    for (int i = 0; i < 20000; i++) {
        int64_t ms;
        if (i < (int)(sizeof fixed / sizeof fixed[0]))
            ms = fixed[i];
        else
            ms = ((int64_t)rand_r(&seed) << 31 | rand_r(&seed)) % 253402300800000LL -
                 (i % 7 == 0 ? 30610224000000LL : 0); /* back to year 1000 */
        char got[32], want[40];
        pt_rfc3339(ms, got);
        int64_t secs = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
        time_t t = (time_t)secs;
        if ((int64_t)t != secs)
            continue; /* a 32-bit time_t (armhf) cannot say it: see below */
        struct tm tm;
        gmtime_r(&t, &tm);
        size_t n = strftime(want, sizeof want, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(want + n, sizeof want - n, ".%03dZ", (int)(ms - secs * 1000));
        if (strcmp(got, want) != 0)
            fail_msg("%lld: got %s, want %s", (long long)ms, got, want);
    }
    /* strftime leaves years before 1000 unpadded; RFC 3339 wants four digits. */
    char got[32];
    pt_rfc3339(-62135596800000LL, got);
    assert_string_equal(got, "0001-01-01T00:00:00.000Z");
    /* Past 2038 everywhere, also where time_t has 32 bits and gmtime_r
     * cannot be asked (as on Debian's armhf, where it printed 1964 for 2100). */
    pt_rfc3339(2147483647000LL, got);
    assert_string_equal(got, "2038-01-19T03:14:07.000Z");
    pt_rfc3339(2147483648001LL, got);
    assert_string_equal(got, "2038-01-19T03:14:08.001Z");
    pt_rfc3339(4107542400000LL, got);
    assert_string_equal(got, "2100-03-01T00:00:00.000Z");
    pt_rfc3339(4107456000000LL, got);
    assert_string_equal(got, "2100-02-28T00:00:00.000Z");
    pt_rfc3339(253402300799999LL, got);
    assert_string_equal(got, "9999-12-31T23:59:59.999Z");
}

/* ---- the charge object as cJSON used to build it (the reference) ----------- */

/* The key under which a method returns its payment link (SPEC section 5). */
static const char *ref_action_key(const struct pt_charge *c)
{
    if (strcmp(c->gateway, "alipay") == 0 && strcmp(c->method, "qr") == 0)
        return "qr_code";
    if (strcmp(c->gateway, "wechat") == 0)
        return "code_url";
    if (strcmp(c->method, "redirect") == 0)
        return "payment_url";
    return NULL;
}

static void ref_opt_string(cJSON *o, const char *name, const char *v)
{
    if (v && *v)
        cJSON_AddStringToObject(o, name, v);
    else
        cJSON_AddNullToObject(o, name);
}
static cJSON *ref_charge_json(const struct pt_charge *c)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    char t[32];
    cJSON_AddNumberToObject(o, "id", (double)c->id);
    cJSON_AddStringToObject(o, "order_id", c->order_id);
    cJSON_AddStringToObject(o, "gateway", c->gateway);
    cJSON_AddStringToObject(o, "method", c->method);
    cJSON_AddNumberToObject(o, "amount", (double)c->amount);
    cJSON_AddStringToObject(o, "currency", c->currency);
    cJSON_AddStringToObject(o, "state", pt_state_name(c->state));
    cJSON_AddBoolToObject(o, "review", c->review);
    ref_opt_string(o, "review_reason", c->review ? c->review_reason : NULL);
    ref_opt_string(o, "gateway_trade_no", c->gateway_trade_no);
    const char *ak = ref_action_key(c);
    if (ak)
        ref_opt_string(o, ak, c->action_url);
    cJSON_AddNumberToObject(o, "attempts", c->attempts);
    cJSON_AddNumberToObject(o, "amount_refunded", (double)c->amount_refunded);
    cJSON_AddNumberToObject(o, "refunds", c->refunds);
    cJSON_AddStringToObject(o, "offline", pt_offline_mode_name(c->offline));
    if (c->subject[0])
        cJSON_AddStringToObject(o, "subject", c->subject);
    if (c->metadata[0]) {
        cJSON *m = cJSON_Parse(c->metadata);
        if (m)
            cJSON_AddItemToObject(o, "metadata", m);
    }
    if (c->state == PT_STATE_FAILED || c->error_code[0]) {
        cJSON *e = cJSON_AddObjectToObject(o, "error");
        if (e) {
            cJSON_AddStringToObject(e, "code", c->error_code[0] ? c->error_code : "failed");
            cJSON_AddStringToObject(e, "message", c->error_message);
        }
    } else {
        cJSON_AddNullToObject(o, "error");
    }
    pt_rfc3339(c->created_at, t);
    cJSON_AddStringToObject(o, "created_at", t);
    pt_rfc3339(c->updated_at, t);
    cJSON_AddStringToObject(o, "updated_at", t);
    return o;
}

/* The charge object is written by hand (it is on every response); it must
 * be the very text cJSON made of the same object, in every shape. */
static void test_charge_json_text_equals_cjson(void **state)
{
    (void)state;
    static const char *const gw[][2] = {{"alipay", "barcode"},
                                        {"alipay", "qr"},
                                        {"wechat", "qr"},
                                        {"stripe", "card_on_file"},
                                        {"2c2p", "redirect"}};
    static const char *const text[] = {"", "Large latte", "quote \" backslash \\ slash /",
                                       "tab\tnewline\ncr\rbell\a\x01\x1f",
                                       "\xe4\xb8\xad\xe6\x96\x87 caf\xc3\xa9"};
    static const int64_t amounts[] = {1, 8888, 2147483647, 2147483648LL, 99999999999999LL};
    int n = 0;
    for (int s = 0; s < PT_STATE__COUNT; s++)
        for (int g = 0; g < (int)(sizeof gw / sizeof gw[0]); g++)
            for (int t = 0; t < 5; t++) {
                struct pt_charge c;
                memset(&c, 0, sizeof c);
                c.id = 1 + n * 7919;
                snprintf(c.order_id, sizeof c.order_id, "ORD-%d", n);
                strcpy(c.gateway, gw[g][0]);
                strcpy(c.method, gw[g][1]);
                strcpy(c.currency, t % 2 ? "CNY" : "USD");
                c.amount = amounts[(n / 3) % 5];
                c.state = (enum pt_state)s;
                c.offline = (enum pt_offline_mode)(n % 3);
                c.attempts = n % 4;
                c.amount_refunded = (n % 5) * 100;
                c.refunds = n % 3;
                c.review = n % 2;
                snprintf(c.review_reason, sizeof c.review_reason, "%s", text[(t + 1) % 5]);
                snprintf(c.subject, sizeof c.subject, "%s", text[t]);
                snprintf(c.error_message, sizeof c.error_message, "%s", text[(t + 2) % 5]);
                if (n % 3 == 0)
                    strcpy(c.error_code, "card_declined");
                if (n % 4 == 1)
                    strcpy(c.gateway_trade_no, "2026113022001");
                if (n % 5 == 2)
                    strcpy(c.action_url, "https://qr.alipay.com/bax0?x=\"1\"");
                if (n % 6 == 3)
                    strcpy(c.metadata, "{\"lane\":\"3\",\"note\":\"a\\nb\"}");
                c.created_at = 1764460800123LL + n;
                c.updated_at = c.created_at + 1000 * n;
                cJSON *o = ref_charge_json(&c);
                char *want = cJSON_PrintUnformatted(o);
                char *got = pt_charge_json_text(&c);
                assert_non_null(got);
                assert_string_equal(got, want);
                free(want);
                free(got);
                cJSON_Delete(o);
                n++;
            }
    assert_int_equal(n, PT_STATE__COUNT * 25); /* 5 gateway.method pairs x 5 texts */
}

/* The parameters' text decides "same charge" against hashes already in
 * the database: it must stay the canonical JSON of the parameter object. */
static void test_params_text_is_canonical(void **state)
{
    (void)state;
    static const char *const text[] = {"", "Large latte", "q\"b\\s/", "t\tn\nc\x01",
                                       "\xe4\xb8\xad caf\xc3\xa9"};
    static const int64_t amounts[] = {1, 8888, 2147483648LL, 9007199254740992LL};
    for (int n = 0; n < 60; n++) {
        struct pt_charge c;
        memset(&c, 0, sizeof c);
        snprintf(c.order_id, sizeof c.order_id, "ORD-%d.x_y", n);
        strcpy(c.gateway, n % 2 ? "alipay" : "stripe");
        strcpy(c.method, n % 2 ? "barcode" : "card_on_file");
        strcpy(c.currency, n % 3 ? "CNY" : "JPY");
        c.amount = amounts[n % 4];
        c.offline = (enum pt_offline_mode)(n % 3);
        snprintf(c.subject, sizeof c.subject, "%s", text[n % 5]);
        snprintf(c.customer, sizeof c.customer, "%s", text[(n + 1) % 5]);
        snprintf(c.payment_code, sizeof c.payment_code, "%s", n % 2 ? "287634438256643941" : "");
        snprintf(c.payment_method, sizeof c.payment_method, "%s", n % 2 ? "" : "pm_card_visa");
        if (n % 4 == 1)
            strcpy(c.metadata, "{\"lane\":\"3\"}");
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "order_id", c.order_id);
        cJSON_AddNumberToObject(p, "amount", (double)c.amount);
        cJSON_AddStringToObject(p, "currency", c.currency);
        cJSON_AddStringToObject(p, "gateway", c.gateway);
        cJSON_AddStringToObject(p, "method", c.method);
        cJSON_AddStringToObject(p, "payment_code", c.payment_code);
        cJSON_AddStringToObject(p, "payment_method", c.payment_method);
        cJSON_AddStringToObject(p, "customer", c.customer);
        cJSON_AddStringToObject(p, "subject", c.subject);
        cJSON_AddStringToObject(p, "offline", pt_offline_mode_name(c.offline));
        cJSON_AddStringToObject(p, "metadata", c.metadata);
        char *want = pt_json_canonical(p);
        char *got = pt_charge_params_text(&c);
        assert_non_null(want);
        assert_non_null(got);
        assert_string_equal(got, want);
        free(want);
        free(got);
        cJSON_Delete(p);
    }
}

/* The queue figures read from offline_queue, against the charges
 * themselves, after every step of a random walk through the state machine
 * in three currencies (creations queued or sent online, acceptance of an
 * online one into the queue, sends, not-sent returns, cancels, answers,
 * refused moves).  The figures hold every charge accepted offline and not
 * final (SPEC 18). */
static void test_offline_queue_figures_follow_the_charges(void **state)
{
    (void)state;
    static const char *const cur[] = {"USD", "CNY", "JPY"};
    enum { N = 40 };
    struct pt_charge c[N];
    int made = 0;
    unsigned seed = 12345;
    /* Each step reads the charges back over new connections: on the
     * PostgreSQL store a third of the walk keeps the test within minutes. */
    int steps = pt_test_pg() ? 200 : 600;
    for (int step = 0; step < steps; step++) {
        unsigned r = (unsigned)rand_r(&seed);
        if (made < N && (made == 0 || r % 3 == 0)) {
            memset(&c[made], 0, sizeof c[made]);
            snprintf(c[made].order_id, sizeof c[made].order_id, "Q-%d", made);
            strcpy(c[made].gateway, "stripe");
            strcpy(c[made].method, "card_on_file");
            strcpy(c[made].currency, cur[r % 3]);
            c[made].amount = 100 + (int64_t)(r % 900);
            c[made].offline_accepted = (r / 3) % 2; /* queued, or sent online */
            assert_int_equal(pt_store_begin(st), PT_OK);
            assert_int_equal(pt_charge_create(st, &c[made], "api", 1000), PT_OK);
            assert_int_equal(pt_store_commit(st), PT_OK);
            made++;
        } else if (r % 5 == 0) {
            /* An online charge not sent, accepted into the queue. */
            struct pt_charge *x = &c[r % (unsigned)made];
            assert_int_equal(pt_store_begin(st), PT_OK);
            int rc = pt_store_charge_accept_offline(st, x, 2000);
            assert_true(rc == PT_OK || rc == PT_ESTATE);
            assert_int_equal(pt_store_commit(st), PT_OK);
        } else {
            struct pt_charge *x = &c[r % (unsigned)made];
            enum pt_state to = (enum pt_state)((r / 7) % PT_STATE__COUNT);
            assert_int_equal(pt_store_begin(st), PT_OK);
            int rc = pt_charge_transition(st, x, to, NULL, "walk", "test", NULL, 2000);
            assert_true(rc == PT_OK || rc == PT_EEXIST || rc == PT_ESTATE);
            assert_int_equal(pt_store_commit(st), PT_OK);
        }
        int64_t want_count[3], want_total[3], all = 0;
        for (int k = 0; k < 3; k++) {
            char sql[200];
            snprintf(sql, sizeof sql,
                     "SELECT count(*), coalesce(sum(amount), 0) FROM charges"
                     " WHERE offline_accepted = 1 AND state IN ('INIT', 'PROCESSING',"
                     " 'PENDING', 'UNKNOWN') AND currency = '%s'",
                     cur[k]);
            want_count[k] = pt_test_sql_int(path, sql, 0);
            want_total[k] = pt_test_sql_int(path, sql, 1);
            all += want_count[k];
        }
        for (int k = 0; k < 3; k++) {
            int64_t count = -1, total = -1;
            assert_int_equal(pt_store_queue_figures(st, cur[k], &count, &total), PT_OK);
            assert_int_equal(count, all);
            assert_int_equal(total, want_total[k]);
        }
    }
}

/*
 * The work list's floor, computed while another connection commits new
 * charges: a walk that found nothing in progress and then read the next
 * id in a second statement (a later snapshot) put the floor above a charge
 * committed in between, and that charge was never sent.  Here one thread
 * commits new charges while this one keeps walking and finishing what it
 * finds; in the end every charge must have been found.
 */
struct inserter {
    int n, made, done;
};

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *insert_main(void *p)
{
    struct inserter *a = p;
    char err[256];
    struct pt_store *w;
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_test_store_open(&o, &w, err, sizeof err), PT_OK);
    /* At most 3 s, whatever the machine (a slow board runs fewer). */
    double end = seconds_now() + 3.0;
    for (int i = 0; i < a->n && seconds_now() < end; i++, a->made++) {
        struct pt_charge c;
        char order[32];
        snprintf(order, sizeof order, "R-%d", i);
        card_charge(&c, order, 100);
        assert_int_equal(pt_store_begin(w), PT_OK);
        assert_int_equal(pt_charge_create(w, &c, "api", 1000), PT_OK);
        assert_int_equal(pt_store_commit(w), PT_OK);
    }
    pt_store_close(w);
    __atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_work_list_floor_under_concurrent_inserts(void **state)
{
    (void)state;
    pt_test_skip_without_threads();
    /* A file in synchronous=NORMAL: many commits, quickly. */
    pt_store_close(st);
    char err[256];
    struct pt_store_options o = {.path = path, .synchronous_normal = 1};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    struct inserter a = {.n = 4000};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, insert_main, &a), 0);
    static struct pt_charge rows[16];
    int finished = 0, last_pass = 0;
    while (!last_pass) {
        last_pass = __atomic_load_n(&a.done, __ATOMIC_ACQUIRE);
        int64_t cursor = 0, next = 0;
        for (;;) {
            int n = 0;
            assert_int_equal(pt_store_charges_due(st, 1LL << 50, cursor, 16, rows, &n), PT_OK);
            if (n == 0)
                break;
            assert_int_equal(pt_store_begin(st), PT_OK);
            for (int i = 0; i < n; i++) {
                cursor = rows[i].id;
                assert_int_equal(pt_charge_transition(st, &rows[i], PT_STATE_CANCELED, NULL, "walk",
                                                      "test", NULL, 2000),
                                 PT_OK);
                finished++;
            }
            assert_int_equal(pt_store_commit(st), PT_OK);
        }
        /* The end of a pass reads the floor too (the next due time). */
        assert_int_equal(pt_store_charges_next_due(st, &next), PT_OK);
    }
    pthread_join(th, NULL);
    int64_t left = 0;
    assert_int_equal(pt_store_count(st, "charges", &left), PT_OK);
    assert_int_equal(left, a.made);
    if (finished != a.made)
        fail_msg("%d of %d charges were found by the work list", finished, a.made);
}

/* A charge queued in a lane's local store as the API queues one: its key
 * found free, the charge, the key's answer naming the order. */
static void queue_locally(struct pt_store *local, const char *key, const char *order,
                          const unsigned char h[32], const char *answer, int64_t now)
{
    struct pt_charge c;
    card_charge(&c, order, 700);
    c.next_attempt_at = now;
    struct pt_key_lock lock;
    assert_int_equal(pt_store_begin(local), PT_OK);
    assert_int_equal(
        pt_store_key_take_later(local, "POST /v1/charges", key, h, 1, now, now + 86400000, &lock),
        PT_OK);
    assert_int_equal(pt_charge_create(local, &c, "api", now), PT_OK);
    pt_store_key_name_order(&lock, c.order_id);
    assert_int_equal(pt_store_key_complete(local, "POST /v1/charges", key, &lock, 202, answer,
                                           strlen(answer), now + 1),
                     PT_OK);
    assert_int_equal(pt_store_commit(local), PT_OK);
}

/*
 * store.fallback "local" (SPEC 16): a charge queued in the lane's own
 * SQLite store while the store server was unreachable moves to the server
 * with the key that made it, so a retry of that key on any lane replays the
 * lane's answer byte for byte.  Moved twice (the lane died between the
 * server's commit and its own mark): still one charge and one key there.
 */
static void test_fallback_moves_the_key_with_its_charge(void **state)
{
    (void)state;
    char lpath[PT_STORE_PATH_MAX];
    struct pt_store *local = pt_test_local_store(dir, lpath);
    const char *scope = "POST /v1/charges";
    const char *answer = "{\"id\":1,\"order_id\":\"FB-K1\",\"state\":\"INIT\"}";
    unsigned char h[32];
    memset(h, 0x5a, sizeof h);
    queue_locally(local, "k-1", "FB-K1", h, answer, 1000);
    /* A key whose request made no charge (a refused body): nothing names an order. */
    struct pt_key_lock lock;
    assert_int_equal(pt_store_begin(local), PT_OK);
    assert_int_equal(pt_store_key_take_later(local, scope, "k-bad", h, 1, 1100, 90000, &lock),
                     PT_OK);
    assert_int_equal(pt_store_key_complete(local, scope, "k-bad", &lock, 400, "{}", 2, 1101),
                     PT_OK);
    assert_int_equal(pt_store_commit(local), PT_OK);

    char ks[PT_KEY_SCOPE_MAX], kn[PT_KEY_NAME_MAX];
    struct pt_key_row row;
    assert_int_equal(pt_store_key_of_order(local, "FB-K1", ks, kn, &row), PT_OK);
    assert_string_equal(ks, scope);
    assert_string_equal(kn, "k-1");
    pt_key_row_free(&row);
    assert_int_equal(pt_store_key_of_order(local, "FB-NONE", ks, kn, &row), PT_ENOTFOUND);

    int moved = 0;
    assert_int_equal(pt_fallback_move(local, st, 5000, &moved), PT_OK);
    assert_int_equal(moved, 1);
    assert_int_equal(pt_store_key_get(st, scope, "k-1", &row), PT_OK);
    assert_int_equal(row.response_status, 202);
    assert_int_equal(row.response_len, strlen(answer));
    assert_memory_equal(row.response_body, answer, row.response_len);
    assert_memory_equal(row.request_hash, h, sizeof h);
    assert_string_equal(row.order_id, "FB-K1");
    assert_true(row.completed_at > 0);
    assert_int_equal(row.locked_at, 0);
    assert_int_equal(row.expires_at, 1000 + 86400000);
    pt_key_row_free(&row);
    /* The key names its order on the server too, whichever backend it is. */
    memset(ks, 0, sizeof ks), memset(kn, 0, sizeof kn);
    assert_int_equal(pt_store_key_of_order(st, "FB-K1", ks, kn, &row), PT_OK);
    assert_string_equal(ks, scope);
    assert_string_equal(kn, "k-1");
    assert_int_equal(row.response_status, 202);
    assert_memory_equal(row.response_body, answer, row.response_len);
    assert_memory_equal(row.request_hash, h, sizeof h);
    assert_string_equal(row.order_id, "FB-K1");
    assert_int_equal(row.expires_at, 1000 + 86400000);
    pt_key_row_free(&row);
    assert_int_equal(pt_store_key_get(st, scope, "k-bad", &row), PT_ENOTFOUND);

    /* Set back to INIT behind the store's back: moved again, refused there. */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(lpath, &db), SQLITE_OK);
    assert_int_equal(
        sqlite3_exec(db, "UPDATE charges SET state = 'INIT' WHERE order_id = 'FB-K1'", 0, 0, 0),
        SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(pt_fallback_move(local, st, 6000, &moved), PT_OK);
    assert_int_equal(moved, 1);
    assert_int_equal(
        pt_test_sql_int(path, "SELECT count(*) FROM charges WHERE order_id = 'FB-K1'", 0), 1);
    assert_int_equal(pt_test_sql_int(path, "SELECT count(*) FROM idempotency_keys", 0), 1);
    pt_store_close(local);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_matches_spec),
        cmocka_unit_test_setup_teardown(test_every_pair_through_the_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_conditional_update_with_stale_belief, setup, teardown),
        cmocka_unit_test_setup_teardown(test_events_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_success_from_init_and_pending, setup, teardown),
        cmocka_unit_test_setup_teardown(test_success_after_failed_raises_review, setup, teardown),
        cmocka_unit_test_setup_teardown(test_review_holds_fulfilment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_event_seq_increases, setup, teardown),
        cmocka_unit_test_setup_teardown(test_charge_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_work_list_finds_every_active_charge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_work_list_floor_under_concurrent_inserts, setup,
                                        teardown),
        cmocka_unit_test(test_rfc3339_matches_libc),
        cmocka_unit_test(test_charge_json_text_equals_cjson),
        cmocka_unit_test(test_params_text_is_canonical),
        cmocka_unit_test_setup_teardown(test_offline_queue_figures_follow_the_charges, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fallback_moves_the_key_with_its_charge, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
