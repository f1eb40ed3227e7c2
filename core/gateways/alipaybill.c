/*
 * alipaybill.c - Alipay's trade bill (see alipaybill.h).
 *
 * One pass over the lines of the detail file.  A line is split at commas:
 * GBK's second bytes (0x40-0xFE) never spell a comma (nor a quote, a tab,
 * CR or LF).  A value with a comma of its own (a goods name, a store name
 * typed at Alipay) must be quoted as RFC 4180 does ("Tea, large", "" for a
 * quote), as the CSV readers of the format take it; an unquoted one makes
 * a row of another width, refused with its line.  A value may carry the one
 * tab Alipay puts after ids and text; nothing else is trimmed.
 */
#include "alipaybill.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "alipay.h"
#include "err.h"
#include "gateway.h"
#include "gwcommon.h"
#include "money.h"
#include "unzip.h"

/* The file's words, in GBK (the comment gives each in UTF-8). */
#define GBK_TITLE "#\xd6\xa7\xb8\xb6\xb1\xa6\xd2\xb5\xce\xf1\xc3\xf7\xcf\xb8\xb2\xe9\xd1\xaf"
/* #支付宝业务明细查询 */
#define GBK_LIST "\xd2\xb5\xce\xf1\xc3\xf7\xcf\xb8\xc1\xd0\xb1\xed" /* 业务明细列表 */
#define GBK_LIST_END GBK_LIST "\xbd\xe1\xca\xf8"                    /* 业务明细列表结束 */
#define GBK_SALE "\xbd\xbb\xd2\xd7"                                 /* 交易 */
#define GBK_REFUND "\xcd\xcb\xbf\xee"                               /* 退款 */
#define GBK_TRADES "#\xbd\xbb\xd2\xd7\xba\xcf\xbc\xc6\xa3\xba"      /* #交易合计： */
#define GBK_REFUNDS "#\xcd\xcb\xbf\xee\xba\xcf\xbc\xc6\xa3\xba"     /* #退款合计： */
#define GBK_SUM_TRADES                                                                             \
    "\xb1\xca\xa3\xac\xc9\xcc\xbc\xd2\xca\xb5\xca\xd5\xb9\xb2" /* 笔，商家实收共 */
#define GBK_SUM_REFUNDS                                                                                       \
    "\xb1\xca\xa3\xac\xc9\xcc\xbc\xd2\xca\xb5\xca\xd5\xcd\xcb\xbf\xee\xb9\xb2" /* 笔，商家实收退款共 \
                                                                                */
#define GBK_YUAN "\xd4\xaa"                                                    /* 元 */
#define GBK_DETAIL "_\xd2\xb5\xce\xf1\xc3\xf7\xcf\xb8.csv" /* _业务明细.csv */

#define MAX_COLS 64

/* The columns read, by their name in the header. */
enum col { C_TRADE_NO, C_ORDER, C_KIND, C_DONE, C_AMOUNT, C_RECEIVED, C_REQUEST_NO, C__COUNT };
static const struct {
    const char *gbk, *utf8;
} cols[C__COUNT] = {
    [C_TRADE_NO] = {"\xd6\xa7\xb8\xb6\xb1\xa6\xbd\xbb\xd2\xd7\xba\xc5", "支付宝交易号"},
    [C_ORDER] = {"\xc9\xcc\xbb\xa7\xb6\xa9\xb5\xa5\xba\xc5", "商户订单号"},
    [C_KIND] = {"\xd2\xb5\xce\xf1\xc0\xe0\xd0\xcd", "业务类型"},
    [C_DONE] = {"\xcd\xea\xb3\xc9\xca\xb1\xbc\xe4", "完成时间"},
    [C_AMOUNT] = {"\xb6\xa9\xb5\xa5\xbd\xf0\xb6\xee\xa3\xa8\xd4\xaa\xa3\xa9", "订单金额（元）"},
    [C_RECEIVED] = {"\xc9\xcc\xbc\xd2\xca\xb5\xca\xd5\xa3\xa8\xd4\xaa\xa3\xa9", "商家实收（元）"},
    [C_REQUEST_NO] = {"\xcd\xcb\xbf\xee\xc5\xfa\xb4\xce\xba\xc5/\xc7\xeb\xc7\xf3\xba\xc5",
                      "退款批次号/请求号"},
};

struct field {
    const char *p;
    size_t n;
};

/* A refusal naming the bill's line (fmt and its arguments in __VA_ARGS__). */
#define fail(err, errlen, line, ...) pt_recon_line_fail(err, errlen, "Alipay", line, __VA_ARGS__)

