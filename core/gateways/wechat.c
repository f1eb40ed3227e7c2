/*
 * wechat.c - the WeChat Pay APIv3 adapter (Native QR), SPEC 8.
 *
 * POST /v3/pay/transactions/native (returns code_url), GET
 * /v3/pay/transactions/out-trade-no/{out_trade_no}?mchid= and POST
 * .../out-trade-no/{out_trade_no}/close; refunds (SPEC 5a) by POST
 * /v3/refund/domestic/refunds and GET /v3/refund/domestic/refunds/
 * {out_refund_no}, with payterm's refund id as out_refund_no, which WeChat
 * refunds once however often it is sent (同一退款单号多次请求只退一笔).
 * Requests carry the WECHATPAY2-SHA256-RSA2048 Authorization; every answer
 * below HTTP 500 must carry a valid platform signature before anything in it
 * is believed.
 * Notifications: TRANSACTION.SUCCESS and REFUND.SUCCESS/ABNORMAL/CLOSED, the
 * resource AES-256-GCM encrypted with the APIv3 key.
 * Method "barcode" (the customer's payment code) is APIv2, not APIv3: its
 * pay, query and cancel are micropay, orderquery and reverse in
 * wechat_v2.c; build and parse hand them over at the top.  Its refunds are
 * APIv3 refunds by out_trade_no like any other.
 */
#include "gateways/wechat.h"
#include "civil.h"
#include "buf.h"
#include "err.h"
#include "gateway.h"
#include "gateways/gwcli.h"
#include "gateways/gwcommon.h"
#include "gateways/jscan.h"
#include "gateways/wechat_v2.h"
#include "gateways/wxbill.h"
#include "money.h"
#include "pt_config.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define WECHAT_MAX_TEXT (256 * 1024)

/* ---- messages and headers ------------------------------------------------ */

/* WeChat's signed text: each of the n heads, then the body, each ending
 * in '\n'. */
static char *message(const char *const *heads, int n, const char *body, size_t body_len,
                     size_t *len)
{
    struct pt_buf b;
    pt_buf_init(&b, WECHAT_MAX_TEXT);
    for (int i = 0; i < n; i++) {
        pt_buf_puts(&b, heads[i]);
        pt_buf_putc(&b, '\n');
    }
    if (body)
        pt_buf_put(&b, body, body_len);
    pt_buf_putc(&b, '\n');
    return pt_buf_take(&b, len);
}

char *pt_wechat_request_message(const char *method, const char *url_path, const char *timestamp,
                                const char *nonce, const char *body, size_t body_len, size_t *len)
{
    const char *const heads[] = {method, url_path, timestamp, nonce};
    return message(heads, 4, body, body_len, len);
}

char *pt_wechat_response_message(const char *timestamp, const char *nonce, const char *body,
                                 size_t body_len, size_t *len)
{
    const char *const heads[] = {timestamp, nonce};
    return message(heads, 2, body, body_len, len);
}

const char *pt_wechat_url_path(const char *url)
{
    const char *p = strstr(url, "://");
    if (!p)
        return url; /* already a path */
    p = strchr(p + 3, '/');
    return p ? p : "/";
}

static int header_safe(const char *s)
{
    return s && !strpbrk(s, "\"\r\n");
}

int pt_wechat_authorization(const char *mchid, const char *serial, const char *timestamp,
                            const char *nonce, const char *signature, char *out, size_t outlen)
{
    if (!header_safe(mchid) || !header_safe(serial) || !header_safe(timestamp) ||
        !header_safe(nonce) || !header_safe(signature))
        return PT_EINVAL;
    int n = snprintf(out, outlen,
                     "WECHATPAY2-SHA256-RSA2048 mchid=\"%s\",serial_no=\"%s\",timestamp=\"%s\","
                     "nonce_str=\"%s\",signature=\"%s\"",
                     mchid, serial, timestamp, nonce, signature);
    return n >= 0 && (size_t)n < outlen ? PT_OK : PT_ETOOBIG;
}

/* Copies the quoted value of one key="value" item into the matching field. */
static int auth_field(struct pt_wechat_auth *a, const char *k, size_t klen, const char *v,
                      size_t vlen)
{
    struct {
        const char *name;
        char *dst;
        size_t size;
    } fields[] = {
        {"mchid", a->mchid, sizeof a->mchid},
        {"serial_no", a->serial_no, sizeof a->serial_no},
        {"timestamp", a->timestamp, sizeof a->timestamp},
        {"nonce_str", a->nonce_str, sizeof a->nonce_str},
        {"signature", a->signature, sizeof a->signature},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (strlen(fields[i].name) != klen || memcmp(fields[i].name, k, klen) != 0)
            continue;
        if (vlen >= fields[i].size || fields[i].dst[0])
            return PT_EPARSE; /* too long, or given twice */
        memcpy(fields[i].dst, v, vlen);
        fields[i].dst[vlen] = '\0';
        return PT_OK;
    }
    return PT_OK; /* unknown keys are ignored, as the server does */
}

int pt_wechat_parse_authorization(const char *value, struct pt_wechat_auth *out)
{
    static const char scheme[] = "WECHATPAY2-SHA256-RSA2048 ";
    memset(out, 0, sizeof *out);
    if (strncmp(value, scheme, sizeof scheme - 1) != 0)
        return PT_EPARSE;
    const char *p = value + sizeof scheme - 1;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *eq = strchr(p, '=');
        if (!eq || eq[1] != '"')
            return *p ? PT_EPARSE : PT_OK;
        const char *end = strchr(eq + 2, '"');
        if (!end)
            return PT_EPARSE;
        if (auth_field(out, p, (size_t)(eq - p), eq + 2, (size_t)(end - eq - 2)) != PT_OK)
            return PT_EPARSE;
        p = end + 1;
    }
    if (!out->mchid[0] || !out->serial_no[0] || !out->timestamp[0] || !out->nonce_str[0] ||
        !out->signature[0])
        return PT_EPARSE;
    return PT_OK;
}

int pt_wechat_verify(const struct pt_pk *pub, const char *expected_serial, const char *timestamp,
                     const char *nonce, const char *signature, const char *serial, const char *body,
                     size_t body_len)
{
    int rc = PT_ESIG;
    if (!pub || !expected_serial || !*expected_serial || !timestamp || !nonce || !signature ||
        !serial)
        return PT_ESIG;
    /* The serial picks the key: a message naming another key is not ours to
     * accept, even if the signature happened to verify. */
    if (strcasecmp(serial, expected_serial) != 0)
        return PT_ESIG;
    size_t len = 0;
    char *msg = pt_wechat_response_message(timestamp, nonce, body, body_len, &len);
    if (msg && pt_pk_verify_base64(pub, msg, len, signature, strlen(signature)) == PT_OK)
        rc = PT_OK;
    free(msg);
    return rc;
}

int pt_wechat_verify_message(const struct pt_pk *pub, const char *expected_serial,
                             const struct pt_http_response *msg)
{
    return pt_wechat_verify(pub, expected_serial,
                            pt_http_response_header(msg, "Wechatpay-Timestamp"),
                            pt_http_response_header(msg, "Wechatpay-Nonce"),
                            pt_http_response_header(msg, "Wechatpay-Signature"),
                            pt_http_response_header(msg, "Wechatpay-Serial"),
                            msg->body ? msg->body : "", msg->body ? msg->body_len : 0);
}

/* ---- resource encryption --------------------------------------------------- */

int pt_wechat_decrypt(const unsigned char *key, size_t keylen, const char *nonce, const char *aad,
                      const char *ciphertext_b64, char **plain, size_t *plen)
{
    int rc = PT_EPARSE;
    if (keylen != 32)
        return PT_EINVAL;
    if (!nonce || !*nonce || !ciphertext_b64)
        return PT_EPARSE;
    size_t b64len = strlen(ciphertext_b64);
    if (b64len > WECHAT_MAX_TEXT)
        return PT_ETOOBIG;
    size_t cap = b64len / 4 * 3 + 3, n = 0;
    unsigned char *ct = malloc(cap);
    char *pt = malloc(cap + 1);
    if (!ct || !pt) {
        rc = PT_ENOMEM;
        goto out;
    }
    if (pt_base64_decode(ciphertext_b64, b64len, ct, cap, &n) != PT_OK || n < PT_GCM_TAG_LEN)
        goto out;
    size_t ctlen = n - PT_GCM_TAG_LEN;
    rc = pt_aes256gcm_decrypt(key, (const unsigned char *)nonce, strlen(nonce),
                              (const unsigned char *)(aad ? aad : ""), aad ? strlen(aad) : 0, ct,
                              ctlen, ct + ctlen, (unsigned char *)pt);
    if (rc != PT_OK)
        goto out;
    pt[ctlen] = '\0';
    *plain = pt;
    pt = NULL;
    if (plen)
        *plen = ctlen;
out:
    free(ct);
    free(pt);
    return rc;
}

