/* fuzz_notify_stripe.c - Stripe webhook events behind a valid signature. */
#include "fuzz_common.h"
#include "gateways/stripe.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct pt_gw_config cfg;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char whsec[] = "whsec_fuzz";
    if (!cfg.webhook_secret_len) {
        memcpy(cfg.webhook_secret, whsec, sizeof whsec - 1);
        cfg.webhook_secret_len = sizeof whsec - 1;
    }
    char hdr[256];
    if (pt_stripe_sign_header(whsec, sizeof whsec - 1, 1764478800, (const char *)data, size, hdr,
                              sizeof hdr) != 0)
        return 0;
    struct pt_http_response msg = {.status = 200};
    pt_http_response_add_header(&msg, "Stripe-Signature", hdr);
    msg.body = malloc(size + 1);
    if (msg.body) {
        memcpy(msg.body, data, size);
        msg.body[size] = '\0';
        msg.body_len = size;
        struct pt_notification n;
        struct pt_gw_env env = {.now_ms = 1764478800000};
        pt_gateway_stripe.parse_notify(&cfg, &msg, &env, &n);
    }
    pt_http_response_free(&msg);
    return 0;
}
