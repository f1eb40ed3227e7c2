/*
 * wechat_v2.c - WeChat Pay APIv2 payment code (付款码), SPEC 8: the XML
 * writer and reader, the APIv2 signature, the micropay / orderquery /
 * reverse calls of pt_gateway_wechat's method "barcode", and `payterm
 * sign/verify --gateway wechat-v2`.
 *
 * Wire format and reader rules are in wechat_v2.h.  What the answers mean
 * comes from WeChat's APIv2 documentation of 提交付款码支付 (micropay), 查询
 * 订单 (orderquery) and 撤销订单 (reverse); what the official Node SDK
 * (wechatpay-axios-plugin 0.9.6, lib/transformer.js and lib/hash.js) does
 * is the reference for the bytes.  One place where payterm parts with the
 * SDK on purpose: the SDK's response verifier returns a "business error"
 * with the answer's fields as soon as return_code or result_code is not
 * SUCCESS, before it looks at the sign, so a forged, unsigned
 * <err_code>USERPAYING</err_code> (or NOTENOUGH) reaches the caller as if
 * WeChat had said it.  Here every answer is verified first, FAIL answers
 * included; only then is any field read.
 */
#include "gateways/wechat_v2.h"
#include "buf.h"
#include "crypto.h"
#include "err.h"
#include "gateway.h"
#include "gateways/gwcli.h"
#include "gateways/gwcommon.h"
#include "gateways/xmlread.h"
#include "money.h"
#include "pt_config.h"

#include <cjson/cJSON.h>
#include <mbedtls/md.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- characters ------------------------------------------------------------ */

static int name_start(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static int name_char(unsigned char c)
{
    return name_start(c) || (c >= '0' && c <= '9');
}

/* [A-Za-z_][A-Za-z0-9_]* of at most PT_WXV2_NAME_MAX.  (A leading digit is
 * not an XML name, and JavaScript would sort such a key first.) */
static int name_ok(const char *s)
{
    size_t n = 0;
    if (!s || !name_start((unsigned char)s[0]))
        return 0;
    while (name_char((unsigned char)s[n]))
        n++;
    return s[n] == '\0' && n <= PT_WXV2_NAME_MAX;
}

/* ---- the writer -------------------------------------------------------------- */

/* The SDK's rule (Transformer's tagValueProcessor): CDATA only when needed. */
static int needs_cdata(const char *v)
{
    return strpbrk(v, "<>&'\"") != NULL;
}

static void put_cdata(struct pt_buf *b, const char *v)
{
    pt_buf_puts(b, "<![CDATA[");
    for (const char *p = v; *p; p++) {
        /* "]]>" would end the section: end it after "]]" and open a new one
         * for the ">", so the reader joins the two back into the value. */
        if (p[0] == ']' && p[1] == ']' && p[2] == '>') {
            pt_buf_puts(b, "]]]]><![CDATA[>");
            p += 2;
            continue;
        }
        pt_buf_putc(b, *p);
    }
    pt_buf_puts(b, "]]>");
}

int pt_wxv2_xml(const struct pt_wxv2_field *f, size_t n, char **out, size_t *len)
{
    struct pt_buf b;
    *out = NULL;
    if (n > PT_WXV2_FIELDS_MAX)
        return PT_ETOOBIG;
    for (size_t i = 0; i < n; i++)
        if (!name_ok(f[i].name) || !f[i].value ||
            !pt__xml_text_ok(f[i].value, strlen(f[i].value), 0))
            return PT_EINVAL;
    pt_buf_init(&b, PT_WXV2_XML_MAX);
    pt_buf_puts(&b, "<xml>");
    for (size_t i = 0; i < n; i++) {
        pt_buf_putc(&b, '<');
        pt_buf_puts(&b, f[i].name);
        if (!f[i].value[0]) {
            pt_buf_puts(&b, "/>"); /* the SDK's suppressEmptyNode */
            continue;
        }
        pt_buf_putc(&b, '>');
        if (needs_cdata(f[i].value))
            put_cdata(&b, f[i].value);
        else
            pt_buf_puts(&b, f[i].value);
        pt_buf_puts(&b, "</");
        pt_buf_puts(&b, f[i].name);
        pt_buf_putc(&b, '>');
    }
    pt_buf_puts(&b, "</xml>");
    *out = pt_buf_take(&b, len);
    return *out ? PT_OK : PT_ETOOBIG; /* over PT_WXV2_XML_MAX (or out of memory) */
}

/* ---- the reader -------------------------------------------------------------- */

/* A name at r->p: its length (r->p moved past it), 0 when there is none. */
static size_t take_name(struct pt_xml_rd *r)
{
    const char *s = r->p;
    if (s >= r->end || !name_start((unsigned char)*s))
        return 0;
    while (r->p < r->end && name_char((unsigned char)*r->p))
        r->p++;
    size_t n = (size_t)(r->p - s);
    return n <= PT_WXV2_NAME_MAX ? n : 0;
}

/* The content of element name (nlen bytes) up to and including its end tag. */
static int take_value(struct pt_xml_rd *r, const char *name, size_t nlen)
{
    while (r->p < r->end) {
        char c = *r->p;
        if (c == '<') {
            if (pt__xml_at(r, "<![CDATA[")) {
                r->p += 9;
                if (pt__xml_cdata(r) != PT_OK)
                    return PT_EPARSE;
                continue;
            }
            if (!pt__xml_at(r, "</"))
                return PT_EPARSE; /* a nested element, comment, PI or DOCTYPE */
            r->p += 2;
            if ((size_t)(r->end - r->p) < nlen || memcmp(r->p, name, nlen) != 0)
                return PT_EPARSE;
            r->p += nlen;
            pt__xml_skip_ws(r);
            if (r->p >= r->end || *r->p != '>')
                return PT_EPARSE;
            r->p++;
            *r->w++ = '\0';
            return PT_OK;
        }
        if (c == '&') {
            if (pt__xml_entity(r) != PT_OK)
                return PT_EPARSE;
            continue;
        }
        if (pt__xml_at(r, "]]>"))
            return PT_EPARSE; /* not allowed in text (XML 1.0 section 2.4) */
        *r->w++ = c;
        r->p++;
    }
    return PT_EPARSE;
}

/* One <name>value</name> or <name/> at r->p into field *f. */
static int take_field(struct pt_xml_rd *r, struct pt_wxv2_field *f)
{
    r->p++; /* '<' */
    const char *raw = r->p;
    size_t nlen = take_name(r);
    if (!nlen)
        return PT_EPARSE;
    char *name = r->w;
    memcpy(name, raw, nlen);
    name[nlen] = '\0';
    r->w += nlen + 1;
    pt__xml_skip_ws(r);
    f->name = name;
    f->value = r->w;
    if (pt__xml_at(r, "/>")) {
        r->p += 2;
        *r->w++ = '\0';
        return PT_OK;
    }
    if (r->p >= r->end || *r->p != '>')
        return PT_EPARSE; /* attributes */
    r->p++;
    return take_value(r, raw, nlen);
}

static int duplicate(const struct pt_wxv2_msg *m, const char *name)
{
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->f[i].name, name) == 0)
            return 1;
    return 0;
}

