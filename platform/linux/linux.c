/*
 * linux.c - clocks, randomness and logging for Linux boards and desktops.
 */
#include "linux.h"
#include "err.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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

/* Writes all of n bytes to fd (to stderr a line at a time: never mixed
 * with another thread's). */
static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
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
            write_all(STDERR_FILENO, prefix, strlen(prefix));
            write_all(STDERR_FILENO, p, len);
            write_all(STDERR_FILENO, "\n", 1);
        } else if (w > 0) {
            write_all(STDERR_FILENO, line, (size_t)w);
        }
        if (!p[len])
            break;
        p += len + 1;
    }
}

/* ---- the log file (serve --log-file), kept under log.max_bytes ------------
 *
 * The file is the daemon's stderr (dup2), so that whatever else writes to
 * stderr lands there too.  With a limit, the file and FILE.1 together hold
 * at most log.max_bytes: before a line would take the file past half of it,
 * the file becomes FILE.1 (replacing the one before) and a new FILE is
 * opened.  A board's /var/log is often RAM, and nothing else may rotate it.
 * The service user needs the directory to rename in; where it cannot, the
 * file is emptied instead (the bound still holds), and the first line of
 * the emptied file says why.  file_mu orders rotations with the lines of
 * every thread: a line goes whole into one file or the other. */
static pthread_mutex_t file_mu = PTHREAD_MUTEX_INITIALIZER;
static char file_path[4096]; /* "" = stderr is not a log file of ours */
static int64_t file_max;     /* log.max_bytes; 0 = no limit */
static int64_t file_size;    /* bytes in the current file */

/* Opens file_path for appending onto stderr; file_mu held.  PT_OK or
 * PT_ESYS (errno set). */
static int open_file_locked(void)
{
    int fd = open(file_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd < 0)
        return PT_ESYS;
    struct stat sb;
    file_size = fstat(fd, &sb) == 0 ? (int64_t)sb.st_size : 0;
    if (fd != STDERR_FILENO) {
        dup2(fd, STDERR_FILENO);
        close(fd);
    }
    return PT_OK;
}

int pt_linux_log_open_file(const char *path)
{
    if (!path || !*path || strlen(path) + 3 > sizeof file_path) {
        errno = ENAMETOOLONG;
        return PT_ESYS;
    }
    pthread_mutex_lock(&file_mu);
    snprintf(file_path, sizeof file_path, "%s", path);
    int rc = open_file_locked();
    pthread_mutex_unlock(&file_mu);
    return rc;
}

int pt_linux_log_reopen(void)
{
    int rc = PT_OK;
    pthread_mutex_lock(&file_mu);
    if (file_path[0])
        rc = open_file_locked();
    pthread_mutex_unlock(&file_mu);
    return rc;
}

void pt_linux_log_set_max_bytes(int64_t max_bytes)
{
    pthread_mutex_lock(&file_mu);
    file_max = max_bytes > 0 ? max_bytes : 0;
    pthread_mutex_unlock(&file_mu);
}

/* FILE -> FILE.1 and a new FILE; or, where the directory is not ours to
 * rename in, FILE emptied with a line saying so (stamp: the line's time and
 * level prefix).  file_mu held. */
static void rotate_locked(const char *stamp)
{
    char old[sizeof file_path + 2];
    snprintf(old, sizeof old, "%s.1", file_path);
    if (rename(file_path, old) == 0 && open_file_locked() == PT_OK)
        return;
    int e = errno;
    if (ftruncate(STDERR_FILENO, 0) != 0)
        return; /* not a file: nothing to keep small */
    file_size = 0;
    char note[600];
    int n = snprintf(note, sizeof note,
                     "%slog.max_bytes: cannot rotate %s to %s (%s): emptied it instead; give the "
                     "user a directory of its own for the log\n",
                     stamp, file_path, old, strerror(e));
    if (n > 0 && (size_t)n < sizeof note) {
        write_all(STDERR_FILENO, note, (size_t)n);
        file_size = n;
    }
}

/* Writes one or more whole lines to stderr, rotating the log file first
 * when they would take it past half of log.max_bytes. */
static void write_log(const char *buf, size_t n, const char *stamp)
{
    if (!file_path[0]) {
        write_all(STDERR_FILENO, buf, n);
        return;
    }
    pthread_mutex_lock(&file_mu);
    if (file_max && file_size + (int64_t)n > file_max / 2)
        rotate_locked(stamp);
    write_all(STDERR_FILENO, buf, n);
    file_size += (int64_t)n;
    pthread_mutex_unlock(&file_mu);
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
    /* stamp starts each line; warn_stamp a rotation's own note, if any. */
    char stamp[128], warn_stamp[128];
    if (atomic_load(&to_journal)) {
        snprintf(stamp, sizeof stamp, "<%d>", prio[level]);
        snprintf(warn_stamp, sizeof warn_stamp, "<4>");
    } else {
        struct timespec ts;
        struct tm tm;
        char when[80];
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        snprintf(when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
        snprintf(stamp, sizeof stamp, "%s %s: ", when, level_names[level]);
        snprintf(warn_stamp, sizeof warn_stamp, "%s warn: ", when);
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
    write_log(buf, n, warn_stamp);
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