int pt_wechat_encrypt(const unsigned char *key, size_t keylen, const char *nonce, const char *aad,
                      const char *plain, size_t plen, char **out)
{
    int rc = PT_ENOMEM;
    if (keylen != 32 || !nonce || !*nonce)
        return PT_EINVAL;
    if (plen > WECHAT_MAX_TEXT)
        return PT_ETOOBIG;
    unsigned char *ct = malloc(plen + PT_GCM_TAG_LEN);
    size_t outlen = PT_BASE64_LEN(plen + PT_GCM_TAG_LEN);
    char *b64 = malloc(outlen);
    if (!ct || !b64)
        goto out;
    rc = pt_aes256gcm_encrypt(key, (const unsigned char *)nonce, strlen(nonce),
                              (const unsigned char *)(aad ? aad : ""), aad ? strlen(aad) : 0,
                              (const unsigned char *)plain, plen, ct, ct + plen);
    if (rc == PT_OK)
        rc = pt_base64_encode(ct, plen + PT_GCM_TAG_LEN, b64, outlen, NULL);
    if (rc == PT_OK) {
        *out = b64;
        b64 = NULL;
    }
out:
    free(ct);
    free(b64);
    return rc;
}

int pt_wechat_notify_plaintext(const unsigned char *key, size_t keylen, const char *body,
                               size_t len, char **plain, size_t *plen)
{
    int rc = PT_EPARSE;
    cJSON *j = cJSON_ParseWithLength(body, len);
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(j, "resource");
    const char *alg = pt__jstr(res, "algorithm");
    if (!cJSON_IsObject(res) || !alg || strcmp(alg, "AEAD_AES_256_GCM") != 0)
        goto out;
    rc = pt_wechat_decrypt(key, keylen, pt__jstr(res, "nonce"), pt__jstr(res, "associated_data"),
                           pt__jstr(res, "ciphertext"), plain, plen);
out:
    cJSON_Delete(j);
    return rc;
}

/* ---- build ----------------------------------------------------------------
 *
 * Amounts (SPEC 18): WeChat Pay's amount.total / amount.refund here and
 * total_fee in APIv2 are integers "单位为分" (fen, for CNY), and for other
 * currencies "外币交易的支付金额精确到币种的最小单位，参数值不能带小数点" (WeChat
 * Pay's 参数规定 / 交易金额 rules of the APIv2 and APIv3 references,
 * pay.weixin.qq.com): the currency's smallest unit, which is ISO 4217's.
 * So a WeChat amount is payterm's minor units as they are, both ways, and
 * the adapter has no amount_unit (every amount is representable).
 */

void pt_wechat_time(int64_t ms, char out[PT_WECHAT_TIME_LEN])
{
    /* China Standard Time has had no daylight saving since 1991. */
    time_t t = (time_t)(ms / 1000) + 8 * 3600;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, PT_WECHAT_TIME_LEN, "%Y-%m-%dT%H:%M:%S+08:00", &tm);
}

/*
 * The Native create (pay.weixin.qq.com/doc/v3/merchant/4012525171, "Native
 * 下单"), fields in the page's order.  time_expire, the code's expiry (SPEC
 * 18): "支付结束时间 ... 超过此时间后，用户将无法对该笔订单进行支付 ... 需遵循
 * rfc3339标准格式 ... 示例：2015-05-20T13:29:35+08:00", written in China time
 * like the example.  The page also says it is "仅在用户首次下单时可设置，且不
 * 允许后续修改，尝试修改将导致错误": a repeat of the create must carry the very
 * same value (env->expire_at_ms is the same for every repeat), and that it
 * is not the time WeChat closes the order - payterm closes it (close
 * refused in an order's first 5 minutes: close_min_age_s) or, before that,
 * confirms by query that it was not paid.
 */
static char *native_body(const struct pt_gw_config *cfg, const struct pt_charge *c,
                         const struct pt_gw_env *env)
{
    struct pt_buf b;
    pt_buf_init(&b, WECHAT_MAX_TEXT);
    pt_buf_puts(&b, "{\"appid\":");
    pt_buf_json_string(&b, cfg->app_id);
    pt_buf_puts(&b, ",\"mchid\":");
    pt_buf_json_string(&b, cfg->merchant_id);
    pt_buf_puts(&b, ",\"description\":");
    pt_buf_json_string(&b, c->subject[0] ? c->subject : c->order_id);
    pt_buf_puts(&b, ",\"out_trade_no\":");
    pt_buf_json_string(&b, c->order_id);
    if (env->expire_at_ms > 0) {
        char te[PT_WECHAT_TIME_LEN];
        pt_wechat_time(env->expire_at_ms, te);
        pt_buf_puts(&b, ",\"time_expire\":");
        pt_buf_json_string(&b, te);
    }
    pt_buf_puts(&b, ",\"notify_url\":");
    pt_buf_json_string(&b, cfg->notify_url);
    pt_buf_printf(&b, ",\"amount\":{\"total\":%lld,\"currency\":", (long long)c->amount);
    pt_buf_json_string(&b, c->currency);
    pt_buf_puts(&b, "}}");
    return pt_buf_take(&b, NULL);
}

/* Method, path and body of op; *body is malloc'd or NULL (GET).  Cancel
 * and close are both the order's close, which WeChat refuses for a paid
 * order (ORDERPAID). */
static int wechat_route(const struct pt_gw_config *cfg, enum pt_gw_op op, const struct pt_charge *c,
                        const struct pt_gw_env *env, const char **method, char *path,
                        size_t pathlen, char **body)
{
    *body = NULL;
    if (op == PT_GW_PAY) {
        if (strcmp(c->method, "qr") != 0 || !cfg->app_id[0] || !cfg->notify_url[0] ||
            c->amount <= 0 || !pt_money_currency_valid(c->currency))
            return PT_EINVAL;
        *method = "POST";
        snprintf(path, pathlen, "/v3/pay/transactions/native");
        *body = native_body(cfg, c, env);
    } else if (op == PT_GW_QUERY) {
        *method = "GET";
        snprintf(path, pathlen, "/v3/pay/transactions/out-trade-no/%s?mchid=%s", c->order_id,
                 cfg->merchant_id);
        return PT_OK;
    } else {
        struct pt_buf b;
        *method = "POST";
        snprintf(path, pathlen, "/v3/pay/transactions/out-trade-no/%s/close", c->order_id);
        pt_buf_init(&b, 1024);
        pt_buf_puts(&b, "{\"mchid\":");
        pt_buf_json_string(&b, cfg->merchant_id);
        pt_buf_putc(&b, '}');
        *body = pt_buf_take(&b, NULL);
    }
    return *body ? PT_OK : PT_ENOMEM;
}

static int sign_request(const struct pt_gw_config *cfg, const struct pt_gw_env *env,
                        struct pt_http_request *r)
{
    char ts[24], sig[PT_WECHAT_SIG_MAX], auth[2048];
    snprintf(ts, sizeof ts, "%lld", (long long)(env->now_ms / 1000));
    size_t len = 0;
    char *msg = pt_wechat_request_message(r->method, pt_wechat_url_path(r->url), ts, env->nonce,
                                          r->body, r->body_len, &len);
    if (!msg)
        return PT_ENOMEM;
    int rc = pt_pk_sign_base64(cfg->private_key, msg, len, sig, sizeof sig);
    free(msg);
    if (rc != PT_OK)
        rc = PT_EKEY; /* the caller names the key (pt_gw_build_error) */
    if (rc == PT_OK)
        rc = pt_wechat_authorization(cfg->merchant_id, cfg->serial_no, ts, env->nonce, sig, auth,
                                     sizeof auth);
    if (rc == PT_OK)
        rc = pt_http_request_add_header(r, "Authorization", auth);
    return rc;
}

/* What every APIv3 request needs from the configuration and the environment. */
static int can_sign(const struct pt_gw_config *cfg, const struct pt_gw_env *env)
{
    return cfg->private_key && cfg->merchant_id[0] && cfg->serial_no[0] && cfg->endpoint[0] &&
           env && env->nonce && *env->nonce && pt__id_safe(cfg->merchant_id);
}

