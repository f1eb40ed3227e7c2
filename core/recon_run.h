/*
 * recon_run.h - a reconciliation run (SPEC 19): a gateway's bill of a day
 * against payterm's records of the days around it, stored as served, with
 * the review of every local charge a discrepancy concerns raised.
 *
 * Where the bill comes from (a download, a file the merchant gives) is the
 * caller's; this is what every source shares: the bill day's time zone, the
 * local records, the comparison (core/reconcile.h), the run's JSON and its
 * one write transaction.
 */
#ifndef PT_RECON_RUN_H
#define PT_RECON_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "reconcile.h"
#include "store.h"

/* (A gateway's bill day, minutes east of UTC: pt_gateway_bill_offset_min,
 * gateway.h.) */

/* 1 when date is after the day that holds lane time now_ms in the
 * gateway's bill time zone: no gateway has a bill of it. */
int pt_recon_date_after_today(const char *gateway, const char *date, int64_t now_ms);
/* 1 when retention (retention_days, SPEC 19) may have moved records of the
 * date, or of the day before it a run also reads, to the archive: a run
 * would not find them and call the bill's trades gateway_only. */
int pt_recon_date_archived(const char *gateway, const char *date, int64_t now_ms,
                           int64_t retention_days);

/* The bill date before the one that holds lane time now_ms in the
 * gateway's bill time zone ("YYYY-MM-DD"): the day the daily run checks. */
void pt_recon_previous_date(const char *gateway, int64_t now_ms, char out[11]);

/* The bill date's 00:00 in the gateway's bill time zone, lane ms;
 * PT_EINVAL. */
int pt_recon_day_start(const char *gateway, const char *date, int64_t *start);

/*
 * payterm's SUCCESS charges and refunds of the gateway that became SUCCESS
 * on the bill date or the day before or after (in the gateway's bill time
 * zone), each with its day (-1, 0, +1).  *rows malloc'd (free()).
 * PT_OK, PT_EINVAL (date or gateway), a store error.
 */
int pt_recon_local(struct pt_store *st, const char *gateway, const char *date,
                   struct pt_recon_record **rows, size_t *n);

/* A gateway's side of the day, however it was obtained. */
struct pt_recon_bill {
    const struct pt_recon_record *rows; /* day set: -1, 0, +1 */
    size_t n;
    const char *source; /* "file", "download", "queries" */
    /* 1: not a bill - the gateway was asked about each local record (a
     * gateway without one: "coverage":"local", gateway_only unknowable). */
    int local;
};

/*
 * Compares the bill with the local records, then in one write transaction
 * stores the run ("done") and raises the review of each local charge a
 * discrepancy concerns (for a refund, its charge; reason
 * reconciliation_<kind>, audited once per kind and charge, however many
 * runs find it).  *body is the run's JSON as stored (malloc'd).  *found
 * counts the discrepancies.  PT_OK, PT_EINVAL, PT_ENOMEM, a store error
 * (nothing stored).
 */
int pt_recon_run(struct pt_store *st, const char *gateway, const char *date,
                 const struct pt_recon_bill *bill, const char *actor, int64_t now, char **body,
                 size_t *found);

/*
 * Stores a run that could not compare: "pending" (the gateway's own "not
 * ready yet") or "failed" (error says why: the bill refused, the line
 * named).  *body as stored (malloc'd).
 */
int pt_recon_run_unfinished(struct pt_store *st, const char *gateway, const char *date,
                            const char *state, const char *error, int64_t now, char **body);

/*
 * What the gateway's done run of its latest bill date found: counts[kind]
 * and its date.  PT_OK, PT_ENOTFOUND (none ran), a store error.  For
 * /metrics.
 */
int pt_recon_latest_counts(struct pt_store *st, const char *gateway,
                           int64_t counts[PT_RECON__KINDS], char date[11]);

#endif
