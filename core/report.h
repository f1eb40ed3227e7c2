/*
 * report.h - the lane's X and Z reports (SPEC 19): what the day came to,
 * and the close of the day.
 *
 * An X report adds up the final charges and refunds not yet in a Z report,
 * and closes nothing.  A Z report closes them: it takes the next number,
 * puts every such row in it (core/store.h, pt_store_z_mark: on SQLite a row
 * already carries the open report's number from the transaction that made
 * it final), adds them up,
 * chains itself to the previous report by its hash and is stored as the
 * exact text it is served as.  Both are canonical JSON (RFC 8785: keys in
 * order, no spaces, integers); a Z report's hash is the SHA-256 of its own
 * canonical JSON without the member hash, lower-case hex.
 */
#ifndef PT_REPORT_H
#define PT_REPORT_H

#include <stdint.h>

#include "store.h"

/* The first report's prev_hash: 64 zeros. */
#define PT_REPORT_GENESIS "0000000000000000000000000000000000000000000000000000000000000000"

/* The X report of the lane at lane time now: *json malloc'd. */
int pt_report_x(struct pt_store *st, const char *lane, int64_t now, char **json);

/*
 * Closes the day, inside the caller's write transaction (the report and
 * its rows' numbers are one commit: the caller's).  *json the report
 * (malloc'd), *z its number.
 */
int pt_report_close(struct pt_store *st, const char *lane, int64_t now, char **json, int64_t *z);

/* The SHA-256 (hex) of the canonical JSON text of a report without its
 * member "hash" - what a Z report's hash says; PT_EPARSE for text that is
 * not a JSON object.  For the tests and for anyone checking a chain. */
int pt_report_hash_of(const char *json, char hex[65]);

#endif
