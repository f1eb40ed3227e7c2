/*
 * sync_impl.h - what the files of the sync engine share (sync.h is what
 * the rest of payterm sees): sync_job.c holds the steps of every money
 * movement (struct pt__job); sync.c sends, resolves and drains charges and
 * owns reachability; sync_refund.c does the same for refunds;
 * sync_notify.c takes gateway notifications; sync_keys.c rotates the
 * gateways' keys.  Internal names crossing these files are pt__sync_*.
 */
#ifndef PT_SYNC_IMPL_H
#define PT_SYNC_IMPL_H

#include "sync.h"
#include "charges.h"
#include "clock.h"
#include "refund_bind.h"
#include "refunds.h"
#include "crypto.h"
#include "err.h"
#include "log.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DRAIN_BATCH 32
/* Queued charges (refunds) armed in one commit and sent one after another
 * before their outcomes are committed (send_queued). */
#define RUN_MAX 16
/* A verdict of send_queued(): the charge was moved by someone else before
 * its turn; not sent, not settled.  (Positive: never a PT_E* code.) */
#define NOT_OURS 1
/* A kind's decide() leaves the answer to the state machine.  (Positive.) */
#define UNDECIDED 2
/* A charge being sent by one thread is not picked up by another until the
 * send must have ended (request timeout plus this margin; an idempotency
 * lock outlives it too, config.h). */
#define IN_FLIGHT_MARGIN_MS PT_CONFIG_CALL_MARGIN_MS
/* Stripes of the per-charge gateway lock (struct pt_sync charge_mu). */
#define CHARGE_LOCKS 64
/* How long a customer-present charge waits for another one's try of a
 * gateway believed down (SPEC 18). */
#define TRIAL_WAIT_MS 1000

enum reach { REACH_UNKNOWN = 0, REACH_UP = 1, REACH_DOWN = 2 };

/* A verdict that says nothing left the device: the gateway could not be
 * reached, or the wall clock is not trusted yet (SPEC 17). */
#define NOT_SENT(v) ((v) == PT_ENOTSENT || (v) == PT_ECLOCK)

/* A download asked for by a message under an unknown serial (rate limit). */
struct key_attempt {
    int gw;
    char serial[PT_GW_SERIAL_MAX];
    int64_t at_ms; /* monotonic; 0 = free slot */
};
#define KEY_ATTEMPTS 16

struct pt_sync {
    struct pt_sync_options opt;
    atomic_int reach[PT_GW_MAX];
    /* Peer key rotation: who asked for a download and when (keys_mu). */
    pthread_mutex_t keys_mu;
    struct key_attempt attempts[KEY_ATTEMPTS];
    int64_t last_on_demand[PT_GW_MAX];
    /* Monotonic ms of the drain's last step (a batch begun, a gateway
     * answered or timed out): the watchdog's proof of life (SPEC 11). */
    _Atomic int64_t drain_progress;
    /* One gateway conversation at a time per charge (SPEC 18): a query,
     * a close or a reverse, and a notification's application, each with
     * the commit of its outcome, hold the charge's lock (by order id,
     * striped; recursive: a cancel may query first).  So a reverse never
     * runs beside a query or a notification that would take the money as
     * kept: the one that comes second reads what the first committed. */
    pthread_mutex_t charge_mu[CHARGE_LOCKS];
    /* Reachability is fresh (SPEC 18): while a gateway is believed down,
     * one customer-present charge at a time tries it (trial[i]); the
     * others wait up to TRIAL_WAIT_MS for that try's outcome (trial_cv).
     * last_probe[i]: lane time reachability was last found out (a probe or
     * a request's transport verdict), for /v1/status; 0 never. */
    atomic_int came_back[PT_GW_MAX]; /* found reachable again: its queue is due (drain) */
    pthread_mutex_t trial_mu;
    pthread_cond_t trial_cv; /* CLOCK_MONOTONIC */
    int trial[PT_GW_MAX];
    _Atomic int64_t last_probe[PT_GW_MAX];
    /* Reconciliation (SPEC 19, sync_recon.c): one run at a time in the
     * process (recon_mu, tried: a second is told to come back), and the
     * daily schedule's retry of a day that is not done: when and after
     * how long, per gateway, for the bill date in recon_date. */
    pthread_mutex_t recon_mu;
    int64_t recon_retry_at[PT_GW_MAX], recon_backoff[PT_GW_MAX];
    char recon_date[PT_GW_MAX][11];
    /* The walk back over days the daily run missed: the yesterday it was
     * last finished for, the last day it tried since (each day is tried
     * once a walk, oldest first) and the yesterday that walk is for. */
    char recon_walked[PT_GW_MAX][11], recon_walk_at[PT_GW_MAX][11], recon_walk_for[PT_GW_MAX][11];
};

