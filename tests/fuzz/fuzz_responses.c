/* fuzz_responses.c - every adapter's response classifier, with the fuzzed
 * body signed the way each gateway signs (Alipay raw object, WeChat headers,
 * 2C2P JWT; Stripe is unsigned). */
#include "fuzz_common.h"
#include "buf.h"
#include "gateways/2c2p.h"
#include "gateways/alipay.h"
#include "gateways/stripe.h"
#include "gateways/wechat.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct pt_gw_config ali, wx, st, c2p;
static struct pt_pk *ali_gw, *wx_gw;

static void setup(void)
{
    ali_gw = fuzz_key("alipay_gateway_private.pem");
    ali.peer_key = fuzz_key("alipay_gateway_public.pem");
    wx_gw = fuzz_key("wechat_platform_private.pem");
    wx.peer_key = fuzz_key("wechat_platform_public.pem");
    strcpy(wx.platform_serial, "AB");
    fuzz_secret(&c2p, "CD229682D3297390B9F66FF4020B758F");
}

static void run(const struct pt_gateway *gw, const struct pt_gw_config *cfg, enum pt_gw_op op,
                const struct pt_charge *c, struct pt_http_response *r)
{
    struct pt_gw_result out;
    gw->parse(cfg, op, c, r, &out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ali_gw)
        setup();
    if (size < 2)
        return 0;
    enum pt_gw_op op = (enum pt_gw_op)(data[0] % 4); /* pay, query, cancel, close */
    static const int statuses[] = {200, 204, 400, 402, 404, 409, 429, 500};
    int status = statuses[data[1] % 8];
    const char *body = (const char *)data + 2;
    size_t len = size - 2;
    struct pt_charge c = {.amount = 8888, .currency = "CNY", .method = "qr", .order_id = "O-1"};
    if (data[0] & 8)
        strcpy(c.method, "barcode");

    /* Alipay: {"<method>_response":<body>,"sign":"<sig over body>"} */
    char sig[PT_BASE64_LEN(1024)];
    struct pt_buf b;
    pt_buf_init(&b, 1 << 20);
    if (pt_pk_sign_base64(ali_gw, body, len, sig, sizeof sig) == 0) {
        pt_buf_puts(&b, "{\"");
        const char *m = pt_alipay_method_name(op, c.method);
        for (; *m; m++)
            pt_buf_putc(&b, *m == '.' ? '_' : *m);
        pt_buf_puts(&b, "_response\":");
        pt_buf_put(&b, body, len);
        pt_buf_puts(&b, ",\"sign\":\"");
        pt_buf_puts(&b, sig);
        pt_buf_puts(&b, "\"}");
    }
    struct pt_http_response r = {.status = 200};
    r.body = pt_buf_take(&b, &r.body_len);
    if (r.body)
        run(&pt_gateway_alipay, &ali, op, &c, &r);
    pt_http_response_free(&r);

    /* WeChat: signed headers */
    r = (struct pt_http_response){.status = status};
    size_t mlen;
    char *msg = pt_wechat_response_message("1", "n", body, len, &mlen);
    if (msg && pt_pk_sign_base64(wx_gw, msg, mlen, sig, sizeof sig) == 0) {
        pt_http_response_add_header(&r, "Wechatpay-Timestamp", "1");
        pt_http_response_add_header(&r, "Wechatpay-Nonce", "n");
        pt_http_response_add_header(&r, "Wechatpay-Signature", sig);
        pt_http_response_add_header(&r, "Wechatpay-Serial", "ab");
        r.body = malloc(len + 1);
        if (r.body) {
            memcpy(r.body, body, len);
            r.body[len] = '\0';
            r.body_len = len;
            run(&pt_gateway_wechat, &wx, op, &c, &r);
        }
    }
    free(msg);
    pt_http_response_free(&r);

    /* Stripe: as is */
    r = (struct pt_http_response){.status = status};
    r.body = malloc(len + 1);
    if (r.body) {
        memcpy(r.body, body, len);
        r.body[len] = '\0';
        r.body_len = len;
        strcpy(c.currency, "USD");
        run(&pt_gateway_stripe, &st, op, &c, &r);
        /* 2C2P unsigned, then sealed */
        r.status = 200;
        run(&pt_gateway_2c2p, &c2p, op >= PT_GW_CANCEL ? PT_GW_QUERY : op, &c, &r);
    }
    pt_http_response_free(&r);
    r = (struct pt_http_response){.status = 200};
    if (pt_2c2p_seal(c2p.secret, c2p.secret_len, body, len, &r.body, &r.body_len) == 0)
        run(&pt_gateway_2c2p, &c2p, op == PT_GW_PAY ? PT_GW_PAY : PT_GW_QUERY, &c, &r);
    pt_http_response_free(&r);
    return 0;
}
