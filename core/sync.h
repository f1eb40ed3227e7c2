/*
 * sync.h - the sync engine: sends queued charges, resolves the ones whose
 * outcome is not known, and applies gateway notifications (SPEC section 7).
 *
 * Every gateway call follows the same discipline: the transition that says
 * "we are about to send" (INIT -> PROCESSING) is committed before a byte
 * leaves, the request carries the charge's stable order_id as the gateway's
 * idempotency key, and the transport's answer decides the next state:
 *   not sent (PT_ENOTSENT)        -> back to INIT, retried when reachable
 *   sent, no answer (PT_ENOANSWER)-> UNKNOWN, resolved by query with backoff
 *   an HTTP answer                -> the adapter's outcome class
 * Counters and the next attempt time live in the charge row, so a reboot
 * resumes where it left off.
 *
 * One pt_sync is shared by the daemon's threads: the background drain and
 * the HTTP threads that send a fresh charge at once.  Each caller passes its
 * own store connection.
 */
#ifndef PT_SYNC_H
#define PT_SYNC_H

#include <stdint.h>

#include "charge.h"
#include "config.h"
#include "gateway.h"
#include "intake.h"
#include "metrics.h"
#include "platform.h"
#include "store.h"

struct pt_sync_options {
    const struct pt_config *cfg;        /* sync.* and offline.* settings */
    struct pt_gw_config *gw[PT_GW_MAX]; /* by pt_metric_gateway_index; NULL = absent */
    const struct pt_platform *platform; /* clock, randomness, transport */
    /* Called when there is work for a drain pass: a gateway became reachable
     * again, or a charge was queued or left UNKNOWN/PENDING.  May be NULL. */
    void (*wake)(void *ctx);
    void *ctx;
    /* Keeps a downloaded peer certificate of gateway (pem, len bytes) under
     * its serial, or forgets it (pem NULL) once the gateway no longer lists
     * it; the daemon stores them in data_dir (firmware/peer_certs.c).  NULL:
     * downloaded keys live in memory only.  Returns PT_OK or an error that is
     * logged (the key is trusted all the same). */
    int (*keep_peer_cert)(void *ctx, const char *gateway, const char *serial, const char *pem,
                          size_t len);
    /* Called by a drain before each charge, holding none: where the
     * daemon lets a configuration reload through (firmware/gate.h).  May be
     * NULL. */
    void (*between)(void *ctx);
};

struct pt_sync;

int pt_sync_new(const struct pt_sync_options *opt, struct pt_sync **out);
void pt_sync_destroy(struct pt_sync *s);

/* The hooks the intake uses for the online path (ctx = the pt_sync). */
struct pt_online_ops pt_sync_online_ops(struct pt_sync *s);

/* Last observed reachability: 1 reachable, 0 not.  Unknown counts as
 * reachable (so the first charge after start tries the network). */
int pt_sync_reachable(void *s, const char *gateway);
/* Asks the gateway now (pt_online_ops.probe): 1 when it answers. */
int pt_sync_probe_one(void *s, const char *gateway);

/*
 * Reachability is fresh (SPEC 18; pt_online_ops.try_down).  May a
 * customer-present charge for gateway go online now?  Believed up: 1.
 * Believed down: one charge at a time tries it - with can_wait (it would be
 * queued otherwise) it gets 1 and *trial = 1, its own request is the try,
 * and pt_sync_end_try() follows once that request has a verdict; without,
 * a probe is the try and its answer is returned.  The others wait up to a
 * second for that try, then 1 when it found the gateway up, else 0.  0 too
 * while the wall clock is untrusted (nothing can be sent).
 */
int pt_sync_try_down(void *s, const char *gateway, int can_wait, int *trial);
void pt_sync_end_try(void *s, const char *gateway);

/* Probes every configured gateway not heard from for max_age_ms (the idle
 * daemon's look, every sync.probe_idle_s: a request's verdict is as good
 * as a probe): the number found unreachable. */
int pt_sync_probe_all(struct pt_sync *s, int64_t max_age_ms);

/* Lane time reachability of gateway was last found out (a probe, or a
 * request's transport verdict); 0 never. */
int64_t pt_sync_last_probe(struct pt_sync *s, const char *gateway);

/* Monotonic ms at which a drain last moved (a batch begun, a gateway call
 * returned); 0 before the first.  The watchdog's proof that the sync
 * thread is alive. */
int64_t pt_sync_drain_progress_ms(const struct pt_sync *s);

/* Makes the gateway's reachability unknown again (its endpoint changed
 * with a reload): the next charge tries it. */
void pt_sync_forget_reach(struct pt_sync *s, const char *gateway);

/* Counts this thread's gateway calls, probes and key downloads as the
 * drain's progress (the daemon's sync thread, once at its start). */
void pt_sync_bind_thread(struct pt_sync *s);

/* True when every configured gateway is reachable (false with none). */
int pt_sync_online(void *s);

/* True when at least one configured gateway is known to be unreachable. */
int pt_sync_any_down(struct pt_sync *s);

/* Asks for a drain pass soon (pt_online_ops.wake). */
void pt_sync_wake(void *s);

/* The online charge's steps (pt_online_ops.claim, .send, .settle; see
 * docs/online-charge.md). */
int pt_sync_claim(void *s, struct pt_store *st, struct pt_charge *c, int64_t now);
void pt_sync_send(void *s, const struct pt_charge *c, struct pt_online_send *out);
int pt_sync_settle(void *s, struct pt_store *st, struct pt_charge *c,
                   const struct pt_online_send *sent);

