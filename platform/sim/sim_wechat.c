/*
 * sim_wechat.c - the simulated WeChat Pay APIv3 (Native payments).
 *
 *   POST /v3/pay/transactions/native                         create, returns code_url
 *   GET  /v3/pay/transactions/out-trade-no/{no}?mchid=...    query
 *   POST /v3/pay/transactions/out-trade-no/{no}/close        close (204)
 *   POST /v3/refund/domestic/refunds                         refund
 *   GET  /v3/refund/domestic/refunds/{out_refund_no}         refund query
 *
 * Every request must carry `Authorization: WECHATPAY2-SHA256-RSA2048 ...`
 * signed with the merchant key over METHOD\nURL\ntimestamp\nnonce\nbody\n,
 * naming the merchant certificate serial and a timestamp within 5 minutes;
 * anything else is 401 SIGN_ERROR.  Every answer (errors included) is signed
 * with the platform key over timestamp\nnonce\nbody\n in the Wechatpay-*
 * headers.
 *
 * One trade per out_trade_no: a repeat with the same parameters while unpaid
 * returns the same code_url, with other parameters 403 OUT_TRADE_NO_USED, on
 * a paid order 400 ORDERPAID.  time_expire (RFC 3339; "不能早于下单时间后1分
 * 钟" - an earlier one is moved to a minute after the order) is one of those
 * parameters ("不允许后续修改"): past it nobody can pay the order, which
 * still reads NOTPAY ("并非订单关闭的时间") until it is closed.  With
 * --wechat-close-after-ms 300000 a close in the order's first 5 minutes is
 * refused, as WeChat documents ("订单生成后不能马上调用关单接口，最短调用时间
 * 间隔为5分钟"): 400 INVALID_REQUEST (the code WeChat's close page gives a
 * request its rules refuse).  The simulated customer scans and pays after
 * the pay delay (...51: PAYERROR, ...52: never), and a paid order is notified
 * (TRANSACTION.SUCCESS, resource encrypted with AES-256-GCM under the APIv3
 * key) to the notify_url of the order, at least twice.
 *
 * Refunds are keyed by out_refund_no (unique per merchant: "同一退款单号多次请
 * 求只退一笔"): a repeat is answered with the refund as it now is, the same
 * out_refund_no with another amount or order is 400 INVALID_REQUEST, and so
 * is a refund above what is left (WeChat's code for a request that breaks a
 * business rule; NOT_ENOUGH is the merchant's balance, which never runs out
 * here) or an amount.total other than the order's.  An unknown or unpaid
 * order is 404 RESOURCE_NOT_EXISTS.  A refund is answered PROCESSING; after
 * the pay delay it becomes SUCCESS and REFUND.SUCCESS is notified (to the
 * refund's notify_url, else the merchant's default), at least twice.  A paid
 * order with refunds shows trade_state REFUND ("转入退款").
 *
 * The APIv2 payment-code routes (/pay/micropay, /pay/orderquery,
 * /secapi/pay/reverse) are the same merchant at the same gateway, on the
 * same ledger (out_trade_no is unique per merchant across both APIs); their
 * wire protocol lives in sim_wechat_v2.c and is dispatched from here.
 *
 * Platform keys rotate (SPEC 9): GET /v3/certificates lists every platform
 * certificate the simulator has issued, encrypted with the APIv3 key; after
 * POST /_sim/rotate every answer and notification is signed with the newest
 * key only - except the certificate list itself, which is signed with the
 * first key (see certificates()).
 */
#include "sim_int.h"

#include "crypto.h"
#include "err.h"
#include "gateways/form.h"
#include "gateways/jscan.h"
#include "gateways/wechat.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SKEW_S 300
#define PATH_PREFIX "/v3/pay/transactions/out-trade-no/"
#define REFUNDS_PATH "/v3/refund/domestic/refunds"

/* Signs rs with platform certificate `which` (an index of k.wechat_certs;
 * -1 = the current one): the answer's Wechatpay-* headers. */
static void sign_response_with(struct pt_sim *s, struct sim_resp *rs, int which)
{
    int n = atomic_load(&s->k.wechat_ncerts);
    if (which < 0 || which >= n)
        which = n - 1;
    struct pt_pk *key = n > 0 ? s->k.wechat_certs[which].key : s->k.wechat_platform_key;
    const char *serial = n > 0 ? s->k.wechat_certs[which].serial : s->k.wechat_platform_serial;
    char ts[24], nonce[40], sig[PT_WECHAT_SIG_MAX], rid[40];
    snprintf(ts, sizeof ts, "%lld", (long long)(pt__sim_now_ms(s) / 1000));
    pt__sim_random_alnum(s, nonce, 32);
    pt__sim_random_alnum(s, rid, 32);
    size_t len = 0;
    char *msg = pt_wechat_response_message(ts, nonce, rs->body, rs->body_len, &len);
    if (!msg || pt_pk_sign_base64(key, msg, len, sig, sizeof sig) != PT_OK)
        sig[0] = '\0';
    free(msg);
    pt__sim_resp_header(rs, "Request-ID: %s", rid);
    pt__sim_resp_header(rs, "Wechatpay-Nonce: %s", nonce);
    pt__sim_resp_header(rs, "Wechatpay-Signature: %s", sig);
    pt__sim_resp_header(rs, "Wechatpay-Timestamp: %s", ts);
    pt__sim_resp_header(rs, "Wechatpay-Serial: %s", serial);
    pt__sim_resp_header(rs, "Wechatpay-Signature-Type: WECHATPAY2-SHA256-RSA2048");
}

/* Signs rs with the current platform key (after a rotation: the new one). */
static void sign_response(struct pt_sim *s, struct sim_resp *rs)
{
    sign_response_with(s, rs, -1);
}

/* Every certificate's validity, as issue_cert writes it (sim_files.c). */
#define CERT_EFFECTIVE "2024-01-01T08:00:00+08:00"
#define CERT_EXPIRE "2050-01-01T07:59:59+08:00"

/*
 * GET /v3/certificates: every platform certificate, oldest first, each
 * encrypted with the merchant's APIv3 key under associated_data
 * "certificate" and a fresh 12-character nonce, as WeChat Pay sends them.
 * The answer is signed with the first certificate, the one the merchant's
 * configuration holds (gateways.json): a client must verify this answer
 * with a key it already trusts, and right after a rotation the new key is
 * exactly the one it does not know yet.  Returns the index of the signer.
 */
