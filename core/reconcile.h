/*
 * reconcile.h - a gateway's bill of a day against payterm's own records
 * (SPEC 19): pure, no I/O.
 *
 * The caller gives the bill's records (trades and refunds, each with the
 * day it is on relative to the bill date: -1, 0, +1 - the neighbouring
 * days' bills where it has them) and the local records (SUCCESS charges
 * and refunds of the gateway, each dated by the gateway's time of the
 * event in the gateway's bill time zone, the same way).  The comparison
 * pairs them by the merchant's id (order_id, refund_id; the gateway's own
 * number when the bill has no merchant id) and reports, for the bill date:
 *   - matched: pairs equal in id, amount and currency, one side on the
 *     bill date;
 *   - a discrepancy for a record of the bill date that has no partner on
 *     its day or a neighbouring one (a payment at midnight is never one),
 *     or whose partner differs in amount or currency.
 * Same input, same output: the discrepancies come sorted by kind, then id.
 */
#ifndef PT_RECONCILE_H
#define PT_RECONCILE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "charge.h"
#include "refund.h"

enum pt_recon_kind {
    PT_RECON_GATEWAY_ONLY,
    PT_RECON_LOCAL_ONLY,
    PT_RECON_AMOUNT_MISMATCH,
    PT_RECON_CURRENCY_MISMATCH,
    PT_RECON_REFUND_GATEWAY_ONLY,
    PT_RECON_REFUND_LOCAL_ONLY,
    PT_RECON_REFUND_AMOUNT_MISMATCH,
    PT_RECON__KINDS
};

/* "gateway_only", "local_only", ... (SPEC 19's names). */
const char *pt_recon_kind_name(enum pt_recon_kind k);

/* (What the comparison reads of every record - kind, day, amount,
 * currency and the start of the merchant's id - lies in its first 64
 * bytes: one cache line per record of a 100 000-record day.) */
struct pt_recon_record {
    int refund;     /* 0 a trade (charge), 1 a refund */
    int day;        /* -1, 0 (the bill date), +1 */
    int64_t amount; /* minor units, > 0 */
    char currency[4];
    char order_id[PT_ORDER_ID_MAX];       /* the merchant's order (out_trade_no) */
    char refund_id[PT_REFUND_ID_MAX];     /* the merchant's refund (out_refund_no) */
    char gateway_trade_no[PT_SHORT_MAX];  /* the gateway's trade number */
    char gateway_refund_no[PT_SHORT_MAX]; /* the gateway's refund number */
};

struct pt_recon_discrepancy {
    enum pt_recon_kind kind;
    char order_id[PT_ORDER_ID_MAX];
    char refund_id[PT_REFUND_ID_MAX];
    char gateway_trade_no[PT_SHORT_MAX];
    char gateway_refund_no[PT_SHORT_MAX];
    int64_t amount; /* the record's (for a mismatch: the gateway's) */
    char currency[4];
    int64_t amount_local, amount_gateway; /* the mismatches */
    char currency_local[4], currency_gateway[4];
};

/* What the bill date's side adds up to (the bill's, or payterm's). */
struct pt_recon_totals {
    int64_t trades, amount, refunds, refunded;
};

struct pt_recon_result {
    struct pt_recon_totals bill, local;
    int64_t matched;
    struct pt_recon_discrepancy *d; /* malloc'd; pt_recon_result_free */
    size_t n;
};

/* PT_OK, PT_ENOMEM (then *out is empty). */
int pt_recon_compare(const struct pt_recon_record *bill, size_t nbill,
                     const struct pt_recon_record *local, size_t nlocal,
                     struct pt_recon_result *out);
void pt_recon_result_free(struct pt_recon_result *r);

/* ---- bill dates ("YYYY-MM-DD") ---- */

/* 1 when date is "YYYY-MM-DD", a real day of years 2000-2999. */
int pt_recon_date_ok(const char *date);
/* The date's 00:00 at offset_min east of UTC, Unix ms; PT_EINVAL. */
int pt_recon_date_start(const char *date, int offset_min, int64_t *start);
/* The date that holds Unix ms `ms` at offset_min east of UTC. */
void pt_recon_date_of(int64_t ms, int offset_min, char out[11]);
/* The date days after date (negative: before); PT_EINVAL. */
int pt_recon_shift_date(const char *date, int days, char out[11]);

/* ---- what the bill parsers share ---- */

/* A bill file's lines: [*line, +*n) without its \n or \r\n, *p moved past
 * it; 0 at end.  A last line without \n is a line. */
int pt_recon_next_line(const char **p, const char *end, const char **line, size_t *n);

/* A growing array of records (pt_recon_push on its three members). */
struct pt_recon_rows {
    struct pt_recon_record *rows;
    size_t n, cap;
};

/* A new, zeroed record at the end of rows[0..*n), growing the array (cap
 * its room); NULL when memory runs out (rows and *n unchanged). */
struct pt_recon_record *pt_recon_push(struct pt_recon_record **rows, size_t *n, size_t *cap);

/* Writes where (the bill and the line or item: "WeChat bill line 7: ")
 * then the formatted reason into err; returns PT_EPARSE. */
__attribute__((format(printf, 4, 0))) int
pt_recon_vfail(char *err, size_t errlen, const char *where, const char *fmt, va_list ap);
/* The same for a line of a bill file: "<bill> bill line <line>: ". */
__attribute__((format(printf, 5, 6))) int
pt_recon_line_fail(char *err, size_t errlen, const char *bill, size_t line, const char *fmt, ...);

#endif
