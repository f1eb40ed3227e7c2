/*
 * test_money.c - exact minor/major unit conversion and the exponent table.
 */
#include "testutil.h"

#include "err.h"
#include "money.h"

#include <string.h>

struct to_case {
    int64_t minor;
    const char *cur;
    const char *fixed;
    const char *trim;
};

static void test_to_decimal(void **state)
{
    (void)state;
    static const struct to_case cases[] = {
        {8888, "CNY", "88.88", "88.88"},
        {8880, "CNY", "88.80", "88.8"},
        {8800, "CNY", "88.00", "88"},
        {1, "CNY", "0.01", "0.01"},
        {10, "USD", "0.10", "0.1"},
        {100, "JPY", "100", "100"},
        {1234, "KWD", "1.234", "1.234"},
        {1000, "KWD", "1.000", "1"},
        {5, "KWD", "0.005", "0.005"},
        {100000, "THB", "1000.00", "1000"},
        {12345, "CLF", "1.2345", "1.2345"},
        {PT_MONEY_MAX, "CNY", "10000000000000.00", "10000000000000"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[PT_MONEY_DECIMAL_MAX];
        assert_int_equal(
            pt_money_to_decimal(cases[i].minor, cases[i].cur, PT_MONEY_FIXED, out, sizeof out),
            PT_OK);
        assert_string_equal(out, cases[i].fixed);
        assert_int_equal(
            pt_money_to_decimal(cases[i].minor, cases[i].cur, PT_MONEY_TRIM, out, sizeof out),
            PT_OK);
        assert_string_equal(out, cases[i].trim);
    }
}

static void test_to_decimal_errors(void **state)
{
    (void)state;
    char out[PT_MONEY_DECIMAL_MAX], tiny[4];
    assert_int_equal(pt_money_to_decimal(0, "CNY", PT_MONEY_FIXED, out, sizeof out), PT_ERANGE);
    assert_int_equal(pt_money_to_decimal(-5, "CNY", PT_MONEY_FIXED, out, sizeof out), PT_ERANGE);
    assert_int_equal(pt_money_to_decimal(PT_MONEY_MAX + 1, "CNY", PT_MONEY_FIXED, out, sizeof out),
                     PT_ERANGE);
    assert_int_equal(pt_money_to_decimal(INT64_MAX, "JPY", PT_MONEY_FIXED, out, sizeof out),
                     PT_ERANGE);
    assert_int_equal(pt_money_to_decimal(100, "XXX", PT_MONEY_FIXED, out, sizeof out), PT_EINVAL);
    assert_int_equal(pt_money_to_decimal(100, "cny", PT_MONEY_FIXED, out, sizeof out), PT_EINVAL);
    assert_int_equal(pt_money_to_decimal(100, "CNYY", PT_MONEY_FIXED, out, sizeof out), PT_EINVAL);
    assert_int_equal(pt_money_to_decimal(123456, "CNY", PT_MONEY_FIXED, tiny, sizeof tiny),
                     PT_ETOOBIG);
}

struct from_case {
    const char *s;
    const char *cur;
    int rc;
    int64_t minor;
};

static void test_from_decimal(void **state)
{
    (void)state;
    static const struct from_case cases[] = {
        {"88.88", "CNY", PT_OK, 8888},
        {"88.8", "CNY", PT_OK, 8880},
        {"88", "CNY", PT_OK, 8800},
        {"0.01", "CNY", PT_OK, 1},
        {"88.880", "CNY", PT_OK, 8888},  /* extra zero digits are exact */
        {"88.881", "CNY", PT_ERANGE, 0}, /* finer than a fen */
        {"100", "JPY", PT_OK, 100},
        {"100.0", "JPY", PT_OK, 100},
        {"100.5", "JPY", PT_ERANGE, 0},
        {"1.234", "KWD", PT_OK, 1234},
        {"1000", "THB", PT_OK, 100000},
        {"", "CNY", PT_EPARSE, 0},
        {"-1.00", "CNY", PT_EPARSE, 0},
        {"+1.00", "CNY", PT_EPARSE, 0},
        {"1e3", "CNY", PT_EPARSE, 0},
        {".5", "CNY", PT_EPARSE, 0},
        {"5.", "CNY", PT_EPARSE, 0},
        {" 5", "CNY", PT_EPARSE, 0},
        {"5 ", "CNY", PT_EPARSE, 0},
        {"1.2.3", "CNY", PT_EPARSE, 0},
        {"0x10", "CNY", PT_EPARSE, 0},
        {"NaN", "CNY", PT_EPARSE, 0},
        {"10000000000000.00", "CNY", PT_OK, PT_MONEY_MAX},
        {"10000000000000.01", "CNY", PT_ERANGE, 0},
        {"99999999999999999999", "CNY", PT_ERANGE, 0}, /* would overflow int64 */
        {"922337203685477580.7", "CLF", PT_ERANGE, 0},
        {"1.00", "ABC", PT_EINVAL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t v = -1;
        int rc = pt_money_from_decimal(cases[i].s, strlen(cases[i].s), cases[i].cur, &v);
        if (rc != cases[i].rc)
            fail_msg("\"%s\" %s: rc %d, want %d", cases[i].s, cases[i].cur, rc, cases[i].rc);
        if (rc == PT_OK)
            assert_int_equal(v, cases[i].minor);
    }
}

static void test_round_trip(void **state)
{
    (void)state;
    static const char *const curs[] = {"CNY", "JPY", "KWD", "THB", "USD", "CLF"};
    for (size_t c = 0; c < sizeof curs / sizeof curs[0]; c++) {
        for (int64_t v = 1; v < PT_MONEY_MAX; v = v * 7 + 3) {
            char out[PT_MONEY_DECIMAL_MAX];
            int64_t back = 0;
            for (int fmt = 0; fmt < 2; fmt++) {
                assert_int_equal(pt_money_to_decimal(v, curs[c], fmt, out, sizeof out), PT_OK);
                assert_int_equal(pt_money_from_decimal(out, strlen(out), curs[c], &back), PT_OK);
                assert_int_equal(back, v);
            }
        }
    }
}

static void test_exponents(void **state)
{
    (void)state;
    assert_int_equal(pt_money_exponent("CNY"), 2);
    assert_int_equal(pt_money_exponent("JPY"), 0);
    assert_int_equal(pt_money_exponent("KRW"), 0);
    assert_int_equal(pt_money_exponent("KWD"), 3);
    assert_int_equal(pt_money_exponent("BHD"), 3);
    assert_int_equal(pt_money_exponent("THB"), 2);
    assert_int_equal(pt_money_exponent("CLF"), 4);
    assert_int_equal(pt_money_exponent("ZZZ"), PT_EINVAL);
    assert_int_equal(pt_money_exponent(""), PT_EINVAL);
    assert_int_equal(pt_money_exponent("Cny"), PT_EINVAL);
    assert_true(pt_money_currency_valid("USD"));
    assert_false(pt_money_currency_valid("US"));
}

/* A gateway's own unit (struct pt_money_unit): out, back and the quantum. */
struct unit_case {
    const char *cur;
    struct pt_money_unit u;
    int64_t minor;
    int rc;        /* of pt_money_to_unit */
    int64_t units; /* when PT_OK */
    int64_t quantum;
};

static void test_units(void **state)
{
    (void)state;
    static const struct unit_case cases[] = {
        {"USD", {2, 1}, 1234, PT_OK, 1234, 1},
        {"MGA", {0, 1}, 1000, PT_OK, 10, 100}, /* ISO 2, the gateway 0 */
        {"MGA", {0, 1}, 1050, PT_ERANGE, 0, 100},
        {"ISK", {2, 100}, 500, PT_OK, 50000, 1}, /* ISO 0, the gateway 2 ending in 00 */
        {"KWD", {3, 10}, 1230, PT_OK, 1230, 10},
        {"KWD", {3, 10}, 1235, PT_ERANGE, 0, 10},
        {"KWD", {2, 1}, 1230, PT_OK, 123, 10},
        {"CLF", {2, 1}, 12300, PT_OK, 123, 100},
        {"CLF", {2, 1}, 12345, PT_ERANGE, 0, 100},
        {"JPY", {0, 1}, 0, PT_ERANGE, 0, 1},
        {"JPY", {4, 1}, INT64_MAX / 1000, PT_ERANGE, 0, 1}, /* beyond int64 in the unit */
        {"XXX", {2, 1}, 100, PT_EINVAL, 0, 0},
        {"USD", {2, 3}, 100, PT_EINVAL, 0, 0}, /* a step that is no power of ten */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct unit_case *k = &cases[i];
        int64_t units = -1, back = -1;
        assert_int_equal(pt_money_unit_quantum(k->cur, &k->u), k->quantum);
        assert_int_equal(pt_money_to_unit(k->minor, k->cur, &k->u, &units), k->rc);
        if (k->rc != PT_OK) {
            assert_int_equal(units, -1);
            continue;
        }
        assert_int_equal(units, k->units);
        assert_int_equal(pt_money_from_unit(units, k->cur, &k->u, &back), PT_OK);
        assert_int_equal(back, k->minor);
    }
    /* Back from units finer than ISO's minor unit: 1.5 kronur. */
    struct pt_money_unit isk = {2, 100};
    int64_t m = -1;
    assert_int_equal(pt_money_from_unit(150, "ISK", &isk, &m), PT_ERANGE);
    assert_int_equal(m, -1);
    assert_int_equal(pt_money_from_unit(0, "ISK", &isk, &m), PT_OK);
    assert_int_equal(m, 0);
    assert_int_equal(pt_money_from_unit(-100, "ISK", &isk, &m), PT_ERANGE);
    struct pt_money_unit usd;
    assert_int_equal(pt_money_iso_unit("USD", &usd), PT_OK);
    assert_int_equal(usd.exp, 2);
    assert_int_equal(usd.step, 1);
    assert_int_equal(pt_money_iso_unit("usd", &usd), PT_EINVAL);
    char out[PT_MONEY_DECIMAL_MAX];
    assert_int_equal(pt_money_format(123, 2, PT_MONEY_FIXED, out, sizeof out), PT_OK);
    assert_string_equal(out, "1.23");
    assert_int_equal(pt_money_format(123, 5, PT_MONEY_FIXED, out, sizeof out), PT_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_to_decimal),   cmocka_unit_test(test_to_decimal_errors),
        cmocka_unit_test(test_from_decimal), cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_exponents),    cmocka_unit_test(test_units),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
