/*
 * cmd_serve.c - `payterm serve`: the daemon.
 *
 * Startup: load and check the configuration (secret file modes included),
 * create and migrate the database, start the HTTP listeners and the sync
 * engine, tell systemd we are ready.  Then the main thread sleeps in
 * sigtimedwait() until a signal or the next timer (watchdog, hourly sweep):
 * an idle daemon has no wake-ups but those.
 *
 * SIGTERM/SIGINT: stop accepting, let requests in flight finish and commit,
 * stop the sync engine, close the database, exit 0.  SIGHUP: reopen the log
 * file (--log-file) or reconnect to syslog, then read the configuration
 * files again (pt_daemon_reload: the live keys change, the others are named
 * and kept, a broken file changes nothing).
 *
 * systemd's watchdog (WATCHDOG_USEC) is fed only while the daemon is well
 * (SPEC 11): the HTTP listener answers GET /healthz and the sync thread has
 * moved within half the interval.  A daemon that is not is left to be
 * restarted, with STATUS= saying why.
 */
#include "api.h"
#include "cli.h"
#include "daemon.h"
#include "err.h"
#include "host.h"
#include "idem.h"
#include "linux.h"
#include "log.h"
#include "pt_config.h"
#if PT_WITH_SIM
#include "sim.h"
#endif
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define SWEEP_INTERVAL_MS (3600 * 1000)

static const char help[] =
    "usage: payterm serve [-c FILE]... [--log-file FILE] [--syslog]\n\n"
    "Runs the daemon in the foreground: the local HTTP API (listen, notify_listen),\n"
    "the sync engine, the hourly sweep of expired idempotency records.\n"
    "Logs go to stderr, to FILE (reopened on SIGHUP; FILE and FILE.1 together kept\n"
    "under log.max_bytes) or to syslog with priorities; each line starts with an\n"
    "RFC 3339 UTC time and the level (<N> priorities under journald).\n"
    "SIGTERM/SIGINT stop it gracefully. SIGHUP reopens the log and reloads the\n"
    "configuration: log_level, limits, offline limits, sync timing and gateway keys\n"
    "and endpoints change at once; a key that needs a restart is named and kept; a\n"
    "broken file is refused whole. With NOTIFY_SOCKET set it tells systemd READY=1\n"
    "and STATUS= (the queue), and feeds the watchdog (WATCHDOG_USEC) only while the\n"
    "HTTP listener answers and the sync thread moves.\n"
    "One daemon per data_dir: a second one exits 1 naming the PID that holds\n"
    "DATA_DIR/payterm.lock. A data_dir that held a database (DATA_DIR/payterm.marker)\n"
    "refuses a missing or empty one: see payterm init --new-database.\n"
    "PAYTERM_THREAD_STACK_KIB=N (64-65536) sets every thread's\n"
    "stack (default 256 KiB).\n";

/* ---- systemd notification (the datagram protocol is tiny: no libsystemd) --- */

static void sd_notify_send(const char *msg)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, path, strlen(path));
    if (sa.sun_path[0] == '@')
        sa.sun_path[0] = '\0'; /* abstract socket */
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path));
    if (sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa, len) < 0)
        pt_log_warn("sd_notify: %s", strerror(errno));
    close(fd);
}

/* WATCHDOG_USEC, when the watchdog is ours (WATCHDOG_PID unset or this
 * process); 0 = no watchdog. */
static int64_t watchdog_usec(void)
{
    const char *pid = getenv("WATCHDOG_PID");
    if (pid && *pid && atoll(pid) != (long long)getpid())
        return 0;
    const char *wd = getenv("WATCHDOG_USEC");
    long long v = wd ? atoll(wd) : 0;
    return v > 0 ? v : 0;
}

/* The status systemd shows; sent when it changed. */
static void send_status(struct pt_daemon *d, const char *unwell)
{
    static char last[256];
    char line[200], msg[256];
    if (unwell)
        snprintf(line, sizeof line, "not well: %s", unwell);
    else
        pt_daemon_status_line(d, line, sizeof line);
    snprintf(msg, sizeof msg, "STATUS=%s", line);
    if (strcmp(msg, last) != 0) {
        sd_notify_send(msg);
        snprintf(last, sizeof last, "%s", msg);
    }
}

