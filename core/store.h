/*
 * store.h - the persistence layer: the only part of payterm that speaks SQL.
 *
 * Everything else asks the store narrow questions in the domain's words
 * (take an idempotency lock, insert a charge, apply a transition).  The
 * SQLite implementation lives in store.c; a PostgreSQL store for a server
 * shared by many lanes would implement this same header.
 *
 * One struct pt_store is one database connection and must be used by one
 * thread at a time; each thread of the daemon opens its own.  Write
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

struct pt_store;

struct pt_store_options {
    const char *path;      /* database file; created if missing */
    int synchronous_normal; /* 0 = synchronous=FULL (default), 1 = NORMAL */
    int busy_timeout_ms;    /* 0 = default (5000) */
    int max_page_count;     /* 0 = unlimited; tests use it to fake a full disk */
    int readonly;           /* open without creating or migrating */
};

/*
 * Opens (creating if needed) the database and brings its schema up to date.
 * A database whose user_version is newer than this binary is refused with
 * PT_ETOONEW.  On success *out is a new store the caller closes with
 * pt_store_close(); on failure *out is NULL and, when errbuf is not NULL, a
 * sentence naming the file and the cause is written into it.
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

/*
 * Applies migrations up to `version` (tests build older databases with it).
 * Each migration runs in its own transaction together with its user_version
 * bump, so a crash leaves the database at a whole version.
 */
int pt_store_migrate_to(struct pt_store *st, int version);

/* Reads an integer PRAGMA of this connection ("synchronous", "foreign_keys"). */
int pt_store_pragma_int(struct pt_store *st, const char *name, int *value);

/* Write transaction: BEGIN IMMEDIATE / COMMIT / ROLLBACK. */
int pt_store_begin(struct pt_store *st);
int pt_store_commit(struct pt_store *st);
int pt_store_rollback(struct pt_store *st);

/* Online backup of the whole database into a new file at dest. */
int pt_store_backup(struct pt_store *st, const char *dest);

/* True when the database accepts a write right now (for /healthz). */
int pt_store_writable(struct pt_store *st);

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

/* Records which order the key created (used to recover a stale lock). */
int pt_store_key_set_order(struct pt_store *st, const char *scope, const char *key,
                           const char *order_id);

/* Stores the response and releases the lock.  PT_ENOTFOUND if no record. */
int pt_store_key_complete(struct pt_store *st, const char *scope, const char *key, int status,
                          const char *body, size_t len, int64_t now);

/* Deletes the record (transient failure: the client may retry the key). */
int pt_store_key_delete(struct pt_store *st, const char *scope, const char *key);

/* Deletes one expired record (so an expired key can be taken anew). */
int pt_store_key_delete_expired(struct pt_store *st, const char *scope, const char *key,
                                int64_t now);

/* Deletes completed records whose expires_at <= now; *count = rows swept.
 * Uncompleted (locked) records are left for lock recovery. */
int pt_store_key_sweep(struct pt_store *st, int64_t now, int *count);

/* ---- charges ---------------------------------------------------------- */

/*
 * Inserts c as a new charge in state c->state with its params JSON, and sets
 * c->id.  PT_EEXIST when order_id already exists (data-layer uniqueness).
 */
int pt_store_charge_insert(struct pt_store *st, struct pt_charge *c, const char *params_json,
                           int64_t now);

/* Reads a charge by order id.  PT_OK or PT_ENOTFOUND.  When params is not
 * NULL, *params receives the stored params JSON (malloc'd; caller frees). */
int pt_store_charge_get(struct pt_store *st, const char *order_id, struct pt_charge *out,
                        char **params);

/* Appends one audit row for charge_id.  from/to may be NULL. */
int pt_store_audit(struct pt_store *st, int64_t charge_id, const char *from, const char *to,
                   const char *cause, const char *actor, int refused, const char *detail,
                   int64_t now);

/* Number of rows in a table the store knows ("charges", "charge_events",
 * "idempotency_keys", "events", "notifications"); for tests and status. */
int pt_store_count(struct pt_store *st, const char *table, int64_t *count);

#endif
