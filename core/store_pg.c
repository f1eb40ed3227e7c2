/*
 * store_pg.c - the store on PostgreSQL (libpq): one database shared by the
 * daemons of a shop's lanes (SPEC section 16).
 *
 * The same interface and the same invariants as store_sqlite.c, by the same
 * means, for many writers at once:
 *   - the idempotency lock is INSERT ... ON CONFLICT DO NOTHING on (scope,
 *     key): a second lane posting the same key waits on the unique index
 *     until the first commits, then finds the key taken and replays;
 *   - order_id and refund_id are UNIQUE, transitions are conditional
 *     UPDATEs, audit rows and events are written in the caller's
 *     transaction, every COMMIT is synchronous_commit = on;
 *   - fulfilment events take their numbers under an advisory lock held to
 *     the commit, so the shop's one feed is read in order by every lane
 *     (sql/pg/001_init.sql), and each commit with events NOTIFYs
 *     payterm_events.
 * Statements are prepared once per connection; parameters go as text
 * (bytea as binary).  A lost connection is reported as PT_EIO (503
 * storage_unavailable at the API) and re-established at the next call
 * outside a transaction.
 *
 * What only SQLite has answers as store.h says: no writer (PostgreSQL
 * batches commits itself), no backup (pg_dump, the server's replication),
 * no PRAGMAs, no WAL wipe.
 */
#include "store_pg_impl.h"

static const char *const stmt_sql[S__COUNT] = {
#define PG__SQL(id, sql) sql,
    PG_STMTS(PG__SQL)
#undef PG__SQL
};

/* ---- parameters and results ---------------------------------------------- */

void pt__pg_a_int(struct args *a, int64_t x)
{
    snprintf(a->num[a->n], sizeof a->num[0], "%lld", (long long)x);
    a->v[a->n] = a->num[a->n];
    a->len[a->n] = 0;
    a->fmt[a->n++] = 0;
}

/* Text as it is; NULL binds SQL NULL. */
void pt__pg_a_text(struct args *a, const char *s)
{
    a->v[a->n] = s;
    a->len[a->n] = 0;
    a->fmt[a->n++] = 0;
}

/* As SQLite's pt__sq_bind_text and store_ops.c's q_opt: "" binds NULL too. */
void pt__pg_a_opt(struct args *a, const char *s)
{
    pt__pg_a_text(a, s && *s ? s : NULL);
}

void pt__pg_a_bytes(struct args *a, const void *p, size_t n)
{
    a->v[a->n] = p ? (const char *)p : "";
    a->len[a->n] = (int)n;
    a->fmt[a->n++] = 1;
}

void pt__pg_a_charge(struct args *a, const struct pt_charge *c, int with_state)
{
    pt__pg_a_text(a, c->order_id);
    pt__pg_a_text(a, c->gateway);
    pt__pg_a_text(a, c->method);
    pt__pg_a_int(a, c->amount);
    pt__pg_a_text(a, c->currency);
    if (with_state)
        pt__pg_a_text(a, pt_state_name(c->state));
    pt__pg_a_text(a, pt_offline_mode_name(c->offline));
    pt__pg_a_opt(a, c->subject);
    pt__pg_a_opt(a, c->payment_code);
    pt__pg_a_opt(a, c->payment_method);
    pt__pg_a_opt(a, c->customer);
    pt__pg_a_opt(a, c->metadata);
}

/* Translates a failed result (or a lost connection) to a pt_err. */
int pt__pg_xlate(struct pg_store *st, const PGresult *res)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? PQresultErrorMessage(res) : PQerrorMessage(st->conn);
    snprintf(st->errmsg, sizeof st->errmsg, "%s", msg && *msg ? msg : "unknown error");
    size_t l = strlen(st->errmsg);
    while (l && (st->errmsg[l - 1] == '\n' || st->errmsg[l - 1] == ' '))
        st->errmsg[--l] = '\0';
    if (PQstatus(st->conn) != CONNECTION_OK || !state)
        return PT_EIO; /* the server is gone: storage unavailable */
    if (!strcmp(state, "23505"))
        return PT_EEXIST;
    if (!strcmp(state, "PT001"))
        return PT_ERANGE; /* refund_exceeds_charge */
    if (!strcmp(state, "PT002"))
        return PT_ESTATE; /* charge_not_refundable */
    if (!strncmp(state, "23", 2) || !strncmp(state, "PT", 2) || !strncmp(state, "22", 2))
        return PT_EINVAL; /* a constraint, a trigger's refusal, bad data */
    if (!strcmp(state, "40001") || !strcmp(state, "40P01") || !strcmp(state, "55P03") ||
        !strcmp(state, "57014"))
        return PT_EBUSY; /* serialization, deadlock, lock or statement timeout */
    if (!strncmp(state, "08", 2) || !strncmp(state, "57P", 3) || !strcmp(state, "53300"))
        return PT_EIO; /* connection, shutdown, too many connections */
    if (!strcmp(state, "53100"))
        return PT_EFULL; /* disk full on the server */
    if (!strcmp(state, "42501"))
        return PT_EPERM;
    return PT_ESTORAGE;
}

static int session_setup(struct pg_store *st);
static int schema_ready(struct pg_store *st, char *errbuf, size_t errlen);

/* After a failed connection attempt, no connection of this process tries
 * again for a while - 1 s, doubling while the server stays gone, up to
 * 16 s: a request falls back at once instead of waiting out
 * connect_timeout (a host that drops packets costs seconds), and only one
 * attempt in a while pays it. */
#define RETRY_MS 1000
#define RETRY_MAX_MS 16000
static _Atomic int64_t down_until; /* monotonic ms; 0: no failure */
static _Atomic int64_t down_backoff;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void server_down(void)
{
    int64_t b = atomic_load(&down_backoff);
    b = b ? (b * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : b * 2) : RETRY_MS;
    atomic_store(&down_backoff, b);
    atomic_store(&down_until, mono_ms() + b);
}

/* The last failure to connect logged by this process: each reason once an
 * outage (a refusal that follows a lost network is logged too), not once a
 * try; forgotten when a connection gets in again. */
static pthread_mutex_t failure_lock = PTHREAD_MUTEX_INITIALIZER;
static char failure_logged[256]; /* pg_store.errmsg's size */

static void log_connect_failure(const char *why)
{
    pthread_mutex_lock(&failure_lock);
    if (strncmp(failure_logged, why, sizeof failure_logged - 1) != 0) {
        snprintf(failure_logged, sizeof failure_logged, "%s", why);
        pt_log_error("store: cannot connect to PostgreSQL: %s", why);
    }
    pthread_mutex_unlock(&failure_lock);
}

