/*
 * jwt.c - HS256 JSON Web Tokens (see jwt.h).
 */
#include "jwt.h"
#include "buf.h"
#include "crypto.h"
#include "err.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* base64url of {"alg":"HS256","typ":"JWT"} */
#define JWT_HS256_HEADER "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"

int pt_jwt_hs256_sign(const void *key, size_t keylen, const char *payload, size_t plen,
                      char **token)
{
    int rc = PT_ETOOBIG;
    struct pt_buf b;
    unsigned char mac[32];
    char *enc = NULL;
    if (plen > PT_JWT_MAX)
        return PT_ETOOBIG;
    size_t enclen = PT_BASE64_LEN(plen);
    enc = malloc(enclen);
    if (!enc)
        return PT_ENOMEM;
    pt_buf_init(&b, PT_JWT_MAX * 2);
    if (pt_base64url_encode(payload, plen, enc, enclen, NULL) != PT_OK)
        goto out;
    pt_buf_puts(&b, JWT_HS256_HEADER ".");
    pt_buf_puts(&b, enc);
    rc = PT_ENOMEM;
    if (b.failed)
        goto out;
    rc = pt_hmac_sha256(key, keylen, b.p, b.len, mac);
    if (rc != PT_OK)
        goto out;
    char sig[PT_BASE64_LEN(32)];
    pt_base64url_encode(mac, sizeof mac, sig, sizeof sig, NULL);
    pt_buf_putc(&b, '.');
    pt_buf_puts(&b, sig);
    *token = pt_buf_take(&b, NULL);
    rc = *token ? PT_OK : PT_ENOMEM;
out:
    pt_zeroize(mac, sizeof mac);
    free(enc);
    pt_buf_free(&b, 0);
    return rc;
}

/* Checks the decoded header: a JSON object whose "alg" is exactly "HS256". */
static int check_header(const char *b64, size_t len)
{
    int rc = PT_EPARSE;
    unsigned char hdr[512];
    size_t n = 0;
    if (len >= PT_BASE64_LEN(sizeof hdr - 1) ||
        pt_base64url_decode(b64, len, hdr, sizeof hdr - 1, &n) != PT_OK)
        return PT_EPARSE;
    hdr[n] = '\0';
    cJSON *h = cJSON_ParseWithLength((const char *)hdr, n);
    if (!cJSON_IsObject(h))
        goto out;
    const cJSON *alg = cJSON_GetObjectItemCaseSensitive(h, "alg");
    rc = PT_ESIG;
    /* "crit" names extensions we would have to understand: refuse them. */
    if (cJSON_IsString(alg) && strcmp(alg->valuestring, "HS256") == 0 &&
        !cJSON_GetObjectItemCaseSensitive(h, "crit"))
        rc = PT_OK;
out:
    cJSON_Delete(h);
    return rc;
}

static int check_mac(const void *key, size_t keylen, const char *token, size_t signed_len,
                     const char *sig, size_t siglen)
{
    unsigned char mac[32], got[48];
    size_t n = 0;
    int rc = PT_ESIG;
    if (siglen != 43 || pt_base64url_decode(sig, siglen, got, sizeof got, &n) != PT_OK || n != 32)
        return PT_ESIG;
    if (pt_hmac_sha256(key, keylen, token, signed_len, mac) != PT_OK)
        return PT_ECRYPTO;
    if (pt_ct_equal(mac, got, 32))
        rc = PT_OK;
    pt_zeroize(mac, sizeof mac);
    return rc;
}

int pt_jwt_hs256_verify(const void *key, size_t keylen, const char *token, size_t len,
                        char **payload, size_t *plen)
{
    if (len > PT_JWT_MAX)
        return PT_ETOOBIG;
    const char *dot1 = memchr(token, '.', len);
    const char *dot2 = dot1 ? memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - token)) : NULL;
    if (!dot1 || !dot2 || memchr(dot2 + 1, '.', len - (size_t)(dot2 + 1 - token)))
        return PT_EPARSE;
    size_t hlen = (size_t)(dot1 - token), blen = (size_t)(dot2 - dot1 - 1);
    size_t slen = len - (size_t)(dot2 + 1 - token);
    int rc = check_header(token, hlen);
    if (rc != PT_OK)
        return rc;
    rc = check_mac(key, keylen, token, (size_t)(dot2 - token), dot2 + 1, slen);
    if (rc != PT_OK)
        return rc;
    size_t cap = blen / 4 * 3 + 3;
    unsigned char *out = malloc(cap + 1);
    size_t n = 0;
    if (!out)
        return PT_ENOMEM;
    rc = pt_base64url_decode(dot1 + 1, blen, out, cap, &n);
    if (rc != PT_OK || memchr(out, '\0', n)) {
        free(out);
        return PT_EPARSE;
    }
    out[n] = '\0';
    *payload = (char *)out;
    if (plen)
        *plen = n;
    return PT_OK;
}
