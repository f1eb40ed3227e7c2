/*
 * sim_alipay.c - the simulated Alipay OpenAPI gateway (gateway.do, RSA2).
 *
 * Parameters may come in the query string (as alipay-sdk sends the common
 * ones) and/or the form body (as payterm sends all of them); both are merged.
 * The request is verified like Alipay does it: app_id known, sign_type RSA2,
 * `sign` over every other parameter sorted by name (sign_type included, empty
 * values left out) with the merchant's app public key.  A bad signature gets
 * code 40002 sub_code isv.invalid-signature, and - a real Alipay habit that
 * helps integrators - the string the gateway verified in sub_msg.
 *
 * Every answer is {"<method>_response":{...},"sign":"..."}, signed over the
 * exact text of the response object with the simulated Alipay private key.
 * Amounts (total_amount, refund_amount) are the major unit of the trade's
 * currency with at most two decimals, read and written with Alipay's own
 * rule (sim_units.c); a third decimal is 40004 ACQ.INVALID_PARAMETER.
 *
 * Ledger rules (one trade per out_trade_no):
 *   trade.pay       ...51 -> 40004 ACQ.BUYER_BALANCE_NOT_ENOUGH (trade closed),
 *                   ...52 -> 10003 WAIT_BUYER_PAY (the customer never confirms),
 *                   else 10000 TRADE_SUCCESS at once.  A repeat of a paid
 *                   out_trade_no gets ACQ.TRADE_HAS_SUCCESS, of a closed one
 *                   ACQ.TRADE_HAS_CLOSE, with other parameters
 *                   ACQ.CONTEXT_INCONSISTENT - exactly what Alipay answers, so
 *                   a blind resend never moves money twice.
 *   trade.precreate 10000 + qr_code; the simulated customer pays after the pay
 *                   delay (..51 fails: the trade closes; ..52 never pays); a
 *                   repeat while unpaid returns the same qr_code.
 *   trade.query     trade_status WAIT_BUYER_PAY / TRADE_SUCCESS / TRADE_CLOSED,
 *                   ACQ.TRADE_NOT_EXIST for an unknown out_trade_no.
 *                   An expiry (timeout_express "5m"/"2h"/"1d", 1m to 15d,
 *                   counted from the precreate; or time_expire, yyyy-MM-dd
 *                   HH:mm:ss China time, which wins) is recorded: past it the
 *                   code is closed by Alipay (TRADE_CLOSED) and cannot be paid.
 *   trade.cancel    closes an unpaid trade (action "close") or reverses a paid
 *                   one (action "refund"; the capture stays counted).
 *   trade.close     closes an unpaid trade, never a paid one
 *                   (ACQ.TRADE_STATUS_ERROR, as for one closed already); a
 *                   precreated code nobody scanned (POST /_sim/scan) has no
 *                   trade at Alipay yet: ACQ.TRADE_NOT_EXIST, and the code is
 *                   dead all the same.
 *   trade.refund    refunds a paid trade, fully or in parts, keyed by
 *                   out_request_no (unique per trade; absent = out_trade_no,
 *                   which then asks for the whole amount).  The same
 *                   out_request_no again is the same refund: 10000 with
 *                   fund_change "N" (no money moved by this call; Alipay
 *                   answers a repeat so, and the client confirms by query),
 *                   with another amount ACQ.DISCORDANT_REPEAT_REQUEST; more
 *                   than is left ACQ.REFUND_AMT_NOT_EQUAL_TOTAL ("退款金额超
 *                   限"), an unpaid trade ACQ.TRADE_STATUS_ERROR.  refund_fee
 *                   is the trade's refunded total.  Refunds are synchronous.
 *                   A fully refunded trade is TRADE_CLOSED to trade.query.
 *   trade.fastpay.refund.query  the refund by out_request_no: 10000 with
 *                   refund_status REFUND_SUCCESS, or 10000 without
 *                   refund_status when there is no such refund.
 * Notifications (trade_status_sync) go to the request's notify_url only, as
 * Alipay does, signed over all fields but sign and sign_type.
 */
#include "sim_int.h"

#include "buf.h"
#include "crypto.h"
#include "err.h"
#include "gateways/alipay.h"
#include "gateways/form.h"
#include "money.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- answers ---------------------------------------------------------------- */

/* Answers {"<key>":<o>,"sign":"..."}; key is the method with '.' -> '_' plus
 * "_response", or "error_response" when method is NULL. */
static void respond(struct pt_sim *s, struct sim_resp *rs, const char *method, cJSON *o)
{
    char key[96], sig[PT_BASE64_LEN(1024)];
    char *raw = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!raw) {
        pt__sim_resp_set(rs, 500, "text/plain", "out of memory", 13);
        return;
    }
    if (method) {
        size_t i = 0;
        for (; method[i] && i < sizeof key - 10; i++)
            key[i] = method[i] == '.' ? '_' : method[i];
        snprintf(key + i, sizeof key - i, "_response");
    } else {
        snprintf(key, sizeof key, "error_response");
    }
    int rc = pt_pk_sign_base64(s->k.alipay_key, raw, strlen(raw), sig, sizeof sig);
    struct pt_buf b;
    pt_buf_init(&b, SIM_BODY_MAX);
    pt_buf_puts(&b, "{");
    pt_buf_json_string(&b, key);
    pt_buf_putc(&b, ':');
    pt_buf_puts(&b, raw);
    if (rc == PT_OK) {
        pt_buf_puts(&b, ",\"sign\":");
        pt_buf_json_string(&b, sig);
    }
    pt_buf_putc(&b, '}');
    free(raw);
    size_t len = 0;
    char *text = pt_buf_take(&b, &len);
    if (text)
        pt__sim_resp_set(rs, 200, "text/html;charset=utf-8", text, len);
    else
        pt__sim_resp_set(rs, 500, "text/plain", "out of memory", 13);
    free(text);
}

