/*
 * cmd_refund.c - `payterm refund` and `payterm refunds` (SPEC 5a): money of
 * a paid charge returned, from the lane's command line.
 *
 * refund goes through the running daemon's API, like `payterm sync`: the
 * daemon owns the refund transaction (its checks, its queue, the gateway
 * call), so the command only asks.  Its Idempotency-Key is derived from the
 * refund id alone, so running the same command again after a lost answer
 * (a timeout, a dropped ssh session) replays the first answer, and shows
 * where the refund is now, instead of refunding twice; and the refund id is
 * the gateway's refund key, so even a key that has expired cannot make a
 * second refund.
 *
 * refunds reads the database directly (read-only, WAL), like `payterm
 * charges`, so it works whether or not the daemon runs.
 */
#include "charge.h"
#include "cli.h"
#include "err.h"
#include "intake.h"
#include "refund.h"
#include "refunds.h"
#include "store.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- payterm refund ---------------------------------------------------------------- */

static const char refund_help[] =
    "usage: payterm refund ORDER_ID --refund-id R [--amount N] [--reason TEXT] [-c FILE]...\n\n"
    "Refunds the paid charge ORDER_ID through the running daemon (POST\n"
    "/v1/charges/ORDER_ID/refunds on its listen address) and prints the daemon's\n"
    "answer as one line of JSON: the refund, or the error.\n\n"
    "  --refund-id R   required: 1-64 of A-Z a-z 0-9 _ . -, unique forever; it is the\n"
    "                  gateway's refund key\n"
    "  --amount N      minor units (500 = 5.00), default everything not yet refunded\n"
    "  --reason TEXT   1-256 bytes, kept with the refund\n\n"
    "The Idempotency-Key is cli-refund-R: running the same command again (after a\n"
    "timeout, say) answers with the same refund, as it is now, and never refunds\n"
    "twice.  A queued refund (the gateway unreachable) is sent by the daemon when\n"
    "the gateway returns; payterm refunds shows where it is.\n\n"
    "Exit status: 0 the daemon holds the refund and it has not failed (SUCCESS; or\n"
    "INIT, PROCESSING, PENDING, UNKNOWN: the daemon finishes it); 1 it does not\n"
    "(declined by the gateway, not_found, charge_not_refundable,\n"
    "refund_exceeds_charge, refund_id_conflict, ...; the error is on stderr and its\n"
    "JSON on stdout) or the daemon does not answer; 2 usage error.\n";

/* Amounts are written into the JSON body as they are typed, so only plain
 * digits pass: no sign, no leading zero, no decimal point or exponent (which
 * the API would refuse, or worse, read as another amount). */
static int amount_ok(const char *s)
{
    if (!s[0] || s[0] == '0' || strlen(s) > 15) /* 15 digits: exact in a JSON double */
        return 0;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return 1;
}

static int reason_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 256)
        return 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return 0;
    return 1;
}

/* The request body; malloc'd. */
static char *refund_body(const char *refund_id, const char *amount, const char *reason)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "refund_id", refund_id);
    if (amount)
        cJSON_AddRawToObject(o, "amount", amount); /* plain digits: amount_ok */
    if (reason)
        cJSON_AddStringToObject(o, "reason", reason);
    char *t = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return t;
}

