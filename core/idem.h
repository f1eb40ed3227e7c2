/*
 * idem.h - the idempotency guard (request layer of the exactly-once defence).
 *
 * A client-chosen key identifies one payment intent.  The first request with
 * a key takes a lock on it; its response is stored and replayed to every
 * retry.  The guard works *inside the caller's write transaction* so that the
 * lock and the business rows (charge, audit) commit or vanish together.
 *
 *   pt_store_begin(st);
 *   pt_idem_acquire_later(st, &opt, scope, key, hash, now, &res);   NEW?
 *   ... insert the charge, audit ...
 *   pt_idem_complete(st, scope, key, 201, body, len, now);
 *   pt_store_commit(st);
 *
 * A completed record is immutable until it expires, so pt_idem_lookup() can
 * answer a replay with one indexed read and no write lock at all.
 */
#ifndef PT_IDEM_H
#define PT_IDEM_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

enum pt_idem_status {
    PT_IDEM_NEW = 0,   /* lock taken by this call; go ahead */
    PT_IDEM_RECOVERED, /* a stale lock (holder gone) was taken over */
    PT_IDEM_REPLAY,    /* completed before: replay status + body */
    PT_IDEM_IN_USE,    /* the first request is still running */
    PT_IDEM_MISMATCH,  /* same key, different request fingerprint */
    PT_IDEM_ABSENT     /* pt_idem_lookup only: no live record */
};

struct pt_idem_options {
    int64_t ttl_ms;          /* how long a record lives (default 24 h) */
    int64_t lock_timeout_ms; /* a lock older than this is stale (default 60 s) */
    int64_t instance;        /* token of this process: a lock held by another
                                instance belongs to a holder that is gone */
};

struct pt_idem_result {
    enum pt_idem_status status;
    int response_status; /* REPLAY */
    char *body;          /* REPLAY: malloc'd stored body; pt_idem_result_free */
    size_t body_len;
    int64_t lock_age_ms;     /* IN_USE: how long the lock has been held */
    char order_id[65];       /* RECOVERED/REPLAY: the order the key created, if any */
    struct pt_key_lock lock; /* NEW/RECOVERED: the lock this caller now holds */
};

void pt_idem_result_free(struct pt_idem_result *r);

/* Checks a key: 1-255 visible ASCII characters (0x21-0x7e).  A quoted
 * structured-field string ("abc") is unquoted into out first.  out must hold
 * 256 bytes.  PT_OK or PT_EINVAL. */
int pt_idem_key_normalize(const char *raw, char out[256]);

/*
 * Fingerprint = SHA-256 over method, '\n', path, '\n', canonical body.
 * body_canonical may be NULL (no body) and is then hashed as "".
 */
int pt_idem_fingerprint(const char *method, const char *path, const char *body_canonical,
                        unsigned char out[32]);

/*
 * Read-only fast path, no transaction needed: REPLAY or MISMATCH for a
 * completed live record, IN_USE for a live lock, ABSENT otherwise.
 */
int pt_idem_lookup(struct pt_store *st, const struct pt_idem_options *opt, const char *scope,
                   const char *key, const unsigned char hash[32], int64_t now,
                   struct pt_idem_result *out);

/*
 * Takes the lock (INSERT OR IGNORE + change count) or says why not.  Must be
 * called inside a write transaction (pt_store_begin).  Expired records are
 * treated as absent.  Returns PT_OK with out->status set, or a storage error.
 */
int pt_idem_acquire(struct pt_store *st, const struct pt_idem_options *opt, const char *scope,
                    const char *key, const unsigned char hash[32], int64_t now,
                    struct pt_idem_result *out);

/*
 * As pt_idem_acquire, but a key found free is not written yet: the lock is
 * pending (struct pt_key_lock) and its one row is written by
 * pt_idem_complete (the answer), pt_store_key_set_order (a lock kept across
 * a commit) or dropped by pt_idem_release.  For a request whose answer is
 * known before its transaction commits (an offline charge, a refusal), the
 * key costs one indexed read and one INSERT instead of an INSERT and an
 * UPDATE of the same row.  A commit with the lock still pending is refused.
 */
int pt_idem_acquire_later(struct pt_store *st, const struct pt_idem_options *opt, const char *scope,
                          const char *key, const unsigned char hash[32], int64_t now,
                          struct pt_idem_result *out);
/*
 * Stores the final response for the key and releases the lock, if `held`
 * (res.lock of the acquire that took it) is still the key's lock: PT_ESTATE when
 * the lock was recovered by another request meanwhile (that request's
 * answer is the key's; nothing is changed).
 */
int pt_idem_complete(struct pt_store *st, struct pt_key_lock *held, const char *scope,
                     const char *key, int status, const char *body, size_t len, int64_t now);

/* Removes the key (transient failure: the same key may be retried later);
 * PT_ESTATE when `held` no longer holds it. */
int pt_idem_release(struct pt_store *st, struct pt_key_lock *held, const char *scope,
                    const char *key);

/* Deletes expired completed records; *count gets the number removed. */
int pt_idem_sweep(struct pt_store *st, int64_t now, int *count);

#endif
