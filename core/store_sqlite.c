/*
 * store_sqlite.c - the SQLite implementation of store.h (store_impl.h);
 * store.c picks it at open and forwards every call to it.
 *
 * The SQLite store's SQL is in this file and in sql/ (the PostgreSQL
 * store's is in store_pg.c and sql/pg/).  Statements are prepared
 * once per connection and cached by their index in the table below; every
 * SQLite result code is translated to a pt_err right here.
 */
#include "store_impl.h"
#include "store_rows.h"
#include "walvfs.h"
#include "err.h"
#include "log.h"
#include "migrations.h"
#include "pt_config.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* The operations (store_impl.h), defined below in the header's order. */
static void sq_close(struct pt_store *st);
static int sq_schema_version(struct pt_store *st, int *version);
static int sq_migrate_to(struct pt_store *st, int version);
static int sq_pragma_int(struct pt_store *st, const char *name, int *value);
static void sq_set_event_hook(struct pt_store *st, void (*fn)(void *ctx), void *ctx);
static int sq_begin(struct pt_store *st);
static int sq_commit(struct pt_store *st);
static int sq_rollback(struct pt_store *st);
static void sq_attach(struct pt_store *st, struct pt_store_writer *w);
static void sq_defer_commit(struct pt_store *st, struct pt_store_commit *ticket);
static int sq_commit_deferred(const struct pt_store *st);
static int sq_backup(struct pt_store *st, const char *dest);
static void sq_note_erased(struct pt_store *st);
static int sq_checkpoint_truncate(struct pt_store *st);
static int sq_writable(struct pt_store *st);
static int sq_health(struct pt_store *st, struct pt_store_health *out);
static int sq_files_intact(struct pt_store *st);
static int sq_key_get(struct pt_store *st, const char *scope, const char *key,
                      struct pt_key_row *out);
static int sq_key_insert(struct pt_store *st, const char *scope, const char *key,
                         const unsigned char hash[32], int64_t instance, int64_t now,
                         int64_t expires_at);
static int sq_key_relock(struct pt_store *st, const char *scope, const char *key,
                         int64_t old_locked_at, int64_t old_locked_by, int64_t instance,
                         int64_t now);
static int sq_key_take_later(struct pt_store *st, const char *scope, const char *key,
                             const unsigned char hash[32], int64_t instance, int64_t now,
                             int64_t expires_at, struct pt_key_lock *lock);
static int sq_key_set_order(struct pt_store *st, const char *scope, const char *key,
                            struct pt_key_lock *lock, const char *order_id);
static int sq_key_complete(struct pt_store *st, const char *scope, const char *key,
                           struct pt_key_lock *lock, int status, const char *body, size_t len,
                           int64_t now);
static int sq_key_delete(struct pt_store *st, const char *scope, const char *key,
                         struct pt_key_lock *lock);
static int sq_key_delete_expired(struct pt_store *st, const char *scope, const char *key,
                                 int64_t now);
static int sq_key_sweep(struct pt_store *st, int64_t now, int *count);
static int sq_charge_insert(struct pt_store *st, struct pt_charge *c, int64_t now);
static int sq_charge_get(struct pt_store *st, const char *order_id, struct pt_charge *out);
static int sq_charge_get_by_id(struct pt_store *st, int64_t id, struct pt_charge *out);
static int sq_charge_transition(struct pt_store *st, int64_t id, unsigned from_mask,
                                enum pt_state to, const struct pt_charge_patch *patch, int64_t now);
static int sq_charge_patch(struct pt_store *st, int64_t id, const struct pt_charge_patch *patch,
                           int64_t now);
static int sq_charge_set_review(struct pt_store *st, int64_t id, int review, const char *reason,
                                int64_t now);
static int sq_charge_request_cancel(struct pt_store *st, int64_t id, unsigned from_mask,
                                    int64_t due, int64_t now);
static int sq_key_reanswer(struct pt_store *st, const char *scope, int from_status, int status,
                           const char *body, size_t len, int *n);
static int sq_charges_list(struct pt_store *st, int state, int64_t after_id, int max,
                           struct pt_charge *rows, int *n, int *more);
static int sq_charges_list_review(struct pt_store *st, int64_t after_id, int max,
                                  struct pt_charge *rows, int *n, int *more);
static int sq_charges_due(struct pt_store *st, int64_t now, int64_t after_id, int max,
                          struct pt_charge *rows, int *n);
static int sq_charges_next_due(struct pt_store *st, int64_t *when);
static int sq_charges_queued_before(struct pt_store *st, const char *gateway, const char *method,
                                    int64_t created_before, int64_t after_id, int max,
                                    struct pt_charge *rows, int *n);
static int sq_charges_oldest_queued(struct pt_store *st, const char *gateway, const char *method,
                                    int64_t *created_at);
static int sq_sends_interrupted(struct pt_store *st, int64_t now, int *n);
static int sq_queue_figures(struct pt_store *st, const char *currency, int64_t *count,
                            int64_t *amount);
static int sq_stats(struct pt_store *st, int final_states, struct pt_store_stats *out);
static int sq_event_insert(struct pt_store *st, const char *type, int64_t charge_id,
                           const char *order_id, const char *payload, int64_t now, int64_t *seq);
static int sq_events_list(struct pt_store *st, int64_t after, int max, struct pt_event_row *rows,
                          int *n);
static int sq_events_last_seq(struct pt_store *st, int64_t *seq);
static int sq_audit(struct pt_store *st, int64_t charge_id, const char *from, const char *to,
                    const char *cause, const char *actor, int refused, const char *detail,
                    int64_t now);
static int sq_audit_first(struct pt_store *st, int64_t charge_id, const char *to, const char *cause,
                          const char *actor, int64_t now);
static int sq_audit_list(struct pt_store *st, int64_t charge_id, int max, struct pt_audit_row *rows,
                         int *n);
static int sq_notification_insert(struct pt_store *st, const char *gateway, const char *dedup_id,
                                  const char *order_id, const char *status, const char *outcome,
                                  int64_t now);
static int sq_count(struct pt_store *st, const char *table, int64_t *count);
static int sq_refund_insert(struct pt_store *st, struct pt_refund *r, int64_t now);
static int sq_refund_get(struct pt_store *st, const char *refund_id, struct pt_refund *out);
static int sq_refund_get_by_id(struct pt_store *st, int64_t id, struct pt_refund *out);
static int sq_refunds_list(struct pt_store *st, int64_t charge_id, int state, int64_t after_id,
                           int max, struct pt_refund *rows, int *n, int *more);
static int sq_refunds_due(struct pt_store *st, int64_t now, int64_t after_id, int max,
                          struct pt_refund *rows, int *n);
static int sq_refunds_next_due(struct pt_store *st, int64_t *when);
static int sq_refund_left(struct pt_store *st, int64_t charge_id, int64_t *left);
static int sq_refund_transition(struct pt_store *st, int64_t id, unsigned from_mask,
                                enum pt_state to, const struct pt_charge_patch *patch, int64_t now);
static int sq_refund_patch(struct pt_store *st, int64_t id, const struct pt_charge_patch *patch,
                           int64_t now);
static int sq_refund_set_review(struct pt_store *st, int64_t id, int review, const char *reason,
                                int64_t now);
static int sq_refund_withdraw(struct pt_store *st, int64_t id);
static int sq_refund_audit(struct pt_store *st, const struct pt_refund *r, const char *from,
                           const char *to, const char *cause, const char *actor, int refused,
                           const char *detail, int64_t now);
static int sq_refund_event_insert(struct pt_store *st, const char *type, const struct pt_refund *r,
                                  const char *payload, int64_t now, int64_t *seq);
static int sq_refund_stats(struct pt_store *st, struct pt_refund_stats *out);
static int sq_clock_get(struct pt_store *st, struct pt_clock_anchor *out);
static int sq_clock_put(struct pt_store *st, const struct pt_clock_anchor *a);
static int sq_newest_time(struct pt_store *st, int64_t *t);
static int sq_clock_shift(struct pt_store *st, int64_t since, int64_t delta);
static int sq_clock_event(struct pt_store *st, const char *kind, int64_t size_ms, int64_t wall_ms,
                          const char *detail, int64_t now);
static int sq_clock_events(struct pt_store *st, int max, struct pt_clock_event_row *rows, int *n);
static const char *sq_errmsg(struct pt_store *st);
static const struct pt_store_ops sqlite_ops;

/* A charge's and a refund's columns, as read_charge() and read_refund()
 * read them: store_rows.h, the same for both backends. */
#define CHARGE_COLS PT_CHARGE_COLS
#define REFUND_COLS PT_REFUND_COLS

/* A refund's patch: the charge's with gateway_refund_no for the trade
 * number (?4, the action URL, unused). */
#define REFUND_PATCH_SET                                                                           \
    "updated_at = ?2, gateway_refund_no = coalesce(?3, gateway_refund_no)," PATCH_REST

/* Non-final states.  (An OR chain, not IN: see sql/001_init.sql.)  Queries
 * over them start at the connection's active floor (see active_floor()). */
#define ACTIVE "(state = 'INIT' OR state = 'PROCESSING' OR state = 'PENDING' OR state = 'UNKNOWN')"
/* The charges waiting in the queue: the index charges_queued (sql/012). */
#define QUEUED "state = 'INIT' AND offline_accepted = 1"

/* The SET list of a patch: ?1 id, ?2 now, ?3..?9 the pt_charge_patch fields.
 * PATCH_REST is what a charge's and a refund's patch share (?5..?9). */
#define PATCH_REST                                                                                 \
    " error_code = CASE WHEN ?5 IS NULL THEN error_code WHEN ?5 = '' THEN NULL ELSE ?5 END,"       \
    " error_message = CASE WHEN ?6 IS NULL THEN error_message WHEN ?6 = '' THEN NULL ELSE ?6 END," \
    " attempts = attempts + ?7,"                                                                   \
    " next_attempt_at = CASE WHEN ?8 < 0 THEN next_attempt_at ELSE ?8 END,"                        \
    " first_sent_at = CASE WHEN ?9 < 0 OR first_sent_at IS NOT NULL THEN first_sent_at"            \
    " ELSE ?9 END"
#define PATCH_SET                                                                                  \
    "updated_at = ?2, gateway_trade_no = coalesce(?3, gateway_trade_no),"                          \
    " action_url = coalesce(?4, action_url)," PATCH_REST

/* "Still held by the caller": a key's lock is identified by when and by
 * whom it was taken, so a holder whose lock was recovered by another request
 * (after lock_timeout_s) can no longer complete, link or release the key. */
#define HELD(at, by) "completed_at IS NULL AND locked_at = ?" #at " AND locked_by IS ?" #by

/* A charge's audit trail: ids charge_id * 2^32 + seq (sql/007_audit_rowid.sql). */
#define TRAIL(p) "?" #p " * 4294967296 + 1 AND ?" #p " * 4294967296 + 4294967295"
/* The id of the charge's next audit row: one seek to the end of its range
 * (next_in_trail()).  Past 2^32 - 1 rows the seq CHECK refuses it.  It is
 * read by a statement of its own, not as INSERT ... SELECT: SQLite runs an
 * INSERT from a SELECT, which may write several rows, inside a statement
 * journal (a savepoint opened and closed around it), a third of what the
 * audit row of a refund cost (~13 000 of 40 000 instructions, callgrind). */
#define AUDIT_NEXT_SQL                                                                             \
    "SELECT coalesce(max(id), ?1 * 4294967296) + 1 FROM charge_events WHERE id BETWEEN " TRAIL(1)

/* The newest time the database holds (pt_store_newest_time): the last
 * charge, refund, key, event and clock audit row, the charges in progress
 * (from the active floor, ?1), and the clock's anchor - each one seek. */
#define NEWEST_TIME_SQL                                                                            \
    "SELECT max(coalesce((SELECT max(created_at, updated_at) FROM charges"                         \
    " ORDER BY id DESC LIMIT 1), 0),"                                                              \
    " coalesce((SELECT max(updated_at) FROM charges WHERE id >= ?1 AND " ACTIVE "), 0),"           \
    " coalesce((SELECT max(created_at, updated_at) FROM refunds ORDER BY id DESC LIMIT 1), 0),"    \
    " coalesce((SELECT max(created_at, coalesce(locked_at, 0), coalesce(completed_at, 0))"         \
    " FROM idempotency_keys ORDER BY id DESC LIMIT 1), 0),"                                        \
    " coalesce((SELECT created_at FROM events ORDER BY seq DESC LIMIT 1), 0),"                     \
    " coalesce((SELECT created_at FROM clock_events ORDER BY id DESC LIMIT 1), 0),"                \
    " coalesce((SELECT lane_ms FROM clock WHERE id = 1), 0))"

/* The correction of provisional times (pt_store_clock_shift): ?1 since,
 * ?2 delta.  A column recorded at or after since moves; a charge's or
 * refund's deadline moves with it when its row was written meanwhile and
 * the deadline falls in that period or later. */
#define SHIFTED(col) " " col " = CASE WHEN " col " >= ?1 THEN " col " + ?2 ELSE " col " END"
#define SHIFT_ROWS(table)                                                                          \
    "UPDATE " table " SET" SHIFTED("created_at") "," SHIFTED("first_sent_at") "," SHIFTED(         \
        "next_attempt_at") ", updated_at = updated_at + ?2 WHERE updated_at >= ?1"
#define SHIFT_COLUMN(table, col) "UPDATE " table " SET " col " = " col " + ?2 WHERE " col " >= ?1"

