/*
 * test_alipaybill.c - Alipay's trade bill (core/gateways/alipaybill.c) and
 * the zip it comes in (core/unzip.c): the published layout
 * (tests/vectors/alipay_bill, made by gen/alipay_bill.py; docs/reconcile.md)
 * read into trades and refunds, and every way a bill or its archive can
 * fail to hold together refused with its line or its reason.
 */
#include "testutil.h"

#include "err.h"
#include "gateways/alipaybill.h"
#include "unzip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATE "2026-12-05"

static char *vector(const char *name, size_t *len)
{
    char path[512];
    pt_test_data_path(name, path, sizeof path);
    char *s = pt_test_read_file(path, len);
    assert_non_null(s);
    return s;
}

/* The detail file with the first `from` replaced by `to`. */
static char *edited(const char *from, const char *to, size_t *len)
{
    size_t n;
    char *s = vector("alipay_bill/detail.csv", &n);
    char *at = strstr(s, from);
    assert_non_null(at);
    size_t fl = strlen(from), tl = strlen(to);
    char *out = malloc(n - fl + tl + 1);
    assert_non_null(out);
    size_t head = (size_t)(at - s);
    memcpy(out, s, head);
    memcpy(out + head, to, tl);
    memcpy(out + head + tl, at + fl, n - head - fl + 1);
    *len = n - fl + tl;
    free(s);
    return out;
}

static int parse(const char *text, size_t len, struct pt_recon_rows *rows, char *err, size_t cap)
{
    return pt_alipaybill_parse(text, len, DATE, 0, rows, err, cap);
}

static void test_a_day_read(void **state)
{
    (void)state;
    size_t len;
    char *text = vector("alipay_bill/detail.csv", &len);
    struct pt_recon_rows rows = {0};
    char err[256];
    assert_int_equal(parse(text, len, &rows, err, sizeof err), PT_OK);
    assert_int_equal(rows.n, 4);
    const struct pt_recon_record *latte = &rows.rows[0], *ref = &rows.rows[1];
    assert_false(latte->refund);
    assert_string_equal(latte->order_id, "LANE1-0001");
    assert_string_equal(latte->gateway_trade_no, "2026120522001458860515315453");
    assert_int_equal(latte->amount, 1234); /* 订单金额: what was asked, red packet included */
    assert_string_equal(latte->currency, "CNY");
    assert_true(ref->refund);
    assert_string_equal(ref->order_id, "LANE1-0001"); /* the trade's own order */
    assert_string_equal(ref->refund_id, "LANE1-0001-R1");
    assert_int_equal(ref->amount, 500);
    assert_int_equal(rows.rows[2].amount, 1);
    assert_string_equal(rows.rows[3].order_id, ""); /* 收钱码: no merchant order */
    assert_string_equal(rows.rows[3].gateway_trade_no, "2026120522001458860515315455");
    for (size_t i = 0; i < rows.n; i++)
        assert_int_equal(rows.rows[i].day, 0);
    free(rows.rows);
    free(text);
}

/* A value with a comma of its own comes quoted (RFC 4180, "" a quote):
 * the row keeps its width, and every value after it its place. */
static void test_quoted_values(void **state)
{
    (void)state;
    size_t len;
    char *text = edited(",Tea,2026", ",\"Tea, large \"\"grande\"\"\",2026", &len);
    struct pt_recon_rows rows = {0};
    char err[256];
    assert_int_equal(parse(text, len, &rows, err, sizeof err), PT_OK);
    assert_int_equal(rows.n, 4);
    assert_string_equal(rows.rows[2].order_id, "LANE1-0002");
    assert_int_equal(rows.rows[2].amount, 1);
    free(rows.rows);
    free(text);
}

/* The zip as Alipay serves it: the detail entry (named in GBK) found among
 * the two, inflated, CRC checked; the same records as the file. */