static cJSON *result(const char *code, const char *msg, const char *sub_code, const char *sub_msg)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "code", code);
    cJSON_AddStringToObject(o, "msg", msg);
    if (sub_code) {
        cJSON_AddStringToObject(o, "sub_code", sub_code);
        cJSON_AddStringToObject(o, "sub_msg", sub_msg);
    }
    return o;
}

static void fail(struct pt_sim *s, struct sim_resp *rs, const char *method, const char *code,
                 const char *sub_code, const char *sub_msg)
{
    static const struct {
        const char *code, *msg;
    } msgs[] = {{"40001", "Missing Required Arguments"},
                {"40002", "Invalid Arguments"},
                {"40004", "Business Failed"},
                {"20000", "Service Currently Unavailable"}};
    const char *msg = "Business Failed";
    for (size_t i = 0; i < sizeof msgs / sizeof msgs[0]; i++)
        if (strcmp(msgs[i].code, code) == 0)
            msg = msgs[i].msg;
    respond(s, rs, method, result(code, msg, sub_code, sub_msg));
    pt__sim_note(rs, "%s %s", code, sub_code);
}

/* ---- the trade as Alipay shows it ------------------------------------------------- */

/* lk held: a paid trade refunded in full is closed, as Alipay shows it, and
 * so is an unpaid one past its expiry ("逾期将关闭交易"). */
static const char *trade_status(struct pt_sim *s, const struct sim_trade *t)
{
    int64_t refunded = 0;
    if (strcmp(t->status, "captured") == 0 &&
        pt__sim_refund_totals(s, t->id, NULL, &refunded, NULL) == PT_OK && refunded >= t->amount)
        return "TRADE_CLOSED";
    if (strcmp(t->status, "captured") == 0)
        return "TRADE_SUCCESS";
    if (strcmp(t->status, "pending") == 0 && !pt__sim_expired(s, t))
        return "WAIT_BUYER_PAY";
    return "TRADE_CLOSED";
}

/* An order's expiry as the create gave it (see the header). */
struct expiry {
    char field[24], text[40];
    int64_t after_ms; /* timeout_express: from the create */
    int64_t at_ms;    /* time_expire: when; 0 = not given */
};

/* Reads biz's expiry into *e: 0 none, 1 given, -1 malformed. */
static int order_expiry(const cJSON *biz, struct expiry *e)
{
    const char *abs = pt__sim_json_str(biz, "time_expire");
    const char *rel = pt__sim_json_str(biz, "timeout_express");
    memset(e, 0, sizeof e[0]);
    if (abs) {
        if (pt__sim_local_time(abs, "+08:00", &e->at_ms) != PT_OK) /* China time */
            return -1;
        snprintf(e->field, sizeof e->field, "time_expire");
        snprintf(e->text, sizeof e->text, "%s", abs);
        return 1;
    }
    if (!rel)
        return 0;
    char unit = 0, extra = 0;
    long n = 0;
    if (sscanf(rel, "%ld%c%c", &n, &unit, &extra) != 2 || n < 1 || !strchr("mhd", unit) ||
        rel[0] == '0')
        return -1;
    e->after_ms = n * (unit == 'm' ? 60 : unit == 'h' ? 3600 : 86400) * 1000LL;
    if (e->after_ms > 15LL * 86400 * 1000)
        return -1; /* 取值范围：1m～15d */
    snprintf(e->field, sizeof e->field, "timeout_express");
    snprintf(e->text, sizeof e->text, "%s", rel);
    return 1;
}

/* Amounts as Alipay writes them: the major unit, two decimals at most. */
static void amount_str(const struct sim_trade *t, char out[PT_MONEY_DECIMAL_MAX])
{
    pt__sim_alipay_amount_out(t->amount, t->currency, out);
}

/* The notification for t's current status (lk held). */
static void notify(struct pt_sim *s, const struct sim_trade *t, const char *status,
                   int64_t delay_ms, int duplicate)
{
    cJSON *x = cJSON_Parse(t->extra);
    const char *url = pt__sim_json_str(x, "notify_url");
    if (!url || !*url) {
        cJSON_Delete(x); /* Alipay notifies only when the request named a notify_url. */
        return;
    }
    char amount[PT_MONEY_DECIMAL_MAX], now[20], created[20], paid[20], nid[40], fund[160];
    struct pt_form f;
    struct pt_buf b;
    amount_str(t, amount);
    pt__sim_time_cn(pt__sim_now_ms(s), now);
    pt__sim_time_cn(t->created_at, created);
    pt__sim_time_cn(t->paid_at ? t->paid_at : t->updated_at, paid);
    pt__sim_random_alnum(s, nid, 32);
    snprintf(fund, sizeof fund, "[{\"amount\":\"%s\",\"fundChannel\":\"ALIPAYACCOUNT\"}]", amount);
    pt_form_init(&f);
    pt_buf_init(&b, 64 * 1024);
    int rc = PT_OK;
#define ADD(k, v)                                                                                  \
    if (rc == PT_OK)                                                                               \
    rc = pt_form_add(&f, k, v)
    ADD("gmt_create", created);
    ADD("charset", "utf-8");
    if (strcmp(status, "TRADE_SUCCESS") == 0) {
        ADD("gmt_payment", paid);
        ADD("fund_bill_list", fund);
        ADD("receipt_amount", amount);
        ADD("buyer_pay_amount", amount);
        ADD("invoice_amount", amount);
    }
    if (strcmp(status, "TRADE_CLOSED") == 0)
        ADD("gmt_close", now);
    ADD("notify_time", now);
    ADD("subject", pt__sim_json_str(x, "subject") ? pt__sim_json_str(x, "subject") : "");
    ADD("buyer_id", "2088102177846875");
    ADD("version", "1.0");
    ADD("notify_id", nid);
    ADD("notify_type", "trade_status_sync");
    ADD("out_trade_no", t->order_id);
    ADD("total_amount", amount);
    ADD("trade_status", status);
    ADD("trade_no", t->trade_no);
    if (strcmp(t->currency, "CNY") != 0)
        ADD("trans_currency", t->currency);
    ADD("auth_app_id", s->k.alipay_app_id);
    ADD("app_id", s->k.alipay_app_id);
    ADD("seller_id", "2088102177649450");
    ADD("sign_type", "RSA2");
#undef ADD
    if (rc == PT_OK)
        rc = pt_alipay_sign_form(s->k.alipay_key, &f, PT_ALIPAY_NOTIFY);
    if (rc == PT_OK) {
        pt_form_encode(&f, &b);
        size_t len = 0;
        char *body = pt_buf_take(&b, &len);
        if (body)
            pt__sim_notify(s, SIM_GW_ALIPAY, t->order_id, status, url,
                           "application/x-www-form-urlencoded;charset=utf-8", body, len, delay_ms,
                           duplicate);
        free(body);
    }
    pt_buf_free(&b, 0);
    pt_form_free(&f);
    cJSON_Delete(x);
}

