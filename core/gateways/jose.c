/*
 * jose.c - compact JWE RSA-OAEP/A256GCM and JWS PS256 (see jose.h).
 */
#include "gateways/jose.h"
#include "buf.h"
#include "crypto.h"
#include "err.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define CEK_LEN 32 /* A256GCM */
#define IV_LEN 12  /* RFC 7518 section 5.3: a 96-bit IV */
#define HEADER_MAX 1024
#define RSA_MAX 1024 /* RSA-8192 */

static const char jwe_header[] = "{\"alg\":\"RSA-OAEP\",\"enc\":\"A256GCM\"}";
static const char jws_header[] = "{\"alg\":\"PS256\",\"typ\":\"JWT\"}";

const char *pt_jose_why(int rc)
{
    switch (rc) {
    case PT_OK:
        return "valid";
    case PT_EUNSUPPORTED:
        return "the token asks for what payterm refuses: a JWS alg other than PS256, a JWE alg/enc "
               "other than RSA-OAEP/A256GCM, \"zip\" or \"crit\"";
    case PT_ESIG:
        return "the JWS signature does not verify with the peer's key, or the JWE does not "
               "decrypt with the merchant's key";
    case PT_ETOOBIG:
        return "the token is too large";
    case PT_ENOMEM:
        return "out of memory";
    default:
        return "not a compact JWS carrying a compact JWE (malformed token)";
    }
}

/* ---- pieces ----------------------------------------------------------------- */

/* The dots of a compact token: exactly want - 1 of them, their offsets in
 * dot[] (want <= 5).  PT_OK or PT_EPARSE. */
static int split(const char *t, size_t len, int want, size_t dot[4])
{
    int n = 0;
    for (size_t i = 0; i < len; i++) {
        if (t[i] != '.')
            continue;
        if (n == want - 1)
            return PT_EPARSE;
        dot[n++] = i;
    }
    return n == want - 1 ? PT_OK : PT_EPARSE;
}

/* Decodes base64url part [from, to) of t into a malloc'd buffer with a NUL
 * after it.  PT_OK, PT_EPARSE, PT_ENOMEM. */
static int part(const char *t, size_t from, size_t to, unsigned char **out, size_t *n)
{
    size_t cap = (to - from) / 4 * 3 + 3;
    unsigned char *b = malloc(cap + 1);
    if (!b)
        return PT_ENOMEM;
    int rc = pt_base64url_decode(t + from, to - from, b, cap, n);
    if (rc != PT_OK) {
        free(b);
        return rc == PT_ENOMEM ? rc : PT_EPARSE;
    }
    b[*n] = '\0';
    *out = b;
    return PT_OK;
}

/* Appends the base64url of len bytes to b. */
static void put_b64(struct pt_buf *b, const void *data, size_t len)
{
    size_t cap = PT_BASE64_LEN(len);
    char *enc = malloc(cap);
    if (!enc || pt_base64url_encode(data, len, enc, cap, NULL) != PT_OK) {
        b->failed = 1;
        free(enc);
        return;
    }
    pt_buf_puts(b, enc);
    free(enc);
}