static int starts(const char *p, size_t n, const char *s)
{
    size_t k = strlen(s);
    return n >= k && memcmp(p, s, k) == 0;
}

static int contains(const char *p, size_t n, const char *s)
{
    size_t k = strlen(s);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(p + i, s, k) == 0)
            return 1;
    return 0;
}

/* The list's start or end marker: "#---...业务明细列表[结束]---...". */
static int marker(const char *p, size_t n, int end)
{
    if (!starts(p, n, "#-") || p[n - 1] != '-')
        return 0;
    return end ? contains(p, n, GBK_LIST_END)
               : contains(p, n, GBK_LIST) && !contains(p, n, GBK_LIST_END);
}

/* The end of the quoted value at p (after its closing quote), or NULL
 * when it is not closed on the line. */
static const char *quoted_end(const char *p, const char *end)
{
    for (const char *q = p + 1; q < end; q++)
        if (*q == '"') {
            if (q + 1 < end && q[1] == '"')
                q++; /* "" is a quote inside */
            else
                return q + 1;
        }
    return NULL;
}

/* Splits at commas, each value without its one trailing tab and a quoted
 * one without its quotes (its "" left as they are: no value payterm reads
 * is quoted); the count, -1 past MAX_COLS, -2 for a quote not closed or
 * followed by more than a tab. */
static int split(const char *p, size_t n, struct field *f)
{
    int k = 0;
    const char *end = p + n;
    for (;;) {
        if (k == MAX_COLS)
            return -1;
        const char *from = p, *to;
        if (p < end && *p == '"') {
            if (!(to = quoted_end(p, end)))
                return -2;
            from = p + 1;
            p = to;
            to--;
            if (p < end && *p == '\t')
                p++;
            if (p < end && *p != ',')
                return -2;
        } else {
            const char *c = p < end ? memchr(p, ',', (size_t)(end - p)) : NULL;
            p = to = c ? c : end;
            if (to > from && to[-1] == '\t')
                to--;
        }
        f[k].p = from;
        f[k].n = (size_t)(to - from);
        k++;
        if (p >= end)
            return k;
        p++; /* the comma */
    }
}

static int is(const struct field *f, const char *s)
{
    return f->n == strlen(s) && memcmp(f->p, s, f->n) == 0;
}

/* An id payterm compares: printable ASCII, fitting out; 0 otherwise. */
static int ascii(const struct field *f, char *out, size_t cap)
{
    if (f->n >= cap)
        return 0;
    for (size_t i = 0; i < f->n; i++)
        if ((unsigned char)f->p[i] <= 0x20 || (unsigned char)f->p[i] >= 0x7f)
            return 0;
    memcpy(out, f->p, f->n);
    out[f->n] = '\0';
    return 1;
}

/* A yuan amount with an optional '-' into signed fen; 0 when it is none. */
static int yuan(const char *p, size_t n, int64_t *fen)
{
    int neg = n && p[0] == '-';
    if (pt_money_from_decimal(p + neg, n - (size_t)neg, "CNY", fen) != PT_OK)
        return 0;
    if (neg)
        *fen = -*fen;
    return 1;
}

struct parse {
    int col[C__COUNT];
    int ncols;
    const char *date;
    int day;
    struct pt_recon_rows *rows;
    size_t trades, refunds;
    int64_t received_trades, received_refunds; /* 商家实收 of the rows, fen */
};

static int header(struct parse *ps, const char *line, size_t n, size_t lineno, char *err,
                  size_t errlen)
{
    struct field f[MAX_COLS];
    ps->ncols = split(line, n, f);
    if (ps->ncols < 0)
        return fail(err, errlen, lineno, "%s",
                    ps->ncols == -1 ? "more than 64 columns" : "a quote that is not closed");
    for (int c = 0; c < C__COUNT; c++) {
        ps->col[c] = -1;
        for (int i = 0; i < ps->ncols; i++)
            if (is(&f[i], cols[c].gbk)) {
                if (ps->col[c] >= 0)
                    return fail(err, errlen, lineno, "column %s twice", cols[c].utf8);
                ps->col[c] = i;
            }
        if (ps->col[c] < 0)
            return fail(err, errlen, lineno, "no column %s in the header", cols[c].utf8);
    }
    return PT_OK;
}

