/*
 * sim_ledger.c - the simulator's own ledger: DIR/sim.db.
 *
 * The simulator plays four payment gateways, so it keeps what they keep:
 * trades with their status and how many times money moved (the number the
 * tests assert on), the refunds of those trades (how much went back, in how
 * many refunds: the other number the tests assert on), Stripe's idempotency
 * records, and the notifications still to be delivered.  It is a separate little database from
 * payterm's own (the simulator is a different program part: "only the store speaks SQL" is about
 * payterm's database), opened in WAL mode with synchronous=OFF: it must
 * survive a restart (or a SIGKILL) of the simulator, which data handed to the
 * kernel does, not a power cut of the desktop, which would need an fsync per
 * request and make the simulator the bottleneck of payterm's drain benchmark.
 * Each handler's ledger work is one transaction (pt__sim_lock/unlock).
 * Amounts are ISO 4217 minor units, whatever unit the gateway's wire used
 * (each handler converts with the gateway's own rules, sim_units.c).
 *
 * Every function here expects the caller to hold pt_sim.lk.
 */
#include "sim_int.h"

#include "err.h"
#include "log.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS trades("
    "  id INTEGER PRIMARY KEY,"
    "  gateway TEXT NOT NULL,"
    "  order_id TEXT NOT NULL,"
    "  trade_no TEXT NOT NULL,"
    "  method TEXT NOT NULL,"
    "  amount INTEGER NOT NULL,"
    "  currency TEXT NOT NULL,"
    "  status TEXT NOT NULL CHECK(status = 'pending' OR status = 'captured'"
    "                             OR status = 'declined' OR status = 'canceled'),"
    "  captures INTEGER NOT NULL DEFAULT 0,"
    "  params_hash TEXT NOT NULL,"
    "  extra TEXT NOT NULL DEFAULT '{}',"
    "  pay_at INTEGER NOT NULL DEFAULT 0,"
    "  created_at INTEGER NOT NULL,"
    "  updated_at INTEGER NOT NULL,"
    "  paid_at INTEGER NOT NULL DEFAULT 0,"
    "  UNIQUE(gateway, trade_no));"
    /* Alipay, WeChat and 2C2P have one trade per out_trade_no/invoiceNo.
     * Stripe does not: metadata[order_id] is only a label, and two different
     * Idempotency-Keys make two PaymentIntents for the same order (that is
     * exactly the double charge payterm must never cause). */
    "CREATE UNIQUE INDEX IF NOT EXISTS trades_order ON trades(gateway, order_id)"
    "  WHERE gateway <> 'stripe';"
    "CREATE INDEX IF NOT EXISTS trades_by_order ON trades(gateway, order_id, id);"
    "CREATE INDEX IF NOT EXISTS trades_pay ON trades(pay_at) WHERE pay_at > 0;"
    /* One row per refund executed: UNIQUE is what makes "never two
     * executions for one refund key" a property of the ledger itself. */
    "CREATE TABLE IF NOT EXISTS refunds("
    "  id INTEGER PRIMARY KEY,"
    "  gateway TEXT NOT NULL,"
    "  scope TEXT NOT NULL,"
    "  refund_key TEXT NOT NULL,"
    "  refund_no TEXT NOT NULL,"
    "  trade_id INTEGER NOT NULL REFERENCES trades(id),"
    "  order_id TEXT NOT NULL,"
    "  trade_no TEXT NOT NULL,"
    "  amount INTEGER NOT NULL CHECK(amount > 0),"
    "  currency TEXT NOT NULL,"
    "  status TEXT NOT NULL CHECK(status = 'processing' OR status = 'succeeded'),"
    "  params_hash TEXT NOT NULL,"
    "  extra TEXT NOT NULL DEFAULT '{}',"
    "  settle_at INTEGER NOT NULL DEFAULT 0,"
    "  created_at INTEGER NOT NULL,"
    "  updated_at INTEGER NOT NULL,"
    "  succeeded_at INTEGER NOT NULL DEFAULT 0,"
    "  UNIQUE(gateway, scope, refund_key));"
    "CREATE INDEX IF NOT EXISTS refunds_trade ON refunds(trade_id, id);"
    "CREATE INDEX IF NOT EXISTS refunds_order ON refunds(gateway, order_id);"
    "CREATE INDEX IF NOT EXISTS refunds_settle ON refunds(settle_at) WHERE settle_at > 0;"
    "CREATE TABLE IF NOT EXISTS stripe_keys("
    "  key TEXT PRIMARY KEY,"
    "  request_hash TEXT NOT NULL,"
    "  status INTEGER NOT NULL,"
    "  body TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS outbox("
    "  id INTEGER PRIMARY KEY,"
    "  gateway TEXT NOT NULL,"
    "  order_id TEXT NOT NULL,"
    "  kind TEXT NOT NULL,"
    "  url TEXT NOT NULL,"
    "  content_type TEXT NOT NULL,"
    "  body BLOB NOT NULL,"
    "  due_at INTEGER NOT NULL,"
    "  attempts INTEGER NOT NULL DEFAULT 0,"
    "  delivered INTEGER NOT NULL DEFAULT 0,"
    "  duplicate INTEGER NOT NULL DEFAULT 0,"
    "  last_error TEXT NOT NULL DEFAULT '',"
    "  created_at INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS outbox_due ON outbox(due_at) WHERE delivered = 0;";

