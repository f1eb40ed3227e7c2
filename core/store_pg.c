/*
 * store_pg.c - the store on PostgreSQL (libpq): one database shared by the
 * daemons of a shop's lanes (SPEC section 16).
 *
 * The same interface and the same invariants as store_sqlite.c, by the same
 * means, for many writers at once:
 *   - the idempotency lock is INSERT ... ON CONFLICT DO NOTHING on (scope,
 *     key): a second lane posting the same key waits on the unique index
 *     until the first commits, then finds the key taken and replays;
 *   - order_id and refund_id are UNIQUE, transitions are conditional
 *     UPDATEs, audit rows and events are written in the caller's
 *     transaction, every COMMIT is synchronous_commit = on;
 *   - fulfilment events take their numbers under an advisory lock held to
 *     the commit, so the shop's one feed is read in order by every lane
 *     (sql/pg/001_init.sql), and each commit with events NOTIFYs
 *     payterm_events.
 * Statements are prepared once per connection; parameters go as text
 * (bytea as binary).  A lost connection is reported as PT_EIO (503
 * storage_unavailable at the API) and re-established at the next call
 * outside a transaction.
 *
 * What only SQLite has answers as store.h says: no writer (PostgreSQL
 * batches commits itself), no backup (pg_dump, the server's replication),
 * no PRAGMAs, no WAL wipe.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "err.h"
#include "log.h"
#include "migrations.h"
#include "store_impl.h"
#include "store_rows.h"

#define ACTIVE "state IN ('INIT', 'PROCESSING', 'PENDING', 'UNKNOWN')"
/* What the offline limits count (SPEC 18, sql/pg/007): accepted offline,
 * not final - the index charges_lane_queue. */
#define ACCEPTED "offline_accepted = 1 AND " ACTIVE
/* The charges waiting in the queue: the index charges_queued (sql/pg/008). */
#define QUEUED "state = 'INIT' AND offline_accepted = 1"

/* A charge's and a refund's columns, as read_charge() and read_refund()
 * read them: store_rows.h, the same for both backends. */
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
#define PG_STMTS(X)                                                                                \
    X(KEY_GET, "SELECT request_hash, locked_at, locked_by, completed_at, response_status,"         \
               " response_body, order_id, expires_at FROM idempotency_keys"                        \
               " WHERE scope = $1::text AND key = $2::text")                                       \
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

static const char *const stmt_sql[S__COUNT] = {
#define PG__SQL(id, sql) sql,
    PG_STMTS(PG__SQL)
#undef PG__SQL
};

/* Charges queued, counted per currency: a lane's figures, what one
 * transaction queued, what a lost connection may have queued. */
enum { LANE_CURRENCIES = 8 };
struct queued {
    int64_t count;
    int n;
    char cur[LANE_CURRENCIES][4];
    int64_t total[LANE_CURRENCIES];
};

struct pg_store {
    struct pt_store_head head; /* first: store.c reads the operations there */
    PGconn *conn;
    unsigned char prepared[S__COUNT];
    int in_txn;
    int events_in_txn;
    void (*event_hook)(void *ctx);
    void *event_hook_ctx;
    char lane_id[64];
    struct lane_figures *figs; /* this lane's offline figures (NULL: none kept) */
    int figs_held;             /* its mutex held to this transaction's end */
    int64_t claim_timeout_ms;  /* another lane's send stays its own this long */
    uint64_t round_trips;      /* requests sent to the server so far */
    int backend_pid;           /* the server process of this connection (0: none yet) */
    int64_t backend_start;     /* and when it started (µs; 0: not known) */
    /* The charges this transaction queued so far (usually one): in doubt,
     * with the lane's figures, if its COMMIT's outcome is unknown. */
    struct queued txn_queued;
    int listening;          /* LISTEN payterm_events sent (pt_store_wait_events) */
    int session_ok;         /* session_setup() done on this server process */
    int schema_ok;          /* 1: schema checked (and migrated); -1: being checked */
    int readonly, existing; /* pt_store_options: migrate or not, once connected */
    char errmsg[256];
};

#define PG(st) ((struct pg_store *)(void *)(st))

/* Every request to the server and its answer: one round trip, counted. */
#define RT(st, call) ((st)->round_trips++, (call))

static const struct pt_store_ops pg_ops;

/* ---- parameters and results ---------------------------------------------- */

#define MAX_PARAMS 24

struct args {
    const char *v[MAX_PARAMS];
    int len[MAX_PARAMS];
    int fmt[MAX_PARAMS];
    char num[MAX_PARAMS][24];
    int n;
};

static void a_int(struct args *a, int64_t x)
{
    snprintf(a->num[a->n], sizeof a->num[0], "%lld", (long long)x);
    a->v[a->n] = a->num[a->n];
    a->len[a->n] = 0;
    a->fmt[a->n++] = 0;
}

/* Text as it is; NULL binds SQL NULL. */
static void a_text(struct args *a, const char *s)
{
    a->v[a->n] = s;
    a->len[a->n] = 0;
    a->fmt[a->n++] = 0;
}

/* As store_sqlite.c's bind_text: "" binds NULL too. */
static void a_opt(struct args *a, const char *s)
{
    a_text(a, s && *s ? s : NULL);
}

static void a_bytes(struct args *a, const void *p, size_t n)
{
    a->v[a->n] = p ? (const char *)p : "";
    a->len[a->n] = (int)n;
    a->fmt[a->n++] = 1;
}

/* Translates a failed result (or a lost connection) to a pt_err. */
static int xlate(struct pg_store *st, const PGresult *res)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? PQresultErrorMessage(res) : PQerrorMessage(st->conn);
    snprintf(st->errmsg, sizeof st->errmsg, "%s", msg && *msg ? msg : "unknown error");
    size_t l = strlen(st->errmsg);
    while (l && (st->errmsg[l - 1] == '\n' || st->errmsg[l - 1] == ' '))
        st->errmsg[--l] = '\0';
    if (PQstatus(st->conn) != CONNECTION_OK || !state)
        return PT_EIO; /* the server is gone: storage unavailable */
    if (!strcmp(state, "23505"))
        return PT_EEXIST;
    if (!strcmp(state, "PT001"))
        return PT_ERANGE; /* refund_exceeds_charge */
    if (!strcmp(state, "PT002"))
        return PT_ESTATE; /* charge_not_refundable */
    if (!strncmp(state, "23", 2) || !strncmp(state, "PT", 2) || !strncmp(state, "22", 2))
        return PT_EINVAL; /* a constraint, a trigger's refusal, bad data */
    if (!strcmp(state, "40001") || !strcmp(state, "40P01") || !strcmp(state, "55P03") ||
        !strcmp(state, "57014"))
        return PT_EBUSY; /* serialization, deadlock, lock or statement timeout */
    if (!strncmp(state, "08", 2) || !strncmp(state, "57P", 3) || !strcmp(state, "53300"))
        return PT_EIO; /* connection, shutdown, too many connections */
    if (!strcmp(state, "53100"))
        return PT_EFULL; /* disk full on the server */
    if (!strcmp(state, "42501"))
        return PT_EPERM;
    return PT_ESTORAGE;
}

static int session_setup(struct pg_store *st);
static int schema_ready(struct pg_store *st, char *errbuf, size_t errlen);

/* After a failed connection attempt, no connection of this process tries
 * again for a while - 1 s, doubling while the server stays gone, up to
 * 16 s: a request falls back at once instead of waiting out
 * connect_timeout (a host that drops packets costs seconds), and only one
 * attempt in a while pays it. */
#define RETRY_MS 1000
#define RETRY_MAX_MS 16000
static _Atomic int64_t down_until; /* monotonic ms; 0: no failure */
static _Atomic int64_t down_backoff;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void server_down(void)
{
    int64_t b = atomic_load(&down_backoff);
    b = b ? (b * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : b * 2) : RETRY_MS;
    atomic_store(&down_backoff, b);
    atomic_store(&down_until, mono_ms() + b);
}

/* The last failure to connect logged by this process: each reason once an
 * outage (a refusal that follows a lost network is logged too), not once a
 * try; forgotten when a connection gets in again. */
static pthread_mutex_t failure_lock = PTHREAD_MUTEX_INITIALIZER;
static char failure_logged[256]; /* pg_store.errmsg's size */

static void log_connect_failure(const char *why)
{
    pthread_mutex_lock(&failure_lock);
    if (strncmp(failure_logged, why, sizeof failure_logged - 1) != 0) {
        snprintf(failure_logged, sizeof failure_logged, "%s", why);
        pt_log_error("store: cannot connect to PostgreSQL: %s", why);
    }
    pthread_mutex_unlock(&failure_lock);
}

static void server_up(void)
{
    atomic_store(&down_backoff, 0);
    atomic_store(&down_until, 0);
    pthread_mutex_lock(&failure_lock);
    failure_logged[0] = '\0';
    pthread_mutex_unlock(&failure_lock);
}

/* Outside a transaction, a broken connection is re-established first, and
 * its session set up again: a new server process knows none of it, and a
 * commit must never run under the server's own synchronous_commit.  A
 * store opened before the server could be reached (connect_later) checks
 * the schema the first time. */
static int connected(struct pg_store *st)
{
    if (PQstatus(st->conn) == CONNECTION_OK && st->session_ok && st->schema_ok)
        return PT_OK;
    if (st->in_txn)
        return PT_EIO;
    if (PQstatus(st->conn) != CONNECTION_OK || !st->schema_ok) {
        if (mono_ms() < atomic_load(&down_until)) {
            snprintf(st->errmsg, sizeof st->errmsg,
                     "the PostgreSQL server could not be reached a moment ago");
            return PT_EIO;
        }
    }
    if (PQstatus(st->conn) != CONNECTION_OK) {
        PQreset(st->conn);
        memset(st->prepared, 0, sizeof st->prepared);
        st->session_ok = 0;
        st->listening = 0;
        if (PQstatus(st->conn) != CONNECTION_OK) {
            xlate(st, NULL);
            log_connect_failure(st->errmsg);
            server_down();
            return PT_EIO;
        }
        server_up();
    }
    int rc;
    if (!st->session_ok) {
        if ((rc = session_setup(st))) {
            pt_log_error("store: cannot set up the PostgreSQL session: %s", st->errmsg);
            return rc;
        }
        pt_log_info("store: %s PostgreSQL", st->schema_ok ? "reconnected to" : "connected to");
    }
    if (!st->schema_ok) {
        char err[384];
        st->schema_ok = -1; /* its statements pass through here */
        rc = schema_ready(st, err, sizeof err);
        st->schema_ok = rc == PT_OK;
        if (rc) {
            pt_log_error("store: %s", err);
            server_down(); /* not at every statement */
            return PT_EIO; /* the lane goes on as without a server */
        }
    }
    return PT_OK;
}

/*
 * Runs prepared statement id with a's parameters.  *res: the result (the
 * caller PQclear()s it) or NULL on failure, when the pt_err is returned.
 */
static int q(struct pg_store *st, int id, const struct args *a, PGresult **res)
{
    *res = NULL;
    int rc = connected(st);
    if (rc)
        return rc;
    if (!st->prepared[id]) {
        char name[8];
        snprintf(name, sizeof name, "s%d", id);
        PGresult *p = RT(st, PQprepare(st->conn, name, stmt_sql[id], 0, NULL));
        if (PQresultStatus(p) != PGRES_COMMAND_OK) {
            rc = xlate(st, p);
            pt_log_error("store: cannot prepare statement %d: %s", id, st->errmsg);
            PQclear(p);
            return rc;
        }
        PQclear(p);
        st->prepared[id] = 1;
    }
    char name[8];
    snprintf(name, sizeof name, "s%d", id);
    PGresult *r = RT(st, PQexecPrepared(st->conn, name, a ? a->n : 0, a ? a->v : NULL,
                                        a ? a->len : NULL, a ? a->fmt : NULL, 0));
    ExecStatusType s = PQresultStatus(r);
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
        rc = xlate(st, r);
        PQclear(r);
        return rc;
    }
    *res = r;
    return PT_OK;
}

