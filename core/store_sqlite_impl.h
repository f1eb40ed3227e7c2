/*
 * store_sqlite_impl.h - what the SQLite store's files share (private to
 * store_sqlite*.c): a connection, the store, and the helpers every one of
 * them runs statements with.
 *
 *   store_sqlite.c         the connection: open, files, schema, statements,
 *                          health, backup; the interface store_ops.c runs over
 *   store_sqlite_writer.c  transactions, alone or through the process's
 *                          writer (group commit, docs/writer.md)
 *   store_sqlite_ops.c     the SQLite store's own operations (keys, charges,
 *                          refunds, events, the clock) and its table
 */
#ifndef PT_STORE_SQLITE_IMPL_H
#define PT_STORE_SQLITE_IMPL_H

#include "store_impl.h"
#include "store_rows.h"
#include "walvfs.h"
#include "err.h"
#include "log.h"
#include "migrations.h"
#include "pt_config.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "store_sqlite_sql.h"

#define PT_FROM_MASKS (1u << PT_STATE__COUNT)

/*
 * Which file a path led to when a connection opened it: a device and an
 * inode.  The connection's descriptor keeps the inode alive, so no other
 * file can get its number on that device while it is open: a path that
 * leads elsewhere, or nowhere, is a file that was removed or replaced.
 */
struct file_id {
    dev_t dev;
    ino_t ino;
    int known; /* 0: no such file at open (not checked) */
};

/* One SQLite connection with its prepared statements. */
struct conn {
    sqlite3 *db;
    sqlite3_stmt *stmt[S__COUNT];
    /* Transition statements, one per set of allowed source states, built
     * from the mask so each reads "... AND (state = 'UNKNOWN' OR ...)". */
    sqlite3_stmt *transition[PT_FROM_MASKS];
    sqlite3_stmt *refund_transition[PT_FROM_MASKS]; /* the same for refunds */
};

struct pt_store {
    struct pt_store_head head; /* first: store.c reads the operations there */
    struct conn own;
    /* The connection statements run on: own, or - during a write
     * transaction of a store attached to a writer - the writer's. */
    struct conn *c;
    struct pt_store_writer *writer; /* NULL: transactions on own */
    int in_txn;
    struct pt_store_commit *defer; /* the next commit only joins a batch */
    int deferred;                  /* the last commit did that */
    void (*event_hook)(void *ctx);
    void *event_hook_ctx;
    /* The row of the key this connection inserted last: completing it
     * (usually in the same transaction) needs no index search. */
    int64_t last_key_rowid;
    /* Every charge with a smaller id is final (see active_floor()). */
    int64_t active_floor;
    int64_t refund_floor;        /* the same for refunds (refund_floor()) */
    unsigned refund_floor_epoch; /* refund_withdrawals when it was read */
    int events_in_txn;           /* events inserted since BEGIN */
    int erased_in_txn;           /* a payment code erased since BEGIN */
    char path[PT_STORE_PATH_MAX];
    char dir[PT_STORE_PATH_MAX]; /* the directory it is in (free space) */
    /* The database and its WAL as this connection opened them (files_check). */
    struct file_id files[2];
    int wal_rescued;      /* what a removed WAL held is in the database file (wal_rescue) */
    int changes_at_begin; /* sqlite3_total_changes() at BEGIN */
    int keys_pending;     /* pending key locks taken since BEGIN, not yet written */
    unsigned txn_seq;     /* counts BEGINs: a pending lock belongs to one */
};

/*
 * The writer (see store.h and docs/writer.md).  One connection, `conn`, and
 * a turn to use it that threads hand to each other under mu.  A batch is
 * one SQLite transaction on it holding several requests, each in its own
 * SAVEPOINT; a request that finished its part waits, in `members`, for the
 * COMMIT that makes the batch durable.  That COMMIT is run by whoever holds
 * the turn when nobody waits for it any more (or the batch is full), or by
 * pt_store_writer_flush() for a deferred member.
 */
struct pt_store_writer {
    struct pt_store *conn;
    pthread_mutex_t mu;
    pthread_cond_t turn_cv; /* the turn is free */
    pthread_cond_t done_cv; /* a batch was settled */
    int busy;               /* a thread has the turn */
    int waiting;            /* threads waiting for the turn */
    int open;               /* a batch transaction is open on conn */
    int nmembers;
    struct pt_store_commit *members; /* the open batch's finished requests */
    int lost_rc;         /* the open batch was lost under this error (the turn's holder sets it) */
    int busy_timeout_ms; /* the connection's, against other processes */
    uint64_t batches;    /* batches committed (durable or not) */
};

/* The SQLite store's operations and its statement interface
 * (store_sqlite_ops.c, store_sqlite.c). */
extern const struct pt_store_ops pt__sqlite_ops;
extern const struct pt_store_sql pt__sqlite_sql;

/* Set when a commit erased a payment code: the next checkpoint wipes the
 * WAL's copy (pt_store_wipe_due). */
extern atomic_int pt__sq_wipe_due;

/* store_sqlite.c: the connection, its statements, its files, health and backup. */
void pt__sq_note_storage(int rc, const char *why);
int pt__sq_xlate(int rc);
sqlite3_stmt *pt__sq_stmt(struct pt_store *st, int id);
int pt__sq_run(struct pt_store *st, sqlite3_stmt *s);
void pt__sq_bind_text(sqlite3_stmt *s, int i, const char *v);
void pt__sq_copy_col(sqlite3_stmt *s, int i, char *dst, size_t cap);
const char *pt__sq_errmsg(struct pt_store *st);
int pt__sq_pragma_int(struct pt_store *st, const char *name, int *value);
int pt__sq_schema_version(struct pt_store *st, int *version);
int pt__sq_migrate_to(struct pt_store *st, int version);
void pt__sq_wal_rescue(struct pt_store *st);
int pt__sq_files_ok(const struct pt_store *st);
void pt__sq_note_erased(struct pt_store *st);
int pt__sq_checkpoint_now(struct pt_store *st);
void pt__sq_close(struct pt_store *st);
void pt__sq_set_event_hook(struct pt_store *st, void (*fn)(void *ctx), void *ctx);
int pt__sq_backup(struct pt_store *st, const char *dest);
int pt__sq_files_intact(struct pt_store *st);
int pt__sq_health(struct pt_store *st, struct pt_store_health *out);
int pt__sq_writable(struct pt_store *st);

/* store_sqlite_writer.c: transactions. */
int pt__sq_in_txn(const struct pt_store *st);

/* Retention (store_sqlite_archive.c). */
int pt__sq_archive_candidates(struct pt_store *st, int64_t before, const char *bill_offsets,
                              int64_t after, int max, struct pt_archive_item *rows, int *n);
int pt__sq_archive_copy(struct pt_store *st, const char *path, const struct pt_archive_item *items,
                        int n, int *copied);
int pt__sq_archive_forget(struct pt_store *st, const struct pt_archive_item *items, int n,
                          int *moved);
int pt__sq_archived_month(struct pt_store *st, const char *kind, const char *ext_id,
                          char month[PT_ARCHIVE_MONTH_LEN]);
int pt__sq_begin(struct pt_store *st);
int pt__sq_commit(struct pt_store *st);
int pt__sq_rollback(struct pt_store *st);
int pt__sq_checkpoint_truncate(struct pt_store *st);
void pt__sq_attach(struct pt_store *st, struct pt_store_writer *w);
void pt__sq_defer_commit(struct pt_store *st, struct pt_store_commit *ticket);
int pt__sq_commit_deferred(const struct pt_store *st);

#endif
