/*
 * test_report.c - X and Z reports (SPEC 19), on both store backends.
 *
 * What a shop relies on: every charge and refund that became final is in
 * exactly one Z report - the one open when its final state was committed -
 * and a report adds up exactly the rows it holds; the reports chain by
 * hash; a closed report never changes and is given back byte for byte.
 */
#include "testutil.h"

#include "crypto.h"
#include "config.h"
#include "err.h"
#include "intake.h"
#include "report.h"
#include "store.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[256];
static char path[300];

static int setup(void **state)
{
    (void)state;
    pt_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/report.db", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pt_test_rmtree(dir);
    return 0;
}

static struct pt_store *open_store(void)
{
    struct pt_store *st;
    char err[512];
    /* PostgreSQL: the lane the reports name (SQLite has one lane). */
    struct pt_store_options o = {.path = path, .busy_timeout_ms = 20000, .lane_id = "lane-1"};
    if (pt_test_store_open(&o, &st, err, sizeof err) != PT_OK)
        fail_msg("open: %s", err);
    return st;
}

/* A charge of gateway/method/amount, committed INIT; its id. */
static int64_t new_charge(struct pt_store *st, const char *order, const char *gateway,
                          const char *method, int64_t amount, const char *currency)
{
    struct pt_charge c;
    memset(&c, 0, sizeof c);
    snprintf(c.order_id, sizeof c.order_id, "%s", order);
    snprintf(c.gateway, sizeof c.gateway, "%s", gateway);
    snprintf(c.method, sizeof c.method, "%s", method);
    snprintf(c.currency, sizeof c.currency, "%s", currency);
    c.amount = amount;
    c.state = PT_STATE_INIT;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_store_charge_insert(st, &c, 1000), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    return c.id;
}

/* Moves a charge from `from` to `to` in one transaction, as the engine does. */
static void move_charge(struct pt_store *st, int64_t id, enum pt_state from, enum pt_state to)
{
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_store_charge_transition(st, id, 1u << from, to, &p, 2000), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
}

static int64_t paid_refund(struct pt_store *st, int64_t charge_id, const char *refund_id,
                           int64_t amount)
{
    struct pt_refund r;
    memset(&r, 0, sizeof r);
    r.charge_id = charge_id;
    snprintf(r.refund_id, sizeof r.refund_id, "%s", refund_id);
    r.amount = amount;
    r.state = PT_STATE_INIT;
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_store_refund_insert(st, &r, 3000), PT_OK);
    assert_int_equal(
        pt_store_refund_transition(st, r.id, 1u << PT_STATE_INIT, PT_STATE_SUCCESS, &p, 3000),
        PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    return r.id;
}

static char *close_day(struct pt_store *st, int64_t now, int64_t *z)
{
    char *json = NULL;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_report_close(st, "lane-1", now, &json, z), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    return json;
}

/* totals.gateway.method.currency.name of a report's text; -1 when absent. */
static long long line_of(const char *json, const char *gw, const char *method, const char *cur,
                         const char *name)
{
    cJSON *o = cJSON_Parse(json);
    assert_non_null(o);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "totals");
    const char *keys[4] = {gw, method, cur, name};
    for (int i = 0; i < 4 && v; i++)
        v = cJSON_GetObjectItemCaseSensitive(v, keys[i]);
    long long r = cJSON_IsNumber(v) ? (long long)v->valuedouble : -1;
    cJSON_Delete(o);
    return r;
}