/* Runs a statement for its row count: *changed (may be NULL). */
static int run(struct pg_store *st, int id, const struct args *a, int *changed)
{
    PGresult *r;
    int rc = q(st, id, a, &r);
    if (rc)
        return rc;
    if (changed)
        *changed = atoi(PQcmdTuples(r));
    PQclear(r);
    return PT_OK;
}

static int64_t col_int(const PGresult *r, int row, int col)
{
    return PQgetisnull(r, row, col) ? 0 : strtoll(PQgetvalue(r, row, col), NULL, 10);
}

static void col_text(const PGresult *r, int row, int col, char *dst, size_t cap)
{
    snprintf(dst, cap, "%s", PQgetisnull(r, row, col) ? "" : PQgetvalue(r, row, col));
}

/* One row, one integer (PT_ENOTFOUND when there is no row). */
static int scalar(struct pg_store *st, int id, const struct args *a, int64_t *out)
{
    PGresult *r;
    int rc = q(st, id, a, &r);
    if (rc)
        return rc;
    rc = PQntuples(r) ? PT_OK : PT_ENOTFOUND;
    if (rc == PT_OK)
        *out = col_int(r, 0, 0);
    PQclear(r);
    return rc;
}

static int exec_sql(struct pg_store *st, const char *sql)
{
    int rc = connected(st);
    if (rc)
        return rc;
    PGresult *r = RT(st, PQexec(st->conn, sql));
    ExecStatusType s = PQresultStatus(r);
    rc = (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) ? PT_OK : xlate(st, r);
    PQclear(r);
    return rc;
}

/* ---- the lane's offline figures ----------------------------------------------
 *
 * The offline limits bound what one lane queued (sql/pg/003, 004).  The
 * one-statement guarded charge checks them against figures this process
 * keeps for its lane - an upper bound of the lane's queued charges, their
 * number and their amount per currency - so that it neither reads nor
 * writes figures at the server:
 *   - read from the server when unknown - at first, after every new
 *     session - and again whenever the bound would refuse a charge; the
 *     lane's INIT and PROCESSING charges are counted (a first send that
 *     could not be sent comes back to INIT);
 *   - raised by each charge the guarded statement queues, under the lane's
 *     mutex, held across that statement;
 *   - forgotten when a write of any other path that can queue a charge of
 *     the lane ends: the usual path (its figures read in its transaction,
 *     exact, under the server's lane lock as well) and an INIT charge
 *     inserted (the fallback's move) hold the mutex from that statement to
 *     their commit or rollback.
 * Other lanes' daemons only take the lane's charges out of the queue (or
 * return a first send to it), so the bound holds for one daemon per lane
 * id, which is how lanes are run (SPEC 16); a second daemon under the same
 * lane id keeps a bound of its own and the two may together pass the
 * limits.  The usual path may hold rows a guarded statement of its lane
 * waits for (an order retried under another key), so it waits for the
 * mutex LANE_WAIT_MS at most and then answers PT_EBUSY, never a deadlock.
 */
enum { LANES_KEPT = 32, LANE_WAIT_MS = 1000, LANE_DOUBTS = 16 };

/*
 * What a connection lost mid-write may have queued.  A guarded statement,
 * or the COMMIT of a transaction that held the lane, was sent when the
 * connection went: the server process behind it may still commit it (its
 * statement waiting on a lock or flushing, or its request still on the
 * way to it), after the daemon has counted its lane again - which would
 * let one charge too many in.  So what it may have queued is counted in
 * the lane's figures, by the bound and by the usual path's exact count
 * alike, until that process is gone: the next count ends it
 * (pg_terminate_backend; the role may end its own sessions) and waits for
 * it, so that whatever it did is settled before the count is read.  The
 * process is known by its pid and its start, read from the server when
 * the session is set up (a pid may be reused).  One query, and only while
 * something is in doubt.  A transaction that held the lane's server lock
 * and queued nothing is ended the same way, so that it does not hold the
 * lock until the server's keepalives give up on it.  Doubts that cannot
 * be settled (the role cannot read pg_stat_activity, say) stay counted,
 * and the log says why; a daemon that restarts forgets them.
 */
struct doubt {
    int pid;
    int64_t started;
    struct queued q;
};

struct lane_figures {
    pthread_mutex_t mu;
    char lane[64];
    atomic_int known; /* 0: read them from the server before use */
    struct queued q;
    int ndoubts;
    struct doubt doubts[LANE_DOUBTS];
    struct queued stuck; /* in doubt, not followed: counted to the end */
    int doubts_lost;     /* not even that (more currencies than kept) */
    int settle_logged;
};

static struct lane_figures lanes_kept[LANES_KEPT];
static int lanes_used;
static pthread_mutex_t lanes_lock = PTHREAD_MUTEX_INITIALIZER;

/* The process's figures of lane (made on first use); NULL when LANES_KEPT
 * lanes are kept already (tests and benchmarks open many): its guarded
 * charges then take the usual path. */
static struct lane_figures *lane_figures_of(const char *lane)
{
    struct lane_figures *f = NULL;
    pthread_mutex_lock(&lanes_lock);
    for (int i = 0; i < lanes_used && !f; i++)
        if (strcmp(lanes_kept[i].lane, lane) == 0)
            f = &lanes_kept[i];
    if (!f && lanes_used < LANES_KEPT &&
        pthread_mutex_init(&lanes_kept[lanes_used].mu, NULL) == 0) {
        f = &lanes_kept[lanes_used++];
        snprintf(f->lane, sizeof f->lane, "%s", lane);
    }
    pthread_mutex_unlock(&lanes_lock);
    return f;
}

/* The slot of currency cur in q, made if there is room; -1 if not. */
static int queued_currency(struct queued *q, const char *cur)
{
    for (int i = 0; i < q->n; i++)
        if (strcmp(q->cur[i], cur) == 0)
            return i;
    if (q->n == LANE_CURRENCIES || strlen(cur) != 3)
        return -1;
    memcpy(q->cur[q->n], cur, 4);
    q->total[q->n] = 0;
    return q->n++;
}

/* count more charges of amount in cur: 0, or -1 when its currency has no
 * room (more currencies than kept). */
static int queued_add(struct queued *q, const char *cur, int64_t count, int64_t amount)
{
    int k = queued_currency(q, cur);
    if (k < 0)
        return -1;
    q->count += count;
    q->total[k] += amount;
    return 0;
}

/* Adds all of what to q: 0, or -1 as queued_add. */
static int queued_merge(struct queued *q, const struct queued *what)
{
    int rc = 0;
    for (int i = 0; i < what->n; i++)
        rc |= queued_add(q, what->cur[i], 0, what->total[i]);
    q->count += what->count;
    return rc;
}

/* A write of this connection whose outcome is unknown, which may have
 * queued what, or held the lane's lock (f->mu held): in doubt until its
 * server process is gone.  One that cannot be followed (its process not
 * known, or LANE_DOUBTS open already) stays counted until the daemon
 * restarts. */
static void doubt_add(struct pg_store *st, struct lane_figures *f, const struct queued *what)
{
    f->known = 0;
    if (f->ndoubts < LANE_DOUBTS && st->backend_pid && st->backend_start) {
        f->doubts[f->ndoubts++] =
            (struct doubt){.pid = st->backend_pid, .started = st->backend_start, .q = *what};
        pt_log_warn("store: lane \"%s\": the connection was lost mid-write; %lld charge(s) "
                    "counted as queued until server process %d has gone",
                    f->lane, (long long)what->count, st->backend_pid);
        return;
    }
    if (what->count == 0)
        return; /* nothing to count; its lock, if any, goes with the server's keepalives */
    if (queued_merge(&f->stuck, what))
        f->doubts_lost = 1;
    pt_log_error("store: lane \"%s\": the connection was lost mid-write and its server process "
                 "cannot be followed (%s): %lld charge(s) counted as queued until the daemon "
                 "restarts",
                 f->lane, f->ndoubts == LANE_DOUBTS ? "too many in doubt at once" : "not known",
                 (long long)what->count);
}

/* The same for one charge of amount in cur (f->mu held). */
static void doubt_one(struct pg_store *st, struct lane_figures *f, const char *cur, int64_t amount)
{
    struct queued one = {0};
    queued_add(&one, cur, 1, amount);
    doubt_add(st, f, &one);
}

/*
 * Whether doubt d's server process has gone, ending it first: 1 gone, 0
 * not (yet), or a pt_err.  Its row read by pid; another start means the
 * pid was given to a new process (gone); a start not shown (another role's
 * session) cannot be told (not gone).  On PostgreSQL 13 the end is not
 * waited for: gone when a later look finds no such process.
 */
static int doubt_gone(struct pg_store *st, const struct doubt *d)
{
    struct args a = {0};
    a_int(&a, d->pid);
    a_int(&a, d->started);
    PGresult *r;
    int waits = PQserverVersion(st->conn) >= 140000; /* else "t": only signalled */
    int rc = q(st, waits ? S_DOUBT_END : S_DOUBT_END_13, &a, &r);
    if (rc)
        return rc;
    int gone = PQntuples(r) == 0 || (!PQgetisnull(r, 0, 0) && col_int(r, 0, 0) != d->started) ||
               (waits && !PQgetisnull(r, 0, 1) && strcmp(PQgetvalue(r, 0, 1), "t") == 0);
    PQclear(r);
    return gone;
}

/*
 * Ends the server processes in doubt and drops those that have gone (f->mu
 * held).  One statement each, the activity snapshot cleared before each
 * (a transaction keeps it; a pid may be reused meanwhile), inside a
 * savepoint in a transaction (a refusal must not abort the caller's).
 * PT_OK - doubts that cannot be settled (the role may not read
 * pg_stat_activity or end its sessions) stay counted, and the log says
 * why - PT_EIO without a server, or PT_EBUSY when a lost write's charges
 * could not even be counted.
 */
static int doubts_settle(struct pg_store *st, struct lane_figures *f)
{
    if (f->doubts_lost) {
        snprintf(st->errmsg, sizeof st->errmsg,
                 "lane \"%s\": lost connections' charges in more currencies than kept; restart "
                 "the daemon",
                 f->lane);
        return PT_EBUSY;
    }
    if (f->ndoubts == 0)
        return PT_OK;
    int rc = st->in_txn ? exec_sql(st, "SAVEPOINT payterm_settle") : PT_OK;
    int kept = 0, i = 0;
    for (; rc == PT_OK && i < f->ndoubts; i++) {
        rc = exec_sql(st, "SELECT pg_stat_clear_snapshot()");
        int gone = rc ? rc : doubt_gone(st, &f->doubts[i]);
        if (gone < 0) {
            rc = gone;
            break;
        }
        if (!gone)
            f->doubts[kept++] = f->doubts[i];
        else
            pt_log_info("store: lane \"%s\": server process %d has gone; its charges are counted "
                        "from the server again",
                        f->lane, f->doubts[i].pid);
    }
    for (; i < f->ndoubts; i++) /* not looked at: kept */
        f->doubts[kept++] = f->doubts[i];
    f->ndoubts = kept;
    if (st->in_txn && PQstatus(st->conn) == CONNECTION_OK)
        exec_sql(st,
                 rc ? "ROLLBACK TO SAVEPOINT payterm_settle" : "RELEASE SAVEPOINT payterm_settle");
    if (rc == PT_EIO)
        return rc;
    if (rc) {
        if (!f->settle_logged)
            pt_log_error("store: lane \"%s\": cannot end the server processes of lost "
                         "connections (the role must read pg_stat_activity and may end its own "
                         "sessions): %s; their charges stay counted as queued",
                         f->lane, st->errmsg);
        f->settle_logged = 1;
        return PT_OK;
    }
    f->settle_logged = 0;
    return PT_OK;
}

