/*
 * test_gw_wechat_certs.c - WeChat Pay platform key rotation (SPEC 8): the
 * GET /v3/certificates request and answers against vectors made with
 * wechatpay-axios-plugin (tests/vectors/wechat_certs.json: decrypted and
 * verified; signed by an untrusted key, tampered, under a wrong serial_no,
 * expired... refused), the trust store (struct pt_gw_keyring), the list
 * form of platform_public_key_file, and the certificates kept in data_dir.
 */
#include "testutil.h"

#include "config_load.h"
#include "crypto.h"
#include "err.h"
#include "gateway.h"
#include "gateways/wechat.h"
#include "gw_config.h"
#include "peer_certs.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct fixture {
    cJSON *v;
    struct pt_gw_config cfg;
    struct pt_gw_env env;
};

static int rc_of(const char *name)
{
    static const struct {
        const char *name;
        int rc;
    } map[] = {{"PT_OK", PT_OK},
               {"PT_ESIG", PT_ESIG},
               {"PT_EPARSE", PT_EPARSE},
               {"PT_ENOTFOUND", PT_ENOTFOUND}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(map[i].name, name) == 0)
            return map[i].rc;
    fail_msg("unknown rc %s", name);
    return 1;
}

/* The merchant of the vectors; with_ring: the platform key in a trust store
 * (as the daemon loads it), else peer_key + platform_serial alone. */
static void config(struct fixture *f, int with_ring)
{
    pt_gw_config_free(&f->cfg);
    strcpy(f->cfg.name, "wechat");
    snprintf(f->cfg.endpoint, sizeof f->cfg.endpoint, "%s", pt_test_str(f->v, "endpoint"));
    snprintf(f->cfg.merchant_id, sizeof f->cfg.merchant_id, "%s", pt_test_str(f->v, "mchid"));
    snprintf(f->cfg.serial_no, sizeof f->cfg.serial_no, "%s", pt_test_str(f->v, "serial_no"));
    snprintf(f->cfg.platform_serial, sizeof f->cfg.platform_serial, "%s",
             pt_test_str(f->v, "platform_serial"));
    const char *k = pt_test_str(f->v, "apiv3_key");
    memcpy(f->cfg.secret, k, strlen(k));
    f->cfg.secret_len = strlen(k);
    f->cfg.private_key = pt_test_key(pt_test_str(f->v, "merchant_key"));
    f->cfg.peer_key = pt_test_key(pt_test_str(f->v, "platform_public_key"));
    if (with_ring) {
        assert_int_equal(pt_gw_keyring_new(&f->cfg.peer_keys), PT_OK);
        assert_int_equal(pt_gw_keyring_add(f->cfg.peer_keys, f->cfg.platform_serial,
                                           pt_test_key(pt_test_str(f->v, "platform_public_key")), 0,
                                           1),
                         PT_OK);
    }
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    f->v = pt_test_vectors("wechat_certs.json");
    f->env.now_ms = (int64_t)pt_test_int(f->v, "now_ms");
    f->env.nonce = pt_test_str(f->v, "nonce");
    config(f, 1);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    pt_gw_config_free(&f->cfg);
    cJSON_Delete(f->v);
    free(f);
    return 0;
}

static const cJSON *answer(const struct fixture *f, const char *name)
{
    const cJSON *a;
    cJSON_ArrayForEach(a, pt_test_cases(f->v, "wechat_certs.json", "answers"))
    {
        if (strcmp(pt_test_str(a, "name"), name) == 0)
            return a;
    }
    fail_msg("no answer %s in wechat_certs.json", name);
    return NULL;
}

static void test_request(void **state)
{
    struct fixture *f = *state;
    const cJSON *r = cJSON_GetObjectItem(f->v, "request");
    struct pt_http_request req;
    assert_int_equal(pt_gateway_wechat.build_keys(&f->cfg, &f->env, &req), PT_OK);
    assert_string_equal(req.method, "GET");
    assert_string_equal(req.url, pt_test_str(r, "url"));
    assert_int_equal(req.body_len, 0);
    const char *auth = NULL;
    for (int i = 0; i < req.nheaders; i++)
        if (strncmp(req.headers[i], "Authorization: ", 15) == 0)
            auth = req.headers[i] + 15;
    assert_non_null(auth);
    assert_string_equal(auth, pt_test_str(r, "authorization"));
    pt_http_request_free(&req);
}

