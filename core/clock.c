/*
 * clock.c - lane time and the wall clock's trust (see clock.h, SPEC 17).
 *
 * Reading order: decide() picks lane time at start from the store's
 * anchor, pt_clock_tick() watches the wall clock between the background
 * thread's passes, correct() is the one transaction that turns provisional
 * times into wall times.
 */
#include "clock.h"
#include "err.h"
#include "log.h"
#include "store.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pt_clock {
    const struct pt_platform *raw;
    struct pt_platform lane; /* what the rest of payterm reads */
    int64_t build_ms;
    int write; /* the daemon: the anchor and the audit are written */
    char boot_id[PT_CLOCK_BOOT_ID_MAX];
    /* lane time = boot-time clock + offset.  Changed only by a correction,
     * with every other writer of lane time stopped (pt_clock_tick). */
    _Atomic int64_t offset;
    _Atomic int64_t wall_high; /* newest trusted wall clock reading */
    _Atomic int provisional;
    int64_t provisional_since; /* lane time it began (tick thread) */
    /* The tick thread's view: wall - boot at the last look, trust then. */
    int64_t last_skew;
    int was_trusted;
    _Atomic int64_t steps, last_step, corrected_by;
};

/* ---- raw clocks ----------------------------------------------------------- */

static int64_t raw_wall(const struct pt_clock *c)
{
    return c->raw->now_ms(c->raw->ctx);
}

static int64_t raw_boot(const struct pt_clock *c)
{
    const struct pt_platform *r = c->raw;
    return r->boot_ms ? r->boot_ms(r->ctx) : r->mono_ms(r->ctx);
}

static int raw_synced(const struct pt_clock *c)
{
    return c->raw->wall_synced && c->raw->wall_synced(c->raw->ctx) == 1;
}

/* SPEC 17: synchronised says the kernel, or not earlier than anything known
 * to be true (this build's date, the newest trusted time seen): a board
 * that keeps time by its RTC, without NTP. */
static int trusted_at(const struct pt_clock *c, int64_t wall)
{
    return raw_synced(c) || (wall >= c->build_ms && wall >= atomic_load(&c->wall_high));
}

int pt_platform_wall(const struct pt_platform *p, int64_t *ms)
{
    if (p->wall_ms)
        return p->wall_ms(p->ctx, ms);
    *ms = p->now_ms(p->ctx);
    return PT_OK;
}

/* ---- the platform the rest of payterm reads --------------------------------- */

int64_t pt_clock_now(struct pt_clock *c)
{
    return raw_boot(c) + atomic_load(&c->offset);
}

static int64_t lane_now_cb(void *ctx)
{
    return pt_clock_now(ctx);
}

static int lane_wall_cb(void *ctx, int64_t *ms)
{
    struct pt_clock *c = ctx;
    *ms = raw_wall(c);
    return trusted_at(c, *ms) ? PT_OK : PT_ECLOCK;
}

static int64_t lane_mono_cb(void *ctx)
{
    const struct pt_clock *c = ctx;
    return c->raw->mono_ms(c->raw->ctx);
}

static int64_t lane_boot_cb(void *ctx)
{
    return raw_boot(ctx);
}

static int lane_random_cb(void *ctx, void *buf, size_t len)
{
    const struct pt_clock *c = ctx;
    return c->raw->random(c->raw->ctx, buf, len);
}

static void lane_log_cb(void *ctx, enum pt_log_level level, const char *line)
{
    const struct pt_clock *c = ctx;
    c->raw->log(c->raw->ctx, level, line);
}

static int lane_synced_cb(void *ctx)
{
    return raw_synced(ctx);
}

const struct pt_platform *pt_clock_platform(struct pt_clock *c)
{
    return &c->lane;
}

/* ---- start ------------------------------------------------------------------- */

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* "+1234.567 s" for the log. */
static void seconds(int64_t ms, char out[32])
{
    int64_t a = ms < 0 ? -ms : ms;
    snprintf(out, 32, "%c%lld.%03lld s", ms < 0 ? '-' : '+', (long long)(a / 1000),
             (long long)(a % 1000));
}

/*
 * Lane time at start, from the store's anchor `a` (have: there is one) and
 * the newest time recorded: *lane0 and whether it is provisional (then
 * *since: the lane time the provisional period began).
 */
