/*
 * store_ops.c - the store's domain operations that are the same on every
 * backend, written once over the narrow statement interface of
 * store_impl.h (struct pt_store_sql): a statement by its shared id, its
 * parameters, its rows.  The SQL text is the backend's, in its dialect;
 * what a row holds is read by store_rows.c.  Nothing here knows which
 * backend runs it.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "reconcile.h"
#include "store_impl.h"
#include "store_rows.h"

static const struct pt_store_sql *sql_of(const struct pt_store *st)
{
    return ((const struct pt_store_head *)(const void *)st)->ops->sql;
}

/* ---- running a statement ------------------------------------------------- */

static int q_open(struct pt_store *st, int id, struct pt_q *q)
{
    assert(id >= 0 && id < PT_Q__COUNT); /* a PT_Q_ name of PT_STORE_SHARED */
    q->st = st;
    return sql_of(st)->prepare(st, id, q);
}

static void q_int(struct pt_q *q, int i, int64_t v)
{
    sql_of(q->st)->bind_int(q, i, v);
}

/* Text as it is; NULL binds SQL NULL. */
static void q_text(struct pt_q *q, int i, const char *v)
{
    sql_of(q->st)->bind_text(q, i, v);
}

/* An optional text: "" binds NULL too (nothing was given). */
static void q_opt(struct pt_q *q, int i, const char *v)
{
    q_text(q, i, v && *v ? v : NULL);
}

static int q_step(struct pt_q *q)
{
    return sql_of(q->st)->step(q);
}

static void q_done(struct pt_q *q)
{
    sql_of(q->st)->done(q);
}

/* Runs a statement that returns no rows: *changed the rows it changed (may
 * be NULL). */
static int q_exec(struct pt_q *q, int *changed)
{
    int rc = q_step(q);
    if (rc == PT_Q_ROW)
        rc = PT_ESTORAGE; /* a statement that was to return nothing */
    if (rc == PT_OK && changed)
        *changed = sql_of(q->st)->changes(q);
    q_done(q);
    return rc;
}

/* Runs a statement that changes one row: want when it changed none. */
static int q_exec_one(struct pt_q *q, int want)
{
    int n = 0;
    int rc = q_exec(q, &n);
    return rc ? rc : n == 1 ? PT_OK : want;
}

/* One row, one integer (PT_ENOTFOUND when there is no row). */
static int q_scalar(struct pt_q *q, int64_t *out)
{
    int rc = q_step(q);
    if (rc == PT_Q_ROW) {
        *out = sql_of(q->st)->col_int(q, 0);
        rc = PT_OK;
    } else if (rc == PT_OK) {
        rc = PT_ENOTFOUND;
    }
    q_done(q);
    return rc;
}

static int64_t q_int_at(const void *q, int col)
{
    return sql_of(((const struct pt_q *)q)->st)->col_int(q, col);
}

static const char *q_text_at(const void *q, int col)
{
    return sql_of(((const struct pt_q *)q)->st)->col_text(q, col);
}

/* A text column into dst ("" for NULL). */
static void q_copy(const struct pt_q *q, int col, char *dst, size_t cap)
{
    const char *v = q_text_at(q, col);
    size_t n = v ? strlen(v) : 0;
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, v ? v : "", n);
    dst[n] = '\0';
}

/*
 * Reads up to max rows of kind k (charges, refunds) into rows[]; *more
 * (may be NULL) when there was another after them (the statements ask for
 * max + 1 where it matters).
 */
static int q_rows(struct pt_q *q, const struct pt_row_kind *k, int max, void *rows, int *n,
                  int *more)
{
    struct pt_row_src src = {q_int_at, q_text_at, q};
    int rc = PT_OK;
    *n = 0;
    if (more)
        *more = 0;
    /* Past max only to learn whether there is more, when that is asked. */
    while ((*n < max || more) && (rc = q_step(q)) == PT_Q_ROW) {
        if (*n == max) {
            *more = 1;
            rc = PT_OK;
            break;
        }
        pt_row_read(k, &src, (char *)rows + (size_t)(*n)++ * k->size);
    }
    q_done(q);
    return rc == PT_Q_ROW ? PT_OK : rc;
}