static const char *member(cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* The day as a shop has it: sales, a refusal, a payment still pending at
 * the close, a refund the next day of a sale closed the day before. */
static void test_each_final_row_in_one_report(void **state)
{
    (void)state;
    struct pt_store *st = open_store();
    int64_t a = new_charge(st, "A", "alipay", "barcode", 1250, "CNY");
    int64_t b = new_charge(st, "B", "alipay", "barcode", 800, "CNY");
    int64_t c = new_charge(st, "C", "stripe", "card_on_file", 4200, "USD");
    int64_t d = new_charge(st, "D", "wechat", "qr", 990, "CNY");
    int64_t e = new_charge(st, "E", "alipay", "barcode", 5, "CNY");
    move_charge(st, a, PT_STATE_INIT, PT_STATE_SUCCESS);
    move_charge(st, b, PT_STATE_INIT, PT_STATE_SUCCESS);
    move_charge(st, c, PT_STATE_INIT, PT_STATE_SUCCESS);
    move_charge(st, d, PT_STATE_INIT, PT_STATE_PENDING); /* the customer has not paid yet */
    move_charge(st, e, PT_STATE_INIT, PT_STATE_FAILED);
    paid_refund(st, b, "B-r1", 300);

    /* The X report adds up the day and closes nothing. */
    char *x = NULL;
    assert_int_equal(pt_report_x(st, "lane-1", 10000, &x), PT_OK);
    assert_int_equal(line_of(x, "alipay", "barcode", "CNY", "charges"), 2);
    assert_int_equal(line_of(x, "alipay", "barcode", "CNY", "amount"), 2050);
    assert_int_equal(line_of(x, "alipay", "barcode", "CNY", "refunds"), 1);
    assert_int_equal(line_of(x, "alipay", "barcode", "CNY", "refunded"), 300);
    assert_int_equal(line_of(x, "alipay", "barcode", "CNY", "net"), 1750);
    assert_int_equal(line_of(x, "stripe", "card_on_file", "USD", "amount"), 4200);
    assert_int_equal(line_of(x, "wechat", "qr", "CNY", "charges"), -1); /* pending: open */
    cJSON *xo = cJSON_Parse(x);
    assert_null(cJSON_GetObjectItemCaseSensitive(xo, "hash"));
    assert_int_equal((int)cJSON_GetObjectItemCaseSensitive(xo, "z")->valuedouble, 1);
    assert_int_equal((int)cJSON_GetObjectItemCaseSensitive(
                         cJSON_GetObjectItemCaseSensitive(xo, "open"), "pending")
                         ->valuedouble,
                     1);
    cJSON_Delete(xo);
    char *x2 = NULL;
    assert_int_equal(pt_report_x(st, "lane-1", 10000, &x2), PT_OK);
    assert_string_equal(x, x2); /* nothing was closed by reading */
    free(x2);

    int64_t z1 = 0;
    char *r1 = close_day(st, 20000, &z1);
    assert_int_equal(z1, 1);
    /* The Z report is the X report's totals, closed. */
    cJSON *o1 = cJSON_Parse(r1);
    cJSON *xo2 = cJSON_Parse(x);
    assert_true(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(o1, "totals"),
                              cJSON_GetObjectItemCaseSensitive(xo2, "totals"), 1));
    cJSON_Delete(xo2);
    free(x);
    assert_string_equal(member(o1, "prev_hash"), PT_REPORT_GENESIS);
    assert_string_equal(member(o1, "lane_id"), "lane-1");
    assert_string_equal(member(o1, "from"), "1970-01-01T00:00:01.000Z"); /* its first charge */
    assert_string_equal(member(o1, "to"), "1970-01-01T00:00:20.000Z");
    char hex[65];
    assert_int_equal(pt_report_hash_of(r1, hex), PT_OK);
    assert_string_equal(member(o1, "hash"), hex);

    /* Served byte for byte as closed. */
    char *again = NULL;
    assert_int_equal(pt_store_z_get(st, 1, &again), PT_OK);
    assert_string_equal(again, r1);
    free(again);
    assert_int_equal(pt_store_z_get(st, 2, &again), PT_ENOTFOUND);

    /* After the close the X report is empty: nothing is counted twice. */
    assert_int_equal(pt_report_x(st, "lane-1", 21000, &x), PT_OK);
    assert_int_equal(line_of(x, "alipay", "barcode", "CNY", "charges"), -1);
    free(x);

    /* The next day: the pending payment arrives, the first day's sale is
     * refunded.  Both are in Z 2, and only there. */
    move_charge(st, d, PT_STATE_PENDING, PT_STATE_SUCCESS);
    paid_refund(st, a, "A-r1", 250);
    int64_t z2 = 0;
    char *r2 = close_day(st, 30000, &z2);
    assert_int_equal(z2, 2);
    assert_int_equal(line_of(r2, "wechat", "qr", "CNY", "charges"), 1);
    assert_int_equal(line_of(r2, "wechat", "qr", "CNY", "amount"), 990);
    assert_int_equal(line_of(r2, "alipay", "barcode", "CNY", "charges"), 0);
    assert_int_equal(line_of(r2, "alipay", "barcode", "CNY", "refunded"), 250);
    assert_int_equal(line_of(r2, "alipay", "barcode", "CNY", "net"), -250);
    assert_int_equal(line_of(r2, "stripe", "card_on_file", "USD", "charges"), -1);
    cJSON *o2 = cJSON_Parse(r2);
    assert_string_equal(member(o2, "prev_hash"), member(o1, "hash"));
    assert_string_equal(member(o2, "from"), member(o1, "to"));
    assert_int_equal(pt_report_hash_of(r2, hex), PT_OK);
    assert_string_equal(member(o2, "hash"), hex);
    cJSON_Delete(o2);

    /* An empty day closes too, and chains. */
    int64_t z3 = 0;
    char *r3 = close_day(st, 40000, &z3);
    assert_int_equal(z3, 3);
    assert_non_null(strstr(r3, "\"totals\":{}"));

    /* Every final row has its one report; the pending one had none. */
    assert_int_equal(pt_test_sql_int(path, "SELECT count(*) FROM charges WHERE z IS NULL", 0), 0);
    assert_int_equal(pt_test_sql_int(path, "SELECT count(*) FROM charges WHERE z = 1", 0), 4);
    assert_int_equal(pt_test_sql_int(path, "SELECT count(*) FROM refunds WHERE z = 2", 0), 1);
    /* A closed report never changes, nor does a row's report. */
    assert_false(pt_test_sql_ok(path, "UPDATE z_reports SET body = '{}' WHERE z = 1"));
    assert_false(pt_test_sql_ok(path, "DELETE FROM z_reports WHERE z = 1"));
    assert_false(pt_test_sql_ok(path, "UPDATE charges SET z = 2 WHERE z = 1"));
    assert_int_equal(pt_store_z_get(st, 1, &again), PT_OK);
    assert_string_equal(again, r1);
    free(again);
    cJSON_Delete(o1);
    free(r1);
    free(r2);
    free(r3);
    pt_store_close(st);
}

