/* fuzz_wechat_v2_xml.c - the WeChat APIv2 XML reader and the payment-code
 * answer parser.  data[0] picks the call (micropay, orderquery, reverse);
 * the rest is an answer body.  It is read as it is (the reader and the
 * signature check), and a document the reader accepts is also signed with
 * the merchant's APIv2 key and written again, so the classifier behind the
 * check sees it too.  Whatever the writer writes must read back as the same
 * fields (a value can never close its CDATA section). */
#include "fuzz_common.h"
#include "err.h"
#include "gateways/wechat.h"
#include "gateways/wechat_v2.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char key[] = "payterm-test-apiv2-key-32-chars!";

static void classify(const struct pt_gw_config *cfg, enum pt_gw_op op, char *body, size_t len)
{
    struct pt_charge c = {0};
    strcpy(c.gateway, "wechat");
    strcpy(c.method, "barcode");
    strcpy(c.order_id, "WXV2-20251201-0001");
    strcpy(c.currency, "CNY");
    c.amount = 8888;
    struct pt_http_response resp = {.status = 200, .body = body, .body_len = len};
    struct pt_gw_result r;
    pt_gateway_wechat.parse(cfg, op, &c, &resp, &r);
    if (r.outcome != PT_OUTCOME_AMBIGUOUS && strcmp(r.code, "invalid_signature") == 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct pt_gw_config cfg;
    if (!cfg.apiv2_key_len) {
        strcpy(cfg.name, "wechat");
        strcpy(cfg.app_id, "wxd678efh567hg6787");
        strcpy(cfg.merchant_id, "1900000001");
        memcpy(cfg.apiv2_key, key, 32);
        cfg.apiv2_key_len = 32;
    }
    if (size < 1)
        return 0;
    enum pt_gw_op op = (enum pt_gw_op)(data[0] % 3);
    size_t len = size - 1;
    char *body = malloc(len + 1);
    if (!body)
        return 0;
    memcpy(body, data + 1, len);
    body[len] = '\0';
    classify(&cfg, op, body, len); /* as it came: almost always unsigned */

    struct pt_wxv2_msg m;
    if (pt_wxv2_parse(body, len, &m) == PT_OK) {
        struct pt_wxv2_field f[PT_WXV2_FIELDS_MAX + 1];
        int n = 0;
        for (int i = 0; i < m.n; i++)
            if (strcmp(m.f[i].name, "sign") != 0)
                f[n++] = m.f[i];
        char sign[PT_WXV2_SIGN_MAX], *xml = NULL;
        size_t xlen = 0;
        if (pt_wxv2_sign(PT_WXV2_HMAC_SHA256, cfg.apiv2_key, 32, f, (size_t)n, sign) == PT_OK) {
            f[n++] = (struct pt_wxv2_field){"sign", sign};
            /* CR is valid in an answer but the writer refuses it. */
            if (pt_wxv2_xml(f, (size_t)n, &xml, &xlen) == PT_OK) {
                struct pt_wxv2_msg back;
                if (pt_wxv2_parse(xml, xlen, &back) != PT_OK || back.n != n)
                    abort();
                for (int i = 0; i < n; i++)
                    if (strcmp(back.f[i].name, f[i].name) || strcmp(back.f[i].value, f[i].value))
                        abort();
                if (pt_wxv2_verify(cfg.apiv2_key, 32, &back) != PT_OK)
                    abort();
                pt_wxv2_msg_free(&back);
                classify(&cfg, op, xml, xlen);
            }
        }
        free(xml);
    }
    pt_wxv2_msg_free(&m);
    free(body);
    return 0;
}
