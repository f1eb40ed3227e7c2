/*
 * crypto.h - the cryptography payterm needs, on mbedTLS.
 *
 * Hashes, MACs, RSA PKCS#1 v1.5 SHA-256 signatures with PEM keys,
 * AES-256-GCM, base64/hex, a CTR-DRBG and constant-time comparison: exactly
 * what the four gateway adapters (core/gateways) and the simulator need and
 * nothing more.  Nothing here logs, and every buffer that held a secret is
 * wiped with mbedtls_platform_zeroize before it is freed.  Written against the
 * mbedTLS 2.28 API and kept buildable against 3.x (the few calls whose
 * signatures changed are wrapped in crypto.c behind MBEDTLS_VERSION_NUMBER).
 *
 * Every function returns PT_OK or a negative PT_E* code (err.h); output
 * lengths come back through size_t pointers.  NULL is accepted only where a
 * parameter comment says so.
 */
#ifndef PT_CRYPTO_H
#define PT_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

/* ---- hashes and MACs --------------------------------------------------- */

/* SHA-256 of len bytes at data into out. PT_OK or PT_ECRYPTO.  On the CPU's
 * SHA instructions when it has them (see sha256hw.c), mbedTLS otherwise. */
int pt_sha256(const void *data, size_t len, unsigned char out[32]);
/* The same, always with mbedTLS (the reference the tests hold the other to). */
int pt_sha256_portable(const void *data, size_t len, unsigned char out[32]);

/* SHA-1 of len bytes, as lower-case hex (40 chars + NUL): only where a
 * gateway names a file by it (WeChat Pay's bill hash_value); never for a
 * signature.  PT_OK or PT_ECRYPTO. */
int pt_sha1_hex(const void *data, size_t len, char out[41]);

/* HMAC-SHA256 of len bytes at data with a keylen-byte key. PT_OK or PT_ECRYPTO. */
int pt_hmac_sha256(const void *key, size_t keylen, const void *data, size_t len,
                   unsigned char out[32]);

/* ---- encodings --------------------------------------------------------- */

/* Bytes needed (NUL included) for the base64 text of n bytes (padded form). */
#define PT_BASE64_LEN(n) ((((n) + 2) / 3) * 4 + 1)

/*
 * Standard base64 (RFC 4648 section 4, with '=' padding) of len bytes into
 * out (outlen bytes, NUL-terminated).  *olen (may be NULL) gets the text
 * length.  PT_OK or PT_ETOOBIG.
 */
int pt_base64_encode(const void *in, size_t len, char *out, size_t outlen, size_t *olen);

/*
 * Decodes standard padded base64 into out (outlen bytes); *olen gets the
 * byte count.  PT_EPARSE on any character outside the alphabet (no
 * whitespace is tolerated: signatures arrive in headers and form values),
 * PT_ETOOBIG when out is too small.
 */
int pt_base64_decode(const char *in, size_t len, unsigned char *out, size_t outlen, size_t *olen);

/* URL-safe base64 without padding (RFC 4648 section 5, as JWT uses it). */
int pt_base64url_encode(const void *in, size_t len, char *out, size_t outlen, size_t *olen);
/* Strict: only [A-Za-z0-9_-], no '=', and a length that base64 can produce. */
int pt_base64url_decode(const char *in, size_t len, unsigned char *out, size_t outlen,
                        size_t *olen);

/* Lower-case hex of len bytes into out (size >= 2*len+1). */
void pt_hex_encode(const unsigned char *in, size_t len, char *out);

/* One hex digit's value (either case), or -1. */
int pt_hex_digit(char c);
/* Decodes len hex digits (either case) into out. PT_EPARSE, PT_ETOOBIG. */
int pt_hex_decode(const char *in, size_t len, unsigned char *out, size_t outlen, size_t *olen);

/* ---- comparison and wiping --------------------------------------------- */