/* SIGHUP: the same files again; a broken one changes nothing. */
static void reload(struct pt_daemon *d, const struct pt_cli_common *c)
{
    struct pt_config *cfg = malloc(sizeof *cfg);
    char err[4096];
    if (!cfg) {
        pt_log_error("reload: out of memory; the running configuration stays");
        return;
    }
    if (pt_cli_read_config(c, cfg, err, sizeof err) != 0 ||
        pt_daemon_reload(d, cfg, err, sizeof err) != PT_OK)
        pt_log_error("reload: the new configuration is refused, the running one stays: %s", err);
    else
        pt_linux_log_set_max_bytes(cfg->log_max_bytes); /* a live key */
    free(cfg);
}

/* ---- logging to a file, reopened on SIGHUP ---------------------------------- */

static const char *log_path;

/* The --log-file, opened onto stderr (platform/linux keeps it under
 * log.max_bytes); nothing to do without one. */
static int open_log(void)
{
    if (!log_path || pt_linux_log_open_file(log_path) == PT_OK)
        return 0;
    pt_log_error("cannot open log file %s: %s", log_path, strerror(errno));
    return -1;
}

/*
 * A fatal start-up error goes through the log, so that it carries the
 * destination's priority like every other line (SPEC 18): <3> under
 * journald, LOG_ERR in syslog, the time and "error" on a terminal or in a
 * --log-file.  One line at a time: a list of problems is not cut short.
 */
static void fatal(const char *text)
{
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, "\n");
        pt_log_error("%.*s", (int)len, p);
        p += len + (p[len] == '\n');
    }
}

static void sweep(struct pt_store *st)
{
    int n = 0;
    int rc = pt_store_begin(st);
    if (rc == PT_OK && (rc = pt_idem_sweep(st, pt_host_now_ms(), &n)) == PT_OK)
        rc = pt_store_commit(st);
    else
        pt_store_rollback(st);
    if (rc)
        pt_log_error("sweep failed: %s (%s)", pt_strerror(rc), pt_store_errmsg(st));
    else if (n)
        pt_log_info("swept %d expired idempotency records", n);
}

int pt_cmd_serve(int argc, char **argv)
{
    struct pt_cli_common c = {0};
    int use_syslog = 0;
    for (int i = 1; i < argc; i++) {
        int r = pt_cli_take_config(&c, argc, argv, &i);
        if (r < 0)
            return PT_EXIT_USAGE;
        if (r)
            continue;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(help, stdout);
            return PT_EXIT_OK;
        } else if (strcmp(argv[i], "--log-file") == 0 && i + 1 < argc) {
            log_path = argv[++i];
        } else if (strcmp(argv[i], "--syslog") == 0) {
            use_syslog = 1;
        } else {
            pt_cli_error("serve", "unexpected argument '%s' (see payterm serve --help)", argv[i]);
            return PT_EXIT_USAGE;
        }
    }
    if (open_log())
        return PT_EXIT_FAIL;
    pt_linux_log_use_syslog(use_syslog);
#if PT_WITH_SIM
    /* Desktop builds: a test may move the wall clock (platform/sim/clock.c). */
    const char *clock_file = getenv("PAYTERM_TEST_CLOCK_FILE");
    if (clock_file && *clock_file) {
        pt_host_set(pt_sim_test_clock(pt_linux_platform(), clock_file));
        pt_log_warn("test clock: the wall clock is moved by %s", clock_file);
    }
