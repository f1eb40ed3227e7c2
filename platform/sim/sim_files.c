/*
 * sim_files.c - the simulator's directory: keys, certificates, secrets and
 * the gateways.json config fragment.
 *
 * On first start the simulator creates everything both sides of a payment
 * need, the way the four vendors hand them out: a CA and a TLS server
 * certificate (the "gateway" hosts), Alipay's key pair and the merchant's app
 * key pair, WeChat Pay's platform key with its certificate serial and the
 * merchant's API key with its certificate (the one payterm presents for
 * mutual TLS on WeChat's /secapi/ calls; its serial names the key in APIv3
 * signatures), the APIv3 and APIv2 keys, a Stripe
 * secret key and webhook secret, a 2C2P merchant secret, and for 2C2P's
 * Payment Maintenance API (refunds) 2C2P's key pair with its certificate -
 * handed to the merchant as a binary .cer, as 2C2P's portal does - and the
 * merchant's key pair.  Later starts
 * reuse every key and secret (so payterm's config keeps working), re-issue
 * only the TLS server certificate (the listen host may have changed) and
 * rewrite gateways.json (the port and the notify base may have changed).
 *
 * Private keys and secrets are written 0600, atomically (temporary file +
 * rename), because payterm refuses secrets that others can read.  Key and
 * certificate generation uses mbedTLS directly: that is the simulator's own
 * business; signing and verifying protocol messages goes through core/crypto.
 */
#include "sim_int.h"

#include "crypto.h"
#include "err.h"
#include "gateway.h"
#include "log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mbedtls/asn1write.h>
#include <mbedtls/oid.h>
#include <mbedtls/rsa.h>
#include <mbedtls/version.h>
#include <mbedtls/x509_crt.h>

/* What payterm reads (named in gateways.json) ... */
#define F_CA_CERT "ca.pem"
#define F_ALIPAY_APP_KEY "alipay_app_private_key.pem"
#define F_ALIPAY_PUB "alipay_public_key.pem"
#define F_WX_MCH_KEY "wechat_apiclient_key.pem"
#define F_WX_PLAT_PUB "wechat_platform_public_key.pem"
#define F_WX_APIV3 "wechat_apiv3_key"
#define F_WX_APIV2 "wechat_apiv2_key"
#define F_WX_MCH_CERT "wechat_apiclient_cert.pem"
#define F_STRIPE_SK "stripe_secret_key"
#define F_STRIPE_WHSEC "stripe_webhook_secret"
#define F_2C2P_SECRET "2c2p_secret_key"
#define F_2C2P_PM_MERCHANT_KEY "2c2p_pm_merchant_private_key.pem"
#define F_2C2P_PM_CER "2c2p_pm_public.cer"
#define F_GATEWAYS "gateways.json"
/* ... and what only the simulated gateways hold. */
#define F_CA_KEY "ca.key"
#define F_SRV_CERT "server.pem"
#define F_SRV_KEY "server.key"
#define F_ALIPAY_KEY "alipay_private_key.pem"
#define F_ALIPAY_APP_PUB "alipay_app_public_key.pem"
#define F_WX_PLAT_KEY "wechat_platform_key.pem"
#define F_WX_PLAT_CERT "wechat_platform_cert.pem"
#define F_2C2P_PM_KEY "2c2p_pm_private_key.pem"
#define F_2C2P_PM_CERT "2c2p_pm_cert.pem"
#define F_2C2P_PM_MERCHANT_PUB "2c2p_pm_merchant_public.pem"
/* Platform keys issued by POST /_sim/rotate, N = 2, 3, ... (the first is
 * the pair above, which gateways.json keeps naming). */
#define F_WX_PLAT_KEY_N "wechat_platform_key.%d.pem"
#define F_WX_PLAT_CERT_N "wechat_platform_cert.%d.pem"

#define CA_NAME "CN=payterm gateway simulator CA,O=payterm simulator"
#define PEM_MAX 16000

/* Fixed merchant identities: they look like the vendors' own examples, and
 * being constants they survive a deleted sim.db. */
#define ALIPAY_APP_ID "9021000000000001"
#define WECHAT_MCHID "1900000109"
#define WECHAT_APPID "wxd678efh567hg6787"
#define C2P_MERCHANT_ID "JT01"

static void path_of(const struct pt_sim *s, const char *name, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/%s", s->dir, name);
}

static int exists(const struct pt_sim *s, const char *name)
{
    char p[SIM_PATH_MAX + 64];
    path_of(s, name, p, sizeof p);
    return access(p, F_OK) == 0;
}

/* Writes data atomically with mode (the temporary file is created with it, so
 * a secret is never readable by others, not even for a moment). */
