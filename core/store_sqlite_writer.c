/*
 * store_sqlite_writer.c - the SQLite store's transactions: on a connection
 * alone, or through the process's writer, which batches the commits of
 * every connection attached to it (group commit, docs/writer.md).
 */
#include "store_sqlite_impl.h"

/* ---- transactions: alone, or through the process's writer ---------------------- */

/* After a commit that is durable: what its transaction did, made known. */
static void committed(const struct pt_store_commit *m)
{
    if (m->erased)
        atomic_store(&pt__sq_wipe_due, 1); /* only now are the erased bytes the ones to wipe */
    /* A commit that wrote rows went through the WAL: the storage works. */
    if (m->changed)
        pt__sq_note_storage(PT_OK, NULL);
    if (m->events && m->hook)
        m->hook(m->hook_ctx);
}

/* What st's transaction did, for committed(). */
static void describe(struct pt_store *st, struct pt_store_commit *m)
{
    m->events = st->events_in_txn;
    m->erased = st->erased_in_txn;
    m->changed = sqlite3_total_changes(st->c->db) != st->changes_at_begin;
    m->hook = st->event_hook;
    m->hook_ctx = st->event_hook_ctx;
    st->events_in_txn = 0;
    st->erased_in_txn = 0;
}

static int alone_begin(struct pt_store *st)
{
    sqlite3_stmt *s = pt__sq_stmt(st, S_BEGIN);
    return s ? pt__sq_run(st, s) : PT_ESTORAGE;
}

/*
 * COMMIT on c's connection, only into the files it opened (SPEC 18): not at
 * all when one is gone, and a COMMIT during which one went is a failure -
 * it is durable in a file no restart will open.  A failed COMMIT (disk
 * full, I/O error, a file gone) may leave the transaction open: it is
 * rolled back, so the connection is usable and nothing half is kept.
 */
static int commit_into_files(struct pt_store *c)
{
    sqlite3_stmt *s;
    int rc = pt__sq_files_ok(c);
    if (rc == PT_OK) {
        rc = (s = pt__sq_stmt(c, S_COMMIT)) ? pt__sq_run(c, s) : PT_ESTORAGE;
        if (rc == PT_OK)
            rc = pt__sq_files_ok(c);
    }
    if (rc != PT_OK && !sqlite3_get_autocommit(c->c->db) && (s = pt__sq_stmt(c, S_ROLLBACK)))
        pt__sq_run(c, s);
    if (rc == PT_EGONE)
        pt__sq_wal_rescue(c);
    return rc;
}

static int alone_commit(struct pt_store *st)
{
    int rc = commit_into_files(st);
    struct pt_store_commit m = {0};
    describe(st, &m);
    if (rc == PT_OK)
        committed(&m);
    return rc;
}

static int alone_rollback(struct pt_store *st)
{
    if (sqlite3_get_autocommit(st->c->db))
        return PT_OK; /* SQLite already rolled back (e.g. after SQLITE_FULL) */
    sqlite3_stmt *s = pt__sq_stmt(st, S_ROLLBACK);
    return s ? pt__sq_run(st, s) : PT_ESTORAGE;
}

/* Requests in one batch at most: a bound on how long the first one waits. */
#define BATCH_MAX 64

static void take_turn(struct pt_store_writer *w)
{
    pthread_mutex_lock(&w->mu);
    w->waiting++;
    while (w->busy)
        pthread_cond_wait(&w->turn_cv, &w->mu);
    w->waiting--;
    w->busy = 1;
    pthread_mutex_unlock(&w->mu);
}

/* With mu held: the turn goes to the next thread. */
static void give_turn(struct pt_store_writer *w)
{
    w->busy = 0;
    if (w->waiting)
        pthread_cond_signal(&w->turn_cv);
}

static void release_turn(struct pt_store_writer *w)
{
    pthread_mutex_lock(&w->mu);
    give_turn(w);
    pthread_mutex_unlock(&w->mu);
}

/* With mu held: the batch's members, taken out of it. */
static struct pt_store_commit *take_members(struct pt_store_writer *w)
{
    struct pt_store_commit *list = w->members;
    if (w->nmembers)
        w->batches++;
    w->members = NULL;
    w->nmembers = 0;
    w->open = 0;
    return list;
}

