/*
 * store_sqlite.c - the SQLite implementation of store.h (store_impl.h);
 * store.c picks it at open and forwards every call to it.
 *
 * This file is the connection: open, its files, the schema, statements,
 * health and backup; store_sqlite_impl.h says where the rest is.  The SQL
 * text is in store_sqlite_sql.h and sql/ (the PostgreSQL store's in
 * store_pg_sql.h and sql/pg/).  Statements are prepared once per
 * connection and cached by their index in PT_STMTS (pt__sq_stmt); every
 * SQLite result code is translated to a pt_err here (pt__sq_xlate).
 */
#include "store_sqlite_impl.h"

static const char *const stmt_sql[S__COUNT] = {
#define PT__STMT_SQL(id, sql) sql,
    PT_STMTS(PT__STMT_SQL)
#undef PT__STMT_SQL
};

/*
 * What the storage did at the last write of any connection of this process:
 * PT_OK, or PT_EFULL / PT_EIO when it failed (disk full, read-only file
 * system, I/O error).  /healthz reads it (pt_store_writable): a full disk
 * shows only when SQLite appends to the WAL at a commit, so nothing short of
 * a write can see it, and a health check must not write each time it is
 * asked.  One process has one database; a second one (tests) at worst
 * costs /healthz one probe write.
 */
static atomic_int storage_fault;

/* Why storage_fault is set, in a few words, for /v1/status (fault_mu). */
static pthread_mutex_t fault_mu = PTHREAD_MUTEX_INITIALIZER;
static char fault_why[PT_STORE_PATH_MAX + 64];

/* storage.wal_vfs = false: every store opened from now on uses SQLite's own
 * VFS (the process's configuration, set once before the first open). */
static atomic_int wal_vfs_off;

void pt_store_set_wal_vfs(int on)
{
    atomic_store(&wal_vfs_off, !on);
}

/* Records what a write (or a look at the files) learnt, with why in a few
 * words when it failed; logs when the storage goes bad, fails otherwise, or
 * recovers. */
void pt__sq_note_storage(int rc, const char *why)
{
    if (rc) {
        pthread_mutex_lock(&fault_mu);
        snprintf(fault_why, sizeof fault_why, "%s", why);
        pthread_mutex_unlock(&fault_mu);
    }
    int was = atomic_exchange(&storage_fault, rc);
    if (rc == PT_EGONE && was != rc)
        pt_log_error("store: the %s while payterm had it open: nothing more is written "
                     "into it, every write answers 503 storage_unavailable and /healthz 503 "
                     "(a restart would not find what is written there)",
                     why);
    else if (rc && was != rc)
        pt_log_error("store: the storage failed (%s): /healthz answers 503 until a write "
                     "succeeds again",
                     why);
    else if (!rc && was)
        pt_log_info("store: writes succeed again (after %s)", pt_strerror(was));
}

/* Translates an SQLite result code (extended or primary) to a pt_err. */
int pt__sq_xlate(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_DONE:
    case SQLITE_ROW:
        return PT_OK;
    case SQLITE_FULL:
        pt__sq_note_storage(PT_EFULL, "disk full"); /* every failure passes here: for /healthz */
        return PT_EFULL;
    case SQLITE_IOERR:
        pt__sq_note_storage(PT_EIO, "I/O error");
        return PT_EIO;
    case SQLITE_READONLY:
        pt__sq_note_storage(PT_EIO, "the database cannot be written (read-only)");
        return PT_EIO;
    case SQLITE_CANTOPEN: /* a path or permission problem, not the disk failing */
        return PT_EIO;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return PT_EBUSY;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return PT_ECORRUPT;
    case SQLITE_NOMEM:
        return PT_ENOMEM;
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return PT_EPERM;
    case SQLITE_CONSTRAINT:
        return (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY) ? PT_EEXIST
                                                                                      : PT_EINVAL;
    default:
        return PT_ESTORAGE;
    }
}

sqlite3_stmt *pt__sq_stmt(struct pt_store *st, int id)
{
    assert(id >= 0 && id < S__COUNT); /* one of the PT_STMTS table, by its S_ name */
    sqlite3_stmt *s = st->c->stmt[id];
    if (s) {
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
        return s;
    }
    if (sqlite3_prepare_v3(st->c->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &s, NULL) !=
        SQLITE_OK) {
        pt_log_error("store: cannot prepare statement %d: %s", id, sqlite3_errmsg(st->c->db));
        return NULL;
    }
    st->c->stmt[id] = s;
    return s;
}

