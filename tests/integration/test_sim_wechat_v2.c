/*
 * test_sim_wechat_v2.c - the simulator's WeChat Pay APIv2 payment-code routes
 * (/pay/micropay, /pay/orderquery, /secapi/pay/reverse) over real HTTPS
 * through payterm's libcurl transport.
 *
 * The requests are built and signed here, from the wire format of SPEC 8
 * and core/crypto.h's HMAC alone (not with the adapter's helpers), so that
 * the simulator is held to WeChat's format rather than to payterm's reading
 * of it.  Every answer's signature is checked the same way, FAIL answers
 * included.  Each case ends with the ledger's word on how many times money
 * moved, and the last one checks the whole WeChat ledger against what the
 * cases did, row for row.
 */
#include "simtest.h"
#include "testutil.h"

#include "crypto.h"
#include "err.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct simtest T;
#define PAY_DELAY_MS 300
#define AUTH_CODE "134567890123456789"

static char apiv2_key[64];
static char cert_file[600], key_file[600];

/* ---- what the cases expect the ledger to hold ---------------------------------- */

#define MAX_ORDERS 64
static struct {
    char order[64];
    char status[16];
    int captures;
} expect[MAX_ORDERS];
static int nexpect;

static void expect_row(const char *order, const char *status, int captures)
{
    for (int i = 0; i < nexpect; i++) {
        if (strcmp(expect[i].order, order) == 0) {
            snprintf(expect[i].status, sizeof expect[i].status, "%s", status);
            expect[i].captures = captures;
            return;
        }
    }
    assert_true(nexpect < MAX_ORDERS);
    snprintf(expect[nexpect].order, sizeof expect[0].order, "%s", order);
    snprintf(expect[nexpect].status, sizeof expect[0].status, "%s", status);
    expect[nexpect++].captures = captures;
}

/* The ledger row says status and captures (and is on gateway "wechat"). */
static void assert_ledger(const char *order, const char *status, int captures)
{
    char st[16];
    int n = simtest_captures(&T, "wechat", order, st);
    if (n != captures || strcmp(st, status) != 0)
        fail_msg("ledger %s: status %s captures %d, expected %s and %d", order, st, n, status,
                 captures);
    expect_row(order, status, captures);
}

/* ---- fixtures ------------------------------------------------------------------ */

/* The path of a file named in gateways.json's wechat section, or dflt. */
static void wechat_file(const char *key, const char *dflt, char *out, size_t outlen)
{
    char p[600];
    snprintf(p, sizeof p, "%s/gateways.json", T.dir);
    FILE *f = fopen(p, "rb");
    assert_non_null(f);
    char *text = calloc(1, 65536);
    assert_non_null(text);
    size_t n = fread(text, 1, 65535, f);
    fclose(f);
    cJSON *j = cJSON_ParseWithLength(text, n);
    free(text);
    const cJSON *w =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "gateways"), "wechat");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(w, key);
    /* The fragment names the APIv2 files once the adapter reads them (see
     * sim_files.c); the files are there either way. */
    snprintf(out, outlen, "%s/%s", T.dir, cJSON_IsString(v) ? v->valuestring : dflt);
    cJSON_Delete(j);
}

