/*
 * linux.c - clocks, randomness and logging for Linux boards and desktops.
 */
#include "linux.h"
#include "err.h"
#include "log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/random.h>
#include <syslog.h>
#include <time.h>

/* The wall clock must not wrap in January 2038 on a 32-bit board: the
 * top-level CMakeLists.txt asks for a 64-bit time_t there. */
_Static_assert(sizeof(time_t) >= 8, "time_t must have 64 bits (Y2038): see CMakeLists.txt");

int64_t pt_linux_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t pt_linux_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int pt_linux_random(void *buf, size_t len)
{
    unsigned char *p = buf;
    while (len > 0) {
        /* getrandom blocks only until the kernel pool is first seeded, which
         * on a board is early boot; after that it never fails short. */
        ssize_t n = getrandom(p, len, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return PT_ESYS;
        }
        p += n;
        len -= (size_t)n;
    }
    return PT_OK;
}

static int64_t now_cb(void *ctx)
{
    (void)ctx;
    return pt_linux_now_ms();
}

static int64_t mono_cb(void *ctx)
{
    (void)ctx;
    return pt_linux_mono_ms();
}

static int random_cb(void *ctx, void *buf, size_t len)
{
    (void)ctx;
    return pt_linux_random(buf, len);
}

static const char *const level_names[] = {"error", "warn", "info", "debug"};

static void stderr_sink(void *ctx, enum pt_log_level level, const char *line)
{
    (void)ctx;
    fprintf(stderr, "payterm[%s]: %s\n", level_names[level], line);
}

static void syslog_sink(void *ctx, enum pt_log_level level, const char *line)
{
    static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
    (void)ctx;
    syslog(prio[level], "%s", line);
}

/* The platform's log: stderr, or syslog once asked for.  core's pt_log()
 * formats the line and hands it here (pt_log_set_sink). */
static atomic_int to_syslog;

static void log_cb(void *ctx, enum pt_log_level level, const char *line)
{
    if (atomic_load(&to_syslog))
        syslog_sink(ctx, level, line);
    else
        stderr_sink(ctx, level, line);
}

void pt_linux_log_use_syslog(int on)
{
    if (on)
        openlog("payterm", LOG_PID, LOG_DAEMON);
    atomic_store(&to_syslog, on);
    pt_log_set_sink(log_cb, NULL);
}

static const struct pt_platform linux_platform = {
    .now_ms = now_cb,
    .mono_ms = mono_cb,
    .random = random_cb,
    .log = log_cb,
    .ctx = NULL,
    .transport = NULL,
};

const struct pt_platform *pt_linux_platform(void)
{
    return &linux_platform;
}
