/*
 * testutil.h - small helpers shared by the unit tests.
 */
#ifndef PT_TESTUTIL_H
#define PT_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

/* Creates a fresh temporary directory; returns its path (static storage
 * per call site is the caller's job: copy it). Aborts the test on failure. */
void pt_test_tmpdir(char *out, size_t outlen);

/* Removes a directory tree (best effort). */
void pt_test_rmtree(const char *path);

/* Writes text to path with the given mode. */
void pt_test_write_file(const char *path, const char *text, unsigned mode);

/* Reads a whole file (malloc'd, NUL-terminated); NULL on failure. */
char *pt_test_read_file(const char *path, size_t *len);

/* ---- vector files (tests/vectors, via PT_TEST_DATA_DIR) ---------------- */

struct cJSON;
struct pt_pk;

/* Parses tests/vectors/<name> (JSON); fails the test when missing or invalid.
 * Free with cJSON_Delete. */
struct cJSON *pt_test_vectors(const char *name);

/* The array kind ("responses", or "cli.sign" for a member of an object) of
 * the vector file v, parsed from tests/vectors/<file>; fails the test,
 * naming the file, unless it holds exactly the number of cases testutil.c
 * declares for it, so that deleting vectors fails the loops over them. */
const struct cJSON *pt_test_cases(const struct cJSON *v, const char *file, const char *kind);

/* Full path of tests/vectors/<rel> into out. */
void pt_test_data_path(const char *rel, char *out, size_t outlen);

/* Loads tests/vectors/keys/<name>; fails the test on error. */
struct pt_pk *pt_test_key(const char *name);

/* String member of a cJSON object, "" when absent. */
const char *pt_test_str(const struct cJSON *o, const char *name);

/* Integer member (0 when absent). */
long long pt_test_int(const struct cJSON *o, const char *name);

struct pt_charge;

/* A charge for `gateway` from a vector's fields (order_id, method, currency,
 * subject, amount, and payment_code / payment_method / customer /
 * gateway_trade_no when present). */
void pt_test_charge_from(const struct cJSON *j, const char *gateway, struct pt_charge *c);

/* "pay", "query", anything else: cancel. */
int pt_test_op(const char *s);

/* Builds a pt_http_response from a vector case: status, headers object, body. */
struct pt_http_response;
void pt_test_response(const struct cJSON *c, struct pt_http_response *out);

/* "OK" -> PT_OK, "ESIG" -> PT_ESIG, ... (the names of err.h). */
int pt_test_rc(const char *name);

/* ---- a disk that fills up or fails -------------------------------------- */

enum pt_test_disk {
    PT_TEST_DISK_OK,   /* every write goes through */
    PT_TEST_DISK_FULL, /* a write that would make a file longer fails (ENOSPC) */
    PT_TEST_DISK_EIO,  /* every write fails with an I/O error */
};

/* Makes SQLite's default VFS one whose writes fail on demand (the unix VFS
 * underneath).  Call once in main(), before the first database is opened,
 * so that the store's own VFS sits on top of it. */
void pt_test_disk_install(void);

/* What the disk does from now on (for every connection of the process). */
void pt_test_disk_set(enum pt_test_disk mode);

/* Skips the calling test under the cross builds' qemu-user, which does not
 * start a thread here (a five-line pthread_create program hangs in it); the
 * threaded tests run natively, under ASan and in CI. */
void pt_test_skip_without_threads(void);

/* 1 when n bytes of s are well-formed UTF-8 (RFC 3629: no overlong forms,
 * surrogates or code points past U+10FFFF); written here independently of
 * core/json.c, so the tests do not trust the code they test. */
int pt_test_utf8_clean(const char *s, size_t n);