/* X(ID, "sql") - the prepared statement cache. */
#define PT_STMTS(X)                                                                                \
    X(KEY_GET, "SELECT request_hash, locked_at, locked_by, completed_at, response_status,"         \
               " response_body, order_id, expires_at FROM idempotency_keys"                        \
               " WHERE scope = ?1 AND key = ?2")                                                   \
    X(KEY_OF_ORDER, "SELECT request_hash, locked_at, locked_by, completed_at, response_status,"    \
                    " response_body, order_id, expires_at, scope, key FROM idempotency_keys"       \
                    " WHERE order_id = ?1 AND completed_at IS NOT NULL ORDER BY id LIMIT 1")       \
    X(KEY_INSERT, "INSERT OR IGNORE INTO idempotency_keys (scope, key, request_hash, locked_at,"   \
                  " locked_by, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?4, ?6)")       \
    X(KEY_EXISTS, "SELECT 1 FROM idempotency_keys WHERE scope = ?1 AND key = ?2")                  \
    X(KEY_INSERT_DONE,                                                                             \
      "INSERT OR IGNORE INTO idempotency_keys (scope, key, request_hash, completed_at,"            \
      " response_status, response_body, created_at, expires_at, order_id)"                         \
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)")                                              \
    X(KEY_INSERT_HELD,                                                                             \
      "INSERT OR IGNORE INTO idempotency_keys (scope, key, request_hash, locked_at,"               \
      " locked_by, created_at, expires_at, order_id)"                                              \
      " VALUES (?1, ?2, ?3, ?4, ?5, ?4, ?6, ?7)")                                                  \
    X(KEY_RELOCK, "UPDATE idempotency_keys SET locked_at = ?5, locked_by = ?6"                     \
                  " WHERE scope = ?1 AND key = ?2 AND completed_at IS NULL"                        \
                  " AND locked_at = ?3 AND locked_by IS ?4")                                       \
    X(KEY_SET_ORDER, "UPDATE idempotency_keys SET order_id = ?3 WHERE scope = ?1 AND key = ?2"     \
                     " AND " HELD(4, 5))                                                           \
    X(KEY_COMPLETE, "UPDATE idempotency_keys SET completed_at = ?5, response_status = ?3,"         \
                    " response_body = ?4, locked_at = NULL, locked_by = NULL,"                     \
                    " order_id = coalesce(?9, order_id)"                                           \
                    " WHERE scope = ?1 AND key = ?2 AND " HELD(7, 8))                              \
    X(KEY_COMPLETE_ID, "UPDATE idempotency_keys SET completed_at = ?5, response_status = ?3,"      \
                       " response_body = ?4, locked_at = NULL, locked_by = NULL,"                  \
                       " order_id = coalesce(?9, order_id)"                                        \
                       " WHERE id = ?6 AND scope = ?1 AND key = ?2 AND " HELD(7, 8))               \
    X(KEY_DELETE, "DELETE FROM idempotency_keys WHERE scope = ?1 AND key = ?2 AND " HELD(3, 4))    \
    X(KEY_DELETE_EXPIRED, "DELETE FROM idempotency_keys WHERE scope = ?1 AND key = ?2"             \
                          " AND expires_at <= ?3")                                                 \
    X(KEY_SWEEP, "DELETE FROM idempotency_keys WHERE expires_at <= ?1"                             \
                 " AND completed_at IS NOT NULL")                                                  \
    X(CHARGE_INSERT,                                                                               \
      "INSERT INTO charges (order_id, gateway, method, amount, currency, state, offline_mode,"     \
      " subject, payment_code, payment_method, customer, metadata, attempts, next_attempt_at,"     \
      " created_at, updated_at, offline_accepted)"                                                 \
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, 0, ?13, ?14, ?14, ?15)"         \
      " ON CONFLICT (order_id) DO NOTHING")                                                        \
    X(CHARGE_GET, "SELECT " CHARGE_COLS " FROM charges WHERE order_id = ?1")                       \
    X(CHARGE_GET_BY_ID, "SELECT " CHARGE_COLS " FROM charges WHERE id = ?1")                       \
    X(CHARGE_PATCH, "UPDATE charges SET " PATCH_SET " WHERE id = ?1")                              \
    X(CHARGE_ACCEPT_OFFLINE, "UPDATE charges SET offline_accepted = 1, updated_at = ?2"            \
                             " WHERE id = ?1 AND state = 'INIT'")                                  \
    X(CHARGE_REQUEST_CANCEL, "UPDATE charges SET cancel_requested = 1, next_attempt_at ="          \
                             " CASE WHEN ?2 < 0 THEN next_attempt_at ELSE ?2 END, updated_at = ?3" \
                             " WHERE id = ?1 AND cancel_requested = 0")                            \
    X(KEY_REANSWER, "UPDATE idempotency_keys SET response_status = ?3, response_body = ?4"         \
                    " WHERE scope = ?1 AND completed_at IS NOT NULL AND response_status = ?2")     \
    X(CHARGE_SET_REVIEW, "UPDATE charges SET review = ?2, review_reason = ?3, updated_at = ?4"     \
                         " WHERE id = ?1 AND review <> ?2")                                        \
    X(CHARGES_LIST, "SELECT " CHARGE_COLS " FROM charges WHERE id > ?1 ORDER BY id LIMIT ?2")      \
    X(CHARGES_LIST_REVIEW, "SELECT " CHARGE_COLS " FROM charges WHERE review = 1 AND id > ?1"      \
                           " ORDER BY id LIMIT ?2")                                                \
    X(CHARGES_LIST_STATE, "SELECT " CHARGE_COLS " FROM charges WHERE state = ?3 AND id > ?1"       \
                          " ORDER BY id LIMIT ?2")                                                 \
    X(CHARGES_DUE, "SELECT " CHARGE_COLS " FROM charges WHERE id > ?3 AND " ACTIVE                 \
                   " AND next_attempt_at <= ?1 ORDER BY id LIMIT ?2")                              \
    X(CHARGES_NEXT_DUE, "SELECT min(next_attempt_at) FROM charges WHERE id >= ?1 AND " ACTIVE)     \
    X(CHARGES_QUEUED_BEFORE, "SELECT " CHARGE_COLS " FROM charges WHERE " QUEUED                   \
                             " AND gateway = ?1 AND method = ?2 AND created_at < ?3 AND id > ?4"   \
                             " ORDER BY id LIMIT ?5")                                              \
    X(CHARGES_OLDEST_QUEUED,                                                                       \
      "SELECT min(created_at) FROM charges WHERE " QUEUED " AND gateway = ?1 AND method = ?2")     \
    X(ACTIVE_FIRST, "SELECT coalesce((SELECT id FROM charges WHERE id >= ?1 AND " ACTIVE           \
                    " ORDER BY id LIMIT 1), (SELECT coalesce(max(id), 0) + 1 FROM charges))")      \
    X(QUEUE_FIGURES, "SELECT coalesce(sum(count), 0),"                                             \
                     " coalesce(sum(CASE WHEN currency = ?1 THEN total END), 0)"                   \
                     " FROM offline_queue")                                                        \
    X(STATS_STATE, "SELECT state, count(*) FROM charges GROUP BY state")                           \
    X(STATS_ACTIVE,                                                                                \
      "SELECT state, count(*) FROM charges WHERE id >= ?1 AND " ACTIVE " GROUP BY state")          \
    X(STATS_REVIEW, "SELECT count(*) FROM charges WHERE review = 1")                               \
    X(STATS_QUEUE, "SELECT currency, count(*), sum(amount), min(created_at) FROM charges"          \
                   " WHERE id >= ?1 AND state = 'INIT' GROUP BY currency ORDER BY currency")       \
    X(EVENT_INSERT, "INSERT OR IGNORE INTO events (type, charge_id, order_id, payload,"            \
                    " created_at) VALUES (?1, ?2, ?3, ?4, ?5)")                                    \
    X(EVENTS_LIST, "SELECT seq, type, order_id, payload, created_at FROM events WHERE seq > ?1"    \
                   " ORDER BY seq LIMIT ?2")                                                       \
    X(EVENTS_LAST, "SELECT coalesce(max(seq), 0) FROM events")                                     \
    X(AUDIT_LIST, "SELECT seq, from_state, to_state, cause, actor, refused, detail, created_at,"   \
                  " refund_id FROM charge_events WHERE id BETWEEN " TRAIL(1) " ORDER BY id"        \
                                                                             " LIMIT ?2")          \
    X(NOTIFICATION_INSERT, "INSERT OR IGNORE INTO notifications (gateway, dedup_id, order_id,"     \
                           " status, outcome, received_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")       \
    X(AUDIT_INSERT_FIRST,                                                                          \
      "INSERT INTO charge_events (id, charge_id, seq, from_state, to_state, cause,"                \
      " actor, refused, detail, created_at)"                                                       \
      " VALUES (?1 * 4294967296 + 1, ?1, 1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")                          \
    X(AUDIT_NEXT, AUDIT_NEXT_SQL)                                                                  \
    X(AUDIT_INSERT,                                                                                \
      "INSERT INTO charge_events (id, charge_id, seq, from_state, to_state, cause, actor,"         \
      " refused, detail, created_at) VALUES (?9, ?1, ?9 - ?1 * 4294967296, ?2, ?3, ?4, ?5, ?6,"    \
      " ?7, ?8)")                                                                                  \
    X(REFUND_INSERT,                                                                               \
      "INSERT INTO refunds (refund_id, charge_id, amount, state, offline_mode, reason, metadata,"  \
      " next_attempt_at, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)") \
    X(REFUND_GET, "SELECT " REFUND_COLS " WHERE r.refund_id = ?1")                                 \
    X(REFUND_GET_BY_ID, "SELECT " REFUND_COLS " WHERE r.id = ?1")                                  \
    X(REFUNDS_LIST, "SELECT " REFUND_COLS " WHERE r.id > ?1 ORDER BY r.id LIMIT ?2")               \
    X(REFUNDS_LIST_STATE, "SELECT " REFUND_COLS " WHERE r.state = ?3 AND r.id > ?1"                \
                          " ORDER BY r.id LIMIT ?2")                                               \
    X(REFUNDS_OF_CHARGE, "SELECT " REFUND_COLS " WHERE r.charge_id = ?3 AND r.id > ?1"             \
                         " ORDER BY r.id LIMIT ?2")                                                \
    X(REFUNDS_DUE, "SELECT " REFUND_COLS " WHERE r.id > ?3 AND (r.state = 'INIT'"                  \
                   " OR r.state = 'PROCESSING' OR r.state = 'PENDING' OR r.state = 'UNKNOWN')"     \
                   " AND r.next_attempt_at <= ?1 ORDER BY r.id LIMIT ?2")                          \
    X(REFUNDS_NEXT_DUE, "SELECT min(next_attempt_at) FROM refunds WHERE id >= ?1 AND " ACTIVE)     \
    X(CHARGES_INTERRUPTED, "UPDATE charges SET next_attempt_at = ?1 WHERE id >= ?2"                \
                           " AND state = 'PROCESSING' AND next_attempt_at > ?1")                   \
    X(CHARGES_BACK, "UPDATE charges SET next_attempt_at = ?1 WHERE id >= ?2 AND state = 'INIT'"    \
                    " AND gateway = ?3 AND next_attempt_at > ?1")                                  \
    X(REFUNDS_BACK, "UPDATE refunds SET next_attempt_at = ?1 WHERE id >= ?2 AND state = 'INIT'"    \
                    " AND next_attempt_at > ?1 AND charge_id IN (SELECT id FROM charges"           \
                    " WHERE gateway = ?3)")                                                        \
    X(REFUNDS_INTERRUPTED, "UPDATE refunds SET next_attempt_at = ?1 WHERE id >= ?2"                \
                           " AND state = 'PROCESSING' AND next_attempt_at > ?1")                   \
    X(REFUND_ACTIVE_FIRST,                                                                         \
      "SELECT coalesce((SELECT id FROM refunds WHERE id >= ?1 AND " ACTIVE                         \
      " ORDER BY id LIMIT 1), (SELECT coalesce(max(id), 0) + 1 FROM refunds))")                    \
    X(REFUND_LEFT, "SELECT amount - coalesce((SELECT sum(amount) FROM refunds"                     \
                   " WHERE charge_id = ?1 AND state <> 'FAILED'), 0) FROM charges WHERE id = ?1")  \
    X(REFUND_PATCH, "UPDATE refunds SET " REFUND_PATCH_SET " WHERE id = ?1")                       \
    X(REFUND_SET_REVIEW, "UPDATE refunds SET review = ?2, review_reason = ?3, updated_at = ?4"     \
                         " WHERE id = ?1 AND review <> ?2")                                        \
    X(REFUND_WITHDRAW, "DELETE FROM refunds WHERE id = ?1 AND state = 'INIT'")                     \
    X(REFUND_STATS,                                                                                \
      "SELECT state, count(*) FROM refunds WHERE id >= ?1 AND " ACTIVE " GROUP BY state")          \
    X(REFUND_STATS_REVIEW, "SELECT count(*) FROM refunds WHERE review = 1")                        \
    X(AUDIT_INSERT_REFUND,                                                                         \
      "INSERT INTO charge_events (id, charge_id, seq, from_state, to_state, cause, actor,"         \
      " refused, detail, created_at, refund_id) VALUES (?9, ?1, ?9 - ?1 * 4294967296, ?2, ?3,"     \
      " ?4, ?5, ?6, ?7, ?8, ?10)")                                                                 \
    X(EVENT_INSERT_REFUND, "INSERT OR IGNORE INTO events (type, charge_id, order_id, payload,"     \
                           " created_at, refund_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")              \
    X(CLOCK_GET, "SELECT boot_id, boot_ms, lane_ms, trusted, provisional_since, wall_high"         \
                 " FROM clock WHERE id = 1")                                                       \
    X(CLOCK_PUT, "INSERT INTO clock (id, boot_id, boot_ms, lane_ms, trusted, provisional_since,"   \
                 " wall_high) VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (id) DO UPDATE SET"   \
                 " boot_id = ?1, boot_ms = ?2, lane_ms = ?3, trusted = ?4,"                        \
                 " provisional_since = ?5, wall_high = ?6")                                        \
    X(NEWEST_TIME, NEWEST_TIME_SQL)                                                                \
    X(CLOCK_EVENT, "INSERT INTO clock_events (kind, size_ms, wall_ms, detail, created_at)"         \
                   " VALUES (?1, ?2, ?3, ?4, ?5)")                                                 \
    X(CLOCK_EVENTS, "SELECT id, kind, size_ms, wall_ms, detail, created_at FROM clock_events"      \
                    " ORDER BY id DESC LIMIT ?1")                                                  \
    X(SHIFT_CHARGES, SHIFT_ROWS("charges"))                                                        \
    X(SHIFT_REFUNDS, SHIFT_ROWS("refunds"))                                                        \
    X(SHIFT_KEYS,                                                                                  \
      "UPDATE idempotency_keys SET" SHIFTED(                                                       \
          "created_at") ","                                                                        \
                        " expires_at = CASE WHEN created_at >= ?1 THEN expires_at + ?2"            \
                        " ELSE expires_at END," SHIFTED("locked_at") "," SHIFTED(                  \
                            "completed_at") " WHERE created_at >= ?1 OR locked_at >= ?1 OR "       \
                                            "completed_at >= ?1")                                  \
    X(SHIFT_EVENTS, SHIFT_COLUMN("events", "created_at"))                                          \
    X(SHIFT_AUDIT, SHIFT_COLUMN("charge_events", "created_at"))                                    \
    X(SHIFT_NOTIFICATIONS, SHIFT_COLUMN("notifications", "received_at"))                           \
    X(SHIFT_CLOCK_EVENTS, SHIFT_COLUMN("clock_events", "created_at"))                              \
    X(BEGIN, "BEGIN IMMEDIATE")                                                                    \
    X(COMMIT, "COMMIT")                                                                            \
    X(ROLLBACK, "ROLLBACK")                                                                        \
    X(SAVEPOINT, "SAVEPOINT request")                                                              \
    X(RELEASE, "RELEASE request")                                                                  \
    X(ROLLBACK_TO, "ROLLBACK TO request")

enum {
#define PT__STMT_ENUM(id, sql) S_##id,
    PT_STMTS(PT__STMT_ENUM)
#undef PT__STMT_ENUM
        S__COUNT
};

static const char *const stmt_sql[S__COUNT] = {
#define PT__STMT_SQL(id, sql) sql,
    PT_STMTS(PT__STMT_SQL)
#undef PT__STMT_SQL
};

#define PT_FROM_MASKS (1u << PT_STATE__COUNT)

/*
 * Which file a path led to when a connection opened it: a device and an
 * inode.  The connection's descriptor keeps the inode alive, so no other
 * file can get its number on that device while it is open: a path that
 * leads elsewhere, or nowhere, is a file that was removed or replaced.
 */
struct file_id {
    dev_t dev;
    ino_t ino;
    int known; /* 0: no such file at open (not checked) */
};

/* One SQLite connection with its prepared statements. */
struct conn {
    sqlite3 *db;
    sqlite3_stmt *stmt[S__COUNT];
    /* Transition statements, one per set of allowed source states, built
     * from the mask so each reads "... AND (state = 'UNKNOWN' OR ...)". */
    sqlite3_stmt *transition[PT_FROM_MASKS];
    sqlite3_stmt *refund_transition[PT_FROM_MASKS]; /* the same for refunds */
};

struct pt_store {
    struct pt_store_head head; /* first: store.c reads the operations there */
    struct conn own;
    /* The connection statements run on: own, or - during a write
     * transaction of a store attached to a writer - the writer's. */
    struct conn *c;
    struct pt_store_writer *writer; /* NULL: transactions on own */
    int in_txn;
    struct pt_store_commit *defer; /* the next commit only joins a batch */
    int deferred;                  /* the last commit did that */
    void (*event_hook)(void *ctx);
    void *event_hook_ctx;
    /* The row of the key this connection inserted last: completing it
     * (usually in the same transaction) needs no index search. */
    int64_t last_key_rowid;
    /* Every charge with a smaller id is final (see active_floor()). */
    int64_t active_floor;
    int64_t refund_floor;        /* the same for refunds (refund_floor()) */
    unsigned refund_floor_epoch; /* refund_withdrawals when it was read */
    int events_in_txn;           /* events inserted since BEGIN */
    int erased_in_txn;           /* a payment code erased since BEGIN */
    char path[PT_STORE_PATH_MAX];
    char dir[PT_STORE_PATH_MAX]; /* the directory it is in (free space) */
    /* The database and its WAL as this connection opened them (files_check). */
    struct file_id files[2];
    int wal_rescued;      /* what a removed WAL held is in the database file (wal_rescue) */
    int changes_at_begin; /* sqlite3_total_changes() at BEGIN */
    int keys_pending;     /* pending key locks taken since BEGIN, not yet written */
    unsigned txn_seq;     /* counts BEGINs: a pending lock belongs to one */
};

/*
 * What the storage did at the last write of any connection of this process:
 * PT_OK, or PT_EFULL / PT_EIO when it failed (disk full, read-only file
 * system, I/O error).  /healthz reads it (pt_store_writable): a full disk
 * shows only when SQLite appends to the WAL at a commit, so nothing short of
 * a write can see it, and a health check must not write each time it is
 * asked.  One process has one database; a second one (tests) at worst
 * costs /healthz one probe write.
 */
static atomic_int storage_fault;

/* Why storage_fault is set, in a few words, for /v1/status (fault_mu). */
static pthread_mutex_t fault_mu = PTHREAD_MUTEX_INITIALIZER;
static char fault_why[PT_STORE_PATH_MAX + 64];

/* storage.wal_vfs = false: every store opened from now on uses SQLite's own
 * VFS (the process's configuration, set once before the first open). */
