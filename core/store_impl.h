/*
 * store_impl.h - what a store backend implements (private to core/).
 *
 * struct pt_store is opaque to the rest of payterm.  A backend's own
 * struct begins with a struct pt_store_head naming its table of
 * operations, as an sqlite3_file begins with its pMethods.  Two floors:
 *   - the domain operations that read and write the same way on every
 *     backend are written once, in store_ops.c, over a narrow statement
 *     interface (struct pt_store_sql: prepare a statement by its shared
 *     id, bind, step, read a column) - as SQLite's VDBE runs over its
 *     pager, whatever the file is;
 *   - what differs (transactions and their commit policy, the floors, the
 *     lanes' claims and figures, the transitions' state sets) stays a
 *     backend operation in struct pt_store_ops, which store.c forwards.
 * Each backend supplies the SQL text of the shared statements in its own
 * dialect (PT_STMTS in store_sqlite_sql.h, PG_STMTS in store_pg_sql.h),
 * found by the ids below.  Only the backends' files (store_sqlite*,
 * store_pg*) hold SQL text.
 */
#ifndef PT_STORE_IMPL_H
#define PT_STORE_IMPL_H

#include "store.h"

/* Each backend's PT_STORE_CAP_* bits, known before it opens (store.c). */
#define PT_STORE_SQLITE_CAPS (PT_STORE_CAP_DATADIR_FILE | PT_STORE_CAP_GROUP_COMMIT)
#define PT_STORE_PG_CAPS PT_STORE_CAP_SHARED

/*
 * The statements every backend has, by one name: store_ops.c runs them as
 * PT_Q_<name>; a backend maps each onto its own statement S_<name>
 * (PT_STORE_SHARED_MAP).  The parameters are the same ($n / ?n) in both
 * dialects' text.
 */
#define PT_STORE_SHARED(X)                                                                         \
    X(KEY_GET)                                                                                     \
    X(KEY_OF_ORDER)                                                                                \
    X(KEY_RELOCK)                                                                                  \
    X(CHARGE_GET)                                                                                  \
    X(CHARGE_GET_BY_ID)                                                                            \
    X(CHARGE_PATCH)                                                                                \
    X(CHARGE_SET_REVIEW)                                                                           \
    X(CHARGES_LIST)                                                                                \
    X(CHARGES_LIST_STATE)                                                                          \
    X(CHARGES_LIST_REVIEW)                                                                         \
    X(CHARGES_QUEUED_BEFORE)                                                                       \
    X(CHARGES_OLDEST_QUEUED)                                                                       \
    X(KEY_REANSWER)                                                                                \
    X(KEY_DELETE_EXPIRED)                                                                          \
    X(KEY_SWEEP)                                                                                   \
    X(EVENTS_LIST)                                                                                 \
    X(EVENTS_LAST)                                                                                 \
    X(AUDIT_LIST)                                                                                  \
    X(NOTIFICATION_INSERT)                                                                         \
    X(REFUND_GET)                                                                                  \
    X(REFUND_GET_BY_ID)                                                                            \
    X(REFUNDS_LIST)                                                                                \
    X(REFUNDS_LIST_STATE)                                                                          \
    X(REFUNDS_OF_CHARGE)                                                                           \
    X(REFUND_LEFT)                                                                                 \
    X(REFUND_PATCH)                                                                                \
    X(REFUND_SET_REVIEW)                                                                           \
    X(Z_LAST)                                                                                      \
    X(Z_LOCK)                                                                                      \
    X(Z_MARK_CHARGES)                                                                              \
    X(Z_MARK_REFUNDS)                                                                              \
    X(Z_TOTALS_CHARGES)                                                                            \
    X(Z_TOTALS_REFUNDS)                                                                            \
    X(Z_INSERT)                                                                                    \
    X(Z_GET)                                                                                       \
    X(Z_OPEN)                                                                                      \
    X(RECON_CHARGES)                                                                               \
    X(RECON_FINAL_TIMES)                                                                           \
    X(RECON_REFUNDS)                                                                               \
    X(RECON_INSERT)                                                                                \
    X(RECON_LATEST)                                                                                \
    X(RECON_LATEST_DONE)                                                                           \
    X(RECON_LOCK)                                                                                  \
    X(RECON_UNLOCK)

enum {
#define PT__Q_ENUM(id) PT_Q_##id,
    PT_STORE_SHARED(PT__Q_ENUM)
#undef PT__Q_ENUM
        PT_Q__COUNT
};

/* A backend's table from a shared id to its own statement (S_<name>). */
#define PT__Q_MAP(id) [PT_Q_##id] = S_##id,
#define PT_STORE_SHARED_MAP(name) static const int name[PT_Q__COUNT] = {PT_STORE_SHARED(PT__Q_MAP)}

/* step(): a row is there to read. */
#define PT_Q_ROW 1

/* One statement being run, on the caller's stack from prepare() to done(). */
struct pt_q {
    struct pt_store *st;
    void *h;        /* the backend's: an sqlite3_stmt, a PGresult once run */
    int id;         /* the backend's own statement id */
    int row, nrows; /* PostgreSQL: the row read, the rows of the result */
};

