/*
 * test_jose.c - RSA-OAEP and PSS (crypto.h), DER certificates, and the
 * compact JWE / JWS of 2C2P's Payment Maintenance envelope (jose.h),
 * against tests/vectors/2c2p_pm.json (gen/gen_2c2p_pm.mjs, the npm `jose`
 * library): tokens `jose` made open here (and the ones to refuse are
 * refused, for the right reason), and tokens payterm makes are byte for
 * byte the ones `jose` opened.
 */
#include "testutil.h"

#include "crypto.h"
#include "detrand.h"
#include "err.h"
#include "gateways/jose.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char msg[] = "<PaymentProcessRequest><version>4.3</version></PaymentProcessRequest>";

/* ---- crypto.h ----------------------------------------------------------------- */

static void test_oaep(void **state)
{
    (void)state;
    struct pt_pk *key = pt_test_key("c2p_merchant_private.pem");
    struct pt_pk *pub = pt_test_key("c2p_merchant_public.pem");
    struct pt_pk *other = pt_test_key("other_private.pem");
    unsigned char ct[512], pt[512];
    size_t n = 0, m = 0;
    assert_int_equal(pt_pk_oaep_encrypt(pub, NULL, NULL, msg, 32, ct, sizeof ct, &n), PT_OK);
    assert_int_equal(n, 256);
    assert_int_equal(pt_pk_oaep_decrypt(key, ct, n, pt, sizeof pt, &m), PT_OK);
    assert_int_equal(m, 32);
    assert_memory_equal(pt, msg, 32);
    /* Another key, a flipped bit, a short block, a public key: refused. */
    assert_int_equal(pt_pk_oaep_decrypt(other, ct, n, pt, sizeof pt, &m), PT_ESIG);
    ct[100] ^= 1;
    assert_int_equal(pt_pk_oaep_decrypt(key, ct, n, pt, sizeof pt, &m), PT_ESIG);
    assert_int_equal(pt_pk_oaep_decrypt(key, ct, n - 1, pt, sizeof pt, &m), PT_ESIG);
    assert_int_equal(pt_pk_oaep_decrypt(pub, ct, n, pt, sizeof pt, &m), PT_EINVAL);
    /* 2048 bits carry 214 bytes at most. */
    char big[215];
    memset(big, 'x', sizeof big);
    assert_int_equal(pt_pk_oaep_encrypt(pub, NULL, NULL, big, 215, ct, sizeof ct, &n), PT_ETOOBIG);
    assert_int_equal(pt_pk_oaep_encrypt(pub, NULL, NULL, big, 214, ct, sizeof ct, &n), PT_OK);
    /* The same key still signs PKCS#1 v1.5 after OAEP (the padding is put back). */
    assert_int_equal(pt_pk_probe(key, pub), PT_OK);
    pt_pk_free(key);
    pt_pk_free(pub);
    pt_pk_free(other);
}

static void test_pss(void **state)
{
    (void)state;
    struct pt_pk *key = pt_test_key("c2p_merchant_private.pem");
    struct pt_pk *pub = pt_test_key("c2p_merchant_public.pem");
    struct pt_pk *other = pt_test_key("other_public.pem");
    unsigned char sig[512], sig2[512];
    size_t n = 0, n2 = 0;
    assert_int_equal(pt_pk_pss_sign(key, NULL, NULL, msg, strlen(msg), sig, sizeof sig, &n), PT_OK);
    assert_int_equal(pt_pk_pss_verify(pub, msg, strlen(msg), sig, n), PT_OK);
    assert_int_equal(pt_pk_pss_verify(other, msg, strlen(msg), sig, n), PT_ESIG);
    assert_int_equal(pt_pk_pss_verify(pub, msg, strlen(msg) - 1, sig, n), PT_ESIG);
    /* Randomised salt: two signatures differ, a fixed stream repeats. */
    assert_int_equal(pt_pk_pss_sign(key, NULL, NULL, msg, strlen(msg), sig2, sizeof sig2, &n2),
                     PT_OK);
    assert_memory_not_equal(sig, sig2, n);
    struct pt_detrand a, b;
    pt_detrand_init(&a, "s");
    pt_detrand_init(&b, "s");
    assert_int_equal(pt_pk_pss_sign(key, pt_detrand_fn, &a, msg, 5, sig, sizeof sig, &n), PT_OK);
    assert_int_equal(pt_pk_pss_sign(key, pt_detrand_fn, &b, msg, 5, sig2, sizeof sig2, &n2), PT_OK);
    assert_memory_equal(sig, sig2, n);
    /* A PKCS#1 v1.5 signature is not a PSS one, and the reverse. */
    assert_int_equal(pt_pk_sign(key, msg, 5, sig2, sizeof sig2, &n2), PT_OK);
    assert_int_equal(pt_pk_pss_verify(pub, msg, 5, sig2, n2), PT_ESIG);
    assert_int_equal(pt_pk_verify(pub, msg, 5, sig, n), PT_ESIG);
    assert_int_equal(pt_pk_pss_sign(pub, NULL, NULL, msg, 5, sig, sizeof sig, &n), PT_EINVAL);
    pt_pk_free(key);
    pt_pk_free(pub);
    pt_pk_free(other);
}

