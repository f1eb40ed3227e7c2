/*
 * fallback.h - moving the charges a lane queued in its own SQLite store
 * while the store server was unreachable (store.fallback "local", SPEC 16)
 * into the store server, exactly once.
 */
#ifndef PT_FALLBACK_H
#define PT_FALLBACK_H

#include <stdint.h>

struct pt_store;

/*
 * Moves every charge still queued (INIT) in `local` into `server`: the
 * charge with its trail, in one transaction of the server, then marked
 * moved in `local` (CANCELED, error "moved_to_store_server", audited) in
 * one of its own.  A charge moved before - the server committed, the lane
 * stopped before it marked its copy - is found by its order_id, UNIQUE on
 * the server: with the same parameters it is the same charge and only the
 * local mark is written; with others it stays local, under review
 * ("order_id_taken_on_store_server"), for an operator.  *moved: charges
 * now on the server.  Stops at the first storage error (the server gone
 * again): what was moved stays moved, the rest waits for the next pass.
 */
int pt_fallback_move(struct pt_store *local, struct pt_store *server, int64_t now, int *moved);

/* Charges waiting in `local` to be moved (for /v1/status and the log). */
int pt_fallback_waiting(struct pt_store *local, int64_t *count);

#endif
