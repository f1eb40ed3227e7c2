/*
 * sync_job.c - the engine's steps that are the same for every kind of money
 * movement: a send (PROCESSING committed first, the outcome after), what
 * became of it, an answer onto the state machine, the limits that call an
 * operator, an interrupted send.  What differs between a charge and a
 * refund is its kind (struct pt__job_kind: sync.c, sync_refund.c).
 */
#include "sync_impl.h"

static int64_t capped(const struct pt_sync *s, const struct pt__job *j, int64_t at, int64_t now)
{
    return j->kind->poll_cap ? j->kind->poll_cap(s, j, at, now) : at;
}

static int64_t after_send(const struct pt_sync *s, const struct pt__job *j, int64_t now,
                          int64_t next)
{
    return j->kind->after_send ? j->kind->after_send(s, j, now, next) : next;
}

/* A refusal: FAILED, unless it was never sent (no answer is about it). */
static int refused(struct pt_store *st, const struct pt__job *j, const struct pt_gw_result *r,
                   struct pt_charge_patch *p, const char *detail, int64_t now)
{
    pt__sync_count_sync(j->gateway, PT_MS_DECLINED);
    p->error_code = r->code[0] ? r->code : "declined";
    p->error_message = r->message[0] ? r->message : j->kind->refused;
    if (*j->state == PT_STATE_INIT)
        return PT_OK;
    int rc = j->kind->transition(st, j, PT_STATE_FAILED, p, "gateway_declined", detail, now);
    if (rc == PT_OK && r->review)
        rc = j->kind->review(st, j, r->code[0] ? r->code : "gateway_review", now);
    return rc;
}

/* The gateway does not know it, or its answer is not to be believed: ask
 * again after a backoff; an ambiguous send counts toward max_attempts. */
static int in_doubt(struct pt_sync *s, struct pt_store *st, const struct pt__job *j, int sending,
                    const struct pt_gw_result *r, struct pt_charge_patch *p, const char *detail,
                    int64_t now)
{
    const struct pt__job_kind *k = j->kind;
    pt__sync_count_sync(j->gateway,
                        r->outcome == PT_OUTCOME_NOT_FOUND ? PT_MS_NOT_FOUND : PT_MS_AMBIGUOUS);
    if (sending)
        p->attempts_add = 1;
    int64_t next = now + pt__sync_backoff_ms(s, *j->attempts + p->attempts_add);
    p->next_attempt_at = capped(s, j, sending ? after_send(s, j, now, next) : next, now);
    int rc = *j->state == PT_STATE_PROCESSING
                 ? k->transition(st, j, PT_STATE_UNKNOWN, p, "gateway_ambiguous", detail, now)
                 : k->patch(st, j->id, p, now);
    if (rc == PT_OK)
        rc = k->reread(st, j);
    if (rc == PT_OK && r->review)
        rc = k->review(st, j, r->code[0] ? r->code : "gateway_review", now);
    return rc;
}

int pt__sync_job_apply(struct pt_sync *s, struct pt_store *st, const struct pt__job *j, int sending,
                       const struct pt_gw_result *r, int64_t now)
{
    const struct pt__job_kind *k = j->kind;
    /* Every answer is read into one of the outcomes (gateway.h). */
    assert(r->outcome == PT_OUTCOME_SUCCESS || r->outcome == PT_OUTCOME_DECLINED ||
           r->outcome == PT_OUTCOME_PENDING || r->outcome == PT_OUTCOME_CANCELED ||
           r->outcome == PT_OUTCOME_NOT_FOUND || r->outcome == PT_OUTCOME_AMBIGUOUS);
    assert(pt_store_in_txn(st)); /* the answer is recorded in the caller's transaction */
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    k->answer(j, r, &p);
    char detail[PT_SHORT_MAX + PT_MESSAGE_MAX + 8];
    snprintf(detail, sizeof detail, "%s%s%s", r->code, r->code[0] && r->message[0] ? ": " : "",
             r->message);
    char reason[PT_MESSAGE_MAX];
    int rc;
    switch (r->outcome) {
    case PT_OUTCOME_SUCCESS:
        pt__sync_count_sync(j->gateway, PT_MS_SUCCESS);
        /* The money moved either way; if the gateway does not say it moved
         * exactly what was asked, fulfilment waits for an operator (SPEC
         * section 5: every answer is checked). */
        if (k->mismatch(j, r, reason, sizeof reason) && (rc = k->review(st, j, reason, now)))
            return rc;
        return k->succeeded(st, j, &p, detail, now);
    case PT_OUTCOME_CANCELED:
        if (!k->closed)
            return refused(st, j, r, &p, detail, now);
        pt__sync_count_sync(j->gateway, PT_MS_CANCELED);
        return k->closed(st, j, &p, detail, now);
    case PT_OUTCOME_DECLINED:
        return refused(st, j, r, &p, detail, now);
    case PT_OUTCOME_PENDING:
        pt__sync_count_sync(j->gateway, PT_MS_PENDING);
        p.next_attempt_at = capped(s, j, k->poll_at(s, j, now), now);
        rc = k->transition(st, j, PT_STATE_PENDING, &p, "gateway_pending", detail, now);
        if (rc == PT_EEXIST) /* still waiting (for the customer): ask later */
            rc = k->patch(st, j->id, &p, now);
        if ((rc == PT_OK || rc == PT_ESTATE) && r->review) /* (WeChat's ABNORMAL refund) */
            rc = k->review(st, j, r->code[0] ? r->code : "gateway_review", now);
        return rc;
    case PT_OUTCOME_NOT_FOUND:
    case PT_OUTCOME_AMBIGUOUS:
        return in_doubt(s, st, j, sending, r, &p, detail, now);
    }
    return PT_OK;
}

