/*
 * store.h - the persistence layer: the only part of payterm that speaks SQL.
 *
 * Everything else asks the store narrow questions in the domain's words
 * (take an idempotency lock, insert a charge, apply a transition).  Two
 * backends implement it (store_impl.h): store_sqlite.c, one file per lane
 * (the default, and the only one on a board), and store_pg.c, one
 * PostgreSQL database shared by a shop's lanes (SPEC section 16; built
 * with -DPT_WITH_PG=ON).  What only SQLite has (the writer and its group
 * commit, backups, the WAL wipe, PRAGMAs) answers PT_EUNSUPPORTED or does
 * nothing on PostgreSQL, as each function says.
 *
 * One struct pt_store is one database connection and must be used by one
 * thread at a time; each thread of the daemon opens its own, and all of
 * them write through the daemon's one writer (pt_store_attach).  Write
 * transactions are BEGIN IMMEDIATE, so two writers never deadlock on a lock
 * upgrade; readers never block writers (WAL).
 *
 * Every function returns PT_OK or a negative pt_err; on a storage failure
 * pt_store_errmsg() tells what SQLite said.  Times are Unix milliseconds.
 */
#ifndef PT_STORE_H
#define PT_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "charge.h"
#include "refund.h"

struct pt_store;

/* Longest database path (bytes, with the NUL). */
#define PT_STORE_PATH_MAX 512

/* Page size of a database payterm creates (see store_sqlite.c for why). */
#define PT_STORE_PAGE_SIZE 1024
/* Page cache of one SQLite connection, KiB (see store_sqlite.c for why). */
#define PT_STORE_CACHE_KIB 256

enum pt_store_backend { PT_STORE_SQLITE = 0, PT_STORE_POSTGRESQL = 1 };

struct pt_store_options {
    enum pt_store_backend backend; /* 0 = SQLite (path); PostgreSQL: dsn */
    const char *path;              /* database file; created if missing */
    int synchronous_normal;        /* 0 = synchronous=FULL (default), 1 = NORMAL */
    int synchronous_off;           /* benchmarks only: no sync at all (what the CPU costs) */
    int busy_timeout_ms;           /* 0 = default (5000) */
    int max_page_count;            /* 0 = unlimited; tests use it to fake a full disk */
    int readonly;                  /* open an existing file read-only, without migrating */
    int existing;                  /* read-write, but the file must exist and is not migrated */
    int page_size;                 /* for a new file; 0 = PT_STORE_PAGE_SIZE */
    /* 1 = SQLite's own VFS instead of walvfs.c (one pwrite per WAL commit):
     * the same bytes in the same order, only more system calls.  For a
     * board whose file system misbehaves with it, and for make crash, which
     * runs its power cuts both ways (docs/crash.md). */
    int no_wal_vfs;
    /* PostgreSQL (SPEC section 16): a libpq connection URI or key=value
     * string, the file holding the password (read at open, wiped after;
     * NULL: none, or libpq's own PGPASSFILE), and this daemon's lane name,
     * recorded in the audit's actor. */
    const char *dsn;
    const char *password_file;
    const char *lane_id;
    /* PostgreSQL: a send another lane armed is left to it this long after
     * it was armed (idempotency.lock_timeout_s; 0 = 60 s). */
    int64_t claim_timeout_ms;
    /* PostgreSQL: a server that cannot be reached at open is no error: the
     * store opens unconnected and connects - session, schema version,
     * migrations - at the first use that finds the server; until then
     * every operation is PT_EIO.  For a lane with store.fallback "local",
     * which must start (a reboot during the outage) and queue on its own. */
    int connect_later;
};

/* Requests st sent to its database server so far (0 for SQLite, which has
 * none): what the PostgreSQL store's one-round-trip paths are held to. */
uint64_t pt_store_round_trips(const struct pt_store *st);

/* "sqlite" or "postgresql": the backend behind st (for messages; callers
 * ask pt_store_caps() what it does, never branch on its name). */
const char *pt_store_backend(const struct pt_store *st);

/*
 * What a backend does, asked instead of its name (curl's Curl_ssl
 * "supports" bits are the model).  A new backend sets the bits that hold
 * for it; the daemon and the commands follow them.
 */
enum {
    /* The database is one file in data_dir, this lane's alone: the daemon
     * refuses to start on a missing one where a database was (data_dir's
     * marker, SPEC 18), and init --new-database applies to it. */
    PT_STORE_CAP_DATADIR_FILE = 1u << 0,
    /* Writes of every thread go through one writer thread that commits
     * them in groups (pt_store_writer_new). */
    PT_STORE_CAP_GROUP_COMMIT = 1u << 1,
    /* A server the shop's lanes share: it can be out of reach (a lane with
     * store.fallback "local" queues on its own file meanwhile), and other
     * lanes' events arrive by pt_store_wait_events(). */
    PT_STORE_CAP_SHARED = 1u << 2,
};
unsigned pt_store_caps(const struct pt_store *st);
/* The same bits before a store is opened (the options name the backend). */
unsigned pt_store_caps_of(const struct pt_store_options *opt);

/* The process-wide switch behind storage.wal_vfs (default on): off, every
 * store opened afterwards uses SQLite's own VFS, as no_wal_vfs does. */
void pt_store_set_wal_vfs(int on);

