/*
 * wxbill.c - WeChat Pay's trade bill (see wxbill.h).
 *
 * One pass over the lines.  A line is split at commas (WeChat's values hold
 * no commas: names and attach data are given without them, and a value
 * with one would break every reader of the format, the SDKs' included); a
 * detail or summary value must begin with the backtick WeChat puts before
 * each one.
 */
#include "wxbill.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "crypto.h"
#include "err.h"
#include "gateway.h"
#include "gwcommon.h"
#include "wechat.h"
#include "wechat_v2.h"

#include <cjson/cJSON.h>
#include "money.h"

#define MAX_COLS 64
#define SUMMARY_FIRST "总交易单数"

/* The columns read, by their name in the header. */
enum col {
    C_TIME,     /* 交易时间 */
    C_TRADE_NO, /* 微信订单号 */
    C_ORDER,    /* 商户订单号 */
    C_STATE,    /* 交易状态 */
    C_CURRENCY, /* 货币种类 */
    C_SETTLED,  /* 应结订单金额 */
    C_REFUND_NO,
    C_REFUND_ID,
    C_REFUNDED,     /* 退款金额 */
    C_ORDER_AMOUNT, /* 订单金额 (免充值券 bills) */
    C_REFUND_ASKED, /* 申请退款金额 (免充值券 bills) */
    C__COUNT
};
static const char *const col_names[C__COUNT] = {
    [C_TIME] = "交易时间",          [C_TRADE_NO] = "微信订单号",       [C_ORDER] = "商户订单号",
    [C_STATE] = "交易状态",         [C_CURRENCY] = "货币种类",         [C_SETTLED] = "应结订单金额",
    [C_REFUND_NO] = "微信退款单号", [C_REFUND_ID] = "商户退款单号",    [C_REFUNDED] = "退款金额",
    [C_ORDER_AMOUNT] = "订单金额",  [C_REFUND_ASKED] = "申请退款金额",
};
/* The summary's columns checked against the rows. */
enum { S_COUNT, S_ORDER_TOTAL, S_REFUND_TOTAL, S__COUNT };
static const char *const sum_names[S__COUNT] = {"总交易单数", "订单总金额", "申请退款总金额"};

struct field {
    const char *p;
    size_t n;
};

/* A refusal naming the bill's line (fmt and its arguments in __VA_ARGS__). */
#define fail(err, errlen, line, ...) pt_recon_line_fail(err, errlen, "WeChat", line, __VA_ARGS__)

/* Splits [p, p+n) at commas into f[]; the count, or -1 past MAX_COLS. */
static int split(const char *p, size_t n, struct field *f)
{
    int k = 0;
    const char *end = p + n;
    for (;;) {
        const char *c = memchr(p, ',', (size_t)(end - p));
        if (k == MAX_COLS)
            return -1;
        f[k].p = p;
        f[k].n = c ? (size_t)(c - p) : (size_t)(end - p);
        k++;
        if (!c)
            return k;
        p = c + 1;
    }
}

static int field_is(const struct field *f, const char *s)
{
    return f->n == strlen(s) && memcmp(f->p, s, f->n) == 0;
}

/* A detail or summary value: behind its backtick, printable, bounded. */
static int value(const struct field *f, char *out, size_t cap)
{
    if (f->n < 1 || f->p[0] != '`' || f->n - 1 >= cap)
        return 0;
    for (size_t i = 1; i < f->n; i++)
        if ((unsigned char)f->p[i] < 0x20 || f->p[i] == 0x7f || f->p[i] == '`')
            return 0;
    memcpy(out, f->p + 1, f->n - 1);
    out[f->n - 1] = '\0';
    return 1;
}

static int yuan(const char *s, int64_t *fen)
{
    return pt_money_from_decimal(s, strlen(s), "CNY", fen) == PT_OK;
}

struct parse {
    int col[C__COUNT]; /* header index, -1 absent */
    int ncols;
    const char *date;
    struct pt_wxbill *out;
    size_t cap;
    int64_t order_total, refund_total; /* of the rows, fen */
    size_t rows;
};