static atomic_int wal_vfs_off;

void pt_store_set_wal_vfs(int on)
{
    atomic_store(&wal_vfs_off, !on);
}

/* Records what a write (or a look at the files) learnt, with why in a few
 * words when it failed; logs when the storage goes bad, fails otherwise, or
 * recovers. */
static void note_storage(int rc, const char *why)
{
    if (rc) {
        pthread_mutex_lock(&fault_mu);
        snprintf(fault_why, sizeof fault_why, "%s", why);
        pthread_mutex_unlock(&fault_mu);
    }
    int was = atomic_exchange(&storage_fault, rc);
    if (rc == PT_EGONE && was != rc)
        pt_log_error("store: the %s while payterm had it open: nothing more is written "
                     "into it, every write answers 503 storage_unavailable and /healthz 503 "
                     "(a restart would not find what is written there)",
                     why);
    else if (rc && was != rc)
        pt_log_error("store: the storage failed (%s): /healthz answers 503 until a write "
                     "succeeds again",
                     why);
    else if (!rc && was)
        pt_log_info("store: writes succeed again (after %s)", pt_strerror(was));
}

/* Translates an SQLite result code (extended or primary) to a pt_err. */
static int xlate(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_DONE:
    case SQLITE_ROW:
        return PT_OK;
    case SQLITE_FULL:
        note_storage(PT_EFULL, "disk full"); /* every failure passes here: for /healthz */
        return PT_EFULL;
    case SQLITE_IOERR:
        note_storage(PT_EIO, "I/O error");
        return PT_EIO;
    case SQLITE_READONLY:
        note_storage(PT_EIO, "the database cannot be written (read-only)");
        return PT_EIO;
    case SQLITE_CANTOPEN: /* a path or permission problem, not the disk failing */
        return PT_EIO;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return PT_EBUSY;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return PT_ECORRUPT;
    case SQLITE_NOMEM:
        return PT_ENOMEM;
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return PT_EPERM;
    case SQLITE_CONSTRAINT:
        return (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY) ? PT_EEXIST
                                                                                      : PT_EINVAL;
    default:
        return PT_ESTORAGE;
    }
}

static sqlite3_stmt *stmt(struct pt_store *st, int id)
{
    assert(id >= 0 && id < S__COUNT); /* one of the PT_STMTS table, by its S_ name */
    sqlite3_stmt *s = st->c->stmt[id];
    if (s) {
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
        return s;
    }
    if (sqlite3_prepare_v3(st->c->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &s, NULL) !=
        SQLITE_OK) {
        pt_log_error("store: cannot prepare statement %d: %s", id, sqlite3_errmsg(st->c->db));
        return NULL;
    }
    st->c->stmt[id] = s;
    return s;
}

/* Steps a statement that returns no rows; resets it. */
static int run(struct pt_store *st, sqlite3_stmt *s)
{
    int rc = sqlite3_step(s);
    int err = (rc == SQLITE_DONE) ? PT_OK : xlate(sqlite3_extended_errcode(st->c->db));
    if (rc != SQLITE_DONE && err == PT_OK)
        err = PT_ESTORAGE;
    sqlite3_reset(s);
    return err;
}

static int exec(struct pt_store *st, const char *sql)
{
    int rc = sqlite3_exec(st->c->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? PT_OK : xlate(sqlite3_extended_errcode(st->c->db));
}

static void bind_text(sqlite3_stmt *s, int i, const char *v)
{
    if (v && *v)
        sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, i);
}

static void copy_col(sqlite3_stmt *s, int i, char *dst, size_t cap)
{
    const unsigned char *v = sqlite3_column_text(s, i);
    if (!v) {
        dst[0] = '\0';
        return;
    }
    snprintf(dst, cap, "%s", (const char *)v);
}

static const char *sq_errmsg(struct pt_store *st)
{
    return sqlite3_errmsg(st->c->db);
}

int pt_store_schema_latest(void)
{
    return pt_migrations_count;
}

static int sq_pragma_int(struct pt_store *st, const char *name, int *value)
{
    static const char *const allowed[] = {"user_version",  "synchronous", "foreign_keys",
                                          "busy_timeout",  "page_count",  "max_page_count",
                                          "freelist_count"};
    int ok = 0;
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        ok |= strcmp(name, allowed[i]) == 0;
    if (!ok)
        return PT_EINVAL;
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA %s", name);
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(st->c->db, sql, -1, &s, NULL) != SQLITE_OK)
        return xlate(sqlite3_extended_errcode(st->c->db));
    int rc = sqlite3_step(s);
    int err = PT_OK;
    if (rc == SQLITE_ROW)
        *value = sqlite3_column_int(s, 0);
    else
        err = xlate(sqlite3_extended_errcode(st->c->db));
    sqlite3_finalize(s);
    return err;
}

static int sq_schema_version(struct pt_store *st, int *version)
{
    return sq_pragma_int(st, "user_version", version);
}

static int sq_migrate_to(struct pt_store *st, int version)
{
    int cur;
    int rc = sq_schema_version(st, &cur);
    if (rc)
        return rc;
    if (cur > pt_migrations_count)
        return PT_ETOONEW;
    for (int v = cur + 1; v <= version && v <= pt_migrations_count; v++) {
        const struct pt_migration *m = &pt_migrations[v - 1];
        char bump[64];
        snprintf(bump, sizeof bump, "PRAGMA user_version = %d", v);
        if ((rc = exec(st, "BEGIN IMMEDIATE")) != PT_OK)
            return rc;
        if ((rc = exec(st, m->sql)) != PT_OK || (rc = exec(st, bump)) != PT_OK) {
            pt_log_error("store: migration %s failed: %s", m->name, sqlite3_errmsg(st->c->db));
            exec(st, "ROLLBACK");
            return rc;
        }
        if ((rc = exec(st, "COMMIT")) != PT_OK) {
            exec(st, "ROLLBACK");
            return rc;
        }
        pt_log_info("store: applied migration %s", m->name);
    }
    return PT_OK;
}

static int configure(struct pt_store *st, const struct pt_store_options *opt)
{
    char sql[256];
    int err;
    sqlite3_busy_timeout(st->c->db, opt->busy_timeout_ms > 0 ? opt->busy_timeout_ms : 5000);
    /* Small pages, chosen when the file is created (SQLite ignores this for
     * an existing database).  A new charge touches some eight b-tree pages
     * (key, charge, order id index, active index, audit, and the odd split),
     * and every touched page goes into the WAL and through fsync whole: at
     * 1 KiB that is about 10 KiB per durable commit instead of 30 KiB.  On a
     * board's flash, fewer bytes per commit is also less wear. */
    snprintf(sql, sizeof sql, "PRAGMA page_size = %d",
             opt->page_size > 0 ? opt->page_size : PT_STORE_PAGE_SIZE);
    if ((err = exec(st, sql)) != PT_OK)
        return err;
    /* journal_mode answers with the mode it ended up in; a read-only or
     * in-memory file may refuse WAL, which we must not silently accept. */
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(st->c->db, "PRAGMA journal_mode = WAL", -1, &s, NULL) != SQLITE_OK)
        return xlate(sqlite3_extended_errcode(st->c->db));
    int rc = sqlite3_step(s);
    int wal =
        rc == SQLITE_ROW && sqlite3_stricmp((const char *)sqlite3_column_text(s, 0), "wal") == 0;
    err = rc == SQLITE_ROW ? PT_OK : xlate(sqlite3_extended_errcode(st->c->db));
    sqlite3_finalize(s);
    if (err)
        return err;
    if (!wal)
        return PT_EIO;
    /* secure_delete: bytes a statement removes (an erased payment code, a
     * swept key) are overwritten with zeros, not left in free space. */
    snprintf(sql, sizeof sql,
             "PRAGMA synchronous = %s; PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;"
             " PRAGMA secure_delete = ON;",
             opt->synchronous_off      ? "OFF"
             : opt->synchronous_normal ? "NORMAL"
                                       : "FULL");
    if ((err = exec(st, sql)) != PT_OK)
        return err;
    /* The page cache: SQLite's default (2000 KiB) is per connection, and
     * the daemon holds a dozen (the API's pool, the syncer, its own).  Each
     * fills to it once a walk or a drain has read a big queue, and keeps
     * it: 29 MiB private after 50 000 charges drained (issue 38), on a
     * board that has 8 MiB for payterm.  A charge touches a few dozen
     * pages; the rest come from the OS's cache of the file. */
    snprintf(sql, sizeof sql, "PRAGMA cache_size = -%d", PT_STORE_CACHE_KIB);
    if ((err = exec(st, sql)) != PT_OK)
        return err;
    if (opt->max_page_count > 0) {
        snprintf(sql, sizeof sql, "PRAGMA max_page_count = %d", opt->max_page_count);
        if ((err = exec(st, sql)) != PT_OK)
            return err;
    }
    return PT_OK;
}

/*
 * Files payterm creates are 0600 whatever the umask (SPEC section 11): the
 * database holds idempotency answers and, for a minute, payment codes.
 * SQLite creates a file 0644 (less the umask) and gives its -wal and -shm
 * the database file's mode, so the database is created here first, 0600,
 * and a file an older payterm left readable by others is narrowed.
 */
static int private_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0)
        return close(fd) == 0 ? PT_OK : PT_EIO;
    if (errno != EEXIST)
        return errno == ENOENT ? PT_ENOTFOUND : PT_EIO;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return PT_EIO;
    if (S_ISREG(sb.st_mode) && (sb.st_mode & 077) && chmod(path, sb.st_mode & 0700) != 0)
        return PT_EIO;
    return PT_OK;
}

/* The -wal and -shm files beside a database, narrowed like it. */
static void private_companions(const char *path)
{
    static const char *const suffix[] = {"-wal", "-shm"};
    for (int i = 0; i < 2; i++) {
        char p[PT_STORE_PATH_MAX + 8];
        struct stat sb;
        snprintf(p, sizeof p, "%s%s", path, suffix[i]);
        if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode) && (sb.st_mode & 077))
            (void)chmod(p, sb.st_mode & 0700);
    }
}

/* ---- the files under the connection (SPEC 18) ---------------------------------------- */

/*
 * The database and its WAL must stay the files at their paths while payterm
 * writes into them.  SQLite keeps writing through its descriptors into a
 * file that was unlinked (an rm, a cleanup script) or that another file
 * was moved over (a backup restored in place): every commit is synced and
 * answered, and the next start finds none of it - or opens an old WAL
 * against a new database.  So each connection notes at open which files
 * its paths led to (files_record), and a commit asks the paths again before
 * it runs and before it is answered (files_check): one stat() per file.
 *
 * The cost: two stat() calls of paths whose inodes are cached, twice per
 * batch - one system call each (measured in README, Storage: under 1% of a
 * durable commit), beside the batch's fdatasync of the WAL, milliseconds
 * on a board's flash.  No fstat(): the descriptors are SQLite's, so the
 * identity is the paths' right after SQLite opened them (at start, under
 * the data_dir's lock), and the open descriptor keeps that inode's number
 * from going to another file.
 */

static void wal_path(const struct pt_store *st, char *out, size_t len)
{
    snprintf(out, len, "%s-wal", st->path);
}

/* After the connection's first read (which opens the WAL). */
static void files_record(struct pt_store *st)
{
    char wal[PT_STORE_PATH_MAX + 8];
    wal_path(st, wal, sizeof wal);
    const char *path[2] = {st->path, wal};
    for (int i = 0; i < 2; i++) {
        struct stat sb;
        struct file_id *f = &st->files[i];
        f->known = stat(path[i], &sb) == 0;
        f->dev = f->known ? sb.st_dev : 0;
        f->ino = f->known ? sb.st_ino : 0;
    }
}

/* PT_OK while path leads to the file f; else PT_EGONE (removed or
 * replaced) or PT_EIO (the path cannot be looked at), why naming it. */
static int file_check(const char *name, const char *path, const struct file_id *f, char *why,
                      size_t len)
{
    struct stat sb;
    if (!f->known)
        return PT_OK;
    if (stat(path, &sb) != 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR) {
            snprintf(why, len, "%s %s was removed", name, path);
            return PT_EGONE;
        }
        snprintf(why, len, "%s %s cannot be looked at: %s", name, path, strerror(e));
        return PT_EIO;
    }
    if (sb.st_dev != f->dev || sb.st_ino != f->ino) {
        snprintf(why, len, "%s %s was replaced by another file", name, path);
        return PT_EGONE;
    }
    return PT_OK;
}

/* file_check of the database, then of its WAL. */
static int files_check(const struct pt_store *st, char *why, size_t len)
{
    char wal[PT_STORE_PATH_MAX + 8];
    wal_path(st, wal, sizeof wal);
    int rc = file_check("database file", st->path, &st->files[0], why, len);
    return rc ? rc : file_check("WAL file", wal, &st->files[1], why, len);
}

/*
 * The WAL was removed or replaced while the database file is still there:
 * the commits it holds that no checkpoint has copied yet were answered, and
 * now live only behind the descriptors SQLite has open - a power cut or a
 * SIGKILL would take them.  A checkpoint copies them into the database file
 * and syncs it.  Passive (readers are not waited for: the writer's turn is
 * held), so it is tried again at each refused commit until all is copied.
 */
static void wal_rescue(struct pt_store *st)
{
    char why[PT_STORE_PATH_MAX + 64], wal[PT_STORE_PATH_MAX + 8];
    wal_path(st, wal, sizeof wal);
    if (st->wal_rescued || file_check("WAL file", wal, &st->files[1], why, sizeof why) == PT_OK ||
        file_check("database file", st->path, &st->files[0], why, sizeof why) != PT_OK)
        return;
    int frames = 0, copied = 0;
    int rc =
        sqlite3_wal_checkpoint_v2(st->c->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &frames, &copied);
    if (rc != SQLITE_OK || copied < frames)
        return;
    st->wal_rescued = 1;
    pt_log_warn("store: the WAL that was removed is copied into %s (%d frames) and synced: "
                "what was answered before it went is kept",
                st->path, frames);
}

/* files_check, and what it found kept for /healthz (and logged, once). */
static int files_intact(const struct pt_store *st)
{
    char why[PT_STORE_PATH_MAX + 64];
    int rc = files_check(st, why, sizeof why);
    if (rc)
        note_storage(rc, why);
    return rc;
}

/* A payment code was erased (a barcode charge became final) and its bytes
 * may still be in the WAL: a truncating checkpoint is due.  One flag for the
 * process, whichever connection erased it, set when that commit is durable
 * (a checkpoint that ran before it would not have wiped anything). */
static atomic_int wipe_due;

static void sq_note_erased(struct pt_store *st)
{
    st->erased_in_txn = 1;
}

int pt_store_wipe_due(void)
{
    return atomic_load(&wipe_due);
}

static int checkpoint_truncate(struct pt_store *st)
{
    int was = atomic_exchange(&wipe_due, 0);
    int log = 0, done = 0;
    int rc = sqlite3_wal_checkpoint_v2(st->c->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, &log, &done);
    if (rc == SQLITE_OK)
        return PT_OK;
    /* A reader kept an old snapshot (SQLITE_BUSY): try again later. */
    if (was)
        atomic_store(&wipe_due, 1);
    return rc == SQLITE_BUSY ? PT_EBUSY : xlate(sqlite3_extended_errcode(st->c->db));
}

static pthread_once_t sqlite_once = PTHREAD_ONCE_INIT;
static int walvfs_ok;

/* Once per process, before the first connection. */
static void sqlite_setup(void)
{
    /* No allocation statistics: payterm never reads them, and keeping them
     * takes a global mutex on every malloc and free inside SQLite (6% of
     * the instructions of a new charge).  Only possible before SQLite is
     * initialised; refused, harmlessly, when something else was first. */
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    walvfs_ok = pt_walvfs_register() == SQLITE_OK;
}

/* ---- the schema a database at the latest version must have ------------------ */

/*
 * What sql/ creates, as "type name": the tables, and the indexes and
 * triggers that keep invariants (UNIQUE constraints are the autoindexes).
 * A database whose user_version says "latest" but that lacks one (dropped
 * by hand, a half-restored file) would start and answer healthy, then fail
 * at the first charge, or silently lose an invariant a trigger keeps.
 * test_startup.sh drops every object a fresh database has, one at a time,
 * and expects the open to refuse: a migration that adds one without a
 * line here fails the suite.
 */
