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

/*
 * Every key file holds what its key's name says (SPEC 18, issue 32 item 10):
 * a private key that signs a probe message its own public half verifies, a
 * peer's public key or certificate that is not the merchant's own, a
 * merchant certificate that belongs to the private key and whose serial is
 * serial_no.  Each refusal names the configuration key and the file.
 */
#define WX_BASE                                                                                    \
    "\"mchid\":\"1900000001\",\"appid\":\"wx1\",\"apiv3_key_file\":\"apiv3.key\","                 \
    "\"notify_url\":\"https://pos.example.com/notify/wechat\""
static const struct key_case {
    const char *name, *gateway, *section;
    const char *mention[4]; /* what the error must say; NULL ends; none: loads */
} key_cases[] = {
    {"alipay: a public key as private_key_file",
     "alipay",
     "{\"app_id\":\"2021\",\"private_key_file\":\"alipay_gateway_public.pem\","
     "\"alipay_public_key_file\":\"alipay_gateway_public.pem\"}",
     {"gateways.alipay.private_key_file", "alipay_gateway_public.pem", "holds a public key"}},
    {"alipay: a certificate as private_key_file",
     "alipay",
     "{\"app_id\":\"2021\",\"private_key_file\":\"wechat_platform_cert.pem\","
     "\"alipay_public_key_file\":\"alipay_gateway_public.pem\"}",
     {"gateways.alipay.private_key_file", "wechat_platform_cert.pem", "holds a certificate"}},
    {"alipay: a private key as alipay_public_key_file",
     "alipay",
     "{\"app_id\":\"2021\",\"private_key_file\":\"merchant_alipay_pkcs1.pem\","
     "\"alipay_public_key_file\":\"alipay_gateway_private.pem\"}",
     {"gateways.alipay.alipay_public_key_file", "alipay_gateway_private.pem",
      "holds a private key"}},
    {"alipay: the merchant's own public key as alipay_public_key_file",
     "alipay",
     "{\"app_id\":\"2021\",\"private_key_file\":\"merchant_alipay_pkcs1.pem\","
     "\"alipay_public_key_file\":\"merchant_alipay_public.pem\"}",
     {"gateways.alipay.alipay_public_key_file", "merchant_alipay_public.pem",
      "public half of gateways.alipay.private_key_file"}},
    {"alipay: as it should be",
     "alipay",
     "{\"app_id\":\"2021\",\"private_key_file\":\"merchant_alipay_pkcs1.pem\","
     "\"alipay_public_key_file\":\"alipay_gateway_public.pem\"}",
     {NULL}},
    {"wechat: a public key as private_key_file",
     "wechat",
     "{" WX_BASE ",\"serial_no\":\"AB\",\"private_key_file\":\"wechat_platform_public.pem\","
     "\"platform_public_key_file\":\"wechat_platform_cert.pem\"}",
     {"gateways.wechat.private_key_file", "wechat_platform_public.pem", "holds a public key"}},
    {"wechat: a private key as platform_public_key_file",
     "wechat",
     "{" WX_BASE ",\"serial_no\":\"AB\",\"private_key_file\":\"merchant_wechat_pkcs8.pem\","
     "\"platform_public_key_file\":\"wechat_platform_private.pem\",\"platform_serial\":\"P1\"}",
     {"gateways.wechat.platform_public_key_file", "wechat_platform_private.pem",
      "holds a private key"}},
    {"wechat: a private key in the list of platform keys",
     "wechat",
     "{" WX_BASE ",\"serial_no\":\"AB\",\"private_key_file\":\"merchant_wechat_pkcs8.pem\","
     "\"platform_public_key_file\":[{\"serial\":\"5157F09EFDC096DE15EBE81A47057A7232F1B8E1\","
     "\"file\":\"wechat_platform_cert.pem\"},{\"serial\":\"AA01\",\"file\":\"other_private.pem\"}]"
     "}",
     {"gateways.wechat.platform_public_key_file[1].file", "other_private.pem",
      "holds a private key"}},
    {"wechat: the merchant's own key as the platform key",
     "wechat",
     "{" WX_BASE ",\"serial_no\":\"AB\",\"private_key_file\":\"wechat_platform_private.pem\","
     "\"platform_public_key_file\":\"wechat_platform_cert.pem\"}",
     {"gateways.wechat.platform_public_key_file", "wechat_platform_cert.pem",
      "public half of gateways.wechat.private_key_file"}},
    {"wechat: a merchant certificate of another key",
     "wechat",
     "{" WX_BASE ",\"serial_no\":\"5157F09EFDC096DE15EBE81A47057A7232F1B8E1\","
     "\"private_key_file\":\"merchant_wechat_pkcs8.pem\","
     "\"platform_public_key_file\":\"alipay_gateway_public.pem\",\"platform_serial\":\"P1\","
     "\"apiv2_key_file\":\"apiv2.key\",\"apiclient_cert_file\":\"wechat_platform_cert.pem\"}",
     {"gateways.wechat.apiclient_cert_file", "wechat_platform_cert.pem",
      "not the certificate of private_key_file", "merchant_wechat_pkcs8.pem"}},
    {"wechat: serial_no is not the merchant certificate's",
     "wechat",
     "{" WX_BASE ",\"serial_no\":\"ABCDEF\",\"private_key_file\":\"wechat_platform_private.pem\","
     "\"platform_public_key_file\":\"alipay_gateway_public.pem\",\"platform_serial\":\"P1\","
     "\"apiv2_key_file\":\"apiv2.key\",\"apiclient_cert_file\":\"wechat_platform_cert.pem\"}",
     {"gateways.wechat.serial_no", "\"ABCDEF\"", "5157F09EFDC096DE15EBE81A47057A7232F1B8E1",
      "wechat_platform_cert.pem"}},
    {"wechat: key, certificate and serial that belong together (any case)",
     "wechat",
     "{" WX_BASE ",\"serial_no\":\"5157f09efdc096de15ebe81a47057a7232f1b8e1\","
     "\"private_key_file\":\"wechat_platform_private.pem\","
     "\"platform_public_key_file\":\"alipay_gateway_public.pem\",\"platform_serial\":\"P1\","
     "\"apiv2_key_file\":\"apiv2.key\",\"apiclient_cert_file\":\"wechat_platform_cert.pem\"}",
     {NULL}},
    {"wechat: the bill through an API that is none",
     "wechat",
     "{" WX_BASE ",\"serial_no\":\"AB\",\"private_key_file\":\"merchant_wechat_pkcs8.pem\","
     "\"platform_public_key_file\":\"alipay_gateway_public.pem\",\"platform_serial\":\"P1\","
     "\"bill_api\":\"v4\"}",
     {"gateways.wechat.bill_api", "\"v4\"", "\"v2\""}},
    {"wechat: the bill through APIv2 without the APIv2 key",
     "wechat",
     "{" WX_BASE ",\"serial_no\":\"AB\",\"private_key_file\":\"merchant_wechat_pkcs8.pem\","
     "\"platform_public_key_file\":\"alipay_gateway_public.pem\",\"platform_serial\":\"P1\","
     "\"bill_api\":\"v2\"}",
     {"gateways.wechat.bill_api", "gateways.wechat.apiv2_key_file"}},
    {"wechat: the bill through APIv2 with the APIv2 key",
     "wechat",
     "{" WX_BASE ",\"serial_no\":\"5157F09EFDC096DE15EBE81A47057A7232F1B8E1\","
     "\"private_key_file\":\"wechat_platform_private.pem\","
     "\"platform_public_key_file\":\"alipay_gateway_public.pem\",\"platform_serial\":\"P1\","
     "\"apiv2_key_file\":\"apiv2.key\",\"apiclient_cert_file\":\"wechat_platform_cert.pem\","
     "\"bill_api\":\"v2\"}",
     {NULL}},
};

