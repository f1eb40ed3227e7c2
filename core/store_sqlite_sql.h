/*
 * store_sqlite_sql.h - the SQLite store's SQL text: every statement it
 * prepares, by its S_ name (private to store_sqlite*.c).  The statements
 * store_ops.c runs (store_impl.h's PT_STORE_SHARED) are among them, with
 * the parameters PostgreSQL's text has too.
 */
#ifndef PT_STORE_SQLITE_SQL_H
#define PT_STORE_SQLITE_SQL_H

/* A charge's and a refund's columns, as store_rows.c reads them
 * (store_ops.c's reads, a backend's due lists): store_rows.h, the same for both backends. */
#define CHARGE_COLS PT_CHARGE_COLS
#define REFUND_COLS PT_REFUND_COLS

/* A refund's patch: the charge's with gateway_refund_no for the trade
 * number (?4, the action URL, unused). */
#define REFUND_PATCH_SET                                                                           \
    "updated_at = ?2, gateway_refund_no = coalesce(?3, gateway_refund_no)," PATCH_REST

/* Non-final states.  (An OR chain, not IN: see sql/001_init.sql.)  Queries
 * over them start at the connection's active floor (see active_floor()). */
#define ACTIVE "(state = 'INIT' OR state = 'PROCESSING' OR state = 'PENDING' OR state = 'UNKNOWN')"
/* The report a row with z = this is in: ?1, or the open one when ?1 is NULL
 * (a row takes its number when it becomes final, sql/015). */
#define Z_OR_OPEN "coalesce(?1, (SELECT coalesce(max(z), 0) + 1 FROM z_reports))"
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
        "next_attempt_at") "," SHIFTED("final_at") ", updated_at = updated_at + ?2"                \
                                                   " WHERE updated_at >= ?1"
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
    X(Z_LAST, "SELECT z, to_at, hash FROM z_reports ORDER BY z DESC LIMIT 1")                      \
    X(Z_LOCK, "SELECT 1") /* the write transaction is the lock */                                  \
    /* Nothing to mark: a row takes the open report's number in the                                \
     * transaction that makes it final (sql/015). */                                               \
    X(Z_MARK_CHARGES, "SELECT ?1 WHERE 0")                                                         \
    X(Z_MARK_REFUNDS, "SELECT ?1 WHERE 0")                                                         \
    /* ?1 NULL: the open report (the X report), one more than the last. */                         \
    X(Z_TOTALS_CHARGES, "SELECT gateway, method, currency, count(*), sum(amount), min(created_at)" \
                        " FROM charges WHERE state = 'SUCCESS' AND z = " Z_OR_OPEN                 \
                        " GROUP BY gateway, method, currency ORDER BY gateway, method, currency")  \
    X(Z_TOTALS_REFUNDS,                                                                            \
      "SELECT c.gateway, c.method, c.currency, count(*), sum(r.amount), min(r.created_at)"         \
      " FROM refunds r JOIN charges c ON c.id = r.charge_id WHERE r.state = 'SUCCESS'"             \
      " AND r.z = " Z_OR_OPEN " GROUP BY c.gateway, c.method, c.currency"                          \
      " ORDER BY c.gateway, c.method, c.currency")                                                 \
    X(Z_INSERT, "INSERT INTO z_reports (z, lane, from_at, to_at, hash, body, created_at)"          \
                " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")                                            \
    X(Z_GET, "SELECT body FROM z_reports WHERE z = ?1")                                            \
    /* What a close finds still open, charges and refunds together: queued                         \
     * (INIT, PROCESSING), PENDING, UNKNOWN, under review.  The rows not                           \
     * final from the tables' floors (?1 charges, ?2 refunds: sq_z_open),                          \
     * the reviews by their partial indexes: never a scan of the day. */                           \
    X(Z_OPEN, "SELECT sum(state = 'INIT' OR state = 'PROCESSING'), sum(state = 'PENDING'),"        \
              " sum(state = 'UNKNOWN'), (SELECT count(*) FROM charges WHERE review = 1)"           \
              " + (SELECT count(*) FROM refunds WHERE review = 1) FROM (SELECT state FROM"         \
              " charges WHERE id >= ?1 AND " ACTIVE " UNION ALL SELECT state FROM refunds"         \
              " WHERE id >= ?2 AND " ACTIVE ")")                                                   \
    /* A gateway's SUCCESS charges (refunds) that became SUCCESS in [?2, ?3),                      \
     * lane ms, by their audit row, whose time the row carries (sql/015): a                        \
     * review or a later note never moves a record to another day.  One scan                       \
     * of the table, as the close's, and no read of the trail. */                                  \
    X(RECON_CHARGES, "SELECT order_id, gateway_trade_no, amount, currency, final_at"               \
                     " FROM charges WHERE gateway = ?1 AND state = 'SUCCESS'"                      \
                     " AND final_at >= ?2 AND final_at < ?3")                                      \
    /* When the gateway's charges and refunds became final in [?2, ?3),                            \
     * whatever their final state: the days the walk back looks at. */                             \
    X(RECON_FINAL_TIMES, "SELECT final_at FROM charges WHERE gateway = ?1"                         \
                         " AND final_at >= ?2 AND final_at < ?3 UNION ALL"                         \
                         " SELECT r.final_at FROM refunds r JOIN charges c ON c.id = r.charge_id"  \
                         " WHERE c.gateway = ?1 AND r.final_at >= ?2 AND r.final_at < ?3")         \
    X(RECON_REFUNDS,                                                                               \
      "SELECT c.order_id, r.refund_id, c.gateway_trade_no, r.gateway_refund_no, r.amount,"         \
      " c.currency, r.final_at FROM refunds r JOIN charges c ON c.id = r.charge_id"                \
      " WHERE c.gateway = ?1 AND r.state = 'SUCCESS' AND r.final_at >= ?2"                         \
      " AND r.final_at < ?3")                                                                      \
    X(RECON_INSERT, "INSERT INTO reconciliations (gateway, bill_date, state, body, created_at)"    \
                    " VALUES (?1, ?2, ?3, ?4, ?5)")                                                \
    X(RECON_LATEST, "SELECT body FROM reconciliations WHERE gateway = ?1 AND bill_date = ?2"       \
                    " ORDER BY id DESC LIMIT 1")                                                   \
    /* One run of a gateway and date at a time: SQLite has one process,                            \
     * whose own mutex does it (sync_recon.c). */                                                  \
    X(RECON_LOCK, "SELECT 1")                                                                      \
    X(RECON_UNLOCK, "SELECT 1")                                                                    \
    X(RECON_LATEST_DONE, "SELECT body FROM reconciliations WHERE gateway = ?1 AND state = 'done'"  \
                         " ORDER BY bill_date DESC, id DESC LIMIT 1")                              \
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

#endif
