/*
 * sync.c - the sync engine (see sync.h).
 *
 * Reading order: send_pay() is the heart (commit PROCESSING, send, classify),
 * resolve() handles UNKNOWN and PENDING charges by query, apply() maps an
 * adapter outcome onto the state machine, expire_code() ends a QR code or
 * payment page nobody paid in time, pt_sync_drain() walks the due charges,
 * pt_sync_notify() takes gateway notifications.
 */
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
};

static pthread_mutex_t *charge_lock(struct pt_sync *s, const char *order_id)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)order_id; *p; p++)
        h = (h ^ *p) * 16777619u;
    return &s->charge_mu[h % CHARGE_LOCKS];
}

/* Set while this thread runs pt_sync_drain (call() counts as its progress). */
static _Thread_local struct pt_sync *tl_drain;

static void mark_progress(struct pt_sync *s)
{
    const struct pt_platform *p = s->opt.platform;
    atomic_store(&s->drain_progress, p->mono_ms ? p->mono_ms(p->ctx) : 1);
}

static void drain_step(struct pt_sync *s)
{
    mark_progress(s);
    if (s->opt.between)
        s->opt.between(s->opt.ctx);
}

/* ---- small helpers ----------------------------------------------------------- */

static int64_t now_ms(const struct pt_sync *s)
{
    return s->opt.platform->now_ms(s->opt.platform->ctx);
}

/* The wall clock for a gateway (SPEC 17): PT_ECLOCK while it is not
 * trusted, and then nothing that carries a time leaves the device. */
static int wall_ms(const struct pt_sync *s, int64_t *ms)
{
    return pt_platform_wall(s->opt.platform, ms);
}

static int clock_trusted(const struct pt_sync *s)
{
    int64_t ms;
    return wall_ms(s, &ms) == PT_OK;
}

static int gw_index(const char *name)
{
    return pt_metric_gateway_index(name);
}

static const struct pt_gw_config *gw_cfg(const struct pt_sync *s, const char *name)
{
    int i = gw_index(name);
    return i < 0 ? NULL : s->opt.gw[i];
}

static void count_sync(const char *gateway, enum pt_metric_sync what)
{
    int i = gw_index(gateway);
    if (i >= 0)
        atomic_fetch_add(&pt_metrics.sync_attempts[i][what], 1);
}

static void set_reach(struct pt_sync *s, const char *gateway, int up)
{
    int i = gw_index(gateway);
    if (i < 0)
        return;
    atomic_store(&s->last_probe[i], now_ms(s));
    int before = atomic_exchange(&s->reach[i], up ? REACH_UP : REACH_DOWN);
    atomic_store(&pt_metrics.online[i], up);
    if (up && before == REACH_DOWN) {
        pt_log_info("gateway %s is reachable again: online", gateway);
        atomic_store(&s->came_back[i], 1);
        pt_sync_wake(s);
    } else if (!up && before != REACH_DOWN) {
        pt_log_warn("gateway %s cannot be reached: offline, charges will queue", gateway);
        /* The background drain probes a gateway that is down; it may be
         * asleep with nothing due (this send came from an HTTP thread). */
        pt_sync_wake(s);
    }
}

void pt_sync_wake(void *p)
{
    struct pt_sync *s = p;
    if (s->opt.wake)
        s->opt.wake(s->opt.ctx);
}

int pt_sync_reachable(void *p, const char *gateway)
{
    struct pt_sync *s = p;
    int i = gw_index(gateway);
    /* Without a trusted clock nothing can be sent: as good as offline. */
    return i >= 0 && s->opt.gw[i] && atomic_load(&s->reach[i]) != REACH_DOWN && clock_trusted(s);
}

int pt_sync_any_down(struct pt_sync *s)
{
    for (int i = 0; i < pt_gateway_count(); i++)
        if (s->opt.gw[i] && atomic_load(&s->reach[i]) == REACH_DOWN)
            return 1;
    return 0;
}

int pt_sync_online(void *p)
{
    struct pt_sync *s = p;
    int any = 0;
    for (int i = 0; i < pt_gateway_count(); i++) {
        if (!s->opt.gw[i])
            continue;
        any = 1;
        if (atomic_load(&s->reach[i]) == REACH_DOWN)
            return 0;
    }
    return any;
}

/* Exponential backoff with "equal jitter": half fixed, half random. */
static int64_t backoff_ms(const struct pt_sync *s, int attempts)
{
    const struct pt_config *cfg = s->opt.cfg;
    int64_t d = cfg->sync_backoff_base_ms;
    for (int i = 0; i < attempts && d < cfg->sync_backoff_max_ms; i++)
        d *= 2;
    if (d > cfg->sync_backoff_max_ms)
        d = cfg->sync_backoff_max_ms;
    uint32_t r = 0;
    s->opt.platform->random(s->opt.platform->ctx, &r, sizeof r);
    return d / 2 + (int64_t)(r % (uint32_t)(d / 2 + 1));
}

/* How soon to poll a charge that waits for the customer: quickly at first,
 * then less often (a quarter of its age, within the backoff bounds). */
static int64_t poll_ms(const struct pt_sync *s, const struct pt_charge *c, int64_t now)
{
    int64_t age = c->first_sent_at ? now - c->first_sent_at : 0;
    int64_t d = age / 4;
    if (d < s->opt.cfg->sync_backoff_base_ms)
        d = s->opt.cfg->sync_backoff_base_ms;
    if (d > s->opt.cfg->sync_backoff_max_ms)
        d = s->opt.cfg->sync_backoff_max_ms;
    return d;
}

static void nonce(const struct pt_sync *s, char out[33])
{
    unsigned char r[16];
    s->opt.platform->random(s->opt.platform->ctx, r, sizeof r);
    pt_hex_encode(r, sizeof r, out);
}

/* Commits the current transaction, or rolls back on an error code. */
static int finish(struct pt_store *st, int rc)
{
    if (rc == PT_OK || rc == PT_EEXIST || rc == PT_ESTATE)
        return pt_store_commit(st);
    pt_store_rollback(st);
    return rc;
}

/* Applies a patch (no state change) in a transaction of its own. */
static int commit_patch(struct pt_store *st, int64_t id, const struct pt_charge_patch *p,
                        int64_t now)
{
    int rc = pt_store_begin(st);
    return rc ? rc : finish(st, pt_store_charge_patch(st, id, p, now));
}

static void learn_peer_key(struct pt_sync *s, const struct pt_gateway *gw,
                           const struct pt_gw_config *cfg, const struct pt_http_response *msg);

/* ---- QR codes and payment pages expire (SPEC 18) -------------------------------- */

/* The lane time a code or page stops being payable: qr_timeout_s after its
 * first send (elapsed time, SPEC 17); 0 for a charge that shows none. */
static int64_t code_deadline(const struct pt_sync *s, const struct pt_charge *c)
{
    const struct pt_gw_method *m = pt_gateway_lookup(c->gateway, c->method);
    if (!m || !m->interactive || !c->first_sent_at)
        return 0;
    return c->first_sent_at + s->opt.cfg->qr_timeout_s * 1000;
}

/* A poll of a charge that shows a code is never later than the code's
 * deadline: its end is due then. */
static int64_t poll_by_deadline(const struct pt_sync *s, const struct pt_charge *c, int64_t at,
                                int64_t now)
{
    int64_t d = code_deadline(s, c);
    return d > now && d < at ? d : at;
}

/*
 * The expiry the create of a code or page carries (PT_GW_PAY of an
 * interactive method): qr_timeout_s, and the wall-clock time the code
 * stops.  That time must be the same on every repeat of the create (WeChat
 * answers a changed time_expire with an error), so it is the lane time of
 * the first send moved onto the wall clock by the distance between the two
 * clocks - taken as none within PT_CLOCK_STEP_MS, where they stay unless the
 * wall clock was stepped or lane time is still provisional (SPEC 17), so
 * that their jitter never moves it.
 */
static void set_expiry(const struct pt_sync *s, const struct pt_charge *c, struct pt_gw_env *env)
{
    const struct pt_gw_method *m = pt_gateway_lookup(c->gateway, c->method);
    if (!m || !m->interactive)
        return;
    int64_t lane = now_ms(s), apart = env->now_ms - lane;
    if (apart > -PT_CLOCK_STEP_MS && apart < PT_CLOCK_STEP_MS)
        apart = 0;
    env->expire_in_s = s->opt.cfg->qr_timeout_s;
    env->expire_at_ms =
        (c->first_sent_at ? c->first_sent_at : lane) + apart + env->expire_in_s * 1000;
}

/* ---- one request to a gateway -------------------------------------------------- */

/*
 * Builds and sends op for c.  Returns the transport's verdict (PT_OK with
 * *res filled from the adapter, PT_ENOTSENT, PT_ENOANSWER) or a build error.
 */
static int call(struct pt_sync *s, enum pt_gw_op op, const struct pt_charge *c,
                struct pt_gw_result *res)
{
    const struct pt_gateway *gw = pt_gateway_find(c->gateway);
    const struct pt_gw_config *cfg = gw_cfg(s, c->gateway);
    const struct pt_transport *t = s->opt.platform->transport;
    if (!gw || !cfg || !t)
        return PT_ECONFIG;
    char n[33];
    nonce(s, n);
    struct pt_gw_env env = {.nonce = n};
    if (wall_ms(s, &env.now_ms) != PT_OK)
        return PT_ECLOCK; /* every gateway's request carries the time: not sent */
    if (op == PT_GW_PAY)
        set_expiry(s, c, &env);
    struct pt_http_request req = {0};
    int rc = gw->build(cfg, op, c, &env, &req);
    if (rc)
        return rc;
    struct pt_http_response resp = {0};
    rc = t->send(t->ctx, c->gateway, &req, (int)s->opt.cfg->sync_request_timeout_ms, &resp);
    pt_http_request_free(&req);
    if (tl_drain == s)
        mark_progress(s);
    memset(res, 0, sizeof *res);
    if (rc == PT_OK) {
        set_reach(s, c->gateway, 1);
        learn_peer_key(s, gw, cfg, &resp);
        gw->parse(cfg, op, c, &resp, res);
        static const char *const names[] = {"pay", "query", "cancel", "close"};
        pt_log_debug("%s %s order=%s: HTTP %d -> %s %s", c->gateway, names[op], c->order_id,
                     resp.status, pt_outcome_name(res->outcome), res->code);
    } else if (rc == PT_ENOTSENT) {
        set_reach(s, c->gateway, 0);
    }
    pt_http_response_free(&resp);
    return rc;
}

/* ---- outcomes onto the state machine ----------------------------------------------- */

static int raise_review(struct pt_store *st, struct pt_charge *c, const char *reason,
                        const char *actor, int64_t now)
{
    if (c->review)
        return PT_OK;
    int rc = pt_charge_review(st, c, 1, reason, actor, now);
    return rc == PT_EEXIST ? PT_OK : rc;
}

/* 1 (with the reason) when a success answer does not report exactly the
 * charge's amount and currency; an answer that names none counts too. */
static int answer_mismatch(const struct pt_charge *c, const struct pt_gw_result *r, char *reason,
                           size_t cap)
{
    if (r->amount <= 0 || !r->currency[0])
        snprintf(reason, cap, "answer_without_amount: the gateway did not say what it captured");
    else if (r->amount != c->amount || strcmp(r->currency, c->currency) != 0)
        snprintf(reason, cap, "%s: gateway reports %lld %s, charged %lld %s",
                 r->amount != c->amount ? "amount_mismatch" : "currency_mismatch",
                 (long long)r->amount, r->currency, (long long)c->amount, c->currency);
    else
        return 0;
    return 1;
}

/* Moves c according to an adapter outcome.  Inside a transaction. */
static int apply(struct pt_sync *s, struct pt_store *st, struct pt_charge *c, enum pt_gw_op op,
                 const struct pt_gw_result *r, int64_t now)
{
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    if (r->trade_no[0])
        p.gateway_trade_no = r->trade_no;
    if (r->action_url[0])
        p.action_url = r->action_url;
    char detail[PT_SHORT_MAX + PT_MESSAGE_MAX + 8];
    snprintf(detail, sizeof detail, "%s%s%s", r->code, r->code[0] && r->message[0] ? ": " : "",
             r->message);
    int rc = PT_OK;
    switch (r->outcome) {
    case PT_OUTCOME_SUCCESS: {
        count_sync(c->gateway, PT_MS_SUCCESS);
        /* The money moved either way; if the gateway does not say it moved
         * exactly the amount and currency we asked for, fulfilment waits for
         * an operator (SPEC section 5: every answer is checked). */
        char reason[PT_MESSAGE_MAX];
        if (answer_mismatch(c, r, reason, sizeof reason) &&
            (rc = raise_review(st, c, reason, "sync", now)))
            break;
        rc = pt_charge_gateway_succeeded(st, c, &p, "sync", detail, now);
        break;
    }
    case PT_OUTCOME_DECLINED:
        count_sync(c->gateway, PT_MS_DECLINED);
        p.error_code = r->code[0] ? r->code : "declined";
        p.error_message = r->message[0] ? r->message : "declined by the gateway";
        rc = pt_charge_transition(st, c, PT_STATE_FAILED, &p, "gateway_declined", "sync", detail,
                                  now);
        break;
    case PT_OUTCOME_PENDING:
        count_sync(c->gateway, PT_MS_PENDING);
        p.next_attempt_at = poll_by_deadline(s, c, now + poll_ms(s, c, now), now);
        rc = pt_charge_transition(st, c, PT_STATE_PENDING, &p, "gateway_pending", "sync", detail,
                                  now);
        if (rc == PT_EEXIST) /* still waiting for the customer: poll later */
            rc = pt_store_charge_patch(st, c->id, &p, now);
        break;
    case PT_OUTCOME_CANCELED:
        count_sync(c->gateway, PT_MS_CANCELED);
        /* PROCESSING -> CANCELED is not a transition: a pay answered
         * "closed" leaves the charge UNKNOWN and the next query settles it. */
        if (c->state == PT_STATE_PROCESSING) {
            p.next_attempt_at = now;
            rc = pt_charge_transition(st, c, PT_STATE_UNKNOWN, &p, "gateway_closed", "sync", detail,
                                      now);
        } else {
            rc = pt_charge_transition(st, c, PT_STATE_CANCELED, &p, "gateway_canceled", "sync",
                                      detail, now);
        }
        break;
    case PT_OUTCOME_NOT_FOUND:
    case PT_OUTCOME_AMBIGUOUS:
        count_sync(c->gateway,
                   r->outcome == PT_OUTCOME_NOT_FOUND ? PT_MS_NOT_FOUND : PT_MS_AMBIGUOUS);
        if (op == PT_GW_PAY)
            p.attempts_add = 1; /* an ambiguous send counts toward max_attempts */
        p.next_attempt_at =
            poll_by_deadline(s, c, now + backoff_ms(s, c->attempts + p.attempts_add), now);
        if (c->state == PT_STATE_PROCESSING)
            rc = pt_charge_transition(st, c, PT_STATE_UNKNOWN, &p, "gateway_ambiguous", "sync",
                                      detail, now);
        else
            rc = pt_store_charge_patch(st, c->id, &p, now);
        if (rc == PT_OK)
            rc = pt_store_charge_get_by_id(st, c->id, c);
        if (rc == PT_OK && r->review)
            rc = raise_review(st, c, r->code[0] ? r->code : "gateway_review", "sync", now);
        break;
    }
    return rc;
}

/* ---- sending ------------------------------------------------------------------------ */

/*
 * Records what became of a pay request (inside a transaction): the
 * transport's verdict `sent` and, for an answer, the adapter's result.
 */
static int settle_outcome(struct pt_sync *s, struct pt_store *st, struct pt_charge *c, int resend,
                          int sent, const struct pt_gw_result *res, int64_t now);

/*
 * A charge whose cancel was requested while it was on its way has its
 * outcome (SPEC 18): not sent - it is canceled here, nothing can charge it;
 * still open at the gateway (PENDING, UNKNOWN) - due at once, and the
 * drain closes or reverses it, now that nothing of ours is on its way;
 * final - nothing to do (charges.c answered the waiting cancels).
 */
