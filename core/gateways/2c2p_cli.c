/*
 * 2c2p_cli.c - `payterm sign/verify --gateway 2c2p` (gwcli.h): JWT HS256 payload signing and
 * verification, as 2C2P's jsonwebtoken does.
 */
#include "gateways/gwcli.h"
#include "err.h"
#include "gateways/2c2p.h"
#include "gateways/jwt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int pt__cli_sign_c2p(struct pt_gw_cli *a, char *in, size_t len, cJSON **out)
{
    unsigned char secret[PT_GW_CLI_SECRET_MAX];
    size_t slen = 0;
    char *tok = NULL;
    if (pt__cli_secret(a, a->secret, a->secret_file, "--secret", secret, &slen))
        return PT_GW_CLI_USAGE;
    int rc = PT_GW_CLI_USAGE;
    cJSON *j = cJSON_ParseWithLength(in, len);
    if (!cJSON_IsObject(j)) {
        pt__cli_usage(a, "standard input: expected the JSON payload object");
        goto out;
    }
    /* jsonwebtoken signs JSON.stringify(payload): compact, order kept. */
    len = pt_2c2p_minify(in, len);
    rc = PT_GW_CLI_FAIL;
    if (pt_jwt_hs256_sign(secret, slen, in, len, &tok) == PT_OK) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "token", tok);
        *out = o;
        rc = PT_GW_CLI_OK;
    }
out:
    cJSON_Delete(j);
    free(tok);
    pt_zeroize(secret, sizeof secret);
    return rc;
}

int pt__cli_verify_c2p(struct pt_gw_cli *a, char *in, size_t len, cJSON **out)
{
    struct pt_gw_config cfg = {0};
    char *payload = NULL;
    size_t plen = 0;
    if (pt__cli_secret(a, a->secret, a->secret_file, "--secret", cfg.secret, &cfg.secret_len))
        return PT_GW_CLI_USAGE;
    pt__cli_trim(in, &len);
    int body = len && in[0] == '{';
    int r = body ? pt_2c2p_open(cfg.secret, cfg.secret_len, in, len, &payload, &plen)
                 : pt_jwt_hs256_verify(cfg.secret, cfg.secret_len, in, len, &payload, &plen);
    int rc;
    if (r != PT_OK) {
        rc =
            pt__cli_invalid(out, r == PT_ESIG ? "MAC does not verify, or the algorithm is not HS256"
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
            pt__cli_notification(o, pt_gateway_2c2p.parse_notify(&cfg, &msg, NULL, &n), &n);
        }
        *out = o;
        rc = PT_GW_CLI_OK;
    }
    free(payload);
    pt_gw_config_free(&cfg);
    return rc;
}