/*
 * Opens (creating if needed) the database and brings its schema up to date;
 * with readonly or existing set, opens an existing file at the version it
 * has (the caller checks pt_store_schema_version()).  A database whose
 * user_version is newer than this binary is refused with PT_ETOONEW; one at
 * the latest version that lacks a table, index, trigger or column the
 * migrations create, with PT_ECORRUPT (the message lists what is missing).  On success *out is a
 * new store the caller closes with pt_store_close(); on failure *out is NULL and, when errbuf is
 * not NULL, a sentence naming the file and the cause is written into it.
 */
int pt_store_open(const struct pt_store_options *opt, struct pt_store **out, char *errbuf,
                  size_t errlen);
/* Closes the connection; accepts NULL. */
void pt_store_close(struct pt_store *st);

/* The last SQLite message on this connection (for error reports). */
const char *pt_store_errmsg(struct pt_store *st);

/* Schema version (PRAGMA user_version) and the version this binary writes. */
int pt_store_schema_version(struct pt_store *st, int *version);
int pt_store_schema_latest(void);
/* The version st's backend writes (SQLite: pt_store_schema_latest();
 * PostgreSQL: the last of sql/pg/). */
int pt_store_schema_latest_of(const struct pt_store *st);

/*
 * Applies migrations up to `version` (tests build older databases with it).
 * Each migration runs in its own transaction together with its user_version
 * bump, so a crash leaves the database at a whole version.
 */
int pt_store_migrate_to(struct pt_store *st, int version);

/* Reads an integer PRAGMA of this connection ("synchronous", "foreign_keys"). */
int pt_store_pragma_int(struct pt_store *st, const char *name, int *value);

/*
 * Called after a COMMIT that made fulfilment events durable (so the HTTP
 * long-poll can wake its waiters only when there is something to read).
 * NULL removes the hook.
 */
void pt_store_set_event_hook(struct pt_store *st, void (*fn)(void *ctx), void *ctx);

/*
 * Write transaction: BEGIN IMMEDIATE / COMMIT / ROLLBACK on this store's
 * own connection - or, for a store attached to a writer, on the writer's
 * (below).  Transactions do not nest.  pt_store_commit() returns when the
 * transaction is durable (or failed: then nothing of it is kept), unless
 * the commit was deferred.
 */
int pt_store_begin(struct pt_store *st);
int pt_store_commit(struct pt_store *st);
int pt_store_rollback(struct pt_store *st);
/* True between pt_store_begin() and its commit or rollback (the engine's
 * asserts: a state, its audit and its event are written in one). */
int pt_store_in_txn(const struct pt_store *st);

/*
 * One writer per process, and group commit (docs/writer.md).
 *
 * A writer owns the process's one write connection.  A store attached to
 * it runs every write transaction there: pt_store_begin() waits for the
 * writer's turn (a condition variable: never SQLite's busy handler, which
 * sleeps 1, 2, 5 ... 100 ms instead of being woken) and opens a SAVEPOINT
 * in the batch transaction; reads outside a transaction stay on the
 * store's own connection and run in parallel (WAL).  A request that
 * commits leaves its work in the batch and waits; whoever finishes while
 * nobody else waits for the turn (or when 64 requests are in) commits the
 * batch - one sync for all of it - and every member returns that result.
 * A request that fails rolls back to its own savepoint: the others keep
 * theirs; pt_store_rollback() then still waits for the batch when it held
 * other requests' work (this request may have read it) and returns its
 * result.  Rows the batch's earlier requests wrote are seen by the later
 * ones (one transaction), so the offline limits and unique ids hold across
 * a batch exactly as across separate transactions.
 *
 * Stores of other processes (the CLI) still meet this one at SQLite's lock.
 */
struct pt_store_writer;

/* One request's place in a batch.  Filled by the store; for a deferred
 * commit it is the caller's and must live until the batch is settled. */
struct pt_store_commit {
    struct pt_store_commit *next;
    int done; /* settled (read it through pt_store_writer_flush) */
    int rc;   /* the batch's COMMIT: PT_OK when durable */
    int events, erased, changed;
    void (*hook)(void *ctx);
    void *hook_ctx;
};

/* Opens the writer's connection (options as pt_store_open; the database
 * must exist or is created and migrated).  Free with ..._destroy, after
 * every attached store is closed or detached; an open batch is committed. */
int pt_store_writer_new(const struct pt_store_options *opt, struct pt_store_writer **out,
                        char *errbuf, size_t errlen);
void pt_store_writer_destroy(struct pt_store_writer *w);

/* From now on st's write transactions go through w (NULL: its own again). */
void pt_store_attach(struct pt_store *st, struct pt_store_writer *w);

/*
 * For an event loop that must not wait for a sync: the next
 * pt_store_commit() on st (attached) places the transaction in the open
 * batch and returns PT_OK without waiting; *ticket tells when the batch is
 * settled.  pt_store_commit_deferred() says whether the last commit did
 * that (else it was durable on return, or no commit ran); NULL disarms.
 * The answer built on a deferred commit must not leave before
 * pt_store_writer_flush(w, ticket) - which commits the batch if nobody has
 * yet - returns PT_OK.
 */
void pt_store_defer_commit(struct pt_store *st, struct pt_store_commit *ticket);
int pt_store_commit_deferred(const struct pt_store *st);
int pt_store_writer_flush(struct pt_store_writer *w, struct pt_store_commit *ticket);

/* Batches committed so far (tests: requests shared one). */
uint64_t pt_store_writer_batches(struct pt_store_writer *w);

/* Online backup of the whole database into a new file at dest (created
 * 0600; an existing file is overwritten). */
int pt_store_backup(struct pt_store *st, const char *dest);

