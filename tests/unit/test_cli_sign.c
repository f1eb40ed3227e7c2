/*
 * test_cli_sign.c - `payterm sign` and `payterm verify` as a user runs them:
 * the real binary, arguments, standard input, JSON on standard output and the
 * exit codes of SPEC 8 (0 valid, 3 invalid, 2 usage), checked against the
 * SDK-generated vectors.
 */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct fixture {
    char dir[256];
    cJSON *alipay, *wechat, *stripe, *c2p, *wechat_v2, *c2p_pm;
};

static int setup(void **state)
{
    if (getenv("PT_TEST_EMULATED")) {
        /* Under qemu-user (the cross build's test run) this test process
         * would exec the aarch64 payterm itself, which needs binfmt_misc on
         * the host; the commands are plain C and run natively in CI. */
        *state = NULL;
        return 0;
    }
    struct fixture *f = calloc(1, sizeof *f);
    pt_test_tmpdir(f->dir, sizeof f->dir);
    f->alipay = pt_test_vectors("alipay.json");
    f->wechat = pt_test_vectors("wechat.json");
    f->stripe = pt_test_vectors("stripe.json");
    f->c2p = pt_test_vectors("2c2p.json");
    f->wechat_v2 = pt_test_vectors("wechat_v2.json");
    f->c2p_pm = pt_test_vectors("2c2p_pm.json");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    if (!f)
        return 0;
    pt_test_rmtree(f->dir);
    cJSON_Delete(f->alipay);
    cJSON_Delete(f->wechat);
    cJSON_Delete(f->stripe);
    cJSON_Delete(f->c2p);
    cJSON_Delete(f->wechat_v2);
    cJSON_Delete(f->c2p_pm);
    free(f);
    return 0;
}

/*
 * Runs payterm with args (NULL-terminated, without argv[0]) and input on
 * stdin; *out gets stdout parsed as JSON (NULL when not JSON).  Returns the
 * exit status.
 */