static int db_err(struct pt_sim *s, const char *what)
{
    pt_log_error("sim: ledger %s/sim.db: %s: %s", s->dir, what, sqlite3_errmsg(s->db));
    return PT_ESTORAGE;
}

int pt__sim_db_open(struct pt_sim *s, char *err, size_t errlen)
{
    char path[SIM_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/sim.db", s->dir);
    int rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    char *msg = NULL;
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->db,
                          "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF;"
                          "PRAGMA busy_timeout=5000;",
                          NULL, NULL, &msg);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->db, schema, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "sim ledger %s: %s", path,
                 msg     ? msg
                 : s->db ? sqlite3_errmsg(s->db)
                         : "cannot open");
        sqlite3_free(msg);
        sqlite3_close(s->db);
        s->db = NULL;
        return PT_ESTORAGE;
    }
    return PT_OK;
}

void pt__sim_db_begin(struct pt_sim *s)
{
    if (s->db && sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        db_err(s, "begin");
}

void pt__sim_db_commit(struct pt_sim *s)
{
    if (s->db && sqlite3_get_autocommit(s->db) == 0 &&
        sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        db_err(s, "commit");
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    }
}

void pt__sim_db_close(struct pt_sim *s)
{
    for (int i = 0; i < s->nstmts; i++)
        sqlite3_finalize(s->stmts[i].st);
    s->nstmts = 0;
    if (s->db)
        sqlite3_close_v2(s->db);
    s->db = NULL;
}

/*
 * Statements are prepared once and kept (keyed by the address of their SQL
 * literal, which is stable per call site): parsing SQL on every request was
 * a visible part of the simulator's cost in the drain benchmark.  done()
 * resets a statement so it holds no read lock between requests.
 */
static sqlite3_stmt *prep(struct pt_sim *s, const char *sql)
{
    for (int i = 0; i < s->nstmts; i++)
        if (s->stmts[i].sql == sql)
            return s->stmts[i].st;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK) {
        db_err(s, "prepare");
        return NULL;
    }
    if (s->nstmts < SIM_MAX_STMTS) {
        s->stmts[s->nstmts].sql = sql;
        s->stmts[s->nstmts].st = st;
        s->nstmts++;
    }
    return st;
}

static void done(struct pt_sim *s, sqlite3_stmt *st)
{
    for (int i = 0; i < s->nstmts; i++) {
        if (s->stmts[i].st == st) {
            sqlite3_reset(st);
            sqlite3_clear_bindings(st);
            return;
        }
    }
    sqlite3_finalize(st);
}

static void text(sqlite3_stmt *st, int col, char *out, size_t outlen)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    snprintf(out, outlen, "%s", t ? (const char *)t : "");
}

#define TRADE_COLS                                                                                 \
    "id, gateway, order_id, trade_no, method, amount, currency, status, captures, params_hash, "   \
    "extra, pay_at, created_at, updated_at, paid_at"

static void row_to_trade(sqlite3_stmt *st, struct sim_trade *t)
{
    char gw[16];
    memset(t, 0, sizeof *t);
    t->id = sqlite3_column_int64(st, 0);
    text(st, 1, gw, sizeof gw);
    t->gw = pt__sim_gw_parse(gw);
    text(st, 2, t->order_id, sizeof t->order_id);
    text(st, 3, t->trade_no, sizeof t->trade_no);
    text(st, 4, t->method, sizeof t->method);
    t->amount = sqlite3_column_int64(st, 5);
    text(st, 6, t->currency, sizeof t->currency);
    text(st, 7, t->status, sizeof t->status);
    t->captures = sqlite3_column_int(st, 8);
    text(st, 9, t->params_hash, sizeof t->params_hash);
    text(st, 10, t->extra, sizeof t->extra);
    t->pay_at = sqlite3_column_int64(st, 11);
    t->created_at = sqlite3_column_int64(st, 12);
    t->updated_at = sqlite3_column_int64(st, 13);
    t->paid_at = sqlite3_column_int64(st, 14);
}

static int one_trade(struct pt_sim *s, sqlite3_stmt *st, struct sim_trade *t)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        row_to_trade(st, t);
        rc = PT_OK;
    } else if (rc == SQLITE_DONE) {
        rc = PT_ENOTFOUND;
    } else {
        rc = db_err(s, "read trade");
    }
    done(s, st);
    return rc;
}