/*
 * Payment codes (SPEC section 3).  A transition into a final state erases
 * the charge's payment code in the same UPDATE and the database zeroes the
 * bytes (secure_delete), but earlier versions of the charge's page are still
 * in the WAL: pt_store_note_erased() records that in the transaction (the
 * charge state machine calls it; it counts once that commit is durable),
 * pt_store_wipe_due() tells whether a truncating checkpoint is owed, and
 * pt_store_checkpoint_truncate() copies the WAL into the database and
 * truncates it to zero bytes (PT_EBUSY when a reader held an old snapshot;
 * still due then).
 */
void pt_store_note_erased(struct pt_store *st);
int pt_store_wipe_due(void);
int pt_store_checkpoint_truncate(struct pt_store *st);

/*
 * True when a charge's write would be stored right now (for /healthz): false
 * while the file system is read-only or has less than 256 KiB free, and
 * after a write of any connection failed with a full disk or an I/O error
 * until a write succeeds again.  While it is false, each call tries one
 * small real write (page 1 rewritten as it is: one WAL frame, the database
 * does not grow), so it turns true as soon as the disk recovers; while all
 * is well it writes nothing.  An I/O error is seen at the first write that
 * meets it.
 */
int pt_store_writable(struct pt_store *st);

/*
 * What /v1/status and /metrics show of the storage (SPEC 5, 15): writable
 * as pt_store_writable() says it (and at the same cost), the bytes free for
 * payterm's writes on the database's file system (root may use the blocks
 * kept for root; -1 when not known: a PostgreSQL server's disk is not this
 * device's), and, when not writable, why in a few words ("disk full",
 * "database file was removed: PATH").
 */
struct pt_store_health {
    int writable;
    int64_t free_bytes;
    char reason[PT_STORE_PATH_MAX + 64];
};
int pt_store_health(struct pt_store *st, struct pt_store_health *out);

/*
 * SPEC 18: PT_OK while the database st writes to, and its WAL, are still
 * the files at their paths; PT_EGONE once one was removed or another file
 * moved over it (the log names it, once).  What is written into a file no
 * path leads to is gone at the next restart, so every commit asks this
 * before it runs and again before it is answered, and a stored answer is
 * not replayed from such a file.  Two stat() calls, no database I/O.  A
 * store attached to a writer asks about the writer's files.  PostgreSQL:
 * always PT_OK.
 */
int pt_store_files_intact(struct pt_store *st);

/* ---- idempotency keys (used by idem.c) -------------------------------- */

struct pt_key_row {
    unsigned char request_hash[32];
    int64_t locked_at;    /* 0 when not locked */
    int64_t locked_by;    /* instance token of the lock holder */
    int64_t completed_at; /* 0 while the first request is running */
    int response_status;
    char *response_body; /* malloc'd, NUL-terminated; caller frees */
    size_t response_len;
    char order_id[PT_ORDER_ID_MAX];
    int64_t expires_at;
};

/* Frees the heap members of a key row; accepts NULL. */
void pt_key_row_free(struct pt_key_row *row);

/* Reads (scope, key).  PT_OK, PT_ENOTFOUND, or a storage error. */
int pt_store_key_get(struct pt_store *st, const char *scope, const char *key,
                     struct pt_key_row *out);

/*
 * INSERT OR IGNORE of a new locked record.  PT_OK when this call inserted it
 * (the caller holds the lock), PT_EEXIST when a record was already there.
 */
int pt_store_key_insert(struct pt_store *st, const char *scope, const char *key,
                        const unsigned char hash[32], int64_t instance, int64_t now,
                        int64_t expires_at);

/*
 * Takes over a stale lock: succeeds (PT_OK) only if the record is still
 * uncompleted and still held with exactly `old_locked_at`/`old_locked_by`,
 * so two recoverers cannot both win.  PT_EEXIST when someone else changed it.
 */
int pt_store_key_relock(struct pt_store *st, const char *scope, const char *key,
                        int64_t old_locked_at, int64_t old_locked_by, int64_t instance,
                        int64_t now);

/*
 * The lock a request holds on a key: when it was taken and by which process
 * instance.  Completing, linking or releasing a key is conditional on it, so
 * a request whose lock was recovered by another one (after lock_timeout_s)
 * cannot overwrite the recoverer's stored answer: one key, one answer.
 */
struct pt_key_lock {
    int64_t at;
    int64_t by;
    /* 1: the key was found free inside this write transaction and no row
     * is written yet (pt_store_key_take_later).  The row is written once,
     * by whichever comes first of pt_store_key_complete (the completed
     * record), pt_store_key_set_order (the held lock, before a commit that
     * keeps it) or pt_store_key_delete (nothing to write).  A commit with a
     * key still pending is refused and rolled back (PT_ESTORAGE): the lock
     * would be lost.  Used after its transaction ended, a pending lock is
     * PT_ESTATE: it was never written, so it is not held. */
    int pending;
    unsigned txn; /* pending: the transaction it belongs to */
    unsigned char hash[32];
    int64_t expires_at;
    /* The order its completed record names (pt_store_key_name_order). */
    char order_id[PT_ORDER_ID_MAX];
};

/*
 * Inside a write transaction: PT_OK when no record of (scope, key) exists,
 * with *lock a pending lock (see above) that this transaction holds until
 * it ends - nobody else writes meanwhile.  PT_EEXIST when a record exists
 * (expired or not: the caller takes the pt_store_key_insert path).
 * One indexed read instead of a row written now and rewritten by the
 * answer: a new key's record is written once.
 */
int pt_store_key_take_later(struct pt_store *st, const char *scope, const char *key,
                            const unsigned char hash[32], int64_t instance, int64_t now,
                            int64_t expires_at, struct pt_key_lock *lock);

