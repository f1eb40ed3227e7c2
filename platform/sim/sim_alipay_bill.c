/*
 * sim_alipay_bill.c - the simulated Alipay's trade bill (业务明细, SPEC 19),
 * from the ledger, as docs/reconcile.md lays it out:
 *
 *   alipay.data.dataservice.bill.downloadurl.query {"bill_type":"trade",
 *   "bill_date":"yyyy-MM-dd"} answers, signed, a bill_download_url that
 *   lives 30 s (isp.bill_not_exist before --bill-ready-after);
 *   GET /downloadBillFile.resource?... serves the zip: the detail file
 *   <pid>0156_<yyyyMMdd>_业务明细.csv and its summary (汇总), GBK, CRLF,
 *   entry names in GBK, deflated.
 *
 * The text is made in UTF-8 and converted once with iconv (glibc's GBK).
 */
#include "sim_int.h"

#include <cjson/cJSON.h>
#include <iconv.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "buf.h"
#include "err.h"
#include "gateways/form.h"

#define FILE_PATH "/downloadBillFile.resource"
#define LINK_LIFE_MS 30000
#define PID "20880211096256330156"
#define MARKER "#-----------------------------------------"

struct bill {
    struct pt_buf text;
    int64_t trades, refunds, received, refunded; /* fen; refunded < 0 */
    int64_t fee;                                 /* fen, as the rows say */
};

static void yuan(int64_t fen, char out[32])
{
    snprintf(out, 32, "%s%lld.%02lld", fen < 0 ? "-" : "", (long long)(llabs(fen) / 100),
             (long long)(llabs(fen) % 100));
}

__attribute__((format(printf, 2, 3))) static void add(struct bill *b, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    pt_buf_puts(&b->text, line);
    pt_buf_puts(&b->text, "\r\n");
}

/* The goods' name as a CSV value: without what would cut a line, quoted
 * (RFC 4180) when it holds a comma or a quote. */
static void goods_of(const char *extra, char out[128])
{
    cJSON *x = cJSON_Parse(extra);
    const char *subject = pt__sim_json_str(x, "subject");
    char name[60];
    snprintf(name, sizeof name, "%s", subject ? subject : "");
    cJSON_Delete(x);
    /* Cut at a character, not inside one (iconv would refuse the rest). */
    size_t n = strlen(name), i = n;
    while (i && ((unsigned char)name[i - 1] & 0xC0) == 0x80)
        i--;
    if (i && (unsigned char)name[i - 1] >= 0xC0) {
        unsigned char lead = (unsigned char)name[i - 1];
        size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
        if (n - (i - 1) < need)
            name[i - 1] = '\0';
    }
    int quote = strpbrk(name, ",\"") != NULL;
    size_t k = 0;
    if (quote)
        out[k++] = '"';
    for (const char *p = name; *p && k < 124; p++) {
        char ch = *p == '\t' || *p == '\n' || *p == '\r' ? ' ' : *p;
        if (ch == '"')
            out[k++] = '"';
        out[k++] = ch;
    }
    if (quote)
        out[k++] = '"';
    out[k] = '\0';
}

static int bill_trade(void *ctx, const struct sim_trade *t)
{
    struct bill *b = ctx;
    char created[20], done[20], amt[32], fee[32], goods[128];
    pt__sim_time_cn(t->created_at, created);
    pt__sim_time_cn(t->paid_at, done);
    yuan(t->amount, amt);
    yuan(-(t->amount * 6 + 500) / 1000, fee); /* 0.6 %, to the fen */
    goods_of(t->extra, goods);
    add(b,
        "%s\t,%s\t,交易\t,%s,%s,%s,\t,\t,\t,\t,*模拟(sim***@example.com)\t,%s,%s,0.00,0.00,0.00,"
        "0.00,0.00,,0.00\t,0.00,\t,%s,0.00,%s",
        t->trade_no, t->order_id, goods, created, done, amt, amt, fee, goods);
    b->trades++;
    b->received += t->amount;
    b->fee -= (t->amount * 6 + 500) / 1000;
    return 0;
}

