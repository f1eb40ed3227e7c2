/*
 * test_gw_wechat_v2.c - WeChat Pay APIv2 payment code (method barcode of the
 * wechat gateway) against vectors made with wechatpay-axios-plugin
 * (tests/vectors/wechat_v2.json): the exact request bytes and signs of
 * micropay, orderquery and reverse, the client certificate on reverse only,
 * every outcome class, forged / unsigned / MD5 answers (success and FAIL:
 * USERPAYING, NOTENOUGH) not believed, the XML reader's refusals (DOCTYPE,
 * entities, nesting, size, duplicates, "]]>", NUL, control characters), the
 * writer's CDATA split, the configuration and `sign`/`verify --gateway
 * wechat-v2` as functions (tests/unit/test_cli_sign.c runs the binary).
 */
#include "testutil.h"

#include "charge.h"
#include "crypto.h"
#include "err.h"
#include "gateway.h"
#include "gateways/gwcli.h"
#include "gateways/wechat.h"
#include "gateways/wechat_v2.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fixture {
    cJSON *v;
    struct pt_gw_config cfg;
    char dir[256];
};

static void set_key(struct pt_gw_config *cfg, const char *k)
{
    memset(cfg->apiv2_key, 0, sizeof cfg->apiv2_key);
    cfg->apiv2_key_len = strlen(k);
    memcpy(cfg->apiv2_key, k, cfg->apiv2_key_len);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    f->v = pt_test_vectors("wechat_v2.json");
    strcpy(f->cfg.name, "wechat");
    strcpy(f->cfg.endpoint, "https://api.mch.weixin.qq.com");
    snprintf(f->cfg.app_id, sizeof f->cfg.app_id, "%s", pt_test_str(f->v, "appid"));
    snprintf(f->cfg.merchant_id, sizeof f->cfg.merchant_id, "%s", pt_test_str(f->v, "mch_id"));
    set_key(&f->cfg, pt_test_str(f->v, "apiv2_key"));
    strcpy(f->cfg.client_cert_file, "/etc/payterm/apiclient_cert.pem");
    strcpy(f->cfg.client_key_file, "/etc/payterm/apiclient_key.pem");
    pt_test_tmpdir(f->dir, sizeof f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    pt_gw_config_free(&f->cfg);
    pt_test_rmtree(f->dir);
    cJSON_Delete(f->v);
    free(f);
    return 0;
}

static struct pt_gw_env env_of(const struct fixture *f)
{
    return (struct pt_gw_env){.now_ms = 1764554400000, .nonce = pt_test_str(f->v, "nonce")};
}

/* ---- requests ------------------------------------------------------------- */

static void test_requests(void **state)
{
    struct fixture *f = *state;
    const cJSON *c;
    int n = 0;
    struct pt_gw_env env = env_of(f);
    cJSON_ArrayForEach(c, pt_test_cases(f->v, "wechat_v2.json", "requests"))
    {
        const char *name = pt_test_str(c, "name");
        struct pt_charge ch;
        struct pt_http_request req;
        struct pt_gw_config cfg = f->cfg;
        snprintf(cfg.client_ip, sizeof cfg.client_ip, "%s", pt_test_str(c, "client_ip"));
        pt_test_charge_from(cJSON_GetObjectItem(c, "charge"), "wechat", &ch);
        /* Through the gateway's table: method barcode goes to APIv2. */
        int rc = pt_gateway_wechat.build(&cfg, (enum pt_gw_op)pt_test_op(pt_test_str(c, "op")), &ch,
                                         &env, &req);
        if (rc != PT_OK)
            fail_msg("%s: build rc %d", name, rc);
        assert_string_equal(req.method, "POST");
        assert_string_equal(req.url, pt_test_str(c, "url"));
        const char *want = pt_test_str(c, "body");
        if (req.body_len != strlen(want) || memcmp(req.body, want, req.body_len) != 0)
            fail_msg("%s: body\n  got  %.*s\n  want %s", name, (int)req.body_len, req.body, want);
        assert_string_equal(pt_http_request_header(&req, "Content-Type"),
                            "text/xml; charset=utf-8");
        assert_null(pt_http_request_header(&req, "Authorization")); /* no APIv3 header */
        if (cJSON_IsTrue(cJSON_GetObjectItem(c, "mtls"))) {
            assert_string_equal(req.client_cert_file, cfg.client_cert_file);
            assert_string_equal(req.client_key_file, cfg.client_key_file);
        } else {
            assert_null(req.client_cert_file);
            assert_null(req.client_key_file);
        }
        /* The string to sign and the sign, read back from the bytes. */
        struct pt_wxv2_msg m;
        assert_int_equal(pt_wxv2_parse(req.body, req.body_len, &m), PT_OK);
        char *sts = pt_wxv2_string_to_sign(m.f, (size_t)m.n, NULL);
        assert_string_equal(sts, pt_test_str(c, "string_to_sign"));
        assert_string_equal(pt_wxv2_get(&m, "sign"), pt_test_str(c, "sign"));
        assert_int_equal(pt_wxv2_verify(cfg.apiv2_key, cfg.apiv2_key_len, &m), PT_OK);
        if (strcmp(name, "pay_cdata_breakout_subject") == 0) {
            /* the value survived its "]]>" whole; no second total_fee */
            assert_string_equal(pt_wxv2_get(&m, "body"), ch.subject);
            assert_string_equal(pt_wxv2_get(&m, "total_fee"), "8888");
        }
        free(sts);
        pt_wxv2_msg_free(&m);
        pt_http_request_free(&req);
        n++;
    }
    assert_int_equal(n, 7);
}

static void test_build_refuses(void **state)
{
    struct fixture *f = *state;
    struct pt_gw_env env = env_of(f);
    struct pt_charge ch;
    struct pt_http_request req;
    pt_test_charge_from(cJSON_GetObjectItem(f->v, "charge"), "wechat", &ch);

    struct pt_gw_config cfg = f->cfg;
    cfg.apiv2_key_len = 0; /* a wechat gateway without apiv2_key_file */
    assert_int_equal(pt_gateway_wechat.build(&cfg, PT_GW_PAY, &ch, &env, &req), PT_EINVAL);
    assert_int_equal(pt_gateway_wechat.build(&cfg, PT_GW_QUERY, &ch, &env, &req), PT_EINVAL);
    cfg = f->cfg;
    cfg.client_cert_file[0] = '\0'; /* reverse needs the API certificate */
    assert_int_equal(pt_gateway_wechat.build(&cfg, PT_GW_CANCEL, &ch, &env, &req), PT_EINVAL);
    assert_int_equal(pt_gateway_wechat.build(&cfg, PT_GW_QUERY, &ch, &env, &req), PT_OK);
    pt_http_request_free(&req);

    struct pt_charge nocode = ch;
    nocode.payment_code[0] = '\0';
    assert_int_equal(pt_gateway_wechat.build(&f->cfg, PT_GW_PAY, &nocode, &env, &req), PT_EINVAL);
    struct pt_gw_env nonce_less = {.now_ms = env.now_ms};
    assert_int_equal(pt_gateway_wechat.build(&f->cfg, PT_GW_PAY, &ch, &nonce_less, &req),
                     PT_EINVAL);
    struct pt_gw_env long_nonce = {.nonce = "0123456789012345678901234567890123"};
    assert_int_equal(pt_gateway_wechat.build(&f->cfg, PT_GW_PAY, &ch, &long_nonce, &req),
                     PT_EINVAL);
    struct pt_charge ctl = ch;
    strcpy(ctl.subject, "bad\x01subject");
    assert_int_equal(pt_gateway_wechat.build(&f->cfg, PT_GW_PAY, &ctl, &env, &req), PT_EINVAL);
    assert_null(req.url); /* left empty on failure */
}

/* ---- answers --------------------------------------------------------------- */

static void test_responses(void **state)
{
    struct fixture *f = *state;
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, pt_test_cases(f->v, "wechat_v2.json", "responses"))
    {
        const char *name = pt_test_str(c, "name");
        struct pt_charge ch;
        const cJSON *cj = cJSON_GetObjectItem(c, "charge");
        pt_test_charge_from(cj ? cj : cJSON_GetObjectItem(f->v, "charge"), "wechat", &ch);
        struct pt_http_response resp;
        pt_test_response(c, &resp);
        struct pt_gw_result r;
        assert_int_equal(pt_gateway_wechat.parse(&f->cfg,
                                                 (enum pt_gw_op)pt_test_op(pt_test_str(c, "op")),
                                                 &ch, &resp, &r),
                         PT_OK);
        if (strcmp(pt_outcome_name(r.outcome), pt_test_str(c, "outcome")) != 0 ||
            strcmp(r.code, pt_test_str(c, "code")) != 0)
            fail_msg("%s: got %s/%s (%s), want %s/%s", name, pt_outcome_name(r.outcome), r.code,
                     r.message, pt_test_str(c, "outcome"), pt_test_str(c, "code"));
        if (cJSON_GetObjectItem(c, "trade_no"))
            assert_string_equal(r.trade_no, pt_test_str(c, "trade_no"));
        if (cJSON_GetObjectItem(c, "amount")) {
            assert_int_equal(r.amount, pt_test_int(c, "amount"));
            assert_string_equal(r.currency, pt_test_str(c, "currency"));
        }
        if (r.review != cJSON_IsTrue(cJSON_GetObjectItem(c, "review")))
            fail_msg("%s: review %d", name, r.review);
        /* Nothing unverified is ever a success, a decline or a wait. */
        if (strcmp(r.code, "invalid_signature") == 0)
            assert_int_equal(r.outcome, PT_OUTCOME_AMBIGUOUS);
        pt_http_response_free(&resp);
        n++;
    }
    assert_true(n >= 60);
}