static int carry_out_cancel(struct pt_store *st, struct pt_charge *c, int64_t now)
{
    if (!c->cancel_requested || pt_state_is_final(c->state))
        return PT_OK;
    if (c->state == PT_STATE_INIT)
        return pt_charge_transition(st, c, PT_STATE_CANCELED, NULL, "canceled_by_client", "sync",
                                    "canceled before it was sent", now);
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    p.next_attempt_at = now;
    return pt_store_charge_patch(st, c->id, &p, now);
}

static int settle(struct pt_sync *s, struct pt_store *st, struct pt_charge *c, int resend, int sent,
                  const struct pt_gw_result *res, int64_t now)
{
    int rc = settle_outcome(s, st, c, resend, sent, res, now);
    if (rc == PT_OK || rc == PT_EEXIST) {
        int grc = pt_store_charge_get_by_id(st, c->id, c);
        if (grc == PT_OK && c->cancel_requested)
            grc = carry_out_cancel(st, c, now);
        if (grc)
            rc = grc;
    }
    return rc;
}

static int settle_outcome(struct pt_sync *s, struct pt_store *st, struct pt_charge *c, int resend,
                          int sent, const struct pt_gw_result *res, int64_t now)
{
    struct pt_charge_patch q = PT_CHARGE_PATCH_NONE;
    int rc;
    if (sent == PT_ECANCELED) {
        /* Marked in a run, its cancel requested before its turn came: it
         * never left (carry_out_cancel ends it). */
        rc = pt_charge_transition(st, c, PT_STATE_INIT, &q, "not_sent", "sync",
                                  "its cancel was requested before it was sent", now);
    } else if (NOT_SENT(sent)) {
        count_sync(c->gateway, PT_MS_NOT_SENT);
        q.next_attempt_at = now + s->opt.cfg->sync_interval_s * 1000;
        /* Provably not sent this time.  A first send goes back to the queue;
         * a resend does not, because an earlier attempt may have arrived. */
        rc = pt_charge_transition(
            st, c, resend ? PT_STATE_UNKNOWN : PT_STATE_INIT, &q, "not_sent", "sync",
            sent == PT_ECLOCK ? "the wall clock is not trusted yet" : "gateway unreachable", now);
    } else if (sent == PT_ENOANSWER) {
        count_sync(c->gateway, PT_MS_AMBIGUOUS);
        q.attempts_add = 1;
        q.next_attempt_at = now + backoff_ms(s, c->attempts + 1);
        rc = pt_charge_transition(st, c, PT_STATE_UNKNOWN, &q, "no_answer", "sync",
                                  "sent, no answer (timeout or connection lost)", now);
    } else if (sent == PT_OK) {
        rc = apply(s, st, c, PT_GW_PAY, res, now);
    } else {
        /* The request could not even be built (a key that does not sign:
         * the log names the key and its file; an amount the gateway cannot
         * represent, queued before the intake refused such amounts):
         * nothing left the device. */
        int units = sent == PT_ERANGE;
        char why[PT_GW_BUILD_ERROR_MAX];
        pt_log_error("charge %s: cannot build the %s request: %s", c->order_id, c->gateway,
                     pt_gw_build_error(gw_cfg(s, c->gateway), sent, why, sizeof why));
        q.next_attempt_at = now + s->opt.cfg->sync_backoff_max_ms;
        q.error_code = units ? "amount_not_representable" : "gateway_config";
        q.error_message = units ? "the gateway cannot represent this amount in its own units"
                                : "the gateway request could not be built; check the configuration";
        rc = pt_charge_transition(st, c, resend ? PT_STATE_UNKNOWN : PT_STATE_INIT, &q, "not_sent",
                                  "sync", pt_strerror(sent), now);
        if (rc == PT_OK)
            rc = raise_review(st, c, q.error_code, "sync", now);
    }
    return rc;
}

/* The PROCESSING patch: sent now, and not picked up by anyone else until
 * `sends` requests of request_timeout_ms each must be over. */
static struct pt_charge_patch processing_patch(const struct pt_sync *s, int64_t now, int sends)
{
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    p.first_sent_at = now;
    p.next_attempt_at = now + sends * s->opt.cfg->sync_request_timeout_ms + IN_FLIGHT_MARGIN_MS;
    return p;
}

/*
 * Sends the pay request for c (INIT, or UNKNOWN for a resend).  Commits
 * PROCESSING first; commits the outcome after.  *c is re-read.
 */
static int send_pay(struct pt_sync *s, struct pt_store *st, struct pt_charge *c)
{
    if (c->cancel_requested)
        return PT_OK; /* never sent again (SPEC 18); the store refuses it too */
    int64_t now = now_ms(s);
    int resend = c->state != PT_STATE_INIT;
    int rc = pt_store_begin(st);
    if (rc)
        return rc;
    struct pt_charge_patch p = processing_patch(s, now, 1);
    rc = pt_charge_transition(st, c, PT_STATE_PROCESSING, &p, resend ? "resend" : "send", "sync",
                              NULL, now);
    if (rc) /* someone else moved it (another thread, a notification): not ours */
        return finish(st, rc);
    if ((rc = pt_store_commit(st)))
        return rc;

    struct pt_gw_result res;
    int sent = call(s, PT_GW_PAY, c, &res);
    now = now_ms(s);
    if ((rc = pt_store_begin(st)))
        return rc;
    rc = finish(st, settle(s, st, c, resend, sent, &res, now));
    if (rc == PT_OK)
        rc = pt_store_charge_get_by_id(st, c->id, c);
    return rc;
}

/* True when a queued charge is older than offline.max_age_s allows. */
static int offline_expired(const struct pt_sync *s, const struct pt_charge *c, int64_t now)
{
    int64_t max_age = pt_config_offline_max_age(s->opt.cfg, c->gateway, c->method);
    return max_age > 0 && now - c->created_at > max_age * 1000;
}

static struct pt_charge_patch expired_patch(void)
{
    struct pt_charge_patch e = PT_CHARGE_PATCH_NONE;
    e.error_code = "offline_expired";
    e.error_message = "the charge waited offline longer than offline.max_age_s allows";
    return e;
}

/* Fails an expired queued charge in its own transaction. */
static int expire_now(struct pt_sync *s, struct pt_store *st, struct pt_charge *c)
{
    int64_t now = now_ms(s);
    int rc = pt_store_begin(st);
    if (rc)
        return rc;
    struct pt_charge_patch e = expired_patch();
    rc = pt_charge_transition(st, c, PT_STATE_FAILED, &e, "offline_expired", "sync", NULL, now);
    return finish(st, rc);
}

/*
 * The queue of each gateway that gets no requests this pass (down, or the
 * clock not trusted yet): only its expired charges are read, found by age
 * (the store's index of the queue), never the rest of it - a lane waiting
 * out an outage with 50 000 queued must not read them every pass (issue
 * 38).  Each is failed, audited and announced as expire_now() always did.
 * *next_expiry: the lane time the next queued charge of those gateways
 * expires, 0 when none will.
 */
static int expire_skipped(struct pt_sync *s, struct pt_store *st, const int *skip,
                          struct pt_charge *batch, struct pt_drain_stats *stats,
                          int64_t *next_expiry)
{
    const struct pt_config *cfg = s->opt.cfg;
    int rc = PT_OK;
    *next_expiry = 0;
    for (int k = 0; k < cfg->n_offline_ages && rc == PT_OK; k++) {
        const char *gateway = cfg->offline_ages[k].gateway, *method = cfg->offline_ages[k].method;
        /* As offline_expired() reads it (the first entry for the pair). */
        int64_t max_age = pt_config_offline_max_age(cfg, gateway, method);
        int g = gw_index(gateway);
        if (g < 0 || !skip[g] || max_age <= 0)
            continue;
        int64_t cursor = 0;
        for (;;) {
            drain_step(s);
            int n = 0;
            int64_t now = now_ms(s);
            /* Expired: now - created_at > max_age, i.e. created before
             * now - max_age. */
            if ((rc = pt_store_charges_queued_before(st, gateway, method, now - max_age * 1000,
                                                     cursor, DRAIN_BATCH, batch, &n)) ||
                n == 0)
                break;
            for (int i = 0; i < n && rc == PT_OK; i++) {
                cursor = batch[i].id;
                if (offline_expired(s, &batch[i], now_ms(s))) {
                    rc = expire_now(s, st, &batch[i]);
                    stats->expired++;
                }
            }
            if (rc)
                break;
        }
        int64_t oldest = 0;
        if (rc == PT_OK &&
            (rc = pt_store_charges_oldest_queued(st, gateway, method, &oldest)) == PT_ENOTFOUND)
            rc = PT_OK;
        if (rc == PT_OK && oldest > 0) {
            int64_t at = oldest + max_age * 1000 + 1; /* the first ms it is older than max_age */
            if (!*next_expiry || at < *next_expiry)
                *next_expiry = at;
        }
    }
    return rc;
}

/*
 * Sends the queued charges cs[0..n) (INIT, in id order) in runs of up to
 * RUN_MAX: one commit marks a run PROCESSING (or FAILED, expired), its
 * requests go out one after another, and the next commit holds their
 * outcomes and marks the next run - one durable commit per run, where one
 * charge at a time took one per charge.  Every request still leaves only
 * after its PROCESSING is durable.  A crash while a run is out leaves its
 * charges PROCESSING: after the restart each is an interrupted send,
 * queried, and the ones the gateway never saw are sent again under the same
 * key (the gateway's idempotency: never two captures).
 *
 * Except a charge paid with a customer's payment code: it is marked alone,
 * just before its request leaves.  A payment code in doubt past
 * barcode_timeout_s is reversed, not sent again, so one marked in a run but
 * never sent would be a sale lost to a crash (restart_mid_drain.sh); alone,
 * only the one on its way can be in doubt, and the rest are still INIT.  A
 * charge of a gateway found unreachable earlier in its run is provably not
 * sent and goes back to the queue.
 */
static int send_queued(struct pt_sync *s, struct pt_store *st, struct pt_charge *cs, int n,
                       int *skip, struct pt_drain_stats *stats)
{
    struct pt_gw_result *res = malloc(sizeof *res * RUN_MAX);
    if (!res)
        return PT_ENOMEM;
    int armed[RUN_MAX], verdict[RUN_MAX];
    int rc = PT_OK, i = 0, out = 0; /* out: the last run, its outcomes not committed */
    while (rc == PT_OK && (i < n || out > 0)) {
        int64_t now = now_ms(s);
        if ((rc = pt_store_begin(st)))
            break;
        for (int j = 0; j < out && rc == PT_OK; j++) {
            if (verdict[j] == NOT_OURS)
                continue;
            rc = settle(s, st, &cs[armed[j]], 0, verdict[j], &res[j], now);
            if (rc == PT_EEXIST || rc == PT_ESTATE)
                rc = PT_OK;
        }
        out = 0;
        int alone = 0; /* a payment-code charge was marked: the run ends */
        /* The rows this run may arm (another lane of a shared store may be
         * arming some right now: passed over, not waited for). */
        int64_t ids[RUN_MAX];
        unsigned char taken[RUN_MAX];
        int first = i, span = n - i < RUN_MAX ? n - i : RUN_MAX;
        for (int j = 0; j < span; j++)
            ids[j] = cs[i + j].id;
        if (rc == PT_OK && span > 0)
            rc = pt_store_charges_claim(st, ids, span, taken);
        for (; rc == PT_OK && i < n && out < RUN_MAX && !alone; i++) {
            struct pt_charge *c = &cs[i];
            if (i - first < span && !taken[i - first])
                continue; /* another lane's now */
            const struct pt_gw_method *m = pt_gateway_lookup(c->gateway, c->method);
            if (m && m->payment_code && out > 0)
                break; /* it goes in a run of its own, next */
            if (offline_expired(s, c, now)) {
                struct pt_charge_patch e = expired_patch();
                rc = pt_charge_transition(st, c, PT_STATE_FAILED, &e, "offline_expired", "sync",
                                          NULL, now);
                stats->expired++;
            } else if (!skip[gw_index(c->gateway)]) {
                /* Not picked up elsewhere until the sends before it and its
                 * own must be over. */
                struct pt_charge_patch p = processing_patch(s, now, out + 1);
                rc =
                    pt_charge_transition(st, c, PT_STATE_PROCESSING, &p, "send", "sync", NULL, now);
                if (rc == PT_OK) {
                    armed[out++] = i;
                    alone = m && m->payment_code;
                }
            }
            if (rc == PT_EEXIST || rc == PT_ESTATE)
                rc = PT_OK; /* someone else moved it: not ours to send */
        }
        if ((rc = finish(st, rc)))
            break;
        for (int j = 0; j < out; j++) {
            struct pt_charge *c = &cs[armed[j]];
            assert(armed[j] < n); /* claimed from this run, in order */
            if (skip[gw_index(c->gateway)]) {
                verdict[j] = PT_ENOTSENT; /* its gateway refused one before it */
                stats->not_sent++;
                continue;
            }
            /* Moved while it waited for its turn in the run (a client's
             * cancel finds no trade for a charge not sent yet and ends it):
             * it is not sent, and its new state is not ours to settle. */
            struct pt_charge cur;
            int grc = pt_store_charge_get_by_id(st, c->id, &cur);
            if (grc != PT_OK || cur.state != PT_STATE_PROCESSING) {
                verdict[j] = NOT_OURS;
                continue;
            }
            if (cur.cancel_requested) {
                verdict[j] = PT_ECANCELED; /* canceled before its turn: not sent */
                *c = cur;
                continue;
            }
            verdict[j] = call(s, PT_GW_PAY, c, &res[j]);
            if (NOT_SENT(verdict[j])) {
                skip[gw_index(c->gateway)] = 1;
                stats->not_sent++;
            } else {
                stats->sent++;
            }
        }
    }
    free(res);
    return rc;
}

/* Asks the gateway to cancel/close/reverse c; commits the outcome. */
static int send_cancel(struct pt_sync *s, struct pt_store *st, struct pt_charge *c, const char *why)
{
    struct pt_gw_result res;
    int sent = call(s, PT_GW_CANCEL, c, &res);
    int64_t now = now_ms(s);
    if (sent == PT_EUNSUPPORTED)
        return sent;
    int rc = pt_store_begin(st);
    if (rc)
        return rc;
    if (sent == PT_OK) {
        if (res.outcome == PT_OUTCOME_CANCELED || res.outcome == PT_OUTCOME_NOT_FOUND) {
            /* Closed at the gateway, or it never had the order: either way no
             * money can move for it any more. */
            struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
            if (res.trade_no[0])
                p.gateway_trade_no = res.trade_no;
            count_sync(c->gateway, PT_MS_CANCELED);
            if (c->state == PT_STATE_PROCESSING)
                rc = pt_charge_transition(st, c, PT_STATE_UNKNOWN, &p, why, "sync", NULL, now);
            if (rc == PT_OK || rc == PT_EEXIST)
                rc = pt_charge_transition(st, c, PT_STATE_CANCELED, &p, why, "sync", res.code, now);
        } else {
            rc = apply(s, st, c, PT_GW_CANCEL, &res, now);
        }
    } else {
        struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
        p.next_attempt_at = now + backoff_ms(s, c->attempts);
        rc = pt_store_charge_patch(st, c->id, &p, now);
    }
    rc = finish(st, rc);
    if (rc == PT_OK)
        rc = pt_store_charge_get_by_id(st, c->id, c);
    return rc;
}

/* ---- resolving UNKNOWN and PENDING --------------------------------------------------- */

static int resend_allowed(const struct pt_sync *s, const struct pt_charge *c, int64_t now)
{
    const struct pt_gateway *gw = pt_gateway_find(c->gateway);
    int64_t window_ms = gw ? gw->resend_window_s * 1000 : 0;
    /* A payment-code pay is keyed by out_trade_no and may be repeated
     * while the customer's code is still valid. */
    const struct pt_gw_config *cfg = gw_cfg(s, c->gateway);
    const struct pt_gw_method *m = pt_gateway_method(gw, c->method);
    if (m && m->payment_code && cfg && cfg->barcode_timeout_s > 0)
        window_ms = (int64_t)cfg->barcode_timeout_s * 1000;
    return window_ms > 0 && c->first_sent_at && now - c->first_sent_at < window_ms;
}