/* Fills *out with method, path and body (taken over, may be NULL for GET),
 * the headers APIv3 wants and the Authorization; *out is left empty on
 * failure. */
static int finish_request(const struct pt_gw_config *cfg, const struct pt_gw_env *env,
                          const char *method, const char *path, char *body,
                          struct pt_http_request *out)
{
    int rc = pt__request_start(out, method, cfg->endpoint, path);
    if (rc != PT_OK) {
        free(body);
        return rc;
    }
    pt__request_body(out, body, body ? strlen(body) : 0);
    rc = pt_http_request_add_header(out, "Accept", "application/json");
    if (rc == PT_OK && body)
        rc = pt_http_request_add_header(out, "Content-Type", "application/json");
    /* APIv3 refuses requests without a User-Agent. */
    if (rc == PT_OK)
        rc = pt_http_request_add_header(out, "User-Agent", "payterm/" PT_VERSION);
    if (rc == PT_OK)
        rc = sign_request(cfg, env, out);
    if (rc != PT_OK)
        pt_http_request_free(out);
    return rc;
}

int pt__wechat_v3_request(const struct pt_gw_config *cfg, const struct pt_gw_env *env,
                          const char *method, const char *path, struct pt_http_request *out)
{
    if (!can_sign(cfg, env))
        return PT_EINVAL;
    return finish_request(cfg, env, method, path, NULL, out);
}

static int wechat_build(const struct pt_gw_config *cfg, enum pt_gw_op op, const struct pt_charge *c,
                        const struct pt_gw_env *env, struct pt_http_request *out)
{
    const char *method = NULL;
    char path[512];
    char *body = NULL;
    if (strcmp(c->method, "barcode") == 0) /* APIv2 has a reverse, no close */
        return op == PT_GW_CLOSE ? PT_EUNSUPPORTED : pt__wechat_v2_build(cfg, op, c, env, out);
    if (!can_sign(cfg, env) || !pt__id_safe(c->order_id))
        return PT_EINVAL;
    int rc = wechat_route(cfg, op, c, env, &method, path, sizeof path, &body);
    if (rc != PT_OK)
        return rc;
    return finish_request(cfg, env, method, path, body, out);
}

/* ---- refunds: build (SPEC 5a) ---------------------------------------------- */

/* WeChat shows the reason in the customer's refund message and takes at most
 * 80 bytes of it. */
#define WECHAT_REASON_MAX 80
/* out_refund_no: at most 64 of [A-Za-z0-9_-|*@]. */
#define WECHAT_REFUND_NO_MAX 64

/* payterm's refund ids are [A-Za-z0-9_.-]; WeChat refuses the '.', so such a
 * refund is never sent (WeChat would answer PARAM_ERROR) and never queried. */
static int refund_no_ok(const char *s)
{
    return pt__id_safe(s) && !strchr(s, '.') && strlen(s) <= WECHAT_REFUND_NO_MAX;
}

/* The longest prefix of reason, in whole UTF-8 characters, that WeChat
 * takes.  A cut reason is still shown to the customer; a long one would be a
 * PARAM_ERROR and a failed refund.  payterm keeps the full reason itself. */
static void wechat_reason(const char *reason, char out[WECHAT_REASON_MAX + 1])
{
    size_t n = strlen(reason);
    if (n > WECHAT_REASON_MAX) {
        n = WECHAT_REASON_MAX;
        while (n > 0 && ((unsigned char)reason[n] & 0xC0) == 0x80)
            n--; /* reason[n] continues a character: cut before it starts */
    }
    memcpy(out, reason, n);
    out[n] = '\0';
}

static char *refund_body(const struct pt_gw_config *cfg, const struct pt_charge *c,
                         const struct pt_refund *r)
{
    char reason[WECHAT_REASON_MAX + 1];
    struct pt_buf b;
    wechat_reason(r->reason, reason);
    pt_buf_init(&b, WECHAT_MAX_TEXT);
    pt_buf_puts(&b, "{\"out_trade_no\":");
    pt_buf_json_string(&b, c->order_id);
    pt_buf_puts(&b, ",\"out_refund_no\":");
    pt_buf_json_string(&b, r->refund_id);
    if (reason[0]) {
        pt_buf_puts(&b, ",\"reason\":");
        pt_buf_json_string(&b, reason);
    }
    /* Without notify_url WeChat uses the one configured in the merchant
     * platform, or sends none: the refund is then settled by query. */
    if (cfg->notify_url[0]) {
        pt_buf_puts(&b, ",\"notify_url\":");
        pt_buf_json_string(&b, cfg->notify_url);
    }
    pt_buf_printf(&b,
                  ",\"amount\":{\"refund\":%lld,\"total\":%lld,\"currency\":", (long long)r->amount,
                  (long long)c->amount);
    pt_buf_json_string(&b, c->currency);
    pt_buf_puts(&b, "}}");
    return pt_buf_take(&b, NULL);
}

static int wechat_build_refund(const struct pt_gw_config *cfg, enum pt_gw_refund_op op,
                               const struct pt_charge *c, const struct pt_refund *r,
                               const struct pt_gw_env *env, struct pt_http_request *out)
{
    char path[512];
    if (!can_sign(cfg, env) || !pt__id_safe(c->order_id) || !refund_no_ok(r->refund_id) ||
        strcmp(r->order_id, c->order_id) != 0)
        return PT_EINVAL;
    if (op == PT_GW_REFUND_QUERY) {
        snprintf(path, sizeof path, "/v3/refund/domestic/refunds/%s", r->refund_id);
        return finish_request(cfg, env, "GET", path, NULL, out);
    }
    /* amount.total must be the order's amount and amount.currency its
     * currency: WeChat checks both against the order. */
    if (r->amount <= 0 || c->amount <= 0 || r->amount > c->amount ||
        !pt_money_currency_valid(c->currency) || strcmp(r->currency, c->currency) != 0)
        return PT_EINVAL;
    char *body = refund_body(cfg, c, r);
    if (!body)
        return PT_ENOMEM;
    return finish_request(cfg, env, "POST", "/v3/refund/domestic/refunds", body, out);
}

/* ---- parse ---------------------------------------------------------------- */

static const char *expected_serial(const struct pt_gw_config *cfg)
{
    if (cfg->platform_serial[0])
        return cfg->platform_serial;
    return cfg->peer_key ? pt_pk_serial(cfg->peer_key) : "";
}

/*
 * Verifies an answer or a notification with the platform key its
 * Wechatpay-Serial names: the configured one (peer_key under its serial,
 * checked first and the only one for a configuration without a trust store,
 * as tests and `payterm verify` build them), else any other key of the
 * trust store (cfg->peer_keys: the list form's further entries, and the
 * downloaded ones).  PT_OK or PT_ESIG.
 */
static int verify_platform(const struct pt_gw_config *cfg, const struct pt_http_response *msg)
{
    const char *serial = pt_http_response_header(msg, "Wechatpay-Serial");
    if (!cfg->peer_keys || (serial && strcasecmp(serial, expected_serial(cfg)) == 0))
        return pt_wechat_verify_message(cfg->peer_key, expected_serial(cfg), msg);
    const char *ts = pt_http_response_header(msg, "Wechatpay-Timestamp");
    const char *nonce = pt_http_response_header(msg, "Wechatpay-Nonce");
    const char *sig = pt_http_response_header(msg, "Wechatpay-Signature");
    if (!ts || !nonce || !sig || !serial)
        return PT_ESIG;
    size_t len = 0;
    char *m = pt_wechat_response_message(ts, nonce, msg->body, msg->body ? msg->body_len : 0, &len);
    int rc = m ? pt_gw_keyring_verify(cfg->peer_keys, serial, m, len, sig) : PT_ENOMEM;
    free(m);
    return rc == PT_OK ? PT_OK : PT_ESIG;
}

int pt__wechat_v3_verify(const struct pt_gw_config *cfg, const struct pt_http_response *msg)
{
    return verify_platform(cfg, msg);
}

static int code_in(const char *code, const char *const *list)
{
    for (; code && *list; list++)
        if (strcmp(code, *list) == 0)
            return 1;
    return 0;
}