static int certificates(struct pt_sim *s, struct sim_resp *rs)
{
    int n = atomic_load(&s->k.wechat_ncerts);
    cJSON *o = cJSON_CreateObject();
    cJSON *data = cJSON_AddArrayToObject(o, "data");
    for (int i = 0; i < n; i++) {
        const struct sim_wx_cert *c = &s->k.wechat_certs[i];
        char nonce[16], *ct = NULL;
        pt__sim_random_alnum(s, nonce, 12);
        if (pt_wechat_encrypt(s->k.wechat_apiv3_key, sizeof s->k.wechat_apiv3_key, nonce,
                              "certificate", c->pem, strlen(c->pem), &ct) != PT_OK)
            continue;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "effective_time", CERT_EFFECTIVE);
        cJSON *enc = cJSON_AddObjectToObject(e, "encrypt_certificate");
        cJSON_AddStringToObject(enc, "algorithm", "AEAD_AES_256_GCM");
        cJSON_AddStringToObject(enc, "associated_data", "certificate");
        cJSON_AddStringToObject(enc, "ciphertext", ct);
        cJSON_AddStringToObject(enc, "nonce", nonce);
        cJSON_AddStringToObject(e, "expire_time", CERT_EXPIRE);
        cJSON_AddStringToObject(e, "serial_no", c->serial);
        cJSON_AddItemToArray(data, e);
        free(ct);
    }
    pt__sim_resp_json(rs, 200, o);
    pt__sim_note(rs, "%d certificate(s)", n);
    return 0;
}

static void error(struct sim_resp *rs, int status, const char *code, const char *message)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "code", code);
    cJSON_AddStringToObject(o, "message", message);
    pt__sim_resp_json(rs, status, o);
    pt__sim_note(rs, "%s", code);
}

/* ---- the transaction object -------------------------------------------------- */

static const char *trade_state(const struct sim_trade *t, const char **desc)
{
    if (strcmp(t->status, "captured") == 0) {
        *desc = "支付成功";
        return "SUCCESS";
    }
    if (strcmp(t->status, "declined") == 0) {
        *desc = "支付失败，请重新下单支付";
        return "PAYERROR";
    }
    if (strcmp(t->status, "canceled") == 0) {
        *desc = "订单已关闭";
        return "CLOSED";
    }
    *desc = "订单未支付";
    return "NOTPAY";
}

static cJSON *transaction(struct pt_sim *s, const struct sim_trade *t)
{
    const char *desc, *st = trade_state(t, &desc);
    int paid = strcmp(st, "SUCCESS") == 0;
    cJSON *o = cJSON_CreateObject();
    cJSON *amt = cJSON_AddObjectToObject(o, "amount");
    cJSON_AddStringToObject(amt, "currency", t->currency);
    if (paid) {
        cJSON_AddStringToObject(amt, "payer_currency", t->currency);
        cJSON_AddNumberToObject(amt, "payer_total", (double)t->amount);
    }
    cJSON_AddNumberToObject(amt, "total", (double)t->amount);
    cJSON_AddStringToObject(o, "appid", s->k.wechat_appid);
    cJSON_AddStringToObject(o, "attach", "");
    if (paid)
        cJSON_AddStringToObject(o, "bank_type", "OTHERS");
    cJSON_AddStringToObject(o, "mchid", s->k.wechat_mchid);
    cJSON_AddStringToObject(o, "out_trade_no", t->order_id);
    if (paid) {
        cJSON *payer = cJSON_AddObjectToObject(o, "payer");
        cJSON_AddStringToObject(payer, "openid", "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o");
    }
    cJSON_AddArrayToObject(o, "promotion_detail");
    if (paid) {
        char when[32];
        pt__sim_time_rfc3339_cn(t->paid_at, when);
        cJSON_AddStringToObject(o, "success_time", when);
    }
    cJSON_AddStringToObject(o, "trade_state", st);
    cJSON_AddStringToObject(o, "trade_state_desc", desc);
    cJSON_AddStringToObject(o, "trade_type", "NATIVE");
    /* WeChat assigns the transaction_id when the customer pays. */
    if (paid || strcmp(st, "PAYERROR") == 0)
        cJSON_AddStringToObject(o, "transaction_id", t->trade_no);
    return o;
}

/*
 * Queues event (TRANSACTION.SUCCESS, REFUND.SUCCESS) of order_id to url:
 * the resource object (taken, of type kind: "transaction", "refund")
 * encrypted with the APIv3 key, in WeChat's envelope (lk held).
 */
static void notify_event(struct pt_sim *s, const char *order_id, const char *url, const char *event,
                         const char *summary, const char *kind, cJSON *resource)
{
    char *plain = cJSON_PrintUnformatted(resource);
    char nonce[16], id[48], when[32], *ct = NULL;
    cJSON_Delete(resource);
    pt__sim_random_alnum(s, nonce, 12);
    if (!plain || pt_wechat_encrypt(s->k.wechat_apiv3_key, 32, nonce, kind, plain, strlen(plain),
                                    &ct) != PT_OK)
        goto out;
    snprintf(id, sizeof id, "EV-");
    pt__sim_random_digits(s, id + 3, 20);
    pt__sim_time_rfc3339_cn(pt__sim_now_ms(s), when);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "id", id);
    cJSON_AddStringToObject(e, "create_time", when);
    cJSON_AddStringToObject(e, "resource_type", "encrypt-resource");
    cJSON_AddStringToObject(e, "event_type", event);
    cJSON_AddStringToObject(e, "summary", summary);
    cJSON *r = cJSON_AddObjectToObject(e, "resource");
    cJSON_AddStringToObject(r, "original_type", kind);
    cJSON_AddStringToObject(r, "algorithm", "AEAD_AES_256_GCM");
    cJSON_AddStringToObject(r, "ciphertext", ct);
    cJSON_AddStringToObject(r, "associated_data", kind);
    cJSON_AddStringToObject(r, "nonce", nonce);
    char *body = cJSON_PrintUnformatted(e);
    cJSON_Delete(e);
    if (body)
        pt__sim_notify(s, SIM_GW_WECHAT, order_id, event, url, "application/json", body,
                       strlen(body), 0, 1);
    free(body);
out:
    if (plain)
        pt_zeroize(plain, strlen(plain));
    free(plain);
    free(ct);
}

/* Queues TRANSACTION.SUCCESS for t (lk held). */
static void notify(struct pt_sim *s, const struct sim_trade *t)
{
    cJSON *x = cJSON_Parse(t->extra);
    notify_event(s, t->order_id, pt__sim_json_str(x, "notify_url"), "TRANSACTION.SUCCESS",
                 "支付成功", "transaction", transaction(s, t));
    cJSON_Delete(x);
}

