/*
 * store_sqlite_ops.c - the SQLite store's own operations: those that are
 * not written once in store_ops.c because SQLite does them its own way
 * (the keys' pending lock, rowids, the floors, a statement per state set,
 * the clock), and the table store.c forwards through.
 */
#include "store_sqlite_impl.h"

/* ---- idempotency keys ------------------------------------------------- */

/* Runs s; PT_ESTATE unless it changed exactly one row (a condition that no
 * longer held, or no such row). */
static int run_one(struct pt_store *st, sqlite3_stmt *s)
{
    int rc = pt__sq_run(st, s);
    return rc ? rc : sqlite3_changes(st->c->db) == 1 ? PT_OK : PT_ESTATE;
}

/* Statement id prepared, with the key's scope and name bound to ?1 and ?2. */
static sqlite3_stmt *key_stmt(struct pt_store *st, int id, const char *scope, const char *key)
{
    sqlite3_stmt *s = pt__sq_stmt(st, id);
    if (s) {
        sqlite3_bind_text(s, 1, scope, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
    }
    return s;
}

static int sq_key_insert(struct pt_store *st, const char *scope, const char *key,
                         const unsigned char hash[32], int64_t instance, int64_t now,
                         int64_t expires_at)
{
    sqlite3_stmt *s = key_stmt(st, S_KEY_INSERT, scope, key);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_blob(s, 3, hash, 32, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, now);
    sqlite3_bind_int64(s, 5, instance);
    sqlite3_bind_int64(s, 6, expires_at);
    int rc = pt__sq_run(st, s);
    if (rc)
        return rc;
    /* INSERT OR IGNORE + change count: the SQLite spelling of "take the lock
     * only if nobody holds this key". */
    if (sqlite3_changes(st->c->db) != 1)
        return PT_EEXIST;
    st->last_key_rowid = sqlite3_last_insert_rowid(st->c->db);
    return PT_OK;
}

static int sq_key_take_later(struct pt_store *st, const char *scope, const char *key,
                             const unsigned char hash[32], int64_t instance, int64_t now,
                             int64_t expires_at, struct pt_key_lock *lock)
{
    assert(st->in_txn);
    sqlite3_stmt *s = key_stmt(st, S_KEY_EXISTS, scope, key);
    if (!s)
        return PT_ESTORAGE;
    int rc = sqlite3_step(s);
    int err = rc == SQLITE_ROW    ? PT_EEXIST
              : rc == SQLITE_DONE ? PT_OK
                                  : pt__sq_xlate(sqlite3_extended_errcode(st->c->db));
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
        sqlite3_stmt *s = key_stmt(st, S_KEY_INSERT_HELD, scope, key);
        if (!s)
            return PT_ESTORAGE;
        sqlite3_bind_blob(s, 3, lock->hash, 32, SQLITE_STATIC);
        sqlite3_bind_int64(s, 4, lock->at);
        sqlite3_bind_int64(s, 5, lock->by);
        sqlite3_bind_int64(s, 6, lock->expires_at);
        pt__sq_bind_text(s, 7, order_id);
        int rc = pt__sq_run(st, s);
        if (rc)
            return rc;
        key_written(st, lock);
        st->last_key_rowid = sqlite3_last_insert_rowid(st->c->db); /* completed by id later */
        return PT_OK;
    }

    sqlite3_stmt *s = key_stmt(st, S_KEY_SET_ORDER, scope, key);
    if (!s)
        return PT_ESTORAGE;
    pt__sq_bind_text(s, 3, order_id);
    sqlite3_bind_int64(s, 4, lock->at);
    sqlite3_bind_int64(s, 5, lock->by);
    return run_one(st, s);
}