/* The canonical JSON (RFC 8785) of a report: keys in order, no spaces. */
/* open.<name> of a report's text. */
static long long open_of(const char *json, const char *name)
{
    cJSON *o = cJSON_Parse(json);
    assert_non_null(o);
    const cJSON *v =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "open"), name);
    assert_true(cJSON_IsNumber(v));
    long long r = (long long)v->valuedouble;
    cJSON_Delete(o);
    return r;
}

/* What a close finds open, charges and refunds together, wherever the rows
 * not final are among the final ones (SQLite reads them from the tables'
 * floors, not by a scan). */
static void test_close_counts_what_is_open(void **state)
{
    (void)state;
    struct pt_store *st = open_store();
    int64_t f1 = new_charge(st, "F1", "stripe", "card_on_file", 100, "USD");
    int64_t q1 = new_charge(st, "Q1", "stripe", "card_on_file", 200, "USD");
    int64_t p1 = new_charge(st, "P1", "stripe", "card_on_file", 300, "USD");
    int64_t u1 = new_charge(st, "U1", "stripe", "card_on_file", 400, "USD");
    int64_t f2 = new_charge(st, "F2", "stripe", "card_on_file", 500, "USD");
    move_charge(st, f1, PT_STATE_INIT, PT_STATE_SUCCESS);
    move_charge(st, p1, PT_STATE_INIT, PT_STATE_PROCESSING);
    move_charge(st, u1, PT_STATE_INIT, PT_STATE_UNKNOWN);
    move_charge(st, f2, PT_STATE_INIT, PT_STATE_SUCCESS);
    assert_int_equal(pt_store_charge_set_review(st, f2, 1, "operator", 1500), PT_OK);
    struct pt_refund r;
    memset(&r, 0, sizeof r);
    r.charge_id = f1;
    snprintf(r.refund_id, sizeof r.refund_id, "F1-r1");
    r.amount = 50;
    r.state = PT_STATE_INIT;
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_store_refund_insert(st, &r, 3000), PT_OK);
    assert_int_equal(
        pt_store_refund_transition(st, r.id, 1u << PT_STATE_INIT, PT_STATE_UNKNOWN, &p, 3000),
        PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);

    int64_t z = 0;
    char *r1 = close_day(st, 5000, &z);
    assert_int_equal(open_of(r1, "queued"), 2); /* Q1 INIT, P1 PROCESSING */
    assert_int_equal(open_of(r1, "pending"), 0);
    assert_int_equal(open_of(r1, "unknown"), 2); /* U1 and F1-r1 */
    assert_int_equal(open_of(r1, "review"), 1);  /* F2 */
    assert_int_equal(line_of(r1, "stripe", "card_on_file", "USD", "charges"), 2);
    free(r1);

    /* The first of them ends: the others are still found. */
    move_charge(st, q1, PT_STATE_INIT, PT_STATE_FAILED);
    move_charge(st, u1, PT_STATE_UNKNOWN, PT_STATE_PENDING);
    char *r2 = close_day(st, 6000, &z);
    assert_int_equal(open_of(r2, "queued"), 1);
    assert_int_equal(open_of(r2, "pending"), 1);
    assert_int_equal(open_of(r2, "unknown"), 1);
    assert_int_equal(line_of(r2, "stripe", "card_on_file", "USD", "charges"),
                     -1); /* Q1 failed: moved nothing */
    free(r2);

    move_charge(st, p1, PT_STATE_PROCESSING, PT_STATE_SUCCESS);
    move_charge(st, u1, PT_STATE_PENDING, PT_STATE_SUCCESS);
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(
        pt_store_refund_transition(st, r.id, 1u << PT_STATE_UNKNOWN, PT_STATE_SUCCESS, &p, 7000),
        PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    char *r3 = close_day(st, 8000, &z);
    assert_int_equal(z, 3);
    assert_int_equal(open_of(r3, "queued") + open_of(r3, "pending") + open_of(r3, "unknown"), 0);
    assert_int_equal(open_of(r3, "review"), 1);
    assert_int_equal(line_of(r3, "stripe", "card_on_file", "USD", "charges"), 2);
    assert_int_equal(line_of(r3, "stripe", "card_on_file", "USD", "refunded"), 50);
    free(r3);
    pt_store_close(st);
}