static int parse_doc(struct pt_xml_rd *r, struct pt_wxv2_msg *m)
{
    if (pt__xml_skip_declaration(r) != PT_OK)
        return PT_EPARSE;
    pt__xml_skip_ws(r);
    if (!pt__xml_at(r, "<xml"))
        return PT_EPARSE;
    r->p += 4;
    pt__xml_skip_ws(r);
    if (r->p >= r->end || *r->p != '>')
        return PT_EPARSE; /* <xmlfoo>, attributes, <xml/> */
    r->p++;
    for (;;) {
        pt__xml_skip_ws(r);
        if (pt__xml_at(r, "</xml")) {
            r->p += 5;
            pt__xml_skip_ws(r);
            if (r->p >= r->end || *r->p != '>')
                return PT_EPARSE;
            r->p++;
            pt__xml_skip_ws(r);
            return r->p == r->end ? PT_OK : PT_EPARSE;
        }
        if (r->p >= r->end || *r->p != '<')
            return PT_EPARSE; /* text beside the fields, or the end */
        if (m->n >= PT_WXV2_FIELDS_MAX)
            return PT_ETOOBIG;
        struct pt_wxv2_field f;
        int rc = take_field(r, &f);
        if (rc != PT_OK)
            return rc;
        if (duplicate(m, f.name))
            return PT_EPARSE; /* which of the two would be true? */
        m->f[m->n++] = f;
    }
}

void pt_wxv2_msg_free(struct pt_wxv2_msg *m)
{
    if (!m)
        return;
    free(m->f);
    free(m->store);
    memset(m, 0, sizeof *m);
}

int pt_wxv2_parse(const char *xml, size_t len, struct pt_wxv2_msg *out)
{
    memset(out, 0, sizeof *out);
    if (!xml)
        return PT_EPARSE;
    if (len > PT_WXV2_XML_MAX)
        return PT_ETOOBIG;
    /* The whole document at once: UTF-8, no NUL, no control characters
     * (CDATA cannot carry them either). */
    if (!pt__xml_text_ok(xml, len, 1))
        return PT_EPARSE;
    /* Names and values are never longer than the text they came from, so
     * the store cannot overflow: each field takes at most as many bytes
     * (NULs included) as its own markup. */
    out->store = malloc(len + 1);
    out->f = calloc(PT_WXV2_FIELDS_MAX, sizeof *out->f);
    if (!out->store || !out->f) {
        pt_wxv2_msg_free(out);
        return PT_ENOMEM;
    }
    struct pt_xml_rd r = {.p = xml, .end = xml + len, .w = out->store};
    int rc = parse_doc(&r, out);
    if (rc != PT_OK)
        pt_wxv2_msg_free(out);
    return rc;
}

const char *pt_wxv2_get(const struct pt_wxv2_msg *m, const char *name)
{
    for (int i = 0; m && i < m->n; i++)
        if (strcmp(m->f[i].name, name) == 0)
            return m->f[i].value;
    return NULL;
}

/* ---- the signature ------------------------------------------------------------ */

int pt_wxv2_sign_type(const char *s, enum pt_wxv2_sign_type *out)
{
    if (s && strcmp(s, "HMAC-SHA256") == 0)
        *out = PT_WXV2_HMAC_SHA256;
    else if (s && strcmp(s, "MD5") == 0)
        *out = PT_WXV2_MD5;
    else
        return PT_EINVAL;
    return PT_OK;
}

static int by_name(const void *a, const void *b)
{
    const struct pt_wxv2_field *x = *(const struct pt_wxv2_field *const *)a;
    const struct pt_wxv2_field *y = *(const struct pt_wxv2_field *const *)b;
    return strcmp(x->name, y->name);
}

