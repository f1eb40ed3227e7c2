/*
 * workers.c - the job threads (see workers.h).
 */
#include "workers.h"
#include "err.h"

#include <pthread.h>
#include <stdlib.h>

struct pt_workers {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct pt_job *head, *tail;
    int quit;
    int n;
    pthread_t *threads;
};

static void *worker_main(void *p)
{
    struct pt_workers *w = p;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        struct pt_job *job = w->head;
        if (job) {
            w->head = job->next;
            if (!w->head)
                w->tail = NULL;
            pthread_mutex_unlock(&w->mu);
            job->run(job);
            pthread_mutex_lock(&w->mu);
        } else if (w->quit) {
            break;
        } else {
            pthread_cond_wait(&w->cv, &w->mu);
        }
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int pt_workers_start(int n, size_t stack_size, struct pt_workers **out)
{
    struct pt_workers *w = calloc(1, sizeof *w);
    if (!w || !(w->threads = calloc((size_t)n, sizeof *w->threads))) {
        free(w);
        return PT_ENOMEM;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    /* Explicit: musl's default is 128 KiB, glibc's 8 MiB of address space. */
    pthread_attr_setstacksize(&attr, stack_size);
    int rc = PT_OK;
    for (; w->n < n; w->n++) {
        if (pthread_create(&w->threads[w->n], &attr, worker_main, w) != 0) {
            rc = PT_ENOMEM;
            break;
        }
    }
    pthread_attr_destroy(&attr);
    if (rc) {
        pt_workers_stop(w);
        return rc;
    }
    *out = w;
    return PT_OK;
}

void pt_workers_post(struct pt_workers *w, struct pt_job *job)
{
    job->next = NULL;
    pthread_mutex_lock(&w->mu);
    if (w->tail)
        w->tail->next = job;
    else
        w->head = job;
    w->tail = job;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void pt_workers_stop(struct pt_workers *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->quit = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; i < w->n; i++)
        pthread_join(w->threads[i], NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w->threads);
    free(w);
}
