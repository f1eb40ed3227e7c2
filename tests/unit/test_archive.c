/*
 * test_archive.c - retention (SPEC 19): what moves to the monthly archive,
 * what stays, what is still found, and a pass cut short.
 *
 * What a shop relies on: only a charge that is final, closed in a Z report,
 * reconciled and old leaves the live database - with its refunds and its
 * audit trail, into data_dir/archive/YYYY-MM.db (0600) - and GET still
 * finds it; nothing unreconciled or open ever moves; an archived order_id
 * is never taken again; a pass interrupted between the copy and the
 * removal loses nothing and is finished by the next; the newest refund, a
 * refund of unknown final time and a clock corrected since hold what they
 * must.
 */
#include "testutil.h"

#include "archive.h"
#include "charges.h"
#include "config.h"
#include "err.h"
#include "refunds.h"
#include "report.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DAY_MS 86400000LL
/* 2025-01-10 12:00 UTC: the old day (20:00 in China, the same bill date). */
#define OLD 1736510400000LL
#define NOW (OLD + 401 * DAY_MS)

static char dir[256];
static char path[300];

static int setup(void **state)
{
    (void)state;
    pt_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/payterm.db", dir);
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
    struct pt_store_options o = {.path = path, .busy_timeout_ms = 20000};
    if (pt_store_open(&o, &st, err, sizeof err) != PT_OK)
        fail_msg("open: %s", err);
    return st;
}

static void config(struct pt_config *cfg)
{
    pt_config_defaults(cfg);
    snprintf(cfg->data_dir, sizeof cfg->data_dir, "%s", dir);
    cfg->retention_days = 400;
}

/* A paid charge of gateway, audited as the daemon does; committed. */
static struct pt_charge paid(struct pt_store *st, const char *order, const char *gateway,
                             int64_t amount, int64_t at)
{
    struct pt_charge c;
    memset(&c, 0, sizeof c);
    snprintf(c.order_id, sizeof c.order_id, "%s", order);
    snprintf(c.gateway, sizeof c.gateway, "%s", gateway);
    snprintf(c.method, sizeof c.method, "%s", "card_on_file");
    snprintf(c.currency, sizeof c.currency, "%s", strcmp(gateway, "stripe") ? "CNY" : "USD");
    c.amount = amount;
    c.state = PT_STATE_INIT;
    char trade[40];
    snprintf(trade, sizeof trade, "T-%s", order);
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    p.gateway_trade_no = trade;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_charge_create(st, &c, "api", at - 1000), PT_OK);
    assert_int_equal(pt_charge_gateway_succeeded(st, &c, &p, "sync", NULL, at), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    return c;
}

static struct pt_refund refund(struct pt_store *st, const struct pt_charge *c, const char *id,
                               int64_t amount, enum pt_state to, int64_t at)
{
    struct pt_refund r;
    memset(&r, 0, sizeof r);
    r.charge_id = c->id;
    snprintf(r.refund_id, sizeof r.refund_id, "%s", id);
    snprintf(r.order_id, sizeof r.order_id, "%s", c->order_id);
    r.amount = amount;
    r.state = PT_STATE_INIT;
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_refund_create(st, &r, "api", at - 1000), PT_OK);
    assert_int_equal(
        pt_refund_transition(st, &r, PT_STATE_PROCESSING, &p, "sync", "sync", NULL, at - 500),
        PT_OK);
    if (to != PT_STATE_PROCESSING)
        assert_int_equal(pt_refund_transition(st, &r, to, &p, "gateway", "sync", NULL, at), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    return r;
}

static void close_day(struct pt_store *st, int64_t at)
{
    char *json = NULL;
    int64_t z = 0;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_report_close(st, "lane-1", at, &json, &z), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    free(json);
}

/* A done run of gateway and date, begun at lane time `at`. */
static void run_done(struct pt_store *st, const char *gateway, const char *date, int64_t at)
{
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_store_recon_insert(st, gateway, date, "done", "{\"state\":\"done\"}", at),
                     PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
}

static struct pt_charge *f_of(struct pt_store *st, const char *order)
{
    static struct pt_charge c;
    assert_int_equal(pt_store_charge_get(st, order, &c), PT_OK);
    return &c;
}

static int audit_rows(struct pt_store *st, int64_t charge_id)
{
    struct pt_audit_row rows[64];
    int n = 0;
    assert_int_equal(pt_store_audit_list(st, charge_id, 64, rows, &n), PT_OK);
    return n;
}

static int live(struct pt_store *st, const char *order)
{
    struct pt_charge c;
    int rc = pt_store_charge_get(st, order, &c);
    assert_true(rc == PT_OK || rc == PT_ENOTFOUND);
    return rc == PT_OK;
}

