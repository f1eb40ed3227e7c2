/*
 * test_recon_run.c - reconciliation runs (SPEC 19), on both store backends.
 *
 * What a shop relies on: a bill of a day against the lane's own records
 * finds every kind of discrepancy and nothing else (a payment at midnight
 * is not one), raises the review of each local charge concerned - audited
 * once per kind however often the day is run - and a run is stored and
 * given back as it was; a second run over the same bill finds the same.
 */
#include "testutil.h"

#include "charges.h"
#include "err.h"
#include "recon_run.h"
#include "refunds.h"
#include "store.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[256];
static char path[300];

/* 2026-12-05 00:00 China time (+08:00), lane ms: WeChat's bill date. */
#define DAY0 (1796428800000LL - 8 * 3600000LL)
#define HOUR 3600000LL

static int setup(void **state)
{
    (void)state;
    pt_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/recon.db", dir);
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
    struct pt_store_options o = {.path = path, .busy_timeout_ms = 20000, .lane_id = "lane-1"};
    if (pt_test_store_open(&o, &st, err, sizeof err) != PT_OK)
        fail_msg("open: %s", err);
    return st;
}

/* A WeChat charge that became SUCCESS at `at` (through the engine, so it
 * is audited as in the daemon); its id. */
static int64_t paid(struct pt_store *st, const char *order, int64_t amount, const char *trade_no,
                    int64_t at)
{
    struct pt_charge c;
    memset(&c, 0, sizeof c);
    snprintf(c.order_id, sizeof c.order_id, "%s", order);
    snprintf(c.gateway, sizeof c.gateway, "wechat");
    snprintf(c.method, sizeof c.method, "barcode");
    snprintf(c.currency, sizeof c.currency, "CNY");
    c.amount = amount;
    c.state = PT_STATE_INIT;
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    p.gateway_trade_no = trade_no;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_charge_create(st, &c, "api", at - 1000), PT_OK);
    assert_int_equal(pt_charge_gateway_succeeded(st, &c, &p, "sync", NULL, at), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    return c.id;
}

static void refunded(struct pt_store *st, int64_t charge_id, const char *refund_id, int64_t amount,
                     const char *refund_no, int64_t at)
{
    struct pt_refund r;
    memset(&r, 0, sizeof r);
    r.charge_id = charge_id;
    snprintf(r.refund_id, sizeof r.refund_id, "%s", refund_id);
    r.amount = amount;
    r.state = PT_STATE_INIT;
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    p.gateway_trade_no = refund_no;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_refund_create(st, &r, "api", at - 1000), PT_OK);
    assert_int_equal(
        pt_refund_transition(st, &r, PT_STATE_PROCESSING, NULL, "sent", "sync", NULL, at - 500),
        PT_OK);
    assert_int_equal(
        pt_refund_transition(st, &r, PT_STATE_SUCCESS, &p, "gateway_succeeded", "sync", NULL, at),
        PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
}

static struct pt_recon_record rec(int refund, int day, const char *order, const char *refund_id,
                                  int64_t amount, const char *currency)
{
    struct pt_recon_record r;
    memset(&r, 0, sizeof r);
    r.refund = refund;
    r.day = day;
    snprintf(r.order_id, sizeof r.order_id, "%s", order);
    snprintf(r.refund_id, sizeof r.refund_id, "%s", refund_id ? refund_id : "");
    snprintf(r.gateway_trade_no, sizeof r.gateway_trade_no, "wx-%s", order);
    if (refund_id)
        snprintf(r.gateway_refund_no, sizeof r.gateway_refund_no, "wr-%s", refund_id);
    r.amount = amount;
    snprintf(r.currency, sizeof r.currency, "%s", currency);
    return r;
}