/* A statement that returns at most one row of kind k. */
static int q_one(struct pt_q *q, const struct pt_row_kind *k, void *out)
{
    int n = 0;
    int rc = q_rows(q, k, 1, out, &n, NULL);
    return rc ? rc : n ? PT_OK : PT_ENOTFOUND;
}

/* The SET list of a patch: ?1 id, ?2 now, ?3..?9 its fields (NULL keeps a
 * column; "" is stored as it is, so the texts are bound as they are). */
static void q_patch(struct pt_q *q, int64_t id, const struct pt_charge_patch *p, int64_t now)
{
    static const struct pt_charge_patch none = PT_CHARGE_PATCH_NONE;
    if (!p)
        p = &none;
    q_int(q, 1, id);
    q_int(q, 2, now);
    q_text(q, 3, p->gateway_trade_no);
    q_text(q, 4, p->action_url);
    q_text(q, 5, p->error_code);
    q_text(q, 6, p->error_message);
    q_int(q, 7, p->attempts_add);
    q_int(q, 8, p->next_attempt_at);
    q_int(q, 9, p->first_sent_at);
}

/* ---- charges --------------------------------------------------------------- */

int pt_store_charge_get(struct pt_store *st, const char *order_id, struct pt_charge *out)
{
    struct pt_q q;
    int rc = q_open(st, PT_Q_CHARGE_GET, &q);
    if (rc)
        return rc;
    q_text(&q, 1, order_id);
    return q_one(&q, &pt_charge_row, out);
}

int pt_store_charge_get_by_id(struct pt_store *st, int64_t id, struct pt_charge *out)
{
    struct pt_q q;
    int rc = q_open(st, PT_Q_CHARGE_GET_BY_ID, &q);
    if (rc)
        return rc;
    q_int(&q, 1, id);
    return q_one(&q, &pt_charge_row, out);
}

int pt_store_charge_patch(struct pt_store *st, int64_t id, const struct pt_charge_patch *patch,
                          int64_t now)
{
    struct pt_q q;
    int rc = q_open(st, PT_Q_CHARGE_PATCH, &q);
    if (rc)
        return rc;
    q_patch(&q, id, patch, now);
    return q_exec_one(&q, PT_ENOTFOUND);
}

/* A charge's or a refund's review flag: PT_ESTATE when it was already so. */
static int set_review(struct pt_store *st, int stmt, int64_t id, int review, const char *reason,
                      int64_t now)
{
    struct pt_q q;
    int rc = q_open(st, stmt, &q);
    if (rc)
        return rc;
    q_int(&q, 1, id);
    q_int(&q, 2, review ? 1 : 0);
    q_opt(&q, 3, reason);
    q_int(&q, 4, now);
    return q_exec_one(&q, PT_ESTATE);
}

int pt_store_charge_set_review(struct pt_store *st, int64_t id, int review, const char *reason,
                               int64_t now)
{
    return set_review(st, PT_Q_CHARGE_SET_REVIEW, id, review, reason, now);
}

int pt_store_charges_list(struct pt_store *st, int state, int64_t after_id, int max,
                          struct pt_charge *rows, int *n, int *more)
{
    struct pt_q q;
    int rc = q_open(st, state < 0 ? PT_Q_CHARGES_LIST : PT_Q_CHARGES_LIST_STATE, &q);
    if (rc)
        return rc;
    q_int(&q, 1, after_id);
    q_int(&q, 2, max + 1); /* one more tells whether there are more */
    if (state >= 0)
        q_text(&q, 3, pt_state_name((enum pt_state)state));
    return q_rows(&q, &pt_charge_row, max, rows, n, more);
}