static void test_report_is_canonical(void **state)
{
    (void)state;
    struct pt_store *st = open_store();
    int64_t a = new_charge(st, "A", "2c2p", "redirect", 1000, "THB");
    move_charge(st, a, PT_STATE_INIT, PT_STATE_SUCCESS);
    int64_t z = 0;
    char *r = close_day(st, 5000, &z);
    /* The hash is over exactly this text, without the member hash. */
    static const char unhashed[] =
        "{\"from\":\"1970-01-01T00:00:01.000Z\",\"lane_id\":\"lane-1\","
        "\"open\":{\"pending\":0,\"queued\":0,\"review\":0,\"unknown\":0},"
        "\"prev_hash\":\"" PT_REPORT_GENESIS "\",\"to\":\"1970-01-01T00:00:05.000Z\","
        "\"totals\":{\"2c2p\":{\"redirect\":{\"THB\":{\"amount\":1000,\"charges\":1,"
        "\"net\":1000,\"refunded\":0,\"refunds\":0}}}},\"z\":1}";
    unsigned char md[32];
    char hex[65], want[1024];
    assert_int_equal(pt_sha256(unhashed, strlen(unhashed), md), PT_OK);
    pt_hex_encode(md, sizeof md, hex);
    /* ... and sits between from and lane_id, in key order. */
    snprintf(want, sizeof want, "{\"from\":\"1970-01-01T00:00:01.000Z\",\"hash\":\"%s\",%s", hex,
             unhashed + strlen("{\"from\":\"1970-01-01T00:00:01.000Z\","));
    assert_string_equal(r, want);
    free(r);
    pt_store_close(st);
}

/* ---- a close racing the sync engine -------------------------------------------- */

enum { RACE_CHARGES = 120 };

struct racer {
    atomic_int done, paid, closes;
};

