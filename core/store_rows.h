/*
 * store_rows.h - a charge's and a refund's columns, written once for both
 * backends (issue 34: a store written once).
 *
 * Each list names a column as every SELECT of that kind lists it - the
 * SQL text is the same in both dialects - with its kind and the field of
 * struct pt_charge / struct pt_refund it fills.  From one list come the
 * SELECT's column text (PT_CHARGE_COLS, PT_REFUND_COLS) and the table that
 * pt_row_read() fills a struct from; a backend only says how to read an
 * integer and a text of its result row (struct pt_row_src).  A column added
 * is one line here.
 */
#ifndef PT_STORE_ROWS_H
#define PT_STORE_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "charge.h"
#include "refund.h"

/* X(sql, kind, field) for every column after the first, "id". */
#define PT_CHARGE_COLUMNS(X)                                                                       \
    X("order_id", TEXT, order_id)                                                                  \
    X("gateway", TEXT, gateway)                                                                    \
    X("method", TEXT, method)                                                                      \
    X("amount", I64, amount)                                                                       \
    X("currency", TEXT, currency)                                                                  \
    X("state", STATE, state)                                                                       \
    X("offline_mode", OFFLINE, offline)                                                            \
    X("subject", TEXT, subject)                                                                    \
    X("payment_code", TEXT, payment_code)                                                          \
    X("payment_method", TEXT, payment_method)                                                      \
    X("customer", TEXT, customer)                                                                  \
    X("metadata", TEXT, metadata)                                                                  \
    X("attempts", INT, attempts)                                                                   \
    X("next_attempt_at", I64, next_attempt_at)                                                     \
    X("first_sent_at", I64, first_sent_at)                                                         \
    X("gateway_trade_no", TEXT, gateway_trade_no)                                                  \
    X("action_url", TEXT, action_url)                                                              \
    X("error_code", TEXT, error_code)                                                              \
    X("error_message", TEXT, error_message)                                                        \
    X("review", INT, review)                                                                       \
    X("review_reason", TEXT, review_reason)                                                        \
    X("created_at", I64, created_at)                                                               \
    X("updated_at", I64, updated_at)                                                               \
    X("amount_refunded", I64, amount_refunded)                                                     \
    X("(SELECT count(*) FROM refunds WHERE refunds.charge_id = charges.id)", INT, refunds)         \
    X("cancel_requested", INT, cancel_requested)                                                   \
    X("offline_accepted", INT, offline_accepted)

/* A refund's row: r = refunds, c = its charge (PT_REFUND_COLS joins them). */
#define PT_REFUND_COLUMNS(X)                                                                       \
    X("r.charge_id", I64, charge_id)                                                               \
    X("r.refund_id", TEXT, refund_id)                                                              \
    X("c.order_id", TEXT, order_id)                                                                \
    X("c.gateway", TEXT, gateway)                                                                  \
    X("r.amount", I64, amount)                                                                     \
    X("c.currency", TEXT, currency)                                                                \
    X("r.state", STATE, state)                                                                     \
    X("r.offline_mode", OFFLINE, offline)                                                          \
    X("r.reason", TEXT, reason)                                                                    \
    X("r.metadata", TEXT, metadata)                                                                \
    X("r.gateway_refund_no", TEXT, gateway_refund_no)                                              \
    X("r.attempts", INT, attempts)                                                                 \
    X("r.next_attempt_at", I64, next_attempt_at)                                                   \
    X("r.first_sent_at", I64, first_sent_at)                                                       \
    X("r.error_code", TEXT, error_code)                                                            \
    X("r.error_message", TEXT, error_message)                                                      \
    X("r.review", INT, review)                                                                     \
    X("r.review_reason", TEXT, review_reason)                                                      \
    X("r.created_at", I64, created_at)                                                             \
    X("r.updated_at", I64, updated_at)

#define PT_COL_SQL_(sql, kind, field) ", " sql
/* The charges' columns, for "SELECT " PT_CHARGE_COLS " FROM charges ...". */
#define PT_CHARGE_COLS "id" PT_CHARGE_COLUMNS(PT_COL_SQL_)
/* A refund's columns and where they come from: "SELECT " PT_REFUND_COLS
 * " WHERE ..." (the FROM and JOIN are part of it). */
#define PT_REFUND_COLS                                                                             \
    "r.id" PT_REFUND_COLUMNS(PT_COL_SQL_) " FROM refunds r JOIN charges c ON c.id = r.charge_id"

enum pt_col_kind {
    PT_COL_I64,     /* int64_t; NULL reads 0 */
    PT_COL_INT,     /* int; NULL reads 0 */
    PT_COL_TEXT,    /* char[cap], cut to fit; NULL reads "" */
    PT_COL_STATE,   /* enum pt_state by its name; else PT_STATE_UNKNOWN */
    PT_COL_OFFLINE, /* enum pt_offline_mode by its name; else PT_OFFLINE_PREFER */
};

struct pt_col {
    const char *sql;
    enum pt_col_kind kind;
    size_t off, size; /* the field's place and size in the struct */
};

/* One kind of row: its columns in SELECT order, and the struct's size. */
struct pt_row_kind {
    const struct pt_col *cols;
    int ncols;
    size_t size;
};
extern const struct pt_row_kind pt_charge_row, pt_refund_row;

/* A backend's view of one result row. */
struct pt_row_src {
    int64_t (*int_at)(const void *ctx, int col);      /* NULL reads 0 */
    const char *(*text_at)(const void *ctx, int col); /* NULL when NULL */
    const void *ctx;
};

/* Zeroes obj (a struct of k's size) and fills every field from src. */
void pt_row_read(const struct pt_row_kind *k, const struct pt_row_src *src, void *obj);

#endif