/* Records which order the key created (used to recover a stale lock).
 * PT_ESTATE when the caller no longer holds the lock. */
int pt_store_key_set_order(struct pt_store *st, const char *scope, const char *key,
                           struct pt_key_lock *lock, const char *order_id);

/*
 * The order the lock's completed record is to name: written with the
 * answer by pt_store_key_complete, in the same statement (SQLite; the
 * PostgreSQL store links keys by pt_store_key_set_order only).  The queued
 * charge's key needs no link for lock recovery (both commit together), but
 * a lane's local store (store.fallback "local") moves each key with the
 * charge it made (pt_store_key_of_order).
 */
void pt_store_key_name_order(struct pt_key_lock *lock, const char *order_id);

/* Scope and key as stored: scope 1-128 bytes, key 1-255 (idem.h). */
enum { PT_KEY_SCOPE_MAX = 129, PT_KEY_NAME_MAX = 256 };

/*
 * The completed record of the key whose request created order_id, with its
 * scope and name, so it can be moved with the charge (fallback.c).
 * PT_ENOTFOUND when no completed record names the order.  Scans the keys:
 * meant for a lane's local store, which holds what an outage left.
 */
int pt_store_key_of_order(struct pt_store *st, const char *order_id, char scope[PT_KEY_SCOPE_MAX],
                          char key[PT_KEY_NAME_MAX], struct pt_key_row *out);

/* Stores the response and releases the lock.  PT_ESTATE when the caller no
 * longer holds it (nothing is changed then). */
int pt_store_key_complete(struct pt_store *st, const char *scope, const char *key,
                          struct pt_key_lock *lock, int status, const char *body, size_t len,
                          int64_t now);

/*
 * The stored answer of every completed record of `scope` that answered
 * `from_status` becomes (status, body): a cancel answered 202 while its
 * charge was on its way is answered by what became of it (SPEC 18).
 * *n: how many (may be NULL).
 */
int pt_store_key_reanswer(struct pt_store *st, const char *scope, int from_status, int status,
                          const char *body, size_t len, int *n);

/* Deletes the record held by lock (transient failure: the client may retry
 * the key).  PT_ESTATE when the caller no longer holds it. */
int pt_store_key_delete(struct pt_store *st, const char *scope, const char *key,
                        struct pt_key_lock *lock);

/* Deletes one expired record (so an expired key can be taken anew). */
int pt_store_key_delete_expired(struct pt_store *st, const char *scope, const char *key,
                                int64_t now);

/* Deletes completed records whose expires_at <= now; *count = rows swept.
 * Uncompleted (locked) records are left for lock recovery. */
int pt_store_key_sweep(struct pt_store *st, int64_t now, int *count);

/*
 * The guarded new charge queued offline in one statement, where the
 * backend has one (PostgreSQL: one round trip, one durable commit, SPEC
 * 16): the charge INIT with its first audit row and its key completed with
 * the answer, all or nothing, only if the key was never used and the queue
 * has room.  The answer is body_head, the charge's id, body_tail.
 * PT_OK: done, c->id set.  PT_EAGAIN: not the plain case (the key or the
 * order exists, a race with another lane, the offline limits): nothing was
 * written, the caller takes the usual path, which answers every one of
 * those.  PT_EUNSUPPORTED: the backend has no such statement (SQLite, whose
 * one transaction on the one writer is as cheap).
 */
struct pt_store_queued_charge {
    const char *scope, *key;
    const unsigned char *hash; /* 32 bytes */
    struct pt_charge *c;       /* INIT, next_attempt_at set */
    const char *body_head, *body_tail;
    int64_t expires_at;
    int64_t max_count; /* offline.max_count */
    int64_t max_total; /* offline.limits.<currency>.max_total */
    const char *actor; /* of the audit row */
};
int pt_store_charge_queue_guarded(struct pt_store *st, const struct pt_store_queued_charge *q,
                                  int64_t now);
/* Whether st's backend has that statement (nothing else need be prepared). */
int pt_store_has_queue_guarded(const struct pt_store *st);

/* ---- charges ---------------------------------------------------------- */

/*
 * Inserts c as a new charge in state c->state and sets c->id.  PT_EEXIST
 * when order_id already exists (data-layer uniqueness).
 */
int pt_store_charge_insert(struct pt_store *st, struct pt_charge *c, int64_t now);

/* Reads a charge by order id.  PT_OK or PT_ENOTFOUND. */
int pt_store_charge_get(struct pt_store *st, const char *order_id, struct pt_charge *out);

/* Reads a charge by id.  PT_OK or PT_ENOTFOUND. */
int pt_store_charge_get_by_id(struct pt_store *st, int64_t id, struct pt_charge *out);

/*
 * Columns a transition may set besides the state.  NULL pointers and -1
 * times leave a column as it is; "" clears a text column.
 */
struct pt_charge_patch {
    const char *gateway_trade_no;
    const char *action_url;
    const char *error_code;
    const char *error_message;
    int attempts_add;        /* added to attempts */
    int64_t next_attempt_at; /* -1 = keep */
    int64_t first_sent_at;   /* -1 = keep; only set while still unset */
};

/* A patch that changes nothing (initialise with this, then set fields). */
#define PT_CHARGE_PATCH_NONE                                                                       \
    {                                                                                              \
        NULL, NULL, NULL, NULL, 0, -1, -1                                                          \
    }

