/* fuzz_notify_wechat.c - WeChat notification: signature, envelope JSON,
 * AES-256-GCM resource and the decrypted transaction. */
#include "fuzz_common.h"
#include "buf.h"
#include "gateways/wechat.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct pt_gw_config cfg;
static struct pt_pk *platform_key;
static const char apiv3[] = "payterm-test-apiv3-key-32-bytes!";

/* An envelope whose resource is the fuzzed plaintext, encrypted. */
static char *envelope(const uint8_t *plain, size_t len, size_t *out_len)
{
    char *ct = NULL;
    if (pt_wechat_encrypt((const unsigned char *)apiv3, 32, "fdasflkja484", "transaction",
                          (const char *)plain, len, &ct) != 0)
        return NULL;
    struct pt_buf b;
    pt_buf_init(&b, 1 << 20);
    pt_buf_puts(&b, "{\"id\":\"EV-1\",\"event_type\":\"TRANSACTION.SUCCESS\",\"resource\":{"
                    "\"algorithm\":\"AEAD_AES_256_GCM\",\"associated_data\":\"transaction\","
                    "\"nonce\":\"fdasflkja484\",\"ciphertext\":\"");
    pt_buf_puts(&b, ct);
    pt_buf_puts(&b, "\"}}");
    free(ct);
    return pt_buf_take(&b, out_len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!platform_key) {
        platform_key = fuzz_key("wechat_platform_private.pem");
        cfg.peer_key = fuzz_key("wechat_platform_public.pem");
        strcpy(cfg.platform_serial, "5157F09EFDC096DE15EBE81A47057A7232F1B8E1");
        fuzz_secret(&cfg, apiv3);
    }
    if (size < 1)
        return 0;
    struct pt_http_response msg = {.status = 200};
    size_t len = size - 1;
    char *body = NULL;
    if (data[0] & 1) {
        body = envelope(data + 1, size - 1, &len);
    } else {
        body = malloc(len + 1);
        if (body) {
            memcpy(body, data + 1, len);
            body[len] = '\0';
        }
    }
    if (!body)
        return 0;
    size_t mlen = 0;
    char sig[PT_WECHAT_SIG_MAX];
    char *m = pt_wechat_response_message("1764478800", "nonce", body, len, &mlen);
    if (m && pt_pk_sign_base64(platform_key, m, mlen, sig, sizeof sig) == 0) {
        pt_http_response_add_header(&msg, "Wechatpay-Timestamp", "1764478800");
        pt_http_response_add_header(&msg, "Wechatpay-Nonce", "nonce");
        pt_http_response_add_header(&msg, "Wechatpay-Signature", sig);
        pt_http_response_add_header(&msg, "Wechatpay-Serial", cfg.platform_serial);
        msg.body = body;
        msg.body_len = len;
        struct pt_notification n;
        struct pt_gw_env env = {.now_ms = 1764478800000};
        pt_gateway_wechat.parse_notify(&cfg, &msg, &env, &n);
        msg.body = NULL;
    }
    free(m);
    free(body);
    pt_http_response_free(&msg);
    return 0;
}
