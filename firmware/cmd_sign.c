/*
 * cmd_sign.c - `payterm sign` and `payterm verify` (SPEC 8): the gateways'
 * signature schemes as a command-line tool for integrators.
 *
 * Both commands are thin: they read the message from standard input, call
 * the same wire helpers the adapters use (the core/gateways headers), and print one
 * JSON object on standard output.  verify exits 0 when the message is
 * authentic, 3 when a signature, MAC or decryption fails (or a WeChat
 * Wechatpay-Serial names another key), 2 on usage errors; every usage error
 * names the argument or file that was wrong.
 */
#include "cli.h"
#include "crypto.h"
#include "err.h"
#include "gateway.h"
#include "gateways/2c2p.h"
#include "gateways/alipay.h"
#include "gateways/form.h"
#include "gateways/jwt.h"
#include "gateways/stripe.h"
#include "gateways/wechat.h"
#include "platform.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MAX_HEADERS 8
#define SECRET_MAX 256

struct args {
    const char *cmd; /* "sign" or "verify" */
    const char *gateway, *key, *pubkey, *mchid, *serial, *method, *url, *timestamp, *nonce;
    const char *secret, *secret_file, *apiv3, *apiv3_file, *now, *tolerance;
    const char *headers[MAX_HEADERS];
    int nheaders;
};

static const char sign_help[] =
    "usage: payterm sign --gateway alipay --key merchant.pem             < params.json\n"
    "       payterm sign --gateway wechat --key merchant.pem --mchid M --serial S\n"
    "                    --method POST --url /v3/... --timestamp T --nonce N < body\n"
    "       payterm sign --gateway 2c2p   (--secret S | --secret-file F)  < payload.json\n"
    "       payterm sign --gateway stripe (--secret whsec_... | --secret-file F)\n"
    "                    [--timestamp T]                                  < payload\n\n"
    "Prints the string to sign and the signature as the vendors' SDKs compute them:\n"
    "  alipay  {\"string_to_sign\":...,\"sign\":...}   params.json is a flat object of strings\n"
    "  wechat  {\"message\":...,\"signature\":...,\"authorization\":...}\n"
    "  2c2p    {\"token\":...}   (the payload is compacted, then signed HS256)\n"
    "  stripe  {\"signed_payload\":...,\"signature\":...,\"header\":...}\n"
    "Bodies are used byte for byte: write them with printf or a file, not echo.\n"
    "-c/--config FILE is accepted and ignored: keys and secrets come from the options.\n"
    "Exit status: 0 signed, 1 failure, 2 usage error.\n";

static const char verify_help[] =
    "usage: payterm verify --gateway alipay --pubkey alipay_pub.pem [--method M] < body\n"
    "       payterm verify --gateway wechat --pubkey platform.pem --serial SERIAL\n"
    "                      [--apiv3-key K | --apiv3-key-file F]\n"
    "                      --header 'Wechatpay-Timestamp: ...' (all four)   < body\n"
    "       payterm verify --gateway stripe (--secret whsec_... | --secret-file F)\n"
    "                      --header 'Stripe-Signature: ...' [--now UNIX] [--tolerance 300]\n"
    "                                                                       < payload\n"
    "       payterm verify --gateway 2c2p (--secret S | --secret-file F)     < token\n\n"
    "Alipay: a notification body (form), or with --method alipay.trade.xxx a\n"
    "response body (JSON).  WeChat: a notification or response body; with the\n"
    "APIv3 key a notification's resource is decrypted.  2C2P: a bare JWT or a\n"
    "{\"payload\":\"...\"} body.  --header may be repeated; names are case-insensitive.\n"
    "Prints {\"valid\":true|false,...} with the verified fields or plaintext.\n"
    "-c/--config FILE is accepted and ignored: keys and secrets come from the options.\n"
    "Exit status: 0 valid, 3 invalid (signature, MAC, decryption, or a\n"
    "Wechatpay-Serial naming another key), 2 usage error, 1 other failure.\n";

/* ---- arguments ---------------------------------------------------------- */