static int header(struct parse *ps, const char *line, size_t n, size_t lineno, char *err,
                  size_t errlen)
{
    struct field f[MAX_COLS];
    int k = split(line, n, f);
    if (k < 0)
        return fail(err, errlen, lineno, "more than %d columns", MAX_COLS);
    ps->ncols = k;
    for (int c = 0; c < C__COUNT; c++) {
        ps->col[c] = -1;
        for (int i = 0; i < k; i++)
            if (field_is(&f[i], col_names[c])) {
                if (ps->col[c] >= 0)
                    return fail(err, errlen, lineno, "column %s twice", col_names[c]);
                ps->col[c] = i;
            }
    }
    static const enum col needed[] = {C_TIME,    C_TRADE_NO,  C_ORDER,     C_STATE,   C_CURRENCY,
                                      C_SETTLED, C_REFUND_NO, C_REFUND_ID, C_REFUNDED};
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++)
        if (ps->col[needed[i]] < 0)
            return fail(err, errlen, lineno, "the header has no column %s (is this a trade bill?)",
                        col_names[needed[i]]);
    return PT_OK;
}

static struct pt_recon_record *new_row(struct parse *ps)
{
    return pt_recon_push(&ps->out->rows, &ps->out->n, &ps->cap);
}

static int detail(struct parse *ps, const struct field *f, int k, size_t lineno, char *err,
                  size_t errlen)
{
    if (k != ps->ncols)
        return fail(err, errlen, lineno, "%d values for %d columns", k, ps->ncols);
    char v[C__COUNT][PT_SHORT_MAX];
    for (int c = 0; c < C__COUNT; c++) {
        v[c][0] = '\0';
        if (ps->col[c] >= 0 && !value(&f[ps->col[c]], v[c], sizeof v[c]))
            return fail(err, errlen, lineno, "%s: not a backtick and 1-%d printable bytes",
                        col_names[c], PT_SHORT_MAX - 1);
    }
    /* 交易时间 "YYYY-MM-DD HH:MM:SS": a row of the bill's own day. */
    if (strlen(v[C_TIME]) != 19 || strncmp(v[C_TIME], ps->date, 10) != 0 || v[C_TIME][10] != ' ')
        return fail(err, errlen, lineno, "交易时间 '%s' is not a time of %s", v[C_TIME], ps->date);
    if (++ps->rows > PT_WXBILL_MAX_ROWS)
        return fail(err, errlen, lineno, "more than %d rows", PT_WXBILL_MAX_ROWS);
    int refund = strcmp(v[C_STATE], "REFUND") == 0;
    if (strcmp(v[C_STATE], "REVOKED") == 0) {
        ps->out->revoked++;
        return PT_OK;
    }
    if (!refund && strcmp(v[C_STATE], "SUCCESS") != 0)
        return fail(err, errlen, lineno, "交易状态 '%s' is none of SUCCESS, REFUND, REVOKED",
                    v[C_STATE]);
    if (!pt_money_currency_valid(v[C_CURRENCY]))
        return fail(err, errlen, lineno, "货币种类 '%s' is not a currency", v[C_CURRENCY]);
    int amount_col = refund ? (ps->col[C_REFUND_ASKED] >= 0 ? C_REFUND_ASKED : C_REFUNDED)
                            : (ps->col[C_ORDER_AMOUNT] >= 0 ? C_ORDER_AMOUNT : C_SETTLED);
    int64_t amount = 0;
    if (!yuan(v[amount_col], &amount) || amount <= 0)
        return fail(err, errlen, lineno, "%s '%s' is not an amount in yuan above 0",
                    col_names[amount_col], v[amount_col]);
    if (ps->col[C_ORDER_AMOUNT] >= 0 && !refund)
        ps->order_total += amount;
    if (ps->col[C_REFUND_ASKED] >= 0 && refund)
        ps->refund_total += amount;
    if (!v[C_ORDER][0] && !v[C_TRADE_NO][0])
        return fail(err, errlen, lineno, "neither 商户订单号 nor 微信订单号");
    if (refund && !v[C_REFUND_ID][0] && !v[C_REFUND_NO][0])
        return fail(err, errlen, lineno, "a refund without 商户退款单号 or 微信退款单号");
    if (strlen(v[C_ORDER]) >= PT_ORDER_ID_MAX || strlen(v[C_REFUND_ID]) >= PT_REFUND_ID_MAX)
        return fail(err, errlen, lineno, "商户订单号 or 商户退款单号 longer than %d bytes",
                    PT_ORDER_ID_MAX - 1);
    struct pt_recon_record *r = new_row(ps);
    if (!r)
        return PT_ENOMEM;
    r->refund = refund;
    r->amount = amount;
    /* Lengths checked above (currency: pt_money_currency_valid). */
    memcpy(r->order_id, v[C_ORDER], strlen(v[C_ORDER]) + 1);
    memcpy(r->gateway_trade_no, v[C_TRADE_NO], strlen(v[C_TRADE_NO]) + 1);
    memcpy(r->currency, v[C_CURRENCY], 4);
    if (refund) {
        memcpy(r->refund_id, v[C_REFUND_ID], strlen(v[C_REFUND_ID]) + 1);
        memcpy(r->gateway_refund_no, v[C_REFUND_NO], strlen(v[C_REFUND_NO]) + 1);
    }
    return PT_OK;
}

