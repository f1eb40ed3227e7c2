/*
 * sim_wechat_v2.c - the simulated WeChat Pay APIv2 payment code (付款码):
 *
 *   POST /pay/micropay          charge the code the customer shows
 *   POST /pay/orderquery        the trade by out_trade_no or transaction_id
 *   POST /secapi/pay/reverse    撤销: close an unpaid trade, or return the
 *                               money of a paid one (mutual TLS only)
 *   POST /pay/downloadbill      下载对账单: the day's bill (SPEC 19), the
 *                               trade bill of sim_wechat.c with "\r\n" line
 *                               ends, as text; its errors unsigned XML
 *                               ("No Bill Exist", "Bill Creating"), as
 *                               WeChat Pay's are
 *
 * Served through the "wechat" gateway table (sim_wechat.c dispatches here):
 * the same merchant, the same ledger rows (gateway "wechat", one trade per
 * out_trade_no, unique across APIv2 and APIv3 as at WeChat), the same faults.
 *
 * Messages are <xml> with one element per field, values in CDATA.  Every
 * request is signed: the non-empty fields but `sign`, sorted by name, joined
 * `k=v&...&key=<APIv2 key>`, HMAC-SHA256 with the APIv2 key, upper-case hex.
 * The simulator accepts sign_type HMAC-SHA256 only (WeChat also takes MD5,
 * the default when sign_type is absent; payterm never sends it).  A message
 * that is not such XML (a DOCTYPE or entity included) is return_code FAIL
 * XML_FORMAT_ERROR; a wrong signature return_code FAIL "签名错误"
 * (SIGNERROR).  Every answer is signed the same way - FAIL answers too,
 * because payterm verifies every one (SPEC 8).
 *
 * micropay ledger rules (amounts in fen):
 *   ...51  result_code FAIL, err_code NOTENOUGH (trade declined)
 *   ...52  err_code USERPAYING: the customer is entering the password; after
 *          the pay delay the customer confirms and the trade is paid (no
 *          notification: micropay has none, the POS polls orderquery)
 *   else   SUCCESS at once, with transaction_id
 *   A repeat of an out_trade_no with the same parameters (total_fee,
 *   fee_type, body, auth_code) is answered with that trade's state as it now
 *   is - never a second charge.  With other parameters: ORDERPAID when the
 *   trade is paid (WeChat: "订单号重复 ... 如果是新单，请使用新订单号"),
 *   ORDERREVERSED when reversed, OUT_TRADE_NO_USED otherwise.
 *   auth_code must be 18 digits starting 10-15 (AUTH_CODE_INVALID).
 *
 * orderquery: trade_state SUCCESS, REFUND (paid, with refunds), USERPAYING,
 * PAYERROR (declined), REVOKED (a reversed payment-code trade), NOTPAY and
 * CLOSED (an APIv3 Native order, open or closed); ORDERNOTEXIST.
 *
 * reverse: an unpaid, USERPAYING or declined trade is closed (the customer
 * can no longer pay it), a paid one is reversed and its money goes back to
 * the customer (WeChat: "如果用户支付成功，微信支付系统会将此订单资金退还给
 * 用户"); both answer SUCCESS with recall=N and the trade is REVOKED; the
 * ledger shows it canceled (with its capture still counted, as for Alipay's
 * trade.cancel: money moved once and came back).  Reversing again is the
 * same answer.  Reverse is refused for trades older than 7 days
 * (REVERSE_EXPIRE), for refunded trades and for non-payment-code orders
 * (TRADE_ERROR).
 *
 * Mutual TLS on /secapi/.  The real host refuses a connection without the
 * merchant's API certificate during the TLS handshake.  The simulator serves
 * every route on one port and one handshake (it asks for a certificate but
 * cannot know the path yet), so it refuses at the HTTP level instead, in a
 * way a client cannot mistake for a business answer: HTTP 403 with
 * return_code FAIL, return_msg naming the certificate problem, before the
 * request is parsed, verified or recorded.  Only the certificate the
 * simulator issued (DIR/wechat_apiclient_cert.pem, verified against its CA,
 * with proof of the private key) passes.
 */
#define _GNU_SOURCE /* memmem */
#include "sim_int.h"

#include "crypto.h"
#include "err.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define V2_MAX_FIELDS 40
#define V2_ANS_MAX 28
#define V2_REVERSE_WINDOW_MS (7LL * 24 * 3600 * 1000)
#define V2_CTYPE "text/xml; charset=utf-8"
#define V2_OPENID "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"

int pt__sim_wechat_v2_path(const char *path)
{
    return strncmp(path, "/pay/", 5) == 0 || strncmp(path, "/secapi/", 8) == 0;
}

