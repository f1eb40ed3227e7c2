/*
 * test_store.c - opening, migrating and failing storage.
 *
 * The store must: create a WAL database with synchronous=FULL, migrate a
 * database from every earlier schema version, refuse a newer one with a clear
 * message, and on a full disk report PT_EFULL while leaving no half-written
 * charge behind.
 */
#include "testutil.h"

#include "err.h"
#include "migrations.h"
#include "store.h"

#include <sqlite3.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>

static char dir[256];

static int setup(void **state)
{
    (void)state;
    pt_test_tmpdir(dir, sizeof dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pt_test_disk_set(PT_TEST_DISK_OK);
    pt_test_rmtree(dir);
    return 0;
}

static void db_path(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

/* Runs one query on a raw connection and returns the first column as text. */
/* Applies the first `upto` migrations to db as an older payterm did, each
 * with its user_version bump (a database left at that version). */
static void migrate_by_hand(sqlite3 *db, int upto)
{
    for (int i = 0; i < upto; i++) {
        char bump[64];
        assert_int_equal(sqlite3_exec(db, pt_migrations[i].sql, NULL, NULL, NULL), SQLITE_OK);
        snprintf(bump, sizeof bump, "PRAGMA user_version=%d", i + 1);
        assert_int_equal(sqlite3_exec(db, bump, NULL, NULL, NULL), SQLITE_OK);
    }
}

static void raw_query(const char *path, const char *sql, char *out, size_t outlen)
{
    sqlite3 *db;
    sqlite3_stmt *s;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    out[0] = '\0';
    if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0))
        snprintf(out, outlen, "%s", sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    sqlite3_close(db);
}

static void test_open_creates_wal_full(void **state)
{
    (void)state;
    pt_test_sqlite_only("WAL and synchronous are SQLite's");
    char path[300], err[512], v[64];
    db_path(path, sizeof path, "a.db");
    struct pt_store *st;
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    int version = -1;
    assert_int_equal(pt_store_schema_version(st, &version), PT_OK);
    assert_int_equal(version, pt_store_schema_latest());
    assert_true(pt_store_writable(st));
    pt_store_close(st);

    raw_query(path, "PRAGMA journal_mode", v, sizeof v);
    assert_string_equal(v, "wal");
    /* Every table the SPEC names exists. */
    static const char *const tables[] = {"idempotency_keys", "charges", "charge_events",
                                         "notifications", "events"};
    for (size_t i = 0; i < 5; i++) {
        char sql[128];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM sqlite_master WHERE name='%s'", tables[i]);
        raw_query(path, sql, v, sizeof v);
        if (strcmp(v, "1") != 0)
            fail_msg("table %s missing", tables[i]);
    }
}

/* synchronous is a per-connection setting: check it on the store's own
 * connection through a charge insert that must be durable. */
static void test_synchronous_full_by_default(void **state)
{
    (void)state;
    pt_test_sqlite_only("WAL and synchronous are SQLite's");
    char path[300], err[512];
    db_path(path, sizeof path, "sync.db");
    struct pt_store *st;
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    int sync = -1;
    assert_int_equal(pt_store_pragma_int(st, "synchronous", &sync), PT_OK);
    assert_int_equal(sync, 2); /* FULL */
    int fk = -1;
    assert_int_equal(pt_store_pragma_int(st, "foreign_keys", &fk), PT_OK);
    assert_int_equal(fk, 1);
    pt_store_close(st);

    o.synchronous_normal = 1;
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    assert_int_equal(pt_store_pragma_int(st, "synchronous", &sync), PT_OK);
    assert_int_equal(sync, 1); /* NORMAL, only when asked for */
    pt_store_close(st);
}

/* A version-1 database with charges queued, sent and canceled: migration 2
 * must start the offline queue's figures from what is really queued. */
static void test_migration_2_counts_the_queue(void **state)
{
    (void)state;
    pt_test_sqlite_only("sql/ migrations (PostgreSQL's are sql/pg/)");
    char path[300], err[512];
    snprintf(path, sizeof path, "%s/q.db", dir);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, pt_migrations[0].sql, NULL, NULL, NULL), SQLITE_OK);
    const char *rows[][3] = {{"A", "INIT", "USD"},       {"B", "INIT", "USD"},
                             {"C", "SUCCESS", "USD"},    {"D", "INIT", "CNY"},
                             {"E", "PROCESSING", "CNY"}, {"F", "CANCELED", "JPY"}};
    for (int i = 0; i < 6; i++) {
        char sql[512];
        snprintf(sql, sizeof sql,
                 "INSERT INTO charges (order_id, gateway, method, amount, currency, state,"
                 " offline_mode, params_hash, created_at, updated_at) VALUES ('%s', 'stripe',"
                 " 'card_on_file', %d, '%s', '%s', 'prefer_online', zeroblob(32), 1, 1)",
                 rows[i][0], 100 * (i + 1), rows[i][2], rows[i][1]);
        assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    }
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version=1", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);

    struct pt_store *st;
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    int64_t count, total;
    assert_int_equal(pt_store_queue_figures(st, "USD", &count, &total), PT_OK);
    assert_int_equal(count, 3); /* A, B, D */
    assert_int_equal(total, 100 + 200);
    assert_int_equal(pt_store_queue_figures(st, "CNY", &count, &total), PT_OK);
    assert_int_equal(total, 400);
    assert_int_equal(pt_store_queue_figures(st, "JPY", &count, &total), PT_OK);
    assert_int_equal(total, 0);
    pt_store_close(st);
}

static void test_migrate_from_each_version(void **state)
{
    (void)state;
    pt_test_sqlite_only("sql/ migrations (PostgreSQL's are sql/pg/)");
    for (int from = 0; from < pt_migrations_count; from++) {
        char path[300], err[512], v[64];
        snprintf(path, sizeof path, "%s/m%d.db", dir, from);
        sqlite3 *db;
        assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
        migrate_by_hand(db, from);
        sqlite3_close(db);

        struct pt_store *st;
        struct pt_store_options o = {.path = path};
        assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
        int version = -1;
        assert_int_equal(pt_store_schema_version(st, &version), PT_OK);
        assert_int_equal(version, pt_migrations_count);
        pt_store_close(st);
        raw_query(path, "SELECT count(*) FROM sqlite_master WHERE name='events'", v, sizeof v);
        assert_string_equal(v, "1");
    }
}

/* 006 rebuilds the events table (its type CHECK takes the refund events):
 * every event keeps its seq and payload, and seq never goes back, even
 * past events that are no longer there (AUTOINCREMENT's high-water mark). */
