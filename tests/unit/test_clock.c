/*
 * test_clock.c - lane time and the wall clock's trust (core/clock.c, SPEC
 * 17), on a real SQLite store and a fake platform whose wall clock,
 * boot-time clock, boot id and kernel synchronisation a test sets.
 */
#include "clock.h"
#include "charge.h"
#include "err.h"
#include "store.h"
#include "testutil.h"

#include <stdio.h>
#include <string.h>

#define DAY INT64_C(86400000)
#define NOW INT64_C(1796560000000) /* 2026-12-06 */
#define BUILD (NOW - 7 * DAY)

static struct fake {
    int64_t wall, boot;
    char boot_id[40];
    int synced;
} fk;

static int64_t f_wall(void *c)
{
    (void)c;
    return fk.wall;
}
static int64_t f_boot(void *c)
{
    (void)c;
    return fk.boot;
}
static int f_boot_id(void *c, char *out, size_t cap)
{
    (void)c;
    snprintf(out, cap, "%s", fk.boot_id);
    return PT_OK;
}
static int f_synced(void *c)
{
    (void)c;
    return fk.synced;
}
static int f_random(void *c, void *buf, size_t len)
{
    (void)c;
    memset(buf, 7, len);
    return PT_OK;
}
static void f_log(void *c, enum pt_log_level l, const char *line)
{
    (void)c;
    (void)l;
    (void)line;
}
static const struct pt_platform raw = {.now_ms = f_wall,
                                       .mono_ms = f_boot,
                                       .random = f_random,
                                       .log = f_log,
                                       .boot_ms = f_boot,
                                       .boot_id = f_boot_id,
                                       .wall_synced = f_synced};

static char dir[256], path[300];
static struct pt_store *st;

static int setup(void **state)
{
    (void)state;
    pt_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/clock.db", dir);
    char err[512];
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_store_open(&o, &st, err, sizeof err), PT_OK);
    fk = (struct fake){.wall = NOW, .boot = 5000, .boot_id = "boot-1", .synced = 0};
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pt_store_close(st);
    pt_test_rmtree(dir);
    return 0;
}

static int64_t queue(const char *order, int64_t now)
{
    struct pt_charge c = {.state = PT_STATE_INIT, .amount = 100, .next_attempt_at = now + 1000};
    snprintf(c.order_id, sizeof c.order_id, "%s", order);
    strcpy(c.gateway, "alipay");
    strcpy(c.method, "barcode");
    strcpy(c.currency, "CNY");
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_store_charge_insert(st, &c, now), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    return c.id;
}

static struct pt_charge get(const char *order)
{
    struct pt_charge c;
    assert_int_equal(pt_store_charge_get(st, order, &c), PT_OK);
    return c;
}

static int quiet_calls;
static int quiet(void *ctx, int on)
{
    (void)ctx;
    quiet_calls += on;
    return 0;
}

static struct pt_clock *open_clock(int write)
{
    struct pt_clock *c = NULL;
    assert_int_equal(pt_clock_open(&raw, st, BUILD, write, &c), PT_OK);
    return c;
}

/* A trusted wall clock at a first start: lane time is the wall clock. */
static void test_trusted_start_is_the_wall_clock(void **state)
{
    (void)state;
    struct pt_clock *c = open_clock(1);
    struct pt_clock_info ci;
    pt_clock_info(c, &ci);
    assert_true(ci.trusted);
    assert_false(ci.provisional);
    assert_int_equal(pt_clock_now(c), NOW);
    fk.boot += 1500;
    fk.wall += 1500;
    assert_int_equal(pt_clock_now(c), NOW + 1500);
    int64_t w = 0;
    assert_int_equal(pt_platform_wall(pt_clock_platform(c), &w), PT_OK);
    assert_int_equal(w, NOW + 1500);
    pt_clock_free(c);
}

/* The board boots at 1970: lane time starts at the build date, provisional;
 * nothing may be signed with the wall clock.  NTP steps it: the times
 * recorded meanwhile move by exactly what lane time moves, so every age is
 * what elapsed, and the step is audited once. */
