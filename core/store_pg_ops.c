/*
 * store_pg_ops.c - the PostgreSQL store's own operations: those that are
 * not written once in store_ops.c because many lanes share the database
 * (claims, the lanes' figures, RETURNING, the events' advisory lock and
 * NOTIFY, a state set as an array parameter), and the table store.c
 * forwards through.
 */
#include "store_pg_impl.h"

/* Runs statement id; PT_ESTATE unless it changed exactly one row (a
 * condition that no longer held, or no such row). */
static int run_one(struct pg_store *st, int id, const struct args *a)
{
    int n = 0;
    int rc = pt__pg_run(st, id, a, &n);
    return rc ? rc : n == 1 ? PT_OK : PT_ESTATE;
}

/* ---- idempotency keys ------------------------------------------------------ */

/* A key statement's first parameters: its scope and name. */
static void key_args(struct args *a, const char *scope, const char *key)
{
    pt__pg_a_text(a, scope);
    pt__pg_a_text(a, key);
}

static int pg_key_insert(struct pt_store *s, const char *scope, const char *key,
                         const unsigned char hash[32], int64_t instance, int64_t now,
                         int64_t expires_at)
{
    struct args a = {0};
    key_args(&a, scope, key);
    pt__pg_a_bytes(&a, hash, 32);
    pt__pg_a_int(&a, now);
    pt__pg_a_int(&a, instance);
    pt__pg_a_int(&a, expires_at);
    PGresult *r;
    int rc = pt__pg_q(PG(s), S_KEY_INSERT, &a, &r);
    if (rc)
        return rc;
    rc = PQntuples(r) == 1 ? PT_OK : PT_EEXIST;
    PQclear(r);
    return rc;
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
    key_args(&a, scope, key);
    pt__pg_a_opt(&a, order_id);
    pt__pg_a_int(&a, lock->at);
    pt__pg_a_int(&a, lock->by);
    return run_one(PG(s), S_KEY_SET_ORDER, &a);
}

static int pg_key_complete(struct pt_store *s, const char *scope, const char *key,
                           struct pt_key_lock *lock, int status, const char *body, size_t len,
                           int64_t now)
{
    struct args a = {0};
    key_args(&a, scope, key);
    pt__pg_a_int(&a, status);
    pt__pg_a_bytes(&a, body ? body : "", len);
    pt__pg_a_int(&a, now);
    pt__pg_a_int(&a, lock->at);
    pt__pg_a_int(&a, lock->by);
    return run_one(PG(s), S_KEY_COMPLETE, &a);
}

static int pg_key_delete(struct pt_store *s, const char *scope, const char *key,
                         struct pt_key_lock *lock)
{
    struct args a = {0};
    key_args(&a, scope, key);
    pt__pg_a_int(&a, lock->at);
    pt__pg_a_int(&a, lock->by);
    return run_one(PG(s), S_KEY_DELETE, &a);
}

/* ---- charges --------------------------------------------------------------- */