int pt__sim_trade_get(struct pt_sim *s, int gw, const char *order_id, struct sim_trade *t)
{
    sqlite3_stmt *st = prep(s, "SELECT " TRADE_COLS " FROM trades WHERE gateway=? AND "
                               "order_id=? ORDER BY id DESC LIMIT 1");
    if (!st)
        return PT_ESTORAGE;
    sqlite3_bind_text(st, 1, pt__sim_gw_name(gw), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, order_id, -1, SQLITE_TRANSIENT);
    return one_trade(s, st, t);
}

int pt__sim_trade_by_no(struct pt_sim *s, int gw, const char *trade_no, struct sim_trade *t)
{
    sqlite3_stmt *st = prep(s, "SELECT " TRADE_COLS " FROM trades WHERE gateway=? AND trade_no=?");
    if (!st)
        return PT_ESTORAGE;
    sqlite3_bind_text(st, 1, pt__sim_gw_name(gw), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, trade_no, -1, SQLITE_TRANSIENT);
    return one_trade(s, st, t);
}

int pt__sim_trade_insert(struct pt_sim *s, struct sim_trade *t)
{
    sqlite3_stmt *st =
        prep(s, "INSERT INTO trades(gateway, order_id, trade_no, method, amount, currency, status, "
                "captures, params_hash, extra, pay_at, created_at, updated_at, paid_at) "
                "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    if (!st)
        return PT_ESTORAGE;
    sqlite3_bind_text(st, 1, pt__sim_gw_name(t->gw), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, t->order_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, t->trade_no, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, t->method, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, t->amount);
    sqlite3_bind_text(st, 6, t->currency, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, t->status, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 8, t->captures);
    sqlite3_bind_text(st, 9, t->params_hash, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 10, t->extra[0] ? t->extra : "{}", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 11, t->pay_at);
    sqlite3_bind_int64(st, 12, t->created_at);
    sqlite3_bind_int64(st, 13, t->updated_at);
    sqlite3_bind_int64(st, 14, t->paid_at);
    int rc = sqlite3_step(st);
    done(s, st);
    if (rc == SQLITE_CONSTRAINT)
        return PT_EEXIST;
    if (rc != SQLITE_DONE)
        return db_err(s, "insert trade");
    t->id = sqlite3_last_insert_rowid(s->db);
    return PT_OK;
}

int pt__sim_trade_update(struct pt_sim *s, const struct sim_trade *t)
{
    sqlite3_stmt *st = prep(s, "UPDATE trades SET status=?, captures=?, extra=?, pay_at=?, "
                               "updated_at=?, paid_at=? WHERE id=?");
    if (!st)
        return PT_ESTORAGE;
    sqlite3_bind_text(st, 1, t->status, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, t->captures);
    sqlite3_bind_text(st, 3, t->extra[0] ? t->extra : "{}", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, t->pay_at);
    sqlite3_bind_int64(st, 5, t->updated_at);
    sqlite3_bind_int64(st, 6, t->paid_at);
    sqlite3_bind_int64(st, 7, t->id);
    int rc = sqlite3_step(st);
    done(s, st);
    return rc == SQLITE_DONE ? PT_OK : db_err(s, "update trade");
}

int pt__sim_trade_each(struct pt_sim *s, int gw, const char *order_id, int limit,
                       int (*cb)(void *ctx, const struct sim_trade *t), void *ctx)
{
    sqlite3_stmt *st = prep(s, "SELECT " TRADE_COLS " FROM trades WHERE gateway=?1 AND "
                               "(?2 IS NULL OR order_id=?2) ORDER BY id DESC LIMIT ?3");
    if (!st)
        return PT_ESTORAGE;
    sqlite3_bind_text(st, 1, pt__sim_gw_name(gw), -1, SQLITE_STATIC);
    if (order_id)
        sqlite3_bind_text(st, 2, order_id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 3, limit);
    int rc;
    struct sim_trade *t = malloc(sizeof *t);
    if (!t) {
        done(s, st);
        return PT_ENOMEM;
    }
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        row_to_trade(st, t);
        if (cb(ctx, t))
            break;
    }
    free(t);
    done(s, st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? PT_OK : db_err(s, "list trades");
}

int pt__sim_trade_next_pay(struct pt_sim *s, struct sim_trade *t)
{
    sqlite3_stmt *st = prep(s, "SELECT " TRADE_COLS " FROM trades WHERE pay_at > 0 AND "
                               "status='pending' ORDER BY pay_at LIMIT 1");
    if (!st)
        return PT_ESTORAGE;
    return one_trade(s, st, t);
}

/*
 * What the order's trade says of its expiry (SPEC 18): the field and text
 * its create named it with and expires_at (absent when none), expired (still
 * unpaid past it: nobody can pay it now), closes (close requests it got),
 * scanned (a customer scanned the code).
 */
static void add_expiry(const struct pt_sim *s, cJSON *o, const char *status, const char *extra)
{
    cJSON *x = cJSON_Parse(extra ? extra : "{}");
    int64_t at = 0, closes = 0, scanned = 0;
    const char *field = pt__sim_json_str(x, "expiry_field"), *text = pt__sim_json_str(x, "expiry");
    if (field && text && pt__sim_json_int(x, "expires_at", &at) == 0) {
        cJSON_AddStringToObject(o, "expiry_field", field);
        cJSON_AddStringToObject(o, "expiry", text);
        cJSON_AddNumberToObject(o, "expires_at", (double)at);
    }
    cJSON_AddBoolToObject(o, "expired",
                          at > 0 && status && strcmp(status, "pending") == 0 &&
                              pt__sim_now_ms(s) >= at);
    pt__sim_json_int(x, "closes", &closes);
    pt__sim_json_int(x, "scanned", &scanned);
    cJSON_AddNumberToObject(o, "closes", (double)closes);
    cJSON_AddBoolToObject(o, "scanned", scanned != 0);
    cJSON_Delete(x);
}

cJSON *pt__sim_ledger_json(struct pt_sim *s, int gw, const char *order_id)
{
    /* One row per (gateway, order): Stripe may hold several PaymentIntents
     * for one order, and the question the tests ask is how many times money
     * moved for the order, so captures are summed and an order counts as
     * captured when any of its trades is. */
    sqlite3_stmt *st = prep(
        s, "SELECT gateway, order_id,"
           " (SELECT amount FROM trades t2 WHERE t2.gateway=t.gateway AND t2.order_id=t.order_id"
           "   ORDER BY id DESC LIMIT 1),"
           " (SELECT currency FROM trades t2 WHERE t2.gateway=t.gateway AND"
           "   t2.order_id=t.order_id ORDER BY id DESC LIMIT 1),"
           " CASE WHEN SUM(status='captured') > 0 THEN 'captured' ELSE"
           "  (SELECT status FROM trades t2 WHERE t2.gateway=t.gateway AND"
           "   t2.order_id=t.order_id ORDER BY id DESC LIMIT 1) END,"
           " SUM(captures), COUNT(*), MIN(created_at), MAX(updated_at),"
           " (SELECT trade_no FROM trades t2 WHERE t2.gateway=t.gateway AND"
           "   t2.order_id=t.order_id ORDER BY id DESC LIMIT 1),"
           " (SELECT COALESCE(SUM(CASE WHEN r.status='succeeded' THEN r.amount END), 0)"
           "   FROM refunds r WHERE r.gateway=t.gateway AND r.order_id=t.order_id),"
           " (SELECT COUNT(*) FROM refunds r WHERE r.gateway=t.gateway AND"
           "   r.order_id=t.order_id),"
           " (SELECT extra FROM trades t2 WHERE t2.gateway=t.gateway AND"
           "   t2.order_id=t.order_id ORDER BY id DESC LIMIT 1)"
           " FROM trades t WHERE (?1 IS NULL OR gateway=?1) AND (?2 IS NULL OR order_id=?2)"
           " GROUP BY gateway, order_id ORDER BY MIN(id)");
    if (!st)
        return NULL;
    if (gw != SIM_GW_ANY)
        sqlite3_bind_text(st, 1, pt__sim_gw_name(gw), -1, SQLITE_STATIC);
    if (order_id)
        sqlite3_bind_text(st, 2, order_id, -1, SQLITE_TRANSIENT);
    cJSON *root = cJSON_CreateObject();
    cJSON *data = cJSON_AddArrayToObject(root, "data");
    int rc;
    while (data && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        cJSON_AddItemToArray(data, o);
        cJSON_AddStringToObject(o, "gateway", (const char *)sqlite3_column_text(st, 0));
        cJSON_AddStringToObject(o, "order_id", (const char *)sqlite3_column_text(st, 1));
        cJSON_AddNumberToObject(o, "amount", (double)sqlite3_column_int64(st, 2));
        cJSON_AddStringToObject(o, "currency", (const char *)sqlite3_column_text(st, 3));
        cJSON_AddStringToObject(o, "status", (const char *)sqlite3_column_text(st, 4));
        cJSON_AddNumberToObject(o, "captures", (double)sqlite3_column_int64(st, 5));
        /* Money returned (succeeded refunds; a WeChat refund still
         * processing has not returned any yet) and refunds executed (every
         * one accepted, processing included: each is one execution). */
        cJSON_AddNumberToObject(o, "refunded", (double)sqlite3_column_int64(st, 10));
        cJSON_AddNumberToObject(o, "refunds", (double)sqlite3_column_int64(st, 11));
        cJSON_AddNumberToObject(o, "trades", (double)sqlite3_column_int64(st, 6));
        cJSON_AddStringToObject(o, "trade_no", (const char *)sqlite3_column_text(st, 9));
        cJSON_AddNumberToObject(o, "created_at", (double)sqlite3_column_int64(st, 7));
        cJSON_AddNumberToObject(o, "updated_at", (double)sqlite3_column_int64(st, 8));
        add_expiry(s, o, (const char *)sqlite3_column_text(st, 4),
                   (const char *)sqlite3_column_text(st, 12));
    }
    done(s, st);
    return root;
}

/* ---- refunds ------------------------------------------------------------ */

#define REFUND_COLS                                                                                \
    "id, gateway, scope, refund_key, refund_no, trade_id, order_id, trade_no, amount, currency, "  \
    "status, params_hash, extra, settle_at, created_at, updated_at, succeeded_at"

static void row_to_refund(sqlite3_stmt *st, struct sim_refund *r)
{
    char gw[16];
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(st, 0);
    text(st, 1, gw, sizeof gw);
    r->gw = pt__sim_gw_parse(gw);
    text(st, 2, r->scope, sizeof r->scope);
    text(st, 3, r->refund_key, sizeof r->refund_key);
    text(st, 4, r->refund_no, sizeof r->refund_no);
    r->trade_id = sqlite3_column_int64(st, 5);
    text(st, 6, r->order_id, sizeof r->order_id);
    text(st, 7, r->trade_no, sizeof r->trade_no);
    r->amount = sqlite3_column_int64(st, 8);
    text(st, 9, r->currency, sizeof r->currency);
    text(st, 10, r->status, sizeof r->status);
    text(st, 11, r->params_hash, sizeof r->params_hash);
    text(st, 12, r->extra, sizeof r->extra);
    r->settle_at = sqlite3_column_int64(st, 13);
    r->created_at = sqlite3_column_int64(st, 14);
    r->updated_at = sqlite3_column_int64(st, 15);
    r->succeeded_at = sqlite3_column_int64(st, 16);
}

static int one_refund(struct pt_sim *s, sqlite3_stmt *st, struct sim_refund *r)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        row_to_refund(st, r);
        rc = PT_OK;
    } else if (rc == SQLITE_DONE) {
        rc = PT_ENOTFOUND;
    } else {
        rc = db_err(s, "read refund");
    }
    done(s, st);
    return rc;
}

