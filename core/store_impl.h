/*
 * store_impl.h - what a store backend implements (private to core/).
 *
 * struct pt_store is opaque to the rest of payterm.  A backend's own
 * struct begins with a struct pt_store_head naming its table of
 * operations, as an sqlite3_file begins with its pMethods; store.c
 * forwards each pt_store_* call through that table.  store_sqlite.c and
 * store_pg.c are the only files that speak SQL.
 */
#ifndef PT_STORE_IMPL_H
#define PT_STORE_IMPL_H

#include "store.h"

/* Each backend's PT_STORE_CAP_* bits, known before it opens (store.c). */
#define PT_STORE_SQLITE_CAPS (PT_STORE_CAP_DATADIR_FILE | PT_STORE_CAP_GROUP_COMMIT)
#define PT_STORE_PG_CAPS PT_STORE_CAP_SHARED

struct pt_store_ops {
    const char *name; /* "sqlite", "postgresql" */
    unsigned caps;    /* PT_STORE_CAP_*: PT_STORE_SQLITE_CAPS, PT_STORE_PG_CAPS */
    const char *(*errmsg)(struct pt_store *st);
    int (*schema_latest)(void);
    uint64_t (*round_trips)(const struct pt_store *st);      /* NULL: no server */
    int (*wait_events)(struct pt_store *st, int timeout_ms); /* NULL: unsupported */
    /* NULL: every row is this writer's (one writer). */
    int (*charges_claim)(struct pt_store *st, const int64_t *ids, int n, unsigned char *taken);
    int (*refunds_claim)(struct pt_store *st, const int64_t *ids, int n, unsigned char *taken);
    /* NULL: not offered (pt_store_charge_queue_guarded says PT_EUNSUPPORTED). */
    int (*charge_queue_guarded)(struct pt_store *st, const struct pt_store_queued_charge *q,
                                int64_t now);
    void (*close)(struct pt_store *st);
    int (*schema_version)(struct pt_store *st, int *version);
    int (*migrate_to)(struct pt_store *st, int version);
    int (*pragma_int)(struct pt_store *st, const char *name, int *value);
    void (*set_event_hook)(struct pt_store *st, void (*fn)(void *ctx), void *ctx);
    int (*begin)(struct pt_store *st);
    int (*in_txn)(const struct pt_store *st);
    int (*commit)(struct pt_store *st);
    int (*rollback)(struct pt_store *st);
    void (*attach)(struct pt_store *st, struct pt_store_writer *w);
    void (*defer_commit)(struct pt_store *st, struct pt_store_commit *ticket);
    int (*commit_deferred)(const struct pt_store *st);
    int (*backup)(struct pt_store *st, const char *dest);
    void (*note_erased)(struct pt_store *st);
    int (*checkpoint_truncate)(struct pt_store *st);
    int (*writable)(struct pt_store *st);
    /* NULL: writable only, free bytes not known. */
    int (*health)(struct pt_store *st, struct pt_store_health *out);
    /* NULL: no files of its own to lose (always PT_OK). */
    int (*files_intact)(struct pt_store *st);
    int (*key_get)(struct pt_store *st, const char *scope, const char *key, struct pt_key_row *out);
    int (*key_insert)(struct pt_store *st, const char *scope, const char *key,
                      const unsigned char hash[32], int64_t instance, int64_t now,
                      int64_t expires_at);
    int (*key_relock)(struct pt_store *st, const char *scope, const char *key,
                      int64_t old_locked_at, int64_t old_locked_by, int64_t instance, int64_t now);
    int (*key_take_later)(struct pt_store *st, const char *scope, const char *key,
                          const unsigned char hash[32], int64_t instance, int64_t now,
                          int64_t expires_at, struct pt_key_lock *lock);
    int (*key_set_order)(struct pt_store *st, const char *scope, const char *key,
                         struct pt_key_lock *lock, const char *order_id);
    int (*key_complete)(struct pt_store *st, const char *scope, const char *key,
                        struct pt_key_lock *lock, int status, const char *body, size_t len,
                        int64_t now);
    int (*key_delete)(struct pt_store *st, const char *scope, const char *key,
                      struct pt_key_lock *lock);
    int (*key_delete_expired)(struct pt_store *st, const char *scope, const char *key, int64_t now);
    int (*key_sweep)(struct pt_store *st, int64_t now, int *count);
    /* NULL: PT_EUNSUPPORTED (a lane's local store only). */
    int (*key_of_order)(struct pt_store *st, const char *order_id, char *scope, char *key,
                        struct pt_key_row *out);
    int (*charge_insert)(struct pt_store *st, struct pt_charge *c, int64_t now);
    int (*charge_get)(struct pt_store *st, const char *order_id, struct pt_charge *out);
    int (*charge_get_by_id)(struct pt_store *st, int64_t id, struct pt_charge *out);
    int (*charge_transition)(struct pt_store *st, int64_t id, unsigned from_mask, enum pt_state to,
                             const struct pt_charge_patch *patch, int64_t now);
    int (*charge_patch)(struct pt_store *st, int64_t id, const struct pt_charge_patch *patch,
                        int64_t now);
    int (*charge_accept_offline)(struct pt_store *st, const struct pt_charge *c, int64_t now);
    int (*charge_request_cancel)(struct pt_store *st, int64_t id, unsigned from_mask, int64_t due,
                                 int64_t now);
    int (*key_reanswer)(struct pt_store *st, const char *scope, int from_status, int status,
                        const char *body, size_t len, int *n);
    int (*charge_set_review)(struct pt_store *st, int64_t id, int review, const char *reason,
                             int64_t now);
    int (*charges_list)(struct pt_store *st, int state, int64_t after_id, int max,
                        struct pt_charge *rows, int *n, int *more);
    int (*charges_list_review)(struct pt_store *st, int64_t after_id, int max,
                               struct pt_charge *rows, int *n, int *more);
    int (*charges_due)(struct pt_store *st, int64_t now, int64_t after_id, int max,
                       struct pt_charge *rows, int *n);
    int (*charges_next_due)(struct pt_store *st, int64_t *when);
    int (*charges_queued_before)(struct pt_store *st, const char *gateway, const char *method,
                                 int64_t created_before, int64_t after_id, int max,
                                 struct pt_charge *rows, int *n);
    int (*charges_oldest_queued)(struct pt_store *st, const char *gateway, const char *method,
                                 int64_t *created_at);
    int (*sends_interrupted)(struct pt_store *st, int64_t now, int *n);
    int (*gateway_back)(struct pt_store *st, const char *gateway, int64_t now, int *n);
    int (*queue_figures)(struct pt_store *st, const char *currency, int64_t *count,
                         int64_t *amount);
    int (*stats)(struct pt_store *st, int final_states, struct pt_store_stats *out);
    int (*event_insert)(struct pt_store *st, const char *type, int64_t charge_id,
                        const char *order_id, const char *payload, int64_t now, int64_t *seq);
    int (*events_list)(struct pt_store *st, int64_t after, int max, struct pt_event_row *rows,
                       int *n);
    int (*events_last_seq)(struct pt_store *st, int64_t *seq);
    int (*audit)(struct pt_store *st, int64_t charge_id, const char *from, const char *to,
                 const char *cause, const char *actor, int refused, const char *detail,
                 int64_t now);
    int (*audit_first)(struct pt_store *st, int64_t charge_id, const char *to, const char *cause,
                       const char *actor, int64_t now);
    int (*audit_list)(struct pt_store *st, int64_t charge_id, int max, struct pt_audit_row *rows,
                      int *n);
    int (*notification_insert)(struct pt_store *st, const char *gateway, const char *dedup_id,
                               const char *order_id, const char *status, const char *outcome,
                               int64_t now);
    int (*count)(struct pt_store *st, const char *table, int64_t *count);
    int (*refund_insert)(struct pt_store *st, struct pt_refund *r, int64_t now);
    int (*refund_get)(struct pt_store *st, const char *refund_id, struct pt_refund *out);
    int (*refund_get_by_id)(struct pt_store *st, int64_t id, struct pt_refund *out);
    int (*refunds_list)(struct pt_store *st, int64_t charge_id, int state, int64_t after_id,
                        int max, struct pt_refund *rows, int *n, int *more);
    int (*refunds_due)(struct pt_store *st, int64_t now, int64_t after_id, int max,
                       struct pt_refund *rows, int *n);
    int (*refunds_next_due)(struct pt_store *st, int64_t *when);
    int (*refund_left)(struct pt_store *st, int64_t charge_id, int64_t *left);
    int (*refund_transition)(struct pt_store *st, int64_t id, unsigned from_mask, enum pt_state to,
                             const struct pt_charge_patch *patch, int64_t now);
    int (*refund_patch)(struct pt_store *st, int64_t id, const struct pt_charge_patch *patch,
                        int64_t now);
    int (*refund_set_review)(struct pt_store *st, int64_t id, int review, const char *reason,
                             int64_t now);
    int (*refund_withdraw)(struct pt_store *st, int64_t id);
    int (*refund_audit)(struct pt_store *st, const struct pt_refund *r, const char *from,
                        const char *to, const char *cause, const char *actor, int refused,
                        const char *detail, int64_t now);
    int (*refund_event_insert)(struct pt_store *st, const char *type, const struct pt_refund *r,
                               const char *payload, int64_t now, int64_t *seq);
    int (*refund_stats)(struct pt_store *st, struct pt_refund_stats *out);
    /* NULL: PT_EUNSUPPORTED. */
    int (*clock_get)(struct pt_store *st, struct pt_clock_anchor *out);
    int (*clock_put)(struct pt_store *st, const struct pt_clock_anchor *a);
    int (*newest_time)(struct pt_store *st, int64_t *t);
    int (*clock_shift)(struct pt_store *st, int64_t since, int64_t delta);
    int (*clock_event)(struct pt_store *st, const char *kind, int64_t size_ms, int64_t wall_ms,
                       const char *detail, int64_t now);
    int (*clock_events)(struct pt_store *st, int max, struct pt_clock_event_row *rows, int *n);
};

struct pt_store_head {
    const struct pt_store_ops *ops;
};

/* The backends' constructors (pt_store_open picks one by opt->backend). */
int pt_store_sqlite_open(const struct pt_store_options *opt, struct pt_store **out, char *errbuf,
                         size_t errlen);
#ifdef PT_WITH_PG
int pt_store_pg_open(const struct pt_store_options *opt, struct pt_store **out, char *errbuf,
                     size_t errlen);
#endif

#endif
