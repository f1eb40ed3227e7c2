/*
 * sync_refund.c - refunds (SPEC 5a, 7): sent, resolved and drained as charges are (sync.c), and the
 * refunds of a gateway without a refund key (2C2P), one at a time per charge.
 */
#include "sync_impl.h"

/* ---- refunds (SPEC 5a, 7) ------------------------------------------------------------ */

static const char *refund_op_name(enum pt_gw_refund_op op)
{
    return op == PT_GW_REFUND ? "refund" : "refund query";
}

/*
 * As pt__sync_call(), for refund r of charge c: the answer into *res, or - for a
 * gateway's list of the charge's refunds (list not NULL, op
 * PT_GW_REFUND_QUERY of a keyless gateway) - into *list.
 */
/* A refund's request (refund, query) or its charge's refund list, as an
 * exchange (sync.c). */
struct refund_call {
    struct pt__sync_exchange x; /* first */
    struct pt_sync *s;
    enum pt_gw_refund_op op;
    const struct pt_charge *c;
    const struct pt_refund *r;
    struct pt_gw_result *res;
    struct pt_gw_refund_list *list; /* NULL: not the list */
};

static int refund_supported(const struct pt__sync_exchange *x, const struct pt_gateway *gw)
{
    const struct refund_call *k = (const struct refund_call *)x;
    return gw->build_refund && gw->parse_refund && (!k->list || gw->parse_refund_list);
}

static int refund_build(const struct pt__sync_exchange *x, const struct pt_gateway *gw,
                        const struct pt_gw_config *cfg, struct pt_gw_env *env,
                        struct pt_http_request *req)
{
    const struct refund_call *k = (const struct refund_call *)x;
    env->random = k->s->opt.platform->random;
    env->random_ctx = k->s->opt.platform->ctx;
    return gw->build_refund(cfg, k->op, k->c, k->r, env, req);
}

static const struct pt_gw_result *refund_parse(const struct pt__sync_exchange *x,
                                               const struct pt_gateway *gw,
                                               const struct pt_gw_config *cfg,
                                               const struct pt_http_response *resp)
{
    const struct refund_call *k = (const struct refund_call *)x;
    if (k->list) {
        gw->parse_refund_list(cfg, k->c, resp, k->list);
        return &k->list->res;
    }
    gw->parse_refund(cfg, k->op, k->c, k->r, resp, k->res);
    return k->res;
}

static int refund_exchange(struct pt_sync *s, enum pt_gw_refund_op op, const struct pt_charge *c,
                           const struct pt_refund *r, struct pt_gw_result *res,
                           struct pt_gw_refund_list *list)
{
    struct pt_gw_result ignored;
    struct refund_call k = {
        .x = {.gateway = c->gateway,
              .what = list ? "refund list" : refund_op_name(op),
              .id_key = "refund",
              .id = r->refund_id,
              .supported = refund_supported,
              .build = refund_build,
              .parse = refund_parse},
        .s = s,
        .op = op,
        .c = c,
        .r = r,
        .res = res ? res : &ignored,
        .list = list,
    };
    memset(k.res, 0, sizeof *k.res);
    if (list) {
        memset(list, 0, sizeof *list);
        list->res.outcome = PT_OUTCOME_AMBIGUOUS; /* until a list is read */
    }
    return pt__sync_exchange(s, &k.x);
}

int pt__sync_refund_call(struct pt_sync *s, enum pt_gw_refund_op op, const struct pt_charge *c,
                         const struct pt_refund *r, struct pt_gw_result *res)
{
    return refund_exchange(s, op, c, r, res, NULL);
}

int pt__sync_refund_raise_review(struct pt_store *st, struct pt_refund *r, const char *reason,
                                 int64_t now)
{
    if (r->review)
        return PT_OK;
    int rc = pt_refund_review(st, r, 1, reason, "sync", now);
    return rc == PT_EEXIST ? PT_OK : rc;
}

/* ---- a refund as the engine's job (sync_job.c) --------------------------------------- */

static struct pt_refund *refund_of(const struct pt__job *j)
{
    return j->obj;
}

static int refund_transition(struct pt_store *st, const struct pt__job *j, enum pt_state to,
                             const struct pt_charge_patch *p, const char *cause, const char *detail,
                             int64_t now)
{
    return pt_refund_transition(st, refund_of(j), to, p, cause, "sync", detail, now);
}

static int refund_reread(struct pt_store *st, const struct pt__job *j)
{
    return pt_store_refund_get_by_id(st, j->id, refund_of(j));
}