/* Reads a transaction object (query answer or decrypted notification). */
static int read_transaction(const char *text, size_t len, const cJSON *o, char *trade_no,
                            size_t trade_no_len, int64_t *amount, char currency[4])
{
    static const char *const total[] = {"amount", "total", NULL};
    const cJSON *amt = cJSON_GetObjectItemCaseSensitive(o, "amount");
    pt__copy(trade_no, trade_no_len, pt__jstr(o, "transaction_id"));
    if (!amt)
        return PT_OK; /* NOTPAY answers may omit amounts */
    const char *cur = pt__jstr(amt, "currency");
    if (pt__currency_upper(cur ? cur : "CNY", currency) != PT_OK)
        return PT_EPARSE;
    return pt_jscan_int(text, len, total, amount);
}

static enum pt_outcome trade_state_outcome(const char *st)
{
    if (!st)
        return PT_OUTCOME_AMBIGUOUS;
    if (strcmp(st, "SUCCESS") == 0 || strcmp(st, "REFUND") == 0)
        return PT_OUTCOME_SUCCESS; /* REFUND: it was paid, then refunded */
    if (strcmp(st, "NOTPAY") == 0 || strcmp(st, "USERPAYING") == 0)
        return PT_OUTCOME_PENDING;
    if (strcmp(st, "CLOSED") == 0 || strcmp(st, "REVOKED") == 0)
        return PT_OUTCOME_CANCELED;
    if (strcmp(st, "PAYERROR") == 0)
        return PT_OUTCOME_DECLINED;
    return PT_OUTCOME_AMBIGUOUS;
}

static void classify_query(const struct pt_http_response *resp, const cJSON *o,
                           struct pt_gw_result *out)
{
    const char *code = pt__jstr(o, "code");
    if (resp->status == 404 ||
        (code && (strcmp(code, "ORDER_NOT_EXIST") == 0 || strcmp(code, "ORDERNOTEXIST") == 0))) {
        pt__result(out, PT_OUTCOME_NOT_FOUND, code ? code : "ORDER_NOT_EXIST",
                   pt__jstr(o, "message"));
        return;
    }
    if (resp->status != 200) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, code, pt__jstr(o, "message"));
        return;
    }
    const char *st = pt__jstr(o, "trade_state");
    pt__result(out, trade_state_outcome(st), st, pt__jstr(o, "trade_state_desc"));
    /* 用户支付中: the customer is confirming, not a code nobody paid. */
    out->paying = st && strcmp(st, "USERPAYING") == 0;
    if (read_transaction(resp->body, resp->body_len, o, out->trade_no, sizeof out->trade_no,
                         &out->amount, out->currency) != PT_OK &&
        out->outcome == PT_OUTCOME_SUCCESS)
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_amount",
                   "WeChat reported an amount payterm cannot read exactly");
}

static void classify_pay(const struct pt_http_response *resp, const cJSON *o,
                         struct pt_gw_result *out)
{
    /* Answers that mean "not decided here": ask again with a query. */
    static const char *const unsure[] = {"SYSTEM_ERROR", "FREQUENCY_LIMITED", "BANK_ERROR",
                                         "ORDERPAID",    "ORDER_PAID",        NULL};
    const char *code = pt__jstr(o, "code");
    const char *url = pt__jstr(o, "code_url");
    if (resp->status == 200 && url && *url) {
        pt__result(out, PT_OUTCOME_PENDING, NULL, NULL);
        pt__copy(out->action_url, sizeof out->action_url, url);
    } else if (resp->status == 200) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_response", "native without code_url");
    } else if (code && strcmp(code, "OUT_TRADE_NO_USED") == 0) {
        /* Same out_trade_no, other parameters: someone must look. */
        pt__result(out, PT_OUTCOME_AMBIGUOUS, code, pt__jstr(o, "message"));
        out->review = 1;
    } else if (code_in(code, unsure) || resp->status == 429) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, code, pt__jstr(o, "message"));
    } else {
        pt__result(out, PT_OUTCOME_DECLINED, code ? code : "http_error", pt__jstr(o, "message"));
    }
}

static void classify_close(const struct pt_http_response *resp, const cJSON *o,
                           struct pt_gw_result *out)
{
    const char *code = pt__jstr(o, "code");
    if (resp->status == 204 || resp->status == 200)
        pt__result(out, PT_OUTCOME_CANCELED, NULL, NULL);
    else if (code && strcmp(code, "ORDER_CLOSED") == 0)
        pt__result(out, PT_OUTCOME_CANCELED, code, pt__jstr(o, "message"));
    else if (resp->status == 404 ||
             (code && (strcmp(code, "ORDER_NOT_EXIST") == 0 || strcmp(code, "ORDERNOTEXIST") == 0)))
        /* WeChat never had the order (the native request was lost before it
         * committed): as definite as for a query, and nothing can be paid. */
        pt__result(out, PT_OUTCOME_NOT_FOUND, code ? code : "ORDER_NOT_EXIST",
                   pt__jstr(o, "message"));
    else
        pt__result(out, PT_OUTCOME_AMBIGUOUS, code ? code : "http_error", pt__jstr(o, "message"));
}

/*
 * What every APIv3 answer passes before its body is read: a 5xx (or no
 * HTTP status), a signature that does not verify - refusals too: the
 * official SDK skips non-2xx answers, but a forged NOT_ENOUGH would fail a
 * refund that went through and free its amount for a second one - and a
 * body that is not a JSON object are ambiguous (out set, 0).  Else 1, *o
 * the body (NULL when empty; the caller deletes it).
 */
static int answer_body(const struct pt_gw_config *cfg, const struct pt_http_response *resp,
                       struct pt_gw_result *out, cJSON **o)
{
    *o = NULL;
    if (resp->status >= 500 || resp->status < 200) {
        char code[16];
        snprintf(code, sizeof code, "http_%d", resp->status);
        pt__result(out, PT_OUTCOME_AMBIGUOUS, code, "WeChat Pay server error");
        return 0;
    }
    if (verify_platform(cfg, resp) != PT_OK) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "invalid_signature",
                   "WeChat Pay response signature does not verify");
        return 0;
    }
    *o = resp->body_len ? cJSON_ParseWithLength(resp->body, resp->body_len) : NULL;
    if (resp->body_len && !cJSON_IsObject(*o)) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_response", "response is not JSON");
        cJSON_Delete(*o);
        *o = NULL;
        return 0;
    }
    return 1;
}

static int wechat_parse(const struct pt_gw_config *cfg, enum pt_gw_op op, const struct pt_charge *c,
                        const struct pt_http_response *resp, struct pt_gw_result *out)
{
    if (strcmp(c->method, "barcode") == 0)
        return pt__wechat_v2_parse(cfg, op, c, resp, out);
    memset(out, 0, sizeof *out);
    cJSON *o;
    if (!answer_body(cfg, resp, out, &o))
        return PT_OK; /* answered ambiguous */
    if (op == PT_GW_PAY)
        classify_pay(resp, o, out);
    else if (op == PT_GW_QUERY)
        classify_query(resp, o, out);
    else
        classify_close(resp, o, out);
    cJSON_Delete(o);
    return PT_OK;
}

/* ---- refunds: parse ------------------------------------------------------ */

/* A refund's status, in an answer or a notification's refund_status. */
static enum pt_outcome refund_status_outcome(const char *st)
{
    if (!st)
        return PT_OUTCOME_AMBIGUOUS;
    if (strcmp(st, "SUCCESS") == 0)
        return PT_OUTCOME_SUCCESS;
    if (strcmp(st, "PROCESSING") == 0)
        return PT_OUTCOME_PENDING; /* accepted; a notification or a query tells the end */
    /* ABNORMAL: the original route failed (the customer's card was cancelled
     * or frozen), the money did not go back yet.  WeChat lets the merchant
     * send it elsewhere by hand (apply-abnormal-refund), and then it goes
     * back after all: not final.  The refund stays PENDING - its amount
     * still counts against the charge, so a second refund through payterm
     * cannot pay the customer twice - and an operator is asked (review,
     * set by the caller).  CLOSED is final. */
    if (strcmp(st, "ABNORMAL") == 0)
        return PT_OUTCOME_PENDING;
    if (strcmp(st, "CLOSED") == 0)
        return PT_OUTCOME_DECLINED;
    return PT_OUTCOME_AMBIGUOUS;
}

static const char *refund_status_message(const char *st)
{
    if (st && strcmp(st, "ABNORMAL") == 0)
        return "WeChat Pay could not return the money by the original route (refund ABNORMAL)";
    if (st && strcmp(st, "CLOSED") == 0)
        return "WeChat Pay closed the refund";
    return NULL;
}

