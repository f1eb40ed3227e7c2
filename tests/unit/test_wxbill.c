/*
 * test_wxbill.c - WeChat Pay's trade bill (core/gateways/wxbill.c): the
 * layout WeChat documents (docs/reconcile.md) read into trades and refunds,
 * and every way a bill can fail to hold together refused with its line.
 */
#include "testutil.h"

#include "crypto.h"
#include "err.h"
#include "gateways/wechat_v2.h"
#include "gateways/wxbill.h"
#include "platform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEADER                                                                                                                            \
    "交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状" \
    "态,付款银行,货币种类,应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值券退款" \
    "金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注\n"
#define SUMMARY_HEADER                                                                                                                     \
    "总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金" \
    "额\n"
/* A payment of 12.34 (0.34 of it a voucher), and its refund of 5.00. */
#define PAY                                                                                        \
    "`2026-12-05 09:30:01,`wx2421b1c4370ec43b,`1900000109,`0,`,`4200002026120500000001,`LANE1-"    \
    "0001,`oUpF8uMuAJO_M2pxb1Q9zNjWeS6o,`MICROPAY,`SUCCESS,`OTHERS,`CNY,`12.00,`0.34,`0,`0,`0.00," \
    "`0.00,`,`,`Latte,`,`0.07000,`0.60%,`12.34,`0.00,`\n"
#define REFUND                                                                                     \
    "`2026-12-05 18:02:44,`wx2421b1c4370ec43b,`1900000109,`0,`,`4200002026120500000001,`LANE1-"    \
    "0001,`oUpF8uMuAJO_M2pxb1Q9zNjWeS6o,`MICROPAY,`REFUND,`OTHERS,`CNY,`0.00,`0.00,`5030000000202" \
    "6120500001,`LANE1-0001-R1,`5.00,`0.00,`ORIGINAL,`SUCCESS,`Latte,`,`-0.03000,`0.60%,`0.00,`5." \
    "00,`\n"
#define NATIVE                                                                                     \
    "`2026-12-05 23:59:59,`wx2421b1c4370ec43b,`1900000109,`0,`,`4200002026120500000002,`LANE1-"    \
    "0002,`oUpF8uMuAJO_M2pxb1Q9zNjWeS6o,`NATIVE,`SUCCESS,`OTHERS,`CNY,`0.01,`0.00,`0,`0,`0.00,"    \
    "`0.00,`,`,`Tea,`,`0.00000,`0.60%,`0.01,`0.00,`\n"
#define SUMMARY SUMMARY_HEADER "`3,`12.01,`5.00,`0.00,`0.04000,`12.35,`5.00\n"

static int parse(const char *text, struct pt_wxbill *b, char *err, size_t errlen)
{
    return pt_wxbill_parse(text, strlen(text), "2026-12-05", b, err, errlen);
}

static void test_a_day_read(void **state)
{
    (void)state;
    struct pt_wxbill b;
    char err[256];
    assert_int_equal(parse(HEADER PAY REFUND NATIVE SUMMARY, &b, err, sizeof err), PT_OK);
    assert_int_equal(b.n, 3);
    const struct pt_recon_record *pay = &b.rows[0], *ref = &b.rows[1], *tea = &b.rows[2];
    assert_false(pay->refund);
    assert_string_equal(pay->order_id, "LANE1-0001");
    assert_string_equal(pay->gateway_trade_no, "4200002026120500000001");
    assert_int_equal(pay->amount, 1234); /* 订单金额: what was asked, voucher included */
    assert_string_equal(pay->currency, "CNY");
    assert_int_equal(pay->day, 0);
    assert_true(ref->refund);
    assert_string_equal(ref->order_id, "LANE1-0001");
    assert_string_equal(ref->refund_id, "LANE1-0001-R1");
    assert_string_equal(ref->gateway_refund_no, "50300000002026120500001");
    assert_int_equal(ref->amount, 500);
    assert_int_equal(tea->amount, 1);
    pt_wxbill_free(&b);
}

/* What downloads may look like on the wire: a BOM, CRLF (APIv2). */
static void test_bom_and_crlf(void **state)
{
    (void)state;
    char text[4096] = "\xEF\xBB\xBF", *p;
    strcat(text, HEADER PAY SUMMARY_HEADER "`1,`12.00,`0.00,`0.00,`0.07000,`12.34,`0.00\n");
    char crlf[8192];
    p = crlf;
    for (const char *s = text; *s; s++) {
        if (*s == '\n')
            *p++ = '\r';
        *p++ = *s;
    }
    *p = '\0';
    struct pt_wxbill b;
    char err[256];
    assert_int_equal(parse(crlf, &b, err, sizeof err), PT_OK);
    assert_int_equal(b.n, 1);
    pt_wxbill_free(&b);
}