static void test_keys_hold_what_their_names_say(void **state)
{
    (void)state;
    static const char *const keys[] = {
        "alipay_gateway_public.pem",  "alipay_gateway_private.pem",  "merchant_alipay_pkcs1.pem",
        "merchant_alipay_public.pem", "merchant_wechat_pkcs8.pem",   "wechat_platform_cert.pem",
        "wechat_platform_public.pem", "wechat_platform_private.pem", "other_private.pem"};
    char dir[256], path[512], err[1024];
    pt_test_tmpdir(dir, sizeof dir);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        copy_key(dir, keys[i]);
    snprintf(path, sizeof path, "%s/apiv3.key", dir);
    pt_test_write_file(path, "payterm-test-apiv3-key-32-bytes!\n", 0600);
    snprintf(path, sizeof path, "%s/apiv2.key", dir);
    pt_test_write_file(path, "payterm-test-apiv2-key-32-chars!\n", 0600);
    snprintf(path, sizeof path, "%s/payterm.json", dir);
    size_t ran = 0, bad = 0;
    for (size_t i = 0; i < sizeof key_cases / sizeof key_cases[0]; i++, ran++) {
        const struct key_case *k = &key_cases[i];
        char text[2048];
        snprintf(text, sizeof text, "{\"gateways\":{\"%s\":%s}}", k->gateway, k->section);
        pt_test_write_file(path, text, 0600);
        struct pt_config cfg;
        const char *paths[] = {path};
        if (pt_config_load(paths, 1, &cfg, err, sizeof err) != PT_OK)
            fail_msg("%s: config: %s", k->name, err);
        struct pt_gw_config g;
        err[0] = '\0';
        int rc = pt_gw_config_load(&cfg, k->gateway, NULL, NULL, &g, err, sizeof err);
        /* Every row is tried and every wrong one printed, then the test fails. */
        if (rc == PT_OK && g.bill_apiv2 != (strstr(k->section, "\"bill_api\":\"v2\"") != NULL)) {
            print_error("%s: bill_apiv2 is %d\n", k->name, g.bill_apiv2);
            bad++;
        }
        if (rc == PT_OK)
            pt_gw_config_free(&g);
        if (!k->mention[0] && rc != PT_OK) {
            print_error("%s: refused: %s\n", k->name, err);
            bad++;
        } else if (k->mention[0] && rc == PT_OK) {
            print_error("%s: loaded\n", k->name);
            bad++;
        }
        for (int m = 0; rc != PT_OK && m < 4 && k->mention[m]; m++)
            if (!strstr(err, k->mention[m])) {
                print_error("%s: the error \"%s\" does not say %s\n", k->name, err, k->mention[m]);
                bad++;
            }
    }
    assert_int_equal(ran, 15); /* every row ran */
    assert_int_equal(bad, 0);
    pt_test_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_load_all),
                                       cmocka_unit_test(test_keys_hold_what_their_names_say)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
