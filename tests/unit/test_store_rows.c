/*
 * test_store_rows.c - a charge's and a refund's columns, written once for
 * both store backends (core/store_rows.h): the SELECT text and the table
 * that fills the struct agree column for column, each field's kind fits
 * its C type, and a row reads into every field (a NULL as 0 or "").
 */
#include "testutil.h"

#include "err.h"
#include "store_rows.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The columns of a SELECT list: commas outside parentheses, up to FROM. */
static int select_columns(const char *cols, char names[][128], int max)
{
    int n = 0, depth = 0;
    size_t len = 0;
    const char *end = strstr(cols, " FROM refunds r");
    for (const char *p = cols; *p && p != end; p++) {
        if (*p == '(')
            depth++;
        if (*p == ')')
            depth--;
        if (*p == ',' && depth == 0) {
            names[n++][len] = '\0';
            len = 0;
            assert_true(n < max);
            while (p[1] == ' ')
                p++;
            continue;
        }
        names[n][len++] = *p;
        assert_true(len < 128);
    }
    names[n++][len] = '\0';
    return n;
}

static void check_kind(const struct pt_row_kind *k, const char *cols)
{
    char names[64][128];
    int n = select_columns(cols, names, 64);
    assert_int_equal(n, k->ncols);
    for (int i = 0; i < n; i++) {
        const struct pt_col *c = &k->cols[i];
        assert_string_equal(names[i], c->sql);
        assert_true(c->off + c->size <= k->size);
        switch (c->kind) {
        case PT_COL_I64:
            assert_int_equal(c->size, sizeof(int64_t));
            break;
        case PT_COL_INT:
            assert_int_equal(c->size, sizeof(int));
            break;
        case PT_COL_STATE:
            assert_int_equal(c->size, sizeof(enum pt_state));
            break;
        case PT_COL_OFFLINE:
            assert_int_equal(c->size, sizeof(enum pt_offline_mode));
            break;
        case PT_COL_TEXT:
            assert_true(c->size > 1);
            break;
        }
        /* No two columns fill one field. */
        for (int j = 0; j < i; j++)
            assert_true(k->cols[j].off + k->cols[j].size <= c->off ||
                        c->off + c->size <= k->cols[j].off);
    }
}

static void test_columns_agree(void **state)
{
    (void)state;
    assert_int_equal(pt_charge_row.ncols, 28);
    assert_int_equal(pt_refund_row.ncols, 21);
    check_kind(&pt_charge_row, PT_CHARGE_COLS);
    check_kind(&pt_refund_row, PT_REFUND_COLS);
    assert_non_null(strstr(PT_REFUND_COLS, " FROM refunds r JOIN charges c ON c.id = r.charge_id"));
}

/* A row whose column i holds i + 1, as text "v<i>" for texts; states and
 * modes by name; NULL where nulls says. */
struct fake {
    const struct pt_row_kind *k;
    int nulls;
    char text[64][32];
};

static int64_t fake_int(const void *p, int col)
{
    const struct fake *f = p;
    return f->nulls ? 0 : col + 1;
}

static const char *fake_text(const void *p, int col)
{
    const struct fake *f = p;
    if (f->nulls)
        return NULL;
    switch (f->k->cols[col].kind) {
    case PT_COL_STATE:
        return "PENDING";
    case PT_COL_OFFLINE:
        return "require_online";
    default:
        return f->text[col];
    }
}

static void test_read_fills_every_field(void **state)
{
    (void)state;
    static struct fake f;
    f.k = &pt_charge_row;
    for (int i = 0; i < pt_charge_row.ncols; i++)
        snprintf(f.text[i], sizeof f.text[i], "v%d", i);
    struct pt_row_src src = {fake_int, fake_text, &f};
    struct pt_charge *c = malloc(sizeof *c);
    assert_non_null(c);
    memset(c, 0xA5, sizeof *c);
    pt_row_read(&pt_charge_row, &src, c);
    assert_int_equal(c->id, 1);
    assert_string_equal(c->order_id, "v1");
    assert_int_equal(c->amount, 5);
    assert_string_equal(c->currency, "v5");
    assert_int_equal(c->state, PT_STATE_PENDING);
    assert_int_equal(c->offline, PT_OFFLINE_REQUIRE_ONLINE);
    assert_int_equal(c->attempts, 14);
    assert_string_equal(c->review_reason, "v21");
    assert_int_equal(c->refunds, 26);
    assert_int_equal(c->offline_accepted, 28);
    /* NULLs: 0, "", and the defaults of the two enums. */
    f.nulls = 1;
    pt_row_read(&pt_charge_row, &src, c);
    assert_int_equal(c->id, 0);
    assert_string_equal(c->order_id, "");
    assert_int_equal(c->state, PT_STATE_UNKNOWN);
    assert_int_equal(c->offline, PT_OFFLINE_PREFER);
    free(c);

    f.nulls = 0;
    f.k = &pt_refund_row;
    /* A text longer than its field is cut to fit, NUL-terminated. */
    memset(f.text[6], 'x', sizeof f.text[6] - 1);
    f.text[6][sizeof f.text[6] - 1] = '\0'; /* c.currency: char[4] */
    struct pt_refund r;
    pt_row_read(&pt_refund_row, &src, &r);
    assert_int_equal(r.id, 1);
    assert_int_equal(r.charge_id, 2);
    assert_string_equal(r.refund_id, "v2");
    assert_string_equal(r.currency, "xxx");
    assert_int_equal(r.state, PT_STATE_PENDING);
    assert_int_equal(r.updated_at, 21);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_columns_agree),
        cmocka_unit_test(test_read_fills_every_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