/* The summary: its header, then its one line of values. */
static int summary(struct parse *ps, const struct field *h, int hk, const char *line, size_t n,
                   size_t lineno, char *err, size_t errlen)
{
    struct field f[MAX_COLS];
    int k = split(line, n, f);
    if (k != hk)
        return fail(err, errlen, lineno, "%d summary values for %d columns", k, hk);
    for (int s = 0; s < S__COUNT; s++) {
        int at = -1;
        for (int i = 0; i < hk; i++)
            if (field_is(&h[i], sum_names[s]))
                at = i;
        if (at < 0) {
            if (s == S_COUNT)
                return fail(err, errlen, lineno - 1, "the summary has no column %s", sum_names[s]);
            continue; /* an older bill's summary */
        }
        char v[32];
        if (!value(&f[at], v, sizeof v))
            return fail(err, errlen, lineno, "%s: not a backtick and a number", sum_names[s]);
        int64_t want = 0, got = 0;
        if (s == S_COUNT) {
            char *end = NULL;
            long long c = strtoll(v, &end, 10);
            if (!v[0] || *end || c < 0)
                return fail(err, errlen, lineno, "总交易单数 '%s' is not a count", v);
            want = c;
            got = (int64_t)ps->rows;
        } else if (!yuan(v, &want)) {
            return fail(err, errlen, lineno, "%s '%s' is not an amount in yuan", sum_names[s], v);
        } else {
            got = s == S_ORDER_TOTAL ? ps->order_total : ps->refund_total;
            if (ps->col[s == S_ORDER_TOTAL ? C_ORDER_AMOUNT : C_REFUND_ASKED] < 0)
                continue;
        }
        if (want != got)
            return fail(err, errlen, lineno,
                        "%s says %lld, the rows add up to %lld: the bill is not whole",
                        sum_names[s], (long long)want, (long long)got);
    }
    return PT_OK;
}