/*
 * The conditional update at the heart of the state machine:
 *   UPDATE charges SET state = to, ...
 *    WHERE id = ? AND (state = <a state of from_mask> OR state = <another> ...)
 * PT_OK when the row changed, PT_ESTATE when it was not in an allowed state
 * (nothing is changed then).  from_mask is a set of (1 << pt_state) bits.
 */
int pt_store_charge_transition(struct pt_store *st, int64_t id, unsigned from_mask,
                               enum pt_state to, const struct pt_charge_patch *patch, int64_t now);

/*
 * Records a client's cancel of a charge in one of the states of from_mask
 * (SPEC 18): cancel_requested set, next_attempt_at moved to `due` so the
 * sync engine carries it out then (due < 0: left as it is - a charge being
 * sent keeps the window that keeps others from picking it up).  PT_OK when it changed the row;
 * PT_ESTATE when the charge is in another state or its cancel was
 * requested already (nothing changed).  From then on the charge is never
 * moved to PROCESSING (pt_store_charge_transition answers PT_ESTATE).
 */
int pt_store_charge_request_cancel(struct pt_store *st, int64_t id, unsigned from_mask, int64_t due,
                                   int64_t now);

/* An INIT charge, sent online and provably not sent, is accepted into the
 * offline queue (SPEC 18): from now on it counts in the offline limits.
 * PT_ESTATE when it is not INIT. */
int pt_store_charge_accept_offline(struct pt_store *st, const struct pt_charge *c, int64_t now);

/* Applies a patch without changing the state (backoff, attempts). */
int pt_store_charge_patch(struct pt_store *st, int64_t id, const struct pt_charge_patch *patch,
                          int64_t now);

/* Sets or clears the review flag.  PT_OK when it changed, PT_ESTATE when the
 * flag already had that value.  reason may be NULL when clearing. */
int pt_store_charge_set_review(struct pt_store *st, int64_t id, int review, const char *reason,
                               int64_t now);

/*
 * Lists charges with id > after_id in id order, optionally only in one
 * state (state < 0 = any).  Fills up to max rows; *n = rows filled;
 * *more = 1 when further rows exist.
 */
int pt_store_charges_list(struct pt_store *st, int state, int64_t after_id, int max,
                          struct pt_charge *rows, int *n, int *more);
/* The same for the charges under review (any state). */
int pt_store_charges_list_review(struct pt_store *st, int64_t after_id, int max,
                                 struct pt_charge *rows, int *n, int *more);

/* Charges the sync engine should look at: not final, next_attempt_at <= now,
 * id > after_id, oldest first (by id). */
int pt_store_charges_due(struct pt_store *st, int64_t now, int64_t after_id, int max,
                         struct pt_charge *rows, int *n);

/*
 * Inside a write transaction, before a run of queued charges is armed:
 * taken[i] = 1 for each ids[i] this transaction may arm now.  PostgreSQL
 * locks those rows FOR UPDATE SKIP LOCKED, so a charge another lane is
 * arming right now is passed over at once instead of waited for (and then
 * found PROCESSING); SQLite, one writer, takes all.
 */
int pt_store_charges_claim(struct pt_store *st, const int64_t *ids, int n, unsigned char *taken);
/* The same for a run of queued refunds. */
int pt_store_refunds_claim(struct pt_store *st, const int64_t *ids, int n, unsigned char *taken);

/* The earliest next_attempt_at among non-final charges; 0 when none. */
int pt_store_charges_next_due(struct pt_store *st, int64_t *when);
/*
 * The queue by age (SPEC 18, offline.max_age_s), read without walking it:
 * charges waiting in the queue (INIT) for gateway and method, created before
 * created_before (lane time), id > after_id, in id order - the ones that
 * have expired.  Fills up to max rows; *n = rows filled.
 */
int pt_store_charges_queued_before(struct pt_store *st, const char *gateway, const char *method,
                                   int64_t created_before, int64_t after_id, int max,
                                   struct pt_charge *rows, int *n);
/* The created_at of the oldest charge waiting in the queue for gateway and
 * method (what expires first); 0 when none waits. */
int pt_store_charges_oldest_queued(struct pt_store *st, const char *gateway, const char *method,
                                   int64_t *created_at);
/* At a daemon's start, when nothing can be on its way (the data directory's
 * lock is held): every PROCESSING charge and refund is due now - its send
 * was interrupted, and the window that kept it from being picked up while
 * its run was out (up to 16 sends) means nothing any more.  *n: how many. */
int pt_store_sends_interrupted(struct pt_store *st, int64_t now, int *n);

/* A gateway found reachable again (SPEC 18): its queued charges and
 * refunds (INIT) waiting out a "not sent" are due now, in a transaction of
 * its own.  *n: how many. */
int pt_store_gateway_back(struct pt_store *st, const char *gateway, int64_t now, int *n);

/* The figures the offline limits bound (SPEC 18): how many charges were
 * accepted offline and are not final (INIT, PROCESSING, PENDING, UNKNOWN:
 * a drain's marked charges and those whose answer was lost included), and
 * their amount in one currency.  SQLite: read from the
 * rows the triggers of sql/002_offline_queue.sql keep, whatever the queue's
 * length.  PostgreSQL: the lane's own queue (bounded by its
 * offline.max_count), counted through an index (sql/pg/004); in a
 * transaction, under the lane's lock, so that two of its requests cannot
 * both take the last place. */
int pt_store_queue_figures(struct pt_store *st, const char *currency, int64_t *count,
                           int64_t *amount);