/* mu not held: every member of list learns the batch's result; the ones
 * waiting for it wake up. */
static void settle(struct pt_store_writer *w, struct pt_store_commit *list, int rc)
{
    /* The hooks (a long-poll's wake-up) run outside mu; a member stays
     * valid until it is marked done. */
    if (rc == PT_OK)
        for (struct pt_store_commit *m = list; m; m = m->next)
            committed(m);
    pthread_mutex_lock(&w->mu);
    for (struct pt_store_commit *m = list, *next; m; m = next) {
        next = m->next;
        m->rc = rc;
        m->next = NULL;
        m->done = 1;
    }
    pthread_cond_broadcast(&w->done_cv);
    pthread_mutex_unlock(&w->mu);
}

/* The turn held, mu not: commits the open batch (one sync for all of it)
 * and settles its members; the turn is kept. */
static void commit_batch(struct pt_store_writer *w)
{
    struct pt_store *c = w->conn;
    int rc = PT_OK;
    pthread_mutex_lock(&w->mu);
    int n = w->nmembers;
    pthread_mutex_unlock(&w->mu);
    if (!sqlite3_get_autocommit(c->own.db) && !n) {
        /* Nobody's work is in it (requests that rolled back, or only read):
         * a COMMIT would still write the pages their savepoints touched and
         * sync them. */
        sqlite3_stmt *s = pt__sq_stmt(c, S_ROLLBACK);
        if (s)
            pt__sq_run(c, s);
    } else if (!sqlite3_get_autocommit(c->own.db)) {
        rc = commit_into_files(c);
    } else if (n) {
        /* SQLite rolled the whole transaction back under a statement that
         * failed (a full disk, an I/O error): the members' work is gone. */
        rc = w->lost_rc ? w->lost_rc : PT_EIO;
    }
    w->lost_rc = 0;
    pthread_mutex_lock(&w->mu);
    struct pt_store_commit *list = take_members(w);
    pthread_mutex_unlock(&w->mu);
    settle(w, list, rc);
}

/*
 * The end of a turn.  m: the request's finished part (NULL after a
 * rollback); deferred: its answer may wait for pt_store_writer_flush().
 * While other requests wait for the turn, it is handed on (they join the
 * batch); when none does, or the batch is full, the batch is committed.
 * Returns m's result (PT_OK at once for a deferred m not committed yet).
 */
static int end_turn(struct pt_store_writer *w, struct pt_store_commit *m, int deferred)
{
    pthread_mutex_lock(&w->mu);
    if (m) {
        m->done = 0;
        m->next = w->members;
        w->members = m;
        w->nmembers++;
    }
    /* A deferred batch waits for its flush - unless nothing is in it: an
     * empty transaction is ended at once (it holds SQLite's write lock). */
    if (w->nmembers < BATCH_MAX && (w->waiting || (deferred && w->nmembers))) {
        give_turn(w);
        while (m && !deferred && !m->done)
            pthread_cond_wait(&w->done_cv, &w->mu);
        pthread_mutex_unlock(&w->mu);
        return m && !deferred ? m->rc : PT_OK;
    }
    pthread_mutex_unlock(&w->mu);
    commit_batch(w); /* an empty one just ends the transaction */
    release_turn(w);
    return m ? m->rc : PT_OK;
}

static int writer_begin(struct pt_store *st)
{
    struct pt_store_writer *w = st->writer;
    take_turn(w);
    struct pt_store *c = w->conn;
    int rc = PT_OK;
    sqlite3_stmt *s;
    if (!w->open || sqlite3_get_autocommit(c->own.db)) {
        if (w->open)         /* rolled back under an earlier request's failure */
            commit_batch(w); /* (tells its members) */
        if (!sqlite3_get_autocommit(c->own.db) && (s = pt__sq_stmt(c, S_ROLLBACK)))
            pt__sq_run(c, s); /* a ROLLBACK that failed after a failed COMMIT */
        rc = (s = pt__sq_stmt(c, S_BEGIN)) ? pt__sq_run(c, s) : PT_ESTORAGE;
        w->open = rc == PT_OK;
    }
    if (rc == PT_OK)
        rc = (s = pt__sq_stmt(c, S_SAVEPOINT)) ? pt__sq_run(c, s) : PT_ESTORAGE;
    if (rc) {
        end_turn(w, NULL, 0);
        return rc;
    }
    st->c = &c->own;
    return PT_OK;
}