static void test_refund_migration_keeps_the_feed(void **state)
{
    (void)state;
    pt_test_sqlite_only("sql/ migrations (PostgreSQL's are sql/pg/)");
    char path[300], err[512], v[256];
    db_path(path, sizeof path, "feed5.db");
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    migrate_by_hand(db, 5);
    assert_int_equal(
        sqlite3_exec(db,
                     "INSERT INTO charges (order_id, gateway, method, amount, currency, state,"
                     " offline_mode, created_at, updated_at) VALUES ('OLD-1', 'stripe',"
                     " 'card_on_file', 500, 'USD', 'SUCCESS', 'prefer_online', 1, 1);"
                     "INSERT INTO events (type, charge_id, order_id, payload, created_at) VALUES"
                     " ('charge.review', 1, 'OLD-1', '{\"a\":1}', 1),"
                     " ('charge.succeeded', 1, 'OLD-1', '{\"a\":2}', 2),"
                     " ('charge.review', 1, 'OLD-1', '{\"a\":3}', 3);"
                     "DELETE FROM events WHERE seq = 3;",
                     NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);

    struct pt_store *st;
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    struct pt_event_row rows[4];
    int n = 0;
    assert_int_equal(pt_store_events_list(st, 0, 4, rows, &n), PT_OK);
    assert_int_equal(n, 2);
    assert_int_equal(rows[0].seq, 1);
    assert_string_equal(rows[1].type, "charge.succeeded");
    assert_string_equal(rows[1].payload, "{\"a\":2}");
    pt_event_rows_free(rows, n);
    /* Still once per charge and type after the rebuild. */
    assert_int_equal(pt_store_begin(st), PT_OK);
    int64_t seq = 0;
    assert_int_equal(pt_store_event_insert(st, "charge.succeeded", 1, "OLD-1", "{}", 4, &seq),
                     PT_EEXIST);
    assert_int_equal(pt_store_event_insert(st, "charge.review", 1, "OLD-1", "{}", 4, &seq), PT_OK);
    /* Not 3: that number was handed out once.  (Not necessarily 4 either:
     * SQLite's AUTOINCREMENT counts the refused INSERT OR IGNORE too.) */
    assert_true(seq > 3);
    assert_int_equal(pt_store_commit(st), PT_OK);
    /* The charge gained its refund columns, zero. */
    struct pt_charge c;
    assert_int_equal(pt_store_charge_get(st, "OLD-1", &c), PT_OK);
    assert_int_equal(c.amount_refunded, 0);
    assert_int_equal(c.refunds, 0);
    pt_store_close(st);
    raw_query(path, "SELECT group_concat(name) FROM sqlite_master WHERE name LIKE 'events%'", v,
              sizeof v);
    assert_non_null(strstr(v, "events_once_per_refund"));
    assert_null(strstr(v, "events_new"));
}

/* 007 rebuilds the audit trail as a rowid table keyed charge_id * 2^32 +
 * seq: every row keeps its charge, seq and text, the trails of two charges
 * stay apart and in order, the next row of each continues its own seq, and
 * the append-only triggers come back. */
static void test_audit_migration_keeps_the_trail(void **state)
{
    (void)state;
    pt_test_sqlite_only("sql/ migrations (PostgreSQL's are sql/pg/)");
    char path[300], err[512], v[256];
    db_path(path, sizeof path, "trail6.db");
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    migrate_by_hand(db, 6);
    assert_int_equal(
        sqlite3_exec(
            db,
            "INSERT INTO charges (order_id, gateway, method, amount, currency, state,"
            " offline_mode, created_at, updated_at) VALUES"
            " ('OLD-1', 'stripe', 'card_on_file', 500, 'USD', 'SUCCESS', 'prefer_online',"
            " 1, 1), ('OLD-2', 'alipay', 'barcode', 700, 'CNY', 'PROCESSING',"
            " 'prefer_online', 1, 1);"
            "INSERT INTO charge_events (charge_id, seq, from_state, to_state, cause, actor,"
            " refused, detail, created_at, refund_id) VALUES"
            " (1, 1, NULL, 'INIT', 'created', 'api', 0, NULL, 1, NULL),"
            " (2, 1, NULL, 'INIT', 'created', 'api', 0, NULL, 2, NULL),"
            " (1, 2, 'INIT', 'PROCESSING', 'send', 'sync', 0, NULL, 3, NULL),"
            " (2, 2, 'INIT', 'PROCESSING', 'send', 'sync', 0, NULL, 4, NULL),"
            " (1, 3, 'PROCESSING', 'SUCCESS', 'gateway_paid', 'sync', 0, 'ok', 5, NULL),"
            " (1, 4, 'SUCCESS', 'CANCELED', 'cancel', 'api', 1, 'final', 6, 'R-1');",
            NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);

    struct pt_store *st;
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(
        pt_store_audit(st, 2, "PROCESSING", "SUCCESS", "gateway_paid", "sync", 0, NULL, 7), PT_OK);
    assert_int_equal(pt_store_audit(st, 1, NULL, NULL, "review", "operator:ann", 0, NULL, 8),
                     PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    pt_store_close(st);
    raw_query(path,
              "SELECT group_concat(charge_id || '.' || seq || ':' || cause || ':' ||"
              " coalesce(refund_id, '-'), ' ') FROM (SELECT * FROM charge_events ORDER BY id)",
              v, sizeof v);
    assert_string_equal(v, "1.1:created:- 1.2:send:- 1.3:gateway_paid:- 1.4:cancel:R-1 "
                           "1.5:review:- 2.1:created:- 2.2:send:- 2.3:gateway_paid:-");
    raw_query(path, "SELECT count(*) FROM charge_events WHERE id <> charge_id * 4294967296 + seq",
              v, sizeof v);
    assert_string_equal(v, "0");
    raw_query(path, "SELECT group_concat(name) FROM sqlite_master WHERE tbl_name = 'charge_events'",
              v, sizeof v);
    assert_non_null(strstr(v, "charge_events_append_only_u"));
    assert_non_null(strstr(v, "charge_events_append_only_d"));
    assert_null(strstr(v, "charge_events_new"));
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_not_equal(sqlite3_exec(db, "DELETE FROM charge_events", NULL, NULL, NULL),
                         SQLITE_OK);
    /* An id that disagrees with its charge and seq is refused. */
    assert_int_not_equal(sqlite3_exec(db,
                                      "INSERT INTO charge_events (id, charge_id, seq, cause,"
                                      " actor, created_at) VALUES (4294967299, 2, 9, 'x', 'y', 9)",
                                      NULL, NULL, NULL),
                         SQLITE_OK);
    sqlite3_close(db);
}

/* A version-7 database with refunds in every stage: migration 8 drops
 * the refund counter and refunds_active, and nothing a client or the sync
 * engine sees changes - the charges' refund counts, the work list (the
 * floor of the refunds not final), its next due time, the status counts. */
static void test_refund_pages_migration(void **state)
{
    (void)state;
    pt_test_sqlite_only("sql/ migrations (PostgreSQL's are sql/pg/)");
    char path[300], err[512], v[256];
    db_path(path, sizeof path, "refunds7.db");
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    migrate_by_hand(db, 7);
    assert_int_equal(
        sqlite3_exec(db,
                     "INSERT INTO charges (order_id, gateway, method, amount, currency, state,"
                     " offline_mode, created_at, updated_at) VALUES"
                     " ('M8-1', 'stripe', 'card_on_file', 5000, 'USD', 'SUCCESS', 'prefer_online',"
                     " 1, 1),"
                     " ('M8-2', 'stripe', 'card_on_file', 900, 'USD', 'SUCCESS', 'prefer_online',"
                     " 1, 1);"
                     "INSERT INTO refunds (refund_id, charge_id, amount, state, offline_mode,"
                     " next_attempt_at, created_at, updated_at) VALUES"
                     " ('R8-1', 1, 1000, 'INIT', 'prefer_online', 0, 2, 2),"
                     " ('R8-2', 1, 1000, 'INIT', 'prefer_online', 0, 2, 2),"
                     " ('R8-3', 2, 100, 'INIT', 'prefer_online', 0, 2, 2),"
                     " ('R8-4', 1, 500, 'INIT', 'prefer_online', 77, 3, 3);"
                     "UPDATE refunds SET state = 'PROCESSING' WHERE id <= 3;"
                     "UPDATE refunds SET state = 'SUCCESS' WHERE id = 1;"
                     "UPDATE refunds SET state = 'FAILED' WHERE id = 2;"
                     "UPDATE refunds SET state = 'UNKNOWN', next_attempt_at = 55 WHERE id = 3;",
                     NULL, NULL, NULL),
        SQLITE_OK);
    raw_query(path, "SELECT group_concat(refunds || '/' || amount_refunded) FROM charges", v,
              sizeof v);
    sqlite3_close(db);
    assert_string_equal(v, "3/1000,1/0"); /* what version 7's triggers kept */

    struct pt_store *st;
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    struct pt_charge c;
    assert_int_equal(pt_store_charge_get(st, "M8-1", &c), PT_OK);
    assert_int_equal(c.refunds, 3);
    assert_int_equal(c.amount_refunded, 1000);
    assert_int_equal(pt_store_charge_get(st, "M8-2", &c), PT_OK);
    assert_int_equal(c.refunds, 1);
    /* The work list starts at the first refund not final (R8-3). */
    struct pt_refund rows[4];
    int n = 0;
    assert_int_equal(pt_store_refunds_due(st, 100, 0, 4, rows, &n), PT_OK);
    assert_int_equal(n, 2);
    assert_string_equal(rows[0].refund_id, "R8-3");
    assert_string_equal(rows[1].refund_id, "R8-4");
    int64_t when = 0;
    assert_int_equal(pt_store_refunds_next_due(st, &when), PT_OK);
    assert_int_equal(when, 55);
    struct pt_refund_stats rs;
    assert_int_equal(pt_store_refund_stats(st, &rs), PT_OK);
    assert_int_equal(rs.by_state[PT_STATE_UNKNOWN], 1);
    assert_int_equal(rs.by_state[PT_STATE_INIT], 1);
    assert_int_equal(rs.by_state[PT_STATE_PROCESSING], 0);
    /* Everything final: the floor moves past the last refund; a new one
     * above it is found. */
    assert_int_equal(pt_store_begin(st), PT_OK);
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    assert_int_equal(pt_store_refund_transition(st, 3, pt_refund_allowed_from(PT_STATE_SUCCESS),
                                                PT_STATE_SUCCESS, &p, 9),
                     PT_OK);
    assert_int_equal(pt_store_refund_withdraw(st, 4), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    assert_int_equal(pt_store_refunds_due(st, 100, 0, 4, rows, &n), PT_OK);
    assert_int_equal(n, 0);
    assert_int_equal(pt_store_refunds_next_due(st, &when), PT_OK);
    assert_int_equal(when, 0);
    assert_int_equal(pt_store_charge_get(st, "M8-1", &c), PT_OK);
    assert_int_equal(c.refunds, 2); /* R8-4 withdrawn */
    /* A withdrawal frees the highest ids, and SQLite gives them again: a
     * refund below a floor read before it is still found. */
    struct pt_refund r5 = {0}, r6 = {0}, r7 = {0};
    const char *ids[] = {"R8-5", "R8-6", "R8-7"};
    struct pt_refund *rr[] = {&r5, &r6, &r7};
    for (int i = 0; i < 3; i++) {
        snprintf(rr[i]->refund_id, sizeof rr[i]->refund_id, "%s", ids[i]);
        rr[i]->charge_id = 1;
        rr[i]->amount = 100;
        rr[i]->state = PT_STATE_INIT;
        rr[i]->next_attempt_at = 10;
    }
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_store_refund_insert(st, &r5, 10), PT_OK);
    assert_int_equal(pt_store_refund_insert(st, &r6, 10), PT_OK);
    assert_int_equal(pt_store_refund_withdraw(st, r5.id), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    assert_int_equal(pt_store_refunds_due(st, 100, 0, 4, rows, &n), PT_OK);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].refund_id, "R8-6"); /* the floor is R8-6 now */
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_store_refund_withdraw(st, r6.id), PT_OK);
    assert_int_equal(pt_store_refund_insert(st, &r7, 11), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    assert_true(r7.id < r6.id); /* an id below the floor read before */
    assert_int_equal(pt_store_refunds_due(st, 100, 0, 4, rows, &n), PT_OK);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].refund_id, "R8-7");
    assert_int_equal(pt_store_refunds_next_due(st, &when), PT_OK);
    assert_int_equal(when, 10);
    pt_store_close(st);
    raw_query(path,
              "SELECT count(*) FROM sqlite_master WHERE name IN ('refunds_active',"
              " 'refunds_count', 'refunds_uncount')",
              v, sizeof v);
    assert_string_equal(v, "0");
}

/* Migration 15 gives the rows already final their report - the open one,
 * one after the last closed - and the time they became SUCCESS, from their
 * audit trail; a row not final gets neither, and a row in a closed report
 * keeps it.  From then on a row takes both as it becomes final. */
