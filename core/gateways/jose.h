/*
 * jose.h - compact JWE (RSA-OAEP + A256GCM) and JWS (PS256), and the nested
 * token 2C2P's Payment Maintenance API is spoken in.
 *
 * 2C2P's "JWE + JWS with Keys" guide: a request is encrypted to 2C2P's RSA
 * public key (JWE, alg RSA-OAEP, enc A256GCM) and the compact JWE is then
 * signed with the merchant's RSA private key (JWS, alg PS256) - the JWS
 * payload is the JWE's compact text.  An answer is the mirror image:
 * signed by 2C2P, encrypted to the merchant.  RFC 7516 (JWE), RFC 7515
 * (JWS), RFC 7518 (the algorithms: RSA-OAEP is SHA-1 with MGF1-SHA-1, PS256
 * is SHA-256 with MGF1-SHA-256 and a 32-byte salt, A256GCM takes a 96-bit
 * IV and the ASCII of the encoded protected header as its AAD).
 *
 * The readers take exactly these algorithms: a JWS whose alg is not PS256,
 * a JWE whose alg/enc are not RSA-OAEP/A256GCM, a "zip" (compression)
 * or a "crit" member (extensions we would have to understand) is refused,
 * so the algorithm is never the sender's choice.  The JWS is verified
 * before the JWE inside it is decrypted, and a content key that does not
 * decrypt is replaced by a random one (RFC 7516 section 11.5), so a bad key
 * and a bad tag fail the same way.
 *
 * The writers put out {"alg":"RSA-OAEP","enc":"A256GCM"} and
 * {"alg":"PS256","typ":"JWT"} - the headers of 2C2P's own sample tokens -
 * and any JOSE implementation opens them (tests/vectors/2c2p_pm.json,
 * made with the npm `jose` library, proves both directions).
 */
#ifndef PT_JOSE_H
#define PT_JOSE_H

#include <stddef.h>

#include "crypto.h"

/* Longest token accepted or made: 2C2P's answers are a few KiB. */
#define PT_JOSE_MAX (64 * 1024)

/*
 * Why a token did not open (the JOSE functions' error codes):
 *   PT_EPARSE        not a compact token of the right number of parts,
 *                    bad base64url, a header that is not a JSON object
 *   PT_EUNSUPPORTED  an algorithm, "zip" or "crit" this reader refuses
 *   PT_ESIG          the signature does not verify / the JWE does not
 *                    decrypt (wrong key, tampered)
 *   PT_ETOOBIG       over PT_JOSE_MAX
 * pt_jose_why() says it in a sentence.
 */
const char *pt_jose_why(int rc);

/*
 * Encrypts len bytes at text to `to` (its public half) into a compact JWE;
 * rnd (NULL: to's own DRBG) gives the content key, the IV and the OAEP
 * seed.  *token is malloc'd, NUL-terminated (caller frees), *tlen its
 * length (may be NULL).  PT_OK, PT_ETOOBIG, PT_ENOMEM, PT_ECRYPTO.
 */
int pt_jwe_encrypt(struct pt_pk *to, pt_random_fn rnd, void *rnd_ctx, const void *text, size_t len,
                   char **token, size_t *tlen);

/*
 * Decrypts a compact JWE with the private key `key`.  *text (malloc'd,
 * NUL-terminated, caller frees; wiped before an error) and *tlen.  A
 * plaintext holding a NUL is refused (PT_EPARSE).  Errors as above.
 */
int pt_jwe_decrypt(struct pt_pk *key, const char *token, size_t len, char **text, size_t *tlen);

/*
 * Signs len bytes at payload with `key` into a compact JWS (PS256).  rnd
 * as for pt_jwe_encrypt (the PSS salt).  *token as there.
 */
int pt_jws_sign(struct pt_pk *key, pt_random_fn rnd, void *rnd_ctx, const void *payload, size_t len,
                char **token, size_t *tlen);

/*
 * Verifies a compact JWS (PS256 only) with `peer` and returns its decoded
 * payload in *payload (malloc'd, NUL-terminated; caller frees) and *plen.
 */
int pt_jws_verify(const struct pt_pk *peer, const char *token, size_t len, char **payload,
                  size_t *plen);

/*
 * The nested token: the JWE of text to `to`, signed by `signer`.  rnd as
 * above.  2C2P's request: signer the merchant's key, to 2C2P's public key.
 */
int pt_jose_seal(struct pt_pk *signer, struct pt_pk *to, pt_random_fn rnd, void *rnd_ctx,
                 const char *text, size_t len, char **token, size_t *tlen);

/*
 * Opens a nested token: verifies the JWS with `peer`, then decrypts the JWE
 * it carries with `key`.  Surrounding blanks and line breaks (a body read
 * from a file or an HTTP answer) are ignored.  *text as for
 * pt_jwe_decrypt.
 */
int pt_jose_open(const struct pt_pk *peer, struct pt_pk *key, const char *token, size_t len,
                 char **text, size_t *tlen);

#endif