/* ---- requests ------------------------------------------------------------------ */

/* Checks the Authorization header like the APIv3 gateway does. */
static int authenticated(struct pt_sim *s, const struct sim_req *rq, struct sim_resp *rs)
{
    struct pt_wechat_auth a;
    const char *h = pt__sim_req_header(rq, "Authorization");
    if (!h || pt_wechat_parse_authorization(h, &a) != PT_OK) {
        error(rs, 401, "SIGN_ERROR", "Authorization 头缺失或格式错误 (WECHATPAY2-SHA256-RSA2048)");
        return 0;
    }
    if (strcmp(a.mchid, s->k.wechat_mchid) != 0) {
        error(rs, 401, "SIGN_ERROR", "商户号与签名不匹配 (mchid)");
        return 0;
    }
    if (strcasecmp(a.serial_no, s->k.wechat_merchant_serial) != 0) {
        error(rs, 401, "SIGN_ERROR", "商户证书序列号有误 (serial_no)");
        return 0;
    }
    char *end;
    long long ts = strtoll(a.timestamp, &end, 10), now = pt__sim_now_ms(s) / 1000;
    if (*end || end == a.timestamp || ts < now - SKEW_S || ts > now + SKEW_S) {
        error(rs, 401, "SIGN_ERROR", "签名时间戳已过期或不合法 (timestamp)");
        return 0;
    }
    size_t len = 0;
    char *msg = pt_wechat_request_message(rq->method, rq->target, a.timestamp, a.nonce_str,
                                          rq->body, rq->body_len, &len);
    int ok = msg && pt_pk_verify_base64(s->k.wechat_merchant_cert, msg, len, a.signature,
                                        strlen(a.signature)) == PT_OK;
    free(msg);
    if (!ok)
        error(rs, 401, "SIGN_ERROR", "签名错误，请检查后再试");
    return ok;
}

static int out_trade_no_valid(const char *s)
{
    size_t n = strlen(s);
    if (n < 6 || n > 32)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("_-|*", s[i]))
            return 0;
    return 1;
}

static void native(struct sim_call *c, const struct sim_req *rq, struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    static const char *const total_path[] = {"amount", "total", NULL};
    cJSON *j = cJSON_ParseWithLength(rq->body, rq->body_len);
    const char *appid = pt__sim_json_str(j, "appid"), *mchid = pt__sim_json_str(j, "mchid");
    const char *desc = pt__sim_json_str(j, "description");
    const char *otn = pt__sim_json_str(j, "out_trade_no");
    const char *url = pt__sim_json_str(j, "notify_url");
    const char *cur = pt__sim_json_str(cJSON_GetObjectItemCaseSensitive(j, "amount"), "currency");
    int64_t total = 0;
    struct sim_trade *t = NULL;
    if (!cJSON_IsObject(j)) {
        error(rs, 400, "PARAM_ERROR", "请求体不是合法的 JSON");
        goto out;
    }
    if (!appid || !mchid || !desc || !otn || !url ||
        pt_jscan_int(rq->body, rq->body_len, total_path, &total) != PT_OK || total <= 0) {
        error(rs, 400, "PARAM_ERROR",
              "缺少参数或格式错误 (appid, mchid, description, out_trade_no, notify_url, "
              "amount.total)");
        goto out;
    }
    if (strcmp(mchid, s->k.wechat_mchid) != 0 || strcmp(appid, s->k.wechat_appid) != 0) {
        error(rs, 400, "APPID_MCHID_NOT_MATCH", "appid和mch_id不匹配");
        goto out;
    }
    if (!out_trade_no_valid(otn)) {
        error(rs, 400, "PARAM_ERROR", "out_trade_no 须为 6-32 位字母、数字或 _-|*");
        goto out;
    }
    if (cur && strcmp(cur, "CNY") != 0) {
        error(rs, 400, "PARAM_ERROR", "境内商户仅支持人民币 (amount.currency: CNY)");
        goto out;
    }
    const char *te = pt__sim_json_str(j, "time_expire");
    int64_t expire_s = 0;
    if (cJSON_GetObjectItemCaseSensitive(j, "time_expire") &&
        (!te || pt_wechat_parse_time(te, &expire_s) != PT_OK)) {
        error(rs, 400, "PARAM_ERROR",
              "time_expire 须为 rfc3339 格式 (yyyy-MM-DDTHH:mm:ss+TIMEZONE)");
        goto out;
    }
    char hash[65], basis[600];
    snprintf(basis, sizeof basis, "%lld|%s|%s|%s", (long long)total, desc, url, te ? te : "");
    pt__sim_sha256_hex(basis, strlen(basis), hash);
    if (pt__sim_commit_gate(c, rs))
        goto out;
    t = calloc(1, sizeof *t);
    if (!t) {
        error(rs, 500, "SYSTEM_ERROR", "系统错误");
        goto out;
    }
    pt__sim_lock(s);
    int rc = pt__sim_trade_get(s, SIM_GW_WECHAT, otn, t);
    if (rc == PT_OK) {
        pt__sim_unlock(s);
        if (strcmp(t->params_hash, hash) != 0) {
            error(rs, 403, "OUT_TRADE_NO_USED", "商户订单号重复");
        } else if (strcmp(t->status, "captured") == 0) {
            error(rs, 400, "ORDERPAID", "该订单已支付");
        } else if (strcmp(t->status, "pending") != 0) {
            error(rs, 400, "ORDER_CLOSED", "订单已关闭");
        } else if (pt__sim_expired(s, t)) {
            error(rs, 400, "INVALID_REQUEST", "订单已超过支付结束时间，请使用新的商户订单号下单");
        } else {
            cJSON *x = cJSON_Parse(t->extra), *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "code_url", pt__sim_json_str(x, "code_url"));
            cJSON_Delete(x);
            pt__sim_resp_json(rs, 200, o);
            pt__sim_note(rs, "%s repeat, same code_url", otn);
        }
        goto out;
    }
    memset(t, 0, sizeof *t);
    t->gw = SIM_GW_WECHAT;
    snprintf(t->order_id, sizeof t->order_id, "%s", otn);
    memcpy(t->trade_no, "42000", 5);
    pt__sim_random_digits(s, t->trade_no + 5, 23);
    snprintf(t->method, sizeof t->method, "qr");
    t->amount = total;
    snprintf(t->currency, sizeof t->currency, "CNY");
    snprintf(t->status, sizeof t->status, "pending");
    memcpy(t->params_hash, hash, sizeof hash);
    t->created_at = t->updated_at = pt__sim_now_ms(s);
    char code_url[64] = "weixin://wxpay/bizpayurl?pr=";
    pt__sim_random_alnum(s, code_url + strlen(code_url), 7);
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "code_url", code_url);
    cJSON_AddStringToObject(x, "notify_url", url);
    cJSON_AddStringToObject(x, "description", desc);
    char *xt = cJSON_PrintUnformatted(x);
    cJSON_Delete(x);
    snprintf(t->extra, sizeof t->extra, "%s", xt ? xt : "{}");
    free(xt);
    if (te) {
        int64_t at = expire_s * 1000, earliest = t->created_at + 60000;
        pt__sim_set_expiry(t, "time_expire", te, at < earliest ? earliest : at);
    }
    pt__sim_schedule_pay(s, t);
    rc = pt__sim_trade_insert(s, t);
    pt__sim_unlock(s);
    if (rc != PT_OK) {
        error(rs, 500, "SYSTEM_ERROR", "系统错误");
    } else {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "code_url", code_url);
        pt__sim_resp_json(rs, 200, o);
        pt__sim_note(rs, "%s created", otn);
    }
