/*
 * crypto.c - mbedTLS-backed primitives (see crypto.h).
 */
#include "crypto.h"
#include "err.h"

#include <mbedtls/md.h>
#include <mbedtls/platform_util.h>

int pt_sha256(const void *data, size_t len, unsigned char out[32])
{
    const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
    return md && mbedtls_md(md, data, len, out) == 0 ? PT_OK : PT_ECRYPTO;
}

void pt_hex_encode(const unsigned char *in, size_t len, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * len] = '\0';
}

int pt_ct_equal(const void *a, const void *b, size_t len)
{
    const volatile unsigned char *x = a, *y = b;
    unsigned char diff = 0;
    for (size_t i = 0; i < len; i++)
        diff |= x[i] ^ y[i];
    return diff == 0;
}

void pt_zeroize(void *p, size_t len)
{
    mbedtls_platform_zeroize(p, len);
}
