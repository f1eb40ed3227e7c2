/*
 * test_idem.c - the idempotency guard: every outcome, stale locks, expiry,
 * and many processes racing on one key.
 */
#include "testutil.h"

#include "err.h"
#include "idem.h"
#include "json.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#define SCOPE "POST /v1/charges"
#define MIN (60 * 1000)

static char dir[256];
static char path[300];
static struct pt_store *st;
static const struct pt_idem_options opt = {
    .ttl_ms = 24 * 60 * MIN, .lock_timeout_ms = MIN, .instance = 1111};

static int setup(void **state)
{
    (void)state;
    char err[512];
    pt_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/idem.db", dir);
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pt_store_close(st);
    pt_test_rmtree(dir);
    return 0;
}

static void hash_of(const char *body, unsigned char h[32])
{
    assert_int_equal(pt_idem_fingerprint("POST", "/v1/charges", body, h), PT_OK);
}

/* The lock the last acquire() took (what the API keeps in its guard). */
static struct pt_key_lock held;

/* acquire inside its own transaction, as the API does. */
static enum pt_idem_status acquire(const struct pt_idem_options *o, const char *key,
                                   const char *body, int64_t now, struct pt_idem_result *r)
{
    unsigned char h[32];
    hash_of(body, h);
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_idem_acquire(st, o, SCOPE, key, h, now, r), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    if (r->status == PT_IDEM_NEW || r->status == PT_IDEM_RECOVERED)
        held = r->lock;
    return r->status;
}

static int complete_as(struct pt_key_lock *lock, const char *key, int status, const char *body,
                       int64_t now)
{
    assert_int_equal(pt_store_begin(st), PT_OK);
    int rc = pt_idem_complete(st, lock, SCOPE, key, status, body, strlen(body), now);
    if (rc == PT_OK)
        assert_int_equal(pt_store_commit(st), PT_OK);
    else
        assert_int_equal(pt_store_rollback(st), PT_OK);
    return rc;
}

static void complete(const char *key, int status, const char *body, int64_t now)
{
    assert_int_equal(complete_as(&held, key, status, body, now), PT_OK);
}

static void test_new_then_replay(void **state)
{
    (void)state;
    struct pt_idem_result r;
    assert_int_equal(acquire(&opt, "k1", "{\"a\":1}", 1000, &r), PT_IDEM_NEW);
    complete("k1", 201, "{\"id\":1,\"state\":\"SUCCESS\"}", 1500);

    assert_int_equal(acquire(&opt, "k1", "{\"a\":1}", 2000, &r), PT_IDEM_REPLAY);
    assert_int_equal(r.response_status, 201);
    assert_int_equal(r.body_len, strlen("{\"id\":1,\"state\":\"SUCCESS\"}"));
    assert_memory_equal(r.body, "{\"id\":1,\"state\":\"SUCCESS\"}", r.body_len);
    pt_idem_result_free(&r);

    /* The read-only fast path gives the same answer without a transaction. */
    unsigned char h[32];
    hash_of("{\"a\":1}", h);
    assert_int_equal(pt_idem_lookup(st, &opt, SCOPE, "k1", h, 3000, &r), PT_OK);
    assert_int_equal(r.status, PT_IDEM_REPLAY);
    assert_int_equal(r.response_status, 201);
    assert_memory_equal(r.body, "{\"id\":1,\"state\":\"SUCCESS\"}", r.body_len);
    pt_idem_result_free(&r);

    /* Same key in another scope is another key. */
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_idem_acquire(st, &opt, "cancel:O-1", "k1", h, 3000, &r), PT_OK);
    assert_int_equal(r.status, PT_IDEM_NEW);
    assert_int_equal(pt_store_commit(st), PT_OK);
}

