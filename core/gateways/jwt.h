/*
 * jwt.h - compact JWS with HMAC-SHA256 (JWT "HS256"), as 2C2P uses it.
 *
 * 2C2P PGW 4.3 wraps every request, response and notification in a JWT signed
 * with the merchant's secret key.  Only HS256 is accepted when verifying: a
 * token announcing "none", another HMAC size or an RSA algorithm is refused,
 * so an attacker cannot choose the algorithm (the classic JWT confusion).
 */
#ifndef PT_JWT_H
#define PT_JWT_H

#include <stddef.h>

/* Longest token accepted (2C2P's are well under 4 KiB). */
#define PT_JWT_MAX (32 * 1024)

/*
 * Signs payload (JSON text, plen bytes, used as is) with header
 * {"alg":"HS256","typ":"JWT"} - byte for byte what jsonwebtoken produces for
 * the same payload text.  The HMAC key is the keylen bytes at key (2C2P: the
 * secret string's bytes, not hex-decoded).  *token is malloc'd (caller frees).
 * PT_OK, PT_ETOOBIG, PT_ENOMEM, PT_ECRYPTO.
 */
int pt_jwt_hs256_sign(const void *key, size_t keylen, const char *payload, size_t plen,
                      char **token);

/*
 * Verifies token (len bytes).  On PT_OK *payload gets the decoded payload
 * text (malloc'd, NUL-terminated, caller frees) and *plen its length (may be
 * NULL).  PT_ESIG: signature wrong or algorithm other than HS256;
 * PT_EPARSE: not three base64url parts, or a header that is not a JSON
 * object; PT_ETOOBIG, PT_ENOMEM.
 */
int pt_jwt_hs256_verify(const void *key, size_t keylen, const char *token, size_t len,
                        char **payload, size_t *plen);

#endif