out:
    free(t);
    cJSON_Delete(j);
}

/* {no} of /v3/pay/transactions/out-trade-no/{no}[suffix] into out. */
static int path_trade_no(const char *path, const char *suffix, char *out, size_t outlen)
{
    size_t pl = strlen(PATH_PREFIX), sl = strlen(suffix), n = strlen(path);
    if (n <= pl + sl || strncmp(path, PATH_PREFIX, pl) != 0 || strcmp(path + n - sl, suffix) != 0)
        return -1;
    size_t len = n - pl - sl;
    if (len >= outlen || memchr(path + pl, '/', len))
        return -1;
    memcpy(out, path + pl, len);
    out[len] = '\0';
    return 0;
}

static void query(struct sim_call *c, const struct sim_req *rq, const char *otn,
                  struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    char mchid[64] = "";
    const char *q = strstr(rq->query, "mchid=");
    if (q && (q == rq->query || q[-1] == '&'))
        snprintf(mchid, sizeof mchid, "%.*s", (int)strcspn(q + 6, "&"), q + 6);
    if (strcmp(mchid, s->k.wechat_mchid) != 0) {
        error(rs, 400, "PARAM_ERROR", "mchid 缺失或与商户号不符");
        return;
    }
    struct sim_trade *t = calloc(1, sizeof *t);
    if (!t) {
        error(rs, 500, "SYSTEM_ERROR", "系统错误");
        return;
    }
    pt__sim_lock(s);
    int rc = pt__sim_trade_get(s, SIM_GW_WECHAT, otn, t), refunds = 0;
    if (rc == PT_OK && pt__sim_refund_totals(s, t->id, NULL, NULL, &refunds) != PT_OK)
        refunds = 0;
    pt__sim_unlock(s);
    if (rc == PT_OK) {
        const char *desc, *state = trade_state(t, &desc);
        cJSON *tx = transaction(s, t);
        if (refunds > 0 && strcmp(state, "SUCCESS") == 0) {
            /* A paid order with a refund is "转入退款" to the order query. */
            state = "REFUND";
            cJSON_ReplaceItemInObjectCaseSensitive(tx, "trade_state", cJSON_CreateString(state));
            cJSON_ReplaceItemInObjectCaseSensitive(tx, "trade_state_desc",
                                                   cJSON_CreateString("转入退款"));
        }
        pt__sim_resp_json(rs, 200, tx);
        pt__sim_note(rs, "%s %s", otn, state);
    } else {
        error(rs, 404, "ORDER_NOT_EXIST", "订单不存在");
    }
    free(t);
}

static void close_order(struct sim_call *c, const struct sim_req *rq, const char *otn,
                        struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    cJSON *j = cJSON_ParseWithLength(rq->body, rq->body_len);
    const char *mchid = pt__sim_json_str(j, "mchid");
    int ok = mchid && strcmp(mchid, s->k.wechat_mchid) == 0;
    cJSON_Delete(j);
    if (!ok) {
        error(rs, 400, "PARAM_ERROR", "mchid 缺失或与商户号不符");
        return;
    }
    if (pt__sim_commit_gate(c, rs))
        return;
    struct sim_trade *t = calloc(1, sizeof *t);
    if (!t) {
        error(rs, 500, "SYSTEM_ERROR", "系统错误");
        return;
    }
    pt__sim_lock(s);
    int rc = pt__sim_trade_get(s, SIM_GW_WECHAT, otn, t);
    int paid = rc == PT_OK && strcmp(t->status, "captured") == 0;
    int young = rc == PT_OK && pt__sim_now_ms(s) - t->created_at < s->wechat_close_after_ms;
    if (rc == PT_OK) {
        pt__sim_extra_set_int(t, "closes", pt__sim_extra_int(t, "closes") + 1);
        if (!paid && !young && strcmp(t->status, "canceled") != 0) {
            snprintf(t->status, sizeof t->status, "canceled");
            t->pay_at = 0;
        }
        t->updated_at = pt__sim_now_ms(s);
        rc = pt__sim_trade_update(s, t);
    }
    pt__sim_unlock(s);
    if (rc == PT_ENOTFOUND)
        error(rs, 404, "ORDER_NOT_EXIST", "订单不存在");
    else if (rc != PT_OK)
        error(rs, 500, "SYSTEM_ERROR", "系统错误");
    else if (paid)
        error(rs, 400, "ORDERPAID", "订单已支付，不能关闭");
    else if (young)
        error(rs, 400, "INVALID_REQUEST",
              "订单生成后不能马上调用关单接口，最短调用时间间隔为5分钟");
    else {
        pt__sim_resp_set(rs, 204, "", "", 0);
        pt__sim_note(rs, "%s closed", otn);
    }
    free(t);
}

/* ---- refunds ------------------------------------------------------------------- */

/* out_refund_no: 1-64 of digits, letters and _-|*@ (WeChat's documented set). */
static int out_refund_no_valid(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("_-|*@", s[i]))
            return 0;
    return 1;
}

/* Characters (UTF-8 code points) of s: WeChat bounds text in characters. */
static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static int64_t extra_int(const cJSON *x, const char *name)
{
    int64_t v = 0;
    return pt__sim_json_int(x, name, &v) == 0 ? v : 0;
}