static int take(struct args *a, int argc, char **argv, int *i, const char *name,
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

static int parse_args(struct args *a, int argc, char **argv)
{
    struct {
        const char *name;
        const char **dst;
    } opts[] = {
        {"--gateway", &a->gateway},     {"--key", &a->key},
        {"--pubkey", &a->pubkey},       {"--mchid", &a->mchid},
        {"--serial", &a->serial},       {"--method", &a->method},
        {"--url", &a->url},             {"--timestamp", &a->timestamp},
        {"--nonce", &a->nonce},         {"--secret", &a->secret},
        {"--secret-file", &a->secret_file}, {"--apiv3-key", &a->apiv3},
        {"--apiv3-key-file", &a->apiv3_file}, {"--now", &a->now},
        {"--tolerance", &a->tolerance},
    };
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(strcmp(a->cmd, "sign") == 0 ? sign_help : verify_help, stdout);
            return 1;
        }
        /* SPEC 11: -c everywhere; this command needs no configuration. */
        struct pt_cli_common ignored = {0};
        int r = pt_cli_take_config(&ignored, argc, argv, &i);
        if (r < 0)
            return -1;
        if (r)
            continue;
        const char *h = NULL;
        r = take(a, argc, argv, &i, "--header", &h);
        if (r < 0)
            return -1;
        if (r) {
            if (a->nheaders >= MAX_HEADERS || !strchr(h, ':')) {
                pt_cli_error(a->cmd, "--header '%s': expected 'Name: value' (at most %d)", h,
                             MAX_HEADERS);
                return -1;
            }
            a->headers[a->nheaders++] = h;
            continue;
        }
        size_t k = 0;
        for (; k < sizeof opts / sizeof opts[0]; k++) {
            r = take(a, argc, argv, &i, opts[k].name, opts[k].dst);
            if (r)
                break;
        }
        if (r < 0)
            return -1;
        if (k == sizeof opts / sizeof opts[0]) {
            pt_cli_error(a->cmd, "unexpected argument '%s' (see payterm %s --help)", argv[i], a->cmd);
            return -1;
        }
    }
    if (!a->gateway || !pt_gateway_find(a->gateway)) {
        pt_cli_error(a->cmd, "--gateway %s: expected alipay, wechat, stripe or 2c2p",
                     a->gateway ? a->gateway : "(missing)");
        return -1;
    }
    return 0;
}

/* Requires option value v; prints which option is missing. */
static int need(const struct args *a, const char *v, const char *name)
{
    if (v && *v)
        return 0;
    pt_cli_error(a->cmd, "--gateway %s needs %s (see payterm %s --help)", a->gateway, name, a->cmd);
    return -1;
}

/* ---- input --------------------------------------------------------------- */

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

static void trim_newlines(char *s, size_t *len)
{
    while (*len && (s[*len - 1] == '\n' || s[*len - 1] == '\r' || s[*len - 1] == ' '))
        s[--*len] = '\0';
}

/* The secret from --secret or --secret-file (trailing newline dropped). */
static int load_secret(const struct args *a, const char *value, const char *file,
                       const char *what, unsigned char *out, size_t *outlen)
{
    if (value && file) {
        pt_cli_error(a->cmd, "give %s or %s-file, not both", what, what);
        return -1;
    }
    if (value) {
        *outlen = strlen(value);
        if (*outlen == 0 || *outlen >= SECRET_MAX) {
            pt_cli_error(a->cmd, "%s: 1 to %d bytes expected", what, SECRET_MAX - 1);
            return -1;
        }
        memcpy(out, value, *outlen);
        return 0;
    }
    if (!file)
        return need(a, NULL, what);
    FILE *f = fopen(file, "rb");
    if (!f) {
        pt_cli_error(a->cmd, "%s-file %s: %s", what, file, strerror(errno));
        return -1;
    }
    size_t n = fread(out, 1, SECRET_MAX, f);
    fclose(f);
    while (n && (out[n - 1] == '\n' || out[n - 1] == '\r'))
        n--;
    if (n == 0 || n >= SECRET_MAX) {
        pt_cli_error(a->cmd, "%s-file %s: expected 1 to %d bytes", what, file, SECRET_MAX - 1);
        return -1;
    }
    *outlen = n;
    return 0;
}

static int load_key(const struct args *a, const char *opt, const char *path, struct pt_pk **pk)
{
    char err[PT_PK_ERR_MAX];
    if (need(a, path, opt))
        return -1;
    if (pt_pk_load_file(path, NULL, NULL, pk, err, sizeof err) != PT_OK) {
        pt_cli_error(a->cmd, "%s %s", opt, err);
        return -1;
    }
    return 0;
}