static const char *const schema_objects[] = {
    "table idempotency_keys",
    "index sqlite_autoindex_idempotency_keys_1",
    "table charges",
    "index sqlite_autoindex_charges_1",
    "index charges_review",
    "index charges_queued",
    "trigger offline_queue_insert",
    "trigger offline_queue_leave",
    "trigger offline_queue_enter",
    "trigger offline_queue_delete",
    "table charge_events",
    "trigger charge_events_append_only_u",
    "trigger charge_events_append_only_d",
    "table notifications",
    "index sqlite_autoindex_notifications_1",
    "table events",
    "index events_once_per_charge",
    "table offline_queue",
    "table refunds",
    "index sqlite_autoindex_refunds_1",
    "index refunds_by_charge",
    "trigger refunds_never_exceed",
    "trigger refunds_final",
    "index refunds_review",
    "trigger refunds_refunded",
    "index events_once_per_refund",
    "table clock",
    "table clock_events",
    "trigger clock_events_append_only_d",
};
#define SCHEMA_OBJECTS (sizeof schema_objects / sizeof schema_objects[0])

/* Checked once at open (one read of sqlite_master): names what is missing. */
static int schema_check(struct pt_store *st, char *errbuf, size_t errlen)
{
    unsigned char found[SCHEMA_OBJECTS] = {0};
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(st->c->db, "SELECT type || ' ' || name FROM sqlite_master", -1, &s,
                                NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(s, 0);
        for (size_t i = 0; t && i < SCHEMA_OBJECTS; i++)
            found[i] |= strcmp(t, schema_objects[i]) == 0;
        rc = SQLITE_OK;
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) {
        if (errbuf)
            snprintf(errbuf, errlen, "cannot read the schema of database %s: %s", st->path,
                     sqlite3_errmsg(st->c->db));
        return xlate(sqlite3_extended_errcode(st->c->db));
    }
    size_t used = 0;
    rc = PT_OK;
    for (size_t i = 0; i < SCHEMA_OBJECTS; i++) {
        if (found[i])
            continue;
        if (errbuf && rc == PT_OK)
            used = (size_t)snprintf(errbuf, errlen,
                                    "database %s (schema version %d) is damaged, restore a "
                                    "backup; missing: %s",
                                    st->path, pt_migrations_count, schema_objects[i]);
        else if (errbuf && used < errlen)
            used += (size_t)snprintf(errbuf + used, errlen - used, ", %s", schema_objects[i]);
        rc = PT_ECORRUPT;
    }
    return rc;
}

int pt_store_sqlite_open(const struct pt_store_options *opt, struct pt_store **out, char *errbuf,
                         size_t errlen)
{
    int rc = PT_ENOMEM;
    *out = NULL;
    /* sql/008 drops a column (ALTER TABLE ... DROP COLUMN, SQLite 3.35);
     * the version is CMakeLists.txt's, which the .deb depends on. */
    if (sqlite3_libversion_number() < PT_SQLITE_MIN_VERSION_NUMBER) {
        if (errbuf)
            snprintf(errbuf, errlen,
                     "SQLite %s is too old: payterm needs " PT_SQLITE_MIN_VERSION " or newer",
                     sqlite3_libversion());
        return PT_EUNSUPPORTED;
    }
    struct pt_store *st = calloc(1, sizeof *st);
    if (!st)
        goto fail;
    st->head.ops = &sqlite_ops;
    st->c = &st->own;
    snprintf(st->path, sizeof st->path, "%s", opt->path);
    snprintf(st->dir, sizeof st->dir, "%s", opt->path);
    char *slash = strrchr(st->dir, '/');
    if (!slash)
        snprintf(st->dir, sizeof st->dir, ".");
    else
        slash[slash == st->dir] = '\0'; /* "/x.db" is in "/" */
    /* keep: an existing file, opened at the version it has (SPEC 3: the
     * commands that only read or maintain never create or migrate). */
    int keep = opt->readonly || opt->existing;
    int flags = opt->readonly   ? SQLITE_OPEN_READONLY
                : opt->existing ? SQLITE_OPEN_READWRITE
                                : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    if (!keep && (rc = private_file(opt->path)) != PT_OK) {
        if (errbuf)
            snprintf(errbuf, errlen, "cannot create database %s with mode 0600: %s", opt->path,
                     strerror(errno));
        goto fail;
    }
    if (!opt->readonly)
        private_companions(opt->path);
    /* Our VFS writes each WAL commit with one system call (walvfs.c),
     * unless the options turn it off (then SQLite's default VFS). */
    pthread_once(&sqlite_once, sqlite_setup);
    const char *vfs =
        walvfs_ok && !opt->no_wal_vfs && !atomic_load(&wal_vfs_off) ? PT_WALVFS_NAME : NULL;
    if (sqlite3_open_v2(opt->path, &st->c->db, flags | SQLITE_OPEN_NOMUTEX, vfs) != SQLITE_OK) {
        rc = st->c->db ? xlate(sqlite3_extended_errcode(st->c->db)) : PT_ENOMEM;
        if (errbuf)
            snprintf(errbuf, errlen, "cannot open database %s: %s", opt->path,
                     st->c->db ? sqlite3_errmsg(st->c->db) : "out of memory");
        goto fail;
    }
    sqlite3_extended_result_codes(st->c->db, 1);
    if (!opt->readonly && (rc = configure(st, opt)) != PT_OK) {
        if (errbuf)
            snprintf(errbuf, errlen, "cannot configure database %s (WAL, synchronous): %s",
                     opt->path, sqlite3_errmsg(st->c->db));
        goto fail;
    }
    int version = 0;
    if ((rc = sq_schema_version(st, &version)) != PT_OK) {
        if (errbuf)
            snprintf(errbuf, errlen, "cannot read schema version of %s: %s", opt->path,
                     sqlite3_errmsg(st->c->db));
        goto fail;
    }
    files_record(st); /* the first read opened the WAL */
    if (version > pt_migrations_count) {
        rc = PT_ETOONEW;
        if (errbuf)
            snprintf(errbuf, errlen,
                     "database %s has schema version %d but this payterm only knows up to %d: "
                     "it was written by a newer payterm; upgrade payterm or restore a backup",
                     opt->path, version, pt_migrations_count);
        goto fail;
    }
    if (!keep && (rc = sq_migrate_to(st, pt_migrations_count)) != PT_OK) {
        if (errbuf)
            snprintf(errbuf, errlen, "cannot migrate database %s to schema version %d: %s",
                     opt->path, pt_migrations_count, sqlite3_errmsg(st->c->db));
        goto fail;
    }
    /* An older database opened as it is (keep) is checked once migrated. */
    if ((!keep || version == pt_migrations_count) && (rc = schema_check(st, errbuf, errlen)))
        goto fail;
    *out = st;
    return PT_OK;
fail:
    if (errbuf && rc == PT_ENOMEM && !st)
        snprintf(errbuf, errlen, "out of memory");
    sq_close(st);
    return rc;
}

static void sq_close(struct pt_store *st)
{
    if (!st)
        return;
    assert(!st->in_txn); /* a transaction left open would hold the writer's turn */
    for (int i = 0; i < S__COUNT; i++)
        sqlite3_finalize(st->own.stmt[i]);
    for (unsigned i = 0; i < PT_FROM_MASKS; i++) {
        sqlite3_finalize(st->own.transition[i]);
        sqlite3_finalize(st->own.refund_transition[i]);
    }
    sqlite3_close_v2(st->own.db);
    free(st);
}

static void sq_set_event_hook(struct pt_store *st, void (*fn)(void *ctx), void *ctx)
{
    st->event_hook = fn;
    st->event_hook_ctx = ctx;
}

/* ---- transactions: alone, or through the process's writer ---------------------- */

/* After a commit that is durable: what its transaction did, made known. */
static void committed(const struct pt_store_commit *m)
{
    if (m->erased)
        atomic_store(&wipe_due, 1); /* only now are the erased bytes the ones to wipe */
    /* A commit that wrote rows went through the WAL: the storage works. */
    if (m->changed)
        note_storage(PT_OK, NULL);
    if (m->events && m->hook)
        m->hook(m->hook_ctx);
}

/* What st's transaction did, for committed(). */
static void describe(struct pt_store *st, struct pt_store_commit *m)
{
    m->events = st->events_in_txn;
    m->erased = st->erased_in_txn;
    m->changed = sqlite3_total_changes(st->c->db) != st->changes_at_begin;
    m->hook = st->event_hook;
    m->hook_ctx = st->event_hook_ctx;
    st->events_in_txn = 0;
    st->erased_in_txn = 0;
}

static int alone_begin(struct pt_store *st)
{
    sqlite3_stmt *s = stmt(st, S_BEGIN);
    return s ? run(st, s) : PT_ESTORAGE;
}

/*
 * COMMIT on c's connection, only into the files it opened (SPEC 18): not at
 * all when one is gone, and a COMMIT during which one went is a failure -
 * it is durable in a file no restart will open.  A failed COMMIT (disk
 * full, I/O error, a file gone) may leave the transaction open: it is
 * rolled back, so the connection is usable and nothing half is kept.
 */
static int commit_into_files(struct pt_store *c)
{
    sqlite3_stmt *s;
    int rc = files_intact(c);
    if (rc == PT_OK) {
        rc = (s = stmt(c, S_COMMIT)) ? run(c, s) : PT_ESTORAGE;
        if (rc == PT_OK)
            rc = files_intact(c);
    }
    if (rc != PT_OK && !sqlite3_get_autocommit(c->c->db) && (s = stmt(c, S_ROLLBACK)))
        run(c, s);
    if (rc == PT_EGONE)
        wal_rescue(c);
    return rc;
}

static int alone_commit(struct pt_store *st)
{
    int rc = commit_into_files(st);
    struct pt_store_commit m = {0};
    describe(st, &m);
    if (rc == PT_OK)
        committed(&m);
    return rc;
}

static int alone_rollback(struct pt_store *st)
{
    if (sqlite3_get_autocommit(st->c->db))
        return PT_OK; /* SQLite already rolled back (e.g. after SQLITE_FULL) */
    sqlite3_stmt *s = stmt(st, S_ROLLBACK);
    return s ? run(st, s) : PT_ESTORAGE;
}

/*
 * The writer (see store.h and docs/writer.md).  One connection, `conn`, and
 * a turn to use it that threads hand to each other under mu.  A batch is
 * one SQLite transaction on it holding several requests, each in its own
 * SAVEPOINT; a request that finished its part waits, in `members`, for the
 * COMMIT that makes the batch durable.  That COMMIT is run by whoever holds
 * the turn when nobody waits for it any more (or the batch is full), or by
 * pt_store_writer_flush() for a deferred member.
 */
struct pt_store_writer {
    struct pt_store *conn;
    pthread_mutex_t mu;
    pthread_cond_t turn_cv; /* the turn is free */
    pthread_cond_t done_cv; /* a batch was settled */
    int busy;               /* a thread has the turn */
    int waiting;            /* threads waiting for the turn */
    int open;               /* a batch transaction is open on conn */
    int nmembers;
    struct pt_store_commit *members; /* the open batch's finished requests */
    int lost_rc;         /* the open batch was lost under this error (the turn's holder sets it) */
    int busy_timeout_ms; /* the connection's, against other processes */
    uint64_t batches;    /* batches committed (durable or not) */
};

/* Requests in one batch at most: a bound on how long the first one waits. */
#define BATCH_MAX 64

static void take_turn(struct pt_store_writer *w)
{
    pthread_mutex_lock(&w->mu);
    w->waiting++;
    while (w->busy)
        pthread_cond_wait(&w->turn_cv, &w->mu);
    w->waiting--;
    w->busy = 1;
    pthread_mutex_unlock(&w->mu);
}

/* With mu held: the turn goes to the next thread. */
static void give_turn(struct pt_store_writer *w)
{
    w->busy = 0;
    if (w->waiting)
        pthread_cond_signal(&w->turn_cv);
}

static void release_turn(struct pt_store_writer *w)
{
    pthread_mutex_lock(&w->mu);
    give_turn(w);
    pthread_mutex_unlock(&w->mu);
}

/* With mu held: the batch's members, taken out of it. */
static struct pt_store_commit *take_members(struct pt_store_writer *w)
{
    struct pt_store_commit *list = w->members;
    if (w->nmembers)
        w->batches++;
    w->members = NULL;
    w->nmembers = 0;
    w->open = 0;
    return list;
}

/* mu not held: every member of list learns the batch's result; the ones
 * waiting for it wake up. */
static void settle(struct pt_store_writer *w, struct pt_store_commit *list, int rc)
{
    /* The hooks (a long-poll's wake-up) run outside mu; a member stays
     * valid until it is marked done. */
    if (rc == PT_OK)
        for (struct pt_store_commit *m = list; m; m = m->next)
            committed(m);
    pthread_mutex_lock(&w->mu);
    for (struct pt_store_commit *m = list, *next; m; m = next) {
        next = m->next;
        m->rc = rc;
        m->next = NULL;
        m->done = 1;
    }
    pthread_cond_broadcast(&w->done_cv);
    pthread_mutex_unlock(&w->mu);
}

/* The turn held, mu not: commits the open batch (one sync for all of it)
 * and settles its members; the turn is kept. */
static void commit_batch(struct pt_store_writer *w)
{
    struct pt_store *c = w->conn;
    int rc = PT_OK;
    pthread_mutex_lock(&w->mu);
    int n = w->nmembers;
    pthread_mutex_unlock(&w->mu);
    if (!sqlite3_get_autocommit(c->own.db) && !n) {
        /* Nobody's work is in it (requests that rolled back, or only read):
         * a COMMIT would still write the pages their savepoints touched and
         * sync them. */
        sqlite3_stmt *s = stmt(c, S_ROLLBACK);
        if (s)
            run(c, s);
    } else if (!sqlite3_get_autocommit(c->own.db)) {
        rc = commit_into_files(c);
    } else if (n) {
        /* SQLite rolled the whole transaction back under a statement that
         * failed (a full disk, an I/O error): the members' work is gone. */
        rc = w->lost_rc ? w->lost_rc : PT_EIO;
    }
    w->lost_rc = 0;
    pthread_mutex_lock(&w->mu);
    struct pt_store_commit *list = take_members(w);
    pthread_mutex_unlock(&w->mu);
    settle(w, list, rc);
}

/*
 * The end of a turn.  m: the request's finished part (NULL after a
 * rollback); deferred: its answer may wait for pt_store_writer_flush().
 * While other requests wait for the turn, it is handed on (they join the
 * batch); when none does, or the batch is full, the batch is committed.
 * Returns m's result (PT_OK at once for a deferred m not committed yet).
 */
static int end_turn(struct pt_store_writer *w, struct pt_store_commit *m, int deferred)
{
    pthread_mutex_lock(&w->mu);
    if (m) {
        m->done = 0;
        m->next = w->members;
        w->members = m;
        w->nmembers++;
    }
    /* A deferred batch waits for its flush - unless nothing is in it: an
     * empty transaction is ended at once (it holds SQLite's write lock). */
    if (w->nmembers < BATCH_MAX && (w->waiting || (deferred && w->nmembers))) {
        give_turn(w);
        while (m && !deferred && !m->done)
            pthread_cond_wait(&w->done_cv, &w->mu);
        pthread_mutex_unlock(&w->mu);
        return m && !deferred ? m->rc : PT_OK;
    }
    pthread_mutex_unlock(&w->mu);
    commit_batch(w); /* an empty one just ends the transaction */
    release_turn(w);
    return m ? m->rc : PT_OK;
}

static int writer_begin(struct pt_store *st)
{
    struct pt_store_writer *w = st->writer;
    take_turn(w);
    struct pt_store *c = w->conn;
    int rc = PT_OK;
    sqlite3_stmt *s;
    if (!w->open || sqlite3_get_autocommit(c->own.db)) {
        if (w->open)         /* rolled back under an earlier request's failure */
            commit_batch(w); /* (tells its members) */
        if (!sqlite3_get_autocommit(c->own.db) && (s = stmt(c, S_ROLLBACK)))
            run(c, s); /* a ROLLBACK that failed after a failed COMMIT */
        rc = (s = stmt(c, S_BEGIN)) ? run(c, s) : PT_ESTORAGE;
        w->open = rc == PT_OK;
    }
    if (rc == PT_OK)
        rc = (s = stmt(c, S_SAVEPOINT)) ? run(c, s) : PT_ESTORAGE;
    if (rc) {
        end_turn(w, NULL, 0);
        return rc;
    }
    st->c = &c->own;
    return PT_OK;
}

/*
 * The request's savepoint undone; the batch goes on without it.  When
 * SQLite already rolled the whole transaction back under the request's
 * failing statement, or undoing the savepoint fails (its rows would stay
 * and be committed with the others), the batch is lost: what failed is
 * kept for its members.
 */