static void server_up(void)
{
    atomic_store(&down_backoff, 0);
    atomic_store(&down_until, 0);
    pthread_mutex_lock(&failure_lock);
    failure_logged[0] = '\0';
    pthread_mutex_unlock(&failure_lock);
}

/* Outside a transaction, a broken connection is re-established first, and
 * its session set up again: a new server process knows none of it, and a
 * commit must never run under the server's own synchronous_commit.  A
 * store opened before the server could be reached (connect_later) checks
 * the schema the first time. */
int pt__pg_connected(struct pg_store *st)
{
    if (PQstatus(st->conn) == CONNECTION_OK && st->session_ok && st->schema_ok)
        return PT_OK;
    if (st->in_txn)
        return PT_EIO;
    if (PQstatus(st->conn) != CONNECTION_OK || !st->schema_ok) {
        if (mono_ms() < atomic_load(&down_until)) {
            snprintf(st->errmsg, sizeof st->errmsg,
                     "the PostgreSQL server could not be reached a moment ago");
            return PT_EIO;
        }
    }
    if (PQstatus(st->conn) != CONNECTION_OK) {
        PQreset(st->conn);
        memset(st->prepared, 0, sizeof st->prepared);
        st->session_ok = 0;
        st->listening = 0;
        if (PQstatus(st->conn) != CONNECTION_OK) {
            pt__pg_xlate(st, NULL);
            log_connect_failure(st->errmsg);
            server_down();
            return PT_EIO;
        }
        server_up();
    }
    int rc;
    if (!st->session_ok) {
        if ((rc = session_setup(st))) {
            pt_log_error("store: cannot set up the PostgreSQL session: %s", st->errmsg);
            return rc;
        }
        pt_log_info("store: %s PostgreSQL", st->schema_ok ? "reconnected to" : "connected to");
    }
    if (!st->schema_ok) {
        char err[384];
        st->schema_ok = -1; /* its statements pass through here */
        rc = schema_ready(st, err, sizeof err);
        st->schema_ok = rc == PT_OK;
        if (rc) {
            pt_log_error("store: %s", err);
            server_down(); /* not at every statement */
            return PT_EIO; /* the lane goes on as without a server */
        }
    }
    return PT_OK;
}

/*
 * Runs prepared statement id with a's parameters.  *res: the result (the
 * caller PQclear()s it) or NULL on failure, when the pt_err is returned.
 */
int pt__pg_q(struct pg_store *st, int id, const struct args *a, PGresult **res)
{
    *res = NULL;
    int rc = pt__pg_connected(st);
    if (rc)
        return rc;
    if (!st->prepared[id]) {
        char name[8];
        snprintf(name, sizeof name, "s%d", id);
        PGresult *p = RT(st, PQprepare(st->conn, name, stmt_sql[id], 0, NULL));
        if (PQresultStatus(p) != PGRES_COMMAND_OK) {
            rc = pt__pg_xlate(st, p);
            pt_log_error("store: cannot prepare statement %d: %s", id, st->errmsg);
            PQclear(p);
            return rc;
        }
        PQclear(p);
        st->prepared[id] = 1;
    }
    char name[8];
    snprintf(name, sizeof name, "s%d", id);
    PGresult *r = RT(st, PQexecPrepared(st->conn, name, a ? a->n : 0, a ? a->v : NULL,
                                        a ? a->len : NULL, a ? a->fmt : NULL, 0));
    ExecStatusType s = PQresultStatus(r);
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
        rc = pt__pg_xlate(st, r);
        PQclear(r);
        return rc;
    }
    *res = r;
    return PT_OK;
}

/* Runs a statement for its row count: *changed (may be NULL). */
int pt__pg_run(struct pg_store *st, int id, const struct args *a, int *changed)
{
    PGresult *r;
    int rc = pt__pg_q(st, id, a, &r);
    if (rc)
        return rc;
    if (changed)
        *changed = atoi(PQcmdTuples(r));
    PQclear(r);
    return PT_OK;
}

int64_t pt__pg_col_int(const PGresult *r, int row, int col)
{
    return PQgetisnull(r, row, col) ? 0 : strtoll(PQgetvalue(r, row, col), NULL, 10);
}

void pt__pg_col_text(const PGresult *r, int row, int col, char *dst, size_t cap)
{
    snprintf(dst, cap, "%s", PQgetisnull(r, row, col) ? "" : PQgetvalue(r, row, col));
}

/* One row, one integer (PT_ENOTFOUND when there is no row). */
int pt__pg_scalar(struct pg_store *st, int id, const struct args *a, int64_t *out)
{
    PGresult *r;
    int rc = pt__pg_q(st, id, a, &r);
    if (rc)
        return rc;
    rc = PQntuples(r) ? PT_OK : PT_ENOTFOUND;
    if (rc == PT_OK)
        *out = pt__pg_col_int(r, 0, 0);
    PQclear(r);
    return rc;
}

int pt__pg_exec_sql(struct pg_store *st, const char *sql)
{
    int rc = pt__pg_connected(st);
    if (rc)
        return rc;
    PGresult *r = RT(st, PQexec(st->conn, sql));
    ExecStatusType s = PQresultStatus(r);
    rc = (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) ? PT_OK : pt__pg_xlate(st, r);
    PQclear(r);
    return rc;
}

/* ---- the statement interface store_ops.c runs over (store_impl.h) ---------- */

PT_STORE_SHARED_MAP(shared_stmt);

/* Its parameters are gathered in the connection's qa, and it runs at the
 * first step: one round trip, every row in its result. */
static int pg_prepare(struct pt_store *s, int shared_id, struct pt_q *q)
{
    struct pg_store *st = PG(s);
    q->id = shared_stmt[shared_id];
    q->h = NULL;
    q->row = -1;
    q->nrows = 0;
    st->qa->n = 0;
    return PT_OK;
}

/* Parameter i (from 1) of the statement being run, its place in qa: those
 * not bound before it are NULL. */
static int slot(struct pt_q *q, int i, const char *v, int len, int fmt)
{
    struct args *a = PG(q->st)->qa;
    assert(i >= 1 && i <= MAX_PARAMS);
    for (; a->n < i; a->n++) {
        a->v[a->n] = NULL;
        a->len[a->n] = a->fmt[a->n] = 0;
    }
    a->v[i - 1] = v;
    a->len[i - 1] = len;
    a->fmt[i - 1] = fmt;
    return i - 1;
}

static void pg_bind_int(struct pt_q *q, int i, int64_t v)
{
    struct args *a = PG(q->st)->qa;
    int k = slot(q, i, NULL, 0, 0);
    snprintf(a->num[k], sizeof a->num[0], "%lld", (long long)v);
    a->v[k] = a->num[k];
}

