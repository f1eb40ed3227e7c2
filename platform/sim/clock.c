/*
 * clock.c - a wall clock a test can move under a running daemon (desktop
 * builds only: part of the simulator, left out of board builds).
 *
 * `payterm serve` with PAYTERM_TEST_CLOCK_FILE=PATH runs on this platform:
 * the wall clock is the real one plus the number of milliseconds written in
 * PATH (re-read at most every 100 ms, a missing or empty file is 0), so a
 * test makes a queued charge offline-expired, or an idempotency key expire,
 * without waiting for it.  The monotonic clock, randomness and logging are
 * the real platform's: timers still run in real time.
 */
#include "sim.h"
#include "platform.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REREAD_MS 100

static struct {
    const struct pt_platform *base;
    char path[512];
    pthread_mutex_t mu;
    int64_t offset_ms, read_at;
    struct pt_platform p;
} tc = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int64_t offset_now(void)
{
    int64_t mono = tc.base->mono_ms(tc.base->ctx);
    pthread_mutex_lock(&tc.mu);
    if (mono - tc.read_at >= REREAD_MS || !tc.read_at) {
        tc.read_at = mono;
        char buf[32] = "";
        FILE *f = fopen(tc.path, "r");
        if (f) {
            if (!fgets(buf, sizeof buf, f))
                buf[0] = '\0';
            fclose(f);
        }
        tc.offset_ms = strtoll(buf, NULL, 10);
    }
    int64_t off = tc.offset_ms;
    pthread_mutex_unlock(&tc.mu);
    return off;
}

static int64_t now_ms(void *ctx)
{
    (void)ctx;
    return tc.base->now_ms(tc.base->ctx) + offset_now();
}

static int64_t mono_ms(void *ctx)
{
    (void)ctx;
    return tc.base->mono_ms(tc.base->ctx);
}

static int random_fn(void *ctx, void *buf, size_t len)
{
    (void)ctx;
    return tc.base->random(tc.base->ctx, buf, len);
}

static void log_fn(void *ctx, enum pt_log_level level, const char *line)
{
    (void)ctx;
    tc.base->log(tc.base->ctx, level, line);
}

const struct pt_platform *pt_sim_test_clock(const struct pt_platform *base, const char *path)
{
    if (!path || !*path || strlen(path) >= sizeof tc.path)
        return NULL;
    tc.base = base;
    snprintf(tc.path, sizeof tc.path, "%s", path);
    tc.p = (struct pt_platform){.now_ms = now_ms,
                                .mono_ms = mono_ms,
                                .random = random_fn,
                                .log = log_fn,
                                .transport = base->transport};
    return &tc.p;
}