static int setup(void **state)
{
    (void)state;
    struct pt_sim_options o = {.pay_delay_ms = PAY_DELAY_MS};
    simtest_start(&T, &o);
    char p[600];
    wechat_file("apiv2_key_file", "wechat_apiv2_key", p, sizeof p);
    size_t len = 0;
    assert_int_equal(pt_secret_read(p, apiv2_key, sizeof apiv2_key - 1, &len), PT_OK);
    while (len > 0 && (apiv2_key[len - 1] == '\n' || apiv2_key[len - 1] == '\r'))
        len--;
    apiv2_key[len] = '\0';
    assert_int_equal(strlen(apiv2_key), 32);
    wechat_file("apiclient_cert_file", "wechat_apiclient_cert.pem", cert_file, sizeof cert_file);
    wechat_file("private_key_file", "wechat_apiclient_key.pem", key_file, sizeof key_file);
    assert_int_equal(access(cert_file, R_OK), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pt_zeroize(apiv2_key, sizeof apiv2_key);
    simtest_stop(&T);
    return 0;
}

static int clear(void **state)
{
    (void)state;
    simtest_fault(&T, "{\"mode\":\"none\"}");
    return 0;
}

/* ---- messages ------------------------------------------------------------------ */

#define MAX_FIELDS 32

struct fields {
    int n;
    char k[MAX_FIELDS][40];
    char v[MAX_FIELDS][200];
};

static void set(struct fields *f, const char *k, const char *v)
{
    for (int i = 0; i < f->n; i++) {
        if (strcmp(f->k[i], k) == 0) {
            snprintf(f->v[i], sizeof f->v[i], "%s", v);
            return;
        }
    }
    assert_true(f->n < MAX_FIELDS);
    snprintf(f->k[f->n], sizeof f->k[0], "%s", k);
    snprintf(f->v[f->n++], sizeof f->v[0], "%s", v);
}

static const char *get(const struct fields *f, const char *k)
{
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->k[i], k) == 0)
            return f->v[i];
    return "";
}

