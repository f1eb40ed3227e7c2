/* fuzz_wechat_certs.c - WeChat Pay GET /v3/certificates answers (SPEC 8):
 * the signature by a trusted platform key, the data[] JSON, the
 * AES-256-GCM encrypt_certificate, the X.509 certificate inside and the
 * RFC 3339 times.  First byte: bit 0 set = the rest is a certificate's
 * plaintext, put into one encrypted entry (to reach the X.509 parser); clear
 * = the rest is the answer body as it comes.  Either way the body is signed
 * with the platform key, so inputs get past the signature check. */
#include "fuzz_common.h"
#include "buf.h"
#include "gateways/wechat.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct pt_gw_config cfg;
static struct pt_pk *platform_key;
static const char apiv3[] = "payterm-test-apiv3-key-32-bytes!";
static const char serial[] = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1";

/* An answer with one entry whose certificate is the fuzzed plaintext. */
static char *answer(const uint8_t *plain, size_t len, size_t *out_len)
{
    char *ct = NULL;
    if (pt_wechat_encrypt((const unsigned char *)apiv3, 32, "certnonce000", "certificate",
                          (const char *)plain, len, &ct) != 0)
        return NULL;
    struct pt_buf b;
    pt_buf_init(&b, 1 << 20);
    pt_buf_puts(&b, "{\"data\":[{\"effective_time\":\"2026-11-30T12:00:00+08:00\","
                    "\"encrypt_certificate\":{\"algorithm\":\"AEAD_AES_256_GCM\","
                    "\"associated_data\":\"certificate\",\"ciphertext\":\"");
    pt_buf_puts(&b, ct);
    pt_buf_puts(&b, "\",\"nonce\":\"certnonce000\"},\"expire_time\":\"2031-11-29T12:00:00+08:00\","
                    "\"serial_no\":\"6A1D2C3B4E5F60718293A4B5C6D7E8F901234567\"}]}");
    free(ct);
    return pt_buf_take(&b, out_len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!platform_key) {
        platform_key = fuzz_key("wechat_platform_private.pem");
        if (pt_gw_keyring_new(&cfg.peer_keys) != 0 ||
            pt_gw_keyring_add(cfg.peer_keys, serial, fuzz_key("wechat_platform_public.pem"), 0,
                              1) != 0)
            abort();
        fuzz_secret(&cfg, apiv3);
    }
    if (size < 1)
        return 0;
    size_t len = size - 1;
    char *body = NULL;
    if (data[0] & 1) {
        body = answer(data + 1, size - 1, &len);
    } else {
        body = malloc(len + 1);
        if (body) {
            memcpy(body, data + 1, len);
            body[len] = '\0';
        }
    }
    if (!body)
        return 0;
    struct pt_http_response msg = {.status = 200};
    size_t mlen = 0;
    char sig[PT_WECHAT_SIG_MAX];
    char *m = pt_wechat_response_message("1796090400", "nonce", body, len, &mlen);
    if (m && pt_pk_sign_base64(platform_key, m, mlen, sig, sizeof sig) == 0) {
        pt_http_response_add_header(&msg, "Wechatpay-Timestamp", "1796090400");
        pt_http_response_add_header(&msg, "Wechatpay-Nonce", "nonce");
        pt_http_response_add_header(&msg, "Wechatpay-Signature", sig);
        pt_http_response_add_header(&msg, "Wechatpay-Serial", serial);
        msg.body = body;
        msg.body_len = len;
        struct pt_gw_peer_cert certs[PT_GW_MAX_PEER_KEYS];
        struct pt_gw_env env = {.now_ms = 1796090400000};
        int n = 0;
        if (pt_gateway_wechat.parse_keys(&cfg, &msg, &env, certs, PT_GW_MAX_PEER_KEYS, &n) == 0)
            pt_gw_peer_certs_free(certs, n);
        msg.body = NULL;
    }
    free(m);
    free(body);
    pt_http_response_free(&msg);
    return 0;
}