static int run(struct fixture *f, const char *input, cJSON **out, const char *const *args)
{
    char in_path[512], out_path[512];
    snprintf(in_path, sizeof in_path, "%s/stdin", f->dir);
    snprintf(out_path, sizeof out_path, "%s/stdout", f->dir);
    pt_test_write_file(in_path, input, 0600);
    const char *argv[32] = {PT_BINARY};
    int n = 1;
    for (; args[n - 1]; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        int i = open(in_path, O_RDONLY), o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int devnull = open("/dev/null", O_WRONLY);
        dup2(i, 0);
        dup2(o, 1);
        dup2(devnull, 2);
        execv(PT_BINARY, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    char *text = pt_test_read_file(out_path, NULL);
    *out = text ? cJSON_Parse(text) : NULL;
    free(text);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void key_path(const char *name, char *out, size_t len)
{
    snprintf(out, len, "%s/keys/%s", PT_TEST_DATA_DIR, name);
}

static void test_alipay(void **state)
{
    struct fixture *f = *state;
    if (!f)
        skip();
    char key[512], pub[512];
    cJSON *out;
    key_path("merchant_alipay_pkcs1.pem", key, sizeof key);
    key_path("alipay_gateway_public.pem", pub, sizeof pub);
    const cJSON *cli = cJSON_GetObjectItem(f->alipay, "cli");
    char *params = cJSON_PrintUnformatted(cJSON_GetObjectItem(cli, "params"));
    const char *sign[] = {"sign", "--gateway", "alipay", "--key", key, NULL};
    assert_int_equal(run(f, params, &out, sign), 0);
    assert_string_equal(pt_test_str(out, "string_to_sign"), pt_test_str(cli, "string_to_sign"));
    assert_string_equal(pt_test_str(out, "sign"), pt_test_str(cli, "sign"));
    cJSON_Delete(out);
    free(params);

    const char *verify[] = {"verify", "--gateway", "alipay", "--pubkey", pub, NULL};
    const cJSON *c;
    cJSON_ArrayForEach(c, pt_test_cases(f->alipay, "alipay.json", "notify"))
    {
        int want = strcmp(pt_test_str(c, "rc"), "ESIG") == 0 ? 3 : 0;
        int rc = run(f, pt_test_str(c, "body"), &out, verify);
        if (rc != want)
            fail_msg("verify alipay %s: exit %d, want %d", pt_test_str(c, "name"), rc, want);
        assert_int_equal(cJSON_IsTrue(cJSON_GetObjectItem(out, "valid")), want == 0);
        cJSON_Delete(out);
    }
    /* a response body, with the method it answers */
    const cJSON *r = cJSON_GetArrayItem(cJSON_GetObjectItem(f->alipay, "responses"), 0);
    const char *vresp[] = {"verify", "--gateway", "alipay",           "--pubkey",
                           pub,      "--method",  "alipay.trade.pay", NULL};
    assert_int_equal(run(f, pt_test_str(r, "body"), &out, vresp), 0);
    assert_string_equal(pt_test_str(cJSON_GetObjectItem(out, "response"), "code"), "10000");
    cJSON_Delete(out);
    /* a signing key file that is not there: usage error */
    const char *bad[] = {"sign", "--gateway", "alipay", "--key", "/nonexistent.pem", NULL};
    assert_int_equal(run(f, "{}", &out, bad), 2);
    cJSON_Delete(out);
    const char *notstr[] = {"sign", "--gateway", "alipay", "--key", key, NULL};
    assert_int_equal(run(f, "{\"a\":1}", &out, notstr), 2);
    cJSON_Delete(out);
}

static void test_wechat(void **state)
{
    struct fixture *f = *state;
    if (!f)
        skip();
    char key[512], pub[512];
    cJSON *out;
    key_path("merchant_wechat_pkcs8.pem", key, sizeof key);
    key_path("wechat_platform_public.pem", pub, sizeof pub);
    const cJSON *req = cJSON_GetArrayItem(cJSON_GetObjectItem(f->wechat, "requests"), 0);
    const char *sign[] = {"sign",
                          "--gateway",
                          "wechat",
                          "--key",
                          key,
                          "--mchid",
                          pt_test_str(f->wechat, "mchid"),
                          "--serial",
                          pt_test_str(f->wechat, "serial_no"),
                          "--method",
                          pt_test_str(req, "method"),
                          "--url",
                          pt_test_str(req, "url"),
                          "--timestamp",
                          pt_test_str(f->wechat, "timestamp"),
                          "--nonce",
                          pt_test_str(f->wechat, "nonce"),
                          NULL};
    assert_int_equal(run(f, pt_test_str(req, "body"), &out, sign), 0);
    assert_string_equal(pt_test_str(out, "message"), pt_test_str(req, "message"));
    assert_string_equal(pt_test_str(out, "signature"), pt_test_str(req, "signature"));
    assert_string_equal(pt_test_str(out, "authorization"), pt_test_str(req, "authorization"));
    cJSON_Delete(out);

    const cJSON *c;
    cJSON_ArrayForEach(c, pt_test_cases(f->wechat, "wechat.json", "notify"))
    {
        const char *name = pt_test_str(c, "name");
        if (strcmp(name, "too_old") == 0)
            continue; /* the CLI checks signatures, not the clock */
        const cJSON *h = cJSON_GetObjectItem(c, "headers");
        char hv[4][1500];
        /* header names in lower case: names are case-insensitive */
        snprintf(hv[0], sizeof hv[0], "wechatpay-timestamp: %s",
                 pt_test_str(h, "Wechatpay-Timestamp"));
        snprintf(hv[1], sizeof hv[1], "Wechatpay-Nonce: %s", pt_test_str(h, "Wechatpay-Nonce"));
        snprintf(hv[2], sizeof hv[2], "WECHATPAY-SIGNATURE:%s",
                 pt_test_str(h, "Wechatpay-Signature"));
        snprintf(hv[3], sizeof hv[3], "Wechatpay-Serial: %s", pt_test_str(h, "Wechatpay-Serial"));
        const char *verify[] = {"verify",
                                "--gateway",
                                "wechat",
                                "--pubkey",
                                pub,
                                "--serial",
                                pt_test_str(f->wechat, "platform_serial"),
                                "--apiv3-key",
                                pt_test_str(f->wechat, "apiv3_key"),
                                "--header",
                                hv[0],
                                "--header",
                                hv[1],
                                "--header",
                                hv[2],
                                "--header",
                                hv[3],
                                NULL};
        int want = strcmp(pt_test_str(c, "rc"), "ESIG") == 0 ? 3 : 0;
        int rc = run(f, pt_test_str(c, "body"), &out, verify);
        if (rc != want)
            fail_msg("verify wechat %s: exit %d, want %d", name, rc, want);
        if (strcmp(name, "valid") == 0) {
            const cJSON *p = cJSON_GetObjectItem(out, "plaintext");
            assert_string_equal(pt_test_str(p, "trade_state"), "SUCCESS");
            const cJSON *n = cJSON_GetObjectItem(out, "notification");
            assert_int_equal(pt_test_int(n, "amount"), 8888);
        }
        cJSON_Delete(out);
    }
    const char *missing[] = {"verify",   "--gateway", "wechat",   "--pubkey",           pub,
                             "--serial", "X",         "--header", "Wechatpay-Nonce: x", NULL};
    assert_int_equal(run(f, "{}", &out, missing), 2);
    cJSON_Delete(out);
}

static void test_stripe(void **state)
{
    struct fixture *f = *state;
    if (!f)
        skip();
    cJSON *out;
    const char *secret = pt_test_str(f->stripe, "webhook_secret");
    const cJSON *c;
    cJSON_ArrayForEach(c, pt_test_cases(f->stripe, "stripe.json", "webhooks"))
    {
        char hdr[1024], now[32];
        snprintf(hdr, sizeof hdr, "Stripe-Signature: %s", pt_test_str(c, "header"));
        snprintf(now, sizeof now, "%lld", pt_test_int(c, "now"));
        const char *verify[] = {"verify", "--gateway", "stripe", "--secret",    secret, "--header",
                                hdr,      "--now",     now,      "--tolerance", "300",  NULL};
        int want = cJSON_IsTrue(cJSON_GetObjectItem(c, "sdk_valid")) ? 0 : 3;
        int rc = run(f, pt_test_str(c, "payload"), &out, verify);
        if (rc != want)
            fail_msg("verify stripe %s: exit %d, want %d", pt_test_str(c, "name"), rc, want);
        cJSON_Delete(out);
    }
    /* sign, then verify what was signed */
    const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(f->stripe, "webhooks"), 0);
    const char *header = pt_test_str(first, "header");
    char t[32];
    snprintf(t, sizeof t, "%lld", strtoll(header + 2, NULL, 10));
    const char *sign[] = {"sign", "--gateway",   "stripe", "--secret",
                          secret, "--timestamp", t,        NULL};
    assert_int_equal(run(f, pt_test_str(first, "payload"), &out, sign), 0);
    assert_string_equal(pt_test_str(out, "header"), header);
    cJSON_Delete(out);
}

static void test_2c2p(void **state)
{
    struct fixture *f = *state;
    if (!f)
        skip();
    cJSON *out;
    const char *secret = pt_test_str(f->c2p, "secret");
    const cJSON *req = cJSON_GetArrayItem(cJSON_GetObjectItem(f->c2p, "requests"), 0);
    /* pretty-printed input signs like the SDK's compact JSON.stringify */
    cJSON *pretty = cJSON_Parse(pt_test_str(req, "payload_text"));
    char *text = cJSON_Print(pretty);
    cJSON_Delete(pretty);
    const char *sign[] = {"sign", "--gateway", "2c2p", "--secret", secret, NULL};
    assert_int_equal(run(f, text, &out, sign), 0);
    free(text);
    assert_string_equal(pt_test_str(out, "token"), pt_test_str(req, "token"));
    cJSON_Delete(out);

    char secret_file[512];
    snprintf(secret_file, sizeof secret_file, "%s/secret", f->dir);
    char line[256];
    snprintf(line, sizeof line, "%s\n", secret);
    pt_test_write_file(secret_file, line, 0600);
    const cJSON *c;
    cJSON_ArrayForEach(c, pt_test_cases(f->c2p, "2c2p.json", "verify"))
    {
        const char *verify[] = {"verify", "--gateway", "2c2p", "--secret-file", secret_file, NULL};
        int want = strcmp(pt_test_str(c, "rc"), "OK") == 0 ? 0 : 3;
        int rc = run(f, pt_test_str(c, "token"), &out, verify);
        if (rc != want)
            fail_msg("verify 2c2p %s: exit %d, want %d", pt_test_str(c, "name"), rc, want);
        cJSON_Delete(out);
    }
    const cJSON *n = cJSON_GetArrayItem(cJSON_GetObjectItem(f->c2p, "notify"), 0);
    const char *verify[] = {"verify", "--gateway", "2c2p", "--secret", secret, NULL};
    assert_int_equal(run(f, pt_test_str(n, "body"), &out, verify), 0);
    assert_int_equal(pt_test_int(cJSON_GetObjectItem(out, "notification"), "amount"), 100000);
    cJSON_Delete(out);
}

/* The APIv2 HMAC of WeChat's payment-code calls: sign as the SDK signs,
 * verify answers (a forged USERPAYING is invalid, exit 3). */
static void test_wechat_v2(void **state)
{
    struct fixture *f = *state;
    if (!f)
        skip();
    char key[512];
    snprintf(key, sizeof key, "%s/apiv2_key", f->dir);
    pt_test_write_file(key, pt_test_str(f->wechat_v2, "apiv2_key"), 0600);
    const cJSON *c;
    cJSON *out;
    const char *sign[] = {"sign", "--gateway", "wechat-v2", "--key-file", key, NULL};
    cJSON_ArrayForEach(c, pt_test_cases(f->wechat_v2, "wechat_v2.json", "cli.sign"))
    {
        char *params = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "params"));
        int rc = run(f, params, &out, sign);
        if (rc != 0)
            fail_msg("sign wechat-v2 %s: exit %d", pt_test_str(c, "name"), rc);
        assert_string_equal(pt_test_str(out, "string_to_sign"), pt_test_str(c, "string_to_sign"));
        assert_string_equal(pt_test_str(out, "sign"), pt_test_str(c, "sign"));
        assert_string_equal(pt_test_str(out, "xml"), pt_test_str(c, "xml"));
        cJSON_Delete(out);
        free(params);
    }
    const char *verify[] = {"verify", "--gateway", "wechat-v2", "--key-file", key, NULL};
    cJSON_ArrayForEach(c, pt_test_cases(f->wechat_v2, "wechat_v2.json", "cli.verify"))
    {
        int rc = run(f, pt_test_str(c, "body"), &out, verify);
        if (rc != pt_test_int(c, "exit"))
            fail_msg("verify wechat-v2 %s: exit %d, want %lld", pt_test_str(c, "name"), rc,
                     pt_test_int(c, "exit"));
        assert_int_equal(cJSON_IsTrue(cJSON_GetObjectItem(out, "valid")),
                         cJSON_IsTrue(cJSON_GetObjectItem(c, "valid")));
        cJSON_Delete(out);
    }
    /* usage: no --key-file, a sign_type WeChat does not have */
    const char *nokey[] = {"verify", "--gateway", "wechat-v2", NULL};
    assert_int_equal(run(f, "<xml></xml>", &out, nokey), 2);
    cJSON_Delete(out);
    assert_int_equal(run(f, "{\"sign_type\":\"SHA1\"}", &out, sign), 2);
    cJSON_Delete(out);
}