/* Constant-time equality of two len-byte buffers: 1 when equal. */
int pt_ct_equal(const void *a, const void *b, size_t len);

/* Wipes len bytes at p so the compiler cannot skip it; p may be NULL. */
void pt_zeroize(void *p, size_t len);

/*
 * Reads a whole secret or key file into buf (at most cap bytes) without
 * stdio, so no copy is left in a buffer nobody wipes.  *len = bytes read.
 * PT_OK, PT_ENOTFOUND (no such file), PT_ETOOBIG (more than cap bytes;
 * buf wiped), PT_EIO (errno says why).
 */
int pt_secret_read(const char *path, void *buf, size_t cap, size_t *len);

/*
 * Reads a secret of one line, as operators write it: the file's bytes less
 * trailing CR/LF, then a NUL.  *len = the secret's length, 0 for an empty
 * file.  PT_ETOOBIG when that leaves more than cap - 1 bytes; otherwise as
 * pt_secret_read.  buf is wiped on every error.
 */
int pt_secret_read_line(const char *path, void *buf, size_t cap, size_t *len);

/* ---- randomness -------------------------------------------------------- */

/*
 * A source of cryptographic randomness, the same shape as
 * pt_platform.random (platform.h): fills buf with len bytes, returns PT_OK or
 * a negative code.  ctx is passed through.
 */
typedef int (*pt_random_fn)(void *ctx, void *buf, size_t len);

/*
 * A CTR-DRBG (AES-256) seeded from a pt_random_fn, safe to share between
 * threads (a mutex serialises draws).  Used for RSA blinding and nonces.
 */
struct pt_drbg;

/*
 * Creates a DRBG that draws its seed (and reseeds) from fn(ctx).  fn NULL
 * means mbedTLS's own entropy collector (getrandom on Linux), convenient for
 * tools and tests.  personal (may be NULL) is mixed into the seed.  *out is
 * freed with pt_drbg_destroy.  PT_OK, PT_ENOMEM, PT_ECRYPTO (seeding failed).
 */
int pt_drbg_new(pt_random_fn fn, void *ctx, const char *personal, struct pt_drbg **out);
/* Draws len bytes. PT_OK or PT_ECRYPTO. */
int pt_drbg_random(struct pt_drbg *d, void *buf, size_t len);
/* The mbedTLS-shaped f_rng wrapper of pt_drbg_random (for mbedtls_* calls). */
int pt_drbg_mbedtls_rng(void *drbg, unsigned char *buf, size_t len);
/* Wipes and frees; accepts NULL. */
void pt_drbg_destroy(struct pt_drbg *d);

/* ---- RSA keys ---------------------------------------------------------- */

/*
 * An RSA key loaded from PEM: a private key (PKCS#1 "RSA PRIVATE KEY" or
 * PKCS#8 "PRIVATE KEY"), a public key (SPKI "PUBLIC KEY" or PKCS#1 "RSA
 * PUBLIC KEY"), or the public key of an X.509 certificate, whose serial
 * number is then kept (WeChat names platform keys by certificate serial).
 * A certificate may also be DER (2C2P hands out its public key as a binary
 * .cer file): a file without a PEM block that parses as one.
 *
 * Signing is safe from several threads on the same key: mbedTLS's RSA
 * blinding mutates the context, so a mutex inside serialises it.  Each key
 * owns a DRBG for that blinding.
 */
struct pt_pk;

enum pt_pk_kind { PT_PK_PRIVATE = 1, PT_PK_PUBLIC = 2, PT_PK_CERT = 3 };

/* Longest error text the loaders write (file name included). */
#define PT_PK_ERR_MAX 512

/*
 * Loads a key from a PEM file.  rnd/rnd_ctx seed the key's blinding DRBG
 * (rnd NULL: mbedTLS entropy, see pt_drbg_new).  On failure returns
 * PT_EIO (cannot read: missing, unreadable, too big), PT_EPARSE (not a PEM
 * key or certificate, or not RSA), PT_ENOMEM, and writes into err (errlen
 * bytes; err may be NULL) a sentence naming the file and what is wrong.
 */