static int sq_key_complete(struct pt_store *st, const char *scope, const char *key,
                           struct pt_key_lock *lock, int status, const char *body, size_t len,
                           int64_t now)
{
    if (lock->pending) {
        if (!pending_ok(st, lock))
            return PT_ESTATE;
        /* The key's one write: the completed record. */
        sqlite3_stmt *s = key_stmt(st, S_KEY_INSERT_DONE, scope, key);
        if (!s)
            return PT_ESTORAGE;
        sqlite3_bind_blob(s, 3, lock->hash, 32, SQLITE_STATIC);
        sqlite3_bind_int64(s, 4, now);
        sqlite3_bind_int(s, 5, status);
        sqlite3_bind_blob(s, 6, body ? body : "", (int)len, SQLITE_STATIC);
        sqlite3_bind_int64(s, 7, lock->at);
        sqlite3_bind_int64(s, 8, lock->expires_at);
        pt__sq_bind_text(s, 9, lock->order_id);
        int rc = pt__sq_run(st, s);
        if (rc)
            return rc;
        key_written(st, lock);
        return PT_OK;
    }
    /* First by the rowid this connection got for the key, if it is that
     * key's (the WHERE says so); else by (scope, key). */
    for (int by_id = st->last_key_rowid > 0; by_id >= 0; by_id--) {
        sqlite3_stmt *s = key_stmt(st, by_id ? S_KEY_COMPLETE_ID : S_KEY_COMPLETE, scope, key);
        if (!s)
            return PT_ESTORAGE;
        sqlite3_bind_int(s, 3, status);
        sqlite3_bind_blob(s, 4, body ? body : "", (int)len, SQLITE_STATIC);
        sqlite3_bind_int64(s, 5, now);
        if (by_id)
            sqlite3_bind_int64(s, 6, st->last_key_rowid);
        sqlite3_bind_int64(s, 7, lock->at);
        sqlite3_bind_int64(s, 8, lock->by);
        pt__sq_bind_text(s, 9, lock->order_id); /* "": NULL, the link kept */
        int rc = pt__sq_run(st, s);
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
    sqlite3_stmt *s = key_stmt(st, S_KEY_DELETE, scope, key);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 3, lock->at);
    sqlite3_bind_int64(s, 4, lock->by);
    return run_one(st, s);
}

/* ---- charges ---------------------------------------------------------- */

static int sq_charge_insert(struct pt_store *st, struct pt_charge *c, int64_t now)
{
    sqlite3_stmt *s = pt__sq_stmt(st, S_CHARGE_INSERT);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, c->order_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, c->gateway, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, c->method, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, c->amount);
    sqlite3_bind_text(s, 5, c->currency, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, pt_state_name(c->state), -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 7, pt_offline_mode_name(c->offline), -1, SQLITE_STATIC);
    pt__sq_bind_text(s, 8, c->subject);
    pt__sq_bind_text(s, 9, c->payment_code);
    pt__sq_bind_text(s, 10, c->payment_method);
    pt__sq_bind_text(s, 11, c->customer);
    pt__sq_bind_text(s, 12, c->metadata);
    sqlite3_bind_int64(s, 13, c->next_attempt_at);
    sqlite3_bind_int64(s, 14, now);
    sqlite3_bind_int(s, 15, c->offline_accepted != 0);
    int rc = pt__sq_run(st, s);
    if (rc == PT_EINVAL && strstr(sqlite3_errmsg(st->c->db), "order_id_archived"))
        return PT_EEXIST; /* taken by a charge retention archived (sql/016) */
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

/* Steps a statement that returns up to max rows of kind k (charges,
 * refunds) into rows[]. */
static int read_rows(struct pt_store *st, sqlite3_stmt *s, const struct pt_row_kind *k, int max,
                     void *rows, int *n)
{
    int rc = SQLITE_DONE;
    *n = 0;
    while (*n < max && (rc = sqlite3_step(s)) == SQLITE_ROW)
        read_row(s, k, (char *)rows + (size_t)(*n)++ * k->size);
    rc = (rc == SQLITE_ROW || rc == SQLITE_DONE)
             ? PT_OK
             : pt__sq_xlate(sqlite3_extended_errcode(st->c->db));
    sqlite3_reset(s);
    return rc;
}