static void test_1970_then_ntp(void **state)
{
    (void)state;
    fk.wall = 3000; /* 1970 */
    struct pt_clock *c = open_clock(1);
    struct pt_clock_info ci;
    pt_clock_info(c, &ci);
    assert_false(ci.trusted);
    assert_true(ci.provisional);
    assert_int_equal(pt_clock_now(c), BUILD);
    int64_t w;
    assert_int_equal(pt_platform_wall(pt_clock_platform(c), &w), PT_ECLOCK);
    queue("AT-1970", pt_clock_now(c));
    fk.boot += 30000; /* 30 s later */
    fk.wall += 30000;
    int64_t lane_before = pt_clock_now(c);
    /* A tick while still untrusted changes nothing. */
    assert_int_equal(pt_clock_tick(c, st, quiet, NULL), PT_OK);
    assert_int_equal(quiet_calls, 0);
    assert_int_equal(get("AT-1970").created_at, BUILD);

    fk.wall = NOW; /* NTP */
    fk.synced = 1;
    assert_int_equal(pt_clock_tick(c, st, quiet, NULL), PT_OK);
    assert_int_equal(quiet_calls, 1);
    pt_clock_info(c, &ci);
    assert_true(ci.trusted);
    assert_false(ci.provisional);
    assert_int_equal(ci.steps, 1);
    int64_t delta = NOW - lane_before;
    assert_int_equal(ci.corrected_by_ms, delta);
    assert_int_equal(pt_clock_now(c), NOW);
    struct pt_charge q = get("AT-1970");
    assert_int_equal(q.created_at, BUILD + delta);
    assert_int_equal(q.next_attempt_at, BUILD + 1000 + delta);
    /* The charge is 30 s old, as it was before the step. */
    assert_int_equal(pt_clock_now(c) - q.created_at, 30000);
    struct pt_clock_event_row ev[4];
    int n = 0;
    assert_int_equal(pt_store_clock_events(st, 4, ev, &n), PT_OK);
    assert_int_equal(n, 2); /* newest first */
    assert_string_equal(ev[0].kind, "corrected");
    assert_int_equal(ev[0].size_ms, delta);
    assert_string_equal(ev[1].kind, "step");
    assert_int_equal(ev[1].size_ms, NOW - 33000);
    /* Another tick: nothing more is corrected or audited. */
    assert_int_equal(pt_clock_tick(c, st, quiet, NULL), PT_OK);
    assert_int_equal(pt_store_clock_events(st, 4, ev, &n), PT_OK);
    assert_int_equal(n, 2);
    pt_clock_free(c);
}

/* A correction waits while the daemon cannot be quieted. */
static int refuse(void *ctx, int on)
{
    (void)ctx;
    return on ? -1 : 0;
}

static void test_correction_waits_for_quiet(void **state)
{
    (void)state;
    fk.wall = 3000;
    struct pt_clock *c = open_clock(1);
    queue("WAITS", pt_clock_now(c));
    fk.wall = NOW;
    fk.synced = 1;
    assert_int_equal(pt_clock_tick(c, st, refuse, NULL), PT_OK);
    struct pt_clock_info ci;
    pt_clock_info(c, &ci);
    assert_true(ci.provisional);
    assert_int_equal(get("WAITS").created_at, BUILD);
    assert_int_equal(pt_clock_tick(c, st, quiet, NULL), PT_OK);
    pt_clock_info(c, &ci);
    assert_false(ci.provisional);
    assert_true(get("WAITS").created_at > BUILD);
    pt_clock_free(c);
}

/* A daemon restarted in the same boot continues lane time exactly, even
 * with the wall clock stepped meanwhile. */
static void test_same_boot_restart_continues(void **state)
{
    (void)state;
    struct pt_clock *c = open_clock(1);
    pt_clock_free(c);
    fk.boot += 10000;
    fk.wall += 2 * DAY + 10000; /* stepped 2 days ahead */
    fk.synced = 1;
    c = open_clock(1);
    assert_int_equal(pt_clock_now(c), NOW + 10000);
    pt_clock_free(c);
}

