/*
 * clock.c - clocks a test can move under a running daemon (desktop builds
 * only: part of the simulator, left out of board builds).
 *
 * `payterm serve` with PAYTERM_TEST_CLOCK_FILE=PATH runs on this platform.
 * PATH holds blank-separated words ending in a newline (re-read at most
 * every 100 ms; a missing file changes nothing, an empty or unfinished one
 * - being written - leaves the last reading):
 *
 *   <ms>           the wall clock is the real one plus <ms> (may be
 *                  negative: "-1765000000000" puts a board at 1970)
 *   boot=<ms>      the boot-time clock is the real one plus <ms>: time
 *                  that passed for the board, suspended or not (SPEC 17)
 *   boot_id=<id>   this boot's id instead of the kernel's: a new id is a
 *                  reboot (start the daemon again with it)
 *   synced=<0|1>   what the kernel says of the wall clock (adjtimex)
 *
 * so a test makes a queued charge old, an idempotency key expire, a board
 * boot at 1970 and NTP step it, without waiting for any of it.  The
 * monotonic clock, randomness and logging are the real platform's: timers
 * still run in real time.
 */
#include "sim.h"
#include "err.h"
#include "platform.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REREAD_MS 100

struct fake {
    int64_t wall_offset, boot_offset;
    char boot_id[64]; /* "" = the platform's */
    int synced;       /* -1 = the platform's */
};

static struct {
    const struct pt_platform *base;
    char path[512];
    pthread_mutex_t mu;
    int64_t read_at;
    struct fake f;
    struct pt_platform p;
} tc = {.mu = PTHREAD_MUTEX_INITIALIZER, .f = {.synced = -1}};

/* Parses the file's words into *f (unknown words are ignored: a test
 * typo shows as a clock that did not move, which its assertions catch). */
static void parse(char *text, struct fake *f)
{
    *f = (struct fake){.synced = -1};
    for (char *w = strtok(text, " \t\r\n"); w; w = strtok(NULL, " \t\r\n")) {
        if (strncmp(w, "boot=", 5) == 0)
            f->boot_offset = strtoll(w + 5, NULL, 10);
        else if (strncmp(w, "boot_id=", 8) == 0)
            snprintf(f->boot_id, sizeof f->boot_id, "%s", w + 8);
        else if (strncmp(w, "synced=", 7) == 0)
            f->synced = atoi(w + 7) != 0;
        else
            f->wall_offset = strtoll(w, NULL, 10);
    }
}

static struct fake current(void)
{
    int64_t mono = tc.base->mono_ms(tc.base->ctx);
    pthread_mutex_lock(&tc.mu);
    if (mono - tc.read_at >= REREAD_MS || !tc.read_at) {
        char buf[256] = "";
        size_t n = 0;
        FILE *f = fopen(tc.path, "r");
        if (f) {
            n = fread(buf, 1, sizeof buf - 1, f);
            buf[n] = '\0';
            fclose(f);
        }
        /* A shell's `echo ... >FILE` truncates, then writes: read in
         * between, the file is empty or cut short.  Only a missing file or
         * a whole one (ending in a newline) is taken; else the last reading
         * stands and the next call reads again. */
        if (!f || (n > 0 && buf[n - 1] == '\n')) {
            tc.read_at = mono;
            parse(buf, &tc.f);
        }
    }
    struct fake out = tc.f;
    pthread_mutex_unlock(&tc.mu);
    return out;
}

static int64_t now_ms(void *ctx)
{
    (void)ctx;
    return tc.base->now_ms(tc.base->ctx) + current().wall_offset;
}

static int64_t mono_ms(void *ctx)
{
    (void)ctx;
    return tc.base->mono_ms(tc.base->ctx);
}

static int64_t boot_ms(void *ctx)
{
    (void)ctx;
    const struct pt_platform *b = tc.base;
    return (b->boot_ms ? b->boot_ms(b->ctx) : b->mono_ms(b->ctx)) + current().boot_offset;
}

static int boot_id(void *ctx, char *out, size_t cap)
{
    (void)ctx;
    struct fake f = current();
    if (!f.boot_id[0])
        return tc.base->boot_id ? tc.base->boot_id(tc.base->ctx, out, cap) : PT_ENOTFOUND;
    if (strlen(f.boot_id) >= cap)
        return PT_ETOOBIG;
    memcpy(out, f.boot_id, strlen(f.boot_id) + 1);
    return PT_OK;
}

static int wall_synced(void *ctx)
{
    (void)ctx;
    struct fake f = current();
    if (f.synced >= 0)
        return f.synced;
    return tc.base->wall_synced ? tc.base->wall_synced(tc.base->ctx) : 0;
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
                                .transport = base->transport,
                                .boot_ms = boot_ms,
                                .boot_id = boot_id,
                                .wall_synced = wall_synced};
    return &tc.p;
}
