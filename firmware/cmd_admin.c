/*
 * cmd_admin.c - the maintenance commands: init, sweep, backup, version.
 */
#include "cli.h"
#include "daemon.h"
#include "datadir.h"
#include "metrics.h"
#include "err.h"
#include "host.h"
#include "idem.h"
#include "linux.h"
#include "pt_config.h"
#include "store.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * SPEC 18, before the database is opened (and so created): a data_dir that
 * held one refuses a missing or empty database, unless new_database says a
 * new one is wanted - then with data_dir's lock held (*lock_fd, for the
 * caller to close: a daemon running on the old files must not share their
 * WAL with the new database) and what the old one left moved aside.
 * *is_new: a new database is created.  PT_OK, or the error printed.
 */
static int keep_or_new_database(const struct pt_config *cfg, const char *path, int new_database,
                                int *lock_fd, int *is_new)
{
    char err[2048];
    int rc = PT_OK;
    int file = (pt_config_store_caps(cfg) & PT_STORE_CAP_DATADIR_FILE) != 0;
    if (!file && new_database) {
        snprintf(err, sizeof err,
                 "--new-database: store.backend is \"postgresql\", whose server keeps the "
                 "database; it is for the SQLite database in data_dir");
        rc = PT_EUNSUPPORTED;
    } else if (!file) {
        return PT_OK;
    } else if (new_database) {
        rc = pt_datadir_lock(cfg->data_dir, lock_fd, err, sizeof err);
        if (rc == PT_OK)
            rc = pt_datadir_new_database(path, is_new, err, sizeof err);
    } else {
        rc = pt_datadir_check_database(cfg->data_dir, path, err, sizeof err);
    }
    if (rc != PT_OK) {
        pt_cli_error("init", "%s", err);
        if (*lock_fd >= 0)
            close(*lock_fd);
        *lock_fd = -1;
    }
    return rc;
}

int pt_cmd_init(int argc, char **argv)
{
    static const char help[] =
        "usage: payterm init [-c FILE]...\n\n"
        "Checks everything payterm serve would refuse: the configuration, the modes of\n"
        "every key and secret file, every configured gateway's keys (each loaded: a\n"
        "private key must sign a probe message it verifies, a gateway's key must not\n"
        "be a private key or the merchant's own, a merchant certificate must be that\n"
        "of the private key and of serial_no), a tls.ca_file that holds no\n"
        "certificate; lists every problem at once.  Then creates data_dir and\n"
        "the database if needed and migrates it to the current schema. Safe to run\n"
        "again.\n"
        "A data_dir that held a database (DATA_DIR/payterm.marker) is refused when its\n"
        "database is missing or empty: restore it, or start a new one on purpose.\n\n"
        "  --check-gateways  only say whether a gateway is configured, for systemd's\n"
        "                    ExecCondition=: exit 0 when at least one is, 1 when none\n"
        "                    (the unit is skipped, not failed), 255 when the\n"
        "                    configuration cannot be read (the unit fails)\n"
        "  --new-database    the database is missing or empty and a new one is wanted:\n"
        "                    create it (the WAL the old one left is moved aside).  A\n"
        "                    database that holds data is kept as ever.  Refused while\n"
        "                    payterm serve runs on data_dir\n";
    static const char *const flags[] = {"--check-gateways", "--new-database", NULL};
    struct pt_cli_args args = {.maxpos = 0, .flags = flags};
    int r = pt_cli_parse("init", help, argc, argv, &args);
    /* Under ExecCondition= any exit from 1 to 254 means "skip quietly": a
     * mistyped option must fail the unit instead (255). */
    int condition = 0;
    for (int i = 1; i < argc; i++)
        condition |= strcmp(argv[i], "--check-gateways") == 0;
    if (r)
        return r > 0 ? PT_EXIT_OK : condition ? 255 : PT_EXIT_USAGE;
    static struct pt_config cfg; /* ~30 KiB: off the stack */
    if (pt_cli_load_config(&args.common, &cfg))
        return args.flag_set[0] ? 255 : PT_EXIT_FAIL;
    if (args.flag_set[0]) {
        int n = 0;
        for (int i = 0; i < pt_gateway_count(); i++)
            n += pt_config_gateway_configured(&cfg, pt_metric_gateway_name(i)) != 0;
        if (n == 0) {
            pt_cli_notice("init", "no gateway is configured (gateways in the configuration is "
                                  "empty): payterm stays stopped until one is");
            return PT_EXIT_FAIL;
        }
        printf("%d gateway(s) configured\n", n);
        return PT_EXIT_OK;
    }
    char err[4096];
    if (pt_daemon_check(&cfg, err, sizeof err) != PT_OK) {
        pt_cli_error("init", "%s", err);
        return PT_EXIT_FAIL;
    }
    if (pt_cli_ensure_dir("init", cfg.data_dir))
        return PT_EXIT_FAIL;
    char path[PT_CFG_PATH_MAX + 16];
    pt_config_db_path(&cfg, path, sizeof path);
    int lock_fd = -1, is_new = 0;
    if (keep_or_new_database(&cfg, path, args.flag_set[1], &lock_fd, &is_new) != PT_OK)
        return PT_EXIT_FAIL;
    struct pt_store *st;
    int opened = pt_cli_open_store("init", &cfg, &st);
    int rc = opened < 0 ? PT_EXIT_FAIL : PT_EXIT_OK;
    if (opened == 0) {
        int version = 0;
        pt_store_schema_version(st, &version);
        pt_store_close(st);
        /* As serve: a marker that cannot be written is warned of, and the
         * lane still starts (a full disk at an upgrade). */
        if ((pt_config_store_caps(&cfg) & PT_STORE_CAP_DATADIR_FILE) &&
            pt_datadir_mark(cfg.data_dir, err, sizeof err) != PT_OK)
            pt_cli_error("init",
                         "warning: %s: a missing or empty database will not be refused at "
                         "the next start",
                         err);
        if (is_new) {
            printf("new database %s created (schema version %d), as --new-database asked\n", path,
                   version);
        } else {
            printf("database %s ready (schema version %d)\n", path, version);
        }
    }
    if (lock_fd >= 0)
        close(lock_fd);
    return rc;
}