/* Set while this thread runs pt_sync_drain (a gateway call counts as its
 * progress). */
extern _Thread_local struct pt_sync *pt__sync_tl_drain;

/* One request to a gateway and its answer, whatever it is about: the
 * transport, the clock, the nonce, reachability, the peer's key and the
 * debug line are the same for every kind of money movement; what differs
 * is how the request is built and the answer read (a charge's or a
 * refund's adapter functions).  Embed it first in a struct of the kind's. */
struct pt__sync_exchange {
    const char *gateway;
    const char *what;   /* the request, for the debug line ("pay", "refund list") */
    const char *id_key; /* "order" or "refund", and the id, for the debug line */
    const char *id;
    /* NULL: every gateway can; else 0 answers PT_EUNSUPPORTED, not sent. */
    int (*supported)(const struct pt__sync_exchange *x, const struct pt_gateway *gw);
    /* env holds the nonce and the trusted wall clock; build may add to it. */
    int (*build)(const struct pt__sync_exchange *x, const struct pt_gateway *gw,
                 const struct pt_gw_config *cfg, struct pt_gw_env *env,
                 struct pt_http_request *req);
    /* Reads an answer that arrived; returns the outcome, for the log. */
    const struct pt_gw_result *(*parse)(const struct pt__sync_exchange *x,
                                        const struct pt_gateway *gw, const struct pt_gw_config *cfg,
                                        const struct pt_http_response *resp);
};
/* PT_OK (an answer arrived and was parsed), PT_ENOTSENT, PT_ENOANSWER,
 * PT_ECLOCK, PT_ECONFIG, PT_EUNSUPPORTED, or the build's error. */
int pt__sync_exchange(struct pt_sync *s, const struct pt__sync_exchange *x);

/*
 * A money movement as the engine drives it, whatever its kind (a charge, a
 * refund): the steps that are the same for every kind are written once
 * (sync_job.c); what differs is its kind's (sync.c, sync_refund.c).
 */
struct pt__job;

struct pt__job_kind {
    const char *what;    /* "charge", "refund": logs */
    const char *request; /* its send in logs: "request", "refund request" */
    const char *refused; /* a refusal's message when the gateway gave none */
    int needs_charge;    /* its requests name its charge (struct pt__job charge) */
    size_t size;         /* its row: struct pt_charge, struct pt_refund */
    /* The job of rows[i] (without its charge). */
    struct pt__job (*job)(void *rows, int i);
    /* Its due rows after after_id, by id (pt_store_charges_due). */
    int (*due)(struct pt_store *st, int64_t now, int64_t after_id, int max, void *rows, int *n);
    /* The rows of a run that this lane may arm (pt_store_charges_claim). */
    int (*claim)(struct pt_store *st, const int64_t *ids, int n, unsigned char *taken);
    /* A refund's charge into *c. */
    int (*load_charge)(struct pt_store *st, const struct pt__job *j, struct pt_charge *c);
    int (*transition)(struct pt_store *st, const struct pt__job *j, enum pt_state to,
                      const struct pt_charge_patch *p, const char *cause, const char *detail,
                      int64_t now);
    int (*patch)(struct pt_store *st, int64_t id, const struct pt_charge_patch *p, int64_t now);
    int (*reread)(struct pt_store *st, const struct pt__job *j);
    /* Raises its review flag ("sync"); PT_OK when it was raised already. */
    int (*review)(struct pt_store *st, const struct pt__job *j, const char *reason, int64_t now);
    /* Its send (pay, refund) and its query to the gateway
     * (pt__sync_exchange's verdict). */
    int (*send)(struct pt_sync *s, const struct pt__job *j, struct pt_gw_result *res);
    int (*query)(struct pt_sync *s, const struct pt__job *j, struct pt_gw_result *res);
    /* What a query's answer decides beyond the state machine (a resend, a
     * reverse, an end): its verdict, or UNDECIDED to apply the answer. */
    int (*decide)(struct pt_sync *s, struct pt_store *st, const struct pt__job *j, int sent,
                  const struct pt_gw_result *res, int64_t now);
    /* Records what became of its send (pt__sync_job_settle, or more). */
    int (*settle)(struct pt_sync *s, struct pt_store *st, const struct pt__job *j, int resend,
                  int sent, const struct pt_gw_result *res, int64_t now);
    /* What an answer records whatever it says (the gateway's number, a
     * code's URL). */
    void (*answer)(const struct pt__job *j, const struct pt_gw_result *r,
                   struct pt_charge_patch *p);
    /* 1, with the reason, when a success answer does not say it moved what
     * was asked. */
    int (*mismatch)(const struct pt__job *j, const struct pt_gw_result *r, char *reason,
                    size_t cap);
    int (*succeeded)(struct pt_store *st, const struct pt__job *j, const struct pt_charge_patch *p,
                     const char *detail, int64_t now);
    /* The gateway closed it; NULL: a close is a refusal. */
    int (*closed)(struct pt_store *st, const struct pt__job *j, struct pt_charge_patch *p,
                  const char *detail, int64_t now);
    /* When a PENDING one is asked again. */
    int64_t (*poll_at)(const struct pt_sync *s, const struct pt__job *j, int64_t now);
    /* NULL or: the latest a look at it may come (a code's deadline). */
    int64_t (*poll_cap)(const struct pt_sync *s, const struct pt__job *j, int64_t at, int64_t now);
    /* NULL or: how long a send is waited for before the next look (a
     * keyless gateway's refunds, SPEC 5a). */
    int64_t (*after_send)(const struct pt_sync *s, const struct pt__job *j, int64_t now,
                          int64_t next);

