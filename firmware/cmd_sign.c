/*
 * cmd_sign.c - `payterm sign` and `payterm verify` (SPEC 8): the gateways'
 * signature schemes as a command-line tool for integrators.
 *
 * Both commands are thin: they read the message from standard input, hand
 * it with the options to the gateway's table (cli_sign / cli_verify, in
 * core/gateways/<name>_cli.c, built on the same wire helpers the adapters
 * use), and print the one JSON object it builds.  verify exits 0 when the
 * message is authentic, 3 when a signature, MAC or decryption fails (or a
 * WeChat Wechatpay-Serial names another key), 2 on usage errors; every
 * usage error names the argument or file that was wrong.
 */
#include "cli.h"
#include "err.h"
#include "host.h"
#include "gateway.h"
#include "gateways/gwcli.h"
#include "linux.h"
#include "platform.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The exit statuses the gateways' commands return are the program's. */
_Static_assert((int)PT_GW_CLI_OK == (int)PT_EXIT_OK && (int)PT_GW_CLI_FAIL == (int)PT_EXIT_FAIL &&
                   (int)PT_GW_CLI_USAGE == (int)PT_EXIT_USAGE &&
                   (int)PT_GW_CLI_INVALID == (int)PT_EXIT_INVALID,
               "gwcli.h and cli.h exit statuses");

/* --help, from the signature schemes (gwcli.h): each one's usage lines. */
static void help(const char *cmd)
{
    int sign = strcmp(cmd, "sign") == 0;
    struct pt_gw_cli_scheme s;
    for (int i = 0; pt_gw_cli_scheme_at(i, &s) == PT_OK; i++) {
        const char *u = sign ? s.sign_usage : s.verify_usage;
        if (u)
            printf("%s payterm %s %s\n", i ? "      " : "usage:", cmd, u);
    }
    if (sign) {
        printf("\nPrints the string to sign and the signature as the vendors' SDKs compute "
               "them:\n");
        for (int i = 0; pt_gw_cli_scheme_at(i, &s) == PT_OK; i++)
            if (s.sign_prints)
                printf("  %-9s %s\n", s.name, s.sign_prints);
        printf("Bodies are used byte for byte: write them with printf or a file, not echo.\n");
    } else {
        printf("\n--header may be repeated; names are case-insensitive.\n"
               "Prints {\"valid\":true|false,...} with the verified fields or plaintext.\n");
    }
    printf("-c/--config FILE is accepted and ignored: keys and secrets come from the options.\n");
    printf(sign ? "Exit status: 0 signed, 1 failure, 2 usage error.\n"
                : "Exit status: 0 valid, 3 invalid (signature, MAC, decryption, or a\n"
                  "notification signed by another key than the one given), 2 usage error,\n"
                  "1 other failure.\n");
}

/* ---- arguments ---------------------------------------------------------- */

static int take(struct pt_gw_cli *a, int argc, char **argv, int *i, const char *name,
                const char **dst)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) == 0 && argv[*i][n] == '=') {
        *dst = argv[*i] + n + 1;
        return 1;
    }
    if (strcmp(argv[*i], name) != 0)
        return 0;
    if (*i + 1 >= argc) {
        pt_cli_error(a->cmd, "%s needs a value", name);
        return -1;
    }
    *dst = argv[++*i];
    return 1;
}