/* Steps a statement that returns no rows; resets it. */
int pt__sq_run(struct pt_store *st, sqlite3_stmt *s)
{
    int rc = sqlite3_step(s);
    int err = (rc == SQLITE_DONE) ? PT_OK : pt__sq_xlate(sqlite3_extended_errcode(st->c->db));
    if (rc != SQLITE_DONE && err == PT_OK)
        err = PT_ESTORAGE;
    sqlite3_reset(s);
    return err;
}

static int exec(struct pt_store *st, const char *sql)
{
    int rc = sqlite3_exec(st->c->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? PT_OK : pt__sq_xlate(sqlite3_extended_errcode(st->c->db));
}

void pt__sq_bind_text(sqlite3_stmt *s, int i, const char *v)
{
    if (v && *v)
        sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, i);
}

void pt__sq_copy_col(sqlite3_stmt *s, int i, char *dst, size_t cap)
{
    const unsigned char *v = sqlite3_column_text(s, i);
    if (!v) {
        dst[0] = '\0';
        return;
    }
    snprintf(dst, cap, "%s", (const char *)v);
}

/* ---- the statement interface store_ops.c runs over (store_impl.h) ---------- */

PT_STORE_SHARED_MAP(shared_stmt);

static int sq_prepare(struct pt_store *st, int shared_id, struct pt_q *q)
{
    q->id = shared_stmt[shared_id];
    q->h = pt__sq_stmt(st, q->id);
    return q->h ? PT_OK : PT_ESTORAGE;
}

static void sq_bind_int(struct pt_q *q, int i, int64_t v)
{
    sqlite3_bind_int64(q->h, i, v);
}

static void sq_bind_text(struct pt_q *q, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(q->h, i, v, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(q->h, i);
}

static void sq_bind_blob(struct pt_q *q, int i, const void *p, size_t n)
{
    sqlite3_bind_blob(q->h, i, p, (int)n, SQLITE_STATIC);
}

static int sq_step(struct pt_q *q)
{
    int rc = sqlite3_step(q->h);
    if (rc == SQLITE_ROW)
        return PT_Q_ROW;
    if (rc == SQLITE_DONE)
        return PT_OK;
    rc = pt__sq_xlate(sqlite3_extended_errcode(q->st->c->db));
    return rc ? rc : PT_ESTORAGE;
}

static int64_t sq_col_int(const struct pt_q *q, int col)
{
    return sqlite3_column_int64(q->h, col);
}

static const char *sq_col_text(const struct pt_q *q, int col)
{
    return (const char *)sqlite3_column_text(q->h, col);
}

static int sq_col_blob(const struct pt_q *q, int col, unsigned char **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (sqlite3_column_type(q->h, col) == SQLITE_NULL)
        return PT_OK;
    const void *b = sqlite3_column_blob(q->h, col);
    int len = sqlite3_column_bytes(q->h, col);
    if (!(*out = malloc((size_t)len + 1)))
        return PT_ENOMEM;
    if (len)
        memcpy(*out, b, (size_t)len);
    (*out)[len] = '\0';
    *n = (size_t)len;
    return PT_OK;
}

static int sq_changes(const struct pt_q *q)
{
    return sqlite3_changes(q->st->c->db);
}

static void sq_done(struct pt_q *q)
{
    sqlite3_reset(q->h);
}

const struct pt_store_sql pt__sqlite_sql = {
    .prepare = sq_prepare,
    .bind_int = sq_bind_int,
    .bind_text = sq_bind_text,
    .bind_blob = sq_bind_blob,
    .step = sq_step,
    .col_int = sq_col_int,
    .col_text = sq_col_text,
    .col_blob = sq_col_blob,
    .changes = sq_changes,
    .done = sq_done,
};

const char *pt__sq_errmsg(struct pt_store *st)
{
    return sqlite3_errmsg(st->c->db);
}

int pt_store_schema_latest(void)
{
    return pt_migrations_count;
}

int pt__sq_pragma_int(struct pt_store *st, const char *name, int *value)
{
    static const char *const allowed[] = {"user_version",  "synchronous", "foreign_keys",
                                          "busy_timeout",  "page_count",  "max_page_count",
                                          "freelist_count"};
    int ok = 0;
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        ok |= strcmp(name, allowed[i]) == 0;
    if (!ok)
        return PT_EINVAL;
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA %s", name);
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(st->c->db, sql, -1, &s, NULL) != SQLITE_OK)
        return pt__sq_xlate(sqlite3_extended_errcode(st->c->db));
    int rc = sqlite3_step(s);
    int err = PT_OK;
    if (rc == SQLITE_ROW)
        *value = sqlite3_column_int(s, 0);
    else
        err = pt__sq_xlate(sqlite3_extended_errcode(st->c->db));
    sqlite3_finalize(s);
    return err;
}

