/*
 * linux.c - clocks, randomness and logging for Linux boards and desktops.
 */
#include "linux.h"
#include "err.h"
#include "log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/timex.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

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

int64_t pt_linux_boot_ms(void)
{
    struct timespec ts;
    /* CLOCK_BOOTTIME keeps counting while the board is suspended, which
     * CLOCK_MONOTONIC does not: an age must include a suspended night. */
    if (clock_gettime(CLOCK_BOOTTIME, &ts) != 0)
        clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int pt_linux_boot_id(char *out, size_t cap)
{
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (!f)
        return PT_ENOTFOUND;
    char line[64] = "";
    int ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    if (!ok || !line[0] || strlen(line) >= cap)
        return PT_EPARSE;
    memcpy(out, line, strlen(line) + 1);
    return PT_OK;
}

int pt_linux_wall_synced(void)
{
    /* adjtimex with modes 0 only reads.  The kernel clears STA_UNSYNC when
     * an NTP client (chrony, ntpd, systemd-timesyncd) disciplines the
     * clock, and sets it again when that stops for long.  An error (a
     * seccomp filter, say) counts as not synchronised. */
    struct timex tx = {.modes = 0};
    int state = adjtimex(&tx);
    return state >= 0 && state != TIME_ERROR && !(tx.status & STA_UNSYNC);
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

static int64_t boot_cb(void *ctx)
{
    (void)ctx;
    return pt_linux_boot_ms();
}

static int boot_id_cb(void *ctx, char *out, size_t cap)
{
    (void)ctx;
    return pt_linux_boot_id(out, cap);
}

static int synced_cb(void *ctx)
{
    (void)ctx;
    return pt_linux_wall_synced();
}

static const char *const level_names[] = {"error", "warn", "info", "debug"};

/* 1: stderr is the journal's stream (systemd's JOURNAL_STREAM names the
 * device and inode of the stream it connected; a --log-file replaces the
 * descriptor, so the variable alone proves nothing). */
static atomic_int to_journal;

int pt_linux_stderr_is_journal(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long long dev = 0, ino = 0;
    struct stat sb;
    return js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && fstat(STDERR_FILENO, &sb) == 0 &&
           (unsigned long long)sb.st_dev == dev && (unsigned long long)sb.st_ino == ino;
}

void pt_linux_log_detect(void)
{
    atomic_store(&to_journal, pt_linux_stderr_is_journal());
}

/* Writes all of n bytes to stderr (a line at a time: never mixed with
 * another thread's). */
static void write_stderr(const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* nowhere to tell */
        p += w;
        n -= (size_t)w;
    }
}

void pt_linux_say(int priority, const char *text)
{
    char prefix[8] = "";
    if (pt_linux_stderr_is_journal())
        snprintf(prefix, sizeof prefix, "<%d>", priority & 7);
    /* journald takes the priority of each line from its own prefix: a
     * message of several lines ("2 problems, all to be fixed:") gets one
     * on each. */
    for (const char *p = text;;) {
        size_t len = strcspn(p, "\n");
        char line[1024];
        int w = snprintf(line, sizeof line, "%s%.*s\n", prefix, (int)len, p);
        if (w >= (int)sizeof line) { /* a longer line: in pieces, the prefix once */
            write_stderr(prefix, strlen(prefix));
            write_stderr(p, len);
            write_stderr("\n", 1);
        } else if (w > 0) {
            write_stderr(line, (size_t)w);
        }
        if (!p[len])
            break;
        p += len + 1;
    }
}

/*
 * One write() per line, so that lines from several threads never mix:
 * "2026-12-01T19:45:12.345Z warn: text" (RFC 3339, UTC) in a file or on a
 * terminal; "<4>text" for the journal, which stamps the time itself and
 * takes the syslog priority from the prefix (sd-daemon(3)).
 */
static void stderr_sink(void *ctx, enum pt_log_level level, const char *text)
{
    static const int prio[] = {3, 4, 6, 7}; /* LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG */
    (void)ctx;
    char stamp[64];
    if (atomic_load(&to_journal)) {
        snprintf(stamp, sizeof stamp, "<%d>", prio[level]);
    } else {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        snprintf(stamp, sizeof stamp,
                 "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s: ", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
                 level_names[level]);
    }
    /* A message of several lines ("3 problems, all to be fixed:\n  ...")
     * becomes as many lines, each with the time and level (or priority). */
    char buf[1400];
    size_t n = 0;
    for (const char *p = text;;) {
        size_t len = strcspn(p, "\n");
        int w = snprintf(buf + n, sizeof buf - n, "%s%.*s\n", stamp, (int)len, p);
        if (w < 0 || (size_t)w >= sizeof buf - n) { /* cut: still whole lines */
            n = sizeof buf - 1;
            buf[n - 1] = '\n';
            break;
        }
        n += (size_t)w;
        if (!p[len])
            break;
        p += len + 1;
    }
    for (const char *p = buf; n > 0;) {
        ssize_t w = write(STDERR_FILENO, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* nowhere to tell */
        p += w;
        n -= (size_t)w;
    }
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
    pt_linux_log_detect();
    static atomic_int installed; /* set once: other threads log meanwhile */
    if (!atomic_exchange(&installed, 1))
        pt_log_set_sink(log_cb, NULL);
}

static const struct pt_platform linux_platform = {
    .now_ms = now_cb,
    .mono_ms = mono_cb,
    .random = random_cb,
    .log = log_cb,
    .ctx = NULL,
    .transport = NULL,
    .boot_ms = boot_cb,
    .boot_id = boot_id_cb,
    .wall_synced = synced_cb,
};

const struct pt_platform *pt_linux_platform(void)
{
    return &linux_platform;
}