static const char *jstr(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/*
 * One line on stderr saying what the answer means for the operator; returns
 * the exit status: 0 when the daemon holds the refund and it has not failed
 * (SUCCESS, or INIT, PROCESSING, PENDING, UNKNOWN: the daemon finishes it).
 */
static int explain(const char *refund_id, const char *order_id, const struct pt_cli_answer *a,
                   int refreshed)
{
    cJSON *o = cJSON_Parse(a->body);
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(o, "error");
    const char *state = jstr(o, "state"), *code = jstr(err, "code"), *msg = jstr(err, "message");
    const char *again = refreshed          ? " (this command ran before; this is the refund now)"
                        : a->replayed      ? " (the answer to the first run of this command)"
                        : a->status == 200 ? " (it existed already)"
                                           : "";
    int taken = a->status == 200 || a->status == 201 || a->status == 202;
    int rc = taken && strcmp(state, "FAILED") != 0 ? PT_EXIT_OK : PT_EXIT_FAIL;
    if (strcmp(state, "FAILED") == 0)
        pt_cli_error("refund", "refund %s was declined by the gateway: %s: %s%s", refund_id, code,
                     msg, again);
    else if (taken && strcmp(state, "SUCCESS") == 0)
        fprintf(stderr, "payterm refund: refund %s of %s: SUCCESS%s\n", refund_id, order_id, again);
    else if (taken && strcmp(state, "INIT") == 0)
        fprintf(stderr,
                "payterm refund: refund %s is queued (INIT): the gateway cannot be reached; the "
                "daemon sends it when it can%s\n",
                refund_id, again);
    else if (taken && strcmp(state, "PENDING") == 0)
        fprintf(stderr,
                "payterm refund: refund %s is PENDING: the gateway processes it "
                "asynchronously%s\n",
                refund_id, again);
    else if (taken)
        fprintf(stderr,
                "payterm refund: refund %s is %s: the gateway's answer is not known yet; the "
                "daemon asks the gateway (and never refunds again)%s\n",
                refund_id, state, again);
    else if (a->status == 409 && strcmp(code, "idempotency_key_in_use") == 0)
        pt_cli_error("refund",
                     "409 %s: the first run of this command for refund %s is still being "
                     "processed; run it again in %d s for its answer",
                     code, refund_id, a->retry_after_s > 0 ? a->retry_after_s : 1);
    else if (a->status == 422 && strcmp(code, "idempotency_key_reused") == 0)
        pt_cli_error("refund",
                     "422 %s: refund %s was asked for before with another order, --amount or "
                     "--reason; a new refund needs a new --refund-id",
                     code, refund_id);
    else if (a->status == 503 && a->retry_after_s > 0)
        pt_cli_error("refund", "503 %s: %s (nothing was stored; try again in %d s)", code, msg,
                     a->retry_after_s);
    else if (code[0])
        pt_cli_error("refund", "%ld %s: %s", a->status, code, msg);
    else
        pt_cli_error("refund", "the daemon answered HTTP %ld", a->status);
    cJSON_Delete(o);
    return rc;
}

/*
 * A replayed 202 is the answer the first run got (queued, pending or
 * unknown then); the operator running the command again wants to know where
 * the refund is now, so the refund is read again (GET /v1/refunds/R) and
 * that replaces the answer.  When that read fails, the replay stands.
 */
static int refresh(const struct pt_config *cfg, const char *refund_id, struct pt_cli_answer *a)
{
    char path[96];
    snprintf(path, sizeof path, "/v1/refunds/%s", refund_id);
    struct pt_cli_answer now;
    if (pt_cli_api("refund", cfg, path, NULL, NULL, 10000, &now) != PT_CLI_API_ANSWER)
        return 0;
    if (now.status != 200) {
        pt_cli_answer_free(&now);
        return 0;
    }
    pt_cli_answer_free(a);
    *a = now;
    return 1;
}

int pt_cmd_refund(int argc, char **argv)
{
    static const char *const names[] = {"--refund-id", "--amount", "--reason", NULL};
    struct pt_cli_args args = {.names = names, .maxpos = 1};
    int r = pt_cli_parse("refund", refund_help, argc, argv, &args);
    if (r)
        return r > 0 ? PT_EXIT_OK : PT_EXIT_USAGE;
    const char *order_id = args.npos ? args.pos[0] : NULL;
    const char *refund_id = args.values[0], *amount = args.values[1], *reason = args.values[2];
    if (!order_id) {
        pt_cli_error("refund", "ORDER_ID: required (see payterm refund --help)");
        return PT_EXIT_USAGE;
    }
    if (!pt_order_id_valid(order_id)) {
        pt_cli_error("refund", "ORDER_ID: '%s' is not an order id (1-64 of A-Z a-z 0-9 _ . -)",
                     order_id);
        return PT_EXIT_USAGE;
    }
    if (!refund_id) {
        pt_cli_error("refund", "--refund-id: required (1-64 of A-Z a-z 0-9 _ . -, unique)");
        return PT_EXIT_USAGE;
    }
    if (!pt_order_id_valid(refund_id)) {
        pt_cli_error("refund", "--refund-id: '%s' is not a refund id (1-64 of A-Z a-z 0-9 _ . -)",
                     refund_id);
        return PT_EXIT_USAGE;
    }
    if (amount && !amount_ok(amount)) {
        pt_cli_error("refund",
                     "--amount: '%s' is not an amount: a whole number of minor units of at "
                     "least 1 (500 = 5.00), digits only",
                     amount);
        return PT_EXIT_USAGE;
    }
    if (reason && !reason_ok(reason)) {
        pt_cli_error("refund", "--reason: must be 1-256 bytes of text without control characters");
        return PT_EXIT_USAGE;
    }
    static struct pt_config cfg; /* ~34 KiB: off the stack (one command per process) */
    if (pt_cli_load_config(&args.common, &cfg))
        return PT_EXIT_FAIL;
    char *body = refund_body(refund_id, amount, reason);
    if (!body) {
        pt_cli_error("refund", "out of memory");
        return PT_EXIT_FAIL;
    }
    char path[160], key[96];
    snprintf(path, sizeof path, "/v1/charges/%s/refunds", order_id);
    snprintf(key, sizeof key, "cli-refund-%s", refund_id);
    /* The daemon may call the gateway (and probe it first) before it
     * answers: room for both, and then some. */
    long timeout_ms = (long)(2 * cfg.sync_request_timeout_ms) + 10000;
    struct pt_cli_answer a;
    int rc = pt_cli_api("refund", &cfg, path, key, body, timeout_ms, &a);
    free(body);
    if (rc == PT_CLI_API_NO_ANSWER)
        fprintf(stderr,
                "payterm refund: refund %s may or may not have been taken: run the same "
                "command again for its answer (it cannot refund twice)\n",
                refund_id);
    else if (rc == PT_CLI_API_NOT_SENT)
        fprintf(stderr, "payterm refund: nothing was sent; refund %s was not made\n", refund_id);
    if (rc != PT_CLI_API_ANSWER)
        return PT_EXIT_FAIL;
    int refreshed = a.replayed && a.status == 202 && refresh(&cfg, refund_id, &a);
    /* stdout gets the daemon's JSON exactly, one line, for scripts and jq. */
    fputs(a.body, stdout);
    if (a.len && a.body[a.len - 1] != '\n')
        fputc('\n', stdout);
    fflush(stdout);
    rc = explain(refund_id, order_id, &a, refreshed);
    pt_cli_answer_free(&a);
    return rc;
}

/* ---- payterm refunds --------------------------------------------------------------- */

static const char refunds_help[] =
    "usage: payterm refunds [-c FILE]... [--state STATE] [--order ORDER_ID] [--limit N]\n"
    "                       [--after ID] [--json]\n\n"
    "Lists refunds oldest first: id, refund id, order, gateway, amount, state and a\n"
    "note (the review reason, or the error of a FAILED refund).\n"
    "STATE is INIT, PROCESSING, PENDING, UNKNOWN, SUCCESS or FAILED; --order lists\n"
    "the refunds of one charge; N is 1-1000 (default 50); --after continues after\n"
    "refund id ID (the first column).  --json prints the API's refund objects, one\n"
    "per line.  Reads the database directly; works while the daemon runs.\n";

static void print_refund(const struct pt_refund *rf, int json)
{
    if (json) {
        char *t = pt_refund_json_text(rf);
        puts(t ? t : "{}");
        free(t);
        return;
    }
    const char *note = rf->review                     ? rf->review_reason
                       : rf->state == PT_STATE_FAILED ? rf->error_code
                                                      : "";
    printf("%-6lld %-24s %-24s %-7s %12lld %-3s %-10s %s\n", (long long)rf->id, rf->refund_id,
           rf->order_id, rf->gateway, (long long)rf->amount, rf->currency, pt_state_name(rf->state),
           note);
}

/* Prints up to limit refunds after `after` (of charge_id when > 0, in state
 * when >= 0); *last = the id to continue after when there may be more, else
 * 0. */
static int list(struct pt_store *st, int64_t charge_id, int state, int64_t after, int limit,
                int json, int64_t *last)
{
    struct pt_refund *rows = malloc(sizeof *rows * (size_t)limit);
    if (!rows)
        return PT_ENOMEM;
    int shown = 0, more = 1, rc = PT_OK;
    *last = 0;
    /* The store filters by state over all refunds or lists one charge's; for
     * both at once, a charge's refunds are read page by page and filtered. */
    int store_state = charge_id > 0 ? -1 : state;
    while (more && shown < limit && rc == PT_OK) {
        int got = 0;
        rc = pt_store_refunds_list(st, charge_id, store_state, after, limit, rows, &got, &more);
        for (int i = 0; rc == PT_OK && i < got; i++) {
            after = rows[i].id;
            if (state >= 0 && rows[i].state != (enum pt_state)state)
                continue;
            print_refund(&rows[i], json);
            if (++shown == limit) {
                more = more || i + 1 < got;
                break;
            }
        }
    }
    if (rc == PT_OK && more)
        *last = after;
    free(rows);
    return rc;
}

int pt_cmd_refunds(int argc, char **argv)
{
    static const char *const names[] = {"--state", "--order", "--limit", "--after", NULL};
    static const char *const flags[] = {"--json", NULL};
    struct pt_cli_args args = {.names = names, .flags = flags};
    int r = pt_cli_parse("refunds", refunds_help, argc, argv, &args);
    if (r)
        return r > 0 ? PT_EXIT_OK : PT_EXIT_USAGE;
    const char *const *values = args.values;
    int json = args.flag_set[0];
    int state;
    if (pt_cli_state("refunds", values[0], 1, &state))
        return PT_EXIT_USAGE;
    const char *order_id = values[1];
    if (order_id && !pt_order_id_valid(order_id)) {
        pt_cli_error("refunds", "--order: '%s' is not an order id (1-64 of A-Z a-z 0-9 _ . -)",
                     order_id);
        return PT_EXIT_USAGE;
    }
    long limit;
    long long after;
    if (pt_cli_paging("refunds", values[2], values[3], "a refund's id, the first column", &limit,
                      &after))
        return PT_EXIT_USAGE;
    static struct pt_config cfg; /* ~34 KiB: off the stack (one command per process) */
    struct pt_store *st;
    if (pt_cli_open_configured("refunds", &args.common, &cfg, PT_CLI_DB_READ, &st))
        return PT_EXIT_FAIL;
    int64_t charge_id = 0, last = 0;
    int rc = PT_OK;
    if (order_id) {
        struct pt_charge c;
        rc = pt_store_charge_get(st, order_id, &c);
        charge_id = rc == PT_OK ? c.id : 0;
    }
    if (rc == PT_ENOTFOUND) {
        pt_store_close(st);
        pt_cli_error("refunds", "--order: no charge with order_id '%s'", order_id);
        return PT_EXIT_FAIL;
    }
    if (rc == PT_OK && !json)
        printf("%-6s %-24s %-24s %-7s %12s %-3s %-10s %s\n", "id", "refund_id", "order_id",
               "gateway", "amount", "cur", "state", "note");
    if (rc == PT_OK)
        rc = list(st, charge_id, state, (int64_t)after, (int)limit, json, &last);
    pt_store_close(st);
    if (rc) {
        pt_cli_error("refunds", "cannot read the database: %s", pt_strerror(rc));
        return PT_EXIT_FAIL;
    }
    if (last && !json)
        printf("(more: payterm refunds%s%s%s%s --after %lld)\n", state >= 0 ? " --state " : "",
               state >= 0 ? values[0] : "", order_id ? " --order " : "", order_id ? order_id : "",
               (long long)last);
    return PT_EXIT_OK;
}