#define PT_STATS_MAX_CURRENCIES 16
struct pt_store_stats {
    int64_t by_state[PT_STATE__COUNT];
    int64_t review;
    int64_t queue_oldest_created_at; /* 0 when the queue is empty */
    int ncur;
    struct {
        char currency[4];
        int64_t count;
        int64_t amount;
    } queue[PT_STATS_MAX_CURRENCIES];
};

/*
 * Counts for /v1/status and /metrics.  Without final_states, by_state
 * counts only the states in progress (the final ones are 0): read from the
 * active floor, so it costs the charges in progress, not the table - a
 * status page polled during a drain must not scan 100 000 rows each time.
 * With final_states, every state is counted (a scan of all charges).
 */
int pt_store_stats(struct pt_store *st, int final_states, struct pt_store_stats *out);

/* ---- fulfilment events ---------------------------------------------------- */

/*
 * Appends an event; *seq receives its number.  PT_EEXIST when the charge
 * already has an event of this type (only charge.review may repeat).
 */
int pt_store_event_insert(struct pt_store *st, const char *type, int64_t charge_id,
                          const char *order_id, const char *payload, int64_t now, int64_t *seq);

struct pt_event_row {
    int64_t seq;
    char type[24];
    char order_id[PT_ORDER_ID_MAX];
    char *payload; /* malloc'd charge JSON; pt_event_rows_free */
    int64_t created_at;
};

/* Events with seq > after, in seq order, up to max. */
int pt_store_events_list(struct pt_store *st, int64_t after, int max, struct pt_event_row *rows,
                         int *n);
void pt_event_rows_free(struct pt_event_row *rows, int n);

/* Highest seq so far (0 when none). */
int pt_store_events_last_seq(struct pt_store *st, int64_t *seq);

/*
 * The shop's one feed across lanes (PostgreSQL, SPEC 16): LISTENs on this
 * connection for the events any lane commits (NOTIFY payterm_events) and
 * waits up to timeout_ms for one.  1 when one came, 0 on timeout, PT_EIO
 * when the server went away (open a new store), PT_EUNSUPPORTED on SQLite
 * (one lane: its own commits wake its long-polls).  The connection is for
 * this alone from then on.
 */
int pt_store_wait_events(struct pt_store *st, int timeout_ms);

/* ---- audit ----------------------------------------------------------------- */

/* Appends one audit row for charge_id.  from/to may be NULL. */
int pt_store_audit(struct pt_store *st, int64_t charge_id, const char *from, const char *to,
                   const char *cause, const char *actor, int refused, const char *detail,
                   int64_t now);

/* The first audit row of a charge just inserted (seq 1, no lookup). */
int pt_store_audit_first(struct pt_store *st, int64_t charge_id, const char *to, const char *cause,
                         const char *actor, int64_t now);

struct pt_audit_row {
    int64_t seq;
    char from_state[16];
    char to_state[16];
    char cause[64];
    char actor[80];
    int refused;
    char detail[512];
    int64_t created_at;
    char refund_id[PT_REFUND_ID_MAX]; /* "" for the charge's own rows */
};

/* A charge's audit trail in order, up to max rows. */
int pt_store_audit_list(struct pt_store *st, int64_t charge_id, int max, struct pt_audit_row *rows,
                        int *n);

/* ---- notifications ---------------------------------------------------------- */

/*
 * Records a notification as seen.  PT_OK when it is new, PT_EEXIST for a
 * duplicate (already recorded: do not apply it again).
 */
int pt_store_notification_insert(struct pt_store *st, const char *gateway, const char *dedup_id,
                                 const char *order_id, const char *status, const char *outcome,
                                 int64_t now);

/* Number of rows in a table the store knows ("charges", "charge_events",
 * "idempotency_keys", "events", "notifications"); for tests and status. */
int pt_store_count(struct pt_store *st, const char *table, int64_t *count);

/* ---- refunds (SPEC section 5a) --------------------------------------------- */

/*
 * Inserts r (its state as given, normally INIT) for charge r->charge_id.
 * The data layer refuses what the intake checks first: PT_EEXIST when the
 * refund_id exists, PT_ERANGE when the refunds of the charge that are not
 * FAILED would exceed its amount, PT_ESTATE when the charge is not SUCCESS.
 */
int pt_store_refund_insert(struct pt_store *st, struct pt_refund *r, int64_t now);
/* By refund_id / by row id: PT_OK, PT_ENOTFOUND. */
int pt_store_refund_get(struct pt_store *st, const char *refund_id, struct pt_refund *out);
int pt_store_refund_get_by_id(struct pt_store *st, int64_t id, struct pt_refund *out);
/* Refunds with id > after_id in id order: of one charge (charge_id > 0), or
 * all of them optionally in one state (state < 0 = any). */
int pt_store_refunds_list(struct pt_store *st, int64_t charge_id, int state, int64_t after_id,
                          int max, struct pt_refund *rows, int *n, int *more);
/* Non-final refunds due at now, id order from after_id. */
int pt_store_refunds_due(struct pt_store *st, int64_t now, int64_t after_id, int max,
                         struct pt_refund *rows, int *n);
/* Earliest next_attempt_at of a non-final refund; 0 when there is none. */
int pt_store_refunds_next_due(struct pt_store *st, int64_t *when);
/* What may still be refunded of a charge: its amount minus its refunds that
 * are not FAILED.  PT_ENOTFOUND for an unknown charge. */
int pt_store_refund_left(struct pt_store *st, int64_t charge_id, int64_t *left);
/* The conditional UPDATE of a refund (as pt_store_charge_transition; the
 * patch's gateway_trade_no is the gateway's refund number). */
int pt_store_refund_transition(struct pt_store *st, int64_t id, unsigned from_mask,
                               enum pt_state to, const struct pt_charge_patch *patch, int64_t now);
