/*
 * gate.h - lets a configuration reload happen between units of work.
 *
 * The daemon's threads read the configuration (limits, sync timing, the
 * gateways' keys and endpoints) without locks, through pointers taken at
 * start.  A reload (SIGHUP) must therefore change it only while none of
 * them is inside a unit of work: an HTTP listener's round, a worker's
 * request, one charge of the sync engine's drain.  Each unit is wrapped in
 * enter/leave; the reload closes the gate, waits until nobody is inside,
 * swaps, and opens it again (docs/service.md).
 *
 * The wait is bounded: for the first half of it new units still start (the
 * API is not held up behind a unit that waits for a gateway), for the
 * second half they wait at the gate, and when even that is not enough the
 * reload gives up and everything goes on with the running configuration.
 */
#ifndef PT_GATE_H
#define PT_GATE_H

#include <stdint.h>

struct pt_gate;

int pt_gate_new(struct pt_gate **out);
void pt_gate_free(struct pt_gate *g);

/* A unit of work begins / ends.  NULL gate: no-op.  Never nested. */
void pt_gate_enter(struct pt_gate *g);
void pt_gate_leave(struct pt_gate *g);
/* For a hook taking void *: when a reload waits, leave and enter again
 * once it is done (the sync engine's drain between two charges). */
void pt_gate_pass(void *g);

/* Waits up to timeout_ms until no unit is in progress, then keeps new ones
 * out until pt_gate_open().  0 when closed; -1 when the units in progress
 * did not end in time (the gate stays open, *inside says how many). */
int pt_gate_close(struct pt_gate *g, int64_t timeout_ms, int *inside);
void pt_gate_open(struct pt_gate *g);

#endif