static void undo_request(struct pt_store *st)
{
    struct pt_store_writer *w = st->writer;
    sqlite3 *db = st->c->db;
    sqlite3_stmt *s;
    int rc = PT_OK;
    if (!sqlite3_get_autocommit(db)) {
        rc = (s = stmt(st, S_ROLLBACK_TO)) ? run(st, s) : PT_ESTORAGE;
        if (rc == PT_OK)
            rc = (s = stmt(st, S_RELEASE)) ? run(st, s) : PT_ESTORAGE;
        if (rc != PT_OK && !sqlite3_get_autocommit(db) && (s = stmt(st, S_ROLLBACK)))
            run(st, s);
    } else {
        rc = xlate(sqlite3_extended_errcode(db)); /* the statement that failed */
    }
    if (rc != PT_OK && !w->lost_rc)
        w->lost_rc = rc;
}

/*
 * Ends st's turn as a member of the batch: with the caller's ticket when
 * the commit is deferred, else with one here that end_turn() waits on.
 * work: the request's rows are kept (a commit), or it only read the batch
 * (a rollback that must not answer before it).
 */
static int end_as_member(struct pt_store *st, int work)
{
    struct pt_store_commit own = {0}, *m = st->defer ? st->defer : &own;
    if (work)
        describe(st, m);
    else
        *m = (struct pt_store_commit){0};
    st->c = &st->own;
    st->deferred = st->defer != NULL;
    st->defer = NULL;
    return end_turn(st->writer, m, st->deferred);
}

static int writer_commit(struct pt_store *st)
{
    sqlite3_stmt *s = stmt(st, S_RELEASE);
    int rc = sqlite3_get_autocommit(st->c->db) ? PT_EIO : s ? run(st, s) : PT_ESTORAGE;
    if (rc == PT_OK)
        return end_as_member(st, 1);
    undo_request(st);
    st->events_in_txn = 0;
    st->erased_in_txn = 0;
    st->c = &st->own;
    end_turn(st->writer, NULL, 0);
    return rc;
}

/*
 * A request rolled back still saw the batch's other requests (a key they
 * completed, a charge they queued): an answer built on that must not leave
 * before they are durable, so it waits for the batch as a member that
 * changed nothing, and gets the batch's result.
 */
static int writer_rollback(struct pt_store *st)
{
    struct pt_store_writer *w = st->writer;
    undo_request(st);
    st->events_in_txn = 0;
    st->erased_in_txn = 0;
    st->c = &st->own;
    pthread_mutex_lock(&w->mu);
    int others = w->nmembers; /* stable: only the turn's holder adds one */
    pthread_mutex_unlock(&w->mu);
    return others ? end_as_member(st, 0) : end_turn(w, NULL, st->defer != NULL);
}

static int sq_in_txn(const struct pt_store *st)
{
    return st->in_txn;
}

static int sq_begin(struct pt_store *st)
{
    assert(!st->in_txn); /* transactions do not nest: the writer's turn would deadlock */
    if (st->in_txn)
        return PT_ESTATE; /* (NDEBUG builds) the open transaction stays as it was */
    st->events_in_txn = 0;
    st->erased_in_txn = 0;
    st->keys_pending = 0;
    st->txn_seq++;
    st->deferred = 0;
    int rc = st->writer ? writer_begin(st) : alone_begin(st);
    st->changes_at_begin = sqlite3_total_changes(st->c->db);
    st->in_txn = rc == PT_OK;
    return rc;
}

static int sq_commit(struct pt_store *st)
{
    if (!st->in_txn && st->writer)
        return PT_ESTATE; /* no turn held: nothing of ours to commit */
    if (st->keys_pending) {
        /* A key lock that was never written would vanish with this commit
         * while its request goes on as if it held it: a caller's bug, never
         * committed (pt_store_key_take_later). */
        pt_log_error("store: a commit would lose an idempotency key's lock; rolled back");
        sq_rollback(st);
        return PT_ESTORAGE; /* not PT_ESTATE: callers read that as "lock taken over" */
    }
    st->in_txn = 0;
    return st->writer ? writer_commit(st) : alone_commit(st);
}

static int sq_rollback(struct pt_store *st)
{
    int was = st->in_txn;
    st->in_txn = 0;
    if (!st->writer)
        return alone_rollback(st); /* as before the writer: whatever is open */
    return was ? writer_rollback(st) : PT_OK;
}

static int sq_checkpoint_truncate(struct pt_store *st)
{
    struct pt_store_writer *w = st->writer;
    if (!w)
        return checkpoint_truncate(st);
    /* On the writer's connection, with its turn and no batch open: no
     * writer of this process is there to wait for. */
    take_turn(w);
    if (w->open)
        commit_batch(w);
    /* Readers with an old snapshot are not waited for with the turn held
     * (every writer would wait too): PT_EBUSY, and it stays due. */
    sqlite3_busy_timeout(w->conn->own.db, 0);
    int rc = checkpoint_truncate(w->conn);
    sqlite3_busy_timeout(w->conn->own.db, w->busy_timeout_ms);
    release_turn(w);
    return rc;
}

int pt_store_writer_new(const struct pt_store_options *opt, struct pt_store_writer **out,
                        char *errbuf, size_t errlen)
{
    *out = NULL;
    struct pt_store_writer *w = calloc(1, sizeof *w);
    if (!w)
        return PT_ENOMEM;
    int rc = pt_store_sqlite_open(opt, &w->conn, errbuf, errlen);
    if (rc) {
        free(w);
        return rc;
    }
    w->busy_timeout_ms = opt->busy_timeout_ms > 0 ? opt->busy_timeout_ms : 5000;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->turn_cv, NULL);
    pthread_cond_init(&w->done_cv, NULL);
    *out = w;
    return PT_OK;
}

void pt_store_writer_destroy(struct pt_store_writer *w)
{
    if (!w)
        return;
    /* A deferred member nobody flushed is committed, not dropped. */
    take_turn(w);
    if (w->open)
        commit_batch(w);
    sq_close(w->conn);
    pthread_cond_destroy(&w->done_cv);
    pthread_cond_destroy(&w->turn_cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

static void sq_attach(struct pt_store *st, struct pt_store_writer *w)
{
    assert(!st->in_txn); /* not in the middle of a transaction of its own */
    st->writer = w;
}

static void sq_defer_commit(struct pt_store *st, struct pt_store_commit *ticket)
{
    assert(!ticket || st->writer); /* only a batch can be waited for later */
    st->defer = ticket;
    if (ticket)
        *ticket = (struct pt_store_commit){0};
    st->deferred = 0;
}

static int sq_commit_deferred(const struct pt_store *st)
{
    return st->deferred;
}

int pt_store_writer_flush(struct pt_store_writer *w, struct pt_store_commit *ticket)
{
    pthread_mutex_lock(&w->mu);
    int done = ticket->done;
    pthread_mutex_unlock(&w->mu);
    if (!done) {
        take_turn(w);
        pthread_mutex_lock(&w->mu);
        done = ticket->done; /* settled while this thread waited for the turn */
        pthread_mutex_unlock(&w->mu);
        if (!done)
            commit_batch(w);
        release_turn(w);
    }
    return ticket->rc;
}

uint64_t pt_store_writer_batches(struct pt_store_writer *w)
{
    pthread_mutex_lock(&w->mu);
    uint64_t n = w->batches;
    pthread_mutex_unlock(&w->mu);
    return n;
}

static int sq_backup(struct pt_store *st, const char *dest)
{
    sqlite3 *to = NULL;
    int rc = private_file(dest); /* a backup holds what the database holds */
    if (rc != PT_OK)
        return rc;
    rc = sqlite3_open_v2(dest, &to, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        rc = xlate(rc);
        goto out;
    }
    sqlite3_backup *b = sqlite3_backup_init(to, "main", st->c->db, "main");
    if (!b) {
        rc = xlate(sqlite3_extended_errcode(to));
        goto out;
    }
    /* Copy in slices so a busy daemon's writers are not blocked for long. */
    do {
        rc = sqlite3_backup_step(b, 256);
        if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
            sqlite3_sleep(10);
    } while (rc == SQLITE_OK || rc == SQLITE_BUSY || rc == SQLITE_LOCKED);
    sqlite3_backup_finish(b);
    rc = rc == SQLITE_DONE ? PT_OK : xlate(rc);
out:
    sqlite3_close_v2(to);
    return rc;
}

/* Fewer free bytes than this under the database, and the next charge may
 * not fit: its commit appends ~10 KiB to the WAL, a checkpoint may grow the
 * database file by the pages the WAL holds. */
#define ROOM_MIN_BYTES (256 * 1024)
/* Fewer pages than this below max_page_count (a limit only tests set), and
 * a charge's few new b-tree pages may not fit. */
#define ROOM_MIN_PAGES 16

/* What the file system says without a write: read-only, or (nearly) full,
 * with why in a few words.  PT_OK when it looks fine or cannot be asked.
 * *free_bytes: what it has free for us (-1 when it cannot be asked). */
static int room_fault(struct pt_store *st, int64_t *free_bytes, char *why, size_t len)
{
    struct statvfs fs;
    *free_bytes = -1;
    if (statvfs(st->dir, &fs) == 0) {
        /* root may use the blocks the file system keeps for root. */
        unsigned long long blocks = geteuid() == 0 ? fs.f_bfree : fs.f_bavail;
        *free_bytes = (int64_t)(blocks * fs.f_frsize);
        if (fs.f_flag & ST_RDONLY) {
            snprintf(why, len, "read-only file system");
            return PT_EIO;
        }
        if (blocks * fs.f_frsize < ROOM_MIN_BYTES) {
            snprintf(why, len, "disk full");
            return PT_EFULL;
        }
    }
    int pages = 0, max = 0, free_pages = 0;
    if (sq_pragma_int(st, "page_count", &pages) == PT_OK &&
        sq_pragma_int(st, "max_page_count", &max) == PT_OK &&
        sq_pragma_int(st, "freelist_count", &free_pages) == PT_OK && max > 0 &&
        (long long)max - pages + free_pages < ROOM_MIN_PAGES) {
        snprintf(why, len, "disk full");
        return PT_EFULL;
    }
    return PT_OK;
}

/* One real commit: page 1 rewritten as it is (user_version set to itself),
 * so one WAL frame and a sync, and the database does not grow. */
static int probe_write(struct pt_store *st)
{
    int v = 0, rc = sq_pragma_int(st, "user_version", &v);
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", v);
    if (rc == PT_OK)
        rc = exec(st, sql);
    if (rc == PT_OK)
        rc = sq_commit(st);
    else
        sq_rollback(st);
    return rc;
}

/* The connection whose files st's commits go into. */
static const struct pt_store *files_of(const struct pt_store *st)
{
    return st->writer ? st->writer->conn : st;
}

static int sq_files_intact(struct pt_store *st)
{
    return files_intact(files_of(st));
}

/* Why the last write failed, as note_storage() kept it. */
static void fault_reason(char *out, size_t len)
{
    pthread_mutex_lock(&fault_mu);
    snprintf(out, len, "%s", fault_why);
    pthread_mutex_unlock(&fault_mu);
}

static int sq_health(struct pt_store *st, struct pt_store_health *out)
{
    memset(out, 0, sizeof *out);
    /* A file that is gone, or a file system that says it is read-only or
     * full, is believed at once; the fault is remembered so that its end is
     * checked by a write. */
    char room_why[64] = "";
    int room = room_fault(st, &out->free_bytes, room_why, sizeof room_why);
    int rc = files_check(files_of(st), out->reason, sizeof out->reason);
    if (rc == PT_OK && room != PT_OK) {
        rc = room;
        snprintf(out->reason, sizeof out->reason, "%s", room_why);
    }
    if (rc) {
        note_storage(rc, out->reason);
        return PT_OK;
    }
    /* BEGIN IMMEDIATE takes the write lock (fails on a broken file). */
    if ((rc = sq_begin(st)) != PT_OK) {
        snprintf(out->reason, sizeof out->reason, "%s", pt_strerror(rc));
        return PT_OK;
    }
    if (atomic_load(&storage_fault) == PT_OK) {
        sq_rollback(st);
        out->writable = 1;
        return PT_OK;
    }
    /* A write failed and none has succeeded since: only a write can tell
     * whether the condition has passed.  Once it has, probes write nothing. */
    if ((rc = probe_write(st)) == PT_OK) {
        note_storage(PT_OK, NULL);
        out->writable = 1;
    } else {
        fault_reason(out->reason, sizeof out->reason);
    }
    return PT_OK;
}

static int sq_writable(struct pt_store *st)
{
    struct pt_store_health h;
    sq_health(st, &h);
    return h.writable;
}

/* ---- idempotency keys ------------------------------------------------- */

/* Steps s, a key's columns from column 0 in KEY_GET's order, into *out. */
static int read_key_row(struct pt_store *st, sqlite3_stmt *s, struct pt_key_row *out)
{
    int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        sqlite3_reset(s);
        return PT_ENOTFOUND;
    }
    if (rc != SQLITE_ROW) {
        rc = xlate(sqlite3_extended_errcode(st->c->db));
        sqlite3_reset(s);
        return rc ? rc : PT_ESTORAGE;
    }
    memset(out, 0, sizeof *out);
    const void *h = sqlite3_column_blob(s, 0);
    if (h && sqlite3_column_bytes(s, 0) == 32)
        memcpy(out->request_hash, h, 32);
    out->locked_at = sqlite3_column_int64(s, 1);
    out->locked_by = sqlite3_column_int64(s, 2);
    out->completed_at = sqlite3_column_int64(s, 3);
    out->response_status = sqlite3_column_int(s, 4);
    rc = PT_OK;
    if (sqlite3_column_type(s, 5) != SQLITE_NULL) {
        const void *b = sqlite3_column_blob(s, 5);
        int n = sqlite3_column_bytes(s, 5);
        out->response_body = malloc((size_t)n + 1);
        if (!out->response_body) {
            rc = PT_ENOMEM;
        } else {
            if (n)
                memcpy(out->response_body, b, (size_t)n);
            out->response_body[n] = '\0';
            out->response_len = (size_t)n;
        }
    }
    copy_col(s, 6, out->order_id, sizeof out->order_id);
    out->expires_at = sqlite3_column_int64(s, 7);
    return rc; /* s is left on its row: the caller may read more columns */
}

static int sq_key_get(struct pt_store *st, const char *scope, const char *key,
                      struct pt_key_row *out)
{
    sqlite3_stmt *s = stmt(st, S_KEY_GET);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, scope, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
    int rc = read_key_row(st, s, out);
    sqlite3_reset(s);
    return rc;
}

static int sq_key_of_order(struct pt_store *st, const char *order_id, char *scope, char *key,
                           struct pt_key_row *out)
{
    sqlite3_stmt *s = stmt(st, S_KEY_OF_ORDER);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, order_id, -1, SQLITE_STATIC);
    int rc = read_key_row(st, s, out);
    if (rc == PT_OK || rc == PT_ENOMEM) {
        copy_col(s, 8, scope, PT_KEY_SCOPE_MAX);
        copy_col(s, 9, key, PT_KEY_NAME_MAX);
    }
    sqlite3_reset(s);
    return rc;
}

static int sq_key_insert(struct pt_store *st, const char *scope, const char *key,
                         const unsigned char hash[32], int64_t instance, int64_t now,
                         int64_t expires_at)
{
    sqlite3_stmt *s = stmt(st, S_KEY_INSERT);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, scope, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
    sqlite3_bind_blob(s, 3, hash, 32, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, now);
    sqlite3_bind_int64(s, 5, instance);
    sqlite3_bind_int64(s, 6, expires_at);
    int rc = run(st, s);
    if (rc)
        return rc;
    /* INSERT OR IGNORE + change count: the SQLite spelling of "take the lock
     * only if nobody holds this key". */
    if (sqlite3_changes(st->c->db) != 1)
        return PT_EEXIST;
    st->last_key_rowid = sqlite3_last_insert_rowid(st->c->db);
    return PT_OK;
}

static int sq_key_relock(struct pt_store *st, const char *scope, const char *key,
                         int64_t old_locked_at, int64_t old_locked_by, int64_t instance,
                         int64_t now)
{
    sqlite3_stmt *s = stmt(st, S_KEY_RELOCK);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, scope, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, old_locked_at);
    sqlite3_bind_int64(s, 4, old_locked_by);
    sqlite3_bind_int64(s, 5, now);
    sqlite3_bind_int64(s, 6, instance);
    int rc = run(st, s);
    if (rc)
        return rc;
    return sqlite3_changes(st->c->db) == 1 ? PT_OK : PT_EEXIST;
}