int pt_store_charges_list_review(struct pt_store *st, int64_t after_id, int max,
                                 struct pt_charge *rows, int *n, int *more)
{
    struct pt_q q;
    int rc = q_open(st, PT_Q_CHARGES_LIST_REVIEW, &q); /* the charges_review index */
    if (rc)
        return rc;
    q_int(&q, 1, after_id);
    q_int(&q, 2, max + 1);
    return q_rows(&q, &pt_charge_row, max, rows, n, more);
}

int pt_store_charges_queued_before(struct pt_store *st, const char *gateway, const char *method,
                                   int64_t created_before, int64_t after_id, int max,
                                   struct pt_charge *rows, int *n)
{
    struct pt_q q;
    int rc = q_open(st, PT_Q_CHARGES_QUEUED_BEFORE, &q);
    if (rc)
        return rc;
    q_text(&q, 1, gateway);
    q_text(&q, 2, method);
    q_int(&q, 3, created_before);
    q_int(&q, 4, after_id);
    q_int(&q, 5, max);
    return q_rows(&q, &pt_charge_row, max, rows, n, NULL);
}

int pt_store_charges_oldest_queued(struct pt_store *st, const char *gateway, const char *method,
                                   int64_t *created_at)
{
    struct pt_q q;
    int rc = q_open(st, PT_Q_CHARGES_OLDEST_QUEUED, &q);
    if (rc)
        return rc;
    q_text(&q, 1, gateway);
    q_text(&q, 2, method);
    return q_scalar(&q, created_at); /* 0 when none is queued */
}

/* ---- idempotency keys ------------------------------------------------------ */

/* The key on q's row (KEY_GET's columns, KEY_OF_ORDER's first eight). */
static int q_key_row(struct pt_q *q, struct pt_key_row *out)
{
    const struct pt_store_sql *sql = sql_of(q->st);
    memset(out, 0, sizeof *out);
    unsigned char *b;
    size_t n;
    int rc = sql->col_blob(q, 0, &b, &n);
    if (rc)
        return rc;
    if (b && n == 32)
        memcpy(out->request_hash, b, 32);
    free(b);
    out->locked_at = q_int_at(q, 1);
    out->locked_by = q_int_at(q, 2);
    out->completed_at = q_int_at(q, 3);
    out->response_status = (int)q_int_at(q, 4);
    if ((rc = sql->col_blob(q, 5, &b, &n)))
        return rc;
    out->response_body = (char *)b; /* NUL-terminated; NULL while running */
    out->response_len = n;
    q_copy(q, 6, out->order_id, sizeof out->order_id);
    out->expires_at = q_int_at(q, 7);
    return PT_OK;
}

int pt_store_key_get(struct pt_store *st, const char *scope, const char *key,
                     struct pt_key_row *out)
{
    struct pt_q q;
    int rc = q_open(st, PT_Q_KEY_GET, &q);
    if (rc)
        return rc;
    q_text(&q, 1, scope);
    q_text(&q, 2, key);
    rc = q_step(&q);
    rc = rc == PT_Q_ROW ? q_key_row(&q, out) : rc == PT_OK ? PT_ENOTFOUND : rc;
    q_done(&q);
    return rc;
}

int pt_store_key_of_order(struct pt_store *st, const char *order_id, char scope[PT_KEY_SCOPE_MAX],
                          char key[PT_KEY_NAME_MAX], struct pt_key_row *out)
{
    struct pt_q q;
    int rc = q_open(st, PT_Q_KEY_OF_ORDER, &q);
    if (rc)
        return rc;
    q_text(&q, 1, order_id);
    rc = q_step(&q);
    rc = rc == PT_Q_ROW ? q_key_row(&q, out) : rc == PT_OK ? PT_ENOTFOUND : rc;
    if (rc == PT_OK) {
        q_copy(&q, 8, scope, PT_KEY_SCOPE_MAX);
        q_copy(&q, 9, key, PT_KEY_NAME_MAX);
    }
    q_done(&q);
    return rc;
}

/* Takes over a lock whose holder is presumed gone: PT_EEXIST when it is no
 * longer (old_locked_at, old_locked_by)'s - another request took it first. */
