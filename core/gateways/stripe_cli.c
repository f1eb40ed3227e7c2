/*
 * stripe_cli.c - `payterm sign/verify --gateway stripe` (gwcli.h): webhook signing and
 * verification, as stripe-node does.
 */
#include "gateways/gwcli.h"
#include "err.h"
#include "gateways/stripe.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int pt__cli_sign_stripe(struct pt_gw_cli *a, char *in, size_t len, cJSON **out)
{
    unsigned char secret[PT_GW_CLI_SECRET_MAX];
    size_t slen = 0;
    int64_t t = a->now_s;
    if (pt__cli_secret(a, a->secret, a->secret_file, "--secret", secret, &slen) ||
        (a->timestamp && pt__cli_int64(a, "--timestamp", a->timestamp, &t)))
        return PT_GW_CLI_USAGE;
    char hdr[256];
    int rc = PT_GW_CLI_FAIL;
    if (pt_stripe_sign_header(secret, slen, t, in, len, hdr, sizeof hdr) == PT_OK) {
        char *signed_payload = malloc(len + 32);
        if (signed_payload) {
            snprintf(signed_payload, len + 32, "%lld.%.*s", (long long)t, (int)len, in);
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "signed_payload", signed_payload);
            cJSON_AddStringToObject(o, "signature", strstr(hdr, "v1=") + 3);
            cJSON_AddStringToObject(o, "header", hdr);
            *out = o;
            rc = PT_GW_CLI_OK;
            free(signed_payload);
        }
    }
    pt_zeroize(secret, sizeof secret);
    return rc;
}

int pt__cli_verify_stripe(struct pt_gw_cli *a, char *in, size_t len, cJSON **out)
{
    struct pt_gw_config cfg = {0};
    struct pt_http_response msg = {0};
    int64_t now = a->now_s, tol = PT_STRIPE_DEFAULT_TOLERANCE;
    int rc = PT_GW_CLI_USAGE;
    if (pt__cli_secret(a, a->secret, a->secret_file, "--secret", cfg.webhook_secret,
                       &cfg.webhook_secret_len) ||
        pt__cli_headers(a, &msg) || (a->now && pt__cli_int64(a, "--now", a->now, &now)) ||
        (a->tolerance && pt__cli_int64(a, "--tolerance", a->tolerance, &tol)))
        goto out;
    const char *sig = pt_http_response_header(&msg, "Stripe-Signature");
    if (!sig) {
        pt__cli_usage(a, "missing --header 'Stripe-Signature: t=...,v1=...'");
        goto out;
    }
    if (pt_stripe_verify_header(sig, in, len, cfg.webhook_secret, cfg.webhook_secret_len, now, tol,
                                NULL) != PT_OK) {
        rc = pt__cli_invalid(out,
                             "no v1 signature matches, or the timestamp is outside the tolerance");
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
    pt__cli_notification(o, pt_gateway_stripe.parse_notify(&cfg, &msg, &env, &n), &n);
    *out = o;
    rc = PT_GW_CLI_OK;
out:
    msg.body = NULL;
    pt_http_response_free(&msg);
    pt_gw_config_free(&cfg);
    return rc;
}