/* The refund object of GET /v3/refund/domestic/refunds/{no} and of the
 * refund answer. */
static cJSON *refund_json(const struct sim_refund *r)
{
    cJSON *x = cJSON_Parse(r->extra);
    int64_t total = extra_int(x, "total");
    int ok = strcmp(r->status, "succeeded") == 0;
    char when[32];
    cJSON *o = cJSON_CreateObject();
    cJSON *amt = cJSON_AddObjectToObject(o, "amount");
    cJSON_AddStringToObject(amt, "currency", r->currency);
    cJSON_AddNumberToObject(amt, "discount_refund", 0);
    cJSON_AddArrayToObject(amt, "from");
    cJSON_AddNumberToObject(amt, "payer_refund", (double)r->amount);
    cJSON_AddNumberToObject(amt, "payer_total", (double)total);
    cJSON_AddNumberToObject(amt, "refund", (double)r->amount);
    cJSON_AddNumberToObject(amt, "settlement_refund", (double)r->amount);
    cJSON_AddNumberToObject(amt, "settlement_total", (double)total);
    cJSON_AddNumberToObject(amt, "total", (double)total);
    cJSON_AddStringToObject(o, "channel", "ORIGINAL");
    pt__sim_time_rfc3339_cn(r->created_at, when);
    cJSON_AddStringToObject(o, "create_time", when);
    cJSON_AddStringToObject(o, "funds_account", "AVAILABLE");
    cJSON_AddStringToObject(o, "out_refund_no", r->refund_key);
    cJSON_AddStringToObject(o, "out_trade_no", r->order_id);
    cJSON_AddArrayToObject(o, "promotion_detail");
    cJSON_AddStringToObject(o, "refund_id", r->refund_no);
    cJSON_AddStringToObject(o, "status", ok ? "SUCCESS" : "PROCESSING");
    if (ok) {
        pt__sim_time_rfc3339_cn(r->succeeded_at, when);
        cJSON_AddStringToObject(o, "success_time", when);
    }
    cJSON_AddStringToObject(o, "transaction_id", r->trade_no);
    cJSON_AddStringToObject(o, "user_received_account", "支付用户零钱");
    cJSON_Delete(x);
    return o;
}

/* Queues REFUND.SUCCESS for r (lk held).  A refund notification carries
 * mchid but no appid (SPEC 5a: payterm binds it by mchid, out_refund_no and
 * refund_id). */
static void refund_notify(struct pt_sim *s, const struct sim_refund *r)
{
    cJSON *x = cJSON_Parse(r->extra);
    const char *url = pt__sim_json_str(x, "notify_url");
    int64_t total = extra_int(x, "total");
    char paid[32];
    pt__sim_time_rfc3339_cn(r->succeeded_at, paid);
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "mchid", s->k.wechat_mchid);
    cJSON_AddStringToObject(p, "out_trade_no", r->order_id);
    cJSON_AddStringToObject(p, "transaction_id", r->trade_no);
    cJSON_AddStringToObject(p, "out_refund_no", r->refund_key);
    cJSON_AddStringToObject(p, "refund_id", r->refund_no);
    cJSON_AddStringToObject(p, "refund_status", "SUCCESS");
    cJSON_AddStringToObject(p, "success_time", paid);
    cJSON_AddStringToObject(p, "user_received_account", "支付用户零钱");
    cJSON *a = cJSON_AddObjectToObject(p, "amount");
    cJSON_AddNumberToObject(a, "total", (double)total);
    cJSON_AddNumberToObject(a, "refund", (double)r->amount);
    cJSON_AddNumberToObject(a, "payer_total", (double)total);
    cJSON_AddNumberToObject(a, "payer_refund", (double)r->amount);
    notify_event(s, r->order_id, url, "REFUND.SUCCESS", "退款成功", "refund", p);
    cJSON_Delete(x);
}

static void refund_settle(struct pt_sim *s, struct sim_refund *r)
{
    snprintf(r->status, sizeof r->status, "succeeded");
    r->settle_at = 0;
    r->updated_at = r->succeeded_at = pt__sim_now_ms(s);
    if (pt__sim_refund_update(s, r) == PT_OK)
        refund_notify(s, r);
}

/* True when a member of the refund request is given twice (a body that can
 * be read two ways is refused) or has the wrong JSON type. */
static int refund_body_malformed(const struct sim_req *rq, const cJSON *j)
{
    static const char *const strings[] = {"out_trade_no",
                                          "transaction_id",
                                          "out_refund_no",
                                          "reason",
                                          "notify_url",
                                          "funds_account",
                                          NULL};
    static const char *const currency_path[] = {"amount", "currency", NULL};
    const char *v;
    size_t vl;
    for (const char *const *n = strings; *n; n++) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, *n);
        if (pt_jscan_member(rq->body, rq->body_len, *n, &v, &vl) == PT_EPARSE ||
            (m && !cJSON_IsString(m)))
            return 1;
    }
    return pt_jscan_member(rq->body, rq->body_len, "amount", &v, &vl) == PT_EPARSE ||
           !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(j, "amount")) ||
           pt_jscan_path(rq->body, rq->body_len, currency_path, &v, &vl) == PT_EPARSE;
}

