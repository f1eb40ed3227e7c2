/*
 * syncer.h - the background thread that runs the sync engine's drains.
 *
 * It sleeps until there is something to do: a charge is due (the earliest
 * next_attempt_at in the database), a gateway came back, POST /v1/sync, or a
 * new charge was queued.  While a gateway is unreachable it probes it every
 * sync.interval_s.  With nothing queued and every gateway reachable it does
 * not wake at all.
 */
#ifndef PT_SYNCER_H
#define PT_SYNCER_H

#include "sync.h"

struct pt_clock;
struct pt_gate;
struct pt_syncer;

/* Starts the thread, with a stack of stack_bytes (0 = the libc default), and
 * its own connection to db_path, writing through writer.  Each pass is a
 * unit of work of gate (NULL: none), which cfg may change between.  Before
 * each pass it watches clock (NULL: none; SPEC 17): steps are audited, and
 * provisional times corrected with the gate closed. */
int pt_syncer_start(struct pt_sync *sync, const struct pt_config *cfg, const char *db_path,
                    struct pt_store_writer *writer, struct pt_gate *gate, struct pt_clock *clock,
                    size_t stack_bytes, void (*event_hook)(void *), void *hook_ctx,
                    struct pt_syncer **out);

/* How long the pass in progress has gone without a step (ms at monotonic
 * time now); 0 while the thread sleeps between passes.  Thread-safe. */
int64_t pt_syncer_stalled_ms(struct pt_syncer *y, int64_t now);

/* Asks for a pass now (thread-safe, cheap). */
void pt_syncer_wake(void *syncer);

/* Finishes the pass in progress and joins the thread.  NULL ok. */
void pt_syncer_stop(struct pt_syncer *y);

#endif
