/*
 * crypto.c - mbedTLS-backed primitives (see crypto.h).
 *
 * The only file in payterm that calls mbedTLS's crypto APIs directly; every
 * mbedTLS return code is translated to a pt_err here.  The handful of calls
 * whose signatures changed between mbedTLS 2.28 and 3.x are wrapped in the
 * PT__MBEDTLS3 helpers below.
 */
#include "crypto.h"
#include "err.h"
#include "sha256hw.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/base64.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/gcm.h>
#include <mbedtls/md.h>
#include <mbedtls/pk.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/rsa.h>
#include <mbedtls/version.h>
#include <mbedtls/x509_crt.h>

#if MBEDTLS_VERSION_NUMBER >= 0x03000000
#define PT__MBEDTLS3 1
#else
#define PT__MBEDTLS3 0
#endif

/* PEM files larger than this are not keys (a 4096-bit PKCS#8 key is ~3.3 KiB,
 * a certificate with a chain a few KiB). */
#define PT_PEM_MAX (64 * 1024)

/* ---- hashes and MACs --------------------------------------------------- */

int pt_sha256(const void *data, size_t len, unsigned char out[32])
{
    if (pt_sha256hw_name()) {
        pt_sha256hw(data, len, out);
        return PT_OK;
    }
    return pt_sha256_portable(data, len, out);
}

int pt_sha1_hex(const void *data, size_t len, char out[41])
{
    unsigned char md[20];
    const mbedtls_md_info_t *info = mbedtls_md_info_from_type(MBEDTLS_MD_SHA1);
    if (!info || mbedtls_md(info, data, len, md) != 0)
        return PT_ECRYPTO;
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 20; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[40] = '\0';
    return PT_OK;
}

int pt_sha256_portable(const void *data, size_t len, unsigned char out[32])
{
    const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
    return md && mbedtls_md(md, data, len, out) == 0 ? PT_OK : PT_ECRYPTO;
}

int pt_hmac_sha256(const void *key, size_t keylen, const void *data, size_t len,
                   unsigned char out[32])
{
    const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
    if (!md)
        return PT_ECRYPTO;
    return mbedtls_md_hmac(md, key, keylen, data, len, out) == 0 ? PT_OK : PT_ECRYPTO;
}

/* ---- encodings --------------------------------------------------------- */

int pt_base64_encode(const void *in, size_t len, char *out, size_t outlen, size_t *olen)
{
    size_t n = 0;
    if (outlen < PT_BASE64_LEN(len))
        return PT_ETOOBIG;
    if (mbedtls_base64_encode((unsigned char *)out, outlen, &n, in, len) != 0)
        return PT_ETOOBIG;
    out[n] = '\0';
    if (olen)
        *olen = n;
    return PT_OK;
}

static int b64_alpha(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

int pt_base64_decode(const char *in, size_t len, unsigned char *out, size_t outlen, size_t *olen)
{
    /* mbedTLS skips blanks and line breaks; a signature with either is not one
     * the gateway sent, so the alphabet and padding are checked first. */
    if (len % 4 != 0)
        return PT_EPARSE;
    size_t pad = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c == '=') {
            pad++;
            continue;
        }
        if (pad || !(b64_alpha(c) || c == '+' || c == '/'))
            return PT_EPARSE;
    }
    if (pad > 2)
        return PT_EPARSE;
    size_t need = len / 4 * 3 - pad;
    if (need > outlen)
        return PT_ETOOBIG;
    size_t n = 0;
    if (mbedtls_base64_decode(out, outlen, &n, (const unsigned char *)in, len) != 0)
        return PT_EPARSE;
    *olen = n;
    return PT_OK;
}

int pt_base64url_encode(const void *in, size_t len, char *out, size_t outlen, size_t *olen)
{
    size_t n;
    int rc = pt_base64_encode(in, len, out, outlen, &n);
    if (rc != PT_OK)
        return rc;
    while (n > 0 && out[n - 1] == '=')
        n--;
    out[n] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (out[i] == '+')
            out[i] = '-';
        else if (out[i] == '/')
            out[i] = '_';
    }
    if (olen)
        *olen = n;
    return PT_OK;
}

