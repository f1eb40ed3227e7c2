/*
 * store_sqlite_archive.c - retention on SQLite (SPEC 19, sql/016_archive.sql):
 * which charges may leave the live database, their copy into a monthly
 * archive file, their removal.
 *
 * An archive file is a payterm database (every migration applied, 0600)
 * holding only copies: GET reads it with pt_store_open(readonly) like any
 * store.  Its rows are written by a connection of its own with triggers
 * off (the rows were checked where they were made; a copy only repeats
 * them, and a stale copy must be replaceable, which the append-only and
 * never-exceed triggers would refuse), the same columns in the same order
 * as the live database's (both made by the same migrations).
 *
 * Each step reads a charge's mark - its updated_at and report, the end of
 * its audit trail, its refunds' count and newest updated_at - and goes
 * ahead only while the mark is what the candidate read: a review raised, a
 * note added or a refund made in between keeps the charge live for the
 * next pass (whose copy then replaces the stale one).
 */
#include "store_sqlite_impl.h"

/* The mark of charge c (an alias in the query). */
#define MARK_OF(c)                                                                                 \
    c ".updated_at || '/' || coalesce(" c ".z, '-') || '/' || coalesce((SELECT max(e.id) FROM"     \
      " charge_events e WHERE e.id BETWEEN " c ".id * 4294967296 + 1 AND " c                       \
      ".id * 4294967296 + 4294967295), 0) || '/' || (SELECT count(*) || '/' ||"                    \
      " coalesce(max(r.updated_at), 0) FROM refunds r WHERE r.charge_id = " c ".id)"

/* A record needs no run (its gateway has no bill in ?2: OFF is NULL), or
 * its bill date - its final_at in the gateway's bill time zone - has a done
 * run that began after that day ended: a run asked for during the day
 * compared the bill of a day not over, and what became final after it was
 * never seen. */
#define OFF "json_extract(?2, '$.' || c.gateway)"
#define RECONCILED(at)                                                                             \
    "(" OFF " IS NULL OR EXISTS (SELECT 1 FROM reconciliations x WHERE x.gateway = c.gateway"      \
    " AND x.state = 'done' AND x.bill_date = strftime('%Y-%m-%d', " at " / 1000 + " OFF ","        \
    " 'unixepoch') AND x.created_at >= ((" at " / 1000 + " OFF ") / 86400 + 1) * 86400000 - " OFF  \
    " * 1000))"

/* clang-format off */
static const char CANDIDATES[] =
    "WITH last AS (SELECT coalesce(max(z), 0) AS z FROM z_reports),"
    " top AS (SELECT (SELECT coalesce(max(id), 0) FROM charges) AS c,"
    " (SELECT coalesce(max(id), 0) FROM refunds) AS r)"
    " SELECT c.id, c.order_id, strftime('%Y-%m', c.final_at / 1000, 'unixepoch'), "
    MARK_OF("c")
    " FROM charges c, last, top WHERE c.id > ?3 AND c.id < top.c"
    " AND (c.state = 'SUCCESS' OR c.state = 'FAILED' OR c.state = 'CANCELED')"
    " AND c.review = 0 AND c.final_at IS NOT NULL AND c.final_at < ?1"
    " AND c.z IS NOT NULL AND c.z <= last.z AND " RECONCILED("c.final_at")
    /* Every refund of it as far along - a NULL anywhere holds the charge. */
    " AND NOT EXISTS (SELECT 1 FROM refunds f WHERE f.charge_id = c.id AND NOT coalesce("
    " (f.state = 'SUCCESS' OR f.state = 'FAILED') AND f.review = 0"
    " AND f.final_at IS NOT NULL AND f.final_at < ?1 AND f.z IS NOT NULL AND f.z <= last.z"
    " AND f.id < top.r AND " RECONCILED("f.final_at") ", 0))"
    " ORDER BY c.id LIMIT ?4";
/* clang-format on */

static const char MARK[] = "SELECT " MARK_OF("c") " FROM charges c WHERE c.id = ?1";

/* A charge's rows, table by table, in the order a copy inserts them
 * (foreign keys: the charge first) - and the reverse for a removal.  Its
 * fulfilment events are found by the three indexes events has. */