char *pt_wxv2_string_to_sign(const struct pt_wxv2_field *f, size_t n, size_t *len)
{
    if (n > PT_WXV2_FIELDS_MAX)
        return NULL;
    const struct pt_wxv2_field *sorted[PT_WXV2_FIELDS_MAX];
    for (size_t i = 0; i < n; i++)
        sorted[i] = &f[i];
    /* Byte order, as JavaScript's default sort orders ASCII keys. */
    qsort(sorted, n, sizeof sorted[0], by_name);
    struct pt_buf b;
    pt_buf_init(&b, PT_WXV2_XML_MAX);
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        if (i && strcmp(sorted[i - 1]->name, sorted[i]->name) == 0) {
            pt_buf_free(&b, 0);
            return NULL;
        }
        /* Formatter.queryStringLike: `sign` and empty values are left out. */
        if (strcmp(sorted[i]->name, "sign") == 0 || !sorted[i]->value || !sorted[i]->value[0])
            continue;
        if (!first)
            pt_buf_putc(&b, '&');
        first = 0;
        pt_buf_puts(&b, sorted[i]->name);
        pt_buf_putc(&b, '=');
        pt_buf_puts(&b, sorted[i]->value);
    }
    return pt_buf_take(&b, len);
}

/*
 * MD5 is used nowhere else in payterm and only for `payterm sign`, so it is
 * called here through mbedTLS's generic md API (the same in 2.28 and 3.x)
 * rather than added to crypto.h.
 */
static int md5(const void *data, size_t len, unsigned char out[16])
{
    const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_MD5);
    if (!md)
        return PT_EUNSUPPORTED;
    return mbedtls_md(md, data, len, out) == 0 ? PT_OK : PT_ECRYPTO;
}

int pt_wxv2_sign(enum pt_wxv2_sign_type type, const unsigned char *key, size_t keylen,
                 const struct pt_wxv2_field *f, size_t n, char out[PT_WXV2_SIGN_MAX])
{
    static const char suffix[] = "&key=";
    size_t alen = 0;
    out[0] = '\0';
    if (!key || !keylen)
        return PT_EINVAL;
    char *a = pt_wxv2_string_to_sign(f, n, &alen);
    if (!a)
        return n > PT_WXV2_FIELDS_MAX ? PT_ETOOBIG : PT_EINVAL;
    /* stringA + "&key=" + key: one exact allocation, wiped, never a
     * growing buffer that would leave copies of the key behind. */
    size_t mlen = alen + sizeof suffix - 1 + keylen;
    unsigned char *msg = malloc(mlen);
    if (!msg) {
        free(a);
        return PT_ENOMEM;
    }
    memcpy(msg, a, alen);
    memcpy(msg + alen, suffix, sizeof suffix - 1);
    memcpy(msg + alen + sizeof suffix - 1, key, keylen);
    free(a);
    unsigned char mac[32];
    size_t maclen = type == PT_WXV2_MD5 ? 16 : 32;
    int rc =
        type == PT_WXV2_MD5 ? md5(msg, mlen, mac) : pt_hmac_sha256(key, keylen, msg, mlen, mac);
    pt_zeroize(msg, mlen);
    free(msg);
    if (rc == PT_OK) {
        pt_hex_encode(mac, maclen, out);
        for (char *p = out; *p; p++)
            if (*p >= 'a' && *p <= 'f')
                *p = (char)(*p - 'a' + 'A');
    }
    pt_zeroize(mac, sizeof mac);
    return rc;
}

int pt_wxv2_verify(const unsigned char *key, size_t keylen, const struct pt_wxv2_msg *m)
{
    const char *given = pt_wxv2_get(m, "sign");
    char want[PT_WXV2_SIGN_MAX];
    /* The SDK picks MD5 for a 32-digit sign; payterm asked for HMAC-SHA256
     * and takes nothing weaker back. */
    if (!given || strlen(given) != 64 || !m)
        return PT_ESIG;
    if (pt_wxv2_sign(PT_WXV2_HMAC_SHA256, key, keylen, m->f, (size_t)m->n, want) != PT_OK)
        return PT_ESIG;
    return pt_ct_equal(want, given, 64) ? PT_OK : PT_ESIG;
}

static int allowed(const char *name, const char *const *allow)
{
    for (; *allow; allow++)
        if (strcmp(*allow, name) == 0)
            return 1;
    return 0;
}

int pt_wxv2_read(const char *xml, size_t len, const unsigned char *key, size_t keylen,
                 const char *const *allow, struct pt_wxv2_msg *out)
{
    int rc = pt_wxv2_parse(xml, len, out);
    if (rc != PT_OK)
        return rc;
    /* Verified over every field the document holds: WeChat signs them all,
     * also those payterm does not read. */
    if (pt_wxv2_verify(key, keylen, out) != PT_OK) {
        pt_wxv2_msg_free(out);
        return PT_ESIG;
    }
    if (allow) {
        int k = 0;
        for (int i = 0; i < out->n; i++)
            if (allowed(out->f[i].name, allow))
                out->f[k++] = out->f[i];
        out->n = k;
    }
    return PT_OK;
}

/* ---- build: micropay, orderquery, reverse -------------------------------------- */

/* body is String(128) (the current page says 127): cut at whole UTF-8
 * characters so a long subject does not turn into PARAM_ERROR. */
#define WXV2_BODY_MAX 127
/* nonce_str: "随机字符串，不长于32位". */
#define WXV2_NONCE_MAX 32

