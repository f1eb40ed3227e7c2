/*
 * store_pg_sql.h - the PostgreSQL store's SQL text: every statement it
 * prepares, by its S_ name (private to store_pg*.c).  The statements
 * store_ops.c runs (store_impl.h's PT_STORE_SHARED) are among them, with
 * the parameters SQLite's text has too.
 */
#ifndef PT_STORE_PG_SQL_H
#define PT_STORE_PG_SQL_H

#define ACTIVE "state IN ('INIT', 'PROCESSING', 'PENDING', 'UNKNOWN')"
/* What the offline limits count (SPEC 18, sql/pg/007): accepted offline,
 * not final - the index charges_lane_queue. */
#define ACCEPTED "offline_accepted = 1 AND " ACTIVE
/* The charges waiting in the queue: the index charges_queued (sql/pg/008). */
#define QUEUED "state = 'INIT' AND offline_accepted = 1"

/* A charge's and a refund's columns, as store_rows.c reads them
 * (store_ops.c's reads, a backend's due lists): store_rows.h, the same for both backends. */
#define CHARGE_COLS PT_CHARGE_COLS
#define REFUND_COLS PT_REFUND_COLS

/* A patch's SET list: $1 id, $2 now, $3..$9 the pt_charge_patch fields. */
#define PATCH_REST                                                                                 \
    " error_code = CASE WHEN $5::text IS NULL THEN error_code WHEN $5 = '' THEN NULL"              \
    " ELSE $5 END,"                                                                                \
    " error_message = CASE WHEN $6::text IS NULL THEN error_message WHEN $6 = '' THEN NULL"        \
    " ELSE $6 END,"                                                                                \
    " attempts = attempts + $7::integer,"                                                          \
    " next_attempt_at = CASE WHEN $8::bigint < 0 THEN next_attempt_at ELSE $8 END,"                \
    " first_sent_at = CASE WHEN $9::bigint < 0 OR first_sent_at IS NOT NULL THEN first_sent_at"    \
    " ELSE $9 END"
#define PATCH_SET                                                                                  \
    "updated_at = $2::bigint, gateway_trade_no = coalesce($3::text, gateway_trade_no),"            \
    " action_url = coalesce($4::text, action_url)," PATCH_REST
#define REFUND_PATCH_SET                                                                           \
    "updated_at = $2::bigint, gateway_refund_no = coalesce($3::text, "                             \
    "gateway_refund_no)," PATCH_REST

/*
 * When a row in progress is due: at next_attempt_at - except a send
 * another lane armed (PROCESSING, claimed_by not this lane), which stays
 * that lane's until lock_timeout_s after it was armed as well (SPEC 16: a
 * lane that dies mid-send leaves its charge to another after that).
 * $lane: this lane, $timeout: the claim timeout in ms.
 */
#define DUE_AT(p, lane, timeout)                                                                   \
    "(CASE WHEN " p "state = 'PROCESSING' AND " p "claimed_by IS DISTINCT FROM $" #lane            \
    "::text THEN greatest(" p "next_attempt_at, " p "updated_at + $" #timeout "::bigint)"          \
    " ELSE " p "next_attempt_at END)"

/* A refund has no action URL: the patch's $4 is only typed, never used. */
#define NO_URL " AND $4::text IS NOT DISTINCT FROM $4"

#define HELD(at, by)                                                                               \
    "completed_at IS NULL AND locked_at = $" #at                                                   \
    "::bigint AND locked_by IS NOT DISTINCT FROM $" #by "::bigint"

/* A charge's first audit entry where its row holds it (sql/pg/005). */
#define FIRST_ENTRY                                                                                \
    "SELECT 0 AS o, 0::bigint AS id, NULL::text AS from_state, 'INIT'::text AS to_state,"          \
    " 'created'::text AS cause, created_by AS actor, 0 AS refused, NULL::text AS detail,"          \
    " created_at, NULL::text AS refund_id FROM charges WHERE id = $1::bigint"                      \
    " AND created_by IS NOT NULL"

/* The transaction-scoped lock that orders the events feed. */
#define EVENTS_LOCK "SELECT pg_advisory_xact_lock(7302062520031)"