int pt__sq_schema_version(struct pt_store *st, int *version)
{
    return pt__sq_pragma_int(st, "user_version", version);
}

int pt__sq_migrate_to(struct pt_store *st, int version)
{
    int cur;
    int rc = pt__sq_schema_version(st, &cur);
    if (rc)
        return rc;
    if (cur > pt_migrations_count)
        return PT_ETOONEW;
    for (int v = cur + 1; v <= version && v <= pt_migrations_count; v++) {
        const struct pt_migration *m = &pt_migrations[v - 1];
        char bump[64];
        snprintf(bump, sizeof bump, "PRAGMA user_version = %d", v);
        if ((rc = exec(st, "BEGIN IMMEDIATE")) != PT_OK)
            return rc;
        if ((rc = exec(st, m->sql)) != PT_OK || (rc = exec(st, bump)) != PT_OK) {
            pt_log_error("store: migration %s failed: %s", m->name, sqlite3_errmsg(st->c->db));
            exec(st, "ROLLBACK");
            return rc;
        }
        if ((rc = exec(st, "COMMIT")) != PT_OK) {
            exec(st, "ROLLBACK");
            return rc;
        }
        pt_log_info("store: applied migration %s", m->name);
    }
    return PT_OK;
}

static int configure(struct pt_store *st, const struct pt_store_options *opt)
{
    char sql[256];
    int err;
    sqlite3_busy_timeout(st->c->db, opt->busy_timeout_ms > 0 ? opt->busy_timeout_ms : 5000);
    /* Small pages, chosen when the file is created (SQLite ignores this for
     * an existing database).  A new charge touches some eight b-tree pages
     * (key, charge, order id index, active index, audit, and the odd split),
     * and every touched page goes into the WAL and through fsync whole: at
     * 1 KiB that is about 10 KiB per durable commit instead of 30 KiB.  On a
     * board's flash, fewer bytes per commit is also less wear. */
    snprintf(sql, sizeof sql, "PRAGMA page_size = %d",
             opt->page_size > 0 ? opt->page_size : PT_STORE_PAGE_SIZE);
    if ((err = exec(st, sql)) != PT_OK)
        return err;
    /* journal_mode answers with the mode it ended up in; a read-only or
     * in-memory file may refuse WAL, which we must not silently accept. */
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(st->c->db, "PRAGMA journal_mode = WAL", -1, &s, NULL) != SQLITE_OK)
        return pt__sq_xlate(sqlite3_extended_errcode(st->c->db));
    int rc = sqlite3_step(s);
    int wal =
        rc == SQLITE_ROW && sqlite3_stricmp((const char *)sqlite3_column_text(s, 0), "wal") == 0;
    err = rc == SQLITE_ROW ? PT_OK : pt__sq_xlate(sqlite3_extended_errcode(st->c->db));
    sqlite3_finalize(s);
    if (err)
        return err;
    if (!wal)
        return PT_EIO;
    /* secure_delete: bytes a statement removes (an erased payment code, a
     * swept key) are overwritten with zeros, not left in free space. */
    snprintf(sql, sizeof sql,
             "PRAGMA synchronous = %s; PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;"
             " PRAGMA secure_delete = ON;",
             opt->synchronous_off      ? "OFF"
             : opt->synchronous_normal ? "NORMAL"
                                       : "FULL");
    if ((err = exec(st, sql)) != PT_OK)
        return err;
    /* The page cache: SQLite's default (2000 KiB) is per connection, and
     * the daemon holds a dozen (the API's pool, the syncer, its own).  Each
     * fills to it once a walk or a drain has read a big queue, and keeps
     * it: 29 MiB private after 50 000 charges drained (issue 38), on a
     * board that has 8 MiB for payterm.  A charge touches a few dozen
     * pages; the rest come from the OS's cache of the file. */
    snprintf(sql, sizeof sql, "PRAGMA cache_size = -%d", PT_STORE_CACHE_KIB);
    if ((err = exec(st, sql)) != PT_OK)
        return err;
    if (opt->max_page_count > 0) {
        snprintf(sql, sizeof sql, "PRAGMA max_page_count = %d", opt->max_page_count);
        if ((err = exec(st, sql)) != PT_OK)
            return err;
    }
    return PT_OK;
}