/*
 * The narrow interface store_ops.c runs over.  Parameters are numbered from
 * 1 as in the SQL text, bound in any order; a string is used where it is
 * (not copied) until done().  A failure to prepare or to run comes back
 * from prepare() or step() as a pt_err, the backend's message in errmsg().
 */
struct pt_store_sql {
    int (*prepare)(struct pt_store *st, int shared_id, struct pt_q *q);
    void (*bind_int)(struct pt_q *q, int i, int64_t v);
    void (*bind_text)(struct pt_q *q, int i, const char *v); /* NULL binds NULL */
    void (*bind_blob)(struct pt_q *q, int i, const void *p, size_t n);
    int (*step)(struct pt_q *q);                            /* PT_Q_ROW, PT_OK at the end */
    int64_t (*col_int)(const struct pt_q *q, int col);      /* NULL reads 0 */
    const char *(*col_text)(const struct pt_q *q, int col); /* NULL when NULL */
    /* A blob (bytea): *out a malloc'd copy with a NUL after its *n bytes,
     * NULL when the column is NULL; PT_ENOMEM. */
    int (*col_blob)(const struct pt_q *q, int col, unsigned char **out, size_t *n);
    int (*changes)(const struct pt_q *q); /* after the last step */
    void (*done)(struct pt_q *q);
};

struct pt_store_ops {
    const char *name;               /* "sqlite", "postgresql" */
    const struct pt_store_sql *sql; /* what store_ops.c runs over */
    unsigned caps;                  /* PT_STORE_CAP_*: PT_STORE_SQLITE_CAPS, PT_STORE_PG_CAPS */
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
    int (*key_insert)(struct pt_store *st, const char *scope, const char *key,
                      const unsigned char hash[32], int64_t instance, int64_t now,
                      int64_t expires_at);
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
    int (*charge_insert)(struct pt_store *st, struct pt_charge *c, int64_t now);
    int (*charge_transition)(struct pt_store *st, int64_t id, unsigned from_mask, enum pt_state to,
                             const struct pt_charge_patch *patch, int64_t now);
    int (*charge_accept_offline)(struct pt_store *st, const struct pt_charge *c, int64_t now);
    int (*charge_request_cancel)(struct pt_store *st, int64_t id, unsigned from_mask, int64_t due,
                                 int64_t now);
    int (*charges_due)(struct pt_store *st, int64_t now, int64_t after_id, int max,
                       struct pt_charge *rows, int *n);
    int (*charges_next_due)(struct pt_store *st, int64_t *when);
    int (*sends_interrupted)(struct pt_store *st, int64_t now, int *n);
    int (*gateway_back)(struct pt_store *st, const char *gateway, int64_t now, int *n);
    int (*queue_figures)(struct pt_store *st, const char *currency, int64_t *count,
                         int64_t *amount);
    int (*stats)(struct pt_store *st, int final_states, struct pt_store_stats *out);
    int (*event_insert)(struct pt_store *st, const char *type, int64_t charge_id,
                        const char *order_id, const char *payload, int64_t now, int64_t *seq);
    int (*audit)(struct pt_store *st, int64_t charge_id, const char *from, const char *to,
                 const char *cause, const char *actor, int refused, const char *detail,
                 int64_t now);
    int (*audit_first)(struct pt_store *st, int64_t charge_id, const char *to, const char *cause,
                       const char *actor, int64_t now);
    int (*count)(struct pt_store *st, const char *table, int64_t *count);
    int (*refund_insert)(struct pt_store *st, struct pt_refund *r, int64_t now);
    int (*refunds_due)(struct pt_store *st, int64_t now, int64_t after_id, int max,
                       struct pt_refund *rows, int *n);
    int (*refunds_next_due)(struct pt_store *st, int64_t *when);
    int (*refund_transition)(struct pt_store *st, int64_t id, unsigned from_mask, enum pt_state to,
                             const struct pt_charge_patch *patch, int64_t now);
    int (*refund_withdraw)(struct pt_store *st, int64_t id);
    int (*refund_audit)(struct pt_store *st, const struct pt_refund *r, const char *from,
                        const char *to, const char *cause, const char *actor, int refused,
                        const char *detail, int64_t now);
    int (*refund_event_insert)(struct pt_store *st, const char *type, const struct pt_refund *r,
                               const char *payload, int64_t now, int64_t *seq);
    int (*refund_stats)(struct pt_store *st, struct pt_refund_stats *out);
    /* What a close finds open (pt_store_z_open); NULL: the shared Z_OPEN,
     * unbound. */
    int (*z_open)(struct pt_store *st, int64_t open[4]);
    /* Retention (SPEC 19); NULL: PT_EUNSUPPORTED. */
    int (*archive_candidates)(struct pt_store *st, int64_t before, const char *bill_offsets,
                              int64_t after, int max, struct pt_archive_item *rows, int *n);
    int (*archive_copy)(struct pt_store *st, const char *path, const struct pt_archive_item *items,
                        int n, int *copied);
    int (*archive_forget)(struct pt_store *st, const struct pt_archive_item *items, int n,
                          int *moved);
    int (*archived_month)(struct pt_store *st, const char *kind, const char *ext_id,
                          char month[PT_ARCHIVE_MONTH_LEN]);
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