static int sq_key_take_later(struct pt_store *st, const char *scope, const char *key,
                             const unsigned char hash[32], int64_t instance, int64_t now,
                             int64_t expires_at, struct pt_key_lock *lock)
{
    assert(st->in_txn);
    sqlite3_stmt *s = stmt(st, S_KEY_EXISTS);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, scope, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    int err = rc == SQLITE_ROW    ? PT_EEXIST
              : rc == SQLITE_DONE ? PT_OK
                                  : xlate(sqlite3_extended_errcode(st->c->db));
    sqlite3_reset(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE && err == PT_OK)
        err = PT_ESTORAGE;
    if (err)
        return err;
    memset(lock, 0, sizeof *lock);
    lock->at = now;
    lock->by = instance;
    lock->pending = 1;
    lock->txn = st->txn_seq;
    memcpy(lock->hash, hash, 32);
    lock->expires_at = expires_at;
    st->keys_pending++;
    return PT_OK;
}

/*
 * A pending lock is good only inside the transaction that found the key
 * free: it proved the key absent and holds the write lock until it ends.
 * The rows are then written with a plain INSERT - a UNIQUE, CHECK or NOT
 * NULL failure is an error that rolls the request back, never a skipped
 * row (INSERT OR IGNORE would skip it and leave the business rows keyless).
 */
static int pending_ok(const struct pt_store *st, const struct pt_key_lock *lock)
{
    return st->in_txn && lock->txn == st->txn_seq;
}

/* The pending lock is written or dropped: the transaction may commit. */
static void key_written(struct pt_store *st, struct pt_key_lock *lock)
{
    lock->pending = 0;
    if (st->keys_pending > 0)
        st->keys_pending--;
}

static int sq_key_set_order(struct pt_store *st, const char *scope, const char *key,
                            struct pt_key_lock *lock, const char *order_id)
{
    if (lock->pending) {
        if (!pending_ok(st, lock))
            return PT_ESTATE; /* its transaction ended: the key was never this request's */
        sqlite3_stmt *s = stmt(st, S_KEY_INSERT_HELD);
        if (!s)
            return PT_ESTORAGE;
        sqlite3_bind_text(s, 1, scope, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
        sqlite3_bind_blob(s, 3, lock->hash, 32, SQLITE_STATIC);
        sqlite3_bind_int64(s, 4, lock->at);
        sqlite3_bind_int64(s, 5, lock->by);
        sqlite3_bind_int64(s, 6, lock->expires_at);
        bind_text(s, 7, order_id);
        int rc = run(st, s);
        if (rc)
            return rc;
        key_written(st, lock);
        st->last_key_rowid = sqlite3_last_insert_rowid(st->c->db); /* completed by id later */
        return PT_OK;
    }

    sqlite3_stmt *s = stmt(st, S_KEY_SET_ORDER);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, scope, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
    bind_text(s, 3, order_id);
    sqlite3_bind_int64(s, 4, lock->at);
    sqlite3_bind_int64(s, 5, lock->by);
    int rc = run(st, s);
    if (rc)
        return rc;
    return sqlite3_changes(st->c->db) == 1 ? PT_OK : PT_ESTATE;
}

static int sq_key_complete(struct pt_store *st, const char *scope, const char *key,
                           struct pt_key_lock *lock, int status, const char *body, size_t len,
                           int64_t now)
{
    if (lock->pending) {
        if (!pending_ok(st, lock))
            return PT_ESTATE;
        /* The key's one write: the completed record. */
        sqlite3_stmt *s = stmt(st, S_KEY_INSERT_DONE);
        if (!s)
            return PT_ESTORAGE;
        sqlite3_bind_text(s, 1, scope, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
        sqlite3_bind_blob(s, 3, lock->hash, 32, SQLITE_STATIC);
        sqlite3_bind_int64(s, 4, now);
        sqlite3_bind_int(s, 5, status);
        sqlite3_bind_blob(s, 6, body ? body : "", (int)len, SQLITE_STATIC);
        sqlite3_bind_int64(s, 7, lock->at);
        sqlite3_bind_int64(s, 8, lock->expires_at);
        bind_text(s, 9, lock->order_id);
        int rc = run(st, s);
        if (rc)
            return rc;
        key_written(st, lock);
        return PT_OK;
    }
    /* First by the rowid this connection got for the key, if it is that
     * key's (the WHERE says so); else by (scope, key). */
    for (int by_id = st->last_key_rowid > 0; by_id >= 0; by_id--) {
        sqlite3_stmt *s = stmt(st, by_id ? S_KEY_COMPLETE_ID : S_KEY_COMPLETE);
        if (!s)
            return PT_ESTORAGE;
        sqlite3_bind_text(s, 1, scope, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
        sqlite3_bind_int(s, 3, status);
        sqlite3_bind_blob(s, 4, body ? body : "", (int)len, SQLITE_STATIC);
        sqlite3_bind_int64(s, 5, now);
        if (by_id)
            sqlite3_bind_int64(s, 6, st->last_key_rowid);
        sqlite3_bind_int64(s, 7, lock->at);
        sqlite3_bind_int64(s, 8, lock->by);
        bind_text(s, 9, lock->order_id); /* "": NULL, the link kept */
        int rc = run(st, s);
        if (rc)
            return rc;
        if (sqlite3_changes(st->c->db) == 1)
            return PT_OK;
    }
    return PT_ESTATE;
}

static int sq_key_delete(struct pt_store *st, const char *scope, const char *key,
                         struct pt_key_lock *lock)
{
    if (lock->pending) {
        if (!pending_ok(st, lock))
            return PT_ESTATE;
        key_written(st, lock); /* nothing was written: nothing to delete */
        return PT_OK;
    }
    sqlite3_stmt *s = stmt(st, S_KEY_DELETE);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, scope, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, lock->at);
    sqlite3_bind_int64(s, 4, lock->by);
    int rc = run(st, s);
    if (rc)
        return rc;
    return sqlite3_changes(st->c->db) == 1 ? PT_OK : PT_ESTATE;
}

static int sq_key_delete_expired(struct pt_store *st, const char *scope, const char *key,
                                 int64_t now)
{
    sqlite3_stmt *s = stmt(st, S_KEY_DELETE_EXPIRED);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, scope, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, now);
    return run(st, s);
}

static int sq_key_sweep(struct pt_store *st, int64_t now, int *count)
{
    sqlite3_stmt *s = stmt(st, S_KEY_SWEEP);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, now);
    int rc = run(st, s);
    if (count)
        *count = rc ? 0 : sqlite3_changes(st->c->db);
    return rc;
}

/* ---- charges ---------------------------------------------------------- */

static int sq_charge_insert(struct pt_store *st, struct pt_charge *c, int64_t now)
{
    sqlite3_stmt *s = stmt(st, S_CHARGE_INSERT);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, c->order_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, c->gateway, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, c->method, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, c->amount);
    sqlite3_bind_text(s, 5, c->currency, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, pt_state_name(c->state), -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 7, pt_offline_mode_name(c->offline), -1, SQLITE_STATIC);
    bind_text(s, 8, c->subject);
    bind_text(s, 9, c->payment_code);
    bind_text(s, 10, c->payment_method);
    bind_text(s, 11, c->customer);
    bind_text(s, 12, c->metadata);
    sqlite3_bind_int64(s, 13, c->next_attempt_at);
    sqlite3_bind_int64(s, 14, now);
    sqlite3_bind_int(s, 15, c->offline_accepted != 0);
    int rc = run(st, s);
    if (rc)
        return rc;
    if (sqlite3_changes(st->c->db) != 1)
        return PT_EEXIST;
    c->id = sqlite3_last_insert_rowid(st->c->db);
    c->created_at = c->updated_at = now;
    return PT_OK;
}

static int64_t sq_int_at(const void *s, int col)
{
    return sqlite3_column_int64((sqlite3_stmt *)s, col);
}

static const char *sq_text_at(const void *s, int col)
{
    return (const char *)sqlite3_column_text((sqlite3_stmt *)s, col);
}

static void read_row(sqlite3_stmt *s, const struct pt_row_kind *k, void *obj)
{
    struct pt_row_src src = {sq_int_at, sq_text_at, s};
    pt_row_read(k, &src, obj);
}

static void read_charge(sqlite3_stmt *s, struct pt_charge *c)
{
    read_row(s, &pt_charge_row, c);
}

static int sq_charge_get(struct pt_store *st, const char *order_id, struct pt_charge *out)
{
    sqlite3_stmt *s = stmt(st, S_CHARGE_GET);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, order_id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        sqlite3_reset(s);
        return PT_ENOTFOUND;
    }
    if (rc != SQLITE_ROW) {
        rc = xlate(sqlite3_extended_errcode(st->c->db));
        sqlite3_reset(s);
        return rc ? rc : PT_ESTORAGE;
    }
    read_charge(s, out);
    sqlite3_reset(s);
    return PT_OK;
}

static int scalar(struct pt_store *st, sqlite3_stmt *s, int64_t *out);

/* The id of charge_id's next audit row (AUDIT_NEXT_SQL). */
static int next_in_trail(struct pt_store *st, int64_t charge_id, int64_t *next)
{
    sqlite3_stmt *s = stmt(st, S_AUDIT_NEXT);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, charge_id);
    return scalar(st, s, next);
}

static int audit(struct pt_store *st, int id, int64_t charge_id, const char *from, const char *to,
                 const char *cause, const char *actor, int refused, const char *detail, int64_t now)
{
    int64_t next = 0;
    int rc = id == S_AUDIT_INSERT ? next_in_trail(st, charge_id, &next) : PT_OK;
    if (rc)
        return rc;
    sqlite3_stmt *s = stmt(st, id);
    if (!s)
        return PT_ESTORAGE;
    if (id == S_AUDIT_INSERT)
        sqlite3_bind_int64(s, 9, next);
    sqlite3_bind_int64(s, 1, charge_id);
    bind_text(s, 2, from);
    bind_text(s, 3, to);
    sqlite3_bind_text(s, 4, cause, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, actor, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 6, refused ? 1 : 0);
    bind_text(s, 7, detail);
    sqlite3_bind_int64(s, 8, now);
    return run(st, s);
}

static int sq_audit(struct pt_store *st, int64_t charge_id, const char *from, const char *to,
                    const char *cause, const char *actor, int refused, const char *detail,
                    int64_t now)
{
    return audit(st, S_AUDIT_INSERT, charge_id, from, to, cause, actor, refused, detail, now);
}

static int sq_audit_first(struct pt_store *st, int64_t charge_id, const char *to, const char *cause,
                          const char *actor, int64_t now)
{
    /* A new charge has no trail yet: its first row is seq 1, no lookup. */
    return audit(st, S_AUDIT_INSERT_FIRST, charge_id, NULL, to, cause, actor, 0, NULL, now);
}

static int sq_count(struct pt_store *st, const char *table, int64_t *count)
{
    static const char *const known[] = {"charges", "charge_events", "idempotency_keys", "events",
                                        "notifications"};
    int ok = 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        ok |= strcmp(table, known[i]) == 0;
    if (!ok)
        return PT_EINVAL;
    char sql[64];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(st->c->db, sql, -1, &s, NULL) != SQLITE_OK)
        return xlate(sqlite3_extended_errcode(st->c->db));
    int rc = sqlite3_step(s) == SQLITE_ROW ? PT_OK : xlate(sqlite3_extended_errcode(st->c->db));
    if (rc == PT_OK)
        *count = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return rc;
}

static int sq_charge_get_by_id(struct pt_store *st, int64_t id, struct pt_charge *out)
{
    sqlite3_stmt *s = stmt(st, S_CHARGE_GET_BY_ID);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, id);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        read_charge(s, out);
        rc = PT_OK;
    } else {
        rc = rc == SQLITE_DONE ? PT_ENOTFOUND : xlate(sqlite3_extended_errcode(st->c->db));
    }
    sqlite3_reset(s);
    return rc;
}

static void bind_patch(sqlite3_stmt *s, int64_t id, const struct pt_charge_patch *p, int64_t now)
{
    static const struct pt_charge_patch none = PT_CHARGE_PATCH_NONE;
    if (!p)
        p = &none;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int64(s, 2, now);
    /* NULL keeps a column; bind_text() would turn "" into NULL too, so these
     * are bound as they are. */
    if (p->gateway_trade_no)
        sqlite3_bind_text(s, 3, p->gateway_trade_no, -1, SQLITE_STATIC);
    if (p->action_url)
        sqlite3_bind_text(s, 4, p->action_url, -1, SQLITE_STATIC);
    if (p->error_code)
        sqlite3_bind_text(s, 5, p->error_code, -1, SQLITE_STATIC);
    if (p->error_message)
        sqlite3_bind_text(s, 6, p->error_message, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 7, p->attempts_add);
    sqlite3_bind_int64(s, 8, p->next_attempt_at);
    sqlite3_bind_int64(s, 9, p->first_sent_at);
}

/*
 * The conditional UPDATE for one set of allowed source states, prepared once
 * per connection into cache[mask]: `update` up to "WHERE id = ?1 AND ",
 * then the states.
 */
static sqlite3_stmt *cached_transition(struct pt_store *st, sqlite3_stmt **cache, unsigned mask,
                                       const char *update)
{
    sqlite3_stmt *s = cache[mask];
    if (s) {
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
        return s;
    }
    /* "state = 'A' OR state = 'B'": an IN list of constants would build a
     * temporary b-tree on every run (see sql/001_init.sql). */
    char sql[1024], from[256] = "";
    size_t o = 0;
    for (int i = 0; i < PT_STATE__COUNT; i++)
        if (mask & (1u << i))
            o += (size_t)snprintf(from + o, sizeof from - o, "%sstate = '%s'", o ? " OR " : "",
                                  pt_state_name((enum pt_state)i));
    snprintf(sql, sizeof sql, "%s(%s)", update, from);
    if (sqlite3_prepare_v3(st->c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL) != SQLITE_OK) {
        pt_log_error("store: cannot prepare transition: %s", sqlite3_errmsg(st->c->db));
        return NULL;
    }
    cache[mask] = s;
    return s;
}

static sqlite3_stmt *transition_stmt(struct pt_store *st, unsigned mask)
{
    /* A final charge keeps no payment code (SPEC section 3): erased in the
     * same UPDATE that makes it final. */
    return cached_transition(st, st->c->transition, mask,
                             "UPDATE charges SET state = ?10, " PATCH_SET ","
                             " payment_code = CASE WHEN ?10 = 'SUCCESS' OR ?10 = 'FAILED'"
                             " OR ?10 = 'CANCELED' THEN NULL ELSE payment_code END"
                             /* SPEC 18: a charge whose cancel was requested is never sent */
                             " WHERE id = ?1 AND (?10 <> 'PROCESSING' OR cancel_requested = 0)"
                             " AND ");
}

static int sq_charge_transition(struct pt_store *st, int64_t id, unsigned from_mask,
                                enum pt_state to, const struct pt_charge_patch *patch, int64_t now)
{
    from_mask &= PT_FROM_MASKS - 1;
    if (!from_mask || (unsigned)to >= PT_STATE__COUNT)
        return PT_EINVAL;
    sqlite3_stmt *s = transition_stmt(st, from_mask);
    if (!s)
        return PT_ESTORAGE;
    bind_patch(s, id, patch, now);
    sqlite3_bind_text(s, 10, pt_state_name(to), -1, SQLITE_STATIC);
    int rc = run(st, s);
    if (rc)
        return rc;
    return sqlite3_changes(st->c->db) == 1 ? PT_OK : PT_ESTATE;
}

static int sq_charge_accept_offline(struct pt_store *st, const struct pt_charge *c, int64_t now)
{
    sqlite3_stmt *s = stmt(st, S_CHARGE_ACCEPT_OFFLINE);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, c->id);
    sqlite3_bind_int64(s, 2, now);
    int rc = run(st, s);
    return rc ? rc : sqlite3_changes(st->c->db) == 1 ? PT_OK : PT_ESTATE;
}

static int sq_charge_request_cancel(struct pt_store *st, int64_t id, unsigned from_mask,
                                    int64_t due, int64_t now)
{
    /* The state condition as the transitions write it (cached per mask);
     * the rest of the statement is fixed. */
    from_mask &= PT_FROM_MASKS - 1;
    if (!from_mask)
        return PT_EINVAL;
    sqlite3_stmt *s = stmt(st, S_CHARGE_REQUEST_CANCEL);
    if (!s)
        return PT_ESTORAGE;
    struct pt_charge c;
    int rc = sq_charge_get_by_id(st, id, &c);
    if (rc)
        return rc;
    if (!(from_mask & (1u << c.state)))
        return PT_ESTATE; /* read in the caller's write transaction: it stands */
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int64(s, 2, due);
    sqlite3_bind_int64(s, 3, now);
    if ((rc = run(st, s)))
        return rc;
    return sqlite3_changes(st->c->db) == 1 ? PT_OK : PT_ESTATE;
}