/*
 * Files payterm creates are 0600 whatever the umask (SPEC section 11): the
 * database holds idempotency answers and, for a minute, payment codes.
 * SQLite creates a file 0644 (less the umask) and gives its -wal and -shm
 * the database file's mode, so the database is created here first, 0600,
 * and a file an older payterm left readable by others is narrowed.
 */
static int private_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0)
        return close(fd) == 0 ? PT_OK : PT_EIO;
    if (errno != EEXIST)
        return errno == ENOENT ? PT_ENOTFOUND : PT_EIO;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return PT_EIO;
    if (S_ISREG(sb.st_mode) && (sb.st_mode & 077) && chmod(path, sb.st_mode & 0700) != 0)
        return PT_EIO;
    return PT_OK;
}

/* The -wal and -shm files beside a database, narrowed like it. */
static void private_companions(const char *path)
{
    static const char *const suffix[] = {"-wal", "-shm"};
    for (int i = 0; i < 2; i++) {
        char p[PT_STORE_PATH_MAX + 8];
        struct stat sb;
        snprintf(p, sizeof p, "%s%s", path, suffix[i]);
        if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode) && (sb.st_mode & 077))
            (void)chmod(p, sb.st_mode & 0700);
    }
}

/* ---- the files under the connection (SPEC 18) ---------------------------------------- */

/*
 * The database and its WAL must stay the files at their paths while payterm
 * writes into them.  SQLite keeps writing through its descriptors into a
 * file that was unlinked (an rm, a cleanup script) or that another file
 * was moved over (a backup restored in place): every commit is synced and
 * answered, and the next start finds none of it - or opens an old WAL
 * against a new database.  So each connection notes at open which files
 * its paths led to (files_record), and a commit asks the paths again before
 * it runs and before it is answered (files_check): one stat() per file.
 *
 * The cost: two stat() calls of paths whose inodes are cached, twice per
 * batch - one system call each (measured in README, Storage: under 1% of a
 * durable commit), beside the batch's fdatasync of the WAL, milliseconds
 * on a board's flash.  No fstat(): the descriptors are SQLite's, so the
 * identity is the paths' right after SQLite opened them (at start, under
 * the data_dir's lock), and the open descriptor keeps that inode's number
 * from going to another file.
 */

static void wal_path(const struct pt_store *st, char *out, size_t len)
{
    snprintf(out, len, "%s-wal", st->path);
}

/* After the connection's first read (which opens the WAL). */
static void files_record(struct pt_store *st)
{
    char wal[PT_STORE_PATH_MAX + 8];
    wal_path(st, wal, sizeof wal);
    const char *path[2] = {st->path, wal};
    for (int i = 0; i < 2; i++) {
        struct stat sb;
        struct file_id *f = &st->files[i];
        f->known = stat(path[i], &sb) == 0;
        f->dev = f->known ? sb.st_dev : 0;
        f->ino = f->known ? sb.st_ino : 0;
    }
}

/* PT_OK while path leads to the file f; else PT_EGONE (removed or
 * replaced) or PT_EIO (the path cannot be looked at), why naming it. */
static int file_check(const char *name, const char *path, const struct file_id *f, char *why,
                      size_t len)
{
    struct stat sb;
    if (!f->known)
        return PT_OK;
    if (stat(path, &sb) != 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR) {
            snprintf(why, len, "%s %s was removed", name, path);
            return PT_EGONE;
        }
        snprintf(why, len, "%s %s cannot be looked at: %s", name, path, strerror(e));
        return PT_EIO;
    }
    if (sb.st_dev != f->dev || sb.st_ino != f->ino) {
        snprintf(why, len, "%s %s was replaced by another file", name, path);
        return PT_EGONE;
    }
    return PT_OK;
}

/* file_check of the database, then of its WAL. */
static int files_check(const struct pt_store *st, char *why, size_t len)
{
    char wal[PT_STORE_PATH_MAX + 8];
    wal_path(st, wal, sizeof wal);
    int rc = file_check("database file", st->path, &st->files[0], why, len);
    return rc ? rc : file_check("WAL file", wal, &st->files[1], why, len);
}

