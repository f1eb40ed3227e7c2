/*
 * cli.h - the subcommands of the payterm program and what they share.
 *
 * One binary, many commands (busybox style): main.c looks the command up in
 * its table and calls it with argv starting at the command name.  Exit codes
 * are the same for every command: 0 success, 1 failure, 2 usage error (and
 * for `verify`, 3 = signature does not verify).
 */
#ifndef PT_CLI_H
#define PT_CLI_H

#include "config_load.h"

enum { PT_EXIT_OK = 0, PT_EXIT_FAIL = 1, PT_EXIT_USAGE = 2, PT_EXIT_INVALID = 3 };

#define PT_CLI_MAX_CONFIGS 8

/* Options every command takes: -c/--config FILE (repeatable). */
struct pt_cli_common {
    const char *configs[PT_CLI_MAX_CONFIGS];
    int nconfigs;
};

/*
 * If argv[*i] is -c/--config (or --config=FILE), records the file and
 * advances *i.  Returns 1 when consumed, 0 when not a config option, -1 on a
 * usage error (message printed).
 */
int pt_cli_take_config(struct pt_cli_common *c, int argc, char **argv, int *i);

/* The arguments of one command, as declared by the command. */
#define PT_CLI_MAX_OPTS 8
struct pt_cli_args {
    const char *const *names;            /* in: options that take a value, NULL-ended */
    const char *const *flags;            /* in: options without a value, NULL-ended */
    int maxpos;                          /* in: positional arguments allowed */
    struct pt_cli_common common;         /* out: -c/--config files */
    const char *values[PT_CLI_MAX_OPTS]; /* out: values[i] for names[i], NULL if absent */
    int flag_set[PT_CLI_MAX_OPTS];       /* out: 1 when flags[i] was given */
    const char *pos[4];                  /* out: positional arguments */
    int npos;
};

/*
 * Parses argv (argv[0] = the command) into a: -c/--config, --help (prints
 * help), the declared options.  Returns 0 to go on, 1 when --help was
 * printed, -1 on a usage error (printed, naming the argument).
 */
int pt_cli_parse(const char *cmd, const char *help, int argc, char **argv, struct pt_cli_args *a);

/* Loads the configuration named on the command line, or the default
 * /etc/payterm/payterm.json when none was given and it exists.  Prints the
 * error and returns non-zero on failure. */
int pt_cli_load_config(const struct pt_cli_common *c, struct pt_config *cfg);
/* The same, quietly: 0, or -1 with the sentence in err (SIGHUP's reload). */
int pt_cli_read_config(const struct pt_cli_common *c, struct pt_config *cfg, char *err,
                       size_t errlen);

/* Prints "payterm <cmd>: <message>" to stderr; under journald each line
 * carries priority 3 (err), so `journalctl -p warning` shows why a unit
 * failed (pt_linux_say). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void pt_cli_error(const char *cmd, const char *fmt, ...);
/* The same at priority 5 (notice): what is said on the way out that is not
 * a failure (init --check-gateways finding no gateway: the unit is
 * skipped). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void pt_cli_notice(const char *cmd, const char *fmt, ...);

struct pt_store;

/* Creates data_dir (mode 0700) when missing; prints the error otherwise. */
int pt_cli_ensure_dir(const char *cmd, const char *dir);

/* Opens (creating and migrating) the configured database: 0.  -1: it
 * cannot, the error printed.  1: a lane with store.fallback "local" whose
 * store server is out of reach (*st NULL, said so): serve starts on its
 * own store and migrates the server when it answers. */
int pt_cli_open_store(const char *cmd, const struct pt_config *cfg, struct pt_store **st);

/*
 * How a command that must not create or migrate a database (SPEC 3) opens
 * it: READ (status, charges) and MAINTAIN (sweep, read-write) need the
 * current schema; COPY (backup) takes any payterm schema as it is.
 */
enum pt_cli_db { PT_CLI_DB_READ, PT_CLI_DB_MAINTAIN, PT_CLI_DB_COPY };