int pt_store_key_relock(struct pt_store *st, const char *scope, const char *key,
                        int64_t old_locked_at, int64_t old_locked_by, int64_t instance, int64_t now)
{
    struct pt_q q;
    int rc = q_open(st, PT_Q_KEY_RELOCK, &q);
    if (rc)
        return rc;
    q_text(&q, 1, scope);
    q_text(&q, 2, key);
    q_int(&q, 3, old_locked_at);
    q_int(&q, 4, old_locked_by);
    q_int(&q, 5, now);
    q_int(&q, 6, instance);
    return q_exec_one(&q, PT_EEXIST);
}

int pt_store_key_reanswer(struct pt_store *st, const char *scope, int from_status, int status,
                          const char *body, size_t len, int *n)
{
    struct pt_q q;
    int changed = 0;
    int rc = q_open(st, PT_Q_KEY_REANSWER, &q);
    if (rc == PT_OK) {
        q_text(&q, 1, scope);
        q_int(&q, 2, from_status);
        q_int(&q, 3, status);
        sql_of(st)->bind_blob(&q, 4, body, len);
        rc = q_exec(&q, &changed);
    }
    if (n) /* may be NULL (store.h) */
        *n = rc ? 0 : changed;
    return rc;
}

int pt_store_key_delete_expired(struct pt_store *st, const char *scope, const char *key,
                                int64_t now)
{
    struct pt_q q;
    int rc = q_open(st, PT_Q_KEY_DELETE_EXPIRED, &q);
    if (rc)
        return rc;
    q_text(&q, 1, scope);
    q_text(&q, 2, key);
    q_int(&q, 3, now);
    return q_exec(&q, NULL);
}

int pt_store_key_sweep(struct pt_store *st, int64_t now, int *count)
{
    struct pt_q q;
    int n = 0;
    int rc = q_open(st, PT_Q_KEY_SWEEP, &q);
    if (rc == PT_OK) {
        q_int(&q, 1, now);
        rc = q_exec(&q, &n);
    }
    if (count)
        *count = rc ? 0 : n;
    return rc;
}

/* ---- events, audit, notifications --------------------------------------------- */

int pt_store_events_list(struct pt_store *st, int64_t after, int max, struct pt_event_row *rows,
                         int *n)
{
    struct pt_q q;
    *n = 0;
    int rc = q_open(st, PT_Q_EVENTS_LIST, &q);
    if (rc)
        return rc;
    q_int(&q, 1, after);
    q_int(&q, 2, max);
    while (*n < max && (rc = q_step(&q)) == PT_Q_ROW) {
        struct pt_event_row *r = &rows[*n];
        memset(r, 0, sizeof *r);
        r->seq = q_int_at(&q, 0);
        q_copy(&q, 1, r->type, sizeof r->type);
        q_copy(&q, 2, r->order_id, sizeof r->order_id);
        const char *p = q_text_at(&q, 3);
        r->payload = strdup(p ? p : "null");
        r->created_at = q_int_at(&q, 4);
        if (!r->payload) {
            rc = PT_ENOMEM;
            break;
        }
        (*n)++;
    }
    q_done(&q);
    if (rc == PT_Q_ROW)
        rc = PT_OK;
    if (rc) {
        pt_event_rows_free(rows, *n);
        *n = 0;
    }
    return rc;
}

int pt_store_events_last_seq(struct pt_store *st, int64_t *seq)
{
    struct pt_q q;
    int rc = q_open(st, PT_Q_EVENTS_LAST, &q);
    return rc ? rc : q_scalar(&q, seq);
}