static int write_file(const struct pt_sim *s, const char *name, const void *data, size_t len,
                      mode_t mode, char *err, size_t errlen)
{
    char p[SIM_PATH_MAX + 64], tmp[SIM_PATH_MAX + 80];
    path_of(s, name, p, sizeof p);
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    unlink(tmp);
    int rc = PT_EIO;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        goto out;
    const char *q = data;
    size_t left = len;
    while (left > 0) {
        ssize_t n = write(fd, q, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            goto out;
        q += n;
        left -= (size_t)n;
    }
    if (fsync(fd) != 0)
        goto out;
    close(fd);
    fd = -1;
    if (rename(tmp, p) != 0)
        goto out;
    rc = PT_OK;
out:
    if (rc != PT_OK) {
        snprintf(err, errlen, "sim: cannot write %s: %s", p, strerror(errno));
        if (fd >= 0)
            close(fd);
        unlink(tmp);
    }
    return rc;
}

static int read_secret(const struct pt_sim *s, const char *name, char *out, size_t outlen,
                       char *err, size_t errlen)
{
    char p[SIM_PATH_MAX + 64];
    path_of(s, name, p, sizeof p);
    FILE *f = fopen(p, "rb");
    if (!f) {
        snprintf(err, errlen, "sim: cannot read %s: %s", p, strerror(errno));
        return PT_EIO;
    }
    size_t n = fread(out, 1, outlen - 1, f);
    int big = fgetc(f) != EOF;
    fclose(f);
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\r' || out[n - 1] == ' '))
        n--;
    out[n] = '\0';
    if (big || n == 0) {
        snprintf(err, errlen, "sim: %s: %s", p, big ? "longer than expected" : "empty");
        pt_zeroize(out, outlen);
        return PT_EPARSE;
    }
    return PT_OK;
}

/* ---- keys ---------------------------------------------------------------- */

static int gen_rsa(struct pt_sim *s, mbedtls_pk_context *pk)
{
    if (mbedtls_pk_setup(pk, mbedtls_pk_info_from_type(MBEDTLS_PK_RSA)) != 0 ||
        mbedtls_rsa_gen_key(mbedtls_pk_rsa(*pk), pt_drbg_mbedtls_rng, s->drbg,
                            (unsigned)s->key_bits, 65537) != 0)
        return PT_ECRYPTO;
    return PT_OK;
}

static int load_pk(struct pt_sim *s, const char *name, mbedtls_pk_context *pk, char *err,
                   size_t errlen)
{
    char p[SIM_PATH_MAX + 64];
    path_of(s, name, p, sizeof p);
#if MBEDTLS_VERSION_NUMBER >= 0x03000000
    int r = mbedtls_pk_parse_keyfile(pk, p, NULL, pt_drbg_mbedtls_rng, s->drbg);
#else
    int r = mbedtls_pk_parse_keyfile(pk, p, NULL);
#endif
    if (r != 0) {
        snprintf(err, errlen, "sim: %s: not a readable PEM private key (mbedTLS -0x%04x)", p,
                 (unsigned)-r);
        return PT_EPARSE;
    }
    return PT_OK;
}

/* Makes (or loads) the private key `priv`; writes its public half to `pub`
 * when pub is not NULL and missing. */
static int key_pair(struct pt_sim *s, const char *priv, const char *pub, mbedtls_pk_context *pk,
                    int *created, char *err, size_t errlen)
{
    unsigned char *pem = calloc(1, PEM_MAX);
    int rc = PT_ENOMEM;
    *created = 0;
    if (!pem)
        goto out;
    if (exists(s, priv)) {
        if ((rc = load_pk(s, priv, pk, err, errlen)) != PT_OK)
            goto out;
    } else {
        pt_log_info("sim: generating %d-bit RSA key %s/%s", s->key_bits, s->dir, priv);
        if ((rc = gen_rsa(s, pk)) != PT_OK) {
            snprintf(err, errlen, "sim: RSA key generation for %s failed", priv);
            goto out;
        }
        rc = PT_ECRYPTO;
        if (mbedtls_pk_write_key_pem(pk, pem, PEM_MAX) != 0)
            goto out;
        if ((rc = write_file(s, priv, pem, strlen((char *)pem), 0600, err, errlen)) != PT_OK)
            goto out;
        *created = 1;
    }
    if (pub && (*created || !exists(s, pub))) {
        rc = PT_ECRYPTO;
        if (mbedtls_pk_write_pubkey_pem(pk, pem, PEM_MAX) != 0)
            goto out;
        if ((rc = write_file(s, pub, pem, strlen((char *)pem), 0644, err, errlen)) != PT_OK)
            goto out;
    }
    rc = PT_OK;
out:
    if (pem)
        pt_zeroize(pem, PEM_MAX);
    free(pem);
    if (rc != PT_OK && !err[0])
        snprintf(err, errlen, "sim: cannot prepare key %s/%s: %s", s->dir, priv, pt_strerror(rc));
    return rc;
}

/* ---- certificates -------------------------------------------------------- */

/* subjectAltName extension value: dNSName [2] and iPAddress [7] entries,
 * written back to front as mbedtls_asn1_write_* do. */
static int san_der(const char *const *dns, int ndns, const unsigned char (*ip)[16],
                   const size_t *iplen, int nip, unsigned char *buf, size_t size,
                   unsigned char **start, size_t *len)
{
    unsigned char *p = buf + size;
    size_t total = 0;
    int r;
#define ADD(call)                                                                                  \
    do {                                                                                           \
        if ((r = (call)) < 0)                                                                      \
            return PT_ETOOBIG;                                                                     \
        total += (size_t)r;                                                                        \
    } while (0)
    for (int i = nip - 1; i >= 0; i--) {
        ADD(mbedtls_asn1_write_raw_buffer(&p, buf, ip[i], iplen[i]));
        ADD(mbedtls_asn1_write_len(&p, buf, iplen[i]));
        ADD(mbedtls_asn1_write_tag(&p, buf, MBEDTLS_ASN1_CONTEXT_SPECIFIC | 7));
    }
    for (int i = ndns - 1; i >= 0; i--) {
        size_t n = strlen(dns[i]);
        ADD(mbedtls_asn1_write_raw_buffer(&p, buf, (const unsigned char *)dns[i], n));
        ADD(mbedtls_asn1_write_len(&p, buf, n));
        ADD(mbedtls_asn1_write_tag(&p, buf, MBEDTLS_ASN1_CONTEXT_SPECIFIC | 2));
    }
    ADD(mbedtls_asn1_write_len(&p, buf, total));
    ADD(mbedtls_asn1_write_tag(&p, buf, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE));
#undef ADD
    *start = p;
    *len = total;
    return PT_OK;
}

struct cert_req {
    mbedtls_pk_context *subject_key, *issuer_key;
    const char *subject, *issuer;
    int is_ca;
    const char *const *dns;
    int ndns;
    const unsigned char (*ip)[16];
    const size_t *iplen;
    int nip;
    char serial_hex[64]; /* out: upper-case hex */
};

static int issue_cert(struct pt_sim *s, struct cert_req *cr, unsigned char *pem, size_t pemlen)
{
    mbedtls_x509write_cert crt;
    unsigned char serial[16], sanbuf[1024], *san = NULL;
    size_t sanlen = 0;
    int rc = PT_ECRYPTO;
    mbedtls_x509write_crt_init(&crt);
    pt__sim_random(s, serial, sizeof serial);
    serial[0] = (unsigned char)((serial[0] & 0x7f) | 0x10); /* positive, full length */
    for (size_t i = 0; i < sizeof serial; i++)
        snprintf(cr->serial_hex + 2 * i, 3, "%02X", serial[i]);
#if MBEDTLS_VERSION_NUMBER >= 0x03040000
    if (mbedtls_x509write_crt_set_serial_raw(&crt, serial, sizeof serial) != 0)
        goto out;
#else
    mbedtls_mpi mpi;
    mbedtls_mpi_init(&mpi);
    int sr = mbedtls_mpi_read_binary(&mpi, serial, sizeof serial);
    if (sr == 0)
        sr = mbedtls_x509write_crt_set_serial(&crt, &mpi);
    mbedtls_mpi_free(&mpi);
    if (sr != 0)
        goto out;
#endif
    mbedtls_x509write_crt_set_version(&crt, MBEDTLS_X509_CRT_VERSION_3);
    mbedtls_x509write_crt_set_md_alg(&crt, MBEDTLS_MD_SHA256);
    mbedtls_x509write_crt_set_subject_key(&crt, cr->subject_key);
    mbedtls_x509write_crt_set_issuer_key(&crt, cr->issuer_key);
    /* notBefore in the past so a clock a little behind still accepts it. */
    if (mbedtls_x509write_crt_set_subject_name(&crt, cr->subject) != 0 ||
        mbedtls_x509write_crt_set_issuer_name(&crt, cr->issuer) != 0 ||
        mbedtls_x509write_crt_set_validity(&crt, "20240101000000", "20491231235959") != 0 ||
        mbedtls_x509write_crt_set_basic_constraints(&crt, cr->is_ca, cr->is_ca ? 0 : -1) != 0 ||
        mbedtls_x509write_crt_set_subject_key_identifier(&crt) != 0 ||
        mbedtls_x509write_crt_set_authority_key_identifier(&crt) != 0)
        goto out;
    if (mbedtls_x509write_crt_set_key_usage(
            &crt, cr->is_ca
                      ? MBEDTLS_X509_KU_KEY_CERT_SIGN | MBEDTLS_X509_KU_CRL_SIGN
                      : MBEDTLS_X509_KU_DIGITAL_SIGNATURE | MBEDTLS_X509_KU_KEY_ENCIPHERMENT) != 0)
        goto out;
    if (cr->ndns + cr->nip > 0) {
        if (san_der(cr->dns, cr->ndns, cr->ip, cr->iplen, cr->nip, sanbuf, sizeof sanbuf, &san,
                    &sanlen) != PT_OK ||
            mbedtls_x509write_crt_set_extension(&crt, MBEDTLS_OID_SUBJECT_ALT_NAME,
                                                MBEDTLS_OID_SIZE(MBEDTLS_OID_SUBJECT_ALT_NAME), 0,
                                                san, sanlen) != 0)
            goto out;
    }
    if (mbedtls_x509write_crt_pem(&crt, pem, pemlen, pt_drbg_mbedtls_rng, s->drbg) != 0)
        goto out;
    rc = PT_OK;
out:
    mbedtls_x509write_crt_free(&crt);
    return rc;
}

/* The TLS server certificate names every host a client may use. */
static int server_cert(struct pt_sim *s, mbedtls_pk_context *ca_key, mbedtls_pk_context *srv_key,
                       char *err, size_t errlen)
{
    const char *dns[SIM_GW__COUNT + 3];
    int ndns = 0;
    unsigned char ip[3][16];
    size_t iplen[3];
    int nip = 0;
    dns[ndns++] = "localhost";
    for (int g = 0; g < SIM_GW__COUNT; g++) {
        int dup = 0;
        for (int i = 0; i < ndns; i++)
            dup |= strcmp(dns[i], s->gw_host[g]) == 0;
        struct in6_addr a6;
        if (!dup && inet_pton(AF_INET6, s->gw_host[g], &a6) != 1 &&
            inet_pton(AF_INET, s->gw_host[g], &a6) != 1)
            dns[ndns++] = s->gw_host[g];
    }
    inet_pton(AF_INET, "127.0.0.1", ip[nip]);
    iplen[nip++] = 4;
    inet_pton(AF_INET6, "::1", ip[nip]);
    iplen[nip++] = 16;
    /* A non-loopback listen address given as a literal IP. */
    if (inet_pton(AF_INET, s->listen_host, ip[nip]) == 1 &&
        strcmp(s->listen_host, "127.0.0.1") != 0) {
        iplen[nip++] = 4;
    } else if (inet_pton(AF_INET6, s->listen_host, ip[nip]) == 1 &&
               strcmp(s->listen_host, "::1") != 0) {
        iplen[nip++] = 16;
    }
    struct cert_req cr = {.subject_key = srv_key,
                          .issuer_key = ca_key,
                          .subject = "CN=payterm gateway simulator,O=payterm simulator",
                          .issuer = CA_NAME,
                          .is_ca = 0,
                          .dns = dns,
                          .ndns = ndns,
                          .ip = (const unsigned char(*)[16])ip,
                          .iplen = iplen,
                          .nip = nip};
    size_t cap = 2 * PEM_MAX;
    unsigned char *pem = calloc(1, cap);
    char ca_path[SIM_PATH_MAX + 64];
    int rc = PT_ENOMEM;
    if (!pem)
        goto out;
    if ((rc = issue_cert(s, &cr, pem, PEM_MAX)) != PT_OK) {
        snprintf(err, errlen, "sim: cannot issue the TLS server certificate");
        goto out;
    }
    /* server.pem carries the chain (leaf, then CA), as TLS servers send it. */
    path_of(s, F_CA_CERT, ca_path, sizeof ca_path);
    FILE *f = fopen(ca_path, "rb");
    size_t used = strlen((char *)pem);
    if (!f) {
        snprintf(err, errlen, "sim: cannot read %s: %s", ca_path, strerror(errno));
        rc = PT_EIO;
        goto out;
    }
    used += fread(pem + used, 1, cap - used - 1, f);
    fclose(f);
    rc = write_file(s, F_SRV_CERT, pem, used, 0644, err, errlen);
out:
    free(pem);
    return rc;
}

/* Issues a certificate for key into name unless it exists; *serial gets the
 * serial either way (read back through core/crypto's loader). */
static int named_cert(struct pt_sim *s, const char *name, const char *subject,
                      mbedtls_pk_context *key, mbedtls_pk_context *ca_key, char *serial,
                      size_t serial_len, char *err, size_t errlen)
{
    int rc = PT_OK;
    if (!exists(s, name)) {
        unsigned char *pem = calloc(1, PEM_MAX);
        struct cert_req cr = {
            .subject_key = key, .issuer_key = ca_key, .subject = subject, .issuer = CA_NAME};
        rc = pem ? issue_cert(s, &cr, pem, PEM_MAX) : PT_ENOMEM;
        if (rc == PT_OK)
            rc = write_file(s, name, pem, strlen((char *)pem), 0644, err, errlen);
        free(pem);
        if (rc != PT_OK) {
            if (!err[0])
                snprintf(err, errlen, "sim: cannot issue certificate %s", name);
            return rc;
        }
    }
    char p[SIM_PATH_MAX + 64];
    struct pt_pk *pk = NULL;
    path_of(s, name, p, sizeof p);
    rc = pt_pk_load_file(p, NULL, NULL, &pk, err, errlen);
    if (rc == PT_OK) {
        snprintf(serial, serial_len, "%s", pt_pk_serial(pk));
        pt_pk_free(pk);
    }
    return rc;
}

/* The DER form of certificate file pem_name into der_name (a .cer). */
static int der_copy(struct pt_sim *s, const char *pem_name, const char *der_name, char *err,
                    size_t errlen)
{
    char p[SIM_PATH_MAX + 64];
    mbedtls_x509_crt crt;
    mbedtls_x509_crt_init(&crt);
    path_of(s, pem_name, p, sizeof p);
    int rc = PT_EPARSE;
    if (mbedtls_x509_crt_parse_file(&crt, p) != 0)
        snprintf(err, errlen, "sim: %s: not a readable PEM certificate", p);
    else
        rc = write_file(s, der_name, crt.raw.p, crt.raw.len, 0644, err, errlen);
    mbedtls_x509_crt_free(&crt);
    return rc;
}

/* 2C2P Payment Maintenance: 2C2P's pair and certificate (given to the
 * merchant as DER), the merchant's pair (its public half is what the
 * merchant uploads to 2C2P's portal). */
static int c2p_pm_keys(struct pt_sim *s, mbedtls_pk_context *ca, char *err, size_t errlen)
{
    mbedtls_pk_context pk;
    char p[SIM_PATH_MAX + 64], serial[64];
    int created = 0;
    mbedtls_pk_init(&pk);
    int rc = key_pair(s, F_2C2P_PM_KEY, NULL, &pk, &created, err, errlen);
    if (rc == PT_OK && created) {
        path_of(s, F_2C2P_PM_CERT, p, sizeof p);
        unlink(p);
    }
    int had_cert = exists(s, F_2C2P_PM_CERT);
    if (rc == PT_OK)
        rc = named_cert(s, F_2C2P_PM_CERT, "CN=2C2P Payment Maintenance (simulated),O=2C2P", &pk,
                        ca, serial, sizeof serial, err, errlen);
    if (rc == PT_OK && (!had_cert || !exists(s, F_2C2P_PM_CER)))
        rc = der_copy(s, F_2C2P_PM_CERT, F_2C2P_PM_CER, err, errlen);
    mbedtls_pk_free(&pk);
    mbedtls_pk_init(&pk);
    if (rc == PT_OK)
        rc =
            key_pair(s, F_2C2P_PM_MERCHANT_KEY, F_2C2P_PM_MERCHANT_PUB, &pk, &created, err, errlen);
    mbedtls_pk_free(&pk);
    return rc;
}

/* ---- secrets ------------------------------------------------------------- */

static int secret(struct pt_sim *s, const char *name, const char *prefix, size_t nrand,
                  int hex_upper, char *out, size_t outlen, char *err, size_t errlen)
{
    if (!exists(s, name)) {
        char v[160];
        size_t pl = strlen(prefix);
        memcpy(v, prefix, pl);
        if (hex_upper) {
            unsigned char r[64];
            pt__sim_random(s, r, nrand / 2);
            for (size_t i = 0; i < nrand / 2; i++)
                snprintf(v + pl + 2 * i, 3, "%02X", r[i]);
        } else {
            pt__sim_random_alnum(s, v + pl, nrand);
        }
        int rc = write_file(s, name, v, strlen(v), 0600, err, errlen);
        pt_zeroize(v, sizeof v);
        if (rc != PT_OK)
            return rc;
    }
    return read_secret(s, name, out, outlen, err, errlen);
}

/* ---- gateways.json --------------------------------------------------------- */

/* True when payterm's adapter for gateway reads config key `key`. */
static int adapter_reads(const char *gateway, const char *key)
{
    const struct pt_gateway *g = pt_gateway_find(gateway);
    for (const struct pt_gw_key *k = g ? g->config_keys : NULL; k && k->name; k++)
        if (strcmp(k->name, key) == 0)
            return 1;
    return 0;
}

static int write_gateways_json(struct pt_sim *s, char *err, size_t errlen)
{
    char url[600];
    int rc = PT_ENOMEM;
    cJSON *root = cJSON_CreateObject();
    cJSON *tls = cJSON_AddObjectToObject(root, "tls");
    cJSON *gws = cJSON_AddObjectToObject(root, "gateways");
    if (!tls || !gws)
        goto out;
    cJSON_AddStringToObject(tls, "ca_file", F_CA_CERT);

    cJSON *a = cJSON_AddObjectToObject(gws, "alipay");
    snprintf(url, sizeof url, "https://%s:%d/gateway.do", s->gw_host[SIM_GW_ALIPAY], s->port);
    cJSON_AddStringToObject(a, "endpoint", url);
    cJSON_AddStringToObject(a, "app_id", s->k.alipay_app_id);
    cJSON_AddStringToObject(a, "private_key_file", F_ALIPAY_APP_KEY);
    cJSON_AddStringToObject(a, "alipay_public_key_file", F_ALIPAY_PUB);
    snprintf(url, sizeof url, "%s/notify/alipay", s->notify_base);
    cJSON_AddStringToObject(a, "notify_url", url);

    cJSON *w = cJSON_AddObjectToObject(gws, "wechat");
    snprintf(url, sizeof url, "https://%s:%d", s->gw_host[SIM_GW_WECHAT], s->port);
    cJSON_AddStringToObject(w, "endpoint", url);
    cJSON_AddStringToObject(w, "mchid", s->k.wechat_mchid);
    cJSON_AddStringToObject(w, "appid", s->k.wechat_appid);
    cJSON_AddStringToObject(w, "serial_no", s->k.wechat_merchant_serial);
    cJSON_AddStringToObject(w, "private_key_file", F_WX_MCH_KEY);
    cJSON_AddStringToObject(w, "platform_public_key_file", F_WX_PLAT_PUB);
    cJSON_AddStringToObject(w, "platform_serial", s->k.wechat_platform_serial);
    cJSON_AddStringToObject(w, "apiv3_key_file", F_WX_APIV3);
    /* APIv2 (payment code): the HMAC key, and the API certificate that goes
     * with private_key_file for mutual TLS.  Written only when this build's
     * WeChat adapter reads them: payterm refuses unknown keys, and the
     * fragment must always load into the payterm it was built with. */
    if (adapter_reads("wechat", "apiv2_key_file"))
        cJSON_AddStringToObject(w, "apiv2_key_file", F_WX_APIV2);
    if (adapter_reads("wechat", "apiclient_cert_file"))
        cJSON_AddStringToObject(w, "apiclient_cert_file", F_WX_MCH_CERT);
    snprintf(url, sizeof url, "%s/notify/wechat", s->notify_base);
    cJSON_AddStringToObject(w, "notify_url", url);

    cJSON *st = cJSON_AddObjectToObject(gws, "stripe");
    snprintf(url, sizeof url, "https://%s:%d", s->gw_host[SIM_GW_STRIPE], s->port);
    cJSON_AddStringToObject(st, "endpoint", url);
    cJSON_AddStringToObject(st, "secret_key_file", F_STRIPE_SK);
    cJSON_AddStringToObject(st, "webhook_secret_file", F_STRIPE_WHSEC);

    cJSON *t = cJSON_AddObjectToObject(gws, "2c2p");
    snprintf(url, sizeof url, "https://%s:%d", s->gw_host[SIM_GW_2C2P], s->port);
    cJSON_AddStringToObject(t, "endpoint", url);
    cJSON_AddStringToObject(t, "merchant_id", s->k.c2p_merchant_id);
    cJSON_AddStringToObject(t, "secret_key_file", F_2C2P_SECRET);
    snprintf(url, sizeof url, "%s/notify/2c2p", s->notify_base);
    cJSON_AddStringToObject(t, "notify_url", url);
    /* Payment Maintenance (refunds), when this build's adapter reads it. */
    if (adapter_reads("2c2p", "pm_endpoint")) {
        snprintf(url, sizeof url, "https://%s:%d/PaymentAction/2.0/action", s->gw_host[SIM_GW_2C2P],
                 s->port);
        cJSON_AddStringToObject(t, "pm_endpoint", url);
        cJSON_AddStringToObject(t, "pm_private_key_file", F_2C2P_PM_MERCHANT_KEY);
        cJSON_AddStringToObject(t, "pm_public_key_file", F_2C2P_PM_CER);
    }

    char *text = cJSON_Print(root);
    if (!text)
        goto out;
    size_t n = strlen(text);
    text[n] = '\n';
    rc = write_file(s, F_GATEWAYS, text, n + 1, 0644, err, errlen);
    free(text);
out:
    cJSON_Delete(root);
    if (rc == PT_ENOMEM)
        snprintf(err, errlen, "sim: out of memory writing %s", F_GATEWAYS);
    return rc;
}

/* ---- WeChat platform key rotation ------------------------------------------- */

/* Reads a whole text file of DIR (a certificate); *out malloc'd. */
static int read_text(const struct pt_sim *s, const char *name, char **out, char *err, size_t errlen)
{
    char p[SIM_PATH_MAX + 64];
    path_of(s, name, p, sizeof p);
    FILE *f = fopen(p, "rb");
    char *buf = f ? calloc(1, PEM_MAX + 1) : NULL;
    size_t n = buf ? fread(buf, 1, PEM_MAX, f) : 0;
    if (f)
        fclose(f);
    if (!buf || n == 0 || n == PEM_MAX) {
        snprintf(err, errlen, "sim: cannot read %s", p);
        free(buf);
        return PT_EIO;
    }
    *out = buf;
    return PT_OK;
}

/* Appends the platform key file kname with its certificate cname to
 * k.wechat_certs (the rotation lock held, or at start). */
static int add_wx_cert(struct pt_sim *s, const char *kname, const char *cname, char *err,
                       size_t errlen)
{
    int n = atomic_load(&s->k.wechat_ncerts);
    if (n >= SIM_MAX_WX_CERTS) {
        snprintf(err, errlen, "sim: at most %d WeChat platform keys", SIM_MAX_WX_CERTS);
        return PT_ETOOBIG;
    }
    struct sim_wx_cert *c = &s->k.wechat_certs[n];
    char p[SIM_PATH_MAX + 64];
    struct pt_pk *crt = NULL;
    path_of(s, kname, p, sizeof p);
    int rc = pt_pk_load_file(p, NULL, NULL, &c->key, err, errlen);
    path_of(s, cname, p, sizeof p);
    if (rc == PT_OK)
        rc = pt_pk_load_file(p, NULL, NULL, &crt, err, errlen);
    if (rc == PT_OK)
        rc = read_text(s, cname, &c->pem, err, errlen);
    if (rc == PT_OK) {
        snprintf(c->serial, sizeof c->serial, "%s", pt_pk_serial(crt));
        atomic_store(&s->k.wechat_ncerts, n + 1); /* published: signers use it from now */
    } else {
        pt_pk_free(c->key);
        free(c->pem);
        memset(c, 0, sizeof *c);
    }
    pt_pk_free(crt);
    return rc;
}

/* The first platform key, then every rotated one found in DIR, in order. */
static int load_wx_certs(struct pt_sim *s, char *err, size_t errlen)
{
    int rc = add_wx_cert(s, F_WX_PLAT_KEY, F_WX_PLAT_CERT, err, errlen);
    for (int i = 2; rc == PT_OK && i <= SIM_MAX_WX_CERTS; i++) {
        char kname[64], cname[64];
        snprintf(kname, sizeof kname, F_WX_PLAT_KEY_N, i);
        snprintf(cname, sizeof cname, F_WX_PLAT_CERT_N, i);
        if (!exists(s, kname) || !exists(s, cname))
            break;
        rc = add_wx_cert(s, kname, cname, err, errlen);
    }
    return rc;
}

int pt__sim_wechat_rotate(struct pt_sim *s, char *serial, size_t serial_len, char *err,
                          size_t errlen)
{
    /* Rotations one at a time (a key takes a moment to generate); signers
     * never wait for this lock. */
    static pthread_mutex_t rotating = PTHREAD_MUTEX_INITIALIZER;
    mbedtls_pk_context ca, pk;
    unsigned char *pem = calloc(1, PEM_MAX);
    char kname[64], cname[64], cserial[64];
    int rc = PT_ENOMEM;
    err[0] = '\0';
    mbedtls_pk_init(&ca);
    mbedtls_pk_init(&pk);
    pthread_mutex_lock(&rotating);
    int n = atomic_load(&s->k.wechat_ncerts);
    if (!pem)
        goto out;
    if (n >= SIM_MAX_WX_CERTS) {
        snprintf(err, errlen, "sim: at most %d WeChat platform keys", SIM_MAX_WX_CERTS);
        rc = PT_ETOOBIG;
        goto out;
    }
    snprintf(kname, sizeof kname, F_WX_PLAT_KEY_N, n + 1);
    snprintf(cname, sizeof cname, F_WX_PLAT_CERT_N, n + 1);
    if ((rc = load_pk(s, F_CA_KEY, &ca, err, errlen)) != PT_OK)
        goto out;
    if (gen_rsa(s, &pk) != PT_OK || mbedtls_pk_write_key_pem(&pk, pem, PEM_MAX) != 0) {
        snprintf(err, errlen, "sim: RSA key generation for %s failed", kname);
        rc = PT_ECRYPTO;
        goto out;
    }
    /* The key first, its certificate last: a directory with a key but no
     * certificate is read back as not rotated (load_wx_certs). */
    char cpath[SIM_PATH_MAX + 64];
    if ((rc = write_file(s, kname, pem, strlen((char *)pem), 0600, err, errlen)) != PT_OK)
        goto out;
    path_of(s, cname, cpath, sizeof cpath);
    unlink(cpath); /* a stale one of an interrupted rotation */
    if ((rc = named_cert(s, cname, "CN=Tenpay.com platform (simulated),O=WeChat Pay", &pk, &ca,
                         cserial, sizeof cserial, err, errlen)) != PT_OK)
        goto out;
    rc = add_wx_cert(s, kname, cname, err, errlen);
    if (rc == PT_OK)
        snprintf(serial, serial_len, "%s", cserial);
out:
    pthread_mutex_unlock(&rotating);
    if (pem)
        pt_zeroize(pem, PEM_MAX);
    free(pem);
    mbedtls_pk_free(&ca);
    mbedtls_pk_free(&pk);
    if (rc != PT_OK && !err[0])
        snprintf(err, errlen, "sim: cannot rotate the WeChat platform key: %s", pt_strerror(rc));
    return rc;
}

/* ---- the whole directory ----------------------------------------------------- */

static int load_crt(struct pt_sim *s, const char *name, mbedtls_x509_crt *crt, char *err,
                    size_t errlen)
{
    char p[SIM_PATH_MAX + 64];
    path_of(s, name, p, sizeof p);
    mbedtls_x509_crt_init(crt);
    if (mbedtls_x509_crt_parse_file(crt, p) != 0) {
        snprintf(err, errlen, "sim: %s: not a readable PEM certificate", p);
        return PT_EPARSE;
    }
    return PT_OK;
}

static int load_gateway_keys(struct pt_sim *s, char *err, size_t errlen)
{
    static const struct {
        const char *file;
        size_t off;
    } keys[] = {
        {F_ALIPAY_KEY, offsetof(struct sim_keys, alipay_key)},
        {F_ALIPAY_APP_PUB, offsetof(struct sim_keys, alipay_app_pub)},
        {F_WX_PLAT_KEY, offsetof(struct sim_keys, wechat_platform_key)},
        {F_WX_MCH_CERT, offsetof(struct sim_keys, wechat_merchant_cert)},
        {F_2C2P_PM_KEY, offsetof(struct sim_keys, c2p_pm_key)},
        {F_2C2P_PM_MERCHANT_PUB, offsetof(struct sim_keys, c2p_pm_merchant_pub)},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char p[SIM_PATH_MAX + 64];
        path_of(s, keys[i].file, p, sizeof p);
        struct pt_pk **dst = (struct pt_pk **)((char *)&s->k + keys[i].off);
        int rc = pt_pk_load_file(p, NULL, NULL, dst, err, errlen);
        if (rc != PT_OK)
            return rc;
    }
    return PT_OK;
}

int pt__sim_files_prepare(struct pt_sim *s, char *err, size_t errlen)
{
    mbedtls_pk_context ca, srv, pk;
    int rc, created;
    char p[SIM_PATH_MAX + 64];
    struct stat sb;
    err[0] = '\0';
    mbedtls_pk_init(&ca);
    mbedtls_pk_init(&srv);
    mbedtls_pk_init(&pk);

    if (stat(s->dir, &sb) != 0) {
        if (errno != ENOENT || mkdir(s->dir, 0700) != 0) {
            snprintf(err, errlen, "sim: cannot create directory %s: %s", s->dir, strerror(errno));
            rc = PT_EIO;
            goto out;
        }
    } else if (!S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "sim: %s exists and is not a directory", s->dir);
        rc = PT_EINVAL;
        goto out;
    }

    /* The CA: its certificate is the trust anchor payterm is configured with. */
    int have_ca = exists(s, F_CA_CERT) && exists(s, F_CA_KEY);
    if ((rc = key_pair(s, F_CA_KEY, NULL, &ca, &created, err, errlen)) != PT_OK)
        goto out;
    if (!have_ca || created) {
        unsigned char *pem = calloc(1, PEM_MAX);
        struct cert_req cr = {.subject_key = &ca,
                              .issuer_key = &ca,
                              .subject = CA_NAME,
                              .issuer = CA_NAME,
                              .is_ca = 1};
        rc = pem ? issue_cert(s, &cr, pem, PEM_MAX) : PT_ENOMEM;
        if (rc == PT_OK)
            rc = write_file(s, F_CA_CERT, pem, strlen((char *)pem), 0644, err, errlen);
        free(pem);
        if (rc != PT_OK) {
            if (!err[0])
                snprintf(err, errlen, "sim: cannot create the CA certificate");
            goto out;
        }
    }
    if ((rc = key_pair(s, F_SRV_KEY, NULL, &srv, &created, err, errlen)) != PT_OK ||
        (rc = server_cert(s, &ca, &srv, err, errlen)) != PT_OK)
        goto out;

    /* Alipay: the gateway's pair (payterm verifies with the public half) and
     * the merchant's app pair (Alipay verifies with the public half). */
    if ((rc = key_pair(s, F_ALIPAY_KEY, F_ALIPAY_PUB, &pk, &created, err, errlen)) != PT_OK)
        goto out;
    mbedtls_pk_free(&pk);
    mbedtls_pk_init(&pk);
    if ((rc = key_pair(s, F_ALIPAY_APP_KEY, F_ALIPAY_APP_PUB, &pk, &created, err, errlen)) != PT_OK)
        goto out;
    mbedtls_pk_free(&pk);
    mbedtls_pk_init(&pk);

    /* WeChat Pay names keys by certificate serial: the merchant's API
     * certificate and the platform certificate each get one. */
    if ((rc = key_pair(s, F_WX_MCH_KEY, NULL, &pk, &created, err, errlen)) != PT_OK)
        goto out;
    if (created) {
        path_of(s, F_WX_MCH_CERT, p, sizeof p);
        unlink(p);
    }
    if ((rc = named_cert(s, F_WX_MCH_CERT, "CN=" WECHAT_MCHID ",O=WeChat Pay merchant (simulated)",
                         &pk, &ca, s->k.wechat_merchant_serial, sizeof s->k.wechat_merchant_serial,
                         err, errlen)) != PT_OK)
        goto out;
    mbedtls_pk_free(&pk);
    mbedtls_pk_init(&pk);
    if ((rc = key_pair(s, F_WX_PLAT_KEY, F_WX_PLAT_PUB, &pk, &created, err, errlen)) != PT_OK)
        goto out;
    if (created) {
        path_of(s, F_WX_PLAT_CERT, p, sizeof p);
        unlink(p);
    }
    if ((rc = named_cert(s, F_WX_PLAT_CERT, "CN=Tenpay.com platform (simulated),O=WeChat Pay", &pk,
                         &ca, s->k.wechat_platform_serial, sizeof s->k.wechat_platform_serial, err,
                         errlen)) != PT_OK)
        goto out;

    if ((rc = c2p_pm_keys(s, &ca, err, errlen)) != PT_OK)
        goto out;

    /* Secrets, shaped like the real ones: the APIv3 key is 32 characters whose
     * bytes are the AES-256 key; 2C2P hands out 64 upper-case hex digits. */
    char apiv3[64];
    if ((rc = secret(s, F_WX_APIV3, "", 32, 0, apiv3, sizeof apiv3, err, errlen)) != PT_OK)
        goto out;
    if (strlen(apiv3) != 32) {
        snprintf(err, errlen, "sim: %s/%s: the APIv3 key must be exactly 32 characters", s->dir,
                 F_WX_APIV3);
        pt_zeroize(apiv3, sizeof apiv3);
        rc = PT_EPARSE;
        goto out;
    }
    memcpy(s->k.wechat_apiv3_key, apiv3, 32);
    pt_zeroize(apiv3, sizeof apiv3);
    /* The APIv2 key: 32 characters, set by the merchant in the WeChat Pay
     * merchant platform ("API密钥"); the HMAC-SHA256 key is its bytes. */
    if ((rc = secret(s, F_WX_APIV2, "", 32, 0, s->k.wechat_apiv2_key, sizeof s->k.wechat_apiv2_key,
                     err, errlen)) != PT_OK)
        goto out;
    if (strlen(s->k.wechat_apiv2_key) != 32) {
        snprintf(err, errlen, "sim: %s/%s: the APIv2 key must be exactly 32 characters", s->dir,
                 F_WX_APIV2);
        rc = PT_EPARSE;
        goto out;
    }
    if ((rc = secret(s, F_STRIPE_SK, "sk_test_sim", 32, 0, s->k.stripe_secret,
                     sizeof s->k.stripe_secret, err, errlen)) != PT_OK ||
        (rc = secret(s, F_STRIPE_WHSEC, "whsec_", 32, 0, s->k.stripe_whsec,
                     sizeof s->k.stripe_whsec, err, errlen)) != PT_OK ||
        (rc = secret(s, F_2C2P_SECRET, "", 64, 1, s->k.c2p_secret, sizeof s->k.c2p_secret, err,
                     errlen)) != PT_OK)
        goto out;
    snprintf(s->k.alipay_app_id, sizeof s->k.alipay_app_id, "%s", ALIPAY_APP_ID);
    snprintf(s->k.wechat_mchid, sizeof s->k.wechat_mchid, "%s", WECHAT_MCHID);
    snprintf(s->k.wechat_appid, sizeof s->k.wechat_appid, "%s", WECHAT_APPID);
    snprintf(s->k.c2p_merchant_id, sizeof s->k.c2p_merchant_id, "%s", C2P_MERCHANT_ID);

    if ((rc = load_gateway_keys(s, err, errlen)) != PT_OK ||
        (rc = load_wx_certs(s, err, errlen)) != PT_OK)
        goto out;

    /* TLS: the server's chain and key. */
    mbedtls_x509_crt_init(&s->k.srv_cert);
    mbedtls_pk_init(&s->k.srv_key);
    path_of(s, F_SRV_CERT, p, sizeof p);
    if (mbedtls_x509_crt_parse_file(&s->k.srv_cert, p) != 0) {
        snprintf(err, errlen, "sim: %s: not a readable certificate chain", p);
        rc = PT_EPARSE;
        goto out;
    }
    if ((rc = load_pk(s, F_SRV_KEY, &s->k.srv_key, err, errlen)) != PT_OK)
        goto out;
    /* Mutual TLS: client certificates are verified against our CA, and the
     * /secapi/ routes accept exactly the merchant certificate we issued. */
    if ((rc = load_crt(s, F_CA_CERT, &s->k.client_ca, err, errlen)) != PT_OK ||
        (rc = load_crt(s, F_WX_MCH_CERT, &s->k.wechat_apiclient_crt, err, errlen)) != PT_OK)
        goto out;
    rc = write_gateways_json(s, err, errlen);
out:
    mbedtls_pk_free(&ca);
    mbedtls_pk_free(&srv);
    mbedtls_pk_free(&pk);
    return rc;
}

void pt__sim_files_free(struct pt_sim *s)
{
    pt_pk_free(s->k.alipay_key);
    pt_pk_free(s->k.alipay_app_pub);
    pt_pk_free(s->k.wechat_platform_key);
    for (int i = 0; i < atomic_load(&s->k.wechat_ncerts); i++) {
        pt_pk_free(s->k.wechat_certs[i].key);
        free(s->k.wechat_certs[i].pem);
    }
    pt_pk_free(s->k.wechat_merchant_cert);
    pt_pk_free(s->k.c2p_pm_key);
    pt_pk_free(s->k.c2p_pm_merchant_pub);
    mbedtls_x509_crt_free(&s->k.srv_cert);
    mbedtls_pk_free(&s->k.srv_key);
    mbedtls_x509_crt_free(&s->k.client_ca);
    mbedtls_x509_crt_free(&s->k.wechat_apiclient_crt);
    pt_zeroize(&s->k, sizeof s->k);
}