static int pg_charge_insert(struct pt_store *s, struct pt_charge *c, int64_t now)
{
    struct args a = {0};
    pt__pg_a_charge(&a, c, 1);
    pt__pg_a_int(&a, c->next_attempt_at);
    pt__pg_a_int(&a, now);
    pt__pg_a_int(&a, c->offline_accepted != 0);
    struct pg_store *st = PG(s);
    /* A charge queued by this path: the lane's figures are read again once
     * it is committed (or not).  One sent online at once is not queued. */
    int queues = c->state == PT_STATE_INIT && c->offline_accepted;
    int rc = queues ? pt__pg_lane_hold(st) : PT_OK;
    if (rc == PT_OK && !st->in_txn)
        rc = pt__pg_connected(st); /* from here on, a failure may leave it queued */
    int sent = rc == PT_OK;
    PGresult *r = NULL;
    if (sent && (rc = pt__pg_q(st, S_CHARGE_INSERT, &a, &r)) == PT_OK) {
        rc = PQntuples(r) == 1 ? PT_OK : PT_EEXIST;
        if (rc == PT_OK) {
            c->id = pt__pg_col_int(r, 0, 0);
            c->created_at = c->updated_at = now;
            if (queues && st->in_txn && st->figs)
                pt__pg_queued_add(&st->txn_queued, c->currency, 1, c->amount);
        }
        PQclear(r);
    } else if (sent && rc == PT_EIO && queues && !st->in_txn && st->figs_held) {
        pt__pg_doubt_one(st, st->figs, c->currency, c->amount); /* its autocommit may go through */
    }
    if (!st->in_txn)
        pt__pg_lane_release(st);
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
    return pt__pg_col_int(x->r, x->row, col);
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

/* Runs a statement that returns rows of kind k (charges, refunds): up to
 * max of them into rows[]. */
static int read_rows(struct pg_store *st, int id, const struct args *a, const struct pt_row_kind *k,
                     int max, void *rows, int *n)
{
    PGresult *r;
    *n = 0;
    int rc = pt__pg_q(st, id, a, &r);
    if (rc)
        return rc;
    for (int i = 0; i < PQntuples(r) && i < max; i++)
        read_row(r, i, k, (char *)rows + (size_t)(*n)++ * k->size);
    PQclear(r);
    return PT_OK;
}

static void args_patch(struct args *a, int64_t id, const struct pt_charge_patch *p, int64_t now)
{
    static const struct pt_charge_patch none = PT_CHARGE_PATCH_NONE;
    if (!p)
        p = &none;
    pt__pg_a_int(a, id);
    pt__pg_a_int(a, now);
    pt__pg_a_text(a, p->gateway_trade_no); /* NULL keeps; "" is stored as it is */
    pt__pg_a_text(a, p->action_url);
    pt__pg_a_text(a, p->error_code);
    pt__pg_a_text(a, p->error_message);
    pt__pg_a_int(a, p->attempts_add);
    pt__pg_a_int(a, p->next_attempt_at);
    pt__pg_a_int(a, p->first_sent_at);
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
    pt__pg_a_text(&a, pt_state_name(to));
    pt__pg_a_text(&a, states);
    pt__pg_a_opt(&a, st->lane_id);
    return run_one(st, id_stmt, &a);
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
    pt__pg_a_int(&a, c->id);
    pt__pg_a_int(&a, now);
    /* It joins the lane's figures: under the lane's mutex to the commit,
     * and in doubt with the transaction if the connection goes. */
    int n = 0;
    int rc = pt__pg_lane_hold(st);
    if (rc == PT_OK)
        rc = pt__pg_run(st, S_CHARGE_ACCEPT_OFFLINE, &a, &n);
    if (rc == PT_OK && n == 1 && st->in_txn && st->figs)
        pt__pg_queued_add(&st->txn_queued, c->currency, 1, c->amount);
    if (!st->in_txn)
        pt__pg_lane_release(st);
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
    pt__pg_a_int(&a, id);
    pt__pg_a_int(&a, due);
    pt__pg_a_int(&a, now);
    pt__pg_a_text(&a, states);
    return run_one(PG(s), S_CHARGE_REQUEST_CANCEL, &a);
}

/* Inside a transaction the due charges are claimed (FOR UPDATE SKIP LOCKED):
 * another lane's walk passes over them until this transaction ends. */
/* One page of a work list (charges or refunds, statement id) due at now,
 * after after_id, for this lane. */
static int due_rows(struct pg_store *st, int id, const struct pt_row_kind *k, int64_t now,
                    int64_t after_id, int max, void *rows, int *n)
{
    struct args a = {0};
    pt__pg_a_int(&a, now);
    pt__pg_a_int(&a, max);
    pt__pg_a_int(&a, after_id);
    pt__pg_a_opt(&a, st->lane_id);
    pt__pg_a_int(&a, st->claim_timeout_ms);
    return read_rows(st, id, &a, k, max, rows, n);
}

/* When the next row of a work list is due for this lane; 0 when none is. */
static int next_due(struct pg_store *st, int id, int64_t *when)
{
    struct args a = {0};
    pt__pg_a_opt(&a, st->lane_id);
    pt__pg_a_int(&a, st->claim_timeout_ms);
    return pt__pg_scalar(st, id, &a, when);
}

static int pg_charges_due(struct pt_store *s, int64_t now, int64_t after_id, int max,
                          struct pt_charge *rows, int *n)
{
    return due_rows(PG(s), PG(s)->in_txn ? S_CHARGES_DUE_CLAIM : S_CHARGES_DUE, &pt_charge_row, now,
                    after_id, max, rows, n);
}

static int pg_charges_next_due(struct pt_store *s, int64_t *when)
{
    return next_due(PG(s), S_CHARGES_NEXT_DUE, when);
}

/* One transaction: a charges' and a refunds' statement (update[0], [1]),
 * each bound to now and `text`; *n the rows they changed. */
static int pg_update_pair(struct pt_store *s, const int update[2], int64_t now, const char *text,
                          int *n)
{
    struct pg_store *st = PG(s);
    *n = 0;
    int rc = pt__pg_begin(s);
    if (rc)
        return rc;
    for (int i = 0; i < 2 && rc == PT_OK; i++) {
        struct args a = {0};
        pt__pg_a_int(&a, now);
        pt__pg_a_opt(&a, text);
        int k = 0;
        if ((rc = pt__pg_run(st, update[i], &a, &k)) == PT_OK)
            *n += k;
    }
    if (rc) {
        pt__pg_rollback(s);
        return rc;
    }
    return pt__pg_commit(s);
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
    pt__pg_a_text(&a, currency);
    PGresult *r;
    /* In a transaction (a charge about to be queued): under the lane's lock
     * (sql/pg/003), so two of its requests cannot both take the last place,
     * and its mutex (the guarded statement's bound, above). */
    int rc = st->in_txn ? pt__pg_lane_hold(st) : PT_OK;
    /* What lost connections may have queued is counted too; settled
     * before the count is read (see doubts_settle). */
    if (!rc && st->in_txn && st->figs)
        rc = pt__pg_doubts_settle(st, st->figs);
    if (rc || (rc = pt__pg_q(st, st->in_txn ? S_QUEUE_FIGURES_LOCKED : S_QUEUE_FIGURES, &a, &r)))
        return rc;
    *count = pt__pg_col_int(r, 0, 0);
    *amount = pt__pg_col_int(r, 0, 1);
    PQclear(r);
    if (st->in_txn && st->figs)
        pt__pg_doubts_in(st->figs, currency, count, amount);
    return PT_OK;
}

static int by_state(struct pg_store *st, int id, int64_t *out)
{
    PGresult *r;
    int rc = pt__pg_q(st, id, NULL, &r);
    if (rc)
        return rc;
    for (int i = 0; i < PQntuples(r); i++) {
        enum pt_state state;
        if (pt_state_parse(PQgetvalue(r, i, 0), &state) == PT_OK)
            out[state] = pt__pg_col_int(r, i, 1);
    }
    PQclear(r);
    return PT_OK;
}

static int pg_stats(struct pt_store *s, int final_states, struct pt_store_stats *out)
{
    struct pg_store *st = PG(s);
    memset(out, 0, sizeof *out);
    int rc = by_state(st, final_states ? S_STATS_STATE : S_STATS_ACTIVE, out->by_state);
    if (rc || (rc = pt__pg_scalar(st, S_STATS_REVIEW, NULL, &out->review)))
        return rc;
    PGresult *r;
    if ((rc = pt__pg_q(st, S_STATS_QUEUE, NULL, &r)))
        return rc;
    for (int i = 0; i < PQntuples(r) && out->ncur < PT_STATS_MAX_CURRENCIES; i++) {
        pt__pg_col_text(r, i, 0, out->queue[out->ncur].currency, sizeof out->queue[0].currency);
        out->queue[out->ncur].count = pt__pg_col_int(r, i, 1);
        out->queue[out->ncur].amount = pt__pg_col_int(r, i, 2);
        int64_t oldest = pt__pg_col_int(r, i, 3);
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
    int rc = pt__pg_run(st, S_EVENTS_LOCK_, NULL, NULL);
    if (rc)
        return rc;
    PGresult *r;
    if ((rc = pt__pg_q(st, id, a, &r)))
        return rc;
    rc = PQntuples(r) == 1 ? PT_OK : PT_EEXIST; /* once per charge and type / per refund */
    if (rc == PT_OK && seq)
        *seq = pt__pg_col_int(r, 0, 0);
    PQclear(r);
    if (rc)
        return rc;
    struct args n = {0};
    pt__pg_a_text(&n, st->lane_id);
    if ((rc = pt__pg_run(st, S_NOTIFY, &n, NULL)))
        return rc;
    st->events_in_txn++;
    return PT_OK;
}

/* An event of a charge, or of its refund refund_id (> 0). */
static int event_insert(struct pg_store *st, const char *type, int64_t charge_id,
                        const char *order_id, int64_t refund_id, const char *payload, int64_t now,
                        int64_t *seq)
{
    struct args a = {0};
    pt__pg_a_text(&a, type);
    pt__pg_a_int(&a, charge_id);
    pt__pg_a_text(&a, order_id);
    pt__pg_a_text(&a, payload);
    pt__pg_a_int(&a, now);
    if (refund_id)
        pt__pg_a_int(&a, refund_id);
    return insert_event(st, refund_id ? S_EVENT_INSERT_REFUND : S_EVENT_INSERT, &a, seq);
}

static int pg_event_insert(struct pt_store *s, const char *type, int64_t charge_id,
                           const char *order_id, const char *payload, int64_t now, int64_t *seq)
{
    return event_insert(PG(s), type, charge_id, order_id, 0, payload, now, seq);
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
    pt__pg_a_int(&a, charge_id);
    pt__pg_a_opt(&a, from);
    pt__pg_a_opt(&a, to);
    pt__pg_a_text(&a, cause);
    pt__pg_a_text(&a, who);
    pt__pg_a_int(&a, refused ? 1 : 0);
    pt__pg_a_opt(&a, detail);
    pt__pg_a_int(&a, now);
    pt__pg_a_opt(&a, refund_id);
    return pt__pg_run(st, S_AUDIT_INSERT, &a, NULL);
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

/* ---- notifications, counts ------------------------------------------------ */

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
    int rc = pt__pg_connected(st);
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
    rc = PQresultStatus(r) == PGRES_TUPLES_OK ? PT_OK : pt__pg_xlate(st, r);
    if (rc == PT_OK)
        *count = pt__pg_col_int(r, 0, 0);
    PQclear(r);
    return rc;
}

/* The newest time the shared database holds (SPEC 17): a lane whose clock
 * is not trusted at start continues from the shop's latest record.  Each
 * part is one index seek. */
static int pg_newest_time(struct pt_store *s, int64_t *t)
{
    struct pg_store *st = PG(s);
    int rc = pt__pg_connected(st);
    if (rc)
        return rc;
    PGresult *r =
        RT(st, PQexec(st->conn, "SELECT greatest("
                                " (SELECT greatest(created_at, updated_at) FROM charges"
                                " ORDER BY id DESC LIMIT 1),"
                                " (SELECT greatest(created_at, updated_at) FROM refunds"
                                " ORDER BY id DESC LIMIT 1),"
                                " (SELECT created_at FROM events ORDER BY seq DESC LIMIT 1), 0)"));
    rc = PQresultStatus(r) == PGRES_TUPLES_OK ? PT_OK : pt__pg_xlate(st, r);
    if (rc == PT_OK)
        *t = pt__pg_col_int(r, 0, 0);
    PQclear(r);
    return rc;
}

/* ---- refunds --------------------------------------------------------------- */

static int pg_refund_insert(struct pt_store *s, struct pt_refund *r, int64_t now)
{
    struct args a = {0};
    pt__pg_a_text(&a, r->refund_id);
    pt__pg_a_int(&a, r->charge_id);
    pt__pg_a_int(&a, r->amount);
    pt__pg_a_text(&a, pt_state_name(r->state));
    pt__pg_a_text(&a, pt_offline_mode_name(r->offline));
    pt__pg_a_opt(&a, r->reason);
    pt__pg_a_opt(&a, r->metadata);
    pt__pg_a_int(&a, r->next_attempt_at);
    pt__pg_a_int(&a, now);
    /* A refusal (the triggers of sql/pg/001_init.sql) must not end the
     * caller's transaction, as a failed statement does not in SQLite: the
     * insert runs in a savepoint of its own.  (Refunds are few: the two
     * round trips cost little; a new charge needs none, as it cannot fail
     * that way.) */
    struct pg_store *st = PG(s);
    int rc = st->in_txn ? pt__pg_exec_sql(st, "SAVEPOINT refund_insert") : PT_OK;
    if (rc)
        return rc;
    PGresult *res;
    rc = pt__pg_q(st, S_REFUND_INSERT, &a, &res);
    if (st->in_txn)
        pt__pg_exec_sql(st, rc ? "ROLLBACK TO SAVEPOINT refund_insert"
                               : "RELEASE SAVEPOINT refund_insert");
    if (rc)
        return rc;
    rc = PQntuples(res) == 1 ? PT_OK : PT_EEXIST;
    if (rc == PT_OK) {
        r->id = pt__pg_col_int(res, 0, 0);
        r->created_at = r->updated_at = now;
    }
    PQclear(res);
    return rc;
}

static int pg_refunds_due(struct pt_store *s, int64_t now, int64_t after_id, int max,
                          struct pt_refund *rows, int *n)
{
    return due_rows(PG(s), S_REFUNDS_DUE, &pt_refund_row, now, after_id, max, rows, n);
}

static int pg_refunds_next_due(struct pt_store *s, int64_t *when)
{
    return next_due(PG(s), S_REFUNDS_NEXT_DUE, when);
}

static int pg_refund_transition(struct pt_store *s, int64_t id, unsigned from_mask,
                                enum pt_state to, const struct pt_charge_patch *patch, int64_t now)
{
    from_mask &= PT_FROM_MASKS - 1;
    if (!from_mask || !pt_refund_state_valid(to))
        return PT_EINVAL;
    return transition(PG(s), S_REFUND_TRANSITION, id, from_mask, to, patch, now);
}

static int pg_refund_withdraw(struct pt_store *s, int64_t id)
{
    struct args a = {0};
    pt__pg_a_int(&a, id);
    return run_one(PG(s), S_REFUND_WITHDRAW, &a);
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
    assert(r->id > 0); /* 0 would be a charge's event */
    return event_insert(PG(s), type, r->charge_id, r->order_id, r->id, payload, now, seq);
}

static int pg_refund_stats(struct pt_store *s, struct pt_refund_stats *out)
{
    memset(out, 0, sizeof *out);
    int rc = by_state(PG(s), S_REFUND_STATS, out->by_state);
    return rc ? rc : pt__pg_scalar(PG(s), S_REFUND_STATS_REVIEW, NULL, &out->review);
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
    pt__pg_a_text(&a, arr);
    PGresult *r;
    int rc = pt__pg_q(st, stmt, &a, &r);
    if (rc)
        return rc;
    for (int k = 0; k < PQntuples(r); k++) {
        int64_t id = pt__pg_col_int(r, k, 0);
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
        int rc = pt__pg_exec_sql(st, "LISTEN payterm_events");
        if (rc)
            return rc;
        st->listening = 1;
    }
    int got = 0;
    PGnotify *n;
    for (int round = 0; round < 2 && !got; round++) {
        if (!PQconsumeInput(st->conn)) {
            pt__pg_xlate(st, NULL);
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

const struct pt_store_ops pt__pg_ops = {
    .name = "postgresql",
    .sql = &pt__pg_sql,
    .caps = PT_STORE_PG_CAPS,
    .newest_time = pg_newest_time,
    .schema_latest = pg_schema_latest,
    .charge_queue_guarded = pt__pg_charge_queue_guarded,
    .round_trips = pg_round_trips,
    .wait_events = pg_wait_events,
    .charges_claim = pg_charges_claim,
    .refunds_claim = pg_refunds_claim,
    .errmsg = pt__pg_errmsg,
    .close = pt__pg_close,
    .schema_version = pt__pg_schema_version,
    .migrate_to = pt__pg_migrate_to,
    .pragma_int = pt__pg_pragma_int,
    .set_event_hook = pt__pg_set_event_hook,
    .begin = pt__pg_begin,
    .in_txn = pt__pg_in_txn,
    .commit = pt__pg_commit,
    .rollback = pt__pg_rollback,
    .attach = pt__pg_attach,
    .defer_commit = pt__pg_defer_commit,
    .commit_deferred = pt__pg_commit_deferred,
    .backup = pt__pg_backup,
    .note_erased = pt__pg_note_erased,
    .checkpoint_truncate = pt__pg_checkpoint_truncate,
    .writable = pt__pg_writable,
    .key_insert = pg_key_insert,
    .key_take_later = pg_key_take_later,
    .key_set_order = pg_key_set_order,
    .key_complete = pg_key_complete,
    .key_delete = pg_key_delete,
    .charge_insert = pg_charge_insert,
    .charge_transition = pg_charge_transition,
    .charge_accept_offline = pg_charge_accept_offline,
    .charge_request_cancel = pg_charge_request_cancel,
    .charges_due = pg_charges_due,
    .charges_next_due = pg_charges_next_due,
    .sends_interrupted = pg_sends_interrupted,
    .gateway_back = pg_gateway_back,
    .queue_figures = pg_queue_figures,
    .stats = pg_stats,
    .event_insert = pg_event_insert,
    .audit = pg_audit,
    .audit_first = pg_audit_first,
    .count = pg_count,
    .refund_insert = pg_refund_insert,
    .refunds_due = pg_refunds_due,
    .refunds_next_due = pg_refunds_next_due,
    .refund_transition = pg_refund_transition,
    .refund_withdraw = pg_refund_withdraw,
    .refund_audit = pg_refund_audit,
    .refund_event_insert = pg_refund_event_insert,
    .refund_stats = pg_refund_stats,
};