int pt_store_audit_list(struct pt_store *st, int64_t charge_id, int max, struct pt_audit_row *rows,
                        int *n)
{
    struct pt_q q;
    *n = 0;
    int rc = q_open(st, PT_Q_AUDIT_LIST, &q);
    if (rc)
        return rc;
    q_int(&q, 1, charge_id);
    q_int(&q, 2, max);
    while (*n < max && (rc = q_step(&q)) == PT_Q_ROW) {
        struct pt_audit_row *r = &rows[(*n)++];
        r->seq = q_int_at(&q, 0);
        q_copy(&q, 1, r->from_state, sizeof r->from_state);
        q_copy(&q, 2, r->to_state, sizeof r->to_state);
        q_copy(&q, 3, r->cause, sizeof r->cause);
        q_copy(&q, 4, r->actor, sizeof r->actor);
        r->refused = (int)q_int_at(&q, 5);
        q_copy(&q, 6, r->detail, sizeof r->detail);
        r->created_at = q_int_at(&q, 7);
        q_copy(&q, 8, r->refund_id, sizeof r->refund_id);
    }
    q_done(&q);
    return rc == PT_Q_ROW ? PT_OK : rc;
}

int pt_store_notification_insert(struct pt_store *st, const char *gateway, const char *dedup_id,
                                 const char *order_id, const char *status, const char *outcome,
                                 int64_t now)
{
    struct pt_q q;
    int rc = q_open(st, PT_Q_NOTIFICATION_INSERT, &q);
    if (rc)
        return rc;
    q_text(&q, 1, gateway);
    q_text(&q, 2, dedup_id);
    q_opt(&q, 3, order_id);
    q_opt(&q, 4, status);
    q_text(&q, 5, outcome);
    q_int(&q, 6, now);
    return q_exec_one(&q, PT_EEXIST); /* this gateway sent this one before */
}

/* ---- refunds (SPEC section 5a) --------------------------------------------- */

int pt_store_refund_get(struct pt_store *st, const char *refund_id, struct pt_refund *out)
{
    struct pt_q q;
    int rc = q_open(st, PT_Q_REFUND_GET, &q);
    if (rc)
        return rc;
    q_text(&q, 1, refund_id);
    return q_one(&q, &pt_refund_row, out);
}

int pt_store_refund_get_by_id(struct pt_store *st, int64_t id, struct pt_refund *out)
{
    struct pt_q q;
    int rc = q_open(st, PT_Q_REFUND_GET_BY_ID, &q);
    if (rc)
        return rc;
    q_int(&q, 1, id);
    return q_one(&q, &pt_refund_row, out);
}

int pt_store_refunds_list(struct pt_store *st, int64_t charge_id, int state, int64_t after_id,
                          int max, struct pt_refund *rows, int *n, int *more)
{
    int id = charge_id > 0 ? PT_Q_REFUNDS_OF_CHARGE
             : state >= 0  ? PT_Q_REFUNDS_LIST_STATE
                           : PT_Q_REFUNDS_LIST;
    struct pt_q q;
    int rc = q_open(st, id, &q);
    if (rc)
        return rc;
    q_int(&q, 1, after_id);
    q_int(&q, 2, max + 1);
    if (charge_id > 0)
        q_int(&q, 3, charge_id);
    else if (state >= 0)
        q_text(&q, 3, pt_state_name((enum pt_state)state));
    return q_rows(&q, &pt_refund_row, max, rows, n, more);
}

int pt_store_refund_left(struct pt_store *st, int64_t charge_id, int64_t *left)
{
    struct pt_q q;
    int rc = q_open(st, PT_Q_REFUND_LEFT, &q);
    if (rc)
        return rc;
    q_int(&q, 1, charge_id);
    return q_scalar(&q, left);
}

int pt_store_refund_patch(struct pt_store *st, int64_t id, const struct pt_charge_patch *patch,
                          int64_t now)
{
    struct pt_q q;
    int rc = q_open(st, PT_Q_REFUND_PATCH, &q);
    if (rc)
        return rc;
    q_patch(&q, id, patch, now); /* ?3: the gateway's refund number */
    return q_exec_one(&q, PT_ENOTFOUND);
}

int pt_store_refund_set_review(struct pt_store *st, int64_t id, int review, const char *reason,
                               int64_t now)
{
    return set_review(st, PT_Q_REFUND_SET_REVIEW, id, review, reason, now);
}

