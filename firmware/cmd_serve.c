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
 * file (--log-file) or reconnect to syslog.
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
    "Logs go to stderr, to FILE (reopened on SIGHUP) or to syslog.\n"
    "SIGTERM/SIGINT stop it gracefully. With NOTIFY_SOCKET set it tells systemd\n"
    "READY=1 and feeds the watchdog (WATCHDOG_USEC).\n"
    "One daemon per data_dir: a second one exits 1 naming the PID that holds\n"
    "DATA_DIR/payterm.lock. PAYTERM_THREAD_STACK_KIB=N (32-65536) sets every thread's\n"
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

/* ---- logging to a file, reopened on SIGHUP ---------------------------------- */

static const char *log_path;

static int reopen_log(void)
{
    if (!log_path)
        return 0;
    int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd < 0) {
        pt_log_error("cannot open log file %s: %s", log_path, strerror(errno));
        return -1;
    }
    dup2(fd, STDERR_FILENO);
    close(fd);
    return 0;
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
    if (reopen_log())
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

    struct pt_config cfg;
    if (pt_cli_load_config(&c, &cfg))
        return PT_EXIT_FAIL;
    pt_log_set_level(cfg.log_level);

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
    char err[4096];
    if (pt_daemon_start(&cfg, &d, err, sizeof err) != PT_OK) {
        pt_cli_error("serve", "%s", err);
        return PT_EXIT_FAIL;
    }
    pt_log_info("payterm %s serving on %s%s%s", PT_VERSION, cfg.listen,
                cfg.notify_listen[0] ? ", notifications on " : "", cfg.notify_listen);
    sd_notify_send("READY=1");

    int64_t watchdog_ms = 0;
    const char *wd = getenv("WATCHDOG_USEC");
    if (wd && atoll(wd) > 0)
        watchdog_ms = atoll(wd) / 2000; /* feed at half the interval */
    if (watchdog_ms > 0 && watchdog_ms < 1000)
        watchdog_ms = 1000; /* never wake more than once a second */
    int64_t next_sweep = pt_host_mono_ms() + SWEEP_INTERVAL_MS;
    int64_t next_watchdog = watchdog_ms ? pt_host_mono_ms() + watchdog_ms : 0;

    for (;;) {
        int64_t now = pt_host_mono_ms();
        if (now >= next_sweep) {
            sweep(pt_daemon_store(d));
            next_sweep = now + SWEEP_INTERVAL_MS;
        }
        if (next_watchdog && now >= next_watchdog) {
            sd_notify_send("WATCHDOG=1");
            next_watchdog = now + watchdog_ms;
        }
        int64_t wake = next_sweep;
        if (next_watchdog && next_watchdog < wake)
            wake = next_watchdog;
        int64_t ms = wake - now;
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
        int sig = sigtimedwait(&sigs, NULL, &ts);
        if (sig == SIGHUP) {
            pt_log_info("SIGHUP: reopening logs");
            if (use_syslog)
                pt_linux_log_use_syslog(1);
            reopen_log();
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
