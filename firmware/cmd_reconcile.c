/*
 * cmd_reconcile.c - `payterm reconcile --gateway G --date D [--bill FILE]`
 * (SPEC 19): a gateway's bill of a day against the lane's records.
 *
 * Without --bill the running daemon downloads the bill and runs it (POST
 * /v1/reconciliations, like `payterm refund` through the API).  With
 * --bill the bill is the file the merchant downloaded: the command opens
 * the database itself, like `payterm sweep`, so it needs no network and no
 * running daemon.  Either way the run is stored (GET
 * /v1/reconciliations/{gateway}/{date} serves it) and raises the reviews
 * its discrepancies call for (core/recon_run.c).
 */
#include "cli.h"
#include "host.h"
#include "err.h"
#include "gateway.h"
#include "pt_config.h"
#include "recon_run.h"
#include "store.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char help[] =
    "usage: payterm reconcile --gateway G --date YYYY-MM-DD [--bill FILE] [--key K]\n"
    "                         [-c FILE]...\n\n"
    "Compares a gateway's bill of a day with payterm's own records (SPEC 19), trade\n"
    "by trade and refund by refund, and stores the run: the daemon's GET\n"
    "/v1/reconciliations/G/D serves it.  Each local charge a discrepancy concerns is\n"
    "put under review (reason reconciliation_<kind>, audited once per kind).  The\n"
    "run is printed as one line of JSON, a summary on stderr.\n\n"
    "  --gateway G   a configured gateway (docs/reconcile.md says which have a bill)\n"
    "  --date D      the bill date, in the gateway's bill time zone (China time or\n"
    "                UTC: docs/reconcile.md)\n"
    "  --bill FILE   compare this file instead of downloading: the gateway's own\n"
    "                daily bill, as its merchant platform gives it (docs/reconcile.md\n"
    "                names the gateways whose file payterm reads)\n"
    "  --key K       the Idempotency-Key of the daemon's run (default: a new one,\n"
    "                printed on stderr: each run is a new run)\n\n"
    "A bill that does not hold together is refused whole, naming its line; the\n"
    "run is stored as failed with that reason.\n\n"
    "Exit status: 0 every record matched; 3 the run found discrepancies (listed in\n"
    "the JSON); 1 no comparison (the bill refused, not ready yet - state pending -,\n"
    "the daemon or the database unavailable); 2 usage.\n";

#define CMD "reconcile"
/* Largest bill file read: the parsers' own bound (64 MiB). */
#define BILL_FILE_MAX (64u << 20)

/* The bill file, NUL-terminated (malloc'd), or NULL with the error said. */
static char *read_bill(const char *path, size_t *len)
{
    char why[160];
    char *text = pt_host_read_file(
        path, BILL_FILE_MAX, "larger than any bill payterm reads (64 MiB)", len, why, sizeof why);
    if (!text)
        pt_cli_error(CMD, "--bill %s: %s", path, why);
    return text;
}

/* One line for the operator. */
static void summary(const char *body, size_t found)
{
    cJSON *o = cJSON_Parse(body);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "matched");
    fprintf(stderr, "payterm %s: %lld matched, %zu discrepanc%s\n", CMD,
            cJSON_IsNumber(m) ? (long long)m->valuedouble : 0LL, found, found == 1 ? "y" : "ies");
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(o, "discrepancies"))
    {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(d, "kind");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(d, "order_id");
        const cJSON *no = cJSON_GetObjectItemCaseSensitive(d, "gateway_trade_no");
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(d, "refund_id");
        fprintf(stderr, "  %s order %s%s%s\n", cJSON_IsString(k) ? k->valuestring : "?",
                cJSON_IsString(id)   ? id->valuestring
                : cJSON_IsString(no) ? no->valuestring
                                     : "?",
                cJSON_IsString(r) ? " refund " : "", cJSON_IsString(r) ? r->valuestring : "");
    }
    cJSON_Delete(o);
}

/* Runs the parsed bill; PT_EXIT_*. */
static int run(struct pt_store *st, const char *gateway, const char *date,
               const struct pt_recon_rows *b)
{
    struct pt_recon_bill bill = {.rows = b->rows, .n = b->n, .source = "file"};
    char *body = NULL;
    size_t found = 0;
    int rc = pt_recon_run(st, gateway, date, &bill, "cli", pt_cli_now(st), &body, &found);
    if (rc) {
        pt_cli_error(CMD, "the run could not be stored: %s (%s)", pt_strerror(rc),
                     pt_store_errmsg(st));
        return PT_EXIT_FAIL;
    }
    puts(body);
    summary(body, found);
    free(body);
    return found ? PT_EXIT_INVALID : PT_EXIT_OK;
}