int pt_store_refund_patch(struct pt_store *st, int64_t id, const struct pt_charge_patch *patch,
                          int64_t now);
int pt_store_refund_set_review(struct pt_store *st, int64_t id, int review, const char *reason,
                               int64_t now);
/* Deletes an INIT refund that provably never left the device (and may not
 * wait): its refund_id is free again.  PT_ESTATE when it is not INIT. */
int pt_store_refund_withdraw(struct pt_store *st, int64_t id);
/* An audit row in the refund's charge's trail, naming the refund. */
int pt_store_refund_audit(struct pt_store *st, const struct pt_refund *r, const char *from,
                          const char *to, const char *cause, const char *actor, int refused,
                          const char *detail, int64_t now);
/* refund.succeeded / refund.failed; PT_EEXIST when the refund has its
 * event already (one per refund). */
int pt_store_refund_event_insert(struct pt_store *st, const char *type, const struct pt_refund *r,
                                 const char *payload, int64_t now, int64_t *seq);

struct pt_refund_stats {
    int64_t by_state[PT_STATE__COUNT]; /* non-final states only */
    int64_t review;
};
int pt_store_refund_stats(struct pt_store *st, struct pt_refund_stats *out);

/* ---- X and Z reports (SPEC 19, core/report.c) ------------------------------ */

/*
 * A closed day is a Z report: a number (1, 2, ...), and every final charge
 * and refund of the lane that had none gets it, in the close's one write
 * transaction (a row's z is written once: the store refuses to change it).
 * On PostgreSQL each lane has its own numbers, rows and chain.
 */

/* One line of a report: what a gateway, method and currency came to. */
struct pt_report_line {
    char gateway[16];
    char method[16];
    char currency[4];
    int64_t charges, amount;   /* the SUCCESS charges */
    int64_t refunds, refunded; /* the SUCCESS refunds (of charges of that line) */
};

/* The lane's last Z report: its number, its end (to) and its hash.
 * PT_ENOTFOUND before the first close. */
int pt_store_z_last(struct pt_store *st, int64_t *z, int64_t *to, char hash[65]);
/* Takes the lane's close lock until the transaction ends (PostgreSQL: two
 * closes of one lane run one after the other; SQLite's write transaction
 * already is that).  Inside a write transaction. */
int pt_store_z_lock(struct pt_store *st);
/* Puts every final charge and refund of the lane that is in no Z report
 * into report z; *charges and *refunds (may be NULL) count the rows it
 * changed.  Inside a write transaction.  PostgreSQL stamps them here; on
 * SQLite a row already took the open report's number in the transaction
 * that made it final (sql/015), so this writes nothing and counts 0. */
int pt_store_z_mark(struct pt_store *st, int64_t z, int *charges, int *refunds);
/*
 * The totals of report z, or (z = 0) of the final rows not yet in a closed
 * one (the X report), ordered by gateway, method, currency: *lines malloc'd (free()),
 * *n of them; *first (may be NULL) the earliest created_at among those
 * rows, 0 when there are none.
 */
int pt_store_report_totals(struct pt_store *st, int64_t z, struct pt_report_line **lines, int *n,
                           int64_t *first);
/* What is still open on the lane, charges and refunds together: [0]
 * queued (INIT, PROCESSING), [1] PENDING, [2] UNKNOWN, [3] under review. */
int pt_store_z_open(struct pt_store *st, int64_t open[4]);
/* Stores a closed report (body byte for byte).  PT_EEXIST when z exists. */
int pt_store_z_insert(struct pt_store *st, int64_t z, const char *lane, int64_t from, int64_t to,
                      const char *hash, const char *body, int64_t now);
/* Report z's body as stored (malloc'd); PT_ENOTFOUND. */
int pt_store_z_get(struct pt_store *st, int64_t z, char **body);

/* ---- reconciliation (SPEC 19) ------------------------------------------ */

struct pt_recon_record;
/* One local record for a run: its fields (day left 0) and the lane time,
 * ms, it became SUCCESS.  Non-zero stops the walk and is returned. */
typedef int (*pt_recon_row_fn)(void *ctx, const struct pt_recon_record *r, int64_t at);
/*
 * Walks the gateway's SUCCESS charges (refunds: 0) or SUCCESS refunds (1)
 * that became SUCCESS in [from, to), lane ms, by the audit row of that
 * transition.  On PostgreSQL the whole shop's (a bill is the merchant's).
 */
int pt_store_recon_local(struct pt_store *st, const char *gateway, int refunds, int64_t from,
                         int64_t to, pt_recon_row_fn fn, void *ctx);
/*
 * Calls fn with the lane time, ms, at which each of the gateway's charges
 * and refunds that became final in [from, to) did - SUCCESS, FAILED or
 * CANCELED alike (the days the daily run's walk back looks at).  Non-zero
 * from fn stops and is returned.  On PostgreSQL the whole shop's.
 */
int pt_store_recon_final_times(struct pt_store *st, const char *gateway, int64_t from, int64_t to,
                               int (*fn)(void *ctx, int64_t at), void *ctx);
/* Stores a run as served ("pending", "done", "failed"). */
int pt_store_recon_insert(struct pt_store *st, const char *gateway, const char *date,
                          const char *state, const char *body, int64_t now);
/* The latest run's body (malloc'd); PT_ENOTFOUND. */
int pt_store_recon_latest(struct pt_store *st, const char *gateway, const char *date, char **body);
/* The body of the gateway's done run of the latest bill date (any date;
 * malloc'd); PT_ENOTFOUND. */
