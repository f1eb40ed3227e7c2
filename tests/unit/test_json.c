/*
 * test_json.c - the strict JSON check (pt_json_check), plain integers
 * (pt_json_plain_int) and the UTF-8 scrub of messages.  The byte cases are
 * tables in test_json_check.data and test_json_int.data beside this file.
 */
#include "testutil.h"

#include "err.h"
#include "json.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- data files ------------------------------------------------------------------ */

/* Case lines of each table: deleting one fails the test, and a new one
 * updates the count here. */
#define CHECK_ROWS 146
#define INT_ROWS 32

/* The case lines of tests/unit/<name> (comments and blank lines dropped), in
 * a malloc'd copy of the file; fails the test when it is missing or holds
 * another number of cases than want. */
static char **case_lines(const char *name, size_t want, size_t *n, char **text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", PT_TEST_UNIT_DIR, name);
    size_t len;
    *text = pt_test_read_file(path, &len);
    if (!*text)
        fail_msg("cannot read the case table %s", path);
    char **lines = calloc(len / 2 + 2, sizeof *lines);
    assert_non_null(lines);
    *n = 0;
    for (char *p = *text, *nl; p && *p; p = nl ? nl + 1 : NULL) {
        nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        if (*p && *p != '#')
            lines[(*n)++] = p;
    }
    if (*n != want)
        fail_msg("the case table %s holds %zu cases, want %zu (a deleted case fails the test; "
                 "a new one updates the count in test_json.c)",
                 path, *n, want);
    return lines;
}

/* Splits "a | b | rest" at the first k separators " | "; the last column is
 * the rest of the line.  A line starting "| " has an empty first column, one
 * ending " |" an empty last one. */
static int columns(char *line, char **col, int k)
{
    static char empty[1];
    char *p = line;
    for (int i = 0; i < k; i++) {
        if (i == 0 && strncmp(p, "| ", 2) == 0) {
            col[0] = empty;
            p += 2;
            continue;
        }
        char *sep = strstr(p, " | ");
        if (!sep) {
            size_t n = strlen(p);
            if (i != k - 1 || n < 2 || strcmp(p + n - 2, " |") != 0)
                return -1;
            p[n - 2] = '\0';
            col[i] = p;
            col[k] = empty;
            return 0;
        }
        *sep = '\0';
        col[i] = p;
        p = sep + 3;
    }
    col[k] = p;
    return 0;
}

/* %XX is a byte, %% a percent sign; returns the length (out is as long as in). */
static size_t unpercent(const char *in, char *out)
{
    size_t n = 0;
    for (const char *p = in; *p; p++) {
        if (*p == '%' && p[1] == '%') {
            out[n++] = '%';
            p++;
        } else if (*p == '%' && p[1] && p[2]) {
            char hex[3] = {p[1], p[2], 0};
            out[n++] = (char)strtol(hex, NULL, 16);
            p += 2;
        } else {
            out[n++] = *p;
        }
    }
    return n;
}

/* ---- pt_json_check ------------------------------------------------------------- */

static const struct {
    const char *kind, *problem;
} kinds[] = {
    {"nul", "contains U+0000"},
    {"utf8", "is not valid UTF-8"},
    {"surrogate", "contains an unpaired surrogate escape"},
    {"control", "contains an unescaped control character"},
    {"escape", "contains an invalid escape"},
    {"unterminated", "is not terminated"},
    {"twice", "given twice"},
    {"number", "is not a valid JSON number"},
    {"zero", "is not a valid JSON number: leading zero"},
    {"depth", "nests deeper than 16 levels"},
    {"syntax", "is not valid JSON"},
    {"integer", "must be a plain JSON integer (no fraction or exponent)"},
};

/*
 * Every report pt_json_check makes of malformed JSON, as core/json.c writes
 * it, the byte offset left out.  The table must draw each one at least once
 * - those about a string also about a member name ("has a member name that
 * ...") - so a report whose last case is deleted fails the test, and so
 * does a new report in json.c (test_every_report_listed reads the source).
 * PT_ENOMEM's "out of memory" is no verdict on the text, and is not here.
 */
