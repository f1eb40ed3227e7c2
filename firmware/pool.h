/*
 * pool.h - a small pool of database connections for the HTTP worker threads.
 *
 * SQLite connections are not shared between threads; opening one per request
 * would parse the schema every time.  The pool opens connections lazily up to
 * its size and hands them out one thread at a time.
 */
#ifndef PT_POOL_H
#define PT_POOL_H

#include "store.h"

struct pt_pool;

/* Creates a pool over the database at path (already migrated).  hook, when
 * not NULL, is installed as every connection's event hook; writer, when
 * not NULL, is the one every connection writes through. */
struct pt_store_options;
int pt_pool_new(const char *path, const struct pt_store_options *opt, int size,
                void (*hook)(void *), void *hook_ctx, struct pt_store_writer *writer,
                struct pt_pool **out);

/* Borrows a connection, waiting while all are in use.  NULL when the
 * database cannot be opened (the error is logged). */
struct pt_store *pt_pool_get(struct pt_pool *p);

/* Returns a connection borrowed with pt_pool_get. */
void pt_pool_put(struct pt_pool *p, struct pt_store *st);

/* Closes every connection; all must have been returned.  Accepts NULL. */
void pt_pool_destroy(struct pt_pool *p);

#endif