/*
 * The WAL was removed or replaced while the database file is still there:
 * the commits it holds that no checkpoint has copied yet were answered, and
 * now live only behind the descriptors SQLite has open - a power cut or a
 * SIGKILL would take them.  A checkpoint copies them into the database file
 * and syncs it.  Passive (readers are not waited for: the writer's turn is
 * held), so it is tried again at each refused commit until all is copied.
 */
void pt__sq_wal_rescue(struct pt_store *st)
{
    char why[PT_STORE_PATH_MAX + 64], wal[PT_STORE_PATH_MAX + 8];
    wal_path(st, wal, sizeof wal);
    if (st->wal_rescued || file_check("WAL file", wal, &st->files[1], why, sizeof why) == PT_OK ||
        file_check("database file", st->path, &st->files[0], why, sizeof why) != PT_OK)
        return;
    int frames = 0, copied = 0;
    int rc =
        sqlite3_wal_checkpoint_v2(st->c->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &frames, &copied);
    if (rc != SQLITE_OK || copied < frames)
        return;
    st->wal_rescued = 1;
    pt_log_warn("store: the WAL that was removed is copied into %s (%d frames) and synced: "
                "what was answered before it went is kept",
                st->path, frames);
}

/* files_check, and what it found kept for /healthz (and logged, once). */
int pt__sq_files_ok(const struct pt_store *st)
{
    char why[PT_STORE_PATH_MAX + 64];
    int rc = files_check(st, why, sizeof why);
    if (rc)
        pt__sq_note_storage(rc, why);
    return rc;
}

/* A payment code was erased (a barcode charge became final) and its bytes
 * may still be in the WAL: a truncating checkpoint is due.  One flag for the
 * process, whichever connection erased it, set when that commit is durable
 * (a checkpoint that ran before it would not have wiped anything). */
atomic_int pt__sq_wipe_due;

void pt__sq_note_erased(struct pt_store *st)
{
    st->erased_in_txn = 1;
}

int pt_store_wipe_due(void)
{
    return atomic_load(&pt__sq_wipe_due);
}

int pt__sq_checkpoint_now(struct pt_store *st)
{
    int was = atomic_exchange(&pt__sq_wipe_due, 0);
    int log = 0, done = 0;
    int rc = sqlite3_wal_checkpoint_v2(st->c->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, &log, &done);
    if (rc == SQLITE_OK)
        return PT_OK;
    /* A reader kept an old snapshot (SQLITE_BUSY): try again later. */
    if (was)
        atomic_store(&pt__sq_wipe_due, 1);
    return rc == SQLITE_BUSY ? PT_EBUSY : pt__sq_xlate(sqlite3_extended_errcode(st->c->db));
}

static pthread_once_t sqlite_once = PTHREAD_ONCE_INIT;
static int walvfs_ok;

/* Once per process, before the first connection. */
static void sqlite_setup(void)
{
    /* No allocation statistics: payterm never reads them, and keeping them
     * takes a global mutex on every malloc and free inside SQLite (6% of
     * the instructions of a new charge).  Only possible before SQLite is
     * initialised; refused, harmlessly, when something else was first. */
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    walvfs_ok = pt_walvfs_register() == SQLITE_OK;
}

/* ---- the schema a database at the latest version must have ------------------ */

/*
 * What sql/ creates, as "type name": the tables, and the indexes and
 * triggers that keep invariants (UNIQUE constraints are the autoindexes).
 * A database whose user_version says "latest" but that lacks one (dropped
 * by hand, a half-restored file) would start and answer healthy, then fail
 * at the first charge, or silently lose an invariant a trigger keeps.
 * test_startup.sh drops every object a fresh database has, one at a time,
 * and expects the open to refuse: a migration that adds one without a
 * line here fails the suite.
 */