/* X(ID, "sql") - statements prepared once per connection. */
/* This lane's rows (charges, refunds, z_reports: SPEC 19). */
#define THIS_LANE "lane = current_setting('payterm.lane')"

#define PG_STMTS(X)                                                                                \
    X(KEY_GET, "SELECT request_hash, locked_at, locked_by, completed_at, response_status,"         \
               " response_body, order_id, expires_at FROM idempotency_keys"                        \
               " WHERE scope = $1::text AND key = $2::text")                                       \
    X(KEY_OF_ORDER, "SELECT request_hash, locked_at, locked_by, completed_at, response_status,"    \
                    " response_body, order_id, expires_at, scope, key FROM idempotency_keys"       \
                    " WHERE order_id = $1::text AND completed_at IS NOT NULL ORDER BY id LIMIT 1") \
    X(KEY_INSERT, "INSERT INTO idempotency_keys (scope, key, request_hash, locked_at, locked_by,"  \
                  " created_at, expires_at) VALUES ($1, $2, $3::bytea, $4::bigint, $5::bigint,"    \
                  " $4, $6::bigint) ON CONFLICT (scope, key) DO NOTHING RETURNING id")             \
    X(KEY_RELOCK, "UPDATE idempotency_keys SET locked_at = $5::bigint, locked_by = $6::bigint"     \
                  " WHERE scope = $1::text AND key = $2::text AND completed_at IS NULL"            \
                  " AND locked_at = $3::bigint AND locked_by IS NOT DISTINCT FROM $4::bigint")     \
    X(KEY_SET_ORDER, "UPDATE idempotency_keys SET order_id = $3::text WHERE scope = $1::text"      \
                     " AND key = $2::text AND " HELD(4, 5))                                        \
    X(KEY_COMPLETE, "UPDATE idempotency_keys SET completed_at = $5::bigint,"                       \
                    " response_status = $3::integer, response_body = $4::bytea,"                   \
                    " locked_at = NULL, locked_by = NULL"                                          \
                    " WHERE scope = $1::text AND key = $2::text AND " HELD(6, 7))                  \
    X(KEY_DELETE,                                                                                  \
      "DELETE FROM idempotency_keys WHERE scope = $1::text AND key = $2::text AND " HELD(3, 4))    \
    X(KEY_DELETE_EXPIRED, "DELETE FROM idempotency_keys WHERE scope = $1::text"                    \
                          " AND key = $2::text AND expires_at <= $3::bigint")                      \
    X(KEY_SWEEP, "DELETE FROM idempotency_keys WHERE expires_at <= $1::bigint"                     \
                 " AND completed_at IS NOT NULL")                                                  \
    X(CHARGE_INSERT,                                                                               \
      "WITH c AS (INSERT INTO charges (order_id, gateway, method, amount, currency, state,"        \
      " offline_mode, subject, payment_code, payment_method, customer, metadata, attempts,"        \
      " next_attempt_at, created_at, updated_at, lane, offline_accepted) VALUES ($1::text,"        \
      " $2::text, $3::text, $4::bigint, $5::text, $6::text, $7::text, $8::text, $9::text,"         \
      " $10::text, $11::text, $12::text, 0, $13::bigint, $14::bigint, $14,"                        \
      " current_setting('payterm.lane'), $15::integer)"                                            \
      " ON CONFLICT (order_id) DO NOTHING"                                                         \
      " RETURNING id)"                                                                             \
      " SELECT id FROM c")                                                                         \
    X(CHARGE_GET, "SELECT " CHARGE_COLS " FROM charges WHERE order_id = $1::text")                 \
    X(CHARGE_GET_BY_ID, "SELECT " CHARGE_COLS " FROM charges WHERE id = $1::bigint")               \
    X(CHARGE_PATCH, "UPDATE charges SET " PATCH_SET " WHERE id = $1::bigint")                      \
    X(CHARGE_TRANSITION,                                                                           \
      "UPDATE charges SET state = $10::text, " PATCH_SET ","                                       \
      " payment_code = CASE WHEN $10 IN ('SUCCESS', 'FAILED', 'CANCELED') THEN NULL"               \
      " ELSE payment_code END,"                                                                    \
      " claimed_by = CASE WHEN $10 = 'PROCESSING' THEN $12::text ELSE claimed_by END"              \
      " WHERE id = $1::bigint AND state = ANY ($11::text[])"                                       \
      " AND ($10 <> 'PROCESSING' OR cancel_requested = 0)")                                        \
    X(CHARGE_REQUEST_CANCEL, "UPDATE charges SET cancel_requested = 1, next_attempt_at ="          \
                             " CASE WHEN $2::bigint < 0 THEN next_attempt_at ELSE $2 END,"         \
                             " updated_at = $3::bigint WHERE id = $1::bigint"                      \
                             " AND state = ANY ($4::text[]) AND cancel_requested = 0")             \
    X(KEY_REANSWER, "UPDATE idempotency_keys SET response_status = $3::integer,"                   \
                    " response_body = $4::bytea WHERE scope = $1::text"                            \
                    " AND completed_at IS NOT NULL AND response_status = $2::integer")             \
    X(CHARGE_SET_REVIEW, "UPDATE charges SET review = $2::integer, review_reason = $3::text,"      \
                         " updated_at = $4::bigint WHERE id = $1::bigint AND review <> $2")        \
    X(CHARGES_LIST, "SELECT " CHARGE_COLS " FROM charges WHERE id > $1::bigint ORDER BY id"        \
                    " LIMIT $2::integer")                                                          \
    X(CHARGES_LIST_REVIEW, "SELECT " CHARGE_COLS " FROM charges WHERE review = 1"                  \
                           " AND id > $1::bigint ORDER BY id LIMIT $2::integer")                   \
    X(CHARGES_LIST_STATE, "SELECT " CHARGE_COLS " FROM charges WHERE state = $3::text"             \
                          " AND id > $1::bigint ORDER BY id LIMIT $2::integer")                    \
    X(CHARGES_DUE, "SELECT " CHARGE_COLS " FROM charges WHERE " ACTIVE                             \
                   " AND next_attempt_at <= $1::bigint AND " DUE_AT(                               \
                       "", 4, 5) " <= $1"                                                          \
                                 " AND id > $3::bigint ORDER BY id LIMIT $2::integer")             \
    X(CHARGES_DUE_CLAIM, "SELECT " CHARGE_COLS " FROM charges WHERE " ACTIVE                       \
                         " AND next_attempt_at <= $1::bigint AND " DUE_AT(                         \
                             "", 4, 5) " <= $1"                                                    \
                                       " AND id > $3::bigint ORDER BY id LIMIT $2::integer"        \
                                       " FOR UPDATE SKIP LOCKED")                                  \
    X(CHARGES_NEXT_DUE,                                                                            \
      "SELECT coalesce(min(" DUE_AT("", 1, 2) "), 0) FROM charges WHERE " ACTIVE)                  \
    X(CHARGES_QUEUED_BEFORE, "SELECT " CHARGE_COLS " FROM charges WHERE " QUEUED                   \
                             " AND gateway = $1::text AND method = $2::text"                       \
                             " AND created_at < $3::bigint AND id > $4::bigint"                    \
                             " ORDER BY id LIMIT $5::integer")                                     \
    X(CHARGES_OLDEST_QUEUED, "SELECT coalesce(min(created_at), 0) FROM charges WHERE " QUEUED      \
                             " AND gateway = $1::text AND method = $2::text")                      \
    X(QUEUE_FIGURES,                                                                               \
      "SELECT count(*), coalesce(sum(amount) FILTER (WHERE currency = $1::text), 0)"               \
      " FROM charges WHERE lane = current_setting('payterm.lane') AND " ACCEPTED)                  \
    X(QUEUE_FIGURES_LOCKED, "SELECT queued, total FROM"                                            \
                            " payterm_lane_queue(current_setting('payterm.lane'), $1::text)")      \
    X(LANE_BOUND,                                                                                  \
      "SELECT currency, count(*), sum(amount) FROM charges"                                        \
      " WHERE lane = current_setting('payterm.lane') AND " ACCEPTED " GROUP BY currency")          \
    X(CHARGE_ACCEPT_OFFLINE, "UPDATE charges SET offline_accepted = 1, updated_at = $2::bigint"    \
                             " WHERE id = $1::bigint AND state = 'INIT'")                          \
    X(DOUBT_END, "SELECT (extract(epoch FROM backend_start) * 1000000)::bigint,"                   \
                 " CASE WHEN (extract(epoch FROM backend_start) * 1000000)::bigint = $2::bigint"   \
                 " THEN pg_terminate_backend(pid, 1000) END"                                       \
                 " FROM pg_stat_activity WHERE pid = $1::integer")                                 \
    X(DOUBT_END_13, "SELECT (extract(epoch FROM backend_start) * 1000000)::bigint,"                \
                    " CASE WHEN (extract(epoch FROM backend_start) * 1000000)::bigint"             \
                    " = $2::bigint THEN pg_terminate_backend(pid) END"                             \
                    " FROM pg_stat_activity WHERE pid = $1::integer")                              \
    X(STATS_STATE, "SELECT state, count(*) FROM charges GROUP BY state")                           \
    X(STATS_ACTIVE, "SELECT state, count(*) FROM charges WHERE " ACTIVE " GROUP BY state")         \
    X(STATS_REVIEW, "SELECT count(*) FROM charges WHERE review = 1")                               \
    X(STATS_QUEUE, "SELECT currency, count(*), sum(amount), min(created_at) FROM charges"          \
                   " WHERE state = 'INIT' GROUP BY currency ORDER BY currency")                    \
    X(EVENTS_LOCK_, EVENTS_LOCK)                                                                   \
    X(EVENT_INSERT, "INSERT INTO events (type, charge_id, order_id, payload, created_at)"          \
                    " VALUES ($1::text, $2::bigint, $3::text, $4::text, $5::bigint)"               \
                    " ON CONFLICT DO NOTHING RETURNING seq")                                       \
    X(EVENT_INSERT_REFUND, "INSERT INTO events (type, charge_id, order_id, payload, created_at,"   \
                           " refund_id) VALUES ($1::text, $2::bigint, $3::text, $4::text,"         \
                           " $5::bigint, $6::bigint) ON CONFLICT DO NOTHING RETURNING seq")        \
    X(EVENTS_LIST, "SELECT seq, type, order_id, payload, created_at FROM events"                   \
                   " WHERE seq > $1::bigint ORDER BY seq LIMIT $2::integer")                       \
    X(EVENTS_LAST, "SELECT coalesce(max(seq), 0) FROM events")                                     \
    X(AUDIT_INSERT, "INSERT INTO charge_events (charge_id, from_state, to_state, cause, actor,"    \
                    " refused, detail, created_at, refund_id) VALUES ($1::bigint, $2::text,"       \
                    " $3::text, $4::text, $5::text, $6::integer, $7::text, $8::bigint, $9::text)") \
    X(AUDIT_LIST, "SELECT row_number() OVER (ORDER BY o, id), from_state, to_state, cause, actor," \
                  " refused, detail, created_at, refund_id FROM (" FIRST_ENTRY " UNION ALL"        \
                  " SELECT 1, id, from_state, to_state, cause, actor, refused, detail,"            \
                  " created_at, refund_id FROM charge_events WHERE charge_id = $1::bigint) t"      \
                  " ORDER BY o, id LIMIT $2::integer")                                             \
    X(NOTIFICATION_INSERT, "INSERT INTO notifications (gateway, dedup_id, order_id, status,"       \
                           " outcome, received_at) VALUES ($1::text, $2::text, $3::text,"          \
                           " $4::text, $5::text, $6::bigint) ON CONFLICT DO NOTHING")              \
    X(REFUND_INSERT,                                                                               \
      "INSERT INTO refunds (refund_id, charge_id, amount, state, offline_mode, reason, metadata,"  \
      " next_attempt_at, created_at, updated_at) VALUES ($1::text, $2::bigint, $3::bigint,"        \
      " $4::text, $5::text, $6::text, $7::text, $8::bigint, $9::bigint, $9)"                       \
      " ON CONFLICT (refund_id) DO NOTHING RETURNING id")                                          \
    X(REFUND_GET, "SELECT " REFUND_COLS " WHERE r.refund_id = $1::text")                           \
    X(REFUND_GET_BY_ID, "SELECT " REFUND_COLS " WHERE r.id = $1::bigint")                          \
    X(REFUNDS_LIST, "SELECT " REFUND_COLS " WHERE r.id > $1::bigint ORDER BY r.id"                 \
                    " LIMIT $2::integer")                                                          \
    X(REFUNDS_LIST_STATE, "SELECT " REFUND_COLS " WHERE r.state = $3::text AND r.id > $1::bigint"  \
                          " ORDER BY r.id LIMIT $2::integer")                                      \
    X(REFUNDS_OF_CHARGE, "SELECT " REFUND_COLS " WHERE r.charge_id = $3::bigint"                   \
                         " AND r.id > $1::bigint ORDER BY r.id LIMIT $2::integer")                 \
    X(REFUNDS_DUE, "SELECT " REFUND_COLS " WHERE r.state IN ('INIT', 'PROCESSING', 'PENDING',"     \
                   " 'UNKNOWN') AND r.next_attempt_at <= $1::bigint AND " DUE_AT(                  \
                       "r.", 4, 5) " <= $1 AND r.id > $3::bigint ORDER BY r.id LIMIT $2::integer") \
    X(REFUNDS_NEXT_DUE,                                                                            \
      "SELECT coalesce(min(" DUE_AT("", 1, 2) "), 0) FROM refunds WHERE " ACTIVE)                  \
    X(CHARGES_INTERRUPTED, "UPDATE charges SET next_attempt_at = $1::bigint"                       \
                           " WHERE state = 'PROCESSING' AND next_attempt_at > $1"                  \
                           " AND claimed_by IS NOT DISTINCT FROM $2::text")                        \
    X(CHARGES_BACK, "UPDATE charges SET next_attempt_at = $1::bigint WHERE state = 'INIT'"         \
                    " AND gateway = $2::text AND next_attempt_at > $1")                            \
    X(REFUNDS_BACK, "UPDATE refunds SET next_attempt_at = $1::bigint WHERE state = 'INIT'"         \
                    " AND next_attempt_at > $1 AND charge_id IN (SELECT id FROM charges"           \
                    " WHERE gateway = $2::text)")                                                  \
    X(REFUNDS_INTERRUPTED, "UPDATE refunds SET next_attempt_at = $1::bigint"                       \
                           " WHERE state = 'PROCESSING' AND next_attempt_at > $1"                  \
                           " AND claimed_by IS NOT DISTINCT FROM $2::text")                        \
    X(REFUND_LEFT, "SELECT amount - coalesce((SELECT sum(amount) FROM refunds"                     \
                   " WHERE charge_id = $1::bigint AND state <> 'FAILED'), 0) FROM charges"         \
                   " WHERE id = $1")                                                               \
    X(REFUND_PATCH, "UPDATE refunds SET " REFUND_PATCH_SET " WHERE id = $1::bigint" NO_URL)        \
    X(REFUND_TRANSITION,                                                                           \
      "UPDATE refunds SET state = $10::text, " REFUND_PATCH_SET ","                                \
      " claimed_by = CASE WHEN $10 = 'PROCESSING' THEN $12::text ELSE claimed_by END"              \
      " WHERE id = $1::bigint AND state = ANY ($11::text[])" NO_URL)                               \
    X(REFUND_SET_REVIEW, "UPDATE refunds SET review = $2::integer, review_reason = $3::text,"      \
                         " updated_at = $4::bigint WHERE id = $1::bigint AND review <> $2")        \
    X(REFUND_WITHDRAW, "DELETE FROM refunds WHERE id = $1::bigint AND state = 'INIT'")             \
    X(Z_LAST, "SELECT z, to_at, hash FROM z_reports WHERE " THIS_LANE " ORDER BY z DESC LIMIT 1")  \
    X(Z_LOCK, "SELECT pg_advisory_xact_lock(73020627, hashtext(current_setting('payterm.lane')))") \
    X(Z_MARK_CHARGES, "UPDATE charges SET z = $1::bigint WHERE " THIS_LANE " AND z IS NULL"        \
                      " AND state IN ('SUCCESS', 'FAILED', 'CANCELED')")                           \
    X(Z_MARK_REFUNDS, "UPDATE refunds SET z = $1::bigint WHERE " THIS_LANE " AND z IS NULL"        \
                      " AND state IN ('SUCCESS', 'FAILED')")                                       \
    X(Z_TOTALS_CHARGES, "SELECT gateway, method, currency, count(*), sum(amount), min(created_at)" \
                        " FROM charges WHERE " THIS_LANE " AND state = 'SUCCESS'"                  \
                        " AND z IS NOT DISTINCT FROM $1::bigint"                                   \
                        " GROUP BY gateway, method, currency ORDER BY gateway, method, currency")  \
    X(Z_TOTALS_REFUNDS,                                                                            \
      "SELECT c.gateway, c.method, c.currency, count(*), sum(r.amount), min(r.created_at)"         \
      " FROM refunds r JOIN charges c ON c.id = r.charge_id WHERE r." THIS_LANE                    \
      " AND r.state = 'SUCCESS' AND r.z IS NOT DISTINCT FROM $1::bigint"                           \
      " GROUP BY c.gateway, c.method, c.currency"                                                  \
      " ORDER BY c.gateway, c.method, c.currency")                                                 \
    /* The report names the store's own lane, or nothing is stored. */                             \
    X(Z_INSERT, "INSERT INTO z_reports (z, lane, from_at, to_at, hash, body, created_at)"          \
                " SELECT $1::bigint, $2::text, $3::bigint, $4::bigint, $5::text, $6::text,"        \
                " $7::bigint WHERE $2::text = current_setting('payterm.lane')")                    \
    X(Z_GET, "SELECT body FROM z_reports WHERE " THIS_LANE " AND z = $1::bigint")                  \
    /* What a close finds still open on the lane, charges and refunds                              \
     * together: queued (INIT, PROCESSING), PENDING, UNKNOWN, under review. */                     \
    X(Z_OPEN,                                                                                      \
      "SELECT count(*) FILTER (WHERE state IN ('INIT', 'PROCESSING')),"                            \
      " count(*) FILTER (WHERE state = 'PENDING'), count(*) FILTER (WHERE state = 'UNKNOWN'),"     \
      " count(*) FILTER (WHERE review = 1) FROM (SELECT state, review FROM charges "               \
      "WHERE " THIS_LANE " UNION ALL SELECT state, review FROM refunds WHERE " THIS_LANE ") o")    \
    /* A gateway's SUCCESS charges (refunds) of the whole shop - its bill                          \
     * is the merchant's - that became SUCCESS in [$2, $3), by their audit                         \
     * row (store_sqlite_sql.h says why). */                                                       \
    X(RECON_CHARGES,                                                                               \
      "SELECT * FROM (SELECT c.order_id, c.gateway_trade_no, c.amount, c.currency,"                \
      " (SELECT min(e.created_at) FROM charge_events e WHERE e.charge_id = c.id"                   \
      " AND e.refund_id IS NULL AND e.to_state = 'SUCCESS' AND e.refused = 0"                      \
      " AND (e.from_state IS NULL OR e.from_state <> 'SUCCESS')) AS at"                            \
      " FROM charges c WHERE c.gateway = $1::text AND c.state = 'SUCCESS'"                         \
      " AND c.updated_at >= $2::bigint) t WHERE at >= $2::bigint AND at < $3::bigint"              \
      " ORDER BY order_id")                                                                        \
    /* When the gateway's charges and refunds of the shop became final in                          \
     * [$2, $3), whatever their final state, by their first final audit row. */                    \
    X(RECON_FINAL_TIMES,                                                                           \
      "SELECT at FROM (SELECT (SELECT min(e.created_at) FROM charge_events e"                      \
      " WHERE e.charge_id = c.id AND e.refund_id IS NULL AND e.refused = 0"                        \
      " AND e.to_state IN ('SUCCESS', 'FAILED', 'CANCELED')) AS at FROM charges c"                 \
      " WHERE c.gateway = $1::text AND c.state IN ('SUCCESS', 'FAILED', 'CANCELED')"               \
      " AND c.updated_at >= $2::bigint UNION ALL SELECT (SELECT min(e.created_at)"                 \
      " FROM charge_events e WHERE e.charge_id = r.charge_id AND e.refund_id = r.refund_id"        \
      " AND e.refused = 0 AND e.to_state IN ('SUCCESS', 'FAILED')) FROM refunds r"                 \
      " JOIN charges c ON c.id = r.charge_id WHERE c.gateway = $1::text"                           \
      " AND r.state IN ('SUCCESS', 'FAILED') AND r.updated_at >= $2::bigint) t"                    \
      " WHERE at >= $2::bigint AND at < $3::bigint")                                               \
    X(RECON_REFUNDS,                                                                               \
      "SELECT * FROM (SELECT c.order_id, r.refund_id, c.gateway_trade_no, r.gateway_refund_no,"    \
      " r.amount, c.currency, (SELECT min(e.created_at) FROM charge_events e"                      \
      " WHERE e.charge_id = r.charge_id AND e.refund_id = r.refund_id AND e.to_state = 'SUCCESS'"  \
      " AND e.refused = 0 AND (e.from_state IS NULL OR e.from_state <> 'SUCCESS')) AS at"          \
      " FROM refunds r JOIN charges c ON c.id = r.charge_id WHERE c.gateway = $1::text"            \
      " AND r.state = 'SUCCESS' AND r.updated_at >= $2::bigint) t"                                 \
      " WHERE at >= $2::bigint AND at < $3::bigint ORDER BY refund_id")                            \
    X(RECON_INSERT, "INSERT INTO reconciliations (gateway, bill_date, state, body, created_at)"    \
                    " VALUES ($1::text, $2::text, $3::text, $4::text, $5::bigint)")                \
    X(RECON_LATEST, "SELECT body FROM reconciliations WHERE gateway = $1::text"                    \
                    " AND bill_date = $2::text ORDER BY id DESC LIMIT 1")                          \
    /* One run of a gateway and date at a time across the lanes: a                                 \
     * session lock, held over the download (no transaction is open then). */                      \
    X(RECON_LOCK, "SELECT pg_try_advisory_lock(73020628, hashtext($1::text))::integer")            \
    X(RECON_UNLOCK, "SELECT pg_advisory_unlock(73020628, hashtext($1::text))::integer")            \
    X(RECON_LATEST_DONE, "SELECT body FROM reconciliations WHERE gateway = $1::text"               \
                         " AND state = 'done' ORDER BY bill_date DESC, id DESC LIMIT 1")           \
    X(REFUND_STATS, "SELECT state, count(*) FROM refunds WHERE " ACTIVE " GROUP BY state")         \
    X(REFUND_STATS_REVIEW, "SELECT count(*) FROM refunds WHERE review = 1")                        \
    X(CHARGES_CLAIM, "SELECT id FROM charges WHERE id = ANY ($1::bigint[]) AND state = 'INIT'"     \
                     " FOR UPDATE SKIP LOCKED")                                                    \
    X(REFUNDS_CLAIM, "SELECT id FROM refunds WHERE id = ANY ($1::bigint[]) AND state = 'INIT'"     \
                     " FOR UPDATE SKIP LOCKED")                                                    \
    X(NOTIFY, "SELECT pg_notify('payterm_events', $1::text)")                                      \
    X(CHARGE_QUEUE_GUARDED,                                                                        \
      "WITH c AS (INSERT INTO charges (order_id, gateway, method, amount, currency, state,"        \
      " offline_mode, subject, payment_code, payment_method, customer, metadata, attempts,"        \
      " next_attempt_at, created_at, updated_at, lane, created_by, offline_accepted) SELECT"       \
      " $1::text, $2::text, $3::text, $4::bigint, $5::text, 'INIT', $6::text, $7::text, $8::text," \
      " $9::text, $10::text, $11::text, 0, $12::bigint, $13::bigint, $13,"                         \
      " current_setting('payterm.lane'), $19::text, 1 WHERE NOT EXISTS (SELECT 1"                  \
      " FROM idempotency_keys"                                                                     \
      " WHERE scope = $14::text AND key = $15::text) RETURNING id),"                               \
      " k AS (INSERT INTO idempotency_keys (scope, key, request_hash, completed_at,"               \
      " response_status, response_body, created_at, expires_at) SELECT $14, $15, $16::bytea,"      \
      " $13, 202, convert_to($17::text || c.id || $18::text, 'UTF8'), $13, $20::bigint FROM c)"    \
      " SELECT id FROM c")

enum {
#define PG__ENUM(id, sql) S_##id,
    PG_STMTS(PG__ENUM)
#undef PG__ENUM
        S__COUNT
};

#endif