static int scalar(struct pt_store *st, sqlite3_stmt *s, int64_t *out);

/* The id of charge_id's next audit row (AUDIT_NEXT_SQL). */
static int next_in_trail(struct pt_store *st, int64_t charge_id, int64_t *next)
{
    sqlite3_stmt *s = pt__sq_stmt(st, S_AUDIT_NEXT);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, charge_id);
    return scalar(st, s, next);
}

/* A row of a charge's audit trail, about its refund refund_id when given
 * (statement S_AUDIT_INSERT_REFUND). */
static int audit(struct pt_store *st, int id, int64_t charge_id, const char *refund_id,
                 const char *from, const char *to, const char *cause, const char *actor,
                 int refused, const char *detail, int64_t now)
{
    assert((id == S_AUDIT_INSERT_REFUND) == (refund_id != NULL));
    int64_t next = 0;
    int rc = id != S_AUDIT_INSERT_FIRST ? next_in_trail(st, charge_id, &next) : PT_OK;
    if (rc)
        return rc;
    sqlite3_stmt *s = pt__sq_stmt(st, id);
    if (!s)
        return PT_ESTORAGE;
    if (id != S_AUDIT_INSERT_FIRST)
        sqlite3_bind_int64(s, 9, next);
    if (refund_id)
        sqlite3_bind_text(s, 10, refund_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 1, charge_id);
    pt__sq_bind_text(s, 2, from);
    pt__sq_bind_text(s, 3, to);
    sqlite3_bind_text(s, 4, cause, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, actor, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 6, refused ? 1 : 0);
    pt__sq_bind_text(s, 7, detail);
    sqlite3_bind_int64(s, 8, now);
    return pt__sq_run(st, s);
}

static int sq_audit(struct pt_store *st, int64_t charge_id, const char *from, const char *to,
                    const char *cause, const char *actor, int refused, const char *detail,
                    int64_t now)
{
    return audit(st, S_AUDIT_INSERT, charge_id, NULL, from, to, cause, actor, refused, detail, now);
}

static int sq_audit_first(struct pt_store *st, int64_t charge_id, const char *to, const char *cause,
                          const char *actor, int64_t now)
{
    /* A new charge has no trail yet: its first row is seq 1, no lookup. */
    return audit(st, S_AUDIT_INSERT_FIRST, charge_id, NULL, NULL, to, cause, actor, 0, NULL, now);
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
        return pt__sq_xlate(sqlite3_extended_errcode(st->c->db));
    int rc =
        sqlite3_step(s) == SQLITE_ROW ? PT_OK : pt__sq_xlate(sqlite3_extended_errcode(st->c->db));
    if (rc == PT_OK)
        *count = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return rc;
}

static void bind_patch(sqlite3_stmt *s, int64_t id, const struct pt_charge_patch *p, int64_t now)
{
    static const struct pt_charge_patch none = PT_CHARGE_PATCH_NONE;
    if (!p)
        p = &none;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int64(s, 2, now);
    /* NULL keeps a column; pt__sq_bind_text() would turn "" into NULL too, so these
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

/* A transition's UPDATE s (NULL: not prepared) bound and run. */
static int run_transition(struct pt_store *st, sqlite3_stmt *s, int64_t id, enum pt_state to,
                          const struct pt_charge_patch *patch, int64_t now)
{
    if (!s)
        return PT_ESTORAGE;
    bind_patch(s, id, patch, now);
    sqlite3_bind_text(s, 10, pt_state_name(to), -1, SQLITE_STATIC);
    return run_one(st, s);
}

static int sq_charge_transition(struct pt_store *st, int64_t id, unsigned from_mask,
                                enum pt_state to, const struct pt_charge_patch *patch, int64_t now)
{
    from_mask &= PT_FROM_MASKS - 1;
    if (!from_mask || (unsigned)to >= PT_STATE__COUNT)
        return PT_EINVAL;
    return run_transition(st, transition_stmt(st, from_mask), id, to, patch, now);
}

static int sq_charge_accept_offline(struct pt_store *st, const struct pt_charge *c, int64_t now)
{
    sqlite3_stmt *s = pt__sq_stmt(st, S_CHARGE_ACCEPT_OFFLINE);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, c->id);
    sqlite3_bind_int64(s, 2, now);
    return run_one(st, s);
}