static void pg_bind_text(struct pt_q *q, int i, const char *v)
{
    slot(q, i, v, 0, 0);
}

static void pg_bind_blob(struct pt_q *q, int i, const void *p, size_t len)
{
    slot(q, i, p ? (const char *)p : "", (int)len, 1); /* as pt__pg_a_bytes() */
}

static int pg_step(struct pt_q *cur)
{
    if (!cur->h) {
        PGresult *r;
        int rc = pt__pg_q(PG(cur->st), cur->id, PG(cur->st)->qa, &r);
        if (rc)
            return rc;
        cur->h = r;
        cur->nrows = PQntuples(r);
    }
    return ++cur->row < cur->nrows ? PT_Q_ROW : PT_OK;
}

static int64_t pg_col_int(const struct pt_q *q, int col)
{
    return pt__pg_col_int(q->h, q->row, col);
}

static const char *pg_col_text(const struct pt_q *q, int col)
{
    return PQgetisnull(q->h, q->row, col) ? NULL : PQgetvalue(q->h, q->row, col);
}

static int pg_col_blob(const struct pt_q *q, int col, unsigned char **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (PQgetisnull(q->h, q->row, col))
        return PT_OK;
    size_t len = 0;
    unsigned char *b = PQunescapeBytea((const unsigned char *)PQgetvalue(q->h, q->row, col), &len);
    *out = b ? malloc(len + 1) : NULL;
    if (*out) {
        memcpy(*out, b, len);
        (*out)[len] = '\0';
        *n = len;
    }
    PQfreemem(b);
    return *out ? PT_OK : PT_ENOMEM;
}

static int pg_changes(const struct pt_q *q)
{
    return q->h ? atoi(PQcmdTuples(q->h)) : 0;
}

static void pg_done(struct pt_q *q)
{
    PQclear(q->h);
    q->h = NULL;
}

const struct pt_store_sql pt__pg_sql = {
    .prepare = pg_prepare,
    .bind_int = pg_bind_int,
    .bind_text = pg_bind_text,
    .bind_blob = pg_bind_blob,
    .step = pg_step,
    .col_int = pg_col_int,
    .col_text = pg_col_text,
    .col_blob = pg_col_blob,
    .changes = pg_changes,
    .done = pg_done,
};

/* ---- the lane's offline figures ----------------------------------------------
 *
 * The offline limits bound what one lane queued (sql/pg/003, 004).  The
 * one-statement guarded charge checks them against figures this process
 * keeps for its lane - an upper bound of the lane's queued charges, their
 * number and their amount per currency - so that it neither reads nor
 * writes figures at the server:
 *   - read from the server when unknown - at first, after every new
 *     session - and again whenever the bound would refuse a charge; the
 *     lane's INIT and PROCESSING charges are counted (a first send that
 *     could not be sent comes back to INIT);
 *   - raised by each charge the guarded statement queues, under the lane's
 *     mutex, held across that statement;
 *   - forgotten when a write of any other path that can queue a charge of
 *     the lane ends: the usual path (its figures read in its transaction,
 *     exact, under the server's lane lock as well) and an INIT charge
 *     inserted (the fallback's move) hold the mutex from that statement to
 *     their commit or rollback.
 * Other lanes' daemons only take the lane's charges out of the queue (or
 * return a first send to it), so the bound holds for one daemon per lane
 * id, which is how lanes are run (SPEC 16); a second daemon under the same
 * lane id keeps a bound of its own and the two may together pass the
 * limits.  The usual path may hold rows a guarded statement of its lane
 * waits for (an order retried under another key), so it waits for the
 * mutex LANE_WAIT_MS at most and then answers PT_EBUSY, never a deadlock.
 */
enum { LANES_KEPT = 32, LANE_WAIT_MS = 1000, LANE_DOUBTS = 16 };

/*
 * What a connection lost mid-write may have queued.  A guarded statement,
 * or the COMMIT of a transaction that held the lane, was sent when the
 * connection went: the server process behind it may still commit it (its
 * statement waiting on a lock or flushing, or its request still on the
 * way to it), after the daemon has counted its lane again - which would
 * let one charge too many in.  So what it may have queued is counted in
 * the lane's figures, by the bound and by the usual path's exact count
 * alike, until that process is gone: the next count ends it
 * (pg_terminate_backend; the role may end its own sessions) and waits for
 * it, so that whatever it did is settled before the count is read.  The
 * process is known by its pid and its start, read from the server when
 * the session is set up (a pid may be reused).  One query, and only while
 * something is in doubt.  A transaction that held the lane's server lock
 * and queued nothing is ended the same way, so that it does not hold the
 * lock until the server's keepalives give up on it.  Doubts that cannot
 * be settled (the role cannot read pg_stat_activity, say) stay counted,
 * and the log says why; a daemon that restarts forgets them.
 */
struct doubt {
    int pid;
    int64_t started;
    struct queued q;
};

struct lane_figures {
    pthread_mutex_t mu;
    char lane[64];
    atomic_int known; /* 0: read them from the server before use */
    struct queued q;
    int ndoubts;
    struct doubt doubts[LANE_DOUBTS];
    struct queued stuck; /* in doubt, not followed: counted to the end */
    int doubts_lost;     /* not even that (more currencies than kept) */
    int settle_logged;
};

static struct lane_figures lanes_kept[LANES_KEPT];
static int lanes_used;
static pthread_mutex_t lanes_lock = PTHREAD_MUTEX_INITIALIZER;

/* The process's figures of lane (made on first use); NULL when LANES_KEPT
 * lanes are kept already (tests and benchmarks open many): its guarded
 * charges then take the usual path. */
static struct lane_figures *lane_figures_of(const char *lane)
{
    struct lane_figures *f = NULL;
    pthread_mutex_lock(&lanes_lock);
    for (int i = 0; i < lanes_used && !f; i++)
        if (strcmp(lanes_kept[i].lane, lane) == 0)
            f = &lanes_kept[i];
    if (!f && lanes_used < LANES_KEPT &&
        pthread_mutex_init(&lanes_kept[lanes_used].mu, NULL) == 0) {
        f = &lanes_kept[lanes_used++];
        snprintf(f->lane, sizeof f->lane, "%s", lane);
    }
    pthread_mutex_unlock(&lanes_lock);
    return f;
}

/* The slot of currency cur in q, made if there is room; -1 if not. */
static int queued_currency(struct queued *q, const char *cur)
{
    for (int i = 0; i < q->n; i++)
        if (strcmp(q->cur[i], cur) == 0)
            return i;
    if (q->n == LANE_CURRENCIES || strlen(cur) != 3)
        return -1;
    memcpy(q->cur[q->n], cur, 4);
    q->total[q->n] = 0;
    return q->n++;
}

