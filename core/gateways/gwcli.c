/*
 * gwcli.c - what the gateways' sign/verify commands share (see gwcli.h).
 */
#include "gateways/gwcli.h"
#include "err.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pt__cli_usage(struct pt_gw_cli *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->err, sizeof a->err, fmt, ap);
    va_end(ap);
    return PT_GW_CLI_USAGE;
}

int pt__cli_need(struct pt_gw_cli *a, const char *v, const char *name)
{
    if (v && *v)
        return PT_GW_CLI_OK;
    return pt__cli_usage(a, "--gateway %s needs %s (see payterm %s --help)", a->gateway, name,
                         a->cmd);
}

int pt__cli_secret(struct pt_gw_cli *a, const char *value, const char *file, const char *what,
                   unsigned char *out, size_t *outlen)
{
    if (value && file)
        return pt__cli_usage(a, "give %s or %s-file, not both", what, what);
    if (value) {
        *outlen = strlen(value);
        if (*outlen == 0 || *outlen >= PT_GW_CLI_SECRET_MAX)
            return pt__cli_usage(a, "%s: 1 to %d bytes expected", what, PT_GW_CLI_SECRET_MAX - 1);
        memcpy(out, value, *outlen);
        return PT_GW_CLI_OK;
    }
    if (!file)
        return pt__cli_need(a, NULL, what);
    size_t n = 0;
    int rc = pt_secret_read_line(file, out, PT_GW_CLI_SECRET_MAX, &n);
    if (rc == PT_ENOTFOUND || rc == PT_EIO)
        return pt__cli_usage(a, "%s-file %s: %s", what, file, strerror(errno));
    if (rc != PT_OK || n == 0) /* too big: out already wiped */
        return pt__cli_usage(a, "%s-file %s: expected 1 to %d bytes", what, file,
                             PT_GW_CLI_SECRET_MAX - 1);
    *outlen = n;
    return PT_GW_CLI_OK;
}

int pt__cli_key(struct pt_gw_cli *a, const char *opt, const char *path, struct pt_pk **pk)
{
    char err[PT_PK_ERR_MAX];
    int rc = pt__cli_need(a, path, opt);
    if (rc)
        return rc;
    if (pt_pk_load_file(path, NULL, NULL, pk, err, sizeof err) != PT_OK)
        return pt__cli_usage(a, "%s %s", opt, err);
    return PT_GW_CLI_OK;
}

int pt__cli_int64(struct pt_gw_cli *a, const char *opt, const char *v, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || !*v || *end || x < 0)
        return pt__cli_usage(a, "%s %s: expected a non-negative integer", opt, v);
    *out = x;
    return PT_GW_CLI_OK;
}

int pt__cli_headers(struct pt_gw_cli *a, struct pt_http_response *msg)
{
    for (int i = 0; i < a->nheaders; i++) {
        const char *colon = strchr(a->headers[i], ':');
        char name[128];
        size_t n = colon ? (size_t)(colon - a->headers[i]) : 0;
        while (n && a->headers[i][n - 1] == ' ')
            n--;
        if (n == 0 || n >= sizeof name)
            return pt__cli_usage(a, "--header '%s': bad header name", a->headers[i]);
        memcpy(name, a->headers[i], n);
        name[n] = '\0';
        const char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        if (pt_http_response_add_header(msg, name, v) != PT_OK)
            return pt__cli_usage(a, "--header: at most %d", PT_GW_CLI_MAX_HEADERS);
    }
    return PT_GW_CLI_OK;
}

void pt__cli_trim(char *s, size_t *len)
{
    while (*len && (s[*len - 1] == '\n' || s[*len - 1] == '\r' || s[*len - 1] == ' '))
        s[--*len] = '\0';
}

int pt__cli_invalid(cJSON **out, const char *why)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddFalseToObject(o, "valid");
    cJSON_AddStringToObject(o, "error", why);
    *out = o;
    return PT_GW_CLI_INVALID;
}

