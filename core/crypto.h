/*
 * crypto.h - the cryptography payterm needs, on mbedTLS.
 *
 * Hashes, MACs, RSA PKCS#1 v1.5 signatures, AES-256-GCM, base64/hex and
 * constant-time comparison.  Nothing here logs, and every buffer that held a
 * secret is wiped with mbedtls_platform_zeroize before it is freed.  Written
 * against the mbedTLS 2.28 API and kept buildable against 3.x.
 */
#ifndef PT_CRYPTO_H
#define PT_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

/* SHA-256 of len bytes at data into out. PT_OK or PT_ECRYPTO. */
int pt_sha256(const void *data, size_t len, unsigned char out[32]);


/* Lower-case hex of len bytes into out (size >= 2*len+1). */
void pt_hex_encode(const unsigned char *in, size_t len, char *out);

/* Constant-time equality of two len-byte buffers: 1 when equal. */
int pt_ct_equal(const void *a, const void *b, size_t len);

/* Wipes len bytes at p so the compiler cannot skip it. */
void pt_zeroize(void *p, size_t len);

#endif