/*
 * A 200 answer (the refund, or the query of it): its status, once it is
 * certain the answer is about this refund of this order, for this amount.
 */
static void classify_refund(const struct pt_http_response *resp, const cJSON *o,
                            const struct pt_charge *c, const struct pt_refund *r,
                            struct pt_gw_result *out)
{
    static const char *const refunded[] = {"amount", "refund", NULL};
    char msg[PT_MESSAGE_MAX];
    const char *st = pt__jstr(o, "status");
    const char *orn = pt__jstr(o, "out_refund_no"), *otn = pt__jstr(o, "out_trade_no");
    const cJSON *amt = cJSON_GetObjectItemCaseSensitive(o, "amount");
    const char *cur = pt__jstr(amt, "currency");
    if (!cJSON_IsObject(o) || !st) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_response", "refund answer without status");
        return;
    }
    pt__copy(out->trade_no, sizeof out->trade_no, pt__jstr(o, "refund_id"));
    if (!orn || strcmp(orn, r->refund_id) != 0) {
        snprintf(msg, sizeof msg, "WeChat Pay answered about refund %.64s, not %s",
                 orn ? orn : "(none)", r->refund_id);
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "refund_id_mismatch", msg);
        return;
    }
    if (!otn || strcmp(otn, c->order_id) != 0) {
        snprintf(msg, sizeof msg, "WeChat Pay answered about order %.64s, not %s",
                 otn ? otn : "(none)", c->order_id);
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "order_id_mismatch", msg);
        return;
    }
    /* The amount is read from the text, exactly: 500.0 is not 500.  An
     * answer without a currency is in CNY, domestic WeChat Pay's only one. */
    if (pt_jscan_int(resp->body, resp->body_len, refunded, &out->amount) != PT_OK ||
        pt__currency_upper(cur ? cur : "CNY", out->currency) != PT_OK) {
        out->amount = 0;
        out->currency[0] = '\0';
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_amount",
                   "WeChat Pay reported a refund amount payterm cannot read exactly");
        return;
    }
    /* Same out_refund_no, other amount: WeChat and payterm disagree about
     * what this refund is; an operator must look (SPEC 5, answers). */
    if (out->amount != r->amount || strcmp(out->currency, r->currency) != 0) {
        int amount_differs = out->amount != r->amount;
        snprintf(msg, sizeof msg, "WeChat Pay reports a refund of %lld %s, payterm sent %lld %s",
                 (long long)out->amount, out->currency, (long long)r->amount, r->currency);
        pt__result(out, PT_OUTCOME_AMBIGUOUS,
                   amount_differs ? "amount_mismatch" : "currency_mismatch", msg);
        out->review = 1;
        return;
    }
    pt__result(out, refund_status_outcome(st), st, refund_status_message(st));
    if (st && strcmp(st, "ABNORMAL") == 0)
        out->review = 1; /* the money waits for the merchant's decision */
}

/*
 * A refused refund (HTTP 4xx).  WeChat's table for POST
 * /v3/refund/domestic/refunds says of PARAM_ERROR, INVALID_REQUEST (the
 * business rules: over-refund "申请退款金额超过订单可退金额", refund period
 * over...), NOT_ENOUGH (the merchant's balance), USER_ACCOUNT_ABNORMAL,
 * NO_AUTH: "此状态代表退款申请失败" - the refund was not accepted.
 * RESOURCE_NOT_EXISTS: no such paid order; MCH_NOT_EXISTS, SIGN_ERROR: our
 * configuration.  Those are final.  FREQUENCY_LIMITED (429) and SYSTEM_ERROR
 * are to be retried with the same out_refund_no; a code payterm does not
 * know is never taken for a decline either: all are settled by query.
 */
static void classify_refund_error(enum pt_gw_refund_op op, const struct pt_http_response *resp,
                                  const cJSON *o, struct pt_gw_result *out)
{
    static const char *const final[] = {
        "PARAM_ERROR",           "INVALID_REQUEST", "NOT_ENOUGH",
        "USER_ACCOUNT_ABNORMAL", "NO_AUTH",         "MCH_NOT_EXISTS",
        "RESOURCE_NOT_EXISTS",   "SIGN_ERROR",      NULL};
    const char *code = pt__jstr(o, "code"), *message = pt__jstr(o, "message");
    char http[16];
    snprintf(http, sizeof http, "http_%d", resp->status);
    if (op == PT_GW_REFUND_QUERY) {
        /* No refund under this out_refund_no: it was never executed, and the
         * same refund_id may be sent again.  Any other failed query says
         * nothing about the refund. */
        if (resp->status == 404 && code && strcmp(code, "RESOURCE_NOT_EXISTS") == 0)
            pt__result(out, PT_OUTCOME_NOT_FOUND, code, message);
        else
            pt__result(out, PT_OUTCOME_AMBIGUOUS, code ? code : http, message);
        return;
    }
    if (resp->status != 429 && code_in(code, final))
        pt__result(out, PT_OUTCOME_DECLINED, code, message);
    else
        pt__result(out, PT_OUTCOME_AMBIGUOUS, code ? code : http, message);
}

static int wechat_parse_refund(const struct pt_gw_config *cfg, enum pt_gw_refund_op op,
                               const struct pt_charge *c, const struct pt_refund *r,
                               const struct pt_http_response *resp, struct pt_gw_result *out)
{
    memset(out, 0, sizeof *out);
    cJSON *o;
    if (!answer_body(cfg, resp, out, &o))
        return PT_OK; /* answered ambiguous */
    if (resp->status == 200)
        classify_refund(resp, o, c, r, out);
    else
        classify_refund_error(op, resp, o, out);
    cJSON_Delete(o);
    return PT_OK;
}

/* ---- notifications ------------------------------------------------------- */

/* TRANSACTION.SUCCESS: the payment, deduplicated by transaction_id. */
static int fill_payment_notify(const struct pt_gw_config *cfg, const char *plain, size_t plen,
                               const cJSON *o, struct pt_notification *n)
{
    const char *otn = pt__jstr(o, "out_trade_no"), *tid = pt__jstr(o, "transaction_id");
    if (!cJSON_IsObject(o) || !otn || !*otn || !tid || !*tid || strlen(otn) >= sizeof n->order_id ||
        strlen(tid) >= sizeof n->dedup_id)
        return PT_EPARSE;
    pt__copy(n->order_id, sizeof n->order_id, otn);
    pt__copy(n->dedup_id, sizeof n->dedup_id, tid);
    pt__copy(n->merchant_id, sizeof n->merchant_id, pt__jstr(o, "mchid"));
    /* Both the merchant and the app: one mchid can serve several apps. */
    n->merchant_ok = pt__same_id(pt__jstr(o, "mchid"), cfg->merchant_id) &&
                     pt__same_id(pt__jstr(o, "appid"), cfg->app_id);
    if (read_transaction(plain, plen, o, n->trade_no, sizeof n->trade_no, &n->amount,
                         n->currency) != PT_OK ||
        !n->currency[0])
        return PT_EPARSE; /* a success without a readable amount is refused */
    n->status = trade_state_outcome(pt__jstr(o, "trade_state"));
    n->relevant = n->status != PT_OUTCOME_AMBIGUOUS;
    if (!n->relevant)
        n->status = PT_OUTCOME_PENDING;
    return PT_OK;
}

/* The refund_status a refund event announces ("REFUND.CLOSED" -> "CLOSED"),
 * or NULL for an event that is not one of the three refund results. */
static const char *refund_event_status(const char *event_type)
{
    static const char *const events[] = {"REFUND.SUCCESS", "REFUND.ABNORMAL", "REFUND.CLOSED",
                                         NULL};
    return code_in(event_type, events) ? event_type + strlen("REFUND.") : NULL;
}

/* 1 when s is present, not empty and shorter than size. */
static int fits(const char *s, size_t size)
{
    return s && *s && strlen(s) < size;
}

/*
 * REFUND.SUCCESS / REFUND.ABNORMAL / REFUND.CLOSED.  The resource holds mchid
 * but no appid, so the merchant binding is mchid alone (SPEC 5); it binds to
 * the refund by out_refund_no (payterm's refund id) and refund_id (WeChat's
 * refund number).  Deduplicated by the notification id: WeChat resends a
 * notification under the same id.
 *
 * An event whose resource does not state the result its event_type names -
 * no refund_status at all (not a refund resource), or another one - is
 * acknowledged and applies nothing (relevant = 0): payterm never guesses
 * which of two signed fields is true, WeChat stops resending, and the refund
 * is settled by its query, which is one signed, self-consistent answer.
 */