static const struct {
    const char *fmt; /* %d matches digits, %c one character */
    int of_string;   /* also made of a member name */
} reports[] = {
    {"contains U+0000", 1},
    {"is not valid UTF-8", 1},
    {"contains an unpaired surrogate escape", 1},
    {"contains an unescaped control character", 1},
    {"contains an invalid escape", 1},
    {"is not terminated", 1},
    {"given twice", 0},
    {"is not a valid JSON number", 0},
    {"is not a valid JSON number: leading zero", 0},
    {"must be a plain JSON integer (no fraction or exponent)", 0},
    {"nests deeper than %d levels", 0},
    {"is not valid JSON", 0},
    {"is not valid JSON: a member name expected", 0},
    {"is not valid JSON: ':' expected", 0},
    {"is not valid JSON: a value expected", 0},
    {"is not valid JSON: more text after the value", 0},
    {"is not valid JSON: ',' or '%c' expected", 0},
};
#define NREPORTS (sizeof reports / sizeof reports[0])
#define NAME_PREFIX "has a member name that "

/* 1 when s is exactly what fmt prints (only %d and %c occur). */
static int fmt_match(const char *fmt, const char *s)
{
    while (*fmt) {
        if (fmt[0] == '%' && fmt[1] == 'd') {
            if (*s < '0' || *s > '9')
                return 0;
            while (*s >= '0' && *s <= '9')
                s++;
            fmt += 2;
        } else if (fmt[0] == '%' && fmt[1] == 'c') {
            if (!*s++)
                return 0;
            fmt += 2;
        } else if (*fmt++ != *s++) {
            return 0;
        }
    }
    return *s == '\0';
}

/* The index in reports[] of problem (a member name's in *of_name), or -1. */
static int report_of(const char *problem, int *of_name)
{
    char p[128]; /* chk.problem is shorter */
    *of_name = strncmp(problem, NAME_PREFIX, strlen(NAME_PREFIX)) == 0;
    snprintf(p, sizeof p, "%s", problem + (*of_name ? strlen(NAME_PREFIX) : 0));
    char *at = strstr(p, " (byte ");
    if (at)
        *at = '\0';
    for (size_t i = 0; i < NREPORTS; i++)
        if (fmt_match(reports[i].fmt, p))
            return (int)i;
    return -1;
}

/* After the table: each report drawn by a case, else the reports left out. */
static int reports_missed(int hits[][2])
{
    int missed = 0;
    for (size_t i = 0; i < NREPORTS; i++)
        for (int name = 0; name <= reports[i].of_string; name++)
            if (!hits[i][name]) {
                print_error("no case of test_json_check.data draws the report '%s%s'\n",
                            name ? NAME_PREFIX : "", reports[i].fmt);
                missed++;
            }
    return missed;
}