static int barcode_expired(const struct pt_sync *s, const struct pt_charge *c, int64_t now)
{
    /* The customer's code is no longer valid: an unpaid or unknown order
     * is reversed so it cannot complete behind our back. */
    const struct pt_gw_config *cfg = gw_cfg(s, c->gateway);
    const struct pt_gw_method *m = pt_gateway_lookup(c->gateway, c->method);
    return m && m->payment_code && cfg && cfg->barcode_timeout_s > 0 && c->first_sent_at &&
           now - c->first_sent_at >= (int64_t)cfg->barcode_timeout_s * 1000;
}

/* Raises review when the charge has been unresolved too long or too often. */
static int check_limits(struct pt_sync *s, struct pt_store *st, struct pt_charge *c, int64_t now)
{
    if (c->review || pt_state_is_final(c->state))
        return PT_OK;
    const char *reason = NULL;
    if (c->attempts >= s->opt.cfg->sync_max_attempts)
        reason = "max_attempts";
    else if (c->first_sent_at &&
             now - c->first_sent_at >= s->opt.cfg->sync_resolve_timeout_s * 1000)
        reason = "resolve_timeout";
    if (!reason)
        return PT_OK;
    int rc = pt_store_begin(st);
    if (rc)
        return rc;
    rc = raise_review(st, c, reason, "sync", now);
    return finish(st, rc);
}

static int resolve_locked(struct pt_sync *s, struct pt_store *st, struct pt_charge *c);

/* resolve_locked() with the charge's gateway lock held, on the charge as
 * committed once it is (another thread's close may have ended it). */
static int resolve(struct pt_sync *s, struct pt_store *st, struct pt_charge *c)
{
    pthread_mutex_t *mu = charge_lock(s, c->order_id);
    pthread_mutex_lock(mu);
    int rc = pt_store_charge_get_by_id(st, c->id, c);
    if (rc == PT_OK && !pt_state_is_final(c->state) && c->state != PT_STATE_INIT)
        rc = resolve_locked(s, st, c);
    pthread_mutex_unlock(mu);
    return rc;
}

static int expire_code(struct pt_sync *s, struct pt_store *st, struct pt_charge *c);

static int resolve_locked(struct pt_sync *s, struct pt_store *st, struct pt_charge *c)
{
    int64_t deadline = code_deadline(s, c);
    if (deadline && now_ms(s) >= deadline &&
        (c->state == PT_STATE_PENDING || c->state == PT_STATE_UNKNOWN))
        return expire_code(s, st, c);
    struct pt_gw_result res;
    int sent = call(s, PT_GW_QUERY, c, &res);
    int64_t now = now_ms(s);
    int rc;
    if (sent == PT_OK && res.outcome == PT_OUTCOME_NOT_FOUND && c->state == PT_STATE_UNKNOWN) {
        /* The gateway has no such order: our send never arrived. */
        count_sync(c->gateway, PT_MS_NOT_FOUND);
        if (resend_allowed(s, c, now) && c->attempts < s->opt.cfg->sync_max_attempts) {
            pt_log_info("charge %s: gateway has no record, resending with the same key",
                        c->order_id);
            rc = send_pay(s, st, c);
            return rc ? rc : check_limits(s, st, c, now_ms(s));
        }
        /* The first request may still be on its way in (a gateway slower
         * than our timeout): "not found" only means "never created" once it
         * cannot arrive any more. */
        int64_t grace = 3 * s->opt.cfg->sync_request_timeout_ms;
        if (barcode_expired(s, c, now) && now - c->first_sent_at >= grace) {
            /* The customer's code is no longer valid, so a resend cannot
             * pay; reverse the order number (alipay.trade.cancel) so a late
             * copy of the first request cannot either, and end it. */
            pt_log_info("charge %s: gateway has no record after barcode_timeout_s, reversing",
                        c->order_id);
            return send_cancel(s, st, c, "barcode_timeout");
        }
        const struct pt_gw_method *m = pt_gateway_lookup(c->gateway, c->method);
        if (m && m->interactive && c->first_sent_at && now - c->first_sent_at >= grace) {
            /* No code or page was ever issued, so nobody can pay it. */
            if ((rc = pt_store_begin(st)))
                return rc;
            struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
            p.error_code = "not_created";
            p.error_message = "the gateway never created this order";
            rc = pt_charge_transition(st, c, PT_STATE_FAILED, &p, "gateway_not_found", "sync", NULL,
                                      now);
            return finish(st, rc);
        }
    }
    if (sent == PT_OK && (res.outcome == PT_OUTCOME_PENDING || c->state == PT_STATE_PENDING) &&
        res.outcome != PT_OUTCOME_SUCCESS && res.outcome != PT_OUTCOME_DECLINED &&
        res.outcome != PT_OUTCOME_CANCELED && barcode_expired(s, c, now)) {
        /* Still WAIT_BUYER_PAY (or unresolved) after the auth code expired:
         * reverse it so it cannot complete behind our back. */
        pt_log_info("charge %s: unpaid after barcode_timeout_s, canceling", c->order_id);
        return send_cancel(s, st, c, "barcode_timeout");
    }
    if ((rc = pt_store_begin(st)))
        return rc;
    if (sent == PT_OK) {
        if (res.outcome == PT_OUTCOME_NOT_FOUND) {
            /* A definite answer, not an ambiguous send: it does not count
             * toward max_attempts (resolve_timeout_s still ends the wait). */
            struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
            p.next_attempt_at = poll_by_deadline(s, c, now + backoff_ms(s, c->attempts + 1), now);
            rc = pt_store_charge_patch(st, c->id, &p, now);
            if (rc == PT_OK)
                rc = pt_store_charge_get_by_id(st, c->id, c);
        } else {
            rc = apply(s, st, c, PT_GW_QUERY, &res, now);
        }
    } else {
        struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
        p.next_attempt_at = NOT_SENT(sent) ? now + s->opt.cfg->sync_interval_s * 1000
                                           : now + backoff_ms(s, c->attempts);
        p.next_attempt_at = poll_by_deadline(s, c, p.next_attempt_at, now);
        count_sync(c->gateway, NOT_SENT(sent) ? PT_MS_NOT_SENT : PT_MS_AMBIGUOUS);
        rc = pt_store_charge_patch(st, c->id, &p, now);
    }
    rc = finish(st, rc);
    if (rc == PT_OK)
        rc = pt_store_charge_get_by_id(st, c->id, c);
    if (rc == PT_OK)
        rc = check_limits(s, st, c, now);
    return rc;
}

/* ---- a code nobody paid in time (SPEC 18) ------------------------------------------ */

/* Ends c, PENDING or UNKNOWN, CANCELED with qr_expired: once (a conditional
 * transition), with its charge.canceled.  Inside a transaction. */
static int end_expired(struct pt_store *st, struct pt_charge *c, const struct pt_gw_result *res,
                       const char *detail, int64_t now)
{
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    if (res->trade_no[0])
        p.gateway_trade_no = res->trade_no;
    p.error_code = "qr_expired";
    p.error_message = "the code expired unpaid after qr_timeout_s";
    count_sync(c->gateway, PT_MS_CANCELED);
    return pt_charge_transition(st, c, PT_STATE_CANCELED, &p, "qr_expired", "sync", detail, now);
}

/*
 * What a gateway's answer about a code past its deadline means: 1 when
 * nobody can pay it any more.  Closed (by us, or the gateway's own expiry),
 * or never created - once a create still on its way could no longer arrive
 * (3 request timeouts after the send, as for "not created").  Still waiting
 * for the customer only counts where the expiry the create carried is what
 * stops the code (by_expiry: no close was sent), and not while someone is
 * in the middle of paying.
 */
static int unpayable(const struct pt_sync *s, const struct pt_charge *c,
                     const struct pt_gw_result *r, int by_expiry, int64_t now)
{
    if (r->outcome == PT_OUTCOME_CANCELED)
        return 1;
    if (r->outcome == PT_OUTCOME_NOT_FOUND)
        return now - c->first_sent_at >= 3 * s->opt.cfg->sync_request_timeout_ms;
    return by_expiry && r->outcome == PT_OUTCOME_PENDING && !r->paying;
}

/* Comes back to c at `at` (its expiry not settled yet); commits. */
static int expire_later(struct pt_sync *s, struct pt_store *st, struct pt_charge *c, int64_t at,
                        int64_t now)
{
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    p.next_attempt_at = at;
    int rc = commit_patch(st, c->id, &p, now);
    if (rc == PT_OK)
        rc = pt_store_charge_get_by_id(st, c->id, c);
    return rc ? rc : check_limits(s, st, c, now);
}

/* Ends c by its expiry in a transaction of its own. */
static int commit_expired(struct pt_store *st, struct pt_charge *c, const struct pt_gw_result *res,
                          const char *how, int64_t now)
{
    pt_log_info("charge %s: its code expired unpaid (%s)", c->order_id, how);
    int rc = pt_store_begin(st);
    return rc ? rc : finish(st, end_expired(st, c, res, how, now));
}

/*
 * After the deadline, a query says what became of the code: nobody can pay
 * it (ended by its expiry), it was paid - or refused - meanwhile (that
 * outcome wins), or it cannot be told yet (asked again later).
 */
static int confirm_expired(struct pt_sync *s, struct pt_store *st, struct pt_charge *c,
                           int by_expiry)
{
    struct pt_gw_result res;
    int sent = call(s, PT_GW_QUERY, c, &res), rc;
    int64_t now = now_ms(s);
    if (sent == PT_OK && unpayable(s, c, &res, by_expiry, now))
        return commit_expired(
            st, c, &res, by_expiry ? "expiry confirmed by query" : "closed, confirmed by query",
            now);
    if (sent == PT_OK &&
        (res.outcome == PT_OUTCOME_SUCCESS || res.outcome == PT_OUTCOME_DECLINED)) {
        if ((rc = pt_store_begin(st)))
            return rc;
        return finish(st, apply(s, st, c, PT_GW_QUERY, &res, now));
    }
    count_sync(c->gateway, NOT_SENT(sent) ? PT_MS_NOT_SENT : PT_MS_AMBIGUOUS);
    int64_t wait = NOT_SENT(sent) ? s->opt.cfg->sync_interval_s * 1000 : backoff_ms(s, c->attempts);
    return expire_later(s, st, c, now + wait, now);
}

/*
 * A code or page past its deadline, its charge's lock held.  Closed at the
 * gateway where a close is taken (alipay.trade.close, WeChat's close: never
 * for a paid order, so a payment that raced it is not reversed); where it
 * is not - 2C2P has none, WeChat refuses one for 5 minutes - the expiry the
 * create carried stops the code, and a query confirms it once that has
 * surely passed (a request timeout after it, so that a payment the gateway
 * took just before shows).  A close refused or unanswered is followed by
 * the query at once: a payment found there wins.
 */
static int expire_code(struct pt_sync *s, struct pt_store *st, struct pt_charge *c)
{
    const struct pt_gateway *gw = pt_gateway_find(c->gateway);
    struct pt_gw_result res;
    int closed = PT_EUNSUPPORTED;
    if (gw && now_ms(s) - c->first_sent_at >= gw->close_min_age_s * 1000)
        closed = call(s, PT_GW_CLOSE, c, &res);
    int64_t now = now_ms(s);
    if (closed == PT_OK && unpayable(s, c, &res, 0, now))
        return commit_expired(st, c, &res, "closed at the gateway", now);
    int by_expiry = closed == PT_EUNSUPPORTED;
    int64_t sure = code_deadline(s, c) + s->opt.cfg->sync_request_timeout_ms;
    if (by_expiry && now < sure)
        return expire_later(s, st, c, sure, now);
    if (NOT_SENT(closed))
        return expire_later(s, st, c, now + s->opt.cfg->sync_interval_s * 1000, now);
    return confirm_expired(s, st, c, by_expiry);
}

/* A PROCESSING charge that is due was being sent when the process died (or
 * its sender gave up): whether it left is unknown. */
static int recover_processing(struct pt_sync *s, struct pt_store *st, struct pt_charge *c)
{
    int64_t now = now_ms(s);
    int rc = pt_store_begin(st);
    if (rc)
        return rc;
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    p.next_attempt_at = now;
    p.attempts_add = 1;
    rc = pt_charge_transition(st, c, PT_STATE_UNKNOWN, &p, "interrupted_send", "sync",
                              "the send was interrupted (restart or timeout)", now);
    return finish(st, rc);
}

static int drain_refunds(struct pt_sync *s, struct pt_store *st, const int *skip,
                         struct pt_drain_stats *stats);
static int64_t after_send(const struct pt_sync *s, const struct pt_refund *r, int64_t now,
                          int64_t next);
static int refund_call(struct pt_sync *s, enum pt_gw_refund_op op, const struct pt_charge *c,
                       const struct pt_refund *r, struct pt_gw_result *res);
static int refund_apply(struct pt_sync *s, struct pt_store *st, struct pt_refund *r,
                        enum pt_gw_refund_op op, const struct pt_gw_result *res, int64_t now);
static int refund_raise_review(struct pt_store *st, struct pt_refund *r, const char *reason,
                               int64_t now);

/* ---- public entry points ---------------------------------------------------------------- */

int pt_sync_new(const struct pt_sync_options *opt, struct pt_sync **out)
{
    struct pt_sync *s = calloc(1, sizeof *s);
    if (!s)
        return PT_ENOMEM;
    s->opt = *opt;
    pthread_mutex_init(&s->keys_mu, NULL);
    pthread_mutexattr_t ra;
    pthread_mutexattr_init(&ra);
    pthread_mutexattr_settype(&ra, PTHREAD_MUTEX_RECURSIVE);
    for (int i = 0; i < CHARGE_LOCKS; i++)
        pthread_mutex_init(&s->charge_mu[i], &ra);
    pthread_mutexattr_destroy(&ra);
    pthread_mutex_init(&s->trial_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->trial_cv, &ca);
    pthread_condattr_destroy(&ca);
    for (int i = 0; i < pt_gateway_count(); i++)
        atomic_store(&pt_metrics.online[i], opt->gw[i] ? 1 : 0);
    *out = s;
    return PT_OK;
}

void pt_sync_destroy(struct pt_sync *s)
{
    if (!s)
        return;
    pthread_mutex_destroy(&s->keys_mu);
    for (int i = 0; i < CHARGE_LOCKS; i++)
        pthread_mutex_destroy(&s->charge_mu[i]);
    pthread_cond_destroy(&s->trial_cv);
    pthread_mutex_destroy(&s->trial_mu);
    free(s);
}

struct pt_online_ops pt_sync_online_ops(struct pt_sync *s)
{
    return (struct pt_online_ops){.reachable = pt_sync_reachable,
                                  .probe = pt_sync_probe_one,
                                  .try_down = pt_sync_try_down,
                                  .end_try = pt_sync_end_try,
                                  .claim = pt_sync_claim,
                                  .send = pt_sync_send,
                                  .settle = pt_sync_settle,
                                  .cancel_now = pt_sync_cancel_now,
                                  .payment_link = pt_sync_payment_link,
                                  .refund_claim = pt_sync_refund_claim,
                                  .refund_send = pt_sync_refund_send,
                                  .refund_settle = pt_sync_refund_settle,
                                  .refund_now = pt_sync_refund_now,
                                  .wake = pt_sync_wake,
                                  .ctx = s};
}

/* A payment code erased on this (API) thread: the background thread owes a
 * truncating checkpoint and may be asleep. */
static void wake_to_wipe(struct pt_sync *s)
{
    if (pt_store_wipe_due())
        pt_sync_wake(s);
}

int pt_sync_claim(void *p, struct pt_store *st, struct pt_charge *c, int64_t now)
{
    struct pt_charge_patch pp = processing_patch(p, now, 1);
    return pt_charge_transition(st, c, PT_STATE_PROCESSING, &pp, "send", "sync", NULL, now);
}

void pt_sync_send(void *p, const struct pt_charge *c, struct pt_online_send *out)
{
    out->verdict = call(p, PT_GW_PAY, c, &out->res);
}