static void test_probe_jose(void **state)
{
    (void)state;
    struct pt_pk *key = pt_test_key("c2p_merchant_private.pem");
    struct pt_pk *pub = pt_test_key("c2p_merchant_public.pem");
    assert_int_equal(pt_pk_probe_jose(key), PT_OK);
    assert_int_equal(pt_pk_probe_jose(pub), PT_EINVAL);
    pt_pk_free(key);
    pt_pk_free(pub);
}

/* 2C2P hands out its public key as a .cer: DER or PEM, the same key. */
static void test_der_certificate(void **state)
{
    (void)state;
    struct pt_pk *der = pt_test_key("c2p_gateway_cert.cer");
    struct pt_pk *pem = pt_test_key("c2p_gateway_cert.pem");
    struct pt_pk *key = pt_test_key("c2p_gateway_private.pem");
    assert_int_equal(pt_pk_kind(der), PT_PK_CERT);
    assert_string_equal(pt_pk_serial(der), pt_pk_serial(pem));
    assert_string_equal(pt_pk_serial(der), "02C2F00D");
    assert_int_equal(pt_pk_probe(key, der), PT_OK);
    /* Binary that is not a certificate says so. */
    char err[PT_PK_ERR_MAX];
    struct pt_pk *pk = NULL;
    static const unsigned char junk[] = {0x30, 0x82, 0x01, 0x00, 0x00, 0x00};
    assert_int_equal(pt_pk_load_mem("x.cer", junk, sizeof junk, NULL, NULL, &pk, err, sizeof err),
                     PT_EPARSE);
    assert_non_null(strstr(err, "DER X.509 certificate"));
    pt_pk_free(der);
    pt_pk_free(pem);
    pt_pk_free(key);
}

/* ---- jose.h ------------------------------------------------------------------- */

static void test_round_trip(void **state)
{
    (void)state;
    struct pt_pk *mkey = pt_test_key("c2p_merchant_private.pem");
    struct pt_pk *mpub = pt_test_key("c2p_merchant_public.pem");
    struct pt_pk *gkey = pt_test_key("c2p_gateway_private.pem");
    struct pt_pk *gcert = pt_test_key("c2p_gateway_cert.cer");
    char *tok = NULL, *text = NULL;
    size_t tlen = 0, n = 0;
    assert_int_equal(pt_jose_seal(mkey, gcert, NULL, NULL, msg, strlen(msg), &tok, &tlen), PT_OK);
    assert_int_equal(strlen(tok), tlen);
    /* The headers of 2C2P's own sample token. */
    assert_true(strncmp(tok,
                        "eyJhbGciOiJQUzI1NiIsInR5cCI6IkpXVCJ9.ZXlKaGJHY2lPaUpTVTBFdFQwRkZVQ0l"
                        "zSW1WdVl5STZJa0V5TlRaSFEwMGlmUS",
                        99) == 0);
    assert_int_equal(pt_jose_open(mpub, gkey, tok, tlen, &text, &n), PT_OK);
    assert_string_equal(text, msg);
    free(text);
    /* The wrong way round: the merchant cannot open its own request. */
    assert_int_equal(pt_jose_open(gcert, mkey, tok, tlen, &text, &n), PT_ESIG);
    assert_int_equal(pt_jose_open(mpub, mkey, tok, tlen, &text, &n), PT_ESIG);
    free(tok);
    assert_int_equal(pt_jose_open(mpub, gkey, "a.b.c", 5, &text, &n), PT_EPARSE);
    assert_int_equal(pt_jose_open(mpub, gkey, "", 0, &text, &n), PT_EPARSE);
    pt_pk_free(mkey);
    pt_pk_free(mpub);
    pt_pk_free(gkey);
    pt_pk_free(gcert);
}

/* ---- the vectors ------------------------------------------------------------------ */