static void *pay_all(void *arg)
{
    struct racer *r = arg;
    struct pt_store *st = open_store();
    for (int i = 0; i < RACE_CHARGES; i++) {
        char order[32];
        snprintf(order, sizeof order, "R-%03d", i);
        int64_t id = new_charge(st, order, "alipay", "barcode", 100 + i, "CNY");
        move_charge(st, id, PT_STATE_INIT, i % 5 == 4 ? PT_STATE_FAILED : PT_STATE_SUCCESS);
        /* Every tenth payment lets a close in before going on, so the
         * closes land among the payments however the threads run.  (The
         * count of closes is read before the payment is told: a close
         * that follows it is then seen.) */
        int closes = atomic_load(&r->closes);
        atomic_fetch_add(&r->paid, 1);
        while (i % 10 == 9 && atomic_load(&r->closes) == closes)
            sched_yield();
    }
    pt_store_close(st);
    atomic_store(&r->done, 1);
    return NULL;
}

/*
 * Charges become final on one connection while another closes day after
 * day: each paid charge is counted in exactly one report, and each report
 * counts exactly the rows it marked.
 */
static void test_close_racing_payments(void **state)
{
    (void)state;
    struct pt_store *st = open_store(); /* creates the schema before the race */
    struct racer r = {0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, pay_all, &r), 0);
    int64_t z = 0;
    int seen = 0;
    while (!atomic_load(&r.done)) {
        /* A close whenever a payment went final since the last one (not
         * thousands of empty days). */
        int paid = atomic_load(&r.paid);
        if (paid == seen) {
            sched_yield();
            continue;
        }
        seen = paid;
        free(close_day(st, 1000 + z, &z));
        atomic_fetch_add(&r.closes, 1);
    }
    pthread_join(t, NULL);
    free(close_day(st, 1000 + z + 1, &z));
    long long charges = 0, amount = 0;
    for (int64_t i = 1; i <= z; i++) {
        char *body = NULL;
        assert_int_equal(pt_store_z_get(st, i, &body), PT_OK);
        long long n = line_of(body, "alipay", "barcode", "CNY", "charges");
        long long sum = line_of(body, "alipay", "barcode", "CNY", "amount");
        char sql[128];
        snprintf(sql, sizeof sql,
                 "SELECT count(*), coalesce(sum(amount), 0) FROM charges WHERE z = %lld"
                 " AND state = 'SUCCESS'",
                 (long long)i);
        /* A report counts exactly the rows that are in it. */
        assert_int_equal(n < 0 ? 0 : n, pt_test_sql_int(path, sql, 0));
        assert_int_equal(sum < 0 ? 0 : sum, pt_test_sql_int(path, sql, 1));
        charges += n < 0 ? 0 : n;
        amount += sum < 0 ? 0 : sum;
        free(body);
    }
    long long want = 0, want_amount = 0;
    for (int i = 0; i < RACE_CHARGES; i++)
        if (i % 5 != 4) {
            want++;
            want_amount += 100 + i;
        }
    assert_int_equal(charges, want);
    assert_int_equal(amount, want_amount);
    assert_int_equal(pt_test_sql_int(path, "SELECT count(*) FROM charges WHERE z IS NULL", 0), 0);
    print_message("    %d closes during %d payments\n", atomic_load(&r.closes), RACE_CHARGES);
    assert_true(atomic_load(&r.closes) >=
                RACE_CHARGES / 10); /* the closes did run among the payments */
    pt_store_close(st);
}

/*
 * PostgreSQL: a final state not yet committed when the close runs is not
 * in that close (the close does not wait for it), and is in the next.
 */
static void test_pg_uncommitted_final_goes_to_next(void **state)
{
    (void)state;
    pt_test_pg_only("SQLite's write transactions are one at a time: no close runs beside one");
    struct pt_store *st = open_store(), *eng = open_store();
    int64_t a = new_charge(st, "A", "alipay", "barcode", 700, "CNY");
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    assert_int_equal(pt_store_begin(eng), PT_OK);
    assert_int_equal(
        pt_store_charge_transition(eng, a, 1u << PT_STATE_INIT, PT_STATE_SUCCESS, &p, 2000), PT_OK);
    int64_t z = 0;
    char *r1 = close_day(st, 3000, &z); /* returns: does not wait for eng */
    assert_int_equal(line_of(r1, "alipay", "barcode", "CNY", "charges"), -1);
    assert_int_equal(pt_store_commit(eng), PT_OK);
    char *r2 = close_day(st, 4000, &z);
    assert_int_equal(z, 2);
    assert_int_equal(line_of(r2, "alipay", "barcode", "CNY", "charges"), 1);
    free(r1);
    free(r2);
    pt_store_close(eng);
    pt_store_close(st);
}