static void test_in_use_and_mismatch(void **state)
{
    (void)state;
    struct pt_idem_result r;
    assert_int_equal(acquire(&opt, "k2", "{\"a\":1}", 1000, &r), PT_IDEM_NEW);
    /* Still running: a retry is told to come back. */
    assert_int_equal(acquire(&opt, "k2", "{\"a\":1}", 1000 + 5000, &r), PT_IDEM_IN_USE);
    assert_int_equal(r.lock_age_ms, 5000);
    /* The fast path never reports a lock (only acquire may judge staleness). */
    unsigned char h[32];
    hash_of("{\"a\":1}", h);
    assert_int_equal(pt_idem_lookup(st, &opt, SCOPE, "k2", h, 6000, &r), PT_OK);
    assert_int_equal(r.status, PT_IDEM_ABSENT);
    /* Different body under the same key: refused while locked... */
    assert_int_equal(acquire(&opt, "k2", "{\"a\":2}", 7000, &r), PT_IDEM_MISMATCH);
    complete("k2", 202, "{}", 8000);
    /* ...and after completion. */
    assert_int_equal(acquire(&opt, "k2", "{\"a\":2}", 9000, &r), PT_IDEM_MISMATCH);
    assert_null(r.body);
    hash_of("{\"a\":2}", h);
    assert_int_equal(pt_idem_lookup(st, &opt, SCOPE, "k2", h, 9000, &r), PT_OK);
    assert_int_equal(r.status, PT_IDEM_MISMATCH);
}

static void test_stale_lock_recovery(void **state)
{
    (void)state;
    struct pt_idem_result r;
    assert_int_equal(acquire(&opt, "k3", "{}", 1000, &r), PT_IDEM_NEW);
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_store_key_set_order(st, SCOPE, "k3", &held, "O-3"), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    /* Just inside the timeout: still in use. */
    assert_int_equal(acquire(&opt, "k3", "{}", 1000 + MIN - 1, &r), PT_IDEM_IN_USE);
    /* Past the timeout: recovered, and we learn which order it had created. */
    assert_int_equal(acquire(&opt, "k3", "{}", 1000 + MIN, &r), PT_IDEM_RECOVERED);
    assert_string_equal(r.order_id, "O-3");
    /* The recoverer now holds a fresh lock. */
    assert_int_equal(acquire(&opt, "k3", "{}", 1000 + MIN + 10, &r), PT_IDEM_IN_USE);
    /* A mismatching request never recovers someone else's lock. */
    assert_int_equal(acquire(&opt, "k3", "{\"x\":1}", 1000 + 5 * MIN, &r), PT_IDEM_MISMATCH);
}

/* A holder that outlived lock_timeout_s and was taken over can no longer
 * complete, link or release the key: the recoverer's answer is the key's. */
static void test_recovered_lock_cannot_be_completed_by_the_first_holder(void **state)
{
    (void)state;
    struct pt_idem_result r;
    assert_int_equal(acquire(&opt, "k6", "{}", 1000, &r), PT_IDEM_NEW);
    struct pt_key_lock first = held;
    assert_int_equal(acquire(&opt, "k6", "{}", 1000 + MIN, &r), PT_IDEM_RECOVERED);
    struct pt_key_lock second = held;
    assert_int_equal(complete_as(&second, "k6", 201, "{\"by\":\"recoverer\"}", 1000 + MIN + 5),
                     PT_OK);
    /* The first holder comes back from its slow gateway call. */
    assert_int_equal(complete_as(&first, "k6", 202, "{\"by\":\"first\"}", 1000 + MIN + 9),
                     PT_ESTATE);
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_idem_release(st, &first, SCOPE, "k6"), PT_ESTATE);
    assert_int_equal(pt_store_key_set_order(st, SCOPE, "k6", &first, "O-6"), PT_ESTATE);
    assert_int_equal(pt_store_rollback(st), PT_OK);
    assert_int_equal(acquire(&opt, "k6", "{}", 1000 + MIN + 20, &r), PT_IDEM_REPLAY);
    assert_int_equal(r.response_status, 201);
    assert_memory_equal(r.body, "{\"by\":\"recoverer\"}", r.body_len);
    pt_idem_result_free(&r);
}