/* ---- XML ----------------------------------------------------------------------- */

/* A received message: flat fields, values NUL-terminated in arena. */
struct v2_msg {
    int n;
    struct {
        char name[33];
        const char *value;
    } f[V2_MAX_FIELDS];
    char *arena;
};

static const char *v2_get(const struct v2_msg *m, const char *name)
{
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->f[i].name, name) == 0)
            return m->f[i].value;
    return NULL;
}

/* Present and non-empty, or NULL. */
static const char *v2_val(const struct v2_msg *m, const char *name)
{
    const char *v = v2_get(m, name);
    return v && *v ? v : NULL;
}

static int starts(const char *p, const char *e, const char *lit)
{
    size_t n = strlen(lit);
    return (size_t)(e - p) >= n && memcmp(p, lit, n) == 0;
}

static const char *skip_ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
        p++;
    return p;
}

/* The five predefined entities only; anything else is refused. */
static int entity(const char **pp, const char *e, char *out)
{
    static const struct {
        const char *lit;
        char c;
    } known[] = {{"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'}, {"&apos;", '\''}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (starts(*pp, e, known[i].lit)) {
            *out = known[i].c;
            *pp += strlen(known[i].lit);
            return 0;
        }
    }
    return -1;
}

/*
 * Reads `<xml><name>value</name>...</xml>` (values plain or CDATA) into m.
 * Refuses what WeChat's reader would not take or what could be read two
 * ways: a DOCTYPE or entity declaration, nested elements, a field given
 * twice, NUL bytes.  0 or -1; m->arena is freed by v2_msg_free either way.
 */
static int v2_parse(const char *body, size_t len, struct v2_msg *m)
{
    memset(m, 0, sizeof *m);
    const char *p = body, *e = body + len;
    if (memchr(body, '\0', len) || memmem(body, len, "<!DOCTYPE", 9) ||
        memmem(body, len, "<!ENTITY", 8) || !(m->arena = malloc(len + 1)))
        return -1;
    char *w = m->arena;
    p = skip_ws(p, e);
    if (starts(p, e, "<?xml")) {
        const char *q = memmem(p, (size_t)(e - p), "?>", 2);
        if (!q)
            return -1;
        p = skip_ws(q + 2, e);
    }
    if (!starts(p, e, "<xml>"))
        return -1;
    p += 5;
    for (;;) {
        p = skip_ws(p, e);
        if (starts(p, e, "</xml>"))
            return skip_ws(p + 6, e) == e ? 0 : -1;
        if (p >= e || *p != '<' || m->n >= V2_MAX_FIELDS)
            return -1;
        const char *ns = ++p;
        while (p < e && (isalnum((unsigned char)*p) || *p == '_'))
            p++;
        size_t nl = (size_t)(p - ns);
        if (nl == 0 || nl > 32 || p >= e || *p != '>')
            return -1;
        p++;
        for (int i = 0; i < m->n; i++)
            if (strlen(m->f[i].name) == nl && memcmp(m->f[i].name, ns, nl) == 0)
                return -1;
        memcpy(m->f[m->n].name, ns, nl);
        m->f[m->n].name[nl] = '\0';
        m->f[m->n++].value = w;
        if (starts(p, e, "<![CDATA[")) {
            p += 9;
            const char *q = memmem(p, (size_t)(e - p), "]]>", 3);
            if (!q)
                return -1;
            memcpy(w, p, (size_t)(q - p));
            w += q - p;
            p = q + 3;
        } else {
            while (p < e && *p != '<') {
                if (*p == '&') {
                    if (entity(&p, e, w++) != 0)
                        return -1;
                } else {
                    *w++ = *p++;
                }
            }
        }
        *w++ = '\0';
        if (!starts(p, e, "</") || (size_t)(e - p) < nl + 3 || memcmp(p + 2, ns, nl) != 0 ||
            p[2 + nl] != '>')
            return -1;
        p += nl + 3;
    }
}

static void v2_msg_free(struct v2_msg *m)
{
    free(m->arena);
    m->arena = NULL;
}

/* ---- signatures ----------------------------------------------------------------- */

/*
 * The APIv2 signature over n (name, value) pairs: the non-empty ones but
 * `sign`, sorted by name (byte order), `k=v&...&key=KEY`, HMAC-SHA256 with
 * KEY's bytes, upper-case hex into out.  PT_OK, PT_ENOMEM, PT_ECRYPTO.
 */
