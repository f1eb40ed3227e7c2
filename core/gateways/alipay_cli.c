/*
 * alipay_cli.c - `payterm sign/verify --gateway alipay` (gwcli.h): RSA2 request signing and
 * notification/response verification, as alipay-sdk does.
 */
#include "gateways/gwcli.h"
#include "err.h"
#include "gateways/alipay.h"
#include "gateways/form.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int pt__cli_sign_alipay(struct pt_gw_cli *a, char *in, size_t len, cJSON **out)
{
    struct pt_pk *key = NULL;
    struct pt_form f;
    int rc = PT_GW_CLI_USAGE;
    pt_form_init(&f);
    cJSON *j = cJSON_ParseWithLength(in, len);
    if (!cJSON_IsObject(j)) {
        pt__cli_usage(a, "standard input: expected a JSON object of strings (params.json)");
        goto out;
    }
    for (const cJSON *it = j->child; it; it = it->next) {
        if (!cJSON_IsString(it)) {
            pt__cli_usage(a, "params.json: the value of \"%s\" is not a string", it->string);
            goto out;
        }
        if (strcmp(it->string, "sign") != 0 &&
            pt_form_add(&f, it->string, it->valuestring) != PT_OK) {
            pt__cli_usage(a, "params.json: too many parameters");
            goto out;
        }
    }
    if (pt__cli_key(a, "--key", a->key, &key))
        goto out;
    size_t slen = 0;
    char *sts = pt_alipay_string_to_sign(&f, PT_ALIPAY_REQUEST, &slen);
    rc = PT_GW_CLI_FAIL;
    if (sts && pt_alipay_sign_form(key, &f, PT_ALIPAY_REQUEST) == PT_OK) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "string_to_sign", sts);
        cJSON_AddStringToObject(o, "sign", pt_form_get(&f, "sign"));
        *out = o;
        rc = PT_GW_CLI_OK;
    }
    free(sts);
out:
    cJSON_Delete(j);
    pt_form_free(&f);
    pt_pk_free(key);
    return rc;
}

static void form_to_json(cJSON *o, const struct pt_form *f)
{
    cJSON *p = cJSON_AddObjectToObject(o, "params");
    for (size_t i = 0; i < f->n; i++)
        cJSON_AddStringToObject(p, f->pairs[i].key, f->pairs[i].value);
}

static int verify_alipay_response(struct pt_gw_cli *a, struct pt_pk *pub, const char *in,
                                  size_t len, cJSON **out)
{
    const char *raw;
    size_t rawlen;
    if (pt__cli_need(a, a->method, "--method (the alipay.trade.xxx the response answers)"))
        return PT_GW_CLI_USAGE;
    int rc = pt_alipay_verify_response(pub, in, len, a->method, &raw, &rawlen);
    if (rc != PT_OK)
        return pt__cli_invalid(out, rc == PT_ESIG ? "signature does not verify"
                                                  : "not an Alipay response to that method");
    cJSON *o = cJSON_CreateObject();
    cJSON_AddTrueToObject(o, "valid");
    cJSON_AddItemToObject(o, "response", cJSON_ParseWithLength(raw, rawlen));
    *out = o;
    return PT_GW_CLI_OK;
}

int pt__cli_verify_alipay(struct pt_gw_cli *a, char *in, size_t len, cJSON **out)
{
    struct pt_pk *pub = NULL;
    struct pt_form f;
    if (pt__cli_key(a, "--pubkey", a->pubkey, &pub))
        return PT_GW_CLI_USAGE;
    int rc;
    pt__cli_trim(in, &len);
    if (len && in[0] == '{') {
        rc = verify_alipay_response(a, pub, in, len, out);
        pt_pk_free(pub);
        return rc;
    }
    pt_form_init(&f);
    if (pt_form_parse(in, len, &f) != PT_OK) {
        rc = pt__cli_invalid(out, "not a form-encoded notification body");
    } else if (pt_alipay_verify_form(pub, &f, PT_ALIPAY_NOTIFY) != PT_OK) {
        rc = pt__cli_invalid(out, "signature does not verify");
    } else {
        struct pt_gw_config cfg = {.peer_key = pub};
        struct pt_http_response msg = {.status = 200, .body = in, .body_len = len};
        struct pt_notification n;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddTrueToObject(o, "valid");
        form_to_json(o, &f);
        pt__cli_notification(o, pt_gateway_alipay.parse_notify(&cfg, &msg, NULL, &n), &n);
        *out = o;
        rc = PT_GW_CLI_OK;
    }
    pt_form_free(&f);
    pt_pk_free(pub);
    return rc;
}
