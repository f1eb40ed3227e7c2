/*
 * test_reconcile.c - a bill against the local records (SPEC 19,
 * core/reconcile.c): every discrepancy kind, a payment at midnight that is
 * none, a bill without the merchant's ids, the same answer whatever the
 * order of the input.
 */
#include "testutil.h"

#include "err.h"
#include "reconcile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct pt_recon_record trade(int day, const char *order, const char *trade_no,
                                    int64_t amount, const char *cur)
{
    struct pt_recon_record r;
    memset(&r, 0, sizeof r);
    r.day = day;
    snprintf(r.order_id, sizeof r.order_id, "%s", order);
    snprintf(r.gateway_trade_no, sizeof r.gateway_trade_no, "%s", trade_no);
    r.amount = amount;
    snprintf(r.currency, sizeof r.currency, "%s", cur);
    return r;
}

static struct pt_recon_record refund(int day, const char *order, const char *refund_id,
                                     const char *refund_no, int64_t amount, const char *cur)
{
    struct pt_recon_record r = trade(day, order, "", amount, cur);
    r.refund = 1;
    snprintf(r.refund_id, sizeof r.refund_id, "%s", refund_id);
    snprintf(r.gateway_refund_no, sizeof r.gateway_refund_no, "%s", refund_no);
    return r;
}

/* "kind order refund amount" per discrepancy, ';'-joined. */
static void summary(const struct pt_recon_result *r, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < r->n && used < cap; i++) {
        const struct pt_recon_discrepancy *d = &r->d[i];
        used += (size_t)snprintf(out + used, cap - used, "%s%s %s %s %lld", i ? ";" : "",
                                 pt_recon_kind_name(d->kind), d->order_id,
                                 d->refund_id[0] ? d->refund_id : "-", (long long)d->amount);
    }
}

static void test_a_day_that_adds_up(void **state)
{
    (void)state;
    struct pt_recon_record bill[] = {
        trade(0, "A", "T-A", 1250, "CNY"),
        trade(0, "B", "T-B", 800, "CNY"),
        refund(0, "B", "B-R1", "TR-B1", 300, "CNY"),
    };
    struct pt_recon_record local[] = {
        refund(0, "B", "B-R1", "TR-B1", 300, "CNY"),
        trade(0, "B", "T-B", 800, "CNY"),
        trade(0, "A", "T-A", 1250, "CNY"),
    };
    struct pt_recon_result r;
    assert_int_equal(pt_recon_compare(bill, 3, local, 3, &r), PT_OK);
    assert_int_equal(r.n, 0);
    assert_int_equal(r.matched, 3);
    assert_int_equal(r.bill.trades, 2);
    assert_int_equal(r.bill.amount, 2050);
    assert_int_equal(r.bill.refunds, 1);
    assert_int_equal(r.bill.refunded, 300);
    assert_memory_equal(&r.bill, &r.local, sizeof r.bill);
    pt_recon_result_free(&r);
    /* Nothing on either side: nothing to say. */
    assert_int_equal(pt_recon_compare(NULL, 0, NULL, 0, &r), PT_OK);
    assert_int_equal(r.n + r.matched, 0);
    pt_recon_result_free(&r);
}

static void test_every_kind(void **state)
{
    (void)state;
    struct pt_recon_record bill[] = {
        trade(0, "GW-ONLY", "T-1", 4200, "CNY"),    /* paid at the gateway, not here */
        trade(0, "AMOUNT", "T-2", 1000, "CNY"),     /* the gateway took 1000 */
        trade(0, "CURRENCY", "T-3", 500, "USD"),    /* ... in another currency */
        refund(0, "R", "R-GW", "TR-1", 100, "CNY"), /* a refund payterm never made */
        refund(0, "R", "R-AMT", "TR-2", 250, "CNY"), trade(0, "R", "T-R", 900, "CNY"),
    };
    struct pt_recon_record local[] = {
        trade(0, "AMOUNT", "T-2", 990, "CNY"),
        trade(0, "CURRENCY", "T-3", 500, "CNY"),
        trade(0, "LOCAL-ONLY", "T-4", 300, "CNY"), /* a SUCCESS the gateway does not list */
        trade(0, "R", "T-R", 900, "CNY"),
        refund(0, "R", "R-AMT", "TR-2", 200, "CNY"),
        refund(0, "R", "R-LOCAL", "TR-3", 50, "CNY"),
    };
    struct pt_recon_result r;
    assert_int_equal(pt_recon_compare(bill, 6, local, 6, &r), PT_OK);
    char got[1024];
    summary(&r, got, sizeof got);
    assert_string_equal(got, "gateway_only GW-ONLY - 4200;"
                             "local_only LOCAL-ONLY - 300;"
                             "amount_mismatch AMOUNT - 1000;"
                             "currency_mismatch CURRENCY - 500;"
                             "refund_gateway_only R R-GW 100;"
                             "refund_local_only R R-LOCAL 50;"
                             "refund_amount_mismatch R R-AMT 250");
    assert_int_equal(r.matched, 1); /* R's charge */
    const struct pt_recon_discrepancy *amt = &r.d[2], *cur = &r.d[3], *ramt = &r.d[6];
    assert_int_equal(amt->amount_local, 990);
    assert_int_equal(amt->amount_gateway, 1000);
    assert_string_equal(amt->gateway_trade_no, "T-2");
    assert_string_equal(cur->currency_local, "CNY");
    assert_string_equal(cur->currency_gateway, "USD");
    assert_int_equal(ramt->amount_local, 200);
    assert_int_equal(ramt->amount_gateway, 250);
    assert_string_equal(ramt->gateway_refund_no, "TR-2");
    assert_string_equal(r.d[0].gateway_trade_no, "T-1");
    pt_recon_result_free(&r);
}