static int sq_charge_request_cancel(struct pt_store *st, int64_t id, unsigned from_mask,
                                    int64_t due, int64_t now)
{
    /* The state condition as the transitions write it (cached per mask);
     * the rest of the statement is fixed. */
    from_mask &= PT_FROM_MASKS - 1;
    if (!from_mask)
        return PT_EINVAL;
    sqlite3_stmt *s = pt__sq_stmt(st, S_CHARGE_REQUEST_CANCEL);
    if (!s)
        return PT_ESTORAGE;
    struct pt_charge c;
    int rc = pt_store_charge_get_by_id(st, id, &c);
    if (rc)
        return rc;
    if (!(from_mask & (1u << c.state)))
        return PT_ESTATE; /* read in the caller's write transaction: it stands */
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int64(s, 2, due);
    sqlite3_bind_int64(s, 3, now);
    return run_one(st, s);
}

/* Runs a one-row, one-integer-column query. */
static int scalar(struct pt_store *st, sqlite3_stmt *s, int64_t *out)
{
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *out = sqlite3_column_int64(s, 0);
        rc = PT_OK;
    } else {
        rc = rc == SQLITE_DONE ? PT_ENOTFOUND : pt__sq_xlate(sqlite3_extended_errcode(st->c->db));
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
    sqlite3_stmt *s = pt__sq_stmt(st, id);
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

/* A table's floor (active_floor(), refund_floor()): read again at the start
 * of a walk, the one cached in st otherwise. */
typedef int floor_fn(struct pt_store *st, int64_t *floor);

/* One page of a work list (charges or refunds) due at now, after after_id. */
static int due_rows(struct pt_store *st, floor_fn *read, int64_t cached, int id,
                    const struct pt_row_kind *k, int64_t now, int64_t after_id, int max, void *rows,
                    int *n)
{
    int64_t floor = cached;
    int rc = after_id == 0 ? read(st, &floor) : PT_OK; /* a new walk */
    if (rc)
        return rc;
    sqlite3_stmt *s = pt__sq_stmt(st, id);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, now);
    sqlite3_bind_int(s, 2, max);
    sqlite3_bind_int64(s, 3, after_id > floor - 1 ? after_id : floor - 1);
    return read_rows(st, s, k, max, rows, n);
}

/* Statement id into *s with a table's floor bound to ?1. */
static int floor_stmt(struct pt_store *st, floor_fn *read, int id, sqlite3_stmt **s)
{
    int64_t floor;
    int rc = read(st, &floor);
    if (rc)
        return rc;
    if (!(*s = pt__sq_stmt(st, id)))
        return PT_ESTORAGE;
    sqlite3_bind_int64(*s, 1, floor);
    return PT_OK;
}

/* The one integer of statement id bound to a table's floor, such as when
 * the next row of a work list is due (0 when there is none). */
static int floor_scalar(struct pt_store *st, floor_fn *read, int id, int64_t *when)
{
    sqlite3_stmt *s;
    int rc = floor_stmt(st, read, id, &s);
    return rc ? rc : scalar(st, s, when);
}

static int sq_charges_due(struct pt_store *st, int64_t now, int64_t after_id, int max,
                          struct pt_charge *rows, int *n)
{
    return due_rows(st, active_floor, st->active_floor, S_CHARGES_DUE, &pt_charge_row, now,
                    after_id, max, rows, n);
}

static int sq_charges_next_due(struct pt_store *st, int64_t *when)
{
    return floor_scalar(st, active_floor, S_CHARGES_NEXT_DUE, when);
}