static int detail(struct parse *ps, const char *line, size_t n, size_t lineno, char *err,
                  size_t errlen)
{
    struct field f[MAX_COLS];
    int k = split(line, n, f);
    if (k == -2)
        return fail(err, errlen, lineno, "a quoted value not closed, or followed by more");
    if (k != ps->ncols)
        return fail(err, errlen, lineno, "%d values, the header has %d columns", k, ps->ncols);
    if (ps->trades + ps->refunds >= PT_ALIPAYBILL_MAX_ROWS)
        return fail(err, errlen, lineno, "more than %d rows", PT_ALIPAYBILL_MAX_ROWS);
    const struct field *kind = &f[ps->col[C_KIND]], *done = &f[ps->col[C_DONE]];
    int refund = is(kind, GBK_REFUND);
    if (!refund && !is(kind, GBK_SALE))
        return fail(err, errlen, lineno, "业务类型 is neither 交易 nor 退款");
    /* 完成时间 "yyyy-MM-dd HH:mm:ss", China time: the bill's own day. */
    if (done->n != 19 || done->p[10] != ' ' || memcmp(done->p, ps->date, 10) != 0)
        return fail(err, errlen, lineno, "完成时间 is not a time of %s", ps->date);
    struct pt_recon_record r;
    memset(&r, 0, sizeof r);
    r.refund = refund;
    r.day = ps->day;
    snprintf(r.currency, sizeof r.currency, "CNY");
    if (!ascii(&f[ps->col[C_TRADE_NO]], r.gateway_trade_no, sizeof r.gateway_trade_no) ||
        !r.gateway_trade_no[0])
        return fail(err, errlen, lineno, "支付宝交易号 is not a trade number");
    if (f[ps->col[C_ORDER]].n && !ascii(&f[ps->col[C_ORDER]], r.order_id, sizeof r.order_id))
        return fail(err, errlen, lineno, "商户订单号 is not an order id");
    const struct field *rq = &f[ps->col[C_REQUEST_NO]];
    if (!refund && rq->n)
        return fail(err, errlen, lineno, "退款批次号/请求号 on a 交易 row");
    if (refund && rq->n && !ascii(rq, r.refund_id, sizeof r.refund_id))
        return fail(err, errlen, lineno, "退款批次号/请求号 is not a refund id");
    const struct field *a = &f[ps->col[C_AMOUNT]], *got = &f[ps->col[C_RECEIVED]];
    int64_t amount, received;
    if (!yuan(a->p, a->n, &amount) || (refund ? amount >= 0 : amount <= 0))
        return fail(err, errlen, lineno, "订单金额（元） is not a %s amount in yuan",
                    refund ? "negative" : "positive");
    if (!yuan(got->p, got->n, &received))
        return fail(err, errlen, lineno, "商家实收（元） is not an amount in yuan");
    r.amount = refund ? -amount : amount;
    struct pt_recon_record *slot = pt_recon_push(&ps->rows->rows, &ps->rows->n, &ps->rows->cap);
    if (!slot)
        return PT_ENOMEM;
    *slot = r;
    int64_t *sum = refund ? &ps->received_refunds : &ps->received_trades;
    if (__builtin_add_overflow(*sum, received, sum)) {
        ps->rows->n--;
        return fail(err, errlen, lineno, "商家实收（元） adds up past what payterm counts");
    }
    *(refund ? &ps->refunds : &ps->trades) += 1;
    return PT_OK;
}

/* "#交易合计：N笔，商家实收共X元，..." (or 退款合计, 商家实收退款共): the rows'
 * count and 商家实收 must be N and X.  1 when line is this total, -1 when it
 * is and does not add up, 0 when it is another line. */
static int total(const char *line, size_t n, const char *head, const char *mid, size_t rows,
                 int64_t received)
{
    if (!starts(line, n, head))
        return 0;
    const char *p = line + strlen(head), *end = line + n;
    size_t count = 0;
    int digits = 0;
    for (; p < end && *p >= '0' && *p <= '9' && digits < 9; p++, digits++)
        count = count * 10 + (size_t)(*p - '0');
    if (!digits || !starts(p, (size_t)(end - p), mid))
        return -1;
    p += strlen(mid);
    const char *y = p;
    while (p < end && (*p == '-' || *p == '.' || (*p >= '0' && *p <= '9')))
        p++;
    int64_t sum;
    if (!yuan(y, (size_t)(p - y), &sum) || !starts(p, (size_t)(end - p), GBK_YUAN))
        return -1;
    return count == rows && sum == received ? 1 : -1;
}