int pt_sync_settle(void *p, struct pt_store *st, struct pt_charge *c,
                   const struct pt_online_send *sent)
{
    struct pt_sync *s = p;
    int rc = settle(s, st, c, 0, sent->verdict, &sent->res, now_ms(s));
    if (rc == PT_EEXIST || rc == PT_ESTATE)
        rc = PT_OK; /* someone else moved it meanwhile: its state stands */
    if (rc == PT_OK)
        rc = pt_store_charge_get_by_id(st, c->id, c);
    return rc;
}

int pt_sync_payment_link(void *p, struct pt_store *st, struct pt_charge *c)
{
    struct pt_sync *s = p;
    if (c->cancel_requested)
        return PT_OK; /* being canceled: no code is issued again */
    int64_t deadline = code_deadline(s, c);
    if (deadline && now_ms(s) >= deadline)
        return PT_OK; /* expired: the drain closes it, nobody may pay it */
    /* The create's answer was lost: repeat it, with the same order id, as a
     * resend (PROCESSING committed first, the answer applied) - as often as
     * the sync engine itself may: a kiosk polling this route cannot push the
     * charge past max_attempts.  (Not held to the backoff: the customer is
     * standing at the kiosk.) */
    if (c->state == PT_STATE_UNKNOWN && c->attempts < s->opt.cfg->sync_max_attempts)
        return send_pay(s, st, c);
    if (c->state == PT_STATE_UNKNOWN)
        return PT_OK;
    if (c->state != PT_STATE_PENDING)
        return PT_OK;
    /* PENDING without a link (a query found the trade waiting): the create
     * repeated while unpaid gives the same code; nothing else changes. */
    struct pt_gw_result res;
    if (call(s, PT_GW_PAY, c, &res) != PT_OK || res.outcome != PT_OUTCOME_PENDING ||
        !res.action_url[0])
        return PT_OK;
    struct pt_charge_patch p2 = PT_CHARGE_PATCH_NONE;
    p2.action_url = res.action_url;
    int rc = commit_patch(st, c->id, &p2, now_ms(s));
    return rc ? rc : pt_store_charge_get_by_id(st, c->id, c);
}

static int cancel_now_locked(struct pt_sync *s, struct pt_store *st, struct pt_charge *c);

int pt_sync_cancel_now(void *p, struct pt_store *st, struct pt_charge *c)
{
    struct pt_sync *s = p;
    pthread_mutex_t *mu = charge_lock(s, c->order_id);
    pthread_mutex_lock(mu);
    /* As committed now: a query or a notification that held the lock
     * before may have ended it (then no close or reverse is sent). */
    int rc = pt_store_charge_get_by_id(st, c->id, c);
    if (rc == PT_OK && c->state == PT_STATE_INIT) {
        /* Never sent (its run gave it back): nothing to ask the gateway. */
        int64_t now = now_ms(s);
        if ((rc = pt_store_begin(st)) == PT_OK)
            rc = finish(st, pt_charge_transition(st, c, PT_STATE_CANCELED, NULL,
                                                 "canceled_by_client", "sync", NULL, now));
    } else if (rc == PT_OK && !pt_state_is_final(c->state) && c->state != PT_STATE_PROCESSING) {
        rc = cancel_now_locked(s, st, c);
    }
    pthread_mutex_unlock(mu);
    return rc;
}

static int cancel_now_locked(struct pt_sync *s, struct pt_store *st, struct pt_charge *c)
{
    /* Some gateways cancel by their own trade number (Stripe a
     * PaymentIntent by id): find it first if we never learned it. */
    const struct pt_gateway *gw = pt_gateway_find(c->gateway);
    if (!c->gateway_trade_no[0] && gw && gw->cancel_needs_trade_no) {
        int rc = resolve(s, st, c);
        if (rc)
            return rc;
        if (pt_state_is_final(c->state) || !c->gateway_trade_no[0]) {
            if (pt_state_is_final(c->state))
                return PT_OK;
            /* No PaymentIntent exists for this order: nothing can charge it. */
            int64_t t = now_ms(s);
            if ((rc = pt_store_begin(st)))
                return rc;
            if (c->state == PT_STATE_PROCESSING)
                rc = pt_charge_transition(st, c, PT_STATE_UNKNOWN, NULL, "canceled_by_client",
                                          "api", NULL, t);
            if (rc == PT_OK || rc == PT_EEXIST)
                rc = pt_charge_transition(st, c, PT_STATE_CANCELED, NULL, "canceled_by_client",
                                          "api", "the gateway has no trade for this order", t);
            return finish(st, rc);
        }
    }
    int rc = send_cancel(s, st, c, "canceled_by_client");
    wake_to_wipe(s);
    return rc == PT_EUNSUPPORTED ? PT_OK : rc;
}

int pt_sync_drain(struct pt_sync *s, struct pt_store *st, struct pt_drain_stats *stats)
{
    memset(stats, 0, sizeof *stats);
    struct pt_charge *batch = malloc(sizeof *batch * DRAIN_BATCH);
    if (!batch)
        return PT_ENOMEM;
    /* Gateways known to be unreachable get no requests (the probe says when
     * to come back), but their queued charges still expire on time: an
     * expired charge must neither be sent later nor hold room in the
     * offline limits.  One found unreachable during the pass is skipped for
     * the rest of it. */
    int skip[PT_GW_MAX];
    /* A gateway found back (a customer's charge or a probe): what waits
     * out a "not sent" for it goes now, not at its next attempt. */
    for (int i = 0; i < pt_gateway_count(); i++) {
        int n = 0;
        if (atomic_exchange(&s->came_back[i], 0) &&
            pt_store_gateway_back(st, pt_metric_gateway_name(i), now_ms(s), &n) == PT_OK && n)
            pt_log_info("sync: %d queued for %s, due now that it is back", n,
                        pt_metric_gateway_name(i));
    }
    int trusted = clock_trusted(s); /* else nothing is sent, queued charges still expire */
    int all_skipped = 1;
    for (int i = 0; i < pt_gateway_count(); i++) {
        skip[i] = !s->opt.gw[i] || atomic_load(&s->reach[i]) == REACH_DOWN || !trusted;
        all_skipped &= skip[i];
    }
    int rc = PT_OK;
    int64_t cursor = 0; /* one walk through the due charges, by id */
    struct pt_sync *bound = tl_drain;
    tl_drain = s;
    /* The skipped gateways' expired charges first, read by age.  When every
     * gateway is skipped the walk below would do nothing else (a skipped
     * gateway's charges only expire), so it is not made: the pass reads no
     * queued charge that has not expired. */
    rc = expire_skipped(s, st, skip, batch, stats, &stats->next_expiry);
    for (; rc == PT_OK && !all_skipped;) {
        drain_step(s);
        int64_t now = now_ms(s);
        int n = 0;
        if ((rc = pt_store_charges_due(st, now, cursor, DRAIN_BATCH, batch, &n)) || n == 0)
            break;
        for (int i = 0; i < n && rc == PT_OK; i++) {
            struct pt_charge *c = &batch[i];
            int g = gw_index(c->gateway);
            cursor = c->id;
            if (i)
                drain_step(s); /* between two charges (the first had the batch's) */
            if (g < 0)
                continue;
            if (skip[g]) {
                if (c->state == PT_STATE_INIT && offline_expired(s, c, now_ms(s))) {
                    rc = expire_now(s, st, c);
                    stats->expired++;
                }
                continue;
            }
            stats->examined++;
            switch (c->state) {
            case PT_STATE_INIT: {
                /* This charge and the queued ones right after it (in id
                 * order, gateways still reachable) go out as one run. */
                int k = 1;
                while (i + k < n && batch[i + k].state == PT_STATE_INIT &&
                       gw_index(batch[i + k].gateway) >= 0 && !skip[gw_index(batch[i + k].gateway)])
                    k++;
                stats->examined += k - 1;
                rc = send_queued(s, st, c, k, skip, stats);
                i += k - 1;
                cursor = batch[i].id;
                break;
            }
            case PT_STATE_PROCESSING:
                rc = recover_processing(s, st, c);
                cursor = c->id - 1; /* now UNKNOWN and due: resolve it in this pass */
                break;
            case PT_STATE_UNKNOWN:
            case PT_STATE_PENDING:
                /* A cancel asked for while it was on its way is carried out
                 * now that nothing of ours is (SPEC 18). */
                rc = c->cancel_requested ? pt_sync_cancel_now(s, st, c) : resolve(s, st, c);
                stats->queries++;
                if (!pt_sync_reachable(s, c->gateway))
                    skip[g] = 1;
                break;
            default:
                break;
            }
        }
        if (rc)
            break;
    }
    free(batch);
    if (rc == PT_OK)
        rc = drain_refunds(s, st, skip, stats);
    int64_t refunds_due = 0;
    if (rc == PT_OK && all_skipped)
        stats->next_due = stats->next_expiry; /* nothing else of theirs is due to us */
    else if (rc == PT_OK)
        rc = pt_store_charges_next_due(st, &stats->next_due);
    if (rc == PT_OK)
        rc = pt_store_refunds_next_due(st, &refunds_due);
    if (rc == PT_OK && refunds_due > 0 && (!stats->next_due || refunds_due < stats->next_due))
        stats->next_due = refunds_due;
    tl_drain = bound;
    return rc;
}

int64_t pt_sync_drain_progress_ms(const struct pt_sync *s)
{
    return atomic_load(&s->drain_progress);
}

/* One unauthenticated GET of the gateway's endpoint: any HTTP answer (404
 * included) proves the path works; no secrets, no side effect. */
static int probe(struct pt_sync *s, int i)
{
    const struct pt_transport *t = s->opt.platform->transport;
    if (!s->opt.gw[i] || !t)
        return 0;
    struct pt_http_request req = {.method = "GET"};
    req.url = strdup(s->opt.gw[i]->endpoint);
    struct pt_http_response resp = {0};
    int rc = req.url ? t->send(t->ctx, pt_metric_gateway_name(i), &req, 5000, &resp) : PT_ENOMEM;
    pt_http_request_free(&req);
    pt_http_response_free(&resp);
    set_reach(s, pt_metric_gateway_name(i), rc == PT_OK);
    return rc == PT_OK;
}

int pt_sync_probe_one(void *p, const char *gateway)
{
    int i = gw_index(gateway);
    return i >= 0 && clock_trusted(p) && probe(p, i);
}

/* Waits (trial_mu held) until gateway i's try is over or TRIAL_WAIT_MS
 * passed. */
static void wait_for_try(struct pt_sync *s, int i)
{
    struct timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_nsec += (long)(TRIAL_WAIT_MS % 1000) * 1000000L;
    end.tv_sec += TRIAL_WAIT_MS / 1000 + end.tv_nsec / 1000000000L;
    end.tv_nsec %= 1000000000L;
    while (s->trial[i] && pthread_cond_timedwait(&s->trial_cv, &s->trial_mu, &end) == 0)
        ;
}

int pt_sync_try_down(void *p, const char *gateway, int can_wait, int *trial)
{
    struct pt_sync *s = p;
    int i = gw_index(gateway);
    *trial = 0;
    if (i < 0 || !s->opt.gw[i] || !clock_trusted(s))
        return 0;
    if (atomic_load(&s->reach[i]) != REACH_DOWN)
        return 1;
    pthread_mutex_lock(&s->trial_mu);
    if (!s->trial[i]) {
        s->trial[i] = 1;
        pthread_mutex_unlock(&s->trial_mu);
        if (can_wait) {
            *trial = 1; /* its own request is the try: pt_sync_end_try after it */
            return 1;
        }
        /* It may not wait in the queue: a probe is the try (nothing of the
         * charge is stored unless the gateway answers). */
        int up = probe(s, i);
        pt_sync_end_try(s, gateway);
        return up;
    }
    wait_for_try(s, i);
    pthread_mutex_unlock(&s->trial_mu);
    return atomic_load(&s->reach[i]) != REACH_DOWN;
}

void pt_sync_end_try(void *p, const char *gateway)
{
    struct pt_sync *s = p;
    int i = gw_index(gateway);
    if (i < 0)
        return;
    pthread_mutex_lock(&s->trial_mu);
    s->trial[i] = 0;
    pthread_cond_broadcast(&s->trial_cv);
    pthread_mutex_unlock(&s->trial_mu);
}

int64_t pt_sync_last_probe(struct pt_sync *s, const char *gateway)
{
    int i = gw_index(gateway);
    return i < 0 ? 0 : atomic_load(&s->last_probe[i]);
}

int pt_sync_probe_all(struct pt_sync *s, int64_t max_age_ms)
{
    int down = 0;
    int64_t now = now_ms(s);
    for (int i = 0; i < pt_gateway_count(); i++)
        if (s->opt.gw[i] && now - atomic_load(&s->last_probe[i]) >= max_age_ms) {
            down += !probe(s, i);
            if (tl_drain == s)
                mark_progress(s);
        }
    return down;
}

int pt_sync_probe(struct pt_sync *s)
{
    /* A gateway found back is a sign the network came back, perhaps while
     * this round probed the others: those still down are looked at once
     * more, so that gateways that return together are known up in the same
     * pass, and the drain stays oldest first across them. */
    int down = 0, back = 0;
    for (int round = 0; round < 2 && (round == 0 || (back && down)); round++) {
        down = 0;
        for (int i = 0; i < pt_gateway_count(); i++)
            if (s->opt.gw[i] && atomic_load(&s->reach[i]) == REACH_DOWN) {
                if (probe(s, i))
                    back++;
                else
                    down++;
                if (tl_drain == s)
                    mark_progress(s);
            }
    }
    return down;
}

void pt_sync_forget_reach(struct pt_sync *s, const char *gateway)
{
    int i = gw_index(gateway);
    if (i >= 0 && atomic_exchange(&s->reach[i], REACH_UNKNOWN) == REACH_DOWN)
        atomic_store(&pt_metrics.online[i], 1);
}

void pt_sync_bind_thread(struct pt_sync *s)
{
    tl_drain = s;
}

/* ---- notifications ------------------------------------------------------------------------ */

static void notify_reply(struct pt_reply *out, const struct pt_gateway *gw, int ok,
                         const char **content_type)
{
    memset(out, 0, sizeof *out);
    out->status = ok ? 200 : 400;
    const char *body = ok ? gw->notify_ok_body : gw->notify_fail_body;
    out->body = strdup(body ? body : "");
    out->len = out->body ? strlen(out->body) : 0;
    *content_type = ok ? gw->notify_ok_type : gw->notify_fail_type;
}

static void count_notify(const char *gateway, enum pt_metric_notify what)
{
    int i = gw_index(gateway);
    if (i >= 0)
        atomic_fetch_add(&pt_metrics.notifications[i][what], 1);
}

/*
 * Why a verified notification does not bind to charge c (SPEC section 5),
 * or NULL when it binds as far as can be told without asking the gateway.
 * *confirm is set when the charge has no trade number yet: then only a
 * query by the charge's own order id can tell that the notified trade is
 * ours.  c is NULL when no charge has the notified order id.
 */
static const char *not_bound(const char *route, const struct pt_notification *n,
                             const struct pt_charge *c, int *confirm)
{
    *confirm = 0;
    if (!c)
        return "unknown_order";
    /* Order ids are only unique per device and per gateway: a Stripe event
     * for "ORDER-1" says nothing about an Alipay charge "ORDER-1". */
    if (strcmp(c->gateway, route) != 0)
        return "other_gateway";
    if (!n->merchant_ok)
        return "other_merchant";
    if (!n->trade_no[0])
        return "no_trade_number";
    if (c->gateway_trade_no[0])
        return strcmp(c->gateway_trade_no, n->trade_no) == 0 ? NULL : "other_trade";
    *confirm = 1;
    return NULL;
}

/*
 * Asks the gateway about c's order (outside any transaction: a network
 * call) and says whether it knows the notified trade under c's order id;
 * *res is its answer.  "unconfirmed" when it could not be asked.
 */
static const char *confirm_by_query(struct pt_sync *s, const struct pt_charge *c,
                                    const struct pt_notification *n, struct pt_gw_result *res)
{
    int sent = call(s, PT_GW_QUERY, c, res);
    if (sent == PT_OK && res->trade_no[0] && strcmp(res->trade_no, n->trade_no) == 0)
        return NULL;
    if (sent != PT_OK || res->outcome == PT_OUTCOME_AMBIGUOUS)
        return "unconfirmed";
    return "other_trade";
}

