/*
 * cmd_report.c - `payterm report x`, `payterm report z [N]` and `payterm
 * close-day` (SPEC 19): the day's X and Z reports, through the running
 * daemon's API like `payterm refund` (the daemon owns the close's
 * transaction).  The report goes to stdout as the daemon served it - for a
 * Z report the stored bytes, whose hash anyone can check - and one line
 * for the operator to stderr.
 */
#include "cli.h"
#include "err.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char report_help[] =
    "usage: payterm report x | z [N] [-c FILE]...\n\n"
    "Prints a report of the running daemon (SPEC 19) as one line of JSON:\n"
    "  x      the X report: the day so far (final charges and refunds in no Z\n"
    "         report yet, by gateway, method and currency); closes nothing\n"
    "  z [N]  Z report N, byte for byte as it was closed (default: the last)\n\n"
    "Exit status: 0 printed; 1 no such report, or the daemon does not answer;\n"
    "2 usage error.\n";

static const char close_help[] =
    "usage: payterm close-day [--key K] [-c FILE]...\n\n"
    "Closes the day on the running daemon (POST /v1/reports/z): every final\n"
    "charge and refund not yet in a Z report goes into the next one, which is\n"
    "printed as one line of JSON.\n\n"
    "  --key K   the Idempotency-Key; default cli-close-z<N>, N the number this\n"
    "            close gives its report (the X report's z), so running the command\n"
    "            again while the close is still unanswered, or after it failed,\n"
    "            answers with that close; once Z N exists, running it again closes\n"
    "            Z N+1 (what became final since).  payterm report z shows the last.\n\n"
    "Exit status: 0 closed (or the same key's close printed again); 1 not\n"
    "closed, the error on stderr; 2 usage error.\n";

/* One line for the operator: the report's number and its charges. */
static void summary(const char *cmd, const char *what, const char *json, int replayed)
{
    cJSON *o = cJSON_Parse(json);
    long long charges = 0, refunds = 0;
    const cJSON *gw, *m, *cur;
    cJSON_ArrayForEach(gw, cJSON_GetObjectItemCaseSensitive(o, "totals"))
    {
        cJSON_ArrayForEach(m, gw)
        {
            cJSON_ArrayForEach(cur, m)
            {
                const cJSON *c = cJSON_GetObjectItemCaseSensitive(cur, "charges");
                const cJSON *r = cJSON_GetObjectItemCaseSensitive(cur, "refunds");
                charges += cJSON_IsNumber(c) ? (long long)c->valuedouble : 0;
                refunds += cJSON_IsNumber(r) ? (long long)r->valuedouble : 0;
            }
        }
    }
    const cJSON *z = cJSON_GetObjectItemCaseSensitive(o, "z");
    fprintf(stderr, "payterm %s: %s %lld: %lld charges, %lld refunds%s\n", cmd, what,
            cJSON_IsNumber(z) ? (long long)z->valuedouble : 0LL, charges, refunds,
            replayed ? " (closed before, by the first run with this key)" : "");
    cJSON_Delete(o);
}

/* GET path; the body printed on 200.  PT_EXIT_*. */
static int print_get(const char *cmd, const struct pt_config *cfg, const char *path,
                     const char *what)
{
    struct pt_cli_answer a;
    if (pt_cli_api(cmd, cfg, path, NULL, NULL, 30000, &a) != PT_CLI_API_ANSWER)
        return PT_EXIT_FAIL;
    int rc = PT_EXIT_OK;
    if (a.status == 200) {
        puts(a.body);
        summary(cmd, what, a.body, 0);
    } else {
        pt_cli_error(cmd, "the daemon answered HTTP %ld: %s", a.status, a.body);
        rc = PT_EXIT_FAIL;
    }
    pt_cli_answer_free(&a);
    return rc;
}

/* The number of the last Z report (0: none yet), from the X report's z. */
static int last_z(const char *cmd, const struct pt_config *cfg, long long *z)
{
    struct pt_cli_answer a;
    if (pt_cli_api(cmd, cfg, "/v1/reports/x", NULL, NULL, 30000, &a) != PT_CLI_API_ANSWER)
        return PT_EXIT_FAIL;
    cJSON *o = a.status == 200 ? cJSON_Parse(a.body) : NULL;
    const cJSON *next = cJSON_GetObjectItemCaseSensitive(o, "z");
    int rc = PT_EXIT_OK;
    if (cJSON_IsNumber(next) && next->valuedouble >= 1) {
        *z = (long long)next->valuedouble - 1;
    } else {
        pt_cli_error(cmd, "the daemon answered HTTP %ld: %s", a.status, a.body);
        rc = PT_EXIT_FAIL;
    }
    cJSON_Delete(o);
    pt_cli_answer_free(&a);
    return rc;
}

