/*
 * pool.c - database connection pool (see pool.h).
 */
#include "pool.h"
#include "err.h"
#include "log.h"

#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define POOL_MAX 32

struct pt_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char path[1024];
    struct pt_store_options opt; /* its strings are the daemon's config's */
    int size, opened, nfree;
    struct pt_store *free_list[POOL_MAX];
    void (*hook)(void *);
    void *hook_ctx;
    struct pt_store_writer *writer;
};

int pt_pool_new(const char *path, const struct pt_store_options *opt, int size,
                void (*hook)(void *), void *hook_ctx, struct pt_store_writer *writer,
                struct pt_pool **out)
{
    struct pt_pool *p = calloc(1, sizeof *p);
    if (!p)
        return PT_ENOMEM;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    snprintf(p->path, sizeof p->path, "%s", path);
    p->opt = *opt;
    p->size = size < 1 ? 1 : size > POOL_MAX ? POOL_MAX : size;
    p->hook = hook;
    p->hook_ctx = hook_ctx;
    p->writer = writer;
    *out = p;
    return PT_OK;
}

struct pt_store *pt_pool_get(struct pt_pool *p)
{
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (p->nfree > 0) {
            struct pt_store *st = p->free_list[--p->nfree];
            pthread_mutex_unlock(&p->mu);
            return st;
        }
        if (p->opened < p->size)
            break;
        pthread_cond_wait(&p->cv, &p->mu);
    }
    p->opened++; /* reserve the slot, open outside the lock */
    pthread_mutex_unlock(&p->mu);

    char err[1024];
    struct pt_store *st = NULL;
    struct pt_store_options o = p->opt;
    o.path = p->path;
    if (pt_store_open(&o, &st, err, sizeof err) != PT_OK) {
        pt_log_error("%s", err);
        pthread_mutex_lock(&p->mu);
        p->opened--;
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
        return NULL;
    }
    if (p->hook)
        pt_store_set_event_hook(st, p->hook, p->hook_ctx);
    if (p->writer)
        pt_store_attach(st, p->writer);
    return st;
}

void pt_pool_put(struct pt_pool *p, struct pt_store *st)
{
    if (!st)
        return;
    pthread_mutex_lock(&p->mu);
    p->free_list[p->nfree++] = st;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void pt_pool_destroy(struct pt_pool *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->nfree; i++)
        pt_store_close(p->free_list[i]);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