int pt__sync_job_settle(struct pt_sync *s, struct pt_store *st, const struct pt__job *j, int resend,
                        int sent, const struct pt_gw_result *res, int64_t now)
{
    const struct pt__job_kind *k = j->kind;
    assert(pt_store_in_txn(st)); /* the outcome is recorded in the caller's transaction */
    struct pt_charge_patch q = PT_CHARGE_PATCH_NONE;
    /* Provably not sent this time.  A first send goes back to the queue; a
     * resend does not, because an earlier attempt may have arrived. */
    enum pt_state back = resend ? PT_STATE_UNKNOWN : PT_STATE_INIT;
    if (NOT_SENT(sent)) {
        pt__sync_count_sync(j->gateway, PT_MS_NOT_SENT);
        q.next_attempt_at = now + s->opt.cfg->sync_interval_s * 1000;
        return k->transition(
            st, j, back, &q, "not_sent",
            sent == PT_ECLOCK ? "the wall clock is not trusted yet" : "gateway unreachable", now);
    }
    if (sent == PT_ENOANSWER) {
        pt__sync_count_sync(j->gateway, PT_MS_AMBIGUOUS);
        q.attempts_add = 1;
        q.next_attempt_at = after_send(s, j, now, now + pt__sync_backoff_ms(s, *j->attempts + 1));
        return k->transition(st, j, PT_STATE_UNKNOWN, &q, "no_answer",
                             "sent, no answer (timeout or connection lost)", now);
    }
    if (sent == PT_OK)
        return pt__sync_job_apply(s, st, j, 1, res, now);
    /* The request could not even be built (a key that does not sign: the
     * log names the key and its file; an amount the gateway cannot
     * represent, queued before the intake refused such amounts): nothing
     * left the device. */
    int units = sent == PT_ERANGE;
    char why[PT_GW_BUILD_ERROR_MAX], msg[PT_MESSAGE_MAX];
    pt_log_error("%s %s: cannot build the %s %s: %s", k->what, j->name, j->gateway, k->request,
                 pt_gw_build_error(pt__sync_gw_cfg(s, j->gateway), sent, why, sizeof why));
    snprintf(msg, sizeof msg, "the gateway %s could not be built; check the configuration",
             k->request);
    q.next_attempt_at = now + s->opt.cfg->sync_backoff_max_ms;
    q.error_code = units ? "amount_not_representable" : "gateway_config";
    q.error_message = units ? "the gateway cannot represent this amount in its own units" : msg;
    int rc = k->transition(st, j, back, &q, "not_sent", pt_strerror(sent), now);
    return rc == PT_OK ? k->review(st, j, q.error_code, now) : rc;
}