int pt_wxbill_parse(const char *text, size_t len, const char *bill_date, struct pt_wxbill *out,
                    char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (err && errlen)
        err[0] = '\0';
    if (len > PT_WXBILL_MAX_BYTES)
        return PT_ETOOBIG;
    if (!bill_date || strlen(bill_date) != 10)
        return PT_EINVAL;
    struct parse ps = {.date = bill_date, .out = out};
    const char *p = text, *end = text + len, *line;
    size_t n, lineno = 0;
    if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) /* a BOM some downloads begin with */
        p += 3;
    int rc = PT_EPARSE;
    if (!pt_recon_next_line(&p, end, &line, &n)) {
        rc = fail(err, errlen, 1, "empty: no header");
        goto out;
    }
    lineno = 1;
    if ((rc = header(&ps, line, n, lineno, err, errlen)))
        goto out;
    for (;;) {
        if (!pt_recon_next_line(&p, end, &line, &n)) {
            rc = fail(err, errlen, lineno + 1, "ends before the summary (%s...): cut short",
                      SUMMARY_FIRST);
            goto out;
        }
        lineno++;
        struct field f[MAX_COLS];
        int k = split(line, n, f);
        if (k < 0) {
            rc = fail(err, errlen, lineno, "more than %d values", MAX_COLS);
            goto out;
        }
        if (field_is(&f[0], SUMMARY_FIRST)) {
            const char *vline;
            size_t vn;
            if (!pt_recon_next_line(&p, end, &vline, &vn)) {
                rc = fail(err, errlen, lineno + 1, "the summary has no values: cut short");
                goto out;
            }
            lineno++;
            if ((rc = summary(&ps, f, k, vline, vn, lineno, err, errlen)))
                goto out;
            break;
        }
        if ((rc = detail(&ps, f, k, lineno, err, errlen)))
            goto out;
    }
    /* After the summary: nothing but an empty last line. */
    while (pt_recon_next_line(&p, end, &line, &n)) {
        lineno++;
        if (n) {
            rc = fail(err, errlen, lineno, "text after the summary");
            goto out;
        }
    }
    rc = PT_OK;
out:
    if (rc)
        pt_wxbill_free(out);
    return rc;
}

void pt_wxbill_free(struct pt_wxbill *b)
{
    free(b->rows);
    memset(b, 0, sizeof *b);
}

/* ---- the download ---- */

int pt_wxbill_request(const struct pt_gw_config *cfg, const struct pt_gw_env *env, const char *date,
                      struct pt_http_request *out)
{
    char path[96];
    if (!date || strlen(date) != 10 || strspn(date, "0123456789-") != 10)
        return PT_EINVAL;
    snprintf(path, sizeof path, "/v3/bill/tradebill?bill_date=%s&bill_type=ALL", date);
    return pt__wechat_v3_request(cfg, env, "GET", path, out);
}

/* The scheme, host and port of url ("https://h:p"): its length, 0 when it
 * is not an https URL. */
static size_t origin_len(const char *url)
{
    if (strncmp(url, "https://", 8) != 0)
        return 0;
    size_t n = 8 + strcspn(url + 8, "/?#");
    return n > 8 ? n : 0;
}

__attribute__((format(printf, 3, 4))) static int say(char *why, size_t whylen, const char *fmt, ...)
{
    if (why && whylen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, whylen, fmt, ap);
        va_end(ap);
    }
    return PT_OK;
}

int pt_wxbill_download_path(const char *endpoint, const char *url, char *path, size_t pathlen)
{
    size_t ol = origin_len(url), el = origin_len(endpoint);
    if (!ol || ol != el || strncasecmp(url, endpoint, ol) != 0 || url[ol] != '/' ||
        strlen(url + ol) >= pathlen)
        return 0;
    snprintf(path, pathlen, "%s", url + ol);
    return 1;
}