/* WeChat's APIv2 signature (SPEC 8), upper-case hex into out. */
static void sign_of(const struct fields *f, const char *key, char out[65])
{
    int idx[MAX_FIELDS], m = 0;
    for (int i = 0; i < f->n; i++) {
        if (!f->v[i][0] || strcmp(f->k[i], "sign") == 0)
            continue;
        int j = m++;
        while (j > 0 && strcmp(f->k[idx[j - 1]], f->k[i]) > 0) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
    char text[8192];
    size_t used = 0;
    for (int i = 0; i < m; i++)
        used +=
            (size_t)snprintf(text + used, sizeof text - used, "%s=%s&", f->k[idx[i]], f->v[idx[i]]);
    used += (size_t)snprintf(text + used, sizeof text - used, "key=%s", key);
    unsigned char mac[32];
    assert_int_equal(pt_hmac_sha256(key, strlen(key), text, used, mac), PT_OK);
    pt_zeroize(text, sizeof text);
    pt_hex_encode(mac, sizeof mac, out);
    for (char *c = out; *c; c++)
        *c = (char)toupper((unsigned char)*c);
}

/* The common fields of a request, with a fresh nonce. */
static void request_head(struct fields *f)
{
    static unsigned counter;
    char nonce[33];
    memset(f, 0, sizeof *f);
    snprintf(nonce, sizeof nonce, "n%07u%024d", ++counter, (int)getpid());
    set(f, "appid", T.gw[ST_WECHAT].app_id);
    set(f, "mch_id", T.gw[ST_WECHAT].merchant_id);
    set(f, "nonce_str", nonce);
    set(f, "sign_type", "HMAC-SHA256");
}

static void micropay_fields(struct fields *f, const char *order, int64_t fen)
{
    char fee[24];
    snprintf(fee, sizeof fee, "%lld", (long long)fen);
    request_head(f);
    set(f, "body", "Large latte");
    set(f, "out_trade_no", order);
    set(f, "total_fee", fee);
    set(f, "fee_type", "CNY");
    set(f, "spbill_create_ip", "192.0.2.10");
    set(f, "auth_code", AUTH_CODE);
}

static char *to_xml(const struct fields *f)
{
    size_t cap = 64 + (size_t)f->n * 280, used = 0;
    char *x = malloc(cap);
    assert_non_null(x);
    used += (size_t)snprintf(x, cap, "<xml>");
    for (int i = 0; i < f->n; i++)
        used += (size_t)snprintf(x + used, cap - used, "<%s><![CDATA[%s]]></%s>", f->k[i], f->v[i],
                                 f->k[i]);
    snprintf(x + used, cap - used, "</xml>");
    return x;
}

/* Reads an answer <xml> (CDATA or plain values) into f. */
static void from_xml(const char *x, struct fields *f)
{
    memset(f, 0, sizeof *f);
    const char *p = strstr(x, "<xml>");
    assert_non_null(p);
    p += 5;
    while (*p == '<' && strncmp(p, "</xml>", 6) != 0) {
        const char *ne = strchr(p, '>');
        assert_non_null(ne);
        char k[40];
        snprintf(k, sizeof k, "%.*s", (int)(ne - p - 1), p + 1);
        char close[48];
        snprintf(close, sizeof close, "</%s>", k);
        const char *end = strstr(ne, close);
        assert_non_null(end);
        const char *v = ne + 1;
        size_t vl = (size_t)(end - v);
        if (strncmp(v, "<![CDATA[", 9) == 0 && vl >= 12) {
            v += 9;
            vl -= 12;
        }
        char val[200];
        snprintf(val, sizeof val, "%.*s", (int)vl, v);
        set(f, k, val);
        p = end + strlen(close);
    }
}

struct answer {
    int rc, status;
    struct fields f;
};

/* POSTs f (signed with key; NULL = the merchant's key) to path, on channel
 * "wechat", presenting the client certificate cert (NULL: none). */
static struct answer post_as(const char *path, struct fields *f, const char *key, const char *cert,
                             const char *ckey)
{
    struct answer a = {0};
    char sign[65], url[300];
    sign_of(f, key ? key : apiv2_key, sign);
    set(f, "sign", sign);
    snprintf(url, sizeof url, "https://wechat.localhost:%d%s", T.port, path);
    struct pt_http_request rq = {.method = "POST"};
    rq.url = strdup(url);
    rq.body = to_xml(f);
    rq.body_len = strlen(rq.body);
    rq.client_cert_file = cert;
    rq.client_key_file = ckey;
    pt_http_request_add_header(&rq, "Content-Type", "text/xml");
    struct pt_http_response r = {0};
    a.rc = pt_curl_send(T.curl, "wechat", &rq, 5000, &r);
    pt_http_request_free(&rq);
    if (a.rc == PT_OK) {
        a.status = r.status;
        from_xml(r.body, &a.f);
        /* Every answer is signed with the APIv2 key, FAIL answers too. */
        char want[65];
        sign_of(&a.f, apiv2_key, want);
        if (strcmp(get(&a.f, "sign"), want) != 0)
            fail_msg("%s: answer sign %s, expected %s: %s", path, get(&a.f, "sign"), want, r.body);
    }
    pt_http_response_free(&r);
    return a;
}

static struct answer post(const char *path, struct fields *f)
{
    return post_as(path, f, NULL, NULL, NULL);
}

static struct answer micropay(const char *order, int64_t fen)
{
    struct fields f;
    micropay_fields(&f, order, fen);
    return post("/pay/micropay", &f);
}

static struct answer orderquery(const char *order)
{
    struct fields f;
    request_head(&f);
    set(&f, "out_trade_no", order);
    return post("/pay/orderquery", &f);
}

static struct answer reverse(const char *order, const char *cert, const char *ckey)
{
    struct fields f;
    request_head(&f);
    set(&f, "out_trade_no", order);
    return post_as("/secapi/pay/reverse", &f, NULL, cert, ckey);
}

static void check_field(const struct answer *a, const char *k, const char *want, int line)
{
    const char *got = get(&a->f, k);
    if (strcmp(got, want) != 0)
        fail_msg("line %d: %s: '%s', expected '%s' (return_msg '%s', err_code_des '%s')", line, k,
                 got, want, get(&a->f, "return_msg"), get(&a->f, "err_code_des"));
}

/* a may be a call: it is evaluated once. */
#define assert_field(a, k, want)                                                                   \
    do {                                                                                           \
        struct answer a_ = (a);                                                                    \
        check_field(&a_, k, want, __LINE__);                                                       \
    } while (0)

static void assert_ok(const struct answer *a)
{
    assert_int_equal(a->rc, PT_OK);
    assert_int_equal(a->status, 200);
    assert_field(*a, "return_code", "SUCCESS");
}

/* ---- micropay ------------------------------------------------------------------- */

static void test_micropay_success(void **state)
{
    (void)state;
    char order[64];
    simtest_order_id(order, sizeof order, "v2pay");
    struct answer a = micropay(order, 1200);
    assert_ok(&a);
    assert_field(a, "result_code", "SUCCESS");
    assert_field(a, "out_trade_no", order);
    assert_field(a, "total_fee", "1200");
    assert_field(a, "fee_type", "CNY");
    assert_field(a, "trade_type", "MICROPAY");
    assert_field(a, "appid", T.gw[ST_WECHAT].app_id);
    assert_field(a, "mch_id", T.gw[ST_WECHAT].merchant_id);
    assert_int_equal(strlen(get(&a.f, "transaction_id")), 28);
    assert_int_equal(strlen(get(&a.f, "time_end")), 14);
    assert_ledger(order, "captured", 1);
    struct answer q = orderquery(order);
    assert_ok(&q);
    assert_field(q, "result_code", "SUCCESS");
    assert_field(q, "trade_state", "SUCCESS");
    assert_field(q, "transaction_id", get(&a.f, "transaction_id"));
}

static void test_userpaying_then_success(void **state)
{
    (void)state;
    char order[64];
    simtest_order_id(order, sizeof order, "v2wait");
    struct answer a = micropay(order, 1252);
    assert_ok(&a);
    assert_field(a, "result_code", "FAIL");
    assert_field(a, "err_code", "USERPAYING");
    assert_ledger(order, "pending", 0);
    struct answer q = orderquery(order);
    assert_ok(&q);
    assert_field(q, "trade_state", "USERPAYING");
    assert_field(q, "transaction_id", "");
    /* The customer enters the password; the pay delay passes. */
    simtest_sleep_ms(PAY_DELAY_MS + 250);
    q = orderquery(order);
    assert_ok(&q);
    assert_field(q, "result_code", "SUCCESS");
    assert_field(q, "trade_state", "SUCCESS");
    assert_int_equal(strlen(get(&q.f, "transaction_id")), 28);
    assert_ledger(order, "captured", 1);
    /* The POS's resend of the same micropay now sees the payment, once. */
    a = micropay(order, 1252);
    assert_field(a, "result_code", "SUCCESS");
    assert_field(a, "transaction_id", get(&q.f, "transaction_id"));
    assert_ledger(order, "captured", 1);
}

static void test_notenough_declined(void **state)
{
    (void)state;
    char order[64];
    simtest_order_id(order, sizeof order, "v2poor");
    struct answer a = micropay(order, 1251);
    assert_ok(&a);
    assert_field(a, "result_code", "FAIL");
    assert_field(a, "err_code", "NOTENOUGH");
    assert_field(a, "transaction_id", "");
    assert_ledger(order, "declined", 0);
    struct answer q = orderquery(order);
    assert_field(q, "trade_state", "PAYERROR");
}

static void test_bad_sign_refused(void **state)
{
    (void)state;
    char order[64];
    struct fields f;
    simtest_order_id(order, sizeof order, "v2sign");
    /* Signed with another key. */
    micropay_fields(&f, order, 1200);
    struct answer a = post_as("/pay/micropay", &f, "0123456789abcdef0123456789abcdef", NULL, NULL);
    assert_int_equal(a.rc, PT_OK);
    assert_field(a, "return_code", "FAIL");
    assert_field(a, "result_code", "");
    assert_true(strstr(get(&a.f, "return_msg"), "签名错误") != NULL);
    /* Signed right, then a field changed (the amount). */
    micropay_fields(&f, order, 1200);
    char sign[65];
    sign_of(&f, apiv2_key, sign);
    set(&f, "sign", sign);
    char url[300];
    snprintf(url, sizeof url, "https://wechat.localhost:%d/pay/micropay", T.port);
    set(&f, "total_fee", "1");
    struct pt_http_request rq = {.method = "POST"};
    rq.url = strdup(url);
    rq.body = to_xml(&f);
    rq.body_len = strlen(rq.body);
    struct pt_http_response r = {0};
    assert_int_equal(pt_curl_send(T.curl, "wechat", &rq, 5000, &r), PT_OK);
    assert_non_null(strstr(r.body, "<return_code><![CDATA[FAIL]]></return_code>"));
    pt_http_request_free(&rq);
    pt_http_response_free(&r);
    /* A well-signed request with a code that is not a WeChat payment code. */
    micropay_fields(&f, order, 1200);
    set(&f, "auth_code", "287634438256643941"); /* an Alipay code */
    a = post("/pay/micropay", &f);
    assert_ok(&a);
    assert_field(a, "err_code", "AUTH_CODE_INVALID");
    /* Nothing of it reached the ledger. */
    assert_int_equal(simtest_captures(&T, "wechat", order, NULL), -1);
}

static void test_xml_with_doctype_refused(void **state)
{
    (void)state;
    char url[300];
    snprintf(url, sizeof url, "https://wechat.localhost:%d/pay/orderquery", T.port);
    struct pt_http_request rq = {.method = "POST"};
    rq.url = strdup(url);
    rq.body = strdup("<!DOCTYPE xml [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>"
                     "<xml><out_trade_no>&x;</out_trade_no></xml>");
    rq.body_len = strlen(rq.body);
    struct pt_http_response r = {0};
    assert_int_equal(pt_curl_send(T.curl, "wechat", &rq, 5000, &r), PT_OK);
    struct fields f;
    from_xml(r.body, &f);
    assert_string_equal(get(&f, "return_code"), "FAIL");
    assert_string_equal(get(&f, "return_msg"), "XML格式错误");
    pt_http_request_free(&rq);
    pt_http_response_free(&r);
}

static void test_idempotent_by_out_trade_no(void **state)
{
    (void)state;
    char order[64];
    simtest_order_id(order, sizeof order, "v2idem");
    struct answer a1 = micropay(order, 1800), a2 = micropay(order, 1800);
    assert_field(a1, "result_code", "SUCCESS");
    /* Same out_trade_no, same parameters (a new nonce): the same trade. */
    assert_field(a2, "result_code", "SUCCESS");
    assert_field(a2, "transaction_id", get(&a1.f, "transaction_id"));
    assert_ledger(order, "captured", 1);
    /* Other parameters: refused, the paid trade untouched. */
    struct answer a3 = micropay(order, 1900);
    assert_ok(&a3);
    assert_field(a3, "result_code", "FAIL");
    assert_field(a3, "err_code", "ORDERPAID");
    assert_ledger(order, "captured", 1);
    /* On an unpaid trade other parameters are OUT_TRADE_NO_USED. */
    char wait[64];
    simtest_order_id(wait, sizeof wait, "v2idemw");
    micropay(wait, 2052);
    struct answer a4 = micropay(wait, 2152);
    assert_field(a4, "err_code", "OUT_TRADE_NO_USED");
    struct answer a5 = micropay(wait, 2052);
    assert_field(a5, "err_code", "USERPAYING");
    simtest_sleep_ms(PAY_DELAY_MS + 250);
    assert_ledger(wait, "captured", 1);
}

static void test_orderquery_unknown(void **state)
{
    (void)state;
    struct answer q = orderquery("T-v2-never-made");
    assert_ok(&q);
    assert_field(q, "result_code", "FAIL");
    assert_field(q, "err_code", "ORDERNOTEXIST");
}

/* ---- reverse (mutual TLS) -------------------------------------------------------- */

static void test_reverse_paid_over_mtls(void **state)
{
    (void)state;
    char order[64];
    simtest_order_id(order, sizeof order, "v2rev");
    assert_field(micropay(order, 1300), "result_code", "SUCCESS");
    struct answer r = reverse(order, cert_file, key_file);
    assert_ok(&r);
    assert_field(r, "result_code", "SUCCESS");
    assert_field(r, "recall", "N");
    /* The money went back: the trade is reversed, its one capture undone. */
    assert_ledger(order, "canceled", 1);
    struct answer q = orderquery(order);
    assert_field(q, "trade_state", "REVOKED");
    /* Reversing again is the same answer, and moves nothing. */
    r = reverse(order, cert_file, key_file);
    assert_field(r, "result_code", "SUCCESS");
    assert_ledger(order, "canceled", 1);
    /* A new micropay on the reversed out_trade_no is refused. */
    assert_field(micropay(order, 1300), "err_code", "ORDERREVERSED");
    assert_ledger(order, "canceled", 1);
}

static void test_reverse_userpaying_closes_it(void **state)
{
    (void)state;
    char order[64];
    simtest_order_id(order, sizeof order, "v2revwait");
    assert_field(micropay(order, 1452), "err_code", "USERPAYING");
    struct answer r = reverse(order, cert_file, key_file);
    assert_ok(&r);
    assert_field(r, "result_code", "SUCCESS");
    assert_field(r, "recall", "N");
    /* The customer's confirmation comes too late: the trade stays closed. */
    simtest_sleep_ms(PAY_DELAY_MS + 250);
    assert_field(orderquery(order), "trade_state", "REVOKED");
    assert_ledger(order, "canceled", 0);
}

static void test_reverse_without_client_cert_refused(void **state)
{
    (void)state;
    char order[64], other_cert[600], other_key[600];
    simtest_order_id(order, sizeof order, "v2revnocert");
    assert_field(micropay(order, 1500), "result_code", "SUCCESS");
    /* No certificate: refused before the request is even read. */
    struct answer r = reverse(order, NULL, NULL);
    assert_int_equal(r.rc, PT_OK);
    assert_int_equal(r.status, 403);
    assert_field(r, "return_code", "FAIL");
    assert_field(r, "result_code", "");
    /* A certificate from the same CA that is not the merchant's: refused too. */
    snprintf(other_cert, sizeof other_cert, "%s/server.pem", T.dir);
    snprintf(other_key, sizeof other_key, "%s/server.key", T.dir);
    r = reverse(order, other_cert, other_key);
    assert_int_equal(r.rc, PT_OK);
    assert_int_equal(r.status, 403);
    assert_field(r, "return_code", "FAIL");
    /* The payment stands. */
    assert_ledger(order, "captured", 1);
    assert_field(orderquery(order), "trade_state", "SUCCESS");
}

/* ---- faults ------------------------------------------------------------------- */

static void test_drop_after_commit_then_query_one_capture(void **state)
{
    (void)state;
    char order[64];
    simtest_order_id(order, sizeof order, "v2drop");
    simtest_fault(&T, "{\"gateway\":\"wechat\",\"mode\":\"drop_after_commit\",\"count\":1}");
    struct answer a = micropay(order, 1600);
    assert_int_equal(a.rc, PT_ENOANSWER);
    /* The money moved although the answer was lost; the query says so. */
    struct answer q = orderquery(order);
    assert_ok(&q);
    assert_field(q, "trade_state", "SUCCESS");
    assert_ledger(order, "captured", 1);
    /* A resend of the same micropay is the same trade. */
    a = micropay(order, 1600);
    assert_field(a, "result_code", "SUCCESS");
    assert_field(a, "transaction_id", get(&q.f, "transaction_id"));
    assert_ledger(order, "captured", 1);
}

static void test_other_faults_apply(void **state)
{
    (void)state;
    char refused[64], h500[64], fbc[64];
    simtest_order_id(refused, sizeof refused, "v2refuse");
    simtest_order_id(h500, sizeof h500, "v2h500");
    simtest_order_id(fbc, sizeof fbc, "v2fbc");
    simtest_fault(&T, "{\"gateway\":\"wechat\",\"mode\":\"refuse_connect\",\"count\":1}");
    assert_int_equal(micropay(refused, 1700).rc, PT_ENOTSENT);
    assert_int_equal(simtest_captures(&T, "wechat", refused, NULL), -1);

    simtest_fault(&T, "{\"gateway\":\"wechat\",\"mode\":\"fail_before_commit\",\"count\":1}");
    assert_int_equal(micropay(fbc, 1700).rc, PT_ENOANSWER);
    assert_int_equal(simtest_captures(&T, "wechat", fbc, NULL), -1);
    assert_field(orderquery(fbc), "err_code", "ORDERNOTEXIST");

    simtest_fault(&T, "{\"gateway\":\"wechat\",\"mode\":\"http_500_after_commit\",\"count\":1}");
    struct answer a = micropay(h500, 1700);
    assert_int_equal(a.rc, PT_OK);
    assert_int_equal(a.status, 500);
    assert_field(a, "err_code", "SYSTEMERROR"); /* signed, like every answer */
    assert_ledger(h500, "captured", 1);
    assert_field(orderquery(h500), "trade_state", "SUCCESS");
}

/* ---- the whole ledger ------------------------------------------------------------ */

static void test_ledger_exact(void **state)
{
    (void)state;
    struct pt_http_request rq = {.method = "GET"};
    char url[300];
    snprintf(url, sizeof url, "https://localhost:%d/_sim/ledger?gateway=wechat", T.port);
    rq.url = strdup(url);
    struct pt_http_response r = {0};
    assert_int_equal(pt_curl_send(T.curl, "_sim", &rq, 5000, &r), PT_OK);
    pt_http_request_free(&rq);
    cJSON *j = cJSON_ParseWithLength(r.body, r.body_len);
    pt_http_response_free(&r);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data"), *row;
    int rows = 0;
    cJSON_ArrayForEach(row, data)
    {
        const char *order = cJSON_GetObjectItemCaseSensitive(row, "order_id")->valuestring;
        int found = -1;
        for (int i = 0; i < nexpect; i++)
            if (strcmp(expect[i].order, order) == 0)
                found = i;
        if (found < 0)
            fail_msg("ledger has an order no case made: %s", order);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(row, "gateway")->valuestring,
                            "wechat");
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(row, "status")->valuestring,
                            expect[found].status);
        assert_int_equal(cJSON_GetObjectItemCaseSensitive(row, "captures")->valueint,
                         expect[found].captures);
        assert_int_equal(cJSON_GetObjectItemCaseSensitive(row, "trades")->valueint, 1);
        rows++;
    }
    assert_int_equal(rows, nexpect);
    cJSON_Delete(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_micropay_success, clear),
        cmocka_unit_test_setup(test_userpaying_then_success, clear),
        cmocka_unit_test_setup(test_notenough_declined, clear),
        cmocka_unit_test_setup(test_bad_sign_refused, clear),
        cmocka_unit_test_setup(test_xml_with_doctype_refused, clear),
        cmocka_unit_test_setup(test_idempotent_by_out_trade_no, clear),
        cmocka_unit_test_setup(test_orderquery_unknown, clear),
        cmocka_unit_test_setup(test_reverse_paid_over_mtls, clear),
        cmocka_unit_test_setup(test_reverse_userpaying_closes_it, clear),
        cmocka_unit_test_setup(test_reverse_without_client_cert_refused, clear),
        cmocka_unit_test_setup(test_drop_after_commit_then_query_one_capture, clear),
        cmocka_unit_test_setup(test_other_faults_apply, clear),
        cmocka_unit_test_setup(test_ledger_exact, clear),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