static int v2_sign(const char *key, const char *const *names, const char *const *values, int n,
                   char out[65])
{
    int idx[V2_MAX_FIELDS], m = 0;
    size_t need = strlen("key=") + strlen(key) + 1;
    for (int i = 0; i < n && m < V2_MAX_FIELDS; i++) {
        if (!values[i] || !values[i][0] || strcmp(names[i], "sign") == 0)
            continue;
        /* Insertion sort: at most a few dozen fields. */
        int j = m++;
        while (j > 0 && strcmp(names[idx[j - 1]], names[i]) > 0) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
        need += strlen(names[i]) + strlen(values[i]) + 2;
    }
    char *text = malloc(need);
    if (!text)
        return PT_ENOMEM;
    size_t used = 0;
    for (int k = 0; k < m; k++)
        used += (size_t)snprintf(text + used, need - used, "%s=%s&", names[idx[k]], values[idx[k]]);
    used += (size_t)snprintf(text + used, need - used, "key=%s", key);
    unsigned char mac[32];
    int rc = pt_hmac_sha256(key, strlen(key), text, used, mac);
    /* The string holds the key. */
    pt_zeroize(text, need);
    free(text);
    if (rc != PT_OK)
        return rc;
    pt_hex_encode(mac, sizeof mac, out);
    for (char *c = out; *c; c++)
        *c = (char)toupper((unsigned char)*c);
    return PT_OK;
}

/* True when m carries a valid HMAC-SHA256 signature under key. */
static int v2_verify(const char *key, const struct v2_msg *m)
{
    const char *names[V2_MAX_FIELDS], *values[V2_MAX_FIELDS];
    const char *given = v2_get(m, "sign");
    char want[65];
    for (int i = 0; i < m->n; i++) {
        names[i] = m->f[i].name;
        values[i] = m->f[i].value;
    }
    if (!given || strlen(given) != 64 || v2_sign(key, names, values, m->n, want) != PT_OK)
        return 0;
    return pt_ct_equal(given, want, 64);
}

/* ---- answers ------------------------------------------------------------------- */

struct v2_ans {
    int n;
    struct {
        char k[32];
        char v[192];
    } f[V2_ANS_MAX];
};

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void
ans_set(struct v2_ans *a, const char *k, const char *fmt, ...)
{
    int i = 0;
    while (i < a->n && strcmp(a->f[i].k, k) != 0)
        i++;
    if (i == a->n) {
        if (a->n >= V2_ANS_MAX)
            return;
        a->n++;
    }
    snprintf(a->f[i].k, sizeof a->f[i].k, "%s", k);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->f[i].v, sizeof a->f[i].v, fmt, ap);
    va_end(ap);
}

static const char *ans_get(const struct v2_ans *a, const char *k)
{
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->f[i].k, k) == 0)
            return a->f[i].v;
    return "";
}

/* return_code SUCCESS and the merchant's identity: the head of every answer. */
static void ans_init(struct pt_sim *s, struct v2_ans *a)
{
    char nonce[17];
    memset(a, 0, sizeof *a);
    pt__sim_random_alnum(s, nonce, 16);
    ans_set(a, "return_code", "SUCCESS");
    ans_set(a, "return_msg", "OK");
    ans_set(a, "appid", "%s", s->k.wechat_appid);
    ans_set(a, "mch_id", "%s", s->k.wechat_mchid);
    ans_set(a, "nonce_str", "%s", nonce);
}

static void ans_result_fail(struct v2_ans *a, const char *code, const char *des)
{
    ans_set(a, "result_code", "FAIL");
    ans_set(a, "err_code", "%s", code);
    ans_set(a, "err_code_des", "%s", des);
}

/* Appends s to the XML as CDATA; a "]]>" inside is split across two
 * sections so that no value can close its own. */
static void put_cdata(char *out, size_t cap, size_t *used, const char *v)
{
    *used += (size_t)snprintf(out + *used, cap - *used, "<![CDATA[");
    for (const char *q; (q = strstr(v, "]]>")) != NULL; v = q + 2)
        *used += (size_t)snprintf(out + *used, cap - *used, "%.*s]]]]><![CDATA[", (int)(q - v), v);
    *used += (size_t)snprintf(out + *used, cap - *used, "%s]]>", v);
}

