/*
 * syncer.c - the sync engine's background thread (see syncer.h).
 */
#include "syncer.h"
#include "clock.h"
#include "fallback.h"
#include "err.h"
#include "gate.h"
#include "host.h"
#include "linux.h"
#include "log.h"
#include "pt_config.h"

#if PT_HAVE_MALLOC_TRIM
#include <malloc.h>
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct pt_syncer {
    struct pt_sync *sync;
    const struct pt_config *cfg;
    struct pt_store *st;
    /* store.fallback "local": the lane's own SQLite store, whose queued
     * charges each pass moves to the store server (fallback.c). */
    struct pt_store *local;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    int wake, stop;
    struct pt_gate *gate; /* a pass is one unit of work; its batches let a reload in */
    /* Monotonic ms of the pass's last step (begun, probed, keys fetched);
     * 0 while the thread sleeps between passes. */
    _Atomic int64_t busy;
    const char *stall_file; /* test hook, desktop builds: see stall() */
    struct pt_clock *clock; /* NULL: none to watch (tests) */
};

/* How long a correction of provisional times waits for the daemon's
 * requests to pause (pt_clock_tick); it tries again at the next pass. */
#define CLOCK_QUIET_MS 2000

/* pt_clock_tick's quiet(): nobody writes lane time while the gate is shut. */
static int quiet(void *p, int on)
{
    struct pt_syncer *y = p;
    if (!y->gate)
        return 0;
    if (!on) {
        pt_gate_open(y->gate);
        return 0;
    }
    int inside = 0;
    return pt_gate_close(y->gate, CLOCK_QUIET_MS, &inside);
}

/* Watches the wall clock (SPEC 17) between passes; 1 while it is not
 * trusted or lane time is still provisional: then the thread looks again
 * every interval, as it does for a gateway that is down. */
static int watch_clock(struct pt_syncer *y)
{
    if (!y->clock)
        return 0;
    struct pt_store *st = y->local ? y->local : y->st;
    int rc = pt_clock_tick(y->clock, st, quiet, y);
    if (rc)
        pt_log_error("clock: cannot record what the wall clock did: %s (%s)", pt_strerror(rc),
                     pt_store_errmsg(st));
    struct pt_clock_info ci;
    pt_clock_info(y->clock, &ci);
    return !ci.trusted || ci.provisional;
}

int64_t pt_syncer_stalled_ms(struct pt_syncer *y, int64_t now)
{
    int64_t last = atomic_load(&y->busy);
    if (!last)
        return 0; /* asleep, waiting for work: healthy */
    int64_t moved = pt_sync_drain_progress_ms(y->sync);
    if (moved > last)
        last = moved;
    return now > last ? now - last : 0;
}

static void step(struct pt_syncer *y)
{
    atomic_store(&y->busy, pt_host_mono_ms());
}

/* PAYTERM_TEST_SYNC_STALL_FILE (desktop builds): while that file exists, a
 * pass hangs at its start - the stuck sync thread the watchdog must notice
 * (tests/integration/test_service.sh). */
static void stall(struct pt_syncer *y)
{
    while (y->stall_file && access(y->stall_file, F_OK) == 0) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 50 * 1000000};
        nanosleep(&ts, NULL);
    }
}

void pt_syncer_wake(void *p)
{
    struct pt_syncer *y = p;
    pthread_mutex_lock(&y->mu);
    y->wake = 1;
    pthread_cond_signal(&y->cv);
    pthread_mutex_unlock(&y->mu);
}

/* Truncating checkpoints (payment codes out of the WAL) at most this often:
 * after one the WAL grows anew from zero, and a growing file costs every
 * commit a metadata sync, so a busy lane does not truncate per charge. */
#define WIPE_MIN_INTERVAL_MS 5000

/* Empties the WAL when a payment code was erased; returns the monotonic
 * time before which the next one may not run. */
static int64_t wipe(struct pt_syncer *y, int64_t now, int64_t not_before, int *at_start)
{
    if ((!pt_store_wipe_due() && !*at_start) || now < not_before)
        return not_before;
    int rc = pt_store_checkpoint_truncate(y->st);
    if (rc)
        pt_log_debug("sync: truncating checkpoint postponed: %s", pt_strerror(rc));
    else
        *at_start = 0;
    return now + WIPE_MIN_INTERVAL_MS;
}