/* acquire_later: a free key costs no write until the answer; the lock is
 * written by complete (a completed record, replayed later), by set_order (a
 * lock kept across a commit: a retry is told it is in use) or dropped by
 * release (nothing left); a commit with it still pending is refused and
 * rolled back, so a lock is never silently lost. */
static void test_acquire_later(void **state)
{
    (void)state;
    pt_test_sqlite_only("PostgreSQL takes a new key's lock by its INSERT at once (many writers): "
                        "the pending lock is the one-writer SQLite store's");
    struct pt_idem_result r;
    unsigned char h[32];
    hash_of("{\"a\":1}", h);
    int64_t count = -1;

    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_idem_acquire_later(st, &opt, SCOPE, "L1", h, 1000, &r), PT_OK);
    assert_int_equal(r.status, PT_IDEM_NEW);
    assert_true(r.lock.pending);
    assert_int_equal(pt_store_count(st, "idempotency_keys", &count), PT_OK);
    assert_int_equal(count, 0);
    assert_int_equal(pt_idem_complete(st, &r.lock, SCOPE, "L1", 202, "{\"q\":1}", 7, 1100), PT_OK);
    assert_false(r.lock.pending);
    assert_int_equal(pt_store_commit(st), PT_OK);
    assert_int_equal(pt_idem_lookup(st, &opt, SCOPE, "L1", h, 1200, &r), PT_OK);
    assert_int_equal(r.status, PT_IDEM_REPLAY);
    assert_int_equal(r.response_status, 202);
    assert_memory_equal(r.body, "{\"q\":1}", 7);
    pt_idem_result_free(&r);
    /* The same key again, inside a transaction: the existing record decides. */
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_idem_acquire_later(st, &opt, SCOPE, "L1", h, 1300, &r), PT_OK);
    assert_int_equal(r.status, PT_IDEM_REPLAY);
    pt_idem_result_free(&r);
    assert_int_equal(pt_store_rollback(st), PT_OK);

    /* Kept across a commit by set_order: in use for a retry, with its order. */
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_idem_acquire_later(st, &opt, SCOPE, "L2", h, 2000, &r), PT_OK);
    assert_int_equal(pt_store_key_set_order(st, SCOPE, "L2", &r.lock, "O-L2"), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    struct pt_key_lock kept = r.lock;
    struct pt_idem_result again;
    assert_int_equal(acquire(&opt, "L2", "{\"a\":1}", 2500, &again), PT_IDEM_IN_USE);
    assert_int_equal(acquire(&opt, "L2", "{\"a\":1}", 2000 + MIN, &again), PT_IDEM_RECOVERED);
    assert_string_equal(again.order_id, "O-L2");
    /* ...and the first holder, taken over, cannot complete it. */
    assert_int_equal(complete_as(&kept, "L2", 201, "{}", 2000 + MIN + 1), PT_ESTATE);

    /* Released while pending: nothing was ever written. */
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_idem_acquire_later(st, &opt, SCOPE, "L3", h, 3000, &r), PT_OK);
    assert_int_equal(pt_idem_release(st, &r.lock, SCOPE, "L3"), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    assert_int_equal(pt_idem_lookup(st, &opt, SCOPE, "L3", h, 3100, &r), PT_OK);
    assert_int_equal(r.status, PT_IDEM_ABSENT);

    /* Still pending at the commit: refused, rolled back (the charge too). */
    struct pt_charge c = {0};
    strcpy(c.order_id, "ORDER-L4");
    strcpy(c.gateway, "stripe");
    strcpy(c.method, "card_on_file");
    c.amount = 100;
    strcpy(c.currency, "USD");
    assert_int_equal(pt_store_count(st, "charges", &count), PT_OK);
    int64_t charges_before = count;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_idem_acquire_later(st, &opt, SCOPE, "L4", h, 4000, &r), PT_OK);
    assert_int_equal(pt_store_charge_insert(st, &c, 4000), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_ESTORAGE);
    assert_int_equal(pt_store_count(st, "charges", &count), PT_OK);
    assert_int_equal(count, charges_before);
    /* The lock outlived its transaction: in another one it is not held, so
     * it can neither be completed nor kept - the key was proved free only
     * inside the first. */
    struct pt_key_lock stale = r.lock;
    assert_true(stale.pending);
    assert_int_equal(complete_as(&stale, "L4", 202, "{}", 4050), PT_ESTATE);
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_store_key_set_order(st, SCOPE, "L4", &stale, "ORDER-L4"), PT_ESTATE);
    assert_int_equal(pt_idem_release(st, &stale, SCOPE, "L4"), PT_ESTATE);
    assert_int_equal(pt_store_rollback(st), PT_OK);
    assert_int_equal(acquire(&opt, "L4", "{\"a\":1}", 4100, &r), PT_IDEM_NEW);
}

