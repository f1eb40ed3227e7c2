/*
 * test_gw_config.c - pt_gw_config_load: from a configuration file to loaded
 * keys and secrets for each gateway, and errors that name the key and file.
 */
#include "testutil.h"

#include "config_load.h"
#include "crypto.h"
#include "err.h"
#include "gw_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void copy_key(const char *dir, const char *name)
{
    char src[1024], dst[1024];
    snprintf(src, sizeof src, "%s/keys/%s", PT_TEST_DATA_DIR, name);
    snprintf(dst, sizeof dst, "%s/%s", dir, name);
    char *text = pt_test_read_file(src, NULL);
    assert_non_null(text);
    pt_test_write_file(dst, text, 0600); /* git keeps no modes: make them strict */
    free(text);
}

static void test_load_all(void **state)
{
    (void)state;
    char dir[256], path[512], err[1024];
    pt_test_tmpdir(dir, sizeof dir);
    copy_key(dir, "merchant_alipay_pkcs1.pem");
    copy_key(dir, "alipay_gateway_public.pem");
    copy_key(dir, "merchant_wechat_pkcs8.pem");
    copy_key(dir, "wechat_platform_cert.pem");
    snprintf(path, sizeof path, "%s/apiv3.key", dir);
    pt_test_write_file(path, "payterm-test-apiv3-key-32-bytes!\n", 0600);
    snprintf(path, sizeof path, "%s/short.key", dir);
    pt_test_write_file(path, "too-short\n", 0600);
    snprintf(path, sizeof path, "%s/sk", dir);
    pt_test_write_file(path, "sk_test_payterm\n", 0600);
    snprintf(path, sizeof path, "%s/whsec", dir);
    pt_test_write_file(path, "whsec_abc\n", 0600);
    snprintf(path, sizeof path, "%s/c2p", dir);
    pt_test_write_file(path, "CD229682D3297390B9F66FF4020B758F\n", 0600);
    snprintf(path, sizeof path, "%s/payterm.json", dir);
    pt_test_write_file(
        path,
        "{\"data_dir\":\"data\",\"gateways\":{"
        "\"alipay\":{\"app_id\":\"2021\",\"private_key_file\":\"merchant_alipay_pkcs1.pem\","
        "\"alipay_public_key_file\":\"alipay_gateway_public.pem\"},"
        "\"wechat\":{\"mchid\":\"1900000001\",\"appid\":\"wx1\",\"serial_no\":\"AB\","
        "\"private_key_file\":\"merchant_wechat_pkcs8.pem\","
        "\"platform_public_key_file\":\"wechat_platform_cert.pem\",\"platform_serial\":\"5157\","
        "\"apiv3_key_file\":\"apiv3.key\",\"notify_url\":\"https://pos.example.com/notify/"
        "wechat\"},"
        "\"stripe\":{\"secret_key_file\":\"sk\",\"webhook_secret_file\":\"whsec\"},"
        "\"2c2p\":{\"merchant_id\":\"JT04\",\"secret_key_file\":\"c2p\"}}}",
        0600);
    struct pt_config cfg;
    const char *paths[] = {path};
    if (pt_config_load(paths, 1, &cfg, err, sizeof err) != PT_OK)
        fail_msg("config: %s", err);

    struct pt_gw_config g;
    assert_int_equal(pt_gw_config_load(&cfg, "alipay", NULL, NULL, &g, err, sizeof err), PT_OK);
    assert_int_equal(pt_pk_kind(g.private_key), PT_PK_PRIVATE);
    assert_int_equal(pt_pk_kind(g.peer_key), PT_PK_PUBLIC);
    assert_string_equal(g.app_id, "2021");
    pt_gw_config_free(&g);
    assert_int_equal(pt_gw_config_load(&cfg, "wechat", NULL, NULL, &g, err, sizeof err), PT_OK);
    assert_int_equal(g.secret_len, 32);
    assert_int_equal(pt_pk_kind(g.peer_key), PT_PK_CERT);
    pt_gw_config_free(&g);
    assert_int_equal(pt_gw_config_load(&cfg, "stripe", NULL, NULL, &g, err, sizeof err), PT_OK);
    assert_int_equal(g.secret_len, strlen("sk_test_payterm"));
    assert_memory_equal(g.webhook_secret, "whsec_abc", 9);
    assert_int_equal(g.webhook_secret_len, 9);
    pt_gw_config_free(&g);
    assert_int_equal(pt_gw_config_load(&cfg, "2c2p", NULL, NULL, &g, err, sizeof err), PT_OK);
    assert_int_equal(g.secret_len, 32);
    pt_gw_config_free(&g);

    /* errors name the key and the file */
    /* The settings' file slots, as the gateways' key tables fill them. */
    struct pt_gw_settings *wx = pt_config_gateway(&cfg, "wechat");
    struct pt_gw_settings *ali = pt_config_gateway(&cfg, "alipay");
    snprintf(wx->files[2], sizeof wx->files[2], "%s/short.key", dir); /* apiv3_key_file */
    assert_int_equal(pt_gw_config_load(&cfg, "wechat", NULL, NULL, &g, err, sizeof err), PT_EPARSE);
    assert_non_null(strstr(err, "gateways.wechat.apiv3_key_file"));
    assert_non_null(strstr(err, "short.key"));
    snprintf(ali->files[0], sizeof ali->files[0], "%s/missing.pem", dir); /* private_key_file */
    assert_int_equal(pt_gw_config_load(&cfg, "alipay", NULL, NULL, &g, err, sizeof err), PT_EIO);
    assert_non_null(strstr(err, "gateways.alipay.private_key_file"));
    assert_non_null(strstr(err, "missing.pem"));
    assert_null(g.private_key);
    pt_config_gateway(&cfg, "2c2p")->configured = 0;
    assert_int_equal(pt_gw_config_load(&cfg, "2c2p", NULL, NULL, &g, err, sizeof err), PT_ECONFIG);
    pt_test_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_load_all)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