/* The shop's day: every kind once, a midnight payment, tomorrow's. */
static void the_day(struct pt_store *st)
{
    int64_t a = paid(st, "A", 1000, "wx-A", DAY0 + 1 * HOUR);
    int64_t b = paid(st, "B", 2000, "wx-B", DAY0 + 2 * HOUR);
    paid(st, "C", 3000, "wx-C", DAY0 + 3 * HOUR);
    paid(st, "E", 500, "wx-E", DAY0 - 10000);     /* 23:59:50 the day before */
    paid(st, "F", 700, "wx-F", DAY0 + 24 * HOUR); /* tomorrow: not today's */
    paid(st, "G", 900, "wx-G", DAY0 + 4 * HOUR);
    refunded(st, a, "RA1", 300, "wr-RA1", DAY0 + 5 * HOUR);
    refunded(st, b, "RB1", 500, "wr-RB1", DAY0 + 6 * HOUR);
}

static const struct pt_recon_record *the_bill(size_t *n)
{
    static struct pt_recon_record b[8];
    b[0] = rec(0, 0, "A", NULL, 1000, "CNY"); /* matched */
    b[1] = rec(0, 0, "B", NULL, 2100, "CNY"); /* amount_mismatch */
    b[2] = rec(0, 0, "D", NULL, 4200, "CNY"); /* gateway_only, no local charge */
    b[3] = rec(0, 0, "E", NULL, 500, "CNY");  /* matched across midnight */
    b[4] = rec(0, 0, "G", NULL, 900, "HKD");  /* currency_mismatch */
    b[5] = rec(1, 0, "A", "RA1", 300, "CNY"); /* matched */
    b[6] = rec(1, 0, "A", "RA2", 200, "CNY"); /* refund_gateway_only */
    b[7] = rec(0, 1, "F", NULL, 700, "CNY");  /* tomorrow's bill: nothing today */
    *n = 8;
    return b;
}

static cJSON *run(struct pt_store *st, int64_t now, size_t *found, char **text)
{
    size_t n;
    const struct pt_recon_record *b = the_bill(&n);
    struct pt_recon_bill bill = {.rows = b, .n = n, .source = "file"};
    char *body = NULL;
    assert_int_equal(
        pt_recon_run(st, "wechat", "2026-12-05", &bill, "reconcile", now, &body, found), PT_OK);
    cJSON *o = cJSON_Parse(body);
    assert_non_null(o);
    if (text)
        *text = body;
    else
        free(body);
    return o;
}

static long long num(const cJSON *o, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
    if (b)
        v = cJSON_GetObjectItemCaseSensitive(v, b);
    assert_true(cJSON_IsNumber(v));
    return (long long)v->valuedouble;
}

/* "kind order refund amount_local/amount_gateway" of every discrepancy. */
static void kinds(const cJSON *o, char *out, size_t cap)
{
    size_t k = 0;
    out[0] = '\0';
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(o, "discrepancies"))
    {
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(d, "kind");
        const cJSON *order = cJSON_GetObjectItemCaseSensitive(d, "order_id");
        const cJSON *refund = cJSON_GetObjectItemCaseSensitive(d, "refund_id");
        const cJSON *al = cJSON_GetObjectItemCaseSensitive(d, "amount_local");
        const cJSON *ag = cJSON_GetObjectItemCaseSensitive(d, "amount_gateway");
        k += (size_t)snprintf(out + k, cap - k, "%s %s%s%s", kind->valuestring,
                              cJSON_IsString(order) ? order->valuestring : "-",
                              cJSON_IsString(refund) ? "/" : "",
                              cJSON_IsString(refund) ? refund->valuestring : "");
        if (cJSON_IsNumber(al))
            k += (size_t)snprintf(out + k, cap - k, " %lld>%lld", (long long)al->valuedouble,
                                  (long long)ag->valuedouble);
        k += (size_t)snprintf(out + k, cap - k, "; ");
        assert_true(k < cap);
    }
}

/* How many review_raised rows of reason the charge's trail holds. */
static int raised(struct pt_store *st, const char *order, const char *reason, int *review)
{
    struct pt_charge c;
    assert_int_equal(pt_store_charge_get(st, order, &c), PT_OK);
    static struct pt_audit_row rows[64];
    int n = 0, count = 0;
    assert_int_equal(pt_store_audit_list(st, c.id, 64, rows, &n), PT_OK);
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].cause, "review_raised") && strstr(rows[i].detail, reason))
            count++;
    if (review)
        *review = c.review;
    return count;
}