static void test_at_final_migration(void **state)
{
    (void)state;
    pt_test_sqlite_only("sql/ migrations (PostgreSQL's are sql/pg/)");
    char path[300], err[512], v[256];
    db_path(path, sizeof path, "atfinal14.db");
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    migrate_by_hand(db, 14);
    const char *h64 = "'0000000000000000000000000000000000000000000000000000000000000001'";
    char sql[4096];
    snprintf(
        sql, sizeof sql,
        "INSERT INTO charges (order_id, gateway, method, amount, currency, state, offline_mode,"
        " created_at, updated_at) VALUES"
        " ('F-1', 'stripe', 'card_on_file', 5000, 'USD', 'SUCCESS', 'prefer_online', 1, 9000),"
        " ('F-2', 'stripe', 'card_on_file', 700, 'USD', 'FAILED', 'prefer_online', 1, 1),"
        " ('F-3', 'stripe', 'card_on_file', 900, 'USD', 'PENDING', 'prefer_online', 1, 1),"
        " ('F-4', 'stripe', 'card_on_file', 300, 'USD', 'SUCCESS', 'prefer_online', 1, 1);"
        "INSERT INTO charge_events (id, charge_id, seq, from_state, to_state, cause, actor,"
        " refused, created_at, refund_id) VALUES"
        " (4294967297, 1, 1, NULL, 'INIT', 'created', 'api', 0, 1000, NULL),"
        " (4294967298, 1, 2, 'INIT', 'SUCCESS', 'gateway', 'sync', 0, 5000, NULL),"
        " (4294967299, 1, 3, 'SUCCESS', 'SUCCESS', 'review_raised', 'op', 0, 9000, NULL),"
        " (4294967300, 1, 4, 'PROCESSING', 'SUCCESS', 'gateway', 'sync', 0, 6000, 'RF-1');"
        "INSERT INTO refunds (refund_id, charge_id, amount, state, offline_mode,"
        " next_attempt_at, created_at, updated_at) VALUES"
        " ('RF-1', 1, 1000, 'INIT', 'prefer_online', 0, 2, 2);"
        "UPDATE refunds SET state = 'SUCCESS' WHERE id = 1;"
        "INSERT INTO z_reports (z, lane, from_at, to_at, hash, body, created_at) VALUES"
        " (1, 'lane-1', 0, 100, %s, '{}', 100);"
        "UPDATE charges SET z = 1 WHERE order_id = 'F-4';",
        h64);
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("version 14: %s", msg);
    sqlite3_close(db);

    struct pt_store *st;
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    raw_query(path,
              "SELECT group_concat(order_id || ':' || coalesce(z, '-') || ':'"
              " || coalesce(final_at, '-'), ' ') FROM (SELECT * FROM charges ORDER BY id)",
              v, sizeof v);
    assert_string_equal(v, "F-1:2:5000 F-2:2:- F-3:-:- F-4:1:-");
    raw_query(path, "SELECT z || ':' || final_at FROM refunds", v, sizeof v);
    assert_string_equal(v, "2:6000");

    /* A row becoming final now takes the open report and its audit time. */
    struct pt_charge c;
    assert_int_equal(pt_store_charge_get(st, "F-3", &c), PT_OK);
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(
        pt_store_charge_transition(st, c.id, 1u << PT_STATE_PENDING, PT_STATE_SUCCESS, &p, 7000),
        PT_OK);
    assert_int_equal(
        pt_store_audit(st, c.id, "PENDING", "SUCCESS", "gateway", "sync", 0, NULL, 7000), PT_OK);
    assert_int_equal(
        pt_store_audit(st, c.id, "SUCCESS", "SUCCESS", "review_raised", "op", 0, NULL, 7500),
        PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    raw_query(path, "SELECT z || ':' || final_at FROM charges WHERE order_id = 'F-3'", v, sizeof v);
    assert_string_equal(v, "2:7000");
    pt_store_close(st);
}

/* At a daemon's start nothing is on its way: every PROCESSING charge and
 * refund becomes due now, however long its run's window was; nothing else
 * moves. */
static void test_sends_interrupted_due_at_start(void **state)
{
    (void)state;
    char path[300], err[512], v[256];
    db_path(path, sizeof path, "interrupted.db");
    struct pt_store *st;
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    pt_store_close(st);
    pt_test_sql_exec(
        path,
        "INSERT INTO charges (order_id, gateway, method, amount, currency, state,"
        " offline_mode, next_attempt_at, created_at, updated_at) VALUES"
        " ('I-1', 'stripe', 'card_on_file', 500, 'USD', 'SUCCESS', 'prefer_online', 0, 1, 1),"
        " ('I-2', 'stripe', 'card_on_file', 500, 'USD', 'PROCESSING', 'prefer_online',"
        " 900000, 1, 1),"
        " ('I-3', 'stripe', 'card_on_file', 500, 'USD', 'INIT', 'prefer_online', 700000, 1, 1),"
        " ('I-4', 'stripe', 'card_on_file', 500, 'USD', 'PROCESSING', 'prefer_online',"
        " 50, 1, 1);"
        "INSERT INTO refunds (refund_id, charge_id, amount, state, offline_mode,"
        " next_attempt_at, created_at, updated_at) VALUES"
        " ('IR-1', 1, 100, 'INIT', 'prefer_online', 800000, 2, 2);"
        "UPDATE refunds SET state = 'PROCESSING';");
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    int n = -1;
    assert_int_equal(pt_store_sends_interrupted(st, 100, &n), PT_OK);
    assert_int_equal(n, 2); /* I-2 and IR-1; I-4 was due already */
    pt_store_close(st);
    static const char *const order[] = {"I-1", "I-2", "I-3", "I-4"};
    static const long long want[] = {0, 100, 700000, 50};
    for (int i = 0; i < 4; i++) {
        snprintf(v, sizeof v, "SELECT next_attempt_at FROM charges WHERE order_id = '%s'",
                 order[i]);
        assert_int_equal(pt_test_sql_int(path, v, 0), want[i]);
    }
    assert_int_equal(pt_test_sql_int(path, "SELECT next_attempt_at FROM refunds", 0), 100);
}

static void test_too_new_refused(void **state)
{
    (void)state;
    pt_test_sqlite_only("PRAGMA user_version is SQLite's");
    char path[300], err[512], sql[64];
    db_path(path, sizeof path, "new.db");
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    snprintf(sql, sizeof sql, "PRAGMA user_version=%d", pt_migrations_count + 1);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);

    struct pt_store *st = (struct pt_store *)1;
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_ETOONEW);
    assert_null(st);
    assert_non_null(strstr(err, "newer payterm"));
    assert_non_null(strstr(err, path));
    /* And the database was not touched. */
    char v[16];
    raw_query(path, "PRAGMA user_version", v, sizeof v);
    char want[16];
    snprintf(want, sizeof want, "%d", pt_migrations_count + 1);
    assert_string_equal(v, want);
}

static void test_not_a_database(void **state)
{
    (void)state;
    pt_test_sqlite_only("a file that is not a database is SQLite's");
    char path[300], err[512];
    db_path(path, sizeof path, "junk.db");
    pt_test_write_file(path,
                       "this is not an sqlite file, it is a shopping list...........\n"
                       "..................................................................",
                       0600);
    struct pt_store *st;
    struct pt_store_options o = {.path = path};
    int rc = pt_test_store_open(&o, &st, err, sizeof err);
    assert_int_not_equal(rc, PT_OK);
    assert_non_null(strstr(err, path));
}

static void fill_charge(struct pt_charge *c, int i)
{
    memset(c, 0, sizeof *c);
    snprintf(c->order_id, sizeof c->order_id, "FULL-%06d", i);
    strcpy(c->gateway, "alipay");
    strcpy(c->method, "barcode");
    c->amount = 100 + i;
    strcpy(c->currency, "CNY");
    c->state = PT_STATE_INIT;
    c->offline_accepted = 1; /* queued, as the API queues it */
    /* A large subject makes the database fill up quickly. */
    memset(c->subject, 'x', 250);
}

/* Key + charge + audit in one transaction, as the API does it. */
static int guarded_insert(struct pt_store *st, int i)
{
    struct pt_charge c;
    fill_charge(&c, i);
    char key[32];
    snprintf(key, sizeof key, "k-%d", i);
    unsigned char hash[32] = {1};
    struct pt_key_lock lock = {.at = 1000, .by = 1};
    int rc = pt_store_begin(st);
    if (rc)
        return rc;
    if ((rc = pt_store_key_insert(st, "POST /v1/charges", key, hash, 1, 1000, 99999999)) ||
        (rc = pt_store_charge_insert(st, &c, 1000)) ||
        (rc = pt_store_audit(st, c.id, NULL, "INIT", "created", "api", 0, NULL, 1000)) ||
        (rc = pt_store_key_complete(st, "POST /v1/charges", key, &lock, 202, "{}", 2, 1000))) {
        pt_store_rollback(st);
        return rc;
    }
    return pt_store_commit(st);
}

static void test_disk_full(void **state)
{
    (void)state;
    pt_test_sqlite_only("a full local disk is the SQLite file's");
    char path[300], err[512];
    db_path(path, sizeof path, "full.db");
    struct pt_store *st;
    /* The schema itself takes about 40 pages of 1 KiB: a few more fill. */
    struct pt_store_options o = {.path = path, .max_page_count = 48};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    int i, rc = PT_OK;
    for (i = 0; i < 10000 && rc == PT_OK; i++)
        rc = guarded_insert(st, i);
    assert_int_equal(rc, PT_EFULL);
    assert_true(i > 1);
    int committed = i - 1;
    /* Nothing half-written: every key has its charge and its audit row. */
    int64_t keys = -1, charges = -1, audits = -1;
    assert_int_equal(pt_store_count(st, "idempotency_keys", &keys), PT_OK);
    assert_int_equal(pt_store_count(st, "charges", &charges), PT_OK);
    assert_int_equal(pt_store_count(st, "charge_events", &audits), PT_OK);
    assert_int_equal(keys, committed);
    assert_int_equal(charges, committed);
    assert_int_equal(audits, committed);
    /* The connection still works for reads, and a failed write is still
     * refused cleanly rather than corrupting anything. */
    struct pt_charge c;
    assert_int_equal(pt_store_charge_get(st, "FULL-000000", &c), PT_OK);
    assert_int_equal(guarded_insert(st, 999999), PT_EFULL);
    assert_int_equal(pt_store_count(st, "charges", &charges), PT_OK);
    assert_int_equal(charges, committed);
    pt_store_close(st);
}

static long long file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
}

static void expect_gone(struct pt_store *st, const char *file, const char *what)
{
    struct pt_store_health h;
    assert_int_equal(pt_store_files_intact(st), PT_EGONE);
    assert_int_equal(pt_store_health(st, &h), PT_OK);
    assert_false(h.writable);
    assert_true(h.free_bytes > 0);
    if (!strstr(h.reason, file) || !strstr(h.reason, what))
        fail_msg("reason \"%s\" does not name %s as %s", h.reason, file, what);
}

static int64_t charges_in(struct pt_store *st)
{
    int64_t n = -1;
    assert_int_equal(pt_store_count(st, "charges", &n), PT_OK);
    return n;
}

/*
 * SPEC 18: while the database or its WAL is removed, or another file is
 * moved over the database, nothing is committed (the transaction is rolled
 * back, PT_EGONE) and the health says which file and why; once the path
 * leads to the store's file again, writes go on.  Through a writer (the
 * daemon) and on a store of its own (the CLI).
 */
