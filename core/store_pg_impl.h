/*
 * store_pg_impl.h - what the PostgreSQL store's files share (private to
 * store_pg*.c): a connection, its parameters, and the helpers every one of
 * them runs statements with.
 *
 *   store_pg.c      the connection: reconnecting, the session, statements,
 *                   the lane's offline figures, open, schema, transactions;
 *                   the interface store_ops.c runs over
 *   store_pg_ops.c  the PostgreSQL store's own operations (keys, charges,
 *                   refunds, events, audit, the lanes' claims) and its table
 */
#ifndef PT_STORE_PG_IMPL_H
#define PT_STORE_PG_IMPL_H

#include <assert.h>
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
#include "store_pg_sql.h"

/* A statement's parameters, as text (bytea as binary). */
#define MAX_PARAMS 24

struct args {
    const char *v[MAX_PARAMS];
    int len[MAX_PARAMS];
    int fmt[MAX_PARAMS];
    char num[MAX_PARAMS][24];
    int n;
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
    struct args qa[1];      /* the parameters of the statement store_ops.c runs */
    char errmsg[256];
};

#define PG(st) ((struct pg_store *)(void *)(st))

/* Every request to the server and its answer: one round trip, counted. */
#define RT(st, call) ((st)->round_trips++, (call))

/* The PostgreSQL store's operations and its statement interface
 * (store_pg_ops.c, store_pg.c). */
extern const struct pt_store_ops pt__pg_ops;
extern const struct pt_store_sql pt__pg_sql;

/* store_pg.c: parameters, results, the connection, the lane's figures,
 * transactions. */
void pt__pg_a_int(struct args *a, int64_t x);
void pt__pg_a_text(struct args *a, const char *s);
void pt__pg_a_opt(struct args *a, const char *s);
void pt__pg_a_bytes(struct args *a, const void *p, size_t n);
/* A new charge's columns, as both of its INSERTs take them: order_id,
 * gateway, method, amount, currency, the state (with_state), offline,
 * subject, payment_code, payment_method, customer, metadata. */
void pt__pg_a_charge(struct args *a, const struct pt_charge *c, int with_state);
int pt__pg_xlate(struct pg_store *st, const PGresult *res);
int pt__pg_connected(struct pg_store *st);
int pt__pg_q(struct pg_store *st, int id, const struct args *a, PGresult **res);
int pt__pg_run(struct pg_store *st, int id, const struct args *a, int *changed);
int64_t pt__pg_col_int(const PGresult *r, int row, int col);
void pt__pg_col_text(const PGresult *r, int row, int col, char *dst, size_t cap);
int pt__pg_scalar(struct pg_store *st, int id, const struct args *a, int64_t *out);
int pt__pg_exec_sql(struct pg_store *st, const char *sql);
int pt__pg_queued_add(struct queued *q, const char *cur, int64_t count, int64_t amount);
void pt__pg_doubt_one(struct pg_store *st, struct lane_figures *f, const char *cur, int64_t amount);
int pt__pg_doubts_settle(struct pg_store *st, struct lane_figures *f);
void pt__pg_doubts_in(const struct lane_figures *f, const char *cur, int64_t *count,
                      int64_t *amount);
int pt__pg_lane_hold(struct pg_store *st);
void pt__pg_lane_release(struct pg_store *st);
const char *pt__pg_errmsg(struct pt_store *s);
int pt__pg_schema_version(struct pt_store *s, int *version);
int pt__pg_migrate_to(struct pt_store *s, int version);
void pt__pg_close(struct pt_store *s);
int pt__pg_pragma_int(struct pt_store *s, const char *name, int *value);
void pt__pg_set_event_hook(struct pt_store *s, void (*fn)(void *ctx), void *ctx);
int pt__pg_in_txn(const struct pt_store *s);
int pt__pg_begin(struct pt_store *s);
int pt__pg_commit(struct pt_store *s);
int pt__pg_rollback(struct pt_store *s);
void pt__pg_attach(struct pt_store *s, struct pt_store_writer *w);
void pt__pg_defer_commit(struct pt_store *s, struct pt_store_commit *ticket);
int pt__pg_commit_deferred(const struct pt_store *s);
int pt__pg_backup(struct pt_store *s, const char *dest);
void pt__pg_note_erased(struct pt_store *s);
int pt__pg_checkpoint_truncate(struct pt_store *s);
int pt__pg_writable(struct pt_store *s);

int pt__pg_charge_queue_guarded(struct pt_store *s, const struct pt_store_queued_charge *g,
                                int64_t now);

#endif