/*
 * The request's savepoint undone; the batch goes on without it.  When
 * SQLite already rolled the whole transaction back under the request's
 * failing statement, or undoing the savepoint fails (its rows would stay
 * and be committed with the others), the batch is lost: what failed is
 * kept for its members.
 */
static void undo_request(struct pt_store *st)
{
    struct pt_store_writer *w = st->writer;
    sqlite3 *db = st->c->db;
    sqlite3_stmt *s;
    int rc = PT_OK;
    if (!sqlite3_get_autocommit(db)) {
        rc = (s = pt__sq_stmt(st, S_ROLLBACK_TO)) ? pt__sq_run(st, s) : PT_ESTORAGE;
        if (rc == PT_OK)
            rc = (s = pt__sq_stmt(st, S_RELEASE)) ? pt__sq_run(st, s) : PT_ESTORAGE;
        if (rc != PT_OK && !sqlite3_get_autocommit(db) && (s = pt__sq_stmt(st, S_ROLLBACK)))
            pt__sq_run(st, s);
    } else {
        rc = pt__sq_xlate(sqlite3_extended_errcode(db)); /* the statement that failed */
    }
    if (rc != PT_OK && !w->lost_rc)
        w->lost_rc = rc;
}

/*
 * Ends st's turn as a member of the batch: with the caller's ticket when
 * the commit is deferred, else with one here that end_turn() waits on.
 * work: the request's rows are kept (a commit), or it only read the batch
 * (a rollback that must not answer before it).
 */
static int end_as_member(struct pt_store *st, int work)
{
    struct pt_store_commit own = {0}, *m = st->defer ? st->defer : &own;
    if (work)
        describe(st, m);
    else
        *m = (struct pt_store_commit){0};
    st->c = &st->own;
    st->deferred = st->defer != NULL;
    st->defer = NULL;
    return end_turn(st->writer, m, st->deferred);
}

static int writer_commit(struct pt_store *st)
{
    sqlite3_stmt *s = pt__sq_stmt(st, S_RELEASE);
    int rc = sqlite3_get_autocommit(st->c->db) ? PT_EIO : s ? pt__sq_run(st, s) : PT_ESTORAGE;
    if (rc == PT_OK)
        return end_as_member(st, 1);
    undo_request(st);
    st->events_in_txn = 0;
    st->erased_in_txn = 0;
    st->c = &st->own;
    end_turn(st->writer, NULL, 0);
    return rc;
}

/*
 * A request rolled back still saw the batch's other requests (a key they
 * completed, a charge they queued): an answer built on that must not leave
 * before they are durable, so it waits for the batch as a member that
 * changed nothing, and gets the batch's result.
 */
static int writer_rollback(struct pt_store *st)
{
    struct pt_store_writer *w = st->writer;
    undo_request(st);
    st->events_in_txn = 0;
    st->erased_in_txn = 0;
    st->c = &st->own;
    pthread_mutex_lock(&w->mu);
    int others = w->nmembers; /* stable: only the turn's holder adds one */
    pthread_mutex_unlock(&w->mu);
    return others ? end_as_member(st, 0) : end_turn(w, NULL, st->defer != NULL);
}

int pt__sq_in_txn(const struct pt_store *st)
{
    return st->in_txn;
}

int pt__sq_begin(struct pt_store *st)
{
    assert(!st->in_txn); /* transactions do not nest: the writer's turn would deadlock */
    if (st->in_txn)
        return PT_ESTATE; /* (NDEBUG builds) the open transaction stays as it was */
    st->events_in_txn = 0;
    st->erased_in_txn = 0;
    st->keys_pending = 0;
    st->txn_seq++;
    st->deferred = 0;
    int rc = st->writer ? writer_begin(st) : alone_begin(st);
    st->changes_at_begin = sqlite3_total_changes(st->c->db);
    st->in_txn = rc == PT_OK;
    return rc;
}