/* ---- requests ---------------------------------------------------------------------- */

/* Query string and form body, merged (a name given twice is refused). */
static int params(const struct sim_req *rq, struct pt_form *f)
{
    struct pt_form q;
    pt_form_init(&q);
    int rc = pt_form_parse(rq->query, strlen(rq->query), &q);
    if (rc == PT_OK)
        rc = pt_form_parse(rq->body, rq->body_len, f);
    for (size_t i = 0; rc == PT_OK && i < q.n; i++)
        rc = pt_form_get(f, q.pairs[i].key) ? PT_EPARSE
                                            : pt_form_add(f, q.pairs[i].key, q.pairs[i].value);
    pt_form_free(&q);
    return rc;
}

/* The customer's payment code: Alipay's are 16-24 digits starting 25-30. */
static int auth_code_valid(const char *c)
{
    size_t n = strlen(c);
    if (n < 16 || n > 24)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)c[i]))
            return 0;
    int prefix = (c[0] - '0') * 10 + (c[1] - '0');
    return prefix >= 25 && prefix <= 30;
}

static void new_trade_no(struct pt_sim *s, char *out, size_t outlen)
{
    char date[20], digits[20];
    pt__sim_time_cn(pt__sim_now_ms(s), date);
    pt__sim_random_digits(s, digits, 15);
    /* 28 digits like Alipay's: date, a channel code, a serial. */
    snprintf(out, outlen, "%.4s%.2s%.2s22001%s", date, date + 5, date + 8, digits);
}

static cJSON *trade_fields(const struct sim_trade *t, const char *code, const char *msg)
{
    char amount[PT_MONEY_DECIMAL_MAX];
    amount_str(t, amount);
    cJSON *o = result(code, msg, NULL, NULL);
    cJSON_AddStringToObject(o, "buyer_logon_id", "159****5620");
    cJSON_AddStringToObject(o, "out_trade_no", t->order_id);
    cJSON_AddStringToObject(o, "total_amount", amount);
    cJSON_AddStringToObject(o, "trade_no", t->trade_no);
    /* Cross-border acquiring answers in the currency the order was priced
     * in; domestic answers name none (CNY). */
    if (strcmp(t->currency, "CNY") != 0)
        cJSON_AddStringToObject(o, "trans_currency", t->currency);
    return o;
}

static void paid_fields(cJSON *o, const struct sim_trade *t)
{
    char amount[PT_MONEY_DECIMAL_MAX], when[20];
    amount_str(t, amount);
    pt__sim_time_cn(t->paid_at, when);
    cJSON_AddStringToObject(o, "buyer_pay_amount", amount);
    cJSON_AddStringToObject(o, "buyer_user_id", "2088102177846875");
    cJSON *fb = cJSON_AddArrayToObject(o, "fund_bill_list");
    cJSON *f1 = cJSON_CreateObject();
    cJSON_AddStringToObject(f1, "amount", amount);
    cJSON_AddStringToObject(f1, "fund_channel", "ALIPAYACCOUNT");
    cJSON_AddItemToArray(fb, f1);
    cJSON_AddStringToObject(o, "gmt_payment", when);
    cJSON_AddStringToObject(o, "invoice_amount", amount);
    cJSON_AddStringToObject(o, "receipt_amount", amount);
}

/* pay and precreate share the "an out_trade_no exists" answers. */
static int existing(struct pt_sim *s, struct sim_resp *rs, const char *method,
                    const struct sim_trade *t, const char *hash)
{
    if (strcmp(t->params_hash, hash) != 0) {
        fail(s, rs, method, "40004", "ACQ.CONTEXT_INCONSISTENT", "交易信息被篡改");
        return 1;
    }
    if (strcmp(t->status, "captured") == 0) {
        fail(s, rs, method, "40004", "ACQ.TRADE_HAS_SUCCESS", "交易已被支付");
        return 1;
    }
    if (strcmp(t->status, "pending") != 0 || pt__sim_expired(s, t)) {
        fail(s, rs, method, "40004", "ACQ.TRADE_HAS_CLOSE", "交易已经关闭");
        return 1;
    }
    return 0;
}

