/* fuzz_jose.c - the JOSE readers of 2C2P's Payment Maintenance envelope
 * (gateways/jose.h).  data[0] picks what the rest is:
 *   0  a whole token, opened as payterm opens 2C2P's answer (JWS, then JWE)
 *   1  a compact JWE, decrypted with the merchant's key
 *   2  a compact JWS, verified with 2C2P's certificate
 *   3  the JWE text inside a JWS that 2C2P's key really signs, so the JWE
 *      reader behind the signature check gets the fuzzer's bytes
 *   4  a plaintext, sealed and opened again: it must come back whole
 * Nothing may crash; what opens holds no NUL; a sealed text opens whole. */
#include "fuzz_common.h"
#include "err.h"
#include "gateways/jose.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct pt_pk *merchant, *merchant_pub, *gateway, *gateway_cert;

static void keys(void)
{
    if (merchant)
        return;
    merchant = fuzz_key("c2p_merchant_private.pem");
    merchant_pub = fuzz_key("c2p_merchant_public.pem");
    gateway = fuzz_key("c2p_gateway_private.pem");
    gateway_cert = fuzz_key("c2p_gateway_cert.cer");
}

static void signed_jwe(const char *jwe, size_t len)
{
    char *tok = NULL, *text = NULL;
    size_t tl = 0, n = 0;
    if (pt_jws_sign(gateway, fuzz_random, NULL, jwe, len, &tok, &tl) != PT_OK)
        return;
    if (pt_jose_open(gateway_cert, merchant, tok, tl, &text, &n) == PT_OK && strlen(text) != n)
        abort(); /* a plaintext is refused when it holds a NUL */
    free(text);
    free(tok);
}

static void round_trip(const char *text, size_t len)
{
    char *tok = NULL, *back = NULL;
    size_t tl = 0, n = 0;
    if (memchr(text, '\0', len))
        return;
    if (pt_jose_seal(gateway, merchant_pub, fuzz_random, NULL, text, len, &tok, &tl) != PT_OK)
        abort();
    if (pt_jose_open(gateway_cert, merchant, tok, tl, &back, &n) != PT_OK || n != len ||
        memcmp(back, text, len) != 0)
        abort();
    free(back);
    free(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    keys();
    if (size < 1 || size > PT_JOSE_MAX)
        return 0;
    size_t len = size - 1;
    char *in = malloc(len + 1);
    if (!in)
        return 0;
    memcpy(in, data + 1, len);
    in[len] = '\0';
    char *out = NULL;
    size_t n = 0;
    int rc = 0;
    switch (data[0] % 5) {
    case 0:
        rc = pt_jose_open(gateway_cert, merchant, in, len, &out, &n);
        break;
    case 1:
        rc = pt_jwe_decrypt(merchant, in, len, &out, &n);
        break;
    case 2:
        rc = pt_jws_verify(gateway_cert, in, len, &out, &n);
        if (rc == PT_OK && memchr(out, '\0', n))
            abort(); /* a payload holding a NUL is refused */
        break;
    case 3:
        signed_jwe(in, len);
        break;
    default:
        round_trip(in, len);
    }
    (void)rc;
    free(out);
    free(in);
    return 0;
}
