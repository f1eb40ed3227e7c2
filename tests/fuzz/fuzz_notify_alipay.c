/* fuzz_notify_alipay.c - Alipay notification verification and parsing. */
#include "fuzz_common.h"
#include "gateways/alipay.h"
#include "gateways/form.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct pt_gw_config cfg;
static struct pt_pk *gateway_key;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!gateway_key) {
        gateway_key = fuzz_key("alipay_gateway_private.pem");
        cfg.peer_key = fuzz_key("alipay_gateway_public.pem");
    }
    if (size < 1)
        return 0;
    struct pt_http_response msg = {.status = 200};
    struct pt_notification n;
    struct pt_buf b;
    pt_buf_init(&b, 1 << 20);
    if (data[0] & 1) {
        /* re-sign the fuzzed form so its fields reach the parser */
        struct pt_form f, g;
        pt_form_init(&f);
        pt_form_init(&g);
        if (pt_form_parse((const char *)data + 1, size - 1, &f) == 0) {
            for (size_t i = 0; i < f.n; i++)
                if (strcmp(f.pairs[i].key, "sign") != 0)
                    pt_form_add(&g, f.pairs[i].key, f.pairs[i].value);
            if (pt_alipay_sign_form(gateway_key, &g, PT_ALIPAY_NOTIFY) == 0)
                pt_form_encode(&g, &b);
        }
        pt_form_free(&f);
        pt_form_free(&g);
    } else {
        pt_buf_put(&b, data + 1, size - 1);
    }
    msg.body = pt_buf_take(&b, &msg.body_len);
    if (msg.body)
        pt_gateway_alipay.parse_notify(&cfg, &msg, NULL, &n);
    free(msg.body);
    return 0;
}