int pt_base64url_decode(const char *in, size_t len, unsigned char *out, size_t outlen, size_t *olen)
{
    if (len % 4 == 1 || len > SIZE_MAX / 2)
        return PT_EPARSE;
    size_t padded = (len + 3) / 4 * 4;
    char *tmp = malloc(padded + 1);
    if (!tmp)
        return PT_ENOMEM;
    int rc = PT_EPARSE;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c == '-')
            tmp[i] = '+';
        else if (c == '_')
            tmp[i] = '/';
        else if (b64_alpha(c))
            tmp[i] = (char)c;
        else
            goto out; /* '+', '/', '=' and blanks are not base64url */
    }
    for (size_t i = len; i < padded; i++)
        tmp[i] = '=';
    rc = pt_base64_decode(tmp, padded, out, outlen, olen);
out:
    pt_zeroize(tmp, padded);
    free(tmp);
    return rc;
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

int pt_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int pt_hex_decode(const char *in, size_t len, unsigned char *out, size_t outlen, size_t *olen)
{
    if (len % 2)
        return PT_EPARSE;
    if (len / 2 > outlen)
        return PT_ETOOBIG;
    for (size_t i = 0; i < len; i += 2) {
        int hi = pt_hex_digit(in[i]), lo = pt_hex_digit(in[i + 1]);
        if (hi < 0 || lo < 0)
            return PT_EPARSE;
        out[i / 2] = (unsigned char)(hi << 4 | lo);
    }
    *olen = len / 2;
    return PT_OK;
}

/* ---- comparison and wiping --------------------------------------------- */

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
    if (p)
        mbedtls_platform_zeroize(p, len);
}

/* ---- randomness -------------------------------------------------------- */

struct pt_drbg {
    mbedtls_ctr_drbg_context ctr;
    mbedtls_entropy_context *entropy; /* only when no pt_random_fn was given */
    pt_random_fn fn;
    void *fn_ctx;
    pthread_mutex_t mu;
};

static int drbg_entropy(void *p, unsigned char *buf, size_t len)
{
    struct pt_drbg *d = p;
    return d->fn(d->fn_ctx, buf, len) == PT_OK ? 0 : MBEDTLS_ERR_CTR_DRBG_ENTROPY_SOURCE_FAILED;
}

int pt_drbg_new(pt_random_fn fn, void *ctx, const char *personal, struct pt_drbg **out)
{
    int rc = PT_ENOMEM;
    struct pt_drbg *d = calloc(1, sizeof *d);
    if (!d)
        return PT_ENOMEM;
    mbedtls_ctr_drbg_init(&d->ctr);
    if (pthread_mutex_init(&d->mu, NULL) != 0) {
        free(d);
        return PT_ENOMEM;
    }
    int (*f_entropy)(void *, unsigned char *, size_t) = drbg_entropy;
    void *p_entropy = d;
    if (fn) {
        d->fn = fn;
        d->fn_ctx = ctx;
    } else {
        d->entropy = calloc(1, sizeof *d->entropy);
        if (!d->entropy)
            goto out;
        mbedtls_entropy_init(d->entropy);
        f_entropy = mbedtls_entropy_func;
        p_entropy = d->entropy;
    }
    rc = PT_ECRYPTO;
    const unsigned char *pers = (const unsigned char *)(personal ? personal : "payterm");
    if (mbedtls_ctr_drbg_seed(&d->ctr, f_entropy, p_entropy, pers, strlen((const char *)pers)) != 0)
        goto out;
    *out = d;
    d = NULL;
    rc = PT_OK;
out:
    pt_drbg_destroy(d);
    return rc;
}

int pt_drbg_random(struct pt_drbg *d, void *buf, size_t len)
{
    int rc = PT_ECRYPTO;
    pthread_mutex_lock(&d->mu);
    /* ctr_drbg limits one request to MBEDTLS_CTR_DRBG_MAX_REQUEST bytes. */
    unsigned char *p = buf;
    while (len > 0) {
        size_t n = len > MBEDTLS_CTR_DRBG_MAX_REQUEST ? MBEDTLS_CTR_DRBG_MAX_REQUEST : len;
        if (mbedtls_ctr_drbg_random(&d->ctr, p, n) != 0)
            goto out;
        p += n;
        len -= n;
    }
    rc = PT_OK;
out:
    pthread_mutex_unlock(&d->mu);
    return rc;
}

int pt_drbg_mbedtls_rng(void *drbg, unsigned char *buf, size_t len)
{
    return pt_drbg_random(drbg, buf, len) == PT_OK ? 0 : MBEDTLS_ERR_CTR_DRBG_ENTROPY_SOURCE_FAILED;
}

