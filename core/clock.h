/*
 * clock.h - payterm's time: elapsed time for every age and deadline, the
 * wall clock only once it can be trusted (SPEC 17).
 *
 * A board without a battery-backed clock boots at 1970 (or days behind,
 * from a saved time) and is stepped by NTP minutes later, often after the
 * lane took charges offline.  Measured on the wall clock, that step made
 * every queued charge "older than max_age_s".  So payterm keeps its own
 * time, "lane time": milliseconds on the Unix epoch's scale that advance
 * with the kernel's boot-time clock (which counts suspend and never
 * steps) and continue across restarts and reboots from what the store
 * last recorded.  Everything payterm records and every age or deadline it
 * measures is in lane time; a step of the wall clock changes none of it.
 *
 *   - Within one boot: lane = boot-time clock + offset, the offset kept in
 *     the store's anchor (the boot id tells a daemon restart from a
 *     reboot).
 *   - At a reboot: when the wall clock is trusted, lane time starts at it
 *     (the time the board was off is known, and counts); when it is not,
 *     lane time continues from the newest time recorded (the off-time
 *     counts as zero) and what is recorded from then on is "provisional".
 *   - When the wall clock becomes trusted, provisional times are corrected:
 *     lane time jumps to the wall clock, and every time recorded since the
 *     provisional period began moves by the same amount, in one
 *     transaction (pt_store_clock_shift), so every age stays what elapsed.
 *   - A step of the wall clock while lane time is anchored (the difference
 *     between the wall and boot-time clocks moving by more than 2 s) is
 *     logged and audited once, and changes nothing else.
 *
 * The wall clock is trusted when the kernel says it is synchronised, or
 * when it is not earlier than this build's date nor than the newest trusted
 * wall time payterm has seen.  It is what a gateway reads (signed
 * timestamps, a notification's age): nothing is sent to a gateway, and no
 * notification that needs the time is verified, while it is not trusted.
 */
#ifndef PT_CLOCK_H
#define PT_CLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "platform.h"

struct pt_store;
struct pt_clock;

/* A step of the wall clock is one when wall - boot-time moves this much. */
#define PT_CLOCK_STEP_MS 2000

/*
 * Opens the clock of the database behind st on the raw platform `raw`
 * (its now_ms is the wall clock; boot_ms, boot_id and wall_synced as
 * platform.h says), whose build is dated build_ms (Unix ms).  Reads the
 * store's anchor and newest recorded time and decides lane time as above.
 * With `write` set (the daemon), the anchor is written in a transaction of
 * its own; without it (the CLI) nothing is written, and lane time when the
 * daemon has not run in this boot is the newest recorded time (a command
 * that expires things then expires nothing early).  *out is freed with
 * pt_clock_free().
 */
int pt_clock_open(const struct pt_platform *raw, struct pt_store *st, int64_t build_ms, int write,
                  struct pt_clock **out);
void pt_clock_free(struct pt_clock *c);

/* A platform for everything else: now_ms is lane time, wall_ms the wall
 * clock with its trust; the rest (monotonic clock, randomness, log,
 * transport) is raw's.  Lives as long as c. */
const struct pt_platform *pt_clock_platform(struct pt_clock *c);

/* Lane time now. */
int64_t pt_clock_now(struct pt_clock *c);

/*
 * What the wall clock is doing; called by the daemon's background thread
 * between its passes.  Logs and audits each step; when the wall clock has
 * become trusted while lane time is provisional, corrects it: quiet(ctx,
 * 1) must stop every other writer of lane time until quiet(ctx, 0) (the
 * daemon closes its gate) and returns 0 when it did; the correction waits
 * for the next call otherwise.  Storage errors are returned (nothing is
 * half done: the correction is one transaction).
 */
int pt_clock_tick(struct pt_clock *c, struct pt_store *st, int (*quiet)(void *ctx, int on),
                  void *ctx);

/* The clock's state, for /v1/status and /metrics. */
struct pt_clock_info {
    int trusted;             /* the wall clock may be used (signing, verifying) now */
    int synced;              /* the kernel says it is synchronised */
    int provisional;         /* lane time is not yet anchored to a trusted wall clock */
    int64_t lane_ms;         /* lane time now */
    int64_t wall_ms;         /* the wall clock now */
    int64_t steps;           /* steps seen since start */
    int64_t last_step_ms;    /* size of the last one (signed), 0 if none */
    int64_t corrected_by_ms; /* the last correction of provisional times, 0 if none */
};
void pt_clock_info(struct pt_clock *c, struct pt_clock_info *out);

#endif