static void pay(struct sim_call *c, const char *method, const struct pt_form *f, const cJSON *biz,
                struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    int qr = strcmp(method, "alipay.trade.precreate") == 0;
    const char *otn = pt__sim_json_str(biz, "out_trade_no");
    const char *amount = pt__sim_json_str(biz, "total_amount");
    const char *subject = pt__sim_json_str(biz, "subject");
    const char *auth = pt__sim_json_str(biz, "auth_code");
    const char *scene = pt__sim_json_str(biz, "scene");
    const char *cur = pt__sim_json_str(biz, "trans_currency");
    char msg[160], currency[4] = "CNY";
    int64_t minor = 0;
    if (!otn || !*otn || strlen(otn) > 64 || !amount || !subject || !*subject ||
        (!qr && (!auth || !scene))) {
        snprintf(msg, sizeof msg, "缺少必选参数 (out_trade_no, total_amount, subject%s)",
                 qr ? "" : ", scene, auth_code");
        fail(s, rs, method, "40004", "ACQ.INVALID_PARAMETER", msg);
        return;
    }
    if (cur && (strlen(cur) != 3 || !pt_money_currency_valid(cur))) {
        fail(s, rs, method, "40004", "ACQ.INVALID_PARAMETER", "trans_currency 不合法");
        return;
    }
    if (cur)
        memcpy(currency, cur, 4);
    if (pt__sim_alipay_amount_in(amount, currency, &minor) != PT_OK || minor <= 0) {
        fail(s, rs, method, "40004", "ACQ.INVALID_PARAMETER", "total_amount 格式错误");
        return;
    }
    if (!qr && strcmp(scene, "bar_code") != 0 && strcmp(scene, "wave_code") != 0) {
        fail(s, rs, method, "40004", "ACQ.INVALID_PARAMETER", "scene 不合法");
        return;
    }
    if (!qr && !auth_code_valid(auth)) {
        fail(s, rs, method, "40004", "ACQ.PAYMENT_AUTH_CODE_INVALID",
             "支付失败，获取顾客账户信息失败，请顾客刷新付款码后重新收款");
        return;
    }
    struct expiry ex;
    if (order_expiry(biz, &ex) < 0) {
        fail(s, rs, method, "40004", "ACQ.INVALID_PARAMETER",
             "timeout_express (1m～15d) 或 time_expire (yyyy-MM-dd HH:mm:ss) 格式错误");
        return;
    }
    /* Same business parameters = the same trade. */
    char hash[65], basis[600];
    snprintf(basis, sizeof basis, "%s|%lld|%s|%s|%s|%s", method, (long long)minor, currency,
             auth ? auth : "", subject, ex.text);
    pt__sim_sha256_hex(basis, strlen(basis), hash);
    if (pt__sim_commit_gate(c, rs))
        return;
    struct sim_trade *t = calloc(1, sizeof *t);
    if (!t) {
        fail(s, rs, method, "20000", "ACQ.SYSTEM_ERROR", "系统错误");
        return;
    }
    pt__sim_lock(s);
    int rc = pt__sim_trade_get(s, SIM_GW_ALIPAY, otn, t);
    if (rc == PT_OK) {
        pt__sim_unlock(s);
        if (!existing(s, rs, method, t, hash)) {
            /* Still waiting for the customer: the same trade, the same answer. */
            cJSON *x = cJSON_Parse(t->extra);
            cJSON *o = qr ? result("10000", "Success", NULL, NULL)
                          : trade_fields(t, "10003", " order success pay inprocess");
            if (qr) {
                cJSON_AddStringToObject(o, "out_trade_no", t->order_id);
                cJSON_AddStringToObject(o, "qr_code", pt__sim_json_str(x, "qr_code"));
            }
            cJSON_Delete(x);
            respond(s, rs, method, o);
            pt__sim_note(rs, "%s repeat, still pending", otn);
        }
        free(t);
        return;
    }
    memset(t, 0, sizeof *t);
    t->gw = SIM_GW_ALIPAY;
    snprintf(t->order_id, sizeof t->order_id, "%s", otn);
    new_trade_no(s, t->trade_no, sizeof t->trade_no);
    snprintf(t->method, sizeof t->method, "%s", qr ? "qr" : "barcode");
    t->amount = minor;
    memcpy(t->currency, currency, 4);
    memcpy(t->params_hash, hash, sizeof hash);
    t->created_at = t->updated_at = pt__sim_now_ms(s);
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "subject", subject);
    const char *nurl = pt_form_get(f, "notify_url");
    if (nurl && *nurl)
        cJSON_AddStringToObject(x, "notify_url", nurl);
    char qrc[64] = "https://qr.alipay.com/bax0";
    if (qr) {
        pt__sim_random_alnum(s, qrc + strlen(qrc), 20);
        cJSON_AddStringToObject(x, "qr_code", qrc);
    }
    char *xt = cJSON_PrintUnformatted(x);
    cJSON_Delete(x);
    snprintf(t->extra, sizeof t->extra, "%s", xt ? xt : "{}");
    free(xt);
    if (ex.field[0])
        pt__sim_set_expiry(t, ex.field, ex.text, ex.at_ms ? ex.at_ms : t->created_at + ex.after_ms);
    enum sim_rule rule = pt__sim_amount_rule(minor);
    if (qr) {
        snprintf(t->status, sizeof t->status, "pending");
        pt__sim_schedule_pay(s, t);
    } else if (rule == SIM_RULE_PAY) {
        snprintf(t->status, sizeof t->status, "captured");
        t->captures = 1;
        t->paid_at = t->created_at;
    } else {
        snprintf(t->status, sizeof t->status, rule == SIM_RULE_DECLINE ? "declined" : "pending");
    }
    rc = pt__sim_trade_insert(s, t);
    if (rc == PT_OK && !qr && rule == SIM_RULE_PAY)
        notify(s, t, "TRADE_SUCCESS", 0, 1);
    pt__sim_unlock(s);
    if (rc != PT_OK) {
        fail(s, rs, method, "20000", "ACQ.SYSTEM_ERROR", "系统错误，请使用相同的参数再次调用");
    } else if (qr) {
        cJSON *o = result("10000", "Success", NULL, NULL);
        cJSON_AddStringToObject(o, "out_trade_no", t->order_id);
        cJSON_AddStringToObject(o, "qr_code", qrc);
        respond(s, rs, method, o);
        pt__sim_note(rs, "%s qr created", otn);
    } else if (rule == SIM_RULE_PAY) {
        cJSON *o = trade_fields(t, "10000", "Success");
        paid_fields(o, t);
        respond(s, rs, method, o);
        pt__sim_note(rs, "%s paid", otn);
    } else if (rule == SIM_RULE_DECLINE) {
        fail(s, rs, method, "40004", "ACQ.BUYER_BALANCE_NOT_ENOUGH", "买家余额不足");
    } else {
        respond(s, rs, method, trade_fields(t, "10003", " order success pay inprocess"));
        pt__sim_note(rs, "%s WAIT_BUYER_PAY", otn);
    }
    free(t);
}

