/*
 * sync.c - the sync engine (see sync.h).
 *
 * Reading order: a charge is one kind of job (charge_kind); the steps every
 * kind of money movement goes through - a send (commit PROCESSING, send,
 * classify), resolve by query, an answer onto the state machine - are
 * written once in sync_job.c.  Here: what is a charge's own (a code's
 * deadline, a cancel carried out after its send, the reverse of an expired
 * payment code), expire_code() ends a QR code or payment page nobody paid
 * in time, pt_sync_drain() walks the due charges.  Refunds are the other
 * kind (sync_refund.c), notifications are taken in sync_notify.c, the
 * gateways' keys rotated in sync_keys.c; what these files share is
 * sync_impl.h.
 */
#include "sync_impl.h"

/* Set while this thread runs pt_sync_drain. */
_Thread_local struct pt_sync *pt__sync_tl_drain;

pthread_mutex_t *pt__sync_charge_lock(struct pt_sync *s, const char *order_id)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)order_id; *p; p++)
        h = (h ^ *p) * 16777619u;
    return &s->charge_mu[h % CHARGE_LOCKS];
}

void pt__sync_mark_progress(struct pt_sync *s)
{
    const struct pt_platform *p = s->opt.platform;
    atomic_store(&s->drain_progress, p->mono_ms ? p->mono_ms(p->ctx) : 1);
}

void pt__sync_drain_step(struct pt_sync *s)
{
    pt__sync_mark_progress(s);
    if (s->opt.between)
        s->opt.between(s->opt.ctx);
}

/* ---- small helpers ----------------------------------------------------------- */

int64_t pt__sync_now_ms(const struct pt_sync *s)
{
    return s->opt.platform->now_ms(s->opt.platform->ctx);
}

/* The wall clock for a gateway (SPEC 17): PT_ECLOCK while it is not
 * trusted, and then nothing that carries a time leaves the device. */
int pt__sync_wall_ms(const struct pt_sync *s, int64_t *ms)
{
    return pt_platform_wall(s->opt.platform, ms);
}

static int clock_trusted(const struct pt_sync *s)
{
    int64_t ms;
    return pt__sync_wall_ms(s, &ms) == PT_OK;
}

int pt__sync_gw_index(const char *name)
{
    return pt_metric_gateway_index(name);
}

const struct pt_gw_config *pt__sync_gw_cfg(const struct pt_sync *s, const char *name)
{
    int i = pt__sync_gw_index(name);
    return i < 0 ? NULL : s->opt.gw[i];
}

void pt__sync_count_sync(const char *gateway, enum pt_metric_sync what)
{
    int i = pt__sync_gw_index(gateway);
    if (i >= 0)
        atomic_fetch_add(&pt_metrics.sync_attempts[i][what], 1);
}