/* Signs a and writes it into rs as the HTTP answer. */
static void ans_send(struct pt_sim *s, struct sim_resp *rs, int status, struct v2_ans *a)
{
    const char *names[V2_ANS_MAX + 1], *values[V2_ANS_MAX + 1];
    char sign[65] = "";
    for (int i = 0; i < a->n; i++) {
        names[i] = a->f[i].k;
        values[i] = a->f[i].v;
    }
    if (v2_sign(s->k.wechat_apiv2_key, names, values, a->n, sign) == PT_OK)
        ans_set(a, "sign", "%s", sign);
    size_t cap = 64 + (size_t)a->n * (sizeof a->f[0] * 2 + 32), used = 0;
    char *xml = malloc(cap);
    if (!xml) {
        pt__sim_resp_set(rs, 500, V2_CTYPE, "", 0);
        return;
    }
    used += (size_t)snprintf(xml, cap, "<xml>");
    for (int i = 0; i < a->n; i++) {
        used += (size_t)snprintf(xml + used, cap - used, "<%s>", a->f[i].k);
        put_cdata(xml, cap, &used, a->f[i].v);
        used += (size_t)snprintf(xml + used, cap - used, "</%s>", a->f[i].k);
    }
    used += (size_t)snprintf(xml + used, cap - used, "</xml>");
    pt__sim_resp_set(rs, status, V2_CTYPE, xml, used);
    free(xml);
}

/* return_code FAIL: the request was not processed at all. */
static void return_fail(struct pt_sim *s, struct sim_resp *rs, int status, const char *code,
                        const char *msg)
{
    struct v2_ans a;
    ans_init(s, &a);
    ans_set(&a, "return_code", "FAIL");
    ans_set(&a, "return_msg", "%s", msg);
    ans_send(s, rs, status, &a);
    pt__sim_note(rs, "%s", code);
}

int pt__sim_wechat_v2_is_answer(const struct sim_resp *rs)
{
    return strncmp(rs->ctype, "text/xml", 8) == 0;
}

void pt__sim_wechat_v2_error_500(struct pt_sim *s, struct sim_resp *rs)
{
    struct v2_ans a;
    ans_init(s, &a);
    ans_result_fail(&a, "SYSTEMERROR", "系统超时，请立即调用被扫订单结果查询API，查询当前订单状态");
    ans_set(&a, "recall", "Y");
    ans_send(s, rs, 500, &a);
}

/* ---- the trade ------------------------------------------------------------------- */

void pt__sim_wechat_v2_confirm(struct pt_sim *s, struct sim_trade *t)
{
    snprintf(t->status, sizeof t->status, "captured");
    t->captures++;
    t->pay_at = 0;
    t->updated_at = t->paid_at = pt__sim_now_ms(s);
    pt__sim_trade_update(s, t);
}

/* The customer may have confirmed since the scheduler last looked (lk held):
 * a query right after the pay delay must see it. */
static void settle_if_due(struct pt_sim *s, struct sim_trade *t)
{
    if (strcmp(t->method, "micropay") == 0 && strcmp(t->status, "pending") == 0 && t->pay_at > 0 &&
        t->pay_at <= pt__sim_now_ms(s))
        pt__sim_wechat_v2_confirm(s, t);
}

/* "yyyyMMddHHmmss" in China time, as APIv2 writes times. */
static void time_v2(int64_t ms, char out[15])
{
    char cn[20];
    size_t n = 0;
    pt__sim_time_cn(ms, cn);
    for (const char *c = cn; *c && n < 14; c++)
        if (isdigit((unsigned char)*c))
            out[n++] = *c;
    out[n] = '\0';
}

static void paid_fields(struct v2_ans *a, const struct sim_trade *t)
{
    char when[15];
    time_v2(t->paid_at, when);
    ans_set(a, "openid", V2_OPENID);
    ans_set(a, "is_subscribe", "N");
    ans_set(a, "bank_type", "OTHERS");
    ans_set(a, "cash_fee", "%lld", (long long)t->amount);
    ans_set(a, "cash_fee_type", "%s", t->currency);
    ans_set(a, "time_end", "%s", when);
}

static void trade_fields(struct v2_ans *a, const struct sim_trade *t)
{
    ans_set(a, "out_trade_no", "%s", t->order_id);
    ans_set(a, "total_fee", "%lld", (long long)t->amount);
    ans_set(a, "fee_type", "%s", t->currency);
    ans_set(a, "trade_type", "%s", strcmp(t->method, "micropay") == 0 ? "MICROPAY" : "NATIVE");
}

/* ---- requests ------------------------------------------------------------------ */

/* Reads and authenticates an APIv2 request into m; 0, or -1 with rs
 * answered.  The order is WeChat's: the message, the merchant, the sign. */