/* One option of argv[*i]: 1 taken, 0 not an option we know, -1 error. */
static int take_option(struct pt_gw_cli *a, int argc, char **argv, int *i)
{
    const struct {
        const char *name;
        const char **dst;
    } opts[] = {
        {"--gateway", &a->gateway},
        {"--key", &a->key},
        {"--key-file", &a->key_file},
        {"--pubkey", &a->pubkey},
        {"--peer-key", &a->peer_key},
        {"--mchid", &a->mchid},
        {"--serial", &a->serial},
        {"--method", &a->method},
        {"--url", &a->url},
        {"--timestamp", &a->timestamp},
        {"--nonce", &a->nonce},
        {"--secret", &a->secret},
        {"--secret-file", &a->secret_file},
        {"--apiv3-key", &a->apiv3},
        {"--apiv3-key-file", &a->apiv3_file},
        {"--now", &a->now},
        {"--tolerance", &a->tolerance},
    };
    const char *h = NULL;
    int r = take(a, argc, argv, i, "--header", &h);
    if (r > 0) {
        if (a->nheaders >= PT_GW_CLI_MAX_HEADERS || !strchr(h, ':')) {
            pt_cli_error(a->cmd, "--header '%s': expected 'Name: value' (at most %d)", h,
                         PT_GW_CLI_MAX_HEADERS);
            return -1;
        }
        a->headers[a->nheaders++] = h;
    }
    for (size_t k = 0; r == 0 && k < sizeof opts / sizeof opts[0]; k++)
        r = take(a, argc, argv, i, opts[k].name, opts[k].dst);
    return r;
}

static int parse_args(struct pt_gw_cli *a, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            help(a->cmd);
            return 1;
        }
        /* SPEC 11: -c everywhere; this command needs no configuration. */
        struct pt_cli_common ignored = {0};
        int r = pt_cli_take_config(&ignored, argc, argv, &i);
        if (r == 0)
            r = take_option(a, argc, argv, &i);
        if (r < 0)
            return -1;
        if (r == 0) {
            pt_cli_error(a->cmd, "unexpected argument '%s' (see payterm %s --help)", argv[i],
                         a->cmd);
            return -1;
        }
    }
    struct pt_gw_cli_scheme s;
    if (!a->gateway || pt_gw_cli_scheme_find(a->gateway, &s) != PT_OK) {
        pt_cli_error(a->cmd, "--gateway %s: expected %s", a->gateway ? a->gateway : "(missing)",
                     pt_gw_cli_scheme_names());
        return -1;
    }
    return 0;
}

/* ---- input and output -------------------------------------------------------- */

/* Reads all of stdin (at most PT_HTTP_MAX_BODY bytes) into a new string. */
static char *read_stdin(const char *cmd, size_t *len)
{
    char *buf = malloc(PT_HTTP_MAX_BODY + 1);
    if (!buf)
        return NULL;
    size_t n = fread(buf, 1, PT_HTTP_MAX_BODY + 1, stdin);
    if (n > PT_HTTP_MAX_BODY) {
        pt_cli_error(cmd, "standard input is larger than %d bytes", PT_HTTP_MAX_BODY);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static int print_json(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!s)
        return PT_EXIT_FAIL;
    puts(s);
    free(s);
    return PT_EXIT_OK;
}

/* ---- commands ---------------------------------------------------------------- */

static int run(const char *cmd, int argc, char **argv)
{
    struct pt_gw_cli a = {.cmd = cmd, .now_s = pt_host_now_ms() / 1000};
    int r = parse_args(&a, argc, argv);
    if (r)
        return r > 0 ? PT_EXIT_OK : PT_EXIT_USAGE;
    struct pt_gw_cli_scheme scheme;
    pt_gw_cli_scheme_find(a.gateway, &scheme); /* parse_args checked it is there */
    int sign = strcmp(cmd, "sign") == 0;
    int (*fn)(struct pt_gw_cli *, char *, size_t, cJSON **) = sign ? scheme.sign : scheme.verify;
    if (!fn) {
        pt_cli_error(cmd, "--gateway %s: has no %s command", a.gateway, cmd);
        return PT_EXIT_USAGE;
    }
    size_t len = 0;
    char *in = read_stdin(cmd, &len);
    if (!in)
        return PT_EXIT_USAGE;
    cJSON *out = NULL;
    int rc = fn(&a, in, len, &out);
    free(in);
    if (rc == PT_EXIT_USAGE && a.err[0])
        pt_cli_error(cmd, "%s", a.err);
    if (out) {
        int prc = print_json(out);
        rc = rc == PT_EXIT_OK ? prc : rc;
    }
    return rc;
}

int pt_cmd_sign(int argc, char **argv)
{
    return run("sign", argc, argv);
}

int pt_cmd_verify(int argc, char **argv)
{
    return run("verify", argc, argv);
}