int pt_wxbill_answer(const struct pt_gw_config *cfg, const struct pt_http_response *resp,
                     char *path, size_t pathlen, char sha1[41], char *why, size_t whylen)
{
    path[0] = sha1[0] = '\0';
    say(why, whylen, "%s", "");
    if (pt__wechat_v3_verify(cfg, resp) != PT_OK) {
        say(why, whylen,
            "the answer (HTTP %d) is not signed by a WeChat Pay platform key payterm "
            "trusts",
            resp->status);
        return PT_ESIG;
    }
    cJSON *o = cJSON_ParseWithLength(resp->body ? resp->body : "", resp->body_len);
    const char *code = pt__jstr(o, "code"), *msg = pt__jstr(o, "message");
    const char *url = pt__jstr(o, "download_url"), *type = pt__jstr(o, "hash_type");
    const char *hash = pt__jstr(o, "hash_value");
    int rc = PT_OK;
    if (resp->status != 200) {
        int later =
            code && (!strcmp(code, "NO_STATEMENT_EXIST") || !strcmp(code, "STATEMENT_CREATING"));
        say(why, whylen, "WeChat Pay answered HTTP %d %s%s%.200s", resp->status,
            code ? code : "(no code)", msg ? ": " : "", msg ? msg : "");
        rc = later ? PT_EAGAIN : PT_EPARSE;
    } else if (!url || !type || !hash) {
        say(why, whylen, "the answer lacks download_url, hash_type or hash_value");
        rc = PT_EPARSE;
    } else if (strcmp(type, "SHA1") != 0 || strlen(hash) != 40 ||
               strspn(hash, "0123456789abcdefABCDEF") != 40) {
        say(why, whylen, "hash_type '%.16s' / hash_value: not a SHA1 hex digest", type);
        rc = PT_EPARSE;
    } else if (!pt_wxbill_download_path(cfg->endpoint, url, path, pathlen)) {
        say(why, whylen, "download_url is not on the configured endpoint's host (%.*s)",
            (int)origin_len(cfg->endpoint), cfg->endpoint);
        rc = PT_EPARSE;
    } else {
        for (int i = 0; i < 40; i++)
            sha1[i] = (char)((hash[i] >= 'A' && hash[i] <= 'F') ? hash[i] + 32 : hash[i]);
        sha1[40] = '\0';
    }
    cJSON_Delete(o);
    return rc;
}

int pt_wxbill_file_request(const struct pt_gw_config *cfg, const struct pt_gw_env *env,
                           const char *path, struct pt_http_request *out)
{
    int rc = pt__wechat_v3_request(cfg, env, "GET", path, out);
    if (rc == PT_OK)
        out->max_body = PT_WXBILL_DOWNLOAD_MAX;
    return rc;
}

int pt_wxbill_file_check(const struct pt_http_response *resp, const char *sha1, char *why,
                         size_t whylen)
{
    say(why, whylen, "%s", "");
    if (resp->status != 200) {
        say(why, whylen, "the bill file's download answered HTTP %d", resp->status);
        return PT_EPARSE;
    }
    char got[41];
    if (pt_sha1_hex(resp->body ? resp->body : "", resp->body_len, got) != PT_OK)
        return PT_ECRYPTO;
    if (strcmp(got, sha1) != 0) {
        say(why, whylen, "the bill file's SHA-1 is %s, the answer said %s: not the bill asked for",
            got, sha1);
        return PT_ESIG;
    }
    return PT_OK;
}

/* Appends rows[0..n) to out with day; PT_ENOMEM. */
static int append_day(struct pt_recon_rows *out, const struct pt_recon_record *rows, size_t n,
                      int day)
{
    for (size_t i = 0; i < n; i++) {
        struct pt_recon_record *r = pt_recon_push(&out->rows, &out->n, &out->cap);
        if (!r)
            return PT_ENOMEM;
        *r = rows[i];
        r->day = day;
    }
    return PT_OK;
}

/* A bill's text parsed, its rows added to out as of day (all or none). */
static int parse_day(const char *text, size_t len, const char *date, int day,
                     struct pt_recon_rows *out, char *why, size_t whylen)
{
    struct pt_wxbill b = {0};
    int rc = pt_wxbill_parse(text, len, date, &b, why, whylen);
    if (rc == PT_OK)
        rc = append_day(out, b.rows, b.n, day);
    pt_wxbill_free(&b);
    return rc;
}