/* ---- X and Z reports (SPEC 19) ----------------------------------------------- */

int pt_store_z_last(struct pt_store *st, int64_t *z, int64_t *to, char hash[65])
{
    struct pt_q q;
    int rc = q_open(st, PT_Q_Z_LAST, &q);
    if (rc)
        return rc;
    if ((rc = q_step(&q)) == PT_Q_ROW) {
        *z = q_int_at(&q, 0);
        *to = q_int_at(&q, 1);
        q_copy(&q, 2, hash, 65);
        rc = PT_OK;
    } else if (rc == PT_OK) {
        rc = PT_ENOTFOUND;
    }
    q_done(&q);
    return rc;
}

int pt_store_z_lock(struct pt_store *st)
{
    /* The lock lasts until the transaction ends: outside one it would end
     * at once, and two closes could take one number. */
    assert(pt_store_in_txn(st));
    struct pt_q q;
    int rc = q_open(st, PT_Q_Z_LOCK, &q);
    if (rc)
        return rc;
    while ((rc = q_step(&q)) == PT_Q_ROW)
        ;
    q_done(&q);
    return rc;
}

int pt_store_z_mark(struct pt_store *st, int64_t z, int *charges, int *refunds)
{
    /* The rows a report adds up are the rows it marked, in one
     * transaction: a row finalised after the mark is in the next report. */
    assert(pt_store_in_txn(st));
    assert(z >= 1);
    static const int ids[2] = {PT_Q_Z_MARK_CHARGES, PT_Q_Z_MARK_REFUNDS};
    int *counts[2] = {charges, refunds};
    for (int i = 0; i < 2; i++) {
        struct pt_q q;
        int rc = q_open(st, ids[i], &q);
        if (rc)
            return rc;
        q_int(&q, 1, z);
        int n = 0;
        if ((rc = q_exec(&q, &n)))
            return rc;
        if (counts[i])
            *counts[i] = n;
    }
    return PT_OK;
}

/* The line of (gateway, method, currency) in lines[0..*n), added when new. */
static struct pt_report_line *report_line(struct pt_report_line **lines, int *n, int *cap,
                                          const char *gw, const char *method, const char *cur)
{
    for (int i = 0; i < *n; i++) {
        struct pt_report_line *l = &(*lines)[i];
        if (!strcmp(l->gateway, gw) && !strcmp(l->method, method) && !strcmp(l->currency, cur))
            return l;
    }
    if (*n == *cap) {
        int want = *cap ? *cap * 2 : 8;
        struct pt_report_line *more = realloc(*lines, (size_t)want * sizeof *more);
        if (!more)
            return NULL;
        *lines = more;
        *cap = want;
    }
    struct pt_report_line *l = &(*lines)[(*n)++];
    memset(l, 0, sizeof *l);
    snprintf(l->gateway, sizeof l->gateway, "%s", gw);
    snprintf(l->method, sizeof l->method, "%s", method);
    snprintf(l->currency, sizeof l->currency, "%s", cur);
    return l;
}

static int line_cmp(const void *a, const void *b)
{
    const struct pt_report_line *x = a, *y = b;
    int c = strcmp(x->gateway, y->gateway);
    if (!c)
        c = strcmp(x->method, y->method);
    return c ? c : strcmp(x->currency, y->currency);
}