static int refund_review(struct pt_store *st, const struct pt__job *j, const char *reason,
                         int64_t now)
{
    return pt__sync_refund_raise_review(st, refund_of(j), reason, now);
}

static int refund_send(struct pt_sync *s, const struct pt__job *j, struct pt_gw_result *res)
{
    return pt__sync_refund_call(s, PT_GW_REFUND, j->charge, refund_of(j), res);
}

static int refund_query(struct pt_sync *s, const struct pt__job *j, struct pt_gw_result *res)
{
    return pt__sync_refund_call(s, PT_GW_REFUND_QUERY, j->charge, refund_of(j), res);
}

static int refund_decide(struct pt_sync *s, struct pt_store *st, const struct pt__job *j, int sent,
                         const struct pt_gw_result *res, int64_t now);

/* The gateway's refund number only from an answer that is believed: an
 * ambiguous one may be about another refund. */
static void refund_answer(const struct pt__job *j, const struct pt_gw_result *r,
                          struct pt_charge_patch *p)
{
    (void)j;
    if (r->trade_no[0] && r->outcome != PT_OUTCOME_AMBIGUOUS && r->outcome != PT_OUTCOME_NOT_FOUND)
        p->gateway_trade_no = r->trade_no;
}

/* The money went back, but not the amount asked for: it is SUCCESS (the
 * gateway said so) and an operator looks at it. */
static int refund_mismatch(const struct pt__job *j, const struct pt_gw_result *r, char *reason,
                           size_t cap)
{
    const struct pt_refund *rf = refund_of(j);
    if (r->amount <= 0 || r->amount == rf->amount)
        return 0;
    snprintf(reason, cap, "amount_mismatch: gateway refunded %lld, asked %lld",
             (long long)r->amount, (long long)rf->amount);
    return 1;
}

static int refund_succeeded(struct pt_store *st, const struct pt__job *j,
                            const struct pt_charge_patch *p, const char *detail, int64_t now)
{
    return refund_transition(st, j, PT_STATE_SUCCESS, p, "gateway_refunded", detail, now);
}

static int64_t refund_poll_at(const struct pt_sync *s, const struct pt__job *j, int64_t now)
{
    (void)j;
    return now + s->opt.cfg->sync_interval_s * 1000;
}

static int64_t refund_after_send(const struct pt_sync *s, const struct pt__job *j, int64_t now,
                                 int64_t next)
{
    return pt__sync_after_send(s, refund_of(j), now, next);
}

static struct pt__job refund_job_at(void *rows, int i);
static int refunds_due(struct pt_store *st, int64_t now, int64_t after_id, int max, void *rows,
                       int *n);
static int refund_load_charge(struct pt_store *st, const struct pt__job *j, struct pt_charge *c);
static int refund_own_path(const struct pt__job *j);
static int refund_walk_own(struct pt_sync *s, struct pt_store *st, const struct pt__job *j,
                           struct pt_drain_stats *stats);
static int refund_due_resolve(struct pt_sync *s, struct pt_store *st, const struct pt__job *j);

static const struct pt__job_kind refund_kind = {
    .what = "refund",
    .request = "refund request",
    .refused = "refused by the gateway",
    .needs_charge = 1,
    .transition = refund_transition,
    .patch = pt_store_refund_patch,
    .reread = refund_reread,
    .review = refund_review,
    .send = refund_send,
    .query = refund_query,
    .decide = refund_decide,
    .settle = pt__sync_job_settle,
    .answer = refund_answer,
    .mismatch = refund_mismatch,
    .succeeded = refund_succeeded,
    .closed = NULL, /* a refund closed is a refund refused */
    .poll_at = refund_poll_at,
    .after_send = refund_after_send,
    .size = sizeof(struct pt_refund),
    .job = refund_job_at,
    .due = refunds_due,
    .claim = pt_store_refunds_claim,
    .load_charge = refund_load_charge,
    .own_path = refund_own_path,
    .walk_own = refund_walk_own,
    .due_resolve = refund_due_resolve,
};

struct pt__job pt__sync_refund_job(struct pt_refund *r, const struct pt_charge *c)
{
    return (struct pt__job){.kind = &refund_kind,
                            .obj = r,
                            .charge = c,
                            .id = r->id,
                            .name = r->refund_id,
                            .gateway = r->gateway,
                            .state = &r->state,
                            .attempts = &r->attempts,
                            .review = &r->review,
                            .first_sent_at = &r->first_sent_at};
}