static void refund_create(struct sim_call *c, const struct sim_req *rq, struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    static const char *const refund_path[] = {"amount", "refund", NULL};
    static const char *const total_path[] = {"amount", "total", NULL};
    cJSON *j = cJSON_ParseWithLength(rq->body, rq->body_len);
    const char *otn = pt__sim_json_str(j, "out_trade_no");
    const char *tid = pt__sim_json_str(j, "transaction_id");
    const char *key = pt__sim_json_str(j, "out_refund_no");
    const char *reason = pt__sim_json_str(j, "reason");
    const char *url = pt__sim_json_str(j, "notify_url");
    const char *funds = pt__sim_json_str(j, "funds_account");
    const char *cur = pt__sim_json_str(cJSON_GetObjectItemCaseSensitive(j, "amount"), "currency");
    int64_t amount = 0, total = 0;
    struct sim_trade *t = NULL;
    struct sim_refund *r = NULL;
    if (!cJSON_IsObject(j)) {
        error(rs, 400, "PARAM_ERROR", "请求体不是合法的 JSON");
        goto out;
    }
    if (refund_body_malformed(rq, j) || (!otn && !tid) || !key || !cur ||
        pt_jscan_int(rq->body, rq->body_len, refund_path, &amount) != PT_OK ||
        pt_jscan_int(rq->body, rq->body_len, total_path, &total) != PT_OK || amount <= 0 ||
        total <= 0) {
        error(rs, 400, "PARAM_ERROR",
              "缺少参数或格式错误 (out_trade_no 或 transaction_id, out_refund_no, amount.refund, "
              "amount.total, amount.currency)");
        goto out;
    }
    if (!out_refund_no_valid(key)) {
        error(rs, 400, "PARAM_ERROR", "out_refund_no 须为 1-64 位数字、大小写字母或 _-|*@");
        goto out;
    }
    if ((otn && !out_trade_no_valid(otn)) || (tid && (!*tid || strlen(tid) > 32))) {
        error(rs, 400, "PARAM_ERROR", "out_trade_no / transaction_id 格式错误");
        goto out;
    }
    if ((reason && utf8_chars(reason) > 80) ||
        (url && (strlen(url) > 256 || strchr(url, '?') ||
                 (strncmp(url, "https://", 8) != 0 && strncmp(url, "http://", 7) != 0))) ||
        (funds && strcmp(funds, "AVAILABLE") != 0)) {
        error(rs, 400, "PARAM_ERROR",
              "reason 至多 80 个字符, notify_url 须为不带参数的 URL, funds_account 仅支持 "
              "AVAILABLE");
        goto out;
    }
    if (strcmp(cur, "CNY") != 0) {
        error(rs, 400, "PARAM_ERROR", "境内商户仅支持人民币 (amount.currency: CNY)");
        goto out;
    }
    if (pt__sim_commit_gate(c, rs))
        goto out;
    t = calloc(1, sizeof *t);
    r = calloc(1, sizeof *r);
    if (!t || !r) {
        error(rs, 500, "SYSTEM_ERROR", "系统错误");
        goto out;
    }
    r->gw = SIM_GW_WECHAT;
    snprintf(r->refund_key, sizeof r->refund_key, "%s", key);
    memcpy(r->refund_no, "50", 2);
    pt__sim_random_digits(s, r->refund_no + 2, 27);
    r->amount = amount;
    snprintf(r->status, sizeof r->status, "processing");
    r->settle_at = pt__sim_now_ms(s) + s->pay_delay_ms;
    char basis[64];
    snprintf(basis, sizeof basis, "%lld|%lld", (long long)amount, (long long)total);
    pt__sim_sha256_hex(basis, strlen(basis), r->params_hash);
    cJSON *x = cJSON_CreateObject();
    cJSON_AddNumberToObject(x, "total", (double)total);
    if (url)
        cJSON_AddStringToObject(x, "notify_url", url);
    if (reason)
        cJSON_AddStringToObject(x, "reason", reason);
    char *xt = cJSON_PrintUnformatted(x);
    cJSON_Delete(x);
    snprintf(r->extra, sizeof r->extra, "%s", xt ? xt : "{}");
    free(xt);

    enum sim_refund_rc rrc = SIM_REFUND_ERROR;
    int64_t left = 0;
    pt__sim_lock(s);
    int rc = otn ? pt__sim_trade_get(s, SIM_GW_WECHAT, otn, t)
                 : pt__sim_trade_by_no(s, SIM_GW_WECHAT, tid, t);
    int unpaid = rc == PT_OK && strcmp(t->status, "captured") != 0;
    int wrong_total = rc == PT_OK && !unpaid && total != t->amount;
    if (rc == PT_OK && !unpaid && !wrong_total)
        rrc = pt__sim_refund_take(s, t, r, &left);
    pt__sim_unlock(s);
    if (rc == PT_ENOTFOUND || unpaid) {
        error(rs, 404, "RESOURCE_NOT_EXISTS", "订单不存在或未支付，未支付的订单不能发起退款");
    } else if (wrong_total) {
        error(rs, 400, "INVALID_REQUEST", "订单金额与实际支付金额不一致 (amount.total)");
    } else if (rc != PT_OK || rrc == SIM_REFUND_ERROR) {
        error(rs, 500, "SYSTEM_ERROR", "系统错误，请不要更换商户退款单号，使用相同参数再次调用");
    } else if (rrc == SIM_REFUND_CONFLICT) {
        error(rs, 400, "INVALID_REQUEST", "订单金额或退款金额与之前请求不一致，请核实后再试");
    } else if (rrc == SIM_REFUND_EXCEEDS) {
        char msg[160];
        snprintf(msg, sizeof msg, "申请退款金额超过订单可退金额 (可退 %lld 分)", (long long)left);
        error(rs, 400, "INVALID_REQUEST", msg);
    } else if (rrc == SIM_REFUND_NOT_PAID) {
        error(rs, 404, "RESOURCE_NOT_EXISTS", "订单不存在或未支付，未支付的订单不能发起退款");
    } else {
        pt__sim_resp_json(rs, 200, refund_json(r));
        pt__sim_note(rs, "%s refund %s %lld%s", r->order_id, key, (long long)amount,
                     rrc == SIM_REFUND_NEW ? "" : " (repeat)");
    }
out:
    free(r);
    free(t);
    cJSON_Delete(j);
}

static void refund_query(struct sim_call *c, const char *key, struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    if (!out_refund_no_valid(key)) {
        error(rs, 400, "PARAM_ERROR", "out_refund_no 格式错误");
        return;
    }
    struct sim_refund *r = calloc(1, sizeof *r);
    if (!r) {
        error(rs, 500, "SYSTEM_ERROR", "系统错误");
        return;
    }
    pt__sim_lock(s);
    int rc = pt__sim_refund_get(s, SIM_GW_WECHAT, "", key, r);
    pt__sim_unlock(s);
    if (rc == PT_OK) {
        pt__sim_resp_json(rs, 200, refund_json(r));
        pt__sim_note(rs, "refund %s %s", key, r->status);
    } else if (rc == PT_ENOTFOUND) {
        error(rs, 404, "RESOURCE_NOT_EXISTS", "退款单不存在");
    } else {
        error(rs, 500, "SYSTEM_ERROR", "系统错误");
    }
    free(r);
}

/* ---- the trade bill (交易账单, SPEC 19) ------------------------------------------- */

#define BILL_PATH "/v3/bill/tradebill"
#define BILL_FILE_PATH "/v3/billdownload/file"
#define BILL_HEADER                                                                                                                       \
    "交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状" \
    "态,付款银行,货币种类,应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值券退款" \
    "金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注\n"
#define BILL_SUMMARY_HEADER                                                                                                                \
    "总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金" \
    "额\n"