static int number_ok(const char *s)
{
    if (!s[0] || s[0] == '0' || strlen(s) > 15)
        return 0;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return 1;
}

int pt_cmd_report(int argc, char **argv)
{
    struct pt_cli_args args = {.maxpos = 2};
    int r = pt_cli_parse("report", report_help, argc, argv, &args);
    if (r)
        return r > 0 ? PT_EXIT_OK : PT_EXIT_USAGE;
    const char *kind = args.npos ? args.pos[0] : "";
    int is_x = strcmp(kind, "x") == 0, is_z = strcmp(kind, "z") == 0;
    if (!is_x && !is_z) {
        pt_cli_error("report", "x or z: which report (see payterm report --help)");
        return PT_EXIT_USAGE;
    }
    if (is_x && args.npos > 1) {
        pt_cli_error("report", "x takes no number: it is the day so far");
        return PT_EXIT_USAGE;
    }
    if (args.npos > 1 && !number_ok(args.pos[1])) {
        pt_cli_error("report", "N: '%s' is not a report number (1, 2, ...)", args.pos[1]);
        return PT_EXIT_USAGE;
    }
    static struct pt_config cfg; /* off the stack (one command per process) */
    if (pt_cli_load_config(&args.common, &cfg))
        return PT_EXIT_FAIL;
    if (is_x)
        return print_get("report", &cfg, "/v1/reports/x", "X report, next Z");
    long long z = 0;
    if (args.npos > 1) {
        z = strtoll(args.pos[1], NULL, 10);
    } else if (last_z("report", &cfg, &z) != PT_EXIT_OK) {
        return PT_EXIT_FAIL;
    } else if (z == 0) {
        pt_cli_error("report", "no Z report yet: the day was never closed (payterm close-day)");
        return PT_EXIT_FAIL;
    }
    char path[64];
    snprintf(path, sizeof path, "/v1/reports/z/%lld", z);
    return print_get("report", &cfg, path, "Z report");
}

int pt_cmd_close_day(int argc, char **argv)
{
    static const char *const names[] = {"--key", NULL};
    struct pt_cli_args args = {.names = names};
    int r = pt_cli_parse("close-day", close_help, argc, argv, &args);
    if (r)
        return r > 0 ? PT_EXIT_OK : PT_EXIT_USAGE;
    static struct pt_config cfg;
    if (pt_cli_load_config(&args.common, &cfg))
        return PT_EXIT_FAIL;
    char key[64];
    const char *k = args.values[0];
    if (!k) {
        /* Not the date: a day closed after midnight and again before the
         * next one would be answered with the first close, and stay open. */
        long long last = 0;
        if (last_z("close-day", &cfg, &last) != PT_EXIT_OK)
            return PT_EXIT_FAIL;
        snprintf(key, sizeof key, "cli-close-z%lld", last + 1);
        k = key;
    }
    struct pt_cli_answer a;
    if (pt_cli_api("close-day", &cfg, "/v1/reports/z", k, "", 60000, &a) != PT_CLI_API_ANSWER)
        return PT_EXIT_FAIL;
    int rc = PT_EXIT_OK;
    if (a.status == 201) {
        puts(a.body);
        summary("close-day", "day closed: Z report", a.body, a.replayed);
        if (!args.values[0])
            fprintf(stderr, "payterm close-day: Idempotency-Key %s\n", k);
    } else {
        cJSON *o = cJSON_Parse(a.body);
        const cJSON *err = cJSON_GetObjectItemCaseSensitive(o, "error");
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(err, "message");
        pt_cli_error("close-day", "not closed: HTTP %ld: %s (Idempotency-Key %s)", a.status,
                     cJSON_IsString(msg) ? msg->valuestring : a.body, k);
        cJSON_Delete(o);
        rc = PT_EXIT_FAIL;
    }
    pt_cli_answer_free(&a);
    return rc;
}