/* Finds the trade named by out_trade_no or trade_no (lk held). */
static int find(struct pt_sim *s, const cJSON *biz, struct sim_trade *t)
{
    const char *otn = pt__sim_json_str(biz, "out_trade_no");
    const char *tno = pt__sim_json_str(biz, "trade_no");
    if (otn && *otn)
        return pt__sim_trade_get(s, SIM_GW_ALIPAY, otn, t);
    if (tno && *tno)
        return pt__sim_trade_by_no(s, SIM_GW_ALIPAY, tno, t);
    return PT_EINVAL;
}

static void query(struct sim_call *c, const char *method, const cJSON *biz, struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    struct sim_trade *t = calloc(1, sizeof *t);
    if (!t) {
        fail(s, rs, method, "20000", "ACQ.SYSTEM_ERROR", "系统错误");
        return;
    }
    pt__sim_lock(s);
    int rc = find(s, biz, t);
    const char *status = rc == PT_OK ? trade_status(s, t) : NULL;
    pt__sim_unlock(s);
    if (rc == PT_EINVAL) {
        fail(s, rs, method, "40004", "ACQ.INVALID_PARAMETER",
             "out_trade_no 与 trade_no 不能同时为空");
    } else if (rc != PT_OK) {
        fail(s, rs, method, "40004", "ACQ.TRADE_NOT_EXIST", "交易不存在");
    } else {
        cJSON *o = trade_fields(t, "10000", "Success");
        cJSON_AddStringToObject(o, "trade_status", status);
        if (t->paid_at) {
            char when[20];
            pt__sim_time_cn(t->paid_at, when);
            paid_fields(o, t);
            cJSON_AddStringToObject(o, "send_pay_date", when);
        }
        respond(s, rs, method, o);
        pt__sim_note(rs, "%s %s", t->order_id, status);
    }
    free(t);
}

static void cancel(struct sim_call *c, const char *method, const cJSON *biz, struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    if (pt__sim_commit_gate(c, rs))
        return;
    struct sim_trade *t = calloc(1, sizeof *t);
    if (!t) {
        fail(s, rs, method, "20000", "ACQ.SYSTEM_ERROR", "系统错误");
        return;
    }
    pt__sim_lock(s);
    int rc = find(s, biz, t);
    const char *action = "close";
    if (rc == PT_OK) {
        if (strcmp(t->status, "captured") == 0)
            action = "refund"; /* a paid trade is reversed: the money goes back */
        if (strcmp(t->status, "canceled") != 0) {
            int notify_close = strcmp(t->status, "declined") != 0;
            snprintf(t->status, sizeof t->status, "canceled");
            t->pay_at = 0;
            t->updated_at = pt__sim_now_ms(s);
            rc = pt__sim_trade_update(s, t);
            if (rc == PT_OK && notify_close)
                notify(s, t, "TRADE_CLOSED", 0, 1);
        }
    }
    pt__sim_unlock(s);
    if (rc == PT_EINVAL) {
        fail(s, rs, method, "40004", "ACQ.INVALID_PARAMETER",
             "out_trade_no 与 trade_no 不能同时为空");
    } else if (rc == PT_ENOTFOUND) {
        fail(s, rs, method, "40004", "ACQ.TRADE_NOT_EXIST", "交易不存在");
    } else if (rc != PT_OK) {
        fail(s, rs, method, "20000", "ACQ.SYSTEM_ERROR", "系统错误");
    } else {
        cJSON *o = result("10000", "Success", NULL, NULL);
        cJSON_AddStringToObject(o, "action", action);
        cJSON_AddStringToObject(o, "out_trade_no", t->order_id);
        cJSON_AddStringToObject(o, "retry_flag", "N");
        cJSON_AddStringToObject(o, "trade_no", t->trade_no);
        respond(s, rs, method, o);
        pt__sim_note(rs, "%s canceled (%s)", t->order_id, action);
    }
    free(t);
}

/* What alipay.trade.close answers for t (lk held; t closed when it may be). */
static const char *close_trade(struct pt_sim *s, struct sim_trade *t, int *closed)
{
    int unscanned = strcmp(t->method, "qr") == 0 && !pt__sim_extra_int(t, "scanned");
    pt__sim_extra_set_int(t, "closes", pt__sim_extra_int(t, "closes") + 1);
    *closed = 0;
    if (strcmp(t->status, "pending") == 0) {
        /* Dead from now on, expired or not: nobody can pay it. */
        *closed = !pt__sim_expired(s, t) && !unscanned;
        snprintf(t->status, sizeof t->status, "canceled");
        t->pay_at = 0;
        if (unscanned)
            return "ACQ.TRADE_NOT_EXIST";
        return *closed ? NULL : "ACQ.TRADE_STATUS_ERROR"; /* it closed itself at expiry */
    }
    return "ACQ.TRADE_STATUS_ERROR"; /* paid, or closed already */
}