/* A bill before 免充值券 has no 订单金额 / 申请退款金额: 应结订单金额 and
 * 退款金额 are the amounts, and the summary has fewer columns. */
static void test_older_layout(void **state)
{
    (void)state;
    static const char old[] =
        "交易时间,公众账号ID,商户号,子商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状"
        "态,付款银行,货币种类,总金额,企业红包金额,微信退款单号,商户退款单号,退款金额,企业红包退款"
        "金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率\n";
    struct pt_wxbill b;
    char err[256];
    /* Its amount column is 总金额, not 应结订单金额: not this layout. */
    assert_int_equal(parse(old, &b, err, sizeof err), PT_EPARSE);
    assert_non_null(strstr(err, "应结订单金额"));
    static const char settled[] =
        "交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交"
        "易状态,付款银行,货币种类,应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值"
        "券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率\n"
        "`2026-12-05 10:00:00,`wx1,`19,`0,`,`42001,`O-1,`u,`NATIVE,`SUCCESS,`OTHERS,`CNY,`8.80,"
        "`0.00,`0,`0,`0.00,`0.00,`,`,`x,`,`0.05000,`0.60%\n"
        "总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额\n"
        "`1,`8.80,`0.00,`0.00,`0.05000\n";
    assert_int_equal(parse(settled, &b, err, sizeof err), PT_OK);
    assert_int_equal(b.n, 1);
    assert_int_equal(b.rows[0].amount, 880);
    pt_wxbill_free(&b);
}

struct bad {
    const char *what, *text, *says;
};