static int bill_refund(void *ctx, const struct sim_refund *r)
{
    struct bill *b = ctx;
    char created[20], done[20], amt[32];
    pt__sim_time_cn(r->created_at, created);
    pt__sim_time_cn(r->succeeded_at, done);
    yuan(-r->amount, amt);
    add(b,
        "%s\t,%s\t,退款\t,,%s,%s,\t,\t,\t,\t,*模拟(sim***@example.com)\t,%s,%s,0.00,0.00,0.00,"
        "0.00,0.00,,0.00\t,0.00,%s\t,0.00,0.00,",
        r->trade_no, r->order_id, created, done, amt, amt, r->refund_key);
    b->refunds++;
    b->refunded -= r->amount;
    return 0;
}

/* "2026年12月05日 00:00:00" of China time ms. */
static void cn_long(int64_t ms, char out[48])
{
    char t[20];
    pt__sim_time_cn(ms, t);
    snprintf(out, 48, "%.4s年%.2s月%.2s日 %s", t, t + 5, t + 8, t + 11);
}

/* The detail file and the summary of the day starting at start (UTF-8). */
static int make(struct pt_sim *s, int64_t start, struct bill *b, struct pt_buf *summary)
{
    char from[48], to[48], now[48], got[32], back[32], fee[32], amount[32], net[32];
    cn_long(start, from);
    cn_long(start + 86400000LL, to);
    cn_long(pt__sim_now_ms(s), now);
    add(b, "#支付宝业务明细查询");
    add(b, "#账号：[%s]", PID);
    add(b, "#起始日期：[%s]   终止日期：[%s]", from, to);
    add(b, MARKER "业务明细列表----------------------------------------");
    add(b, "支付宝交易号,商户订单号,业务类型,商品名称,创建时间,完成时间,门店编号,门店名称,操作员,"
           "终端号,对方账户,订单金额（元）,商家实收（元）,支付宝红包（元）,集分宝（元）,"
           "支付宝优惠（元）,商家优惠（元）,券核销金额（元）,券名称,商家红包消费金额（元）,"
           "卡消费金额（元）,退款批次号/请求号,服务费（元）,分润（元）,备注");
    pt__sim_lock(s);
    int rc =
        pt__sim_bill_each(s, SIM_GW_ALIPAY, start, start + 86400000LL, bill_trade, bill_refund, b);
    pt__sim_unlock(s);
    if (rc)
        return rc;
    yuan(b->received, got);
    yuan(b->refunded, back);
    add(b, MARKER "业务明细列表结束------------------------------------");
    add(b, "#交易合计：%lld笔，商家实收共%s元，商家优惠共0.00元", (long long)b->trades, got);
    add(b, "#退款合计：%lld笔，商家实收退款共%s元，商家优惠退款共0.00元", (long long)b->refunds,
        back);
    add(b, "#导出时间：[%s]", now);

    struct bill sum = {.text = *summary};
    yuan(b->received + b->refunded, amount);
    yuan(b->fee, fee);
    yuan(b->received + b->refunded + b->fee, net);
    add(&sum, "#支付宝业务汇总查询");
    add(&sum, "#账号：[%s]", PID);
    add(&sum, "#起始日期：[%s]   终止日期：[%s]", from, to);
    add(&sum, MARKER "业务汇总列表----------------------------------------");
    add(&sum, "门店编号,门店名称,交易订单总笔数,退款订单总笔数,订单金额（元）,商家实收（元）,"
              "支付宝优惠（元）,商家优惠（元）,卡消费金额（元）,服务费（元）,分润（元）,"
              "实收净额（元）");
    add(&sum, "合计,,%lld,%lld,%s,%s,0.00,0.00,0.00,%s,0.00,%s", (long long)b->trades,
        (long long)b->refunds, amount, amount, fee, net);
    add(&sum, "#----------------------------------------业务汇总列表结束-------------------------"
              "------------");
    add(&sum, "#导出时间：[%s]", now);
    *summary = sum.text;
    return PT_OK;
}

/* text (UTF-8) in GBK, malloc'd; NULL when a character has no GBK. */
static char *gbk(const char *text, size_t len, size_t *outlen)
{
    iconv_t cd = iconv_open("GBK", "UTF-8");
    if (cd == (iconv_t)-1)
        return NULL;
    size_t cap = len * 2 + 1, left = cap;
    char *out = malloc(cap), *in = (char *)(uintptr_t)text, *o = out;
    size_t inleft = len;
    if (out && iconv(cd, &in, &inleft, &o, &left) == (size_t)-1) {
        free(out);
        out = NULL;
    }
    iconv_close(cd);
    if (out)
        *outlen = cap - left;
    return out;
}