static void cut_body(const char *s, char out[WXV2_BODY_MAX + 1])
{
    size_t n = strlen(s);
    if (n > WXV2_BODY_MAX) {
        n = WXV2_BODY_MAX;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--; /* s[n] continues a character: cut before it starts */
    }
    memcpy(out, s, n);
    out[n] = '\0';
}

static int by_name_field(const void *a, const void *b)
{
    return strcmp(((const struct pt_wxv2_field *)a)->name, ((const struct pt_wxv2_field *)b)->name);
}

/*
 * Signs fields (n of them, room for one more: the sign), writes them sorted
 * by name with the sign last, and fills *out with the POST.  mtls: the call
 * needs the merchant's API certificate (reverse).
 */
static int v2_request(const struct pt_gw_config *cfg, const char *path, struct pt_wxv2_field *f,
                      size_t n, int mtls, struct pt_http_request *out)
{
    char sign[PT_WXV2_SIGN_MAX], *xml = NULL;
    size_t len = 0;
    qsort(f, n, sizeof f[0], by_name_field);
    int rc = pt_wxv2_sign(PT_WXV2_HMAC_SHA256, cfg->apiv2_key, cfg->apiv2_key_len, f, n, sign);
    if (rc != PT_OK)
        return rc;
    f[n].name = "sign";
    f[n].value = sign;
    if ((rc = pt_wxv2_xml(f, n + 1, &xml, &len)) != PT_OK)
        return rc;
    if ((rc = pt__request_start(out, "POST", cfg->endpoint, path)) != PT_OK) {
        free(xml);
        return rc;
    }
    pt__request_body(out, xml, len);
    rc = pt_http_request_add_header(out, "Content-Type", "text/xml; charset=utf-8");
    if (rc == PT_OK)
        rc = pt_http_request_add_header(out, "Accept", "text/xml");
    if (rc == PT_OK)
        rc = pt_http_request_add_header(out, "User-Agent", "payterm/" PT_VERSION);
    if (rc != PT_OK) {
        pt_http_request_free(out);
        return rc;
    }
    if (mtls) {
        /* Borrowed from cfg (platform.h): the transport presents this
         * certificate and keys its connection by it. */
        out->client_cert_file = cfg->client_cert_file;
        out->client_key_file = cfg->client_key_file;
    }
    return PT_OK;
}

static int v2_can_build(const struct pt_gw_config *cfg, enum pt_gw_op op, const struct pt_charge *c,
                        const struct pt_gw_env *env)
{
    if (!cfg->apiv2_key_len || !cfg->app_id[0] || !cfg->merchant_id[0] || !cfg->endpoint[0] ||
        !env || !env->nonce || !*env->nonce || strlen(env->nonce) > WXV2_NONCE_MAX ||
        !pt__id_safe(c->order_id))
        return 0;
    if (op == PT_GW_PAY)
        return c->payment_code[0] && c->amount > 0 && pt_money_currency_valid(c->currency);
    if (op == PT_GW_CANCEL)
        return cfg->client_cert_file[0] && cfg->client_key_file[0];
    return 1;
}

int pt__wechat_v2_build(const struct pt_gw_config *cfg, enum pt_gw_op op, const struct pt_charge *c,
                        const struct pt_gw_env *env, struct pt_http_request *out)
{
    memset(out, 0, sizeof *out);
    if (op == PT_GW_CLOSE)
        return PT_EUNSUPPORTED; /* a payment code is reversed, never closed */
    if (!v2_can_build(cfg, op, c, env))
        return PT_EINVAL;
    struct pt_wxv2_field f[12] = {
        {"appid", cfg->app_id},       {"mch_id", cfg->merchant_id},  {"nonce_str", env->nonce},
        {"sign_type", "HMAC-SHA256"}, {"out_trade_no", c->order_id},
    };
    size_t n = 5;
    if (op == PT_GW_QUERY)
        return v2_request(cfg, "/pay/orderquery", f, n, 0, out);
    if (op == PT_GW_CANCEL)
        return v2_request(cfg, "/secapi/pay/reverse", f, n, 1, out);
    char body[WXV2_BODY_MAX + 1], fee[24];
    cut_body(c->subject[0] ? c->subject : c->order_id, body);
    /* total_fee is the currency's smallest unit, ISO's (wechat.c, "build"). */
    snprintf(fee, sizeof fee, "%lld", (long long)c->amount);
    f[n++] = (struct pt_wxv2_field){"body", body};
    f[n++] = (struct pt_wxv2_field){"total_fee", fee};
    f[n++] = (struct pt_wxv2_field){"fee_type", c->currency};
    f[n++] = (struct pt_wxv2_field){"spbill_create_ip",
                                    cfg->client_ip[0] ? cfg->client_ip : "127.0.0.1"};
    f[n++] = (struct pt_wxv2_field){"auth_code", c->payment_code};
    /* A subject the writer refuses (a control character) is PT_EINVAL. */
    return v2_request(cfg, "/pay/micropay", f, n, 0, out);
}

/* bill_date of downloadbill: yyyyMMdd of an ISO date (YYYY-MM-DD). */
static int bill_date_v2(const char *date, char out[9])
{
    if (!date || strlen(date) != 10 || date[4] != '-' || date[7] != '-')
        return 0;
    int k = 0;
    for (int i = 0; i < 10; i++)
        if (i != 4 && i != 7) {
            if (date[i] < '0' || date[i] > '9')
                return 0;
            out[k++] = date[i];
        }
    out[k] = '\0';
    return 1;
}