static void files_gone_through(int with_writer)
{
    char path[300], wal[310], aside[310], copy[310], err[512];
    db_path(path, sizeof path, "gone.db");
    db_path(aside, sizeof aside, "aside");
    db_path(copy, sizeof copy, "copy.db");
    snprintf(wal, sizeof wal, "%s-wal", path);
    struct pt_store_options o = {.path = path};
    struct pt_store *st;
    struct pt_store_writer *w = NULL;
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    if (with_writer) {
        assert_int_equal(pt_store_writer_new(&o, &w, err, sizeof err), PT_OK);
        pt_store_attach(st, w);
    }
    assert_int_equal(guarded_insert(st, 1), PT_OK);
    assert_int_equal(pt_store_files_intact(st), PT_OK);

    assert_int_equal(rename(path, aside), 0);
    assert_int_equal(guarded_insert(st, 2), PT_EGONE);
    expect_gone(st, path, "database file");
    expect_gone(st, path, "was removed");
    assert_int_equal(rename(aside, path), 0);
    assert_true(pt_store_writable(st));
    assert_int_equal(guarded_insert(st, 2), PT_OK);

    assert_int_equal(rename(wal, aside), 0);
    assert_int_equal(guarded_insert(st, 3), PT_EGONE);
    expect_gone(st, wal, "WAL file");
    expect_gone(st, wal, "was removed");
    assert_int_equal(rename(aside, wal), 0);
    assert_int_equal(guarded_insert(st, 3), PT_OK);

    assert_int_equal(pt_store_backup(st, copy), PT_OK);
    assert_int_equal(rename(path, aside), 0);
    assert_int_equal(rename(copy, path), 0);
    assert_int_equal(guarded_insert(st, 4), PT_EGONE);
    expect_gone(st, path, "was replaced by another file");
    assert_int_equal(rename(aside, path), 0);
    assert_int_equal(charges_in(st), 3); /* 2 and 3 after their first refusal; never 4 */
    pt_store_close(st);
    pt_store_writer_destroy(w);
}

static void test_files_gone_alone(void **state)
{
    (void)state;
    pt_test_sqlite_only("the files are the SQLite database's");
    files_gone_through(0);
}

static void test_files_gone_writer(void **state)
{
    (void)state;
    pt_test_sqlite_only("the files are the SQLite database's");
    files_gone_through(1);
}

/* The /healthz check writes nothing while all is well, and after a failed
 * write it tries one WAL frame per call (page 1 as it is), which neither
 * grows the database nor changes its schema version. */
static void test_writable_probe_is_one_frame(void **state)
{
    (void)state;
    pt_test_sqlite_only("the WAL probe frame is SQLite's");
    char path[300], wal[310], err[512];
    db_path(path, sizeof path, "probe.db");
    snprintf(wal, sizeof wal, "%s-wal", path);
    struct pt_store *st;
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    assert_int_equal(guarded_insert(st, 1), PT_OK);
    long long w0 = file_size(wal);
    assert_true(pt_store_writable(st));
    assert_true(pt_store_writable(st));
    assert_int_equal(file_size(wal), w0);

    pt_test_disk_set(PT_TEST_DISK_EIO);
    assert_int_equal(guarded_insert(st, 2), PT_EIO);
    assert_false(pt_store_writable(st));
    pt_test_disk_set(PT_TEST_DISK_OK);
    int pages0 = 0, pages1 = 0, v0 = 0, v1 = 0;
    assert_int_equal(pt_store_pragma_int(st, "page_count", &pages0), PT_OK);
    assert_int_equal(pt_store_schema_version(st, &v0), PT_OK);
    long long w1 = file_size(wal);
    assert_true(pt_store_writable(st));
    assert_int_equal(file_size(wal), w1 + 24 + PT_STORE_PAGE_SIZE);
    assert_int_equal(pt_store_pragma_int(st, "page_count", &pages1), PT_OK);
    assert_int_equal(pages1, pages0);
    assert_int_equal(pt_store_schema_version(st, &v1), PT_OK);
    assert_int_equal(v1, v0);
    /* Recovered: no more probe writes. */
    assert_true(pt_store_writable(st));
    assert_int_equal(file_size(wal), w1 + 24 + PT_STORE_PAGE_SIZE);
    pt_store_close(st);
}

/* A stored answer given again (pt_store_key_reanswer): the keys that
 * held one status now hold the other, counted; *n may be NULL. */
static void test_key_reanswer(void **state)
{
    (void)state;
    char path[300], err[512];
    db_path(path, sizeof path, "reanswer.db");
    struct pt_store *st;
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    for (int i = 1; i <= 2; i++)
        assert_int_equal(guarded_insert(st, i), PT_OK);
    int n = -1;
    assert_int_equal(pt_store_key_reanswer(st, "POST /v1/charges", 202, 200, "{\"x\":1}", 7, &n),
                     PT_OK);
    assert_int_equal(n, 2);
    struct pt_key_row row;
    assert_int_equal(pt_store_key_get(st, "POST /v1/charges", "k-2", &row), PT_OK);
    assert_int_equal(row.response_status, 200);
    assert_int_equal(row.response_len, 7);
    assert_memory_equal(row.response_body, "{\"x\":1}", 7);
    pt_key_row_free(&row);
    assert_int_equal(pt_store_key_reanswer(st, "POST /v1/charges", 200, 201, "{}", 2, NULL), PT_OK);
    assert_int_equal(pt_store_key_get(st, "POST /v1/charges", "k-1", &row), PT_OK);
    assert_int_equal(row.response_status, 201);
    pt_key_row_free(&row);
    n = -1;
    assert_int_equal(pt_store_key_reanswer(st, "POST /v1/charges", 202, 200, "{}", 2, &n), PT_OK);
    assert_int_equal(n, 0); /* none holds 202 any more */
    pt_store_close(st);
}

static void test_order_id_unique_and_checks(void **state)
{
    (void)state;
    char path[300], err[512];
    db_path(path, sizeof path, "uniq.db");
    struct pt_store *st;
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    struct pt_charge c;
    fill_charge(&c, 1);
    assert_int_equal(pt_store_charge_insert(st, &c, 5), PT_OK);
    assert_true(c.id > 0);
    assert_int_equal(pt_store_charge_insert(st, &c, 6), PT_EEXIST);
    /* CHECK constraints are the last line: a bad amount or currency never lands. */
    fill_charge(&c, 2);
    c.amount = 0;
    assert_int_equal(pt_store_charge_insert(st, &c, 5), PT_EINVAL);
    fill_charge(&c, 3);
    strcpy(c.currency, "cny");
    assert_int_equal(pt_store_charge_insert(st, &c, 5), PT_EINVAL);
    fill_charge(&c, 4);
    strcpy(c.order_id, "bad order id");
    assert_int_equal(pt_store_charge_insert(st, &c, 5), PT_EINVAL);
    int64_t n;
    assert_int_equal(pt_store_count(st, "charges", &n), PT_OK);
    assert_int_equal(n, 1);
    struct pt_charge back;
    assert_int_equal(pt_store_charge_get(st, "FULL-000001", &back), PT_OK);
    assert_int_equal(back.amount, 101);
    assert_string_equal(back.currency, "CNY");
    assert_int_equal(back.state, PT_STATE_INIT);
    assert_int_equal(pt_store_charge_get(st, "nope", &back), PT_ENOTFOUND);
    pt_store_close(st);
}

/* The one-statement guarded charge of c under key, with room for max_count. */
static int queue_guarded(struct pt_store *st, struct pt_charge *c, const char *key,
                         int64_t max_count, int64_t now)
{
    unsigned char hash[32] = {2};
    struct pt_store_queued_charge q = {.scope = "POST /v1/charges",
                                       .key = key,
                                       .hash = hash,
                                       .c = c,
                                       .body_head = "{\"id\":",
                                       .body_tail = "}",
                                       .expires_at = 1000000,
                                       .max_count = max_count,
                                       .max_total = 1000000,
                                       .actor = "api"};
    return pt_store_charge_queue_guarded(st, &q, now);
}

/* A lane's guarded new charge i, queued with room for max charges (run in
 * another thread, or called). */
struct at_most {
    struct pt_store *st;
    int i, max;
    int rc;
    atomic_int tid; /* the thread that runs it, once it does */
};

static void *queue_at_most(void *p)
{
    struct at_most *m = p;
    atomic_store(&m->tid, (int)syscall(SYS_gettid));
    struct pt_charge c;
    fill_charge(&c, m->i);
    char key[32];
    snprintf(key, sizeof key, "k-%d", m->i);
    m->rc = queue_guarded(m->st, &c, key, m->max, 5);
    return NULL;
}

/* 1 once the thread that runs m sleeps in the kernel on a futex - a mutex
 * it waits for (10 s at most).  Linux: the first field of
 * /proc/self/task/TID/syscall is the call a blocked thread is in. */