/* Moves r according to an adapter outcome.  Inside a transaction. */
int pt__sync_refund_apply(struct pt_sync *s, struct pt_store *st, struct pt_refund *r,
                          enum pt_gw_refund_op op, const struct pt_gw_result *res, int64_t now)
{
    struct pt__job j = pt__sync_refund_job(r, NULL);
    return pt__sync_job_apply(s, st, &j, op == PT_GW_REFUND, res, now);
}

/* What became of a refund request (inside a transaction). */
static int refund_settle(struct pt_sync *s, struct pt_store *st, struct pt_refund *r, int resend,
                         int sent, const struct pt_gw_result *res, int64_t now)
{
    struct pt__job j = pt__sync_refund_job(r, NULL);
    return pt__sync_job_settle(s, st, &j, resend, sent, res, now);
}

static int refund_check_limits(struct pt_sync *s, struct pt_store *st, struct pt_refund *r,
                               int64_t now)
{
    struct pt__job j = pt__sync_refund_job(r, NULL);
    return pt__sync_job_check_limits(s, st, &j, now);
}

/* UNKNOWN or PENDING: ask the gateway by refund_id, never send a new one. */
static int resolve_refund(struct pt_sync *s, struct pt_store *st, const struct pt_charge *c,
                          struct pt_refund *r)
{
    struct pt__job j = pt__sync_refund_job(r, c);
    return pt__sync_job_resolve(s, st, &j);
}

/* The gateway has no refund under this refund_id.  Once the first request
 * cannot arrive any more, it never will: the same refund_id is sent again
 * (the gateway's own refund key: never two refunds). */
