/*
 * test_stripe_bill.c - Stripe's day (core/gateways/stripe_bill.c): pages
 * of GET /v1/charges and GET /v1/refunds, laid out as Stripe's API
 * reference shows its list, Charge and Refund objects, read into the
 * records reconciliation compares; and a page that does not hold together
 * refused, naming the item.
 */
#include "testutil.h"

#include "err.h"
#include "gateways/stripe_bill.h"

#include <stdio.h>
#include <string.h>

/* 2026-12-05 00:00:00 UTC and the next midnight. */
#define DAY 1796428800LL
#define NEXT (DAY + 86400)

static const char charges_page[] =
    "{\"object\":\"list\",\"url\":\"/v1/charges\",\"has_more\":true,\"data\":["
    "{\"id\":\"ch_1\",\"object\":\"charge\",\"amount\":1250,\"amount_captured\":1250,"
    "\"captured\":true,\"created\":1796436000,\"currency\":\"usd\",\"paid\":true,"
    "\"payment_intent\":\"pi_1\",\"status\":\"succeeded\",\"metadata\":{\"order_id\":\"LANE1-7\"}},"
    "{\"id\":\"ch_2\",\"object\":\"charge\",\"amount\":500,\"captured\":true,"
    "\"created\":1796436100,\"currency\":\"jpy\",\"payment_intent\":\"pi_2\","
    "\"status\":\"succeeded\",\"metadata\":{}},"
    "{\"id\":\"ch_3\",\"object\":\"charge\",\"amount\":900,\"captured\":false,"
    "\"created\":1796436200,\"currency\":\"usd\",\"payment_intent\":\"pi_3\","
    "\"status\":\"succeeded\",\"metadata\":{}},"
    "{\"id\":\"ch_4\",\"object\":\"charge\",\"amount\":700,\"captured\":false,"
    "\"created\":1796436300,\"currency\":\"usd\",\"payment_intent\":\"pi_4\","
    "\"status\":\"failed\",\"metadata\":{}}]}";

static const char refunds_page[] =
    "{\"object\":\"list\",\"url\":\"/v1/refunds\",\"has_more\":false,\"data\":["
    "{\"id\":\"re_1\",\"object\":\"refund\",\"amount\":300,\"charge\":\"ch_1\","
    "\"created\":1796486000,\"currency\":\"usd\",\"payment_intent\":\"pi_1\","
    "\"status\":\"succeeded\",\"metadata\":{\"refund_id\":\"LANE1-7-R1\",\"order_id\":\"LANE1-7\"}}"
    ","
    "{\"id\":\"re_2\",\"object\":\"refund\",\"amount\":100,\"charge\":\"ch_1\","
    "\"created\":1796486100,\"currency\":\"usd\",\"payment_intent\":\"pi_1\","
    "\"status\":\"pending\",\"metadata\":{}}]}";

static void test_pages_read(void **state)
{
    (void)state;
    struct pt_stripe_bill b = {0};
    char err[256];
    assert_int_equal(
        pt_stripe_bill_page(charges_page, strlen(charges_page), 0, DAY, NEXT, &b, err, sizeof err),
        PT_OK);
    assert_int_equal(b.n, 2);
    assert_int_equal(b.skipped, 2); /* not captured; failed */
    assert_true(b.has_more);
    assert_string_equal(b.last_id, "ch_4"); /* starting_after for the next page */
    assert_string_equal(b.rows[0].order_id, "LANE1-7");
    assert_string_equal(b.rows[0].gateway_trade_no, "pi_1");
    assert_int_equal(b.rows[0].amount, 1250);
    assert_string_equal(b.rows[0].currency, "USD");
    assert_string_equal(b.rows[1].order_id, ""); /* named by its PaymentIntent */
    assert_string_equal(b.rows[1].gateway_trade_no, "pi_2");
    assert_int_equal(b.rows[1].amount, 500); /* JPY: zero-decimal at Stripe and at ISO */
    assert_int_equal(
        pt_stripe_bill_page(refunds_page, strlen(refunds_page), 1, DAY, NEXT, &b, err, sizeof err),
        PT_OK);
    assert_int_equal(b.n, 3);
    assert_false(b.has_more);
    const struct pt_recon_record *r = &b.rows[2];
    assert_true(r->refund);
    assert_string_equal(r->refund_id, "LANE1-7-R1");
    assert_string_equal(r->order_id, "LANE1-7");
    assert_string_equal(r->gateway_refund_no, "re_1");
    assert_string_equal(r->gateway_trade_no, "pi_1");
    assert_int_equal(r->amount, 300);
    pt_stripe_bill_free(&b);
}

struct bad {
    const char *what, *json, *says;
    int refunds;
};

static void test_refused_naming_the_item(void **state)
{
    (void)state;
#define CH(fields)                                                                                 \
    "{\"object\":\"list\",\"has_more\":false,\"data\":[{\"id\":\"ch_9\",\"object\":\"charge\","    \
    "\"status\":\"succeeded\",\"payment_intent\":\"pi_9\"," fields "}]}"
    static const struct bad bad[] = {
        {"not JSON", "{", "not a list object", 0},
        {"not a list", "{\"object\":\"charge\"}", "not a list object", 0},
        {"no has_more", "{\"object\":\"list\",\"data\":[]}", "has_more: not a boolean", 0},
        {"a refund in the charges",
         "{\"object\":\"list\",\"has_more\":false,\"data\":[{\"object\":\"refund\"}]}",
         "data[0]: not a charge object", 0},
        {"another day", CH("\"amount\":1,\"currency\":\"usd\",\"created\":1796428799"),
         "data[0]: created of ch_9: not a time of the day", 0},
        {"an amount that is not one",
         CH("\"amount\":12.5,\"currency\":\"usd\",\"created\":1796436000"),
         "data[0]: amount of ch_9", 0},
        {"a currency that is not one",
         CH("\"amount\":100,\"currency\":\"dollars\",\"created\":1796436000"),
         "data[0]: currency of ch_9", 0},
        {"an amount Stripe cannot hold (ISK in hundreds)",
         CH("\"amount\":150,\"currency\":\"isk\",\"created\":1796436000"),
         "data[0]: amount of ch_9: 150 is no amount of ISK", 0},
        {"an order id that is not payterm's",
         CH("\"amount\":100,\"currency\":\"usd\",\"created\":1796436000,\"metadata\":{\"order_id\":"
            "\"0123456789012345678901234567890123456789012345678901234567890123456789\"}"),
         "data[0]: metadata of ch_9", 0},
        {"has_more without items", "{\"object\":\"list\",\"has_more\":true,\"data\":[]}",
         "has_more with no items", 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct pt_stripe_bill b = {0};
        char err[256];
        /* A page read before stays; the refused one adds nothing. */
        assert_int_equal(pt_stripe_bill_page(charges_page, strlen(charges_page), 0, DAY, NEXT, &b,
                                             err, sizeof err),
                         PT_OK);
        int rc = pt_stripe_bill_page(bad[i].json, strlen(bad[i].json), bad[i].refunds, DAY, NEXT,
                                     &b, err, sizeof err);
        if (rc != PT_EPARSE || !strstr(err, bad[i].says))
            fail_msg("%s: rc %d, '%s' (want '%s')", bad[i].what, rc, err, bad[i].says);
        assert_int_equal(b.n, 2);
        pt_stripe_bill_free(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pages_read),
        cmocka_unit_test(test_refused_naming_the_item),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
