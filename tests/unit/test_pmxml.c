/*
 * test_pmxml.c - the XML reader and writer of 2C2P's Payment Maintenance
 * messages (core/gateways/pmxml.h), table-driven from test_pmxml.data
 * beside this file: 2C2P's own sample answers read as they should, and
 * every document the reader must refuse is refused.
 */
#include "testutil.h"

#include "err.h"
#include "gateways/pmxml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Undoes \n, \r, \t and \xHH of a table's XML column, in place. */
static size_t unescape(char *s)
{
    char *w = s;
    for (char *p = s; *p; p++) {
        if (*p != '\\' || !p[1]) {
            *w++ = *p;
            continue;
        }
        p++;
        if (*p == 'n')
            *w++ = '\n';
        else if (*p == 'r')
            *w++ = '\r';
        else if (*p == 't')
            *w++ = '\t';
        else if (*p == 'x') {
            unsigned v = 0;
            sscanf(p + 1, "%2x", &v);
            *w++ = (char)v;
            p += 2;
        } else
            *w++ = *p;
    }
    return (size_t)(w - s);
}

static const char *refund_attr(const struct pt_pmxml *m, int i, const char *attr)
{
    assert_true(i < m->nrefunds);
    const struct pt_pmxml_refund *r = &m->refunds[i];
    return strcmp(attr, "amount") == 0        ? r->amount
           : strcmp(attr, "status") == 0      ? r->status
           : strcmp(attr, "referenceNo") == 0 ? r->reference_no
                                              : r->date_time;
}

/* One NAME=VALUE of the CHECKS column. */
static void check_one(const struct pt_pmxml *m, const char *name, const char *want, int line)
{
    char got[64];
    const char *g;
    int idx;
    char attr[32];
    if (strcmp(name, "fields") == 0 || strcmp(name, "refunds") == 0 || strcmp(name, "list") == 0) {
        snprintf(got, sizeof got, "%d",
                 name[0] == 'f'   ? m->n
                 : name[0] == 'r' ? m->nrefunds
                                  : m->has_refund_list);
        g = got;
    } else if (sscanf(name, "refund%d.%31s", &idx, attr) == 2) {
        g = refund_attr(m, idx, attr);
    } else {
        g = pt_pmxml_get(m, name);
    }
    if (strcmp(g ? g : "(null)", want) != 0)
        fail_msg("line %d: %s is '%s', want '%s'", line, name, g ? g : "(null)", want);
}

static void check_all(const struct pt_pmxml *m, char *checks, int line)
{
    if (strcmp(checks, "-") == 0)
        return;
    for (char *save = NULL, *c = strtok_r(checks, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(c, '=');
        assert_non_null(eq);
        *eq = '\0';
        check_one(m, c, eq + 1, line);
    }
}

static void test_table(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/test_pmxml.data", PT_TEST_UNIT_DIR);
    char *text = pt_test_read_file(path, NULL);
    assert_non_null(text);
    int ran = 0, line = 0;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        line++;
        if (*l == '#')
            continue;
        char *s1 = strstr(l, " | "), *s2 = s1 ? strstr(s1 + 3, " |") : NULL;
        assert_non_null(s2);
        *s1 = '\0';
        *s2 = '\0';
        char *checks = s1 + 3, *xml = s2[2] == ' ' ? s2 + 3 : s2 + 2;
        size_t len = unescape(xml);
        struct pt_pmxml *m = calloc(1, sizeof *m);
        int rc = pt_pmxml_parse(xml, len, "PaymentProcessResponse", m);
        int want = strcmp(l, "ok") == 0 ? PT_OK : strcmp(l, "toobig") == 0 ? PT_ETOOBIG : PT_EPARSE;
        if (rc != want)
            fail_msg("case %d (%s): rc %d, want %s", ran + 1, xml, rc, l);
        if (rc == PT_OK)
            check_all(m, checks, ran + 1);
        pt_pmxml_free(m);
        free(m);
        ran++;
    }
    /* Every row ran: deleting rows fails the test. */
    assert_int_equal(ran, 43);
    free(text);
}