static const char *const schema_objects[] = {
    "table idempotency_keys",
    "index sqlite_autoindex_idempotency_keys_1",
    "table charges",
    "index sqlite_autoindex_charges_1",
    "index charges_review",
    "index charges_queued",
    "trigger offline_queue_insert",
    "trigger offline_queue_leave",
    "trigger offline_queue_enter",
    "trigger offline_queue_delete",
    "table charge_events",
    "trigger charge_events_append_only_u",
    "trigger charge_events_append_only_d",
    "table notifications",
    "index sqlite_autoindex_notifications_1",
    "table events",
    "index events_once_per_charge",
    "table offline_queue",
    "table refunds",
    "index sqlite_autoindex_refunds_1",
    "index refunds_by_charge",
    "trigger refunds_never_exceed",
    "trigger refunds_final",
    "index refunds_review",
    "trigger refunds_refunded",
    "index events_once_per_refund",
    "table clock",
    "table clock_events",
    "trigger clock_events_append_only_d",
    "trigger charges_z_once",
    "trigger refunds_z_once",
    "table z_reports",
    "trigger z_reports_immutable_u",
    "trigger z_reports_immutable_d",
    "table reconciliations",
    "index reconciliations_day",
    "trigger reconciliations_immutable_u",
    "trigger charges_z_final",
    "trigger charges_z_final_i",
    "trigger refunds_z_final",
    "trigger refunds_z_final_i",
    "trigger charge_events_final_at",
    "table archived",
    "trigger archived_immutable_u",
    "trigger archived_immutable_d",
    "trigger charges_not_archived",
    "trigger refunds_not_archived",
    "index events_review",
};
#define SCHEMA_OBJECTS (sizeof schema_objects / sizeof schema_objects[0])

/* Checked once at open (one read of sqlite_master): names what is missing. */
static int schema_check(struct pt_store *st, char *errbuf, size_t errlen)
{
    unsigned char found[SCHEMA_OBJECTS] = {0};
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(st->c->db, "SELECT type || ' ' || name FROM sqlite_master", -1, &s,
                                NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(s, 0);
        for (size_t i = 0; t && i < SCHEMA_OBJECTS; i++)
            found[i] |= strcmp(t, schema_objects[i]) == 0;
        rc = SQLITE_OK;
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) {
        if (errbuf)
            snprintf(errbuf, errlen, "cannot read the schema of database %s: %s", st->path,
                     sqlite3_errmsg(st->c->db));
        return pt__sq_xlate(sqlite3_extended_errcode(st->c->db));
    }
    size_t used = 0;
    rc = PT_OK;
    for (size_t i = 0; i < SCHEMA_OBJECTS; i++) {
        if (found[i])
            continue;
        if (errbuf && rc == PT_OK)
            used = (size_t)snprintf(errbuf, errlen,
                                    "database %s (schema version %d) is damaged, restore a "
                                    "backup; missing: %s",
                                    st->path, pt_migrations_count, schema_objects[i]);
        else if (errbuf && used < errlen)
            used += (size_t)snprintf(errbuf + used, errlen - used, ", %s", schema_objects[i]);
        rc = PT_ECORRUPT;
    }
    return rc;
}