static void test_every_kind_once(void **state)
{
    (void)state;
    struct pt_store *st = open_store();
    the_day(st);
    size_t found = 0;
    char *first = NULL;
    cJSON *o = run(st, DAY0 + 34 * HOUR, &found, &first);

    assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "state")->valuestring, "done");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "source")->valuestring, "file");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "coverage")->valuestring, "bill");
    char got[1024];
    kinds(o, got, sizeof got);
    assert_string_equal(got, "gateway_only D; local_only C; amount_mismatch B 2000>2100; "
                             "currency_mismatch G 900>900; refund_gateway_only A/RA2; "
                             "refund_local_only B/RB1; ");
    assert_int_equal(found, 6);
    assert_int_equal(num(o, "matched", NULL), 3); /* A, E across midnight, RA1 */
    /* The bill's side of 2026-12-05: A B D E G, RA1 RA2 (F is tomorrow's). */
    assert_int_equal(num(o, "bill", "trades"), 5);
    assert_int_equal(num(o, "bill", "amount"), 1000 + 2100 + 4200 + 500 + 900);
    assert_int_equal(num(o, "bill", "refunds"), 2);
    assert_int_equal(num(o, "bill", "refunded"), 500);
    /* payterm's: A B C G paid that day (E the day before, F the day after). */
    assert_int_equal(num(o, "local", "charges"), 4);
    assert_int_equal(num(o, "local", "amount"), 1000 + 2000 + 3000 + 900);
    assert_int_equal(num(o, "local", "refunds"), 2);
    assert_int_equal(num(o, "local", "refunded"), 800);
    cJSON_Delete(o);

    /* Each local charge concerned is under review, audited once per kind;
     * D is nobody's, A's matched sale keeps its own review for RA2 only. */
    int review = 0;
    assert_int_equal(raised(st, "B", "reconciliation_amount_mismatch", &review), 1);
    assert_int_equal(review, 1);
    assert_int_equal(raised(st, "B", "reconciliation_refund_local_only", NULL), 1);
    assert_int_equal(raised(st, "C", "reconciliation_local_only", &review), 1);
    assert_int_equal(review, 1);
    assert_int_equal(raised(st, "G", "reconciliation_currency_mismatch", NULL), 1);
    assert_int_equal(raised(st, "A", "reconciliation_refund_gateway_only", &review), 1);
    assert_int_equal(review, 1);
    assert_int_equal(raised(st, "E", "reconciliation_", &review), 0);
    assert_int_equal(review, 0);

    /* The same bill again: the same discrepancies, no second audit row,
     * and the day's latest run is the new one, byte for byte. */
    char *second = NULL;
    o = run(st, DAY0 + 35 * HOUR, &found, &second);
    char again[1024];
    kinds(o, again, sizeof again);
    assert_string_equal(again, got);
    cJSON_Delete(o);
    assert_int_equal(raised(st, "B", "reconciliation_amount_mismatch", NULL), 1);
    assert_int_equal(raised(st, "A", "reconciliation_refund_gateway_only", NULL), 1);
    char *latest = NULL;
    assert_int_equal(pt_store_recon_latest(st, "wechat", "2026-12-05", &latest), PT_OK);
    assert_string_equal(latest, second);
    assert_string_not_equal(first, second); /* run_at differs */
    free(latest);
    free(first);
    free(second);
    assert_int_equal(pt_store_recon_latest(st, "wechat", "2026-12-04", &latest), PT_ENOTFOUND);
    assert_int_equal(pt_store_recon_latest(st, "stripe", "2026-12-05", &latest), PT_ENOTFOUND);
    pt_store_close(st);
}

/* An operator who cleared a review has seen the finding; the same kind
 * found again (the next run of the day, another day) raises it again. */
