/*
 * workers.h - a few threads that run jobs posted from elsewhere.
 *
 * The HTTP API's polling thread must never block, so every handler runs on
 * one of these (api.c): a job is posted when its request is complete and
 * the thread that runs it may wait on the database or a gateway.
 */
#ifndef PT_WORKERS_H
#define PT_WORKERS_H

#include <stddef.h>

/* Embedded in what the job works on; run() gets it back. */
struct pt_job {
    struct pt_job *next; /* the queue's */
    void (*run)(struct pt_job *job);
};

struct pt_workers;

/* Starts n threads with stack_size bytes of stack each.  PT_OK or an error
 * (nothing started). */
int pt_workers_start(int n, size_t stack_size, struct pt_workers **out);

/* Queues job; one of the threads runs it soon, in posting order.  Never
 * blocks and cannot fail (the link lives in the job). */
void pt_workers_post(struct pt_workers *w, struct pt_job *job);

/* Runs what is queued, then joins the threads and frees w.  Accepts NULL. */
void pt_workers_stop(struct pt_workers *w);

#endif