int pt_cmd_sweep(int argc, char **argv)
{
    static const char help[] =
        "usage: payterm sweep [-c FILE]...\n\n"
        "Deletes idempotency records past their expiry (the daemon does this hourly).\n"
        "Charges are never deleted: order_id uniqueness outlives every key.\n"
        "Never creates or migrates the database: a missing or older one is an error.\n";
    struct pt_cli_args args = {.maxpos = 0};
    int r = pt_cli_parse("sweep", help, argc, argv, &args);
    if (r)
        return r > 0 ? PT_EXIT_OK : PT_EXIT_USAGE;
    static struct pt_config cfg; /* ~34 KiB: off the stack (one command per process) */
    struct pt_store *st;
    if (pt_cli_open_configured("sweep", &args.common, &cfg, PT_CLI_DB_MAINTAIN, &st))
        return PT_EXIT_FAIL;
    int n = 0;
    int rc = pt_store_begin(st);
    if (rc == PT_OK)
        rc = pt_idem_sweep(st, pt_cli_now(st), &n);
    if (rc == PT_OK)
        rc = pt_store_commit(st);
    else
        pt_store_rollback(st);
    if (rc != PT_OK) {
        pt_cli_error("sweep", "%s: %s", pt_strerror(rc), pt_store_errmsg(st));
        pt_store_close(st);
        return PT_EXIT_FAIL;
    }
    printf("swept %d expired idempotency records\n", n);
    pt_store_close(st);
    return PT_EXIT_OK;
}

int pt_cmd_backup(int argc, char **argv)
{
    static const char help[] =
        "usage: payterm backup [-c FILE]... DEST\n\n"
        "Writes a consistent copy of the database to DEST with SQLite's online backup,\n"
        "while the daemon keeps running. DEST must not exist. The database is copied\n"
        "as it is (an older schema too); a missing one is an error, never created.\n";
    struct pt_cli_args args = {.maxpos = 1};
    int r = pt_cli_parse("backup", help, argc, argv, &args);
    if (r)
        return r > 0 ? PT_EXIT_OK : PT_EXIT_USAGE;
    if (args.npos != 1) {
        pt_cli_error("backup", "needs DEST (see payterm backup --help)");
        return PT_EXIT_USAGE;
    }
    struct stat sb;
    if (stat(args.pos[0], &sb) == 0) {
        pt_cli_error("backup", "DEST %s already exists; choose a new file", args.pos[0]);
        return PT_EXIT_FAIL;
    }
    static struct pt_config cfg; /* ~34 KiB: off the stack (one command per process) */
    struct pt_store *st;
    if (pt_cli_open_configured("backup", &args.common, &cfg, PT_CLI_DB_COPY, &st))
        return PT_EXIT_FAIL;
    int rc = pt_store_backup(st, args.pos[0]);
    pt_store_close(st);
    if (rc != PT_OK) {
        pt_cli_error("backup", "cannot write %s: %s", args.pos[0], pt_strerror(rc));
        return PT_EXIT_FAIL;
    }
    printf("backup written to %s\n", args.pos[0]);
    return PT_EXIT_OK;
}

int pt_cmd_version(int argc, char **argv)
{
    static const char help[] =
        "usage: payterm version [-c FILE]...\n\n"
        "Prints payterm's version and the database schema version it writes.\n"
        "-c/--config FILE is accepted and ignored.\n";
    struct pt_cli_args args = {.maxpos = 0};
    int r = pt_cli_parse("version", help, argc, argv, &args);
    if (r)
        return r > 0 ? PT_EXIT_OK : PT_EXIT_USAGE;
    printf("payterm %s (database schema %d)\n", PT_VERSION, pt_store_schema_latest());
    return PT_EXIT_OK;
}
