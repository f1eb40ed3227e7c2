/*
 * fallback.c - the lane's local queue moved to the store server (see
 * fallback.h).  Nothing here speaks SQL: the store's operations on both
 * backends.
 */
#include "fallback.h"

#include <stdlib.h>
#include <string.h>

#include "charges.h"
#include "err.h"
#include "log.h"
#include "store.h"

enum { MOVE_BATCH = 32 };

/* The server's row for an order the local copy names: the same charge? */
static int same_charge(const struct pt_charge *a, const struct pt_charge *b)
{
    char *x = pt_charge_params_text(a), *y = pt_charge_params_text(b);
    int same = x && y && strcmp(x, y) == 0;
    free(x);
    free(y);
    return same;
}

/* The key that made a local charge, to go with it. */
struct moved_key {
    int have;
    char scope[PT_KEY_SCOPE_MAX], key[PT_KEY_NAME_MAX];
    struct pt_key_row row;
};

/* Inside the server's transaction: the key's completed record, its answer
 * the bytes the client got from the lane, so a retry on any lane replays
 * them.  A key the server has already (used there for another request) is
 * the server's: left as it is, the charge moves without it. */
static int copy_key(struct pt_store *server, const struct pt_charge *c, struct moved_key *k,
                    int64_t now)
{
    struct pt_key_lock lock;
    int rc = pt_store_key_take_later(server, k->scope, k->key, k->row.request_hash, 0, now,
                                     k->row.expires_at, &lock);
    if (rc == PT_EEXIST) {
        pt_log_warn("charge %s queued locally: its idempotency key is taken on the store "
                    "server; a retry of it there is not answered from the lane's record",
                    c->order_id);
        return PT_OK;
    }
    if (rc == PT_OK &&
        (rc = pt_store_key_set_order(server, k->scope, k->key, &lock, c->order_id)) == PT_OK)
        rc = pt_store_key_complete(server, k->scope, k->key, &lock, k->row.response_status,
                                   k->row.response_body, k->row.response_len, k->row.completed_at);
    return rc == PT_ESTATE ? PT_ESTORAGE : rc;
}

/* Inside the server's transaction (begun by the caller; ended here):
 * copies c (INIT, as queued locally) to the server with its first audit
 * row, one that says where it came from and the key that made it (k, when
 * k->have).  PT_EEXIST: the order is there already (*there is it).
 * *sent_commit: the COMMIT was sent (a failure then may still have
 * committed). */
static int copy_to_server(struct pt_store *server, const struct pt_charge *c, struct moved_key *k,
                          int64_t now, struct pt_charge *there, int *sent_commit)
{
    *sent_commit = 0;
    struct pt_charge copy = *c;
    copy.id = 0;
    copy.state = PT_STATE_INIT;
    copy.next_attempt_at = now; /* due at once: it has waited long enough */
    int rc;
    if ((rc = pt_store_charge_insert(server, &copy, c->created_at)) == PT_OK &&
        (rc = pt_store_audit_first(server, copy.id, "INIT", "created", "api@local",
                                   c->created_at)) == PT_OK)
        rc = pt_store_audit(server, copy.id, "INIT", "INIT", "moved_from_local_store", "sync", 0,
                            "queued in the lane's local store while the store server was "
                            "unreachable",
                            now);
    if (rc == PT_OK && k->have)
        rc = copy_key(server, c, k, now);
    if (rc) {
        pt_store_rollback(server);
        if (rc == PT_EEXIST && pt_store_charge_get(server, c->order_id, there) == PT_OK)
            return PT_EEXIST;
        return rc == PT_EEXIST ? PT_ESTORAGE : rc;
    }
    *sent_commit = 1; /* failed from here, its outcome is unknown */
    return pt_store_commit(server);
}

/* The copy is done with, in one local transaction: CANCELED there (it
 * never left the device), with the reason, never to be sent or moved
 * again.  PT_ESTATE: not INIT any more. */
static int mark_moved(struct pt_store *local, const struct pt_charge *c, int64_t now)
{
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    p.error_code = PT_FALLBACK_MOVED;
    p.error_message = "this charge was moved to the store server, which holds it now";
    int rc = pt_store_begin(local);
    if (rc)
        return rc;
    rc = pt_store_charge_transition(local, c->id, 1u << PT_STATE_INIT, PT_STATE_CANCELED, &p, now);
    if (rc == PT_OK)
        rc = pt_store_audit(local, c->id, "INIT", "CANCELED", PT_FALLBACK_MOVED, "sync", 0, NULL,
                            now);
    if (rc == PT_OK && c->payment_code[0])
        pt_store_note_erased(local); /* the code's old page is still in the WAL */
    if (rc) {
        pt_store_rollback(local);
        return rc;
    }
    return pt_store_commit(local);
}

static int hold_for_review(struct pt_store *local, const struct pt_charge *c, int64_t now)
{
    if (c->review)
        return PT_OK;
    int rc = pt_store_begin(local);
    if (rc)
        return rc;
    rc = pt_store_charge_set_review(local, c->id, 1, "order_id_taken_on_store_server", now);
    if (rc == PT_OK)
        rc = pt_store_audit(local, c->id, "INIT", "INIT", "order_id_taken_on_store_server", "sync",
                            1, "the store server has another charge with this order_id", now);
    if (rc && rc != PT_ESTATE) {
        pt_store_rollback(local);
        return rc;
    }
    return pt_store_commit(local);
}