/* Through the daemon: POST /v1/reconciliations.  PT_EXIT_*. */
static int run_on_daemon(const struct pt_config *cfg, const char *gateway, const char *date,
                         const char *key_arg)
{
    char key[96], body[128];
    if (key_arg)
        snprintf(key, sizeof key, "%s", key_arg);
    else
        snprintf(key, sizeof key, "cli-reconcile-%s-%s-%lld-%ld", gateway, date,
                 (long long)time(NULL), (long)getpid()); /* a new key: a new run */
    fprintf(stderr, "payterm %s: Idempotency-Key %s\n", CMD, key);
    snprintf(body, sizeof body, "{\"gateway\":\"%s\",\"date\":\"%s\"}", gateway, date);
    struct pt_cli_answer a;
    if (pt_cli_api(CMD, cfg, "/v1/reconciliations", key, body, 600000, &a) != PT_CLI_API_ANSWER)
        return PT_EXIT_FAIL;
    int rc = PT_EXIT_FAIL;
    cJSON *o = a.status == 201 ? cJSON_Parse(a.body) : NULL;
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(o, "state");
    if (!cJSON_IsString(state)) {
        pt_cli_error(CMD, "the daemon answered HTTP %ld: %s", a.status, a.body);
    } else if (strcmp(state->valuestring, "done") != 0) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "error");
        puts(a.body);
        pt_cli_error(CMD, "%s: %s", state->valuestring, cJSON_IsString(e) ? e->valuestring : "");
    } else {
        size_t found =
            (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(o, "discrepancies"));
        puts(a.body);
        summary(a.body, found);
        rc = found ? PT_EXIT_INVALID : PT_EXIT_OK;
    }
    cJSON_Delete(o);
    pt_cli_answer_free(&a);
    return rc;
}

int pt_cmd_reconcile(int argc, char **argv)
{
    static const char *const names[] = {"--gateway", "--date", "--bill", "--key", NULL};
    struct pt_cli_args args = {.names = names};
    int r = pt_cli_parse(CMD, help, argc, argv, &args);
    if (r)
        return r > 0 ? PT_EXIT_OK : PT_EXIT_USAGE;
    const char *gateway = args.values[0], *date = args.values[1], *file = args.values[2];
    if (!gateway || !date) {
        pt_cli_error(CMD, "needs --gateway and --date (see payterm reconcile --help)");
        return PT_EXIT_USAGE;
    }
    if (!pt_recon_date_ok(date)) {
        pt_cli_error(CMD, "--date %s: not a bill date (YYYY-MM-DD, a real day)", date);
        return PT_EXIT_USAGE;
    }
    static struct pt_config cfg; /* ~34 KiB: off the stack (one command per process) */
    if (!file) {
        if (pt_gateway_bill_offset_min(gateway) < 0) {
            pt_cli_error(CMD, "--gateway %s: not one of %s", gateway, pt_gateway_names());
            return PT_EXIT_USAGE;
        }
        if (pt_cli_load_config(&args.common, &cfg))
            return PT_EXIT_FAIL;
        return run_on_daemon(&cfg, gateway, date, args.values[3]);
    }
    const struct pt_gateway *gw = pt_gateway_find(gateway);
    if (!gw || !gw->parse_bill) {
        pt_cli_error(CMD,
                     "--gateway %s: payterm reads no bill file of it (its books are downloaded "
                     "or asked about: run without --bill; docs/reconcile.md)",
                     gateway);
        return PT_EXIT_USAGE;
    }
    size_t len = 0;
    char *text = read_bill(file, &len);
    if (!text)
        return PT_EXIT_FAIL;
    struct pt_store *st;
    char beyond[4];
    if (pt_cli_load_config(&args.common, &cfg)) {
        free(text);
        return PT_EXIT_FAIL;
    }
    if (!pt_config_bill_covers(&cfg, gateway, beyond)) {
        pt_cli_error(CMD,
                     "--gateway %s: its bill does not cover %s, which gateways.%s.currencies "
                     "allows (cross-border acquiring): not reconciled on the lane",
                     gateway, beyond, gateway);
        free(text);
        return PT_EXIT_FAIL;
    }
    if (pt_cli_open_existing(CMD, &cfg, PT_CLI_DB_MAINTAIN, &st)) {
        free(text);
        return PT_EXIT_FAIL;
    }
    if ((pt_store_caps(st) & PT_STORE_CAP_DATADIR_FILE) &&
        pt_recon_date_archived(gateway, date, pt_cli_now(st), cfg.retention_days)) {
        pt_cli_error(CMD,
                     "--date %s: older than retention_days (%lld) allows, the day before it "
                     "too: its records may have moved to the archive (SPEC 19)",
                     date, (long long)cfg.retention_days);
        free(text);
        pt_store_close(st);
        return PT_EXIT_USAGE;
    }
    struct pt_recon_rows b = {0};
    char err[256];
    int rc = gw->parse_bill(text, len, date, &b, err, sizeof err);
    free(text);
    int exit;
    if (rc == PT_OK && pt_store_recon_lock(st, gateway, date) == PT_EBUSY) {
        pt_cli_error(CMD, "another lane is reconciling %s %s now; run it again later", gateway,
                     date);
        exit = PT_EXIT_FAIL;
    } else if (rc == PT_OK) {
        exit = run(st, gateway, date, &b);
        pt_store_recon_unlock(st, gateway, date);
    } else {
        char why[400], *body = NULL;
        snprintf(why, sizeof why, "%s: %s", file, rc == PT_EPARSE ? err : pt_strerror(rc));
        pt_cli_error(CMD, "the bill is refused: %s", why);
        if (pt_recon_run_unfinished(st, gateway, date, "failed", why, pt_cli_now(st), &body) ==
            PT_OK)
            puts(body);
        free(body);
        exit = PT_EXIT_FAIL;
    }
    free(b.rows);
    pt_store_close(st);
    return exit;
}