static void test_lock_of_dead_instance_recovered_at_once(void **state)
{
    (void)state;
    struct pt_idem_result r;
    struct pt_idem_options before_crash = opt;
    before_crash.instance = 42;
    assert_int_equal(acquire(&before_crash, "k4", "{}", 1000, &r), PT_IDEM_NEW);
    /* The daemon restarted (new instance token): no need to wait a minute. */
    assert_int_equal(acquire(&opt, "k4", "{}", 1200, &r), PT_IDEM_RECOVERED);
}

static void test_relock_only_one_winner(void **state)
{
    (void)state;
    struct pt_idem_result r;
    assert_int_equal(acquire(&opt, "k5", "{}", 1000, &r), PT_IDEM_NEW);
    /* Two recoverers both read the stale lock (1000, 1111); the first wins and
     * the second's conditional update finds the row changed. */
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_store_key_relock(st, SCOPE, "k5", 1000, 1111, 7, 99999), PT_OK);
    assert_int_equal(pt_store_key_relock(st, SCOPE, "k5", 1000, 1111, 8, 99999), PT_EEXIST);
    assert_int_equal(pt_store_commit(st), PT_OK);
}

static void test_expiry_and_sweep(void **state)
{
    (void)state;
    struct pt_idem_result r;
    struct pt_idem_options shortlived = opt;
    shortlived.ttl_ms = 10 * MIN;
    assert_int_equal(acquire(&shortlived, "old", "{\"a\":1}", 0, &r), PT_IDEM_NEW);
    complete("old", 201, "{\"first\":true}", 100);
    assert_int_equal(acquire(&shortlived, "live", "{}", 5 * MIN, &r), PT_IDEM_NEW);
    complete("live", 201, "{}", 5 * MIN);
    assert_int_equal(acquire(&shortlived, "locked", "{}", 0, &r), PT_IDEM_NEW);

    /* Expired but not swept: a retry starts afresh (even with another body). */
    unsigned char h[32];
    hash_of("{\"a\":1}", h);
    assert_int_equal(pt_idem_lookup(st, &shortlived, SCOPE, "old", h, 10 * MIN, &r), PT_OK);
    assert_int_equal(r.status, PT_IDEM_ABSENT);

    int n = -1;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_idem_sweep(st, 11 * MIN, &n), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    assert_int_equal(n, 1); /* "old" only: "live" is live, "locked" is a lock */
    int64_t count;
    assert_int_equal(pt_store_count(st, "idempotency_keys", &count), PT_OK);
    assert_int_equal(count, 2);
    assert_int_equal(acquire(&shortlived, "old", "{\"a\":9}", 11 * MIN, &r), PT_IDEM_NEW);
    /* An expired, unswept record is replaced in acquire too. */
    assert_int_equal(acquire(&shortlived, "live", "{\"b\":1}", 16 * MIN, &r), PT_IDEM_NEW);
}