static int fill_refund_notify(const struct pt_gw_config *cfg, const char *announced,
                              const char *plain, size_t plen, const cJSON *o,
                              struct pt_notification *n)
{
    static const char *const refunded[] = {"amount", "refund", NULL};
    const char *st = pt__jstr(o, "refund_status");
    if (!st || strcmp(st, announced) != 0)
        return PT_OK; /* relevant stays 0 */
    const char *orn = pt__jstr(o, "out_refund_no"), *rid = pt__jstr(o, "refund_id");
    const char *otn = pt__jstr(o, "out_trade_no"), *tid = pt__jstr(o, "transaction_id");
    const char *cur = pt__jstr(cJSON_GetObjectItemCaseSensitive(o, "amount"), "currency");
    if (!fits(orn, sizeof n->refund_id) || !fits(rid, sizeof n->refund_no) ||
        !fits(otn, sizeof n->order_id) || (tid && strlen(tid) >= sizeof n->trade_no))
        return PT_EPARSE;
    if (pt_jscan_int(plain, plen, refunded, &n->amount) != PT_OK)
        return PT_EPARSE; /* a refund without a readable amount is refused, never guessed */
    /* WeChat's refund notification example carries no currency (currency
     * stays "" and the refund's own is assumed); one that is there must be a
     * currency. */
    if (cur && pt__currency_upper(cur, n->currency) != PT_OK)
        return PT_EPARSE;
    pt__copy(n->refund_id, sizeof n->refund_id, orn);
    pt__copy(n->refund_no, sizeof n->refund_no, rid);
    pt__copy(n->order_id, sizeof n->order_id, otn);
    pt__copy(n->trade_no, sizeof n->trade_no, tid);
    pt__copy(n->merchant_id, sizeof n->merchant_id, pt__jstr(o, "mchid"));
    n->merchant_ok = pt__same_id(pt__jstr(o, "mchid"), cfg->merchant_id);
    n->status = refund_status_outcome(st);
    n->refund = 1;
    n->relevant = 1;
    return PT_OK;
}

static int fill_notify(const struct pt_gw_config *cfg, const char *event_id, const char *event_type,
                       const char *plain, size_t plen, struct pt_notification *n)
{
    int rc = PT_OK;
    cJSON *o = cJSON_ParseWithLength(plain, plen);
    const char *announced = refund_event_status(event_type);
    pt__copy(n->gateway, sizeof n->gateway, "wechat");
    if (strcmp(event_type, "TRANSACTION.SUCCESS") == 0) {
        rc = fill_payment_notify(cfg, plain, plen, o, n);
    } else if (announced) {
        if (strlen(event_id) >= sizeof n->dedup_id)
            rc = PT_EPARSE;
        pt__copy(n->dedup_id, sizeof n->dedup_id, event_id);
        if (rc == PT_OK)
            rc = fill_refund_notify(cfg, announced, plain, plen, o, n);
    } else {
        /* Other events: verified, acknowledged, nothing to apply. */
        pt__copy(n->dedup_id, sizeof n->dedup_id, event_id);
    }
    cJSON_Delete(o);
    return rc;
}

static int wechat_parse_notify(const struct pt_gw_config *cfg, const struct pt_http_response *msg,
                               const struct pt_gw_env *env, struct pt_notification *out)
{
    char *plain = NULL;
    size_t plen = 0;
    memset(out, 0, sizeof *out);
    int rc = verify_platform(cfg, msg);
    if (rc != PT_OK)
        return PT_ESIG;
    const char *ts = pt_http_response_header(msg, "Wechatpay-Timestamp");
    if (env && env->now_ms > 0 && !pt__within_tolerance(env, strtoll(ts, NULL, 10), 0))
        return PT_ESIG; /* a replayed old notification */
    rc = pt_wechat_notify_plaintext(cfg->secret, cfg->secret_len, msg->body, msg->body_len, &plain,
                                    &plen);
    if (rc != PT_OK)
        return rc == PT_EPARSE ? PT_EPARSE : PT_ESIG;
    cJSON *j = cJSON_ParseWithLength(msg->body, msg->body_len);
    const char *id = pt__jstr(j, "id"), *type = pt__jstr(j, "event_type");
    rc = id && type ? fill_notify(cfg, id, type, plain, plen, out) : PT_EPARSE;
    cJSON_Delete(j);
    pt_zeroize(plain, plen);
    free(plain);
    if (rc != PT_OK)
        memset(out, 0, sizeof *out);
    return rc;
}

/* ---- platform certificates (SPEC 8: keys rotate) --------------------------- */

/*
 * WeChat Pay replaces its platform certificate from time to time; for a
 * while old and new are both valid and GET /v3/certificates lists both, each
 * encrypted with the merchant's APIv3 key (associated_data "certificate").
 * The answer is signed like every other, and it is believed only when a key
 * payterm already trusts signed it: a certificate taken from the answer
 * itself would let whoever forged the answer vouch for its own key.
 */

int pt_wechat_certs_build(const struct pt_gw_config *cfg, const struct pt_gw_env *env,
                          struct pt_http_request *out)
{
    if (!can_sign(cfg, env))
        return PT_EINVAL;
    return finish_request(cfg, env, "GET", "/v3/certificates", NULL, out);
}

/* Reads n digits at s into *v; 0 when they are not all digits. */
static int digits(const char *s, int n, int *v)
{
    *v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        *v = *v * 10 + (s[i] - '0');
    }
    return 1;
}

/* An RFC 3339 time as WeChat writes it, "2026-12-01T10:00:00+08:00" (or
 * "Z"), to Unix seconds.  PT_OK or PT_EPARSE. */
int pt_wechat_parse_time(const char *s, int64_t *out)
{
    int y, mo, d, h, mi, se, oh = 0, om = 0;
    if (!s || strlen(s) < 20 || !digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) ||
        s[7] != '-' || !digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't') ||
        !digits(s + 11, 2, &h) || s[13] != ':' || !digits(s + 14, 2, &mi) || s[16] != ':' ||
        !digits(s + 17, 2, &se))
        return PT_EPARSE;
    const char *z = s + 19;
    if (*z == '.') /* fractions of a second: dropped */
        for (z++; *z >= '0' && *z <= '9'; z++)
            ;
    int sign = 0;
    if ((*z == 'Z' || *z == 'z') && z[1] == '\0')
        sign = 0;
    else if ((*z == '+' || *z == '-') && strlen(z) == 6 && digits(z + 1, 2, &oh) && z[3] == ':' &&
             digits(z + 4, 2, &om))
        sign = *z == '+' ? 1 : -1;
    else
        return PT_EPARSE;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60 || oh > 23 || om > 59)
        return PT_EPARSE;
    *out = pt_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se -
           sign * (oh * 3600 + om * 60);
    return PT_OK;
}

/* 1 when s is 1 to PT_GW_SERIAL_MAX - 1 hex digits (a certificate serial). */
int pt_wechat_serial_valid(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n >= PT_GW_SERIAL_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!strchr("0123456789abcdefABCDEF", s[i]))
            return 0;
    return 1;
}

/* One entry of the answer's data[]: decrypted, parsed and checked against
 * its serial_no.  PT_OK (then *pem is malloc'd), PT_ESIG, PT_EPARSE. */
static int read_cert(const struct pt_gw_config *cfg, const cJSON *item, struct pt_gw_peer_cert *out)
{
    const char *serial = pt__jstr(item, "serial_no");
    const cJSON *enc = cJSON_GetObjectItemCaseSensitive(item, "encrypt_certificate");
    const char *alg = pt__jstr(enc, "algorithm");
    memset(out, 0, sizeof *out);
    if (!pt_wechat_serial_valid(serial) || !cJSON_IsObject(enc) || !alg ||
        strcmp(alg, "AEAD_AES_256_GCM") != 0 ||
        pt_wechat_parse_time(pt__jstr(item, "effective_time"), &out->effective_s) != PT_OK ||
        pt_wechat_parse_time(pt__jstr(item, "expire_time"), &out->expire_s) != PT_OK)
        return PT_EPARSE;
    char *pem = NULL;
    size_t plen = 0;
    int rc = pt_wechat_decrypt(cfg->secret, cfg->secret_len, pt__jstr(enc, "nonce"),
                               pt__jstr(enc, "associated_data"), pt__jstr(enc, "ciphertext"), &pem,
                               &plen);
    if (rc != PT_OK)
        return rc == PT_EPARSE || rc == PT_ETOOBIG ? PT_EPARSE : PT_ESIG;
    struct pt_pk *pk = NULL;
    rc = pt_pk_load_mem("encrypt_certificate", pem, plen, NULL, NULL, &pk, NULL, 0);
    if (rc == PT_OK && pt_pk_kind(pk) != PT_PK_CERT)
        rc = PT_EPARSE;
    /* The entry's serial_no is what the answer claims; the certificate's
     * own serial is what the key is: they must be one. */
    if (rc == PT_OK && strcasecmp(pt_pk_serial(pk), serial) != 0)
        rc = PT_ESIG;
    if (rc == PT_OK) {
        pt__copy(out->serial, sizeof out->serial, pt_pk_serial(pk));
        out->pem = pem;
        out->pem_len = plen;
        pem = NULL;
    } else if (rc != PT_ESIG) {
        rc = PT_EPARSE;
    }
    pt_pk_free(pk);
    free(pem);
    return rc;
}