/* count more charges of amount in cur: 0, or -1 when its currency has no
 * room (more currencies than kept). */
int pt__pg_queued_add(struct queued *q, const char *cur, int64_t count, int64_t amount)
{
    int k = queued_currency(q, cur);
    if (k < 0)
        return -1;
    q->count += count;
    q->total[k] += amount;
    return 0;
}

/* Adds all of what to q: 0, or -1 as queued_add. */
static int queued_merge(struct queued *q, const struct queued *what)
{
    int rc = 0;
    for (int i = 0; i < what->n; i++)
        rc |= pt__pg_queued_add(q, what->cur[i], 0, what->total[i]);
    q->count += what->count;
    return rc;
}

/* A write of this connection whose outcome is unknown, which may have
 * queued what, or held the lane's lock (f->mu held): in doubt until its
 * server process is gone.  One that cannot be followed (its process not
 * known, or LANE_DOUBTS open already) stays counted until the daemon
 * restarts. */
static void doubt_add(struct pg_store *st, struct lane_figures *f, const struct queued *what)
{
    f->known = 0;
    if (f->ndoubts < LANE_DOUBTS && st->backend_pid && st->backend_start) {
        f->doubts[f->ndoubts++] =
            (struct doubt){.pid = st->backend_pid, .started = st->backend_start, .q = *what};
        pt_log_warn("store: lane \"%s\": the connection was lost mid-write; %lld charge(s) "
                    "counted as queued until server process %d has gone",
                    f->lane, (long long)what->count, st->backend_pid);
        return;
    }
    if (what->count == 0)
        return; /* nothing to count; its lock, if any, goes with the server's keepalives */
    if (queued_merge(&f->stuck, what))
        f->doubts_lost = 1;
    pt_log_error("store: lane \"%s\": the connection was lost mid-write and its server process "
                 "cannot be followed (%s): %lld charge(s) counted as queued until the daemon "
                 "restarts",
                 f->lane, f->ndoubts == LANE_DOUBTS ? "too many in doubt at once" : "not known",
                 (long long)what->count);
}

/* The same for one charge of amount in cur (f->mu held). */
void pt__pg_doubt_one(struct pg_store *st, struct lane_figures *f, const char *cur, int64_t amount)
{
    struct queued one = {0};
    pt__pg_queued_add(&one, cur, 1, amount);
    doubt_add(st, f, &one);
}

/*
 * Whether doubt d's server process has gone, ending it first: 1 gone, 0
 * not (yet), or a pt_err.  Its row read by pid; another start means the
 * pid was given to a new process (gone); a start not shown (another role's
 * session) cannot be told (not gone).  On PostgreSQL 13 the end is not
 * waited for: gone when a later look finds no such process.
 */
static int doubt_gone(struct pg_store *st, const struct doubt *d)
{
    struct args a = {0};
    pt__pg_a_int(&a, d->pid);
    pt__pg_a_int(&a, d->started);
    PGresult *r;
    int waits = PQserverVersion(st->conn) >= 140000; /* else "t": only signalled */
    int rc = pt__pg_q(st, waits ? S_DOUBT_END : S_DOUBT_END_13, &a, &r);
    if (rc)
        return rc;
    int gone = PQntuples(r) == 0 ||
               (!PQgetisnull(r, 0, 0) && pt__pg_col_int(r, 0, 0) != d->started) ||
               (waits && !PQgetisnull(r, 0, 1) && strcmp(PQgetvalue(r, 0, 1), "t") == 0);
    PQclear(r);
    return gone;
}

/*
 * Ends the server processes in doubt and drops those that have gone (f->mu
 * held).  One statement each, the activity snapshot cleared before each
 * (a transaction keeps it; a pid may be reused meanwhile), inside a
 * savepoint in a transaction (a refusal must not abort the caller's).
 * PT_OK - doubts that cannot be settled (the role may not read
 * pg_stat_activity or end its sessions) stay counted, and the log says
 * why - PT_EIO without a server, or PT_EBUSY when a lost write's charges
 * could not even be counted.
 */
int pt__pg_doubts_settle(struct pg_store *st, struct lane_figures *f)
{
    if (f->doubts_lost) {
        snprintf(st->errmsg, sizeof st->errmsg,
                 "lane \"%s\": lost connections' charges in more currencies than kept; restart "
                 "the daemon",
                 f->lane);
        return PT_EBUSY;
    }
    if (f->ndoubts == 0)
        return PT_OK;
    int rc = st->in_txn ? pt__pg_exec_sql(st, "SAVEPOINT payterm_settle") : PT_OK;
    int kept = 0, i = 0;
    for (; rc == PT_OK && i < f->ndoubts; i++) {
        rc = pt__pg_exec_sql(st, "SELECT pg_stat_clear_snapshot()");
        int gone = rc ? rc : doubt_gone(st, &f->doubts[i]);
        if (gone < 0) {
            rc = gone;
            break;
        }
        if (!gone)
            f->doubts[kept++] = f->doubts[i];
        else
            pt_log_info("store: lane \"%s\": server process %d has gone; its charges are counted "
                        "from the server again",
                        f->lane, f->doubts[i].pid);
    }
    for (; i < f->ndoubts; i++) /* not looked at: kept */
        f->doubts[kept++] = f->doubts[i];
    f->ndoubts = kept;
    if (st->in_txn && PQstatus(st->conn) == CONNECTION_OK)
        pt__pg_exec_sql(st, rc ? "ROLLBACK TO SAVEPOINT payterm_settle"
                               : "RELEASE SAVEPOINT payterm_settle");
    if (rc == PT_EIO)
        return rc;
    if (rc) {
        if (!f->settle_logged)
            pt_log_error("store: lane \"%s\": cannot end the server processes of lost "
                         "connections (the role must read pg_stat_activity and may end its own "
                         "sessions): %s; their charges stay counted as queued",
                         f->lane, st->errmsg);
        f->settle_logged = 1;
        return PT_OK;
    }
    f->settle_logged = 0;
    return PT_OK;
}

/* What the doubts still open may have queued (f->mu held, doubts_settle
 * first): the number, and the amount in cur. */
void pt__pg_doubts_in(const struct lane_figures *f, const char *cur, int64_t *count,
                      int64_t *amount)
{
    for (int i = 0; i <= f->ndoubts; i++) {
        const struct queued *q = i < f->ndoubts ? &f->doubts[i].q : &f->stuck;
        *count += q->count;
        for (int k = 0; k < q->n; k++)
            if (strcmp(q->cur[k], cur) == 0)
                *amount += q->total[k];
    }
}