/* SPEC 1: after a key expires, the data layer still stops a second charge. */
static void test_expired_key_cannot_double_charge(void **state)
{
    (void)state;
    struct pt_idem_options shortlived = opt;
    shortlived.ttl_ms = MIN;
    struct pt_idem_result r;
    struct pt_charge c = {0};
    strcpy(c.order_id, "ORDER-EXP-1");
    strcpy(c.gateway, "stripe");
    strcpy(c.method, "card_on_file");
    c.amount = 1200;
    strcpy(c.currency, "USD");

    assert_int_equal(acquire(&shortlived, "exp", "{}", 0, &r), PT_IDEM_NEW);
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_store_charge_insert(st, &c, 0), PT_OK);
    assert_int_equal(pt_idem_complete(st, &r.lock, SCOPE, "exp", 202, "{}", 2, 0), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);

    int n;
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_idem_sweep(st, 2 * MIN, &n), PT_OK);
    assert_int_equal(pt_store_commit(st), PT_OK);
    assert_int_equal(n, 1);

    /* The key is gone: the retry takes it anew... */
    assert_int_equal(acquire(&shortlived, "exp", "{}", 3 * MIN, &r), PT_IDEM_NEW);
    /* ...but the charge cannot be inserted a second time. */
    assert_int_equal(pt_store_begin(st), PT_OK);
    assert_int_equal(pt_store_charge_insert(st, &c, 3 * MIN), PT_EEXIST);
    assert_int_equal(pt_store_rollback(st), PT_OK);
    int64_t count;
    assert_int_equal(pt_store_count(st, "charges", &count), PT_OK);
    assert_int_equal(count, 1);
}

/*
 * N processes, each with its own connection, race on the same keys: for each
 * key exactly one of them may see NEW and create the charge.
 */
#define RACERS 8
#define RACE_KEYS 40

static int racer(int id, int go_fd)
{
    char err[512];
    struct pt_store *mine;
    struct pt_store_options o = {.path = path, .busy_timeout_ms = 30000};
    if (pt_test_store_open(&o, &mine, err, sizeof err) != PT_OK) {
        fprintf(stderr, "racer %d: cannot open its store: %s\n", id, err);
        return 255;
    }
    char b;
    if (read(go_fd, &b, 1) != 1) /* wait for the starting gun */
        return 255;
    struct pt_idem_options myopt = opt;
    myopt.instance = 1000 + id; /* each process is its own instance, all alive */
    myopt.lock_timeout_ms = 60LL * MIN;
    int wins = 0;
    unsigned char h[32];
    pt_idem_fingerprint("POST", "/v1/charges", "{\"race\":1}", h);
    for (int k = 0; k < RACE_KEYS; k++) {
        char key[32];
        snprintf(key, sizeof key, "race-%d", k);
        struct pt_idem_result r;
        if (pt_store_begin(mine) != PT_OK)
            return 254;
        /* Half the racers take the key as the API does (written with the
         * answer), half with the lock row first: one winner either way. */
        if ((id % 2 ? pt_idem_acquire_later : pt_idem_acquire)(mine, &myopt, SCOPE, key, h, 5000,
                                                               &r) != PT_OK)
            return 253;
        if (r.status == PT_IDEM_NEW) {
            struct pt_charge c = {0};
            snprintf(c.order_id, sizeof c.order_id, "RACE-%d", k);
            strcpy(c.gateway, "wechat");
            strcpy(c.method, "qr");
            c.amount = 1;
            strcpy(c.currency, "CNY");
            if (pt_store_charge_insert(mine, &c, 5000) != PT_OK ||
                pt_idem_complete(mine, &r.lock, SCOPE, key, 202, "{}", 2, 5000) != PT_OK)
                return 252;
            wins++;
        } else if (r.status == PT_IDEM_RECOVERED) {
            return 251; /* all holders are alive: recovery would be a bug here */
        }
        pt_idem_result_free(&r);
        if (pt_store_commit(mine) != PT_OK)
            return 250;
    }
    pt_store_close(mine);
    return wins;
}