int pt_wechat_certs_parse(const struct pt_gw_config *cfg, const struct pt_http_response *resp,
                          const struct pt_gw_env *env, struct pt_gw_peer_cert *out, int max, int *n)
{
    *n = 0;
    if (resp->status != 200)
        return PT_ENOTFOUND;
    if (verify_platform(cfg, resp) != PT_OK)
        return PT_ESIG;
    int rc = PT_EPARSE, k = 0;
    cJSON *j = cJSON_ParseWithLength(resp->body ? resp->body : "", resp->body_len);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data");
    if (!cJSON_IsArray(data))
        goto out;
    int64_t now_s = env && env->now_ms > 0 ? env->now_ms / 1000 : 0;
    rc = PT_OK;
    for (const cJSON *item = data->child; item && rc == PT_OK; item = item->next) {
        struct pt_gw_peer_cert c;
        rc = cJSON_IsObject(item) ? read_cert(cfg, item, &c) : PT_EPARSE;
        if (rc != PT_OK)
            break;
        if (now_s && c.expire_s <= now_s) {
            free(c.pem); /* expired: WeChat no longer signs with it */
            continue;
        }
        if (k >= max) {
            free(c.pem);
            rc = PT_ETOOBIG;
            break;
        }
        out[k++] = c;
    }
out:
    cJSON_Delete(j);
    if (rc != PT_OK) {
        pt_gw_peer_certs_free(out, k);
        k = 0;
    }
    *n = k;
    return rc;
}

static const char *wechat_peer_serial(const struct pt_http_response *msg)
{
    return pt_http_response_header(msg, "Wechatpay-Serial");
}

/* gateways.wechat (SPEC section 10). */
enum { WX_PRIVATE_KEY, WX_PLATFORM_KEY, WX_APIV3_KEY, WX_APIV2_KEY, WX_CLIENT_CERT };
static const struct pt_gw_key wechat_keys[] = {
    PT_GW_KEY("endpoint", PT_GWK_HTTPS, endpoint, 0),
    PT_GW_KEY("mchid", PT_GWK_TEXT, merchant_id, 1),
    PT_GW_KEY("appid", PT_GWK_TEXT, app_id, 1),
    PT_GW_KEY("serial_no", PT_GWK_TEXT, serial_no, 1),
    PT_GW_KEY("private_key_file", PT_GWK_SECRET, files[WX_PRIVATE_KEY], 1),
    /* A path (then platform_serial names its key unless it is a
     * certificate), or a list of {"serial","file"}: several platform keys,
     * as during a rotation (SPEC 8). */
    PT_GW_KEY("platform_public_key_file", PT_GWK_KEYFILES, files[WX_PLATFORM_KEY], 1),
    PT_GW_KEY("platform_serial", PT_GWK_TEXT, platform_serial, 0),
    PT_GW_KEY("apiv3_key_file", PT_GWK_SECRET, files[WX_APIV3_KEY], 1),
    PT_GW_KEY("notify_url", PT_GWK_URL, notify_url, 1),
    /* Method barcode (APIv2): both or neither; without them the gateway
     * takes no payment-code charges (pt_wechat_method_unavailable). */
    PT_GW_KEY("apiv2_key_file", PT_GWK_SECRET, files[WX_APIV2_KEY], 0),
    PT_GW_KEY("apiclient_cert_file", PT_GWK_FILE, files[WX_CLIENT_CERT], 0),
    PT_GW_KEY("spbill_create_ip", PT_GWK_TEXT, client_ip, 0),
    /* The daily bill (SPEC 19): "v3" tradebill, or "v2" downloadbill for a
     * merchant whose bills come through APIv2 (needs apiv2_key_file). */
    PT_GW_KEY("bill_api", PT_GWK_TEXT, bill_api, 0),
    {.name = "barcode_timeout_s",
     .kind = PT_GWK_SECONDS,
     .offset = offsetof(struct pt_gw_settings, barcode_timeout_s),
     .min = 20,
     .max = 86400},
    {.name = NULL},
};

const char *pt_wechat_method_unavailable(const struct pt_gw_settings *in, const char *method)
{
    if (in && method && strcmp(method, "barcode") == 0 && !in->files[WX_APIV2_KEY][0])
        return "needs gateways.wechat.apiv2_key_file and apiclient_cert_file (WeChat's "
               "payment-code calls are APIv2)";
    return NULL;
}

/* The string form: one key, named by platform_serial or its certificate. */
static int load_platform_key(const struct pt_gw_settings *in, pt_gw_random_fn rnd, void *ctx,
                             struct pt_gw_config *o, char *err, size_t errlen)
{
    int rc = pt__gw_load_peer_key("wechat", "platform_public_key_file", in->files[WX_PLATFORM_KEY],
                                  o, rnd, ctx, &o->peer_key, err, errlen);
    if (rc == PT_OK && !o->platform_serial[0] && !pt_pk_serial(o->peer_key)[0]) {
        snprintf(err, errlen,
                 "gateways.wechat.platform_serial: needed when "
                 "platform_public_key_file is a public key, not a certificate");
        rc = PT_ECONFIG;
    }
    if (rc == PT_OK && strlen(expected_serial(o)) >= PT_GW_SERIAL_MAX) {
        snprintf(err, errlen, "gateways.wechat.platform_serial: longer than %d characters",
                 PT_GW_SERIAL_MAX - 1);
        rc = PT_ECONFIG;
    }
    struct pt_pk *again = NULL; /* the trust store holds its own copy */
    if (rc == PT_OK)
        rc = pt__gw_load_key("wechat", "platform_public_key_file", in->files[WX_PLATFORM_KEY], rnd,
                             ctx, &again, err, errlen);
    if (rc == PT_OK)
        rc = pt_gw_keyring_add(o->peer_keys, expected_serial(o), again, 0, 1);
    return rc;
}

/* The list form: every {"serial","file"} entry, each file's serial (when it
 * is a certificate) agreeing with its entry. */
static int load_platform_keys(const struct pt_gw_settings *in, pt_gw_random_fn rnd, void *ctx,
                              struct pt_gw_config *o, char *err, size_t errlen)
{
    if (in->platform_serial[0]) {
        snprintf(err, errlen,
                 "gateways.wechat.platform_serial: not with the list form of "
                 "platform_public_key_file (each entry names its serial)");
        return PT_ECONFIG;
    }
    int rc = PT_OK;
    for (int i = 0; rc == PT_OK && i < in->npeer_files; i++) {
        struct pt_gw_keyfile entry, *f = &entry;
        char key[64];
        if (pt_gw_keyfile_at(in->files[WX_PLATFORM_KEY], i, f) != PT_OK) {
            snprintf(err, errlen, "gateways.wechat.platform_public_key_file: entry %d is missing",
                     i);
            return PT_ECONFIG;
        }
        snprintf(key, sizeof key, "platform_public_key_file[%d].file", i);
        struct pt_pk *pk = NULL;
        rc = pt__gw_load_peer_key("wechat", key, f->file, o, rnd, ctx, &pk, err, errlen);
        if (rc == PT_OK && pt_pk_serial(pk)[0] && strcasecmp(pt_pk_serial(pk), f->serial) != 0) {
            snprintf(err, errlen,
                     "gateways.wechat.%s: %s is the certificate of serial %s, the entry says %s",
                     key, f->file, pt_pk_serial(pk), f->serial);
            rc = PT_ECONFIG;
        }
        if (rc == PT_OK && pt_gw_keyring_has(o->peer_keys, f->serial)) {
            snprintf(err, errlen, "gateways.wechat.platform_public_key_file[%d].serial: %s twice",
                     i, f->serial);
            rc = PT_ECONFIG;
        }
        if (rc == PT_OK && i == 0) {
            /* The first entry is also the single-key view (peer_key,
             * platform_serial) that `payterm verify` style callers read. */
            pt__copy(o->platform_serial, sizeof o->platform_serial, f->serial);
            rc = pt__gw_load_key("wechat", key, f->file, rnd, ctx, &o->peer_key, err, errlen);
        }
        if (rc == PT_OK)
            rc = pt_gw_keyring_add(o->peer_keys, f->serial, pk, 0, 1);
        else
            pt_pk_free(pk);
    }
    return rc;
}

