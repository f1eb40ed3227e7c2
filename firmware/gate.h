/*
 * gate.h - lets a configuration reload happen between units of work.
 *
 * The daemon's threads read the configuration (limits, sync timing, the
 * gateways' keys and endpoints) without locks, through pointers taken at
 * start.  A reload (SIGHUP) must therefore change it only while none of
 * them is inside a unit of work: an HTTP listener's round, a worker's
 * request, a batch of the sync engine's drain.  Each unit is wrapped in
 * enter/leave; the reload closes the gate, waits until nobody is inside,
 * swaps, and opens it again (docs/reload.md).  Readers never wait for one
 * another, and only for the swap itself (memory, microseconds), never for
 * the wait before it: a reload waits for a moment when no unit is in
 * progress, however long that takes, rather than stall the API behind a
 * sync batch that waits for a gateway.
 */
#ifndef PT_GATE_H
#define PT_GATE_H

struct pt_gate;

int pt_gate_new(struct pt_gate **out);
void pt_gate_free(struct pt_gate *g);

/* A unit of work begins / ends.  NULL gate: no-op.  Never nested. */
void pt_gate_enter(struct pt_gate *g);
void pt_gate_leave(struct pt_gate *g);
/* For a hook taking void *: leave, then enter again (the sync engine's
 * drain between two batches). */
void pt_gate_pass(void *g);

/* Waits until no unit is in progress (logging once when that takes more
 * than a few seconds), then keeps new ones out until pt_gate_open(). */
void pt_gate_close(struct pt_gate *g);
void pt_gate_open(struct pt_gate *g);

#endif