static const char *jstr(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int is(const char *s, const char *want)
{
    return s && strcmp(s, want) == 0;
}

/*
 * Checks a protected header (base64url [0, hlen) of t): a JSON object
 * whose alg is `alg` (and enc `enc` when not NULL), without "crit" or
 * "zip", and for a JWS without an unencoded payload ("b64": false).
 */
static int check_header(const char *t, size_t hlen, const char *alg, const char *enc)
{
    unsigned char *h = NULL;
    size_t n = 0;
    if (hlen == 0 || hlen > PT_BASE64_LEN(HEADER_MAX) || part(t, 0, hlen, &h, &n) != PT_OK)
        return PT_EPARSE;
    int rc = PT_EPARSE;
    cJSON *o = memchr(h, '\0', n) ? NULL : cJSON_ParseWithLength((const char *)h, n);
    if (!cJSON_IsObject(o))
        goto out;
    const cJSON *b64 = cJSON_GetObjectItemCaseSensitive(o, "b64");
    rc = PT_EUNSUPPORTED;
    if (!is(jstr(o, "alg"), alg) || (enc && !is(jstr(o, "enc"), enc)))
        goto out;
    if (cJSON_GetObjectItemCaseSensitive(o, "crit") || cJSON_GetObjectItemCaseSensitive(o, "zip") ||
        (b64 && !cJSON_IsTrue(b64)))
        goto out;
    rc = PT_OK;
out:
    cJSON_Delete(o);
    free(h);
    return rc;
}

static int finish_token(struct pt_buf *b, char **token, size_t *tlen)
{
    if (b->failed || b->len > PT_JOSE_MAX) {
        int rc = b->failed ? PT_ENOMEM : PT_ETOOBIG;
        pt_buf_free(b, 0);
        return rc;
    }
    *token = pt_buf_take(b, tlen);
    return *token ? PT_OK : PT_ENOMEM;
}

/* ---- JWE ------------------------------------------------------------------------ */

static int draw(struct pt_pk *pk, pt_random_fn rnd, void *ctx, void *buf, size_t len)
{
    return rnd ? rnd(ctx, buf, len) : pt_pk_random(pk, buf, len);
}

int pt_jwe_encrypt(struct pt_pk *to, pt_random_fn rnd, void *rnd_ctx, const void *text, size_t len,
                   char **token, size_t *tlen)
{
    unsigned char cek[CEK_LEN], iv[IV_LEN], tag[PT_GCM_TAG_LEN], ek[RSA_MAX];
    size_t eklen = 0;
    if (len > PT_JOSE_MAX)
        return PT_ETOOBIG;
    unsigned char *ct = malloc(len ? len : 1);
    if (!ct)
        return PT_ENOMEM;
    struct pt_buf b;
    pt_buf_init(&b, PT_JOSE_MAX + 1);
    int rc = draw(to, rnd, rnd_ctx, cek, sizeof cek);
    if (rc == PT_OK)
        rc = draw(to, rnd, rnd_ctx, iv, sizeof iv);
    if (rc == PT_OK)
        rc = pt_pk_oaep_encrypt(to, rnd, rnd_ctx, cek, sizeof cek, ek, sizeof ek, &eklen);
    if (rc != PT_OK)
        goto out;
    put_b64(&b, jwe_header, sizeof jwe_header - 1);
    /* The AAD is the ASCII of the encoded protected header (RFC 7516 5.1). */
    rc = pt_aes256gcm_encrypt(cek, iv, sizeof iv, (const unsigned char *)b.p, b.len, text, len, ct,
                              tag);
    if (rc != PT_OK)
        goto out;
    pt_buf_putc(&b, '.');
    put_b64(&b, ek, eklen);
    pt_buf_putc(&b, '.');
    put_b64(&b, iv, sizeof iv);
    pt_buf_putc(&b, '.');
    put_b64(&b, ct, len);
    pt_buf_putc(&b, '.');
    put_b64(&b, tag, sizeof tag);
    rc = finish_token(&b, token, tlen);
out:
    if (rc != PT_OK && b.p)
        pt_buf_free(&b, 0);
    pt_zeroize(cek, sizeof cek);
    pt_zeroize(ct, len);
    free(ct);
    return rc;
}

/* The content key of a JWE: OAEP-decrypted, or - when that fails - a
 * random one, so the tag check fails the same way (RFC 7516 11.5). */
static void content_key(struct pt_pk *key, const unsigned char *ek, size_t eklen,
                        unsigned char cek[CEK_LEN])
{
    unsigned char out[RSA_MAX];
    size_t n = 0;
    if (pt_pk_oaep_decrypt(key, ek, eklen, out, sizeof out, &n) == PT_OK && n == CEK_LEN)
        memcpy(cek, out, CEK_LEN);
    else if (pt_pk_random(key, cek, CEK_LEN) != PT_OK)
        memset(cek, 0xA5, CEK_LEN); /* cannot happen: the DRBG is seeded at load */
    pt_zeroize(out, sizeof out);
}

/* The five parts of a JWE, decoded. */
struct jwe_parts {
    unsigned char *ek, *iv, *ct, *tag;
    size_t eklen, ivlen, ctlen, taglen;
};

static void jwe_parts_free(struct jwe_parts *p)
{
    free(p->ek);
    free(p->iv);
    if (p->ct)
        pt_zeroize(p->ct, p->ctlen);
    free(p->ct);
    free(p->tag);
}

static int jwe_read(const char *t, size_t len, const size_t dot[4], struct jwe_parts *p)
{
    int rc = part(t, dot[0] + 1, dot[1], &p->ek, &p->eklen);
    if (rc == PT_OK)
        rc = part(t, dot[1] + 1, dot[2], &p->iv, &p->ivlen);
    if (rc == PT_OK)
        rc = part(t, dot[2] + 1, dot[3], &p->ct, &p->ctlen);
    if (rc == PT_OK)
        rc = part(t, dot[3] + 1, len, &p->tag, &p->taglen);
    if (rc == PT_OK && (p->ivlen != IV_LEN || p->taglen != PT_GCM_TAG_LEN || p->eklen > RSA_MAX))
        rc = PT_EPARSE;
    return rc;
}

int pt_jwe_decrypt(struct pt_pk *key, const char *token, size_t len, char **text, size_t *tlen)
{
    size_t dot[4];
    struct jwe_parts p = {0};
    unsigned char cek[CEK_LEN];
    if (len > PT_JOSE_MAX)
        return PT_ETOOBIG;
    int rc = split(token, len, 5, dot);
    if (rc == PT_OK)
        rc = check_header(token, dot[0], "RSA-OAEP", "A256GCM");
    if (rc == PT_OK)
        rc = jwe_read(token, len, dot, &p);
    if (rc != PT_OK)
        goto out;
    unsigned char *pt = malloc(p.ctlen + 1);
    rc = PT_ENOMEM;
    if (!pt)
        goto out;
    content_key(key, p.ek, p.eklen, cek);
    rc = pt_aes256gcm_decrypt(cek, p.iv, p.ivlen, (const unsigned char *)token, dot[0], p.ct,
                              p.ctlen, p.tag, pt);
    pt_zeroize(cek, sizeof cek);
    if (rc == PT_OK && memchr(pt, '\0', p.ctlen))
        rc = PT_EPARSE;
    if (rc != PT_OK) {
        pt_zeroize(pt, p.ctlen);
        free(pt);
        rc = rc == PT_EPARSE ? PT_EPARSE : PT_ESIG;
        goto out;
    }
    pt[p.ctlen] = '\0';
    *text = (char *)pt;
    if (tlen)
        *tlen = p.ctlen;
out:
    jwe_parts_free(&p);
    return rc;
}

/* ---- JWS ------------------------------------------------------------------------- */

int pt_jws_sign(struct pt_pk *key, pt_random_fn rnd, void *rnd_ctx, const void *payload, size_t len,
                char **token, size_t *tlen)
{
    unsigned char sig[RSA_MAX];
    size_t siglen = 0;
    if (len > PT_JOSE_MAX)
        return PT_ETOOBIG;
    struct pt_buf b;
    pt_buf_init(&b, 2 * PT_JOSE_MAX);
    put_b64(&b, jws_header, sizeof jws_header - 1);
    pt_buf_putc(&b, '.');
    put_b64(&b, payload, len);
    int rc = b.failed ? PT_ENOMEM : PT_OK;
    if (rc == PT_OK)
        rc = pt_pk_pss_sign(key, rnd, rnd_ctx, b.p, b.len, sig, sizeof sig, &siglen);
    if (rc != PT_OK) {
        pt_buf_free(&b, 0);
        return rc;
    }
    pt_buf_putc(&b, '.');
    put_b64(&b, sig, siglen);
    return finish_token(&b, token, tlen);
}

int pt_jws_verify(const struct pt_pk *peer, const char *token, size_t len, char **payload,
                  size_t *plen)
{
    size_t dot[4], n = 0;
    unsigned char *sig = NULL, *body = NULL;
    if (len > 2 * PT_JOSE_MAX)
        return PT_ETOOBIG;
    int rc = split(token, len, 3, dot);
    if (rc == PT_OK)
        rc = check_header(token, dot[0], "PS256", NULL);
    if (rc == PT_OK)
        rc = part(token, dot[1] + 1, len, &sig, &n);
    if (rc == PT_OK && pt_pk_pss_verify(peer, token, dot[1], sig, n) != PT_OK)
        rc = PT_ESIG;
    if (rc == PT_OK)
        rc = part(token, dot[0] + 1, dot[1], &body, &n);
    if (rc == PT_OK && memchr(body, '\0', n))
        rc = PT_EPARSE;
    free(sig);
    if (rc != PT_OK) {
        free(body);
        return rc;
    }
    *payload = (char *)body;
    if (plen)
        *plen = n;
    return PT_OK;
}

/* ---- the nested token -------------------------------------------------------------- */

int pt_jose_seal(struct pt_pk *signer, struct pt_pk *to, pt_random_fn rnd, void *rnd_ctx,
                 const char *text, size_t len, char **token, size_t *tlen)
{
    char *jwe = NULL;
    size_t jlen = 0;
    int rc = pt_jwe_encrypt(to, rnd, rnd_ctx, text, len, &jwe, &jlen);
    if (rc != PT_OK)
        return rc;
    rc = pt_jws_sign(signer, rnd, rnd_ctx, jwe, jlen, token, tlen);
    free(jwe);
    return rc;
}

static int blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

int pt_jose_open(const struct pt_pk *peer, struct pt_pk *key, const char *token, size_t len,
                 char **text, size_t *tlen)
{
    char *jwe = NULL;
    size_t jlen = 0;
    while (len && blank(token[0])) {
        token++;
        len--;
    }
    while (len && blank(token[len - 1]))
        len--;
    int rc = pt_jws_verify(peer, token, len, &jwe, &jlen);
    if (rc != PT_OK)
        return rc;
    rc = pt_jwe_decrypt(key, jwe, jlen, text, tlen);
    free(jwe);
    return rc;
}