/* The day as retention finds it 401 days later. */
static void test_only_closed_reconciled_old_records_move(void **state)
{
    (void)state;
    pt_test_sqlite_only("the archive files are SQLite's (PostgreSQL answers unsupported)");
    struct pt_store *st = open_store();
    struct pt_config cfg;
    config(&cfg);

    struct pt_charge a = paid(st, "A", "stripe", 1000, OLD);
    struct pt_charge b = paid(st, "B", "stripe", 2000, OLD + 1000);
    struct pt_refund b1 = refund(st, &b, "B-r1", 500, PT_STATE_SUCCESS, OLD + 3600000);
    struct pt_charge c = paid(st, "C", "stripe", 3000, OLD + 2000);
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_charge_review(st, &c, 1, "operator", "op", OLD + 3000), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    paid(st, "D", "alipay", 4000, OLD + 3000); /* no Alipay run: not reconciled */
    struct pt_charge h = paid(st, "H", "stripe", 6000, OLD + 4000);
    refund(st, &h, "H-r1", 600, PT_STATE_PROCESSING, OLD + 5000); /* a refund still open */
    close_day(st, OLD + 6000);
    paid(st, "E", "stripe", 5000, OLD + 7000);        /* after the close: in no closed report */
    paid(st, "F", "stripe", 7000, NOW - 10 * DAY_MS); /* young */
    refund(st, f_of(st, "F"), "F-r1", 10, PT_STATE_SUCCESS, NOW - 9 * DAY_MS); /* the newest */
    int trail_a = audit_rows(st, a.id), trail_b = audit_rows(st, b.id);

    /* A run asked for during the day saw a bill of a day not over: it
     * reconciles nothing. */
    struct pt_archive_result res;
    run_done(st, "stripe", "2025-01-10", OLD + 8000);
    assert_int_equal(pt_archive_run(st, &cfg, NOW, &res), PT_OK);
    assert_int_equal(res.moved, 0);
    run_done(st, "stripe", "2025-01-10", OLD + DAY_MS);

    assert_int_equal(pt_archive_run(st, &cfg, NOW, &res), PT_OK);
    assert_int_equal(res.moved, 2);
    assert_int_equal(res.copied, 2);

    /* A and B left the live database, with B's refund. */
    assert_false(live(st, "A"));
    assert_false(live(st, "B"));
    struct pt_refund r;
    assert_int_equal(pt_store_refund_get(st, "B-r1", &r), PT_ENOTFOUND);
    const char *stay[] = {"C", "D", "E", "F", "H"};
    for (size_t i = 0; i < sizeof stay / sizeof stay[0]; i++)
        assert_true(live(st, stay[i]));

    /* ... and are found in January 2025's file, as they were. */
    struct pt_charge got;
    assert_int_equal(pt_archive_charge_get(st, dir, "A", &got), PT_OK);
    assert_int_equal(got.amount, 1000);
    assert_int_equal(got.state, PT_STATE_SUCCESS);
    assert_string_equal(got.gateway_trade_no, "T-A");
    assert_int_equal(pt_archive_charge_get(st, dir, "B", &got), PT_OK);
    assert_int_equal(got.amount_refunded, 500);
    assert_int_equal(pt_archive_refund_get(st, dir, "B-r1", &r), PT_OK);
    assert_int_equal(r.amount, b1.amount);
    assert_int_equal(r.state, PT_STATE_SUCCESS);
    assert_string_equal(r.order_id, "B");
    assert_int_equal(pt_archive_charge_get(st, dir, "C", &got), PT_ENOTFOUND);
    assert_int_equal(pt_archive_charge_get(st, dir, "nobody", &got), PT_ENOTFOUND);

    char file[400];
    snprintf(file, sizeof file, "%s/archive/2025-01.db", dir);
    struct stat sb;
    assert_int_equal(stat(file, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    struct pt_store *arch;
    char err[256];
    struct pt_store_options ao = {.path = file, .readonly = 1};
    assert_int_equal(pt_store_open(&ao, &arch, err, sizeof err), PT_OK);
    assert_int_equal(audit_rows(arch, a.id), trail_a);
    assert_int_equal(audit_rows(arch, b.id), trail_b);
    pt_store_close(arch);
    assert_int_equal(pt_test_sql_int(path, "SELECT count(*) FROM archived", 0), 3);
    assert_int_equal(pt_test_sql_int(path,
                                     "SELECT count(*) FROM charge_events WHERE charge_id IN"
                                     " (SELECT id FROM charges WHERE order_id IN ('A', 'B'))",
                                     0),
                     0);

    /* An archived id is never taken again. */
    struct pt_charge again;
    memset(&again, 0, sizeof again);
    snprintf(again.order_id, sizeof again.order_id, "A");
    snprintf(again.gateway, sizeof again.gateway, "stripe");
    snprintf(again.method, sizeof again.method, "card_on_file");
    snprintf(again.currency, sizeof again.currency, "USD");
    again.amount = 1;
    again.state = PT_STATE_INIT;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_not_equal(pt_charge_create(st, &again, "api", NOW), PT_OK);
    assert_int_equal(pt_store_rollback(st), PT_OK);
    assert_false(live(st, "A"));

    /* A second pass finds nothing more to move. */
    assert_int_equal(pt_archive_run(st, &cfg, NOW, &res), PT_OK);
    assert_int_equal(res.moved, 0);
    pt_store_close(st);
}

/* A pass cut between the copy and the removal, and a charge that changed
 * in between: nothing is lost, nothing stale is kept. */
static void test_pass_cut_short_is_finished(void **state)
{
    (void)state;
    pt_test_sqlite_only("the archive files are SQLite's (PostgreSQL answers unsupported)");
    struct pt_store *st = open_store();
    struct pt_config cfg;
    config(&cfg);
    struct pt_charge a = paid(st, "A", "stripe", 1000, OLD);
    paid(st, "Z", "stripe", 1, NOW - DAY_MS); /* the newest: never moves */
    close_day(st, OLD + 6000);
    run_done(st, "stripe", "2025-01-10", OLD + 2 * DAY_MS);

    char offsets[256], file[400];
    assert_int_equal(pt_archive_bill_offsets(&cfg, offsets, sizeof offsets), PT_OK);
    assert_non_null(strstr(offsets, "\"stripe\":0"));
    assert_non_null(strstr(offsets, "\"alipay\":28800"));
    struct pt_archive_item items[4];
    int n = 0;
    assert_int_equal(pt_store_archive_candidates(st, NOW - 400 * DAY_MS, offsets, 0, 4, items, &n),
                     PT_OK);
    assert_int_equal(n, 1);
    assert_string_equal(items[0].order_id, "A");
    assert_string_equal(items[0].month, "2025-01");
    assert_int_equal(pt_archive_path(dir, items[0].month, file, sizeof file), PT_OK);
    char adir[300];
    snprintf(adir, sizeof adir, "%s/archive", dir);
    assert_int_equal(mkdir(adir, 0700), 0); /* pt_archive_run makes it */
    int copied = 0;
    assert_int_equal(pt_store_archive_copy(st, file, items, 1, &copied), PT_OK);
    assert_int_equal(copied, 1);
    /* The power goes here: A is in both.  GET reads the live one. */
    assert_true(live(st, "A"));

    /* Then A changes (a review raised and cleared): the copy is stale. */
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_charge_review(st, &a, 1, "operator", "op", NOW - 5), PT_OK);
    assert_int_equal(pt_charge_review(st, &a, 0, "operator", "op", NOW - 4), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    int moved = -1;
    assert_int_equal(pt_store_archive_forget(st, items, 1, &moved), PT_OK);
    assert_int_equal(moved, 0); /* changed since read: stays */
    assert_true(live(st, "A"));
    int trail = audit_rows(st, a.id);

    /* The next pass replaces the stale copy and finishes the move. */
    struct pt_archive_result res;
    assert_int_equal(pt_archive_run(st, &cfg, NOW, &res), PT_OK);
    assert_int_equal(res.moved, 1);
    assert_int_equal(res.copied, 1);
    assert_false(live(st, "A"));
    struct pt_store *arch;
    char err[256];
    struct pt_store_options ao = {.path = file, .readonly = 1};
    assert_int_equal(pt_store_open(&ao, &arch, err, sizeof err), PT_OK);
    assert_int_equal(audit_rows(arch, a.id), trail);
    pt_store_close(arch);
    assert_true(live(st, "Z"));
    pt_store_close(st);
}

/* The newest refund holds its charge as the newest charge holds itself:
 * SQLite's next refund id must stay above every id an archive holds. */
static void test_newest_refund_stays(void **state)
{
    (void)state;
    pt_test_sqlite_only("the archive files are SQLite's (PostgreSQL answers unsupported)");
    struct pt_store *st = open_store();
    struct pt_config cfg;
    config(&cfg);
    struct pt_charge a = paid(st, "A", "stripe", 1000, OLD);
    refund(st, &a, "A-r1", 100, PT_STATE_SUCCESS, OLD + 3600000);
    struct pt_charge z = paid(st, "Z", "stripe", 1, NOW - DAY_MS); /* the newest charge */
    close_day(st, OLD + 2 * 3600000);
    run_done(st, "stripe", "2025-01-10", OLD + 2 * DAY_MS);
    struct pt_archive_result res;
    assert_int_equal(pt_archive_run(st, &cfg, NOW, &res), PT_OK);
    assert_int_equal(res.moved, 0); /* A-r1 is the newest refund */
    assert_true(live(st, "A"));
    refund(st, &z, "Z-r1", 1, PT_STATE_SUCCESS, NOW - DAY_MS / 2);
    assert_int_equal(pt_archive_run(st, &cfg, NOW, &res), PT_OK);
    assert_int_equal(res.moved, 1);
    assert_false(live(st, "A"));
    struct pt_refund r;
    assert_int_equal(pt_archive_refund_get(st, dir, "A-r1", &r), PT_OK);
    assert_int_equal(r.amount, 100);
    pt_store_close(st);
}

/* A refund whose final time is not known (a row older than final_at, its
 * trail gone) cannot be shown old enough: its charge stays. */
static void test_refund_without_final_time_holds_its_charge(void **state)
{
    (void)state;
    pt_test_sqlite_only("the archive files are SQLite's (PostgreSQL answers unsupported)");
    struct pt_store *st = open_store();
    struct pt_config cfg;
    config(&cfg);
    /* 2C2P has no bill: a closed Z is all its records need. */
    struct pt_charge a = paid(st, "A", "2c2p", 1000, OLD);
    refund(st, &a, "A-r1", 100, PT_STATE_SUCCESS, OLD + 3600000);
    paid(st, "B", "2c2p", 2000, OLD + 1000);
    struct pt_charge z = paid(st, "Z", "stripe", 1, NOW - DAY_MS);
    refund(st, &z, "Z-r1", 1, PT_STATE_SUCCESS, NOW - DAY_MS / 2);
    close_day(st, OLD + 2 * 3600000);
    run_done(st, "stripe", "2025-01-10", OLD + 2 * DAY_MS);
    pt_store_close(st);
    pt_test_sql_exec(path, "UPDATE refunds SET final_at = NULL WHERE refund_id = 'A-r1'");
    st = open_store();
    struct pt_archive_result res;
    assert_int_equal(pt_archive_run(st, &cfg, NOW, &res), PT_OK);
    assert_int_equal(res.moved, 1); /* B only */
    assert_true(live(st, "A"));
    assert_false(live(st, "B"));
    pt_store_close(st);
}

/* A board that booted at 1970 recorded provisional times; the correction
 * (SPEC 17) moves final_at with the others, so a charge paid today is not
 * taken for 56 years old and archived. */
static void test_clock_correction_moves_final_at(void **state)
{
    (void)state;
    pt_test_sqlite_only("the clock correction is SQLite's (PostgreSQL: PT_EUNSUPPORTED)");
    struct pt_store *st = open_store();
    const int64_t boot = 5000; /* lane time from a clock that read 1970 */
    struct pt_charge a = paid(st, "A", "stripe", 1000, boot);
    refund(st, &a, "A-r1", 100, PT_STATE_SUCCESS, boot + 2000);
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_store_clock_shift(st, 0, NOW - boot), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    pt_store_close(st);
    assert_int_equal(pt_test_sql_int(path, "SELECT final_at FROM charges WHERE order_id = 'A'", 0),
                     NOW);
    assert_int_equal(
        pt_test_sql_int(path, "SELECT final_at FROM refunds WHERE refund_id = 'A-r1'", 0),
        NOW + 2000);
    /* ... equal to the trail's own final rows, which moved too. */
    assert_int_equal(pt_test_sql_int(path,
                                     "SELECT count(*) FROM charges c WHERE final_at = (SELECT"
                                     " min(created_at) FROM charge_events e WHERE e.charge_id ="
                                     " c.id AND e.to_state = 'SUCCESS')",
                                     0),
                     1);
    st = open_store();
    struct pt_config cfg;
    config(&cfg);
    close_day(st, NOW + 3000);
    run_done(st, "stripe", "1970-01-01", NOW + 4000);
    struct pt_archive_result res;
    assert_int_equal(pt_archive_run(st, &cfg, NOW + 5000, &res), PT_OK);
    assert_int_equal(res.moved, 0);
    assert_true(live(st, "A"));
    pt_store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_only_closed_reconciled_old_records_move, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pass_cut_short_is_finished, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newest_refund_stays, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refund_without_final_time_holds_its_charge, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_clock_correction_moves_final_at, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