/* 2C2P's Payment Maintenance envelope (SPEC 5a): sign, then verify as 2C2P
 * would; verify every answer the npm `jose` library sealed
 * (tests/vectors/2c2p_pm.json) - exit 0 with the XML, or 3 with why. */
static void test_2c2p_pm(void **state)
{
    struct fixture *f = *state;
    if (!f)
        skip();
    char mkey[512], mpub[512], gkey[512], gcer[512], gpem[512];
    key_path("c2p_merchant_private.pem", mkey, sizeof mkey);
    key_path("c2p_merchant_public.pem", mpub, sizeof mpub);
    key_path("c2p_gateway_private.pem", gkey, sizeof gkey);
    key_path("c2p_gateway_cert.cer", gcer, sizeof gcer);
    key_path("c2p_gateway_cert.pem", gpem, sizeof gpem);
    cJSON *out;
    const char *xml =
        pt_test_str(cJSON_GetArrayItem(cJSON_GetObjectItem(f->c2p_pm, "requests"), 0), "xml");
    const char *sign[] = {"sign", "--gateway", "2c2p-pm", "--key", mkey, "--peer-key", gcer, NULL};
    assert_int_equal(run(f, xml, &out, sign), 0);
    char *token = strdup(pt_test_str(out, "token"));
    cJSON_Delete(out);
    /* 2C2P's side opens it (its key decrypts, the merchant's public key verifies). */
    const char *as_2c2p[] = {"verify", "--gateway",  "2c2p-pm", "--key",
                             gkey,     "--peer-key", mpub,      NULL};
    assert_int_equal(run(f, token, &out, as_2c2p), 0);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(out, "valid")));
    assert_string_equal(pt_test_str(out, "xml"), xml);
    cJSON_Delete(out);
    /* The merchant cannot read what it sent to 2C2P. */
    const char *as_merchant[] = {"verify", "--gateway",  "2c2p-pm", "--key",
                                 mkey,     "--peer-key", gpem,      NULL};
    assert_int_equal(run(f, token, &out, as_merchant), 3);
    assert_false(cJSON_IsTrue(cJSON_GetObjectItem(out, "valid")));
    cJSON_Delete(out);
    free(token);
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, pt_test_cases(f->c2p_pm, "2c2p_pm.json", "jose_made"))
    {
        if (strcmp(pt_test_str(c, "kind"), "nested") != 0 ||
            strcmp(pt_test_str(c, "side"), "answer") != 0)
            continue;
        int want = strcmp(pt_test_str(c, "rc"), "ok") == 0 ? 0 : 3;
        int rc = run(f, pt_test_str(c, "token"), &out, as_merchant);
        if (rc != want)
            fail_msg("verify 2c2p-pm %s: exit %d, want %d", pt_test_str(c, "name"), rc, want);
        if (want == 0)
            assert_string_equal(pt_test_str(out, "xml"), pt_test_str(c, "text"));
        else
            assert_true(strlen(pt_test_str(out, "error")) > 10);
        cJSON_Delete(out);
        n++;
    }
    assert_int_equal(n, 19); /* every nested answer of the file */
    /* Usage: the keys are required, each of the right kind. */
    const char *no_peer[] = {"verify", "--gateway", "2c2p-pm", "--key", mkey, NULL};
    assert_int_equal(run(f, "x", &out, no_peer), 2);
    cJSON_Delete(out);
    const char *public_key[] = {"sign", "--gateway",  "2c2p-pm", "--key",
                                mpub,   "--peer-key", gcer,      NULL};
    assert_int_equal(run(f, xml, &out, public_key), 2);
    cJSON_Delete(out);
    const char *private_peer[] = {"sign", "--gateway",  "2c2p-pm", "--key",
                                  mkey,   "--peer-key", gkey,      NULL};
    assert_int_equal(run(f, xml, &out, private_peer), 2);
    cJSON_Delete(out);
    assert_int_equal(run(f, "", &out, sign), 2);
    cJSON_Delete(out);
}