#endif

    /* Static: a configuration is some 30 KiB (the main thread's frame stays
     * within the budget every thread keeps, CMakeLists.txt). */
    static struct pt_config cfg;
    char err[4096];
    if (pt_cli_read_config(&c, &cfg, err, sizeof err) != 0) {
        fatal(err);
        return PT_EXIT_FAIL;
    }
    pt_log_set_level(cfg.log_level);
    pt_linux_log_set_max_bytes(cfg.log_max_bytes);

    /* Block the signals before any thread starts, so every thread inherits
     * the mask and only sigtimedwait() below ever sees them. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct pt_daemon *d = NULL;
    if (pt_daemon_start(&cfg, &d, err, sizeof err) != PT_OK) {
        fatal(err);
        return PT_EXIT_FAIL;
    }
    pt_log_info("payterm %s serving on %s%s%s", PT_VERSION, cfg.listen,
                cfg.notify_listen[0] ? ", notifications on " : "", cfg.notify_listen);
    sd_notify_send("READY=1");
    send_status(d, NULL);

    /* Checked at a quarter of WatchdogSec (never more than once a second)
     * and fed after each check that finds the daemon well, so that one slow
     * check is not yet a restart: it takes a daemon unwell for about three
     * quarters of the interval.  The sync thread may go half the interval
     * without a step; its gateway calls end within sync.request_timeout_ms. */
    const char *ns = getenv("NOTIFY_SOCKET");
    int64_t wd_ms = ns && *ns ? watchdog_usec() / 1000 : 0;
    int64_t watchdog_ms = wd_ms / 4;
    if (wd_ms && watchdog_ms < 1000)
        watchdog_ms = 1000;
    if (wd_ms && wd_ms / 2 <= cfg.sync_request_timeout_ms + 5000)
        pt_log_warn("watchdog: half of WatchdogSec (%lld ms) is not longer than "
                    "sync.request_timeout_ms (%lld) and 5 s: a slow gateway may get the daemon "
                    "restarted",
                    (long long)(wd_ms / 2), (long long)cfg.sync_request_timeout_ms);
    int64_t next_sweep = pt_host_mono_ms() + SWEEP_INTERVAL_MS;
    int64_t next_watchdog = watchdog_ms ? pt_host_mono_ms() + watchdog_ms : 0;
    int unwell = 0;

    for (;;) {
        int64_t now = pt_host_mono_ms();
        if (now >= next_sweep) {
            sweep(pt_daemon_store(d));
            next_sweep = now + SWEEP_INTERVAL_MS;
        }
        if (next_watchdog && now >= next_watchdog) {
            char why[200];
            if (pt_daemon_healthy(d, wd_ms / 2, why, sizeof why)) {
                sd_notify_send("WATCHDOG=1");
                if (unwell)
                    pt_log_info("watchdog: well again, feeding it");
                unwell = 0;
                send_status(d, NULL);
            } else {
                if (!unwell)
                    pt_log_error("watchdog: not fed: %s", why);
                unwell = 1;
                send_status(d, why);
            }
            next_watchdog = pt_host_mono_ms() + watchdog_ms;
        }
        int64_t wake = next_sweep;
        if (next_watchdog && next_watchdog < wake)
            wake = next_watchdog;
        int64_t ms = wake - pt_host_mono_ms();
        if (ms < 0)
            ms = 0;
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
        int sig = sigtimedwait(&sigs, NULL, &ts);
        if (sig == SIGHUP) {
            pt_log_info("SIGHUP: reopening logs, reloading the configuration");
            if (use_syslog)
                pt_linux_log_use_syslog(1);
            if (log_path && pt_linux_log_reopen() != PT_OK)
                pt_log_error("cannot reopen log file %s: %s", log_path, strerror(errno));
            pt_linux_log_detect();
            sd_notify_send("RELOADING=1");
            reload(d, &c);
            sd_notify_send("READY=1");
            send_status(d, NULL);
        } else if (sig == SIGTERM || sig == SIGINT) {
            pt_log_info("%s: finishing requests in flight and stopping",
                        sig == SIGTERM ? "SIGTERM" : "SIGINT");
            break;
        }
    }
    sd_notify_send("STOPPING=1");
    pt_daemon_stop(d);
    pt_log_info("stopped");
    return PT_EXIT_OK;
}