static void test_check_table(void **state)
{
    (void)state;
    size_t n;
    char *file, **lines = case_lines("test_json_check.data", CHECK_ROWS, &n, &file);
    int failed = 0, hits[NREPORTS][2] = {{0}};
    for (size_t i = 0; i < n; i++) {
        char *col[3], shown[300];
        snprintf(shown, sizeof shown, "%s", lines[i]);
        if (columns(lines[i], col, 2))
            fail_msg("malformed case line: %s", shown);
        char *text = malloc(strlen(col[2]) + 1);
        assert_non_null(text);
        size_t len = unpercent(col[2], text);
        struct pt_json_check chk = {.integers_only = strcmp(col[0], "integer") == 0};
        int rc = pt_json_check(text, len, &chk);
        const char *want_field = strcmp(col[1], "-") == 0 ? "" : col[1];
        char why[600] = "";
        if (strncmp(col[0], "ok-", 3) == 0) {
            int exact = strcmp(col[0], "ok-exact") == 0;
            if (rc != PT_OK)
                snprintf(why, sizeof why, "refused: '%s: %s'", chk.field, chk.problem);
            else if (chk.exact_numbers != exact)
                snprintf(why, sizeof why, "exact_numbers is %d", chk.exact_numbers);
            else {
                /* What passes is JSON to cJSON too. */
                cJSON *j = cJSON_ParseWithLength(text, len);
                if (!j)
                    snprintf(why, sizeof why, "accepted, but cJSON cannot parse it");
                cJSON_Delete(j);
            }
        } else {
            const char *kind = col[0], *prefix = "";
            if (strncmp(kind, "name-", 5) == 0) {
                kind += 5;
                prefix = "has a member name that ";
            }
            const char *problem = NULL;
            for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
                if (strcmp(kinds[k].kind, kind) == 0)
                    problem = kinds[k].problem;
            if (!problem)
                fail_msg("unknown kind '%s' in: %s", col[0], shown);
            char want[200];
            snprintf(want, sizeof want, "%s%s", prefix, problem);
            if (rc != PT_EPARSE)
                snprintf(why, sizeof why, "rc %d, want PT_EPARSE", rc);
            else if (strncmp(chk.problem, want, strlen(want)) != 0)
                snprintf(why, sizeof why, "problem '%s', want '%s...'", chk.problem, want);
            else if (strcmp(chk.field, want_field) != 0)
                snprintf(why, sizeof why, "field '%s', want '%s'", chk.field, want_field);
            else if (!pt_test_utf8_clean(chk.field, strlen(chk.field)) ||
                     !pt_test_utf8_clean(chk.problem, strlen(chk.problem)))
                snprintf(why, sizeof why, "the report is not valid UTF-8");
            int of_name, r = report_of(chk.problem, &of_name);
            if (r < 0)
                snprintf(why, sizeof why, "problem '%s' is not in the list of reports",
                         chk.problem);
            else if (!why[0])
                hits[r][of_name]++;
        }
        if (why[0]) {
            print_error("case %s\n  %s\n", shown, why);
            failed++;
        }
        free(text);
    }
    free(lines);
    free(file);
    if (failed)
        fail_msg("%d of %zu cases failed", failed, n);
    int missed = reports_missed(hits);
    if (missed)
        fail_msg("%d report(s) of pt_json_check have no case in test_json_check.data", missed);
}

/* The first string literal at or after p (its text into out); NULL if none. */
static const char *literal(const char *p, char *out, size_t cap)
{
    const char *q = p ? strchr(p, '"') : NULL;
    if (!q)
        return NULL;
    const char *e = strchr(q + 1, '"');
    if (!e || (size_t)(e - q) > cap)
        return NULL;
    snprintf(out, cap, "%.*s", (int)(e - q - 1), q + 1);
    return out;
}

/*
 * reports[] is every report of core/json.c: each message it fails with
 * (fail(s, ..., "..."), and a string's `why = "..."` / `return "..."`) is
 * listed, and each listed one is still in json.c.  A new way to refuse
 * JSON thus needs its line in reports[] and a case in the table.
 */
