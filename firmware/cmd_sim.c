/*
 * cmd_sim.c - `payterm sim`: runs the gateway simulator (platform/sim) in the
 * foreground until SIGTERM or SIGINT.
 *
 * Board builds leave the simulator out (CMake option PT_WITH_SIM=OFF); the
 * command then exists only to say so.
 */
#include "cli.h"
#include "pt_config.h"

#include <stdio.h>

#if PT_WITH_SIM

#include "err.h"
#include "log.h"
#include "sim.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static const char help[] =
    "usage: payterm sim --dir DIR [--listen HOST:PORT] [--notify-base URL]\n"
    "                   [--pay-delay-ms N] [--idle-timeout-ms N] [--pm-refund-pending]\n"
    "                   [--bill-ready-after HH:MM] [--quiet]\n\n"
    "Runs the gateway simulator: Alipay, WeChat Pay, Stripe and 2C2P over HTTPS on one\n"
    "port, until SIGTERM or SIGINT.\n\n"
    "  --dir DIR           keys, certificates, gateways.json and the ledger (sim.db);\n"
    "                      created on first start, reused afterwards\n"
    "  --listen HOST:PORT  default 127.0.0.1:8443; port 0 picks a free port\n"
    "  --notify-base URL   where notifications go, default " PT_SIM_DEFAULT_NOTIFY_BASE "\n"
    "                      (+ /notify/alipay, /notify/wechat, /notify/2c2p, /webhooks/stripe)\n"
    "  --pay-delay-ms N    the simulated customer pays QR/redirect orders after N ms\n"
    "                      (default 1000)\n"
    "  --idle-timeout-ms N close kept-alive connections idle for N ms (default 30000)\n"
    "  --wechat-close-after-ms N  WeChat Pay refuses to close an order younger than\n"
    "                      N ms (it documents 5 minutes: 300000; default: at once)\n"
    "  --pm-refund-pending 2C2P refunds are answered RP (pending) and become RF after\n"
    "                      the pay delay, as 2C2P refunds alternative payment methods\n"
    "  --bill-ready-after HH:MM  a day's bill is ready this long after the day ends,\n"
    "                      in the gateway's bill time zone (default: at once)\n"
    "  --quiet             no line per request\n"
    "  -c/--config FILE    accepted and ignored: the simulator needs no configuration\n\n"
    "Use it with:  payterm serve -c payterm.json -c DIR/gateways.json\n"
    "Control:      POST /_sim/faults, GET /_sim/ledger, GET /_sim/notifications,\n"
    "              POST /_sim/pay, /_sim/scan, /_sim/clock, /_sim/ledger/alter,\n"
    "              /_sim/ledger/forget (docs/simulator.md)\n"
    "Amounts ending in 51 minor units are declined, in 52 stay pending.\n";

static int int_arg(const char *opt, const char *v, int *out)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || end == v || n < 1 || n > 3600000) {
        pt_cli_error("sim", "%s: expected a number of milliseconds (1..3600000), got '%s'", opt, v);
        return -1;
    }
    *out = (int)n;
    return 0;
}

int pt_cmd_sim(int argc, char **argv)
{
    struct pt_sim_options o = {.listen = "127.0.0.1:8443"};
    struct pt_cli_common common = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(help, stdout);
            return PT_EXIT_OK;
        }
        int r = pt_cli_take_config(&common, argc, argv, &i);
        if (r < 0)
            return PT_EXIT_USAGE;
        if (r)
            continue; /* accepted everywhere; the simulator needs no config file */
        if (strcmp(a, "--quiet") == 0) {
            o.quiet = 1;
            continue;
        }
        if (strcmp(a, "--pm-refund-pending") == 0) {
            o.pm_refund_pending = 1;
            continue;
        }
        if (i + 1 >= argc) {
            pt_cli_error("sim", "unexpected argument '%s' (see payterm sim --help)", a);
            return PT_EXIT_USAGE;
        }
        const char *v = argv[++i];
        if (strcmp(a, "--listen") == 0)
            o.listen = v;
        else if (strcmp(a, "--dir") == 0)
            o.dir = v;
        else if (strcmp(a, "--notify-base") == 0)
            o.notify_base = v;
        else if (strcmp(a, "--bill-ready-after") == 0)
            o.bill_ready_after = v;
        else if (strcmp(a, "--pay-delay-ms") == 0) {
            if (int_arg(a, v, &o.pay_delay_ms))
                return PT_EXIT_USAGE;
        } else if (strcmp(a, "--idle-timeout-ms") == 0) {
            if (int_arg(a, v, &o.idle_timeout_ms))
                return PT_EXIT_USAGE;
        } else if (strcmp(a, "--wechat-close-after-ms") == 0) {
            if (int_arg(a, v, &o.wechat_close_after_ms))
                return PT_EXIT_USAGE;
        } else {
            pt_cli_error("sim", "unknown option '%s' (see payterm sim --help)", a);
            return PT_EXIT_USAGE;
        }
    }
    if (!o.dir) {
        pt_cli_error("sim", "--dir DIR is required (where keys and the ledger live)");
        return PT_EXIT_USAGE;
    }

    /* The signals are taken by sigwait() below, so every thread the simulator
     * starts must inherit them blocked. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct pt_sim *sim = NULL;
    char err[768];
    int rc = pt_sim_start(&o, &sim, err, sizeof err);
    if (rc != PT_OK) {
        fprintf(stderr, "payterm %s\n", err);
        return PT_EXIT_FAIL;
    }
    /* One line a script can wait for, with the port actually bound. */
    printf("payterm sim: ready on port %d; config fragment %s/gateways.json\n", pt_sim_port(sim),
           o.dir);
    fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    pt_log_info("sim: %s received, stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
    pt_sim_stop(sim);
    return PT_EXIT_OK;
}

#else

int pt_cmd_sim(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "payterm sim: this build has no simulator (built with PT_WITH_SIM=OFF)\n");
    return PT_EXIT_FAIL;
}

#endif