static void test_the_zip(void **state)
{
    (void)state;
    size_t zlen, dlen, len;
    char *zip = vector("alipay_bill/bill.zip", &zlen);
    char *detail = vector("alipay_bill/detail.csv", &dlen);
    char *out = NULL, err[256];
    assert_true(pt_unzip_is_zip(zip, zlen));
    assert_int_equal(pt_alipaybill_unzip(zip, zlen, &out, &len, err, sizeof err), PT_OK);
    assert_int_equal(len, dlen);
    assert_memory_equal(out, detail, dlen);
    free(out);
    struct pt_recon_rows rows = {0};
    assert_int_equal(pt__alipay_parse_bill(zip, zlen, DATE, &rows, err, sizeof err), PT_OK);
    assert_int_equal(rows.n, 4);
    free(rows.rows);

    /* Larger than the reader takes: refused before inflating. */
    static const char *const detail_name[] = {".csv", NULL};
    assert_int_equal(pt_unzip_find(zip, zlen, detail_name, 100, &out, &len, err, sizeof err),
                     PT_EPARSE); /* two entries end so */
    static const char *const summary[] = {").csv", NULL};
    assert_int_equal(pt_unzip_find(zip, zlen, summary, 100, &out, &len, err, sizeof err),
                     PT_ETOOBIG);
    assert_null(out);

    /* A flipped byte in the deflated data: damaged or a CRC that does not
     * match, never the text. */
    char *bad = malloc(zlen);
    memcpy(bad, zip, zlen);
    bad[30 + 50 + 40] ^= 0x55;
    int rc = pt_alipaybill_unzip(bad, zlen, &out, &len, err, sizeof err);
    assert_int_equal(rc, PT_EPARSE);
    assert_null(out);
    assert_non_null(strstr(err, "Alipay bill: zip: "));
    /* A stated size deflate could not reach from its data (a bomb's
     * promise): refused before any memory is taken for it. */
    memcpy(bad, zip, zlen);
    char *cen = NULL;
    for (size_t i = 0; !cen && i + 4 <= zlen; i++)
        if (memcmp(bad + i, "PK\1\2", 4) == 0)
            cen = bad + i; /* the first entry's, the detail file's */
    assert_non_null(cen);
    memcpy(cen + 24, "\0\0\0\2", 4); /* 32 MiB */
    assert_int_equal(pt_alipaybill_unzip(bad, zlen, &out, &len, err, sizeof err), PT_EPARSE);
    assert_non_null(strstr(err, "beyond what its data holds"));
    assert_null(out);
    /* Cut short: no end of central directory. */
    assert_int_equal(pt_alipaybill_unzip(zip, zlen - 30, &out, &len, err, sizeof err), PT_EPARSE);
    assert_non_null(strstr(err, "end of central directory"));
    /* Not a zip at all, and a zip without the detail entry. */
    assert_int_equal(pt_alipaybill_unzip("PK\3\4", 4, &out, &len, err, sizeof err), PT_EPARSE);
    static const char *const none[] = {"_nothing.csv", NULL};
    assert_int_equal(pt_unzip_find(zip, zlen, none, 1u << 20, &out, &len, err, sizeof err),
                     PT_ENOTFOUND);
    free(bad);
    free(detail);
    free(zip);
}

/* Every way the file can fail to hold together: refused with its line,
 * and nothing of it kept. */