static int waits_on_a_mutex(struct at_most *m)
{
    for (int t = 0; t < 10000; t += 5) {
        int tid = atomic_load(&m->tid);
        char path[64], line[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
        FILE *f = tid ? fopen(path, "r") : NULL;
        if (f) {
            if (!fgets(line, sizeof line, f))
                line[0] = '\0';
            fclose(f);
        }
        long nr = line[0] >= '0' && line[0] <= '9' ? strtol(line, NULL, 10) : -1;
        if (nr == SYS_futex)
            return 1;
#ifdef SYS_futex_time64
        if (nr == SYS_futex_time64)
            return 1;
#endif
        usleep(5 * 1000);
    }
    return 0;
}

/* A server process of the test database waiting for a lock (a table's,
 * an advisory one): its pid, once there is one (10 s at most). */
static int lock_waiter(const char *path)
{
    static const char sql[] = "SELECT count(*) FROM pg_stat_activity WHERE datname ="
                              " current_database() AND wait_event_type = 'Lock'";
    assert_true(pt_test_pg_wait_for(path, sql, 10000));
    return (int)pt_test_sql_int(path,
                                "SELECT min(pid) FROM pg_stat_activity WHERE datname ="
                                " current_database() AND wait_event_type = 'Lock'",
                                0);
}

/*
 * The offline limits are each lane's (its own offline.* configuration):
 * exact across that lane's connections - one request reading the figures
 * in its transaction (the usual path) and another's one-statement guarded
 * charge at the same moment cannot both take the last place - and another
 * lane neither counts them nor waits for them.
 */
static void test_pg_offline_limits_per_lane_exact(void **state)
{
    (void)state;
    pt_test_pg_only("lanes sharing one queue are the PostgreSQL store's");
    char path[300], err[512];
    db_path(path, sizeof path, "lanes.db");
    struct pt_store *a1, *a2, *b;
    struct pt_store_options oa = {.path = path, .lane_id = "lane-a"};
    struct pt_store_options ob = {.path = path, .lane_id = "lane-b"};
    assert_int_equal(pt_test_store_open(&oa, &a1, err, sizeof err), PT_OK);
    assert_int_equal(pt_test_store_open(&oa, &a2, err, sizeof err), PT_OK);
    assert_int_equal(pt_test_store_open(&ob, &b, err, sizeof err), PT_OK);
    int64_t count = -1, total = -1;
    /* Lane a, connection 1: the usual path, its figures read in its
     * transaction, the charge inserted, not committed yet. */
    assert_int_equal(pt_store_begin(a1), PT_OK);
    assert_int_equal(pt_store_queue_figures(a1, "CNY", &count, &total), PT_OK);
    assert_int_equal(count, 0);
    struct pt_charge c;
    fill_charge(&c, 1);
    assert_int_equal(pt_store_charge_insert(a1, &c, 5), PT_OK);
    /* Lane a, connection 2, meanwhile: the guarded charge with room for one. */
    struct at_most lp = {.st = a2, .i = 2, .max = 1, .rc = -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, queue_at_most, &lp), 0);
    /* Lane b is not held up by lane a, and counts only its own. */
    struct at_most lb = {.st = b, .i = 3, .max = 1, .rc = -1};
    queue_at_most(&lb);
    assert_int_equal(lb.rc, PT_OK);
    /* Connection 2 waits for the lane's figures, which a1 holds to its
     * commit (store_pg.c: the lane's mutex, before its statement is sent). */
    assert_true(waits_on_a_mutex(&lp));
    assert_int_equal(pt_store_commit(a1), PT_OK);
    pthread_join(t, NULL);
    assert_int_equal(lp.rc, PT_EAGAIN); /* the last place was taken */
    assert_int_equal(pt_test_sql_int(path, "SELECT count(*) FROM charges WHERE state = 'INIT'", 0),
                     2);
    assert_int_equal(pt_store_queue_figures(a2, "CNY", &count, &total), PT_OK);
    assert_int_equal(count, 1);
    assert_int_equal(total, c.amount);
    assert_int_equal(pt_store_queue_figures(b, "CNY", &count, &total), PT_OK);
    assert_int_equal(count, 1);
    assert_int_equal(total, 103);
    /* Sent by lane b's sync engine, lane a's charge stays in lane a's
     * figures while it is on its way (SPEC 18), and leaves them final. */
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    assert_int_equal(pt_store_begin(b), PT_OK);
    assert_int_equal(
        pt_store_charge_transition(b, c.id, 1u << PT_STATE_INIT, PT_STATE_PROCESSING, &p, 6),
        PT_OK);
    assert_int_equal(pt_store_commit(b), PT_OK);
    assert_int_equal(pt_store_queue_figures(a2, "CNY", &count, &total), PT_OK);
    assert_int_equal(count, 1);
    assert_int_equal(pt_store_begin(b), PT_OK);
    assert_int_equal(
        pt_store_charge_transition(b, c.id, 1u << PT_STATE_PROCESSING, PT_STATE_SUCCESS, &p, 7),
        PT_OK);
    assert_int_equal(pt_store_commit(b), PT_OK);
    assert_int_equal(pt_store_queue_figures(a2, "CNY", &count, &total), PT_OK);
    assert_int_equal(count, 0);
    assert_int_equal(pt_store_queue_figures(b, "CNY", &count, &total), PT_OK);
    assert_int_equal(count, 1);
    pt_store_close(a1);
    pt_store_close(a2);
    pt_store_close(b);
}

/* A guarded charge for an order another connection of the lane holds. */
struct held_order {
    struct pt_store *st;
    int rc;
};

static void *queue_the_held_order(void *p)
{
    struct held_order *h = p;
    struct pt_charge c;
    fill_charge(&c, 1);
    h->rc = queue_guarded(h->st, &c, "k-other", 10, 7);
    return NULL;
}

/*
 * The guarded charge holds its lane's figures while its statement runs;
 * that statement can wait for a row the usual path holds (the same order,
 * retried under another key, while the usual path returns it to the queue).
 * The usual path then cannot have the figures: it gives up after a second
 * with PT_EBUSY, naming the lane, instead of the two waiting for ever, and
 * once it has rolled back the guarded charge finds the order taken.
 */
static void test_pg_lane_figures_never_deadlock(void **state)
{
    (void)state;
    pt_test_pg_only("the lane's figures are the PostgreSQL store's");
    char path[300], err[512];
    db_path(path, sizeof path, "held.db");
    struct pt_store *a1, *a2;
    struct pt_store_options o = {.path = path, .lane_id = "lane-d"};
    assert_int_equal(pt_test_store_open(&o, &a1, err, sizeof err), PT_OK);
    assert_int_equal(pt_test_store_open(&o, &a2, err, sizeof err), PT_OK);
    struct pt_charge c;
    fill_charge(&c, 1);
    c.state = PT_STATE_PROCESSING;
    c.offline_accepted = 0; /* sent online: not in the figures (SPEC 18) */
    assert_int_equal(pt_store_charge_insert(a1, &c, 5), PT_OK);
    /* The usual path: not sent, back to the queue (the row held). */
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    assert_int_equal(pt_store_begin(a1), PT_OK);
    assert_int_equal(
        pt_store_charge_transition(a1, c.id, 1u << PT_STATE_PROCESSING, PT_STATE_INIT, &p, 6),
        PT_OK);
    struct held_order h = {.st = a2, .rc = -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, queue_the_held_order, &h), 0);
    lock_waiter(path); /* its statement waits at the server for the row */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int64_t count = -1, total = -1;
    assert_int_equal(pt_store_queue_figures(a1, "CNY", &count, &total), PT_EBUSY);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_true(t1.tv_sec - t0.tv_sec < 5);
    assert_non_null(strstr(pt_store_errmsg(a1), "lane-d"));
    assert_int_equal(pt_store_rollback(a1), PT_OK);
    pthread_join(t, NULL);
    assert_int_equal(h.rc, PT_EAGAIN); /* the order exists: the usual path answers */
    assert_int_equal(pt_test_sql_int(path, "SELECT count(*) FROM charges", 0), 1);
    /* Both go on as before. */
    assert_int_equal(pt_store_begin(a1), PT_OK);
    assert_int_equal(pt_store_queue_figures(a1, "CNY", &count, &total), PT_OK);
    assert_int_equal(count, 0);
    assert_int_equal(pt_store_commit(a1), PT_OK);
    pt_store_close(a1);
    pt_store_close(a2);
}

static long long lane_init_count(const char *path)
{
    return pt_test_sql_int(path, "SELECT count(*) FROM charges WHERE state = 'INIT'", 0);
}

static long long order_count(const char *path, int i)
{
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM charges WHERE order_id = 'FULL-%06d'", i);
    return pt_test_sql_int(path, sql, 0);
}

/* Waits (10 s at most) for server process pid to be gone: 1 when it is. */
static int process_gone(const char *path, int pid)
{
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT 1 - least(count(*), 1) FROM pg_stat_activity WHERE pid = %d",
             pid);
    return pt_test_pg_wait_for(path, sql, 10000);
}

/* The usual path's exact figures of st's lane, in a transaction rolled back. */
static int64_t usual_count(struct pt_store *st, int64_t *total)
{
    int64_t count = -1, t = -1;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_store_queue_figures(st, "CNY", &count, &t), PT_OK);
    assert_int_equal(pt_store_rollback(st), PT_OK);
    if (total)
        *total = t;
    return count;
}

/* Role plain_lane, with what a lane needs on the test database at path
 * (its tables; CREATE for the schema check), and revoke (SQL run there
 * after). */
static void plain_lane_role(const char *path, const char *revoke)
{
    pt_test_pg_admin("DROP ROLE IF EXISTS plain_lane");
    pt_test_pg_admin("CREATE ROLE plain_lane LOGIN");
    pt_test_sql_exec(path, "GRANT CREATE ON SCHEMA public TO plain_lane;"
                           " GRANT ALL ON ALL TABLES IN SCHEMA public TO plain_lane;"
                           " GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO plain_lane");
    pt_test_sql_exec(path, revoke);
}

/*
 * One lane's two stores on a database of their own: a0 straight to the
 * server, a1 through a proxy that can lose its connection.  With revoke,
 * a1 is role plain_lane's (plain_lane_role(revoke)).
 */
struct lane_pair {
    char path[300];
    struct pt_store *a0, *a1;
    struct pt_test_pg_proxy *proxy;
    const char *revoke;
};

static void lane_pair_open(struct lane_pair *l, const char *db, const char *lane,
                           const char *revoke)
{
    char err[512];
    db_path(l->path, sizeof l->path, db);
    struct pt_store_options o = {.path = l->path, .lane_id = lane};
    if (pt_test_store_open(&o, &l->a0, err, sizeof err))
        fail_msg("%s", err);
    l->revoke = revoke;
    if (revoke)
        plain_lane_role(l->path, revoke);
    l->proxy = pt_test_pg_proxy_start();
    if (pt_test_store_open_via(l->proxy, revoke ? "user=plain_lane" : NULL, &o, &l->a1, err,
                               sizeof err))
        fail_msg("%s", err);
}

/* Closes both; with a revoke, grant (SQL) gives back what it took, and
 * plain_lane goes. */
static void lane_pair_close(struct lane_pair *l, const char *grant)
{
    pt_store_close(l->a1);
    pt_store_close(l->a0);
    pt_test_pg_proxy_stop(l->proxy);
    if (!l->revoke)
        return;
    pt_test_sql_exec(l->path, grant);
    pt_test_sql_exec(l->path, "REVOKE CREATE ON SCHEMA public FROM plain_lane;"
                              " REVOKE ALL ON ALL TABLES IN SCHEMA public FROM plain_lane;"
                              " REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM plain_lane");
    pt_test_pg_admin("DROP ROLE plain_lane");
}

/*
 * Room for 3: FULL-1 queued by a0, FULL-2 by a1 (its statement prepared),
 * then FULL-3 by a1 waits at the server for a table lock (held: *lock)
 * and a1's connection is lost.  Its server process's pid.
 */
static int lose_the_third(struct lane_pair *l, void **lock)
{
    for (int i = 1; i <= 2; i++) {
        struct at_most m = {.st = i == 1 ? l->a0 : l->a1, .i = i, .max = 3};
        queue_at_most(&m);
        assert_int_equal(m.rc, PT_OK);
    }
    *lock = pt_test_pg_hold("LOCK TABLE charges IN SHARE MODE");
    struct at_most third = {.st = l->a1, .i = 3, .max = 3, .rc = -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, queue_at_most, &third), 0);
    int lost = lock_waiter(l->path); /* its server process, waiting for the lock */
    pt_test_pg_proxy_cut(l->proxy);
    pthread_join(t, NULL);
    assert_int_equal(third.rc, PT_EIO);
    return lost;
}

/* After lose_the_third, its doubt still counted: the fourth refused; then
 * the lock let go, and the lost third commits after all (5 s at most). */
static void fourth_refused_third_lands(struct lane_pair *l, void *lock)
{
    struct at_most fourth = {.st = l->a0, .i = 4, .max = 3, .rc = -1};
    queue_at_most(&fourth);
    assert_int_equal(fourth.rc, PT_EAGAIN);
    pt_test_pg_release(lock);
    for (int i = 0; i < 50 && order_count(l->path, 3) == 0; i++)
        usleep(100 * 1000);
    assert_int_equal(order_count(l->path, 3), 1);
}