static void close_order(struct sim_call *c, const char *method, const cJSON *biz,
                        struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    if (pt__sim_commit_gate(c, rs))
        return;
    struct sim_trade *t = calloc(1, sizeof *t);
    if (!t) {
        fail(s, rs, method, "20000", "ACQ.SYSTEM_ERROR", "系统错误");
        return;
    }
    const char *refused = NULL;
    int closed = 0;
    pt__sim_lock(s);
    int rc = find(s, biz, t);
    if (rc == PT_OK) {
        refused = close_trade(s, t, &closed);
        t->updated_at = pt__sim_now_ms(s);
        rc = pt__sim_trade_update(s, t);
        if (rc == PT_OK && closed)
            notify(s, t, "TRADE_CLOSED", 0, 1);
    }
    pt__sim_unlock(s);
    if (rc == PT_EINVAL)
        fail(s, rs, method, "40004", "ACQ.INVALID_PARAMETER",
             "out_trade_no 与 trade_no 不能同时为空");
    else if (rc == PT_ENOTFOUND || (refused && strcmp(refused, "ACQ.TRADE_NOT_EXIST") == 0))
        fail(s, rs, method, "40004", "ACQ.TRADE_NOT_EXIST", "交易不存在");
    else if (rc != PT_OK)
        fail(s, rs, method, "20000", "ACQ.SYSTEM_ERROR", "系统错误");
    else if (refused)
        fail(s, rs, method, "40004", refused, "交易状态不合法");
    else {
        cJSON *o = result("10000", "Success", NULL, NULL);
        cJSON_AddStringToObject(o, "out_trade_no", t->order_id);
        cJSON_AddStringToObject(o, "trade_no", t->trade_no);
        respond(s, rs, method, o);
        pt__sim_note(rs, "%s closed", t->order_id);
    }
    free(t);
}

/* ---- refunds ------------------------------------------------------------------ */

/* The refund key of biz: out_request_no, or out_trade_no when absent (Alipay's
 * rule for a one-off full refund).  NULL when neither is usable. */
static const char *request_no(const cJSON *biz)
{
    const char *no = pt__sim_json_str(biz, "out_request_no");
    if (!cJSON_GetObjectItemCaseSensitive(biz, "out_request_no"))
        no = pt__sim_json_str(biz, "out_trade_no");
    return no && *no && strlen(no) <= 64 ? no : NULL;
}

static void refund(struct sim_call *c, const char *method, const cJSON *biz, struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    const char *amount = pt__sim_json_str(biz, "refund_amount");
    const char *key = request_no(biz);
    const cJSON *reason = cJSON_GetObjectItemCaseSensitive(biz, "refund_reason");
    int whole = !cJSON_GetObjectItemCaseSensitive(biz, "out_request_no");
    if (!amount || !key) {
        fail(s, rs, method, "40004", "ACQ.INVALID_PARAMETER",
             "参数无效 (refund_amount 须为金额字符串, out_request_no 至多 64 位)");
        return;
    }
    if (reason && (!cJSON_IsString(reason) || strlen(reason->valuestring) > 256)) {
        fail(s, rs, method, "40004", "ACQ.INVALID_PARAMETER", "refund_reason 不合法");
        return;
    }
    if (pt__sim_commit_gate(c, rs))
        return;
    struct sim_trade *t = calloc(1, sizeof *t);
    struct sim_refund *r = calloc(1, sizeof *r);
    if (!t || !r) {
        fail(s, rs, method, "20000", "ACQ.SYSTEM_ERROR", "系统错误");
        goto out;
    }
    int64_t minor = 0, left = 0, refunded = 0;
    enum sim_refund_rc rrc = SIM_REFUND_ERROR;
    pt__sim_lock(s);
    int rc = find(s, biz, t);
    /* Amounts are in the trade's currency (trans_currency for cross-border). */
    int bad_amount = rc == PT_OK &&
                     (pt__sim_alipay_amount_in(amount, t->currency, &minor) != PT_OK || minor <= 0);
    if (rc == PT_OK && !bad_amount && whole && minor != t->amount) {
        rrc = SIM_REFUND_EXCEEDS; /* no out_request_no: the whole trade or nothing */
    } else if (rc == PT_OK && !bad_amount) {
        r->gw = SIM_GW_ALIPAY;
        snprintf(r->scope, sizeof r->scope, "%s", t->order_id);
        snprintf(r->refund_key, sizeof r->refund_key, "%s", key);
        /* Alipay has no refund number of its own: the trade's stands for it. */
        snprintf(r->refund_no, sizeof r->refund_no, "%s", t->trade_no);
        r->amount = minor;
        snprintf(r->status, sizeof r->status, "succeeded");
        char basis[64];
        snprintf(basis, sizeof basis, "%lld", (long long)minor);
        pt__sim_sha256_hex(basis, strlen(basis), r->params_hash);
        cJSON *x = cJSON_CreateObject();
        if (cJSON_IsString(reason))
            cJSON_AddStringToObject(x, "refund_reason", reason->valuestring);
        char *xt = cJSON_PrintUnformatted(x);
        cJSON_Delete(x);
        snprintf(r->extra, sizeof r->extra, "%s", xt ? xt : "{}");
        free(xt);
        rrc = pt__sim_refund_take(s, t, r, &left);
        if (pt__sim_refund_totals(s, t->id, NULL, &refunded, NULL) != PT_OK)
            rrc = SIM_REFUND_ERROR;
    }
    pt__sim_unlock(s);
    if (rc == PT_EINVAL) {
        fail(s, rs, method, "40004", "ACQ.INVALID_PARAMETER",
             "out_trade_no 与 trade_no 不能同时为空");
    } else if (rc != PT_OK) {
        fail(s, rs, method, "40004", "ACQ.TRADE_NOT_EXIST", "交易不存在");
    } else if (bad_amount) {
        fail(s, rs, method, "40004", "ACQ.INVALID_PARAMETER", "refund_amount 格式错误");
    } else if (rrc == SIM_REFUND_NOT_PAID) {
        fail(s, rs, method, "40004", "ACQ.TRADE_STATUS_ERROR", "交易状态非法");
    } else if (rrc == SIM_REFUND_EXCEEDS) {
        fail(s, rs, method, "40004", "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL",
             whole ? "撤销或退款金额与订单金额不一致" : "退款金额超限");
    } else if (rrc == SIM_REFUND_CONFLICT) {
        fail(s, rs, method, "40004", "ACQ.DISCORDANT_REPEAT_REQUEST", "不一致的请求");
    } else if (rrc == SIM_REFUND_ERROR) {
        fail(s, rs, method, "20000", "ACQ.SYSTEM_ERROR", "系统错误，请使用相同的参数再次调用");
    } else {
        char fee[PT_MONEY_DECIMAL_MAX], when[20];
        pt__sim_alipay_amount_out(refunded, t->currency, fee);
        pt__sim_time_cn(r->succeeded_at, when);
        cJSON *o = result("10000", "Success", NULL, NULL);
        cJSON_AddStringToObject(o, "buyer_logon_id", "159****5620");
        cJSON_AddStringToObject(o, "buyer_user_id", "2088102177846875");
        /* "Y" only for the call that moved the money. */
        cJSON_AddStringToObject(o, "fund_change", rrc == SIM_REFUND_NEW ? "Y" : "N");
        cJSON_AddStringToObject(o, "gmt_refund_pay", when);
        cJSON_AddStringToObject(o, "out_trade_no", t->order_id);
        cJSON_AddStringToObject(o, "refund_fee", fee);
        cJSON_AddStringToObject(o, "trade_no", t->trade_no);
        respond(s, rs, method, o);
        pt__sim_note(rs, "%s refund %s %s%s", t->order_id, key, amount,
                     rrc == SIM_REFUND_NEW ? "" : " (repeat)");
    }
out:
    free(r);
    free(t);
}