static const struct {
    const char *table, *where;
} ROWS[] = {
    {"charges", "id = ?1"},
    {"refunds", "charge_id = ?1"},
    {"charge_events", "id BETWEEN ?1 * 4294967296 + 1 AND ?1 * 4294967296 + 4294967295"},
    {"events", "charge_id = ?1 AND (type = 'charge.succeeded' OR type = 'charge.failed'"
               " OR type = 'charge.canceled')"},
    {"events", "charge_id = ?1 AND type = 'charge.review'"},
    {"events", "refund_id IS NOT NULL AND refund_id IN (SELECT id FROM refunds"
               " WHERE charge_id = ?1)"},
};
#define NROWS ((int)(sizeof ROWS / sizeof ROWS[0]))

static int xlate(sqlite3 *db)
{
    return pt__sq_xlate(sqlite3_extended_errcode(db));
}

static int prepare(sqlite3 *db, const char *sql, sqlite3_stmt **s)
{
    if (sqlite3_prepare_v2(db, sql, -1, s, NULL) == SQLITE_OK)
        return PT_OK;
    pt_log_error("store: archive: %s", sqlite3_errmsg(db));
    return xlate(db);
}

static int exec(sqlite3 *db, const char *sql)
{
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK)
        return PT_OK;
    pt_log_error("store: archive: %s: %s", sql, sqlite3_errmsg(db));
    return xlate(db);
}

/* The mark of charge id in db into mark ("" when there is no such charge). */
static int mark_of(sqlite3 *db, sqlite3_stmt *s, int64_t id, char *mark, size_t cap)
{
    sqlite3_bind_int64(s, 1, id);
    int rc = sqlite3_step(s);
    mark[0] = '\0';
    if (rc == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(s, 0);
        snprintf(mark, cap, "%s", t ? (const char *)t : "");
        rc = PT_OK;
    } else {
        rc = rc == SQLITE_DONE ? PT_OK : xlate(db);
    }
    sqlite3_reset(s);
    return rc;
}

int pt__sq_archive_candidates(struct pt_store *st, int64_t before, const char *bill_offsets,
                              int64_t after, int max, struct pt_archive_item *rows, int *n)
{
    *n = 0;
    sqlite3 *db = st->c->db;
    sqlite3_stmt *s;
    int rc = prepare(db, CANDIDATES, &s);
    if (rc)
        return rc;
    sqlite3_bind_int64(s, 1, before);
    sqlite3_bind_text(s, 2, bill_offsets ? bill_offsets : "{}", -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, after);
    sqlite3_bind_int(s, 4, max);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct pt_archive_item *it = &rows[(*n)++];
        memset(it, 0, sizeof *it);
        it->id = sqlite3_column_int64(s, 0);
        pt__sq_copy_col(s, 1, it->order_id, sizeof it->order_id);
        pt__sq_copy_col(s, 2, it->month, sizeof it->month);
        pt__sq_copy_col(s, 3, it->mark, sizeof it->mark);
    }
    rc = rc == SQLITE_DONE ? PT_OK : xlate(db);
    sqlite3_finalize(s);
    return rc;
}

/* The statements a batch runs on one connection, prepared once: each
 * table's rows of a charge (select and delete), its mark, the ids it
 * leaves behind. */
struct stmts {
    sqlite3 *db;
    sqlite3_stmt *sel[NROWS], *del[NROWS], *ins[NROWS], *mark, *ids;
};

static void stmts_free(struct stmts *x)
{
    for (int t = 0; t < NROWS; t++) {
        sqlite3_finalize(x->sel[t]);
        sqlite3_finalize(x->del[t]);
        sqlite3_finalize(x->ins[t]);
    }
    sqlite3_finalize(x->mark);
    sqlite3_finalize(x->ids);
    memset(x, 0, sizeof *x);
}

static int stmts_prepare(struct stmts *x, sqlite3 *db, int sel, int ids)
{
    memset(x, 0, sizeof *x);
    x->db = db;
    int rc = prepare(db, MARK, &x->mark);
    for (int t = 0; t < NROWS && rc == PT_OK; t++) {
        char sql[512];
        snprintf(sql, sizeof sql, "DELETE FROM %s WHERE %s", ROWS[t].table, ROWS[t].where);
        rc = prepare(db, sql, &x->del[t]);
        if (rc == PT_OK && sel) {
            snprintf(sql, sizeof sql, "SELECT * FROM %s WHERE %s", ROWS[t].table, ROWS[t].where);
            rc = prepare(db, sql, &x->sel[t]);
        }
    }
    if (rc == PT_OK && ids)
        rc = prepare(db,
                     "INSERT INTO archived (kind, ext_id, month) SELECT 'charge', order_id, ?2"
                     " FROM charges WHERE id = ?1 UNION ALL SELECT 'refund', refund_id, ?2"
                     " FROM refunds WHERE charge_id = ?1",
                     &x->ids);
    if (rc)
        stmts_free(x);
    return rc;
}