/* Waits (10 s at most) for the proxy to hold what a client sent. */
static void held_on_its_way(struct pt_test_pg_proxy *proxy)
{
    for (int i = 0; i < 500 && !pt_test_pg_proxy_held(proxy); i++)
        usleep(20 * 1000);
    assert_true(pt_test_pg_proxy_held(proxy) > 0);
}

/*
 * The connection lost while a guarded statement waits at the server (on a
 * lock here; a slow flush is the same): its server process would go on
 * and commit the charge after the daemon has counted the lane again.  The
 * next count ends that process first (it is the daemon's own, and nobody
 * will read its answer), then reads the figures: room for 3, 2 queued,
 * the third lost in flight, then a fourth - 3 queued in the end, never 4,
 * and never the lost one behind the daemon's back.
 */
static void test_pg_lost_statement_ended_before_the_count(void **state)
{
    (void)state;
    pt_test_pg_only("a connection to a server is the PostgreSQL store's");
    struct lane_pair l;
    lane_pair_open(&l, "doubt.db", "lane-q", NULL);
    void *lock;
    int lost = lose_the_third(&l, &lock);
    /* The fourth: the lane's figures are counted again, the lost process
     * ended first (its insert waits for the same lock: another thread). */
    static struct at_most fourth; /* its thread outlives a failed assertion */
    fourth = (struct at_most){.st = l.a0, .i = 4, .max = 3, .rc = -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, queue_at_most, &fourth), 0);
    assert_true(process_gone(l.path, lost)); /* ended, before the lock was let go */
    pt_test_pg_release(lock);
    pthread_join(t, NULL);
    assert_int_equal(fourth.rc, PT_OK);
    assert_int_equal(order_count(l.path, 3), 0); /* never committed behind the lane's back */
    assert_int_equal(lane_init_count(l.path), 3);
    int64_t total;
    assert_int_equal(usual_count(l.a0, &total), 3);
    assert_int_equal(total, 101 + 102 + 104);
    struct at_most fifth = {.st = l.a0, .i = 5, .max = 3, .rc = -1};
    queue_at_most(&fifth);
    assert_int_equal(fifth.rc, PT_EAGAIN);
    assert_int_equal(lane_init_count(l.path), 3);
    lane_pair_close(&l, NULL);
}

/* The usual path's transaction queuing charge i, committed (another thread). */
struct usual_queue {
    struct pt_store *st;
    int i;
    int rc;
    sem_t inserted, go;
};

static void *queue_the_usual_way(void *p)
{
    struct usual_queue *u = p;
    struct pt_charge c;
    fill_charge(&c, u->i);
    int64_t count, total;
    u->rc = pt_store_begin(u->st);
    if (!u->rc)
        u->rc = pt_store_queue_figures(u->st, "CNY", &count, &total);
    if (!u->rc)
        u->rc = pt_store_charge_insert(u->st, &c, 5);
    sem_post(&u->inserted);
    sem_wait(&u->go);
    if (!u->rc)
        u->rc = pt_store_commit(u->st);
    else
        pt_store_rollback(u->st);
    return NULL;
}

/* Lane s's usual path on a1 queues FULL-000001 and commits, its COMMIT
 * lost as lose() makes it; then a0's guarded charge with room for one. */
static void lost_commit_then_guarded(struct lane_pair *l, int hold_first, int *guarded_rc)
{
    struct usual_queue u = {.st = l->a1, .i = 1, .rc = -1};
    sem_init(&u.inserted, 0, 0);
    sem_init(&u.go, 0, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, queue_the_usual_way, &u), 0);
    sem_wait(&u.inserted);
    if (hold_first)
        pt_test_pg_proxy_hold(l->proxy);
    sem_post(&u.go);
    if (hold_first) { /* its COMMIT held on the way */
        held_on_its_way(l->proxy);
        pt_test_pg_proxy_lose_clients(l->proxy);
    } else { /* its COMMIT waits at the server */
        lock_waiter(l->path);
        pt_test_pg_proxy_cut(l->proxy);
    }
    pthread_join(t, NULL);
    assert_int_equal(u.rc, PT_EIO);
    assert_int_equal(lane_init_count(l->path), 0);
    struct at_most m = {.st = l->a0, .i = 2, .max = 1, .rc = -1};
    queue_at_most(&m);
    *guarded_rc = m.rc;
    sem_destroy(&u.inserted);
    sem_destroy(&u.go);
}

/*
 * The same for the usual path: its COMMIT sent, the connection lost before
 * the answer (the commit made to wait here by a deferred trigger on a lock
 * the test holds; on a real server, a flush or a synchronous standby).
 * The guarded charge that follows, with room for one, ends that process
 * before it counts: one charge in the end, whatever the lost COMMIT would
 * have done.
 */
static void test_pg_lost_commit_ended_before_the_count(void **state)
{
    (void)state;
    pt_test_pg_only("a connection to a server is the PostgreSQL store's");
    struct lane_pair l;
    lane_pair_open(&l, "doubt-commit.db", "lane-r", NULL);
    pt_test_sql_exec(l.path,
                     "CREATE FUNCTION t_wait() RETURNS trigger LANGUAGE plpgsql AS $$"
                     " BEGIN IF NEW.order_id = 'FULL-000001' THEN"
                     " PERFORM pg_advisory_xact_lock(4242); END IF; RETURN NULL; END $$;"
                     " CREATE CONSTRAINT TRIGGER t_wait AFTER INSERT ON charges"
                     " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION t_wait()");
    void *lock = pt_test_pg_hold("SELECT pg_advisory_xact_lock(4242)");
    int rc;
    lost_commit_then_guarded(&l, 0, &rc);
    assert_int_equal(rc, PT_OK);
    pt_test_pg_release(lock);
    assert_int_equal(order_count(l.path, 1), 0);
    assert_int_equal(lane_init_count(l.path), 1);
    assert_int_equal(usual_count(l.a0, NULL), 1);
    lane_pair_close(&l, NULL);
}

/*
 * A COMMIT still on its way when the connection is lost: the server
 * process sits idle in its transaction - not running anything - and would
 * commit when the request reaches it.  Not running is not done: the count
 * ends it all the same, and the late COMMIT finds nobody.
 */
static void test_pg_lost_commit_on_its_way(void **state)
{
    (void)state;
    pt_test_pg_only("a connection to a server is the PostgreSQL store's");
    struct lane_pair l;
    lane_pair_open(&l, "doubt-late.db", "lane-s", NULL);
    int rc;
    lost_commit_then_guarded(&l, 1, &rc);
    assert_int_equal(rc, PT_OK);
    pt_test_pg_proxy_deliver(l.proxy); /* the COMMIT arrives, late (and is read) */
    assert_int_equal(order_count(l.path, 1), 0);
    assert_int_equal(lane_init_count(l.path), 1);
    assert_int_equal(usual_count(l.a0, NULL), 1);
    lane_pair_close(&l, NULL);
}

/* The usual path's transaction that reads the figures (the lane's server
 * lock taken) and rolls back, refused (another thread). */
struct usual_refused {
    struct pt_store *st;
    int rc;
    sem_t counted, go;
};

static void *count_and_roll_back(void *p)
{
    struct usual_refused *u = p;
    int64_t count, total;
    u->rc = pt_store_begin(u->st);
    if (!u->rc)
        u->rc = pt_store_queue_figures(u->st, "CNY", &count, &total);
    sem_post(&u->counted);
    sem_wait(&u->go);
    pt_store_rollback(u->st);
    return NULL;
}

struct usual_count_job {
    struct pt_store *st;
    atomic_int done;
    int64_t count;
};

static void *usual_count_main(void *p)
{
    struct usual_count_job *j = p;
    j->count = usual_count(j->st, NULL);
    atomic_store(&j->done, 1);
    return NULL;
}

/*
 * The usual path refused a charge over the limits and rolled back, and the
 * connection was lost with the ROLLBACK on its way: the server process sits
 * in the transaction with the lane's server lock.  The lane's next exact
 * count ends it instead of waiting for the lock until the server's
 * keepalives give up.
 */
static void test_pg_lost_rollback_does_not_hold_the_lane(void **state)
{
    (void)state;
    pt_test_pg_only("a connection to a server is the PostgreSQL store's");
    struct lane_pair l;
    lane_pair_open(&l, "doubt-rollback.db", "lane-v", NULL);
    struct usual_refused u = {.st = l.a1, .rc = -1};
    sem_init(&u.counted, 0, 0);
    sem_init(&u.go, 0, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, count_and_roll_back, &u), 0);
    sem_wait(&u.counted);
    assert_int_equal(u.rc, PT_OK);
    pt_test_pg_proxy_hold(l.proxy);
    sem_post(&u.go);
    held_on_its_way(l.proxy); /* the ROLLBACK */
    pt_test_pg_proxy_lose_clients(l.proxy);
    pthread_join(t, NULL);
    struct usual_count_job j = {.st = l.a0};
    assert_int_equal(pthread_create(&t, NULL, usual_count_main, &j), 0);
    for (int i = 0; i < 500 && !atomic_load(&j.done); i++)
        usleep(20 * 1000);
    int done = atomic_load(&j.done);
    if (!done)
        pt_test_pg_proxy_deliver(l.proxy); /* let it go, to fail cleanly */
    pthread_join(t, NULL);
    assert_true(done); /* counted within 10 s, not after the keepalives */
    assert_int_equal(j.count, 0);
    sem_destroy(&u.counted);
    sem_destroy(&u.go);
    lane_pair_close(&l, NULL);
}

/*
 * A charge that has committed on the server's disk and waits for a
 * synchronous standby when the connection is lost: ending that process
 * does not undo it - the commit becomes visible as the process exits.  The
 * lane's bound (which takes no server lock) must be counted after that
 * process has gone, with the charge in it: room for one, one lost in this
 * state, then another guarded charge - refused.  (Its own cluster:
 * synchronous_standby_names is the server's.  The process exits within
 * moments of being told to, so this cannot tell a count read after it was
 * told from one read after it has gone; it shows the commit counted.)
 */