static void refund_query(struct sim_call *c, const char *method, const cJSON *biz,
                         struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    const char *key = request_no(biz);
    if (!key) {
        fail(s, rs, method, "40004", "ACQ.INVALID_PARAMETER", "out_request_no 不合法");
        return;
    }
    struct sim_trade *t = calloc(1, sizeof *t);
    struct sim_refund *r = calloc(1, sizeof *r);
    if (!t || !r) {
        fail(s, rs, method, "20000", "ACQ.SYSTEM_ERROR", "系统错误");
        goto out;
    }
    pt__sim_lock(s);
    int rc = find(s, biz, t), rrc = PT_ENOTFOUND;
    if (rc == PT_OK)
        rrc = pt__sim_refund_get(s, SIM_GW_ALIPAY, t->order_id, key, r);
    pt__sim_unlock(s);
    if (rc == PT_EINVAL) {
        fail(s, rs, method, "40004", "ACQ.INVALID_PARAMETER",
             "out_trade_no 与 trade_no 不能同时为空");
    } else if (rc != PT_OK) {
        fail(s, rs, method, "40004", "ACQ.TRADE_NOT_EXIST", "交易不存在");
    } else if (rrc != PT_OK && rrc != PT_ENOTFOUND) {
        fail(s, rs, method, "20000", "ACQ.SYSTEM_ERROR", "系统错误");
    } else {
        /* No such refund: success without refund_status - Alipay's way of
         * saying "not refunded". */
        cJSON *o = result("10000", "Success", NULL, NULL);
        if (rrc == PT_OK) {
            char amount[PT_MONEY_DECIMAL_MAX], total[PT_MONEY_DECIMAL_MAX];
            pt__sim_alipay_amount_out(r->amount, t->currency, amount);
            amount_str(t, total);
            cJSON_AddStringToObject(o, "out_request_no", r->refund_key);
            cJSON_AddStringToObject(o, "out_trade_no", t->order_id);
            cJSON_AddStringToObject(o, "refund_amount", amount);
            cJSON_AddStringToObject(o, "refund_status", "REFUND_SUCCESS");
            cJSON_AddStringToObject(o, "total_amount", total);
            cJSON_AddStringToObject(o, "trade_no", t->trade_no);
        }
        respond(s, rs, method, o);
        pt__sim_note(rs, "%s refund %s %s", t->order_id, key,
                     rrc == PT_OK ? "REFUND_SUCCESS" : "none");
    }
out:
    free(r);
    free(t);
}