static int sq_queue_figures(struct pt_store *st, const char *currency, int64_t *count,
                            int64_t *amount)
{
    sqlite3_stmt *s = pt__sq_stmt(st, S_QUEUE_FIGURES);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, currency, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *count = sqlite3_column_int64(s, 0);
        *amount = sqlite3_column_int64(s, 1);
        rc = PT_OK;
    } else {
        rc = pt__sq_xlate(sqlite3_extended_errcode(st->c->db));
        if (rc == PT_OK)
            rc = PT_ESTORAGE;
    }
    sqlite3_reset(s);
    return rc;
}

/* The (state, count) rows of s into by_state, then the scalar review_id
 * into *review: a status's counts of charges or of refunds. */
static int state_counts(struct pt_store *st, sqlite3_stmt *s, int64_t by_state[PT_STATE__COUNT],
                        int review_id, int64_t *review)
{
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        enum pt_state state;
        const char *name = (const char *)sqlite3_column_text(s, 0);
        if (name && pt_state_parse(name, &state) == PT_OK)
            by_state[state] = sqlite3_column_int64(s, 1);
    }
    rc = rc == SQLITE_DONE ? PT_OK : pt__sq_xlate(sqlite3_extended_errcode(st->c->db));
    sqlite3_reset(s);
    if (rc)
        return rc;
    if (!(s = pt__sq_stmt(st, review_id)))
        return PT_ESTORAGE;
    return scalar(st, s, review);
}

static int sq_stats(struct pt_store *st, int final_states, struct pt_store_stats *out)
{
    memset(out, 0, sizeof *out);
    int64_t floor;
    int rc = active_floor(st, &floor);
    if (rc != PT_OK)
        return rc;
    sqlite3_stmt *s = pt__sq_stmt(st, final_states ? S_STATS_STATE : S_STATS_ACTIVE);
    if (!s)
        return PT_ESTORAGE;
    if (!final_states)
        sqlite3_bind_int64(s, 1, floor);
    if ((rc = state_counts(st, s, out->by_state, S_STATS_REVIEW, &out->review)))
        return rc;
    if (!(s = pt__sq_stmt(st, S_STATS_QUEUE)))
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, floor);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW && out->ncur < PT_STATS_MAX_CURRENCIES) {
        pt__sq_copy_col(s, 0, out->queue[out->ncur].currency, sizeof out->queue[0].currency);
        out->queue[out->ncur].count = sqlite3_column_int64(s, 1);
        out->queue[out->ncur].amount = sqlite3_column_int64(s, 2);
        int64_t oldest = sqlite3_column_int64(s, 3);
        if (!out->queue_oldest_created_at || oldest < out->queue_oldest_created_at)
            out->queue_oldest_created_at = oldest;
        out->ncur++;
    }
    rc = (rc == SQLITE_DONE || rc == SQLITE_ROW)
             ? PT_OK
             : pt__sq_xlate(sqlite3_extended_errcode(st->c->db));
    sqlite3_reset(s);
    return rc;
}

/* ---- events ----------------------------------------------------------------- */

/* An event of a charge, or of its refund refund_id (> 0); PT_EEXIST when it
 * already had this event: each is delivered once. */
static int event_insert(struct pt_store *st, const char *type, int64_t charge_id,
                        const char *order_id, int64_t refund_id, const char *payload, int64_t now,
                        int64_t *seq)
{
    sqlite3_stmt *s = pt__sq_stmt(st, refund_id ? S_EVENT_INSERT_REFUND : S_EVENT_INSERT);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, type, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, charge_id);
    sqlite3_bind_text(s, 3, order_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, payload, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 5, now);
    if (refund_id)
        sqlite3_bind_int64(s, 6, refund_id);
    int rc = run_one(st, s);
    if (rc)
        return rc == PT_ESTATE ? PT_EEXIST : rc;
    if (seq)
        *seq = sqlite3_last_insert_rowid(st->c->db);
    st->events_in_txn++;
    return PT_OK;
}