/*
 * Two lanes closing with the same Idempotency-Key (a POS that names its
 * closes by the date): each closes its own day.  On PostgreSQL the keys of
 * every lane are in one table: a lane must never be answered with another
 * lane's report.  On SQLite each lane has its own file; the same holds.
 */
static void test_same_key_two_lanes(void **state)
{
    (void)state;
    static struct pt_config cfg_a, cfg_b;
    pt_config_defaults(&cfg_a);
    pt_config_defaults(&cfg_b);
    snprintf(cfg_a.lane_id, sizeof cfg_a.lane_id, "lane-1");
    snprintf(cfg_b.lane_id, sizeof cfg_b.lane_id, "lane-2");
    struct pt_idem_options idem = {.ttl_ms = 86400000, .lock_timeout_ms = 60000, .instance = 1};
    struct pt_intake in_a = {.cfg = &cfg_a, .idem = idem}, in_b = {.cfg = &cfg_b, .idem = idem};
    struct pt_store *a = open_store(), *b;
    char err[512];
    char other[320];
    /* Lane 2: the same server (PostgreSQL), or a file of its own. */
    snprintf(other, sizeof other, "%s/lane2.db", dir);
    struct pt_store_options o = {.path = pt_test_pg() ? path : other, .lane_id = "lane-2"};
    assert_int_equal(pt_test_store_open(&o, &b, err, sizeof err), PT_OK);
    move_charge(a, new_charge(a, "A-1", "alipay", "barcode", 100, "CNY"), PT_STATE_INIT,
                PT_STATE_SUCCESS);
    move_charge(b, new_charge(b, "B-1", "alipay", "barcode", 200, "CNY"), PT_STATE_INIT,
                PT_STATE_SUCCESS);
    /* Lane 2's customer has not paid yet: open on lane 2, not on lane 1. */
    move_charge(b, new_charge(b, "B-2", "wechat", "qr", 300, "CNY"), PT_STATE_INIT,
                PT_STATE_PENDING);
    struct pt_reply ra, rb, again;
    assert_int_equal(pt_intake_close_day(&in_a, a, "close-2026-12-07", NULL, 0, 5000, &ra), PT_OK);
    assert_int_equal(pt_intake_close_day(&in_b, b, "close-2026-12-07", NULL, 0, 5000, &rb), PT_OK);
    assert_int_equal(ra.status, 201);
    assert_int_equal(rb.status, 201);
    assert_false(rb.replayed); /* lane 2's own close, not lane 1's answer */
    assert_non_null(strstr(ra.body, "\"lane_id\":\"lane-1\""));
    assert_non_null(strstr(rb.body, "\"lane_id\":\"lane-2\""));
    assert_int_equal(line_of(rb.body, "alipay", "barcode", "CNY", "amount"), 200);
    assert_int_equal(line_of(ra.body, "alipay", "barcode", "CNY", "amount"), 100);
    assert_non_null(strstr(ra.body, "\"open\":{\"pending\":0,"));
    assert_non_null(strstr(rb.body, "\"open\":{\"pending\":1,"));
    /* The same key on the same lane: the same report, byte for byte. */
    assert_int_equal(pt_intake_close_day(&in_b, b, "close-2026-12-07", NULL, 0, 9000, &again),
                     PT_OK);
    assert_true(again.replayed);
    assert_int_equal(again.len, rb.len);
    assert_memory_equal(again.body, rb.body, rb.len);
    /* A body is refused, naming it (and that is the key's answer). */
    pt_reply_free(&again);
    assert_int_equal(pt_intake_close_day(&in_a, a, "close-body", "{}", 2, 9000, &again), PT_OK);
    assert_int_equal(again.status, 400);
    assert_non_null(strstr(again.body, "body: "));
    pt_reply_free(&again);
    pt_reply_free(&ra);
    pt_reply_free(&rb);
    pt_store_close(b);
    pt_store_close(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_close_counts_what_is_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_each_final_row_in_one_report, setup, teardown),
        cmocka_unit_test_setup_teardown(test_report_is_canonical, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_racing_payments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_uncommitted_final_goes_to_next, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_key_two_lanes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