static void le16(struct pt_buf *b, unsigned v)
{
    pt_buf_putc(b, (char)(v & 0xff));
    pt_buf_putc(b, (char)(v >> 8 & 0xff));
}

static void le32(struct pt_buf *b, uint32_t v)
{
    le16(b, v & 0xffff);
    le16(b, v >> 16);
}

struct entry {
    char *name, *data, *packed;
    size_t nlen, len, plen;
    uint32_t crc, offset;
};

/* Deflates e->data (raw, as zip's method 8). */
static int pack(struct entry *e)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return PT_ENOMEM;
    size_t cap = deflateBound(&z, (uLong)e->len);
    e->packed = malloc(cap);
    z.next_in = (Bytef *)e->data;
    z.avail_in = (uInt)e->len;
    z.next_out = (Bytef *)e->packed;
    z.avail_out = (uInt)cap;
    int rc = e->packed && deflate(&z, Z_FINISH) == Z_STREAM_END ? PT_OK : PT_ENOMEM;
    e->plen = z.total_out;
    deflateEnd(&z);
    e->crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), (const Bytef *)e->data, (uInt)e->len);
    return rc;
}

/* The zip of the two entries (APPNOTE: local headers, central directory,
 * end record; DOS time of 2000-01-01 00:00). */
static void zip(struct entry *e, int n, struct pt_buf *z)
{
    for (int i = 0; i < n; i++) {
        e[i].offset = (uint32_t)z->len;
        le32(z, 0x04034b50u);
        le16(z, 20), le16(z, 0), le16(z, 8), le16(z, 0), le16(z, 0x2821);
        le32(z, e[i].crc), le32(z, (uint32_t)e[i].plen), le32(z, (uint32_t)e[i].len);
        le16(z, (unsigned)e[i].nlen), le16(z, 0);
        pt_buf_put(z, e[i].name, e[i].nlen);
        pt_buf_put(z, e[i].packed, e[i].plen);
    }
    size_t cd = z->len;
    for (int i = 0; i < n; i++) {
        le32(z, 0x02014b50u);
        le16(z, 20), le16(z, 20), le16(z, 0), le16(z, 8), le16(z, 0), le16(z, 0x2821);
        le32(z, e[i].crc), le32(z, (uint32_t)e[i].plen), le32(z, (uint32_t)e[i].len);
        le16(z, (unsigned)e[i].nlen), le16(z, 0), le16(z, 0), le16(z, 0), le16(z, 0);
        le32(z, 0), le32(z, e[i].offset);
        pt_buf_put(z, e[i].name, e[i].nlen);
    }
    size_t cdlen = z->len - cd;
    le32(z, 0x06054b50u);
    le16(z, 0), le16(z, 0), le16(z, (unsigned)n), le16(z, (unsigned)n);
    le32(z, (uint32_t)cdlen), le32(z, (uint32_t)cd), le16(z, 0);
}

/* The day's zip into *out; PT_EPARSE (date), PT_EAGAIN (not ready). */
static int bill_zip(struct pt_sim *s, const char *date, char **out, size_t *outlen)
{
    int64_t start;
    if (pt__sim_bill_day(date, 8 * 60, &start) != PT_OK)
        return PT_EPARSE;
    if (!pt__sim_bill_ready(s, start))
        return PT_EAGAIN;
    struct bill b = {0};
    struct pt_buf summary;
    pt_buf_init(&b.text, SIM_BODY_MAX);
    pt_buf_init(&summary, SIM_BODY_MAX);
    int rc = make(s, start, &b, &summary);
    char day[9], names[2][96];
    snprintf(day, sizeof day, "%.4s%.2s%.2s", date, date + 5, date + 8);
    snprintf(names[0], sizeof names[0], "%s_%s_业务明细.csv", PID, day);
    snprintf(names[1], sizeof names[1], "%s_%s_业务明细(汇总).csv", PID, day);
    struct entry e[2];
    memset(e, 0, sizeof e);
    const struct pt_buf *texts[2] = {&b.text, &summary};
    for (int i = 0; i < 2 && rc == PT_OK; i++) {
        e[i].name = gbk(names[i], strlen(names[i]), &e[i].nlen);
        e[i].data = gbk(texts[i]->p, texts[i]->len, &e[i].len);
        rc = e[i].name && e[i].data ? pack(&e[i]) : PT_ENOMEM;
    }
    struct pt_buf z;
    pt_buf_init(&z, SIM_BODY_MAX);
    if (rc == PT_OK) {
        zip(e, 2, &z);
        *out = pt_buf_take(&z, outlen);
        rc = *out ? PT_OK : PT_ENOMEM;
    }
    for (int i = 0; i < 2; i++) {
        free(e[i].name);
        free(e[i].data);
        free(e[i].packed);
    }
    pt_buf_free(&z, 0);
    pt_buf_free(&b.text, 0);
    pt_buf_free(&summary, 0);
    return rc;
}