int pt_alipaybill_parse(const char *text, size_t len, const char *date, int day,
                        struct pt_recon_rows *rows, char *err, size_t errlen)
{
    if (errlen)
        err[0] = '\0';
    if (len > PT_ALIPAYBILL_MAX_BYTES)
        return PT_ETOOBIG;
    if (!pt_recon_date_ok(date))
        return PT_EINVAL;
    struct parse ps = {.date = date, .day = day, .rows = rows};
    size_t before = rows->n, lineno = 0, n;
    const char *p = text, *end = text + len, *line;
    enum { TITLE, HEAD, COLUMNS, ROWS, FOOT } at = TITLE;
    int trades_total = 0, refunds_total = 0, rc = PT_OK;
    while (rc == PT_OK && pt_recon_next_line(&p, end, &line, &n)) {
        lineno++;
        if (at == TITLE) {
            rc = n == strlen(GBK_TITLE) && starts(line, n, GBK_TITLE)
                     ? PT_OK
                     : fail(err, errlen, lineno, "not Alipay's 业务明细 (no #支付宝业务明细查询)");
            at = HEAD;
        } else if (at == HEAD) {
            if (!n || line[0] != '#')
                rc = fail(err, errlen, lineno, "the header ends without the 业务明细列表 line");
            else if (marker(line, n, 0))
                at = COLUMNS;
        } else if (at == COLUMNS) {
            rc = header(&ps, line, n, lineno, err, errlen);
            at = ROWS;
        } else if (at == ROWS) {
            if (n && line[0] == '#')
                rc = marker(line, n, 1) ? PT_OK
                                        : fail(err, errlen, lineno, "a # line inside the list");
            else
                rc = detail(&ps, line, n, lineno, err, errlen);
            if (n && line[0] == '#')
                at = FOOT;
        } else if (n) {
            int t = total(line, n, GBK_TRADES, GBK_SUM_TRADES, ps.trades, ps.received_trades);
            int r = total(line, n, GBK_REFUNDS, GBK_SUM_REFUNDS, ps.refunds, ps.received_refunds);
            if (line[0] != '#')
                rc = fail(err, errlen, lineno, "a line after the list that is not a # line");
            else if (t < 0 || r < 0)
                rc = fail(err, errlen, lineno,
                          "#%s does not match the bill's %zu %s rows and their 商家实收",
                          t < 0 ? "交易合计" : "退款合计", t < 0 ? ps.trades : ps.refunds,
                          t < 0 ? "交易" : "退款");
            trades_total |= t > 0;
            refunds_total |= r > 0;
        }
    }
    if (rc == PT_OK && at != FOOT)
        rc = fail(err, errlen, lineno + 1, "the bill ends before 业务明细列表结束");
    else if (rc == PT_OK && !trades_total)
        rc = fail(err, errlen, lineno + 1, "no #交易合计 line after the list");
    else if (rc == PT_OK && ps.refunds && !refunds_total)
        rc = fail(err, errlen, lineno + 1, "no #退款合计 line for the bill's %zu refunds",
                  ps.refunds);
    if (rc)
        rows->n = before; /* never a partial bill */
    return rc;
}

int pt_alipaybill_unzip(const void *zip, size_t len, char **out, size_t *outlen, char *err,
                        size_t errlen)
{
    /* Alipay names the entries in GBK; an archive repacked elsewhere may
     * have them in UTF-8. */
    static const char *const names[] = {GBK_DETAIL, "_业务明细.csv", NULL};
    char why[96];
    int rc = pt_unzip_find(zip, len, names, PT_ALIPAYBILL_MAX_BYTES, out, outlen, why, sizeof why);
    if (rc == PT_ENOTFOUND)
        snprintf(err, errlen, "Alipay bill: the zip holds no _业务明细.csv");
    else if (rc == PT_EUNSUPPORTED || rc == PT_EPARSE)
        snprintf(err, errlen, "Alipay bill: %s", why);
    else if (rc == PT_ETOOBIG)
        snprintf(err, errlen, "Alipay bill: the detail file is larger than %u bytes",
                 PT_ALIPAYBILL_MAX_BYTES);
    return rc == PT_ENOTFOUND || rc == PT_EUNSUPPORTED ? PT_EPARSE : rc;
}

/* ---- the download ---- */

#define METHOD "alipay.data.dataservice.bill.downloadurl.query"

int pt_alipaybill_request(const struct pt_gw_config *cfg, const struct pt_gw_env *env,
                          const char *date, struct pt_http_request *out)
{
    if (!pt_recon_date_ok(date))
        return PT_EINVAL;
    char biz[64];
    snprintf(biz, sizeof biz, "{\"bill_type\":\"trade\",\"bill_date\":\"%s\"}", date);
    return pt__alipay_signed_request(cfg, METHOD, biz, env, out);
}

