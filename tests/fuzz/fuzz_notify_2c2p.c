/* fuzz_notify_2c2p.c - 2C2P backend notifications: the {"payload":...}
 * envelope, and (sealed by the harness) the payment result inside. */
#include "fuzz_common.h"
#include "gateways/2c2p.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct pt_gw_config cfg;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!cfg.secret_len)
        fuzz_secret(&cfg, "CD229682D3297390B9F66FF4020B758F");
    if (size < 1)
        return 0;
    struct pt_http_response msg = {.status = 200};
    if (data[0] & 1) {
        if (pt_2c2p_seal(cfg.secret, cfg.secret_len, (const char *)data + 1, size - 1, &msg.body,
                         &msg.body_len) != 0)
            return 0;
    } else {
        msg.body = malloc(size);
        if (!msg.body)
            return 0;
        memcpy(msg.body, data + 1, size - 1);
        msg.body[size - 1] = '\0';
        msg.body_len = size - 1;
    }
    struct pt_notification n;
    pt_gateway_2c2p.parse_notify(&cfg, &msg, NULL, &n);
    pt_http_response_free(&msg);
    return 0;
}