static void test_limits(void **state)
{
    (void)state;
    struct pt_pmxml *m = calloc(1, sizeof *m);
    char *doc = malloc(PT_PMXML_MAX + 64);
    size_t o = (size_t)sprintf(doc, "<PaymentProcessResponse><refundList>");
    for (int i = 0; i < PT_PMXML_REFUNDS_MAX + 1; i++)
        o += (size_t)sprintf(doc + o, "<refund referenceNo=\"%d\"/>", i);
    o += (size_t)sprintf(doc + o, "</refundList></PaymentProcessResponse>");
    assert_int_equal(pt_pmxml_parse(doc, o, "PaymentProcessResponse", m), PT_ETOOBIG);
    o = (size_t)sprintf(doc, "<PaymentProcessResponse>");
    for (int i = 0; i < PT_PMXML_FIELDS_MAX + 1; i++)
        o += (size_t)sprintf(doc + o, "<f%d>x</f%d>", i, i);
    o += (size_t)sprintf(doc + o, "</PaymentProcessResponse>");
    assert_int_equal(pt_pmxml_parse(doc, o, "PaymentProcessResponse", m), PT_ETOOBIG);
    memset(doc, ' ', PT_PMXML_MAX + 1);
    assert_int_equal(pt_pmxml_parse(doc, PT_PMXML_MAX + 1, "PaymentProcessResponse", m),
                     PT_ETOOBIG);
    assert_int_equal(pt_pmxml_parse(NULL, 0, "PaymentProcessResponse", m), PT_EPARSE);
    free(doc);
    pt_pmxml_free(m);
    free(m);
}

static void test_write(void **state)
{
    (void)state;
    const struct pt_pmxml_field f[] = {{"version", "4.3"}, {"respDesc", "a<b>&\"'</respDesc>"}};
    const struct pt_pmxml_refund r[] = {{"25.00", "RF", "3598743", NULL},
                                        {"1.00", "R\"F", "9", "x"}};
    char *xml = NULL;
    size_t len = 0;
    assert_int_equal(pt_pmxml_write("PaymentProcessResponse", f, 2, r, 2, 1, &xml, &len), PT_OK);
    assert_string_equal(xml,
                        "<PaymentProcessResponse><version>4.3</version><refundList><refund "
                        "amount=\"25.00\" status=\"RF\" referenceNo=\"3598743\"/><refund "
                        "amount=\"1.00\" status=\"R&quot;F\" referenceNo=\"9\" "
                        "dateTime=\"x\"/></refundList><respDesc>a&lt;b&gt;&amp;&quot;&apos;&lt;"
                        "/respDesc&gt;</respDesc></PaymentProcessResponse>");
    /* What the writer wrote, the reader reads back. */
    struct pt_pmxml *m = calloc(1, sizeof *m);
    assert_int_equal(pt_pmxml_parse(xml, len, "PaymentProcessResponse", m), PT_OK);
    assert_string_equal(pt_pmxml_get(m, "respDesc"), f[1].value);
    assert_int_equal(m->nrefunds, 2);
    assert_string_equal(m->refunds[1].status, "R\"F");
    assert_null(m->refunds[0].date_time);
    pt_pmxml_free(m);
    free(m);
    free(xml);
    /* Names that are not plain, values that an XML reader would change. */
    const struct pt_pmxml_field bad_name[] = {{"a b", "x"}};
    const struct pt_pmxml_field bad_value[] = {{"a", "x\ry"}};
    const struct pt_pmxml_field bad_utf8[] = {{"a", "\xc3\x28"}};
    assert_int_equal(pt_pmxml_write("R", bad_name, 1, NULL, 0, -1, &xml, NULL), PT_EINVAL);
    assert_int_equal(pt_pmxml_write("R", bad_value, 1, NULL, 0, -1, &xml, NULL), PT_EINVAL);
    assert_int_equal(pt_pmxml_write("R", bad_utf8, 1, NULL, 0, -1, &xml, NULL), PT_EINVAL);
    assert_int_equal(pt_pmxml_write("<R>", f, 1, NULL, 0, -1, &xml, NULL), PT_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_write),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