static void test_every_report_listed(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/../../core/json.c", PT_TEST_UNIT_DIR);
    size_t len;
    char *src = pt_test_read_file(path, &len);
    if (!src)
        fail_msg("cannot read %s", path);
    int seen[NREPORTS] = {0}, found = 0, bad = 0;
    for (char *line = src, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        char msg[200];
        const char *m = NULL;
        int of_string = 0;
        const char *at = strstr(line, "fail(s,");
        if (at && !(m = literal(at, msg, sizeof msg)) && nl)
            m = literal(nl + 1, msg, sizeof msg); /* the format on the next line */
        if (!at && (strstr(line, "why = \"") || strstr(line, "return \""))) {
            m = literal(line, msg, sizeof msg);
            of_string = 1;
        }
        if (!m || strncmp(m, "%s%s", 4) == 0) /* the string reports' wrapper */
            continue;
        char *byte = strstr(msg, " (byte %zu)");
        if (byte)
            *byte = '\0';
        found++;
        size_t i = 0;
        while (i < NREPORTS && strcmp(reports[i].fmt, msg) != 0)
            i++;
        if (i == NREPORTS || reports[i].of_string != of_string) {
            print_error("core/json.c reports '%s'%s: not so in reports[] of test_json.c\n", msg,
                        of_string ? " (of a string or member name)" : "");
            bad++;
        } else {
            seen[i] = 1;
        }
    }
    free(src);
    for (size_t i = 0; i < NREPORTS; i++)
        if (!seen[i]) {
            print_error("reports[] lists '%s', which core/json.c no longer reports\n",
                        reports[i].fmt);
            bad++;
        }
    if (found == 0 || bad)
        fail_msg("reports[] of test_json.c and core/json.c disagree (%d found, %d amiss)", found,
                 bad);
}

/* The raw text of top-level members: amounts are read from it. */
static void test_members_give_the_raw_value(void **state)
{
    (void)state;
    struct pt_json_member m[3] = {{.name = "amount"}, {.name = "metadata"}, {.name = "absent"}};
    struct pt_json_check chk = {.members = m, .n_members = 3};
    const char *t = "{ \"metadata\" : {\"amount\":5, \"x\":[1,2]} ,\n"
                    "  \"\\u0061mount\" :  9007199254740993 }";
    assert_int_equal(pt_json_check(t, strlen(t), &chk), PT_OK);
    assert_non_null(m[0].text);
    assert_int_equal(m[0].len, 16);
    assert_memory_equal(m[0].text, "9007199254740993", 16);
    assert_int_equal(m[1].len, strlen("{\"amount\":5, \"x\":[1,2]}"));
    assert_memory_equal(m[1].text, "{\"amount\":5, \"x\":[1,2]}", m[1].len);
    assert_null(m[2].text);
    assert_false(chk.exact_numbers);
    /* A top-level array has no members. */
    const char *a = "[{\"amount\":1}]";
    assert_int_equal(pt_json_check(a, strlen(a), &chk), PT_OK);
    assert_null(m[0].text);
    /* NULL text with no bytes is an empty text, refused. */
    assert_int_equal(pt_json_check(NULL, 0, &chk), PT_EPARSE);
    assert_string_equal(chk.field, "");
}

/* Past the inline table of names, into the heap, and still exact. */
static void test_many_names(void **state)
{
    (void)state;
    size_t cap = 200000, n = 0;
    char *t = malloc(cap);
    assert_non_null(t);
    n += (size_t)snprintf(t + n, cap - n, "{");
    for (int i = 0; i < 5000; i++)
        n += (size_t)snprintf(t + n, cap - n, "%s\"k%d\":{\"k%d\":%d}", i ? "," : "", i, i, i);
    size_t open = n;
    n += (size_t)snprintf(t + n, cap - n, "}");
    struct pt_json_check chk = {0};
    assert_int_equal(pt_json_check(t, n, &chk), PT_OK);
    /* The same name again, this time escaped, at the very end. */
    n = open + (size_t)snprintf(t + open, cap - open, ",\"k\\u0034999\":1}");
    assert_int_equal(pt_json_check(t, n, &chk), PT_EPARSE);
    assert_string_equal(chk.field, "k4999");
    assert_string_equal(chk.problem, "given twice");
    free(t);
}