int pt__wechat_v2_bill_request(const struct pt_gw_config *cfg, const struct pt_gw_env *env,
                               const char *date, struct pt_http_request *out)
{
    memset(out, 0, sizeof *out);
    char ymd[9];
    if (!cfg->apiv2_key_len || !cfg->app_id[0] || !cfg->merchant_id[0] || !cfg->endpoint[0] ||
        !env || !env->nonce || !*env->nonce || strlen(env->nonce) > WXV2_NONCE_MAX ||
        !bill_date_v2(date, ymd))
        return PT_EINVAL;
    struct pt_wxv2_field f[7] = {
        {"appid", cfg->app_id},       {"mch_id", cfg->merchant_id}, {"nonce_str", env->nonce},
        {"sign_type", "HMAC-SHA256"}, {"bill_date", ymd},           {"bill_type", "ALL"},
    };
    return v2_request(cfg, "/pay/downloadbill", f, 6, 0, out);
}

/* ---- parse ------------------------------------------------------------------- */

static const char *const answer_fields[] = {
    "return_code", "return_msg",  "result_code",      "err_code",       "err_code_des",
    "appid",       "mch_id",      "out_trade_no",     "transaction_id", "total_fee",
    "fee_type",    "trade_state", "trade_state_desc", "recall",         NULL};

static int is(const char *v, const char *want)
{
    return v && strcmp(v, want) == 0;
}

static int code_in(const char *code, const char *const *list)
{
    for (; code && *list; list++)
        if (strcmp(code, *list) == 0)
            return 1;
    return 0;
}

/* total_fee: a positive integer in minor units, digits only, no leading zero. */
static int read_fee(const char *s, int64_t *out)
{
    int64_t v = 0;
    if (!s || !*s || (s[0] == '0' && s[1]) || strlen(s) > 18)
        return PT_EPARSE;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return PT_EPARSE;
        v = v * 10 + (*s - '0');
    }
    *out = v;
    return PT_OK;
}

/* 1 (and out filled) when an answer names another order than c's. */
static int other_order(const struct pt_wxv2_msg *m, const struct pt_charge *c, int required,
                       struct pt_gw_result *out)
{
    const char *otn = pt_wxv2_get(m, "out_trade_no");
    if ((!otn && !required) || is(otn, c->order_id))
        return 0;
    char msg[PT_MESSAGE_MAX];
    snprintf(msg, sizeof msg, "WeChat Pay answered about order %.64s, not %s", otn ? otn : "(none)",
             c->order_id);
    pt__result(out, PT_OUTCOME_AMBIGUOUS, "order_id_mismatch", msg);
    return 1;
}

/* A paid order (micropay SUCCESS, orderquery SUCCESS/REFUND): believed only
 * for this order, this amount, this currency. */
static void paid(const struct pt_wxv2_msg *m, const struct pt_charge *c, const char *code,
                 struct pt_gw_result *out)
{
    char msg[PT_MESSAGE_MAX];
    if (other_order(m, c, 1, out))
        return;
    pt__copy(out->trade_no, sizeof out->trade_no, pt_wxv2_get(m, "transaction_id"));
    /* fee_type: "默认人民币：CNY" - absent means CNY. */
    const char *cur = pt_wxv2_get(m, "fee_type");
    if (read_fee(pt_wxv2_get(m, "total_fee"), &out->amount) != PT_OK ||
        pt__currency_upper(cur && *cur ? cur : "CNY", out->currency) != PT_OK) {
        out->amount = 0;
        out->currency[0] = '\0';
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_amount",
                   "WeChat Pay reported a total_fee or fee_type payterm cannot read exactly");
        return;
    }
    if (out->amount != c->amount || strcmp(out->currency, c->currency) != 0) {
        snprintf(msg, sizeof msg, "WeChat Pay reports %lld %s paid, payterm charged %lld %s",
                 (long long)out->amount, out->currency, (long long)c->amount, c->currency);
        pt__result(out, PT_OUTCOME_AMBIGUOUS,
                   out->amount != c->amount ? "amount_mismatch" : "currency_mismatch", msg);
        out->review = 1; /* money moved, but not what was asked: an operator looks */
        return;
    }
    pt__result(out, PT_OUTCOME_SUCCESS, code, NULL);
}

/*
 * micropay err_code, from WeChat's error table for 提交付款码支付:
 *  - SYSTEMERROR (支付结果未知, "请立即调用被扫订单结果查询API") and
 *    BANKERROR (银行系统异常, same advice): not decided, query.
 *  - USERPAYING: the customer is entering the password; query until paid
 *    or barcode_timeout_s, then reverse.
 *  - ORDERPAID: "订单已支付".  A resend of our own order after a lost
 *    answer gets it when the first send was paid, so it is never a
 *    decline: the query tells whether it was paid, and for how much (a
 *    different amount - "with other parameters" - raises review there).
 *  - OUT_TRADE_NO_USED (商户订单号重复, the number used with other
 *    parameters): someone must look.  INVALID_REQUEST covers "重复请求支付"
 *    among others: query.
 *  - The rest of the table is final, the order was not paid and a resend
 *    of the same request cannot change that: the customer's code
 *    (AUTHCODEEXPIRE - refresh the code -, AUTH_CODE_ERROR,
 *    AUTH_CODE_INVALID), the customer's means (NOTENOUGH, NOTSUPORTCARD,
 *    BUYER_MISMATCH, TRADE_ERROR risk/limits), the order's state
 *    (ORDERCLOSED, ORDERREVERSED) and payterm's request or configuration
 *    (PARAM_ERROR, LACK_PARAMS, SIGNERROR, NOAUTH, XML_FORMAT_ERROR,
 *    NOT_UTF8, REQUIRE_POST_METHOD, POST_DATA_EMPTY, APPID_NOT_EXIST,
 *    MCHID_NOT_EXIST, APPID_MCHID_NOT_MATCH).
 *  - A code not in the table is never taken for a decline: query.
 */