int pt_store_recon_latest_done(struct pt_store *st, const char *gateway, char **body);
/* The run of gateway and date may start: PT_OK (held until
 * pt_store_recon_unlock), PT_EBUSY (another lane runs it: PostgreSQL). */
int pt_store_recon_lock(struct pt_store *st, const char *gateway, const char *date);
void pt_store_recon_unlock(struct pt_store *st, const char *gateway, const char *date);

/* ---- retention (SPEC 19, core/archive.h) ------------------------------------
 *
 * SQLite only: PostgreSQL answers PT_EUNSUPPORTED (a shop's server keeps its
 * history; its own backups and partitions are the place for that).
 */

#define PT_ARCHIVE_MONTH_LEN 8 /* "YYYY-MM" and its NUL */

/* A charge that may leave the live database, as it was when read. */
struct pt_archive_item {
    int64_t id;
    char order_id[PT_ORDER_ID_MAX];
    char month[PT_ARCHIVE_MONTH_LEN]; /* the UTC month it became final: its file */
    /* What the charge, its trail and its refunds were when read: the copy
     * and the removal each go ahead only while it is unchanged. */
    char mark[96];
};

/*
 * Up to max charges with id > after (in id order) that retention may move
 * now: the charge and each of its refunds final, not under review, in a
 * closed Z report, final before `before` (lane ms), and - for a gateway in
 * bill_offsets, a JSON object gateway -> its bill time zone's offset east
 * of UTC in seconds - in a bill date whose reconciliation ran `done`.  A
 * gateway not in it needs no run (no bill to check against); a done run
 * counts only when it began after its bill day ended.  The newest charge
 * and the newest refund never move: SQLite gives the next one max(id) + 1,
 * which must stay above every id the sync engine's floors have passed, and
 * never be an id an archive file already holds.
 */
int pt_store_archive_candidates(struct pt_store *st, int64_t before, const char *bill_offsets,
                                int64_t after, int max, struct pt_archive_item *rows, int *n);
/*
 * Copies items (their charges, refunds, audit trails and fulfilment events)
 * into the archive database at path, created 0600 with payterm's schema if
 * missing, in one transaction committed before it returns PT_OK.  An item
 * whose copy is already there as it is is left; one there but older is
 * replaced.  *copied (may be NULL) counts the items written.
 */
int pt_store_archive_copy(struct pt_store *st, const char *path,
                          const struct pt_archive_item *items, int n, int *copied);
/*
 * In one write transaction: each item still as it was read (its mark) has
 * its order_id and refund_ids recorded as archived in its month and its
 * rows removed from the live database; *moved counts them.  Call only after
 * pt_store_archive_copy of the same items returned PT_OK.
 */
int pt_store_archive_forget(struct pt_store *st, const struct pt_archive_item *items, int n,
                            int *moved);
/* The month an archived order_id (kind "charge") or refund_id ("refund")
 * went to; PT_ENOTFOUND when it is not archived. */
int pt_store_archived_month(struct pt_store *st, const char *kind, const char *ext_id,
                            char month[PT_ARCHIVE_MONTH_LEN]);

/* ---- the lane's clock (SPEC 17, core/clock.h) --------------------------- */

#define PT_CLOCK_BOOT_ID_MAX 64

/* Where lane time stood when it was last written down. */
struct pt_clock_anchor {
    char boot_id[PT_CLOCK_BOOT_ID_MAX]; /* the boot it belongs to ("" unknown) */
    int64_t boot_ms;                    /* the boot-time clock then */
    int64_t lane_ms;                    /* lane time then */
    int trusted;                        /* lane time is the trusted wall clock's */
    int64_t provisional_since;          /* !trusted: lane time its provisional period began */
    int64_t wall_high;                  /* the newest trusted wall clock reading */
};

/* The anchor: PT_OK, PT_ENOTFOUND (never written), PT_EUNSUPPORTED
 * (PostgreSQL: each lane keeps none; its lane time restarts from the newest
 * time recorded, or the trusted wall clock). */
int pt_store_clock_get(struct pt_store *st, struct pt_clock_anchor *out);
/* Writes the anchor, inside a write transaction. */
int pt_store_clock_put(struct pt_store *st, const struct pt_clock_anchor *a);
/* The newest time the store holds (charges, refunds, keys, events, the
 * anchor): where lane time continues after a reboot without a trusted
 * clock.  0 when the store is empty. */
int pt_store_newest_time(struct pt_store *st, int64_t *t);
/*
 * Inside a write transaction: every time recorded at or after `since`
 * moves by delta ms - charges', refunds', keys', events', the audit's and
 * notifications' times, and the deadlines set meanwhile - so that
 * provisional times become wall times and every age stays what elapsed.
 * PT_EUNSUPPORTED on PostgreSQL, whose rows are other lanes' too.
 */
int pt_store_clock_shift(struct pt_store *st, int64_t since, int64_t delta);
/* One audit row of the lane's clock ("step", "corrected"): its size in ms,
 * the wall clock then, a detail (may be NULL), at lane time now. */
int pt_store_clock_event(struct pt_store *st, const char *kind, int64_t size_ms, int64_t wall_ms,
                         const char *detail, int64_t now);

struct pt_clock_event_row {
    int64_t id;
    char kind[16];
    int64_t size_ms, wall_ms, created_at;
    char detail[160];
};
/* The clock's audit, newest first, up to max rows. */
int pt_store_clock_events(struct pt_store *st, int max, struct pt_clock_event_row *rows, int *n);

#endif