int pt__sim_refund_get(struct pt_sim *s, int gw, const char *scope, const char *key,
                       struct sim_refund *r)
{
    sqlite3_stmt *st = prep(s, "SELECT " REFUND_COLS " FROM refunds WHERE gateway=? AND scope=? "
                               "AND refund_key=?");
    if (!st)
        return PT_ESTORAGE;
    sqlite3_bind_text(st, 1, pt__sim_gw_name(gw), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, scope, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 3, key, -1, SQLITE_TRANSIENT);
    return one_refund(s, st, r);
}

int pt__sim_refund_insert(struct pt_sim *s, struct sim_refund *r)
{
    sqlite3_stmt *st =
        prep(s, "INSERT INTO refunds(gateway, scope, refund_key, refund_no, trade_id, order_id, "
                "trade_no, amount, currency, status, params_hash, extra, settle_at, created_at, "
                "updated_at, succeeded_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    if (!st)
        return PT_ESTORAGE;
    sqlite3_bind_text(st, 1, pt__sim_gw_name(r->gw), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->scope, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, r->refund_key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, r->refund_no, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, r->trade_id);
    sqlite3_bind_text(st, 6, r->order_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, r->trade_no, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 8, r->amount);
    sqlite3_bind_text(st, 9, r->currency, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 10, r->status, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 11, r->params_hash, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 12, r->extra[0] ? r->extra : "{}", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 13, r->settle_at);
    sqlite3_bind_int64(st, 14, r->created_at);
    sqlite3_bind_int64(st, 15, r->updated_at);
    sqlite3_bind_int64(st, 16, r->succeeded_at);
    int rc = sqlite3_step(st);
    done(s, st);
    if (rc == SQLITE_CONSTRAINT)
        return PT_EEXIST;
    if (rc != SQLITE_DONE)
        return db_err(s, "insert refund");
    r->id = sqlite3_last_insert_rowid(s->db);
    return PT_OK;
}

int pt__sim_refund_update(struct pt_sim *s, const struct sim_refund *r)
{
    sqlite3_stmt *st = prep(s, "UPDATE refunds SET status=?, extra=?, settle_at=?, updated_at=?, "
                               "succeeded_at=? WHERE id=?");
    if (!st)
        return PT_ESTORAGE;
    sqlite3_bind_text(st, 1, r->status, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->extra[0] ? r->extra : "{}", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, r->settle_at);
    sqlite3_bind_int64(st, 4, r->updated_at);
    sqlite3_bind_int64(st, 5, r->succeeded_at);
    sqlite3_bind_int64(st, 6, r->id);
    int rc = sqlite3_step(st);
    done(s, st);
    return rc == SQLITE_DONE ? PT_OK : db_err(s, "update refund");
}

int pt__sim_refund_totals(struct pt_sim *s, int64_t trade_id, int64_t *taken, int64_t *succeeded,
                          int *count)
{
    sqlite3_stmt *st =
        prep(s, "SELECT COALESCE(SUM(amount), 0),"
                " COALESCE(SUM(CASE WHEN status='succeeded' THEN amount END), 0), COUNT(*)"
                " FROM refunds WHERE trade_id=?");
    if (!st)
        return PT_ESTORAGE;
    sqlite3_bind_int64(st, 1, trade_id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        if (taken)
            *taken = sqlite3_column_int64(st, 0);
        if (succeeded)
            *succeeded = sqlite3_column_int64(st, 1);
        if (count)
            *count = sqlite3_column_int(st, 2);
        rc = PT_OK;
    } else {
        rc = db_err(s, "sum refunds");
    }
    done(s, st);
    return rc;
}

int pt__sim_refund_each(struct pt_sim *s, int64_t trade_id,
                        int (*cb)(void *ctx, const struct sim_refund *r), void *ctx)
{
    sqlite3_stmt *st =
        prep(s, "SELECT " REFUND_COLS " FROM refunds WHERE trade_id=? ORDER BY id DESC");
    if (!st)
        return PT_ESTORAGE;
    sqlite3_bind_int64(st, 1, trade_id);
    struct sim_refund *r = malloc(sizeof *r);
    if (!r) {
        done(s, st);
        return PT_ENOMEM;
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        row_to_refund(st, r);
        if (cb(ctx, r))
            break;
    }
    free(r);
    done(s, st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? PT_OK : db_err(s, "list refunds");
}

int pt__sim_refund_next_settle(struct pt_sim *s, struct sim_refund *r)
{
    sqlite3_stmt *st = prep(s, "SELECT " REFUND_COLS " FROM refunds WHERE settle_at > 0 AND "
                               "status='processing' ORDER BY settle_at LIMIT 1");
    if (!st)
        return PT_ESTORAGE;
    return one_refund(s, st, r);
}

/* ---- Stripe idempotency keys ------------------------------------------- */

void pt__sim_idem_free(struct sim_idem *r)
{
    free(r->body);
    r->body = NULL;
}

int pt__sim_idem_get(struct pt_sim *s, const char *key, struct sim_idem *r)
{
    memset(r, 0, sizeof *r);
    sqlite3_stmt *st =
        prep(s, "SELECT request_hash, status, body, created_at FROM stripe_keys WHERE key=?");
    if (!st)
        return PT_ESTORAGE;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        snprintf(r->key, sizeof r->key, "%s", key);
        text(st, 0, r->hash, sizeof r->hash);
        r->status = sqlite3_column_int(st, 1);
        const char *b = (const char *)sqlite3_column_text(st, 2);
        r->body = strdup(b ? b : "");
        r->created_at = sqlite3_column_int64(st, 3);
        rc = r->body ? PT_OK : PT_ENOMEM;
    } else {
        rc = rc == SQLITE_DONE ? PT_ENOTFOUND : db_err(s, "read idempotency key");
    }
    done(s, st);
    return rc;
}

int pt__sim_idem_put(struct pt_sim *s, const struct sim_idem *r)
{
    sqlite3_stmt *st = prep(s, "INSERT OR REPLACE INTO stripe_keys(key, request_hash, status, "
                               "body, created_at) VALUES(?,?,?,?,?)");
    if (!st)
        return PT_ESTORAGE;
    sqlite3_bind_text(st, 1, r->key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->hash, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, r->status);
    sqlite3_bind_text(st, 4, r->body ? r->body : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, r->created_at);
    int rc = sqlite3_step(st);
    done(s, st);
    return rc == SQLITE_DONE ? PT_OK : db_err(s, "store idempotency key");
}

int pt__sim_idem_delete(struct pt_sim *s, const char *key)
{
    sqlite3_stmt *st = prep(s, "DELETE FROM stripe_keys WHERE key=?");
    if (!st)
        return PT_ESTORAGE;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    done(s, st);
    return rc == SQLITE_DONE ? PT_OK : db_err(s, "delete idempotency key");
}

/* ---- outbox ------------------------------------------------------------ */

void pt__sim_note_free(struct sim_note *n)
{
    free(n->body);
    n->body = NULL;
}

int pt__sim_note_add(struct pt_sim *s, struct sim_note *n)
{
    sqlite3_stmt *st = prep(s, "INSERT INTO outbox(gateway, order_id, kind, url, content_type, "
                               "body, due_at, duplicate, created_at) VALUES(?,?,?,?,?,?,?,?,?)");
    if (!st)
        return PT_ESTORAGE;
    sqlite3_bind_text(st, 1, pt__sim_gw_name(n->gw), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, n->order_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, n->kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, n->url, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, n->ctype, -1, SQLITE_STATIC);
    sqlite3_bind_blob(st, 6, n->body ? n->body : "", (int)n->body_len, SQLITE_STATIC);
    sqlite3_bind_int64(st, 7, n->due_at);
    sqlite3_bind_int(st, 8, n->duplicate);
    sqlite3_bind_int64(st, 9, pt__sim_now_ms(s));
    int rc = sqlite3_step(st);
    done(s, st);
    if (rc != SQLITE_DONE)
        return db_err(s, "queue notification");
    n->id = sqlite3_last_insert_rowid(s->db);
    return PT_OK;
}

int pt__sim_note_next(struct pt_sim *s, struct sim_note *n)
{
    memset(n, 0, sizeof *n);
    sqlite3_stmt *st = prep(s, "SELECT id, gateway, order_id, kind, url, content_type, body, "
                               "due_at, attempts, duplicate, last_error FROM outbox "
                               "WHERE delivered=0 ORDER BY due_at, id LIMIT 1");
    if (!st)
        return PT_ESTORAGE;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        char gw[16];
        n->id = sqlite3_column_int64(st, 0);
        text(st, 1, gw, sizeof gw);
        n->gw = pt__sim_gw_parse(gw);
        text(st, 2, n->order_id, sizeof n->order_id);
        text(st, 3, n->kind, sizeof n->kind);
        text(st, 4, n->url, sizeof n->url);
        text(st, 5, n->ctype, sizeof n->ctype);
        int len = sqlite3_column_bytes(st, 6);
        const void *b = sqlite3_column_blob(st, 6);
        n->body = malloc((size_t)len + 1);
        if (n->body) {
            if (len)
                memcpy(n->body, b, (size_t)len);
            n->body[len] = '\0';
            n->body_len = (size_t)len;
        }
        n->due_at = sqlite3_column_int64(st, 7);
        n->attempts = sqlite3_column_int(st, 8);
        n->duplicate = sqlite3_column_int(st, 9);
        text(st, 10, n->last_error, sizeof n->last_error);
        rc = n->body ? PT_OK : PT_ENOMEM;
    } else {
        rc = rc == SQLITE_DONE ? PT_ENOTFOUND : db_err(s, "read outbox");
    }
    done(s, st);
    return rc;
}