/* ---- output -------------------------------------------------------------- */

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

static int print_invalid(const char *why)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddFalseToObject(o, "valid");
    cJSON_AddStringToObject(o, "error", why);
    print_json(o);
    return PT_EXIT_INVALID;
}

/* Adds the adapter's normalised view of a verified notification. */
static void add_notification(cJSON *o, int rc, const struct pt_notification *n)
{
    if (rc != PT_OK) {
        cJSON_AddStringToObject(o, "notification_error", pt_strerror(rc));
        return;
    }
    cJSON *j = cJSON_AddObjectToObject(o, "notification");
    cJSON_AddStringToObject(j, "gateway", n->gateway);
    cJSON_AddBoolToObject(j, "relevant", n->relevant);
    cJSON_AddStringToObject(j, "dedup_id", n->dedup_id);
    if (!n->relevant)
        return;
    cJSON_AddStringToObject(j, "order_id", n->order_id);
    cJSON_AddStringToObject(j, "trade_no", n->trade_no);
    cJSON_AddNumberToObject(j, "amount", (double)n->amount); /* minor units: an integer */
    cJSON_AddStringToObject(j, "currency", n->currency);
    cJSON_AddStringToObject(j, "status", pt_outcome_name(n->status));
    cJSON_AddStringToObject(j, "merchant_id", n->merchant_id);
}

/* ---- sign ------------------------------------------------------------------ */

static int sign_alipay(const struct args *a, const char *in, size_t len)
{
    struct pt_pk *key = NULL;
    struct pt_form f;
    int rc = PT_EXIT_USAGE;
    pt_form_init(&f);
    cJSON *j = cJSON_ParseWithLength(in, len);
    if (!cJSON_IsObject(j)) {
        pt_cli_error(a->cmd, "standard input: expected a JSON object of strings (params.json)");
        goto out;
    }
    for (const cJSON *it = j->child; it; it = it->next) {
        if (!cJSON_IsString(it)) {
            pt_cli_error(a->cmd, "params.json: the value of \"%s\" is not a string", it->string);
            goto out;
        }
        if (strcmp(it->string, "sign") != 0 && pt_form_add(&f, it->string, it->valuestring) != PT_OK) {
            pt_cli_error(a->cmd, "params.json: too many parameters");
            goto out;
        }
    }
    if (load_key(a, "--key", a->key, &key))
        goto out;
    size_t slen = 0;
    char *sts = pt_alipay_string_to_sign(&f, PT_ALIPAY_REQUEST, &slen);
    rc = PT_EXIT_FAIL;
    if (sts && pt_alipay_sign_form(key, &f, PT_ALIPAY_REQUEST) == PT_OK) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "string_to_sign", sts);
        cJSON_AddStringToObject(o, "sign", pt_form_get(&f, "sign"));
        rc = print_json(o);
    }
    free(sts);
out:
    cJSON_Delete(j);
    pt_form_free(&f);
    pt_pk_free(key);
    return rc;
}

static int sign_wechat(const struct args *a, const char *in, size_t len)
{
    struct pt_pk *key = NULL;
    if (need(a, a->mchid, "--mchid") || need(a, a->serial, "--serial") ||
        need(a, a->method, "--method") || need(a, a->url, "--url") ||
        need(a, a->timestamp, "--timestamp") || need(a, a->nonce, "--nonce") ||
        load_key(a, "--key", a->key, &key))
        return PT_EXIT_USAGE;
    int rc = PT_EXIT_FAIL;
    char sig[PT_WECHAT_SIG_MAX], auth[2048];
    size_t mlen = 0;
    char *msg = pt_wechat_request_message(a->method, pt_wechat_url_path(a->url), a->timestamp,
                                          a->nonce, in, len, &mlen);
    if (msg && pt_pk_sign_base64(key, msg, mlen, sig, sizeof sig) == PT_OK) {
        if (pt_wechat_authorization(a->mchid, a->serial, a->timestamp, a->nonce, sig, auth,
                                    sizeof auth) != PT_OK) {
            pt_cli_error(a->cmd, "--mchid, --serial, --timestamp and --nonce may not contain "
                                 "quotes or line breaks");
            rc = PT_EXIT_USAGE;
        } else {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "message", msg);
            cJSON_AddStringToObject(o, "signature", sig);
            cJSON_AddStringToObject(o, "authorization", auth);
            rc = print_json(o);
        }
    }
    free(msg);
    pt_pk_free(key);
    return rc;
}