int pt_store_sqlite_open(const struct pt_store_options *opt, struct pt_store **out, char *errbuf,
                         size_t errlen)
{
    int rc = PT_ENOMEM;
    *out = NULL;
    /* sql/008 drops a column (ALTER TABLE ... DROP COLUMN, SQLite 3.35);
     * the version is CMakeLists.txt's, which the .deb depends on. */
    if (sqlite3_libversion_number() < PT_SQLITE_MIN_VERSION_NUMBER) {
        if (errbuf)
            snprintf(errbuf, errlen,
                     "SQLite %s is too old: payterm needs " PT_SQLITE_MIN_VERSION " or newer",
                     sqlite3_libversion());
        return PT_EUNSUPPORTED;
    }
    struct pt_store *st = calloc(1, sizeof *st);
    if (!st)
        goto fail;
    st->head.ops = &pt__sqlite_ops;
    st->c = &st->own;
    snprintf(st->path, sizeof st->path, "%s", opt->path);
    snprintf(st->dir, sizeof st->dir, "%s", opt->path);
    char *slash = strrchr(st->dir, '/');
    if (!slash)
        snprintf(st->dir, sizeof st->dir, ".");
    else
        slash[slash == st->dir] = '\0'; /* "/x.db" is in "/" */
    /* keep: an existing file, opened at the version it has (SPEC 3: the
     * commands that only read or maintain never create or migrate). */
    int keep = opt->readonly || opt->existing;
    int flags = opt->readonly   ? SQLITE_OPEN_READONLY
                : opt->existing ? SQLITE_OPEN_READWRITE
                                : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    if (!keep && (rc = private_file(opt->path)) != PT_OK) {
        if (errbuf)
            snprintf(errbuf, errlen, "cannot create database %s with mode 0600: %s", opt->path,
                     strerror(errno));
        goto fail;
    }
    if (!opt->readonly)
        private_companions(opt->path);
    /* Our VFS writes each WAL commit with one system call (walvfs.c),
     * unless the options turn it off (then SQLite's default VFS). */
    pthread_once(&sqlite_once, sqlite_setup);
    const char *vfs =
        walvfs_ok && !opt->no_wal_vfs && !atomic_load(&wal_vfs_off) ? PT_WALVFS_NAME : NULL;
    if (sqlite3_open_v2(opt->path, &st->c->db, flags | SQLITE_OPEN_NOMUTEX, vfs) != SQLITE_OK) {
        rc = st->c->db ? pt__sq_xlate(sqlite3_extended_errcode(st->c->db)) : PT_ENOMEM;
        if (errbuf)
            snprintf(errbuf, errlen, "cannot open database %s: %s", opt->path,
                     st->c->db ? sqlite3_errmsg(st->c->db) : "out of memory");
        goto fail;
    }
    sqlite3_extended_result_codes(st->c->db, 1);
    if (!opt->readonly && (rc = configure(st, opt)) != PT_OK) {
        if (errbuf)
            snprintf(errbuf, errlen, "cannot configure database %s (WAL, synchronous): %s",
                     opt->path, sqlite3_errmsg(st->c->db));
        goto fail;
    }
    int version = 0;
    if ((rc = pt__sq_schema_version(st, &version)) != PT_OK) {
        if (errbuf)
            snprintf(errbuf, errlen, "cannot read schema version of %s: %s", opt->path,
                     sqlite3_errmsg(st->c->db));
        goto fail;
    }
    files_record(st); /* the first read opened the WAL */
    if (version > pt_migrations_count) {
        rc = PT_ETOONEW;
        if (errbuf)
            snprintf(errbuf, errlen,
                     "database %s has schema version %d but this payterm only knows up to %d: "
                     "it was written by a newer payterm; upgrade payterm or restore a backup",
                     opt->path, version, pt_migrations_count);
        goto fail;
    }
    if (!keep && (rc = pt__sq_migrate_to(st, pt_migrations_count)) != PT_OK) {
        if (errbuf)
            snprintf(errbuf, errlen, "cannot migrate database %s to schema version %d: %s",
                     opt->path, pt_migrations_count, sqlite3_errmsg(st->c->db));
        goto fail;
    }
    /* An older database opened as it is (keep) is checked once migrated. */
    if ((!keep || version == pt_migrations_count) && (rc = schema_check(st, errbuf, errlen)))
        goto fail;
    *out = st;
    return PT_OK;
fail:
    if (errbuf && rc == PT_ENOMEM && !st)
        snprintf(errbuf, errlen, "out of memory");
    pt__sq_close(st);
    return rc;
}

void pt__sq_close(struct pt_store *st)
{
    if (!st)
        return;
    assert(!st->in_txn); /* a transaction left open would hold the writer's turn */
    for (int i = 0; i < S__COUNT; i++)
        sqlite3_finalize(st->own.stmt[i]);
    for (unsigned i = 0; i < PT_FROM_MASKS; i++) {
        sqlite3_finalize(st->own.transition[i]);
        sqlite3_finalize(st->own.refund_transition[i]);
    }
    sqlite3_close_v2(st->own.db);
    free(st);
}

void pt__sq_set_event_hook(struct pt_store *st, void (*fn)(void *ctx), void *ctx)
{
    st->event_hook = fn;
    st->event_hook_ctx = ctx;
}

int pt__sq_backup(struct pt_store *st, const char *dest)
{
    sqlite3 *to = NULL;
    int rc = private_file(dest); /* a backup holds what the database holds */
    if (rc != PT_OK)
        return rc;
    rc = sqlite3_open_v2(dest, &to, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        rc = pt__sq_xlate(rc);
        goto out;
    }
    sqlite3_backup *b = sqlite3_backup_init(to, "main", st->c->db, "main");
    if (!b) {
        rc = pt__sq_xlate(sqlite3_extended_errcode(to));
        goto out;
    }
    /* Copy in slices so a busy daemon's writers are not blocked for long. */
    do {
        rc = sqlite3_backup_step(b, 256);
        if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
            sqlite3_sleep(10);
    } while (rc == SQLITE_OK || rc == SQLITE_BUSY || rc == SQLITE_LOCKED);
    sqlite3_backup_finish(b);
    rc = rc == SQLITE_DONE ? PT_OK : pt__sq_xlate(rc);
out:
    sqlite3_close_v2(to);
    return rc;
}

/* Fewer free bytes than this under the database, and the next charge may
 * not fit: its commit appends ~10 KiB to the WAL, a checkpoint may grow the
 * database file by the pages the WAL holds. */