static void test_cleared_review_is_raised_again(void **state)
{
    (void)state;
    struct pt_store *st = open_store();
    the_day(st);
    size_t found = 0;
    cJSON_Delete(run(st, DAY0 + 34 * HOUR, &found, NULL));
    assert_int_equal(raised(st, "B", "reconciliation_amount_mismatch", NULL), 1);

    struct pt_charge c;
    assert_int_equal(pt_store_charge_get(st, "B", &c), PT_OK);
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_charge_review(st, &c, 0, "checked with the bank", "op", DAY0 + 35 * HOUR),
                     PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    int review = 1;
    raised(st, "B", "reconciliation_", &review);
    assert_int_equal(review, 0);

    cJSON_Delete(run(st, DAY0 + 36 * HOUR, &found, NULL));
    assert_int_equal(found, 6);
    assert_int_equal(raised(st, "B", "reconciliation_amount_mismatch", &review), 2);
    assert_int_equal(review, 1);
    /* The charges nobody cleared keep their one row. */
    assert_int_equal(raised(st, "C", "reconciliation_local_only", NULL), 1);
    pt_store_close(st);
}

static void test_bill_day_is_the_gateways(void **state)
{
    (void)state;
    struct pt_store *st = open_store();
    /* 2026-12-04 20:00 UTC is 12-05 04:00 in China: WeChat's 12-05,
     * Stripe's 12-04. */
    paid(st, "W", 100, "wx-W", DAY0 + 4 * HOUR);
    struct pt_recon_record *rows = NULL;
    size_t n = 0;
    assert_int_equal(pt_recon_local(st, "wechat", "2026-12-05", &rows, &n), PT_OK);
    assert_int_equal(n, 1);
    assert_int_equal(rows[0].day, 0);
    assert_string_equal(rows[0].gateway_trade_no, "wx-W");
    free(rows);
    assert_int_equal(pt_recon_local(st, "wechat", "2026-12-04", &rows, &n), PT_OK);
    assert_int_equal(n, 1);
    assert_int_equal(rows[0].day, 1);
    free(rows);
    assert_int_equal(pt_recon_local(st, "wechat", "2026-12-07", &rows, &n), PT_OK);
    assert_int_equal(n, 0);
    free(rows);
    assert_int_equal(pt_recon_local(st, "wechat", "2026-13-01", &rows, &n), PT_EINVAL);
    assert_int_equal(pt_recon_local(st, "paypal", "2026-12-05", &rows, &n), PT_EINVAL);

    char d[11];
    pt_recon_previous_date("wechat", DAY0 + 25 * HOUR, d); /* 12-06 01:00 China */
    assert_string_equal(d, "2026-12-05");
    pt_recon_previous_date("stripe", DAY0 + 25 * HOUR, d); /* 12-05 17:00 UTC */
    assert_string_equal(d, "2026-12-04");
    assert_true(pt_recon_date_ok("2028-02-29"));
    assert_false(pt_recon_date_ok("2026-02-29"));
    assert_false(pt_recon_date_ok("2026-12-5"));
    assert_false(pt_recon_date_ok("1999-12-31"));
    assert_false(pt_recon_date_ok("2026-12-05 "));
    pt_store_close(st);
}

static void test_unfinished_runs_are_stored(void **state)
{
    (void)state;
    struct pt_store *st = open_store();
    char *body = NULL, *latest = NULL;
    assert_int_equal(pt_recon_run_unfinished(st, "wechat", "2026-12-05", "pending",
                                             "the bill is not ready (STATEMENT_CREATING)",
                                             DAY0 + 26 * HOUR, &body),
                     PT_OK);
    assert_int_equal(pt_store_recon_latest(st, "wechat", "2026-12-05", &latest), PT_OK);
    assert_string_equal(latest, body);
    cJSON *o = cJSON_Parse(latest);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "state")->valuestring, "pending");
    assert_non_null(
        strstr(cJSON_GetObjectItemCaseSensitive(o, "error")->valuestring, "STATEMENT_CREATING"));
    cJSON_Delete(o);
    free(body);
    free(latest);
    assert_int_equal(
        pt_recon_run_unfinished(st, "wechat", "2026-02-30", "failed", "x", DAY0, &body), PT_EINVAL);
    pt_store_close(st);
}

