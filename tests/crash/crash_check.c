/*
 * crash_check.c - what must hold after a power cut (SPEC section 12).
 *
 * Runs in a fresh process on the files the cut left: the store opens them
 * (SQLite recovers the WAL), then a read-only connection asks the tables
 * directly - the checker must not trust the store functions it checks.
 *   - integrity_check and foreign_key_check are clean;
 *   - every answer in the ledger (stored statuses only) is the key's stored
 *     answer, byte for byte, and what it says happened is there;
 *   - nothing half-written: every charge and refund has its audit trail,
 *     whose last transition is its state; a key still locked is linked to
 *     its charge; a notification recorded was applied;
 *   - the offline_queue figures are the INIT charges, per currency;
 *   - one fulfilment event per final charge and refund, none doubled, none
 *     for what is not final;
 *   - every charge and refund in progress is due for the sync engine;
 *   - refunds never exceed their charge; amount_refunded is their sum;
 *   - the Z reports are numbered 1..n, each chained to the one before by
 *     its prev_hash, and each counts exactly the sales and refunds that
 *     carry its number; a row carries only a report that exists;
 *   - a stored reconciliation run is valid JSON of a known state, and every
 *     local charge it names is under review (one transaction);
 *   - retention (SPEC 19): the monthly archives are sound, every id the
 *     live database calls archived is in one, and every check above reads
 *     the live rows and the archived ones together (temporary views named
 *     like the tables: a row in both, copied and not yet removed, counts
 *     once, as the live one) - nothing moved is lost;
 *   - and the store takes the next request.
 */
#include "crash.h"

#include "err.h"
#include "store.h"

#include <dirent.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct crash_run *R;
static sqlite3 *db;
static int failures;

#define FAIL(...) (failures++, crash_fail(R, __VA_ARGS__))

/* Runs sql and calls row() for each result row; any error is a failure. */
static void each(const char *sql, void (*row)(sqlite3_stmt *s, void *arg), void *arg)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK) {
        FAIL("query %s: %s", sql, sqlite3_errmsg(db));
        return;
    }
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        row(s, arg);
    if (rc != SQLITE_DONE)
        FAIL("query %s: %s", sql, sqlite3_errmsg(db));
    sqlite3_finalize(s);
}

static const char *col(sqlite3_stmt *s, int i)
{
    const char *t = (const char *)sqlite3_column_text(s, i);
    return t ? t : "(null)";
}

/* Each row is a violation: prints what it says with the row's columns. */
static void violation(sqlite3_stmt *s, void *arg)
{
    char buf[600];
    size_t n = 0;
    for (int i = 0; i < sqlite3_column_count(s) && n < sizeof buf - 1; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s=%s", i ? " " : "",
                              sqlite3_column_name(s, i), col(s, i));
    FAIL("%s: %s", (const char *)arg, buf);
}

static void integrity_row(sqlite3_stmt *s, void *arg)
{
    (void)arg;
    if (strcmp(col(s, 0), "ok") != 0)
        FAIL("PRAGMA integrity_check: %s", col(s, 0));
}

/* ---- the ledger ---------------------------------------------------------------------- */

static int64_t last_time;