/* True when a confirming query's final answer says otherwise than the
 * notification (money moved where it says failed, or the other way). */
static int query_contradicts(const struct pt_gw_result *q, const struct pt_notification *n)
{
    int q_final = q->outcome == PT_OUTCOME_SUCCESS || q->outcome == PT_OUTCOME_DECLINED ||
                  q->outcome == PT_OUTCOME_CANCELED;
    return q_final && q->outcome != n->status;
}

/* The gateway could not be asked whether a notification is ours: it is not
 * acknowledged (the gateway delivers it again later), and a charge still in
 * progress is made due, so the sync engine's own query settles it. */
static int retry_later(struct pt_sync *s, struct pt_store *st, struct pt_charge *c)
{
    if (pt_state_is_final(c->state))
        return PT_EBUSY;
    int64_t now = now_ms(s);
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    p.next_attempt_at = now;
    int rc = commit_patch(st, c->id, &p, now);
    if (rc)
        return rc;
    pt_sync_wake(s);
    return PT_EBUSY;
}

/* Records an unbound notification against the charge it named (if any):
 * audited as refused, nothing else changes. */
static int refuse_foreign(struct pt_sync *s, struct pt_store *st, const struct pt_charge *c,
                          const struct pt_notification *n, const char *why, const char *actor,
                          int64_t now)
{
    count_notify(n->gateway, PT_MN_FOREIGN);
    pt_log_warn("notification %s/%s for order %s not bound: %s", n->gateway, n->dedup_id,
                n->order_id, why);
    if (!c)
        return PT_OK;
    char detail[400];
    snprintf(detail, sizeof detail, "notification %.200s not bound: %s (trade %.100s)", n->dedup_id,
             why, n->trade_no[0] ? n->trade_no : "none");
    int rc = pt_store_audit(st, c->id, pt_state_name(c->state), pt_state_name(c->state),
                            "notification_foreign", actor, 1, detail, now);
    (void)s;
    return rc;
}

/*
 * True when bound notification n says what charge c already holds: the
 * final state it notifies, for c's amount and currency, of c's known trade.
 * Applying it would change nothing, so it is not written at all (SPEC 13:
 * an online charge whose gateway also notifies costs 2 durable commits):
 * c's state, read from what is committed, is the record that proves it a
 * duplicate - after a restart too - and no dedup row is needed beside it.
 * A notification that would raise a review, or that needs a query to bind,
 * is not this case.
 */
static int holds_outcome(const struct pt_charge *c, const struct pt_notification *n)
{
    enum pt_state to = n->status == PT_OUTCOME_SUCCESS    ? PT_STATE_SUCCESS
                       : n->status == PT_OUTCOME_DECLINED ? PT_STATE_FAILED
                       : n->status == PT_OUTCOME_CANCELED ? PT_STATE_CANCELED
                                                          : PT_STATE_INIT;
    if (to == PT_STATE_INIT || c->state != to)
        return 0;
    if (n->amount != c->amount && (to == PT_STATE_SUCCESS || n->amount != 0))
        return 0; /* a success names the amount; a mismatch goes to review */
    if (n->currency[0] && strcmp(n->currency, c->currency) != 0)
        return 0;
    return c->gateway_trade_no[0] && strcmp(c->gateway_trade_no, n->trade_no) == 0;
}

/* Applies a bound notification to c (inside the transaction). */
static int apply_bound(struct pt_store *st, struct pt_charge *c, const struct pt_notification *n,
                       const char *actor, int64_t now, const char **outcome)
{
    /* Bound is not yet believed: the amount and currency must be ours. */
    char reason[PT_MESSAGE_MAX] = "";
    if (n->status == PT_OUTCOME_SUCCESS && n->amount <= 0)
        snprintf(reason, sizeof reason, "notification_without_amount");
    else if (n->amount > 0 && n->amount != c->amount)
        snprintf(reason, sizeof reason, "amount_mismatch: notified %lld, charged %lld",
                 (long long)n->amount, (long long)c->amount);
    else if (n->currency[0] && strcmp(n->currency, c->currency) != 0)
        snprintf(reason, sizeof reason, "currency_mismatch: notified %s, charged %s", n->currency,
                 c->currency);
    struct pt_charge_patch patch = PT_CHARGE_PATCH_NONE;
    patch.gateway_trade_no = n->trade_no;
    int rc = PT_OK;
    *outcome = "applied";
    if (reason[0]) {
        *outcome = "review";
        count_notify(n->gateway, PT_MN_REVIEW);
        rc = raise_review(st, c, reason, actor, now);
    } else if (n->status == PT_OUTCOME_SUCCESS) {
        count_notify(n->gateway, PT_MN_APPLIED);
        rc = pt_charge_gateway_succeeded(st, c, &patch, actor, n->dedup_id, now);
    } else if (n->status == PT_OUTCOME_DECLINED || n->status == PT_OUTCOME_CANCELED) {
        count_notify(n->gateway, PT_MN_APPLIED);
        enum pt_state to = n->status == PT_OUTCOME_DECLINED ? PT_STATE_FAILED : PT_STATE_CANCELED;
        if (to == PT_STATE_FAILED) {
            patch.error_code = "declined";
            patch.error_message = "the gateway reported the payment failed";
        }
        rc = pt_charge_transition(st, c, to, &patch,
                                  to == PT_STATE_FAILED ? "gateway_declined" : "gateway_closed",
                                  actor, n->dedup_id, now);
    } else {
        count_notify(n->gateway, PT_MN_IGNORED);
        *outcome = "ignored";
    }
    return rc == PT_EEXIST || rc == PT_ESTATE ? PT_OK : rc;
}

/*
 * A verified refund notification (SPEC 5a): bound to the refund by its
 * refund_id, the gateway, the merchant, the order and - once known - the
 * gateway's refund number; one that cannot be bound by that number is only
 * a hint: the gateway is asked about the refund and its answer applied.
 * De-duplicated like payment notifications.
 */
static int take_refund_notification(struct pt_sync *s, struct pt_store *st, const char *route,
                                    const struct pt_notification *n, const char **outcome)
{
    char actor[32];
    snprintf(actor, sizeof actor, "notify:%s", route);
    struct pt_refund r;
    int rc = pt_store_refund_get(st, n->refund_id, &r);
    if (rc != PT_OK && rc != PT_ENOTFOUND)
        return rc;
    const char *why = NULL;
    if (rc == PT_ENOTFOUND)
        why = "unknown_refund";
    else if (strcmp(r.gateway, route) != 0)
        why = "other_gateway";
    else if (!n->merchant_ok)
        why = "other_merchant";
    else if (n->order_id[0] && strcmp(n->order_id, r.order_id) != 0)
        why = "other_order";
    else if (r.gateway_refund_no[0] && n->refund_no[0] &&
             strcmp(r.gateway_refund_no, n->refund_no) != 0)
        why = "other_refund";
    int by_number = !why && r.gateway_refund_no[0] && n->refund_no[0];
    struct pt_gw_result q = {0};
    struct pt_charge c;
    if (!why && !by_number && !pt_state_is_final(r.state)) {
        if ((rc = pt_store_charge_get_by_id(st, r.charge_id, &c)))
            return rc;
        int sent = refund_call(s, PT_GW_REFUND_QUERY, &c, &r, &q);
        if (sent != PT_OK || q.outcome == PT_OUTCOME_AMBIGUOUS) {
            count_notify(route, PT_MN_FOREIGN);
            *outcome = "unconfirmed";
            /* Delivered again later; meanwhile the refund is made due, so
             * the sync engine's own query settles it. */
            int64_t t = now_ms(s);
            struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
            p.next_attempt_at = t;
            if ((rc = pt_store_begin(st)) == PT_OK &&
                (rc = finish(st, pt_store_refund_patch(st, r.id, &p, t))) == PT_OK)
                pt_sync_wake(s);
            return rc ? rc : PT_EBUSY;
        }
    }
    int64_t now = now_ms(s);
    if ((rc = pt_store_begin(st)))
        return rc;
    rc =
        pt_store_notification_insert(st, route, n->dedup_id, n->order_id,
                                     pt_outcome_name(n->status), why ? "foreign" : "received", now);
    if (rc == PT_EEXIST) {
        if ((rc = pt_store_rollback(st)) != PT_OK)
            return rc;
        count_notify(route, PT_MN_DUPLICATE);
        *outcome = "duplicate";
        return PT_OK;
    }
    if (rc == PT_OK && !why)
        rc = pt_store_refund_get_by_id(st, r.id, &r); /* as it is now, under the write lock */
    if (rc) {
        pt_store_rollback(st);
        return rc;
    }
    if (why) {
        count_notify(route, PT_MN_FOREIGN);
        *outcome = "foreign";
        pt_log_warn("refund notification %s/%s for refund %s not bound: %s", route, n->dedup_id,
                    n->refund_id, why);
        /* Audited on the refund's charge whenever the refund exists, as a
         * payment notification is on its charge (SPEC 5), another
         * gateway's included. */
        if (strcmp(why, "unknown_refund") != 0)
            rc = pt_store_refund_audit(st, &r, pt_state_name(r.state), pt_state_name(r.state),
                                       "notification_foreign", actor, 1, why, now);
        return finish(st, rc);
    }
    /* Bound by the refund number is not yet believed: as for a payment
     * (apply_bound), a success must state exactly the refund's amount, and
     * a currency, when one is given, must be the refund's. */
    char reason[PT_MESSAGE_MAX] = "";
    if (by_number && n->status == PT_OUTCOME_SUCCESS && n->amount <= 0)
        snprintf(reason, sizeof reason, "notification_without_amount");
    else if (by_number && n->amount > 0 && n->amount != r.amount)
        snprintf(reason, sizeof reason, "amount_mismatch: notified %lld, refund %lld",
                 (long long)n->amount, (long long)r.amount);
    else if (by_number && n->currency[0] && strcmp(n->currency, r.currency) != 0)
        snprintf(reason, sizeof reason, "currency_mismatch: notified %s, refund %s", n->currency,
                 r.currency);
    *outcome = "applied";
    if (pt_state_is_final(r.state)) {
        *outcome = "ignored";
    } else if (!by_number) {
        rc = refund_apply(s, st, &r, PT_GW_REFUND_QUERY, &q, now);
    } else if (reason[0]) {
        *outcome = "review";
        rc = refund_raise_review(st, &r, reason, now);
    } else if (n->status == PT_OUTCOME_SUCCESS || n->status == PT_OUTCOME_DECLINED) {
        struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
        if (n->status == PT_OUTCOME_DECLINED) {
            p.error_code = "refund_failed";
            p.error_message = "the gateway reported the refund failed";
        }
        rc = pt_refund_transition(
            st, &r, n->status == PT_OUTCOME_SUCCESS ? PT_STATE_SUCCESS : PT_STATE_FAILED, &p,
            n->status == PT_OUTCOME_SUCCESS ? "gateway_refunded" : "gateway_declined", actor,
            n->dedup_id, now);
    } else {
        *outcome = "ignored";
    }
    /* Counted by what became of it, like a payment notification. */
    count_notify(route, strcmp(*outcome, "review") == 0    ? PT_MN_REVIEW
                        : strcmp(*outcome, "ignored") == 0 ? PT_MN_IGNORED
                                                           : PT_MN_APPLIED);
    return finish(st, rc);
}

/*
 * Binds, de-duplicates and applies one verified notification.  Returns
 * PT_OK with *outcome set, or a storage error (then nothing was applied).
 */
static int take_notification_locked(struct pt_sync *s, struct pt_store *st, const char *route,
                                    const struct pt_notification *n, const char **outcome);

/* A notification is applied with its charge's gateway lock held: a
 * success that arrives while a reverse of the charge is on its way is
 * applied after the reverse's outcome, to the charge as it left it. */
static int take_notification(struct pt_sync *s, struct pt_store *st, const char *route,
                             const struct pt_notification *n, const char **outcome)
{
    pthread_mutex_t *mu = charge_lock(s, n->order_id);
    pthread_mutex_lock(mu);
    int rc = take_notification_locked(s, st, route, n, outcome);
    pthread_mutex_unlock(mu);
    return rc;
}

static int take_notification_locked(struct pt_sync *s, struct pt_store *st, const char *route,
                                    const struct pt_notification *n, const char **outcome)
{
    char actor[32];
    snprintf(actor, sizeof actor, "notify:%s", route);
    struct pt_charge c;
    int rc = pt_store_charge_get(st, n->order_id, &c);
    if (rc != PT_OK && rc != PT_ENOTFOUND)
        return rc;
    int confirm = 0;
    struct pt_gw_result q = {0};
    const char *why = not_bound(route, n, rc == PT_OK ? &c : NULL, &confirm);
    if (!why && confirm)
        why = confirm_by_query(s, &c, n, &q);
    if (why && strcmp(why, "unconfirmed") == 0) {
        count_notify(route, PT_MN_FOREIGN);
        *outcome = "unconfirmed";
        return retry_later(s, st, &c);
    }

    if (!why && !confirm && holds_outcome(&c, n)) {
        /* Read outside any transaction, so from what is committed: the
         * outcome is durable already, and a final state never changes.
         * Acknowledged and counted as the duplicate it is; nothing is
         * written. */
        count_notify(route, PT_MN_DUPLICATE);
        *outcome = "duplicate";
        return PT_OK;
    }

    int64_t now = now_ms(s);
    if ((rc = pt_store_begin(st)))
        return rc;
    rc =
        pt_store_notification_insert(st, route, n->dedup_id, n->order_id,
                                     pt_outcome_name(n->status), why ? "foreign" : "received", now);
    if (rc == PT_EEXIST) {
        /* At-least-once delivery: acknowledged again, applied once - once
         * the first delivery's row is durable (it may be in the writer's
         * batch still; if that batch fails, this one is not acknowledged). */
        if ((rc = pt_store_rollback(st)) != PT_OK)
            return rc;
        count_notify(route, PT_MN_DUPLICATE);
        *outcome = "duplicate";
        return PT_OK;
    }
    /* The charge as it is now, under the write lock: a trade number learned
     * since the check above must still match. */
    int have = rc ? rc : pt_store_charge_get(st, n->order_id, &c);
    if (have == PT_OK && !why && c.gateway_trade_no[0] &&
        strcmp(c.gateway_trade_no, n->trade_no) != 0)
        why = "other_trade";
    if (have != PT_OK && have != PT_ENOTFOUND) {
        rc = have;
    } else if (why) {
        *outcome = "foreign";
        rc = refuse_foreign(s, st, have == PT_OK ? &c : NULL, n, why, actor, now);
    } else if (confirm && query_contradicts(&q, n)) {
        /* The gateway's own answer to our query is the fresher word on the
         * money (SPEC 4: a verified success wins); the contradiction is for
         * an operator to look at. */
        char reason[PT_MESSAGE_MAX];
        snprintf(reason, sizeof reason, "notification_contradicts_query: notified %s, query %s",
                 pt_outcome_name(n->status), pt_outcome_name(q.outcome));
        *outcome = "review";
        count_notify(route, PT_MN_REVIEW);
        /* Review first: fulfilment of what the query says waits for it. */
        rc = raise_review(st, &c, reason, actor, now);
        if (rc == PT_OK)
            rc = apply(s, st, &c, PT_GW_QUERY, &q, now);
    } else {
        rc = apply_bound(st, &c, n, actor, now, outcome);
    }
    return finish(st, rc);
}