static int want_rc(const char *rc)
{
    if (strcmp(rc, "ok") == 0)
        return PT_OK;
    if (strcmp(rc, "unsupported") == 0)
        return PT_EUNSUPPORTED;
    if (strcmp(rc, "signature") == 0)
        return PT_ESIG;
    if (strcmp(rc, "parse") == 0)
        return PT_EPARSE;
    fail_msg("unknown rc %s", rc);
    return 1;
}

/* Opens a jose-made token the way its side says (gen_2c2p_pm.mjs). */
static int open_case(const cJSON *c, char **text, size_t *n)
{
    const char *kind = pt_test_str(c, "kind"), *tok = pt_test_str(c, "token");
    int request = strcmp(pt_test_str(c, "side"), "request") == 0;
    struct pt_pk *peer = pt_test_key(request ? "c2p_merchant_public.pem" : "c2p_gateway_cert.cer");
    struct pt_pk *key =
        pt_test_key(request ? "c2p_gateway_private.pem" : "c2p_merchant_private.pem");
    int rc;
    if (strcmp(kind, "jwe") == 0)
        rc = pt_jwe_decrypt(key, tok, strlen(tok), text, n);
    else if (strcmp(kind, "jws") == 0)
        rc = pt_jws_verify(peer, tok, strlen(tok), text, n);
    else
        rc = pt_jose_open(peer, key, tok, strlen(tok), text, n);
    pt_pk_free(peer);
    pt_pk_free(key);
    return rc;
}

static void test_jose_made(void **state)
{
    (void)state;
    cJSON *v = pt_test_vectors("2c2p_pm.json");
    const cJSON *c;
    int opened = 0;
    cJSON_ArrayForEach(c, pt_test_cases(v, "2c2p_pm.json", "jose_made"))
    {
        char *text = NULL;
        size_t n = 0;
        int rc = open_case(c, &text, &n);
        if (rc != want_rc(pt_test_str(c, "rc")))
            fail_msg("%s: rc %d (%s), want %s", pt_test_str(c, "name"), rc, pt_jose_why(rc),
                     pt_test_str(c, "rc"));
        if (rc == PT_OK) {
            assert_string_equal(text, pt_test_str(c, "text"));
            assert_int_equal(n, strlen(pt_test_str(c, "text")));
            opened++;
        }
        free(text);
    }
    assert_int_equal(opened, 10); /* of the 27 (pt_test_cases counts them) */
    cJSON_Delete(v);
}

static char *make_again(const cJSON *c)
{
    const char *kind = pt_test_str(c, "kind"), *text = pt_test_str(c, "text");
    struct pt_detrand d;
    pt_detrand_init(&d, pt_test_str(c, "seed"));
    struct pt_pk *key = pt_test_key(pt_test_str(c, "key"));
    struct pt_pk *peer = pt_test_str(c, "peer")[0] ? pt_test_key(pt_test_str(c, "peer")) : NULL;
    char *tok = NULL;
    int rc;
    if (strcmp(kind, "jwe") == 0)
        rc = pt_jwe_encrypt(key, pt_detrand_fn, &d, text, strlen(text), &tok, NULL);
    else if (strcmp(kind, "jws") == 0)
        rc = pt_jws_sign(key, pt_detrand_fn, &d, text, strlen(text), &tok, NULL);
    else
        rc = pt_jose_seal(key, peer, pt_detrand_fn, &d, text, strlen(text), &tok, NULL);
    assert_int_equal(rc, PT_OK);
    pt_pk_free(key);
    pt_pk_free(peer);
    return tok;
}

static void test_payterm_made(void **state)
{
    (void)state;
    cJSON *v = pt_test_vectors("2c2p_pm.json");
    const cJSON *c;
    cJSON_ArrayForEach(c, pt_test_cases(v, "2c2p_pm.json", "payterm_made"))
    {
        /* jose read exactly what was sealed... */
        assert_string_equal(pt_test_str(c, "jose_text"), pt_test_str(c, "text"));
        /* ...from these bytes, which payterm still makes today. */
        char *tok = make_again(c);
        if (strcmp(tok, pt_test_str(c, "token")) != 0)
            fail_msg("%s: payterm's token is no longer the one jose opened",
                     pt_test_str(c, "name"));
        free(tok);
    }
    cJSON_Delete(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oaep),         cmocka_unit_test(test_pss),
        cmocka_unit_test(test_probe_jose),   cmocka_unit_test(test_der_certificate),
        cmocka_unit_test(test_round_trip),   cmocka_unit_test(test_jose_made),
        cmocka_unit_test(test_payterm_made),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