/* A payment at 23:59:59 on the lane that the gateway books at 00:00:01:
 * found in the neighbouring day's bill, never a discrepancy. */
static void test_midnight_is_no_discrepancy(void **state)
{
    (void)state;
    struct pt_recon_record bill[] = {
        trade(0, "EARLY", "T-1", 100, "CNY"),   /* local: the day before */
        trade(1, "LATE", "T-2", 200, "CNY"),    /* the next day's bill */
        trade(-1, "OLD", "T-3", 300, "CNY"),    /* both before: not this run's */
        trade(1, "FAR", "T-4", 400, "CNY"),     /* two days from its local record */
        trade(-1, "OLDAMT", "T-5", 510, "CNY"), /* a mismatch found from this day */
    };
    struct pt_recon_record local[] = {
        trade(-1, "EARLY", "T-1", 100, "CNY"), trade(0, "LATE", "T-2", 200, "CNY"),
        trade(-1, "OLD", "T-3", 300, "CNY"),   trade(-1, "FAR", "T-4", 400, "CNY"),
        trade(0, "OLDAMT", "T-5", 500, "CNY"),
    };
    struct pt_recon_result r;
    assert_int_equal(pt_recon_compare(bill, 5, local, 5, &r), PT_OK);
    char got[512];
    summary(&r, got, sizeof got);
    assert_string_equal(got, "amount_mismatch OLDAMT - 510");
    assert_int_equal(r.matched, 2); /* EARLY, LATE */
    assert_int_equal(r.bill.trades, 1);
    assert_int_equal(r.local.trades, 2);
    pt_recon_result_free(&r);
}

/* A bill that names only the gateway's numbers is paired through them. */
static void test_bill_without_merchant_ids(void **state)
{
    (void)state;
    struct pt_recon_record bill[] = {
        trade(0, "", "T-1", 100, "USD"), refund(0, "", "", "TR-1", 40, "USD"),
        trade(0, "", "T-UNKNOWN", 70, "USD"), trade(0, "", "", 5, "USD"), /* no id at all */
    };
    struct pt_recon_record local[] = {
        trade(0, "O-1", "T-1", 100, "USD"),
        refund(0, "O-1", "O-1-R", "TR-1", 40, "USD"),
    };
    struct pt_recon_result r;
    assert_int_equal(pt_recon_compare(bill, 4, local, 2, &r), PT_OK);
    char got[512];
    summary(&r, got, sizeof got);
    assert_string_equal(got, "gateway_only  - 5;gateway_only  - 70");
    assert_string_equal(r.d[1].gateway_trade_no, "T-UNKNOWN");
    assert_int_equal(r.matched, 2);
    pt_recon_result_free(&r);
}

/* The gateway listing one trade twice took the money twice. */
static void test_twice_in_the_bill(void **state)
{
    (void)state;
    struct pt_recon_record bill[] = {trade(0, "A", "T-1", 100, "CNY"),
                                     trade(0, "A", "T-1b", 100, "CNY")};
    struct pt_recon_record local[] = {trade(0, "A", "T-1", 100, "CNY")};
    struct pt_recon_result r;
    assert_int_equal(pt_recon_compare(bill, 2, local, 1, &r), PT_OK);
    assert_int_equal(r.matched, 1);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.d[0].kind, PT_RECON_GATEWAY_ONLY);
    pt_recon_result_free(&r);
}

/* Runs over the same bill give the same discrepancies, in the same order,
 * whatever order the records came in. */
static void test_same_answer_any_order(void **state)
{
    (void)state;
    enum { N = 60 };
    struct pt_recon_record bill[N], local[N];
    size_t nb = 0, nl = 0;
    for (int i = 0; i < N / 2; i++) {
        char o[16], t[16];
        snprintf(o, sizeof o, "O-%02d", i);
        snprintf(t, sizeof t, "T-%02d", i);
        if (i % 7 != 3)
            bill[nb++] = trade(i % 3 - 1, o, t, 100 + i + (i % 11 == 5), "CNY");
        if (i % 5 != 2)
            local[nl++] = trade(i % 4 == 0 ? 0 : i % 3 - 1, o, t, 100 + i, "CNY");
    }
    struct pt_recon_result first, again;
    assert_int_equal(pt_recon_compare(bill, nb, local, nl, &first), PT_OK);
    assert_true(first.n > 3);
    unsigned seed = 7;
    for (int round = 0; round < 20; round++) {
        for (size_t i = nb - 1; i > 0; i--) { /* Fisher-Yates */
            size_t j = (size_t)rand_r(&seed) % (i + 1);
            struct pt_recon_record x = bill[i];
            bill[i] = bill[j];
            bill[j] = x;
        }
        for (size_t i = nl - 1; i > 0; i--) {
            size_t j = (size_t)rand_r(&seed) % (i + 1);
            struct pt_recon_record x = local[i];
            local[i] = local[j];
            local[j] = x;
        }
        assert_int_equal(pt_recon_compare(bill, nb, local, nl, &again), PT_OK);
        assert_int_equal(again.n, first.n);
        assert_int_equal(again.matched, first.matched);
        assert_memory_equal(again.d, first.d, first.n * sizeof *first.d);
        pt_recon_result_free(&again);
    }
    pt_recon_result_free(&first);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_day_that_adds_up),
        cmocka_unit_test(test_every_kind),
        cmocka_unit_test(test_midnight_is_no_discrepancy),
        cmocka_unit_test(test_bill_without_merchant_ids),
        cmocka_unit_test(test_twice_in_the_bill),
        cmocka_unit_test(test_same_answer_any_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