int pt__sim_note_update(struct pt_sim *s, const struct sim_note *n)
{
    sqlite3_stmt *st = prep(s, "UPDATE outbox SET due_at=?, attempts=?, delivered=?, "
                               "last_error=? WHERE id=?");
    if (!st)
        return PT_ESTORAGE;
    sqlite3_bind_int64(st, 1, n->due_at);
    sqlite3_bind_int(st, 2, n->attempts);
    sqlite3_bind_int(st, 3, n->delivered);
    sqlite3_bind_text(st, 4, n->last_error, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, n->id);
    int rc = sqlite3_step(st);
    done(s, st);
    return rc == SQLITE_DONE ? PT_OK : db_err(s, "update outbox");
}

cJSON *pt__sim_notes_json(struct pt_sim *s)
{
    sqlite3_stmt *st = prep(s, "SELECT id, gateway, order_id, kind, url, attempts, delivered, "
                               "duplicate, last_error, due_at FROM outbox ORDER BY id");
    if (!st)
        return NULL;
    cJSON *root = cJSON_CreateObject();
    cJSON *data = cJSON_AddArrayToObject(root, "data");
    while (data && sqlite3_step(st) == SQLITE_ROW) {
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        cJSON_AddItemToArray(data, o);
        cJSON_AddNumberToObject(o, "id", (double)sqlite3_column_int64(st, 0));
        cJSON_AddStringToObject(o, "gateway", (const char *)sqlite3_column_text(st, 1));
        cJSON_AddStringToObject(o, "order_id", (const char *)sqlite3_column_text(st, 2));
        cJSON_AddStringToObject(o, "kind", (const char *)sqlite3_column_text(st, 3));
        cJSON_AddStringToObject(o, "url", (const char *)sqlite3_column_text(st, 4));
        cJSON_AddNumberToObject(o, "attempts", sqlite3_column_int(st, 5));
        cJSON_AddBoolToObject(o, "delivered", sqlite3_column_int(st, 6) == 1);
        cJSON_AddBoolToObject(o, "gave_up", sqlite3_column_int(st, 6) == 2);
        cJSON_AddBoolToObject(o, "duplicate", sqlite3_column_int(st, 7));
        cJSON_AddStringToObject(o, "last_error", (const char *)sqlite3_column_text(st, 8));
        cJSON_AddNumberToObject(o, "due_at", (double)sqlite3_column_int64(st, 9));
    }
    done(s, st);
    return root;
}

