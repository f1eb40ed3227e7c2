/*
 * cmd_query.c - `payterm status`, `payterm charges`, `payterm sync`: what an
 * engineer on the board types to see how the lane is doing.
 *
 * status and charges read the database directly (it is WAL: reading never
 * blocks the daemon), so they work whether or not the daemon runs; sync asks
 * the running daemon over its local API to start a pass.
 */
#include "charges.h"
#include "cli.h"
#include "err.h"
#include "host.h"
#include "linux.h"
#include "pt_config.h"
#include "store.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pt_cmd_status(int argc, char **argv)
{
    static const char help[] =
        "usage: payterm status [-c FILE]...\n\n"
        "Prints the lane's state as JSON: the offline queue (count, oldest age, amount\n"
        "per currency), charges pending, unknown and under review, and the schema\n"
        "version. Reads the database directly; works while the daemon runs. Never\n"
        "creates or migrates it: a missing or older database is an error.\n";
    struct pt_cli_args args = {0};
    int r = pt_cli_parse("status", help, argc, argv, &args);
    if (r)
        return r > 0 ? PT_EXIT_OK : PT_EXIT_USAGE;
    static struct pt_config cfg; /* ~34 KiB: off the stack (one command per process) */
    struct pt_store *st;
    if (pt_cli_open_configured("status", &args.common, &cfg, PT_CLI_DB_READ, &st))
        return PT_EXIT_FAIL;
    struct pt_store_stats s;
    int version = 0;
    int rc = pt_store_stats(st, 1, &s);
    if (!rc)
        rc = pt_store_schema_version(st, &version);
    int64_t now = pt_cli_now(st);
    pt_store_close(st);
    if (rc) {
        pt_cli_error("status", "cannot read the database: %s", pt_strerror(rc));
        return PT_EXIT_FAIL;
    }
    cJSON *o = cJSON_CreateObject();
    pt_queue_json(o, &s, now);
    cJSON *by = cJSON_AddObjectToObject(o, "charges");
    for (int i = 0; i < PT_STATE__COUNT; i++)
        cJSON_AddNumberToObject(by, pt_state_name((enum pt_state)i), (double)s.by_state[i]);
    cJSON_AddNumberToObject(o, "pending", (double)s.by_state[PT_STATE_PENDING]);
    cJSON_AddNumberToObject(o, "unknown", (double)s.by_state[PT_STATE_UNKNOWN]);
    cJSON_AddNumberToObject(o, "review", (double)s.review);
    cJSON_AddNumberToObject(o, "schema_version", version);
    cJSON_AddStringToObject(o, "version", PT_VERSION);
    char *text = cJSON_Print(o);
    puts(text);
    free(text);
    cJSON_Delete(o);
    return PT_EXIT_OK;
}

int pt_cmd_charges(int argc, char **argv)
{
    static const char help[] =
        "usage: payterm charges [-c FILE]... [--state STATE] [--limit N] [--after ID] [--json]\n\n"
        "Lists charges oldest first: id, order, gateway/method, amount, state, review.\n"
        "STATE is INIT, PROCESSING, PENDING, UNKNOWN, SUCCESS, FAILED or CANCELED;\n"
        "N is 1-1000 (default 50); --after continues after charge id ID.\n"
        "--json prints the API's charge objects, one per line.\n";
    static const char *const names[] = {"--state", "--limit", "--after", NULL};
    static const char *const flags[] = {"--json", NULL};
    struct pt_cli_args args = {.names = names, .flags = flags};
    int r = pt_cli_parse("charges", help, argc, argv, &args);
    if (r)
        return r > 0 ? PT_EXIT_OK : PT_EXIT_USAGE;
    const char *const *values = args.values;
    int json = args.flag_set[0];
    int state;
    if (pt_cli_state("charges", values[0], 0, &state))
        return PT_EXIT_USAGE;
    long limit;
    long long after;
    if (pt_cli_paging("charges", values[1], values[2], "a charge id", &limit, &after))
        return PT_EXIT_USAGE;
    static struct pt_config cfg; /* ~34 KiB: off the stack (one command per process) */
    struct pt_store *st;
    if (pt_cli_open_configured("charges", &args.common, &cfg, PT_CLI_DB_READ, &st))
        return PT_EXIT_FAIL;
    struct pt_charge *rows = malloc(sizeof *rows * (size_t)limit);
    int got = 0, more = 0;
    int rc =
        rows ? pt_store_charges_list(st, state, after, (int)limit, rows, &got, &more) : PT_ENOMEM;
    pt_store_close(st);
    if (rc) {
        free(rows);
        pt_cli_error("charges", "cannot read the database: %s", pt_strerror(rc));
        return PT_EXIT_FAIL;
    }
    if (!json)
        printf("%-6s %-24s %-20s %12s %-3s %-10s %s\n", "id", "order_id", "gateway/method",
               "amount", "cur", "state", "review");
    for (int i = 0; i < got; i++) {
        const struct pt_charge *ch = &rows[i];
        if (json) {
            char *t = pt_charge_json_text(ch);
            puts(t ? t : "{}");
            free(t);
            continue;
        }
        char gm[32];
        snprintf(gm, sizeof gm, "%s/%s", ch->gateway, ch->method);
        printf("%-6lld %-24s %-20s %12lld %-3s %-10s %s\n", (long long)ch->id, ch->order_id, gm,
               (long long)ch->amount, ch->currency, pt_state_name(ch->state),
               ch->review ? ch->review_reason : "");
    }
    if (more && !json)
        printf("(more: payterm charges --after %lld)\n", (long long)rows[got - 1].id);
    free(rows);
    return PT_EXIT_OK;
}

int pt_cmd_sync(int argc, char **argv)
{
    static const char help[] =
        "usage: payterm sync [-c FILE]...\n\n"
        "Asks the running daemon (POST /v1/sync on its listen address) to start a\n"
        "sync pass now: send queued charges, resolve unknown ones.\n";
    struct pt_cli_args args = {0};
    int r = pt_cli_parse("sync", help, argc, argv, &args);
    if (r)
        return r > 0 ? PT_EXIT_OK : PT_EXIT_USAGE;
    static struct pt_config cfg; /* ~34 KiB: off the stack (one command per process) */
    if (pt_cli_load_config(&args.common, &cfg))
        return PT_EXIT_FAIL;
    struct pt_cli_answer a;
    if (pt_cli_api("sync", &cfg, "/v1/sync", NULL, "", 5000, &a) != PT_CLI_API_ANSWER)
        return PT_EXIT_FAIL;
    long code = a.status;
    pt_cli_answer_free(&a);
    if (code != 202) {
        pt_cli_error("sync", "the daemon answered HTTP %ld", code);
        return PT_EXIT_FAIL;
    }
    puts("sync pass started");
    return PT_EXIT_OK;
}
