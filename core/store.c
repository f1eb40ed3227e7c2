/*
 * store.c - the store interface: picks a backend at open and forwards
 * every call to it through the backend's table of operations
 * (store_impl.h).  Nothing here speaks SQL.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "store_impl.h"

static const struct pt_store_ops *ops(const struct pt_store *st)
{
    return ((const struct pt_store_head *)(const void *)st)->ops;
}

int pt_store_open(const struct pt_store_options *opt, struct pt_store **out, char *errbuf,
                  size_t errlen)
{
    if (opt->backend == PT_STORE_POSTGRESQL) {
#ifdef PT_WITH_PG
        return pt_store_pg_open(opt, out, errbuf, errlen);
#else
        *out = NULL;
        if (errbuf)
            snprintf(errbuf, errlen,
                     "store.backend \"postgresql\": this payterm was built without the "
                     "PostgreSQL store (cmake -DPT_WITH_PG=ON)");
        return PT_EUNSUPPORTED;
#endif
    }
    return pt_store_sqlite_open(opt, out, errbuf, errlen);
}

const char *pt_store_errmsg(struct pt_store *st)
{
    return st ? ops(st)->errmsg(st) : "no database";
}

int pt_store_schema_latest_of(const struct pt_store *st)
{
    return ops(st)->schema_latest();
}

int pt_store_charge_queue_guarded(struct pt_store *st, const struct pt_store_queued_charge *q,
                                  int64_t now)
{
    return ops(st)->charge_queue_guarded ? ops(st)->charge_queue_guarded(st, q, now)
                                         : PT_EUNSUPPORTED;
}

int pt_store_has_queue_guarded(const struct pt_store *st)
{
    return ops(st)->charge_queue_guarded != NULL;
}

uint64_t pt_store_round_trips(const struct pt_store *st)
{
    return ops(st)->round_trips ? ops(st)->round_trips(st) : 0;
}

int pt_store_refunds_claim(struct pt_store *st, const int64_t *ids, int n, unsigned char *taken)
{
    if (ops(st)->refunds_claim)
        return ops(st)->refunds_claim(st, ids, n, taken);
    memset(taken, 1, (size_t)n);
    return PT_OK;
}

int pt_store_wait_events(struct pt_store *st, int timeout_ms)
{
    return ops(st)->wait_events ? ops(st)->wait_events(st, timeout_ms) : PT_EUNSUPPORTED;
}

int pt_store_charges_claim(struct pt_store *st, const int64_t *ids, int n, unsigned char *taken)
{
    if (ops(st)->charges_claim)
        return ops(st)->charges_claim(st, ids, n, taken);
    memset(taken, 1, (size_t)n);
    return PT_OK;
}

const char *pt_store_backend(const struct pt_store *st)
{
    return ops(st)->name;
}

unsigned pt_store_caps(const struct pt_store *st)
{
    return ops(st)->caps;
}

unsigned pt_store_caps_of(const struct pt_store_options *opt)
{
    return opt->backend == PT_STORE_POSTGRESQL ? PT_STORE_PG_CAPS : PT_STORE_SQLITE_CAPS;
}

void pt_key_row_free(struct pt_key_row *row)
{
    if (!row)
        return;
    free(row->response_body);
    row->response_body = NULL;
}

void pt_event_rows_free(struct pt_event_row *rows, int n)
{
    for (int i = 0; rows && i < n; i++) {
        free(rows[i].payload);
        rows[i].payload = NULL;
    }
}

void pt_store_close(struct pt_store *st)
{
    if (!st)
        return;
    ops(st)->close(st);
}

int pt_store_schema_version(struct pt_store *st, int *version)
{
    return ops(st)->schema_version(st, version);
}

int pt_store_migrate_to(struct pt_store *st, int version)
{
    return ops(st)->migrate_to(st, version);
}

int pt_store_pragma_int(struct pt_store *st, const char *name, int *value)
{
    return ops(st)->pragma_int(st, name, value);
}

void pt_store_set_event_hook(struct pt_store *st, void (*fn)(void *ctx), void *ctx)
{
    ops(st)->set_event_hook(st, fn, ctx);
}

int pt_store_begin(struct pt_store *st)
{
    return ops(st)->begin(st);
}

int pt_store_in_txn(const struct pt_store *st)
{
    return ops(st)->in_txn(st);
}

int pt_store_commit(struct pt_store *st)
{
    return ops(st)->commit(st);
}

int pt_store_rollback(struct pt_store *st)
{
    return ops(st)->rollback(st);
}

void pt_store_attach(struct pt_store *st, struct pt_store_writer *w)
{
    ops(st)->attach(st, w);
}

void pt_store_defer_commit(struct pt_store *st, struct pt_store_commit *ticket)
{
    ops(st)->defer_commit(st, ticket);
}

int pt_store_commit_deferred(const struct pt_store *st)
{
    return ops(st)->commit_deferred(st);
}

int pt_store_archive_candidates(struct pt_store *st, int64_t before, const char *bill_offsets,
                                int64_t after, int max, struct pt_archive_item *rows, int *n)
{
    *n = 0;
    return ops(st)->archive_candidates
               ? ops(st)->archive_candidates(st, before, bill_offsets, after, max, rows, n)
               : PT_EUNSUPPORTED;
}

int pt_store_archive_copy(struct pt_store *st, const char *path,
                          const struct pt_archive_item *items, int n, int *copied)
{
    if (copied)
        *copied = 0;
    return ops(st)->archive_copy ? ops(st)->archive_copy(st, path, items, n, copied)
                                 : PT_EUNSUPPORTED;
}

int pt_store_archive_forget(struct pt_store *st, const struct pt_archive_item *items, int n,
                            int *moved)
{
    *moved = 0;
    return ops(st)->archive_forget ? ops(st)->archive_forget(st, items, n, moved) : PT_EUNSUPPORTED;
}

int pt_store_archived_month(struct pt_store *st, const char *kind, const char *ext_id,
                            char month[PT_ARCHIVE_MONTH_LEN])
{
    month[0] = '\0';
    return ops(st)->archived_month ? ops(st)->archived_month(st, kind, ext_id, month)
                                   : PT_EUNSUPPORTED;
}

int pt_store_backup(struct pt_store *st, const char *dest)
{
    return ops(st)->backup(st, dest);
}

void pt_store_note_erased(struct pt_store *st)
{
    ops(st)->note_erased(st);
}

int pt_store_checkpoint_truncate(struct pt_store *st)
{
    return ops(st)->checkpoint_truncate(st);
}

int pt_store_writable(struct pt_store *st)
{
    return ops(st)->writable(st);
}

int pt_store_health(struct pt_store *st, struct pt_store_health *out)
{
    if (ops(st)->health)
        return ops(st)->health(st, out);
    memset(out, 0, sizeof *out);
    out->free_bytes = -1;
    out->writable = ops(st)->writable(st);
    if (!out->writable)
        snprintf(out->reason, sizeof out->reason, "the %s store does not take writes",
                 ops(st)->name);
    return PT_OK;
}

int pt_store_files_intact(struct pt_store *st)
{
    return ops(st)->files_intact ? ops(st)->files_intact(st) : PT_OK;
}

int pt_store_key_insert(struct pt_store *st, const char *scope, const char *key,
                        const unsigned char hash[32], int64_t instance, int64_t now,
                        int64_t expires_at)
{
    return ops(st)->key_insert(st, scope, key, hash, instance, now, expires_at);
}

int pt_store_key_take_later(struct pt_store *st, const char *scope, const char *key,
                            const unsigned char hash[32], int64_t instance, int64_t now,
                            int64_t expires_at, struct pt_key_lock *lock)
{
    return ops(st)->key_take_later(st, scope, key, hash, instance, now, expires_at, lock);
}

int pt_store_key_set_order(struct pt_store *st, const char *scope, const char *key,
                           struct pt_key_lock *lock, const char *order_id)
{
    return ops(st)->key_set_order(st, scope, key, lock, order_id);
}

void pt_store_key_name_order(struct pt_key_lock *lock, const char *order_id)
{
    snprintf(lock->order_id, sizeof lock->order_id, "%s", order_id ? order_id : "");
}

int pt_store_key_complete(struct pt_store *st, const char *scope, const char *key,
                          struct pt_key_lock *lock, int status, const char *body, size_t len,
                          int64_t now)
{
    return ops(st)->key_complete(st, scope, key, lock, status, body, len, now);
}

int pt_store_key_delete(struct pt_store *st, const char *scope, const char *key,
                        struct pt_key_lock *lock)
{
    return ops(st)->key_delete(st, scope, key, lock);
}

int pt_store_charge_insert(struct pt_store *st, struct pt_charge *c, int64_t now)
{
    return ops(st)->charge_insert(st, c, now);
}

int pt_store_charge_transition(struct pt_store *st, int64_t id, unsigned from_mask,
                               enum pt_state to, const struct pt_charge_patch *patch, int64_t now)
{
    return ops(st)->charge_transition(st, id, from_mask, to, patch, now);
}

int pt_store_charge_accept_offline(struct pt_store *st, const struct pt_charge *c, int64_t now)
{
    return ops(st)->charge_accept_offline(st, c, now);
}

int pt_store_charge_request_cancel(struct pt_store *st, int64_t id, unsigned from_mask, int64_t due,
                                   int64_t now)
{
    return ops(st)->charge_request_cancel(st, id, from_mask, due, now);
}

int pt_store_charges_due(struct pt_store *st, int64_t now, int64_t after_id, int max,
                         struct pt_charge *rows, int *n)
{
    return ops(st)->charges_due(st, now, after_id, max, rows, n);
}

int pt_store_charges_next_due(struct pt_store *st, int64_t *when)
{
    return ops(st)->charges_next_due(st, when);
}

int pt_store_sends_interrupted(struct pt_store *st, int64_t now, int *n)
{
    return ops(st)->sends_interrupted(st, now, n);
}

int pt_store_gateway_back(struct pt_store *st, const char *gateway, int64_t now, int *n)
{
    *n = 0;
    return ops(st)->gateway_back(st, gateway, now, n);
}

int pt_store_queue_figures(struct pt_store *st, const char *currency, int64_t *count,
                           int64_t *amount)
{
    return ops(st)->queue_figures(st, currency, count, amount);
}

int pt_store_stats(struct pt_store *st, int final_states, struct pt_store_stats *out)
{
    return ops(st)->stats(st, final_states, out);
}

int pt_store_event_insert(struct pt_store *st, const char *type, int64_t charge_id,
                          const char *order_id, const char *payload, int64_t now, int64_t *seq)
{
    return ops(st)->event_insert(st, type, charge_id, order_id, payload, now, seq);
}

int pt_store_audit(struct pt_store *st, int64_t charge_id, const char *from, const char *to,
                   const char *cause, const char *actor, int refused, const char *detail,
                   int64_t now)
{
    return ops(st)->audit(st, charge_id, from, to, cause, actor, refused, detail, now);
}

int pt_store_audit_first(struct pt_store *st, int64_t charge_id, const char *to, const char *cause,
                         const char *actor, int64_t now)
{
    return ops(st)->audit_first(st, charge_id, to, cause, actor, now);
}

int pt_store_count(struct pt_store *st, const char *table, int64_t *count)
{
    return ops(st)->count(st, table, count);
}

int pt_store_refund_insert(struct pt_store *st, struct pt_refund *r, int64_t now)
{
    return ops(st)->refund_insert(st, r, now);
}

int pt_store_refunds_due(struct pt_store *st, int64_t now, int64_t after_id, int max,
                         struct pt_refund *rows, int *n)
{
    return ops(st)->refunds_due(st, now, after_id, max, rows, n);
}

int pt_store_refunds_next_due(struct pt_store *st, int64_t *when)
{
    return ops(st)->refunds_next_due(st, when);
}

int pt_store_refund_transition(struct pt_store *st, int64_t id, unsigned from_mask,
                               enum pt_state to, const struct pt_charge_patch *patch, int64_t now)
{
    return ops(st)->refund_transition(st, id, from_mask, to, patch, now);
}

int pt_store_refund_withdraw(struct pt_store *st, int64_t id)
{
    return ops(st)->refund_withdraw(st, id);
}

int pt_store_refund_audit(struct pt_store *st, const struct pt_refund *r, const char *from,
                          const char *to, const char *cause, const char *actor, int refused,
                          const char *detail, int64_t now)
{
    return ops(st)->refund_audit(st, r, from, to, cause, actor, refused, detail, now);
}

int pt_store_refund_event_insert(struct pt_store *st, const char *type, const struct pt_refund *r,
                                 const char *payload, int64_t now, int64_t *seq)
{
    return ops(st)->refund_event_insert(st, type, r, payload, now, seq);
}

int pt_store_refund_stats(struct pt_store *st, struct pt_refund_stats *out)
{
    return ops(st)->refund_stats(st, out);
}

/* ---- the lane's clock ---- */