void pt__cli_notification(cJSON *o, int rc, const struct pt_notification *n)
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

/* ---- the schemes of sign/verify ------------------------------------------------ */

/* Schemes beyond the registry's gateways (see gwcli.h). */
static const struct pt_gw_cli_scheme extra_schemes[] = {
    {
        .name = "wechat-v2",
        .sign = pt__cli_sign_wechat_v2,
        .verify = pt__cli_verify_wechat_v2,
        .sign_usage = "--gateway wechat-v2 --key-file apiv2_key < params.json",
        .sign_prints = "{\"string_to_sign\":...,\"sign\":...,\"xml\":...}   params.json is a flat "
                       "object of strings;\n"
                       "          sign_type HMAC-SHA256 or MD5 (absent: MD5, as WeChat); the MAC "
                       "is over\n"
                       "          string_to_sign + \"&key=\" + the key",
        .verify_usage = "--gateway wechat-v2 --key-file apiv2_key < answer.xml\n"
                        "    (an APIv2 answer; HMAC-SHA256 signs only)",
    },
    {
        .name = "2c2p-pm",
        .sign = pt__cli_sign_c2p_pm,
        .verify = pt__cli_verify_c2p_pm,
        .sign_usage = "--gateway 2c2p-pm --key MERCHANT.pem --peer-key 2C2P_PUBLIC.pem < "
                      "request.xml",
        .sign_prints = "{\"token\":...}   a JWS (PS256, --key) of a JWE (RSA-OAEP + "
                       "A256GCM, to --peer-key)\n"
                       "          of the XML as given: 2C2P's Payment Maintenance body",
        .verify_usage = "--gateway 2c2p-pm --key MERCHANT.pem --peer-key 2C2P_PUBLIC.pem < token\n"
                        "    (2C2P's answer: the JWS checked with --peer-key, the JWE opened with "
                        "--key;\n"
                        "    --peer-key may be 2C2P's certificate, PEM or DER)",
    },
};

#define NEXTRA ((int)(sizeof extra_schemes / sizeof extra_schemes[0]))

int pt_gw_cli_scheme_count(void)
{
    return pt_gateway_count() + NEXTRA;
}

int pt_gw_cli_scheme_at(int i, struct pt_gw_cli_scheme *out)
{
    const struct pt_gateway *gw = pt_gateway_at(i);
    if (gw) {
        *out = (struct pt_gw_cli_scheme){
            .name = gw->name,
            .sign = gw->cli_sign,
            .verify = gw->cli_verify,
            .sign_usage = gw->cli_sign_usage,
            .sign_prints = gw->cli_sign_prints,
            .verify_usage = gw->cli_verify_usage,
        };
        return PT_OK;
    }
    i -= pt_gateway_count();
    if (i < 0 || i >= NEXTRA)
        return PT_ENOTFOUND;
    *out = extra_schemes[i];
    return PT_OK;
}

int pt_gw_cli_scheme_find(const char *name, struct pt_gw_cli_scheme *out)
{
    for (int i = 0; name && i < pt_gw_cli_scheme_count(); i++)
        if (pt_gw_cli_scheme_at(i, out) == PT_OK && strcmp(out->name, name) == 0)
            return PT_OK;
    return PT_ENOTFOUND;
}

static char scheme_names[PT_GW_MAX * 16 + NEXTRA * 16];

static void scheme_names_once(void)
{
    int n = pt_gw_cli_scheme_count();
    size_t o = 0;
    struct pt_gw_cli_scheme s;
    for (int i = 0; i < n && pt_gw_cli_scheme_at(i, &s) == PT_OK; i++)
        o += (size_t)snprintf(scheme_names + o, sizeof scheme_names - o, "%s%s",
                              i == 0       ? ""
                              : i == n - 1 ? " or "
                                           : ", ",
                              s.name);
}

const char *pt_gw_cli_scheme_names(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, scheme_names_once);
    return scheme_names;
}