static int sq_key_reanswer(struct pt_store *st, const char *scope, int from_status, int status,
                           const char *body, size_t len, int *n)
{
    sqlite3_stmt *s = stmt(st, S_KEY_REANSWER);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, scope, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 2, from_status);
    sqlite3_bind_int(s, 3, status);
    sqlite3_bind_blob(s, 4, body, (int)len, SQLITE_STATIC);
    int rc = run(st, s);
    *n = rc ? 0 : sqlite3_changes(st->c->db);
    return rc;
}

static int sq_charge_patch(struct pt_store *st, int64_t id, const struct pt_charge_patch *patch,
                           int64_t now)
{
    sqlite3_stmt *s = stmt(st, S_CHARGE_PATCH);
    if (!s)
        return PT_ESTORAGE;
    bind_patch(s, id, patch, now);
    int rc = run(st, s);
    if (rc)
        return rc;
    return sqlite3_changes(st->c->db) == 1 ? PT_OK : PT_ENOTFOUND;
}

static int sq_charge_set_review(struct pt_store *st, int64_t id, int review, const char *reason,
                                int64_t now)
{
    sqlite3_stmt *s = stmt(st, S_CHARGE_SET_REVIEW);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int(s, 2, review ? 1 : 0);
    bind_text(s, 3, reason);
    sqlite3_bind_int64(s, 4, now);
    int rc = run(st, s);
    if (rc)
        return rc;
    return sqlite3_changes(st->c->db) == 1 ? PT_OK : PT_ESTATE;
}

/* Steps a statement that returns charges into rows[]. */
static int read_charges(struct pt_store *st, sqlite3_stmt *s, int max, struct pt_charge *rows,
                        int *n, int *more)
{
    int rc;
    *n = 0;
    if (more)
        *more = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (*n == max) {
            if (more)
                *more = 1;
            break;
        }
        read_charge(s, &rows[(*n)++]);
    }
    rc = (rc == SQLITE_ROW || rc == SQLITE_DONE) ? PT_OK
                                                 : xlate(sqlite3_extended_errcode(st->c->db));
    sqlite3_reset(s);
    return rc;
}

static int sq_charges_list(struct pt_store *st, int state, int64_t after_id, int max,
                           struct pt_charge *rows, int *n, int *more)
{
    sqlite3_stmt *s = stmt(st, state < 0 ? S_CHARGES_LIST : S_CHARGES_LIST_STATE);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, after_id);
    sqlite3_bind_int(s, 2, max + 1); /* one more tells whether there are more */
    if (state >= 0)
        sqlite3_bind_text(s, 3, pt_state_name((enum pt_state)state), -1, SQLITE_STATIC);
    return read_charges(st, s, max, rows, n, more);
}

static int sq_charges_list_review(struct pt_store *st, int64_t after_id, int max,
                                  struct pt_charge *rows, int *n, int *more)
{
    sqlite3_stmt *s = stmt(st, S_CHARGES_LIST_REVIEW); /* the charges_review index */
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, after_id);
    sqlite3_bind_int(s, 2, max + 1);
    return read_charges(st, s, max, rows, n, more);
}

/* Runs a one-row, one-integer-column query. */
static int scalar(struct pt_store *st, sqlite3_stmt *s, int64_t *out)
{
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *out = sqlite3_column_int64(s, 0);
        rc = PT_OK;
    } else {
        rc = rc == SQLITE_DONE ? PT_ENOTFOUND : xlate(sqlite3_extended_errcode(st->c->db));
    }
    sqlite3_reset(s);
    return rc;
}

/*
 * The id below which every charge is final.  No charge leaves a final
 * state, and a new charge always gets an id above every existing one, so
 * once true of an id this stays true: the floor only rises, and a stale
 * one is merely lower than it could be.  Moving it up walks the table from
 * the old floor to the first charge still in progress, which is where the
 * walk usually stops at once.  (This replaces an index of the non-final
 * charges that every new charge had to write: sql/003.)
 */
/* Moves *cached up to what statement id (ACTIVE_FIRST, REFUND_ACTIVE_FIRST)
 * reads from it - the first row not final, or the next id - and gives it. */
static int read_floor(struct pt_store *st, int id, int64_t *cached, int64_t *floor)
{
    sqlite3_stmt *s = stmt(st, id);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, *cached);
    /* Nothing in progress: the next id is the floor.  Both halves are read
     * in one statement: read in two, a row committed between them fell
     * below the floor and was never looked at again. */
    int64_t first = 0;
    int rc = scalar(st, s, &first);
    if (rc)
        return rc;
    if (first > *cached)
        *cached = first;
    *floor = *cached;
    return PT_OK;
}

static int active_floor(struct pt_store *st, int64_t *floor)
{
    return read_floor(st, S_ACTIVE_FIRST, &st->active_floor, floor);
}

static int sq_charges_due(struct pt_store *st, int64_t now, int64_t after_id, int max,
                          struct pt_charge *rows, int *n)
{
    int64_t floor = st->active_floor;
    int rc = after_id == 0 ? active_floor(st, &floor) : PT_OK; /* a new walk */
    if (rc)
        return rc;
    sqlite3_stmt *s = stmt(st, S_CHARGES_DUE);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, now);
    sqlite3_bind_int(s, 2, max);
    sqlite3_bind_int64(s, 3, after_id > floor - 1 ? after_id : floor - 1);
    return read_charges(st, s, max, rows, n, NULL);
}

static int sq_charges_next_due(struct pt_store *st, int64_t *when)
{
    int64_t floor;
    int rc = active_floor(st, &floor);
    if (rc)
        return rc;
    sqlite3_stmt *s = stmt(st, S_CHARGES_NEXT_DUE);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, floor);
    return scalar(st, s, when);
}

static int sq_charges_queued_before(struct pt_store *st, const char *gateway, const char *method,
                                    int64_t created_before, int64_t after_id, int max,
                                    struct pt_charge *rows, int *n)
{
    sqlite3_stmt *s = stmt(st, S_CHARGES_QUEUED_BEFORE);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, gateway, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, method, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, created_before);
    sqlite3_bind_int64(s, 4, after_id);
    sqlite3_bind_int(s, 5, max);
    return read_charges(st, s, max, rows, n, NULL);
}

static int sq_charges_oldest_queued(struct pt_store *st, const char *gateway, const char *method,
                                    int64_t *created_at)
{
    sqlite3_stmt *s = stmt(st, S_CHARGES_OLDEST_QUEUED);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, gateway, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, method, -1, SQLITE_STATIC);
    return scalar(st, s, created_at);
}

static int sq_queue_figures(struct pt_store *st, const char *currency, int64_t *count,
                            int64_t *amount)
{
    sqlite3_stmt *s = stmt(st, S_QUEUE_FIGURES);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, currency, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *count = sqlite3_column_int64(s, 0);
        *amount = sqlite3_column_int64(s, 1);
        rc = PT_OK;
    } else {
        rc = xlate(sqlite3_extended_errcode(st->c->db));
        if (rc == PT_OK)
            rc = PT_ESTORAGE;
    }
    sqlite3_reset(s);
    return rc;
}

static int sq_stats(struct pt_store *st, int final_states, struct pt_store_stats *out)
{
    memset(out, 0, sizeof *out);
    int64_t floor;
    int rc = active_floor(st, &floor);
    if (rc != PT_OK)
        return rc;
    sqlite3_stmt *s = stmt(st, final_states ? S_STATS_STATE : S_STATS_ACTIVE);
    if (!s)
        return PT_ESTORAGE;
    if (!final_states)
        sqlite3_bind_int64(s, 1, floor);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        enum pt_state state;
        const char *name = (const char *)sqlite3_column_text(s, 0);
        if (name && pt_state_parse(name, &state) == PT_OK)
            out->by_state[state] = sqlite3_column_int64(s, 1);
    }
    rc = rc == SQLITE_DONE ? PT_OK : xlate(sqlite3_extended_errcode(st->c->db));
    sqlite3_reset(s);
    if (rc)
        return rc;
    if (!(s = stmt(st, S_STATS_REVIEW)) || (rc = scalar(st, s, &out->review)))
        return s ? rc : PT_ESTORAGE;
    if (!(s = stmt(st, S_STATS_QUEUE)))
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, floor);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW && out->ncur < PT_STATS_MAX_CURRENCIES) {
        copy_col(s, 0, out->queue[out->ncur].currency, sizeof out->queue[0].currency);
        out->queue[out->ncur].count = sqlite3_column_int64(s, 1);
        out->queue[out->ncur].amount = sqlite3_column_int64(s, 2);
        int64_t oldest = sqlite3_column_int64(s, 3);
        if (!out->queue_oldest_created_at || oldest < out->queue_oldest_created_at)
            out->queue_oldest_created_at = oldest;
        out->ncur++;
    }
    rc = (rc == SQLITE_DONE || rc == SQLITE_ROW) ? PT_OK
                                                 : xlate(sqlite3_extended_errcode(st->c->db));
    sqlite3_reset(s);
    return rc;
}

/* ---- events ----------------------------------------------------------------- */

static int sq_event_insert(struct pt_store *st, const char *type, int64_t charge_id,
                           const char *order_id, const char *payload, int64_t now, int64_t *seq)
{
    sqlite3_stmt *s = stmt(st, S_EVENT_INSERT);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, type, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, charge_id);
    sqlite3_bind_text(s, 3, order_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, payload, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 5, now);
    int rc = run(st, s);
    if (rc)
        return rc;
    if (sqlite3_changes(st->c->db) != 1)
        return PT_EEXIST; /* this charge already had this event: deliver once */
    if (seq)
        *seq = sqlite3_last_insert_rowid(st->c->db);
    st->events_in_txn++;
    return PT_OK;
}

static int sq_events_list(struct pt_store *st, int64_t after, int max, struct pt_event_row *rows,
                          int *n)
{
    sqlite3_stmt *s = stmt(st, S_EVENTS_LIST);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, after);
    sqlite3_bind_int(s, 2, max);
    int rc;
    *n = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW && *n < max) {
        struct pt_event_row *r = &rows[*n];
        memset(r, 0, sizeof *r);
        r->seq = sqlite3_column_int64(s, 0);
        copy_col(s, 1, r->type, sizeof r->type);
        copy_col(s, 2, r->order_id, sizeof r->order_id);
        const char *p = (const char *)sqlite3_column_text(s, 3);
        r->payload = strdup(p ? p : "null");
        r->created_at = sqlite3_column_int64(s, 4);
        if (!r->payload) {
            sqlite3_reset(s);
            pt_event_rows_free(rows, *n);
            *n = 0;
            return PT_ENOMEM;
        }
        (*n)++;
    }
    rc = (rc == SQLITE_DONE || rc == SQLITE_ROW) ? PT_OK
                                                 : xlate(sqlite3_extended_errcode(st->c->db));
    sqlite3_reset(s);
    if (rc) {
        pt_event_rows_free(rows, *n);
        *n = 0;
    }
    return rc;
}

static int sq_events_last_seq(struct pt_store *st, int64_t *seq)
{
    sqlite3_stmt *s = stmt(st, S_EVENTS_LAST);
    return s ? scalar(st, s, seq) : PT_ESTORAGE;
}

static int sq_audit_list(struct pt_store *st, int64_t charge_id, int max, struct pt_audit_row *rows,
                         int *n)
{
    sqlite3_stmt *s = stmt(st, S_AUDIT_LIST);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, charge_id);
    sqlite3_bind_int(s, 2, max);
    int rc;
    *n = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW && *n < max) {
        struct pt_audit_row *r = &rows[(*n)++];
        r->seq = sqlite3_column_int64(s, 0);
        copy_col(s, 1, r->from_state, sizeof r->from_state);
        copy_col(s, 2, r->to_state, sizeof r->to_state);
        copy_col(s, 3, r->cause, sizeof r->cause);
        copy_col(s, 4, r->actor, sizeof r->actor);
        r->refused = sqlite3_column_int(s, 5);
        copy_col(s, 6, r->detail, sizeof r->detail);
        r->created_at = sqlite3_column_int64(s, 7);
        copy_col(s, 8, r->refund_id, sizeof r->refund_id);
    }
    rc = (rc == SQLITE_DONE || rc == SQLITE_ROW) ? PT_OK
                                                 : xlate(sqlite3_extended_errcode(st->c->db));
    sqlite3_reset(s);
    return rc;
}

static int sq_notification_insert(struct pt_store *st, const char *gateway, const char *dedup_id,
                                  const char *order_id, const char *status, const char *outcome,
                                  int64_t now)
{
    sqlite3_stmt *s = stmt(st, S_NOTIFICATION_INSERT);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, gateway, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, dedup_id, -1, SQLITE_STATIC);
    bind_text(s, 3, order_id);
    bind_text(s, 4, status);
    sqlite3_bind_text(s, 5, outcome, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 6, now);
    int rc = run(st, s);
    if (rc)
        return rc;
    return sqlite3_changes(st->c->db) == 1 ? PT_OK : PT_EEXIST;
}

/* ---- refunds (SPEC section 5a) --------------------------------------------- */

static void read_refund(sqlite3_stmt *s, struct pt_refund *r)
{
    read_row(s, &pt_refund_row, r);
}

static int sq_refund_insert(struct pt_store *st, struct pt_refund *r, int64_t now)
{
    sqlite3_stmt *s = stmt(st, S_REFUND_INSERT);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, r->refund_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, r->charge_id);
    sqlite3_bind_int64(s, 3, r->amount);
    sqlite3_bind_text(s, 4, pt_state_name(r->state), -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, pt_offline_mode_name(r->offline), -1, SQLITE_STATIC);
    bind_text(s, 6, r->reason);
    bind_text(s, 7, r->metadata);
    sqlite3_bind_int64(s, 8, r->next_attempt_at);
    sqlite3_bind_int64(s, 9, now);
    int rc = sqlite3_step(s);
    int ext = sqlite3_extended_errcode(st->c->db);
    const char *msg = sqlite3_errmsg(st->c->db);
    if (rc == SQLITE_DONE)
        rc = PT_OK;
    else if (ext == SQLITE_CONSTRAINT_TRIGGER && strstr(msg, "refund_exceeds_charge"))
        rc = PT_ERANGE; /* the data layer's "never more than the charge" */
    else if (ext == SQLITE_CONSTRAINT_TRIGGER && strstr(msg, "charge_not_refundable"))
        rc = PT_ESTATE;
    else
        rc = xlate(ext);
    sqlite3_reset(s);
    if (rc)
        return rc;
    r->id = sqlite3_last_insert_rowid(st->c->db);
    r->created_at = r->updated_at = now;
    return PT_OK;
}

/* Steps a statement that returns at most one refund. */
static int one_refund(struct pt_store *st, sqlite3_stmt *s, struct pt_refund *out)
{
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        read_refund(s, out);
        rc = PT_OK;
    } else {
        rc = rc == SQLITE_DONE ? PT_ENOTFOUND : xlate(sqlite3_extended_errcode(st->c->db));
    }
    sqlite3_reset(s);
    return rc;
}

static int sq_refund_get(struct pt_store *st, const char *refund_id, struct pt_refund *out)
{
    sqlite3_stmt *s = stmt(st, S_REFUND_GET);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, refund_id, -1, SQLITE_STATIC);
    return one_refund(st, s, out);
}

static int sq_refund_get_by_id(struct pt_store *st, int64_t id, struct pt_refund *out)
{
    sqlite3_stmt *s = stmt(st, S_REFUND_GET_BY_ID);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, id);
    return one_refund(st, s, out);
}

static int read_refunds(struct pt_store *st, sqlite3_stmt *s, int max, struct pt_refund *rows,
                        int *n, int *more)
{
    int rc;
    *n = 0;
    if (more)
        *more = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (*n == max) {
            if (more)
                *more = 1;
            break;
        }
        read_refund(s, &rows[(*n)++]);
    }
    rc = (rc == SQLITE_ROW || rc == SQLITE_DONE) ? PT_OK
                                                 : xlate(sqlite3_extended_errcode(st->c->db));
    sqlite3_reset(s);
    return rc;
}