int pt_wxbill_v2_answer(const struct pt_http_response *resp, char *why, size_t whylen)
{
    say(why, whylen, "%s", "");
    const char *b = resp->body ? resp->body : "";
    size_t i = 0;
    while (i < resp->body_len && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n'))
        i++;
    int xml = i < resp->body_len && b[i] == '<'; /* a bill begins with its header or a BOM */
    if (resp->status != 200) {
        /* WeChat answers its errors with 200: anything else is not its. */
        say(why, whylen, "WeChat Pay's downloadbill answered HTTP %d", resp->status);
        return PT_EPARSE;
    }
    if (!xml)
        return PT_OK;
    struct pt_wxv2_msg m = {0};
    if (pt_wxv2_parse(b, resp->body_len, &m) != PT_OK) {
        say(why, whylen, "WeChat Pay's downloadbill answered XML that cannot be read");
        return PT_EPARSE;
    }
    const char *code = pt_wxv2_get(&m, "return_code"), *msg = pt_wxv2_get(&m, "return_msg");
    const char *ec = pt_wxv2_get(&m, "error_code");
    /* 下载对账单's errors: "No Bill Exist" (no trade that day, spelled "NO
     * Bill Exist" in places) and "Bill Creating" mean later. */
    int later = msg && (!strcasecmp(msg, "No Bill Exist") || !strcasecmp(msg, "Bill Creating"));
    say(why, whylen, "WeChat Pay's downloadbill answered %.16s: %.200s%s%.16s%s",
        code ? code : "(no return_code)", msg ? msg : "(no return_msg)", ec ? " (error_code " : "",
        ec ? ec : "", ec ? ")" : "");
    pt_wxv2_msg_free(&m);
    return later ? PT_EAGAIN : PT_EPARSE;
}

/* downloadbill: one signed POST, the bill in its answer. */
static int fetch_bill_v2(const struct pt_gw_config *cfg, struct pt_gw_exchange *x, const char *date,
                         int day, struct pt_recon_rows *rows, char *why, size_t whylen)
{
    struct pt_gw_env env;
    char nonce[33];
    struct pt_http_request req = {0};
    struct pt_http_response resp = {0};
    int rc = x->env(x->ctx, &env, nonce);
    if (rc == PT_OK && (rc = pt__wechat_v2_bill_request(cfg, &env, date, &req)) != PT_OK)
        say(why, whylen, "the downloadbill request cannot be signed (%s)", pt_strerror(rc));
    if (rc == PT_OK) {
        req.max_body = PT_WXBILL_DOWNLOAD_MAX;
        rc = x->send(x->ctx, &req, &resp);
    }
    if (rc == PT_OK) {
        rc = pt_wxbill_v2_answer(&resp, why, whylen);
        if (rc == PT_OK)
            rc = parse_day(resp.body, resp.body_len, date, day, rows, why, whylen);
        pt_http_response_free(&resp);
    }
    return rc;
}

int pt__wechat_fetch_bill(const struct pt_gw_config *cfg, struct pt_gw_exchange *x,
                          const char *date, int day, struct pt_recon_rows *rows, char *why,
                          size_t whylen)
{
    if (cfg->bill_apiv2)
        return fetch_bill_v2(cfg, x, date, day, rows, why, whylen);
    struct pt_gw_env env;
    char nonce[33], path[1025], sha1[41];
    struct pt_http_request req = {0};
    struct pt_http_response resp = {0};
    int rc = x->env(x->ctx, &env, nonce);
    if (rc == PT_OK && (rc = pt_wxbill_request(cfg, &env, date, &req)) != PT_OK)
        say(why, whylen, "the bill request cannot be signed (%s)", pt_strerror(rc));
    if (rc == PT_OK && (rc = x->send(x->ctx, &req, &resp)) == PT_OK) {
        rc = pt_wxbill_answer(cfg, &resp, path, sizeof path, sha1, why, whylen);
        pt_http_response_free(&resp);
    }
    if (rc == PT_OK && (rc = x->env(x->ctx, &env, nonce)) == PT_OK &&
        (rc = pt_wxbill_file_request(cfg, &env, path, &req)) != PT_OK)
        say(why, whylen, "the bill file's request cannot be signed (%s)", pt_strerror(rc));
    if (rc == PT_OK && (rc = x->send(x->ctx, &req, &resp)) == PT_OK) {
        rc = pt_wxbill_file_check(&resp, sha1, why, whylen);
        if (rc == PT_OK)
            rc = parse_day(resp.body, resp.body_len, date, day, rows, why, whylen);
        pt_http_response_free(&resp);
    }
    return rc;
}

int pt__wechat_parse_bill(const char *text, size_t len, const char *date,
                          struct pt_recon_rows *rows, char *err, size_t errlen)
{
    return parse_day(text, len, date, 0, rows, err, errlen);
}