static int v2_request(struct pt_sim *s, const struct sim_req *rq, struct sim_resp *rs,
                      struct v2_msg *m)
{
    if (strcmp(rq->method, "POST") != 0) {
        return_fail(s, rs, 405, "REQUIRE_POST_METHOD", "请使用post方法");
        return -1;
    }
    if (v2_parse(rq->body, rq->body_len, m) != 0) {
        return_fail(s, rs, 200, "XML_FORMAT_ERROR", "XML格式错误");
        return -1;
    }
    const char *mch = v2_val(m, "mch_id"), *appid = v2_val(m, "appid");
    const char *st = v2_val(m, "sign_type"), *nonce = v2_val(m, "nonce_str");
    if (!mch || !appid || !nonce || !v2_val(m, "sign")) {
        return_fail(s, rs, 200, "LACK_PARAMS", "缺少参数 (appid, mch_id, nonce_str, sign)");
        return -1;
    }
    if (strcmp(mch, s->k.wechat_mchid) != 0) {
        return_fail(s, rs, 200, "MCHID_NOT_EXIST", "商户号mch_id不存在");
        return -1;
    }
    if (!st || strcmp(st, "HMAC-SHA256") != 0) {
        return_fail(s, rs, 200, "SIGNERROR",
                    "签名类型错误 (sign_type: the simulator accepts HMAC-SHA256 only)");
        return -1;
    }
    if (strlen(nonce) > 32) {
        return_fail(s, rs, 200, "PARAM_ERROR", "nonce_str 不长于32位");
        return -1;
    }
    if (!v2_verify(s->k.wechat_apiv2_key, m)) {
        return_fail(s, rs, 200, "SIGNERROR", "签名错误");
        return -1;
    }
    return 0;
}

static int digits(const char *v, size_t min, size_t max)
{
    size_t n = strlen(v);
    if (n < min || n > max)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)v[i]))
            return 0;
    return 1;
}

/* WeChat's payment code: 18 digits with a 10-15 prefix. */
static int auth_code_valid(const char *v)
{
    return digits(v, 18, 18) && v[0] == '1' && v[1] >= '0' && v[1] <= '5';
}

/* out_trade_no: at most 32 of digits, letters and _-|* (APIv2's rule). */
static int out_trade_no_valid(const char *v)
{
    size_t n = strlen(v);
    if (n < 1 || n > 32)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)v[i]) && !strchr("_-|*", v[i]))
            return 0;
    return 1;
}

/* What micropay answers for trade t: its state as it now is. */
static void micropay_answer(struct v2_ans *a, const struct sim_trade *t, int same_params)
{
    if (!same_params || strcmp(t->method, "micropay") != 0) {
        if (strcmp(t->status, "captured") == 0)
            ans_result_fail(a, "ORDERPAID",
                            "订单已支付，订单号重复，如果是新单，请使用新订单号提交");
        else if (strcmp(t->status, "canceled") == 0)
            ans_result_fail(a, "ORDERREVERSED", "订单已撤销，请使用新订单号提交");
        else
            ans_result_fail(a, "OUT_TRADE_NO_USED", "商户订单号重复，同一笔交易不能多次提交");
    } else if (strcmp(t->status, "captured") == 0) {
        ans_set(a, "result_code", "SUCCESS");
        trade_fields(a, t);
        ans_set(a, "transaction_id", "%s", t->trade_no);
        paid_fields(a, t);
    } else if (strcmp(t->status, "pending") == 0) {
        ans_result_fail(a, "USERPAYING", "需要用户输入支付密码");
    } else if (strcmp(t->status, "declined") == 0) {
        ans_result_fail(a, "NOTENOUGH", "余额不足");
    } else {
        ans_result_fail(a, "ORDERREVERSED", "订单已撤销，请使用新订单号提交");
    }
}