static int sq_event_insert(struct pt_store *st, const char *type, int64_t charge_id,
                           const char *order_id, const char *payload, int64_t now, int64_t *seq)
{
    return event_insert(st, type, charge_id, order_id, 0, payload, now, seq);
}

/* ---- refunds (SPEC section 5a) --------------------------------------------- */

static int sq_refund_insert(struct pt_store *st, struct pt_refund *r, int64_t now)
{
    sqlite3_stmt *s = pt__sq_stmt(st, S_REFUND_INSERT);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, r->refund_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, r->charge_id);
    sqlite3_bind_int64(s, 3, r->amount);
    sqlite3_bind_text(s, 4, pt_state_name(r->state), -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, pt_offline_mode_name(r->offline), -1, SQLITE_STATIC);
    pt__sq_bind_text(s, 6, r->reason);
    pt__sq_bind_text(s, 7, r->metadata);
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
    else if (ext == SQLITE_CONSTRAINT_TRIGGER && strstr(msg, "refund_id_archived"))
        rc = PT_EEXIST; /* taken by a refund retention archived (sql/016) */
    else
        rc = pt__sq_xlate(ext);
    sqlite3_reset(s);
    if (rc)
        return rc;
    r->id = sqlite3_last_insert_rowid(st->c->db);
    r->created_at = r->updated_at = now;
    return PT_OK;
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
    return due_rows(st, refund_floor, st->refund_floor, S_REFUNDS_DUE, &pt_refund_row, now,
                    after_id, max, rows, n);
}

/* One transaction: a charges' and a refunds' statement (update[0], [1]),
 * each bound to now, its table's floor and, when given, the gateway; *n the
 * rows they changed. */
static int sq_update_pair(struct pt_store *st, const int update[2], int64_t now,
                          const char *gateway, int *n)
{
    *n = 0;
    int64_t floor[2];
    int rc = pt__sq_begin(st);
    if (rc)
        return rc;
    if ((rc = active_floor(st, &floor[0])) == PT_OK)
        rc = refund_floor(st, &floor[1]);
    for (int i = 0; i < 2 && rc == PT_OK; i++) {
        sqlite3_stmt *s = pt__sq_stmt(st, update[i]);
        if (!s) {
            rc = PT_ESTORAGE;
            break;
        }
        sqlite3_bind_int64(s, 1, now);
        sqlite3_bind_int64(s, 2, floor[i]);
        if (gateway)
            sqlite3_bind_text(s, 3, gateway, -1, SQLITE_STATIC);
        if ((rc = pt__sq_run(st, s)) == PT_OK)
            *n += sqlite3_changes(st->c->db);
    }
    if (rc) {
        pt__sq_rollback(st);
        return rc;
    }
    return pt__sq_commit(st);
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
    return floor_scalar(st, refund_floor, S_REFUNDS_NEXT_DUE, when);
}

static int sq_z_open(struct pt_store *st, int64_t open[4])
{
    int64_t floor[2];
    int rc = active_floor(st, &floor[0]);
    if (rc == PT_OK)
        rc = refund_floor(st, &floor[1]);
    if (rc)
        return rc;
    sqlite3_stmt *s = pt__sq_stmt(st, S_Z_OPEN);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, floor[0]);
    sqlite3_bind_int64(s, 2, floor[1]);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        for (int i = 0; i < 4; i++)
            open[i] = sqlite3_column_int64(s, i); /* sum() of no rows: NULL, read 0 */
        rc = PT_OK;
    } else {
        rc = rc == SQLITE_DONE ? PT_ESTORAGE /* an aggregate always has its row */
                               : pt__sq_xlate(sqlite3_extended_errcode(st->c->db));
    }
    sqlite3_reset(s);
    return rc;
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
    return run_transition(st, refund_transition_stmt(st, from_mask), id, to, patch, now);
}