/* A long path is cut, and never in the middle of a character. */
static void test_long_field_is_cut_on_a_character(void **state)
{
    (void)state;
    char t[1024], name[320] = "";
    for (int i = 0; i < 150; i++)
        strcat(name, "\xc3\xa9"); /* é, 2 bytes each */
    for (int shift = 0; shift < 3; shift++) {
        snprintf(t, sizeof t, "{\"%.*s%s\":1,\"%.*s%s\":2}", shift, "xx", name, shift, "xx", name);
        struct pt_json_check chk = {0};
        assert_int_equal(pt_json_check(t, strlen(t), &chk), PT_EPARSE);
        assert_string_equal(chk.problem, "given twice");
        size_t fl = strlen(chk.field);
        assert_true(fl > 100 && fl < PT_JSON_FIELD_MAX);
        assert_true(pt_test_utf8_clean(chk.field, fl));
    }
}

static void test_utf8_scrub(void **state)
{
    (void)state;
    char s[64];
    snprintf(s, sizeof s, "ok caf\xc3\xa9 \xc3( \xed\xa0\x80 \xf0\x9f\x98\x80 \xff");
    assert_int_equal(pt_json_utf8_scrub(s), 5);
    assert_string_equal(s, "ok caf\xc3\xa9 ?( ??? \xf0\x9f\x98\x80 ?");
    /* A sequence cut at the end of the text. */
    snprintf(s, sizeof s, "abc\xe2\x82");
    assert_int_equal(pt_json_utf8_scrub(s), 2);
    assert_string_equal(s, "abc??");
    snprintf(s, sizeof s, "clean");
    assert_int_equal(pt_json_utf8_scrub(s), 0);
}

/* ---- pt_json_plain_int ------------------------------------------------------------ */

static int64_t bound(const char *s)
{
    if (strcmp(s, "INT64_MIN") == 0)
        return INT64_MIN;
    if (strcmp(s, "INT64_MAX") == 0)
        return INT64_MAX;
    return strtoll(s, NULL, 10);
}

static void test_plain_int_table(void **state)
{
    (void)state;
    size_t n;
    char *file, **lines = case_lines("test_json_int.data", INT_ROWS, &n, &file);
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        char *col[4], shown[200];
        snprintf(shown, sizeof shown, "%s", lines[i]);
        if (columns(lines[i], col, 3))
            fail_msg("malformed case line: %s", shown);
        int64_t v = 42;
        int rc = pt_json_plain_int(col[0], strlen(col[0]), bound(col[1]), bound(col[2]), &v);
        const char *want = col[3];
        char got[40];
        if (rc == PT_OK)
            snprintf(got, sizeof got, "%lld", (long long)v);
        else
            snprintf(got, sizeof got, "%s",
                     rc == PT_EPARSE   ? "EPARSE"
                     : rc == PT_ERANGE ? "ERANGE"
                                       : "?");
        if (strcmp(got, want) != 0) {
            print_error("case %s\n  got %s\n", shown, got);
            failed++;
        }
        if (rc != PT_OK && v != 42) {
            print_error("case %s\n  *out written on failure\n", shown);
            failed++;
        }
    }
    free(lines);
    free(file);
    if (failed)
        fail_msg("%d of %zu cases failed", failed, n);
}

/* The writer's integers, digits by hand: the edges printf would print. */
static void test_writer_integers(void **state)
{
    (void)state;
    static const long long v[] = {0,         7,        -1, 10, 8888, 99999999999LL, -4294967296LL,
                                  INT64_MAX, INT64_MIN};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        struct pt_jw w = {0};
        pt_jw_raw(&w, "[");
        pt_jw_int(&w, v[i]);
        pt_jw_raw(&w, "]");
        char *text = pt_jw_finish(&w);
        char want[32];
        snprintf(want, sizeof want, "[%lld]", v[i]);
        assert_non_null(text);
        assert_string_equal(text, want);
        free(text);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_table),
        cmocka_unit_test(test_every_report_listed),
        cmocka_unit_test(test_members_give_the_raw_value),
        cmocka_unit_test(test_many_names),
        cmocka_unit_test(test_long_field_is_cut_on_a_character),
        cmocka_unit_test(test_utf8_scrub),
        cmocka_unit_test(test_plain_int_table),
        cmocka_unit_test(test_writer_integers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