static void micropay(struct sim_call *c, const struct v2_msg *m, struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    struct v2_ans a;
    ans_init(s, &a);
    const char *body = v2_val(m, "body"), *otn = v2_val(m, "out_trade_no");
    const char *fee = v2_val(m, "total_fee"), *ip = v2_val(m, "spbill_create_ip");
    const char *code = v2_val(m, "auth_code"), *cur = v2_val(m, "fee_type");
    if (strcmp(v2_get(m, "appid"), s->k.wechat_appid) != 0) {
        ans_result_fail(&a, "APPID_MCHID_NOT_MATCH", "appid和mch_id不匹配");
        goto answer;
    }
    if (!body || !otn || !fee || !ip || !code) {
        ans_result_fail(&a, "LACK_PARAMS",
                        "缺少参数 (body, out_trade_no, total_fee, spbill_create_ip, auth_code)");
        goto answer;
    }
    if (!out_trade_no_valid(otn) || !digits(fee, 1, 10) || fee[0] == '0' || strlen(body) > 128 ||
        strlen(ip) > 64 || (cur && strcmp(cur, "CNY") != 0)) {
        ans_result_fail(&a, "PARAM_ERROR",
                        "参数格式错误 (out_trade_no 至多32位字母数字_-|*, total_fee 正整数(分), "
                        "body 至多128字节, fee_type 仅支持 CNY)");
        goto answer;
    }
    if (!auth_code_valid(code)) {
        ans_result_fail(&a, "AUTH_CODE_INVALID",
                        "请扫描微信支付授权码(以10/11/12/13/14/15为前缀的18位数字)");
        goto answer;
    }
    int64_t total = strtoll(fee, NULL, 10);
    char basis[512], hash[65];
    snprintf(basis, sizeof basis, "micropay|%lld|%s|%s|%s", (long long)total, cur ? cur : "CNY",
             body, code);
    pt__sim_sha256_hex(basis, strlen(basis), hash);
    if (pt__sim_commit_gate(c, rs))
        return;
    struct sim_trade *t = calloc(1, sizeof *t);
    if (!t) {
        ans_result_fail(&a, "SYSTEMERROR", "系统错误");
        goto answer;
    }
    pt__sim_lock(s);
    int rc = pt__sim_trade_get(s, SIM_GW_WECHAT, otn, t), repeat = rc == PT_OK;
    if (repeat) {
        settle_if_due(s, t);
    } else if (rc == PT_ENOTFOUND) {
        memset(t, 0, sizeof *t);
        t->gw = SIM_GW_WECHAT;
        snprintf(t->order_id, sizeof t->order_id, "%s", otn);
        memcpy(t->trade_no, "42000", 5);
        pt__sim_random_digits(s, t->trade_no + 5, 23);
        snprintf(t->method, sizeof t->method, "micropay");
        t->amount = total;
        snprintf(t->currency, sizeof t->currency, "CNY");
        memcpy(t->params_hash, hash, sizeof hash);
        t->created_at = t->updated_at = pt__sim_now_ms(s);
        snprintf(t->extra, sizeof t->extra, "{}");
        switch (pt__sim_amount_rule(total)) {
        case SIM_RULE_DECLINE:
            snprintf(t->status, sizeof t->status, "declined");
            break;
        case SIM_RULE_PENDING:
            /* The customer is asked for the password and confirms after
             * the pay delay (the scheduler's autopay, or the next query). */
            snprintf(t->status, sizeof t->status, "pending");
            t->pay_at = t->created_at + s->pay_delay_ms;
            pthread_cond_signal(&s->cond);
            break;
        default:
            snprintf(t->status, sizeof t->status, "captured");
            t->captures = 1;
            t->paid_at = t->created_at;
            break;
        }
        rc = pt__sim_trade_insert(s, t);
    }
    pt__sim_unlock(s);
    if (rc != PT_OK)
        ans_result_fail(&a, "SYSTEMERROR", "系统错误，请使用相同参数再次调用");
    else
        micropay_answer(&a, t, !repeat || strcmp(t->params_hash, hash) == 0);
    free(t);
answer:
    ans_send(s, rs, 200, &a);
    pt__sim_note(rs, "%s micropay %s", otn ? otn : "-",
                 ans_get(&a, "err_code")[0] ? ans_get(&a, "err_code") : "SUCCESS");
}

/* Finds the trade an orderquery/reverse names (lk held). */
static int find_trade(struct pt_sim *s, const struct v2_msg *m, struct sim_trade *t)
{
    const char *otn = v2_val(m, "out_trade_no"), *tid = v2_val(m, "transaction_id");
    /* WeChat: transaction_id wins when both are given. */
    return tid ? pt__sim_trade_by_no(s, SIM_GW_WECHAT, tid, t)
               : pt__sim_trade_get(s, SIM_GW_WECHAT, otn, t);
}

static const char *state_of(const struct sim_trade *t, int refunds, const char **desc)
{
    int micro = strcmp(t->method, "micropay") == 0;
    if (strcmp(t->status, "captured") == 0) {
        *desc = refunds > 0 ? "转入退款" : "支付成功";
        return refunds > 0 ? "REFUND" : "SUCCESS";
    }
    if (strcmp(t->status, "pending") == 0) {
        *desc = micro ? "需要用户输入支付密码" : "订单未支付";
        return micro ? "USERPAYING" : "NOTPAY";
    }
    if (strcmp(t->status, "declined") == 0) {
        *desc = "支付失败，请撤销订单";
        return "PAYERROR";
    }
    *desc = micro ? "订单已撤销" : "订单已关闭";
    return micro ? "REVOKED" : "CLOSED";
}

/* Whether a request on one trade (orderquery, reverse) names it: our appid,
 * and its out_trade_no or transaction_id; else the refusal is in a. */