int pt_store_report_totals(struct pt_store *st, int64_t z, struct pt_report_line **lines, int *n,
                           int64_t *first)
{
    static const int ids[2] = {PT_Q_Z_TOTALS_CHARGES, PT_Q_Z_TOTALS_REFUNDS};
    int cap = 0, rc = PT_OK;
    *lines = NULL;
    *n = 0;
    if (first)
        *first = 0;
    for (int i = 0; i < 2 && rc == PT_OK; i++) {
        struct pt_q q;
        if ((rc = q_open(st, ids[i], &q)))
            break;
        if (z > 0)
            q_int(&q, 1, z);
        else
            q_text(&q, 1, NULL); /* not yet in a report: the X report */
        while ((rc = q_step(&q)) == PT_Q_ROW) {
            const char *gw = q_text_at(&q, 0), *method = q_text_at(&q, 1), *cur = q_text_at(&q, 2);
            struct pt_report_line *l =
                report_line(lines, n, &cap, gw ? gw : "", method ? method : "", cur ? cur : "");
            if (!l) {
                rc = PT_ENOMEM;
                break;
            }
            int64_t count = q_int_at(&q, 3), sum = q_int_at(&q, 4), at = q_int_at(&q, 5);
            if (i == 0) {
                l->charges = count;
                l->amount = sum;
            } else {
                l->refunds = count;
                l->refunded = sum;
            }
            if (first && at > 0 && (*first == 0 || at < *first))
                *first = at;
        }
        q_done(&q);
    }
    if (rc != PT_OK) {
        free(*lines);
        *lines = NULL;
        *n = 0;
        return rc;
    }
    /* A refund's line may be one no charge of this report has (a refund
     * today of a charge closed before): sorted with the others. */
    if (*n > 1)
        qsort(*lines, (size_t)*n, sizeof **lines, line_cmp);
    return PT_OK;
}

int pt_store_z_open(struct pt_store *st, int64_t open[4])
{
    const struct pt_store_ops *ops = ((const struct pt_store_head *)st)->ops;
    if (ops->z_open)
        return ops->z_open(st, open);
    struct pt_q q;
    int rc = q_open(st, PT_Q_Z_OPEN, &q);
    if (rc)
        return rc;
    if ((rc = q_step(&q)) == PT_Q_ROW) {
        for (int i = 0; i < 4; i++)
            open[i] = q_int_at(&q, i); /* SQLite's sum() of no rows: NULL, read 0 */
        rc = PT_OK;
    } else if (rc == PT_OK) {
        rc = PT_ESTORAGE; /* an aggregate always has its row */
    }
    q_done(&q);
    return rc;
}

int pt_store_z_insert(struct pt_store *st, int64_t z, const char *lane, int64_t from, int64_t to,
                      const char *hash, const char *body, int64_t now)
{
    assert(pt_store_in_txn(st)); /* with the rows it marked */
    struct pt_q q;
    int rc = q_open(st, PT_Q_Z_INSERT, &q);
    if (rc)
        return rc;
    q_int(&q, 1, z);
    q_text(&q, 2, lane);
    q_int(&q, 3, from);
    q_int(&q, 4, to);
    q_text(&q, 5, hash);
    q_text(&q, 6, body);
    q_int(&q, 7, now);
    return q_exec_one(&q, PT_ESTORAGE);
}

/* The body of the one row a statement finds (malloc'd); PT_ENOTFOUND. */
static int body_of(struct pt_q *q, char **body)
{
    int rc = q_step(q);
    if (rc == PT_Q_ROW) {
        const char *t = q_text_at(q, 0);
        *body = strdup(t ? t : "");
        rc = *body ? PT_OK : PT_ENOMEM;
    } else if (rc == PT_OK) {
        rc = PT_ENOTFOUND;
    }
    q_done(q);
    return rc;
}

int pt_store_z_get(struct pt_store *st, int64_t z, char **body)
{
    struct pt_q q;
    *body = NULL;
    int rc = q_open(st, PT_Q_Z_GET, &q);
    if (rc)
        return rc;
    q_int(&q, 1, z);
    return body_of(&q, body);
}

/* ---- reconciliation ---- */

static void copy_col(char *dst, size_t cap, const char *src)
{
    /* snprintf's cost, four times a record of a 100 000-record day, was a
     * tenth of the run (tests/bench, row reconcile_100k). */
    size_t n = src ? strnlen(src, cap - 1) : 0;
    memcpy(dst, src ? src : "", n);
    dst[n] = '\0';
}

