/*
 * gwcli.h - `payterm sign` / `payterm verify` for integrators (SPEC section 8):
 * each gateway's signature scheme as a command, byte for byte as the
 * vendors' SDKs compute it.
 *
 * firmware/cmd_sign.c parses the options into struct pt_gw_cli, reads the
 * message from standard input and hands both to the gateway's table
 * (cli_sign / cli_verify), which builds the one JSON object to print.  The
 * gateway code lives beside its adapter (core/gateways/<name>_cli.c) and
 * uses the same wire helpers the adapter does; the helpers below are what
 * the four share.
 */
#ifndef PT_GWCLI_H
#define PT_GWCLI_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "crypto.h"
#include "gateway.h"
#include "platform.h"

#define PT_GW_CLI_MAX_HEADERS 8
#define PT_GW_CLI_SECRET_MAX 256

/* Exit statuses of the commands (SPEC section 11). */
enum { PT_GW_CLI_OK = 0, PT_GW_CLI_FAIL = 1, PT_GW_CLI_USAGE = 2, PT_GW_CLI_INVALID = 3 };

struct pt_gw_cli {
    const char *cmd; /* "sign" or "verify" */
    const char *gateway, *key, *pubkey, *mchid, *serial, *method, *url, *timestamp, *nonce;
    const char *secret, *secret_file, *apiv3, *apiv3_file, *now, *tolerance;
    const char *key_file; /* --key-file (wechat-v2: the APIv2 key) */
    const char *peer_key; /* --peer-key (2c2p-pm: the other side's public key) */
    const char *headers[PT_GW_CLI_MAX_HEADERS]; /* "Name: value" */
    int nheaders;
    int64_t now_s; /* the wall clock, for a signature timestamp or a tolerance */
    char err[600]; /* a usage error, naming the option or file */
};

/* Each gateway's commands (core/gateways/<name>_cli.c), for its table. */
int pt__cli_sign_alipay(struct pt_gw_cli *a, char *in, size_t len, cJSON **out);
int pt__cli_verify_alipay(struct pt_gw_cli *a, char *in, size_t len, cJSON **out);
int pt__cli_sign_wechat(struct pt_gw_cli *a, char *in, size_t len, cJSON **out);
int pt__cli_verify_wechat(struct pt_gw_cli *a, char *in, size_t len, cJSON **out);
int pt__cli_sign_stripe(struct pt_gw_cli *a, char *in, size_t len, cJSON **out);
int pt__cli_verify_stripe(struct pt_gw_cli *a, char *in, size_t len, cJSON **out);
int pt__cli_sign_c2p(struct pt_gw_cli *a, char *in, size_t len, cJSON **out);
int pt__cli_verify_c2p(struct pt_gw_cli *a, char *in, size_t len, cJSON **out);
int pt__cli_sign_wechat_v2(struct pt_gw_cli *a, char *in, size_t len, cJSON **out);
int pt__cli_verify_wechat_v2(struct pt_gw_cli *a, char *in, size_t len, cJSON **out);
int pt__cli_sign_c2p_pm(struct pt_gw_cli *a, char *in, size_t len, cJSON **out);
int pt__cli_verify_c2p_pm(struct pt_gw_cli *a, char *in, size_t len, cJSON **out);

/*
 * The signature schemes `payterm sign/verify --gateway NAME` knows: each
 * registry gateway's own (its table's cli_* entries), then the schemes that
 * are not a gateway of their own - "wechat-v2", the APIv2 HMAC of the
 * WeChat payment-code calls, which belong to the wechat gateway, and
 * "2c2p-pm", the JWE-in-JWS of 2C2P's Payment Maintenance API (refunds),
 * which belongs to the 2c2p gateway.  The
 * commands loop over these instead of the registry, so no name is spelled
 * outside core/gateways.
 */
struct pt_gw_cli_scheme {
    const char *name;
    int (*sign)(struct pt_gw_cli *a, char *in, size_t len, cJSON **out);
    int (*verify)(struct pt_gw_cli *a, char *in, size_t len, cJSON **out);
    const char *sign_usage, *sign_prints, *verify_usage;
};

/* How many schemes there are. */
int pt_gw_cli_scheme_count(void);
/* Scheme i (0 <= i < count) into *out; PT_OK or PT_ENOTFOUND. */
int pt_gw_cli_scheme_at(int i, struct pt_gw_cli_scheme *out);
/* The scheme called name into *out; PT_OK or PT_ENOTFOUND. */
int pt_gw_cli_scheme_find(const char *name, struct pt_gw_cli_scheme *out);
/* "alipay, wechat, stripe, 2c2p, wechat-v2 or 2c2p-pm" (for a usage error). */
const char *pt_gw_cli_scheme_names(void);

/* Sets a->err; returns PT_GW_CLI_USAGE. */
int pt__cli_usage(struct pt_gw_cli *a, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Requires option value v (named name); PT_GW_CLI_OK or PT_GW_CLI_USAGE. */
int pt__cli_need(struct pt_gw_cli *a, const char *v, const char *name);

/* The secret of --<what> or --<what>-file (trailing line break dropped),
 * into out (PT_GW_CLI_SECRET_MAX bytes). */
int pt__cli_secret(struct pt_gw_cli *a, const char *value, const char *file, const char *what,
                   unsigned char *out, size_t *outlen);

/* The key file of option opt. */
int pt__cli_key(struct pt_gw_cli *a, const char *opt, const char *path, struct pt_pk **pk);

/* A non-negative integer option. */
int pt__cli_int64(struct pt_gw_cli *a, const char *opt, const char *v, int64_t *out);

/* The --header values as the headers of msg. */
int pt__cli_headers(struct pt_gw_cli *a, struct pt_http_response *msg);

/* Drops trailing line breaks and spaces. */
void pt__cli_trim(char *s, size_t *len);

/* {"valid":false,"error":why} into *out; returns PT_GW_CLI_INVALID. */
int pt__cli_invalid(cJSON **out, const char *why);

/* Adds the adapter's normalised view of a verified notification. */
void pt__cli_notification(cJSON *o, int rc, const struct pt_notification *n);

#endif
