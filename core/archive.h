/*
 * archive.h - retention (SPEC 19): charges and refunds that are final, in a
 * closed Z report, reconciled and older than retention_days leave the live
 * database for a monthly archive file, data_dir/archive/YYYY-MM.db, and
 * stay readable by their ids.
 *
 * What may move, the copy and the removal are the store's
 * (pt_store_archive_*, store_sqlite_archive.c); this is the pass over them
 * and the reads.  SQLite only: on PostgreSQL every call answers
 * PT_EUNSUPPORTED.
 */
#ifndef PT_ARCHIVE_H
#define PT_ARCHIVE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "store.h"

/* Charges moved per batch (one archive commit, one live commit). */
#define PT_ARCHIVE_BATCH 256

/* data_dir/archive/<month>.db into out; PT_ERANGE when it does not fit,
 * PT_EINVAL for a month that is not YYYY-MM. */
int pt_archive_path(const char *data_dir, const char *month, char *out, size_t cap);

/* The gateways whose records need a done reconciliation run before they
 * move, with their bill time zones: a JSON object {"gateway": seconds east
 * of UTC} (pt_store_archive_candidates).  A gateway without a bill payterm
 * downloads (2C2P; SPEC 19: cross-border Alipay) is left out: a closed Z
 * suffices for it. */
int pt_archive_bill_offsets(const struct pt_config *cfg, char *out, size_t cap);

struct pt_archive_result {
    int64_t moved;  /* charges moved (with their refunds) */
    int64_t copied; /* of those, written into an archive this pass */
};

/*
 * One pass at lane time now: every charge that may move (final longer ago
 * than cfg->retention_days) is copied into its month's file, then removed
 * from the live database, PT_ARCHIVE_BATCH at a time.  Creates
 * data_dir/archive (0700) when needed.  A pass cut short (power, a full
 * disk) leaves every charge in the live database, in an archive, or in
 * both; the next pass finishes it.
 */
int pt_archive_run(struct pt_store *st, const struct pt_config *cfg, int64_t now,
                   struct pt_archive_result *out);

/* An archived charge (refund) by its id, read from its month's file:
 * PT_ENOTFOUND when it is not archived, PT_EUNSUPPORTED on PostgreSQL. */
int pt_archive_charge_get(struct pt_store *st, const char *data_dir, const char *order_id,
                          struct pt_charge *c);
int pt_archive_refund_get(struct pt_store *st, const char *data_dir, const char *refund_id,
                          struct pt_refund *r);

#endif