    /* The drain's walk (pt__sync_job_drain) and its runs (send_queued). */
    /* NULL or: a queued one ends its run here (a payment code goes alone). */
    int (*alone_in_run)(const struct pt__job *j);
    /* NULL or: a queued one is too old to be sent; expire() ends it
     * (inside the run's transaction). */
    int (*too_old)(const struct pt_sync *s, const struct pt__job *j, int64_t now);
    int (*expire)(struct pt_store *st, const struct pt__job *j, int64_t now);
    /* NULL or: before its turn in a run, PT_OK to send it, NOT_OURS (moved
     * by someone else) or PT_ECANCELED (its cancel came first). */
    int (*ready)(struct pt_store *st, const struct pt__job *j);
    /* NULL or: a due one whose gateway this pass skips. */
    int (*skipped)(struct pt_sync *s, struct pt_store *st, const struct pt__job *j,
                   struct pt_drain_stats *stats);
    /* NULL or: a due one that takes a path of its own, outside runs (a
     * keyless gateway's refund), and that path. */
    int (*own_path)(const struct pt__job *j);
    int (*walk_own)(struct pt_sync *s, struct pt_store *st, const struct pt__job *j,
                    struct pt_drain_stats *stats);
    /* A due UNKNOWN or PENDING one (resolve it, or carry out its cancel). */
    int (*due_resolve)(struct pt_sync *s, struct pt_store *st, const struct pt__job *j);
};

struct pt__job {
    const struct pt__job_kind *kind;
    void *obj;                      /* struct pt_charge, struct pt_refund */
    const struct pt_charge *charge; /* a refund's charge, for its requests (NULL: not needed) */
    /* What the engine reads of *obj, pointing into it (they follow its
     * re-reads). */
    int64_t id;
    const char *name; /* order_id, refund_id */
    const char *gateway;
    const enum pt_state *state;
    const int *attempts;
    const int *review;
    const int64_t *first_sent_at;
};

struct pt__job pt__sync_charge_job(struct pt_charge *c);
struct pt__job pt__sync_refund_job(struct pt_refund *r, const struct pt_charge *c);

/* sync_job.c.  Moves j by an answer (inside a transaction); `sending`: the
 * answer is to its send, not to a query or a close. */
int pt__sync_job_apply(struct pt_sync *s, struct pt_store *st, const struct pt__job *j, int sending,
                       const struct pt_gw_result *r, int64_t now);
/* Records what became of j's send (inside a transaction): the transport's
 * verdict `sent` and, for an answer, the adapter's result. */
int pt__sync_job_settle(struct pt_sync *s, struct pt_store *st, const struct pt__job *j, int resend,
                        int sent, const struct pt_gw_result *res, int64_t now);
/* Sends j (INIT, or UNKNOWN for a resend under the same key): PROCESSING
 * committed first, the outcome after; j's object is re-read. */
int pt__sync_job_send(struct pt_sync *s, struct pt_store *st, const struct pt__job *j);
/* The online send of a client's request (intake.c): PROCESSING (inside
 * the intake's transaction), and its outcome recorded, j re-read. */
int pt__sync_job_claim(struct pt_sync *s, struct pt_store *st, const struct pt__job *j,
                       int64_t now);
int pt__sync_job_settle_online(struct pt_sync *s, struct pt_store *st, const struct pt__job *j,
                               const struct pt_online_send *sent);