static int sq_refund_withdraw(struct pt_store *st, int64_t id)
{
    sqlite3_stmt *s = pt__sq_stmt(st, S_REFUND_WITHDRAW);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int64(s, 1, id);
    /* The next refund may get this id again (or one below it): every
     * connection's floor starts from the beginning once (refund_floor()). */
    atomic_fetch_add(&refund_withdrawals, 1);
    return run_one(st, s);
}

static int sq_refund_audit(struct pt_store *st, const struct pt_refund *r, const char *from,
                           const char *to, const char *cause, const char *actor, int refused,
                           const char *detail, int64_t now)
{
    return audit(st, S_AUDIT_INSERT_REFUND, r->charge_id, r->refund_id, from, to, cause, actor,
                 refused, detail, now);
}

static int sq_refund_event_insert(struct pt_store *st, const char *type, const struct pt_refund *r,
                                  const char *payload, int64_t now, int64_t *seq)
{
    assert(r->id > 0); /* 0 would be a charge's event */
    return event_insert(st, type, r->charge_id, r->order_id, r->id, payload, now, seq);
}

static int sq_refund_stats(struct pt_store *st, struct pt_refund_stats *out)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s;
    int rc = floor_stmt(st, refund_floor, S_REFUND_STATS, &s);
    return rc ? rc : state_counts(st, s, out->by_state, S_REFUND_STATS_REVIEW, &out->review);
}

/* ---- the lane's clock (SPEC 17) ------------------------------------------ */

static int sq_clock_get(struct pt_store *st, struct pt_clock_anchor *out)
{
    sqlite3_stmt *s = pt__sq_stmt(st, S_CLOCK_GET);
    if (!s)
        return PT_ESTORAGE;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        pt__sq_copy_col(s, 0, out->boot_id, sizeof out->boot_id);
        out->boot_ms = sqlite3_column_int64(s, 1);
        out->lane_ms = sqlite3_column_int64(s, 2);
        out->trusted = sqlite3_column_int(s, 3);
        out->provisional_since = sqlite3_column_int64(s, 4);
        out->wall_high = sqlite3_column_int64(s, 5);
        rc = PT_OK;
    } else {
        rc = rc == SQLITE_DONE ? PT_ENOTFOUND : pt__sq_xlate(sqlite3_extended_errcode(st->c->db));
    }
    sqlite3_reset(s);
    return rc;
}

static int sq_clock_put(struct pt_store *st, const struct pt_clock_anchor *a)
{
    sqlite3_stmt *s = pt__sq_stmt(st, S_CLOCK_PUT);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, a->boot_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, a->boot_ms);
    sqlite3_bind_int64(s, 3, a->lane_ms);
    sqlite3_bind_int(s, 4, a->trusted != 0);
    sqlite3_bind_int64(s, 5, a->provisional_since);
    sqlite3_bind_int64(s, 6, a->wall_high);
    return pt__sq_run(st, s);
}

static int sq_newest_time(struct pt_store *st, int64_t *t)
{
    return floor_scalar(st, active_floor, S_NEWEST_TIME, t);
}

static int sq_clock_shift(struct pt_store *st, int64_t since, int64_t delta)
{
    static const int shifts[] = {S_SHIFT_CHARGES,     S_SHIFT_REFUNDS, S_SHIFT_KEYS,
                                 S_SHIFT_EVENTS,      S_SHIFT_AUDIT,   S_SHIFT_NOTIFICATIONS,
                                 S_SHIFT_CLOCK_EVENTS};
    assert(st->in_txn); /* one transaction with the anchor: all of it or none */
    int rc = PT_OK;
    for (size_t i = 0; rc == PT_OK && i < sizeof shifts / sizeof shifts[0]; i++) {
        sqlite3_stmt *s = pt__sq_stmt(st, shifts[i]);
        if (!s)
            return PT_ESTORAGE;
        sqlite3_bind_int64(s, 1, since);
        sqlite3_bind_int64(s, 2, delta);
        rc = pt__sq_run(st, s);
    }
    return rc;
}

