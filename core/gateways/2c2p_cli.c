/*
 * 2c2p_cli.c - `payterm sign/verify --gateway 2c2p` (gwcli.h): JWT HS256 payload signing and
 * verification, as 2C2P's jsonwebtoken does; and `--gateway 2c2p-pm`, the JWS-around-JWE
 * envelope of 2C2P's Payment Maintenance API (refunds), as any JOSE library makes it.
 */
#include "gateways/gwcli.h"
#include "err.h"
#include "gateways/2c2p.h"
#include "gateways/2c2p_pm.h"
#include "gateways/jose.h"
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

/* ---- 2c2p-pm: the Payment Maintenance envelope (refunds) ---------------------- */

/* --key (private: signs, decrypts) and --peer-key (public: encrypts to,
 * verifies), as a pt_gw_config the wire helpers take. */
static int pm_keys(struct pt_gw_cli *a, struct pt_gw_config *cfg)
{
    int rc = pt__cli_key(a, "--key", a->key, &cfg->private_key);
    if (rc == PT_GW_CLI_OK)
        rc = pt__cli_key(a, "--peer-key", a->peer_key, &cfg->peer_key);
    if (rc == PT_GW_CLI_OK && pt_pk_kind(cfg->private_key) != PT_PK_PRIVATE)
        rc = pt__cli_usage(a, "--key %s: not a private key (the merchant's key signs and decrypts)",
                           a->key);
    if (rc == PT_GW_CLI_OK && pt_pk_kind(cfg->peer_key) == PT_PK_PRIVATE)
        rc = pt__cli_usage(a,
                           "--peer-key %s: a private key; give the other side's public key or "
                           "certificate",
                           a->peer_key);
    return rc;
}

int pt__cli_sign_c2p_pm(struct pt_gw_cli *a, char *in, size_t len, cJSON **out)
{
    struct pt_gw_config cfg = {0};
    char *tok = NULL;
    int rc = pm_keys(a, &cfg);
    if (rc == PT_GW_CLI_OK && (len == 0 || memchr(in, '\0', len)))
        rc = pt__cli_usage(a, "standard input: expected the XML to send (no NUL byte)");
    if (rc != PT_GW_CLI_OK)
        goto out;
    /* The XML is sealed byte for byte as given. */
    rc = PT_GW_CLI_FAIL;
    if (pt_2c2p_pm_seal(&cfg, NULL, in, len, &tok, NULL) == PT_OK) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "token", tok);
        *out = o;
        rc = PT_GW_CLI_OK;
    }
out:
    free(tok);
    pt_gw_config_free(&cfg);
    return rc;
}

int pt__cli_verify_c2p_pm(struct pt_gw_cli *a, char *in, size_t len, cJSON **out)
{
    struct pt_gw_config cfg = {0};
    char *xml = NULL;
    int rc = pm_keys(a, &cfg);
    if (rc != PT_GW_CLI_OK)
        goto out;
    int r = pt_2c2p_pm_open(&cfg, in, len, &xml, NULL);
    if (r != PT_OK) {
        rc = pt__cli_invalid(out, pt_jose_why(r));
        goto out;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddTrueToObject(o, "valid");
    cJSON_AddStringToObject(o, "xml", xml);
    *out = o;
    rc = PT_GW_CLI_OK;
out:
    free(xml);
    pt_gw_config_free(&cfg);
    return rc;
}
