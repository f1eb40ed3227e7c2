/*
 * gate.c - see gate.h.
 */
#include "gate.h"
#include "err.h"
#include "log.h"

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
    unsigned gen;      /* reloads done */
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
    while (g->closed)
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

#define SLOW_WAIT_S 5

void pt_gate_close(struct pt_gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->waiting = 1;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += SLOW_WAIT_S;
    int told = 0;
    while (g->inside > 0) {
        if (told) {
            pthread_cond_wait(&g->cv, &g->mu);
        } else if (pthread_cond_timedwait(&g->cv, &g->mu, &until) == ETIMEDOUT) {
            pt_log_info("reload: waiting for %d request(s) or sync batch(es) in progress",
                        g->inside);
            told = 1;
        }
    }
    g->waiting = 0;
    g->closed = 1;
    pthread_mutex_unlock(&g->mu);
}

void pt_gate_open(struct pt_gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->closed = 0;
    g->gen++;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}