static void *run(void *p)
{
    struct pt_syncer *y = p;
    int64_t next = 0; /* monotonic ms of the next pass; 0 = only when woken */
    int64_t next_probe = 0;
    int64_t next_wipe = 0;
    int64_t next_keys = 0;    /* peer certificates: at start, then every 12 h */
    int64_t next_recon = 0;   /* the daily reconciliation (SPEC 19): when to look */
    int64_t next_archive = 0; /* retention (SPEC 19): the next pass */
    /* Every gateway, once per probe_idle_s (not at start: the first charge
     * tries an untried gateway itself). */
    int64_t next_idle_probe = pt_host_mono_ms() + y->cfg->sync_probe_idle_s * 1000;
    /* A process killed (or a board powered off) before its wipe left
     * erased payment codes in the WAL: empty it once at start. */
    int wipe_at_start = 1;
    pt_sync_bind_thread(y->sync); /* probes and key downloads count as steps */
    int64_t clock_skew = pt_host_now_ms() - pt_host_mono_ms();
    for (;;) {
        pthread_mutex_lock(&y->mu);
        while (!y->stop && !y->wake) {
            if (next) {
                int64_t left = next - pt_host_mono_ms();
                if (left <= 0)
                    break;
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                ts.tv_sec += left / 1000;
                ts.tv_nsec += (left % 1000) * 1000000;
                if (ts.tv_nsec >= 1000000000) {
                    ts.tv_sec++;
                    ts.tv_nsec -= 1000000000;
                }
                pthread_cond_timedwait(&y->cv, &y->mu, &ts);
            } else {
                pthread_cond_wait(&y->cv, &y->mu);
            }
        }
        int stop = y->stop;
        y->wake = 0;
        pthread_mutex_unlock(&y->mu);
        if (stop)
            break;

        step(y);
        int clock_waits = watch_clock(y);
        pt_gate_enter(y->gate);
        stall(y);
        /* sync.interval_s may change with a reload (SIGHUP). */
        int64_t interval = y->cfg->sync_interval_s * 1000;
        /* Probing an unreachable gateway costs a connection attempt: at most
         * once per interval, however often new charges wake us. */
        if (pt_host_mono_ms() >= next_probe) {
            pt_sync_probe(y->sync);
            next_probe = pt_host_mono_ms() + interval;
            step(y);
        }
        /* Reachability is fresh (SPEC 18): a gateway that went away while
         * nothing was sent to it is seen within sync.probe_idle_s. */
        int64_t idle = y->cfg->sync_probe_idle_s * 1000;
        if (pt_host_mono_ms() >= next_idle_probe) {
            pt_sync_probe_all(y->sync, idle);
            next_idle_probe = pt_host_mono_ms() + idle;
            step(y);
        }
        /* Rotating gateway keys (SPEC 8): a failed download is tried again
         * after a few minutes, not at every pass. */
        if (pt_host_mono_ms() >= next_keys)
            next_keys = pt_host_mono_ms() + (pt_sync_refresh_keys(y->sync) == PT_OK
                                                 ? PT_SYNC_KEYS_INTERVAL_MS
                                                 : PT_SYNC_KEYS_RETRY_MS);
        step(y);
        int local_waiting = 0;
        if (y->local) {
            int moved = 0;
            int64_t left = 0;
            int mrc = pt_fallback_move(y->local, y->st, pt_host_now_ms(), &moved);
            if (pt_fallback_waiting(y->local, &left) == PT_OK && left > 0) {
                local_waiting = 1;
                if (mrc)
                    pt_log_warn("sync: %lld charge(s) wait in the local store for the store "
                                "server (%s)",
                                (long long)left, pt_store_errmsg(y->st));
            }
            step(y);
        }
        struct pt_drain_stats ds;
        int rc = pt_sync_drain(y->sync, y->st, &ds);
        if (rc)
            pt_log_error("sync: drain failed: %s (%s)", pt_strerror(rc), pt_store_errmsg(y->st));
        else if (ds.examined)
            pt_log_info("sync: %d examined, %d sent, %d queried, %d not sent, %d expired",
                        ds.examined, ds.sent, ds.queries, ds.not_sent, ds.expired);
        /* The gateways' bills of yesterday, once a day (SPEC 19): after the
         * queue, whose customers' money goes first. */
        if (pt_host_mono_ms() >= next_recon) {
            next_recon =
                pt_host_mono_ms() + pt_sync_reconcile_daily(y->sync, y->st, pt_host_mono_ms());
            step(y);
        }
        /* Then what is old, closed and reconciled leaves the live database. */
        if (pt_host_mono_ms() >= next_archive) {
            next_archive = pt_host_mono_ms() + pt_sync_archive_daily(y->sync, y->st);
            step(y);
        }
#if PT_HAVE_MALLOC_TRIM
        /* A pass that moved many charges freed what it read them with; glibc
         * keeps freed memory for the next malloc, and a drained queue of
         * 50 000 left 29 MiB private (issue 38): give it back. */
        if (rc == PT_OK && ds.examined + ds.expired >= 256)
            malloc_trim(0);
#endif
        int down = pt_sync_any_down(y->sync);
        next_wipe = wipe(y, pt_host_mono_ms(), next_wipe, &wipe_at_start);
        pt_gate_leave(y->gate);
        atomic_store(&y->busy, 0);

        /* Next pass: when the earliest charge is due, never sooner than a
         * second from now (no busy loop), and every interval while a gateway
         * is down, work waiting or not: the probe is how the daemon learns
         * that the gateway is back.  A lane that takes only QR/redirect
         * charges queues nothing (they get 503 while their gateway is
         * believed down, without a probe), and would otherwise stay offline
         * for good. */
        int64_t now = pt_host_mono_ms();
        clock_skew = pt_host_now_ms() - now;
        next = 0;
        if (rc || down || local_waiting || clock_waits) {
            /* A gateway is down: look again (probe) every interval, not
             * every second. */
            next = next_probe > now ? next_probe : now + interval;
            /* ...or sooner when a queued charge expires before that: the
             * pass reads none of the queue otherwise (sync.c,
             * expire_skipped), so a lane waiting out an outage sleeps. */
            if (rc == PT_OK && ds.next_expiry && ds.next_expiry - clock_skew < next) {
                next = ds.next_expiry - clock_skew;
                if (next < now + 1000)
                    next = now + 1000;
            }
        } else if (ds.next_due) {
            next = ds.next_due - clock_skew;
            if (next < now + 1000)
                next = now + 1000;
        }
        if (!next || next_keys < next)
            next = next_keys;
        if (next_recon < next)
            next = next_recon;
        if (next_idle_probe < next)
            next = next_idle_probe;
        if (pt_store_wipe_due() || wipe_at_start) {
            int64_t w = next_wipe > now + 1000 ? next_wipe : now + 1000;
            if (!next || w < next)
                next = w;
        }
    }
    return NULL;
}