/* Every answer: the rc the vector wants, and exactly its serials. */
static void check_answers(struct fixture *f)
{
    const cJSON *a;
    cJSON_ArrayForEach(a, pt_test_cases(f->v, "wechat_certs.json", "answers"))
    {
        const char *name = pt_test_str(a, "name");
        struct pt_http_response resp;
        struct pt_gw_peer_cert certs[PT_GW_MAX_PEER_KEYS];
        int n = -1;
        pt_test_response(a, &resp);
        int rc =
            pt_gateway_wechat.parse_keys(&f->cfg, &resp, &f->env, certs, PT_GW_MAX_PEER_KEYS, &n);
        if (rc != rc_of(pt_test_str(a, "rc")))
            fail_msg("%s: rc %s, want %s", name, pt_strerror(rc), pt_test_str(a, "rc"));
        const cJSON *want = cJSON_GetObjectItem(a, "serials");
        if (n != cJSON_GetArraySize(want))
            fail_msg("%s: %d certificates, want %d", name, n, cJSON_GetArraySize(want));
        for (int i = 0; i < n; i++) {
            assert_string_equal(certs[i].serial, cJSON_GetArrayItem(want, i)->valuestring);
            struct pt_pk *pk = NULL;
            assert_int_equal(
                pt_pk_load_mem(name, certs[i].pem, certs[i].pem_len, NULL, NULL, &pk, NULL, 0),
                PT_OK);
            assert_string_equal(pt_pk_serial(pk), certs[i].serial);
            assert_true(certs[i].expire_s > f->env.now_ms / 1000);
            pt_pk_free(pk);
        }
        pt_gw_peer_certs_free(certs, n);
        pt_http_response_free(&resp);
    }
}

static void test_answers_with_trust_store(void **state)
{
    check_answers(*state);
}

/* A configuration without a trust store (peer_key + platform_serial, as
 * `payterm verify` builds one) judges every answer the same way. */
static void test_answers_single_key(void **state)
{
    struct fixture *f = *state;
    config(f, 0);
    check_answers(f);
}

/* Once the rotated certificate is trusted, a message signed by its key
 * verifies, and one by the old key still does: any trusted serial. */
static void test_rotated_key_trusted_after_download(void **state)
{
    struct fixture *f = *state;
    struct pt_http_response resp;
    struct pt_gw_peer_cert certs[PT_GW_MAX_PEER_KEYS];
    int n = 0;
    pt_test_response(answer(f, "signed_by_the_new_key"), &resp);
    assert_int_equal(pt_gateway_wechat.parse_keys(&f->cfg, &resp, &f->env, certs, 8, &n), PT_ESIG);
    pt_http_response_free(&resp);

    pt_test_response(answer(f, "rotation_window"), &resp);
    assert_int_equal(pt_gateway_wechat.parse_keys(&f->cfg, &resp, &f->env, certs, 8, &n), PT_OK);
    pt_http_response_free(&resp);
    assert_int_equal(n, 2);
    struct pt_pk *pk = NULL;
    assert_int_equal(
        pt_pk_load_mem("rotated", certs[1].pem, certs[1].pem_len, NULL, NULL, &pk, NULL, 0), PT_OK);
    assert_int_equal(pt_gw_keyring_add(f->cfg.peer_keys, certs[1].serial, pk, certs[1].expire_s, 0),
                     PT_OK);
    /* The configured key is pinned: a download never replaces it. */
    assert_int_equal(pt_gw_keyring_add(f->cfg.peer_keys, certs[0].serial,
                                       pt_test_key("wechat_platform_public.pem"), 0, 0),
                     PT_EEXIST);
    pt_gw_peer_certs_free(certs, n);

    pt_test_response(answer(f, "signed_by_the_new_key"), &resp);
    assert_int_equal(pt_gateway_wechat.parse_keys(&f->cfg, &resp, &f->env, certs, 8, &n), PT_OK);
    assert_int_equal(n, 2);
    pt_gw_peer_certs_free(certs, n);
    pt_http_response_free(&resp);
    pt_test_response(answer(f, "rotation_window"), &resp);
    assert_int_equal(pt_gateway_wechat.parse_keys(&f->cfg, &resp, &f->env, certs, 8, &n), PT_OK);
    pt_gw_peer_certs_free(certs, n);
    /* The list is bounded: more certificates than room is refused whole. */
    assert_int_equal(pt_gateway_wechat.parse_keys(&f->cfg, &resp, &f->env, certs, 1, &n),
                     PT_ETOOBIG);
    assert_int_equal(n, 0);
    pt_http_response_free(&resp);
}