static void test_refused_with_the_line(void **state)
{
    (void)state;
    static const struct {
        const char *from, *to, *why;
    } cases[] = {
        /* Another day's row. */
        {"2026-12-05 18:02:44", "2026-12-06 00:00:01", "line 7: "},
        /* A value whose amount is not one. */
        {",12.34,", ",12.3x,", "line 6: "},
        /* A refund whose amount is positive. */
        {",-5.00,-5.00,", ",5.00,-5.00,", "line 7: "},
        /* A row of another width. */
        {"LANE1-0002\t,", "LANE1-0002\t,,", "line 8: "},
        /* An order id that is not ASCII. */
        {"LANE1-0002\t", "LANE1-\xb6\xa9", "line 8: "},
        /* Totals that do not add up: a row dropped or changed. */
        {"20.01", "20.02", "line 11: #交易合计 does not match"},
        {"\xa3\xba"
         "3",
         "\xa3\xba"
         "4",
         "line 11: "},
        {"-5.00\xd4\xaa", "-5.01\xd4\xaa", "line 12: #退款合计"},
        /* A column missing from the header (商户订单号 renamed). */
        {"\xc9\xcc\xbb\xa7\xb6\xa9\xb5\xa5\xba\xc5", "order", "line 5: "},
        /* A goods name with a comma of its own, not quoted (RFC 4180). */
        {",Tea,2026", ",Tea, large,2026", "line 8: 26 values"},
        /* A quote not closed. */
        {",Tea,2026", ",\"Tea,2026", "line 8: a quoted value"},
        /* A 业务类型 payterm does not know (冻结). */
        {",\xbd\xbb\xd2\xd7\t,", ",\xb6\xb3\xbd\xe1\t,", "line 6: "},
        /* Not the title line. */
        {"#\xd6\xa7", "#X", "line 1: "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len;
        char *text = edited(cases[i].from, cases[i].to, &len);
        struct pt_recon_rows rows = {0};
        char err[256] = "";
        int rc = parse(text, len, &rows, err, sizeof err);
        if (rc != PT_EPARSE || !strstr(err, cases[i].why))
            fail_msg("case %zu: rc %d, err '%s', want line '%s'", i, rc, err, cases[i].why);
        assert_int_equal(rows.n, 0);
        assert_true(pt_test_utf8_clean(err, strlen(err))); /* no GBK in a message */
        free(rows.rows);
        free(text);
    }
    /* Cut off before the list's end: never a partial bill. */
    size_t len;
    char *text = vector("alipay_bill/detail.csv", &len);
    struct pt_recon_rows rows = {0};
    char err[256];
    char *end = strstr(text, "#-----------------------------------------\xd2\xb5\xce\xf1\xc3\xf7"
                             "\xcf\xb8\xc1\xd0\xb1\xed\xbd\xe1");
    assert_non_null(end);
    assert_int_equal(parse(text, (size_t)(end - text), &rows, err, sizeof err), PT_EPARSE);
    assert_non_null(strstr(err, "ends before"));
    assert_int_equal(rows.n, 0);
    /* Rows already in the array stay; the bill's are not added. */
    struct pt_recon_record *r = pt_recon_push(&rows.rows, &rows.n, &rows.cap);
    assert_non_null(r);
    assert_int_equal(parse(text, (size_t)(end - text), &rows, err, sizeof err), PT_EPARSE);
    assert_int_equal(rows.n, 1);
    free(rows.rows);
    free(text);
}

/* 商家实收 that add up past int64 fen: refused with the line, no wrap. */
static void test_sums_do_not_wrap(void **state)
{
    (void)state;
    size_t n;
    char *text = vector("alipay_bill/detail.csv", &n);
    char *row = strstr(text, "2026120522001458860515315454"); /* the 23:59:59 tea */
    char *end = row ? strstr(row, "\r\n") : NULL;
    assert_non_null(end);
    char line[1024];
    snprintf(line, sizeof line, "%.*s", (int)(end - row), row);
    /* Its amounts, 0.01 and 0.01, made the largest a value may be. */
    char *amt = strstr(line, ",0.01,0.01,");
    assert_non_null(amt);
    char big[1100];
    snprintf(big, sizeof big, "%.*s,9999999999999.99,9999999999999.99,%s", (int)(amt - line), line,
             amt + strlen(",0.01,0.01,"));
    size_t head = (size_t)(row - text), cap = head + 10000 * (strlen(big) + 2) + 1;
    char *bill = malloc(cap);
    assert_non_null(bill);
    memcpy(bill, text, head);
    size_t k = head;
    for (int i = 0; i < 10000; i++)
        k += (size_t)snprintf(bill + k, cap - k, "%s\r\n", big);
    struct pt_recon_rows rows = {0};
    char err[256];
    assert_int_equal(parse(bill, k, &rows, err, sizeof err), PT_EPARSE);
    assert_non_null(strstr(err, "adds up past"));
    assert_int_equal(rows.n, 0);
    free(rows.rows);
    free(bill);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_day_read),       cmocka_unit_test(test_quoted_values),
        cmocka_unit_test(test_the_zip),          cmocka_unit_test(test_refused_with_the_line),
        cmocka_unit_test(test_sums_do_not_wrap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