static int names_a_trade(const struct pt_sim *s, const struct v2_msg *m, struct v2_ans *a)
{
    const char *otn = v2_val(m, "out_trade_no"), *tid = v2_val(m, "transaction_id");
    if (strcmp(v2_get(m, "appid"), s->k.wechat_appid) != 0) {
        ans_result_fail(a, "APPID_MCHID_NOT_MATCH", "appid和mch_id不匹配");
        return 0;
    }
    if ((!otn && !tid) || (otn && !out_trade_no_valid(otn))) {
        ans_result_fail(a, "PARAM_ERROR", "out_trade_no 与 transaction_id 不能同时为空");
        return 0;
    }
    return 1;
}

static void orderquery(struct sim_call *c, const struct v2_msg *m, struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    struct v2_ans a;
    ans_init(s, &a);
    struct sim_trade *t = NULL;
    if (!names_a_trade(s, m, &a))
        goto answer;
    if (!(t = calloc(1, sizeof *t))) {
        ans_result_fail(&a, "SYSTEMERROR", "系统错误");
        goto answer;
    }
    int refunds = 0;
    pt__sim_lock(s);
    int rc = find_trade(s, m, t);
    if (rc == PT_OK) {
        settle_if_due(s, t);
        if (pt__sim_refund_totals(s, t->id, NULL, NULL, &refunds) != PT_OK)
            refunds = 0;
    }
    pt__sim_unlock(s);
    if (rc == PT_ENOTFOUND) {
        ans_result_fail(&a, "ORDERNOTEXIST", "此交易订单号不存在");
    } else if (rc != PT_OK) {
        ans_result_fail(&a, "SYSTEMERROR", "系统错误");
    } else {
        const char *desc, *state = state_of(t, refunds, &desc);
        ans_set(&a, "result_code", "SUCCESS");
        trade_fields(&a, t);
        ans_set(&a, "trade_state", "%s", state);
        ans_set(&a, "trade_state_desc", "%s", desc);
        /* The transaction_id exists once the customer paid. */
        if (t->paid_at > 0) {
            ans_set(&a, "transaction_id", "%s", t->trade_no);
            paid_fields(&a, t);
        }
        pt__sim_note(rs, "%s %s", t->order_id, state);
    }
answer:
    free(t);
    ans_send(s, rs, 200, &a);
}

static void reverse(struct sim_call *c, const struct v2_msg *m, struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    struct v2_ans a;
    ans_init(s, &a);
    struct sim_trade *t = NULL;
    ans_set(&a, "recall", "N");
    if (!names_a_trade(s, m, &a))
        goto answer;
    if (pt__sim_commit_gate(c, rs))
        return;
    if (!(t = calloc(1, sizeof *t))) {
        ans_result_fail(&a, "SYSTEMERROR", "系统错误");
        ans_set(&a, "recall", "Y");
        goto answer;
    }
    const char *refusal = NULL, *des = NULL, *was = "";
    int refunds = 0;
    pt__sim_lock(s);
    int rc = find_trade(s, m, t);
    if (rc == PT_OK && pt__sim_refund_totals(s, t->id, NULL, NULL, &refunds) != PT_OK)
        refunds = 0;
    if (rc != PT_OK) {
        /* answered below */
    } else if (strcmp(t->method, "micropay") != 0) {
        refusal = "TRADE_ERROR";
        des = "订单支付场景错误，拒绝撤销 (not a payment-code order)";
    } else if (refunds > 0) {
        refusal = "TRADE_ERROR";
        des = "订单已发生退款，不能撤销";
    } else if (pt__sim_now_ms(s) - t->created_at > V2_REVERSE_WINDOW_MS) {
        refusal = "REVERSE_EXPIRE";
        des = "订单已超过7天可撤销期限，请使用申请退款API";
    } else if (strcmp(t->status, "canceled") != 0) {
        /* A paid trade's money goes back to the customer; an unpaid one can
         * no longer be paid.  Either way the trade is REVOKED. */
        was = strcmp(t->status, "captured") == 0 ? " (paid: money returned)" : " (unpaid: closed)";
        snprintf(t->status, sizeof t->status, "canceled");
        t->pay_at = 0;
        t->updated_at = pt__sim_now_ms(s);
        rc = pt__sim_trade_update(s, t);
    }
    pt__sim_unlock(s);
    if (rc == PT_ENOTFOUND) {
        ans_result_fail(&a, "ORDERNOTEXIST", "订单不存在");
    } else if (rc != PT_OK) {
        ans_result_fail(&a, "SYSTEMERROR", "系统错误，请再次调用撤销");
        ans_set(&a, "recall", "Y");
    } else if (refusal) {
        ans_result_fail(&a, refusal, des);
    } else {
        ans_set(&a, "result_code", "SUCCESS");
        pt__sim_note(rs, "%s reversed%s", t->order_id, was);
    }
answer:
    free(t);
    ans_send(s, rs, 200, &a);
}