static void test_keyring(void **state)
{
    (void)state;
    struct pt_gw_keyring *kr = NULL;
    assert_int_equal(pt_gw_keyring_new(&kr), PT_OK);
    assert_int_equal(pt_gw_keyring_add(kr, "AA", pt_test_key("wechat_platform_public.pem"), 0, 1),
                     PT_OK);
    assert_true(pt_gw_keyring_has(kr, "aa")); /* case-insensitive */
    assert_false(pt_gw_keyring_has(kr, "AB"));
    assert_int_equal(pt_gw_keyring_verify(kr, "AB", "x", 1, "c2ln"), PT_ENOTFOUND);
    assert_int_equal(pt_gw_keyring_verify(kr, "AA", "x", 1, "c2ln"), PT_ESIG);
    /* Full: the unpinned key that expires first makes room. */
    char serial[16];
    for (int i = 1; i < PT_GW_MAX_PEER_KEYS; i++) {
        snprintf(serial, sizeof serial, "B%d", i);
        assert_int_equal(
            pt_gw_keyring_add(kr, serial, pt_test_key("other_public.pem"), 1000 + i, 0), PT_OK);
    }
    assert_int_equal(pt_gw_keyring_count(kr), PT_GW_MAX_PEER_KEYS);
    assert_int_equal(pt_gw_keyring_add(kr, "C1", pt_test_key("other_public.pem"), 5000, 0), PT_OK);
    assert_false(pt_gw_keyring_has(kr, "B1"));
    assert_true(pt_gw_keyring_has(kr, "C1"));
    /* Retired: expired ones, and those a download no longer lists. */
    char keep[2][PT_GW_SERIAL_MAX] = {"B7", "C1"}, gone[PT_GW_MAX_PEER_KEYS][PT_GW_SERIAL_MAX];
    assert_int_equal(pt_gw_keyring_retire(kr, 1003, NULL, 0, gone), 2); /* B2, B3 */
    assert_int_equal(pt_gw_keyring_retire(kr, 1003, (const char(*)[PT_GW_SERIAL_MAX])keep, 2, gone),
                     3); /* B4, B5, B6 */
    assert_int_equal(pt_gw_keyring_count(kr), 3);
    assert_true(pt_gw_keyring_has(kr, "AA")); /* pinned: never retired */
    pt_gw_keyring_destroy(kr);
    pt_gw_keyring_destroy(NULL);
}

static void test_parse_time(void **state)
{
    (void)state;
    int64_t t = 0;
    assert_int_equal(pt_wechat_parse_time("2026-12-01T10:00:00+08:00", &t), PT_OK);
    assert_int_equal(t, 1796090400);
    assert_int_equal(pt_wechat_parse_time("2026-12-01T02:00:00Z", &t), PT_OK);
    assert_int_equal(t, 1796090400);
    assert_int_equal(pt_wechat_parse_time("2026-12-01T02:00:00.123-00:30", &t), PT_OK);
    assert_int_equal(t, 1796090400 + 1800);
    assert_int_equal(pt_wechat_parse_time("2026-12-01 10:00:00", &t), PT_EPARSE);
    assert_int_equal(pt_wechat_parse_time("2026-13-01T10:00:00+08:00", &t), PT_EPARSE);
    assert_int_equal(pt_wechat_parse_time("2026-12-01T10:00:00+08:00x", &t), PT_EPARSE);
    assert_int_equal(pt_wechat_parse_time(NULL, &t), PT_EPARSE);
}

/* ---- the list form of platform_public_key_file ------------------------------------------- */