/* Re-signs an answer body's fields with key (what an attacker without the
 * merchant's key can do at best is sign with another one). */
static char *resign(const char *xml, const char *key, const char *set_name, const char *set_value)
{
    struct pt_wxv2_msg m;
    assert_int_equal(pt_wxv2_parse(xml, strlen(xml), &m), PT_OK);
    struct pt_wxv2_field f[PT_WXV2_FIELDS_MAX];
    int n = 0;
    for (int i = 0; i < m.n; i++)
        if (strcmp(m.f[i].name, "sign") != 0)
            f[n++] = m.f[i];
    for (int i = 0; set_name && i < n; i++)
        if (strcmp(f[i].name, set_name) == 0)
            f[i].value = set_value;
    char sign[PT_WXV2_SIGN_MAX], *out = NULL;
    assert_int_equal(pt_wxv2_sign(PT_WXV2_HMAC_SHA256, (const unsigned char *)key, strlen(key), f,
                                  (size_t)n, sign),
                     PT_OK);
    f[n++] = (struct pt_wxv2_field){"sign", sign};
    assert_int_equal(pt_wxv2_xml(f, (size_t)n, &out, NULL), PT_OK);
    pt_wxv2_msg_free(&m);
    return out;
}

static const cJSON *response(const struct fixture *f, const char *name)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, pt_test_cases(f->v, "wechat_v2.json", "responses"))
    {
        if (strcmp(pt_test_str(c, "name"), name) == 0)
            return c;
    }
    fail_msg("no response vector %s", name);
    return NULL;
}

