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

#include <assert.h>
#include <sqlite3.h>
#include <stddef.h>
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

/*
 * The two books, trades and refunds, are read and inserted through one
 * table of columns each: column i of the SELECT (TRADE_COLS, REFUND_COLS)
 * is cols[i], the INSERT binds cols[1..] to ?1.. in the same order.
 */
enum col_kind {
    COL_ID,   /* int64_t, the rowid: read, never inserted */
    COL_GW,   /* int, the gateway's index, stored by name */
    COL_TEXT, /* char[size] */
    COL_JSON, /* char[size], a JSON object: "" is stored as {} */
    COL_I64,  /* int64_t */
    COL_INT,  /* int */
};

struct col {
    enum col_kind kind;
    size_t off, size;
};

#define COL(kind, type, field)                                                                     \
    {                                                                                              \
        kind, offsetof(type, field), sizeof(((type *)0)->field)                                    \
    }

struct book {
    const char *insert_sql, *update_sql; /* literals: prep() keys on their address */
    const struct col *cols;
    int ncols;
    const int *update; /* the columns update_sql binds, in order, ending in -1 */
    size_t size;
    const char *read, *insert, *write, *list; /* what db_err() says failed */
};

static void book_read(sqlite3_stmt *st, const struct book *b, void *obj)
{
    char *p = obj;
    memset(obj, 0, b->size);
    for (int i = 0; i < b->ncols; i++) {
        const struct col *c = &b->cols[i];
        char gw[16];
        switch (c->kind) {
        case COL_ID:
        case COL_I64:
            *(int64_t *)(void *)(p + c->off) = sqlite3_column_int64(st, i);
            break;
        case COL_INT:
            *(int *)(void *)(p + c->off) = sqlite3_column_int(st, i);
            break;
        case COL_GW:
            text(st, i, gw, sizeof gw);
            *(int *)(void *)(p + c->off) = pt__sim_gw_parse(gw);
            break;
        case COL_TEXT:
        case COL_JSON:
            text(st, i, p + c->off, c->size);
            break;
        }
    }
}

/* The one row st selects into obj: PT_ENOTFOUND when there is none. */
static int book_one(struct pt_sim *s, sqlite3_stmt *st, const struct book *b, void *obj)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        book_read(st, b, obj);
        rc = PT_OK;
    } else if (rc == SQLITE_DONE) {
        rc = PT_ENOTFOUND;
    } else {
        rc = db_err(s, b->read);
    }
    done(s, st);
    return rc;
}

/* Column c of obj bound to parameter i (kept by obj: SQLITE_STATIC). */
static void bind_col(sqlite3_stmt *st, int i, const struct col *c, const void *obj)
{
    const char *v = (const char *)obj + c->off;
    switch (c->kind) {
    case COL_ID:
    case COL_I64:
        sqlite3_bind_int64(st, i, *(const int64_t *)(const void *)v);
        break;
    case COL_INT:
        sqlite3_bind_int(st, i, *(const int *)(const void *)v);
        break;
    case COL_GW:
        sqlite3_bind_text(st, i, pt__sim_gw_name(*(const int *)(const void *)v), -1, SQLITE_STATIC);
        break;
    case COL_TEXT:
    case COL_JSON:
        sqlite3_bind_text(st, i, c->kind == COL_JSON && !*v ? "{}" : v, -1, SQLITE_STATIC);
        break;
    }
}

/* obj's changing columns (b->update, the id last) written to its row. */
static int book_update(struct pt_sim *s, const struct book *b, const void *obj)
{
    sqlite3_stmt *st = prep(s, b->update_sql);
    if (!st)
        return PT_ESTORAGE;
    for (int i = 0; b->update[i] >= 0; i++)
        bind_col(st, i + 1, &b->cols[b->update[i]], obj);
    int rc = sqlite3_step(st);
    done(s, st);
    return rc == SQLITE_DONE ? PT_OK : db_err(s, b->write);
}

/* obj inserted; its id set.  PT_EEXIST when a unique key already has one. */
static int book_insert(struct pt_sim *s, const struct book *b, void *obj)
{
    sqlite3_stmt *st = prep(s, b->insert_sql);
    if (!st)
        return PT_ESTORAGE;
    assert(b->cols[0].kind == COL_ID);
    for (int i = 1; i < b->ncols; i++)
        bind_col(st, i, &b->cols[i], obj);
    int rc = sqlite3_step(st);
    done(s, st);
    if (rc == SQLITE_CONSTRAINT)
        return PT_EEXIST;
    if (rc != SQLITE_DONE)
        return db_err(s, b->insert);
    *(int64_t *)(void *)((char *)obj + b->cols[0].off) = sqlite3_last_insert_rowid(s->db);
    return PT_OK;
}

/* Each row st selects, into one buffer, handed to cb until it returns
 * non-zero. */
