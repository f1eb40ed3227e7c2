/*
 * alipaybill.h - Alipay's trade bill (业务明细, SPEC 19; docs/reconcile.md
 * quotes the layout and its sources): alipay.data.dataservice.bill.
 * downloadurl.query gives a link that lives 30 s to a zip holding the
 * detail file `<pid>0156_<yyyyMMdd>_业务明细.csv` and its summary, GBK
 * text: `#` header lines, the column header, one line per trade (业务类型
 * 交易) or refund (退款, its amounts negative, the merchant's request number
 * in 退款批次号/请求号), then `#` footer lines whose totals (交易合计,
 * 退款合计) the rows must add up to.  Amounts in yuan.
 *
 * The file is read as GBK bytes, never converted: the columns payterm
 * reads are found by their names' GBK spelling, and the ids it takes must
 * be ASCII.  Strict: a bill that does not hold together is refused with
 * the line named, never read in part.
 */
#ifndef PT_GW_ALIPAYBILL_H
#define PT_GW_ALIPAYBILL_H

#include <stddef.h>

#include "reconcile.h"

/* Largest detail file read (bytes), most rows, largest zip downloaded. */
#define PT_ALIPAYBILL_MAX_BYTES (64u << 20)
#define PT_ALIPAYBILL_MAX_ROWS 200000
#define PT_ALIPAYBILL_DOWNLOAD_MAX (16u << 20)

/*
 * The records of bill date `date` ("YYYY-MM-DD", China time) in the detail
 * file [text, text+len) appended to rows with day `day`: a 交易 row is a
 * trade (商户订单号, 支付宝交易号, 订单金额（元）), a 退款 row a refund of
 * 商户订单号 (退款批次号/请求号, -订单金额（元）).  PT_OK; PT_EPARSE with err
 * naming the line (1-based); PT_ETOOBIG; PT_ENOMEM (rows as they were).
 */
int pt_alipaybill_parse(const char *text, size_t len, const char *date, int day,
                        struct pt_recon_rows *rows, char *err, size_t errlen);

/* The detail file out of the bill's zip, into *out (malloc'd); PT_OK,
 * PT_EPARSE with err (not a zip holding one), PT_ETOOBIG, PT_ENOMEM. */
int pt_alipaybill_unzip(const void *zip, size_t len, char **out, size_t *outlen, char *err,
                        size_t errlen);

struct pt_gw_config;
struct pt_gw_env;
struct pt_gw_exchange;
struct pt_http_request;
struct pt_http_response;

/* The signed alipay.data.dataservice.bill.downloadurl.query of date
 * (bill_type trade).  PT_OK, PT_EINVAL (a bad date), signing's errors. */
int pt_alipaybill_request(const struct pt_gw_config *cfg, const struct pt_gw_env *env,
                          const char *date, struct pt_http_request *out);

/*
 * Its answer, signature checked: PT_OK with bill_download_url in url;
 * PT_EAGAIN when Alipay has no bill of the date yet (isp.bill_not_exist,
 * BILL_NOT_EXIST; why names it); PT_ESIG; PT_EPARSE with why (another
 * answer of Alipay's, a link that is not https).
 */
int pt_alipaybill_answer(const struct pt_gw_config *cfg, const struct pt_http_response *resp,
                         char *url, size_t urlcap, char *why, size_t whylen);

/* The adapter's fetch_bill (gateway.h): the link, the zip, its detail. */
int pt__alipay_fetch_bill(const struct pt_gw_config *cfg, struct pt_gw_exchange *x,
                          const char *date, int day, struct pt_recon_rows *rows, char *why,
                          size_t whylen);

/* The adapter's parse_bill (gateway.h): the zip as downloaded from
 * Alipay's merchant portal, or its detail file taken out of it. */
int pt__alipay_parse_bill(const char *text, size_t len, const char *date,
                          struct pt_recon_rows *rows, char *err, size_t errlen);

#endif