int pt_pk_load_file(const char *path, pt_random_fn rnd, void *rnd_ctx, struct pt_pk **out,
                    char *err, size_t errlen);

/*
 * Same from memory: pem (len bytes, need not be NUL-terminated).  label names
 * the source in error messages ("alipay_public_key_file", "<stdin>"...).
 */
int pt_pk_load_mem(const char *label, const void *pem, size_t len, pt_random_fn rnd, void *rnd_ctx,
                   struct pt_pk **out, char *err, size_t errlen);

/* Frees a key (wiping private material); accepts NULL. */
void pt_pk_free(struct pt_pk *pk);

/* What was loaded. */
enum pt_pk_kind pt_pk_kind(const struct pt_pk *pk);

/* Modulus size in bytes (the signature length). */
size_t pt_pk_size(const struct pt_pk *pk);

/*
 * Upper-case hex of the certificate serial (no separators, leading zero bytes
 * as in the DER), or "" when the key did not come from a certificate.  Lives
 * as long as pk.
 */
const char *pt_pk_serial(const struct pt_pk *pk);

/*
 * RSASSA-PKCS1-v1_5 with SHA-256 over len bytes at msg (deterministic: the
 * same key and message always give the same bytes).  sig gets
 * pt_pk_size(pk) bytes (sigsize must be at least that); *siglen the count.
 * PT_OK, PT_EINVAL (public key), PT_ETOOBIG, PT_ECRYPTO.  Thread-safe.
 */
int pt_pk_sign(struct pt_pk *pk, const void *msg, size_t len, unsigned char *sig, size_t sigsize,
               size_t *siglen);

/* Same, base64 (standard, padded) into out (outlen bytes, NUL-terminated). */
int pt_pk_sign_base64(struct pt_pk *pk, const void *msg, size_t len, char *out, size_t outlen);

/*
 * Verifies an RSASSA-PKCS1-v1_5 SHA-256 signature.  PT_OK only when it
 * verifies; PT_ESIG otherwise (wrong length included).  Works with any kind.
 */
int pt_pk_verify(const struct pt_pk *pk, const void *msg, size_t len, const unsigned char *sig,
                 size_t siglen);

/* Same with a base64 signature (sig_b64, b64len bytes); bad base64 -> PT_ESIG. */
int pt_pk_verify_base64(const struct pt_pk *pk, const void *msg, size_t len, const char *sig_b64,
                        size_t b64len);

/*
 * Signs a fixed probe message with signer and verifies the signature with
 * verifier: the same key (does it sign at all), or a public key or
 * certificate (is it signer's public half).  PT_OK when it verifies;
 * PT_EINVAL when signer is not a private key; PT_ECRYPTO when signing
 * fails; PT_ESIG when the signature does not verify.
 */
int pt_pk_probe(struct pt_pk *signer, const struct pt_pk *verifier);

/* ---- RSA for JOSE (JWE RSA-OAEP, JWS PS256) ------------------------------ */

/*
 * 2C2P's Payment Maintenance API wraps its messages in JOSE (jose.h): the
 * content key of a JWE is encrypted with RSAES-OAEP as RFC 7518 section
 * 4.3 defines "RSA-OAEP" (SHA-1, MGF1 with SHA-1, empty label), and the JWS
 * is RSASSA-PSS as section 3.5 defines "PS256" (SHA-256, MGF1 with SHA-256,
 * a 32-byte salt).  The padding is chosen per call under the key's mutex
 * and put back to PKCS#1 v1.5 afterwards, so one key may serve both kinds
 * of signature.
 *
 * Randomness (the OAEP seed, the PSS salt, RSA blinding) comes from
 * rnd(rnd_ctx); rnd NULL means the key's own DRBG.  A fixed rnd makes the
 * output reproducible, which is how the test vectors pin it.
 */