int pt__sq_commit(struct pt_store *st)
{
    if (!st->in_txn && st->writer)
        return PT_ESTATE; /* no turn held: nothing of ours to commit */
    if (st->keys_pending) {
        /* A key lock that was never written would vanish with this commit
         * while its request goes on as if it held it: a caller's bug, never
         * committed (pt_store_key_take_later). */
        pt_log_error("store: a commit would lose an idempotency key's lock; rolled back");
        pt__sq_rollback(st);
        return PT_ESTORAGE; /* not PT_ESTATE: callers read that as "lock taken over" */
    }
    st->in_txn = 0;
    return st->writer ? writer_commit(st) : alone_commit(st);
}

int pt__sq_rollback(struct pt_store *st)
{
    int was = st->in_txn;
    st->in_txn = 0;
    if (!st->writer)
        return alone_rollback(st); /* as before the writer: whatever is open */
    return was ? writer_rollback(st) : PT_OK;
}

int pt__sq_checkpoint_truncate(struct pt_store *st)
{
    struct pt_store_writer *w = st->writer;
    if (!w)
        return pt__sq_checkpoint_now(st);
    /* On the writer's connection, with its turn and no batch open: no
     * writer of this process is there to wait for. */
    take_turn(w);
    if (w->open)
        commit_batch(w);
    /* Readers with an old snapshot are not waited for with the turn held
     * (every writer would wait too): PT_EBUSY, and it stays due. */
    sqlite3_busy_timeout(w->conn->own.db, 0);
    int rc = pt__sq_checkpoint_now(w->conn);
    sqlite3_busy_timeout(w->conn->own.db, w->busy_timeout_ms);
    release_turn(w);
    return rc;
}

int pt_store_writer_new(const struct pt_store_options *opt, struct pt_store_writer **out,
                        char *errbuf, size_t errlen)
{
    *out = NULL;
    struct pt_store_writer *w = calloc(1, sizeof *w);
    if (!w)
        return PT_ENOMEM;
    int rc = pt_store_sqlite_open(opt, &w->conn, errbuf, errlen);
    if (rc) {
        free(w);
        return rc;
    }
    w->busy_timeout_ms = opt->busy_timeout_ms > 0 ? opt->busy_timeout_ms : 5000;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->turn_cv, NULL);
    pthread_cond_init(&w->done_cv, NULL);
    *out = w;
    return PT_OK;
}

void pt_store_writer_destroy(struct pt_store_writer *w)
{
    if (!w)
        return;
    /* A deferred member nobody flushed is committed, not dropped. */
    take_turn(w);
    if (w->open)
        commit_batch(w);
    pt__sq_close(w->conn);
    pthread_cond_destroy(&w->done_cv);
    pthread_cond_destroy(&w->turn_cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

void pt__sq_attach(struct pt_store *st, struct pt_store_writer *w)
{
    assert(!st->in_txn); /* not in the middle of a transaction of its own */
    st->writer = w;
}

void pt__sq_defer_commit(struct pt_store *st, struct pt_store_commit *ticket)
{
    assert(!ticket || st->writer); /* only a batch can be waited for later */
    st->defer = ticket;
    if (ticket)
        *ticket = (struct pt_store_commit){0};
    st->deferred = 0;
}

int pt__sq_commit_deferred(const struct pt_store *st)
{
    return st->deferred;
}

int pt_store_writer_flush(struct pt_store_writer *w, struct pt_store_commit *ticket)
{
    pthread_mutex_lock(&w->mu);
    int done = ticket->done;
    pthread_mutex_unlock(&w->mu);
    if (!done) {
        take_turn(w);
        pthread_mutex_lock(&w->mu);
        done = ticket->done; /* settled while this thread waited for the turn */
        pthread_mutex_unlock(&w->mu);
        if (!done)
            commit_batch(w);
        release_turn(w);
    }
    return ticket->rc;
}

uint64_t pt_store_writer_batches(struct pt_store_writer *w)
{
    pthread_mutex_lock(&w->mu);
    uint64_t n = w->batches;
    pthread_mutex_unlock(&w->mu);
    return n;
}