static void copy_key(const char *dir, const char *name)
{
    char src[1024], dst[1024];
    snprintf(src, sizeof src, "%s/keys/%s", PT_TEST_DATA_DIR, name);
    snprintf(dst, sizeof dst, "%s/%s", dir, name);
    char *text = pt_test_read_file(src, NULL);
    assert_non_null(text);
    pt_test_write_file(dst, text, 0600);
    free(text);
}

/* Loads gateways.wechat with platform_public_key_file = keys (JSON text)
 * and extra keys; returns the first failing step's code, err set. */
static int load_wechat(const char *dir, const char *keys, const char *extra, struct pt_gw_config *g,
                       char *err, size_t errlen)
{
    char path[512], text[4096];
    snprintf(path, sizeof path, "%s/payterm.json", dir);
    snprintf(text, sizeof text,
             "{\"data_dir\":\"data\",\"gateways\":{\"wechat\":{\"mchid\":\"1900000001\","
             "\"appid\":\"wx1\",\"serial_no\":\"AB\",\"private_key_file\":"
             "\"merchant_wechat_pkcs8.pem\",\"platform_public_key_file\":%s,%s"
             "\"apiv3_key_file\":\"apiv3.key\",\"notify_url\":\"https://pos.example.com/n\"}}}",
             keys, extra);
    pt_test_write_file(path, text, 0600);
    struct pt_config *cfg = calloc(1, sizeof *cfg);
    const char *paths[] = {path};
    memset(g, 0, sizeof *g);
    int rc = pt_config_load(paths, 1, cfg, err, errlen);
    if (rc == PT_OK)
        rc = pt_gw_config_load(cfg, "wechat", NULL, NULL, g, err, errlen);
    free(cfg);
    return rc;
}