/* Reads the lane's figures from the server (f->mu held), with what is in
 * doubt.  Settled first: a process seen done before the count is read has
 * its commit, if any, in that count. */
static int pt__pg_lane_recount(struct pg_store *st, struct lane_figures *f)
{
    f->known = 0;
    memset(&f->q, 0, sizeof f->q);
    int rc = pt__pg_doubts_settle(st, f);
    if (rc)
        return rc == PT_EBUSY ? PT_EAGAIN : rc; /* the usual path answers it */
    PGresult *r;
    if ((rc = pt__pg_q(st, S_LANE_BOUND, NULL, &r)))
        return rc;
    for (int i = 0; i < PQntuples(r); i++)
        if (pt__pg_queued_add(&f->q, PQgetvalue(r, i, 0), pt__pg_col_int(r, i, 1),
                              pt__pg_col_int(r, i, 2))) {
            PQclear(r);
            return PT_EAGAIN; /* more currencies than kept: not known */
        }
    PQclear(r);
    for (int i = 0; i <= f->ndoubts; i++)
        if (queued_merge(&f->q, i < f->ndoubts ? &f->doubts[i].q : &f->stuck))
            return PT_EAGAIN;
    f->known = 1;
    return PT_OK;
}

/* Room for one more charge of amount in cur under the limits? */
static int pt__pg_lane_room(struct lane_figures *f, const char *cur, int64_t amount,
                            int64_t max_count, int64_t max_total)
{
    int k = queued_currency(&f->q, cur);
    return f->known && k >= 0 && f->q.count < max_count && f->q.total[k] + amount <= max_total;
}

/* Holds the lane's mutex to the end of this transaction (or of the
 * statement, outside one): PT_OK, or PT_EBUSY after LANE_WAIT_MS. */
int pt__pg_lane_hold(struct pg_store *st)
{
    if (!st->figs || st->figs_held)
        return PT_OK;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += (long)(LANE_WAIT_MS % 1000) * 1000000L;
    t.tv_sec += LANE_WAIT_MS / 1000 + t.tv_nsec / 1000000000L;
    t.tv_nsec %= 1000000000L;
    int e;
    while ((e = pthread_mutex_timedlock(&st->figs->mu, &t)) == EINTR)
        ;
    if (e) {
        snprintf(st->errmsg, sizeof st->errmsg,
                 "another request of lane \"%s\" held its offline queue for %d ms", st->lane_id,
                 LANE_WAIT_MS);
        return PT_EBUSY;
    }
    st->figs_held = 1;
    return PT_OK;
}

/* The end of what pt__pg_lane_hold() held: the figures are read again next time. */
void pt__pg_lane_release(struct pg_store *st)
{
    if (!st->figs_held)
        return;
    st->figs->known = 0;
    st->figs_held = 0;
    pthread_mutex_unlock(&st->figs->mu);
}

/*
 * What every session of the store needs, on its first connection and after
 * every reconnection: commits durable on return whatever the server's
 * default (SPEC section 16), READ COMMITTED whatever the role's default
 * (the lane's limits read a fresh snapshot, sql/pg/003), quiet notices and
 * its lane (payterm.lane: the lane the charges it queues count against,
 * sql/pg/003).
 */
static int session_setup(struct pg_store *st)
{
    static const char sql[] =
        "SELECT set_config('synchronous_commit', 'on', false),"
        " set_config('default_transaction_isolation', 'read committed', false),"
        " set_config('client_min_messages', 'warning', false),"
        " set_config('idle_in_transaction_session_timeout', '60s', false),"
        " set_config('payterm.lane', $1::text, false)";
    const char *lane = st->lane_id;
    PGresult *r = RT(st, PQexecParams(st->conn, sql, 1, NULL, &lane, NULL, NULL, 0));
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        int rc = pt__pg_xlate(st, r);
        PQclear(r);
        return rc;
    }
    PQclear(r);
    st->session_ok = 1;
    /* Its server process, to end it if this connection is lost mid-write
     * (PQbackendPID says 0 once it is; a pooler would give its own key):
     * the role sees its own sessions in pg_stat_activity. */
    st->backend_pid = 0;
    st->backend_start = 0;
    r = RT(st, PQexec(st->conn, "SELECT pg_backend_pid(), (extract(epoch FROM backend_start) "
                                "* 1000000)::bigint FROM pg_stat_activity"
                                " WHERE pid = pg_backend_pid()"));
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
        (int)pt__pg_col_int(r, 0, 0) != PQbackendPID(st->conn)) {
        /* A pooler answered for the server (its own key): the process is
         * not this connection's for good, and must never be ended. */
        static atomic_int pooler_logged;
        if (!atomic_exchange(&pooler_logged, 1))
            pt_log_warn("store: a connection pooler sits between this lane and PostgreSQL: a "
                        "write lost on the way stays counted in the lane's offline figures "
                        "until the daemon restarts");
    } else if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
        st->backend_pid = (int)pt__pg_col_int(r, 0, 0);
        st->backend_start = pt__pg_col_int(r, 0, 1);
    } else if (PQstatus(st->conn) != CONNECTION_OK) {
        int rc = pt__pg_xlate(st, r);
        PQclear(r);
        st->session_ok = 0;
        return rc;
    }
    PQclear(r);
    if (st->figs) /* a new server, or a database restored: read them again */
        atomic_store(&st->figs->known, 0);
    return PT_OK;
}

/* The whole guarded new charge queued offline as one statement: one round
 * trip, one durable commit (autocommit).  Every case but the plain one -
 * the key used before, the order taken (a unique violation: the statement
 * and all it wrote are undone), the queue full - is PT_EAGAIN, and the
 * caller's usual path answers it. */