static struct pt_gw_result parse_body(const struct fixture *f, enum pt_gw_op op, const char *body)
{
    struct pt_charge ch;
    pt_test_charge_from(cJSON_GetObjectItem(f->v, "charge"), "wechat", &ch);
    struct pt_http_response resp = {.status = 200, .body = (char *)body, .body_len = strlen(body)};
    struct pt_gw_result r;
    assert_int_equal(pt_gateway_wechat.parse(&f->cfg, op, &ch, &resp, &r), PT_OK);
    return r;
}

/*
 * The official SDK returns a FAIL answer's fields before it checks the sign:
 * a forged USERPAYING would keep a charge waiting (and a forged NOTENOUGH
 * fail one that was paid).  Every variant of a forgery is AMBIGUOUS here.
 */
static void test_forged_fail_answers(void **state)
{
    struct fixture *f = *state;
    const char *other = pt_test_str(f->v, "other_apiv2_key");
    static const char *const names[] = {"pay_userpaying", "pay_declined_notenough", "pay_success",
                                        NULL};
    for (const char *const *nm = names; *nm; nm++) {
        const char *good = pt_test_str(response(f, *nm), "body");
        struct pt_gw_result r = parse_body(f, PT_GW_PAY, good);
        assert_int_not_equal(r.outcome, PT_OUTCOME_AMBIGUOUS); /* the genuine one is believed */

        char *forged = resign(good, other, NULL, NULL);
        r = parse_body(f, PT_GW_PAY, forged);
        assert_int_equal(r.outcome, PT_OUTCOME_AMBIGUOUS);
        assert_string_equal(r.code, "invalid_signature");
        free(forged);

        /* one digit of the sign changed */
        char *flip = strdup(good);
        char *s = strstr(flip, "<sign><![CDATA[");
        assert_non_null(s);
        s += strlen("<sign><![CDATA[");
        *s = *s == 'A' ? 'B' : 'A';
        r = parse_body(f, PT_GW_PAY, flip);
        assert_string_equal(r.code, "invalid_signature");
        free(flip);
    }
    /* A genuine USERPAYING turned into a success by re-signing with another
     * key is no better. */
    char *upgraded =
        resign(pt_test_str(response(f, "pay_userpaying"), "body"), other, "result_code", "SUCCESS");
    struct pt_gw_result r = parse_body(f, PT_GW_PAY, upgraded);
    assert_string_equal(r.code, "invalid_signature");
    free(upgraded);
}