static int sign_2c2p(const struct args *a, char *in, size_t len)
{
    unsigned char secret[SECRET_MAX];
    size_t slen = 0;
    char *tok = NULL;
    if (load_secret(a, a->secret, a->secret_file, "--secret", secret, &slen))
        return PT_EXIT_USAGE;
    int rc = PT_EXIT_USAGE;
    cJSON *j = cJSON_ParseWithLength(in, len);
    if (!cJSON_IsObject(j)) {
        pt_cli_error(a->cmd, "standard input: expected the JSON payload object");
        goto out;
    }
    /* jsonwebtoken signs JSON.stringify(payload): compact, order kept. */
    len = pt_2c2p_minify(in, len);
    rc = PT_EXIT_FAIL;
    if (pt_jwt_hs256_sign(secret, slen, in, len, &tok) == PT_OK) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "token", tok);
        rc = print_json(o);
    }
out:
    cJSON_Delete(j);
    free(tok);
    pt_zeroize(secret, sizeof secret);
    return rc;
}

static int parse_int64(const struct args *a, const char *opt, const char *v, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || !*v || *end || x < 0) {
        pt_cli_error(a->cmd, "%s %s: expected a non-negative integer", opt, v);
        return -1;
    }
    *out = x;
    return 0;
}

static int sign_stripe(const struct args *a, const char *in, size_t len)
{
    unsigned char secret[SECRET_MAX];
    size_t slen = 0;
    int64_t t = (int64_t)time(NULL);
    if (load_secret(a, a->secret, a->secret_file, "--secret", secret, &slen) ||
        (a->timestamp && parse_int64(a, "--timestamp", a->timestamp, &t)))
        return PT_EXIT_USAGE;
    char hdr[256];
    int rc = PT_EXIT_FAIL;
    if (pt_stripe_sign_header(secret, slen, t, in, len, hdr, sizeof hdr) == PT_OK) {
        char *signed_payload = malloc(len + 32);
        if (signed_payload) {
            snprintf(signed_payload, len + 32, "%lld.%.*s", (long long)t, (int)len, in);
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "signed_payload", signed_payload);
            cJSON_AddStringToObject(o, "signature", strstr(hdr, "v1=") + 3);
            cJSON_AddStringToObject(o, "header", hdr);
            rc = print_json(o);
            free(signed_payload);
        }
    }
    pt_zeroize(secret, sizeof secret);
    return rc;
}

/* ---- verify ---------------------------------------------------------------- */

/* Fills a response struct with the --header values (and the body). */
static int headers_into(const struct args *a, struct pt_http_response *msg)
{
    for (int i = 0; i < a->nheaders; i++) {
        const char *colon = strchr(a->headers[i], ':');
        char name[128];
        size_t n = (size_t)(colon - a->headers[i]);
        while (n && a->headers[i][n - 1] == ' ')
            n--;
        if (n == 0 || n >= sizeof name) {
            pt_cli_error(a->cmd, "--header '%s': bad header name", a->headers[i]);
            return -1;
        }
        memcpy(name, a->headers[i], n);
        name[n] = '\0';
        const char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        if (pt_http_response_add_header(msg, name, v) != PT_OK)
            return -1;
    }
    return 0;
}

static void form_to_json(cJSON *o, const struct pt_form *f)
{
    cJSON *p = cJSON_AddObjectToObject(o, "params");
    for (size_t i = 0; i < f->n; i++)
        cJSON_AddStringToObject(p, f->pairs[i].key, f->pairs[i].value);
}

static int verify_alipay_response(const struct args *a, struct pt_pk *pub, const char *in,
                                  size_t len)
{
    const char *raw;
    size_t rawlen;
    if (need(a, a->method, "--method (the alipay.trade.xxx the response answers)"))
        return PT_EXIT_USAGE;
    int rc = pt_alipay_verify_response(pub, in, len, a->method, &raw, &rawlen);
    if (rc != PT_OK)
        return print_invalid(rc == PT_ESIG ? "signature does not verify"
                                           : "not an Alipay response to that method");
    cJSON *o = cJSON_CreateObject();
    cJSON_AddTrueToObject(o, "valid");
    cJSON_AddItemToObject(o, "response", cJSON_ParseWithLength(raw, rawlen));
    return print_json(o);
}