static int sq_clock_event(struct pt_store *st, const char *kind, int64_t size_ms, int64_t wall_ms,
                          const char *detail, int64_t now)
{
    sqlite3_stmt *s = pt__sq_stmt(st, S_CLOCK_EVENT);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_text(s, 1, kind, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, size_ms);
    sqlite3_bind_int64(s, 3, wall_ms);
    pt__sq_bind_text(s, 4, detail);
    sqlite3_bind_int64(s, 5, now);
    return pt__sq_run(st, s);
}

static int sq_clock_events(struct pt_store *st, int max, struct pt_clock_event_row *rows, int *n)
{
    sqlite3_stmt *s = pt__sq_stmt(st, S_CLOCK_EVENTS);
    if (!s)
        return PT_ESTORAGE;
    sqlite3_bind_int(s, 1, max);
    int rc;
    *n = 0;
    while (*n < max && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct pt_clock_event_row *r = &rows[(*n)++];
        r->id = sqlite3_column_int64(s, 0);
        pt__sq_copy_col(s, 1, r->kind, sizeof r->kind);
        r->size_ms = sqlite3_column_int64(s, 2);
        r->wall_ms = sqlite3_column_int64(s, 3);
        pt__sq_copy_col(s, 4, r->detail, sizeof r->detail);
        r->created_at = sqlite3_column_int64(s, 5);
    }
    rc = (*n == max || rc == SQLITE_DONE) ? PT_OK
                                          : pt__sq_xlate(sqlite3_extended_errcode(st->c->db));
    sqlite3_reset(s);
    return rc;
}

const struct pt_store_ops pt__sqlite_ops = {
    .name = "sqlite",
    .sql = &pt__sqlite_sql,
    .caps = PT_STORE_SQLITE_CAPS,
    .schema_latest = pt_store_schema_latest,
    .errmsg = pt__sq_errmsg,
    .close = pt__sq_close,
    .schema_version = pt__sq_schema_version,
    .migrate_to = pt__sq_migrate_to,
    .pragma_int = pt__sq_pragma_int,
    .set_event_hook = pt__sq_set_event_hook,
    .begin = pt__sq_begin,
    .in_txn = pt__sq_in_txn,
    .commit = pt__sq_commit,
    .rollback = pt__sq_rollback,
    .attach = pt__sq_attach,
    .defer_commit = pt__sq_defer_commit,
    .commit_deferred = pt__sq_commit_deferred,
    .backup = pt__sq_backup,
    .note_erased = pt__sq_note_erased,
    .checkpoint_truncate = pt__sq_checkpoint_truncate,
    .writable = pt__sq_writable,
    .health = pt__sq_health,
    .files_intact = pt__sq_files_intact,
    .key_insert = sq_key_insert,
    .key_take_later = sq_key_take_later,
    .key_set_order = sq_key_set_order,
    .key_complete = sq_key_complete,
    .key_delete = sq_key_delete,
    .charge_insert = sq_charge_insert,
    .charge_transition = sq_charge_transition,
    .charge_accept_offline = sq_charge_accept_offline,
    .charge_request_cancel = sq_charge_request_cancel,
    .charges_due = sq_charges_due,
    .charges_next_due = sq_charges_next_due,
    .sends_interrupted = sq_sends_interrupted,
    .gateway_back = sq_gateway_back,
    .queue_figures = sq_queue_figures,
    .stats = sq_stats,
    .event_insert = sq_event_insert,
    .audit = sq_audit,
    .audit_first = sq_audit_first,
    .count = sq_count,
    .refund_insert = sq_refund_insert,
    .refunds_due = sq_refunds_due,
    .refunds_next_due = sq_refunds_next_due,
    .z_open = sq_z_open,
    .archive_candidates = pt__sq_archive_candidates,
    .archive_copy = pt__sq_archive_copy,
    .archive_forget = pt__sq_archive_forget,
    .archived_month = pt__sq_archived_month,
    .refund_transition = sq_refund_transition,
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