static void say(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (whylen)
        vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
}

int pt_alipaybill_answer(const struct pt_gw_config *cfg, const struct pt_http_response *resp,
                         char *url, size_t urlcap, char *why, size_t whylen)
{
    say(why, whylen, "%s", "");
    if (resp->status != 200 || !resp->body) {
        say(why, whylen, "the bill link query answered HTTP %d", resp->status);
        return PT_EPARSE;
    }
    const char *raw;
    size_t rawlen;
    int rc =
        pt_alipay_verify_response(cfg->peer_key, resp->body, resp->body_len, METHOD, &raw, &rawlen);
    if (rc != PT_OK) {
        say(why, whylen, "the bill link answer %s",
            rc == PT_ESIG ? "is not signed by Alipay's key" : "is not Alipay's JSON");
        return rc == PT_ESIG ? PT_ESIG : PT_EPARSE;
    }
    cJSON *o = cJSON_ParseWithLength(raw, rawlen);
    const char *code = pt__jstr(o, "code"), *sub = pt__jstr(o, "sub_code");
    const char *link = pt__jstr(o, "bill_download_url");
    rc = PT_OK;
    if (code && strcmp(code, "10000") != 0 && sub &&
        (!strcmp(sub, "isp.bill_not_exist") || !strcmp(sub, "BILL_NOT_EXIST"))) {
        say(why, whylen, "the bill is not ready (%s)", sub);
        rc = PT_EAGAIN;
    } else if (!code || strcmp(code, "10000") != 0) {
        say(why, whylen, "Alipay refused the bill link query: %.16s %.64s", code ? code : "-",
            sub ? sub : "-");
        rc = PT_EPARSE;
    } else if (!link || strncmp(link, "https://", 8) != 0 || strlen(link) >= urlcap) {
        say(why, whylen, "the bill link is not an https URL payterm fetches");
        rc = PT_EPARSE;
    } else {
        snprintf(url, urlcap, "%s", link);
    }
    cJSON_Delete(o);
    return rc;
}

int pt__alipay_fetch_bill(const struct pt_gw_config *cfg, struct pt_gw_exchange *x,
                          const char *date, int day, struct pt_recon_rows *rows, char *why,
                          size_t whylen)
{
    struct pt_gw_env env;
    char nonce[33], url[2048];
    struct pt_http_request req = {0};
    struct pt_http_response resp = {0};
    int rc = x->env(x->ctx, &env, nonce);
    if (rc == PT_OK && (rc = pt_alipaybill_request(cfg, &env, date, &req)) != PT_OK)
        say(why, whylen, "the bill link query cannot be signed (%s)", pt_strerror(rc));
    if (rc == PT_OK && (rc = x->send(x->ctx, &req, &resp)) == PT_OK) {
        rc = pt_alipaybill_answer(cfg, &resp, url, sizeof url, why, whylen);
        pt_http_response_free(&resp);
    }
    /* The link lives 30 s: fetched at once.  It carries its own token; the
     * answer that gave it was signed, the zip is not. */
    if (rc == PT_OK && (rc = pt__request_start(&req, "GET", url, "")) == PT_OK) {
        req.max_body = PT_ALIPAYBILL_DOWNLOAD_MAX;
        rc = x->send(x->ctx, &req, &resp);
    }
    if (rc == PT_OK) {
        char *text = NULL;
        size_t len = 0;
        if (resp.status != 200) {
            say(why, whylen, "the bill download answered HTTP %d", resp.status);
            rc = PT_EPARSE;
        } else {
            rc = pt_alipaybill_unzip(resp.body, resp.body_len, &text, &len, why, whylen);
        }
        if (rc == PT_OK)
            rc = pt_alipaybill_parse(text, len, date, day, rows, why, whylen);
        free(text);
        pt_http_response_free(&resp);
    }
    return rc;
}

int pt__alipay_parse_bill(const char *text, size_t len, const char *date,
                          struct pt_recon_rows *rows, char *err, size_t errlen)
{
    if (!pt_unzip_is_zip(text, len))
        return pt_alipaybill_parse(text, len, date, 0, rows, err, errlen);
    char *detail = NULL;
    size_t n = 0;
    int rc = pt_alipaybill_unzip(text, len, &detail, &n, err, errlen);
    if (rc == PT_OK)
        rc = pt_alipaybill_parse(detail, n, date, 0, rows, err, errlen);
    free(detail);
    return rc;
}