static void decide(struct pt_clock *c, const struct pt_clock_anchor *a, int have, int64_t newest,
                   int64_t boot, int64_t wall, int64_t *lane0, int *provisional, int64_t *since)
{
    *provisional = 0;
    *since = 0;
    if (have && c->boot_id[0] && strcmp(a->boot_id, c->boot_id) == 0 && boot >= a->boot_ms) {
        /* The same boot (a daemon restart): lane time never broke. */
        *lane0 = a->lane_ms + (boot - a->boot_ms);
        *provisional = !a->trusted;
        *since = a->provisional_since;
        return;
    }
    if (!c->write) {
        /* A command while no daemon has run in this boot: the newest time
         * recorded, so nothing it measures is older than it may be. */
        *lane0 = max64(newest, have ? a->lane_ms : 0);
        return;
    }
    if (have && !a->trusted) {
        /* The last boot ended provisional: its times are still to be
         * corrected, with this boot's, once the wall clock is trusted. */
        *lane0 = max64(newest, a->lane_ms) + 1;
        *provisional = 1;
        *since = a->provisional_since;
        return;
    }
    if (trusted_at(c, wall)) {
        /* Trusted at both ends: the time the board was off is known. */
        *lane0 = wall;
        return;
    }
    *lane0 = max64(newest + 1, c->build_ms);
    *provisional = 1;
    *since = *lane0;
}

static int write_anchor(struct pt_clock *c, struct pt_store *st, int64_t boot, int64_t lane)
{
    struct pt_clock_anchor a = {.boot_ms = boot,
                                .lane_ms = lane,
                                .trusted = !atomic_load(&c->provisional),
                                .provisional_since = c->provisional_since,
                                .wall_high = atomic_load(&c->wall_high)};
    snprintf(a.boot_id, sizeof a.boot_id, "%s", c->boot_id);
    int rc = pt_store_begin(st);
    if (rc)
        return rc;
    rc = pt_store_clock_put(st, &a);
    if (rc) {
        pt_store_rollback(st);
        return rc == PT_EUNSUPPORTED ? PT_OK : rc;
    }
    return pt_store_commit(st);
}

int pt_clock_open(const struct pt_platform *raw, struct pt_store *st, int64_t build_ms, int write,
                  struct pt_clock **out)
{
    *out = NULL;
    struct pt_clock *c = calloc(1, sizeof *c);
    if (!c)
        return PT_ENOMEM;
    c->raw = raw;
    c->build_ms = build_ms;
    c->write = write;
    if (!raw->boot_id || raw->boot_id(raw->ctx, c->boot_id, sizeof c->boot_id) != PT_OK)
        c->boot_id[0] = '\0';
    struct pt_clock_anchor a;
    int rc = pt_store_clock_get(st, &a);
    int have = rc == PT_OK;
    if (rc != PT_OK && rc != PT_ENOTFOUND && rc != PT_EUNSUPPORTED)
        goto fail;
    int64_t newest = 0;
    if ((rc = pt_store_newest_time(st, &newest)) != PT_OK && rc != PT_EUNSUPPORTED)
        goto fail;
    /* What was recorded while lane time was anchored was the wall clock. */
    atomic_store(&c->wall_high, max64(have ? a.wall_high : 0, have && a.trusted ? newest : 0));
    int64_t boot = raw_boot(c), wall = raw_wall(c), lane0 = 0;
    int provisional = 0;
    decide(c, &a, have, newest, boot, wall, &lane0, &provisional, &c->provisional_since);
    atomic_store(&c->offset, lane0 - boot);
    atomic_store(&c->provisional, provisional);
    c->was_trusted = trusted_at(c, wall);
    c->last_skew = wall - boot;
    c->lane = (struct pt_platform){.now_ms = lane_now_cb,
                                   .mono_ms = lane_mono_cb,
                                   .random = lane_random_cb,
                                   .log = lane_log_cb,
                                   .ctx = c,
                                   .transport = raw->transport,
                                   .boot_ms = lane_boot_cb,
                                   .wall_synced = lane_synced_cb,
                                   .wall_ms = lane_wall_cb};
    if (write) {
        /* Without the anchor a restart in this boot takes the reboot's path:
         * lane time from a trusted wall clock, or from the newest time
         * recorded.  A full disk must not keep the daemon from starting
         * (it answers 503 until the disk has room). */
        if ((rc = write_anchor(c, st, boot, lane0)) != PT_OK)
            pt_log_warn("clock: cannot write the clock's anchor (%s): a restart in this boot "
                        "starts lane time afresh",
                        pt_strerror(rc));
        if (provisional) {
            char off[32];
            seconds(wall - lane0, off);
            pt_log_warn("clock: the wall clock is not trusted (not synchronised, and earlier "
                        "than this build or than times already recorded; it is %s from "
                        "payterm's time): charges are taken and queued, nothing is sent to a "
                        "gateway until it is, and the times recorded meanwhile are "
                        "provisional",
                        off);
        }
    }
    *out = c;
    return PT_OK;
fail:
    free(c);
    return rc;
}

void pt_clock_free(struct pt_clock *c)
{
    free(c);
}

/* ---- while running ------------------------------------------------------------ */

/* One audit row of the lane's clock, in a transaction of its own. */
static int audit(struct pt_store *st, const char *kind, int64_t size, int64_t wall,
                 const char *detail, int64_t now)
{
    int rc = pt_store_begin(st);
    if (rc)
        return rc;
    rc = pt_store_clock_event(st, kind, size, wall, detail, now);
    if (rc) {
        pt_store_rollback(st);
        return rc == PT_EUNSUPPORTED ? PT_OK : rc;
    }
    return pt_store_commit(st);
}