/* What the doubts still open may have queued (f->mu held, doubts_settle
 * first): the number, and the amount in cur. */
static void doubts_in(const struct lane_figures *f, const char *cur, int64_t *count,
                      int64_t *amount)
{
    for (int i = 0; i <= f->ndoubts; i++) {
        const struct queued *q = i < f->ndoubts ? &f->doubts[i].q : &f->stuck;
        *count += q->count;
        for (int k = 0; k < q->n; k++)
            if (strcmp(q->cur[k], cur) == 0)
                *amount += q->total[k];
    }
}

/* Reads the lane's figures from the server (f->mu held), with what is in
 * doubt.  Settled first: a process seen done before the count is read has
 * its commit, if any, in that count. */
static int lane_recount(struct pg_store *st, struct lane_figures *f)
{
    f->known = 0;
    memset(&f->q, 0, sizeof f->q);
    int rc = doubts_settle(st, f);
    if (rc)
        return rc == PT_EBUSY ? PT_EAGAIN : rc; /* the usual path answers it */
    PGresult *r;
    if ((rc = q(st, S_LANE_BOUND, NULL, &r)))
        return rc;
    for (int i = 0; i < PQntuples(r); i++)
        if (queued_add(&f->q, PQgetvalue(r, i, 0), col_int(r, i, 1), col_int(r, i, 2))) {
            PQclear(r);
            return PT_EAGAIN; /* more currencies than kept: not known */
        }
    PQclear(r);
    for (int i = 0; i <= f->ndoubts; i++)
        if (queued_merge(&f->q, i < f->ndoubts ? &f->doubts[i].q : &f->stuck))
            return PT_EAGAIN;
    f->known = 1;
    return PT_OK;
}

/* Room for one more charge of amount in cur under the limits? */
static int lane_room(struct lane_figures *f, const char *cur, int64_t amount, int64_t max_count,
                     int64_t max_total)
{
    int k = queued_currency(&f->q, cur);
    return f->known && k >= 0 && f->q.count < max_count && f->q.total[k] + amount <= max_total;
}

/* Holds the lane's mutex to the end of this transaction (or of the
 * statement, outside one): PT_OK, or PT_EBUSY after LANE_WAIT_MS. */
static int lane_hold(struct pg_store *st)
{
    if (!st->figs || st->figs_held)
        return PT_OK;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += (long)(LANE_WAIT_MS % 1000) * 1000000L;
    t.tv_sec += LANE_WAIT_MS / 1000 + t.tv_nsec / 1000000000L;
    t.tv_nsec %= 1000000000L;
    int e;
    while ((e = pthread_mutex_timedlock(&st->figs->mu, &t)) == EINTR)
        ;
    if (e) {
        snprintf(st->errmsg, sizeof st->errmsg,
                 "another request of lane \"%s\" held its offline queue for %d ms", st->lane_id,
                 LANE_WAIT_MS);
        return PT_EBUSY;
    }
    st->figs_held = 1;
    return PT_OK;
}

/* The end of what lane_hold() held: the figures are read again next time. */
static void lane_release(struct pg_store *st)
{
    if (!st->figs_held)
        return;
    st->figs->known = 0;
    st->figs_held = 0;
    pthread_mutex_unlock(&st->figs->mu);
}

/*
 * What every session of the store needs, on its first connection and after
 * every reconnection: commits durable on return whatever the server's
 * default (SPEC section 16), READ COMMITTED whatever the role's default
 * (the lane's limits read a fresh snapshot, sql/pg/003), quiet notices and
 * its lane (payterm.lane: the lane the charges it queues count against,
 * sql/pg/003).
 */
static int session_setup(struct pg_store *st)
{
    static const char sql[] =
        "SELECT set_config('synchronous_commit', 'on', false),"
        " set_config('default_transaction_isolation', 'read committed', false),"
        " set_config('client_min_messages', 'warning', false),"
        " set_config('idle_in_transaction_session_timeout', '60s', false),"
        " set_config('payterm.lane', $1::text, false)";
    const char *lane = st->lane_id;
    PGresult *r = RT(st, PQexecParams(st->conn, sql, 1, NULL, &lane, NULL, NULL, 0));
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        int rc = xlate(st, r);
        PQclear(r);
        return rc;
    }
    PQclear(r);
    st->session_ok = 1;
    /* Its server process, to end it if this connection is lost mid-write
     * (PQbackendPID says 0 once it is; a pooler would give its own key):
     * the role sees its own sessions in pg_stat_activity. */
    st->backend_pid = 0;
    st->backend_start = 0;
    r = RT(st, PQexec(st->conn, "SELECT pg_backend_pid(), (extract(epoch FROM backend_start) "
                                "* 1000000)::bigint FROM pg_stat_activity"
                                " WHERE pid = pg_backend_pid()"));
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
        (int)col_int(r, 0, 0) != PQbackendPID(st->conn)) {
        /* A pooler answered for the server (its own key): the process is
         * not this connection's for good, and must never be ended. */
        static atomic_int pooler_logged;
        if (!atomic_exchange(&pooler_logged, 1))
            pt_log_warn("store: a connection pooler sits between this lane and PostgreSQL: a "
                        "write lost on the way stays counted in the lane's offline figures "
                        "until the daemon restarts");
    } else if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
        st->backend_pid = (int)col_int(r, 0, 0);
        st->backend_start = col_int(r, 0, 1);
    } else if (PQstatus(st->conn) != CONNECTION_OK) {
        int rc = xlate(st, r);
        PQclear(r);
        st->session_ok = 0;
        return rc;
    }
    PQclear(r);
    if (st->figs) /* a new server, or a database restored: read them again */
        atomic_store(&st->figs->known, 0);
    return PT_OK;
}

/* ---- open, schema, transactions ------------------------------------------ */

static const char *pg_errmsg(struct pt_store *s)
{
    return PG(s)->errmsg[0] ? PG(s)->errmsg : PQerrorMessage(PG(s)->conn);
}

static int pg_schema_version(struct pt_store *s, int *version)
{
    struct pg_store *st = PG(s);
    *version = 0;
    int rc = connected(st);
    if (rc)
        return rc;
    PGresult *r = RT(st, PQexec(st->conn, "SELECT coalesce(max(version), 0) FROM payterm_schema"));
    if (PQresultStatus(r) == PGRES_TUPLES_OK) {
        *version = (int)col_int(r, 0, 0);
        PQclear(r);
        return PT_OK;
    }
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    rc = state && !strcmp(state, "42P01") ? PT_OK : xlate(st, r); /* no table yet: 0 */
    PQclear(r);
    return rc;
}

/* Applies sql/pg/ up to version, each migration in one transaction with its
 * row in payterm_schema, under an advisory lock: lanes starting together
 * apply each migration once. */
static int pg_migrate_to(struct pt_store *s, int version)
{
    struct pg_store *st = PG(s);
    int cur = 0;
    int rc = exec_sql(st, "CREATE TABLE IF NOT EXISTS payterm_schema ("
                          " version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                          " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())");
    if (rc || (rc = pg_schema_version(s, &cur)))
        return rc;
    if (cur > pt_pg_migrations_count)
        return PT_ETOONEW;
    for (int v = cur + 1; v <= version && v <= pt_pg_migrations_count; v++) {
        const struct pt_migration *m = &pt_pg_migrations[v - 1];
        if ((rc = exec_sql(st, "BEGIN")))
            return rc;
        if ((rc = exec_sql(st, "SELECT pg_advisory_xact_lock(7302062520030)"))) {
            exec_sql(st, "ROLLBACK");
            return rc;
        }
        int now_at = 0;
        PGresult *r =
            RT(st, PQexec(st->conn, "SELECT coalesce(max(version), 0) FROM payterm_schema"));
        if (PQresultStatus(r) == PGRES_TUPLES_OK)
            now_at = (int)col_int(r, 0, 0);
        PQclear(r);
        if (now_at >= v) { /* another lane applied it meanwhile */
            exec_sql(st, "COMMIT");
            continue;
        }
        char row[160];
        snprintf(row, sizeof row, "INSERT INTO payterm_schema (version, name) VALUES (%d, '%s')", v,
                 m->name);
        if ((rc = exec_sql(st, m->sql)) || (rc = exec_sql(st, row)) ||
            (rc = exec_sql(st, "COMMIT"))) {
            pt_log_error("store: PostgreSQL migration %s failed: %s", m->name, st->errmsg);
            exec_sql(st, "ROLLBACK");
            return rc;
        }
        pt_log_info("store: applied PostgreSQL migration %s", m->name);
    }
    return PT_OK;
}

/* Reads the password file (first line), refusing one others may read. */
static int read_password(const char *path, char *pw, size_t cap, char *errbuf, size_t errlen)
{
    struct stat sb;
    FILE *f = fopen(path, "r");
    if (!f || fstat(fileno(f), &sb) != 0) {
        if (errbuf)
            snprintf(errbuf, errlen, "store.password_file %s: %s", path, strerror(errno));
        if (f)
            fclose(f);
        return PT_ECONFIG;
    }
    if (sb.st_mode & 077) {
        fclose(f);
        if (errbuf)
            snprintf(errbuf, errlen,
                     "store.password_file %s: mode %03o lets others read it; chmod 600 it", path,
                     (unsigned)(sb.st_mode & 0777));
        return PT_ECONFIG;
    }
    if (!fgets(pw, (int)cap, f)) {
        pw[0] = '\0';
    }
    fclose(f);
    pw[strcspn(pw, "\r\n")] = '\0';
    if (!pw[0]) {
        if (errbuf)
            snprintf(errbuf, errlen, "store.password_file %s is empty", path);
        return PT_ECONFIG;
    }
    return PT_OK;
}

static void wipe(void *p, size_t n)
{
    volatile unsigned char *v = p;
    while (n--)
        *v++ = 0;
}

/*
 * The server's answers that no wait mends: no such role or a wrong
 * password (28000, 28P01), no such database (3D000), no right to connect
 * to it (42501) - a mistake in the lane's configuration.  Anything else
 * (too many clients, starting up, a pooler whose server is gone, no
 * answer) is an outage.  libpq keeps the message of every try of one
 * connection (each host, TLS then plain): a refusal only when every try
 * the server answered was refused - "hostssl" only in pg_hba.conf, a full
 * server: 53300 for the TLS try, 28000 for the plain one, an outage.
 * Returns the first refused try's line, or NULL.
 */