/* ---- the gateways' books (SPEC 19) ---------------------------------------- */

int pt__sim_bill_each(struct pt_sim *s, int gw, int64_t from, int64_t to,
                      int (*trade_cb)(void *ctx, const struct sim_trade *t),
                      int (*refund_cb)(void *ctx, const struct sim_refund *r), void *ctx)
{
    /* Money taken: a trade captured, dated by its payment; a refund
     * succeeded, dated by its success.  A line the test told the books to
     * forget (POST /_sim/ledger/forget) is not there. */
    sqlite3_stmt *st =
        prep(s, "SELECT " TRADE_COLS " FROM trades WHERE gateway=?1 AND "
                "status='captured' AND paid_at >= ?2 AND paid_at < ?3 AND "
                "json_extract(extra, '$.bill_forgotten') IS NULL ORDER BY paid_at, id");
    if (!st)
        return PT_ESTORAGE;
    sqlite3_bind_text(st, 1, pt__sim_gw_name(gw), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, from);
    sqlite3_bind_int64(st, 3, to);
    int rc, stop = 0;
    struct sim_trade *t = malloc(sizeof *t);
    struct sim_refund *r = malloc(sizeof *r);
    if (!t || !r) {
        done(s, st);
        free(t);
        free(r);
        return PT_ENOMEM;
    }
    while (!stop && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        row_to_trade(st, t);
        stop = trade_cb(ctx, t);
    }
    done(s, st);
    if (!stop && rc != SQLITE_DONE) {
        free(t);
        free(r);
        return db_err(s, "bill trades");
    }
    st = prep(s, "SELECT " REFUND_COLS " FROM refunds WHERE gateway=?1 AND status='succeeded' "
                 "AND succeeded_at >= ?2 AND succeeded_at < ?3 AND "
                 "json_extract(extra, '$.bill_forgotten') IS NULL ORDER BY succeeded_at, id");
    if (!st) {
        free(t);
        free(r);
        return PT_ESTORAGE;
    }
    sqlite3_bind_text(st, 1, pt__sim_gw_name(gw), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, from);
    sqlite3_bind_int64(st, 3, to);
    while (!stop && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        row_to_refund(st, r);
        stop = refund_cb(ctx, r);
    }
    done(s, st);
    free(t);
    free(r);
    return stop || rc == SQLITE_DONE ? PT_OK : db_err(s, "bill refunds");
}