/* Raises review when j has been unresolved too long or too often. */
int pt__sync_job_check_limits(struct pt_sync *s, struct pt_store *st, const struct pt__job *j,
                              int64_t now);
/* UNKNOWN or PENDING: asks the gateway, never sends a new one (a resend
 * goes under the same key), and records the answer. */
int pt__sync_job_resolve(struct pt_sync *s, struct pt_store *st, const struct pt__job *j);
/* A PROCESSING one that is due: its send was interrupted. */
int pt__sync_job_recover(struct pt_sync *s, struct pt_store *st, const struct pt__job *j);
/* Sends the queued rows[0..n) of kind k (INIT, in id order) in runs: one
 * commit marks up to RUN_MAX PROCESSING, their requests go out one after
 * another, the next commit holds their outcomes and marks the next run.  A
 * gateway found unreachable is skipped for the rest of the pass. */
int pt__sync_job_send_queued(struct pt_sync *s, struct pt_store *st, const struct pt__job_kind *k,
                             void *rows, int n, int *skip, struct pt_drain_stats *stats);
/* One walk through kind k's due rows, by id: queued ones in runs,
 * interrupted sends recovered, the unresolved asked about. */
int pt__sync_job_drain(struct pt_sync *s, struct pt_store *st, const struct pt__job_kind *k,
                       int *skip, struct pt_drain_stats *stats);

/* sync.c: the charge engine's parts the others use - the striped charge
 * lock, the drain's proof of life, lane and wall time, the gateway's
 * configuration, metrics and reachability, backoff, one gateway call and
 * applying its outcome, the PROCESSING patch, the queued run. */
pthread_mutex_t *pt__sync_charge_lock(struct pt_sync *s, const char *order_id);
void pt__sync_mark_progress(struct pt_sync *s);
void pt__sync_drain_step(struct pt_sync *s);
int64_t pt__sync_now_ms(const struct pt_sync *s);
int pt__sync_wall_ms(const struct pt_sync *s, int64_t *ms);
int pt__sync_gw_index(const char *name);
const struct pt_gw_config *pt__sync_gw_cfg(const struct pt_sync *s, const char *name);
void pt__sync_count_sync(const char *gateway, enum pt_metric_sync what);
void pt__sync_set_reach(struct pt_sync *s, const char *gateway, int up);
int64_t pt__sync_backoff_ms(const struct pt_sync *s, int attempts);
void pt__sync_nonce(const struct pt_sync *s, char out[33]);
int pt__sync_finish(struct pt_store *st, int rc);
int pt__sync_commit_patch(struct pt_store *st, int64_t id, const struct pt_charge_patch *p,
                          int64_t now);
int pt__sync_call(struct pt_sync *s, enum pt_gw_op op, const struct pt_charge *c,
                  struct pt_gw_result *res);
int pt__sync_raise_review(struct pt_store *st, struct pt_charge *c, const char *reason,
                          const char *actor, int64_t now);
int pt__sync_apply(struct pt_sync *s, struct pt_store *st, struct pt_charge *c, enum pt_gw_op op,
                   const struct pt_gw_result *r, int64_t now);
struct pt_charge_patch pt__sync_processing_patch(const struct pt_sync *s, int64_t now, int sends);
void pt__sync_wake_to_wipe(struct pt_sync *s);

/* sync_refund.c: one refund request, its review, applying its outcome,
 * the keyless gateways' wait after a send, and the refunds' drain. */
int pt__sync_refund_call(struct pt_sync *s, enum pt_gw_refund_op op, const struct pt_charge *c,
                         const struct pt_refund *r, struct pt_gw_result *res);
int pt__sync_refund_raise_review(struct pt_store *st, struct pt_refund *r, const char *reason,
                                 int64_t now);
int pt__sync_refund_apply(struct pt_sync *s, struct pt_store *st, struct pt_refund *r,
                          enum pt_gw_refund_op op, const struct pt_gw_result *res, int64_t now);
int64_t pt__sync_after_send(const struct pt_sync *s, const struct pt_refund *r, int64_t now,
                            int64_t next);
int pt__sync_drain_refunds(struct pt_sync *s, struct pt_store *st, const int *skip,
                           struct pt_drain_stats *stats);

/* sync_keys.c: a certificate serial a gateway's message names that is not
 * yet trusted asks for a download (rate-limited). */
void pt__sync_learn_peer_key(struct pt_sync *s, const struct pt_gateway *gw,
                             const struct pt_gw_config *cfg, const struct pt_http_response *msg);

#endif