int pt__sync_job_send(struct pt_sync *s, struct pt_store *st, const struct pt__job *j)
{
    const struct pt__job_kind *k = j->kind;
    assert(j->charge || !k->needs_charge);
    /* Its request leaves only after its PROCESSING is durable (SPEC 4). */
    assert(!pt_store_in_txn(st));
    int64_t now = pt__sync_now_ms(s);
    int resend = *j->state != PT_STATE_INIT;
    int rc = pt_store_begin(st);
    if (rc)
        return rc;
    struct pt_charge_patch p = pt__sync_processing_patch(s, now, 1);
    rc = k->transition(st, j, PT_STATE_PROCESSING, &p, resend ? "resend" : "send", NULL, now);
    if (rc) /* someone else moved it (another thread, a notification): not ours */
        return pt__sync_finish(st, rc);
    if ((rc = pt_store_commit(st)))
        return rc;

    struct pt_gw_result res;
    int sent = k->send(s, j, &res);
    now = pt__sync_now_ms(s);
    if ((rc = pt_store_begin(st)))
        return rc;
    rc = pt__sync_finish(st, k->settle(s, st, j, resend, sent, &res, now));
    return rc == PT_OK ? k->reread(st, j) : rc;
}

int pt__sync_job_claim(struct pt_sync *s, struct pt_store *st, const struct pt__job *j, int64_t now)
{
    struct pt_charge_patch p = pt__sync_processing_patch(s, now, 1);
    return j->kind->transition(st, j, PT_STATE_PROCESSING, &p, "send", NULL, now);
}

int pt__sync_job_settle_online(struct pt_sync *s, struct pt_store *st, const struct pt__job *j,
                               const struct pt_online_send *sent)
{
    int rc = j->kind->settle(s, st, j, 0, sent->verdict, &sent->res, pt__sync_now_ms(s));
    if (rc == PT_EEXIST || rc == PT_ESTATE)
        rc = PT_OK; /* someone else moved it meanwhile: its state stands */
    return rc == PT_OK ? j->kind->reread(st, j) : rc;
}

int pt__sync_job_check_limits(struct pt_sync *s, struct pt_store *st, const struct pt__job *j,
                              int64_t now)
{
    if (*j->review || pt_state_is_final(*j->state))
        return PT_OK;
    const char *reason = NULL;
    if (*j->attempts >= s->opt.cfg->sync_max_attempts)
        reason = "max_attempts";
    else if (*j->first_sent_at &&
             now - *j->first_sent_at >= s->opt.cfg->sync_resolve_timeout_s * 1000)
        reason = "resolve_timeout";
    if (!reason)
        return PT_OK;
    int rc = pt_store_begin(st);
    return rc ? rc : pt__sync_finish(st, j->kind->review(st, j, reason, now));
}

int pt__sync_job_resolve(struct pt_sync *s, struct pt_store *st, const struct pt__job *j)
{
    const struct pt__job_kind *k = j->kind;
    assert(j->charge || !k->needs_charge);
    assert(!pt_store_in_txn(st)); /* no transaction waits on a gateway */
    struct pt_gw_result res;
    int sent = k->query(s, j, &res);
    int64_t now = pt__sync_now_ms(s);
    if (sent == PT_OK && res.outcome == PT_OUTCOME_NOT_FOUND && *j->state == PT_STATE_UNKNOWN)
        pt__sync_count_sync(j->gateway, PT_MS_NOT_FOUND); /* our send never arrived */
    int rc = k->decide(s, st, j, sent, &res, now);
    if (rc != UNDECIDED)
        return rc;
    if ((rc = pt_store_begin(st)))
        return rc;
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    if (sent == PT_OK && res.outcome == PT_OUTCOME_NOT_FOUND) {
        /* A definite answer, not an ambiguous send: it does not count
         * toward max_attempts (resolve_timeout_s still ends the wait). */
        p.next_attempt_at = capped(s, j, now + pt__sync_backoff_ms(s, *j->attempts + 1), now);
        rc = k->patch(st, j->id, &p, now);
    } else if (sent == PT_OK) {
        rc = pt__sync_job_apply(s, st, j, 0, &res, now);
    } else {
        p.next_attempt_at = NOT_SENT(sent) ? now + s->opt.cfg->sync_interval_s * 1000
                                           : now + pt__sync_backoff_ms(s, *j->attempts);
        p.next_attempt_at = capped(s, j, p.next_attempt_at, now);
        pt__sync_count_sync(j->gateway, NOT_SENT(sent) ? PT_MS_NOT_SENT : PT_MS_AMBIGUOUS);
        rc = k->patch(st, j->id, &p, now);
    }
    rc = pt__sync_finish(st, rc);
    if (rc == PT_OK)
        rc = k->reread(st, j);
    return rc == PT_OK ? pt__sync_job_check_limits(s, st, j, now) : rc;
}