/* ---- the XML reader and writer ------------------------------------------------ */

static int parse_rc(const char *xml, size_t len)
{
    struct pt_wxv2_msg m;
    int rc = pt_wxv2_parse(xml, len, &m);
    pt_wxv2_msg_free(&m);
    return rc;
}

static void test_xml_hostile(void **state)
{
    (void)state;
    static const char *const refused[] = {
        "<!DOCTYPE xml [<!ENTITY x \"y\">]><xml><a>&x;</a></xml>",
        "<!DOCTYPE xml SYSTEM \"file:///etc/passwd\"><xml><a>1</a></xml>",
        "<xml><!DOCTYPE x><a>1</a></xml>",
        "<xml><a>&x;</a></xml>",
        "<xml><a>&#x41;</a></xml>",
        "<xml><a>&#65;</a></xml>",
        "<xml><a>a & b</a></xml>",
        "<xml><a><b>1</b></a></xml>",
        "<xml><a>1</a><a>2</a></xml>",
        "<xml><a>1</a><a/></xml>",
        "<xml><a>x]]>y</a></xml>",
        "<xml><a><![CDATA[x</a></xml>",
        "<xml><!-- c --><a>1</a></xml>",
        "<xml><a><!-- c -->1</a></xml>",
        "<xml><?pi x?><a>1</a></xml>",
        "<?php echo 1; ?><xml><a>1</a></xml>",
        "<?xml version=\"1.0\"?><?pi?><xml></xml>",
        "<xml><a b=\"1\">1</a></xml>",
        "<xml x=\"1\"><a>1</a></xml>",
        "<xml>text<a>1</a></xml>",
        "<xml><a>1</b></xml>",
        "<xml><a>1</ab></xml>",
        "<xml><a>1</a>",
        "<xml><a>1</a></xml><xml></xml>",
        "<xml><a>1</a></xml>trailing",
        "<xml/>",
        "<root><a>1</a></root>",
        "<xmlx><a>1</a></xmlx>",
        "<xml><1a>1</1a></xml>",
        "<xml><a>\x01</a></xml>",
        "<xml><a><![CDATA[\x1b]]></a></xml>",
        "<xml><a>\xff</a></xml>",
        "<xml><a>\xc0\xaf</a></xml>",
        "<xml><a>\xed\xa0\x80</a></xml>",
        "",
        "{\"return_code\":\"SUCCESS\"}",
        NULL};
    for (const char *const *x = refused; *x; x++) {
        int rc = parse_rc(*x, strlen(*x));
        if (rc != PT_EPARSE)
            fail_msg("accepted or wrong error %d: %s", rc, *x);
    }
    /* A NUL inside: the length says there is more, the reader refuses it. */
    static const char nul[] = "<xml><a>1\0<b>2</b></a></xml>";
    assert_int_equal(parse_rc(nul, sizeof nul - 1), PT_EPARSE);
    /* Too big, too many fields, a name too long. */
    size_t big = PT_WXV2_XML_MAX + 1;
    char *huge = malloc(big + 1);
    memset(huge, ' ', big);
    memcpy(huge, "<xml>", 5);
    memcpy(huge + big - 6, "</xml>", 6);
    huge[big] = '\0';
    assert_int_equal(parse_rc(huge, big), PT_ETOOBIG);
    free(huge);
    char many[8192];
    size_t o = (size_t)snprintf(many, sizeof many, "<xml>");
    for (int i = 0; i <= PT_WXV2_FIELDS_MAX; i++)
        o += (size_t)snprintf(many + o, sizeof many - o, "<f%d>1</f%d>", i, i);
    snprintf(many + o, sizeof many - o, "</xml>");
    assert_int_equal(parse_rc(many, strlen(many)), PT_ETOOBIG);
    char longname[256];
    snprintf(longname, sizeof longname, "<xml><%0*d/></xml>", PT_WXV2_NAME_MAX + 1, 0);
    longname[6] = 'a';
    assert_int_equal(parse_rc(longname, strlen(longname)), PT_EPARSE);
}