/* A serial as WeChat writes it and as the certificate holds it: hex digits,
 * either case, leading zeros not counted (DER adds one to a serial whose
 * first bit is set). */
static int same_serial(const char *a, const char *b)
{
    while (*a == '0')
        a++;
    while (*b == '0')
        b++;
    return strcasecmp(a, b) == 0;
}

/*
 * The merchant's API certificate (apiclient_cert_file, configured for the
 * APIv2 calls) is the one place payterm can see that private_key_file and
 * serial_no belong together: WeChat names the key that signed a request by
 * serial_no, and refuses every request signed with another.
 */
static int check_merchant_cert(const struct pt_gw_settings *in, pt_gw_random_fn rnd, void *ctx,
                               struct pt_gw_config *o, char *err, size_t errlen)
{
    const char *path = in->files[WX_CLIENT_CERT];
    struct pt_pk *cert = NULL;
    int rc = pt__gw_load_key("wechat", "apiclient_cert_file", path, rnd, ctx, &cert, err, errlen);
    if (rc != PT_OK)
        return rc;
    rc = PT_ECONFIG;
    if (pt_pk_probe(o->private_key, cert) != PT_OK)
        snprintf(err, errlen,
                 "gateways.wechat.apiclient_cert_file: %s is not the certificate of "
                 "private_key_file %s: a probe message signed with that key does not verify "
                 "with it (apiclient_cert.pem and apiclient_key.pem come together from the "
                 "merchant platform)",
                 path, in->files[WX_PRIVATE_KEY]);
    else if (!same_serial(pt_pk_serial(cert), o->serial_no))
        snprintf(err, errlen,
                 "gateways.wechat.serial_no: \"%s\" is not the serial of apiclient_cert_file %s "
                 "(%s): WeChat names the merchant key by its certificate's serial",
                 o->serial_no, path, pt_pk_serial(cert));
    else
        rc = PT_OK;
    pt_pk_free(cert);
    return rc;
}

/* gateways.wechat.bill_api: which API the daily bill comes through. */
static int load_bill_api(const struct pt_gw_settings *in, struct pt_gw_config *o, char *err,
                         size_t errlen)
{
    if (!in->bill_api[0] || strcmp(in->bill_api, "v3") == 0)
        return PT_OK;
    if (strcmp(in->bill_api, "v2") != 0) {
        snprintf(err, errlen,
                 "gateways.wechat.bill_api: \"%s\" is neither \"v3\" (GET /v3/bill/tradebill) "
                 "nor \"v2\" (POST /pay/downloadbill)",
                 in->bill_api);
        return PT_ECONFIG;
    }
    if (!o->apiv2_key_len) {
        snprintf(err, errlen,
                 "gateways.wechat.bill_api: \"v2\" signs downloadbill with the APIv2 key: "
                 "gateways.wechat.apiv2_key_file is needed");
        return PT_ECONFIG;
    }
    o->bill_apiv2 = 1;
    return PT_OK;
}

static int wechat_load(const struct pt_gw_settings *in, pt_gw_random_fn rnd, void *ctx,
                       struct pt_gw_config *o, char *err, size_t errlen)
{
    int rc = pt__gw_load_private_key("wechat", "private_key_file", in->files[WX_PRIVATE_KEY], rnd,
                                     ctx, o, err, errlen);
    if (rc == PT_OK && pt_gw_keyring_new(&o->peer_keys) != PT_OK) {
        snprintf(err, errlen, "gateways.wechat: out of memory");
        rc = PT_ENOMEM;
    }
    if (rc == PT_OK)
        rc = in->npeer_files ? load_platform_keys(in, rnd, ctx, o, err, errlen)
                             : load_platform_key(in, rnd, ctx, o, err, errlen);
    if (rc == PT_OK)
        rc = pt__gw_load_secret("wechat", "apiv3_key_file", in->files[WX_APIV3_KEY], o->secret,
                                sizeof o->secret, &o->secret_len, err, errlen);
    if (rc == PT_OK && o->secret_len != 32) {
        snprintf(err, errlen,
                 "gateways.wechat.apiv3_key_file: %s: the APIv3 key is 32 bytes, this file "
                 "holds %zu",
                 in->files[WX_APIV3_KEY], o->secret_len);
        rc = PT_EPARSE;
    }
    if (rc == PT_OK)
        rc = pt__wechat_v2_load(in->files[WX_APIV2_KEY], in->files[WX_CLIENT_CERT],
                                in->files[WX_PRIVATE_KEY], in->client_ip, rnd, ctx, o, err, errlen);
    if (rc == PT_OK && in->files[WX_CLIENT_CERT][0])
        rc = check_merchant_cert(in, rnd, ctx, o, err, errlen);
    if (rc == PT_OK)
        rc = load_bill_api(in, o, err, errlen);
    return rc;
}

/* A payment code (付款码) refreshes every minute: a queued barcode charge
 * older than that cannot be paid. */
static const struct pt_gw_method wechat_methods[] = {
    {.name = "qr", .interactive = 1},
    {.name = "barcode", .offline_max_age_s = 60, .payment_code = 1},
    {.name = NULL},
};

const struct pt_gateway pt_gateway_wechat = {
    .name = "wechat",
    .methods = wechat_methods,
    .action_key = "code_url",
    .notify_route = "/notify/wechat",
    .notify_needs_time = 1,
    .default_endpoint = "https://api.mch.weixin.qq.com",
    .config_keys = wechat_keys,
    .method_unavailable = pt_wechat_method_unavailable,
    .build_keys = pt_wechat_certs_build,
    .parse_keys = pt_wechat_certs_parse,
    .peer_serial = wechat_peer_serial,
    /* WeChat: query every 10 s while USERPAYING, reverse after 45 s
     * ("直到支付成功或超时(建议45秒)"), never sooner than 15 s after the pay. */
    .default_barcode_timeout_s = 45,
    .load = wechat_load,
    .cli_sign = pt__cli_sign_wechat,
    .cli_verify = pt__cli_verify_wechat,
    .cli_sign_usage = "--gateway wechat --key merchant.pem --mchid M --serial S\n"
                      "        --method POST --url /v3/... --timestamp T --nonce N < body",
    .cli_sign_prints = "{\"message\":...,\"signature\":...,\"authorization\":...}",
    .cli_verify_usage = "--gateway wechat --pubkey platform.pem --serial SERIAL\n"
                        "        [--apiv3-key K | --apiv3-key-file F]\n"
                        "        --header 'Wechatpay-Timestamp: ...' (all four) < body\n"
                        "    (a notification or response body; with the APIv3 key a\n"
                        "    notification's resource is decrypted)",
    .resend_window_s = 0,
    /* "订单生成后不能马上调用关单接口，最短调用时间间隔为5分钟" (WeChat Pay's
     * close order pages, APIv2 closeorder and the APIv3 global close). */
    .close_min_age_s = 300,
    /* APIv3: out_trade_no is 6-32 of [A-Za-z0-9_-|*]. */
    .order_id_min = 6,
    .order_id_max = 32,
    .order_id_forbidden = ".",
    .build = wechat_build,
    .parse = wechat_parse,
    .parse_notify = wechat_parse_notify,
    .build_refund = wechat_build_refund,
    .parse_refund = wechat_parse_refund,
    .notify_ok_type = "application/json",
    .notify_ok_body = "{\"code\":\"SUCCESS\"}",
    .notify_fail_type = "application/json",
    .notify_fail_body = "{\"code\":\"FAIL\",\"message\":\"signature verification failed\"}",
    .bill_offset_min = 8 * 60, /* WeChat Pay's bill day: China time */
    .fetch_bill = pt__wechat_fetch_bill,
    .parse_bill = pt__wechat_parse_bill,
};