static void classify_pay(const struct pt_wxv2_msg *m, const struct pt_charge *c,
                         struct pt_gw_result *out)
{
    static const char *const final[] = {"AUTHCODEEXPIRE",
                                        "AUTH_CODE_ERROR",
                                        "AUTH_CODE_INVALID",
                                        "NOTENOUGH",
                                        "NOTSUPORTCARD",
                                        "BUYER_MISMATCH",
                                        "TRADE_ERROR",
                                        "ORDERCLOSED",
                                        "ORDERREVERSED",
                                        "PARAM_ERROR",
                                        "LACK_PARAMS",
                                        "SIGNERROR",
                                        "NOAUTH",
                                        "XML_FORMAT_ERROR",
                                        "NOT_UTF8",
                                        "REQUIRE_POST_METHOD",
                                        "POST_DATA_EMPTY",
                                        "APPID_NOT_EXIST",
                                        "MCHID_NOT_EXIST",
                                        "APPID_MCHID_NOT_MATCH",
                                        NULL};
    const char *result = pt_wxv2_get(m, "result_code"), *err = pt_wxv2_get(m, "err_code");
    const char *des = pt_wxv2_get(m, "err_code_des");
    if (is(result, "SUCCESS")) {
        paid(m, c, "SUCCESS", out);
    } else if (!is(result, "FAIL") || !err || !*err) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_response",
                   "micropay answer without result_code SUCCESS or an err_code");
    } else if (other_order(m, c, 0, out)) {
        return;
    } else if (is(err, "USERPAYING")) {
        pt__result(out, PT_OUTCOME_PENDING, err, des);
    } else if (is(err, "OUT_TRADE_NO_USED")) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, err, des);
        out->review = 1;
    } else {
        pt__result(out, code_in(err, final) ? PT_OUTCOME_DECLINED : PT_OUTCOME_AMBIGUOUS, err, des);
    }
}

/*
 * orderquery trade_state: SUCCESS and REFUND (paid, then refunded: refunds
 * are separate) are paid; NOTPAY, USERPAYING and ACCEPT (已接收，等待扣款)
 * wait; CLOSED and REVOKED (reversed) are closed at WeChat; PAYERROR (支付
 * 失败，如银行返回失败) is a decline.  err_code ORDERNOTEXIST: WeChat has no
 * such order.  Anything else: ask again.
 */
static void classify_query(const struct pt_wxv2_msg *m, const struct pt_charge *c,
                           struct pt_gw_result *out)
{
    const char *result = pt_wxv2_get(m, "result_code"), *err = pt_wxv2_get(m, "err_code");
    if (!is(result, "SUCCESS")) {
        pt__result(out, is(err, "ORDERNOTEXIST") ? PT_OUTCOME_NOT_FOUND : PT_OUTCOME_AMBIGUOUS,
                   err ? err : "malformed_response", pt_wxv2_get(m, "err_code_des"));
        return;
    }
    const char *st = pt_wxv2_get(m, "trade_state"), *des = pt_wxv2_get(m, "trade_state_desc");
    if (is(st, "SUCCESS") || is(st, "REFUND")) {
        paid(m, c, st, out);
        return;
    }
    if (other_order(m, c, 0, out))
        return;
    enum pt_outcome o = PT_OUTCOME_AMBIGUOUS;
    if (is(st, "NOTPAY") || is(st, "USERPAYING") || is(st, "ACCEPT"))
        o = PT_OUTCOME_PENDING;
    else if (is(st, "CLOSED") || is(st, "REVOKED"))
        o = PT_OUTCOME_CANCELED;
    else if (is(st, "PAYERROR"))
        o = PT_OUTCOME_DECLINED;
    pt__result(out, o, st ? st : "missing_trade_state", des);
    pt__copy(out->trade_no, sizeof out->trade_no, pt_wxv2_get(m, "transaction_id"));
}

/*
 * reverse: result_code SUCCESS with recall N is done (an unpaid order is
 * closed, a paid one refunded to the customer).  recall Y ("是否需要继续调
 * 用撤销") means it is not done yet: WeChat asks for the same call again, so
 * the outcome is ambiguous and the sync engine repeats it.  ORDERNOTEXIST:
 * WeChat never had it.  Every other failure (SYSTEMERROR, USERPAYING "支付中
 * 不能撤销", REVERSE_EXPIRE after 7 days, TRADE_ERROR...) leaves the order as
 * it was: the query decides.
 */
static void classify_reverse(const struct pt_wxv2_msg *m, struct pt_gw_result *out)
{
    const char *result = pt_wxv2_get(m, "result_code"), *err = pt_wxv2_get(m, "err_code");
    int again = is(pt_wxv2_get(m, "recall"), "Y");
    if (is(result, "SUCCESS") && !again)
        pt__result(out, PT_OUTCOME_CANCELED, "REVERSED", NULL);
    else if (is(result, "SUCCESS"))
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "recall", "WeChat Pay asks for the reverse again");
    else if (is(err, "ORDERNOTEXIST"))
        pt__result(out, PT_OUTCOME_NOT_FOUND, err, pt_wxv2_get(m, "err_code_des"));
    else
        pt__result(out, PT_OUTCOME_AMBIGUOUS, err ? err : "malformed_response",
                   pt_wxv2_get(m, "err_code_des"));
}