struct bill {
    struct pt_sim *s;
    int trades, refunds; /* which rows (bill_type) */
    char *text;
    size_t len, cap;
    int64_t rows, paid_fen, refunded_fen, fee; /* fee in 1/100000 yuan */
    int failed;
};

__attribute__((format(printf, 2, 3))) static void bill_add(struct bill *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || b->failed)
        return;
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t want = (b->len + (size_t)n + 1) * 2;
        char *more = realloc(b->text, want);
        if (!more) {
            b->failed = 1;
            return;
        }
        b->text = more;
        b->cap = want;
    }
    va_start(ap, fmt);
    vsnprintf(b->text + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Yuan of fen ("12.34"), and the 0.6 % fee in yuan to 5 decimals. */
static void yuan(int64_t fen, char out[32])
{
    snprintf(out, 32, "%s%lld.%02lld", fen < 0 ? "-" : "", (long long)(llabs(fen) / 100),
             (long long)(llabs(fen) % 100));
}

static void fee_text(int64_t fee, char out[32])
{
    snprintf(out, 32, "%s%lld.%05lld", fee < 0 ? "-" : "", (long long)(llabs(fee) / 100000),
             (long long)(llabs(fee) % 100000));
}

static int bill_trade(void *ctx, const struct sim_trade *t)
{
    struct bill *b = ctx;
    if (!b->trades)
        return 0;
    char at[20], amt[32], fee[32];
    pt__sim_time_cn(t->paid_at, at);
    yuan(t->amount, amt);
    fee_text(t->amount * 6, fee);
    cJSON *x = cJSON_Parse(t->extra);
    const char *desc = pt__sim_json_str(x, "description");
    if (!desc)
        desc = pt__sim_json_str(x, "body");
    /* Commas would cut the line: WeChat's bill has none in a value. */
    char goods[128];
    snprintf(goods, sizeof goods, "%s", desc ? desc : "");
    for (char *p = goods; *p; p++)
        if (*p == ',' || *p == '`' || *p == '\n' || *p == '\r')
            *p = ' ';
    cJSON_Delete(x);
    bill_add(b,
             "`%s,`%s,`%s,`0,`,`%s,`%s,`oSim%.20s,`%s,`SUCCESS,`OTHERS,`%s,`%s,`0.00,`0,`0,`0.00,"
             "`0.00,`,`,`%s,`,`%s,`0.60%%,`%s,`0.00,`\n",
             at, b->s->k.wechat_appid, b->s->k.wechat_mchid, t->trade_no, t->order_id, t->trade_no,
             strcmp(t->method, "micropay") == 0 ? "MICROPAY" : "NATIVE", t->currency, amt, goods,
             fee, amt);
    b->rows++;
    b->paid_fen += t->amount;
    b->fee += t->amount * 6;
    return 0;
}

static int bill_refund(void *ctx, const struct sim_refund *r)
{
    struct bill *b = ctx;
    if (!b->refunds)
        return 0;
    char at[20], amt[32], fee[32];
    pt__sim_time_cn(r->succeeded_at, at);
    yuan(r->amount, amt);
    fee_text(-r->amount * 6, fee);
    bill_add(b,
             "`%s,`%s,`%s,`0,`,`%s,`%s,`oSim%.20s,`NATIVE,`REFUND,`OTHERS,`%s,`0.00,`0.00,`%s,`%s,"
             "`%s,`0.00,`ORIGINAL,`SUCCESS,`,`,`%s,`0.60%%,`0.00,`%s,`\n",
             at, b->s->k.wechat_appid, b->s->k.wechat_mchid, r->trade_no, r->order_id, r->trade_no,
             r->currency, r->refund_no, r->refund_key, amt, fee, amt);
    b->rows++;
    b->refunded_fen += r->amount;
    b->fee -= r->amount * 6;
    return 0;
}

/*
 * The bill of date (China time) and bill_type, as WeChat Pay's
 * 交易账单文件格式说明 lays it out (docs/reconcile.md), from the ledger.
 * PT_OK (b->text), PT_ENOTFOUND (no trade that day: NO_STATEMENT_EXIST),
 * PT_EPARSE (date), PT_EAGAIN (not ready: STATEMENT_CREATING).
 */
static int make_bill(struct pt_sim *s, const char *date, const char *type, struct bill *b)
{
    int64_t start;
    memset(b, 0, sizeof *b);
    b->s = s;
    b->trades = !type || !strcmp(type, "ALL") || !strcmp(type, "SUCCESS");
    b->refunds = !type || !strcmp(type, "ALL") || !strcmp(type, "REFUND");
    if (pt__sim_bill_day(date, 8 * 60, &start) != PT_OK || (!b->trades && !b->refunds))
        return PT_EPARSE;
    if (!pt__sim_bill_ready(s, start))
        return PT_EAGAIN;
    bill_add(b, "%s", BILL_HEADER);
    pt__sim_lock(s);
    int rc =
        pt__sim_bill_each(s, SIM_GW_WECHAT, start, start + 86400000LL, bill_trade, bill_refund, b);
    pt__sim_unlock(s);
    if (rc == PT_OK && !b->rows)
        rc = PT_ENOTFOUND;
    char paid[32], refunded[32], fee[32];
    yuan(b->paid_fen, paid);
    yuan(b->refunded_fen, refunded);
    fee_text(b->fee, fee);
    bill_add(b, "%s`%lld,`%s,`%s,`0.00,`%s,`%s,`%s\n", BILL_SUMMARY_HEADER, (long long)b->rows,
             paid, refunded, fee, paid, refunded);
    if (rc == PT_OK && b->failed)
        rc = PT_ENOMEM;
    if (rc) {
        free(b->text);
        b->text = NULL;
    }
    return rc;
}

int pt__sim_wechat_bill(struct pt_sim *s, const char *date, const char *type, char **text,
                        size_t *len, int64_t *rows)
{
    struct bill b;
    int rc = make_bill(s, date, type, &b);
    *text = rc == PT_OK ? b.text : NULL;
    *len = rc == PT_OK ? b.len : 0;
    *rows = rc == PT_OK ? b.rows : 0;
    return rc;
}

/* GET /v3/bill/tradebill and GET /v3/billdownload/file: the same query
 * (bill_date, bill_type), the first answers where and what hash, the second
 * the file - unsigned, as WeChat Pay serves it. */
static void tradebill(struct pt_sim *s, const struct sim_req *rq, struct sim_resp *rs, int file)
{
    struct pt_form f;
    pt_form_init(&f);
    const char *date = NULL, *type = NULL, *tar = NULL;
    if (pt_form_parse(rq->query, strlen(rq->query), &f) == PT_OK) {
        date = pt_form_get(&f, file ? "token" : "bill_date");
        type = pt_form_get(&f, "bill_type");
        tar = pt_form_get(&f, "tar_type");
    }
    struct bill b;
    int rc = !date ? PT_EPARSE : tar ? PT_EUNSUPPORTED : make_bill(s, date, type, &b);
    if (rc == PT_EPARSE) {
        error(rs, 400, "PARAM_ERROR",
              "bill_date 或 bill_type 格式错误 (yyyy-MM-DD; ALL, SUCCESS, REFUND)");
    } else if (rc == PT_EUNSUPPORTED) {
        error(rs, 400, "PARAM_ERROR", "tar_type: the simulator serves the bill uncompressed");
    } else if (rc == PT_EAGAIN) {
        error(rs, 400, "STATEMENT_CREATING", "账单生成中，请稍后再试");
    } else if (rc == PT_ENOTFOUND) {
        error(rs, 400, "NO_STATEMENT_EXIST", "账单文件不存在");
    } else if (rc != PT_OK) {
        error(rs, 500, "SYSTEM_ERROR", "系统错误");
    } else if (file) {
        pt__sim_resp_set(rs, 200, "application/octet-stream", b.text, b.len);
        pt__sim_note(rs, "bill %s: %lld rows, %zu bytes", date, (long long)b.rows, b.len);
    } else {
        char hash[41], url[512];
        pt_sha1_hex(b.text, b.len, hash);
        snprintf(url, sizeof url, "https://%s:%d" BILL_FILE_PATH "?token=%s&bill_type=%s",
                 s->gw_host[SIM_GW_WECHAT], s->port, date, type ? type : "ALL");
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "download_url", url);
        cJSON_AddStringToObject(o, "hash_type", "SHA1");
        cJSON_AddStringToObject(o, "hash_value", hash);
        pt__sim_resp_json(rs, 200, o);
        pt__sim_note(rs, "bill %s: %lld rows", date, (long long)b.rows);
    }
    if (rc == PT_OK)
        free(b.text);
    pt_form_free(&f);
}