static int verify_alipay(const struct args *a, char *in, size_t len)
{
    struct pt_pk *pub = NULL;
    struct pt_form f;
    if (load_key(a, "--pubkey", a->pubkey, &pub))
        return PT_EXIT_USAGE;
    int rc;
    trim_newlines(in, &len);
    if (len && in[0] == '{') {
        rc = verify_alipay_response(a, pub, in, len);
        pt_pk_free(pub);
        return rc;
    }
    pt_form_init(&f);
    if (pt_form_parse(in, len, &f) != PT_OK) {
        rc = print_invalid("not a form-encoded notification body");
    } else if (pt_alipay_verify_form(pub, &f, PT_ALIPAY_NOTIFY) != PT_OK) {
        rc = print_invalid("signature does not verify");
    } else {
        struct pt_gw_config cfg = {.peer_key = pub};
        struct pt_http_response msg = {.status = 200, .body = in, .body_len = len};
        struct pt_notification n;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddTrueToObject(o, "valid");
        form_to_json(o, &f);
        add_notification(o, pt_gateway_alipay.parse_notify(&cfg, &msg, NULL, &n), &n);
        rc = print_json(o);
    }
    pt_form_free(&f);
    pt_pk_free(pub);
    return rc;
}

static int verify_wechat(const struct args *a, char *in, size_t len)
{
    struct pt_gw_config cfg = {0};
    struct pt_http_response msg = {0};
    int rc = PT_EXIT_USAGE;
    if (need(a, a->serial, "--serial") || headers_into(a, &msg) ||
        load_key(a, "--pubkey", a->pubkey, &cfg.peer_key))
        goto out;
    if ((a->apiv3 || a->apiv3_file) &&
        load_secret(a, a->apiv3, a->apiv3_file, "--apiv3-key", cfg.secret, &cfg.secret_len))
        goto out;
    if (cfg.secret_len && cfg.secret_len != 32) {
        pt_cli_error(a->cmd, "--apiv3-key: the APIv3 key is exactly 32 bytes, not %zu",
                     cfg.secret_len);
        goto out;
    }
    static const char *const hdrs[] = {"Wechatpay-Timestamp", "Wechatpay-Nonce",
                                       "Wechatpay-Signature", "Wechatpay-Serial"};
    for (int i = 0; i < 4; i++)
        if (!pt_http_response_header(&msg, hdrs[i])) {
            pt_cli_error(a->cmd, "missing --header '%s: ...'", hdrs[i]);
            goto out;
        }
    msg.body = in;
    msg.body_len = len;
    if (pt_wechat_verify_message(cfg.peer_key, a->serial, &msg) != PT_OK) {
        const char *s = pt_http_response_header(&msg, "Wechatpay-Serial");
        rc = print_invalid(strcasecmp(s, a->serial) != 0
                               ? "Wechatpay-Serial names another key than --serial"
                               : "signature does not verify");
        goto out;
    }
    cJSON *body = cJSON_ParseWithLength(in, len);
    int has_resource = cJSON_GetObjectItemCaseSensitive(body, "resource") != NULL;
    cJSON_Delete(body);
    char *plain = NULL;
    size_t plen = 0;
    if (has_resource && cfg.secret_len &&
        pt_wechat_notify_plaintext(cfg.secret, cfg.secret_len, in, len, &plain, &plen) != PT_OK) {
        rc = print_invalid("the resource does not decrypt (tag, ciphertext, nonce or "
                           "associated_data altered, or another APIv3 key)");
        goto out;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddTrueToObject(o, "valid");
    if (plain) {
        cJSON *p = cJSON_ParseWithLength(plain, plen);
        cJSON_AddItemToObject(o, "plaintext", p ? p : cJSON_CreateString(plain));
        strncpy(cfg.platform_serial, a->serial, sizeof cfg.platform_serial - 1);
        struct pt_notification n;
        add_notification(o, pt_gateway_wechat.parse_notify(&cfg, &msg, NULL, &n), &n);
        pt_zeroize(plain, plen);
        free(plain);
    }
    rc = print_json(o);
out:
    msg.body = NULL; /* stdin buffer, freed by the caller */
    pt_http_response_free(&msg);
    pt_gw_config_free(&cfg);
    return rc;
}

static int verify_stripe(const struct args *a, const char *in, size_t len)
{
    struct pt_gw_config cfg = {0};
    struct pt_http_response msg = {0};
    int64_t now = (int64_t)time(NULL), tol = PT_STRIPE_DEFAULT_TOLERANCE;
    int rc = PT_EXIT_USAGE;
    if (load_secret(a, a->secret, a->secret_file, "--secret", cfg.webhook_secret,
                    &cfg.webhook_secret_len) ||
        headers_into(a, &msg) || (a->now && parse_int64(a, "--now", a->now, &now)) ||
        (a->tolerance && parse_int64(a, "--tolerance", a->tolerance, &tol)))
        goto out;
    const char *sig = pt_http_response_header(&msg, "Stripe-Signature");
    if (!sig) {
        pt_cli_error(a->cmd, "missing --header 'Stripe-Signature: t=...,v1=...'");
        goto out;
    }
    if (pt_stripe_verify_header(sig, in, len, cfg.webhook_secret, cfg.webhook_secret_len, now,
                                tol, NULL) != PT_OK) {
        rc = print_invalid("no v1 signature matches, or the timestamp is outside the tolerance");
        goto out;
    }
    msg.body = (char *)in;
    msg.body_len = len;
    struct pt_gw_env env = {.now_ms = now * 1000, .tolerance_s = tol ? tol : -1};
    struct pt_notification n;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddTrueToObject(o, "valid");
    cJSON *ev = cJSON_ParseWithLength(in, len);
    if (ev)
        cJSON_AddItemToObject(o, "event", ev);
    add_notification(o, pt_gateway_stripe.parse_notify(&cfg, &msg, &env, &n), &n);
    rc = print_json(o);
out:
    msg.body = NULL;
    pt_http_response_free(&msg);
    pt_gw_config_free(&cfg);
    return rc;
}

static int verify_2c2p(const struct args *a, char *in, size_t len)
{
    struct pt_gw_config cfg = {0};
    char *payload = NULL;
    size_t plen = 0;
    if (load_secret(a, a->secret, a->secret_file, "--secret", cfg.secret, &cfg.secret_len))
        return PT_EXIT_USAGE;
    trim_newlines(in, &len);
    int body = len && in[0] == '{';
    int r = body ? pt_2c2p_open(cfg.secret, cfg.secret_len, in, len, &payload, &plen)
                 : pt_jwt_hs256_verify(cfg.secret, cfg.secret_len, in, len, &payload, &plen);
    int rc;
    if (r != PT_OK) {
        rc = print_invalid(r == PT_ESIG   ? "MAC does not verify, or the algorithm is not HS256"
                           : r == PT_ENOTFOUND ? "no \"payload\" member: an unsigned body"
                                               : "not a JWT");
    } else {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddTrueToObject(o, "valid");
        cJSON *p = cJSON_ParseWithLength(payload, plen);
        cJSON_AddItemToObject(o, "payload", p ? p : cJSON_CreateString(payload));
        if (body) {
            struct pt_http_response msg = {.status = 200, .body = in, .body_len = len};
            struct pt_notification n;
            add_notification(o, pt_gateway_2c2p.parse_notify(&cfg, &msg, NULL, &n), &n);
        }
        rc = print_json(o);
    }
    free(payload);
    pt_gw_config_free(&cfg);
    return rc;
}

/* ---- commands ---------------------------------------------------------------- */

static int run(const char *cmd, int argc, char **argv)
{
    struct args a = {.cmd = cmd};
    int r = parse_args(&a, argc, argv);
    if (r)
        return r > 0 ? PT_EXIT_OK : PT_EXIT_USAGE;
    size_t len = 0;
    char *in = read_stdin(cmd, &len);
    if (!in)
        return PT_EXIT_USAGE;
    int sign = strcmp(cmd, "sign") == 0;
    const char *g = a.gateway;
    int rc;
    if (strcmp(g, "alipay") == 0)
        rc = sign ? sign_alipay(&a, in, len) : verify_alipay(&a, in, len);
    else if (strcmp(g, "wechat") == 0)
        rc = sign ? sign_wechat(&a, in, len) : verify_wechat(&a, in, len);
    else if (strcmp(g, "stripe") == 0)
        rc = sign ? sign_stripe(&a, in, len) : verify_stripe(&a, in, len);
    else
        rc = sign ? sign_2c2p(&a, in, len) : verify_2c2p(&a, in, len);
    free(in);
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