static void test_config_list_form(void **state)
{
    (void)state;
    char dir[256], path[512], err[1024];
    struct pt_gw_config g;
    pt_test_tmpdir(dir, sizeof dir);
    copy_key(dir, "merchant_wechat_pkcs8.pem");
    copy_key(dir, "wechat_platform_cert.pem");
    copy_key(dir, "wechat_platform_public.pem");
    copy_key(dir, "other_public.pem");
    snprintf(path, sizeof path, "%s/apiv3.key", dir);
    pt_test_write_file(path, "payterm-test-apiv3-key-32-bytes!\n", 0600);

    /* The string form keeps working: one key in the trust store. */
    assert_int_equal(
        load_wechat(dir, "\"wechat_platform_public.pem\"",
                    "\"platform_serial\":\"5157F09EFDC096DE15EBE81A47057A7232F1B8E1\",", &g, err,
                    sizeof err),
        PT_OK);
    assert_int_equal(pt_gw_keyring_count(g.peer_keys), 1);
    assert_true(pt_gw_keyring_has(g.peer_keys, "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"));
    pt_gw_config_free(&g);
    /* A public key without platform_serial cannot be named. */
    assert_int_equal(load_wechat(dir, "\"wechat_platform_public.pem\"", "", &g, err, sizeof err),
                     PT_ECONFIG);
    assert_non_null(strstr(err, "platform_serial"));

    /* The list form: relative files, every serial trusted. */
    assert_int_equal(
        load_wechat(
            dir,
            "[{\"serial\":\"5157F09EFDC096DE15EBE81A47057A7232F1B8E1\",\"file\":"
            "\"wechat_platform_cert.pem\"},{\"serial\":\"6a1d\",\"file\":\"other_public.pem\"}]",
            "", &g, err, sizeof err),
        PT_OK);
    assert_int_equal(pt_gw_keyring_count(g.peer_keys), 2);
    assert_true(pt_gw_keyring_has(g.peer_keys, "6A1D"));
    assert_string_equal(g.platform_serial, "5157F09EFDC096DE15EBE81A47057A7232F1B8E1");
    pt_gw_config_free(&g);

    static const struct {
        const char *keys, *extra, *want1, *want2;
    } bad[] = {
        {"[{\"serial\":\"AB\",\"file\":\"other_public.pem\",\"mode\":1}]", "",
         "platform_public_key_file[0].mode", "unknown key"},
        {"[{\"serial\":\"XYZ\",\"file\":\"other_public.pem\"}]", "",
         "platform_public_key_file[0].serial", "hex"},
        {"[{\"file\":\"other_public.pem\"}]", "", "platform_public_key_file[0].serial", "required"},
        {"[{\"serial\":\"AB\",\"file\":\"missing.pem\"}]", "", "platform_public_key_file[0].file",
         "missing.pem"},
        {"[{\"serial\":\"AB\",\"file\":\"wechat_platform_cert.pem\"}]", "",
         "platform_public_key_file[0].file", "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"},
        {"[{\"serial\":\"AB\",\"file\":\"other_public.pem\"},{\"serial\":\"ab\",\"file\":"
         "\"other_public.pem\"}]",
         "", "platform_public_key_file[1].serial", "twice"},
        {"[]", "", "platform_public_key_file", "list of 1 to 8"},
        {"42", "", "platform_public_key_file", "file path"},
        {"[{\"serial\":\"AB\",\"file\":\"other_public.pem\"}]", "\"platform_serial\":\"AB\",",
         "platform_serial", "list form"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        int rc = load_wechat(dir, bad[i].keys, bad[i].extra, &g, err, sizeof err);
        if (rc == PT_OK || !strstr(err, bad[i].want1) || !strstr(err, bad[i].want2))
            fail_msg("case %zu (%s): rc %d, err \"%s\"; want \"%s\" and \"%s\"", i, bad[i].keys, rc,
                     err, bad[i].want1, bad[i].want2);
        pt_gw_config_free(&g);
    }
    pt_test_rmtree(dir);
}

/* ---- data_dir ------------------------------------------------------------------------- */

static void test_stored_certificates(void **state)
{
    struct fixture *f = *state;
    char dir[256], path[600];
    pt_test_tmpdir(dir, sizeof dir);
    struct pt_http_response resp;
    struct pt_gw_peer_cert certs[PT_GW_MAX_PEER_KEYS];
    int n = 0;
    pt_test_response(answer(f, "rotation_window"), &resp);
    assert_int_equal(pt_gateway_wechat.parse_keys(&f->cfg, &resp, &f->env, certs, 8, &n), PT_OK);
    pt_http_response_free(&resp);

    mode_t old = umask(0); /* 0600 whatever the umask */
    assert_int_equal(
        pt_peer_certs_keep(dir, "wechat", certs[1].serial, certs[1].pem, certs[1].pem_len), PT_OK);
    umask(old);
    snprintf(path, sizeof path, "%s/wechat-platform-%s.pem", dir, certs[1].serial);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0600);
    /* Serials name files: anything else is refused. */
    assert_int_equal(pt_peer_certs_keep(dir, "wechat", "../x", "x", 1), PT_EINVAL);
    /* Damaged files are skipped, never fatal: not PEM, another serial. */
    snprintf(path, sizeof path, "%s/wechat-platform-0BAD.pem", dir);
    pt_test_write_file(path, "not a certificate\n", 0600);
    snprintf(path, sizeof path, "%s/wechat-platform-0BAE.pem", dir);
    pt_test_write_file(path, certs[1].pem, 0600);

    struct pt_gw_keyring *kr = NULL;
    assert_int_equal(pt_gw_keyring_new(&kr), PT_OK);
    assert_int_equal(pt_peer_certs_load(dir, "wechat", kr, NULL, NULL), 1);
    assert_true(pt_gw_keyring_has(kr, certs[1].serial));
    assert_int_equal(pt_gw_keyring_count(kr), 1);
    pt_gw_keyring_destroy(kr);

    assert_int_equal(pt_peer_certs_keep(dir, "wechat", certs[1].serial, NULL, 0), PT_OK);
    snprintf(path, sizeof path, "%s/wechat-platform-%s.pem", dir, certs[1].serial);
    assert_int_not_equal(stat(path, &sb), 0);
    pt_gw_peer_certs_free(certs, n);
    pt_test_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answers_with_trust_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answers_single_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rotated_key_trusted_after_download, setup, teardown),
        cmocka_unit_test(test_keyring),
        cmocka_unit_test(test_parse_time),
        cmocka_unit_test(test_config_list_form),
        cmocka_unit_test_setup_teardown(test_stored_certificates, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