int pt__pg_charge_queue_guarded(struct pt_store *s, const struct pt_store_queued_charge *g,
                                int64_t now)
{
    struct pg_store *st = PG(s);
    if (st->in_txn)
        return PT_EUNSUPPORTED; /* its own transaction, or nothing */
    const struct pt_charge *c = g->c;
    char who[128];
    if (st->lane_id[0])
        snprintf(who, sizeof who, "%s@%s", g->actor, st->lane_id);
    else
        snprintf(who, sizeof who, "%s", g->actor);
    struct args a = {0};
    pt__pg_a_charge(&a, c, 0);
    pt__pg_a_int(&a, c->next_attempt_at);
    pt__pg_a_int(&a, now);
    pt__pg_a_text(&a, g->scope);
    pt__pg_a_text(&a, g->key);
    pt__pg_a_bytes(&a, g->hash, 32);
    pt__pg_a_text(&a, g->body_head);
    pt__pg_a_text(&a, g->body_tail);
    pt__pg_a_text(&a, who);
    pt__pg_a_int(&a, g->expires_at);
    struct lane_figures *f = st->figs;
    if (!f)
        return PT_EAGAIN;
    int rc = pt__pg_connected(st); /* not under the mutex; and nothing sent before it */
    if (rc)
        return rc;
    pthread_mutex_lock(&f->mu);
    if (!pt__pg_lane_room(f, c->currency, c->amount, g->max_count, g->max_total) &&
        (rc = pt__pg_lane_recount(st, f)) == PT_OK &&
        !pt__pg_lane_room(f, c->currency, c->amount, g->max_count, g->max_total))
        rc = PT_EAGAIN; /* it may still have room: the usual path reads exactly */
    PGresult *r = NULL;
    int sent = rc == PT_OK;
    if (sent && (rc = pt__pg_q(st, S_CHARGE_QUEUE_GUARDED, &a, &r)) == PT_OK) {
        rc = PQntuples(r) == 1 ? PT_OK : PT_EAGAIN;
        if (rc == PT_OK) {
            g->c->id = pt__pg_col_int(r, 0, 0);
            g->c->created_at = g->c->updated_at = now;
            pt__pg_queued_add(&f->q, c->currency, 1, c->amount); /* lane_room made its slot */
        }
        PQclear(r);
    } else if (sent && rc == PT_EIO) {
        /* The connection lost with the statement sent (or being sent):
         * its server process may still commit it. */
        pt__pg_doubt_one(st, f, c->currency, c->amount);
    } else if (rc != PT_EAGAIN && rc != PT_EEXIST) {
        f->known = 0;
    }
    pthread_mutex_unlock(&f->mu);
    return rc == PT_EEXIST ? PT_EAGAIN : rc;
}

/* ---- open, schema, transactions ------------------------------------------ */

const char *pt__pg_errmsg(struct pt_store *s)
{
    return PG(s)->errmsg[0] ? PG(s)->errmsg : PQerrorMessage(PG(s)->conn);
}

int pt__pg_schema_version(struct pt_store *s, int *version)
{
    struct pg_store *st = PG(s);
    *version = 0;
    int rc = pt__pg_connected(st);
    if (rc)
        return rc;
    PGresult *r = RT(st, PQexec(st->conn, "SELECT coalesce(max(version), 0) FROM payterm_schema"));
    if (PQresultStatus(r) == PGRES_TUPLES_OK) {
        *version = (int)pt__pg_col_int(r, 0, 0);
        PQclear(r);
        return PT_OK;
    }
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    rc = state && !strcmp(state, "42P01") ? PT_OK : pt__pg_xlate(st, r); /* no table yet: 0 */
    PQclear(r);
    return rc;
}

/* Applies sql/pg/ up to version, each migration in one transaction with its
 * row in payterm_schema, under an advisory lock: lanes starting together
 * apply each migration once. */
int pt__pg_migrate_to(struct pt_store *s, int version)
{
    struct pg_store *st = PG(s);
    int cur = 0;
    int rc = pt__pg_exec_sql(st, "CREATE TABLE IF NOT EXISTS payterm_schema ("
                                 " version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                                 " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())");
    if (rc || (rc = pt__pg_schema_version(s, &cur)))
        return rc;
    if (cur > pt_pg_migrations_count)
        return PT_ETOONEW;
    for (int v = cur + 1; v <= version && v <= pt_pg_migrations_count; v++) {
        const struct pt_migration *m = &pt_pg_migrations[v - 1];
        if ((rc = pt__pg_exec_sql(st, "BEGIN")))
            return rc;
        if ((rc = pt__pg_exec_sql(st, "SELECT pg_advisory_xact_lock(7302062520030)"))) {
            pt__pg_exec_sql(st, "ROLLBACK");
            return rc;
        }
        int now_at = 0;
        PGresult *r =
            RT(st, PQexec(st->conn, "SELECT coalesce(max(version), 0) FROM payterm_schema"));
        if (PQresultStatus(r) == PGRES_TUPLES_OK)
            now_at = (int)pt__pg_col_int(r, 0, 0);
        PQclear(r);
        if (now_at >= v) { /* another lane applied it meanwhile */
            pt__pg_exec_sql(st, "COMMIT");
            continue;
        }
        char row[160];
        snprintf(row, sizeof row, "INSERT INTO payterm_schema (version, name) VALUES (%d, '%s')", v,
                 m->name);
        if ((rc = pt__pg_exec_sql(st, m->sql)) || (rc = pt__pg_exec_sql(st, row)) ||
            (rc = pt__pg_exec_sql(st, "COMMIT"))) {
            pt_log_error("store: PostgreSQL migration %s failed: %s", m->name, st->errmsg);
            pt__pg_exec_sql(st, "ROLLBACK");
            return rc;
        }
        pt_log_info("store: applied PostgreSQL migration %s", m->name);
    }
    return PT_OK;
}

/* Reads the password file (first line), refusing one others may read. */
static int read_password(const char *path, char *pw, size_t cap, char *errbuf, size_t errlen)
{
    struct stat sb;
    FILE *f = fopen(path, "r");
    if (!f || fstat(fileno(f), &sb) != 0) {
        if (errbuf)
            snprintf(errbuf, errlen, "store.password_file %s: %s", path, strerror(errno));
        if (f)
            fclose(f);
        return PT_ECONFIG;
    }
    if (sb.st_mode & 077) {
        fclose(f);
        if (errbuf)
            snprintf(errbuf, errlen,
                     "store.password_file %s: mode %03o lets others read it; chmod 600 it", path,
                     (unsigned)(sb.st_mode & 0777));
        return PT_ECONFIG;
    }
    if (!fgets(pw, (int)cap, f)) {
        pw[0] = '\0';
    }
    fclose(f);
    pw[strcspn(pw, "\r\n")] = '\0';
    if (!pw[0]) {
        if (errbuf)
            snprintf(errbuf, errlen, "store.password_file %s is empty", path);
        return PT_ECONFIG;
    }
    return PT_OK;
}

static void wipe(void *p, size_t n)
{
    volatile unsigned char *v = p;
    while (n--)
        *v++ = 0;
}

/*
 * The server's answers that no wait mends: no such role or a wrong
 * password (28000, 28P01), no such database (3D000), no right to connect
 * to it (42501) - a mistake in the lane's configuration.  Anything else
 * (too many clients, starting up, a pooler whose server is gone, no
 * answer) is an outage.  libpq keeps the message of every try of one
 * connection (each host, TLS then plain): a refusal only when every try
 * the server answered was refused - "hostssl" only in pg_hba.conf, a full
 * server: 53300 for the TLS try, 28000 for the plain one, an outage.
 * Returns the first refused try's line, or NULL.
 */