/* One step of a statement that returns no row, then reset. */
static int run_id(sqlite3 *db, sqlite3_stmt *s, int64_t id)
{
    sqlite3_bind_int64(s, 1, id);
    int rc = sqlite3_step(s) == SQLITE_DONE ? PT_OK : xlate(db);
    sqlite3_reset(s);
    return rc;
}

/* Copies one charge's rows of table t from the live database (x->sel) into
 * the archive (to->ins, prepared at the first row: as many columns). */
static int copy_table(struct stmts *from, struct stmts *to, int t, int64_t id)
{
    sqlite3_stmt *sel = from->sel[t];
    int rc;
    sqlite3_bind_int64(sel, 1, id);
    while ((rc = sqlite3_step(sel)) == SQLITE_ROW) {
        int nc = sqlite3_column_count(sel);
        if (!to->ins[t]) {
            char sql[512];
            size_t k = (size_t)snprintf(sql, sizeof sql, "INSERT INTO %s VALUES (", ROWS[t].table);
            for (int i = 0; i < nc && k < sizeof sql; i++)
                k += (size_t)snprintf(sql + k, sizeof sql - k, i ? ",?" : "?");
            if (k + 2 >= sizeof sql) {
                rc = PT_ERANGE;
                break;
            }
            memcpy(sql + k, ")", 2);
            if ((rc = prepare(to->db, sql, &to->ins[t])))
                break;
        }
        sqlite3_stmt *ins = to->ins[t];
        for (int i = 0; i < nc; i++)
            sqlite3_bind_value(ins, i + 1, sqlite3_column_value(sel, i));
        rc = sqlite3_step(ins);
        sqlite3_reset(ins);
        if (rc != SQLITE_DONE) {
            pt_log_error("store: archive: copying %s: %s", ROWS[t].table, sqlite3_errmsg(to->db));
            rc = xlate(to->db);
            break;
        }
    }
    if (rc == SQLITE_DONE)
        rc = PT_OK;
    else if (rc == SQLITE_ROW || rc > 0)
        rc = xlate(from->db);
    sqlite3_reset(sel);
    return rc;
}

/* Removes one charge's rows, in the copy's reverse order: the events first
 * (a refund's are found through its refund row), the charge last. */
static int remove_rows(struct stmts *x, int64_t id)
{
    int rc = PT_OK;
    for (int t = NROWS - 1; t >= 0 && rc == PT_OK; t--)
        rc = run_id(x->db, x->del[t], id);
    return rc;
}

/* Creates the archive file with payterm's schema, or brings an older one
 * up to it; 0600 (pt_store_open). */
static int archive_ready(const char *path)
{
    struct pt_store_options o = {.path = path, .no_wal_vfs = 1};
    struct pt_store *a;
    char err[256];
    int rc = pt_store_open(&o, &a, err, sizeof err);
    if (rc) {
        pt_log_error("store: archive %s: %s", path, err);
        return rc;
    }
    pt_store_close(a);
    return PT_OK;
}

/* A connection of its own to a database file (the VFS of `like`'s, so that
 * it meets the daemon's connections at the same locks): no foreign keys
 * (an archive holds copies; the live removal deletes children first, and
 * their checks would scan the audit trail and the feed, which have no
 * index on charge_id, once per row), triggers as `triggers` says. */
static int open_own(const char *path, sqlite3 *like, int triggers, int busy_ms, sqlite3 **db)
{
    sqlite3_vfs *vfs = NULL;
    if (like)
        sqlite3_file_control(like, "main", SQLITE_FCNTL_VFS_POINTER, &vfs);
    *db = NULL;
    if (sqlite3_open_v2(path, db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                        vfs ? vfs->zName : NULL) != SQLITE_OK) {
        pt_log_error("store: archive: %s: %s", path, *db ? sqlite3_errmsg(*db) : "out of memory");
        sqlite3_close(*db);
        *db = NULL;
        return PT_EIO;
    }
    sqlite3_busy_timeout(*db, busy_ms);
    sqlite3_db_config(*db, SQLITE_DBCONFIG_ENABLE_TRIGGER, triggers, (int *)NULL);
    sqlite3_db_config(*db, SQLITE_DBCONFIG_ENABLE_FKEY, 0, (int *)NULL);
    int rc = exec(*db, "PRAGMA synchronous = FULL");
    if (rc) {
        sqlite3_close(*db);
        *db = NULL;
    }
    return rc;
}

