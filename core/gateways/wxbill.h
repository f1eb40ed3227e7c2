/*
 * wxbill.h - WeChat Pay's trade bill (交易账单), as GET /v3/bill/tradebill's
 * download and APIv2 downloadbill give it (SPEC 19; docs/reconcile.md
 * quotes the layout and its sources): a header line naming the columns, one
 * line per payment or refund with every value behind a backtick, then the
 * summary's header line and its one line of totals.  Amounts in yuan.
 *
 * The parser is strict: a bill that does not hold together - a column
 * missing, a value without its backtick, a line of another width, a state it
 * does not know, a row of another day, a summary that does not add up to
 * the rows - is refused with the line named, never read in part.
 */
#ifndef PT_GW_WXBILL_H
#define PT_GW_WXBILL_H

#include <stddef.h>

#include "reconcile.h"

/* Longest bill read (bytes) and most rows: a lane's day is far below. */
#define PT_WXBILL_MAX_BYTES (64u << 20)
#define PT_WXBILL_MAX_ROWS 200000

struct pt_wxbill {
    struct pt_recon_record *rows; /* malloc'd, day 0; pt_wxbill_free */
    size_t n;
    size_t revoked; /* APIv2's REVOKED rows: paid, then reversed - no money kept */
};

/*
 * Parses the bill of bill_date ("YYYY-MM-DD", China time) into *out: a
 * SUCCESS row is a trade (商户订单号, 微信订单号, 订单金额), a REFUND row a
 * refund (商户退款单号, 微信退款单号, 申请退款金额) - the amounts asked, which
 * are what payterm asked; on a bill without those columns (before
 * 免充值券), 应结订单金额 and 退款金额.  PT_OK; PT_EPARSE with err naming
 * the line (1-based) and the column; PT_ETOOBIG; PT_ENOMEM.
 */
int pt_wxbill_parse(const char *text, size_t len, const char *bill_date, struct pt_wxbill *out,
                    char *err, size_t errlen);
void pt_wxbill_free(struct pt_wxbill *b);

/* ---- the download (GET /v3/bill/tradebill, then its file) ---- */

struct pt_gw_config;
struct pt_gw_env;
struct pt_http_request;
struct pt_http_response;

/* Largest bill file payterm downloads (bytes): a merchant's day of tens of
 * thousands of lines, not what would exhaust a board's memory. */
#define PT_WXBILL_DOWNLOAD_MAX (16u << 20)

/* GET {endpoint}/v3/bill/tradebill?bill_date=D&bill_type=ALL, signed like
 * every APIv3 call.  PT_OK, PT_EINVAL (cannot sign, bad date). */
int pt_wxbill_request(const struct pt_gw_config *cfg, const struct pt_gw_env *env, const char *date,
                      struct pt_http_request *out);

/*
 * Its answer, signature checked: PT_OK with the file's path on the
 * endpoint (path, "/v3/billdownload/file?token=...") and its SHA-1 (hex,
 * lower case); PT_EAGAIN when WeChat Pay has no bill yet
 * (NO_STATEMENT_EXIST, STATEMENT_CREATING: why names it); PT_ESIG; PT_EPARSE
 * or PT_EPARSE (another error of WeChat's) with why.  A download_url not
 * on the configured endpoint's host is refused: payterm signs what it
 * fetches and sends its signature nowhere else.
 */
int pt_wxbill_answer(const struct pt_gw_config *cfg, const struct pt_http_response *resp,
                     char *path, size_t pathlen, char sha1[41], char *why, size_t whylen);

/*
 * APIv2 downloadbill's answer (SPEC 19): PT_OK when the body is the bill
 * (text; the caller parses it), PT_EAGAIN when WeChat Pay has none yet
 * (return_msg "No Bill Exist", "Bill Creating"), PT_EPARSE for a status
 * other than 200 (WeChat answers its errors with 200) or another FAIL, why naming WeChat's
 * return_msg and error_code. WeChat signs neither the bill nor the error: TLS to the configured
 * endpoint is all that vouches for them.
 */
int pt_wxbill_v2_answer(const struct pt_http_response *resp, char *why, size_t whylen);

struct pt_gw_exchange;
struct pt_recon_rows;
/* The adapter's fetch_bill (gateway.h): tradebill, its file, parsed; or,
 * with gateways.wechat.bill_api "v2", downloadbill parsed. */
int pt__wechat_fetch_bill(const struct pt_gw_config *cfg, struct pt_gw_exchange *x,
                          const char *date, int day, struct pt_recon_rows *rows, char *why,
                          size_t whylen);

/* The adapter's parse_bill (gateway.h): pt_wxbill_parse into rows. */
int pt__wechat_parse_bill(const char *text, size_t len, const char *date,
                          struct pt_recon_rows *rows, char *err, size_t errlen);

/* 1 when url is on endpoint's scheme, host and port, with its path (and
 * query) copied into path; 0 otherwise. */
int pt_wxbill_download_path(const char *endpoint, const char *url, char *path, size_t pathlen);

/* GET the file at path, signed (its answer is not: the SHA-1 vouches for
 * it); max_body PT_WXBILL_DOWNLOAD_MAX. */
int pt_wxbill_file_request(const struct pt_gw_config *cfg, const struct pt_gw_env *env,
                           const char *path, struct pt_http_request *out);

/* The file's answer: PT_OK when HTTP 200 and its SHA-1 is sha1; PT_ESIG
 * (another file); PT_EPARSE (an error answer) with why. */
int pt_wxbill_file_check(const struct pt_http_response *resp, const char *sha1, char *why,
                         size_t whylen);

#endif