/* ---- 下载对账单 (POST /pay/downloadbill) ---------------------------------------- */

/* A downloadbill error as WeChat Pay writes it: unsigned, HTTP 200. */
static void bill_fail(struct sim_resp *rs, const char *msg, const char *error_code)
{
    char xml[512];
    int n = snprintf(xml, sizeof xml,
                     "<xml><return_code><![CDATA[FAIL]]></return_code><return_msg><![CDATA[%s]]>"
                     "</return_msg><error_code><![CDATA[%s]]></error_code></xml>",
                     msg, error_code);
    pt__sim_resp_set(rs, 200, V2_CTYPE, xml, (size_t)n);
    pt__sim_note(rs, "downloadbill: %s", msg);
}

/* The bill of bill_date (yyyyMMdd) and bill_type as text, lines ending
 * "\r\n" (APIv2's), or its FAIL. */
static void downloadbill(struct pt_sim *s, const struct v2_msg *m, struct sim_resp *rs)
{
    const char *d = v2_val(m, "bill_date"), *type = v2_val(m, "bill_type");
    char iso[11];
    if (!d || !digits(d, 8, 8)) {
        bill_fail(rs, "invalid bill_date", "20001");
        return;
    }
    snprintf(iso, sizeof iso, "%.4s-%.2s-%.2s", d, d + 4, d + 6);
    if (v2_val(m, "tar_type")) {
        bill_fail(rs, "CompressGZip Error (the simulator serves the bill uncompressed)", "20003");
        return;
    }
    char *text = NULL;
    size_t len = 0;
    int64_t rows = 0;
    int rc = pt__sim_wechat_bill(s, iso, type ? type : "SUCCESS", &text, &len, &rows);
    if (rc == PT_EPARSE)
        bill_fail(rs,
                  type && strcmp(type, "ALL") && strcmp(type, "SUCCESS") && strcmp(type, "REFUND")
                      ? "invalid bill_type"
                      : "invalid bill_date",
                  "20001");
    else if (rc == PT_ENOTFOUND)
        bill_fail(rs, "No Bill Exist", "20002");
    else if (rc == PT_EAGAIN)
        bill_fail(rs, "Bill Creating", "20002");
    else if (rc != PT_OK)
        bill_fail(rs, "SYSTEMERROR", "20007");
    if (rc != PT_OK)
        return;
    size_t lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    char *crlf = malloc(len + lines);
    if (!crlf) {
        free(text);
        bill_fail(rs, "SYSTEMERROR", "20007");
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\n')
            crlf[k++] = '\r';
        crlf[k++] = text[i];
    }
    pt__sim_resp_set(rs, 200, "text/plain; charset=utf-8", crlf, k);
    pt__sim_note(rs, "downloadbill %s: %lld rows, %zu bytes", iso, (long long)rows, k);
    free(crlf);
    free(text);
}

void pt__sim_wechat_v2_handle(struct sim_call *c, const struct sim_req *rq, struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    struct v2_msg m;
    memset(&m, 0, sizeof m);
    int secapi = strncmp(rq->path, "/secapi/", 8) == 0;
    if (secapi && rq->client_cert != SIM_CERT_MERCHANT) {
        /* See the top of the file: the handshake could not refuse it. */
        return_fail(s, rs, 403, "CERT_REQUIRED",
                    rq->client_cert == SIM_CERT_NONE
                        ? "证书错误：/secapi/ 接口需要商户API证书 (no client certificate "
                          "was presented)"
                        : "证书错误：/secapi/ 接口需要商户API证书 (the client certificate is "
                          "not this merchant's API certificate)");
        return;
    }
    if (v2_request(s, rq, rs, &m) != 0) {
        /* answered */
    } else if (strcmp(rq->path, "/pay/micropay") == 0) {
        micropay(c, &m, rs);
    } else if (strcmp(rq->path, "/pay/orderquery") == 0) {
        orderquery(c, &m, rs);
    } else if (strcmp(rq->path, "/secapi/pay/reverse") == 0) {
        reverse(c, &m, rs);
    } else if (strcmp(rq->path, "/pay/downloadbill") == 0) {
        downloadbill(s, &m, rs);
    } else {
        return_fail(s, rs, 404, "NOT_FOUND",
                    "the simulator serves /pay/micropay, /pay/orderquery, /secapi/pay/reverse, "
                    "/pay/downloadbill");
    }
    v2_msg_free(&m);
}