static void handle(struct sim_call *c, const struct sim_req *rq, struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    char otn[80];
    int signer = -1; /* the current platform key */
    if (pt__sim_wechat_v2_path(rq->path)) {
        pt__sim_wechat_v2_handle(c, rq, rs); /* signs its own answers */
        return;
    }
    if (!authenticated(s, rq, rs)) {
        /* answered */
    } else if (strcmp(rq->method, "POST") == 0 &&
               strcmp(rq->path, "/v3/pay/transactions/native") == 0) {
        native(c, rq, rs);
    } else if (strcmp(rq->method, "GET") == 0 && strcmp(rq->path, "/v3/certificates") == 0) {
        signer = certificates(s, rs);
    } else if (strcmp(rq->method, "GET") == 0 &&
               path_trade_no(rq->path, "", otn, sizeof otn) == 0) {
        query(c, rq, otn, rs);
    } else if (strcmp(rq->method, "POST") == 0 &&
               path_trade_no(rq->path, "/close", otn, sizeof otn) == 0) {
        close_order(c, rq, otn, rs);
    } else if (strcmp(rq->method, "POST") == 0 && strcmp(rq->path, REFUNDS_PATH) == 0) {
        refund_create(c, rq, rs);
    } else if (strcmp(rq->method, "GET") == 0 &&
               strncmp(rq->path, REFUNDS_PATH "/", sizeof REFUNDS_PATH) == 0 &&
               !strchr(rq->path + sizeof REFUNDS_PATH, '/')) {
        refund_query(c, rq->path + sizeof REFUNDS_PATH, rs);
    } else if (strcmp(rq->method, "GET") == 0 && strcmp(rq->path, BILL_PATH) == 0) {
        tradebill(s, rq, rs, 0);
    } else if (strcmp(rq->method, "GET") == 0 && strcmp(rq->path, BILL_FILE_PATH) == 0) {
        tradebill(s, rq, rs, 1);
        if (rs->status == 200)
            return; /* the file is not signed (WeChat Pay: check its hash_value) */
    } else {
        error(rs, 404, "NOT_FOUND", "请求的资源不存在 (the simulator serves Native payments)");
    }
    if (!rs->drop)
        sign_response_with(s, rs, signer);
}

static void autopay(struct pt_sim *s, struct sim_trade *t)
{
    if (strcmp(t->method, "micropay") == 0) {
        /* A payment-code customer who was entering the password confirms;
         * WeChat sends no notification for micropay (the POS polls). */
        pt__sim_wechat_v2_confirm(s, t);
        return;
    }
    /* WeChat notifies successful payments only. */
    enum sim_rule rule;
    if (pt__sim_customer_pays(s, t, &rule) == PT_OK && rule == SIM_RULE_PAY)
        notify(s, t);
}

static int note_headers(struct pt_sim *s, const struct sim_note *n, char hdr[][768], int *nhdr)
{
    struct sim_resp rs = {0};
    rs.body = n->body;
    rs.body_len = n->body_len;
    sign_response(s, &rs);
    for (int i = 0; i < rs.nhdr; i++)
        memcpy(hdr[i], rs.hdr[i], sizeof rs.hdr[i]);
    *nhdr = rs.nhdr;
    return PT_OK;
}

static int note_ok(int status, const char *body, size_t len)
{
    /* APIv3: HTTP 200 or 204 means received; 200 may carry {"code":"SUCCESS"}. */
    if (status == 204)
        return 1;
    if (status != 200)
        return 0;
    if (len == 0)
        return 1;
    cJSON *j = cJSON_ParseWithLength(body, len);
    const char *code = pt__sim_json_str(j, "code");
    int ok = code && strcmp(code, "SUCCESS") == 0;
    cJSON_Delete(j);
    return ok;
}

static void error_500(struct pt_sim *s, struct sim_resp *rs)
{
    if (pt__sim_wechat_v2_is_answer(rs)) {
        pt__sim_wechat_v2_error_500(s, rs);
        return;
    }
    error(rs, 500, "SYSTEM_ERROR", "系统错误");
    sign_response(s, rs);
}

const struct sim_gateway pt__sim_wechat = {
    .name = "wechat",
    .handle = handle,
    .autopay = autopay,
    .note_headers = note_headers,
    .note_ok = note_ok,
    .error_500 = error_500,
    .refund_settle = refund_settle,
};