static void test_processes_race_one_winner(void **state)
{
    (void)state;
    if (getenv("PT_TEST_EMULATED")) {
        /* Under qemu-user (the cross build's test run) several SQLite
         * connections contending for the WAL lock spin forever without a
         * system call, with processes and with threads alike.  The race is
         * about SQLite's locking, not the CPU: it runs natively in CI. */
        skip();
    }
    /* The parent's connection must not hold anything open. */
    pt_store_close(st);
    st = NULL;
    int gun[2];
    assert_int_equal(pipe(gun), 0);
    pid_t pids[RACERS];
    for (int i = 0; i < RACERS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            close(gun[1]);
            _exit(racer(i, gun[0]));
        }
    }
    close(gun[0]);
    usleep(200 * 1000); /* let every child open its connection */
    char go[RACERS];
    memset(go, 'g', sizeof go);
    assert_int_equal(write(gun[1], go, sizeof go), RACERS);
    close(gun[1]);
    int total_wins = 0;
    for (int i = 0; i < RACERS; i++) {
        int status;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        assert_true(WIFEXITED(status));
        int code = WEXITSTATUS(status);
        if (code > RACE_KEYS)
            fail_msg("racer %d failed with code %d", i, code);
        total_wins += code;
    }
    assert_int_equal(total_wins, RACE_KEYS); /* exactly one NEW per key */

    char err[512];
    struct pt_store_options o = {.path = path};
    assert_int_equal(pt_test_store_open(&o, &st, err, sizeof err), PT_OK);
    int64_t charges;
    assert_int_equal(pt_store_count(st, "charges", &charges), PT_OK);
    assert_int_equal(charges, RACE_KEYS);
}

/* The same race between threads, each with its own connection (the
 * daemon's shape: one connection per HTTP worker thread). */
struct thread_arg {
    int id;
    int wins;
    pthread_barrier_t *gun;
};

static void *racer_thread(void *p)
{
    struct thread_arg *a = p;
    int pipefd[2];
    if (pipe(pipefd) != 0) {
        a->wins = 255;
        return NULL;
    }
    /* racer() waits on a byte; give it one after the barrier. */
    pthread_barrier_wait(a->gun);
    if (write(pipefd[1], "g", 1) != 1) {
        a->wins = 255;
        return NULL;
    }
    a->wins = racer(a->id, pipefd[0]);
    close(pipefd[0]);
    close(pipefd[1]);
    return NULL;
}

static void test_threads_race_one_winner(void **state)
{
    (void)state;
    if (getenv("PT_TEST_EMULATED"))
        skip(); /* see test_processes_race_one_winner */
    pthread_barrier_t gun;
    pthread_barrier_init(&gun, NULL, RACERS);
    pthread_t th[RACERS];
    struct thread_arg args[RACERS];
    for (int i = 0; i < RACERS; i++) {
        args[i] = (struct thread_arg){.id = i, .gun = &gun};
        assert_int_equal(pthread_create(&th[i], NULL, racer_thread, &args[i]), 0);
    }
    int total = 0;
    for (int i = 0; i < RACERS; i++) {
        pthread_join(th[i], NULL);
        if (args[i].wins > RACE_KEYS)
            fail_msg("thread %d failed with code %d", i, args[i].wins);
        total += args[i].wins;
    }
    pthread_barrier_destroy(&gun);
    assert_int_equal(total, RACE_KEYS);
    int64_t charges;
    assert_int_equal(pt_store_count(st, "charges", &charges), PT_OK);
    assert_int_equal(charges, RACE_KEYS);
}