static void test_pg_lost_commit_waiting_for_a_standby(void **state)
{
    (void)state;
    pt_test_pg_only("a connection to a server is the PostgreSQL store's");
    char cdir[300], cstate[340], cmd[800];
    pt_test_tmpdir(cdir, sizeof cdir);
    snprintf(cstate, sizeof cstate, "%s/pg.state", cdir);
    snprintf(cmd, sizeof cmd, "'%s' start '%s' >/dev/null", PT_PG_CLUSTER, cstate);
    assert_int_equal(system(cmd), 0);
    pt_test_pg_use(cstate);
    struct lane_pair l;
    lane_pair_open(&l, "doubt-standby.db", "lane-w", NULL);
    pt_test_pg_admin("ALTER SYSTEM SET synchronous_standby_names = 'nowhere'");
    pt_test_sql_exec(l.path, "SELECT pg_reload_conf()");
    /* The reload has reached the server: a new session reads the setting
     * (an existing one reads it before its next statement). */
    assert_true(pt_test_pg_wait_for(l.path,
                                    "SELECT count(*) WHERE"
                                    " current_setting('synchronous_standby_names') = 'nowhere'",
                                    10000));
    struct at_most first = {.st = l.a1, .i = 1, .max = 1, .rc = -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, queue_at_most, &first), 0);
    assert_true(pt_test_pg_wait_for(l.path,
                                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event ="
                                    " 'SyncRep' AND datname = current_database()",
                                    10000));
    pt_test_pg_proxy_cut(l.proxy);
    pthread_join(t, NULL);
    assert_int_equal(first.rc, PT_EIO);
    /* The second, with room for one (another thread: admitted, its own
     * commit would wait for the standby too). */
    struct at_most second = {.st = l.a0, .i = 2, .max = 1, .rc = -1};
    assert_int_equal(pthread_create(&t, NULL, queue_at_most, &second), 0);
    for (int waited = 0; waited < 5000 && second.rc == -1; waited += 20)
        usleep(20 * 1000);
    pt_test_pg_admin("ALTER SYSTEM RESET synchronous_standby_names");
    pt_test_sql_exec(l.path, "SELECT pg_reload_conf()");
    pthread_join(t, NULL);
    assert_int_equal(second.rc, PT_EAGAIN);
    assert_int_equal(order_count(l.path, 1), 1); /* it did commit */
    assert_int_equal(lane_init_count(l.path), 1);
    lane_pair_close(&l, NULL);
    pt_test_pg_use(NULL);
    snprintf(cmd, sizeof cmd, "'%s' stop '%s'", PT_PG_CLUSTER, cstate);
    assert_int_equal(system(cmd), 0);
    pt_test_rmtree(cdir);
}

/*
 * A lane whose role may read pg_stat_activity but not end sessions (a
 * hardened server): the settle is refused, inside a savepoint - the usual
 * path's transaction goes on, its count with the lost write in it - and
 * the doubt stays counted.
 */
static void test_pg_lost_write_a_role_cannot_end(void **state)
{
    (void)state;
    pt_test_pg_only("a connection to a server is the PostgreSQL store's");
    static const char fn[] = "FUNCTION pg_terminate_backend(integer, bigint)";
    char revoke[128], grant[128], err[512];
    snprintf(revoke, sizeof revoke, "REVOKE EXECUTE ON %s FROM PUBLIC", fn);
    snprintf(grant, sizeof grant, "GRANT EXECUTE ON %s TO PUBLIC", fn);
    struct lane_pair l;
    lane_pair_open(&l, "doubt-noend.db", "lane-x", revoke);
    /* The lane counting is plain_lane's too. */
    struct pt_store_options o = {.path = l.path, .lane_id = "lane-x"};
    pt_store_close(l.a0);
    assert_int_equal(pt_test_store_open_via(NULL, "user=plain_lane", &o, &l.a0, err, sizeof err),
                     PT_OK);
    void *lock;
    lose_the_third(&l, &lock);
    assert_int_equal(usual_count(l.a0, NULL), 3); /* refused to end it: counted, and on */
    fourth_refused_third_lands(&l, lock);
    assert_int_equal(lane_init_count(l.path), 3);
    assert_true(usual_count(l.a0, NULL) >= 3);
    lane_pair_close(&l, grant);
}

/*
 * A lane whose role cannot read pg_stat_activity cannot follow its lost
 * connections' server processes: what one may have queued then stays
 * counted (the log says so) until the daemon restarts - the lane errs
 * towards full - and nothing else fails.
 */
static void test_pg_lost_and_not_followed_stays_counted(void **state)
{
    (void)state;
    pt_test_pg_only("a connection to a server is the PostgreSQL store's");
    struct lane_pair l;
    lane_pair_open(&l, "doubt-role.db", "lane-t", "REVOKE SELECT ON pg_stat_activity FROM PUBLIC");
    void *lock;
    lose_the_third(&l, &lock);
    /* Not followed: counted, whatever it does. */
    assert_int_equal(usual_count(l.a0, NULL), 3);
    fourth_refused_third_lands(&l, lock);
    assert_int_equal(lane_init_count(l.path), 3);
    /* Still counted: a place freed is not taken while it is. */
    assert_int_equal(usual_count(l.a0, NULL), 4);
    struct at_most fourth = {.st = l.a0, .i = 4, .max = 3, .rc = -1};
    queue_at_most(&fourth);
    assert_int_equal(fourth.rc, PT_EAGAIN);
    assert_int_equal(lane_init_count(l.path), 3);
    lane_pair_close(&l, "GRANT SELECT ON pg_stat_activity TO PUBLIC");
}

/*
 * store.fallback "local" lanes open their store with connect_later: a
 * server that cannot be reached at start is then no error (the lane starts
 * on its own queue), and every operation is PT_EIO - the answer the lane
 * falls back on - until the server answers.  Without it, the open fails
 * and says why.
 */
static void test_pg_connect_later(void **state)
{
    (void)state;
    pt_test_pg_only("connecting later is the PostgreSQL store's");
    char err[512] = "";
    struct pt_store_options o = {.backend = PT_STORE_POSTGRESQL,
                                 .dsn =
                                     "postgresql://payterm@/payterm?host=/nonexistent&port=5432"};
    struct pt_store *st = NULL;
    assert_int_equal(pt_store_open(&o, &st, err, sizeof err), PT_EIO);
    assert_null(st);
    assert_non_null(strstr(err, "cannot connect to PostgreSQL (store.dsn)"));
    o.connect_later = 1;
    assert_int_equal(pt_store_open(&o, &st, err, sizeof err), PT_OK);
    assert_non_null(st);
    struct pt_charge c;
    assert_int_equal(pt_store_charge_get(st, "O-1", &c), PT_EIO);
    assert_int_equal(pt_store_begin(st), PT_EIO);
    assert_int_equal(pt_store_charge_get(st, "O-1", &c), PT_EIO);
    pt_store_close(st);
}

/*
 * A server that answers and turns the lane away - no such role, no such
 * database, a wrong password - is a mistake in the lane's configuration,
 * not an outage: the store does not open, connect_later or not, and the
 * error names store.dsn with the server's reason.  (Before, a fallback
 * lane started and queued every charge locally, for ever.)
 */
static void test_pg_refused_is_a_config_error(void **state)
{
    (void)state;
    pt_test_pg_only("a server's refusal is the PostgreSQL store's");
    char dsn[700], err[512] = "";
    const char *wrong[] = {" user=no_such_role", " dbname=no_such_database"};
    for (size_t i = 0; i < sizeof wrong / sizeof *wrong; i++) {
        pt_test_pg_dsn(dsn, sizeof dsn - 40, "postgres");
        strcat(dsn, wrong[i]);
        for (int later = 0; later <= 1; later++) {
            struct pt_store_options o = {
                .backend = PT_STORE_POSTGRESQL, .dsn = dsn, .connect_later = later};
            struct pt_store *st = NULL;
            assert_int_equal(pt_store_open(&o, &st, err, sizeof err), PT_ECONFIG);
            assert_null(st);
            assert_non_null(strstr(err, "store.dsn: the PostgreSQL server refused this lane"));
            assert_non_null(strstr(err, i == 0 ? "no_such_role" : "no_such_database"));
        }
    }
    /* A password: the right one gets in, a wrong one is refused. */
    pt_test_pg_admin("DROP ROLE IF EXISTS pw_lane");
    pt_test_pg_admin("CREATE ROLE pw_lane LOGIN SUPERUSER PASSWORD 'right-one'");
    char pwfile[300];
    db_path(pwfile, sizeof pwfile, "pg.password");
    pt_test_pg_dsn(dsn, sizeof dsn - 40, "postgres");
    strcat(dsn, " user=pw_lane");
    struct pt_store_options o = {.backend = PT_STORE_POSTGRESQL,
                                 .dsn = dsn,
                                 .password_file = pwfile,
                                 .readonly = 1,
                                 .connect_later = 1};
    struct pt_store *st = NULL;
    pt_test_write_file(pwfile, "right-one\n", 0600);
    assert_int_equal(pt_store_open(&o, &st, err, sizeof err), PT_OK);
    int version = -1;
    assert_int_equal(pt_store_schema_version(st, &version), PT_OK);
    pt_store_close(st);
    pt_test_write_file(pwfile, "wrong-one\n", 0600);
    assert_int_equal(pt_store_open(&o, &st, err, sizeof err), PT_ECONFIG);
    assert_null(st);
    assert_non_null(strstr(err, "store.dsn: the PostgreSQL server refused this lane"));
    assert_non_null(strstr(err, "28P01"));
    assert_null(strstr(err, "wrong-one"));
    /* No password at all: libpq refuses before the server does. */
    o.password_file = NULL;
    assert_int_equal(pt_store_open(&o, &st, err, sizeof err), PT_ECONFIG);
    assert_non_null(strstr(err, "the server asks for a password and none is given"));
    o.password_file = pwfile;
    /* Tried host by host, one out of reach and the next refusing: refused,
     * and the refusing host's line is the one given. */
    char two[800];
    const char *host = strstr(dsn, "host=");
    assert_non_null(host);
    snprintf(two, sizeof two, "%.*shost=/nonexistent.dir,%s", (int)(host - dsn), dsn, host + 5);
    o.dsn = two;
    assert_int_equal(pt_store_open(&o, &st, err, sizeof err), PT_ECONFIG);
    assert_non_null(strstr(err, "28P01"));
    assert_null(strstr(err, "nonexistent.dir"));
    o.dsn = dsn;
    /* What waiting mends is an outage, not a refusal: a role at its
     * connection limit (53300) opens for later, as a server out of reach. */
    pt_test_pg_admin("ALTER ROLE pw_lane CONNECTION LIMIT 0 NOSUPERUSER");
    pt_test_write_file(pwfile, "right-one\n", 0600);
    assert_int_equal(pt_store_open(&o, &st, err, sizeof err), PT_OK);
    assert_non_null(st);
    assert_int_equal(pt_store_schema_version(st, &version), PT_EIO);
    pt_store_close(st);
    o.connect_later = 0;
    assert_int_equal(pt_store_open(&o, &st, err, sizeof err), PT_EIO);
    assert_non_null(strstr(err, "cannot connect to PostgreSQL (store.dsn)"));
    pt_test_pg_admin("DROP ROLE pw_lane");
}