/*
 * The wall clock is trusted and lane time is provisional: lane time jumps
 * to the wall clock, and every time recorded since the provisional period
 * began jumps with it, in one transaction with the new anchor - a crash
 * leaves either all of it or none.  The caller has stopped every other
 * writer, so no time read before the jump is written after it.
 */
static int correct(struct pt_clock *c, struct pt_store *st, int64_t wall)
{
    int64_t boot = raw_boot(c), lane = boot + atomic_load(&c->offset);
    int64_t delta = wall - lane;
    int rc = pt_store_begin(st);
    if (rc)
        return rc;
    rc = pt_store_clock_shift(st, c->provisional_since, delta);
    int shifted = rc == PT_OK;
    if (rc == PT_EUNSUPPORTED) {
        /* The store cannot move what it holds (a server shared with other
         * lanes): lane time stays continuous, and behind the wall clock
         * until the next start. */
        delta = 0;
        rc = PT_OK;
    }
    char detail[160];
    snprintf(detail, sizeof detail, "provisional times since %lld %s",
             (long long)c->provisional_since,
             shifted ? "moved" : "kept (the store cannot move them)");
    struct pt_clock_anchor a = {.boot_ms = boot,
                                .lane_ms = lane + delta,
                                .trusted = 1,
                                .wall_high = max64(atomic_load(&c->wall_high), wall)};
    snprintf(a.boot_id, sizeof a.boot_id, "%s", c->boot_id);
    if (rc == PT_OK && (rc = pt_store_clock_put(st, &a)) == PT_EUNSUPPORTED)
        rc = PT_OK;
    if (rc == PT_OK && (rc = pt_store_clock_event(st, "corrected", delta, wall, detail,
                                                  lane + delta)) == PT_EUNSUPPORTED)
        rc = PT_OK;
    if (rc) {
        pt_store_rollback(st);
        return rc;
    }
    if ((rc = pt_store_commit(st)))
        return rc;
    atomic_fetch_add(&c->offset, delta);
    atomic_store(&c->provisional, 0);
    atomic_store(&c->corrected_by, delta);
    c->provisional_since = 0;
    char off[32];
    seconds(delta, off);
    pt_log_warn("clock: the wall clock is trusted now: the times recorded since it was not "
                "moved by %s%s; ages and deadlines are unchanged",
                off, shifted ? "" : " (not on this store: they keep lane time)");
    return PT_OK;
}

int pt_clock_tick(struct pt_clock *c, struct pt_store *st, int (*quiet)(void *ctx, int on),
                  void *ctx)
{
    int64_t wall = raw_wall(c), boot = raw_boot(c);
    int64_t skew = wall - boot, moved = skew - c->last_skew;
    int rc = PT_OK;
    c->last_skew = skew;
    if (moved > PT_CLOCK_STEP_MS || moved < -PT_CLOCK_STEP_MS) {
        /* SPEC 17: logged and audited once, and nothing else changes -
         * ages and deadlines run on lane time. */
        atomic_fetch_add(&c->steps, 1);
        atomic_store(&c->last_step, moved);
        char size[32];
        seconds(moved, size);
        pt_log_warn("clock: the wall clock was stepped by %s; payterm's ages and deadlines do "
                    "not change",
                    size);
        if (c->write)
            rc = audit(st, "step", moved, wall, NULL, pt_clock_now(c));
    }
    int trusted = trusted_at(c, wall);
    if (trusted) {
        int64_t high = atomic_load(&c->wall_high);
        if (wall > high)
            atomic_store(&c->wall_high, wall);
    }
    if (trusted != c->was_trusted) {
        c->was_trusted = trusted;
        if (trusted)
            pt_log_info("clock: the wall clock is trusted again: sending resumes");
        else
            pt_log_warn("clock: the wall clock is not trusted (earlier than times already "
                        "seen, not synchronised): nothing is sent to a gateway until it is");
    }
    if (rc == PT_OK && trusted && c->write && atomic_load(&c->provisional) && quiet &&
        quiet(ctx, 1) == 0) {
        rc = correct(c, st, wall);
        quiet(ctx, 0);
    }
    return rc;
}

void pt_clock_info(struct pt_clock *c, struct pt_clock_info *out)
{
    int64_t wall = raw_wall(c);
    *out = (struct pt_clock_info){.trusted = trusted_at(c, wall),
                                  .synced = raw_synced(c),
                                  .provisional = atomic_load(&c->provisional),
                                  .lane_ms = pt_clock_now(c),
                                  .wall_ms = wall,
                                  .steps = atomic_load(&c->steps),
                                  .last_step_ms = atomic_load(&c->last_step),
                                  .corrected_by_ms = atomic_load(&c->corrected_by)};
}