static void test_key_normalize(void **state)
{
    (void)state;
    char out[256];
    assert_int_equal(pt_idem_key_normalize("abc", out), PT_OK);
    assert_string_equal(out, "abc");
    assert_int_equal(pt_idem_key_normalize("\"abc\"", out), PT_OK);
    assert_string_equal(out, "abc");
    assert_int_equal(pt_idem_key_normalize("", out), PT_EINVAL);
    assert_int_equal(pt_idem_key_normalize("\"\"", out), PT_EINVAL);
    assert_int_equal(pt_idem_key_normalize("has space", out), PT_EINVAL);
    assert_int_equal(pt_idem_key_normalize("tab\there", out), PT_EINVAL);
    assert_int_equal(pt_idem_key_normalize("caf\xc3\xa9", out), PT_EINVAL);
    char longkey[300];
    memset(longkey, 'k', 255);
    longkey[255] = '\0';
    assert_int_equal(pt_idem_key_normalize(longkey, out), PT_OK);
    longkey[255] = 'k';
    longkey[256] = '\0';
    assert_int_equal(pt_idem_key_normalize(longkey, out), PT_EINVAL);
}

static void test_fingerprint_canonical(void **state)
{
    (void)state;
    const char *a =
        "{\"order_id\":\"O-1\",\"amount\":8888,\"metadata\":{\"lane\":\"3\",\"z\":[1,2]}}";
    const char *b = " {\n  \"metadata\": {\"z\": [1, 2], \"lane\": \"3\"},\n  \"amount\": 8888,"
                    " \"order_id\": \"O-1\" }";
    cJSON *ja = cJSON_Parse(a), *jb = cJSON_Parse(b);
    char *ca = pt_json_canonical(ja), *cb = pt_json_canonical(jb);
    assert_string_equal(ca, "{\"amount\":8888,\"metadata\":{\"lane\":\"3\",\"z\":[1,2]},"
                            "\"order_id\":\"O-1\"}");
    assert_string_equal(ca, cb);
    unsigned char ha[32], hb[32], hc[32];
    assert_int_equal(pt_idem_fingerprint("POST", "/v1/charges", ca, ha), PT_OK);
    assert_int_equal(pt_idem_fingerprint("POST", "/v1/charges", cb, hb), PT_OK);
    assert_memory_equal(ha, hb, 32);
    /* Method and path are part of the fingerprint. */
    assert_int_equal(pt_idem_fingerprint("POST", "/v1/charges/O-1/cancel", ca, hc), PT_OK);
    assert_memory_not_equal(ha, hc, 32);
    free(ca);
    free(cb);
    cJSON_Delete(ja);
    cJSON_Delete(jb);
    /* A body with a duplicate key has no canonical form. */
    cJSON *dup = cJSON_Parse("{\"a\":1,\"a\":2}");
    assert_null(pt_json_canonical(dup));
    assert_true(pt_json_has_duplicate_keys(dup));
    cJSON_Delete(dup);
    /* Escapes are canonical too. */
    cJSON *esc = cJSON_Parse("{\"s\":\"line\\nbreak \\\"q\\\" \\u0001\"}");
    char *ce = pt_json_canonical(esc);
    assert_string_equal(ce, "{\"s\":\"line\\nbreak \\\"q\\\" \\u0001\"}");
    free(ce);
    cJSON_Delete(esc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_new_then_replay, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_use_and_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_lock_recovery, setup, teardown),
        cmocka_unit_test_setup_teardown(test_acquire_later, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recovered_lock_cannot_be_completed_by_the_first_holder,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock_of_dead_instance_recovered_at_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_relock_only_one_winner, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expiry_and_sweep, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expired_key_cannot_double_charge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_processes_race_one_winner, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads_race_one_winner, setup, teardown),
        cmocka_unit_test(test_key_normalize),
        cmocka_unit_test(test_fingerprint_canonical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