int pt_sync_notify(void *p, struct pt_store *st, const char *gateway,
                   const struct pt_http_response *msg, struct pt_reply *out,
                   const char **content_type)
{
    struct pt_sync *s = p;
    const struct pt_gateway *gw = pt_gateway_find(gateway);
    const struct pt_gw_config *cfg = gw_cfg(s, gateway);
    if (!gw || !cfg) {
        memset(out, 0, sizeof *out);
        pt_reply_error(out, 404, "not_found", "gateway %s is not configured", gateway);
        *content_type = "application/json";
        return PT_OK;
    }
    struct pt_gw_env env = {0};
    if (wall_ms(s, &env.now_ms) != PT_OK && gw->notify_needs_time) {
        /* Its verification reads the time, which cannot be trusted yet:
         * recorded nowhere, and the gateway delivers it again (SPEC 17). */
        count_notify(gateway, PT_MN_DEFERRED);
        pt_log_warn("notification from %s: not verified (the wall clock is not trusted yet); "
                    "answered 503, the gateway delivers it again",
                    gateway);
        notify_reply(out, gw, 0, content_type);
        out->status = 503;
        return PT_OK;
    }
    struct pt_notification n;
    memset(&n, 0, sizeof n);
    learn_peer_key(s, gw, cfg, msg);
    int rc = gw->parse_notify(cfg, msg, &env, &n);
    if (rc != PT_OK) {
        /* Never applied; the gateway retries, and a forger learns nothing. */
        count_notify(gateway, rc == PT_ESIG ? PT_MN_BAD_SIGNATURE : PT_MN_MALFORMED);
        pt_log_warn("notification from %s rejected: %s", gateway,
                    rc == PT_ESIG ? "signature does not verify" : "malformed");
        notify_reply(out, gw, 0, content_type);
        return PT_OK;
    }
    if (!n.relevant) {
        count_notify(gateway, PT_MN_IGNORED);
        notify_reply(out, gw, 1, content_type);
        return PT_OK;
    }
    const char *outcome = "";
    rc = n.refund ? take_refund_notification(s, st, gateway, &n, &outcome)
                  : take_notification(s, st, gateway, &n, &outcome);
    wake_to_wipe(s);
    if (rc == PT_EBUSY) {
        /* Not provably ours until the gateway answers a query: asked to
         * deliver it again rather than acknowledged and forgotten. */
        pt_log_warn("notification %s/%s order=%s: not confirmed (the gateway cannot be asked "
                    "now); not acknowledged, it will come again",
                    gateway, n.dedup_id, n.order_id);
        notify_reply(out, gw, 0, content_type);
        out->status = 503;
        return PT_OK;
    }
    if (rc) {
        /* Not acknowledged: the gateway will deliver it again. */
        pt_log_error("notification from %s not applied: %s", gateway, pt_strerror(rc));
        notify_reply(out, gw, 0, content_type);
        out->status = 503;
        return rc;
    }
    pt_log_info("notification %s/%s order=%s: %s", gateway, n.dedup_id, n.order_id, outcome);
    notify_reply(out, gw, 1, content_type);
    return PT_OK;
}

/* ---- refunds (SPEC 5a, 7) ------------------------------------------------------------ */

static const char *refund_op_name(enum pt_gw_refund_op op)
{
    return op == PT_GW_REFUND ? "refund" : "refund query";
}

/*
 * As call(), for refund r of charge c: the answer into *res, or - for a
 * gateway's list of the charge's refunds (list not NULL, op
 * PT_GW_REFUND_QUERY of a keyless gateway) - into *list.
 */
static int refund_exchange(struct pt_sync *s, enum pt_gw_refund_op op, const struct pt_charge *c,
                           const struct pt_refund *r, struct pt_gw_result *res,
                           struct pt_gw_refund_list *list)
{
    const struct pt_gateway *gw = pt_gateway_find(c->gateway);
    const struct pt_gw_config *cfg = gw_cfg(s, c->gateway);
    const struct pt_transport *t = s->opt.platform->transport;
    struct pt_gw_result ignored;
    if (!res)
        res = &ignored;
    memset(res, 0, sizeof *res);
    if (list) {
        memset(list, 0, sizeof *list);
        list->res.outcome = PT_OUTCOME_AMBIGUOUS; /* until a list is read */
    }
    if (!gw || !cfg || !t)
        return PT_ECONFIG;
    if (!gw->build_refund || !gw->parse_refund || (list && !gw->parse_refund_list))
        return PT_EUNSUPPORTED;
    char n[33];
    nonce(s, n);
    struct pt_gw_env env = {
        .nonce = n, .random = s->opt.platform->random, .random_ctx = s->opt.platform->ctx};
    if (wall_ms(s, &env.now_ms) != PT_OK)
        return PT_ECLOCK; /* not sent: the request would carry a wrong time */
    struct pt_http_request req = {0};
    int rc = gw->build_refund(cfg, op, c, r, &env, &req);
    if (rc)
        return rc;
    struct pt_http_response resp = {0};
    rc = t->send(t->ctx, c->gateway, &req, (int)s->opt.cfg->sync_request_timeout_ms, &resp);
    pt_http_request_free(&req);
    if (tl_drain == s)
        mark_progress(s);
    if (rc == PT_OK) {
        set_reach(s, c->gateway, 1);
        learn_peer_key(s, gw, cfg, &resp);
        if (list)
            gw->parse_refund_list(cfg, c, &resp, list);
        else
            gw->parse_refund(cfg, op, c, r, &resp, res);
        const struct pt_gw_result *what = list ? &list->res : res;
        pt_log_debug("%s %s refund=%s: HTTP %d -> %s %s", c->gateway,
                     list ? "refund list" : refund_op_name(op), r->refund_id, resp.status,
                     pt_outcome_name(what->outcome), what->code);
    } else if (rc == PT_ENOTSENT) {
        set_reach(s, c->gateway, 0);
    }
    pt_http_response_free(&resp);
    return rc;
}

static int refund_call(struct pt_sync *s, enum pt_gw_refund_op op, const struct pt_charge *c,
                       const struct pt_refund *r, struct pt_gw_result *res)
{
    return refund_exchange(s, op, c, r, res, NULL);
}

static int refund_raise_review(struct pt_store *st, struct pt_refund *r, const char *reason,
                               int64_t now)
{
    if (r->review)
        return PT_OK;
    int rc = pt_refund_review(st, r, 1, reason, "sync", now);
    return rc == PT_EEXIST ? PT_OK : rc;
}

/* Moves r according to an adapter outcome.  Inside a transaction. */
static int refund_apply(struct pt_sync *s, struct pt_store *st, struct pt_refund *r,
                        enum pt_gw_refund_op op, const struct pt_gw_result *res, int64_t now)
{
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    /* The gateway's refund number only from an answer that is believed: an
     * ambiguous one may be about another refund. */
    if (res->trade_no[0] && res->outcome != PT_OUTCOME_AMBIGUOUS &&
        res->outcome != PT_OUTCOME_NOT_FOUND)
        p.gateway_trade_no = res->trade_no;
    char detail[PT_SHORT_MAX + PT_MESSAGE_MAX + 8];
    snprintf(detail, sizeof detail, "%s%s%s", res->code,
             res->code[0] && res->message[0] ? ": " : "", res->message);
    int rc = PT_OK;
    switch (res->outcome) {
    case PT_OUTCOME_SUCCESS:
        count_sync(r->gateway, PT_MS_SUCCESS);
        if (res->amount > 0 && res->amount != r->amount) {
            /* The money went back, but not the amount asked for: it is
             * SUCCESS (the gateway said so) and an operator looks at it. */
            char reason[PT_MESSAGE_MAX];
            snprintf(reason, sizeof reason, "amount_mismatch: gateway refunded %lld, asked %lld",
                     (long long)res->amount, (long long)r->amount);
            if ((rc = refund_raise_review(st, r, reason, now)))
                break;
        }
        rc = pt_refund_transition(st, r, PT_STATE_SUCCESS, &p, "gateway_refunded", "sync", detail,
                                  now);
        break;
    case PT_OUTCOME_DECLINED:
    case PT_OUTCOME_CANCELED:
        count_sync(r->gateway, PT_MS_DECLINED);
        p.error_code = res->code[0] ? res->code : "declined";
        p.error_message = res->message[0] ? res->message : "refused by the gateway";
        if (r->state == PT_STATE_INIT) /* (cannot happen: INIT is never sent) */
            break;
        rc = pt_refund_transition(st, r, PT_STATE_FAILED, &p, "gateway_declined", "sync", detail,
                                  now);
        if (rc == PT_OK && res->review)
            rc = refund_raise_review(st, r, res->code[0] ? res->code : "gateway_review", now);
        break;
    case PT_OUTCOME_PENDING:
        count_sync(r->gateway, PT_MS_PENDING);
        p.next_attempt_at = now + s->opt.cfg->sync_interval_s * 1000;
        rc = pt_refund_transition(st, r, PT_STATE_PENDING, &p, "gateway_pending", "sync", detail,
                                  now);
        if (rc == PT_EEXIST)
            rc = pt_store_refund_patch(st, r->id, &p, now);
        if ((rc == PT_OK || rc == PT_ESTATE) && res->review) /* (WeChat ABNORMAL) */
            rc = refund_raise_review(st, r, res->code[0] ? res->code : "gateway_review", now);
        break;
    case PT_OUTCOME_NOT_FOUND:
    case PT_OUTCOME_AMBIGUOUS:
        count_sync(r->gateway,
                   res->outcome == PT_OUTCOME_NOT_FOUND ? PT_MS_NOT_FOUND : PT_MS_AMBIGUOUS);
        if (op == PT_GW_REFUND)
            p.attempts_add = 1; /* an ambiguous send counts toward max_attempts */
        p.next_attempt_at = now + backoff_ms(s, r->attempts + p.attempts_add);
        if (op == PT_GW_REFUND)
            p.next_attempt_at = after_send(s, r, now, p.next_attempt_at);
        if (r->state == PT_STATE_PROCESSING)
            rc = pt_refund_transition(st, r, PT_STATE_UNKNOWN, &p, "gateway_ambiguous", "sync",
                                      detail, now);
        else
            rc = pt_store_refund_patch(st, r->id, &p, now);
        if (rc == PT_OK)
            rc = pt_store_refund_get_by_id(st, r->id, r);
        if (rc == PT_OK && res->review)
            rc = refund_raise_review(st, r, res->code[0] ? res->code : "gateway_review", now);
        break;
    }
    return rc;
}

/* What became of a refund request (inside a transaction). */
static int refund_settle(struct pt_sync *s, struct pt_store *st, struct pt_refund *r, int resend,
                         int sent, const struct pt_gw_result *res, int64_t now)
{
    struct pt_charge_patch q = PT_CHARGE_PATCH_NONE;
    int rc;
    if (NOT_SENT(sent)) {
        count_sync(r->gateway, PT_MS_NOT_SENT);
        q.next_attempt_at = now + s->opt.cfg->sync_interval_s * 1000;
        rc = pt_refund_transition(
            st, r, resend ? PT_STATE_UNKNOWN : PT_STATE_INIT, &q, "not_sent", "sync",
            sent == PT_ECLOCK ? "the wall clock is not trusted yet" : "gateway unreachable", now);
    } else if (sent == PT_ENOANSWER) {
        count_sync(r->gateway, PT_MS_AMBIGUOUS);
        q.attempts_add = 1;
        q.next_attempt_at = after_send(s, r, now, now + backoff_ms(s, r->attempts + 1));
        rc = pt_refund_transition(st, r, PT_STATE_UNKNOWN, &q, "no_answer", "sync",
                                  "sent, no answer (timeout or connection lost)", now);
    } else if (sent == PT_OK) {
        rc = refund_apply(s, st, r, PT_GW_REFUND, res, now);
    } else {
        char why[PT_GW_BUILD_ERROR_MAX];
        pt_log_error("refund %s: cannot build the %s refund request: %s", r->refund_id, r->gateway,
                     pt_gw_build_error(gw_cfg(s, r->gateway), sent, why, sizeof why));
        q.next_attempt_at = now + s->opt.cfg->sync_backoff_max_ms;
        q.error_code = "gateway_config";
        q.error_message = "the gateway refund request could not be built; check the configuration";
        rc = pt_refund_transition(st, r, resend ? PT_STATE_UNKNOWN : PT_STATE_INIT, &q, "not_sent",
                                  "sync", pt_strerror(sent), now);
        if (rc == PT_OK)
            rc = refund_raise_review(st, r, "gateway_config", now);
    }
    return rc;
}

/* Sends refund r (INIT, or UNKNOWN for a resend with the same refund_id):
 * PROCESSING committed first, the outcome after.  *r is re-read. */
static int send_refund(struct pt_sync *s, struct pt_store *st, const struct pt_charge *c,
                       struct pt_refund *r)
{
    int64_t now = now_ms(s);
    int resend = r->state != PT_STATE_INIT;
    int rc = pt_store_begin(st);
    if (rc)
        return rc;
    struct pt_charge_patch p = processing_patch(s, now, 1);
    rc = pt_refund_transition(st, r, PT_STATE_PROCESSING, &p, resend ? "resend" : "send", "sync",
                              NULL, now);
    if (rc)
        return finish(st, rc);
    if ((rc = pt_store_commit(st)))
        return rc;
    struct pt_gw_result res;
    int sent = refund_call(s, PT_GW_REFUND, c, r, &res);
    now = now_ms(s);
    if ((rc = pt_store_begin(st)))
        return rc;
    rc = finish(st, refund_settle(s, st, r, resend, sent, &res, now));
    if (rc == PT_OK)
        rc = pt_store_refund_get_by_id(st, r->id, r);
    return rc;
}

static int refund_check_limits(struct pt_sync *s, struct pt_store *st, struct pt_refund *r,
                               int64_t now)
{
    if (r->review || pt_state_is_final(r->state))
        return PT_OK;
    const char *reason = NULL;
    if (r->attempts >= s->opt.cfg->sync_max_attempts)
        reason = "max_attempts";
    else if (r->first_sent_at &&
             now - r->first_sent_at >= s->opt.cfg->sync_resolve_timeout_s * 1000)
        reason = "resolve_timeout";
    if (!reason)
        return PT_OK;
    int rc = pt_store_begin(st);
    return rc ? rc : finish(st, refund_raise_review(st, r, reason, now));
}

/* UNKNOWN or PENDING: ask the gateway by refund_id, never send a new one. */
static int resolve_refund(struct pt_sync *s, struct pt_store *st, const struct pt_charge *c,
                          struct pt_refund *r)
{
    struct pt_gw_result res;
    int sent = refund_call(s, PT_GW_REFUND_QUERY, c, r, &res);
    int64_t now = now_ms(s);
    int rc;
    if (sent == PT_OK && res.outcome == PT_OUTCOME_NOT_FOUND && r->state == PT_STATE_UNKNOWN) {
        /* The gateway has no refund under this refund_id.  Once the first
         * request cannot arrive any more, it never will: the same refund_id
         * is sent again (the gateway's own refund key: never two refunds). */
        count_sync(r->gateway, PT_MS_NOT_FOUND);
        int64_t grace = 3 * s->opt.cfg->sync_request_timeout_ms;
        if (r->first_sent_at && now - r->first_sent_at >= grace &&
            r->attempts < s->opt.cfg->sync_max_attempts) {
            pt_log_info("refund %s: gateway has no record, resending with the same refund id",
                        r->refund_id);
            rc = send_refund(s, st, c, r);
            return rc ? rc : refund_check_limits(s, st, r, now_ms(s));
        }
    }
    if ((rc = pt_store_begin(st)))
        return rc;
    if (sent == PT_OK && res.outcome == PT_OUTCOME_NOT_FOUND) {
        struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
        p.next_attempt_at = now + backoff_ms(s, r->attempts + 1);
        rc = pt_store_refund_patch(st, r->id, &p, now);
    } else if (sent == PT_OK) {
        rc = refund_apply(s, st, r, PT_GW_REFUND_QUERY, &res, now);
    } else {
        struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
        p.next_attempt_at = NOT_SENT(sent) ? now + s->opt.cfg->sync_interval_s * 1000
                                           : now + backoff_ms(s, r->attempts);
        count_sync(r->gateway, NOT_SENT(sent) ? PT_MS_NOT_SENT : PT_MS_AMBIGUOUS);
        rc = pt_store_refund_patch(st, r->id, &p, now);
    }
    rc = finish(st, rc);
    if (rc == PT_OK)
        rc = pt_store_refund_get_by_id(st, r->id, r);
    return rc == PT_OK ? refund_check_limits(s, st, r, now) : rc;
}