static int refund_decide(struct pt_sync *s, struct pt_store *st, const struct pt__job *j, int sent,
                         const struct pt_gw_result *res, int64_t now)
{
    struct pt_refund *r = refund_of(j);
    if (sent != PT_OK || res->outcome != PT_OUTCOME_NOT_FOUND || r->state != PT_STATE_UNKNOWN)
        return UNDECIDED;
    int64_t grace = 3 * s->opt.cfg->sync_request_timeout_ms;
    if (!r->first_sent_at || now - r->first_sent_at < grace ||
        r->attempts >= s->opt.cfg->sync_max_attempts)
        return UNDECIDED;
    pt_log_info("refund %s: gateway has no record, resending with the same refund id",
                r->refund_id);
    int rc = pt__sync_job_send(s, st, j);
    return rc ? rc : pt__sync_job_check_limits(s, st, j, pt__sync_now_ms(s));
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
int64_t pt__sync_after_send(const struct pt_sync *s, const struct pt_refund *r, int64_t now,
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
        rc = pt__sync_finish(st, pt_store_refund_patch(st, r->id, p, now));
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
    p.next_attempt_at = pt__sync_now_ms(s) + s->opt.cfg->sync_interval_s * 1000;
    return refund_patch_now(st, r, &p, pt__sync_now_ms(s));
}

/* The list could not be read: nothing is sent; asked again later.  A
 * queued refund counts from its first try, so resolve_timeout_s ends a
 * list that never answers in review. */
static int keyless_unanswered(struct pt_sync *s, struct pt_store *st, struct pt_refund *r, int sent,
                              const struct pt_gw_result *res, struct keyless_out *ko)
{
    int64_t now = pt__sync_now_ms(s);
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    ko->verdict = NOT_SENT(sent) ? sent : PT_OK;
    pt__sync_count_sync(r->gateway, NOT_SENT(sent) ? PT_MS_NOT_SENT : PT_MS_AMBIGUOUS);
    p.next_attempt_at = NOT_SENT(sent) ? now + s->opt.cfg->sync_interval_s * 1000
                                       : now + pt__sync_backoff_ms(s, r->attempts + 1);
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
    int64_t now = pt__sync_now_ms(s);
    char reason[PT_MESSAGE_MAX];
    snprintf(reason, sizeof reason, "refund_list_unexplained: %s", why);
    pt_log_warn("refund %s: %s; not sent, held for review", r->refund_id, why);
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    p.next_attempt_at = now + s->opt.cfg->sync_backoff_max_ms;
    int rc = pt_store_begin(st);
    if (rc == PT_OK && (rc = pt_store_refund_patch(st, r->id, &p, now)) == PT_OK)
        rc = pt__sync_refund_raise_review(st, r, reason, now);
    rc = pt__sync_finish(st, rc);
    return rc == PT_OK ? pt_store_refund_get_by_id(st, r->id, r) : rc;
}

/* Rule 2, bound: the listed refund e is r; its status decides, nothing is
 * sent.  A queued r passes through PROCESSING in the same transaction,
 * audited as bound (the refund state machine has no INIT -> SUCCESS). */
static int keyless_bound(struct pt_sync *s, struct pt_store *st, struct pt_refund *r,
                         const struct pt_gw_refund_entry *e)
{
    int64_t now = pt__sync_now_ms(s);
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
        p.next_attempt_at = now + pt__sync_backoff_ms(s, r->attempts + 1);
        rc = r->state == PT_STATE_PROCESSING
                 ? pt_refund_transition(st, r, PT_STATE_UNKNOWN, &p, "gateway_ambiguous", "sync",
                                        e->code, now)
                 : pt_store_refund_patch(st, r->id, &p, now);
    } else if (rc == PT_OK) {
        rc = pt__sync_refund_apply(s, st, r, PT_GW_REFUND_QUERY, &res, now);
    }
    rc = pt__sync_finish(st, rc);
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
    struct pt_charge_patch p = pt__sync_processing_patch(s, now, 1);
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
    int64_t now = pt__sync_now_ms(s);
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
    int sent = pt__sync_refund_call(s, PT_GW_REFUND, c, r, &res);
    ko->sent = !NOT_SENT(sent);
    ko->verdict = NOT_SENT(sent) ? sent : PT_OK;
    now = pt__sync_now_ms(s);
    if ((rc = pt_store_begin(st)))
        return rc;
    rc = pt__sync_finish(st, refund_settle(s, st, r, resend, sent, &res, now));
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
        p.next_attempt_at = pt__sync_now_ms(s);
        if (refund_patch_now(st, &all[i], &p, pt__sync_now_ms(s)) == PT_OK)
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
    pthread_mutex_t *mu = pt__sync_charge_lock(s, c->order_id);
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
/* ---- a refund in the drain's walk and its runs (sync_job.c) ------------------------- */

static struct pt__job refund_job_at(void *rows, int i)
{
    return pt__sync_refund_job(&((struct pt_refund *)rows)[i], NULL);
}

static int refunds_due(struct pt_store *st, int64_t now, int64_t after_id, int max, void *rows,
                       int *n)
{
    return pt_store_refunds_due(st, now, after_id, max, rows, n);
}

static int refund_load_charge(struct pt_store *st, const struct pt__job *j, struct pt_charge *c)
{
    return pt_store_charge_get_by_id(st, refund_of(j)->charge_id, c);
}

/* A keyless gateway's refund is never part of a run: one at a time per
 * charge, its gateway's list first (the rules above); only an interrupted
 * send is recovered as any other. */
static int refund_own_path(const struct pt__job *j)
{
    return keyless(j->gateway) && *j->state != PT_STATE_PROCESSING;
}

static int refund_walk_own(struct pt_sync *s, struct pt_store *st, const struct pt__job *j,
                           struct pt_drain_stats *stats)
{
    return drain_keyless(s, st, refund_of(j), stats);
}

static int refund_due_resolve(struct pt_sync *s, struct pt_store *st, const struct pt__job *j)
{
    struct pt_charge c;
    int rc = refund_load_charge(st, j, &c);
    return rc ? rc : resolve_refund(s, st, &c, refund_of(j));
}

int pt__sync_drain_refunds(struct pt_sync *s, struct pt_store *st, const int *skip,
                           struct pt_drain_stats *stats)
{
    int down[PT_GW_MAX];
    memcpy(down, skip, sizeof down);
    return pt__sync_job_drain(s, st, &refund_kind, down, stats);
}

int pt_sync_refund_claim(void *p, struct pt_store *st, struct pt_refund *r, int64_t now)
{
    struct pt__job j = pt__sync_refund_job(r, NULL);
    return pt__sync_job_claim(p, st, &j, now);
}

void pt_sync_refund_send(void *p, const struct pt_charge *c, const struct pt_refund *r,
                         struct pt_online_send *out)
{
    out->verdict = pt__sync_refund_call(p, PT_GW_REFUND, c, r, &out->res);
}

int pt_sync_refund_settle(void *p, struct pt_store *st, const struct pt_charge *c,
                          struct pt_refund *r, const struct pt_online_send *sent)
{
    struct pt__job j = pt__sync_refund_job(r, c);
    return pt__sync_job_settle_online(p, st, &j, sent);
}
