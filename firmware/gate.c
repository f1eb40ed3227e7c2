/*
 * gate.c - see gate.h.
 */
#include "gate.h"
#include "err.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct pt_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC: a reader left, or the gate opened */
    int inside;        /* units of work in progress */
    int closed;        /* the swap is under way: nobody enters */
    int waiting;       /* a reload waits for inside == 0 */
    int holding;       /* ... and keeps new units out while it does */
    unsigned gen;      /* reloads done or given up */
};

int pt_gate_new(struct pt_gate **out)
{
    struct pt_gate *g = calloc(1, sizeof *g);
    if (!g)
        return PT_ENOMEM;
    pthread_mutex_init(&g->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->cv, &ca);
    pthread_condattr_destroy(&ca);
    *out = g;
    return PT_OK;
}

void pt_gate_free(struct pt_gate *g)
{
    if (!g)
        return;
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

void pt_gate_enter(struct pt_gate *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    while (g->closed || g->holding)
        pthread_cond_wait(&g->cv, &g->mu);
    g->inside++;
    pthread_mutex_unlock(&g->mu);
}

void pt_gate_leave(struct pt_gate *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    if (--g->inside == 0 && g->waiting)
        pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* The sync engine's drain may hold its unit for long (a batch waits for a
 * gateway): between two batches, a reload that waits is let through, and
 * the drain goes on with the new configuration. */
void pt_gate_pass(void *p)
{
    struct pt_gate *g = p;
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    if (g->waiting || g->closed) {
        unsigned gen = g->gen;
        if (--g->inside == 0)
            pthread_cond_broadcast(&g->cv);
        while (g->gen == gen)
            pthread_cond_wait(&g->cv, &g->mu);
        g->inside++;
    }
    pthread_mutex_unlock(&g->mu);
}

static void deadline(struct timespec *ts, int64_t ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000;
    if (ts->tv_nsec >= 1000000000) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000;
    }
}

/* Until inside == 0 or the deadline: 0 or ETIMEDOUT.  g->mu held. */
static int wait_empty(struct pt_gate *g, const struct timespec *until)
{
    while (g->inside > 0)
        if (pthread_cond_timedwait(&g->cv, &g->mu, until) == ETIMEDOUT)
            return g->inside > 0 ? ETIMEDOUT : 0;
    return 0;
}

int pt_gate_close(struct pt_gate *g, int64_t timeout_ms, int *inside)
{
    struct timespec half, end;
    deadline(&half, timeout_ms / 2);
    deadline(&end, timeout_ms);
    pthread_mutex_lock(&g->mu);
    g->waiting = 1;
    int rc = wait_empty(g, &half);
    if (rc) {
        g->holding = 1; /* the second half: nobody new comes in */
        rc = wait_empty(g, &end);
    }
    g->waiting = g->holding = 0;
    if (rc) {
        *inside = g->inside;
        g->gen++; /* a drain waiting in pt_gate_pass goes on */
        pthread_cond_broadcast(&g->cv);
    } else {
        g->closed = 1;
    }
    pthread_mutex_unlock(&g->mu);
    return rc ? -1 : 0;
}

void pt_gate_open(struct pt_gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->closed = 0;
    g->gen++;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}