int pt_store_recon_local(struct pt_store *st, const char *gateway, int refunds, int64_t from,
                         int64_t to, pt_recon_row_fn fn, void *ctx)
{
    struct pt_q q;
    int rc = q_open(st, refunds ? PT_Q_RECON_REFUNDS : PT_Q_RECON_CHARGES, &q);
    if (rc)
        return rc;
    q_text(&q, 1, gateway);
    q_int(&q, 2, from);
    q_int(&q, 3, to);
    while ((rc = q_step(&q)) == PT_Q_ROW) {
        struct pt_recon_record r = {.refund = refunds};
        int c = 0;
        copy_col(r.order_id, sizeof r.order_id, q_text_at(&q, c++));
        if (refunds)
            copy_col(r.refund_id, sizeof r.refund_id, q_text_at(&q, c++));
        copy_col(r.gateway_trade_no, sizeof r.gateway_trade_no, q_text_at(&q, c++));
        if (refunds)
            copy_col(r.gateway_refund_no, sizeof r.gateway_refund_no, q_text_at(&q, c++));
        r.amount = q_int_at(&q, c++);
        copy_col(r.currency, sizeof r.currency, q_text_at(&q, c++));
        int64_t at = q_int_at(&q, c);
        if ((rc = fn(ctx, &r, at)) != PT_OK)
            break;
    }
    q_done(&q);
    return rc;
}

int pt_store_recon_final_times(struct pt_store *st, const char *gateway, int64_t from, int64_t to,
                               int (*fn)(void *ctx, int64_t at), void *ctx)
{
    struct pt_q q;
    int rc = q_open(st, PT_Q_RECON_FINAL_TIMES, &q);
    if (rc)
        return rc;
    q_text(&q, 1, gateway);
    q_int(&q, 2, from);
    q_int(&q, 3, to);
    while ((rc = q_step(&q)) == PT_Q_ROW)
        if ((rc = fn(ctx, q_int_at(&q, 0))) != PT_OK)
            break;
    q_done(&q);
    return rc;
}

int pt_store_recon_insert(struct pt_store *st, const char *gateway, const char *date,
                          const char *state, const char *body, int64_t now)
{
    struct pt_q q;
    int rc = q_open(st, PT_Q_RECON_INSERT, &q);
    if (rc)
        return rc;
    q_text(&q, 1, gateway);
    q_text(&q, 2, date);
    q_text(&q, 3, state);
    q_text(&q, 4, body);
    q_int(&q, 5, now);
    return q_exec_one(&q, PT_ESTORAGE);
}

int pt_store_recon_latest(struct pt_store *st, const char *gateway, const char *date, char **body)
{
    struct pt_q q;
    *body = NULL;
    int rc = q_open(st, PT_Q_RECON_LATEST, &q);
    if (rc)
        return rc;
    q_text(&q, 1, gateway);
    q_text(&q, 2, date);
    return body_of(&q, body);
}

int pt_store_recon_latest_done(struct pt_store *st, const char *gateway, char **body)
{
    struct pt_q q;
    *body = NULL;
    int rc = q_open(st, PT_Q_RECON_LATEST_DONE, &q);
    if (rc)
        return rc;
    q_text(&q, 1, gateway);
    return body_of(&q, body);
}

static int recon_lock_stmt(struct pt_store *st, int id, const char *gateway, const char *date,
                           int64_t *got)
{
    char name[32];
    snprintf(name, sizeof name, "%s %s", gateway, date);
    struct pt_q q;
    int rc = q_open(st, id, &q);
    if (rc)
        return rc;
    q_text(&q, 1, name);
    return q_scalar(&q, got);
}

int pt_store_recon_lock(struct pt_store *st, const char *gateway, const char *date)
{
    int64_t got = 0;
    int rc = recon_lock_stmt(st, PT_Q_RECON_LOCK, gateway, date, &got);
    return rc ? rc : got == 1 ? PT_OK : PT_EBUSY;
}

void pt_store_recon_unlock(struct pt_store *st, const char *gateway, const char *date)
{
    int64_t got = 0;
    (void)recon_lock_stmt(st, PT_Q_RECON_UNLOCK, gateway, date, &got);
}