int pt__sim_ledger_alter(struct pt_sim *s, int gw, const char *order_id, const char *refund_id,
                         int64_t amount, const char *currency)
{
    /* A refund is named as for forget (below); its currency is its trade's. */
    sqlite3_stmt *st =
        order_id ? prep(s, "UPDATE trades SET amount=CASE WHEN ?3 > 0 THEN ?3 ELSE amount END, "
                           "currency=coalesce(?4, currency) WHERE gateway=?1 AND order_id=?2")
                 : prep(s, "UPDATE refunds SET amount=?3 WHERE gateway=?1 AND ?3 > 0 AND "
                           "(refund_key=?2 OR json_extract(extra, '$.metadata.refund_id')=?2 OR "
                           "json_extract(extra, '$.refund_id')=?2)");
    if (!st)
        return PT_ESTORAGE;
    sqlite3_bind_text(st, 1, pt__sim_gw_name(gw), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, order_id ? order_id : refund_id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 3, amount);
    if (order_id && currency)
        sqlite3_bind_text(st, 4, currency, -1, SQLITE_TRANSIENT);
    else if (order_id)
        sqlite3_bind_null(st, 4);
    int rc = sqlite3_step(st);
    int n = sqlite3_changes(s->db);
    done(s, st);
    if (rc != SQLITE_DONE)
        return db_err(s, "alter a line");
    return n ? PT_OK : PT_ENOTFOUND;
}

int pt__sim_ledger_forget(struct pt_sim *s, int gw, const char *order_id, const char *refund_id)
{
    /* A refund is named by the merchant's refund id: its key (WeChat,
     * Alipay) or, where the key is not the merchant's (Stripe, 2C2P), the
     * refund_id its metadata or request carried. */
    sqlite3_stmt *st =
        order_id ? prep(s, "UPDATE trades SET extra=json_set(extra, '$.bill_forgotten', 1) "
                           "WHERE gateway=?1 AND order_id=?2")
                 : prep(s, "UPDATE refunds SET extra=json_set(extra, '$.bill_forgotten', 1) "
                           "WHERE gateway=?1 AND (refund_key=?2 OR "
                           "json_extract(extra, '$.metadata.refund_id')=?2 OR "
                           "json_extract(extra, '$.refund_id')=?2)");
    if (!st)
        return PT_ESTORAGE;
    sqlite3_bind_text(st, 1, pt__sim_gw_name(gw), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, order_id ? order_id : refund_id, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    int n = sqlite3_changes(s->db);
    done(s, st);
    if (rc != SQLITE_DONE)
        return db_err(s, "forget a line");
    return n ? PT_OK : PT_ENOTFOUND;
}