/* A reboot after a trusted run: with the wall clock trusted again, the
 * off-time counts (lane time = wall); without, it continues from the
 * newest time recorded, provisional; the correction moves only what was
 * recorded since, and a charge from before the reboot keeps its time, so
 * its age includes the off-time once it is known. */
static void test_reboot_behind_then_ntp(void **state)
{
    (void)state;
    struct pt_clock *c = open_clock(1);
    queue("BEFORE", pt_clock_now(c));
    pt_clock_free(c);

    /* Off for an hour; the board comes back 2 days behind (saved time). */
    strcpy(fk.boot_id, "boot-2");
    fk.boot = 4000;
    fk.wall = NOW + 3600000 - 2 * DAY;
    c = open_clock(1);
    struct pt_clock_info ci;
    pt_clock_info(c, &ci);
    assert_false(ci.trusted); /* earlier than what was recorded */
    assert_true(ci.provisional);
    assert_int_equal(pt_clock_now(c), NOW + 1); /* continues, off-time 0 */
    queue("AFTER", pt_clock_now(c));
    fk.boot += 5000;
    fk.wall = NOW + 3600000 + 5000; /* NTP */
    fk.synced = 1;
    assert_int_equal(pt_clock_tick(c, st, quiet, NULL), PT_OK);
    assert_int_equal(pt_clock_now(c), NOW + 3600000 + 5000);
    assert_int_equal(get("BEFORE").created_at, NOW);
    assert_int_equal(get("AFTER").created_at, NOW + 3600000);
    pt_clock_free(c);

    /* A reboot with a trusted clock: lane time is the wall clock. */
    strcpy(fk.boot_id, "boot-3");
    fk.boot = 3000;
    fk.wall = NOW + 2 * DAY;
    c = open_clock(1);
    assert_int_equal(pt_clock_now(c), NOW + 2 * DAY);
    pt_clock_free(c);
}

/* A step of the wall clock while running is audited once, with its size;
 * a drift below 2 s is not a step. */
static void test_steps_are_audited_once(void **state)
{
    (void)state;
    fk.synced = 1;
    struct pt_clock *c = open_clock(1);
    fk.boot += 1000;
    fk.wall += 1000 + 1500; /* 1.5 s: not a step */
    assert_int_equal(pt_clock_tick(c, st, quiet, NULL), PT_OK);
    fk.boot += 1000;
    fk.wall -= 2 * DAY;
    assert_int_equal(pt_clock_tick(c, st, quiet, NULL), PT_OK);
    assert_int_equal(pt_clock_tick(c, st, quiet, NULL), PT_OK);
    struct pt_clock_event_row ev[4];
    int n = 0;
    assert_int_equal(pt_store_clock_events(st, 4, ev, &n), PT_OK);
    assert_int_equal(n, 1);
    assert_string_equal(ev[0].kind, "step");
    assert_int_equal(ev[0].size_ms, -2 * DAY - 1000);
    /* Lane time did not move with it. */
    assert_int_equal(pt_clock_now(c), NOW + 2000);
    pt_clock_free(c);
}

/* A command (the CLI) in a boot where no daemon ran writes nothing and
 * measures from the newest time recorded. */
static void test_command_without_daemon(void **state)
{
    (void)state;
    struct pt_clock *c = open_clock(1);
    queue("CLI", pt_clock_now(c));
    pt_clock_free(c);
    strcpy(fk.boot_id, "boot-9");
    fk.wall = NOW + 30 * DAY; /* trusted, a month later */
    fk.synced = 1;
    c = open_clock(0);
    assert_int_equal(pt_clock_now(c), NOW);
    pt_clock_free(c);
    struct pt_clock_anchor a;
    assert_int_equal(pt_store_clock_get(st, &a), PT_OK);
    assert_string_equal(a.boot_id, "boot-1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_trusted_start_is_the_wall_clock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_1970_then_ntp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_correction_waits_for_quiet, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_boot_restart_continues, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reboot_behind_then_ntp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_steps_are_audited_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_command_without_daemon, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