static void check_answer(char *scope, char *key, int status, const char *hex)
{
    size_t cap = strlen(hex) / 2 + 1;
    char *want = malloc(cap);
    long n = want ? crash_unhex(hex, want, cap) : -1;
    sqlite3_stmt *s;
    sqlite3_prepare_v2(db,
                       "SELECT completed_at, response_status, response_body FROM "
                       "idempotency_keys WHERE scope = ?1 AND key = ?2",
                       -1, &s, NULL);
    sqlite3_bind_text(s, 1, scope, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
    if (n < 0) {
        FAIL("ledger: bad answer line for %s", key);
    } else if (sqlite3_step(s) != SQLITE_ROW) {
        FAIL("answered %d to key %s (%s) but the key is gone: %.120s", status, key, scope, want);
    } else if (sqlite3_column_type(s, 0) == SQLITE_NULL) {
        FAIL("answered %d to key %s but the key is not completed", status, key);
    } else if (sqlite3_column_int(s, 1) != status) {
        FAIL("answered %d to key %s but it stores %d", status, key, sqlite3_column_int(s, 1));
    } else if (sqlite3_column_bytes(s, 2) != n || memcmp(sqlite3_column_blob(s, 2), want, n)) {
        FAIL("key %s stores another body than was answered:\n  answered %.*s\n  stored   %.*s", key,
             (int)n, want, sqlite3_column_bytes(s, 2), (const char *)sqlite3_column_blob(s, 2));
    }
    sqlite3_finalize(s);
    free(want);
}

/* The state of a charge (table charges) or refund (refunds) by its id. */
static int state_of(const char *table, const char *col_name, const char *id, enum pt_state *out)
{
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT state FROM %s WHERE %s = ?1", table, col_name);
    sqlite3_stmt *s;
    sqlite3_prepare_v2(db, sql, -1, &s, NULL);
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    int found = sqlite3_step(s) == SQLITE_ROW;
    if (found && pt_state_parse(col(s, 0), out) != PT_OK)
        found = 0;
    sqlite3_finalize(s);
    return found;
}

/* A transition whose commit returned: the row is there, in that state or
 * one reachable from it (a later commit may have been durable before its
 * caller heard so). */
static int reachable(enum pt_state from, enum pt_state to, int refund)
{
    unsigned seen = 1u << from, grew = 1;
    while (grew) {
        grew = 0;
        for (int a = 0; a < PT_STATE__COUNT; a++)
            for (int b = 0; b < PT_STATE__COUNT; b++)
                if ((seen >> a & 1) && !(seen >> b & 1) &&
                    (refund ? pt_refund_transition_legal(a, b) : pt_state_transition_legal(a, b)))
                    seen |= 1u << b, grew = 1;
    }
    return seen >> to & 1;
}

static void check_committed(const char *table, const char *id, const char *state)
{
    enum pt_state want, have;
    int refund = strcmp(table, "refunds") == 0;
    if (pt_state_parse(state, &want) != PT_OK) {
        FAIL("ledger: bad state %s", state);
        return;
    }
    if (!state_of(table, refund ? "refund_id" : "order_id", id, &have))
        FAIL("%s %s was committed %s and is gone", refund ? "refund" : "charge", id, state);
    else if (!reachable(want, have, refund))
        FAIL("%s %s was committed %s and is %s now", refund ? "refund" : "charge", id, state,
             pt_state_name(have));
}

static void check_notification(const char *gw, const char *dedup, const char *order)
{
    sqlite3_stmt *s;
    sqlite3_prepare_v2(db, "SELECT 1 FROM notifications WHERE gateway = ?1 AND dedup_id = ?2", -1,
                       &s, NULL);
    sqlite3_bind_text(s, 1, gw, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, dedup, -1, SQLITE_STATIC);
    if (sqlite3_step(s) != SQLITE_ROW)
        FAIL("notification %s of %s was acknowledged and is gone", dedup, order);
    sqlite3_finalize(s);
    check_committed("charges", order, "SUCCESS");
}

/* An answer that names a charge or refund in a final state: it is there
 * in that state (a final state never changes). */
static void check_answer_object(const char *scope, const char *hex)
{
    char body[4096];
    long n = crash_unhex(hex, body, sizeof body - 1);
    if (n < 0)
        return;
    body[n] = '\0';
    if (strstr(scope, "/reports/") || strstr(scope, "/reconciliations"))
        return; /* a Z report or a run: checked with the tables */
    int refund = strstr(scope, "/refunds") != NULL;
    const char *idk = refund ? "\"refund_id\":\"" : "\"order_id\":\"";
    const char *p = strstr(body, idk), *st = strstr(body, "\"state\":\"");
    char id[80] = "", state[16] = "";
    if (!p || !st)
        return;
    sscanf(p + strlen(idk), "%79[^\"]", id);
    sscanf(st + 9, "%15[A-Z]", state);
    check_committed(refund ? "refunds" : "charges", id, state);
}

/* Charges a retention pass that returned said it moved. */
static long long moved;

static void read_ledger(void)
{
    FILE *f = fopen(R->ledger, "r");
    if (!f) {
        FAIL("no ledger at %s", R->ledger);
        return;
    }
    size_t cap = CRASH_LEDGER_LINE_MAX + 1;
    char *line = malloc(cap);
    while (line && fgets(line, (int)cap, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *f1 = strtok(line, "\t"), *f2 = strtok(NULL, "\t"), *f3 = strtok(NULL, "\t");
        char *f4 = strtok(NULL, "\t"), *f5 = strtok(NULL, "\t");
        if (!f1)
            continue;
        if (f1[0] == 'T' || f1[0] == 'E')
            last_time = f2 ? atoll(f2) : last_time;
        else if (f1[0] == 'A' && f5) {
            check_answer(f2, f3, atoi(f4), f5);
            check_answer_object(f2, f5);
        } else if (f1[0] == 'C' && f3)
            check_committed("charges", f2, f3);
        else if (f1[0] == 'R' && f3)
            check_committed("refunds", f2, f3);
        else if (f1[0] == 'N' && f4)
            check_notification(f2, f3, f4);
        else if (f1[0] == 'M' && f2 && atoll(f2) > moved)
            moved = atoll(f2);
    }
    free(line);
    fclose(f);
}

/* ---- the tables, whatever the ledger says ------------------------------------------- */

/* The closes and the reconciliation runs (SPEC 19). */
static void check_day_close(void)
{
    each("SELECT z FROM z_reports r WHERE z <> (SELECT count(*) FROM z_reports p WHERE p.z <= "
         "r.z) OR hash IS NOT json_extract(body, '$.hash') OR json_extract(body, '$.prev_hash') "
         "IS NOT coalesce((SELECT p.hash FROM z_reports p WHERE p.z = r.z - 1), "
         "'0000000000000000000000000000000000000000000000000000000000000000')",
         violation, "Z report out of its chain");
    /* A final row is in a closed report or in the open one (one after the
     * last), and only a final row is in any (sql/015). */
    each("SELECT 'charge', order_id, z FROM charges WHERE (z IS NOT NULL AND (z NOT IN (SELECT z "
         "FROM z_reports) AND z <> (SELECT coalesce(max(z), 0) + 1 FROM z_reports) OR state NOT "
         "IN ('SUCCESS', 'FAILED', 'CANCELED'))) OR (z IS NULL AND state IN ('SUCCESS', "
         "'FAILED', 'CANCELED')) UNION ALL SELECT 'refund', refund_id, z FROM refunds WHERE (z "
         "IS NOT NULL AND (z NOT IN (SELECT z FROM z_reports) AND z <> (SELECT coalesce(max(z), "
         "0) + 1 FROM z_reports) OR state NOT IN ('SUCCESS', 'FAILED'))) OR (z IS NULL AND "
         "state IN ('SUCCESS', 'FAILED'))",
         violation, "row in a Z report that is not there, not final, or final in none");
    each("SELECT 'charge', order_id FROM charges WHERE state IN ('SUCCESS', 'FAILED', "
         "'CANCELED') AND final_at IS NOT (SELECT min(e.created_at) FROM charge_events e WHERE "
         "e.charge_id = charges.id AND e.refund_id IS NULL AND e.to_state = charges.state AND "
         "e.refused = 0 AND (e.from_state IS NULL OR e.from_state NOT IN ('SUCCESS', 'FAILED', "
         "'CANCELED'))) UNION ALL SELECT 'refund', refund_id FROM refunds WHERE state IN "
         "('SUCCESS', 'FAILED') AND final_at IS NOT (SELECT min(e.created_at) FROM charge_events "
         "e WHERE e.charge_id = refunds.charge_id AND e.refund_id = refunds.refund_id AND "
         "e.to_state = refunds.state AND e.refused = 0 AND (e.from_state IS NULL OR "
         "e.from_state NOT IN ('SUCCESS', 'FAILED')))",
         violation, "final row whose final_at is not its audit trail's");
    each("SELECT r.z, (SELECT coalesce(sum(t.value), 0) FROM json_tree(r.body, '$.totals') t "
         "WHERE t.key = 'charges') AS said, (SELECT count(*) FROM charges c WHERE c.z = r.z AND "
         "c.state = 'SUCCESS') AS rows, (SELECT coalesce(sum(t.value), 0) FROM "
         "json_tree(r.body, '$.totals') t WHERE t.key = 'refunds') AS said_refunds, (SELECT "
         "count(*) FROM refunds f WHERE f.z = r.z AND f.state = 'SUCCESS') AS refund_rows FROM "
         "z_reports r WHERE said <> rows OR said_refunds <> refund_rows",
         violation, "Z report that does not count its own rows");
    each("SELECT gateway, bill_date, substr(body, 1, 80) FROM reconciliations WHERE NOT "
         "json_valid(body) OR json_extract(body, '$.state') NOT IN ('done', 'pending', "
         "'failed') OR json_extract(body, '$.state') IS NOT state",
         violation, "reconciliation run stored half or wrong");
    each("SELECT r.bill_date, d.value ->> '$.order_id' AS order_id FROM reconciliations r, "
         "json_each(r.body, '$.discrepancies') d JOIN charges c ON c.order_id = d.value ->> "
         "'$.order_id' WHERE c.review = 0",
         violation, "charge named by a reconciliation run and not under review");
}

static void check_tables(void)
{
    char sql[2048];
    each("PRAGMA integrity_check", integrity_row, NULL);
    each("PRAGMA foreign_key_check", violation, "foreign_key_check");
    /* The last audited transition of a charge (its own rows, not its
     * refunds') is its state; a charge without a trail was half-written. */
    /* (The id range is the charge's trail, sql/007_audit_rowid.sql: one
     * seek per charge instead of a scan.) */
    each("SELECT c.order_id, c.state, (SELECT e.to_state FROM charge_events e WHERE e.id BETWEEN "
         "c.id * 4294967296 + 1 AND c.id * 4294967296 + 4294967295 AND e.charge_id = c.id AND "
         "e.refund_id IS NULL AND e.refused = 0 AND e.to_state IS NOT NULL ORDER BY e.seq DESC "
         "LIMIT 1) AS audited FROM charges c WHERE audited IS NOT c.state",
         violation, "charge state without its audit row");
    each("SELECT r.refund_id, r.state, (SELECT e.to_state FROM charge_events e WHERE e.id BETWEEN "
         "r.charge_id * 4294967296 + 1 AND r.charge_id * 4294967296 + 4294967295 AND e.charge_id "
         "= r.charge_id AND e.refund_id = r.refund_id AND e.refused = 0 AND e.to_state IS NOT "
         "NULL ORDER BY e.seq DESC LIMIT 1) AS audited FROM refunds r WHERE audited IS NOT "
         "r.state",
         violation, "refund state without its audit row");
    /* A key is completed with its row or still locked and linked to it
     * (a refund's key to its refund id). */
    /* (A reconciliation's key is committed naming no order while the
     * download runs: after a cut it runs again, which is what a run is.) */
    each("SELECT k.scope, k.key, k.order_id FROM idempotency_keys k WHERE k.completed_at IS NULL "
         "AND k.scope <> 'POST /v1/reconciliations' AND (k.order_id IS NULL OR CASE WHEN k.scope "
         "LIKE '%/refunds' THEN NOT EXISTS (SELECT "
         "1 FROM refunds r WHERE r.refund_id = k.order_id) ELSE NOT EXISTS (SELECT 1 FROM "
         "charges c WHERE c.order_id = k.order_id) END)",
         violation, "key locked without its charge or refund");
    each("SELECT k.key, k.response_status FROM idempotency_keys k WHERE k.scope = 'POST "
         "/v1/charges' AND k.response_status IN (200, 201, 202, 402) AND NOT EXISTS (SELECT 1 "
         "FROM charges c WHERE instr(CAST(k.response_body AS TEXT), '\"order_id\":\"' || "
         "c.order_id || '\"') > 0)",
         violation, "key completed without its charge");
    each("SELECT k.key FROM idempotency_keys k WHERE k.scope LIKE '%/refunds' AND "
         "k.response_status IN (200, 201, 202, 402) AND NOT EXISTS (SELECT 1 FROM refunds r "
         "WHERE instr(CAST(k.response_body AS TEXT), '\"refund_id\":\"' || r.refund_id || "
         "'\"') > 0)",
         violation, "refund key completed without its refund");
    each("SELECT n.dedup_id, n.order_id, c.state FROM notifications n LEFT JOIN charges c ON "
         "c.order_id = n.order_id WHERE n.outcome = 'applied' AND c.state IS NOT 'SUCCESS'",
         violation, "notification recorded but not applied");
    /* The queue figures the offline limits read: every charge accepted
     * offline and not final (sql/011, SPEC 18). */
    each("SELECT q.currency, q.count, q.total, x.n, x.t FROM (SELECT currency, count(*) AS n, "
         "sum(amount) AS t FROM charges WHERE offline_accepted = 1 AND state IN ('INIT', "
         "'PROCESSING', 'PENDING', 'UNKNOWN') GROUP BY currency) x FULL JOIN offline_queue q "
         "ON q.currency = x.currency WHERE coalesce(q.count, 0) <> coalesce(x.n, 0) OR "
         "coalesce(q.total, 0) <> coalesce(x.t, 0)",
         violation, "offline_queue figures differ from the charges accepted offline");
    /* Fulfilment: one event per final charge or refund, none for others.
     * (A review holds a sale's event back; one a reconciliation raised
     * came after the sale was fulfilled.) */
    each("SELECT c.order_id, c.state, c.review, (SELECT group_concat(type) FROM events e WHERE "
         "e.charge_id = c.id AND e.type <> 'charge.review' AND e.refund_id IS NULL) AS ev FROM "
         "charges c WHERE ev IS NOT (CASE WHEN c.state = 'SUCCESS' AND c.review = 0 THEN "
         "'charge.succeeded' WHEN c.state = 'FAILED' THEN 'charge.failed' WHEN c.state = "
         "'CANCELED' THEN 'charge.canceled' END) AND NOT (c.state = 'SUCCESS' AND c.review = 1 "
         "AND (ev IS NULL OR (ev = 'charge.succeeded' AND c.review_reason LIKE "
         "'reconciliation_%')))",
         violation, "fulfilment event lost or doubled");
    each("SELECT r.refund_id, r.state, (SELECT group_concat(type) FROM events e WHERE "
         "e.refund_id = r.id) AS ev FROM refunds r WHERE ev IS NOT (CASE r.state WHEN 'SUCCESS' "
         "THEN 'refund.succeeded' WHEN 'FAILED' THEN 'refund.failed' END)",
         violation, "refund event lost or doubled");
    /* In progress and due: the sync engine picks it up within its backoff cap. */
    snprintf(sql, sizeof sql,
             "SELECT 'charge' AS what, order_id, state, next_attempt_at FROM charges WHERE state "
             "IN ('INIT', 'PROCESSING', 'PENDING', 'UNKNOWN') AND (next_attempt_at IS NULL OR "
             "next_attempt_at > %lld) UNION ALL SELECT 'refund', refund_id, state, "
             "next_attempt_at FROM refunds WHERE state IN ('INIT', 'PROCESSING', 'PENDING', "
             "'UNKNOWN') AND (next_attempt_at IS NULL OR next_attempt_at > %lld)",
             (long long)(last_time + 120000), (long long)(last_time + 120000));
    each(sql, violation, "left where the sync engine cannot pick it up");
    /* (A charge's number of refunds is counted when it is read since
     * sql/008; only amount_refunded is kept, by a trigger.) */
    each("SELECT c.order_id, c.amount, c.amount_refunded, (SELECT coalesce(sum(amount), "
         "0) FROM refunds r WHERE r.charge_id = c.id AND r.state <> 'FAILED') AS owed, (SELECT "
         "coalesce(sum(amount), 0) FROM refunds r WHERE r.charge_id = c.id AND r.state = "
         "'SUCCESS') AS paid FROM charges c WHERE owed > c.amount OR paid <> c.amount_refunded",
         violation, "refunds exceed their charge or its sums");
    check_day_close();
}

/* The store takes the next request once the power is back. */
static void check_next_request(struct pt_store *st)
{
    struct pt_config cfg;
    pt_config_defaults(&cfg);
    crash_config(&cfg);
    struct pt_intake in = {.cfg = &cfg, .idem = crash_idem(8)};
    const char *body = "{\"order_id\":\"O-AFTER\",\"amount\":100,\"currency\":\"USD\","
                       "\"gateway\":\"stripe\",\"method\":\"card_on_file\","
                       "\"payment_method\":\"pm_card_visa\"}";
    struct pt_reply r = {0};
    pt_intake_create_charge(&in, st, "k-after", body, strlen(body), last_time + 5000, &r);
    if (r.status != 202)
        FAIL("the first charge after the restart: %d %.200s", r.status, r.body ? r.body : "");
    pt_reply_free(&r);
    if (!pt_store_writable(st))
        FAIL("after the restart /healthz (pt_store_writable) would answer 503");
}

/*
 * Retention's archives (the .db files of data_dir/archive, data_dir the
 * database's directory): each recovered as payterm opens it, checked,
 * attached, and read with the live tables through temporary views that
 * shadow them.  Returns the number attached.
 */
static int attach_archives(void)
{
    char adir[600];
    snprintf(adir, sizeof adir, "%s", R->db);
    char *slash = strrchr(adir, '/');
    snprintf(slash ? slash + 1 : adir, sizeof adir - (size_t)(slash ? slash + 1 - adir : 0),
             "archive");
    DIR *d = opendir(adir);
    int n = 0;
    for (struct dirent *e; d && n < 8 && (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".db") != 0)
            continue;
        char file[900], err[512], sql[1100];
        snprintf(file, sizeof file, "%s/%s", adir, e->d_name);
        struct pt_store *a;
        /* Migrated as the next pass would: a cut can leave a new file
         * part way through its schema (holding nothing removed yet). */
        struct pt_store_options o = {.path = file, .no_wal_vfs = 1};
        if (pt_store_open(&o, &a, err, sizeof err) != PT_OK) {
            FAIL("archive %s does not open: %s", file, err);
            continue;
        }
        pt_store_close(a);
        snprintf(sql, sizeof sql, "ATTACH '%s' AS a%d", file, n);
        if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
            FAIL("archive %s: %s", file, sqlite3_errmsg(db));
            continue;
        }
        snprintf(sql, sizeof sql, "PRAGMA a%d.integrity_check", n);
        each(sql, integrity_row, NULL);
        n++;
    }
    if (d)
        closedir(d);
    if (!n)
        return 0;
    /* A row of an archive counts when its charge is not live. */
    static const struct {
        const char *table, *charge_col;
    } views[] = {{"charges", "id"},
                 {"refunds", "charge_id"},
                 {"charge_events", "charge_id"},
                 {"events", "charge_id"}};
    for (size_t v = 0; v < sizeof views / sizeof views[0]; v++) {
        char sql[2048];
        int k = snprintf(sql, sizeof sql, "CREATE TEMP VIEW %s AS SELECT * FROM main.%s",
                         views[v].table, views[v].table);
        for (int i = 0; i < n; i++)
            k += snprintf(sql + k, sizeof sql - (size_t)k,
                          " UNION ALL SELECT * FROM a%d.%s WHERE %s NOT IN (SELECT id FROM "
                          "main.charges)",
                          i, views[v].table, views[v].charge_col);
        if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
            FAIL("view %s: %s", views[v].table, sqlite3_errmsg(db));
    }
    return n;
}