static const char *refusal_in(const char *msg)
{
    static const char *const codes[] = {"28000", "28P01", "3D000", "42501"};
    const char *first = NULL;
    for (const char *line = msg; *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        /* A verbose server line: "...failed: FATAL:  28P01: password ..." */
        for (size_t k = 0; k + 10 <= n; k++) {
            const char *c = line + k + 3;
            if (memcmp(line + k, ":  ", 3) != 0 || c[5] != ':' || c[6] != ' ')
                continue;
            if (strspn(c, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ") != 5)
                continue;
            int refusal = 0;
            for (size_t r = 0; r < sizeof codes / sizeof *codes; r++)
                refusal |= memcmp(c, codes[r], 5) == 0;
            if (!refusal)
                return NULL; /* one try met something waiting mends */
            if (!first)
                first = line;
            break;
        }
        line += n + (end != NULL);
    }
    return first;
}

/*
 * After a connection that failed quickly (a server that answers answers
 * at once; one that took about connect_timeout met no one: no second
 * wait), once more, with the SQLSTATE in the server's messages (libpq
 * leaves it out by default, and the words are in the server's language).
 * Returns that connection when it got in (the server was just starting);
 * else NULL, with why set to the server's refusal if it was one, "" if not.
 */
static PGconn *connect_again(const char *const *keys, const char *const *vals, char *why,
                             size_t cap)
{
    why[0] = '\0';
    PGconn *c = PQconnectStartParams(keys, vals, 1);
    if (!c)
        return NULL;
    PQsetErrorVerbosity(c, PQERRORS_VERBOSE);
    int64_t deadline = mono_ms() + 5000;
    PostgresPollingStatusType ps = PGRES_POLLING_WRITING;
    while (PQstatus(c) != CONNECTION_BAD && ps != PGRES_POLLING_OK && ps != PGRES_POLLING_FAILED) {
        struct pollfd p = {.fd = PQsocket(c),
                           .events = ps == PGRES_POLLING_READING ? POLLIN : POLLOUT};
        int64_t left = deadline - mono_ms();
        if (p.fd < 0 || left <= 0)
            break;
        int n = poll(&p, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        ps = PQconnectPoll(c);
    }
    if (PQstatus(c) == CONNECTION_OK) {
        PQsetErrorVerbosity(c, PQERRORS_DEFAULT);
        return c;
    }
    const char *line = ps == PGRES_POLLING_FAILED ? refusal_in(PQerrorMessage(c)) : NULL;
    if (line) {
        snprintf(why, cap, "%s", line);
        why[strcspn(why, "\n")] = '\0';
    } else if (ps == PGRES_POLLING_FAILED && PQconnectionNeedsPassword(c)) {
        /* libpq's own refusal, before the server's: "fe_sendauth: no
         * password supplied" */
        snprintf(why, cap, "the server asks for a password and none is given");
    }
    PQfinish(c);
    return NULL;
}

/* The server's warnings (client_min_messages) to the log, not stderr. */
static void pg_notice(void *arg, const char *msg)
{
    (void)arg;
    int n = (int)strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        n--;
    pt_log_warn("store: PostgreSQL says: %.*s", n, msg);
}

static void pg_close(struct pt_store *s)
{
    struct pg_store *st = PG(s);
    if (st->conn)
        PQfinish(st->conn); /* a transaction still open is rolled back */
    lane_release(st);
    free(st);
}

int pt_store_pg_open(const struct pt_store_options *opt, struct pt_store **out, char *errbuf,
                     size_t errlen)
{
    *out = NULL;
    if (!opt->dsn || !*opt->dsn) {
        if (errbuf)
            snprintf(errbuf, errlen, "store.dsn: required with store.backend \"postgresql\"");
        return PT_ECONFIG;
    }
    struct pg_store *st = calloc(1, sizeof *st);
    if (!st) {
        if (errbuf)
            snprintf(errbuf, errlen, "out of memory");
        return PT_ENOMEM;
    }
    st->head.ops = &pg_ops;
    snprintf(st->lane_id, sizeof st->lane_id, "%s", opt->lane_id ? opt->lane_id : "");
    st->figs = lane_figures_of(st->lane_id);
    st->claim_timeout_ms = opt->claim_timeout_ms > 0 ? opt->claim_timeout_ms : 60000;
    char pw[256] = "";
    int rc;
    if (opt->password_file &&
        (rc = read_password(opt->password_file, pw, sizeof pw, errbuf, errlen))) {
        wipe(pw, sizeof pw);
        free(st);
        return rc;
    }
    /* The timeouts first, so that the DSN may set its own: a server gone
     * must cost a request seconds, not the kernel's TCP patience - at
     * connect, and on a connection whose host stopped answering (a switch
     * without power): tcp_user_timeout gives up on data unacknowledged for
     * 4 s, the keepalives find an idle connection dead in about 20 s.  (A
     * slow server still acknowledges: only an unreachable host trips it.) */
    const char *keys[] = {"connect_timeout",     "tcp_user_timeout",        "keepalives_idle",
                          "keepalives_interval", "keepalives_count",        "dbname",
                          "application_name",    pw[0] ? "password" : NULL, NULL};
    const char *vals[] = {"5", "4000", "10", "3", "3", opt->dsn, "payterm", pw[0] ? pw : NULL,
                          NULL};
    int64_t t0 = mono_ms();
    st->conn = PQconnectdbParams(keys, vals, 1);
    char why[384] = "";
    if (st->conn && PQstatus(st->conn) != CONNECTION_OK && mono_ms() - t0 < 4000) {
        PGconn *again = connect_again(keys, vals, why, sizeof why);
        if (again) {
            PQfinish(st->conn);
            st->conn = again;
        }
    }
    wipe(pw, sizeof pw);
    if (st->conn) /* kept by PQreset */
        PQsetNoticeProcessor(st->conn, pg_notice, NULL);
    st->readonly = opt->readonly;
    st->existing = opt->existing;
    if (why[0]) {
        if (errbuf)
            snprintf(errbuf, errlen,
                     "store.dsn: the PostgreSQL server refused this lane (check the DSN's user "
                     "and database, and store.password_file): %s",
                     why);
        pg_close((struct pt_store *)(void *)st);
        return PT_ECONFIG;
    }
    if (st->conn && PQstatus(st->conn) != CONNECTION_OK && opt->connect_later) {
        xlate(st, NULL);
        log_connect_failure(st->errmsg); /* the reason, once: the lane goes on without */
        server_down();
        *out = (struct pt_store *)(void *)st; /* connects at its first use (connected) */
        return PT_OK;
    }
    if (!st->conn || PQstatus(st->conn) != CONNECTION_OK) {
        if (errbuf) {
            char msg[384];
            snprintf(msg, sizeof msg, "%s", st->conn ? PQerrorMessage(st->conn) : "out of memory");
            msg[strcspn(msg, "\n")] = '\0';
            snprintf(errbuf, errlen, "cannot connect to PostgreSQL (store.dsn): %s", msg);
        }
        pg_close((struct pt_store *)(void *)st);
        return PT_EIO;
    }
    server_up(); /* this process reaches it again */
    /* Every commit durable on return (SPEC section 16), whatever the
     * server's default.  (No lock_timeout is set: a statement waits for
     * the locks it needs as long as the server's own setting lets it.) */
    if ((rc = session_setup(st))) {
        if (errbuf)
            snprintf(errbuf, errlen, "cannot configure the PostgreSQL session: %s", st->errmsg);
        pg_close((struct pt_store *)(void *)st);
        return rc;
    }
    st->schema_ok = -1;
    if ((rc = schema_ready(st, errbuf, errlen))) {
        pg_close((struct pt_store *)(void *)st);
        return rc;
    }
    st->schema_ok = 1;
    *out = (struct pt_store *)(void *)st;
    return PT_OK;
}

/* The schema's version known to this payterm, migrated up to the newest
 * unless the store was opened readonly or existing. */
static int schema_ready(struct pg_store *st, char *errbuf, size_t errlen)
{
    int version = 0;
    int rc = pg_schema_version((struct pt_store *)(void *)st, &version);
    if (rc) {
        if (errbuf)
            snprintf(errbuf, errlen, "cannot read the PostgreSQL schema version: %s", st->errmsg);
        return rc;
    }
    if (version > pt_pg_migrations_count) {
        if (errbuf)
            snprintf(errbuf, errlen,
                     "the PostgreSQL database has schema version %d but this payterm only "
                     "knows up to %d: upgrade payterm on this lane",
                     version, pt_pg_migrations_count);
        return PT_ETOONEW;
    }
    if (!st->readonly && !st->existing &&
        (rc = pg_migrate_to((struct pt_store *)(void *)st, pt_pg_migrations_count))) {
        if (errbuf)
            snprintf(errbuf, errlen, "cannot migrate the PostgreSQL database to version %d: %s",
                     pt_pg_migrations_count, st->errmsg);
        return rc;
    }
    return PT_OK;
}

static int pg_pragma_int(struct pt_store *s, const char *name, int *value)
{
    (void)s;
    (void)name;
    (void)value;
    return PT_EUNSUPPORTED;
}

static void pg_set_event_hook(struct pt_store *s, void (*fn)(void *ctx), void *ctx)
{
    PG(s)->event_hook = fn;
    PG(s)->event_hook_ctx = ctx;
}

static int pg_in_txn(const struct pt_store *s)
{
    return ((const struct pg_store *)(const void *)s)->in_txn;
}

static int pg_begin(struct pt_store *s)
{
    struct pg_store *st = PG(s);
    if (st->in_txn)
        return PT_EINVAL;
    int rc = exec_sql(st, "BEGIN");
    if (rc)
        return rc;
    st->in_txn = 1;
    st->events_in_txn = 0;
    memset(&st->txn_queued, 0, sizeof st->txn_queued);
    return PT_OK;
}

static int pg_commit(struct pt_store *s)
{
    struct pg_store *st = PG(s);
    if (!st->in_txn)
        return PT_EINVAL;
    PGresult *r = RT(st, PQexec(st->conn, "COMMIT"));
    int rc = PQresultStatus(r) == PGRES_COMMAND_OK ? PT_OK : xlate(st, r);
    /* "COMMIT" of a transaction that failed answers ROLLBACK. */
    if (rc == PT_OK && strcmp(PQcmdStatus(r), "COMMIT") != 0) {
        snprintf(st->errmsg, sizeof st->errmsg, "the transaction was rolled back");
        rc = PT_ESTORAGE;
    }
    PQclear(r);
    st->in_txn = 0;
    if (rc == PT_EIO && st->figs_held) /* the COMMIT may still go through */
        doubt_add(st, st->figs, &st->txn_queued);
    lane_release(st);
    if (rc == PT_OK && st->events_in_txn && st->event_hook)
        st->event_hook(st->event_hook_ctx);
    st->events_in_txn = 0;
    return rc;
}

static int pg_rollback(struct pt_store *s)
{
    struct pg_store *st = PG(s);
    if (!st->in_txn)
        return PT_OK;
    st->in_txn = 0;
    st->events_in_txn = 0;
    if (PQstatus(st->conn) == CONNECTION_OK) /* else dropped with the connection */
        PQclear(RT(st, PQexec(st->conn, "ROLLBACK")));
    /* Lost before or during the ROLLBACK: its server process may sit in
     * the transaction, the lane's lock held, until ended. */
    if (PQstatus(st->conn) != CONNECTION_OK && st->figs_held)
        doubt_add(st, st->figs, &st->txn_queued);
    lane_release(st);
    return PT_OK;
}

/* The writer and its group commit are SQLite's; PostgreSQL commits each
 * connection's transaction itself (and groups concurrent commits). */
static void pg_attach(struct pt_store *s, struct pt_store_writer *w)
{
    (void)s;
    (void)w;
}

static void pg_defer_commit(struct pt_store *s, struct pt_store_commit *ticket)
{
    (void)s;
    (void)ticket;
}

static int pg_commit_deferred(const struct pt_store *s)
{
    (void)s;
    return 0;
}

static int pg_backup(struct pt_store *s, const char *dest)
{
    (void)dest;
    snprintf(PG(s)->errmsg, sizeof PG(s)->errmsg,
             "backups of the PostgreSQL store are the server's (pg_dump, replication)");
    return PT_EUNSUPPORTED;
}

static void pg_note_erased(struct pt_store *s)
{
    (void)s;
}

static int pg_checkpoint_truncate(struct pt_store *s)
{
    (void)s;
    return PT_OK;
}

/* True while the server answers. */
static int pg_writable(struct pt_store *s)
{
    struct pg_store *st = PG(s);
    if (st->in_txn)
        return PQstatus(st->conn) == CONNECTION_OK;
    return exec_sql(st, "SELECT 1") == PT_OK;
}

/* ---- idempotency keys ------------------------------------------------------ */

static int pg_key_get(struct pt_store *s, const char *scope, const char *key,
                      struct pt_key_row *out)
{
    struct pg_store *st = PG(s);
    struct args a = {0};
    a_text(&a, scope);
    a_text(&a, key);
    PGresult *r;
    int rc = q(st, S_KEY_GET, &a, &r);
    if (rc)
        return rc;
    if (!PQntuples(r)) {
        PQclear(r);
        return PT_ENOTFOUND;
    }
    memset(out, 0, sizeof *out);
    size_t n = 0;
    unsigned char *h = PQunescapeBytea((const unsigned char *)PQgetvalue(r, 0, 0), &n);
    if (h && n == 32)
        memcpy(out->request_hash, h, 32);
    PQfreemem(h);
    out->locked_at = col_int(r, 0, 1);
    out->locked_by = col_int(r, 0, 2);
    out->completed_at = col_int(r, 0, 3);
    out->response_status = (int)col_int(r, 0, 4);
    rc = PT_OK;
    if (!PQgetisnull(r, 0, 5)) {
        unsigned char *b = PQunescapeBytea((const unsigned char *)PQgetvalue(r, 0, 5), &n);
        out->response_body = b ? malloc(n + 1) : NULL;
        if (!out->response_body) {
            rc = PT_ENOMEM;
        } else {
            memcpy(out->response_body, b, n);
            out->response_body[n] = '\0';
            out->response_len = n;
        }
        PQfreemem(b);
    }
    col_text(r, 0, 6, out->order_id, sizeof out->order_id);
    out->expires_at = col_int(r, 0, 7);
    PQclear(r);
    return rc;
}

static int pg_key_insert(struct pt_store *s, const char *scope, const char *key,
                         const unsigned char hash[32], int64_t instance, int64_t now,
                         int64_t expires_at)
{
    struct args a = {0};
    a_text(&a, scope);
    a_text(&a, key);
    a_bytes(&a, hash, 32);
    a_int(&a, now);
    a_int(&a, instance);
    a_int(&a, expires_at);
    PGresult *r;
    int rc = q(PG(s), S_KEY_INSERT, &a, &r);
    if (rc)
        return rc;
    rc = PQntuples(r) == 1 ? PT_OK : PT_EEXIST;
    PQclear(r);
    return rc;
}

static int pg_key_relock(struct pt_store *s, const char *scope, const char *key,
                         int64_t old_locked_at, int64_t old_locked_by, int64_t instance,
                         int64_t now)
{
    struct args a = {0};
    a_text(&a, scope);
    a_text(&a, key);
    a_int(&a, old_locked_at);
    a_int(&a, old_locked_by);
    a_int(&a, now);
    a_int(&a, instance);
    int n = 0;
    int rc = run(PG(s), S_KEY_RELOCK, &a, &n);
    return rc ? rc : n == 1 ? PT_OK : PT_EEXIST;
}

/*
 * Many lanes write at once, so "found free and nobody else writes until
 * this transaction ends" (SQLite's one writer) does not hold here: the
 * lock is taken now, by the seed pattern's INSERT ... ON CONFLICT DO
 * NOTHING.  A concurrent transaction inserting the same key waits on the
 * unique index until this one ends, then finds the key taken.
 */
static int pg_key_take_later(struct pt_store *s, const char *scope, const char *key,
                             const unsigned char hash[32], int64_t instance, int64_t now,
                             int64_t expires_at, struct pt_key_lock *lock)
{
    int rc = pg_key_insert(s, scope, key, hash, instance, now, expires_at);
    if (rc)
        return rc;
    memset(lock, 0, sizeof *lock);
    lock->at = now;
    lock->by = instance;
    memcpy(lock->hash, hash, 32);
    lock->expires_at = expires_at;
    return PT_OK;
}

static int pg_key_set_order(struct pt_store *s, const char *scope, const char *key,
                            struct pt_key_lock *lock, const char *order_id)
{
    struct args a = {0};
    a_text(&a, scope);
    a_text(&a, key);
    a_opt(&a, order_id);
    a_int(&a, lock->at);
    a_int(&a, lock->by);
    int n = 0;
    int rc = run(PG(s), S_KEY_SET_ORDER, &a, &n);
    return rc ? rc : n == 1 ? PT_OK : PT_ESTATE;
}

static int pg_key_complete(struct pt_store *s, const char *scope, const char *key,
                           struct pt_key_lock *lock, int status, const char *body, size_t len,
                           int64_t now)
{
    struct args a = {0};
    a_text(&a, scope);
    a_text(&a, key);
    a_int(&a, status);
    a_bytes(&a, body ? body : "", len);
    a_int(&a, now);
    a_int(&a, lock->at);
    a_int(&a, lock->by);
    int n = 0;
    int rc = run(PG(s), S_KEY_COMPLETE, &a, &n);
    return rc ? rc : n == 1 ? PT_OK : PT_ESTATE;
}

static int pg_key_delete(struct pt_store *s, const char *scope, const char *key,
                         struct pt_key_lock *lock)
{
    struct args a = {0};
    a_text(&a, scope);
    a_text(&a, key);
    a_int(&a, lock->at);
    a_int(&a, lock->by);
    int n = 0;
    int rc = run(PG(s), S_KEY_DELETE, &a, &n);
    return rc ? rc : n == 1 ? PT_OK : PT_ESTATE;
}

static int pg_key_delete_expired(struct pt_store *s, const char *scope, const char *key,
                                 int64_t now)
{
    struct args a = {0};
    a_text(&a, scope);
    a_text(&a, key);
    a_int(&a, now);
    return run(PG(s), S_KEY_DELETE_EXPIRED, &a, NULL);
}

static int pg_key_sweep(struct pt_store *s, int64_t now, int *count)
{
    struct args a = {0};
    a_int(&a, now);
    int n = 0;
    int rc = run(PG(s), S_KEY_SWEEP, &a, &n);
    if (count)
        *count = rc ? 0 : n;
    return rc;
}

/* ---- charges --------------------------------------------------------------- */

static int pg_charge_insert(struct pt_store *s, struct pt_charge *c, int64_t now)
{
    struct args a = {0};
    a_text(&a, c->order_id);
    a_text(&a, c->gateway);
    a_text(&a, c->method);
    a_int(&a, c->amount);
    a_text(&a, c->currency);
    a_text(&a, pt_state_name(c->state));
    a_text(&a, pt_offline_mode_name(c->offline));
    a_opt(&a, c->subject);
    a_opt(&a, c->payment_code);
    a_opt(&a, c->payment_method);
    a_opt(&a, c->customer);
    a_opt(&a, c->metadata);
    a_int(&a, c->next_attempt_at);
    a_int(&a, now);
    a_int(&a, c->offline_accepted != 0);
    struct pg_store *st = PG(s);
    /* A charge queued by this path: the lane's figures are read again once
     * it is committed (or not).  One sent online at once is not queued. */
    int queues = c->state == PT_STATE_INIT && c->offline_accepted;
    int rc = queues ? lane_hold(st) : PT_OK;
    if (rc == PT_OK && !st->in_txn)
        rc = connected(st); /* from here on, a failure may leave it queued */
    int sent = rc == PT_OK;
    PGresult *r = NULL;
    if (sent && (rc = q(st, S_CHARGE_INSERT, &a, &r)) == PT_OK) {
        rc = PQntuples(r) == 1 ? PT_OK : PT_EEXIST;
        if (rc == PT_OK) {
            c->id = col_int(r, 0, 0);
            c->created_at = c->updated_at = now;
            if (queues && st->in_txn && st->figs)
                queued_add(&st->txn_queued, c->currency, 1, c->amount);
        }
        PQclear(r);
    } else if (sent && rc == PT_EIO && queues && !st->in_txn && st->figs_held) {
        doubt_one(st, st->figs, c->currency, c->amount); /* its autocommit may go through */
    }
    if (!st->in_txn)
        lane_release(st);
    return rc;
}

/* One row of a result, as store_rows.c reads it. */
struct pg_row {
    const PGresult *r;
    int row;
};

static int64_t pg_int_at(const void *p, int col)
{
    const struct pg_row *x = p;
    return col_int(x->r, x->row, col);
}

static const char *pg_text_at(const void *p, int col)
{
    const struct pg_row *x = p;
    return PQgetisnull(x->r, x->row, col) ? NULL : PQgetvalue(x->r, x->row, col);
}

static void read_row(const PGresult *r, int i, const struct pt_row_kind *k, void *obj)
{
    struct pg_row x = {r, i};
    struct pt_row_src src = {pg_int_at, pg_text_at, &x};
    pt_row_read(k, &src, obj);
}

static void read_charge(const PGresult *r, int i, struct pt_charge *c)
{
    read_row(r, i, &pt_charge_row, c);
}

/* Runs a statement that returns charges into rows[]: *more when it found
 * more than max (the statements ask for max + 1 where *more matters). */
static int read_charges(struct pg_store *st, int id, const struct args *a, int max,
                        struct pt_charge *rows, int *n, int *more)
{
    PGresult *r;
    *n = 0;
    if (more)
        *more = 0;
    int rc = q(st, id, a, &r);
    if (rc)
        return rc;
    int got = PQntuples(r);
    for (int i = 0; i < got && i < max; i++)
        read_charge(r, i, &rows[(*n)++]);
    if (more)
        *more = got > max;
    PQclear(r);
    return PT_OK;
}

static int one_charge(struct pg_store *st, int id, const struct args *a, struct pt_charge *out)
{
    int n = 0;
    int rc = read_charges(st, id, a, 1, out, &n, NULL);
    return rc ? rc : n ? PT_OK : PT_ENOTFOUND;
}

static int pg_charge_get(struct pt_store *s, const char *order_id, struct pt_charge *out)
{
    struct args a = {0};
    a_text(&a, order_id);
    return one_charge(PG(s), S_CHARGE_GET, &a, out);
}

static int pg_charge_get_by_id(struct pt_store *s, int64_t id, struct pt_charge *out)
{
    struct args a = {0};
    a_int(&a, id);
    return one_charge(PG(s), S_CHARGE_GET_BY_ID, &a, out);
}

static void args_patch(struct args *a, int64_t id, const struct pt_charge_patch *p, int64_t now)
{
    static const struct pt_charge_patch none = PT_CHARGE_PATCH_NONE;
    if (!p)
        p = &none;
    a_int(a, id);
    a_int(a, now);
    a_text(a, p->gateway_trade_no); /* NULL keeps; "" is stored as it is */
    a_text(a, p->action_url);
    a_text(a, p->error_code);
    a_text(a, p->error_message);
    a_int(a, p->attempts_add);
    a_int(a, p->next_attempt_at);
    a_int(a, p->first_sent_at);
}

/* '{INIT,PROCESSING}' for a mask of states. */
static void state_array(unsigned mask, char *buf, size_t cap)
{
    size_t o = (size_t)snprintf(buf, cap, "{");
    for (int i = 0; i < PT_STATE__COUNT; i++)
        if (mask & (1u << i))
            o += (size_t)snprintf(buf + o, cap - o, "%s%s", o > 1 ? "," : "",
                                  pt_state_name((enum pt_state)i));
    snprintf(buf + o, cap - o, "}");
}

static int transition(struct pg_store *st, int id_stmt, int64_t id, unsigned from_mask,
                      enum pt_state to, const struct pt_charge_patch *patch, int64_t now)
{
    char states[128];
    state_array(from_mask, states, sizeof states);
    struct args a = {0};
    args_patch(&a, id, patch, now);
    a_text(&a, pt_state_name(to));
    a_text(&a, states);
    a_opt(&a, st->lane_id);
    int n = 0;
    int rc = run(st, id_stmt, &a, &n);
    return rc ? rc : n == 1 ? PT_OK : PT_ESTATE;
}

#define PT_FROM_MASKS (1u << PT_STATE__COUNT)

static int pg_charge_transition(struct pt_store *s, int64_t id, unsigned from_mask,
                                enum pt_state to, const struct pt_charge_patch *patch, int64_t now)
{
    from_mask &= PT_FROM_MASKS - 1;
    if (!from_mask || (unsigned)to >= PT_STATE__COUNT)
        return PT_EINVAL;
    return transition(PG(s), S_CHARGE_TRANSITION, id, from_mask, to, patch, now);
}

static int pg_charge_accept_offline(struct pt_store *s, const struct pt_charge *c, int64_t now)
{
    struct pg_store *st = PG(s);
    struct args a = {0};
    a_int(&a, c->id);
    a_int(&a, now);
    /* It joins the lane's figures: under the lane's mutex to the commit,
     * and in doubt with the transaction if the connection goes. */
    int n = 0;
    int rc = lane_hold(st);
    if (rc == PT_OK)
        rc = run(st, S_CHARGE_ACCEPT_OFFLINE, &a, &n);
    if (rc == PT_OK && n == 1 && st->in_txn && st->figs)
        queued_add(&st->txn_queued, c->currency, 1, c->amount);
    if (!st->in_txn)
        lane_release(st);
    return rc ? rc : n == 1 ? PT_OK : PT_ESTATE;
}

static int pg_charge_request_cancel(struct pt_store *s, int64_t id, unsigned from_mask, int64_t due,
                                    int64_t now)
{
    from_mask &= PT_FROM_MASKS - 1;
    if (!from_mask)
        return PT_EINVAL;
    char states[128];
    state_array(from_mask, states, sizeof states);
    struct args a = {0};
    a_int(&a, id);
    a_int(&a, due);
    a_int(&a, now);
    a_text(&a, states);
    int n = 0;
    int rc = run(PG(s), S_CHARGE_REQUEST_CANCEL, &a, &n);
    return rc ? rc : n == 1 ? PT_OK : PT_ESTATE;
}

static int pg_key_reanswer(struct pt_store *s, const char *scope, int from_status, int status,
                           const char *body, size_t len, int *n)
{
    struct args a = {0};
    a_text(&a, scope);
    a_int(&a, from_status);
    a_int(&a, status);
    a_bytes(&a, body, len);
    return run(PG(s), S_KEY_REANSWER, &a, n);
}

static int pg_charge_patch(struct pt_store *s, int64_t id, const struct pt_charge_patch *patch,
                           int64_t now)
{
    struct args a = {0};
    args_patch(&a, id, patch, now);
    int n = 0;
    int rc = run(PG(s), S_CHARGE_PATCH, &a, &n);
    return rc ? rc : n == 1 ? PT_OK : PT_ENOTFOUND;
}

static int set_review(struct pg_store *st, int id_stmt, int64_t id, int review, const char *reason,
                      int64_t now)
{
    struct args a = {0};
    a_int(&a, id);
    a_int(&a, review ? 1 : 0);
    a_opt(&a, reason);
    a_int(&a, now);
    int n = 0;
    int rc = run(st, id_stmt, &a, &n);
    return rc ? rc : n == 1 ? PT_OK : PT_ESTATE;
}

static int pg_charge_set_review(struct pt_store *s, int64_t id, int review, const char *reason,
                                int64_t now)
{
    return set_review(PG(s), S_CHARGE_SET_REVIEW, id, review, reason, now);
}

static int pg_charges_list(struct pt_store *s, int state, int64_t after_id, int max,
                           struct pt_charge *rows, int *n, int *more)
{
    struct args a = {0};
    a_int(&a, after_id);
    a_int(&a, max + 1);
    if (state >= 0)
        a_text(&a, pt_state_name((enum pt_state)state));
    return read_charges(PG(s), state < 0 ? S_CHARGES_LIST : S_CHARGES_LIST_STATE, &a, max, rows, n,
                        more);
}

static int pg_charges_list_review(struct pt_store *s, int64_t after_id, int max,
                                  struct pt_charge *rows, int *n, int *more)
{
    struct args a = {0};
    a_int(&a, after_id);
    a_int(&a, max + 1);
    return read_charges(PG(s), S_CHARGES_LIST_REVIEW, &a, max, rows, n, more);
}

/* Inside a transaction the due charges are claimed (FOR UPDATE SKIP LOCKED):
 * another lane's walk passes over them until this transaction ends. */
static int pg_charges_due(struct pt_store *s, int64_t now, int64_t after_id, int max,
                          struct pt_charge *rows, int *n)
{
    struct args a = {0};
    a_int(&a, now);
    a_int(&a, max);
    a_int(&a, after_id);
    a_opt(&a, PG(s)->lane_id);
    a_int(&a, PG(s)->claim_timeout_ms);
    return read_charges(PG(s), PG(s)->in_txn ? S_CHARGES_DUE_CLAIM : S_CHARGES_DUE, &a, max, rows,
                        n, NULL);
}

static int pg_charges_next_due(struct pt_store *s, int64_t *when)
{
    struct args a = {0};
    a_opt(&a, PG(s)->lane_id);
    a_int(&a, PG(s)->claim_timeout_ms);
    return scalar(PG(s), S_CHARGES_NEXT_DUE, &a, when);
}

static int pg_charges_queued_before(struct pt_store *s, const char *gateway, const char *method,
                                    int64_t created_before, int64_t after_id, int max,
                                    struct pt_charge *rows, int *n)
{
    struct args a = {0};
    a_text(&a, gateway);
    a_text(&a, method);
    a_int(&a, created_before);
    a_int(&a, after_id);
    a_int(&a, max);
    return read_charges(PG(s), S_CHARGES_QUEUED_BEFORE, &a, max, rows, n, NULL);
}

static int pg_charges_oldest_queued(struct pt_store *s, const char *gateway, const char *method,
                                    int64_t *created_at)
{
    struct args a = {0};
    a_text(&a, gateway);
    a_text(&a, method);
    return scalar(PG(s), S_CHARGES_OLDEST_QUEUED, &a, created_at);
}

/* One transaction: a charges' and a refunds' statement (update[0], [1]),
 * each bound to now and `text`; *n the rows they changed. */
static int pg_update_pair(struct pt_store *s, const int update[2], int64_t now, const char *text,
                          int *n)
{
    struct pg_store *st = PG(s);
    *n = 0;
    int rc = pg_begin(s);
    if (rc)
        return rc;
    for (int i = 0; i < 2 && rc == PT_OK; i++) {
        struct args a = {0};
        a_int(&a, now);
        a_opt(&a, text);
        int k = 0;
        if ((rc = run(st, update[i], &a, &k)) == PT_OK)
            *n += k;
    }
    if (rc) {
        pg_rollback(s);
        return rc;
    }
    return pg_commit(s);
}

/* Only this lane's own interrupted sends: another lane's may be on their
 * way right now (they become due to anyone after their window). */
static int pg_sends_interrupted(struct pt_store *s, int64_t now, int *n)
{
    static const int update[2] = {S_CHARGES_INTERRUPTED, S_REFUNDS_INTERRUPTED};
    return pg_update_pair(s, update, now, PG(s)->lane_id, n);
}

static int pg_gateway_back(struct pt_store *s, const char *gateway, int64_t now, int *n)
{
    static const int update[2] = {S_CHARGES_BACK, S_REFUNDS_BACK};
    return pg_update_pair(s, update, now, gateway, n);
}

static int pg_queue_figures(struct pt_store *s, const char *currency, int64_t *count,
                            int64_t *amount)
{
    struct pg_store *st = PG(s);
    struct args a = {0};
    a_text(&a, currency);
    PGresult *r;
    /* In a transaction (a charge about to be queued): under the lane's lock
     * (sql/pg/003), so two of its requests cannot both take the last place,
     * and its mutex (the guarded statement's bound, above). */
    int rc = st->in_txn ? lane_hold(st) : PT_OK;
    /* What lost connections may have queued is counted too; settled
     * before the count is read (see doubts_settle). */
    if (!rc && st->in_txn && st->figs)
        rc = doubts_settle(st, st->figs);
    if (rc || (rc = q(st, st->in_txn ? S_QUEUE_FIGURES_LOCKED : S_QUEUE_FIGURES, &a, &r)))
        return rc;
    *count = col_int(r, 0, 0);
    *amount = col_int(r, 0, 1);
    PQclear(r);
    if (st->in_txn && st->figs)
        doubts_in(st->figs, currency, count, amount);
    return PT_OK;
}

static int by_state(struct pg_store *st, int id, int64_t *out)
{
    PGresult *r;
    int rc = q(st, id, NULL, &r);
    if (rc)
        return rc;
    for (int i = 0; i < PQntuples(r); i++) {
        enum pt_state state;
        if (pt_state_parse(PQgetvalue(r, i, 0), &state) == PT_OK)
            out[state] = col_int(r, i, 1);
    }
    PQclear(r);
    return PT_OK;
}

static int pg_stats(struct pt_store *s, int final_states, struct pt_store_stats *out)
{
    struct pg_store *st = PG(s);
    memset(out, 0, sizeof *out);
    int rc = by_state(st, final_states ? S_STATS_STATE : S_STATS_ACTIVE, out->by_state);
    if (rc || (rc = scalar(st, S_STATS_REVIEW, NULL, &out->review)))
        return rc;
    PGresult *r;
    if ((rc = q(st, S_STATS_QUEUE, NULL, &r)))
        return rc;
    for (int i = 0; i < PQntuples(r) && out->ncur < PT_STATS_MAX_CURRENCIES; i++) {
        col_text(r, i, 0, out->queue[out->ncur].currency, sizeof out->queue[0].currency);
        out->queue[out->ncur].count = col_int(r, i, 1);
        out->queue[out->ncur].amount = col_int(r, i, 2);
        int64_t oldest = col_int(r, i, 3);
        if (!out->queue_oldest_created_at || oldest < out->queue_oldest_created_at)
            out->queue_oldest_created_at = oldest;
        out->ncur++;
    }
    PQclear(r);
    return PT_OK;
}

/* ---- events ---------------------------------------------------------------- */

/* An event's insert: the feed's lock first (held to the commit), then the
 * row; the commit wakes the other lanes' long-polls (NOTIFY). */
static int insert_event(struct pg_store *st, int id, const struct args *a, int64_t *seq)
{
    int rc = run(st, S_EVENTS_LOCK_, NULL, NULL);
    if (rc)
        return rc;
    PGresult *r;
    if ((rc = q(st, id, a, &r)))
        return rc;
    rc = PQntuples(r) == 1 ? PT_OK : PT_EEXIST; /* once per charge and type / per refund */
    if (rc == PT_OK && seq)
        *seq = col_int(r, 0, 0);
    PQclear(r);
    if (rc)
        return rc;
    struct args n = {0};
    a_text(&n, st->lane_id);
    if ((rc = run(st, S_NOTIFY, &n, NULL)))
        return rc;
    st->events_in_txn++;
    return PT_OK;
}

static int pg_event_insert(struct pt_store *s, const char *type, int64_t charge_id,
                           const char *order_id, const char *payload, int64_t now, int64_t *seq)
{
    struct args a = {0};
    a_text(&a, type);
    a_int(&a, charge_id);
    a_text(&a, order_id);
    a_text(&a, payload);
    a_int(&a, now);
    return insert_event(PG(s), S_EVENT_INSERT, &a, seq);
}

static int pg_events_list(struct pt_store *s, int64_t after, int max, struct pt_event_row *rows,
                          int *n)
{
    struct args a = {0};
    a_int(&a, after);
    a_int(&a, max);
    PGresult *r;
    *n = 0;
    int rc = q(PG(s), S_EVENTS_LIST, &a, &r);
    if (rc)
        return rc;
    for (int i = 0; i < PQntuples(r) && *n < max; i++) {
        struct pt_event_row *e = &rows[*n];
        memset(e, 0, sizeof *e);
        e->seq = col_int(r, i, 0);
        col_text(r, i, 1, e->type, sizeof e->type);
        col_text(r, i, 2, e->order_id, sizeof e->order_id);
        e->payload = strdup(PQgetisnull(r, i, 3) ? "null" : PQgetvalue(r, i, 3));
        e->created_at = col_int(r, i, 4);
        if (!e->payload) {
            PQclear(r);
            pt_event_rows_free(rows, *n);
            *n = 0;
            return PT_ENOMEM;
        }
        (*n)++;
    }
    PQclear(r);
    return PT_OK;
}

static int pg_events_last_seq(struct pt_store *s, int64_t *seq)
{
    return scalar(PG(s), S_EVENTS_LAST, NULL, seq);
}

/* ---- audit ----------------------------------------------------------------- */

static int audit(struct pg_store *st, int64_t charge_id, const char *from, const char *to,
                 const char *cause, const char *actor, int refused, const char *detail, int64_t now,
                 const char *refund_id)
{
    /* The lane is part of the actor: "sync" on lane 3 is "sync@lane-3". */
    char who[128];
    if (st->lane_id[0] && !strchr(actor, '@'))
        snprintf(who, sizeof who, "%s@%s", actor, st->lane_id);
    else
        snprintf(who, sizeof who, "%s", actor);
    struct args a = {0};
    a_int(&a, charge_id);
    a_opt(&a, from);
    a_opt(&a, to);
    a_text(&a, cause);
    a_text(&a, who);
    a_int(&a, refused ? 1 : 0);
    a_opt(&a, detail);
    a_int(&a, now);
    a_opt(&a, refund_id);
    return run(st, S_AUDIT_INSERT, &a, NULL);
}

static int pg_audit(struct pt_store *s, int64_t charge_id, const char *from, const char *to,
                    const char *cause, const char *actor, int refused, const char *detail,
                    int64_t now)
{
    return audit(PG(s), charge_id, from, to, cause, actor, refused, detail, now, NULL);
}

static int pg_audit_first(struct pt_store *s, int64_t charge_id, const char *to, const char *cause,
                          const char *actor, int64_t now)
{
    return audit(PG(s), charge_id, NULL, to, cause, actor, 0, NULL, now, NULL);
}

static int pg_audit_list(struct pt_store *s, int64_t charge_id, int max, struct pt_audit_row *rows,
                         int *n)
{
    struct args a = {0};
    a_int(&a, charge_id);
    a_int(&a, max);
    PGresult *r;
    *n = 0;
    int rc = q(PG(s), S_AUDIT_LIST, &a, &r);
    if (rc)
        return rc;
    for (int i = 0; i < PQntuples(r) && *n < max; i++) {
        struct pt_audit_row *e = &rows[(*n)++];
        e->seq = col_int(r, i, 0);
        col_text(r, i, 1, e->from_state, sizeof e->from_state);
        col_text(r, i, 2, e->to_state, sizeof e->to_state);
        col_text(r, i, 3, e->cause, sizeof e->cause);
        col_text(r, i, 4, e->actor, sizeof e->actor);
        e->refused = (int)col_int(r, i, 5);
        col_text(r, i, 6, e->detail, sizeof e->detail);
        e->created_at = col_int(r, i, 7);
        col_text(r, i, 8, e->refund_id, sizeof e->refund_id);
    }
    PQclear(r);
    return PT_OK;
}

/* ---- notifications, counts ------------------------------------------------ */

static int pg_notification_insert(struct pt_store *s, const char *gateway, const char *dedup_id,
                                  const char *order_id, const char *status, const char *outcome,
                                  int64_t now)
{
    struct args a = {0};
    a_text(&a, gateway);
    a_text(&a, dedup_id);
    a_opt(&a, order_id);
    a_opt(&a, status);
    a_text(&a, outcome);
    a_int(&a, now);
    int n = 0;
    int rc = run(PG(s), S_NOTIFICATION_INSERT, &a, &n);
    return rc ? rc : n == 1 ? PT_OK : PT_EEXIST;
}

static int pg_count(struct pt_store *s, const char *table, int64_t *count)
{
    static const char *const known[] = {"charges", "charge_events", "idempotency_keys", "events",
                                        "notifications"};
    int ok = 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        ok |= strcmp(table, known[i]) == 0;
    if (!ok)
        return PT_EINVAL;
    struct pg_store *st = PG(s);
    int rc = connected(st);
    if (rc)
        return rc;
    char sql[128];
    if (strcmp(table, "charge_events") == 0) /* the audit's entries (sql/pg/005) */
        snprintf(sql, sizeof sql,
                 "SELECT (SELECT count(*) FROM charge_events) +"
                 " (SELECT count(*) FROM charges WHERE created_by IS NOT NULL)");
    else
        snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
    PGresult *r = RT(st, PQexec(st->conn, sql));
    rc = PQresultStatus(r) == PGRES_TUPLES_OK ? PT_OK : xlate(st, r);
    if (rc == PT_OK)
        *count = col_int(r, 0, 0);
    PQclear(r);
    return rc;
}

/* The newest time the shared database holds (SPEC 17): a lane whose clock
 * is not trusted at start continues from the shop's latest record.  Each
 * part is one index seek. */
static int pg_newest_time(struct pt_store *s, int64_t *t)
{
    struct pg_store *st = PG(s);
    int rc = connected(st);
    if (rc)
        return rc;
    PGresult *r =
        RT(st, PQexec(st->conn, "SELECT greatest("
                                " (SELECT greatest(created_at, updated_at) FROM charges"
                                " ORDER BY id DESC LIMIT 1),"
                                " (SELECT greatest(created_at, updated_at) FROM refunds"
                                " ORDER BY id DESC LIMIT 1),"
                                " (SELECT created_at FROM events ORDER BY seq DESC LIMIT 1), 0)"));
    rc = PQresultStatus(r) == PGRES_TUPLES_OK ? PT_OK : xlate(st, r);
    if (rc == PT_OK)
        *t = col_int(r, 0, 0);
    PQclear(r);
    return rc;
}

/* ---- refunds --------------------------------------------------------------- */

static int pg_refund_insert(struct pt_store *s, struct pt_refund *r, int64_t now)
{
    struct args a = {0};
    a_text(&a, r->refund_id);
    a_int(&a, r->charge_id);
    a_int(&a, r->amount);
    a_text(&a, pt_state_name(r->state));
    a_text(&a, pt_offline_mode_name(r->offline));
    a_opt(&a, r->reason);
    a_opt(&a, r->metadata);
    a_int(&a, r->next_attempt_at);
    a_int(&a, now);
    /* A refusal (the triggers of sql/pg/001_init.sql) must not end the
     * caller's transaction, as a failed statement does not in SQLite: the
     * insert runs in a savepoint of its own.  (Refunds are few: the two
     * round trips cost little; a new charge needs none, as it cannot fail
     * that way.) */
    struct pg_store *st = PG(s);
    int rc = st->in_txn ? exec_sql(st, "SAVEPOINT refund_insert") : PT_OK;
    if (rc)
        return rc;
    PGresult *res;
    rc = q(st, S_REFUND_INSERT, &a, &res);
    if (st->in_txn)
        exec_sql(st,
                 rc ? "ROLLBACK TO SAVEPOINT refund_insert" : "RELEASE SAVEPOINT refund_insert");
    if (rc)
        return rc;
    rc = PQntuples(res) == 1 ? PT_OK : PT_EEXIST;
    if (rc == PT_OK) {
        r->id = col_int(res, 0, 0);
        r->created_at = r->updated_at = now;
    }
    PQclear(res);
    return rc;
}

static void read_refund(const PGresult *res, int i, struct pt_refund *r)
{
    read_row(res, i, &pt_refund_row, r);
}

static int read_refunds(struct pg_store *st, int id, const struct args *a, int max,
                        struct pt_refund *rows, int *n, int *more)
{
    PGresult *r;
    *n = 0;
    if (more)
        *more = 0;
    int rc = q(st, id, a, &r);
    if (rc)
        return rc;
    int got = PQntuples(r);
    for (int i = 0; i < got && i < max; i++)
        read_refund(r, i, &rows[(*n)++]);
    if (more)
        *more = got > max;
    PQclear(r);
    return PT_OK;
}

static int pg_refund_get(struct pt_store *s, const char *refund_id, struct pt_refund *out)
{
    struct args a = {0};
    a_text(&a, refund_id);
    int n = 0;
    int rc = read_refunds(PG(s), S_REFUND_GET, &a, 1, out, &n, NULL);
    return rc ? rc : n ? PT_OK : PT_ENOTFOUND;
}

static int pg_refund_get_by_id(struct pt_store *s, int64_t id, struct pt_refund *out)
{
    struct args a = {0};
    a_int(&a, id);
    int n = 0;
    int rc = read_refunds(PG(s), S_REFUND_GET_BY_ID, &a, 1, out, &n, NULL);
    return rc ? rc : n ? PT_OK : PT_ENOTFOUND;
}

static int pg_refunds_list(struct pt_store *s, int64_t charge_id, int state, int64_t after_id,
                           int max, struct pt_refund *rows, int *n, int *more)
{
    struct args a = {0};
    a_int(&a, after_id);
    a_int(&a, max + 1);
    int id = S_REFUNDS_LIST;
    if (charge_id > 0) {
        a_int(&a, charge_id);
        id = S_REFUNDS_OF_CHARGE;
    } else if (state >= 0) {
        a_text(&a, pt_state_name((enum pt_state)state));
        id = S_REFUNDS_LIST_STATE;
    }
    return read_refunds(PG(s), id, &a, max, rows, n, more);
}

static int pg_refunds_due(struct pt_store *s, int64_t now, int64_t after_id, int max,
                          struct pt_refund *rows, int *n)
{
    struct args a = {0};
    a_int(&a, now);
    a_int(&a, max);
    a_int(&a, after_id);
    a_opt(&a, PG(s)->lane_id);
    a_int(&a, PG(s)->claim_timeout_ms);
    return read_refunds(PG(s), S_REFUNDS_DUE, &a, max, rows, n, NULL);
}

static int pg_refunds_next_due(struct pt_store *s, int64_t *when)
{
    struct args a = {0};
    a_opt(&a, PG(s)->lane_id);
    a_int(&a, PG(s)->claim_timeout_ms);
    return scalar(PG(s), S_REFUNDS_NEXT_DUE, &a, when);
}

static int pg_refund_left(struct pt_store *s, int64_t charge_id, int64_t *left)
{
    struct args a = {0};
    a_int(&a, charge_id);
    return scalar(PG(s), S_REFUND_LEFT, &a, left);
}

static int pg_refund_transition(struct pt_store *s, int64_t id, unsigned from_mask,
                                enum pt_state to, const struct pt_charge_patch *patch, int64_t now)
{
    from_mask &= PT_FROM_MASKS - 1;
    if (!from_mask || !pt_refund_state_valid(to))
        return PT_EINVAL;
    return transition(PG(s), S_REFUND_TRANSITION, id, from_mask, to, patch, now);
}

static int pg_refund_patch(struct pt_store *s, int64_t id, const struct pt_charge_patch *patch,
                           int64_t now)
{
    struct args a = {0};
    args_patch(&a, id, patch, now);
    int n = 0;
    int rc = run(PG(s), S_REFUND_PATCH, &a, &n);
    return rc ? rc : n == 1 ? PT_OK : PT_ENOTFOUND;
}

static int pg_refund_set_review(struct pt_store *s, int64_t id, int review, const char *reason,
                                int64_t now)
{
    return set_review(PG(s), S_REFUND_SET_REVIEW, id, review, reason, now);
}

static int pg_refund_withdraw(struct pt_store *s, int64_t id)
{
    struct args a = {0};
    a_int(&a, id);
    int n = 0;
    int rc = run(PG(s), S_REFUND_WITHDRAW, &a, &n);
    return rc ? rc : n == 1 ? PT_OK : PT_ESTATE;
}

static int pg_refund_audit(struct pt_store *s, const struct pt_refund *r, const char *from,
                           const char *to, const char *cause, const char *actor, int refused,
                           const char *detail, int64_t now)
{
    return audit(PG(s), r->charge_id, from, to, cause, actor, refused, detail, now, r->refund_id);
}

static int pg_refund_event_insert(struct pt_store *s, const char *type, const struct pt_refund *r,
                                  const char *payload, int64_t now, int64_t *seq)
{
    struct args a = {0};
    a_text(&a, type);
    a_int(&a, r->charge_id);
    a_text(&a, r->order_id);
    a_text(&a, payload);
    a_int(&a, now);
    a_int(&a, r->id);
    return insert_event(PG(s), S_EVENT_INSERT_REFUND, &a, seq);
}

static int pg_refund_stats(struct pt_store *s, struct pt_refund_stats *out)
{
    memset(out, 0, sizeof *out);
    int rc = by_state(PG(s), S_REFUND_STATS, out->by_state);
    return rc ? rc : scalar(PG(s), S_REFUND_STATS_REVIEW, NULL, &out->review);
}

/* The whole guarded new charge queued offline as one statement: one round
 * trip, one durable commit (autocommit).  Every case but the plain one -
 * the key used before, the order taken (a unique violation: the statement
 * and all it wrote are undone), the queue full - is PT_EAGAIN, and the
 * caller's usual path answers it. */
static int pg_charge_queue_guarded(struct pt_store *s, const struct pt_store_queued_charge *g,
                                   int64_t now)
{
    struct pg_store *st = PG(s);
    if (st->in_txn)
        return PT_EUNSUPPORTED; /* its own transaction, or nothing */
    const struct pt_charge *c = g->c;
    char who[128];
    if (st->lane_id[0])
        snprintf(who, sizeof who, "%s@%s", g->actor, st->lane_id);
    else
        snprintf(who, sizeof who, "%s", g->actor);
    struct args a = {0};
    a_text(&a, c->order_id);
    a_text(&a, c->gateway);
    a_text(&a, c->method);
    a_int(&a, c->amount);
    a_text(&a, c->currency);
    a_text(&a, pt_offline_mode_name(c->offline));
    a_opt(&a, c->subject);
    a_opt(&a, c->payment_code);
    a_opt(&a, c->payment_method);
    a_opt(&a, c->customer);
    a_opt(&a, c->metadata);
    a_int(&a, c->next_attempt_at);
    a_int(&a, now);
    a_text(&a, g->scope);
    a_text(&a, g->key);
    a_bytes(&a, g->hash, 32);
    a_text(&a, g->body_head);
    a_text(&a, g->body_tail);
    a_text(&a, who);
    a_int(&a, g->expires_at);
    struct lane_figures *f = st->figs;
    if (!f)
        return PT_EAGAIN;
    int rc = connected(st); /* not under the mutex; and nothing sent before it */
    if (rc)
        return rc;
    pthread_mutex_lock(&f->mu);
    if (!lane_room(f, c->currency, c->amount, g->max_count, g->max_total) &&
        (rc = lane_recount(st, f)) == PT_OK &&
        !lane_room(f, c->currency, c->amount, g->max_count, g->max_total))
        rc = PT_EAGAIN; /* it may still have room: the usual path reads exactly */
    PGresult *r = NULL;
    int sent = rc == PT_OK;
    if (sent && (rc = q(st, S_CHARGE_QUEUE_GUARDED, &a, &r)) == PT_OK) {
        rc = PQntuples(r) == 1 ? PT_OK : PT_EAGAIN;
        if (rc == PT_OK) {
            g->c->id = col_int(r, 0, 0);
            g->c->created_at = g->c->updated_at = now;
            queued_add(&f->q, c->currency, 1, c->amount); /* lane_room made its slot */
        }
        PQclear(r);
    } else if (sent && rc == PT_EIO) {
        /* The connection lost with the statement sent (or being sent):
         * its server process may still commit it. */
        doubt_one(st, f, c->currency, c->amount);
    } else if (rc != PT_EAGAIN && rc != PT_EEXIST) {
        f->known = 0;
    }
    pthread_mutex_unlock(&f->mu);
    return rc == PT_EEXIST ? PT_EAGAIN : rc;
}

/* Locks the rows of ids still INIT, passing over those another transaction
 * holds (SKIP LOCKED): taken[i] = 1 for each one locked. */
static int claim(struct pg_store *st, int stmt, const int64_t *ids, int n, unsigned char *taken)
{
    memset(taken, 0, (size_t)n);
    if (n <= 0)
        return PT_OK;
    /* '{1,2,3}': at most a run's ids, each up to 20 digits. */
    char arr[64 * 22];
    size_t o = 0;
    for (int i = 0; i < n && o + 24 < sizeof arr; i++)
        o += (size_t)snprintf(arr + o, sizeof arr - o, "%s%lld", i ? "," : "{", (long long)ids[i]);
    snprintf(arr + o, sizeof arr - o, "}");
    struct args a = {0};
    a_text(&a, arr);
    PGresult *r;
    int rc = q(st, stmt, &a, &r);
    if (rc)
        return rc;
    for (int k = 0; k < PQntuples(r); k++) {
        int64_t id = col_int(r, k, 0);
        for (int i = 0; i < n; i++)
            if (ids[i] == id)
                taken[i] = 1;
    }
    PQclear(r);
    return PT_OK;
}

static int pg_charges_claim(struct pt_store *s, const int64_t *ids, int n, unsigned char *taken)
{
    return claim(PG(s), S_CHARGES_CLAIM, ids, n, taken);
}

static int pg_refunds_claim(struct pt_store *s, const int64_t *ids, int n, unsigned char *taken)
{
    return claim(PG(s), S_REFUNDS_CLAIM, ids, n, taken);
}

static int pg_wait_events(struct pt_store *s, int timeout_ms)
{
    struct pg_store *st = PG(s);
    if (!st->listening) {
        int rc = exec_sql(st, "LISTEN payterm_events");
        if (rc)
            return rc;
        st->listening = 1;
    }
    int got = 0;
    PGnotify *n;
    for (int round = 0; round < 2 && !got; round++) {
        if (!PQconsumeInput(st->conn)) {
            xlate(st, NULL);
            return PT_EIO;
        }
        while ((n = PQnotifies(st->conn))) {
            got = 1;
            PQfreemem(n);
        }
        if (got || round)
            break;
        struct pollfd p = {.fd = PQsocket(st->conn), .events = POLLIN};
        if (p.fd < 0)
            return PT_EIO;
        if (poll(&p, 1, timeout_ms) < 0 && errno != EINTR)
            return PT_EIO;
        if (!(p.revents & (POLLIN | POLLHUP | POLLERR)))
            break; /* the timeout */
    }
    return got;
}

static uint64_t pg_round_trips(const struct pt_store *s)
{
    return ((const struct pg_store *)(const void *)s)->round_trips;
}

static int pg_schema_latest(void)
{
    return pt_pg_migrations_count;
}

static const struct pt_store_ops pg_ops = {
    .name = "postgresql",
    .caps = PT_STORE_PG_CAPS,
    .newest_time = pg_newest_time,
    .schema_latest = pg_schema_latest,
    .charge_queue_guarded = pg_charge_queue_guarded,
    .round_trips = pg_round_trips,
    .wait_events = pg_wait_events,
    .charges_claim = pg_charges_claim,
    .refunds_claim = pg_refunds_claim,
    .errmsg = pg_errmsg,
    .close = pg_close,
    .schema_version = pg_schema_version,
    .migrate_to = pg_migrate_to,
    .pragma_int = pg_pragma_int,
    .set_event_hook = pg_set_event_hook,
    .begin = pg_begin,
    .in_txn = pg_in_txn,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .attach = pg_attach,
    .defer_commit = pg_defer_commit,
    .commit_deferred = pg_commit_deferred,
    .backup = pg_backup,
    .note_erased = pg_note_erased,
    .checkpoint_truncate = pg_checkpoint_truncate,
    .writable = pg_writable,
    .key_get = pg_key_get,
    .key_insert = pg_key_insert,
    .key_relock = pg_key_relock,
    .key_take_later = pg_key_take_later,
    .key_set_order = pg_key_set_order,
    .key_complete = pg_key_complete,
    .key_delete = pg_key_delete,
    .key_delete_expired = pg_key_delete_expired,
    .key_sweep = pg_key_sweep,
    .charge_insert = pg_charge_insert,
    .charge_get = pg_charge_get,
    .charge_get_by_id = pg_charge_get_by_id,
    .charge_transition = pg_charge_transition,
    .charge_patch = pg_charge_patch,
    .charge_accept_offline = pg_charge_accept_offline,
    .charge_request_cancel = pg_charge_request_cancel,
    .key_reanswer = pg_key_reanswer,
    .charge_set_review = pg_charge_set_review,
    .charges_list = pg_charges_list,
    .charges_list_review = pg_charges_list_review,
    .charges_due = pg_charges_due,
    .charges_next_due = pg_charges_next_due,
    .charges_queued_before = pg_charges_queued_before,
    .charges_oldest_queued = pg_charges_oldest_queued,
    .sends_interrupted = pg_sends_interrupted,
    .gateway_back = pg_gateway_back,
    .queue_figures = pg_queue_figures,
    .stats = pg_stats,
    .event_insert = pg_event_insert,
    .events_list = pg_events_list,
    .events_last_seq = pg_events_last_seq,
    .audit = pg_audit,
    .audit_first = pg_audit_first,
    .audit_list = pg_audit_list,
    .notification_insert = pg_notification_insert,
    .count = pg_count,
    .refund_insert = pg_refund_insert,
    .refund_get = pg_refund_get,
    .refund_get_by_id = pg_refund_get_by_id,
    .refunds_list = pg_refunds_list,
    .refunds_due = pg_refunds_due,
    .refunds_next_due = pg_refunds_next_due,
    .refund_left = pg_refund_left,
    .refund_transition = pg_refund_transition,
    .refund_patch = pg_refund_patch,
    .refund_set_review = pg_refund_set_review,
    .refund_withdraw = pg_refund_withdraw,
    .refund_audit = pg_refund_audit,
    .refund_event_insert = pg_refund_event_insert,
    .refund_stats = pg_refund_stats,
};