/* The local copy's marker, INIT -> INIT in one short local transaction:
 * code PT_FALLBACK_MOVING (set) or none (code "": cleared).  PT_ESTATE:
 * not INIT any more (canceled on the lane meanwhile). */
static int mark_moving(struct pt_store *local, const struct pt_charge *c, const char *code,
                       int64_t now)
{
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    p.error_code = code;
    p.error_message = code[0] ? "being moved to the store server" : "";
    int rc = pt_store_begin(local);
    if (rc)
        return rc;
    rc = pt_store_charge_transition(local, c->id, 1u << PT_STATE_INIT, PT_STATE_INIT, &p, now);
    if (rc) {
        pt_store_rollback(local);
        return rc;
    }
    return pt_store_commit(local);
}

/*
 * One charge, in three steps, none holding the local store while the
 * server is asked (the lane's own requests never wait on the network):
 *   1. once the server has answered BEGIN (while it is gone nothing is
 *      marked), the local copy is marked moving (short local transaction,
 *      only if still INIT): from here a cancel on the lane no longer
 *      cancels it there but on the server, and answers 503 while the
 *      server does not have it yet - so the client is never told
 *      "canceled" for a charge the server may hold;
 *   2. the server takes the copy, its trail and its key, and commits;
 *   3. the local copy is marked moved (CANCELED, PT_FALLBACK_MOVED).
 * A failure before the server's COMMIT clears the mark this pass set (one
 * an earlier pass left stays: that pass's COMMIT may have gone through); a
 * COMMIT whose outcome is unknown, or a lane that stops after it, leaves
 * the copy moving: the next pass copies it again, and the server's UNIQUE
 * order_id finds it there, the same charge, and it is only marked.
 * *moved: 1 when the charge is on the server now.
 */
static int move_one(struct pt_store *local, struct pt_store *server, const struct pt_charge *c,
                    int64_t now, int *moved)
{
    *moved = 0;
    const int was_moving = pt_fallback_is_moving(c);
    int rc = pt_store_begin(server);
    if (rc)
        return rc; /* the server is gone: next pass */
    if ((rc = mark_moving(local, c, PT_FALLBACK_MOVING, now))) {
        pt_store_rollback(server);
        return rc == PT_ESTATE ? PT_OK : rc; /* canceled on the lane meanwhile */
    }
    struct moved_key k = {0};
    struct pt_charge there;
    int sent_commit = 0;
    rc = pt_store_key_of_order(local, c->order_id, k.scope, k.key, &k.row);
    k.have = rc == PT_OK;
    if (rc == PT_OK || rc == PT_ENOTFOUND)
        rc = copy_to_server(server, c, &k, now, &there, &sent_commit);
    else
        pt_store_rollback(server);
    pt_key_row_free(&k.row);
    if (rc == PT_EEXIST && !same_charge(c, &there)) {
        pt_log_error("charge %s queued locally: the store server has another charge with this "
                     "order_id; held for review in the local store",
                     c->order_id);
        if ((rc = mark_moving(local, c, "", now)) && rc != PT_ESTATE)
            return rc;
        return hold_for_review(local, c, now);
    }
    if (rc != PT_OK && rc != PT_EEXIST) {
        if (!sent_commit && !was_moving) /* nothing of it can be on the server */
            mark_moving(local, c, "", now);
        return rc; /* the server is gone again: next pass */
    }
    if (rc == PT_EEXIST)
        pt_log_info("charge %s was on the store server already (moved before)", c->order_id);
    if ((rc = mark_moved(local, c, now)) != PT_OK) {
        if (rc == PT_ESTATE) /* cannot be: a moving copy is canceled on the server only */
            pt_log_error("charge %s: its local copy changed while it was moved; the store "
                         "server's charge is the one",
                         c->order_id);
        return rc == PT_ESTATE ? PT_OK : rc;
    }
    *moved = 1;
    return PT_OK;
}

int pt_fallback_move(struct pt_store *local, struct pt_store *server, int64_t now, int *moved)
{
    *moved = 0;
    struct pt_charge *batch = malloc(sizeof *batch * MOVE_BATCH);
    if (!batch)
        return PT_ENOMEM;
    int64_t after = 0;
    int rc = PT_OK;
    for (;;) {
        int n = 0, more = 0;
        if ((rc = pt_store_charges_list(local, PT_STATE_INIT, after, MOVE_BATCH, batch, &n, &more)))
            break;
        for (int i = 0; i < n && rc == PT_OK; i++) {
            int one = 0;
            after = batch[i].id;
            if (batch[i].review)
                continue; /* held for an operator (move_one) */
            rc = move_one(local, server, &batch[i], now, &one);
            *moved += one;
        }
        if (rc || !more)
            break;
    }
    free(batch);
    if (*moved)
        pt_log_info("moved %d charge(s) from the local store to the store server", *moved);
    return rc;
}

int pt_fallback_is_moved(const struct pt_charge *c)
{
    return c->state == PT_STATE_CANCELED && strcmp(c->error_code, PT_FALLBACK_MOVED) == 0;
}

int pt_fallback_is_moving(const struct pt_charge *c)
{
    return c->state == PT_STATE_INIT && strcmp(c->error_code, PT_FALLBACK_MOVING) == 0;
}

int pt_fallback_waiting(struct pt_store *local, int64_t *count)
{
    int64_t total = 0;
    return pt_store_queue_figures(local, "XXX", count, &total);
}