/* A PROCESSING refund that is due: its send was interrupted. */
static int recover_refund(struct pt_sync *s, struct pt_store *st, struct pt_refund *r)
{
    int64_t now = now_ms(s);
    int rc = pt_store_begin(st);
    if (rc)
        return rc;
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    p.next_attempt_at = after_send(s, r, now, now);
    p.attempts_add = 1;
    rc = pt_refund_transition(st, r, PT_STATE_UNKNOWN, &p, "interrupted_send", "sync",
                              "the send was interrupted (restart or timeout)", now);
    return finish(st, rc);
}

/*
 * Sends the queued refunds rs[0..n) (INIT, in id order) in runs, as
 * send_queued() does charges: one commit marks up to RUN_MAX PROCESSING,
 * their requests go out one after another, the next commit holds their
 * outcomes and marks the next run.  A refund in doubt after a crash is
 * queried by its refund_id and, when the gateway never saw it, sent again
 * under the same refund_id (resolve_refund): never a second refund.
 */
static int send_queued_refunds(struct pt_sync *s, struct pt_store *st, struct pt_refund *rs, int n,
                               int *down, struct pt_drain_stats *stats)
{
    struct pt_gw_result *res = malloc(sizeof *res * RUN_MAX);
    struct pt_charge *cs = malloc(sizeof *cs * RUN_MAX);
    if (!res || !cs) {
        free(res);
        free(cs);
        return PT_ENOMEM;
    }
    int armed[RUN_MAX], verdict[RUN_MAX];
    int rc = PT_OK, i = 0, out = 0; /* out: the last run, its outcomes not committed */
    while (rc == PT_OK && (i < n || out > 0)) {
        int64_t now = now_ms(s);
        if ((rc = pt_store_begin(st)))
            break;
        for (int j = 0; j < out && rc == PT_OK; j++) {
            rc = refund_settle(s, st, &rs[armed[j]], 0, verdict[j], &res[j], now);
            if (rc == PT_EEXIST || rc == PT_ESTATE)
                rc = PT_OK;
        }
        out = 0;
        /* As for charges: a refund another lane is arming is passed over. */
        int64_t ids[RUN_MAX];
        unsigned char taken[RUN_MAX];
        int first = i, span = n - i < RUN_MAX ? n - i : RUN_MAX;
        for (int j = 0; j < span; j++)
            ids[j] = rs[i + j].id;
        if (rc == PT_OK && span > 0)
            rc = pt_store_refunds_claim(st, ids, span, taken);
        for (; rc == PT_OK && i < n && out < RUN_MAX; i++) {
            struct pt_refund *r = &rs[i];
            if (i - first < span && !taken[i - first])
                continue; /* another lane's now */
            if (down[gw_index(r->gateway)])
                continue;
            if ((rc = pt_store_charge_get_by_id(st, r->charge_id, &cs[out])))
                break;
            struct pt_charge_patch p = processing_patch(s, now, out + 1);
            rc = pt_refund_transition(st, r, PT_STATE_PROCESSING, &p, "send", "sync", NULL, now);
            if (rc == PT_OK)
                armed[out++] = i;
            if (rc == PT_EEXIST || rc == PT_ESTATE)
                rc = PT_OK; /* someone else moved it: not ours to send */
        }
        if ((rc = finish(st, rc)))
            break;
        for (int j = 0; j < out; j++) {
            struct pt_refund *r = &rs[armed[j]];
            int g = gw_index(r->gateway);
            if (down[g]) {
                verdict[j] = PT_ENOTSENT; /* its gateway refused one before it */
                stats->not_sent++;
                continue;
            }
            verdict[j] = refund_call(s, PT_GW_REFUND, &cs[j], r, &res[j]);
            if (NOT_SENT(verdict[j]) || !pt_sync_reachable(s, r->gateway))
                down[g] = 1;
            if (NOT_SENT(verdict[j]))
                stats->not_sent++;
            else
                stats->sent++;
        }
    }
    free(cs);
    free(res);
    return rc;
}

/* ---- refunds without a refund key (SPEC 5a: 2C2P) ------------------------------------------
 *
 * A gateway whose refund request names no refund (refund_keyless) cannot
 * say whether one request of ours was executed - only which refunds it
 * executed on a charge.  Exactly once is kept by the order of operations
 * (docs/2c2p-refunds.md gives the argument and its assumptions):
 *
 *   1. At most one refund of a charge is PROCESSING or UNKNOWN; the others
 *      wait in INIT, oldest first.  The whole conversation about a refund
 *      holds its charge's lock, and the move to PROCESSING re-checks the
 *      rule in its own transaction.
 *   2. Before every send, first or retry, the gateway's list of the
 *      charge's refunds is read and bound (refund_bind.h): a refund it
 *      shows is never sent again, it is bound to its entry, whose status
 *      decides; nothing that is this refund -> it is sent; anything that
 *      does not add up -> review, not sent.
 *   3. A refund whose request may have left is not looked at again before
 *      that request can no longer arrive (three request timeouts: every
 *      path that leaves one UNKNOWN schedules it so, after_send), so the
 *      list read before a resend shows an executed refund.
 */

/* Most refunds of one charge the rule reads at once (a charge refunded in
 * more parts than this is an operator's). */
#define CHARGE_REFUNDS_MAX PT_GW_REFUND_LIST_MAX

static int keyless(const char *gateway)
{
    const struct pt_gateway *gw = pt_gateway_find(gateway);
    return gw && gw->refund_keyless;
}

/* When refund r, whose request may just have left, is looked at next: for
 * a keyless gateway never before that request can no longer arrive. */
static int64_t after_send(const struct pt_sync *s, const struct pt_refund *r, int64_t now,
                          int64_t next)
{
    int64_t grace = now + 3 * s->opt.cfg->sync_request_timeout_ms;
    return keyless(r->gateway) && next < grace ? grace : next;
}

/* Every refund of charge_id into *out (malloc'd, caller frees). */
static int refunds_of(struct pt_store *st, int64_t charge_id, struct pt_refund **out, int *n)
{
    struct pt_refund *rows = malloc(sizeof *rows * CHARGE_REFUNDS_MAX);
    int more = 0;
    *out = NULL;
    *n = 0;
    if (!rows)
        return PT_ENOMEM;
    int rc = pt_store_refunds_list(st, charge_id, -1, 0, CHARGE_REFUNDS_MAX, rows, n, &more);
    if (rc == PT_OK && more)
        rc = PT_ETOOBIG;
    if (rc != PT_OK) {
        free(rows);
        *n = 0;
        return rc;
    }
    *out = rows;
    return PT_OK;
}

/* Rule 1: no other refund of the charge in flight, none queued before r. */
static int my_turn(const struct pt_refund *r, const struct pt_refund *all, int n)
{
    for (int i = 0; i < n; i++) {
        const struct pt_refund *l = &all[i];
        if (l->id == r->id)
            continue;
        if (l->state == PT_STATE_PROCESSING || l->state == PT_STATE_UNKNOWN)
            return 0;
        if (l->state == PT_STATE_INIT && l->id < r->id)
            return 0;
    }
    return 1;
}

static int refund_patch_now(struct pt_store *st, struct pt_refund *r,
                            const struct pt_charge_patch *p, int64_t now)
{
    int rc = pt_store_begin(st);
    if (rc == PT_OK)
        rc = finish(st, pt_store_refund_patch(st, r->id, p, now));
    return rc == PT_OK ? pt_store_refund_get_by_id(st, r->id, r) : rc;
}

/* What one conversation did, for the drain's counts and the intake. */
struct keyless_out {
    int verdict; /* PT_OK; PT_EAGAIN (not its turn); NOT_SENT (nothing could be asked) */
    int queried; /* the list was asked for */
    int sent;    /* a refund request may have left */
};

static int keyless_review(struct pt_sync *s, struct pt_store *st, struct pt_refund *r,
                          const char *why);

/* An INIT refund whose turn it is not: it waits (rule 1). */
static int keyless_wait(struct pt_sync *s, struct pt_store *st, struct pt_refund *r, int *turn)
{
    struct pt_refund *all = NULL;
    int n = 0;
    int rc = refunds_of(st, r->charge_id, &all, &n);
    *turn = rc == PT_OK && my_turn(r, all, n);
    free(all);
    if (rc == PT_ETOOBIG)
        return keyless_review(s, st, r, "the charge has more refunds than payterm orders at once");
    if (rc != PT_OK || *turn)
        return rc;
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    p.next_attempt_at = now_ms(s) + s->opt.cfg->sync_interval_s * 1000;
    return refund_patch_now(st, r, &p, now_ms(s));
}

/* The list could not be read: nothing is sent; asked again later.  A
 * queued refund counts from its first try, so resolve_timeout_s ends a
 * list that never answers in review. */
static int keyless_unanswered(struct pt_sync *s, struct pt_store *st, struct pt_refund *r, int sent,
                              const struct pt_gw_result *res, struct keyless_out *ko)
{
    int64_t now = now_ms(s);
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    ko->verdict = NOT_SENT(sent) ? sent : PT_OK;
    count_sync(r->gateway, NOT_SENT(sent) ? PT_MS_NOT_SENT : PT_MS_AMBIGUOUS);
    p.next_attempt_at = NOT_SENT(sent) ? now + s->opt.cfg->sync_interval_s * 1000
                                       : now + backoff_ms(s, r->attempts + 1);
    if (r->state == PT_STATE_INIT)
        p.first_sent_at = now;
    if (sent == PT_OK)
        pt_log_warn("refund %s: %s's refund list not read (%s %s); nothing sent", r->refund_id,
                    r->gateway, res->code, res->message);
    int rc = refund_patch_now(st, r, &p, now);
    return rc == PT_OK ? refund_check_limits(s, st, r, now) : rc;
}

/* Rule 2, unexplained: review, nothing sent. */
static int keyless_review(struct pt_sync *s, struct pt_store *st, struct pt_refund *r,
                          const char *why)
{
    int64_t now = now_ms(s);
    char reason[PT_MESSAGE_MAX];
    snprintf(reason, sizeof reason, "refund_list_unexplained: %s", why);
    pt_log_warn("refund %s: %s; not sent, held for review", r->refund_id, why);
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    p.next_attempt_at = now + s->opt.cfg->sync_backoff_max_ms;
    int rc = pt_store_begin(st);
    if (rc == PT_OK && (rc = pt_store_refund_patch(st, r->id, &p, now)) == PT_OK)
        rc = refund_raise_review(st, r, reason, now);
    rc = finish(st, rc);
    return rc == PT_OK ? pt_store_refund_get_by_id(st, r->id, r) : rc;
}

/* Rule 2, bound: the listed refund e is r; its status decides, nothing is
 * sent.  A queued r passes through PROCESSING in the same transaction,
 * audited as bound (the refund state machine has no INIT -> SUCCESS). */
static int keyless_bound(struct pt_sync *s, struct pt_store *st, struct pt_refund *r,
                         const struct pt_gw_refund_entry *e)
{
    int64_t now = now_ms(s);
    struct pt_gw_result res;
    memset(&res, 0, sizeof res);
    res.outcome = e->status;
    res.amount = e->amount;
    snprintf(res.trade_no, sizeof res.trade_no, "%s", e->refund_no);
    snprintf(res.code, sizeof res.code, "%s", e->code);
    snprintf(res.message, sizeof res.message, "listed by the gateway as refund %s", e->refund_no);
    int rc = pt_store_begin(st);
    if (rc == PT_OK && r->state == PT_STATE_INIT)
        rc = pt_refund_transition(st, r, PT_STATE_PROCESSING, NULL, "bound", "sync", res.message,
                                  now);
    if (rc == PT_OK && e->status == PT_OUTCOME_AMBIGUOUS) {
        /* Ours, in a status we do not know: keep its number, ask again. */
        struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
        p.gateway_trade_no = e->refund_no;
        p.next_attempt_at = now + backoff_ms(s, r->attempts + 1);
        rc = r->state == PT_STATE_PROCESSING
                 ? pt_refund_transition(st, r, PT_STATE_UNKNOWN, &p, "gateway_ambiguous", "sync",
                                        e->code, now)
                 : pt_store_refund_patch(st, r->id, &p, now);
    } else if (rc == PT_OK) {
        rc = refund_apply(s, st, r, PT_GW_REFUND_QUERY, &res, now);
    }
    rc = finish(st, rc);
    return rc == PT_OK ? pt_store_refund_get_by_id(st, r->id, r) : rc;
}

/* True when refund id still is as *seen was read (before the list was
 * asked for): a resend decided on that list is still right.  (With one
 * daemon the charge's lock already ensures it; lanes sharing a PostgreSQL
 * store could otherwise resend on a list older than another lane's send.) */
static int unchanged_since(struct pt_store *st, const struct pt_refund *seen)
{
    struct pt_refund *cur = malloc(sizeof *cur);
    int same = cur && pt_store_refund_get_by_id(st, seen->id, cur) == PT_OK &&
               cur->state == seen->state && cur->attempts == seen->attempts &&
               cur->updated_at == seen->updated_at;
    free(cur);
    return same;
}

/* Marks r PROCESSING for its send (rule 1 checked again in the same
 * transaction, and for a resend that r is as the list found it);
 * PT_ESTATE when it may not go now. */
static int keyless_claim(struct pt_sync *s, struct pt_store *st, struct pt_refund *r, int resend,
                         int64_t now)
{
    struct pt_refund *all = NULL;
    int n = 0;
    int rc = pt_store_begin(st);
    if (rc)
        return rc;
    if (!resend && (rc = refunds_of(st, r->charge_id, &all, &n)) == PT_OK && !my_turn(r, all, n))
        rc = PT_ESTATE;
    if (rc == PT_ETOOBIG)
        rc = PT_ESTATE; /* cannot tell whose turn it is: not now (the list step reviews it) */
    if (resend && !unchanged_since(st, r))
        rc = PT_ESTATE;
    free(all);
    struct pt_charge_patch p = processing_patch(s, now, 1);
    if (rc == PT_OK)
        rc = pt_refund_transition(st, r, PT_STATE_PROCESSING, &p, resend ? "resend" : "send",
                                  "sync", "the gateway's refund list does not show it", now);
    if (rc != PT_OK) {
        pt_store_rollback(st);
        return rc == PT_EEXIST ? PT_ESTATE : rc;
    }
    return pt_store_commit(st);
}

/* Rule 2, nothing listed: r was never executed - sent (a resend only once
 * its last request cannot arrive any more, rule 3, and within max_attempts). */
static int keyless_send(struct pt_sync *s, struct pt_store *st, const struct pt_charge *c,
                        struct pt_refund *r, struct keyless_out *ko)
{
    int64_t now = now_ms(s);
    if (r->state == PT_STATE_PENDING)
        return keyless_review(s, st, r, "a pending refund the gateway does not list");
    int resend = r->state == PT_STATE_UNKNOWN;
    if (resend && r->attempts >= s->opt.cfg->sync_max_attempts) {
        struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
        p.next_attempt_at = now + s->opt.cfg->sync_backoff_max_ms;
        int rc = refund_patch_now(st, r, &p, now);
        return rc == PT_OK ? refund_check_limits(s, st, r, now) : rc;
    }
    int rc = keyless_claim(s, st, r, resend, now);
    if (rc == PT_ESTATE)
        return pt_store_refund_get_by_id(st, r->id, r); /* not its turn after all */
    if (rc)
        return rc;
    if (resend)
        pt_log_info("refund %s: the gateway does not list it; resending", r->refund_id);
    struct pt_gw_result res;
    int sent = refund_call(s, PT_GW_REFUND, c, r, &res);
    ko->sent = !NOT_SENT(sent);
    ko->verdict = NOT_SENT(sent) ? sent : PT_OK;
    now = now_ms(s);
    if ((rc = pt_store_begin(st)))
        return rc;
    rc = finish(st, refund_settle(s, st, r, resend, sent, &res, now));
    if (rc == PT_OK)
        rc = pt_store_refund_get_by_id(st, r->id, r);
    return rc == PT_OK ? refund_check_limits(s, st, r, now) : rc;
}