static void handle(struct sim_call *c, const struct sim_req *rq, struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    struct pt_form f;
    cJSON *biz = NULL;
    pt_form_init(&f);
    if (pt__sim_alipay_bill_path(rq->path)) {
        pt__sim_alipay_bill_file(s, rq, rs); /* the bill's zip: not signed */
        goto out;
    }
    if (strcmp(rq->method, "POST") != 0 && strcmp(rq->method, "GET") != 0) {
        pt__sim_resp_set(rs, 405, "text/plain", "method not allowed", 18);
        goto out;
    }
    if (params(rq, &f) != PT_OK) {
        fail(s, rs, NULL, "40002", "isv.invalid-parameter", "参数格式错误 (form encoding)");
        goto out;
    }
    const char *method = pt_form_get(&f, "method");
    static const char *const methods[] = {"alipay.trade.pay",
                                          "alipay.trade.precreate",
                                          "alipay.trade.query",
                                          "alipay.trade.cancel",
                                          "alipay.trade.close",
                                          "alipay.trade.refund",
                                          "alipay.trade.fastpay.refund.query",
                                          "alipay.data.dataservice.bill.downloadurl.query",
                                          NULL};
    int known = 0;
    for (const char *const *m = methods; method && *m; m++)
        known |= strcmp(method, *m) == 0;
    if (!method || !known) {
        fail(s, rs, NULL, method ? "40002" : "40001",
             method ? "isv.invalid-method" : "isv.missing-method",
             method ? "不存在的方法名" : "缺少方法名参数");
        goto out;
    }
    const char *app_id = pt_form_get(&f, "app_id");
    const char *sign_type = pt_form_get(&f, "sign_type");
    const char *ts = pt_form_get(&f, "timestamp");
    if (!app_id || strcmp(app_id, s->k.alipay_app_id) != 0) {
        fail(s, rs, method, "40002", "isv.invalid-app-id", "无效的AppID参数");
        goto out;
    }
    if (!pt_form_get(&f, "sign")) {
        fail(s, rs, method, "40001", "isv.missing-signature", "缺少签名参数");
        goto out;
    }
    if (!sign_type || strcmp(sign_type, "RSA2") != 0) {
        fail(s, rs, method, "40002", "isv.invalid-signature-type", "无效的签名类型参数");
        goto out;
    }
    if (!ts || strlen(ts) != 19 || ts[4] != '-' || ts[10] != ' ') {
        fail(s, rs, method, "40002", "isv.invalid-timestamp", "非法的时间戳参数");
        goto out;
    }
    if (pt_alipay_verify_form(s->k.alipay_app_pub, &f, PT_ALIPAY_REQUEST) != PT_OK) {
        char msg[700];
        char *sts = pt_alipay_string_to_sign(&f, PT_ALIPAY_REQUEST, NULL);
        /* Alipay shows the string it verified; it names no secret. */
        snprintf(msg, sizeof msg,
                 "验签出错，建议检查签名字符串或签名私钥与应用公钥是否匹配，"
                 "网关生成的验签字符串为：%.400s",
                 sts ? sts : "");
        free(sts);
        fail(s, rs, method, "40002", "isv.invalid-signature", msg);
        goto out;
    }
    const char *bc = pt_form_get(&f, "biz_content");
    biz = bc ? cJSON_Parse(bc) : NULL;
    if (!cJSON_IsObject(biz)) {
        fail(s, rs, method, "40004", "ACQ.INVALID_PARAMETER", "biz_content 不是合法的 JSON 对象");
        goto out;
    }
    if (strcmp(method, "alipay.trade.query") == 0)
        query(c, method, biz, rs);
    else if (strcmp(method, "alipay.trade.cancel") == 0)
        cancel(c, method, biz, rs);
    else if (strcmp(method, "alipay.trade.close") == 0)
        close_order(c, method, biz, rs);
    else if (strcmp(method, "alipay.trade.refund") == 0)
        refund(c, method, biz, rs);
    else if (strcmp(method, "alipay.trade.fastpay.refund.query") == 0)
        refund_query(c, method, biz, rs);
    else if (strcmp(method, "alipay.data.dataservice.bill.downloadurl.query") == 0)
        pt__sim_alipay_bill_url(c, method, biz, rs);
    else
        pay(c, method, &f, biz, rs);
out:
    cJSON_Delete(biz);
    pt_form_free(&f);
}

void pt__sim_alipay_respond(struct pt_sim *s, struct sim_resp *rs, const char *method, cJSON *o)
{
    respond(s, rs, method, o);
}

void pt__sim_alipay_fail(struct pt_sim *s, struct sim_resp *rs, const char *method,
                         const char *code, const char *sub_code, const char *sub_msg)
{
    fail(s, rs, method, code, sub_code, sub_msg);
}

static void autopay(struct pt_sim *s, struct sim_trade *t)
{
    enum sim_rule rule;
    if (pt__sim_customer_pays(s, t, &rule) != PT_OK)
        return;
    if (rule == SIM_RULE_PAY) {
        /* The customer scanned (WAIT_BUYER_PAY), then paid: the two
         * notifications are sent in the wrong order on purpose, and the
         * success one twice. */
        notify(s, t, "TRADE_SUCCESS", 0, 1);
        notify(s, t, "WAIT_BUYER_PAY", 700, 0);
    } else {
        notify(s, t, "TRADE_CLOSED", 0, 1);
    }
}

static void error_500(struct pt_sim *s, struct sim_resp *rs)
{
    (void)s;
    static const char body[] = "<html><body><h1>500 Internal Server Error</h1></body></html>";
    pt__sim_resp_set(rs, 500, "text/html", body, sizeof body - 1);
}

static int note_ok(int status, const char *body, size_t len)
{
    /* Alipay re-sends until it reads the seven characters `success`. */
    while (len > 0 && isspace((unsigned char)body[len - 1]))
        len--;
    while (len > 0 && isspace((unsigned char)*body)) {
        body++;
        len--;
    }
    (void)status;
    return len == 7 && memcmp(body, "success", 7) == 0;
}

const struct sim_gateway pt__sim_alipay = {
    .name = "alipay",
    .handle = handle,
    .autopay = autopay,
    .note_headers = NULL,
    .note_ok = note_ok,
    .error_500 = error_500,
};