/*
 * A server process that goes away (a restart, a DBA's pg_terminate_backend)
 * takes its session with it.  The store reconnects at its next call and
 * sets the session up again - synchronous_commit = on and its lane, in the
 * one request - before any statement runs on it.
 */
static void test_pg_session_set_up_again_after_reconnect(void **state)
{
    (void)state;
    pt_test_pg_only("reconnection is the PostgreSQL store's");
    char path[300], err[512];
    db_path(path, sizeof path, "reconnect.db");
    struct pt_store *st;
    struct pt_store_options o = {.path = path, .lane_id = "lane-r"};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
#define STORE_SESSIONS                                                                             \
    "FROM pg_stat_activity WHERE application_name = 'payterm' AND datname = current_database()"
    pt_test_sql_exec(path, "SELECT pg_terminate_backend(pid) " STORE_SESSIONS);
    for (int i = 0; i < 100 && pt_test_sql_int(path, "SELECT count(*) " STORE_SESSIONS, 0) > 0; i++)
        usleep(20000);
    assert_int_equal(pt_test_sql_int(path, "SELECT count(*) " STORE_SESSIONS, 0), 0);
    struct pt_charge c;
    fill_charge(&c, 7);
    /* The first call finds the connection gone (one failure at most, outside
     * a transaction); the next reconnects and works. */
    int rc = pt_store_charge_insert(st, &c, 5);
    if (rc != PT_OK) {
        assert_int_equal(rc, PT_EIO);
        assert_int_equal(pt_store_charge_insert(st, &c, 5), PT_OK);
    }
    /* Its lane, from the new session's payterm.lane. */
    assert_int_equal(pt_test_sql_int(path, "SELECT count(*) FROM charges WHERE lane = 'lane-r'", 0),
                     1);
    pt_store_close(st);
}

/*
 * Two lanes arm runs from one queue: each takes the rows the other is not
 * arming right now and passes over the rest at once (FOR UPDATE SKIP
 * LOCKED), charges and refunds alike; a row no longer INIT is not taken.
 */
static void test_pg_runs_are_claimed_skip_locked(void **state)
{
    (void)state;
    pt_test_pg_only("claims are the PostgreSQL store's (SQLite has one writer)");
    char path[300], err[512];
    db_path(path, sizeof path, "claim.db");
    struct pt_store *a, *b;
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_test_store_open(&o, &a, err, sizeof err), PT_OK);
    assert_int_equal(pt_test_store_open(&o, &b, err, sizeof err), PT_OK);
    struct pt_charge c[4];
    for (int i = 0; i < 4; i++) {
        fill_charge(&c[i], 20 + i);
        assert_int_equal(pt_store_charge_insert(a, &c[i], 5), PT_OK);
    }
    pt_test_sql_exec(path, "UPDATE charges SET state = 'SUCCESS' WHERE order_id = 'FULL-000023'");
    struct pt_refund r[3] = {{0}};
    for (int i = 0; i < 3; i++) {
        snprintf(r[i].refund_id, sizeof r[i].refund_id, "RC-%d", i);
        r[i].charge_id = c[3].id;
        r[i].amount = 10;
        r[i].state = PT_STATE_INIT;
        assert_int_equal(pt_store_refund_insert(a, &r[i], 6), PT_OK);
    }
    pt_test_sql_exec(path, "UPDATE refunds SET state = 'PROCESSING' WHERE refund_id = 'RC-2'");
    int64_t cid[3] = {c[0].id, c[1].id, c[3].id}, rid[3] = {r[0].id, r[1].id, r[2].id};
    unsigned char taken[3];
    /* Lane a arms charge 0 and refund 0. */
    assert_int_equal(pt_store_begin(a), PT_OK);
    assert_int_equal(pt_store_charges_claim(a, cid, 1, taken), PT_OK);
    assert_int_equal(taken[0], 1);
    assert_int_equal(pt_store_refunds_claim(a, rid, 1, taken), PT_OK);
    assert_int_equal(taken[0], 1);
    /* Lane b, meanwhile: not those (not waited for), the others yes; charge
     * 3 (SUCCESS) and refund 2 (PROCESSING) are not queued any more. */
    assert_int_equal(pt_store_begin(b), PT_OK);
    assert_int_equal(pt_store_charges_claim(b, cid, 3, taken), PT_OK);
    assert_memory_equal(taken, ((unsigned char[]){0, 1, 0}), 3);
    assert_int_equal(pt_store_refunds_claim(b, rid, 3, taken), PT_OK);
    assert_memory_equal(taken, ((unsigned char[]){0, 1, 0}), 3);
    assert_int_equal(pt_store_rollback(b), PT_OK);
    assert_int_equal(pt_store_rollback(a), PT_OK);
    /* Once a's transaction is over, b may take them. */
    assert_int_equal(pt_store_begin(b), PT_OK);
    assert_int_equal(pt_store_charges_claim(b, cid, 2, taken), PT_OK);
    assert_memory_equal(taken, ((unsigned char[]){1, 1}), 2);
    assert_int_equal(pt_store_refunds_claim(b, rid, 2, taken), PT_OK);
    assert_memory_equal(taken, ((unsigned char[]){1, 1}), 2);
    assert_int_equal(pt_store_rollback(b), PT_OK);
    pt_store_close(b);
    pt_store_close(a);
}

static void test_audit_append_only(void **state)
{
    (void)state;
    char path[300], err[512];
    db_path(path, sizeof path, "audit.db");
    struct pt_store *st;
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    struct pt_charge c;
    fill_charge(&c, 7);
    assert_int_equal(pt_store_charge_insert(st, &c, 5), PT_OK);
    assert_int_equal(pt_store_audit(st, c.id, NULL, "INIT", "created", "api", 0, NULL, 5), PT_OK);
    pt_store_close(st);
    assert_false(pt_test_sql_ok(path, "UPDATE charge_events SET actor='x'"));
    assert_false(pt_test_sql_ok(path, "DELETE FROM charge_events"));
    assert_int_equal(pt_test_sql_int(path, "SELECT count(*) FROM charge_events", 0), 1);
}

/*
 * A charge queued by the one-statement guarded charge keeps its first audit
 * entry in its own row (sql/pg/005): its trail reads as any other - to
 * INIT, "created", by the request's actor on its lane, then every move in
 * order - and that entry is as append-only as the rows after it.
 */
static void test_pg_queued_charge_trail(void **state)
{
    (void)state;
    pt_test_pg_only("the one-statement guarded charge is the PostgreSQL store's");
    char path[300], err[512];
    db_path(path, sizeof path, "trail.db");
    struct pt_store *st;
    struct pt_store_options o = {.path = path, .lane_id = "lane-t"};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    struct pt_charge c;
    fill_charge(&c, 9);
    assert_int_equal(queue_guarded(st, &c, "k-trail", 10, 5), PT_OK);
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(
        pt_store_charge_transition(st, c.id, 1u << PT_STATE_INIT, PT_STATE_PROCESSING, &p, 6),
        PT_OK);
    assert_int_equal(pt_store_audit(st, c.id, "INIT", "PROCESSING", "send", "sync", 0, NULL, 6),
                     PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    struct pt_audit_row rows[4];
    int n = 0;
    assert_int_equal(pt_store_audit_list(st, c.id, 4, rows, &n), PT_OK);
    assert_int_equal(n, 2);
    assert_int_equal(rows[0].seq, 1);
    assert_string_equal(rows[0].from_state, "");
    assert_string_equal(rows[0].to_state, "INIT");
    assert_string_equal(rows[0].cause, "created");
    assert_string_equal(rows[0].actor, "api@lane-t");
    assert_int_equal(rows[0].created_at, 5);
    assert_int_equal(rows[1].seq, 2);
    assert_string_equal(rows[1].to_state, "PROCESSING");
    assert_string_equal(rows[1].actor, "sync@lane-t");
    /* One row asked for: the first entry. */
    assert_int_equal(pt_store_audit_list(st, c.id, 1, rows, &n), PT_OK);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].cause, "created");
    int64_t entries = -1;
    assert_int_equal(pt_store_count(st, "charge_events", &entries), PT_OK);
    assert_int_equal(entries, 2);
    pt_store_close(st);
    assert_false(pt_test_sql_ok(path, "UPDATE charges SET created_by = 'x'"));
    assert_false(pt_test_sql_ok(path, "UPDATE charges SET created_by = NULL"));
    assert_true(pt_test_sql_ok(path, "UPDATE charges SET review = 1"));
}

static void test_backup(void **state)
{
    (void)state;
    pt_test_sqlite_only("the online backup is SQLite's (PostgreSQL: pg_dump, replication)");
    char path[300], dest[300], err[512];
    db_path(path, sizeof path, "src.db");
    db_path(dest, sizeof dest, "backup.db");
    struct pt_store *st;
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    for (int i = 0; i < 20; i++)
        assert_int_equal(guarded_insert(st, i), PT_OK);
    assert_int_equal(pt_store_backup(st, dest), PT_OK);
    pt_store_close(st);
    struct pt_store *copy;
    o.path = dest;
    assert_int_equal(pt_test_store_open(&o, &copy, err, sizeof err), PT_OK);
    int64_t n;
    assert_int_equal(pt_store_count(copy, "charges", &n), PT_OK);
    assert_int_equal(n, 20);
    pt_store_close(copy);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_creates_wal_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_synchronous_full_by_default, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_from_each_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migration_2_counts_the_queue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refund_migration_keeps_the_feed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_audit_migration_keeps_the_trail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refund_pages_migration, setup, teardown),
        cmocka_unit_test_setup_teardown(test_at_final_migration, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sends_interrupted_due_at_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_too_new_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_a_database, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writable_probe_is_one_frame, setup, teardown),
        cmocka_unit_test_setup_teardown(test_files_gone_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_files_gone_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_key_reanswer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_order_id_unique_and_checks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_audit_append_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_queued_charge_trail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_lane_figures_never_deadlock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_lost_statement_ended_before_the_count, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pg_lost_commit_ended_before_the_count, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pg_lost_commit_on_its_way, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_lost_rollback_does_not_hold_the_lane, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pg_lost_commit_waiting_for_a_standby, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_lost_and_not_followed_stays_counted, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pg_lost_write_a_role_cannot_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_runs_are_claimed_skip_locked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_connect_later, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_refused_is_a_config_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_offline_limits_per_lane_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_session_set_up_again_after_reconnect, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_backup, setup, teardown),
    };
    pt_test_disk_install(); /* before the first database is opened */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