static const char *refusal_in(const char *msg)
{
    static const char *const codes[] = {"28000", "28P01", "3D000", "42501"};
    const char *first = NULL;
    for (const char *line = msg; *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        /* A verbose server line: "...failed: FATAL:  28P01: password ..." */
        for (size_t k = 0; k + 10 <= n; k++) {
            const char *c = line + k + 3;
            if (memcmp(line + k, ":  ", 3) != 0 || c[5] != ':' || c[6] != ' ')
                continue;
            if (strspn(c, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ") != 5)
                continue;
            int refusal = 0;
            for (size_t r = 0; r < sizeof codes / sizeof *codes; r++)
                refusal |= memcmp(c, codes[r], 5) == 0;
            if (!refusal)
                return NULL; /* one try met something waiting mends */
            if (!first)
                first = line;
            break;
        }
        line += n + (end != NULL);
    }
    return first;
}

/*
 * After a connection that failed quickly (a server that answers answers
 * at once; one that took about connect_timeout met no one: no second
 * wait), once more, with the SQLSTATE in the server's messages (libpq
 * leaves it out by default, and the words are in the server's language).
 * Returns that connection when it got in (the server was just starting);
 * else NULL, with why set to the server's refusal if it was one, "" if not.
 */
static PGconn *connect_again(const char *const *keys, const char *const *vals, char *why,
                             size_t cap)
{
    why[0] = '\0';
    PGconn *c = PQconnectStartParams(keys, vals, 1);
    if (!c)
        return NULL;
    PQsetErrorVerbosity(c, PQERRORS_VERBOSE);
    int64_t deadline = mono_ms() + 5000;
    PostgresPollingStatusType ps = PGRES_POLLING_WRITING;
    while (PQstatus(c) != CONNECTION_BAD && ps != PGRES_POLLING_OK && ps != PGRES_POLLING_FAILED) {
        struct pollfd p = {.fd = PQsocket(c),
                           .events = ps == PGRES_POLLING_READING ? POLLIN : POLLOUT};
        int64_t left = deadline - mono_ms();
        if (p.fd < 0 || left <= 0)
            break;
        int n = poll(&p, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        ps = PQconnectPoll(c);
    }
    if (PQstatus(c) == CONNECTION_OK) {
        PQsetErrorVerbosity(c, PQERRORS_DEFAULT);
        return c;
    }
    const char *line = ps == PGRES_POLLING_FAILED ? refusal_in(PQerrorMessage(c)) : NULL;
    if (line) {
        snprintf(why, cap, "%s", line);
        why[strcspn(why, "\n")] = '\0';
    } else if (ps == PGRES_POLLING_FAILED && PQconnectionNeedsPassword(c)) {
        /* libpq's own refusal, before the server's: "fe_sendauth: no
         * password supplied" */
        snprintf(why, cap, "the server asks for a password and none is given");
    }
    PQfinish(c);
    return NULL;
}

/* The server's warnings (client_min_messages) to the log, not stderr. */
static void pg_notice(void *arg, const char *msg)
{
    (void)arg;
    int n = (int)strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        n--;
    pt_log_warn("store: PostgreSQL says: %.*s", n, msg);
}

void pt__pg_close(struct pt_store *s)
{
    struct pg_store *st = PG(s);
    if (st->conn)
        PQfinish(st->conn); /* a transaction still open is rolled back */
    pt__pg_lane_release(st);
    free(st);
}

int pt_store_pg_open(const struct pt_store_options *opt, struct pt_store **out, char *errbuf,
                     size_t errlen)
{
    *out = NULL;
    if (!opt->dsn || !*opt->dsn) {
        if (errbuf)
            snprintf(errbuf, errlen, "store.dsn: required with store.backend \"postgresql\"");
        return PT_ECONFIG;
    }
    struct pg_store *st = calloc(1, sizeof *st);
    if (!st) {
        if (errbuf)
            snprintf(errbuf, errlen, "out of memory");
        return PT_ENOMEM;
    }
    st->head.ops = &pt__pg_ops;
    snprintf(st->lane_id, sizeof st->lane_id, "%s", opt->lane_id ? opt->lane_id : "");
    st->figs = lane_figures_of(st->lane_id);
    st->claim_timeout_ms = opt->claim_timeout_ms > 0 ? opt->claim_timeout_ms : 60000;
    char pw[256] = "";
    int rc;
    if (opt->password_file &&
        (rc = read_password(opt->password_file, pw, sizeof pw, errbuf, errlen))) {
        wipe(pw, sizeof pw);
        free(st);
        return rc;
    }
    /* The timeouts first, so that the DSN may set its own: a server gone
     * must cost a request seconds, not the kernel's TCP patience - at
     * connect, and on a connection whose host stopped answering (a switch
     * without power): tcp_user_timeout gives up on data unacknowledged for
     * 4 s, the keepalives find an idle connection dead in about 20 s.  (A
     * slow server still acknowledges: only an unreachable host trips it.) */
    const char *keys[] = {"connect_timeout",     "tcp_user_timeout",        "keepalives_idle",
                          "keepalives_interval", "keepalives_count",        "dbname",
                          "application_name",    pw[0] ? "password" : NULL, NULL};
    const char *vals[] = {"5", "4000", "10", "3", "3", opt->dsn, "payterm", pw[0] ? pw : NULL,
                          NULL};
    int64_t t0 = mono_ms();
    st->conn = PQconnectdbParams(keys, vals, 1);
    char why[384] = "";
    if (st->conn && PQstatus(st->conn) != CONNECTION_OK && mono_ms() - t0 < 4000) {
        PGconn *again = connect_again(keys, vals, why, sizeof why);
        if (again) {
            PQfinish(st->conn);
            st->conn = again;
        }
    }
    wipe(pw, sizeof pw);
    if (st->conn) /* kept by PQreset */
        PQsetNoticeProcessor(st->conn, pg_notice, NULL);
    st->readonly = opt->readonly;
    st->existing = opt->existing;
    if (why[0]) {
        if (errbuf)
            snprintf(errbuf, errlen,
                     "store.dsn: the PostgreSQL server refused this lane (check the DSN's user "
                     "and database, and store.password_file): %s",
                     why);
        pt__pg_close((struct pt_store *)(void *)st);
        return PT_ECONFIG;
    }
    if (st->conn && PQstatus(st->conn) != CONNECTION_OK && opt->connect_later) {
        pt__pg_xlate(st, NULL);
        log_connect_failure(st->errmsg); /* the reason, once: the lane goes on without */
        server_down();
        *out = (struct pt_store *)(void *)st; /* connects at its first use (connected) */
        return PT_OK;
    }
    if (!st->conn || PQstatus(st->conn) != CONNECTION_OK) {
        if (errbuf) {
            char msg[384];
            snprintf(msg, sizeof msg, "%s", st->conn ? PQerrorMessage(st->conn) : "out of memory");
            msg[strcspn(msg, "\n")] = '\0';
            snprintf(errbuf, errlen, "cannot connect to PostgreSQL (store.dsn): %s", msg);
        }
        pt__pg_close((struct pt_store *)(void *)st);
        return PT_EIO;
    }
    server_up(); /* this process reaches it again */
    /* Every commit durable on return (SPEC section 16), whatever the
     * server's default.  (No lock_timeout is set: a statement waits for
     * the locks it needs as long as the server's own setting lets it.) */
    if ((rc = session_setup(st))) {
        if (errbuf)
            snprintf(errbuf, errlen, "cannot configure the PostgreSQL session: %s", st->errmsg);
        pt__pg_close((struct pt_store *)(void *)st);
        return rc;
    }
    st->schema_ok = -1;
    if ((rc = schema_ready(st, errbuf, errlen))) {
        pt__pg_close((struct pt_store *)(void *)st);
        return rc;
    }
    st->schema_ok = 1;
    *out = (struct pt_store *)(void *)st;
    return PT_OK;
}

/* The schema's version known to this payterm, migrated up to the newest
 * unless the store was opened readonly or existing. */
static int schema_ready(struct pg_store *st, char *errbuf, size_t errlen)
{
    int version = 0;
    int rc = pt__pg_schema_version((struct pt_store *)(void *)st, &version);
    if (rc) {
        if (errbuf)
            snprintf(errbuf, errlen, "cannot read the PostgreSQL schema version: %s", st->errmsg);
        return rc;
    }
    if (version > pt_pg_migrations_count) {
        if (errbuf)
            snprintf(errbuf, errlen,
                     "the PostgreSQL database has schema version %d but this payterm only "
                     "knows up to %d: upgrade payterm on this lane",
                     version, pt_pg_migrations_count);
        return PT_ETOONEW;
    }
    if (!st->readonly && !st->existing &&
        (rc = pt__pg_migrate_to((struct pt_store *)(void *)st, pt_pg_migrations_count))) {
        if (errbuf)
            snprintf(errbuf, errlen, "cannot migrate the PostgreSQL database to version %d: %s",
                     pt_pg_migrations_count, st->errmsg);
        return rc;
    }
    return PT_OK;
}

int pt__pg_pragma_int(struct pt_store *s, const char *name, int *value)
{
    (void)s;
    (void)name;
    (void)value;
    return PT_EUNSUPPORTED;
}

void pt__pg_set_event_hook(struct pt_store *s, void (*fn)(void *ctx), void *ctx)
{
    PG(s)->event_hook = fn;
    PG(s)->event_hook_ctx = ctx;
}

int pt__pg_in_txn(const struct pt_store *s)
{
    return ((const struct pg_store *)(const void *)s)->in_txn;
}

int pt__pg_begin(struct pt_store *s)
{
    struct pg_store *st = PG(s);
    if (st->in_txn)
        return PT_EINVAL;
    int rc = pt__pg_exec_sql(st, "BEGIN");
    if (rc)
        return rc;
    st->in_txn = 1;
    st->events_in_txn = 0;
    memset(&st->txn_queued, 0, sizeof st->txn_queued);
    return PT_OK;
}

int pt__pg_commit(struct pt_store *s)
{
    struct pg_store *st = PG(s);
    if (!st->in_txn)
        return PT_EINVAL;
    PGresult *r = RT(st, PQexec(st->conn, "COMMIT"));
    int rc = PQresultStatus(r) == PGRES_COMMAND_OK ? PT_OK : pt__pg_xlate(st, r);
    /* "COMMIT" of a transaction that failed answers ROLLBACK. */
    if (rc == PT_OK && strcmp(PQcmdStatus(r), "COMMIT") != 0) {
        snprintf(st->errmsg, sizeof st->errmsg, "the transaction was rolled back");
        rc = PT_ESTORAGE;
    }
    PQclear(r);
    st->in_txn = 0;
    if (rc == PT_EIO && st->figs_held) /* the COMMIT may still go through */
        doubt_add(st, st->figs, &st->txn_queued);
    pt__pg_lane_release(st);
    if (rc == PT_OK && st->events_in_txn && st->event_hook)
        st->event_hook(st->event_hook_ctx);
    st->events_in_txn = 0;
    return rc;
}

int pt__pg_rollback(struct pt_store *s)
{
    struct pg_store *st = PG(s);
    if (!st->in_txn)
        return PT_OK;
    st->in_txn = 0;
    st->events_in_txn = 0;
    if (PQstatus(st->conn) == CONNECTION_OK) /* else dropped with the connection */
        PQclear(RT(st, PQexec(st->conn, "ROLLBACK")));
    /* Lost before or during the ROLLBACK: its server process may sit in
     * the transaction, the lane's lock held, until ended. */
    if (PQstatus(st->conn) != CONNECTION_OK && st->figs_held)
        doubt_add(st, st->figs, &st->txn_queued);
    pt__pg_lane_release(st);
    return PT_OK;
}

/* The writer and its group commit are SQLite's; PostgreSQL commits each
 * connection's transaction itself (and groups concurrent commits). */
void pt__pg_attach(struct pt_store *s, struct pt_store_writer *w)
{
    (void)s;
    (void)w;
}

void pt__pg_defer_commit(struct pt_store *s, struct pt_store_commit *ticket)
{
    (void)s;
    (void)ticket;
}

int pt__pg_commit_deferred(const struct pt_store *s)
{
    (void)s;
    return 0;
}

int pt__pg_backup(struct pt_store *s, const char *dest)
{
    (void)dest;
    snprintf(PG(s)->errmsg, sizeof PG(s)->errmsg,
             "backups of the PostgreSQL store are the server's (pg_dump, replication)");
    return PT_EUNSUPPORTED;
}

void pt__pg_note_erased(struct pt_store *s)
{
    (void)s;
}

int pt__pg_checkpoint_truncate(struct pt_store *s)
{
    (void)s;
    return PT_OK;
}

/* True while the server answers. */
int pt__pg_writable(struct pt_store *s)
{
    struct pg_store *st = PG(s);
    if (st->in_txn)
        return PQstatus(st->conn) == CONNECTION_OK;
    return pt__pg_exec_sql(st, "SELECT 1") == PT_OK;
}
