/*
 * main.c - the payterm program: one binary for the daemon and the CLI.
 *
 * Adding a command is adding a file with its pt_cmd_* function and one line
 * in the table below.
 */
#include "cli.h"
#include "linux.h"
#include "pt_config.h"

#include <stdio.h>
#include <string.h>

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    {"serve", pt_cmd_serve, "run the daemon (HTTP API, sync engine) in the foreground"},
    {"status", pt_cmd_status, "print the queue and charge counts (reads the database)"},
    {"charges", pt_cmd_charges, "list charges, optionally by state"},
    {"sync", pt_cmd_sync, "ask the running daemon to start a sync pass now"},
    {"refund", pt_cmd_refund, "refund a paid charge, fully or in part (through the daemon)"},
    {"refunds", pt_cmd_refunds, "list refunds, optionally by state or order"},
    {"report", pt_cmd_report, "print the X report (the day so far) or a Z report"},
    {"close-day", pt_cmd_close_day, "close the day: the next Z report (through the daemon)"},
    {"reconcile", pt_cmd_reconcile, "check a gateway's bill of a day against the records"},
    {"init", pt_cmd_init, "create or migrate the database; check config and key files"},
    {"sweep", pt_cmd_sweep, "delete expired idempotency records"},
    {"backup", pt_cmd_backup, "copy the database to DEST (SQLite online backup)"},
    {"sim", pt_cmd_sim, "run the gateway simulator (desktop builds)"},
    {"demo", pt_cmd_demo, "play a kiosk session against the simulator (desktop builds)"},
    {"sign", pt_cmd_sign, "sign a gateway message as the vendor SDKs do"},
    {"verify", pt_cmd_verify, "verify a gateway notification or response"},
    {"version", pt_cmd_version, "print the version"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: payterm <command> [-c FILE]... [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'payterm <command> --help' describes one command.\n");
}

int main(int argc, char **argv)
{
    /* Every command logs through the platform: the time and the level on a
     * terminal or in a file, a <N> priority under journald (init runs
     * there as ExecStartPre=, and its errors must sort by priority too). */
    pt_linux_log_use_syslog(0);
    if (argc < 2) {
        usage(stderr);
        return PT_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        usage(stdout);
        return PT_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0)
        name = "version";
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(name, commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "payterm: unknown command '%s'\n\n", name);
    usage(stderr);
    return PT_EXIT_USAGE;
}