#define ROOM_MIN_BYTES (256 * 1024)
/* Fewer pages than this below max_page_count (a limit only tests set), and
 * a charge's few new b-tree pages may not fit. */
#define ROOM_MIN_PAGES 16

/* What the file system says without a write: read-only, or (nearly) full,
 * with why in a few words.  PT_OK when it looks fine or cannot be asked.
 * *free_bytes: what it has free for us (-1 when it cannot be asked). */
static int room_fault(struct pt_store *st, int64_t *free_bytes, char *why, size_t len)
{
    struct statvfs fs;
    *free_bytes = -1;
    if (statvfs(st->dir, &fs) == 0) {
        /* root may use the blocks the file system keeps for root. */
        unsigned long long blocks = geteuid() == 0 ? fs.f_bfree : fs.f_bavail;
        *free_bytes = (int64_t)(blocks * fs.f_frsize);
        if (fs.f_flag & ST_RDONLY) {
            snprintf(why, len, "read-only file system");
            return PT_EIO;
        }
        if (blocks * fs.f_frsize < ROOM_MIN_BYTES) {
            snprintf(why, len, "disk full");
            return PT_EFULL;
        }
    }
    int pages = 0, max = 0, free_pages = 0;
    if (pt__sq_pragma_int(st, "page_count", &pages) == PT_OK &&
        pt__sq_pragma_int(st, "max_page_count", &max) == PT_OK &&
        pt__sq_pragma_int(st, "freelist_count", &free_pages) == PT_OK && max > 0 &&
        (long long)max - pages + free_pages < ROOM_MIN_PAGES) {
        snprintf(why, len, "disk full");
        return PT_EFULL;
    }
    return PT_OK;
}

/* One real commit: page 1 rewritten as it is (user_version set to itself),
 * so one WAL frame and a sync, and the database does not grow. */
static int probe_write(struct pt_store *st)
{
    int v = 0, rc = pt__sq_pragma_int(st, "user_version", &v);
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", v);
    if (rc == PT_OK)
        rc = exec(st, sql);
    if (rc == PT_OK)
        rc = pt__sq_commit(st);
    else
        pt__sq_rollback(st);
    return rc;
}

/* The connection whose files st's commits go into. */
static const struct pt_store *files_of(const struct pt_store *st)
{
    return st->writer ? st->writer->conn : st;
}

int pt__sq_files_intact(struct pt_store *st)
{
    return pt__sq_files_ok(files_of(st));
}

/* Why the last write failed, as pt__sq_note_storage() kept it. */
static void fault_reason(char *out, size_t len)
{
    pthread_mutex_lock(&fault_mu);
    snprintf(out, len, "%s", fault_why);
    pthread_mutex_unlock(&fault_mu);
}

int pt__sq_health(struct pt_store *st, struct pt_store_health *out)
{
    memset(out, 0, sizeof *out);
    /* A file that is gone, or a file system that says it is read-only or
     * full, is believed at once; the fault is remembered so that its end is
     * checked by a write. */
    char room_why[64] = "";
    int room = room_fault(st, &out->free_bytes, room_why, sizeof room_why);
    int rc = files_check(files_of(st), out->reason, sizeof out->reason);
    if (rc == PT_OK && room != PT_OK) {
        rc = room;
        snprintf(out->reason, sizeof out->reason, "%s", room_why);
    }
    if (rc) {
        pt__sq_note_storage(rc, out->reason);
        return PT_OK;
    }
    /* BEGIN IMMEDIATE takes the write lock (fails on a broken file). */
    if ((rc = pt__sq_begin(st)) != PT_OK) {
        snprintf(out->reason, sizeof out->reason, "%s", pt_strerror(rc));
        return PT_OK;
    }
    if (atomic_load(&storage_fault) == PT_OK) {
        pt__sq_rollback(st);
        out->writable = 1;
        return PT_OK;
    }
    /* A write failed and none has succeeded since: only a write can tell
     * whether the condition has passed.  Once it has, probes write nothing. */
    if ((rc = probe_write(st)) == PT_OK) {
        pt__sq_note_storage(PT_OK, NULL);
        out->writable = 1;
    } else {
        fault_reason(out->reason, sizeof out->reason);
    }
    return PT_OK;
}

int pt__sq_writable(struct pt_store *st)
{
    struct pt_store_health h;
    pt__sq_health(st, &h);
    return h.writable;
}