void pt__sync_set_reach(struct pt_sync *s, const char *gateway, int up)
{
    int i = pt__sync_gw_index(gateway);
    if (i < 0)
        return;
    atomic_store(&s->last_probe[i], pt__sync_now_ms(s));
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
    int i = pt__sync_gw_index(gateway);
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
int64_t pt__sync_backoff_ms(const struct pt_sync *s, int attempts)
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

void pt__sync_nonce(const struct pt_sync *s, char out[33])
{
    unsigned char r[16];
    s->opt.platform->random(s->opt.platform->ctx, r, sizeof r);
    pt_hex_encode(r, sizeof r, out);
}

/* Commits the current transaction, or rolls back on an error code. */
int pt__sync_finish(struct pt_store *st, int rc)
{
    if (rc == PT_OK || rc == PT_EEXIST || rc == PT_ESTATE)
        return pt_store_commit(st);
    pt_store_rollback(st);
    return rc;
}

/* Applies a patch (no state change) in a transaction of its own. */
int pt__sync_commit_patch(struct pt_store *st, int64_t id, const struct pt_charge_patch *p,
                          int64_t now)
{
    int rc = pt_store_begin(st);
    return rc ? rc : pt__sync_finish(st, pt_store_charge_patch(st, id, p, now));
}

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
    int64_t lane = pt__sync_now_ms(s), apart = env->now_ms - lane;
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
int pt__sync_exchange(struct pt_sync *s, const struct pt__sync_exchange *x)
{
    const struct pt_gateway *gw = pt_gateway_find(x->gateway);
    const struct pt_gw_config *cfg = pt__sync_gw_cfg(s, x->gateway);
    const struct pt_transport *t = s->opt.platform->transport;
    if (!gw || !cfg || !t)
        return PT_ECONFIG;
    if (x->supported && !x->supported(x, gw))
        return PT_EUNSUPPORTED;
    char n[33];
    pt__sync_nonce(s, n);
    struct pt_gw_env env = {.nonce = n};
    if (pt__sync_wall_ms(s, &env.now_ms) != PT_OK)
        return PT_ECLOCK; /* every gateway's request carries the time: not sent */
    struct pt_http_request req = {0};
    int rc = x->build(x, gw, cfg, &env, &req);
    if (rc)
        return rc;
    struct pt_http_response resp = {0};
    rc = t->send(t->ctx, x->gateway, &req, (int)s->opt.cfg->sync_request_timeout_ms, &resp);
    pt_http_request_free(&req);
    if (pt__sync_tl_drain == s)
        pt__sync_mark_progress(s);
    if (rc == PT_OK) {
        pt__sync_set_reach(s, x->gateway, 1);
        pt__sync_learn_peer_key(s, gw, cfg, &resp);
        const struct pt_gw_result *what = x->parse(x, gw, cfg, &resp);
        pt_log_debug("%s %s %s=%s: HTTP %d -> %s %s", x->gateway, x->what, x->id_key, x->id,
                     resp.status, pt_outcome_name(what->outcome), what->code);
    } else if (rc == PT_ENOTSENT) {
        pt__sync_set_reach(s, x->gateway, 0);
    }
    pt_http_response_free(&resp);
    return rc;
}

/* A charge's request (pay, query, cancel, close) as an exchange. */
struct charge_call {
    struct pt__sync_exchange x; /* first */
    struct pt_sync *s;
    enum pt_gw_op op;
    const struct pt_charge *c;
    struct pt_gw_result *res;
};

static int charge_build(const struct pt__sync_exchange *x, const struct pt_gateway *gw,
                        const struct pt_gw_config *cfg, struct pt_gw_env *env,
                        struct pt_http_request *req)
{
    const struct charge_call *k = (const struct charge_call *)x;
    if (k->op == PT_GW_PAY)
        set_expiry(k->s, k->c, env);
    return gw->build(cfg, k->op, k->c, env, req);
}

static const struct pt_gw_result *charge_parse(const struct pt__sync_exchange *x,
                                               const struct pt_gateway *gw,
                                               const struct pt_gw_config *cfg,
                                               const struct pt_http_response *resp)
{
    const struct charge_call *k = (const struct charge_call *)x;
    gw->parse(cfg, k->op, k->c, resp, k->res);
    return k->res;
}

int pt__sync_call(struct pt_sync *s, enum pt_gw_op op, const struct pt_charge *c,
                  struct pt_gw_result *res)
{
    static const char *const names[] = {"pay", "query", "cancel", "close"};
    struct charge_call k = {
        .x = {.gateway = c->gateway,
              .what = names[op],
              .id_key = "order",
              .id = c->order_id,
              .build = charge_build,
              .parse = charge_parse},
        .s = s,
        .op = op,
        .c = c,
        .res = res,
    };
    memset(res, 0, sizeof *res);
    return pt__sync_exchange(s, &k.x);
}

/* ---- outcomes onto the state machine ----------------------------------------------- */

int pt__sync_raise_review(struct pt_store *st, struct pt_charge *c, const char *reason,
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

/* ---- a charge as the engine's job (sync_job.c) --------------------------------------- */

static struct pt_charge *charge_of(const struct pt__job *j)
{
    return j->obj;
}

static int charge_transition(struct pt_store *st, const struct pt__job *j, enum pt_state to,
                             const struct pt_charge_patch *p, const char *cause, const char *detail,
                             int64_t now)
{
    return pt_charge_transition(st, charge_of(j), to, p, cause, "sync", detail, now);
}

static int charge_reread(struct pt_store *st, const struct pt__job *j)
{
    return pt_store_charge_get_by_id(st, j->id, charge_of(j));
}

static int charge_review(struct pt_store *st, const struct pt__job *j, const char *reason,
                         int64_t now)
{
    return pt__sync_raise_review(st, charge_of(j), reason, "sync", now);
}

static int charge_send(struct pt_sync *s, const struct pt__job *j, struct pt_gw_result *res)
{
    return pt__sync_call(s, PT_GW_PAY, charge_of(j), res);
}

static void charge_answer(const struct pt__job *j, const struct pt_gw_result *r,
                          struct pt_charge_patch *p)
{
    (void)j;
    if (r->trade_no[0])
        p->gateway_trade_no = r->trade_no;
    if (r->action_url[0])
        p->action_url = r->action_url;
}

static int charge_mismatch(const struct pt__job *j, const struct pt_gw_result *r, char *reason,
                           size_t cap)
{
    return answer_mismatch(charge_of(j), r, reason, cap);
}

static int charge_succeeded(struct pt_store *st, const struct pt__job *j,
                            const struct pt_charge_patch *p, const char *detail, int64_t now)
{
    return pt_charge_gateway_succeeded(st, charge_of(j), p, "sync", detail, now);
}

/* PROCESSING -> CANCELED is not a transition: a pay answered "closed"
 * leaves the charge UNKNOWN and the next query settles it. */
static int charge_closed(struct pt_store *st, const struct pt__job *j, struct pt_charge_patch *p,
                         const char *detail, int64_t now)
{
    if (*j->state != PT_STATE_PROCESSING)
        return charge_transition(st, j, PT_STATE_CANCELED, p, "gateway_canceled", detail, now);
    p->next_attempt_at = now;
    return charge_transition(st, j, PT_STATE_UNKNOWN, p, "gateway_closed", detail, now);
}

static int64_t charge_poll_at(const struct pt_sync *s, const struct pt__job *j, int64_t now)
{
    return now + poll_ms(s, charge_of(j), now);
}

static int64_t charge_poll_cap(const struct pt_sync *s, const struct pt__job *j, int64_t at,
                               int64_t now)
{
    return poll_by_deadline(s, charge_of(j), at, now);
}

static int charge_query(struct pt_sync *s, const struct pt__job *j, struct pt_gw_result *res)
{
    return pt__sync_call(s, PT_GW_QUERY, charge_of(j), res);
}

static int settle(struct pt_sync *s, struct pt_store *st, struct pt_charge *c, int resend, int sent,
                  const struct pt_gw_result *res, int64_t now);
static int charge_decide(struct pt_sync *s, struct pt_store *st, const struct pt__job *j, int sent,
                         const struct pt_gw_result *res, int64_t now);

static int charge_settle(struct pt_sync *s, struct pt_store *st, const struct pt__job *j,
                         int resend, int sent, const struct pt_gw_result *res, int64_t now)
{
    return settle(s, st, charge_of(j), resend, sent, res, now);
}

static struct pt__job charge_job_at(void *rows, int i);
static int charges_due(struct pt_store *st, int64_t now, int64_t after_id, int max, void *rows,
                       int *n);
static int charge_alone_in_run(const struct pt__job *j);
static int charge_too_old(const struct pt_sync *s, const struct pt__job *j, int64_t now);
static int charge_expire(struct pt_store *st, const struct pt__job *j, int64_t now);
static int charge_ready(struct pt_store *st, const struct pt__job *j);
static int charge_skipped(struct pt_sync *s, struct pt_store *st, const struct pt__job *j,
                          struct pt_drain_stats *stats);
static int charge_due_resolve(struct pt_sync *s, struct pt_store *st, const struct pt__job *j);

static const struct pt__job_kind charge_kind = {
    .what = "charge",
    .request = "request",
    .refused = "declined by the gateway",
    .transition = charge_transition,
    .patch = pt_store_charge_patch,
    .reread = charge_reread,
    .review = charge_review,
    .send = charge_send,
    .query = charge_query,
    .decide = charge_decide,
    .settle = charge_settle,
    .answer = charge_answer,
    .mismatch = charge_mismatch,
    .succeeded = charge_succeeded,
    .closed = charge_closed,
    .poll_at = charge_poll_at,
    .poll_cap = charge_poll_cap,
    .size = sizeof(struct pt_charge),
    .job = charge_job_at,
    .due = charges_due,
    .claim = pt_store_charges_claim,
    .alone_in_run = charge_alone_in_run,
    .too_old = charge_too_old,
    .expire = charge_expire,
    .ready = charge_ready,
    .skipped = charge_skipped,
    .due_resolve = charge_due_resolve,
};

struct pt__job pt__sync_charge_job(struct pt_charge *c)
{
    return (struct pt__job){.kind = &charge_kind,
                            .obj = c,
                            .id = c->id,
                            .name = c->order_id,
                            .gateway = c->gateway,
                            .state = &c->state,
                            .attempts = &c->attempts,
                            .review = &c->review,
                            .first_sent_at = &c->first_sent_at};
}

/* Moves c according to an adapter outcome.  Inside a transaction. */
int pt__sync_apply(struct pt_sync *s, struct pt_store *st, struct pt_charge *c, enum pt_gw_op op,
                   const struct pt_gw_result *r, int64_t now)
{
    struct pt__job j = pt__sync_charge_job(c);
    return pt__sync_job_apply(s, st, &j, op == PT_GW_PAY, r, now);
}

/* ---- sending ------------------------------------------------------------------------ */

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

/* Records what became of a pay request (inside a transaction), then
 * carries out a cancel requested while it was on its way. */
static int settle(struct pt_sync *s, struct pt_store *st, struct pt_charge *c, int resend, int sent,
                  const struct pt_gw_result *res, int64_t now)
{
    struct pt__job j = pt__sync_charge_job(c);
    struct pt_charge_patch none = PT_CHARGE_PATCH_NONE;
    int rc;
    if (sent == PT_ECANCELED) /* marked in a run, its cancel requested before its turn came */
        rc = pt_charge_transition(st, c, PT_STATE_INIT, &none, "not_sent", "sync",
                                  "its cancel was requested before it was sent", now);
    else
        rc = pt__sync_job_settle(s, st, &j, resend, sent, res, now);
    if (rc == PT_OK || rc == PT_EEXIST) {
        int grc = pt_store_charge_get_by_id(st, c->id, c);
        if (grc == PT_OK && c->cancel_requested)
            grc = carry_out_cancel(st, c, now);
        if (grc)
            rc = grc;
    }
    return rc;
}

/* The PROCESSING patch: sent now, and not picked up by anyone else until
 * `sends` requests of request_timeout_ms each must be over. */
struct pt_charge_patch pt__sync_processing_patch(const struct pt_sync *s, int64_t now, int sends)
{
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    p.first_sent_at = now;
    p.next_attempt_at = now + sends * s->opt.cfg->sync_request_timeout_ms + IN_FLIGHT_MARGIN_MS;
    return p;
}

/* Sends the pay request for c (INIT, or UNKNOWN for a resend); *c is
 * re-read.  A charge whose cancel was requested is never sent again (SPEC
 * 18; the store refuses it too). */
static int send_pay(struct pt_sync *s, struct pt_store *st, struct pt_charge *c)
{
    if (c->cancel_requested)
        return PT_OK;
    struct pt__job j = pt__sync_charge_job(c);
    return pt__sync_job_send(s, st, &j);
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
    int64_t now = pt__sync_now_ms(s);
    int rc = pt_store_begin(st);
    if (rc)
        return rc;
    struct pt_charge_patch e = expired_patch();
    rc = pt_charge_transition(st, c, PT_STATE_FAILED, &e, "offline_expired", "sync", NULL, now);
    return pt__sync_finish(st, rc);
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
        int g = pt__sync_gw_index(gateway);
        if (g < 0 || !skip[g] || max_age <= 0)
            continue;
        int64_t cursor = 0;
        for (;;) {
            pt__sync_drain_step(s);
            int n = 0;
            int64_t now = pt__sync_now_ms(s);
            /* Expired: now - created_at > max_age, i.e. created before
             * now - max_age. */
            if ((rc = pt_store_charges_queued_before(st, gateway, method, now - max_age * 1000,
                                                     cursor, DRAIN_BATCH, batch, &n)) ||
                n == 0)
                break;
            for (int i = 0; i < n && rc == PT_OK; i++) {
                cursor = batch[i].id;
                if (offline_expired(s, &batch[i], pt__sync_now_ms(s))) {
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

/* Asks the gateway to cancel/close/reverse c; commits the outcome. */
static int send_cancel(struct pt_sync *s, struct pt_store *st, struct pt_charge *c, const char *why)
{
    struct pt_gw_result res;
    int sent = pt__sync_call(s, PT_GW_CANCEL, c, &res);
    int64_t now = pt__sync_now_ms(s);
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
            pt__sync_count_sync(c->gateway, PT_MS_CANCELED);
            if (c->state == PT_STATE_PROCESSING)
                rc = pt_charge_transition(st, c, PT_STATE_UNKNOWN, &p, why, "sync", NULL, now);
            if (rc == PT_OK || rc == PT_EEXIST)
                rc = pt_charge_transition(st, c, PT_STATE_CANCELED, &p, why, "sync", res.code, now);
        } else {
            rc = pt__sync_apply(s, st, c, PT_GW_CANCEL, &res, now);
        }
    } else {
        struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
        p.next_attempt_at = now + pt__sync_backoff_ms(s, c->attempts);
        rc = pt_store_charge_patch(st, c->id, &p, now);
    }
    rc = pt__sync_finish(st, rc);
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
    const struct pt_gw_config *cfg = pt__sync_gw_cfg(s, c->gateway);
    const struct pt_gw_method *m = pt_gateway_method(gw, c->method);
    if (m && m->payment_code && cfg && cfg->barcode_timeout_s > 0)
        window_ms = (int64_t)cfg->barcode_timeout_s * 1000;
    return window_ms > 0 && c->first_sent_at && now - c->first_sent_at < window_ms;
}

static int barcode_expired(const struct pt_sync *s, const struct pt_charge *c, int64_t now)
{
    /* The customer's code is no longer valid: an unpaid or unknown order
     * is reversed so it cannot complete behind our back. */
    const struct pt_gw_config *cfg = pt__sync_gw_cfg(s, c->gateway);
    const struct pt_gw_method *m = pt_gateway_lookup(c->gateway, c->method);
    return m && m->payment_code && cfg && cfg->barcode_timeout_s > 0 && c->first_sent_at &&
           now - c->first_sent_at >= (int64_t)cfg->barcode_timeout_s * 1000;
}

static int check_limits(struct pt_sync *s, struct pt_store *st, struct pt_charge *c, int64_t now)
{
    struct pt__job j = pt__sync_charge_job(c);
    return pt__sync_job_check_limits(s, st, &j, now);
}

static int resolve_locked(struct pt_sync *s, struct pt_store *st, struct pt_charge *c);

/* resolve_locked() with the charge's gateway lock held, on the charge as
 * committed once it is (another thread's close may have ended it). */
static int resolve(struct pt_sync *s, struct pt_store *st, struct pt_charge *c)
{
    pthread_mutex_t *mu = pt__sync_charge_lock(s, c->order_id);
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
    if (deadline && pt__sync_now_ms(s) >= deadline &&
        (c->state == PT_STATE_PENDING || c->state == PT_STATE_UNKNOWN))
        return expire_code(s, st, c);
    struct pt__job j = pt__sync_charge_job(c);
    return pt__sync_job_resolve(s, st, &j);
}

/* What a query's answer decides for a charge beyond the state machine. */
static int charge_decide(struct pt_sync *s, struct pt_store *st, const struct pt__job *j, int sent,
                         const struct pt_gw_result *res, int64_t now)
{
    struct pt_charge *c = charge_of(j);
    int rc;
    if (sent == PT_OK && res->outcome == PT_OUTCOME_NOT_FOUND && c->state == PT_STATE_UNKNOWN) {
        /* The gateway has no such order: our send never arrived. */
        if (resend_allowed(s, c, now) && c->attempts < s->opt.cfg->sync_max_attempts) {
            pt_log_info("charge %s: gateway has no record, resending with the same key",
                        c->order_id);
            rc = send_pay(s, st, c);
            return rc ? rc : check_limits(s, st, c, pt__sync_now_ms(s));
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
            return pt__sync_finish(st, rc);
        }
    }
    if (sent == PT_OK && (res->outcome == PT_OUTCOME_PENDING || c->state == PT_STATE_PENDING) &&
        res->outcome != PT_OUTCOME_SUCCESS && res->outcome != PT_OUTCOME_DECLINED &&
        res->outcome != PT_OUTCOME_CANCELED && barcode_expired(s, c, now)) {
        /* Still WAIT_BUYER_PAY (or unresolved) after the auth code expired:
         * reverse it so it cannot complete behind our back. */
        pt_log_info("charge %s: unpaid after barcode_timeout_s, canceling", c->order_id);
        return send_cancel(s, st, c, "barcode_timeout");
    }
    return UNDECIDED;
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
    pt__sync_count_sync(c->gateway, PT_MS_CANCELED);
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
    int rc = pt__sync_commit_patch(st, c->id, &p, now);
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
    return rc ? rc : pt__sync_finish(st, end_expired(st, c, res, how, now));
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
    int sent = pt__sync_call(s, PT_GW_QUERY, c, &res), rc;
    int64_t now = pt__sync_now_ms(s);
    if (sent == PT_OK && unpayable(s, c, &res, by_expiry, now))
        return commit_expired(
            st, c, &res, by_expiry ? "expiry confirmed by query" : "closed, confirmed by query",
            now);
    if (sent == PT_OK &&
        (res.outcome == PT_OUTCOME_SUCCESS || res.outcome == PT_OUTCOME_DECLINED)) {
        if ((rc = pt_store_begin(st)))
            return rc;
        return pt__sync_finish(st, pt__sync_apply(s, st, c, PT_GW_QUERY, &res, now));
    }
    pt__sync_count_sync(c->gateway, NOT_SENT(sent) ? PT_MS_NOT_SENT : PT_MS_AMBIGUOUS);
    int64_t wait =
        NOT_SENT(sent) ? s->opt.cfg->sync_interval_s * 1000 : pt__sync_backoff_ms(s, c->attempts);
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
    if (gw && pt__sync_now_ms(s) - c->first_sent_at >= gw->close_min_age_s * 1000)
        closed = pt__sync_call(s, PT_GW_CLOSE, c, &res);
    int64_t now = pt__sync_now_ms(s);
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

/* ---- a charge in the drain's walk and its runs (sync_job.c) ------------------------- */

static struct pt__job charge_job_at(void *rows, int i)
{
    return pt__sync_charge_job(&((struct pt_charge *)rows)[i]);
}

static int charges_due(struct pt_store *st, int64_t now, int64_t after_id, int max, void *rows,
                       int *n)
{
    return pt_store_charges_due(st, now, after_id, max, rows, n);
}

/* A payment-code charge is marked alone, just before its request leaves:
 * one in doubt past barcode_timeout_s is reversed, not sent again, so one
 * marked in a run but never sent would be a sale lost to a crash
 * (restart_mid_drain.sh); alone, only the one on its way can be in doubt. */
static int charge_alone_in_run(const struct pt__job *j)
{
    const struct pt_charge *c = charge_of(j);
    const struct pt_gw_method *m = pt_gateway_lookup(c->gateway, c->method);
    return m && m->payment_code;
}

static int charge_too_old(const struct pt_sync *s, const struct pt__job *j, int64_t now)
{
    return offline_expired(s, charge_of(j), now);
}

static int charge_expire(struct pt_store *st, const struct pt__job *j, int64_t now)
{
    struct pt_charge_patch e = expired_patch();
    return pt_charge_transition(st, charge_of(j), PT_STATE_FAILED, &e, "offline_expired", "sync",
                                NULL, now);
}

/* Moved while it waited for its turn in the run (a client's cancel finds
 * no trade for a charge not sent yet and ends it): not sent, not ours to
 * settle; its cancel requested: not sent, carried out by its settle. */
static int charge_ready(struct pt_store *st, const struct pt__job *j)
{
    struct pt_charge cur;
    int grc = pt_store_charge_get_by_id(st, j->id, &cur);
    if (grc != PT_OK || cur.state != PT_STATE_PROCESSING)
        return NOT_OURS;
    if (!cur.cancel_requested)
        return PT_OK;
    *charge_of(j) = cur;
    return PT_ECANCELED;
}

/* A gateway skipped in this pass: its queued charges still expire on time. */
static int charge_skipped(struct pt_sync *s, struct pt_store *st, const struct pt__job *j,
                          struct pt_drain_stats *stats)
{
    struct pt_charge *c = charge_of(j);
    if (c->state != PT_STATE_INIT || !offline_expired(s, c, pt__sync_now_ms(s)))
        return PT_OK;
    stats->expired++;
    return expire_now(s, st, c);
}

/* A cancel asked for while it was on its way is carried out now that
 * nothing of ours is (SPEC 18). */
static int charge_due_resolve(struct pt_sync *s, struct pt_store *st, const struct pt__job *j)
{
    struct pt_charge *c = charge_of(j);
    return c->cancel_requested ? pt_sync_cancel_now(s, st, c) : resolve(s, st, c);
}

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
    pthread_mutex_init(&s->recon_mu, NULL);
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
    pthread_mutex_destroy(&s->recon_mu);
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
                                  .reconcile = pt_sync_reconcile,
                                  .wake = pt_sync_wake,
                                  .ctx = s};
}

/* A payment code erased on this (API) thread: the background thread owes a
 * truncating checkpoint and may be asleep. */
void pt__sync_wake_to_wipe(struct pt_sync *s)
{
    if (pt_store_wipe_due())
        pt_sync_wake(s);
}

int pt_sync_claim(void *p, struct pt_store *st, struct pt_charge *c, int64_t now)
{
    struct pt__job j = pt__sync_charge_job(c);
    return pt__sync_job_claim(p, st, &j, now);
}

void pt_sync_send(void *p, const struct pt_charge *c, struct pt_online_send *out)
{
    out->verdict = pt__sync_call(p, PT_GW_PAY, c, &out->res);
}

int pt_sync_settle(void *p, struct pt_store *st, struct pt_charge *c,
                   const struct pt_online_send *sent)
{
    struct pt__job j = pt__sync_charge_job(c);
    return pt__sync_job_settle_online(p, st, &j, sent);
}

int pt_sync_payment_link(void *p, struct pt_store *st, struct pt_charge *c)
{
    struct pt_sync *s = p;
    if (c->cancel_requested)
        return PT_OK; /* being canceled: no code is issued again */
    int64_t deadline = code_deadline(s, c);
    if (deadline && pt__sync_now_ms(s) >= deadline)
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
    if (pt__sync_call(s, PT_GW_PAY, c, &res) != PT_OK || res.outcome != PT_OUTCOME_PENDING ||
        !res.action_url[0])
        return PT_OK;
    struct pt_charge_patch p2 = PT_CHARGE_PATCH_NONE;
    p2.action_url = res.action_url;
    int rc = pt__sync_commit_patch(st, c->id, &p2, pt__sync_now_ms(s));
    return rc ? rc : pt_store_charge_get_by_id(st, c->id, c);
}

static int cancel_now_locked(struct pt_sync *s, struct pt_store *st, struct pt_charge *c);

int pt_sync_cancel_now(void *p, struct pt_store *st, struct pt_charge *c)
{
    struct pt_sync *s = p;
    pthread_mutex_t *mu = pt__sync_charge_lock(s, c->order_id);
    pthread_mutex_lock(mu);
    /* As committed now: a query or a notification that held the lock
     * before may have ended it (then no close or reverse is sent). */
    int rc = pt_store_charge_get_by_id(st, c->id, c);
    if (rc == PT_OK && c->state == PT_STATE_INIT) {
        /* Never sent (its run gave it back): nothing to ask the gateway. */
        int64_t now = pt__sync_now_ms(s);
        if ((rc = pt_store_begin(st)) == PT_OK)
            rc = pt__sync_finish(st, pt_charge_transition(st, c, PT_STATE_CANCELED, NULL,
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
            int64_t t = pt__sync_now_ms(s);
            if ((rc = pt_store_begin(st)))
                return rc;
            if (c->state == PT_STATE_PROCESSING)
                rc = pt_charge_transition(st, c, PT_STATE_UNKNOWN, NULL, "canceled_by_client",
                                          "api", NULL, t);
            if (rc == PT_OK || rc == PT_EEXIST)
                rc = pt_charge_transition(st, c, PT_STATE_CANCELED, NULL, "canceled_by_client",
                                          "api", "the gateway has no trade for this order", t);
            return pt__sync_finish(st, rc);
        }
    }
    int rc = send_cancel(s, st, c, "canceled_by_client");
    pt__sync_wake_to_wipe(s);
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
            pt_store_gateway_back(st, pt_metric_gateway_name(i), pt__sync_now_ms(s), &n) == PT_OK &&
            n)
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
    struct pt_sync *bound = pt__sync_tl_drain;
    pt__sync_tl_drain = s;
    /* The skipped gateways' expired charges first, read by age.  When every
     * gateway is skipped the walk below would do nothing else (a skipped
     * gateway's charges only expire), so it is not made: the pass reads no
     * queued charge that has not expired. */
    rc = expire_skipped(s, st, skip, batch, stats, &stats->next_expiry);
    free(batch);
    if (rc == PT_OK && !all_skipped)
        rc = pt__sync_job_drain(s, st, &charge_kind, skip, stats);
    if (rc == PT_OK)
        rc = pt__sync_drain_refunds(s, st, skip, stats);
    int64_t refunds_due = 0;
    if (rc == PT_OK && all_skipped)
        stats->next_due = stats->next_expiry; /* nothing else of theirs is due to us */
    else if (rc == PT_OK)
        rc = pt_store_charges_next_due(st, &stats->next_due);
    if (rc == PT_OK)
        rc = pt_store_refunds_next_due(st, &refunds_due);
    if (rc == PT_OK && refunds_due > 0 && (!stats->next_due || refunds_due < stats->next_due))
        stats->next_due = refunds_due;
    pt__sync_tl_drain = bound;
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
    pt__sync_set_reach(s, pt_metric_gateway_name(i), rc == PT_OK);
    return rc == PT_OK;
}

int pt_sync_probe_one(void *p, const char *gateway)
{
    int i = pt__sync_gw_index(gateway);
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
    int i = pt__sync_gw_index(gateway);
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
    int i = pt__sync_gw_index(gateway);
    if (i < 0)
        return;
    pthread_mutex_lock(&s->trial_mu);
    s->trial[i] = 0;
    pthread_cond_broadcast(&s->trial_cv);
    pthread_mutex_unlock(&s->trial_mu);
}

int64_t pt_sync_last_probe(struct pt_sync *s, const char *gateway)
{
    int i = pt__sync_gw_index(gateway);
    return i < 0 ? 0 : atomic_load(&s->last_probe[i]);
}

int pt_sync_probe_all(struct pt_sync *s, int64_t max_age_ms)
{
    int down = 0;
    int64_t now = pt__sync_now_ms(s);
    for (int i = 0; i < pt_gateway_count(); i++)
        if (s->opt.gw[i] && now - atomic_load(&s->last_probe[i]) >= max_age_ms) {
            down += !probe(s, i);
            if (pt__sync_tl_drain == s)
                pt__sync_mark_progress(s);
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
                if (pt__sync_tl_drain == s)
                    pt__sync_mark_progress(s);
            }
    }
    return down;
}

void pt_sync_forget_reach(struct pt_sync *s, const char *gateway)
{
    int i = pt__sync_gw_index(gateway);
    if (i >= 0 && atomic_exchange(&s->reach[i], REACH_UNKNOWN) == REACH_DOWN)
        atomic_store(&pt_metrics.online[i], 1);
}

void pt_sync_bind_thread(struct pt_sync *s)
{
    pt__sync_tl_drain = s;
}