/* Fetches the payment link of a PENDING/UNKNOWN qr/redirect charge again
 * (pt_online_ops.payment_link). */
int pt_sync_payment_link(void *s, struct pt_store *st, struct pt_charge *c);

/* Cancels a PROCESSING/PENDING/UNKNOWN charge at the gateway. */
int pt_sync_cancel_now(void *s, struct pt_store *st, struct pt_charge *c);
/*
 * A reconciliation run (SPEC 19): downloads the gateway's bill of date
 * (and of the days around it, where there) and runs it against the
 * records (core/recon_run.h), storing the run - done, pending (the
 * gateway has no bill yet) or failed (why) - and its body in *body
 * (malloc'd).  PT_OK, PT_EINVAL, a store error (nothing stored).
 */
int pt_sync_reconcile(void *s, struct pt_store *st, const char *gateway, const char *date,
                      const char *actor, int64_t now, char **body);
/*
 * The daily runs (SPEC 19): for each configured gateway whose bill payterm
 * downloads, once its clock in the bill time zone is past reconcile.after,
 * the previous bill date - unless its latest run is done; one that is not
 * is tried again after 15 minutes, doubling to 4 hours.  PT_EBUSY (another
 * run on) is tried again in a minute.  Returns how long until it should be
 * called again (ms, at least 1000); mono is the caller's monotonic now.
 */
int64_t pt_sync_reconcile_daily(struct pt_sync *s, struct pt_store *st, int64_t mono);

/* Retention (SPEC 19, core/archive.h): one pass over the records final
 * longer ago than retention_days, at lane time; how long until the next
 * (monotonic ms: a day; a minute while the clock is not trusted, since
 * which records are old is not known; an hour after a failed pass).  A
 * store without archive files (PostgreSQL) is left alone. */
int64_t pt_sync_archive_daily(struct pt_sync *s, struct pt_store *st);

/* The online refund's steps (struct pt_online_ops, intake.h). */
int pt_sync_refund_claim(void *s, struct pt_store *st, struct pt_refund *r, int64_t now);
void pt_sync_refund_send(void *s, const struct pt_charge *c, const struct pt_refund *r,
                         struct pt_online_send *out);
int pt_sync_refund_settle(void *s, struct pt_store *st, const struct pt_charge *c,
                          struct pt_refund *r, const struct pt_online_send *sent);
/* A refund of a gateway without refund keys, now (pt_online_ops.refund_now). */
int pt_sync_refund_now(void *s, struct pt_store *st, const struct pt_charge *c, struct pt_refund *r,
                       int *verdict);

struct pt_drain_stats {
    int examined;
    int sent; /* pay requests that left (or may have left) the device */
    int queries;
    int not_sent;
    int expired;
    int64_t next_due; /* earliest next_attempt_at left, 0 = nothing pending */
    /* when the next charge queued for a gateway skipped in this pass
     * (unreachable, or the clock not trusted) expires, 0 = none will */
    int64_t next_expiry;
};

/*
 * One pass over every due charge, oldest first: send, query, expire, cancel
 * unpaid barcodes, raise review.  A gateway found unreachable is skipped for
 * the rest of the pass (its charges wait for the next one).  Returns PT_OK or
 * a storage error.
 */
int pt_sync_drain(struct pt_sync *s, struct pt_store *st, struct pt_drain_stats *stats);

/*
 * Cheap reachability probe of every gateway currently marked unreachable: an
 * unauthenticated request to its endpoint; any HTTP answer means reachable.
 * Returns the number of gateways still unreachable.
 */
int pt_sync_probe(struct pt_sync *s);

/*
 * Peer key rotation (SPEC 8: WeChat Pay platform certificates).  Downloads
 * the current certificates of every configured gateway that publishes them
 * (struct pt_gateway.build_keys), trusts the new ones (after the adapter
 * verified the answer with a key already trusted), hands them to
 * keep_peer_cert, and retires the downloaded keys the gateway no longer
 * lists.  The background thread calls it at start and every
 * PT_SYNC_KEYS_INTERVAL_MS; an answer or a notification signed under a
 * serial nobody trusts triggers one download too (at most one per serial per
 * PT_SYNC_KEYS_SERIAL_MS, one per gateway per PT_SYNC_KEYS_ON_DEMAND_MS),
 * before it is verified.  PT_OK when every download succeeded (or there was
 * none to do), else the first error.
 */
#define PT_SYNC_KEYS_INTERVAL_MS (12LL * 3600 * 1000)
#define PT_SYNC_KEYS_RETRY_MS (5LL * 60 * 1000)
#define PT_SYNC_KEYS_SERIAL_MS (10LL * 60 * 1000)
#define PT_SYNC_KEYS_ON_DEMAND_MS (30LL * 1000)
int pt_sync_refresh_keys(struct pt_sync *s);

/*
 * Applies one gateway notification (the API's notify hook): verifies it with
 * the adapter, de-duplicates by (gateway, dedup id), cross-checks amount,
 * currency and merchant id against the local charge, and moves the charge.
 * Fills *out with the gateway's expected reply and *content_type.
 */
int pt_sync_notify(void *s, struct pt_store *st, const char *gateway,
                   const struct pt_http_response *msg, struct pt_reply *out,
                   const char **content_type);

#endif