static void test_refused_with_the_line(void **state)
{
    (void)state;
    static const struct bad bad[] = {
        {"empty", "", "line 1: empty"},
        {"no summary: cut short", HEADER PAY REFUND, "line 4: ends before the summary"},
        {"summary without values", HEADER PAY SUMMARY_HEADER, "line 4: the summary has no values"},
        {"a row missing: the summary does not add up", HEADER PAY NATIVE SUMMARY,
         "line 5: 总交易单数 says 3, the rows add up to 2"},
        {"an amount altered",
         HEADER PAY REFUND NATIVE SUMMARY_HEADER "`3,`12.01,`5.00,`0.00,`0.04000,`12.36,`5.00\n",
         "line 6: 订单总金额 says 1236, the rows add up to 1235"},
        {"a value without its backtick",
         HEADER "2026-12-05 09:30:01,`wx,`19,`0,`,`42,`O,`u,`NATIVE,`SUCCESS,`OTHERS,`CNY,`1.00,`0."
                "00,`0,`0,`0.00,`0.00,`,`,`x,`,`0.00000,`0.60%,`1.00,`0.00,`\n" SUMMARY,
         "line 2: 交易时间: not a backtick"},
        {"a short row", HEADER "`2026-12-05 09:30:01,`wx\n" SUMMARY, "line 2: 2 values for 27"},
        {"a row of another day",
         HEADER
         "`2026-12-04 23:59:59,`wx,`19,`0,`,`42,`O,`u,`NATIVE,`SUCCESS,`OTHERS,`CNY,`1.00,`0.00,`"
         "0,`0,`0.00,`0.00,`,`,`x,`,`0.00000,`0.60%,`1.00,`0.00,`\n" SUMMARY,
         "line 2: 交易时间 '2026-12-04 23:59:59' is not a time of 2026-12-05"},
        {"a state it does not know",
         HEADER
         "`2026-12-05 09:30:01,`wx,`19,`0,`,`42,`O,`u,`NATIVE,`CLOSED,`OTHERS,`CNY,`1.00,`0.00,`0,"
         "`0,`0.00,`0.00,`,`,`x,`,`0.00000,`0.60%,`1.00,`0.00,`\n" SUMMARY,
         "line 2: 交易状态 'CLOSED'"},
        {"an amount that is not one",
         HEADER
         "`2026-12-05 09:30:01,`wx,`19,`0,`,`42,`O,`u,`NATIVE,`SUCCESS,`OTHERS,`CNY,`1.00,`0.00,`0,"
         "`0,`0.00,`0.00,`,`,`x,`,`0.00000,`0.60%,`1.001,`0.00,`\n" SUMMARY,
         "line 2: 订单金额 '1.001'"},
        {"text after the summary",
         HEADER PAY SUMMARY_HEADER "`1,`12.00,`0.00,`0.00,`0.07000,`12.34,`0.00\n" PAY,
         "line 5: text after the summary"},
        {"not a trade bill", "记账时间,微信支付业务单号,资金流水单号\n",
         "line 1: the header has no column 交易时间"},
        {"a column twice", "交易时间,交易时间\n", "line 1: column 交易时间 twice"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct pt_wxbill b;
        char err[256];
        int rc = parse(bad[i].text, &b, err, sizeof err);
        if (rc != PT_EPARSE || !strstr(err, bad[i].says))
            fail_msg("%s: rc %d, '%s' (want '%s')", bad[i].what, rc, err, bad[i].says);
        assert_null(b.rows); /* never read in part */
        assert_int_equal(b.n, 0);
    }
}

/* The download goes to the configured host only: payterm signs what it
 * fetches, and a signature sent elsewhere would be a stolen request. */
static void test_download_stays_on_the_endpoint(void **state)
{
    (void)state;
    char path[256];
    const char *ep = "https://api.mch.weixin.qq.com";
    assert_true(pt_wxbill_download_path(
        ep, "https://api.mch.weixin.qq.com/v3/billdownload/file?token=x", path, sizeof path));
    assert_string_equal(path, "/v3/billdownload/file?token=x");
    assert_true(pt_wxbill_download_path("https://wechat.localhost:8443",
                                        "https://WECHAT.localhost:8443/f", path, sizeof path));
    static const char *const refused[] = {
        "http://api.mch.weixin.qq.com/v3/billdownload/file",    /* not TLS */
        "https://api.mch.weixin.qq.com.evil.example/f",         /* another host */
        "https://evil.example/https://api.mch.weixin.qq.com/f", /* another host */
        "https://api.mch.weixin.qq.com@evil.example/f",         /* userinfo */
        "https://api.mch.weixin.qq.com:444/f",                  /* another port */
        "https://api.mch.weixin.qq.com",                        /* no path */
        "https://api.mch.weixin.qq.com?x=/",                    /* no path */
        "",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        assert_false(pt_wxbill_download_path(ep, refused[i], path, sizeof path));
    char tiny[4];
    assert_false(
        pt_wxbill_download_path(ep, "https://api.mch.weixin.qq.com/long", tiny, sizeof tiny));
}

/* The file is believed by its SHA-1 only (its answer is not signed). */
static void test_file_checked_by_its_hash(void **state)
{
    (void)state;
    char body[] = HEADER PAY SUMMARY_HEADER "`1,`12.00,`0.00,`0.00,`0.07000,`12.34,`0.00\n";
    char sha1[41], why[256];
    assert_int_equal(pt_sha1_hex(body, strlen(body), sha1), PT_OK);
    struct pt_http_response r = {.status = 200, .body = body, .body_len = strlen(body)};
    assert_int_equal(pt_wxbill_file_check(&r, sha1, why, sizeof why), PT_OK);
    body[3] ^= 1; /* one bit of another file */
    assert_int_equal(pt_wxbill_file_check(&r, sha1, why, sizeof why), PT_ESIG);
    assert_non_null(strstr(why, "SHA-1"));
    body[3] ^= 1;
    r.status = 404;
    assert_int_equal(pt_wxbill_file_check(&r, sha1, why, sizeof why), PT_EPARSE);
    assert_non_null(strstr(why, "HTTP 404"));
    /* SHA-1 of "abc" (FIPS 180-1's example). */
    assert_int_equal(pt_sha1_hex("abc", 3, sha1), PT_OK);
    assert_string_equal(sha1, "a9993e364706816aba3e25717850c26c9cd0d89d");
}

/* APIv2 downloadbill (gateways.wechat.bill_api "v2"): one POST, signed
 * with the APIv2 key, that WeChat Pay can verify. */
static void test_downloadbill_request(void **state)
{
    (void)state;
    static const char key[] = "payterm-test-apiv2-key-32-chars!";
    struct pt_gw_config cfg = {.apiv2_key_len = 32};
    snprintf(cfg.name, sizeof cfg.name, "wechat");
    snprintf(cfg.endpoint, sizeof cfg.endpoint, "https://api.mch.weixin.qq.com");
    snprintf(cfg.app_id, sizeof cfg.app_id, "wx2421b1c4370ec43b");
    snprintf(cfg.merchant_id, sizeof cfg.merchant_id, "1900000109");
    memcpy(cfg.apiv2_key, key, 32);
    struct pt_gw_env env = {.now_ms = 1765000000000, .nonce = "5K8264ILTKCH16CQ2502SI8ZNMTM67VS"};
    struct pt_http_request req;
    assert_int_equal(pt__wechat_v2_bill_request(&cfg, &env, "2026-12-05", &req), PT_OK);
    assert_string_equal(req.method, "POST");
    assert_string_equal(req.url, "https://api.mch.weixin.qq.com/pay/downloadbill");
    assert_null(req.client_cert_file); /* no certificate: not a /secapi/ call */
    struct pt_wxv2_msg m = {0};
    assert_int_equal(pt_wxv2_parse(req.body, req.body_len, &m), PT_OK);
    assert_string_equal(pt_wxv2_get(&m, "bill_date"), "20261205"); /* yyyyMMdd */
    assert_string_equal(pt_wxv2_get(&m, "bill_type"), "ALL");      /* refunds too */
    assert_string_equal(pt_wxv2_get(&m, "mch_id"), "1900000109");
    assert_string_equal(pt_wxv2_get(&m, "sign_type"), "HMAC-SHA256");
    assert_null(pt_wxv2_get(&m, "tar_type"));
    assert_int_equal(pt_wxv2_verify((const unsigned char *)key, 32, &m), PT_OK);
    assert_int_equal(
        pt_wxv2_verify((const unsigned char *)"payterm-test-apiv2-key-32-chars?", 32, &m), PT_ESIG);
    pt_wxv2_msg_free(&m);
    pt_http_request_free(&req);
    static const char *const bad_dates[] = {"20261205", "2026-12-5", "2026/12/05", "2026-1a-05",
                                            NULL};
    for (int i = 0; bad_dates[i]; i++)
        assert_int_equal(pt__wechat_v2_bill_request(&cfg, &env, bad_dates[i], &req), PT_EINVAL);
    cfg.apiv2_key_len = 0; /* no APIv2 key: nothing to sign with */
    assert_int_equal(pt__wechat_v2_bill_request(&cfg, &env, "2026-12-05", &req), PT_EINVAL);
}

/* Its answer: the bill as text, or WeChat's unsigned XML error. */
static void test_downloadbill_answer(void **state)
{
    (void)state;
    char why[256];
    static const char bill[] =
        "\xEF\xBB\xBF" HEADER PAY SUMMARY_HEADER "`1,`12.00,`0.00,`0.00,`0.07000,`12.34,`0.00\n";
    struct pt_http_response r = {.status = 200, .body = (char *)bill, .body_len = strlen(bill)};
    assert_int_equal(pt_wxbill_v2_answer(&r, why, sizeof why), PT_OK);
    static const struct {
        const char *xml;
        int rc;
        const char *says;
    } cases[] = {
        {"<xml><return_code><![CDATA[FAIL]]></return_code><return_msg><![CDATA[No Bill "
         "Exist]]></return_msg><error_code><![CDATA[20002]]></error_code></xml>",
         PT_EAGAIN, "FAIL: No Bill Exist (error_code 20002)"},
        {"<xml><return_code>FAIL</return_code><return_msg>NO Bill Exist</return_msg></xml>",
         PT_EAGAIN, "NO Bill Exist"},
        {"\r\n<xml><return_code><![CDATA[FAIL]]></return_code><return_msg><![CDATA[Bill "
         "Creating]]></return_msg></xml>",
         PT_EAGAIN, "Bill Creating"},
        {"<xml><return_code><![CDATA[FAIL]]></return_code><return_msg><![CDATA[invalid "
         "bill_date]]></return_msg><error_code><![CDATA[20001]]></error_code></xml>",
         PT_EPARSE, "invalid bill_date (error_code 20001)"},
        {"<xml><return_code>FAIL</return_code><return_msg>SIGN ERROR</return_msg></xml>", PT_EPARSE,
         "SIGN ERROR"},
        {"<xml><return_code>FAIL<return_code></xml>", PT_EPARSE, "cannot be read"},
        {"<!DOCTYPE x [<!ENTITY a \"b\">]><xml><return_msg>&a;</return_msg></xml>", PT_EPARSE,
         "cannot be read"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        r.body = (char *)cases[i].xml;
        r.body_len = strlen(cases[i].xml);
        int rc = pt_wxbill_v2_answer(&r, why, sizeof why);
        if (rc != cases[i].rc || !strstr(why, cases[i].says))
            fail_msg("case %zu: rc %d, '%s' (want %d, '%s')", i, rc, why, cases[i].rc,
                     cases[i].says);
    }
    r = (struct pt_http_response){.status = 502, .body = (char *)"Bad Gateway", .body_len = 11};
    assert_int_equal(pt_wxbill_v2_answer(&r, why, sizeof why), PT_EPARSE);
    assert_non_null(strstr(why, "HTTP 502"));
    /* Not WeChat's way of saying "later": whatever the body, a failed run. */
    r.status = 500;
    r.body = (char *)cases[0].xml;
    r.body_len = strlen(cases[0].xml);
    assert_int_equal(pt_wxbill_v2_answer(&r, why, sizeof why), PT_EPARSE);
    assert_non_null(strstr(why, "HTTP 500"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_day_read),
        cmocka_unit_test(test_bom_and_crlf),
        cmocka_unit_test(test_older_layout),
        cmocka_unit_test(test_refused_with_the_line),
        cmocka_unit_test(test_download_stays_on_the_endpoint),
        cmocka_unit_test(test_file_checked_by_its_hash),
        cmocka_unit_test(test_downloadbill_request),
        cmocka_unit_test(test_downloadbill_answer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