void pt__sim_alipay_bill_url(struct sim_call *c, const char *method, const cJSON *biz,
                             struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    const char *type = pt__sim_json_str(biz, "bill_type");
    const char *date = pt__sim_json_str(biz, "bill_date");
    int64_t start;
    if (!type || (strcmp(type, "trade") != 0 && strcmp(type, "signcustomer") != 0)) {
        pt__sim_alipay_fail(s, rs, method, "40004", "isv.invalid_arguments", "bill_type 错误");
        return;
    }
    if (strcmp(type, "trade") != 0) {
        pt__sim_alipay_fail(s, rs, method, "40004", "isp.bill_not_exist",
                            "账单不存在 (the simulator keeps trade bills only)");
        return;
    }
    if (!date || pt__sim_bill_day(date, 8 * 60, &start) != PT_OK) {
        pt__sim_alipay_fail(s, rs, method, "40004", "isv.invalid_arguments",
                            "bill_date 格式错误 (yyyy-MM-dd)");
        return;
    }
    if (!pt__sim_bill_ready(s, start)) {
        pt__sim_alipay_fail(s, rs, method, "40004", "isp.bill_not_exist", "账单不存在");
        return;
    }
    char url[512];
    snprintf(url, sizeof url,
             "https://%s:%d" FILE_PATH "?bizType=trade&userId=%s&fileType=csv.zip&bizDates=%s"
             "&expires=%lld",
             s->gw_host[SIM_GW_ALIPAY], s->port, PID, date,
             (long long)(pt__sim_now_ms(s) + LINK_LIFE_MS));
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "code", "10000");
    cJSON_AddStringToObject(o, "msg", "Success");
    cJSON_AddStringToObject(o, "bill_download_url", url);
    pt__sim_alipay_respond(s, rs, method, o);
    pt__sim_note(rs, "bill %s: link", date);
}

int pt__sim_alipay_bill_path(const char *path)
{
    return strcmp(path, FILE_PATH) == 0;
}

void pt__sim_alipay_bill_file(struct pt_sim *s, const struct sim_req *rq, struct sim_resp *rs)
{
    struct pt_form f;
    pt_form_init(&f);
    const char *date = NULL, *expires = NULL;
    if (pt_form_parse(rq->query, strlen(rq->query), &f) == PT_OK) {
        date = pt_form_get(&f, "bizDates");
        expires = pt_form_get(&f, "expires");
    }
    static const char gone[] = "下载链接已过期 (the link lives 30 s)";
    char *z = NULL;
    size_t len = 0;
    int rc = !date || !expires                                ? PT_EPARSE
             : strtoll(expires, NULL, 10) < pt__sim_now_ms(s) ? PT_ECANCELED
                                                              : bill_zip(s, date, &z, &len);
    if (rc == PT_ECANCELED) {
        pt__sim_resp_set(rs, 403, "text/plain;charset=utf-8", gone, sizeof gone - 1);
    } else if (rc != PT_OK) {
        static const char bad[] = "bad request";
        pt__sim_resp_set(rs, rc == PT_EPARSE ? 400 : 500, "text/plain", bad, sizeof bad - 1);
    } else {
        pt__sim_resp_set(rs, 200, "application/oct-stream", z, len);
        pt__sim_note(rs, "bill %s: %zu bytes", date, len);
    }
    free(z);
    pt_form_free(&f);
}