/* Every id the live database calls archived is in an archive. */
static void check_archived(void)
{
    each("SELECT a.kind, a.ext_id FROM main.archived a WHERE NOT EXISTS (SELECT 1 FROM charges c "
         "WHERE a.kind = 'charge' AND c.order_id = a.ext_id AND c.id NOT IN (SELECT id FROM "
         "main.charges)) AND NOT EXISTS (SELECT 1 FROM refunds r WHERE a.kind = 'refund' AND "
         "r.refund_id = a.ext_id AND r.charge_id NOT IN (SELECT id FROM main.charges))",
         violation, "archived id in no archive (removed before its copy was durable)");
}

int crash_check(const struct crash_run *run)
{
    R = run;
    failures = 0;
    char err[512];
    struct pt_store *st;
    struct pt_store_options o = {.path = run->db, .no_wal_vfs = run->no_wal_vfs, .existing = 1};
    if (pt_store_open(&o, &st, err, sizeof err) != PT_OK) {
        FAIL("reopen: %s", err);
        return failures;
    }
    if (sqlite3_open_v2(run->db, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        FAIL("read-only open: %s", sqlite3_errmsg(db));
    } else {
        attach_archives();
        check_archived();
        read_ledger();
        check_tables();
        /* A pass that returned moved them for good (its removals committed). */
        char sql[160];
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM main.archived WHERE kind = 'charge' HAVING count(*) < %lld",
                 moved);
        each(sql, violation, "charges a retention pass moved are not archived");
    }
    sqlite3_close(db);
    db = NULL;
    check_next_request(st);
    pt_store_close(st);
    return failures;
}