static int book_each(struct pt_sim *s, sqlite3_stmt *st, const struct book *b,
                     int (*cb)(void *ctx, const void *row), void *ctx)
{
    void *row = malloc(b->size);
    if (!row) {
        done(s, st);
        return PT_ENOMEM;
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        book_read(st, b, row);
        if (cb(ctx, row))
            break;
    }
    free(row);
    done(s, st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? PT_OK : db_err(s, b->list);
}

#define TRADE_COLS                                                                                 \
    "id, gateway, order_id, trade_no, method, amount, currency, status, captures, params_hash, "   \
    "extra, pay_at, created_at, updated_at, paid_at"

#define T(kind, field) COL(kind, struct sim_trade, field)
static const struct col trade_cols[] = {
    T(COL_ID, id),          T(COL_GW, gw),
    T(COL_TEXT, order_id),  T(COL_TEXT, trade_no),
    T(COL_TEXT, method),    T(COL_I64, amount),
    T(COL_TEXT, currency),  T(COL_TEXT, status),
    T(COL_INT, captures),   T(COL_TEXT, params_hash),
    T(COL_JSON, extra),     T(COL_I64, pay_at),
    T(COL_I64, created_at), T(COL_I64, updated_at),
    T(COL_I64, paid_at),
};
#undef T

static const struct book trades = {
    "INSERT INTO trades(gateway, order_id, trade_no, method, amount, currency, status, captures, "
    "params_hash, extra, pay_at, created_at, updated_at, paid_at) "
    "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    "UPDATE trades SET status=?, captures=?, extra=?, pay_at=?, updated_at=?, paid_at=? "
    "WHERE id=?",
    trade_cols,
    (int)(sizeof trade_cols / sizeof trade_cols[0]),
    (const int[]){7, 8, 10, 11, 13, 14, 0, -1},
    sizeof(struct sim_trade),
    "read trade",
    "insert trade",
    "update trade",
    "list trades",
};

static int one_trade(struct pt_sim *s, sqlite3_stmt *st, struct sim_trade *t)
{
    return book_one(s, st, &trades, t);
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
    return book_insert(s, &trades, t);
}

int pt__sim_trade_update(struct pt_sim *s, const struct sim_trade *t)
{
    return book_update(s, &trades, t);
}

/* A caller's callback of trades, and whether it stopped the walk. */
struct trade_each {
    int (*cb)(void *ctx, const struct sim_trade *t);
    void *ctx;
    int stopped;
};

static int each_trade(void *ctx, const void *row)
{
    struct trade_each *e = ctx;
    return e->stopped = e->cb(e->ctx, row);
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
    struct trade_each e = {cb, ctx, 0};
    return book_each(s, st, &trades, each_trade, &e);
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

#define R(kind, field) COL(kind, struct sim_refund, field)
static const struct col refund_cols[] = {
    R(COL_ID, id),
    R(COL_GW, gw),
    R(COL_TEXT, scope),
    R(COL_TEXT, refund_key),
    R(COL_TEXT, refund_no),
    R(COL_I64, trade_id),
    R(COL_TEXT, order_id),
    R(COL_TEXT, trade_no),
    R(COL_I64, amount),
    R(COL_TEXT, currency),
    R(COL_TEXT, status),
    R(COL_TEXT, params_hash),
    R(COL_JSON, extra),
    R(COL_I64, settle_at),
    R(COL_I64, created_at),
    R(COL_I64, updated_at),
    R(COL_I64, succeeded_at),
};
#undef R

static const struct book refunds = {
    "INSERT INTO refunds(gateway, scope, refund_key, refund_no, trade_id, order_id, trade_no, "
    "amount, currency, status, params_hash, extra, settle_at, created_at, updated_at, "
    "succeeded_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    "UPDATE refunds SET status=?, extra=?, settle_at=?, updated_at=?, succeeded_at=? WHERE id=?",
    refund_cols,
    (int)(sizeof refund_cols / sizeof refund_cols[0]),
    (const int[]){10, 12, 13, 15, 16, 0, -1},
    sizeof(struct sim_refund),
    "read refund",
    "insert refund",
    "update refund",
    "list refunds",
};

static int one_refund(struct pt_sim *s, sqlite3_stmt *st, struct sim_refund *r)
{
    return book_one(s, st, &refunds, r);
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
    return book_insert(s, &refunds, r);
}

int pt__sim_refund_update(struct pt_sim *s, const struct sim_refund *r)
{
    return book_update(s, &refunds, r);
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

/* A caller's callback of refunds, and whether it stopped the walk. */
struct refund_each {
    int (*cb)(void *ctx, const struct sim_refund *r);
    void *ctx;
    int stopped;
};

static int each_refund(void *ctx, const void *row)
{
    struct refund_each *e = ctx;
    return e->stopped = e->cb(e->ctx, row);
}

int pt__sim_refund_each(struct pt_sim *s, int64_t trade_id,
                        int (*cb)(void *ctx, const struct sim_refund *r), void *ctx)
{
    sqlite3_stmt *st =
        prep(s, "SELECT " REFUND_COLS " FROM refunds WHERE trade_id=? ORDER BY id DESC");
    if (!st)
        return PT_ESTORAGE;
    sqlite3_bind_int64(st, 1, trade_id);
    struct refund_each e = {cb, ctx, 0};
    return book_each(s, st, &refunds, each_refund, &e);
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
    struct trade_each te = {trade_cb, ctx, 0};
    int rc = book_each(s, st, &trades, each_trade, &te);
    if (rc || te.stopped)
        return rc;
    st = prep(s, "SELECT " REFUND_COLS " FROM refunds WHERE gateway=?1 AND status='succeeded' "
                 "AND succeeded_at >= ?2 AND succeeded_at < ?3 AND "
                 "json_extract(extra, '$.bill_forgotten') IS NULL ORDER BY succeeded_at, id");
    if (!st)
        return PT_ESTORAGE;
    sqlite3_bind_text(st, 1, pt__sim_gw_name(gw), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, from);
    sqlite3_bind_int64(st, 3, to);
    struct refund_each re = {refund_cb, ctx, 0};
    return book_each(s, st, &refunds, each_refund, &re);
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
