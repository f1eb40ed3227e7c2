/*
 * test_crypto.c - core/crypto on mbedTLS: hashes, MACs, encodings, PEM key
 * loading (and its error messages), deterministic RSA signatures shared
 * across threads, AES-256-GCM, the DRBG, plus the JWT, form and JSON-scan
 * helpers the adapters are built from.
 */
#include "testutil.h"

#include "crypto.h"
#include "sha256hw.h"
#include "err.h"
#include "gateways/form.h"
#include "gateways/jscan.h"
#include "gateways/jwt.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void hex_of(const unsigned char *b, size_t n, char *out)
{
    pt_hex_encode(b, n, out);
}

static void test_sha256_hmac(void **state)
{
    (void)state;
    unsigned char h[32];
    char hex[65];
    assert_int_equal(pt_sha256("abc", 3, h), PT_OK);
    hex_of(h, 32, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    /* RFC 4231 test case 2 */
    assert_int_equal(pt_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, h), PT_OK);
    hex_of(h, 32, hex);
    assert_string_equal(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

/* The CPU's SHA instructions (when this machine has them) give the digests
 * of FIPS 180-2's examples and mbedTLS's digest for every length from 0 to
 * 600 bytes (every tail and padding case, one to ten blocks) and for a few
 * long inputs at odd alignments. */
static void test_sha256_hardware_matches_mbedtls(void **state)
{
    (void)state;
    const char *hw = pt_sha256hw_name();
    print_message("SHA-256 on: %s\n", hw ? hw : "mbedTLS (no SHA instructions on this CPU)");
    static const struct {
        const char *msg;
        const char *hex;
    } fips[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqr"
         "lmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    unsigned char h[32], ref[32];
    char hex[65];
    for (size_t i = 0; i < sizeof fips / sizeof fips[0]; i++) {
        assert_int_equal(pt_sha256(fips[i].msg, strlen(fips[i].msg), h), PT_OK);
        hex_of(h, 32, hex);
        assert_string_equal(hex, fips[i].hex);
        assert_int_equal(pt_sha256_portable(fips[i].msg, strlen(fips[i].msg), h), PT_OK);
        hex_of(h, 32, hex);
        assert_string_equal(hex, fips[i].hex);
    }
    /* No bytes at all, from no buffer. */
    assert_int_equal(pt_sha256(NULL, 0, h), PT_OK);
    hex_of(h, 32, hex);
    assert_string_equal(hex, fips[0].hex);
    /* One million 'a' (FIPS 180-2 B.3), hashed in one call. */
    size_t big = 1000000;
    unsigned char *buf = malloc(big + 8);
    assert_non_null(buf);
    memset(buf, 'a', big);
    assert_int_equal(pt_sha256(buf, big, h), PT_OK);
    hex_of(h, 32, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    unsigned seed = 12345;
    for (size_t i = 0; i < big + 8; i++)
        buf[i] = (unsigned char)(rand_r(&seed) >> 7);
    for (size_t len = 0; len <= 600; len++) {
        assert_int_equal(pt_sha256(buf + (len & 7), len, h), PT_OK);
        assert_int_equal(pt_sha256_portable(buf + (len & 7), len, ref), PT_OK);
        if (memcmp(h, ref, 32) != 0)
            fail_msg("SHA-256 of %zu bytes differs from mbedTLS's", len);
    }
    const size_t longer[] = {4095, 4096, 65537, 999999};
    for (size_t i = 0; i < sizeof longer / sizeof longer[0]; i++) {
        assert_int_equal(pt_sha256(buf + 3, longer[i], h), PT_OK);
        assert_int_equal(pt_sha256_portable(buf + 3, longer[i], ref), PT_OK);
        assert_memory_equal(h, ref, 32);
    }
    free(buf);
}

struct b64_case {
    const char *bin;
    const char *std;
    const char *url;
};

static void test_base64(void **state)
{
    (void)state;
    static const struct b64_case cases[] = {
        {"", "", ""},
        {"f", "Zg==", "Zg"},
        {"fo", "Zm8=", "Zm8"},
        {"foo", "Zm9v", "Zm9v"},
        {"\xfb\xff\xbf", "+/+/", "-_-_"},
        {"\xfb\xff", "+/8=", "-_8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[64];
        unsigned char bin[64];
        size_t n = 0, blen = strlen(cases[i].bin);
        assert_int_equal(pt_base64_encode(cases[i].bin, blen, out, sizeof out, &n), PT_OK);
        assert_string_equal(out, cases[i].std);
        assert_int_equal(pt_base64url_encode(cases[i].bin, blen, out, sizeof out, &n), PT_OK);
        assert_string_equal(out, cases[i].url);
        assert_int_equal(pt_base64_decode(cases[i].std, strlen(cases[i].std), bin, sizeof bin, &n),
                         PT_OK);
        assert_int_equal(n, blen);
        assert_memory_equal(bin, cases[i].bin, blen);
        assert_int_equal(
            pt_base64url_decode(cases[i].url, strlen(cases[i].url), bin, sizeof bin, &n), PT_OK);
        assert_int_equal(n, blen);
        assert_memory_equal(bin, cases[i].bin, blen);
    }
    unsigned char bin[16];
    size_t n;
    /* strict: no blanks, no line breaks, no url alphabet in std and back */
    assert_int_equal(pt_base64_decode("Zm9v\n", 5, bin, sizeof bin, &n), PT_EPARSE);
    assert_int_equal(pt_base64_decode("Zm 9", 4, bin, sizeof bin, &n), PT_EPARSE);
    assert_int_equal(pt_base64_decode("-_-_", 4, bin, sizeof bin, &n), PT_EPARSE);
    assert_int_equal(pt_base64_decode("Z=9v", 4, bin, sizeof bin, &n), PT_EPARSE);
    assert_int_equal(pt_base64url_decode("Zg==", 4, bin, sizeof bin, &n), PT_EPARSE);
    assert_int_equal(pt_base64url_decode("+/+/", 4, bin, sizeof bin, &n), PT_EPARSE);
    assert_int_equal(pt_base64url_decode("Z", 1, bin, sizeof bin, &n), PT_EPARSE);
    assert_int_equal(pt_base64_decode("Zm9vYmFy", 8, bin, 3, &n), PT_ETOOBIG);
    char small[4];
    assert_int_equal(pt_base64_encode("foo", 3, small, sizeof small, NULL), PT_ETOOBIG);
}

static void test_hex_ct(void **state)
{
    (void)state;
    unsigned char b[4];
    size_t n;
    assert_int_equal(pt_hex_decode("00fFa5", 6, b, sizeof b, &n), PT_OK);
    assert_int_equal(n, 3);
    assert_int_equal(b[1], 0xff);
    assert_int_equal(pt_hex_decode("0g", 2, b, sizeof b, &n), PT_EPARSE);
    assert_int_equal(pt_hex_decode("abc", 3, b, sizeof b, &n), PT_EPARSE);
    assert_int_equal(pt_hex_decode("0011223344", 10, b, sizeof b, &n), PT_ETOOBIG);
    assert_true(pt_ct_equal("abcd", "abcd", 4));
    assert_false(pt_ct_equal("abcd", "abce", 4));
    assert_true(pt_ct_equal("", "", 0));
}

/* ---- PEM keys ---------------------------------------------------------------- */

struct load_case {
    const char *file;
    int rc;
    enum pt_pk_kind kind;
    const char *err_part; /* a piece of the error message */
};

static void test_pem_loading(void **state)
{
    (void)state;
    static const struct load_case cases[] = {
        {"merchant_alipay_pkcs1.pem", PT_OK, PT_PK_PRIVATE, NULL},
        {"merchant_wechat_pkcs8.pem", PT_OK, PT_PK_PRIVATE, NULL},
        {"alipay_gateway_public.pem", PT_OK, PT_PK_PUBLIC, NULL},
        {"wechat_platform_public_pkcs1.pem", PT_OK, PT_PK_PUBLIC, NULL},
        {"wechat_platform_cert.pem", PT_OK, PT_PK_CERT, NULL},
        {"ec_private.pem", PT_EPARSE, 0, "not an RSA key"},
        {"small_rsa1024.pem", PT_EPARSE, 0, "1024 bits is too small"},
        {"merchant_wechat_encrypted.pem", PT_EPARSE, 0, "encrypted"},
        {"does_not_exist.pem", PT_EIO, 0, "cannot open: No such file"},
        {"../alipay.json", PT_EPARSE, 0, "no PEM key or certificate"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[1024], err[PT_PK_ERR_MAX] = "";
        struct pt_pk *pk = NULL;
        snprintf(path, sizeof path, "%s/keys/%s", PT_TEST_DATA_DIR, cases[i].file);
        int rc = pt_pk_load_file(path, NULL, NULL, &pk, err, sizeof err);
        if (rc != cases[i].rc)
            fail_msg("%s: rc %d, want %d (%s)", cases[i].file, rc, cases[i].rc, err);
        if (rc == PT_OK) {
            assert_int_equal(pt_pk_kind(pk), cases[i].kind);
            assert_int_equal(pt_pk_size(pk), 256);
        } else {
            /* The message names the file and says what is wrong. */
            assert_non_null(strstr(err, path));
            if (!strstr(err, cases[i].err_part))
                fail_msg("%s: error '%s' lacks '%s'", cases[i].file, err, cases[i].err_part);
        }
        pt_pk_free(pk);
    }
    struct pt_pk *cert = pt_test_key("wechat_platform_cert.pem");
    assert_string_equal(pt_pk_serial(cert), "5157F09EFDC096DE15EBE81A47057A7232F1B8E1");
    pt_pk_free(cert);
    struct pt_pk *pub = pt_test_key("wechat_platform_public.pem");
    assert_string_equal(pt_pk_serial(pub), "");
    pt_pk_free(pub);

    char err[PT_PK_ERR_MAX];
    struct pt_pk *pk = NULL;
    assert_int_equal(pt_pk_load_mem("<stdin>", "", 0, NULL, NULL, &pk, err, sizeof err), PT_EPARSE);
    assert_non_null(strstr(err, "<stdin>"));
    assert_int_equal(pt_pk_load_mem("x",
                                    "-----BEGIN PUBLIC KEY-----\ngarbage\n-----END PUBLIC "
                                    "KEY-----\n",
                                    52, NULL, NULL, &pk, err, sizeof err),
                     PT_EPARSE);
    assert_non_null(strstr(
        err, "x: cannot parse the PEM public key (SPKI or PKCS#1 expected; mbedTLS error -0x"));
    const char *bad[][2] = {
        {"-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n",
         "x: cannot parse the PEM private key (PKCS#1 or PKCS#8 expected; mbedTLS error -0x"},
        {"-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n",
         "x: cannot parse the X.509 certificate (mbedTLS error -0x"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(
            pt_pk_load_mem("x", bad[i][0], strlen(bad[i][0]), NULL, NULL, &pk, err, sizeof err),
            PT_EPARSE);
        if (!strstr(err, bad[i][1]))
            fail_msg("error '%s' lacks '%s'", err, bad[i][1]);
    }
    pt_pk_free(NULL);
}

/* A secret of one line: trailing line breaks are not part of it, and the
 * bound is on the secret, not on the file. */
static void test_secret_read_line(void **state)
{
    (void)state;
    char dir[256], path[300], buf[8];
    size_t n = 99;
    pt_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/secret", dir);
    pt_test_write_file(path, "abc\r\n", 0600);
    assert_int_equal(pt_secret_read_line(path, buf, sizeof buf, &n), PT_OK);
    assert_int_equal(n, 3);
    assert_string_equal(buf, "abc");
    pt_test_write_file(path, "1234567\n", 0600); /* cap - 1 bytes and a line break */
    assert_int_equal(pt_secret_read_line(path, buf, sizeof buf, &n), PT_OK);
    assert_string_equal(buf, "1234567");
    pt_test_write_file(path, "12345678", 0600); /* no room for the NUL */
    assert_int_equal(pt_secret_read_line(path, buf, sizeof buf, &n), PT_ETOOBIG);
    assert_int_equal(n, 0);
    for (size_t i = 0; i < sizeof buf; i++)
        assert_int_equal(buf[i], 0);
    pt_test_write_file(path, "123456789\n", 0600);
    assert_int_equal(pt_secret_read_line(path, buf, sizeof buf, &n), PT_ETOOBIG);
    pt_test_write_file(path, "\n", 0600);
    assert_int_equal(pt_secret_read_line(path, buf, sizeof buf, &n), PT_OK);
    assert_int_equal(n, 0);
    assert_string_equal(buf, "");
    snprintf(path, sizeof path, "%s/none", dir);
    assert_int_equal(pt_secret_read_line(path, buf, sizeof buf, &n), PT_ENOTFOUND);
    pt_test_rmtree(dir);
}

/* The Alipay request vector: the SDK's RSA2 signature, byte for byte. */
static void test_rsa_deterministic(void **state)
{
    (void)state;
    cJSON *v = pt_test_vectors("alipay.json");
    const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(v, "requests"), 0);
    const char *msg = pt_test_str(c, "string_to_sign"), *want = pt_test_str(c, "sign");
    struct pt_pk *key = pt_test_key("merchant_alipay_pkcs1.pem");
    struct pt_pk *pub = pt_test_key("merchant_alipay_public.pem");
    struct pt_pk *other = pt_test_key("other_public.pem");
    char sig[PT_BASE64_LEN(1024)];
    assert_int_equal(pt_pk_sign_base64(key, msg, strlen(msg), sig, sizeof sig), PT_OK);
    assert_string_equal(sig, want);
    assert_int_equal(pt_pk_verify_base64(pub, msg, strlen(msg), sig, strlen(sig)), PT_OK);
    assert_int_equal(pt_pk_verify_base64(key, msg, strlen(msg), sig, strlen(sig)), PT_OK);
    assert_int_equal(pt_pk_verify_base64(other, msg, strlen(msg), sig, strlen(sig)), PT_ESIG);
    assert_int_equal(pt_pk_verify_base64(pub, msg, strlen(msg) - 1, sig, strlen(sig)), PT_ESIG);
    /* a tampered vector must fail: flip one signature character */
    sig[10] = sig[10] == 'A' ? 'B' : 'A';
    assert_string_not_equal(sig, want);
    assert_int_equal(pt_pk_verify_base64(pub, msg, strlen(msg), sig, strlen(sig)), PT_ESIG);
    assert_int_equal(pt_pk_verify_base64(pub, msg, strlen(msg), "not base64!", 11), PT_ESIG);
    /* a public key cannot sign */
    assert_int_equal(pt_pk_sign_base64(pub, msg, strlen(msg), sig, sizeof sig), PT_EINVAL);
    pt_pk_free(key);
    pt_pk_free(pub);
    pt_pk_free(other);
    cJSON_Delete(v);
}

struct sign_job {
    struct pt_pk *key;
    const char *msg;
    const char *want;
    int mismatches;
};

static void *sign_many(void *arg)
{
    struct sign_job *j = arg;
    for (int i = 0; i < 25; i++) {
        char sig[PT_BASE64_LEN(1024)];
        if (pt_pk_sign_base64(j->key, j->msg, strlen(j->msg), sig, sizeof sig) != PT_OK ||
            strcmp(sig, j->want) != 0)
            j->mismatches++;
    }
    return NULL;
}

/* Blinding mutates the RSA context: four threads on one key must still all
 * produce the exact SDK signature. */
static void test_rsa_threads(void **state)
{
    (void)state;
    if (getenv("PT_TEST_EMULATED")) {
        /* qemu-user livelocks on any contended pthread mutex (a four-thread
         * counter behind a plain mutex never finishes there either), so this
         * runs natively only - it does, in CI and under ASan. */
        skip();
    }
    cJSON *v = pt_test_vectors("alipay.json");
    const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(v, "requests"), 1);
    struct pt_pk *key = pt_test_key("merchant_alipay_pkcs1.pem");
    struct sign_job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] =
            (struct sign_job){key, pt_test_str(c, "string_to_sign"), pt_test_str(c, "sign"), 0};
        assert_int_equal(pthread_create(&th[i], NULL, sign_many, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(jobs[i].mismatches, 0);
    }
    pt_pk_free(key);
    cJSON_Delete(v);
}

/* ---- AES-GCM and the DRBG --------------------------------------------------- */

static void test_gcm(void **state)
{
    (void)state;
    /* NIST GCM test case 14 (AES-256, 12-byte IV, zero key, one zero block) */
    unsigned char key[32] = {0}, iv[12] = {0}, pt[16] = {0}, ct[16], tag[16], back[16];
    char hex[65];
    assert_int_equal(pt_aes256gcm_encrypt(key, iv, 12, NULL, 0, pt, 16, ct, tag), PT_OK);
    hex_of(ct, 16, hex);
    assert_string_equal(hex, "cea7403d4d606b6e074ec5d3baf39d18");
    hex_of(tag, 16, hex);
    assert_string_equal(hex, "d0d1c8a799996bf0265b98b5d48ab919");
    assert_int_equal(pt_aes256gcm_decrypt(key, iv, 12, NULL, 0, ct, 16, tag, back), PT_OK);
    assert_memory_equal(back, pt, 16);
    tag[15] ^= 1;
    assert_int_equal(pt_aes256gcm_decrypt(key, iv, 12, NULL, 0, ct, 16, tag, back), PT_ESIG);
    tag[15] ^= 1;
    ct[0] ^= 1;
    assert_int_equal(pt_aes256gcm_decrypt(key, iv, 12, NULL, 0, ct, 16, tag, back), PT_ESIG);
    ct[0] ^= 1;
    assert_int_equal(
        pt_aes256gcm_decrypt(key, iv, 12, (const unsigned char *)"x", 1, ct, 16, tag, back),
        PT_ESIG);
    assert_int_equal(pt_aes256gcm_decrypt(key, iv, 0, NULL, 0, ct, 16, tag, back), PT_EINVAL);
}

static int counting_random(void *ctx, void *buf, size_t len)
{
    int *calls = ctx;
    (*calls)++;
    memset(buf, 0x5a, len); /* deterministic: fine for a test */
    return PT_OK;
}

static int failing_random(void *ctx, void *buf, size_t len)
{
    (void)ctx;
    (void)buf;
    (void)len;
    return PT_ESYS;
}

static void test_drbg(void **state)
{
    (void)state;
    int calls = 0;
    struct pt_drbg *a = NULL, *b = NULL;
    unsigned char x[64], y[64];
    assert_int_equal(pt_drbg_new(counting_random, &calls, "t", &a), PT_OK);
    assert_true(calls > 0);
    assert_int_equal(pt_drbg_new(counting_random, &calls, "t", &b), PT_OK);
    assert_int_equal(pt_drbg_random(a, x, sizeof x), PT_OK);
    assert_int_equal(pt_drbg_random(b, y, sizeof y), PT_OK);
    assert_memory_equal(x, y, sizeof x); /* same seed, same stream */
    assert_int_equal(pt_drbg_random(a, y, sizeof y), PT_OK);
    assert_memory_not_equal(x, y, sizeof x);
    pt_drbg_destroy(a);
    pt_drbg_destroy(b);
    assert_int_equal(pt_drbg_new(failing_random, NULL, NULL, &a), PT_ECRYPTO);
    assert_int_equal(pt_drbg_new(NULL, NULL, NULL, &a), PT_OK); /* system entropy */
    unsigned char big[2000];
    assert_int_equal(pt_drbg_random(a, big, sizeof big), PT_OK);
    pt_drbg_destroy(a);
    pt_drbg_destroy(NULL);
}

/* ---- JWT, forms, JSON scanning ---------------------------------------------- */

static void test_jwt(void **state)
{
    (void)state;
    char *tok = NULL, *payload = NULL;
    size_t plen = 0;
    const char *p = "{\"a\":1}";
    assert_int_equal(pt_jwt_hs256_sign("k", 1, p, strlen(p), &tok), PT_OK);
    assert_int_equal(pt_jwt_hs256_verify("k", 1, tok, strlen(tok), &payload, &plen), PT_OK);
    assert_string_equal(payload, p);
    free(payload);
    assert_int_equal(pt_jwt_hs256_verify("K", 1, tok, strlen(tok), &payload, &plen), PT_ESIG);
    tok[strlen(tok) - 1] = tok[strlen(tok) - 1] == 'A' ? 'B' : 'A';
    assert_int_equal(pt_jwt_hs256_verify("k", 1, tok, strlen(tok), &payload, &plen), PT_ESIG);
    free(tok);
    static const char *const malformed[] = {"", "a.b", "a.b.c.d", "!!.e30.xx", "e30.e30.x"};
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        int rc = pt_jwt_hs256_verify("k", 1, malformed[i], strlen(malformed[i]), &payload, &plen);
        assert_true(rc == PT_EPARSE || rc == PT_ESIG);
    }
}

static void test_form(void **state)
{
    (void)state;
    struct pt_form f;
    pt_form_init(&f);
    const char *body = "a=1&b=x+y%26z&&empty=&noeq&c=%E5%A4%A7";
    assert_int_equal(pt_form_parse(body, strlen(body), &f), PT_OK);
    assert_int_equal(f.n, 5);
    assert_string_equal(pt_form_get(&f, "b"), "x y&z");
    assert_string_equal(pt_form_get(&f, "empty"), "");
    assert_string_equal(pt_form_get(&f, "noeq"), "");
    assert_string_equal(pt_form_get(&f, "c"), "\xe5\xa4\xa7");
    assert_null(pt_form_get(&f, "zz"));
    struct pt_buf b;
    pt_buf_init(&b, 1024);
    pt_form_encode(&f, &b);
    assert_string_equal(b.p, "a=1&b=x%20y%26z&empty=&noeq=&c=%E5%A4%A7");
    pt_buf_free(&b, 0);
    pt_form_free(&f);
    static const char *const bad[] = {"a=%zz", "a=%4", "a=%", "=v", "a=1&a=2", "a=%00"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pt_form_init(&f);
        if (pt_form_parse(bad[i], strlen(bad[i]), &f) != PT_EPARSE)
            fail_msg("form '%s' should not parse", bad[i]);
        assert_int_equal(f.n, 0);
    }
}

static void test_jscan(void **state)
{
    (void)state;
    const char *doc =
        " {\"a\" : {\"x\":[1,{\"y\":2}],\"amount\":1000.00},\"s\":\"q\\\"}\",\"n\":12} ";
    const char *v;
    size_t n;
    assert_int_equal(pt_jscan_member(doc, strlen(doc), "a", &v, &n), PT_OK);
    assert_int_equal(n, strlen("{\"x\":[1,{\"y\":2}],\"amount\":1000.00}"));
    static const char *const amount[] = {"a", "amount", NULL};
    int64_t minor;
    assert_int_equal(pt_jscan_amount(doc, strlen(doc), amount, "THB", &minor), PT_OK);
    assert_int_equal(minor, 100000);
    static const char *const nn[] = {"n", NULL};
    int64_t x;
    assert_int_equal(pt_jscan_int(doc, strlen(doc), nn, &x), PT_OK);
    assert_int_equal(x, 12);
    assert_int_equal(pt_jscan_member(doc, strlen(doc), "zz", &v, &n), PT_ENOTFOUND);
    assert_int_equal(pt_jscan_index("[1, \"a\" ,[2]]", 13, 2, &v, &n), PT_OK);
    assert_int_equal(n, 3);
    assert_int_equal(pt_jscan_index("[1]", 3, 1, &v, &n), PT_ENOTFOUND);
    static const char *const bad[] = {
        "{\"a\":1,\"a\":2}", "{\"a\":}",    "{\"a\":1",        "[1]",
        "{\"a\":01x}",       "{\"a\":tru}", "{\"a\":\"\\x\"}", "{} x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (pt_jscan_member(bad[i], strlen(bad[i]), "a", &v, &n) != PT_EPARSE)
            fail_msg("'%s' should not scan", bad[i]);
    /* amounts: exact or refused */
    static const char *const am[] = {"amount", NULL};
    static const struct {
        const char *doc;
        int rc;
    } amounts[] = {{"{\"amount\":1e3}", PT_EPARSE},
                   {"{\"amount\":-1}", PT_EPARSE},
                   {"{\"amount\":1.001}", PT_ERANGE},
                   {"{\"amount\":\"88.8\"}", PT_OK},
                   {"{\"amount\":null}", PT_EPARSE}};
    for (size_t i = 0; i < sizeof amounts / sizeof amounts[0]; i++)
        assert_int_equal(pt_jscan_amount(amounts[i].doc, strlen(amounts[i].doc), am, "CNY", &minor),
                         amounts[i].rc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_hmac),
        cmocka_unit_test(test_sha256_hardware_matches_mbedtls),
        cmocka_unit_test(test_base64),
        cmocka_unit_test(test_hex_ct),
        cmocka_unit_test(test_pem_loading),
        cmocka_unit_test(test_secret_read_line),
        cmocka_unit_test(test_rsa_deterministic),
        cmocka_unit_test(test_rsa_threads),
        cmocka_unit_test(test_gcm),
        cmocka_unit_test(test_drbg),
        cmocka_unit_test(test_jwt),
        cmocka_unit_test(test_form),
        cmocka_unit_test(test_jscan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