/*
 * The store suites run on both backends (SPEC 16): with PT_TEST_PG_STATE
 * set (the file tests/pg/cluster.sh start wrote), pt_test_store_open()
 * opens the PostgreSQL store instead of the SQLite file at o->path, on a
 * database of this test program's own, emptied the first time each path
 * is opened (every test's setup makes a new temp dir) and kept for later
 * opens of the same path (reopens, child processes: other lanes).
 * pt_test_writer_new() gives no writer there (NULL: PostgreSQL commits
 * each connection itself).  pt_test_pg() says which backend runs.
 */
struct pt_store;
struct pt_store_options;
struct pt_store_writer;
int pt_test_store_open(const struct pt_store_options *o, struct pt_store **st, char *err,
                       size_t errlen);
int pt_test_writer_new(const struct pt_store_options *o, struct pt_store_writer **w, char *err,
                       size_t errlen);
int pt_test_pg(void);
/* Test setup behind the store's back, on whichever backend runs: runs sql
 * on the database at path (or the PostgreSQL test database), or reads
 * column col of its first row as an integer.  Plain SQL both understand. */
void pt_test_sql_exec(const char *path, const char *sql);
long long pt_test_sql_int(const char *path, const char *sql, int col);
/* 1 when sql ran, 0 when the database refused it (statements may be ';'-joined). */
int pt_test_sql_ok(const char *path, const char *sql);
/* A lane's own SQLite store (store.fallback "local") at dir/local.db,
 * whichever backend the suite runs; its path in path (PT_STORE_PATH_MAX). */
struct pt_store *pt_test_local_store(const char *dir, char *path);

/* The test cluster's connection string with dbname=dbname (later keys
 * appended to it override its own: " user=someone"). */
void pt_test_pg_dsn(char *dsn, size_t cap, const char *dbname);
/* Runs sql on the test cluster's postgres database as its superuser. */
void pt_test_pg_admin(const char *sql);

/* A proxy in front of the test cluster's socket: a store opened through
 * it (pt_test_store_open_via, after pt_test_store_open of the same
 * database; more: DSN keys appended, "user=x", or NULL; p NULL: no proxy)
 * loses its connection while its server process lives on - the network
 * gone between a lane and its server:
 *   cut           every connection closed at both ends;
 *   hold          what clients send from now on is kept, not forwarded
 *                 (a request on its way);
 *   lose_clients  the clients' ends closed, the servers' kept open;
 *   deliver       what was held reaches the servers, then they are closed. */
struct pt_test_pg_proxy;
struct pt_test_pg_proxy *pt_test_pg_proxy_start(void);
int pt_test_store_open_via(struct pt_test_pg_proxy *p, const char *more,
                           const struct pt_store_options *o, struct pt_store **st, char *err,
                           size_t errlen);
void pt_test_pg_proxy_cut(struct pt_test_pg_proxy *p);
void pt_test_pg_proxy_hold(struct pt_test_pg_proxy *p);
void pt_test_pg_proxy_lose_clients(struct pt_test_pg_proxy *p);
void pt_test_pg_proxy_deliver(struct pt_test_pg_proxy *p);
/* Bytes held so far (hold). */
size_t pt_test_pg_proxy_held(struct pt_test_pg_proxy *p);
void pt_test_pg_proxy_stop(struct pt_test_pg_proxy *p);
/* 1 once sql's first column is above 0 on the database at path, 0 after
 * timeout_ms (polled every 20 ms). */
int pt_test_pg_wait_for(const char *path, const char *sql, int timeout_ms);
/* The cluster the next opens use: a state file (tests/pg/cluster.sh), or
 * NULL for the suite's own. */
void pt_test_pg_use(const char *state);
/* Runs sql on the test database in a transaction left open (its locks
 * held) until pt_test_pg_release(). */
void *pt_test_pg_hold(const char *sql);
void pt_test_pg_release(void *held);

/* Skips the calling test on PostgreSQL (what only SQLite has: files,
 * PRAGMAs, the writer's batches), saying why. */
void pt_test_sqlite_only(const char *why);
/* And the other way round. */
void pt_test_pg_only(const char *why);

#endif