int pt_syncer_start(struct pt_sync *sync, const struct pt_config *cfg, const char *db_path,
                    struct pt_store_writer *writer, struct pt_gate *gate, struct pt_clock *clock,
                    size_t stack_bytes, void (*event_hook)(void *), void *hook_ctx,
                    struct pt_syncer **out)
{
    struct pt_syncer *y = calloc(1, sizeof *y);
    if (!y)
        return PT_ENOMEM;
    y->sync = sync;
    y->clock = clock;
    y->cfg = cfg;
    y->gate = gate;
#if PT_WITH_SIM
    const char *sf = getenv("PAYTERM_TEST_SYNC_STALL_FILE");
    y->stall_file = sf && *sf ? sf : NULL;
#endif
    char err[1024];
    struct pt_store_options o;
    pt_config_lane_store_options(cfg, db_path, PT_LANE_OPEN_LATER, &o); /* as the API's pool */
    int rc = pt_store_open(&o, &y->st, err, sizeof err);
    if (rc) {
        pt_log_error("%s", err);
        free(y);
        return rc;
    }
    if ((rc = pt_config_open_local_queue(cfg, db_path, &y->local, err, sizeof err))) {
        pt_log_error("%s", err);
        pt_store_close(y->st);
        free(y);
        return rc;
    }
    if (event_hook)
        pt_store_set_event_hook(y->st, event_hook, hook_ctx);
    pt_store_attach(y->st, writer);
    pthread_mutex_init(&y->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&y->cv, &ca);
    pthread_condattr_destroy(&ca);
    y->wake = 1; /* first pass at start: resume what a reboot interrupted */
    /* An explicit stack: the libc default is 8 MiB on glibc but 128 KiB on
     * musl, and this thread must behave the same on both. */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    int e = stack_bytes ? pthread_attr_setstacksize(&attr, stack_bytes) : 0;
    if (e == 0)
        e = pthread_create(&y->thread, &attr, run, y);
    pthread_attr_destroy(&attr);
    if (e != 0) {
        pt_log_error("sync: cannot start its thread (stack %zu bytes): %s", stack_bytes,
                     strerror(e));
        pthread_cond_destroy(&y->cv);
        pthread_mutex_destroy(&y->mu);
        pt_store_close(y->local);
        pt_store_close(y->st);
        free(y);
        return PT_ESYS;
    }
    *out = y;
    return PT_OK;
}

void pt_syncer_stop(struct pt_syncer *y)
{
    if (!y)
        return;
    pthread_mutex_lock(&y->mu);
    y->stop = 1;
    pthread_cond_signal(&y->cv);
    pthread_mutex_unlock(&y->mu);
    pthread_join(y->thread, NULL);
    pthread_cond_destroy(&y->cv);
    pthread_mutex_destroy(&y->mu);
    pt_store_close(y->local);
    pt_store_close(y->st);
    free(y);
}