int pt__wechat_v2_parse(const struct pt_gw_config *cfg, enum pt_gw_op op, const struct pt_charge *c,
                        const struct pt_http_response *resp, struct pt_gw_result *out)
{
    struct pt_wxv2_msg m;
    memset(out, 0, sizeof *out);
    if (resp->status != 200) {
        char code[16];
        snprintf(code, sizeof code, "http_%d", resp->status);
        pt__result(out, PT_OUTCOME_AMBIGUOUS, code, "unexpected HTTP status from WeChat Pay");
        return PT_OK;
    }
    int rc = pt_wxv2_read(resp->body, resp->body ? resp->body_len : 0, cfg->apiv2_key,
                          cfg->apiv2_key_len, answer_fields, &m);
    if (rc == PT_ESIG) {
        /* Unsigned answers are WeChat's own return_code FAIL answers (a
         * refused signature, a malformed request) as much as forgeries;
         * neither is believed. */
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "invalid_signature",
                   "WeChat Pay answer is unsigned or not signed with the APIv2 key");
        return PT_OK;
    }
    if (rc != PT_OK) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_response",
                   "WeChat Pay answer is not a flat APIv2 XML document");
        return PT_OK;
    }
    const char *appid = pt_wxv2_get(&m, "appid"), *mch = pt_wxv2_get(&m, "mch_id");
    if (!is(pt_wxv2_get(&m, "return_code"), "SUCCESS")) {
        /* 通信标识: the request did not get through to the business logic. */
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "return_code_fail", pt_wxv2_get(&m, "return_msg"));
    } else if ((appid && strcmp(appid, cfg->app_id) != 0) ||
               (mch && strcmp(mch, cfg->merchant_id) != 0)) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "merchant_mismatch",
                   "WeChat Pay answered for another appid or mch_id");
    } else if (op == PT_GW_PAY) {
        classify_pay(&m, c, out);
    } else if (op == PT_GW_QUERY) {
        classify_query(&m, c, out);
    } else {
        classify_reverse(&m, out);
    }
    pt_wxv2_msg_free(&m);
    return PT_OK;
}

/* ---- configuration ------------------------------------------------------------- */

/* spbill_create_ip: an IPv4 or IPv6 literal ("支持IPV4和IPV6两种格式"). */
static int ip_ok(const char *s)
{
    size_t n = strlen(s);
    return n >= 2 && n < PT_WXV2_CLIENT_IP_MAX && strspn(s, "0123456789abcdefABCDEF.:") == n &&
           strpbrk(s, ".:") != NULL;
}

int pt__wechat_v2_load(const char *apiv2_key_file, const char *cert_file, const char *key_file,
                       const char *client_ip, pt_gw_random_fn rnd, void *ctx,
                       struct pt_gw_config *o, char *err, size_t errlen)
{
    if (!apiv2_key_file[0] && !cert_file[0])
        return PT_OK; /* no payment-code charges on this gateway */
    if (!apiv2_key_file[0] || !cert_file[0]) {
        snprintf(err, errlen,
                 "gateways.wechat.%s: needed with %s (payment-code charges sign with the APIv2 "
                 "key and reverse over mutual TLS with the API certificate)",
                 apiv2_key_file[0] ? "apiclient_cert_file" : "apiv2_key_file",
                 apiv2_key_file[0] ? "apiv2_key_file" : "apiclient_cert_file");
        return PT_ECONFIG;
    }
    int rc = pt__gw_load_secret("wechat", "apiv2_key_file", apiv2_key_file, o->apiv2_key,
                                sizeof o->apiv2_key, &o->apiv2_key_len, err, errlen);
    if (rc != PT_OK)
        return rc;
    if (o->apiv2_key_len != PT_WXV2_KEY_LEN) {
        snprintf(err, errlen,
                 "gateways.wechat.apiv2_key_file: %s: the APIv2 key is %d characters, this file "
                 "holds %zu",
                 apiv2_key_file, PT_WXV2_KEY_LEN, o->apiv2_key_len);
        pt_zeroize(o->apiv2_key, sizeof o->apiv2_key);
        o->apiv2_key_len = 0;
        return PT_EPARSE;
    }
    struct pt_pk *cert = NULL;
    rc = pt__gw_load_key("wechat", "apiclient_cert_file", cert_file, rnd, ctx, &cert, err, errlen);
    if (rc == PT_OK && pt_pk_kind(cert) != PT_PK_CERT) {
        snprintf(err, errlen,
                 "gateways.wechat.apiclient_cert_file: %s: not a certificate (apiclient_cert.pem "
                 "from the merchant platform)",
                 cert_file);
        rc = PT_EPARSE;
    }
    pt_pk_free(cert);
    if (rc == PT_OK && client_ip[0] && !ip_ok(client_ip)) {
        snprintf(err, errlen, "gateways.wechat.spbill_create_ip: \"%s\" is not an IP address",
                 client_ip);
        rc = PT_EPARSE;
    }
    if (rc != PT_OK) {
        pt_zeroize(o->apiv2_key, sizeof o->apiv2_key);
        o->apiv2_key_len = 0;
        return rc;
    }
    pt__copy(o->client_cert_file, sizeof o->client_cert_file, cert_file);
    pt__copy(o->client_key_file, sizeof o->client_key_file, key_file);
    pt__copy(o->client_ip, sizeof o->client_ip, client_ip);
    return PT_OK;
}