static void test_usage(void **state)
{
    struct fixture *f = *state;
    if (!f)
        skip();
    cJSON *out;
    const char *help[] = {"verify", "--help", NULL};
    assert_int_equal(run(f, "", &out, help), 0);
    cJSON_Delete(out);
    const char *help2[] = {"sign", "--help", NULL};
    assert_int_equal(run(f, "", &out, help2), 0);
    cJSON_Delete(out);
    const char *nogw[] = {"verify", "--secret", "x", NULL};
    assert_int_equal(run(f, "", &out, nogw), 2);
    cJSON_Delete(out);
    const char *unknown[] = {"verify", "--gateway", "stripe", "--frobnicate", NULL};
    assert_int_equal(run(f, "", &out, unknown), 2);
    cJSON_Delete(out);
    const char *nosecret[] = {"verify", "--gateway", "2c2p", NULL};
    assert_int_equal(run(f, "x.y.z", &out, nosecret), 2);
    cJSON_Delete(out);
    const char *badnow[] = {"verify",
                            "--gateway",
                            "stripe",
                            "--secret",
                            "whsec_x",
                            "--header",
                            "Stripe-Signature: t=1,v1=00",
                            "--now",
                            "soon",
                            NULL};
    assert_int_equal(run(f, "{}", &out, badnow), 2);
    cJSON_Delete(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alipay),    cmocka_unit_test(test_wechat),
        cmocka_unit_test(test_stripe),    cmocka_unit_test(test_2c2p),
        cmocka_unit_test(test_wechat_v2), cmocka_unit_test(test_2c2p_pm),
        cmocka_unit_test(test_usage),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