int pt__sync_job_recover(struct pt_sync *s, struct pt_store *st, const struct pt__job *j)
{
    int64_t now = pt__sync_now_ms(s);
    int rc = pt_store_begin(st);
    if (rc)
        return rc;
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    p.next_attempt_at = after_send(s, j, now, now);
    p.attempts_add = 1;
    rc = j->kind->transition(st, j, PT_STATE_UNKNOWN, &p, "interrupted_send",
                             "the send was interrupted (restart or timeout)", now);
    return pt__sync_finish(st, rc);
}

/* ---- runs of queued ones, and the drain's walk ---------------------------------------- */

/* Arms rows[i..) of a run in the current transaction, as many as RUN_MAX
 * and the rules allow; armed[] gets their jobs, *i moves past them. */
static int arm_run(struct pt_sync *s, struct pt_store *st, const struct pt__job_kind *k, void *rows,
                   int n, int *i, int *skip, struct pt_charge *cs, struct pt__job *armed, int *out,
                   struct pt_drain_stats *stats, int64_t now)
{
    /* The rows this run may arm (another lane of a shared store may be
     * arming some right now: passed over, not waited for). */
    int64_t ids[RUN_MAX];
    unsigned char taken[RUN_MAX];
    int first = *i, span = n - *i < RUN_MAX ? n - *i : RUN_MAX;
    for (int x = 0; x < span; x++)
        ids[x] = k->job(rows, first + x).id;
    int rc = span > 0 ? k->claim(st, ids, span, taken) : PT_OK;
    int alone = 0; /* one that goes alone was armed: the run ends */
    for (; rc == PT_OK && *i < n && *out < RUN_MAX && !alone; (*i)++) {
        struct pt__job j = k->job(rows, *i);
        if (*i - first < span && !taken[*i - first])
            continue; /* another lane's now */
        int one = k->alone_in_run && k->alone_in_run(&j);
        if (one && *out > 0)
            break; /* it goes in a run of its own, next */
        if (k->too_old && k->too_old(s, &j, now)) {
            rc = k->expire(st, &j, now);
            stats->expired++;
        } else if (!skip[pt__sync_gw_index(j.gateway)]) {
            if (k->needs_charge) {
                if ((rc = k->load_charge(st, &j, &cs[*out])))
                    break;
                j.charge = &cs[*out];
            }
            /* Not picked up elsewhere until the sends before it and its own
             * must be over. */
            struct pt_charge_patch p = pt__sync_processing_patch(s, now, *out + 1);
            rc = k->transition(st, &j, PT_STATE_PROCESSING, &p, "send", NULL, now);
            if (rc == PT_OK) {
                armed[(*out)++] = j;
                alone = one;
            }
        }
        if (rc == PT_EEXIST || rc == PT_ESTATE)
            rc = PT_OK; /* someone else moved it: not ours to send */
    }
    return rc;
}

/*
 * Queued charges and refunds go in runs of up to RUN_MAX: one commit marks
 * a run PROCESSING (or a charge FAILED, expired), its requests go out one
 * after another, and the next commit holds their outcomes and marks the
 * next run - one durable commit per run, where one at a time took one
 * each.  Every request still leaves only after its PROCESSING is durable.
 * A crash while a run is out leaves its members PROCESSING: after the
 * restart each is an interrupted send, queried, and the ones the gateway
 * never saw are sent again under the same key (the gateway's idempotency:
 * never two captures, never two refunds).  One of a gateway found
 * unreachable earlier in its run is provably not sent and goes back to the
 * queue.  Some go alone (alone_in_run: a payment code).
 */