static int sq_refunds_list(struct pt_store *st, int64_t charge_id, int state, int64_t after_id,
                           int max, struct pt_refund *rows, int *n, int *more)
{
    int id = charge_id > 0 ? S_REFUNDS_OF_CHARGE
             : state >= 0  ? S_REFUNDS_LIST_STATE
                           : S_REFUNDS_LIST;
    sqlite3_stmt *s = stmt(st, id);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, after_id);
    sqlite3_bind_int(s, 2, max + 1);
    if (charge_id > 0)
        sqlite3_bind_int64(s, 3, charge_id);
    else if (state >= 0)
        sqlite3_bind_text(s, 3, pt_state_name((enum pt_state)state), -1, SQLITE_STATIC);
    return read_refunds(st, s, max, rows, n, more);
}

/* Withdrawals of refunds (rows deleted) in this process so far. */
static atomic_uint refund_withdrawals;

/*
 * Every refund with an id below *floor is final: the lowest refund that
 * is not, or the next id (sql/008_refund_pages.sql; as active_floor()).
 * Unlike a charge, a refund row can go (a withdrawal, INIT only), and SQLite
 * gives the next refund max(id) + 1: an id below a floor read before.  So a
 * withdrawal sends every connection's floor back to the start, once.
 * (Withdrawals happen only in the daemon, the one process that writes.)
 */
static int refund_floor(struct pt_store *st, int64_t *floor)
{
    unsigned epoch = atomic_load(&refund_withdrawals);
    if (epoch != st->refund_floor_epoch) {
        st->refund_floor_epoch = epoch;
        st->refund_floor = 0;
    }
    return read_floor(st, S_REFUND_ACTIVE_FIRST, &st->refund_floor, floor);
}

static int sq_refunds_due(struct pt_store *st, int64_t now, int64_t after_id, int max,
                          struct pt_refund *rows, int *n)
{
    int64_t floor = st->refund_floor;
    int rc = after_id == 0 ? refund_floor(st, &floor) : PT_OK; /* a new walk */
    if (rc)
        return rc;
    sqlite3_stmt *s = stmt(st, S_REFUNDS_DUE);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, now);
    sqlite3_bind_int(s, 2, max);
    sqlite3_bind_int64(s, 3, after_id > floor - 1 ? after_id : floor - 1);
    return read_refunds(st, s, max, rows, n, NULL);
}

/* One transaction: a charges' and a refunds' statement (update[0], [1]),
 * each bound to now, its table's floor and, when given, the gateway; *n the
 * rows they changed. */
static int sq_update_pair(struct pt_store *st, const int update[2], int64_t now,
                          const char *gateway, int *n)
{
    *n = 0;
    int64_t floor[2];
    int rc = sq_begin(st);
    if (rc)
        return rc;
    if ((rc = active_floor(st, &floor[0])) == PT_OK)
        rc = refund_floor(st, &floor[1]);
    for (int i = 0; i < 2 && rc == PT_OK; i++) {
        sqlite3_stmt *s = stmt(st, update[i]);
        if (!s) {
            rc = PT_ESTORAGE;
            break;
        }
        sqlite3_bind_int64(s, 1, now);
        sqlite3_bind_int64(s, 2, floor[i]);
        if (gateway)
            sqlite3_bind_text(s, 3, gateway, -1, SQLITE_STATIC);
        if ((rc = run(st, s)) == PT_OK)
            *n += sqlite3_changes(st->c->db);
    }
    if (rc) {
        sq_rollback(st);
        return rc;
    }
    return sq_commit(st);
}

static int sq_sends_interrupted(struct pt_store *st, int64_t now, int *n)
{
    static const int update[2] = {S_CHARGES_INTERRUPTED, S_REFUNDS_INTERRUPTED};
    return sq_update_pair(st, update, now, NULL, n);
}

static int sq_gateway_back(struct pt_store *st, const char *gateway, int64_t now, int *n)
{
    static const int update[2] = {S_CHARGES_BACK, S_REFUNDS_BACK};
    return sq_update_pair(st, update, now, gateway, n);
}

static int sq_refunds_next_due(struct pt_store *st, int64_t *when)
{
    int64_t floor;
    int rc = refund_floor(st, &floor);
    if (rc)
        return rc;
    sqlite3_stmt *s = stmt(st, S_REFUNDS_NEXT_DUE);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, floor);
    return scalar(st, s, when); /* 0 when there is none */
}

static int sq_refund_left(struct pt_store *st, int64_t charge_id, int64_t *left)
{
    sqlite3_stmt *s = stmt(st, S_REFUND_LEFT);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, charge_id);
    return scalar(st, s, left);
}

static sqlite3_stmt *refund_transition_stmt(struct pt_store *st, unsigned mask)
{
    return cached_transition(st, st->c->refund_transition, mask,
                             "UPDATE refunds SET state = ?10, " REFUND_PATCH_SET
                             " WHERE id = ?1 AND ");
}

static int sq_refund_transition(struct pt_store *st, int64_t id, unsigned from_mask,
                                enum pt_state to, const struct pt_charge_patch *patch, int64_t now)
{
    from_mask &= PT_FROM_MASKS - 1;
    if (!from_mask || !pt_refund_state_valid(to))
        return PT_EINVAL;
    sqlite3_stmt *s = refund_transition_stmt(st, from_mask);
    if (!s)
        return PT_ESTORAGE;
    bind_patch(s, id, patch, now);
    sqlite3_bind_text(s, 10, pt_state_name(to), -1, SQLITE_STATIC);
    int rc = run(st, s);
    if (rc)
        return rc;
    return sqlite3_changes(st->c->db) == 1 ? PT_OK : PT_ESTATE;
}

static int sq_refund_patch(struct pt_store *st, int64_t id, const struct pt_charge_patch *patch,
                           int64_t now)
{
    sqlite3_stmt *s = stmt(st, S_REFUND_PATCH);
    if (!s)
        return PT_ESTORAGE;
    bind_patch(s, id, patch, now);
    int rc = run(st, s);
    if (rc)
        return rc;
    return sqlite3_changes(st->c->db) == 1 ? PT_OK : PT_ENOTFOUND;
}

static int sq_refund_withdraw(struct pt_store *st, int64_t id)
{
    sqlite3_stmt *s = stmt(st, S_REFUND_WITHDRAW);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, id);
    /* The next refund may get this id again (or one below it): every
     * connection's floor starts from the beginning once (refund_floor()). */
    atomic_fetch_add(&refund_withdrawals, 1);
    int rc = run(st, s);
    if (rc)
        return rc;
    return sqlite3_changes(st->c->db) == 1 ? PT_OK : PT_ESTATE;
}

static int sq_refund_set_review(struct pt_store *st, int64_t id, int review, const char *reason,
                                int64_t now)
{
    sqlite3_stmt *s = stmt(st, S_REFUND_SET_REVIEW);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int(s, 2, review ? 1 : 0);
    bind_text(s, 3, reason);
    sqlite3_bind_int64(s, 4, now);
    int rc = run(st, s);
    if (rc)
        return rc;
    return sqlite3_changes(st->c->db) == 1 ? PT_OK : PT_ESTATE;
}

static int sq_refund_audit(struct pt_store *st, const struct pt_refund *r, const char *from,
                           const char *to, const char *cause, const char *actor, int refused,
                           const char *detail, int64_t now)
{
    int64_t next = 0;
    int rc = next_in_trail(st, r->charge_id, &next);
    if (rc)
        return rc;
    sqlite3_stmt *s = stmt(st, S_AUDIT_INSERT_REFUND);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 9, next);
    sqlite3_bind_int64(s, 1, r->charge_id);
    bind_text(s, 2, from);
    bind_text(s, 3, to);
    sqlite3_bind_text(s, 4, cause, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, actor, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 6, refused ? 1 : 0);
    bind_text(s, 7, detail);
    sqlite3_bind_int64(s, 8, now);
    sqlite3_bind_text(s, 10, r->refund_id, -1, SQLITE_STATIC);
    return run(st, s);
}

static int sq_refund_event_insert(struct pt_store *st, const char *type, const struct pt_refund *r,
                                  const char *payload, int64_t now, int64_t *seq)
{
    sqlite3_stmt *s = stmt(st, S_EVENT_INSERT_REFUND);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, type, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, r->charge_id);
    sqlite3_bind_text(s, 3, r->order_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, payload, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 5, now);
    sqlite3_bind_int64(s, 6, r->id);
    int rc = run(st, s);
    if (rc)
        return rc;
    if (sqlite3_changes(st->c->db) != 1)
        return PT_EEXIST; /* this refund already had its final event */
    if (seq)
        *seq = sqlite3_last_insert_rowid(st->c->db);
    st->events_in_txn++;
    return PT_OK;
}

static int sq_refund_stats(struct pt_store *st, struct pt_refund_stats *out)
{
    memset(out, 0, sizeof *out);
    int64_t floor;
    int rc = refund_floor(st, &floor);
    if (rc)
        return rc;
    sqlite3_stmt *s = stmt(st, S_REFUND_STATS);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, floor);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        enum pt_state state;
        const char *name = (const char *)sqlite3_column_text(s, 0);
        if (name && pt_state_parse(name, &state) == PT_OK)
            out->by_state[state] = sqlite3_column_int64(s, 1);
    }
    rc = rc == SQLITE_DONE ? PT_OK : xlate(sqlite3_extended_errcode(st->c->db));
    sqlite3_reset(s);
    if (rc)
        return rc;
    s = stmt(st, S_REFUND_STATS_REVIEW);
    return s ? scalar(st, s, &out->review) : PT_ESTORAGE;
}

/* ---- the lane's clock (SPEC 17) ------------------------------------------ */

static int sq_clock_get(struct pt_store *st, struct pt_clock_anchor *out)
{
    sqlite3_stmt *s = stmt(st, S_CLOCK_GET);
    if (!s)
        return PT_ESTORAGE;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        copy_col(s, 0, out->boot_id, sizeof out->boot_id);
        out->boot_ms = sqlite3_column_int64(s, 1);
        out->lane_ms = sqlite3_column_int64(s, 2);
        out->trusted = sqlite3_column_int(s, 3);
        out->provisional_since = sqlite3_column_int64(s, 4);
        out->wall_high = sqlite3_column_int64(s, 5);
        rc = PT_OK;
    } else {
        rc = rc == SQLITE_DONE ? PT_ENOTFOUND : xlate(sqlite3_extended_errcode(st->c->db));
    }
    sqlite3_reset(s);
    return rc;
}

static int sq_clock_put(struct pt_store *st, const struct pt_clock_anchor *a)
{
    sqlite3_stmt *s = stmt(st, S_CLOCK_PUT);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, a->boot_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, a->boot_ms);
    sqlite3_bind_int64(s, 3, a->lane_ms);
    sqlite3_bind_int(s, 4, a->trusted != 0);
    sqlite3_bind_int64(s, 5, a->provisional_since);
    sqlite3_bind_int64(s, 6, a->wall_high);
    return run(st, s);
}

static int sq_newest_time(struct pt_store *st, int64_t *t)
{
    int64_t floor;
    int rc = active_floor(st, &floor);
    if (rc)
        return rc;
    sqlite3_stmt *s = stmt(st, S_NEWEST_TIME);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, floor);
    return scalar(st, s, t);
}

static int sq_clock_shift(struct pt_store *st, int64_t since, int64_t delta)
{
    static const int shifts[] = {S_SHIFT_CHARGES,     S_SHIFT_REFUNDS, S_SHIFT_KEYS,
                                 S_SHIFT_EVENTS,      S_SHIFT_AUDIT,   S_SHIFT_NOTIFICATIONS,
                                 S_SHIFT_CLOCK_EVENTS};
    assert(st->in_txn); /* one transaction with the anchor: all of it or none */
    int rc = PT_OK;
    for (size_t i = 0; rc == PT_OK && i < sizeof shifts / sizeof shifts[0]; i++) {
        sqlite3_stmt *s = stmt(st, shifts[i]);
        if (!s)
            return PT_ESTORAGE;
        sqlite3_bind_int64(s, 1, since);
        sqlite3_bind_int64(s, 2, delta);
        rc = run(st, s);
    }
    return rc;
}

static int sq_clock_event(struct pt_store *st, const char *kind, int64_t size_ms, int64_t wall_ms,
                          const char *detail, int64_t now)
{
    sqlite3_stmt *s = stmt(st, S_CLOCK_EVENT);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, kind, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, size_ms);
    sqlite3_bind_int64(s, 3, wall_ms);
    bind_text(s, 4, detail);
    sqlite3_bind_int64(s, 5, now);
    return run(st, s);
}

static int sq_clock_events(struct pt_store *st, int max, struct pt_clock_event_row *rows, int *n)
{
    sqlite3_stmt *s = stmt(st, S_CLOCK_EVENTS);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int(s, 1, max);
    int rc;
    *n = 0;
    while (*n < max && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct pt_clock_event_row *r = &rows[(*n)++];
        r->id = sqlite3_column_int64(s, 0);
        copy_col(s, 1, r->kind, sizeof r->kind);
        r->size_ms = sqlite3_column_int64(s, 2);
        r->wall_ms = sqlite3_column_int64(s, 3);
        copy_col(s, 4, r->detail, sizeof r->detail);
        r->created_at = sqlite3_column_int64(s, 5);
    }
    rc = (*n == max || rc == SQLITE_DONE) ? PT_OK : xlate(sqlite3_extended_errcode(st->c->db));
    sqlite3_reset(s);
    return rc;
}

static const struct pt_store_ops sqlite_ops = {
    .name = "sqlite",
    .caps = PT_STORE_SQLITE_CAPS,
    .schema_latest = pt_store_schema_latest,
    .errmsg = sq_errmsg,
    .close = sq_close,
    .schema_version = sq_schema_version,
    .migrate_to = sq_migrate_to,
    .pragma_int = sq_pragma_int,
    .set_event_hook = sq_set_event_hook,
    .begin = sq_begin,
    .in_txn = sq_in_txn,
    .commit = sq_commit,
    .rollback = sq_rollback,
    .attach = sq_attach,
    .defer_commit = sq_defer_commit,
    .commit_deferred = sq_commit_deferred,
    .backup = sq_backup,
    .note_erased = sq_note_erased,
    .checkpoint_truncate = sq_checkpoint_truncate,
    .writable = sq_writable,
    .health = sq_health,
    .files_intact = sq_files_intact,
    .key_get = sq_key_get,
    .key_insert = sq_key_insert,
    .key_relock = sq_key_relock,
    .key_take_later = sq_key_take_later,
    .key_set_order = sq_key_set_order,
    .key_complete = sq_key_complete,
    .key_of_order = sq_key_of_order,
    .key_delete = sq_key_delete,
    .key_delete_expired = sq_key_delete_expired,
    .key_sweep = sq_key_sweep,
    .charge_insert = sq_charge_insert,
    .charge_get = sq_charge_get,
    .charge_get_by_id = sq_charge_get_by_id,
    .charge_transition = sq_charge_transition,
    .charge_patch = sq_charge_patch,
    .charge_accept_offline = sq_charge_accept_offline,
    .charge_request_cancel = sq_charge_request_cancel,
    .key_reanswer = sq_key_reanswer,
    .charge_set_review = sq_charge_set_review,
    .charges_list = sq_charges_list,
    .charges_list_review = sq_charges_list_review,
    .charges_due = sq_charges_due,
    .charges_next_due = sq_charges_next_due,
    .charges_queued_before = sq_charges_queued_before,
    .charges_oldest_queued = sq_charges_oldest_queued,
    .sends_interrupted = sq_sends_interrupted,
    .gateway_back = sq_gateway_back,
    .queue_figures = sq_queue_figures,
    .stats = sq_stats,
    .event_insert = sq_event_insert,
    .events_list = sq_events_list,
    .events_last_seq = sq_events_last_seq,
    .audit = sq_audit,
    .audit_first = sq_audit_first,
    .audit_list = sq_audit_list,
    .notification_insert = sq_notification_insert,
    .count = sq_count,
    .refund_insert = sq_refund_insert,
    .refund_get = sq_refund_get,
    .refund_get_by_id = sq_refund_get_by_id,
    .refunds_list = sq_refunds_list,
    .refunds_due = sq_refunds_due,
    .refunds_next_due = sq_refunds_next_due,
    .refund_left = sq_refund_left,
    .refund_transition = sq_refund_transition,
    .refund_patch = sq_refund_patch,
    .refund_set_review = sq_refund_set_review,
    .refund_withdraw = sq_refund_withdraw,
    .refund_audit = sq_refund_audit,
    .refund_event_insert = sq_refund_event_insert,
    .refund_stats = sq_refund_stats,
    .clock_get = sq_clock_get,
    .clock_put = sq_clock_put,
    .newest_time = sq_newest_time,
    .clock_shift = sq_clock_shift,
    .clock_event = sq_clock_event,
    .clock_events = sq_clock_events,
};
