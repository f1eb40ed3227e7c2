/*
 * wechat_cli.c - `payterm sign/verify --gateway wechat` (gwcli.h): APIv3 request signing, answer
 * and notification verification and resource decryption, as wechatpay-node-v3 does.
 */
#include "gateways/gwcli.h"
#include "err.h"
#include "gateways/wechat.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int pt__cli_sign_wechat(struct pt_gw_cli *a, char *in, size_t len, cJSON **out)
{
    struct pt_pk *key = NULL;
    if (pt__cli_need(a, a->mchid, "--mchid") || pt__cli_need(a, a->serial, "--serial") ||
        pt__cli_need(a, a->method, "--method") || pt__cli_need(a, a->url, "--url") ||
        pt__cli_need(a, a->timestamp, "--timestamp") || pt__cli_need(a, a->nonce, "--nonce") ||
        pt__cli_key(a, "--key", a->key, &key))
        return PT_GW_CLI_USAGE;
    int rc = PT_GW_CLI_FAIL;
    char sig[PT_WECHAT_SIG_MAX], auth[2048];
    size_t mlen = 0;
    char *msg = pt_wechat_request_message(a->method, pt_wechat_url_path(a->url), a->timestamp,
                                          a->nonce, in, len, &mlen);
    if (msg && pt_pk_sign_base64(key, msg, mlen, sig, sizeof sig) == PT_OK) {
        if (pt_wechat_authorization(a->mchid, a->serial, a->timestamp, a->nonce, sig, auth,
                                    sizeof auth) != PT_OK) {
            pt__cli_usage(a, "--mchid, --serial, --timestamp and --nonce may not contain "
                             "quotes or line breaks");
            rc = PT_GW_CLI_USAGE;
        } else {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "message", msg);
            cJSON_AddStringToObject(o, "signature", sig);
            cJSON_AddStringToObject(o, "authorization", auth);
            *out = o;
            rc = PT_GW_CLI_OK;
        }
    }
    free(msg);
    pt_pk_free(key);
    return rc;
}

int pt__cli_verify_wechat(struct pt_gw_cli *a, char *in, size_t len, cJSON **out)
{
    struct pt_gw_config cfg = {0};
    struct pt_http_response msg = {0};
    int rc = PT_GW_CLI_USAGE;
    if (pt__cli_need(a, a->serial, "--serial") || pt__cli_headers(a, &msg) ||
        pt__cli_key(a, "--pubkey", a->pubkey, &cfg.peer_key))
        goto out;
    if ((a->apiv3 || a->apiv3_file) &&
        pt__cli_secret(a, a->apiv3, a->apiv3_file, "--apiv3-key", cfg.secret, &cfg.secret_len))
        goto out;
    if (cfg.secret_len && cfg.secret_len != 32) {
        pt__cli_usage(a, "--apiv3-key: the APIv3 key is exactly 32 bytes, not %zu", cfg.secret_len);
        goto out;
    }
    static const char *const hdrs[] = {"Wechatpay-Timestamp", "Wechatpay-Nonce",
                                       "Wechatpay-Signature", "Wechatpay-Serial"};
    for (int i = 0; i < 4; i++)
        if (!pt_http_response_header(&msg, hdrs[i])) {
            pt__cli_usage(a, "missing --header '%s: ...'", hdrs[i]);
            goto out;
        }
    msg.body = in;
    msg.body_len = len;
    if (pt_wechat_verify_message(cfg.peer_key, a->serial, &msg) != PT_OK) {
        const char *s = pt_http_response_header(&msg, "Wechatpay-Serial");
        rc = pt__cli_invalid(out, strcasecmp(s, a->serial) != 0
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
        rc = pt__cli_invalid(out, "the resource does not decrypt (tag, ciphertext, nonce or "
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
        pt__cli_notification(o, pt_gateway_wechat.parse_notify(&cfg, &msg, NULL, &n), &n);
        pt_zeroize(plain, plen);
        free(plain);
    }
    *out = o;
    rc = PT_GW_CLI_OK;
out:
    msg.body = NULL; /* stdin buffer, freed by the caller */
    pt_http_response_free(&msg);
    pt_gw_config_free(&cfg);
    return rc;
}