int pt__sync_job_send_queued(struct pt_sync *s, struct pt_store *st, const struct pt__job_kind *k,
                             void *rows, int n, int *skip, struct pt_drain_stats *stats)
{
    struct pt_gw_result *res = malloc(sizeof *res * RUN_MAX);
    struct pt_charge *cs = k->needs_charge ? malloc(sizeof *cs * RUN_MAX) : NULL;
    if (!res || (k->needs_charge && !cs)) {
        free(res);
        free(cs);
        return PT_ENOMEM;
    }
    struct pt__job armed[RUN_MAX];
    int verdict[RUN_MAX];
    int rc = PT_OK, i = 0, out = 0; /* out: the last run, its outcomes not committed */
    while (rc == PT_OK && (i < n || out > 0)) {
        int64_t now = pt__sync_now_ms(s);
        if ((rc = pt_store_begin(st)))
            break;
        for (int x = 0; x < out && rc == PT_OK; x++) {
            if (verdict[x] == NOT_OURS)
                continue;
            rc = k->settle(s, st, &armed[x], 0, verdict[x], &res[x], now);
            if (rc == PT_EEXIST || rc == PT_ESTATE)
                rc = PT_OK;
        }
        out = 0;
        if (rc == PT_OK)
            rc = arm_run(s, st, k, rows, n, &i, skip, cs, armed, &out, stats, now);
        if ((rc = pt__sync_finish(st, rc)))
            break;
        for (int x = 0; x < out; x++) {
            const struct pt__job *j = &armed[x];
            int g = pt__sync_gw_index(j->gateway);
            if (skip[g]) {
                verdict[x] = PT_ENOTSENT; /* its gateway refused one before it */
                stats->not_sent++;
                continue;
            }
            /* Moved while it waited for its turn in the run (a client's
             * cancel): not sent, and its new state is not ours to settle. */
            if (k->ready && (verdict[x] = k->ready(st, j)) != PT_OK)
                continue;
            assert(!pt_store_in_txn(st)); /* its PROCESSING is durable before it leaves */
            verdict[x] = k->send(s, j, &res[x]);
            if (NOT_SENT(verdict[x]) || !pt_sync_reachable(s, j->gateway))
                skip[g] = 1;
            if (NOT_SENT(verdict[x]))
                stats->not_sent++;
            else
                stats->sent++;
        }
    }
    free(cs);
    free(res);
    return rc;
}

/* True when rows[i] may go in the run before it. */
static int joins_run(const struct pt__job_kind *k, void *rows, int i, const int *skip)
{
    struct pt__job j = k->job(rows, i);
    int g = pt__sync_gw_index(j.gateway);
    return *j.state == PT_STATE_INIT && g >= 0 && !skip[g] && !(k->own_path && k->own_path(&j));
}

int pt__sync_job_drain(struct pt_sync *s, struct pt_store *st, const struct pt__job_kind *k,
                       int *skip, struct pt_drain_stats *stats)
{
    char *batch = malloc(k->size * DRAIN_BATCH);
    if (!batch)
        return PT_ENOMEM;
    int rc = PT_OK;
    int64_t cursor = 0;
    for (;;) {
        pt__sync_drain_step(s);
        int n = 0;
        if ((rc = k->due(st, pt__sync_now_ms(s), cursor, DRAIN_BATCH, batch, &n)) || n == 0)
            break;
        for (int i = 0; i < n && rc == PT_OK; i++) {
            struct pt__job j = k->job(batch, i);
            int g = pt__sync_gw_index(j.gateway);
            cursor = j.id;
            if (i)
                pt__sync_drain_step(s); /* between two (the first had the batch's) */
            if (g < 0)
                continue;
            if (skip[g]) {
                if (k->skipped)
                    rc = k->skipped(s, st, &j, stats);
                continue;
            }
            stats->examined++;
            if (k->own_path && k->own_path(&j)) {
                rc = k->walk_own(s, st, &j, stats);
            } else if (*j.state == PT_STATE_INIT) {
                /* This one and the queued ones right after it (in id order,
                 * gateways still reachable) go out as one run. */
                int run = 1;
                while (i + run < n && joins_run(k, batch, i + run, skip))
                    run++;
                stats->examined += run - 1;
                rc = pt__sync_job_send_queued(s, st, k, batch + (size_t)i * k->size, run, skip,
                                              stats);
                i += run - 1;
                cursor = k->job(batch, i).id;
                continue;
            } else if (*j.state == PT_STATE_PROCESSING) {
                rc = pt__sync_job_recover(s, st, &j);
                cursor = j.id - 1; /* now UNKNOWN and due: resolved in this pass */
            } else if (*j.state == PT_STATE_UNKNOWN || *j.state == PT_STATE_PENDING) {
                rc = k->due_resolve(s, st, &j);
                stats->queries++;
            }
            if (!pt_sync_reachable(s, j.gateway))
                skip[g] = 1;
        }
        if (rc)
            break;
    }
    free(batch);
    return rc;
}