/* Draws len bytes from the key's own DRBG.  PT_OK or PT_ECRYPTO. */
int pt_pk_random(struct pt_pk *pk, void *buf, size_t len);

/*
 * RSA-OAEP encryption of len bytes at in to pk's public half (any kind of
 * key).  out gets pt_pk_size(pk) bytes (outsize at least that); *outlen
 * the count.  PT_OK, PT_ETOOBIG (out too small, or in too long for the
 * key: 2048 bits take at most 214 bytes), PT_ECRYPTO.  Thread-safe.
 */
int pt_pk_oaep_encrypt(struct pt_pk *pk, pt_random_fn rnd, void *rnd_ctx, const void *in,
                       size_t len, unsigned char *out, size_t outsize, size_t *outlen);

/*
 * RSA-OAEP decryption with a private key.  in must be exactly
 * pt_pk_size(pk) bytes.  PT_OK with *outlen bytes in out; PT_EINVAL (not a
 * private key); PT_ESIG (does not decrypt: another key's, or tampered);
 * PT_ETOOBIG (the plaintext does not fit in outsize).  Thread-safe.
 */
int pt_pk_oaep_decrypt(struct pt_pk *pk, const unsigned char *in, size_t len, unsigned char *out,
                       size_t outsize, size_t *outlen);

/*
 * RSASSA-PSS with SHA-256 and a 32-byte salt ("PS256") over len bytes at
 * msg.  sig gets pt_pk_size(pk) bytes.  PT_OK, PT_EINVAL (not a private
 * key), PT_ETOOBIG, PT_ECRYPTO.  Thread-safe.
 */
int pt_pk_pss_sign(struct pt_pk *pk, pt_random_fn rnd, void *rnd_ctx, const void *msg, size_t len,
                   unsigned char *sig, size_t sigsize, size_t *siglen);

/*
 * Verifies a PS256 signature: SHA-256, MGF1 with SHA-256 and exactly a
 * 32-byte salt, as RFC 7518 requires.  PT_OK only when it verifies;
 * PT_ESIG otherwise.  Works with any kind of key.
 */
int pt_pk_pss_verify(const struct pt_pk *pk, const void *msg, size_t len, const unsigned char *sig,
                     size_t siglen);

/*
 * What a key that must sign PS256 and decrypt RSA-OAEP has to do: a probe
 * message signed with it verifies with it, and a probe encrypted to its
 * public half decrypts with it.  PT_OK; PT_EINVAL (not a private key);
 * PT_ESIG (it signs or decrypts wrongly: a damaged key); PT_ECRYPTO.
 */
int pt_pk_probe_jose(struct pt_pk *key);

/* ---- AES-256-GCM -------------------------------------------------------- */

#define PT_GCM_TAG_LEN 16

/*
 * Decrypts ct (ctlen bytes, the 16-byte tag NOT included) with a 32-byte key,
 * an iv of ivlen bytes (WeChat uses 12) and associated data aad (aadlen, may
 * be 0/NULL), checking tag.  pt gets ctlen bytes.  PT_OK only when the tag
 * verifies; PT_ESIG when it does not (pt is then wiped); PT_EINVAL on bad
 * sizes.
 */
int pt_aes256gcm_decrypt(const unsigned char key[32], const unsigned char *iv, size_t ivlen,
                         const unsigned char *aad, size_t aadlen, const unsigned char *ct,
                         size_t ctlen, const unsigned char tag[PT_GCM_TAG_LEN], unsigned char *pt);

/* Encrypts (the simulator's side of WeChat notifications); tag gets 16 bytes. */
int pt_aes256gcm_encrypt(const unsigned char key[32], const unsigned char *iv, size_t ivlen,
                         const unsigned char *aad, size_t aadlen, const unsigned char *pt,
                         size_t ptlen, unsigned char *ct, unsigned char tag[PT_GCM_TAG_LEN]);

#endif