static void test_xml_reads(void **state)
{
    (void)state;
    static const char doc[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<xml>\n"
                              "  <a><![CDATA[x]]]]><![CDATA[>y]]></a>\n"
                              "  <b>1 &lt; 2 &amp;&amp; &quot;q&quot; &apos;s&apos; &gt;</b>\n"
                              "  <c/>\n  <d ></d >\n  <e> mixed <![CDATA[<cdata>]]> text </e>\n"
                              "  <f>\xe6\x8b\xbf\xe9\x93\x81</f>\n"
                              "</xml >\n";
    struct pt_wxv2_msg m;
    assert_int_equal(pt_wxv2_parse(doc, sizeof doc - 1, &m), PT_OK);
    assert_int_equal(m.n, 6);
    assert_string_equal(pt_wxv2_get(&m, "a"), "x]]>y");
    assert_string_equal(pt_wxv2_get(&m, "b"), "1 < 2 && \"q\" 's' >");
    assert_string_equal(pt_wxv2_get(&m, "c"), "");
    assert_string_equal(pt_wxv2_get(&m, "d"), "");
    assert_string_equal(pt_wxv2_get(&m, "e"), " mixed <cdata> text ");
    assert_string_equal(pt_wxv2_get(&m, "f"), "拿铁");
    assert_null(pt_wxv2_get(&m, "g"));
    pt_wxv2_msg_free(&m);
    pt_wxv2_msg_free(&m); /* twice is harmless */
}

static void test_xml_writer(void **state)
{
    (void)state;
    char *x = NULL;
    struct pt_wxv2_field f[] = {{"a", "plain"}, {"b", "x]]>y]]>"}, {"c", ""}, {"d", "<&>"}};
    assert_int_equal(pt_wxv2_xml(f, 4, &x, NULL), PT_OK);
    assert_string_equal(x, "<xml><a>plain</a><b><![CDATA[x]]]]><![CDATA[>y]]]]><![CDATA[>]]></b>"
                           "<c/><d><![CDATA[<&>]]></d></xml>");
    struct pt_wxv2_msg m;
    assert_int_equal(pt_wxv2_parse(x, strlen(x), &m), PT_OK);
    for (int i = 0; i < 4; i++)
        assert_string_equal(pt_wxv2_get(&m, f[i].name), f[i].value); /* round trip */
    pt_wxv2_msg_free(&m);
    free(x);
    static const struct pt_wxv2_field bad[][1] = {
        {{"a", "cr\r"}}, {{"a", "ctl\x02"}}, {{"a", "\xff"}}, {{"1a", "x"}},
        {{"a b", "x"}},  {{"", "x"}},        {{"a>", "x"}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        x = (char *)1;
        assert_int_equal(pt_wxv2_xml(bad[i], 1, &x, NULL), PT_EINVAL);
        assert_null(x);
    }
}

static void test_signature(void **state)
{
    struct fixture *f = *state;
    /* sign and empty values are left out; order is by name */
    struct pt_wxv2_field fl[] = {{"b", "2"}, {"sign", "X"}, {"a", "1"}, {"c", ""}, {"B", "0"}};
    char *s = pt_wxv2_string_to_sign(fl, 5, NULL);
    assert_string_equal(s, "B=0&a=1&b=2");
    free(s);
    struct pt_wxv2_field dup[] = {{"a", "1"}, {"a", "2"}};
    assert_null(pt_wxv2_string_to_sign(dup, 2, NULL));
    char sign[PT_WXV2_SIGN_MAX];
    assert_int_equal(
        pt_wxv2_sign(PT_WXV2_HMAC_SHA256, f->cfg.apiv2_key, f->cfg.apiv2_key_len, dup, 2, sign),
        PT_EINVAL);
    assert_int_equal(pt_wxv2_sign(PT_WXV2_HMAC_SHA256, NULL, 0, fl, 5, sign), PT_EINVAL);

    /* the SDK's HMAC-SHA256 and MD5, from the CLI vectors */
    const cJSON *c;
    cJSON_ArrayForEach(c, pt_test_cases(f->v, "wechat_v2.json", "cli.sign"))
    {
        struct pt_wxv2_field p[32];
        size_t n = 0;
        enum pt_wxv2_sign_type type = PT_WXV2_MD5;
        for (const cJSON *it = cJSON_GetObjectItem(c, "params")->child; it; it = it->next)
            p[n++] = (struct pt_wxv2_field){it->string, it->valuestring};
        const char *st = pt_test_str(cJSON_GetObjectItem(c, "params"), "sign_type");
        if (*st)
            assert_int_equal(pt_wxv2_sign_type(st, &type), PT_OK);
        assert_int_equal(pt_wxv2_sign(type, f->cfg.apiv2_key, f->cfg.apiv2_key_len, p, n, sign),
                         PT_OK);
        assert_string_equal(sign, pt_test_str(c, "sign"));
    }
    enum pt_wxv2_sign_type t;
    assert_int_equal(pt_wxv2_sign_type("hmac-sha256", &t), PT_EINVAL);
    assert_int_equal(pt_wxv2_sign_type(NULL, &t), PT_EINVAL);
}

/* read(): the sign covers the fields the caller does not keep. */
static void test_read_allow_list(void **state)
{
    struct fixture *f = *state;
    const char *body = pt_test_str(response(f, "pay_success_with_coupons"), "body");
    static const char *const allow[] = {"return_code", "total_fee", NULL};
    struct pt_wxv2_msg m;
    assert_int_equal(
        pt_wxv2_read(body, strlen(body), f->cfg.apiv2_key, f->cfg.apiv2_key_len, allow, &m), PT_OK);
    assert_int_equal(m.n, 2);
    assert_string_equal(pt_wxv2_get(&m, "total_fee"), "8888");
    assert_null(pt_wxv2_get(&m, "coupon_fee"));
    pt_wxv2_msg_free(&m);
    /* dropping a field the caller does not keep still breaks the sign */
    char *cut = strdup(body);
    char *p = strstr(cut, "<coupon_fee_0>");
    char *e = strstr(p, "</coupon_fee_0>") + strlen("</coupon_fee_0>");
    memmove(p, e, strlen(e) + 1);
    assert_int_equal(
        pt_wxv2_read(cut, strlen(cut), f->cfg.apiv2_key, f->cfg.apiv2_key_len, allow, &m), PT_ESIG);
    assert_null(m.f);
    free(cut);
}

/* ---- the gateway's table and configuration ---------------------------------------- */

static void test_method_and_config(void **state)
{
    struct fixture *f = *state;
    const struct pt_gw_method *m = pt_gateway_lookup("wechat", "barcode");
    assert_non_null(m);
    assert_true(m->payment_code);
    assert_false(m->interactive);
    assert_int_equal(m->offline_max_age_s, 60);
    assert_int_equal(pt_gateway_wechat.default_barcode_timeout_s, 45);
    assert_true(pt_gateway_lookup("wechat", "qr")->interactive); /* unchanged */

    struct pt_gw_settings in = {0};
    assert_non_null(pt_wechat_method_unavailable(&in, "barcode"));
    assert_null(pt_wechat_method_unavailable(&in, "qr"));

    char key[512], shortkey[512], cert[512], notcert[512], err[600];
    snprintf(key, sizeof key, "%s/apiv2_key", f->dir);
    snprintf(shortkey, sizeof shortkey, "%s/short_key", f->dir);
    pt_test_write_file(key, "payterm-test-apiv2-key-32-chars!\n", 0600);
    pt_test_write_file(shortkey, "too-short\n", 0600);
    pt_test_data_path("keys/wechat_platform_cert.pem", cert, sizeof cert); /* a certificate */
    pt_test_data_path("keys/merchant_wechat_pkcs8.pem", notcert, sizeof notcert);

    struct pt_gw_config o = {0};
    assert_int_equal(pt__wechat_v2_load("", "", notcert, "", NULL, NULL, &o, err, sizeof err),
                     PT_OK);
    assert_int_equal(o.apiv2_key_len, 0); /* no barcode on this gateway, not an error */
    assert_int_not_equal(pt__wechat_v2_load(key, "", notcert, "", NULL, NULL, &o, err, sizeof err),
                         PT_OK);
    assert_non_null(strstr(err, "apiclient_cert_file"));
    assert_int_not_equal(pt__wechat_v2_load("", cert, notcert, "", NULL, NULL, &o, err, sizeof err),
                         PT_OK);
    assert_non_null(strstr(err, "apiv2_key_file"));
    assert_int_not_equal(
        pt__wechat_v2_load(shortkey, cert, notcert, "", NULL, NULL, &o, err, sizeof err), PT_OK);
    assert_non_null(strstr(err, "32 characters"));
    assert_int_equal(o.apiv2_key_len, 0);
    assert_int_not_equal(
        pt__wechat_v2_load(key, notcert, notcert, "", NULL, NULL, &o, err, sizeof err), PT_OK);
    assert_non_null(strstr(err, "not a certificate"));
    assert_int_not_equal(
        pt__wechat_v2_load(key, cert, notcert, "10.0.0.1; rm", NULL, NULL, &o, err, sizeof err),
        PT_OK);
    assert_non_null(strstr(err, "spbill_create_ip"));
    assert_int_equal(
        pt__wechat_v2_load(key, cert, notcert, "10.0.0.1", NULL, NULL, &o, err, sizeof err), PT_OK);
    assert_int_equal(o.apiv2_key_len, 32);
    assert_string_equal(o.client_cert_file, cert);
    assert_string_equal(o.client_key_file, notcert);
    assert_string_equal(o.client_ip, "10.0.0.1");
    pt_gw_config_free(&o);
    assert_int_equal(o.apiv2_key_len, 0);
    assert_int_equal(o.apiv2_key[0], 0); /* wiped */
}

/* ---- sign / verify --gateway wechat-v2, as functions ----------------------------------- */

static int cli(struct fixture *f, const char *cmd, const char *key_file, const char *input,
               cJSON **out)
{
    struct pt_gw_cli_scheme s;
    assert_int_equal(pt_gw_cli_scheme_find("wechat-v2", &s), PT_OK);
    struct pt_gw_cli a = {.cmd = cmd, .gateway = "wechat-v2", .key_file = key_file};
    char *in = strdup(input);
    *out = NULL;
    int rc = strcmp(cmd, "sign") == 0 ? s.sign(&a, in, strlen(in), out)
                                      : s.verify(&a, in, strlen(in), out);
    free(in);
    (void)f;
    return rc;
}

static void test_cli(void **state)
{
    struct fixture *f = *state;
    char key[512];
    snprintf(key, sizeof key, "%s/cli_key", f->dir);
    pt_test_write_file(key, "payterm-test-apiv2-key-32-chars!\n", 0600);
    const cJSON *c;
    cJSON *out;
    cJSON_ArrayForEach(c, pt_test_cases(f->v, "wechat_v2.json", "cli.sign"))
    {
        char *params = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "params"));
        assert_int_equal(cli(f, "sign", key, params, &out), PT_GW_CLI_OK);
        assert_string_equal(pt_test_str(out, "string_to_sign"), pt_test_str(c, "string_to_sign"));
        assert_string_equal(pt_test_str(out, "sign"), pt_test_str(c, "sign"));
        assert_string_equal(pt_test_str(out, "xml"), pt_test_str(c, "xml"));
        cJSON_Delete(out);
        free(params);
    }
    cJSON_ArrayForEach(c, pt_test_cases(f->v, "wechat_v2.json", "cli.verify"))
    {
        int rc = cli(f, "verify", key, pt_test_str(c, "body"), &out);
        if (rc != pt_test_int(c, "exit"))
            fail_msg("verify %s: exit %d", pt_test_str(c, "name"), rc);
        assert_int_equal(cJSON_IsTrue(cJSON_GetObjectItem(out, "valid")),
                         cJSON_IsTrue(cJSON_GetObjectItem(c, "valid")));
        if (rc == 0)
            assert_string_equal(pt_test_str(cJSON_GetObjectItem(out, "fields"), "result_code"),
                                "SUCCESS");
        cJSON_Delete(out);
    }
    /* usage errors: no key file, a missing file, bad params */
    assert_int_equal(cli(f, "sign", NULL, "{}", &out), PT_GW_CLI_USAGE);
    assert_int_equal(cli(f, "verify", "/nonexistent/key", "<xml/>", &out), PT_GW_CLI_USAGE);
    assert_int_equal(cli(f, "sign", key, "{\"a\":1}", &out), PT_GW_CLI_USAGE);
    assert_int_equal(cli(f, "sign", key, "[]", &out), PT_GW_CLI_USAGE);
    assert_int_equal(cli(f, "sign", key, "{\"sign_type\":\"SHA1\"}", &out), PT_GW_CLI_USAGE);
    assert_int_equal(cli(f, "sign", key, "{\"a\":\"1\",\"a\":\"2\"}", &out), PT_GW_CLI_USAGE);
    assert_int_equal(cli(f, "sign", key, "{\"a b\":\"1\"}", &out), PT_GW_CLI_USAGE);
    assert_null(out);

    /* the scheme list names wechat-v2 beside the registry's gateways */
    assert_non_null(strstr(pt_gw_cli_scheme_names(), "wechat-v2"));
    struct pt_gw_cli_scheme s;
    assert_int_equal(pt_gw_cli_scheme_find("alipay", &s), PT_OK);
    assert_ptr_equal(s.sign, pt_gateway_find("alipay")->cli_sign);
    assert_int_equal(pt_gw_cli_scheme_find("wechat-v3", &s), PT_ENOTFOUND);
    /* wechat-v2, and 2c2p-pm (2C2P's Payment Maintenance envelope) */
    assert_int_equal(pt_gw_cli_scheme_count(), pt_gateway_count() + 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requests),
        cmocka_unit_test(test_build_refuses),
        cmocka_unit_test(test_responses),
        cmocka_unit_test(test_forged_fail_answers),
        cmocka_unit_test(test_xml_hostile),
        cmocka_unit_test(test_xml_reads),
        cmocka_unit_test(test_xml_writer),
        cmocka_unit_test(test_signature),
        cmocka_unit_test(test_read_allow_list),
        cmocka_unit_test(test_method_and_config),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
