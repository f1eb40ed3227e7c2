/*
 * fallback.h - moving the charges a lane queued in its own SQLite store
 * while the store server was unreachable (store.fallback "local", SPEC 16)
 * into the store server, exactly once.
 */
#ifndef PT_FALLBACK_H
#define PT_FALLBACK_H

#include <stdint.h>

struct pt_charge;
struct pt_store;

/* The error code of a local copy that was moved (CANCELED there), and of
 * one being moved (still INIT: the server may have it already). */
#define PT_FALLBACK_MOVED "moved_to_store_server"
#define PT_FALLBACK_MOVING "moving_to_store_server"

/*
 * Moves every charge still queued (INIT) in `local` into `server`: the
 * charge with its first audit rows and the key that made it (its answer,
 * so a retry on any lane replays it), in one transaction of the server,
 * between two short local ones: the copy marked moving (PT_FALLBACK_MOVING,
 * still INIT: a cancel on the lane goes to the server from then on), then
 * moved (CANCELED, PT_FALLBACK_MOVED, audited).  A cancel on the lane and
 * the move cannot both win, whatever the server's COMMIT did.  A charge moved before - the server
 * committed, the lane stopped before it marked its copy - is found by its order_id, UNIQUE on the
 * server: with the same parameters it is the same charge and only the local mark is written; with
 * others it stays local, under review
 * ("order_id_taken_on_store_server"), for an operator.  *moved: charges
 * now on the server.  Stops at the first storage error (the server gone
 * again): what was moved stays moved, the rest waits for the next pass.
 */
int pt_fallback_move(struct pt_store *local, struct pt_store *server, int64_t now, int *moved);

/* 1 when c, read from a lane's local store, is a copy moved to the server
 * (the server's charge is the one to read or change). */
int pt_fallback_is_moved(const struct pt_charge *c);
/* 1 when c is a local copy being moved (the server may have it or not). */
int pt_fallback_is_moving(const struct pt_charge *c);

/* Charges waiting in `local` to be moved (for /v1/status and the log). */
int pt_fallback_waiting(struct pt_store *local, int64_t *count);

#endif