void pt_drbg_destroy(struct pt_drbg *d)
{
    if (!d)
        return;
    mbedtls_ctr_drbg_free(&d->ctr);
    if (d->entropy) {
        mbedtls_entropy_free(d->entropy);
        free(d->entropy);
    }
    pthread_mutex_destroy(&d->mu);
    pt_zeroize(d, sizeof *d);
    free(d);
}

/* ---- RSA keys ---------------------------------------------------------- */

struct pt_pk {
    enum pt_pk_kind kind;
    mbedtls_pk_context key;  /* PRIVATE and PUBLIC */
    mbedtls_x509_crt crt;    /* CERT: crt.pk is the key */
    mbedtls_pk_context *ctx; /* &key or &crt.pk */
    struct pt_drbg *drbg;    /* RSA blinding */
    pthread_mutex_t mu;      /* blinding and the cached RN mutate the RSA context */
    char serial[2 * 32 + 1]; /* certificate serial, upper-case hex */
};

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void
seterr(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int parse_private(mbedtls_pk_context *ctx, const unsigned char *pem, size_t len,
                         struct pt_drbg *drbg)
{
#if PT__MBEDTLS3
    return mbedtls_pk_parse_key(ctx, pem, len, NULL, 0, pt_drbg_mbedtls_rng, drbg);
#else
    (void)drbg;
    return mbedtls_pk_parse_key(ctx, pem, len, NULL, 0);
#endif
}

static void set_serial(struct pt_pk *pk)
{
    static const char digits[] = "0123456789ABCDEF";
    size_t n = pk->crt.serial.len;
    if (n > 32)
        n = 32; /* RFC 5280 caps serials at 20 octets */
    for (size_t i = 0; i < n; i++) {
        pk->serial[2 * i] = digits[pk->crt.serial.p[i] >> 4];
        pk->serial[2 * i + 1] = digits[pk->crt.serial.p[i] & 15];
    }
    pk->serial[2 * n] = '\0';
}

/* Which PEM block the text holds; the parsers are then asked for that kind
 * only, so an error message can say what the file was supposed to be. */
static enum pt_pk_kind pem_kind(const char *text)
{
    if (strstr(text, "-----BEGIN CERTIFICATE-----"))
        return PT_PK_CERT;
    if (strstr(text, "PRIVATE KEY-----"))
        return PT_PK_PRIVATE;
    if (strstr(text, "PUBLIC KEY-----"))
        return PT_PK_PUBLIC;
    return 0;
}

/* mbedTLS's verdict mrc on the PEM text of label, which should be what
 * (in the form expect, when given): PT_OK with pk->ctx set to ctx, or
 * PT_EPARSE naming them. */
static int parsed(struct pt_pk *pk, mbedtls_pk_context *ctx, int mrc, const char *label,
                  const char *what, const char *expect, char *err, size_t errlen)
{
    if (mrc != 0) {
        seterr(err, errlen, "%s: cannot parse the %s (%s%smbedTLS error -0x%04x)", label, what,
               expect ? expect : "", expect ? " expected; " : "", (unsigned)-mrc);
        return PT_EPARSE;
    }
    pk->ctx = ctx;
    return PT_OK;
}

static int parse_into(struct pt_pk *pk, const char *label, const unsigned char *pem, size_t len,
                      char *err, size_t errlen)
{
    int mrc;
    pk->kind = pem_kind((const char *)pem);
    switch (pk->kind) {
    case PT_PK_CERT:
        mrc = mbedtls_x509_crt_parse(&pk->crt, pem, len);
        if (mrc == 0)
            set_serial(pk);
        return parsed(pk, &pk->crt.pk, mrc, label, "X.509 certificate", NULL, err, errlen);
    case PT_PK_PRIVATE:
        if (strstr((const char *)pem, "ENCRYPTED")) {
            seterr(err, errlen,
                   "%s: the private key is encrypted with a passphrase; payterm needs an "
                   "unencrypted PEM key (protect it with file mode 0600 instead)",
                   label);
            return PT_EPARSE;
        }
        mrc = parse_private(&pk->key, pem, len, pk->drbg);
        return parsed(pk, &pk->key, mrc, label, "PEM private key", "PKCS#1 or PKCS#8", err, errlen);
    case PT_PK_PUBLIC:
        mrc = mbedtls_pk_parse_public_key(&pk->key, pem, len);
        return parsed(pk, &pk->key, mrc, label, "PEM public key", "SPKI or PKCS#1", err, errlen);
    }
    seterr(err, errlen,
           "%s: no PEM key or certificate found (expected a '-----BEGIN ... KEY-----' or "
           "'-----BEGIN CERTIFICATE-----' block)",
           label);
    return PT_EPARSE;
}

/* A binary file whose first byte opens a DER SEQUENCE and that has no PEM
 * block: a certificate as a .cer file holds it (the only DER payterm
 * takes; keys come as PEM). */
static int looks_der(const unsigned char *buf, size_t len)
{
    static const char begin[] = "-----BEGIN";
    if (len < 2 || buf[0] != 0x30)
        return 0;
    for (size_t i = 0; i + sizeof begin - 1 <= len; i++)
        if (memcmp(buf + i, begin, sizeof begin - 1) == 0)
            return 0;
    return 1;
}

static int parse_der_cert(struct pt_pk *pk, const char *label, const unsigned char *der, size_t len,
                          char *err, size_t errlen)
{
    int mrc = mbedtls_x509_crt_parse_der(&pk->crt, der, len);
    if (mrc != 0) {
        seterr(err, errlen,
               "%s: not a PEM file, and not a DER X.509 certificate either (mbedTLS error "
               "-0x%04x)",
               label, (unsigned)-mrc);
        return PT_EPARSE;
    }
    pk->kind = PT_PK_CERT;
    pk->ctx = &pk->crt.pk;
    set_serial(pk);
    return PT_OK;
}

static int check_rsa(struct pt_pk *pk, const char *label, char *err, size_t errlen)
{
    if (mbedtls_pk_get_type(pk->ctx) != MBEDTLS_PK_RSA) {
        seterr(err, errlen, "%s: not an RSA key (the gateways use RSA-2048 or larger)", label);
        return PT_EPARSE;
    }
    if (mbedtls_pk_get_bitlen(pk->ctx) < 2048) {
        seterr(err, errlen, "%s: RSA key of %u bits is too small (2048 bits at least)", label,
               (unsigned)mbedtls_pk_get_bitlen(pk->ctx));
        return PT_EPARSE;
    }
    /* PKCS#1 v1.5 is the default padding of a parsed RSA key; set it anyway so
     * a future default cannot silently switch the signature scheme. */
#if PT__MBEDTLS3
    mbedtls_rsa_set_padding(mbedtls_pk_rsa(*pk->ctx), MBEDTLS_RSA_PKCS_V15, MBEDTLS_MD_NONE);
#else
    mbedtls_rsa_set_padding(mbedtls_pk_rsa(*pk->ctx), MBEDTLS_RSA_PKCS_V15, 0);
#endif
    return PT_OK;
}

int pt_pk_load_mem(const char *label, const void *pem, size_t len, pt_random_fn rnd, void *rnd_ctx,
                   struct pt_pk **out, char *err, size_t errlen)
{
    int rc = PT_ENOMEM;
    unsigned char *buf = NULL;
    if (len > PT_PEM_MAX) {
        seterr(err, errlen, "%s: %zu bytes is too large for a PEM key (at most %d)", label, len,
               PT_PEM_MAX);
        return PT_EIO;
    }
    struct pt_pk *pk = calloc(1, sizeof *pk);
    if (!pk)
        goto out;
    mbedtls_pk_init(&pk->key);
    mbedtls_x509_crt_init(&pk->crt);
    if (pthread_mutex_init(&pk->mu, NULL) != 0) {
        mbedtls_x509_crt_free(&pk->crt);
        free(pk);
        pk = NULL;
        goto out;
    }
    rc = pt_drbg_new(rnd, rnd_ctx, "payterm-rsa-blinding", &pk->drbg);
    if (rc != PT_OK) {
        seterr(err, errlen, "%s: cannot seed the random generator", label);
        goto out;
    }
    /* mbedTLS parses PEM only from a NUL-terminated buffer whose length
     * includes the NUL. */
    rc = PT_ENOMEM;
    buf = malloc(len + 1);
    if (!buf)
        goto out;
    memcpy(buf, pem, len);
    buf[len] = '\0';
    if (looks_der(buf, len)) {
        rc = parse_der_cert(pk, label, buf, len, err, errlen);
    } else if (strlen((char *)buf) != len) {
        seterr(err, errlen, "%s: contains a NUL byte; not a PEM file", label);
        rc = PT_EPARSE;
        goto out;
    } else {
        rc = parse_into(pk, label, buf, len + 1, err, errlen);
    }
    if (rc == PT_OK)
        rc = check_rsa(pk, label, err, errlen);
    if (rc == PT_OK) {
        *out = pk;
        pk = NULL;
    }
out:
    if (buf) {
        pt_zeroize(buf, len + 1);
        free(buf);
    }
    pt_pk_free(pk);
    return rc;
}

int pt_secret_read(const char *path, void *buf, size_t cap, size_t *len)
{
    /* read(2) straight into the caller's buffer: stdio would keep a copy of
     * the secret in a buffer of its own that nobody wipes. */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? PT_ENOTFOUND : PT_EIO;
    size_t n = 0;
    int rc = PT_OK;
    for (;;) {
        if (n == cap) {
            char extra;
            ssize_t r = read(fd, &extra, 1);
            if (r > 0) {
                pt_zeroize(&extra, 1);
                rc = PT_ETOOBIG;
            } else if (r < 0) {
                rc = PT_EIO;
            }
            break;
        }
        ssize_t r = read(fd, (char *)buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = PT_EIO;
            break;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    int saved = errno;
    close(fd);
    errno = saved;
    if (rc != PT_OK)
        pt_zeroize(buf, n);
    *len = rc == PT_OK ? n : 0;
    return rc;
}

int pt_secret_read_line(const char *path, void *out, size_t cap, size_t *len)
{
    assert(cap > 0);
    char *buf = out;
    size_t n = 0;
    *len = 0;
    int rc = pt_secret_read(path, buf, cap, &n);
    if (rc != PT_OK)
        return rc;
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    if (n >= cap) {
        pt_zeroize(buf, cap);
        return PT_ETOOBIG;
    }
    buf[n] = '\0';
    *len = n;
    return PT_OK;
}

int pt_pk_load_file(const char *path, pt_random_fn rnd, void *rnd_ctx, struct pt_pk **out,
                    char *err, size_t errlen)
{
    int rc = PT_EIO;
    char *buf = malloc(PT_PEM_MAX);
    if (!buf)
        return PT_ENOMEM;
    size_t n = 0;
    int r = pt_secret_read(path, buf, PT_PEM_MAX, &n);
    if (r == PT_ENOTFOUND || r == PT_EIO) {
        seterr(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        goto out;
    }
    if (r == PT_ETOOBIG) {
        seterr(err, errlen, "%s: larger than %d bytes; not a PEM key", path, PT_PEM_MAX);
        goto out;
    }
    if (n == 0) {
        seterr(err, errlen, "%s: the file is empty", path);
        rc = PT_EPARSE;
        goto out;
    }
    rc = pt_pk_load_mem(path, buf, n, rnd, rnd_ctx, out, err, errlen);
out:
    pt_zeroize(buf, PT_PEM_MAX);
    free(buf);
    return rc;
}

void pt_pk_free(struct pt_pk *pk)
{
    if (!pk)
        return;
    mbedtls_pk_free(&pk->key); /* mbedtls_rsa_free zeroizes the private parts */
    mbedtls_x509_crt_free(&pk->crt);
    pt_drbg_destroy(pk->drbg);
    pthread_mutex_destroy(&pk->mu);
    pt_zeroize(pk, sizeof *pk);
    free(pk);
}

enum pt_pk_kind pt_pk_kind(const struct pt_pk *pk)
{
    return pk->kind;
}

size_t pt_pk_size(const struct pt_pk *pk)
{
    return (mbedtls_pk_get_bitlen(pk->ctx) + 7) / 8;
}

const char *pt_pk_serial(const struct pt_pk *pk)
{
    return pk->serial;
}

static int pk_sign_hash(struct pt_pk *pk, const unsigned char hash[32], unsigned char *sig,
                        size_t sigsize, size_t *siglen)
{
#if PT__MBEDTLS3
    return mbedtls_pk_sign(pk->ctx, MBEDTLS_MD_SHA256, hash, 32, sig, sigsize, siglen,
                           pt_drbg_mbedtls_rng, pk->drbg);
#else
    (void)sigsize; /* checked by the caller: sigsize >= modulus size */
    return mbedtls_pk_sign(pk->ctx, MBEDTLS_MD_SHA256, hash, 32, sig, siglen, pt_drbg_mbedtls_rng,
                           pk->drbg);
#endif
}

int pt_pk_sign(struct pt_pk *pk, const void *msg, size_t len, unsigned char *sig, size_t sigsize,
               size_t *siglen)
{
    int rc = PT_EINVAL;
    unsigned char hash[32];
    if (pk->kind != PT_PK_PRIVATE)
        return PT_EINVAL;
    if (sigsize < pt_pk_size(pk))
        return PT_ETOOBIG;
    rc = pt_sha256(msg, len, hash);
    if (rc != PT_OK)
        return rc;
    pthread_mutex_lock(&pk->mu);
    rc = pk_sign_hash(pk, hash, sig, sigsize, siglen) == 0 ? PT_OK : PT_ECRYPTO;
    pthread_mutex_unlock(&pk->mu);
    pt_zeroize(hash, sizeof hash);
    return rc;
}

int pt_pk_sign_base64(struct pt_pk *pk, const void *msg, size_t len, char *out, size_t outlen)
{
    unsigned char sig[1024]; /* up to RSA-8192 */
    size_t siglen = 0;
    int rc = pt_pk_sign(pk, msg, len, sig, sizeof sig, &siglen);
    if (rc == PT_OK)
        rc = pt_base64_encode(sig, siglen, out, outlen, NULL);
    return rc;
}

int pt_pk_verify(const struct pt_pk *pk, const void *msg, size_t len, const unsigned char *sig,
                 size_t siglen)
{
    int rc = PT_ESIG;
    unsigned char hash[32];
    if (siglen != pt_pk_size(pk))
        return PT_ESIG; /* mbedTLS would accept a signature with trailing bytes */
    if (pt_sha256(msg, len, hash) != PT_OK)
        return PT_ESIG;
    /* The public operation caches R^2 mod N inside the context on first use. */
    struct pt_pk *m = (struct pt_pk *)pk;
    pthread_mutex_lock(&m->mu);
    if (mbedtls_pk_verify(m->ctx, MBEDTLS_MD_SHA256, hash, 32, sig, siglen) == 0)
        rc = PT_OK;
    pthread_mutex_unlock(&m->mu);
    return rc;
}

int pt_pk_verify_base64(const struct pt_pk *pk, const void *msg, size_t len, const char *sig_b64,
                        size_t b64len)
{
    unsigned char sig[1024];
    size_t siglen = 0;
    if (pt_base64_decode(sig_b64, b64len, sig, sizeof sig, &siglen) != PT_OK)
        return PT_ESIG;
    return pt_pk_verify(pk, msg, len, sig, siglen);
}

int pt_pk_probe(struct pt_pk *signer, const struct pt_pk *verifier)
{
    static const char probe[] = "payterm key probe: sign, then verify";
    unsigned char sig[1024]; /* up to RSA-8192 */
    size_t siglen = 0;
    int rc = pt_pk_sign(signer, probe, sizeof probe - 1, sig, sizeof sig, &siglen);
    if (rc == PT_ETOOBIG)
        rc = PT_ECRYPTO; /* a key of more than 8192 bits: none payterm can use */
    if (rc == PT_OK)
        rc = pt_pk_verify(verifier, probe, sizeof probe - 1, sig, siglen);
    return rc;
}

/* ---- RSA for JOSE ------------------------------------------------------- */

int pt_pk_random(struct pt_pk *pk, void *buf, size_t len)
{
    return pt_drbg_random(pk->drbg, buf, len);
}

/* A pt_random_fn in the shape mbedTLS's f_rng wants. */
struct rng_shim {
    pt_random_fn fn;
    void *ctx;
};

static int shim_rng(void *p, unsigned char *buf, size_t len)
{
    const struct rng_shim *r = p;
    return r->fn(r->ctx, buf, len) == PT_OK ? 0 : MBEDTLS_ERR_CTR_DRBG_ENTROPY_SOURCE_FAILED;
}

static int drbg_fn(void *ctx, void *buf, size_t len)
{
    return pt_drbg_random(ctx, buf, len);
}

/* The randomness of a call: the caller's, or the key's own DRBG. */
static struct rng_shim rng_of(struct pt_pk *pk, pt_random_fn rnd, void *ctx)
{
    return rnd ? (struct rng_shim){rnd, ctx} : (struct rng_shim){drbg_fn, pk->drbg};
}

/* Switches the RSA context of pk (its mutex held) to PKCS#1 v2.1 with md
 * for the encoding and MGF1, or back to v1.5 (md NONE).  mbedTLS reads the
 * OAEP and PSS hash from the context, not from the call. */
static void set_v21(struct pt_pk *pk, mbedtls_md_type_t md)
{
    mbedtls_rsa_context *rsa = mbedtls_pk_rsa(*pk->ctx);
#if PT__MBEDTLS3
    mbedtls_rsa_set_padding(
        rsa, md == MBEDTLS_MD_NONE ? MBEDTLS_RSA_PKCS_V15 : MBEDTLS_RSA_PKCS_V21, md);
#else
    mbedtls_rsa_set_padding(
        rsa, md == MBEDTLS_MD_NONE ? MBEDTLS_RSA_PKCS_V15 : MBEDTLS_RSA_PKCS_V21, (int)md);
#endif
}

int pt_pk_oaep_encrypt(struct pt_pk *pk, pt_random_fn rnd, void *rnd_ctx, const void *in,
                       size_t len, unsigned char *out, size_t outsize, size_t *outlen)
{
    size_t k = pt_pk_size(pk);
    /* OAEP with SHA-1 carries at most k - 2*20 - 2 bytes. */
    if (outsize < k || k < 42 || len > k - 42)
        return PT_ETOOBIG;
    struct rng_shim r = rng_of(pk, rnd, rnd_ctx);
    pthread_mutex_lock(&pk->mu);
    set_v21(pk, MBEDTLS_MD_SHA1);
#if PT__MBEDTLS3
    int mrc = mbedtls_rsa_rsaes_oaep_encrypt(mbedtls_pk_rsa(*pk->ctx), shim_rng, &r, NULL, 0, len,
                                             in, out);
#else
    int mrc = mbedtls_rsa_rsaes_oaep_encrypt(mbedtls_pk_rsa(*pk->ctx), shim_rng, &r,
                                             MBEDTLS_RSA_PUBLIC, NULL, 0, len, in, out);
#endif
    set_v21(pk, MBEDTLS_MD_NONE);
    pthread_mutex_unlock(&pk->mu);
    if (mrc != 0)
        return PT_ECRYPTO;
    *outlen = k;
    return PT_OK;
}

int pt_pk_oaep_decrypt(struct pt_pk *pk, const unsigned char *in, size_t len, unsigned char *out,
                       size_t outsize, size_t *outlen)
{
    if (pk->kind != PT_PK_PRIVATE)
        return PT_EINVAL;
    if (len != pt_pk_size(pk))
        return PT_ESIG; /* mbedTLS reads exactly the modulus size */
    size_t n = 0;
    pthread_mutex_lock(&pk->mu);
    set_v21(pk, MBEDTLS_MD_SHA1);
#if PT__MBEDTLS3
    int mrc = mbedtls_rsa_rsaes_oaep_decrypt(mbedtls_pk_rsa(*pk->ctx), pt_drbg_mbedtls_rng,
                                             pk->drbg, NULL, 0, &n, in, out, outsize);
#else
    int mrc =
        mbedtls_rsa_rsaes_oaep_decrypt(mbedtls_pk_rsa(*pk->ctx), pt_drbg_mbedtls_rng, pk->drbg,
                                       MBEDTLS_RSA_PRIVATE, NULL, 0, &n, in, out, outsize);
#endif
    set_v21(pk, MBEDTLS_MD_NONE);
    pthread_mutex_unlock(&pk->mu);
    if (mrc == MBEDTLS_ERR_RSA_OUTPUT_TOO_LARGE)
        return PT_ETOOBIG;
    if (mrc != 0)
        return PT_ESIG;
    *outlen = n;
    return PT_OK;
}

int pt_pk_pss_sign(struct pt_pk *pk, pt_random_fn rnd, void *rnd_ctx, const void *msg, size_t len,
                   unsigned char *sig, size_t sigsize, size_t *siglen)
{
    unsigned char hash[32];
    if (pk->kind != PT_PK_PRIVATE)
        return PT_EINVAL;
    if (sigsize < pt_pk_size(pk))
        return PT_ETOOBIG;
    int rc = pt_sha256(msg, len, hash);
    if (rc != PT_OK)
        return rc;
    struct rng_shim r = rng_of(pk, rnd, rnd_ctx);
    pthread_mutex_lock(&pk->mu);
    set_v21(pk, MBEDTLS_MD_SHA256);
    int mrc = mbedtls_rsa_rsassa_pss_sign_ext(mbedtls_pk_rsa(*pk->ctx), shim_rng, &r,
                                              MBEDTLS_MD_SHA256, 32, hash, 32, sig);
    set_v21(pk, MBEDTLS_MD_NONE);
    pthread_mutex_unlock(&pk->mu);
    pt_zeroize(hash, sizeof hash);
    if (mrc != 0)
        return PT_ECRYPTO;
    *siglen = pt_pk_size(pk);
    return PT_OK;
}

int pt_pk_pss_verify(const struct pt_pk *pk, const void *msg, size_t len, const unsigned char *sig,
                     size_t siglen)
{
    unsigned char hash[32];
    if (siglen != pt_pk_size(pk) || pt_sha256(msg, len, hash) != PT_OK)
        return PT_ESIG;
    struct pt_pk *m = (struct pt_pk *)pk; /* the public operation caches R^2 mod N */
    pthread_mutex_lock(&m->mu);
#if PT__MBEDTLS3
    int mrc = mbedtls_rsa_rsassa_pss_verify_ext(mbedtls_pk_rsa(*m->ctx), MBEDTLS_MD_SHA256, 32,
                                                hash, MBEDTLS_MD_SHA256, 32, sig);
#else
    int mrc =
        mbedtls_rsa_rsassa_pss_verify_ext(mbedtls_pk_rsa(*m->ctx), NULL, NULL, MBEDTLS_RSA_PUBLIC,
                                          MBEDTLS_MD_SHA256, 32, hash, MBEDTLS_MD_SHA256, 32, sig);
#endif
    pthread_mutex_unlock(&m->mu);
    return mrc == 0 ? PT_OK : PT_ESIG;
}

int pt_pk_probe_jose(struct pt_pk *key)
{
    static const char probe[] = "payterm key probe: PS256 and RSA-OAEP";
    unsigned char buf[1024], back[1024]; /* up to RSA-8192 */
    size_t n = 0, m = 0;
    if (key->kind != PT_PK_PRIVATE)
        return PT_EINVAL;
    int rc = pt_pk_pss_sign(key, NULL, NULL, probe, sizeof probe - 1, buf, sizeof buf, &n);
    if (rc == PT_OK)
        rc = pt_pk_pss_verify(key, probe, sizeof probe - 1, buf, n);
    if (rc == PT_OK)
        rc = pt_pk_oaep_encrypt(key, NULL, NULL, probe, sizeof probe - 1, buf, sizeof buf, &n);
    if (rc == PT_OK)
        rc = pt_pk_oaep_decrypt(key, buf, n, back, sizeof back, &m);
    if (rc == PT_OK && (m != sizeof probe - 1 || memcmp(back, probe, m) != 0))
        rc = PT_ESIG;
    return rc == PT_ETOOBIG ? PT_ECRYPTO : rc;
}

/* ---- AES-256-GCM -------------------------------------------------------- */

/* gcm set up with the AES-256 key for an IV of ivlen bytes: PT_EINVAL
 * (nothing to free) when it cannot be. */
static int gcm_start(mbedtls_gcm_context *gcm, const unsigned char key[32], size_t ivlen)
{
    if (ivlen == 0)
        return PT_EINVAL;
    mbedtls_gcm_init(gcm);
    if (mbedtls_gcm_setkey(gcm, MBEDTLS_CIPHER_ID_AES, key, 256) != 0) {
        mbedtls_gcm_free(gcm);
        return PT_EINVAL;
    }
    return PT_OK;
}

int pt_aes256gcm_decrypt(const unsigned char key[32], const unsigned char *iv, size_t ivlen,
                         const unsigned char *aad, size_t aadlen, const unsigned char *ct,
                         size_t ctlen, const unsigned char tag[PT_GCM_TAG_LEN], unsigned char *pt)
{
    mbedtls_gcm_context gcm;
    int rc = gcm_start(&gcm, key, ivlen);
    if (rc)
        return rc;
    if (mbedtls_gcm_auth_decrypt(&gcm, ctlen, iv, ivlen, aad, aadlen, tag, PT_GCM_TAG_LEN, ct,
                                 pt) != 0) {
        pt_zeroize(pt, ctlen);
        rc = PT_ESIG;
    }
    mbedtls_gcm_free(&gcm);
    return rc;
}

int pt_aes256gcm_encrypt(const unsigned char key[32], const unsigned char *iv, size_t ivlen,
                         const unsigned char *aad, size_t aadlen, const unsigned char *pt,
                         size_t ptlen, unsigned char *ct, unsigned char tag[PT_GCM_TAG_LEN])
{
    mbedtls_gcm_context gcm;
    int rc = gcm_start(&gcm, key, ivlen);
    if (rc)
        return rc;
    if (mbedtls_gcm_crypt_and_tag(&gcm, MBEDTLS_GCM_ENCRYPT, ptlen, iv, ivlen, aad, aadlen, pt, ct,
                                  PT_GCM_TAG_LEN, tag) != 0)
        rc = PT_ECRYPTO;
    mbedtls_gcm_free(&gcm);
    return rc;
}