/* ---- payterm sign / verify --gateway wechat-v2 ------------------------------------- */

static int cli_key(struct pt_gw_cli *a, unsigned char *key, size_t *keylen)
{
    if (pt__cli_need(a, a->key_file, "--key-file (the APIv2 key)"))
        return PT_GW_CLI_USAGE;
    return pt__cli_secret(a, NULL, a->key_file, "--key", key, keylen);
}

/* The params of a flat JSON object of strings (`sign` left out) into f. */
static int cli_params(struct pt_gw_cli *a, const cJSON *j, struct pt_wxv2_field *f, size_t *n)
{
    *n = 0;
    if (!cJSON_IsObject(j))
        return pt__cli_usage(a, "standard input: expected a JSON object of strings (params.json)");
    for (const cJSON *it = j->child; it; it = it->next) {
        if (!cJSON_IsString(it))
            return pt__cli_usage(a, "params.json: the value of \"%s\" is not a string", it->string);
        if (!name_ok(it->string))
            return pt__cli_usage(
                a, "params.json: \"%.80s\" is not a field name ([A-Za-z_][A-Za-z0-9_]*)",
                it->string);
        if (strcmp(it->string, "sign") == 0)
            continue;
        for (size_t i = 0; i < *n; i++)
            if (strcmp(f[i].name, it->string) == 0)
                return pt__cli_usage(a, "params.json: \"%s\" is given twice", it->string);
        if (*n >= PT_WXV2_FIELDS_MAX - 1) /* room for the sign */
            return pt__cli_usage(a, "params.json: more than %d fields", PT_WXV2_FIELDS_MAX - 1);
        f[(*n)++] = (struct pt_wxv2_field){it->string, it->valuestring};
    }
    return PT_GW_CLI_OK;
}

int pt__cli_sign_wechat_v2(struct pt_gw_cli *a, char *in, size_t len, cJSON **out)
{
    unsigned char key[PT_GW_CLI_SECRET_MAX];
    size_t keylen = 0;
    struct pt_wxv2_field f[PT_WXV2_FIELDS_MAX + 1];
    size_t n = 0;
    enum pt_wxv2_sign_type type = PT_WXV2_MD5;
    char sign[PT_WXV2_SIGN_MAX], *sts = NULL, *xml = NULL;
    cJSON *j = cJSON_ParseWithLength(in, len);
    int rc = cli_params(a, j, f, &n);
    if (rc == PT_GW_CLI_OK)
        rc = cli_key(a, key, &keylen);
    /* Without sign_type WeChat (and the SDK) take MD5. */
    const char *st = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "sign_type"));
    if (rc == PT_GW_CLI_OK && st && pt_wxv2_sign_type(st, &type) != PT_OK)
        rc = pt__cli_usage(a, "params.json: sign_type \"%.40s\": expected HMAC-SHA256 or MD5", st);
    if (rc != PT_GW_CLI_OK)
        goto out;
    rc = PT_GW_CLI_FAIL;
    sts = pt_wxv2_string_to_sign(f, n, NULL);
    if (!sts || pt_wxv2_sign(type, key, keylen, f, n, sign) != PT_OK)
        goto out;
    f[n++] = (struct pt_wxv2_field){"sign", sign};
    int xrc = pt_wxv2_xml(f, n, &xml, NULL);
    if (xrc == PT_EINVAL) {
        rc = pt__cli_usage(a, "params.json: a value holds a control character or is not UTF-8");
        goto out;
    }
    if (xrc != PT_OK)
        goto out;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "string_to_sign", sts);
    cJSON_AddStringToObject(o, "sign", sign);
    cJSON_AddStringToObject(o, "xml", xml);
    *out = o;
    rc = PT_GW_CLI_OK;
out:
    pt_zeroize(key, sizeof key);
    free(sts);
    free(xml);
    cJSON_Delete(j);
    return rc;
}

int pt__cli_verify_wechat_v2(struct pt_gw_cli *a, char *in, size_t len, cJSON **out)
{
    unsigned char key[PT_GW_CLI_SECRET_MAX];
    size_t keylen = 0;
    struct pt_wxv2_msg m;
    int rc = cli_key(a, key, &keylen);
    if (rc != PT_GW_CLI_OK)
        return rc;
    rc = pt_wxv2_parse(in, len, &m);
    if (rc != PT_OK) {
        rc = pt__cli_invalid(out, rc == PT_ETOOBIG ? "answer too large"
                                                   : "not a flat APIv2 XML document (DOCTYPE, "
                                                     "entities, nesting, duplicates and "
                                                     "control characters are refused)");
    } else if (pt_wxv2_verify(key, keylen, &m) != PT_OK) {
        const char *s = pt_wxv2_get(&m, "sign");
        rc =
            pt__cli_invalid(out, !s                ? "the answer carries no sign"
                                 : strlen(s) == 32 ? "an MD5 sign: payterm accepts HMAC-SHA256 only"
                                                   : "sign does not verify");
    } else {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddTrueToObject(o, "valid");
        cJSON *fields = cJSON_AddObjectToObject(o, "fields");
        for (int i = 0; i < m.n; i++)
            cJSON_AddStringToObject(fields, m.f[i].name, m.f[i].value);
        *out = o;
        rc = PT_GW_CLI_OK;
    }
    pt_wxv2_msg_free(&m);
    pt_zeroize(key, sizeof key);
    return rc;
}