static void end(sqlite3 *db, int *rc)
{
    if (*rc == PT_OK)
        *rc = exec(db, "COMMIT");
    if (*rc)
        (void)sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
}

int pt__sq_archive_copy(struct pt_store *st, const char *path, const struct pt_archive_item *items,
                        int n, int *copied)
{
    assert(!pt__sq_in_txn(st)); /* the rows as committed */
    int rc = archive_ready(path);
    if (rc)
        return rc;
    sqlite3 *db;
    if ((rc = open_own(path, NULL, 0, 5000, &db)))
        return rc;
    struct stmts live, arch;
    if ((rc = stmts_prepare(&live, st->c->db, 1, 0)))
        goto out;
    if ((rc = stmts_prepare(&arch, db, 0, 0))) {
        stmts_free(&live);
        goto out;
    }
    rc = exec(db, "BEGIN IMMEDIATE");
    for (int i = 0; rc == PT_OK && i < n; i++) {
        char have[sizeof items[i].mark];
        if ((rc = mark_of(db, arch.mark, items[i].id, have, sizeof have)))
            break;
        if (!strcmp(have, items[i].mark))
            continue; /* copied before, as it is */
        if (have[0] && (rc = remove_rows(&arch, items[i].id)))
            break; /* a copy of an older state: replaced */
        for (int t = 0; t < NROWS && rc == PT_OK; t++)
            rc = copy_table(&live, &arch, t, items[i].id);
        if (rc == PT_OK && copied)
            (*copied)++;
    }
    stmts_free(&live);
    stmts_free(&arch);
    end(db, &rc);
out:
    if (sqlite3_close(db) != SQLITE_OK && rc == PT_OK)
        rc = PT_EIO;
    return rc;
}

int pt__sq_archive_forget(struct pt_store *st, const struct pt_archive_item *items, int n,
                          int *moved)
{
    *moved = 0;
    assert(!pt__sq_in_txn(st));
    /* Its own connection, meeting the daemon's writer at SQLite's lock as
     * the CLI does: foreign keys cannot be turned off inside the writer's
     * batch transaction (open_own says why they must be). */
    sqlite3 *db;
    int rc = open_own(st->path, st->c->db, 1, 30000, &db);
    if (rc)
        return rc;
    struct stmts x;
    if ((rc = stmts_prepare(&x, db, 0, 1)) == PT_OK) {
        rc = exec(db, "BEGIN IMMEDIATE");
        for (int i = 0; rc == PT_OK && i < n; i++) {
            char have[sizeof items[i].mark];
            if ((rc = mark_of(db, x.mark, items[i].id, have, sizeof have)))
                break;
            if (strcmp(have, items[i].mark) != 0)
                continue; /* changed since it was read (and copied): the next pass */
            sqlite3_bind_text(x.ids, 2, items[i].month, -1, SQLITE_STATIC);
            if ((rc = run_id(db, x.ids, items[i].id)) == PT_OK &&
                (rc = remove_rows(&x, items[i].id)) == PT_OK)
                (*moved)++;
        }
        stmts_free(&x);
        end(db, &rc);
    }
    if (rc)
        *moved = 0;
    if (sqlite3_close(db) != SQLITE_OK && rc == PT_OK)
        rc = PT_EIO;
    return rc;
}

int pt__sq_archived_month(struct pt_store *st, const char *kind, const char *ext_id,
                          char month[PT_ARCHIVE_MONTH_LEN])
{
    sqlite3 *db = st->c->db;
    sqlite3_stmt *s;
    int rc = prepare(db, "SELECT month FROM archived WHERE kind = ?1 AND ext_id = ?2", &s);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, ext_id, -1, SQLITE_STATIC);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        pt__sq_copy_col(s, 0, month, PT_ARCHIVE_MONTH_LEN);
        rc = PT_OK;
    } else {
        rc = rc == SQLITE_DONE ? PT_ENOTFOUND : xlate(db);
    }
    sqlite3_finalize(s);
    return rc;
}