int pt_store_clock_get(struct pt_store *st, struct pt_clock_anchor *out)
{
    memset(out, 0, sizeof *out);
    return ops(st)->clock_get ? ops(st)->clock_get(st, out) : PT_EUNSUPPORTED;
}

int pt_store_clock_put(struct pt_store *st, const struct pt_clock_anchor *a)
{
    return ops(st)->clock_put ? ops(st)->clock_put(st, a) : PT_EUNSUPPORTED;
}

int pt_store_newest_time(struct pt_store *st, int64_t *t)
{
    *t = 0;
    return ops(st)->newest_time ? ops(st)->newest_time(st, t) : PT_EUNSUPPORTED;
}

int pt_store_clock_shift(struct pt_store *st, int64_t since, int64_t delta)
{
    return ops(st)->clock_shift ? ops(st)->clock_shift(st, since, delta) : PT_EUNSUPPORTED;
}

int pt_store_clock_event(struct pt_store *st, const char *kind, int64_t size_ms, int64_t wall_ms,
                         const char *detail, int64_t now)
{
    return ops(st)->clock_event ? ops(st)->clock_event(st, kind, size_ms, wall_ms, detail, now)
                                : PT_EUNSUPPORTED;
}

int pt_store_clock_events(struct pt_store *st, int max, struct pt_clock_event_row *rows, int *n)
{
    *n = 0;
    return ops(st)->clock_events ? ops(st)->clock_events(st, max, rows, n) : PT_EUNSUPPORTED;
}