/* Opens the configured database, which must exist; never creates or
 * migrates it.  Prints the error, naming the path, and returns -1 when it is
 * missing, not a payterm database, damaged or (but for COPY) older. */
int pt_cli_open_existing(const char *cmd, const struct pt_config *cfg, enum pt_cli_db mode,
                         struct pt_store **st);
/* pt_cli_load_config() into cfg, then pt_cli_open_existing(): -1 with the
 * error printed when either fails. */
int pt_cli_open_configured(const char *cmd, const struct pt_cli_common *c, struct pt_config *cfg,
                           enum pt_cli_db mode, struct pt_store **st);

/* A list's --limit (1-1000, 50 when not given) and --after (an id >= 0, 0
 * when not given; what it must be said as after_what): -1 with the usage
 * error printed. */
/* A list's --state value v (NULL: any, *state -1): a charge's state, or a
 * refund's (refund); -1 with the usage error printed. */
int pt_cli_state(const char *cmd, const char *v, int refund, int *state);

int pt_cli_paging(const char *cmd, const char *limit_v, const char *after_v, const char *after_what,
                  long *limit, long long *after);

/* Lane time (SPEC 17, core/clock.h) for a command on st's database: the
 * daemon's own time when it runs in this boot, else the newest time
 * recorded (a command measuring ages then finds nothing older than it is);
 * the wall clock on a database without the clock's anchor. */
int64_t pt_cli_now(struct pt_store *st);

/* An answer of the running daemon's API (pt_cli_api). */
struct pt_cli_answer {
    long status; /* HTTP status */
    char *body;  /* malloc'd, NUL-terminated ("" when empty); pt_cli_answer_free */
    size_t len;
    int retry_after_s; /* its Retry-After header, 0 when none */
    int replayed;      /* it carried Idempotency-Replayed: true */
};

/* What pt_cli_api came to. */
enum {
    PT_CLI_API_ANSWER = 0,    /* an HTTP answer, of any status, is in *a */
    PT_CLI_API_NOT_SENT = 1,  /* nobody answers at `listen`: nothing was sent */
    PT_CLI_API_NO_ANSWER = 2, /* sent, but no (whole) answer came back in time */
    PT_CLI_API_ERROR = -1     /* nothing sent: api_token_file unreadable, no memory */
};

/*
 * Calls the running daemon's local API at cfg->listen, with the bearer
 * token of cfg->api_token_file when one is configured: GET path when body
 * is NULL, else POST body (JSON).  key, unless NULL, is sent as the
 * Idempotency-Key.  Every outcome but PT_CLI_API_ANSWER is printed as
 * "payterm <cmd>: ..." naming the address; on PT_CLI_API_ANSWER the caller
 * frees a->body with pt_cli_answer_free (which accepts a zeroed answer).
 */
int pt_cli_api(const char *cmd, const struct pt_config *cfg, const char *path, const char *key,
               const char *body, long timeout_ms, struct pt_cli_answer *a);
void pt_cli_answer_free(struct pt_cli_answer *a);

/* The commands; argv[0] is the command name. */
int pt_cmd_init(int argc, char **argv);
int pt_cmd_version(int argc, char **argv);
int pt_cmd_sweep(int argc, char **argv);
int pt_cmd_backup(int argc, char **argv);
int pt_cmd_serve(int argc, char **argv);
int pt_cmd_status(int argc, char **argv);
int pt_cmd_charges(int argc, char **argv);
int pt_cmd_sync(int argc, char **argv);
/* cmd_refund.c: refund through the daemon (SPEC 5a), refunds from the database */
int pt_cmd_refund(int argc, char **argv);
int pt_cmd_refunds(int argc, char **argv);
int pt_cmd_report(int argc, char **argv);
int pt_cmd_close_day(int argc, char **argv);
int pt_cmd_reconcile(int argc, char **argv);
int pt_cmd_sim(int argc, char **argv);
int pt_cmd_demo(int argc, char **argv);
/* cmd_sign.c: exit 0 valid/signed, 3 invalid (verify), 2 usage, 1 failure */
int pt_cmd_sign(int argc, char **argv);
int pt_cmd_verify(int argc, char **argv);

#endif