/* One run of a gateway and date at a time across the lanes of a shared
 * store (PostgreSQL's session lock); SQLite's one process uses its mutex
 * (sync_recon.c), so its store lock always answers yes. */
static void test_one_run_at_a_time(void **state)
{
    (void)state;
    struct pt_store *a = open_store(), *b = open_store();
    assert_int_equal(pt_store_recon_lock(a, "wechat", "2026-12-05"), PT_OK);
    int shared = pt_test_pg();
    assert_int_equal(pt_store_recon_lock(b, "wechat", "2026-12-05"), shared ? PT_EBUSY : PT_OK);
    if (!shared)
        pt_store_recon_unlock(b, "wechat", "2026-12-05");
    assert_int_equal(pt_store_recon_lock(b, "wechat", "2026-12-06"), PT_OK); /* another day */
    assert_int_equal(pt_store_recon_lock(b, "stripe", "2026-12-05"), PT_OK); /* another gateway */
    pt_store_recon_unlock(b, "wechat", "2026-12-06");
    pt_store_recon_unlock(b, "stripe", "2026-12-05");
    pt_store_recon_unlock(a, "wechat", "2026-12-05");
    assert_int_equal(pt_store_recon_lock(b, "wechat", "2026-12-05"), PT_OK);
    pt_store_recon_unlock(b, "wechat", "2026-12-05");
    pt_store_close(b);
    pt_store_close(a);
}

static int note_time(void *ctx, int64_t at)
{
    int64_t *v = ctx; /* v[0] how many, then the times */
    if (v[0] < 7)
        v[1 + v[0]] = at;
    v[0]++;
    return PT_OK;
}

static int by_time(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The days the daily run's walk back looks at: every charge and refund of
 * the gateway that became final in the range - paid, failed or canceled
 * alike - at the time it did. */
static void test_final_times(void **state)
{
    (void)state;
    struct pt_store *st = open_store();
    int64_t a = paid(st, "A", 1000, "wx-A", DAY0 + 1 * HOUR);
    refunded(st, a, "RA1", 100, "wr-RA1", DAY0 + 2 * HOUR);
    struct pt_charge f;
    memset(&f, 0, sizeof f);
    snprintf(f.order_id, sizeof f.order_id, "F");
    snprintf(f.gateway, sizeof f.gateway, "wechat");
    snprintf(f.method, sizeof f.method, "barcode");
    snprintf(f.currency, sizeof f.currency, "CNY");
    f.amount = 700;
    f.state = PT_STATE_INIT;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_charge_create(st, &f, "api", DAY0 + 3 * HOUR - 1000), PT_OK);
    assert_int_equal(pt_charge_transition(st, &f, PT_STATE_FAILED, NULL, "declined", "sync", NULL,
                                          DAY0 + 3 * HOUR),
                     PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    paid(st, "LATER", 500, "wx-LATER", DAY0 + 30 * HOUR); /* after the range */
    int64_t v[8] = {0};
    assert_int_equal(pt_store_recon_final_times(st, "wechat", DAY0, DAY0 + 24 * HOUR, note_time, v),
                     PT_OK);
    assert_int_equal(v[0], 3);
    qsort(v + 1, 3, sizeof v[0], by_time);
    assert_int_equal(v[1], DAY0 + 1 * HOUR);
    assert_int_equal(v[2], DAY0 + 2 * HOUR);
    assert_int_equal(v[3], DAY0 + 3 * HOUR); /* the declined one too */
    memset(v, 0, sizeof v);
    assert_int_equal(pt_store_recon_final_times(st, "stripe", DAY0, DAY0 + 24 * HOUR, note_time, v),
                     PT_OK);
    assert_int_equal(v[0], 0); /* another gateway's days are its own */
    pt_store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_every_kind_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cleared_review_is_raised_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bill_day_is_the_gateways, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unfinished_runs_are_stored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_run_at_a_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_final_times, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