/* The list read: bind it and act (rule 2). */
static int keyless_decide(struct pt_sync *s, struct pt_store *st, const struct pt_charge *c,
                          struct pt_refund *r, const struct pt_gw_refund_list *list,
                          struct keyless_out *ko)
{
    struct pt_refund *all = NULL;
    int n = 0;
    int rc = refunds_of(st, c->id, &all, &n);
    if (rc == PT_ETOOBIG)
        return keyless_review(s, st, r, "the charge has more refunds than payterm binds at once");
    if (rc)
        return rc;
    struct pt_bind_result b;
    pt_refund_bind(r, all, n, list, &b);
    free(all);
    switch (b.verdict) {
    case PT_BIND_FOUND:
        return keyless_bound(s, st, r, &list->e[b.entry]);
    case PT_BIND_UNEXPLAINED:
        return keyless_review(s, st, r, b.why);
    case PT_BIND_NONE:
        break;
    }
    return keyless_send(s, st, c, r, ko);
}

/* The next refund of the charge waiting for its turn goes at once. */
static void keyless_next_turn(struct pt_sync *s, struct pt_store *st, const struct pt_refund *r)
{
    struct pt_refund *all = NULL;
    int n = 0;
    if (refunds_of(st, r->charge_id, &all, &n) != PT_OK)
        return;
    for (int i = 0; i < n; i++) {
        if (all[i].state != PT_STATE_INIT || all[i].id == r->id)
            continue;
        struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
        p.next_attempt_at = now_ms(s);
        if (refund_patch_now(st, &all[i], &p, now_ms(s)) == PT_OK)
            pt_sync_wake(s);
        break;
    }
    free(all);
}

static int keyless_locked(struct pt_sync *s, struct pt_store *st, const struct pt_charge *c,
                          struct pt_refund *r, struct keyless_out *ko)
{
    int rc = pt_store_refund_get_by_id(st, r->id, r); /* as committed now */
    if (rc || pt_state_is_final(r->state) || r->state == PT_STATE_PROCESSING)
        return rc; /* PROCESSING: an interrupted send, recover_refund's */
    if (r->state == PT_STATE_INIT) {
        int turn = 0;
        if ((rc = keyless_wait(s, st, r, &turn)) || !turn) {
            ko->verdict = rc ? ko->verdict : PT_EAGAIN;
            return rc;
        }
    }
    struct pt_gw_refund_list *list = malloc(sizeof *list);
    if (!list)
        return PT_ENOMEM;
    int sent = refund_exchange(s, PT_GW_REFUND_QUERY, c, r, NULL, list);
    ko->queried = 1;
    if (sent != PT_OK || list->res.outcome != PT_OUTCOME_SUCCESS)
        rc = keyless_unanswered(s, st, r, sent, &list->res, ko);
    else
        rc = keyless_decide(s, st, c, r, list, ko);
    free(list);
    return rc;
}

/*
 * One conversation about keyless refund r (INIT, UNKNOWN or PENDING) of
 * charge c with the gateway, under the charge's lock: its turn (rule 1),
 * the list (rule 2), then bound, reviewed or sent.  *r is re-read.
 */
static int keyless_step(struct pt_sync *s, struct pt_store *st, const struct pt_charge *c,
                        struct pt_refund *r, struct keyless_out *ko)
{
    memset(ko, 0, sizeof *ko);
    pthread_mutex_t *mu = charge_lock(s, c->order_id);
    pthread_mutex_lock(mu);
    int rc = keyless_locked(s, st, c, r, ko);
    int done = rc == PT_OK && (pt_state_is_final(r->state) || r->state == PT_STATE_PENDING);
    if (done && ko->queried)
        keyless_next_turn(s, st, r);
    pthread_mutex_unlock(mu);
    return rc;
}

int pt_sync_refund_now(void *p, struct pt_store *st, const struct pt_charge *c, struct pt_refund *r,
                       int *verdict)
{
    struct keyless_out ko;
    int rc = keyless_step(p, st, c, r, &ko);
    if (verdict)
        *verdict = ko.verdict;
    return rc;
}

/* A keyless refund of the drain (INIT, UNKNOWN or PENDING). */
static int drain_keyless(struct pt_sync *s, struct pt_store *st, struct pt_refund *r,
                         struct pt_drain_stats *stats)
{
    struct pt_charge c;
    struct keyless_out ko;
    int rc = pt_store_charge_get_by_id(st, r->charge_id, &c);
    if (rc == PT_OK)
        rc = keyless_step(s, st, &c, r, &ko);
    if (rc == PT_OK) {
        stats->queries += ko.queried;
        stats->sent += ko.sent;
        stats->not_sent += NOT_SENT(ko.verdict);
    }
    return rc;
}

/* One pass over the due refunds, after the charges. */
static int drain_refunds(struct pt_sync *s, struct pt_store *st, const int *skip,
                         struct pt_drain_stats *stats)
{
    struct pt_refund *batch = malloc(sizeof *batch * DRAIN_BATCH);
    if (!batch)
        return PT_ENOMEM;
    int rc = PT_OK, down[PT_GW_MAX];
    memcpy(down, skip, sizeof down);
    int64_t cursor = 0;
    for (;;) {
        drain_step(s);
        int n = 0;
        if ((rc = pt_store_refunds_due(st, now_ms(s), cursor, DRAIN_BATCH, batch, &n)) || n == 0)
            break;
        for (int i = 0; i < n && rc == PT_OK; i++) {
            struct pt_refund *r = &batch[i];
            int g = gw_index(r->gateway);
            cursor = r->id;
            if (g < 0 || down[g])
                continue;
            stats->examined++;
            if (keyless(r->gateway) && r->state != PT_STATE_PROCESSING) {
                /* Never part of a run: one at a time per charge, its
                 * gateway's list first (the rules above). */
                rc = drain_keyless(s, st, r, stats);
                if (!pt_sync_reachable(s, r->gateway))
                    down[g] = 1;
                continue;
            }
            if (r->state == PT_STATE_INIT) {
                /* This refund and the queued ones right after it (gateways
                 * still reachable) go out as one run. */
                int k = 1;
                while (i + k < n && batch[i + k].state == PT_STATE_INIT &&
                       gw_index(batch[i + k].gateway) >= 0 &&
                       !down[gw_index(batch[i + k].gateway)] && !keyless(batch[i + k].gateway))
                    k++;
                stats->examined += k - 1;
                rc = send_queued_refunds(s, st, r, k, down, stats);
                i += k - 1;
                cursor = batch[i].id;
                continue;
            }
            struct pt_charge c;
            if ((rc = pt_store_charge_get_by_id(st, r->charge_id, &c)))
                break;
            switch (r->state) {
            case PT_STATE_PROCESSING:
                rc = recover_refund(s, st, r);
                cursor = r->id - 1; /* now UNKNOWN and due: resolved in this pass */
                break;
            case PT_STATE_UNKNOWN:
            case PT_STATE_PENDING:
                rc = resolve_refund(s, st, &c, r);
                stats->queries++;
                break;
            default:
                break;
            }
            if (!pt_sync_reachable(s, r->gateway))
                down[g] = 1;
        }
        if (rc)
            break;
    }
    free(batch);
    return rc;
}

int pt_sync_refund_claim(void *p, struct pt_store *st, struct pt_refund *r, int64_t now)
{
    struct pt_charge_patch pp = processing_patch(p, now, 1);
    return pt_refund_transition(st, r, PT_STATE_PROCESSING, &pp, "send", "sync", NULL, now);
}

void pt_sync_refund_send(void *p, const struct pt_charge *c, const struct pt_refund *r,
                         struct pt_online_send *out)
{
    out->verdict = refund_call(p, PT_GW_REFUND, c, r, &out->res);
}

int pt_sync_refund_settle(void *p, struct pt_store *st, const struct pt_charge *c,
                          struct pt_refund *r, const struct pt_online_send *sent)
{
    struct pt_sync *s = p;
    (void)c;
    int rc = refund_settle(s, st, r, 0, sent->verdict, &sent->res, now_ms(s));
    if (rc == PT_EEXIST || rc == PT_ESTATE)
        rc = PT_OK;
    if (rc == PT_OK)
        rc = pt_store_refund_get_by_id(st, r->id, r);
    return rc;
}

/* ---- peer key rotation (SPEC 8) ---------------------------------------------------------- */

/*
 * WeChat Pay rotates its platform key: a new certificate is published under
 * GET /v3/certificates, and from its switch on answers and notifications
 * carry its serial.  Downloads happen on this engine's threads because they
 * are gateway calls like any other (the same transport, timeouts and
 * reachability); storing what was downloaded is the daemon's business
 * (opt.keep_peer_cert).
 */

static int random_cb(void *ctx, void *buf, size_t len)
{
    const struct pt_platform *p = ctx;
    return p->random(p->ctx, buf, len);
}

/* Trusts the n certificates of a verified download and retires the
 * downloaded keys it no longer lists.  Returns how many were new. */
static int trust_certs(struct pt_sync *s, const struct pt_gateway *gw,
                       const struct pt_gw_config *cfg, const struct pt_gw_peer_cert *certs, int n,
                       int64_t now_s)
{
    char keep[PT_GW_MAX_PEER_KEYS][PT_GW_SERIAL_MAX], gone[PT_GW_MAX_PEER_KEYS][PT_GW_SERIAL_MAX];
    int added = 0;
    for (int i = 0; i < n; i++) {
        memcpy(keep[i], certs[i].serial, sizeof keep[i]);
        int known = pt_gw_keyring_has(cfg->peer_keys, certs[i].serial);
        struct pt_pk *pk = NULL;
        char err[PT_PK_ERR_MAX];
        int rc = pt_pk_load_mem("platform certificate", certs[i].pem, certs[i].pem_len, random_cb,
                                (void *)s->opt.platform, &pk, err, sizeof err);
        if (rc == PT_OK)
            rc = pt_gw_keyring_add(cfg->peer_keys, certs[i].serial, pk, certs[i].expire_s, 0);
        if (rc == PT_EEXIST)
            continue; /* configured: the operator's copy stays */
        if (rc != PT_OK) {
            pt_log_warn("%s: platform certificate %s not trusted: %s", gw->name, certs[i].serial,
                        pt_strerror(rc));
            continue;
        }
        if (known)
            continue;
        added++;
        pt_log_info("%s: platform certificate %s trusted (downloaded)", gw->name, certs[i].serial);
        if (s->opt.keep_peer_cert &&
            (rc = s->opt.keep_peer_cert(s->opt.ctx, gw->name, certs[i].serial, certs[i].pem,
                                        certs[i].pem_len)) != PT_OK)
            pt_log_warn("%s: platform certificate %s not stored (%s): it is trusted until the "
                        "daemon stops",
                        gw->name, certs[i].serial, pt_strerror(rc));
    }
    int ngone =
        pt_gw_keyring_retire(cfg->peer_keys, now_s, (const char(*)[PT_GW_SERIAL_MAX])keep, n, gone);
    for (int i = 0; i < ngone; i++) {
        pt_log_info("%s: platform certificate %s retired (expired, or no longer listed)", gw->name,
                    gone[i]);
        if (s->opt.keep_peer_cert)
            s->opt.keep_peer_cert(s->opt.ctx, gw->name, gone[i], NULL, 0);
    }
    return added;
}

/* One download of gateway i's peer certificates. */
static int refresh_keys(struct pt_sync *s, int i)
{
    const struct pt_gateway *gw = pt_gateway_at(i);
    const struct pt_gw_config *cfg = s->opt.gw[i];
    const struct pt_transport *t = s->opt.platform->transport;
    if (!gw || !cfg || !gw->build_keys || !gw->parse_keys || !cfg->peer_keys)
        return PT_OK; /* nothing rotates here */
    if (!t)
        return PT_ECONFIG;
    char n[33];
    nonce(s, n);
    struct pt_gw_env env = {.nonce = n};
    if (wall_ms(s, &env.now_ms) != PT_OK)
        return PT_ECLOCK; /* signed with the time, and certificates' validity is judged by it */
    struct pt_http_request req = {0};
    int rc = gw->build_keys(cfg, &env, &req);
    if (rc)
        return rc;
    struct pt_http_response resp = {0};
    rc = t->send(t->ctx, gw->name, &req, (int)s->opt.cfg->sync_request_timeout_ms, &resp);
    pt_http_request_free(&req);
    struct pt_gw_peer_cert certs[PT_GW_MAX_PEER_KEYS];
    int ncerts = 0;
    if (rc == PT_OK) {
        set_reach(s, gw->name, 1);
        rc = gw->parse_keys(cfg, &resp, &env, certs, PT_GW_MAX_PEER_KEYS, &ncerts);
        if (rc != PT_OK)
            pt_log_warn("%s: platform certificates refused (HTTP %d): %s", gw->name, resp.status,
                        pt_strerror(rc));
    } else if (rc == PT_ENOTSENT) {
        set_reach(s, gw->name, 0);
    }
    pt_http_response_free(&resp);
    if (rc == PT_OK) {
        int added = trust_certs(s, gw, cfg, certs, ncerts, env.now_ms / 1000);
        pt_log_debug("%s: platform certificates downloaded: %d listed, %d new, %d trusted",
                     gw->name, ncerts, added, pt_gw_keyring_count(cfg->peer_keys));
    } else if (rc == PT_ENOTSENT || rc == PT_ENOANSWER) {
        pt_log_warn("%s: platform certificates not downloaded: %s", gw->name, pt_strerror(rc));
    }
    pt_gw_peer_certs_free(certs, ncerts);
    return rc;
}

int pt_sync_refresh_keys(struct pt_sync *s)
{
    int first = PT_OK;
    for (int i = 0; i < pt_gateway_count(); i++) {
        int rc = refresh_keys(s, i);
        first = first ? first : rc;
        if (tl_drain == s)
            mark_progress(s);
    }
    return first;
}

/* True when a download for serial at gateway i may start now, and records
 * it: one per serial per PT_SYNC_KEYS_SERIAL_MS and one per gateway per
 * PT_SYNC_KEYS_ON_DEMAND_MS, so that forged messages under made-up serials
 * cost the gateway at most one request per half minute. */
static int may_download(struct pt_sync *s, int i, const char *serial)
{
    int64_t now = s->opt.platform->mono_ms(s->opt.platform->ctx);
    int ok = 0;
    pthread_mutex_lock(&s->keys_mu);
    int slot = 0;
    for (int k = 0; k < KEY_ATTEMPTS; k++) {
        struct key_attempt *a = &s->attempts[k];
        if (a->at_ms && a->gw == i && strcasecmp(a->serial, serial) == 0 &&
            now - a->at_ms < PT_SYNC_KEYS_SERIAL_MS)
            goto out;
        if (a->at_ms < s->attempts[slot].at_ms)
            slot = k; /* the oldest (or a free one) is reused */
    }
    if (s->last_on_demand[i] && now - s->last_on_demand[i] < PT_SYNC_KEYS_ON_DEMAND_MS)
        goto out;
    s->last_on_demand[i] = now;
    s->attempts[slot].gw = i;
    snprintf(s->attempts[slot].serial, sizeof s->attempts[slot].serial, "%s", serial);
    s->attempts[slot].at_ms = now ? now : 1;
    ok = 1;
out:
    pthread_mutex_unlock(&s->keys_mu);
    return ok;
}

/* A message (an answer, a notification) names a peer key serial nobody
 * trusts: one download first, so that a key the gateway has just switched
 * to verifies; the caller then verifies as usual, and refuses the message
 * when the serial is still unknown. */
static void learn_peer_key(struct pt_sync *s, const struct pt_gateway *gw,
                           const struct pt_gw_config *cfg, const struct pt_http_response *msg)
{
    if (!gw->peer_serial || !gw->build_keys || !cfg->peer_keys)
        return;
    const char *serial = gw->peer_serial(msg);
    if (!serial || !*serial || pt_gw_keyring_has(cfg->peer_keys, serial))
        return;
    /* The serial is the sender's word: only a plausible one is logged. */
    size_t len = strlen(serial);
    int plausible = len < PT_GW_SERIAL_MAX && strspn(serial, "0123456789abcdefABCDEF") == len;
    int i = gw_index(gw->name);
    if (i < 0 || !plausible || !may_download(s, i, serial)) {
        pt_log_debug(
            "%s: message under unknown key serial %s: no download now (not a serial, or one "
            "was made moments ago)",
            gw->name, plausible ? serial : "(not a serial)");
        return;
    }
    pt_log_info("%s: message under unknown key serial %s: downloading the platform certificates",
                gw->name, serial);
    refresh_keys(s, i);
}
