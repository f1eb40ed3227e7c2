/*
 * sync_notify.c - gateway notifications (SPEC 7, 8): bound to their charge or refund, confirmed by
 * a query where the gateway does not sign, applied once.
 */
#include "sync_impl.h"

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
    int i = pt__sync_gw_index(gateway);
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
    int sent = pt__sync_call(s, PT_GW_QUERY, c, res);
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
    int64_t now = pt__sync_now_ms(s);
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    p.next_attempt_at = now;
    int rc = pt__sync_commit_patch(st, c->id, &p, now);
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
        rc = pt__sync_raise_review(st, c, reason, actor, now);
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

/* A delivery of a notification that was taken already: acknowledged
 * again, applied once.  (Positive: never a PT_E* code.) */
#define DUPLICATE 1

/*
 * Opens the transaction that takes a notification and records its
 * delivery (its dedup row).  DUPLICATE, with nothing open, when an earlier
 * delivery's row is there - at-least-once delivery is acknowledged again
 * once the first delivery's row is durable (it may be in the writer's batch
 * still; if that batch fails, this one is not acknowledged either); an
 * error with nothing open.
 */
static int open_delivery(struct pt_store *st, const char *route, const struct pt_notification *n,
                         const char *why, int64_t now, const char **outcome)
{
    int rc = pt_store_begin(st);
    if (rc)
        return rc;
    rc =
        pt_store_notification_insert(st, route, n->dedup_id, n->order_id,
                                     pt_outcome_name(n->status), why ? "foreign" : "received", now);
    if (rc == PT_OK)
        return PT_OK;
    int rrc = pt_store_rollback(st);
    if (rc != PT_EEXIST)
        return rc;
    if (rrc != PT_OK)
        return rrc;
    count_notify(route, PT_MN_DUPLICATE);
    *outcome = "duplicate";
    return DUPLICATE;
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
        int sent = pt__sync_refund_call(s, PT_GW_REFUND_QUERY, &c, &r, &q);
        if (sent != PT_OK || q.outcome == PT_OUTCOME_AMBIGUOUS) {
            count_notify(route, PT_MN_FOREIGN);
            *outcome = "unconfirmed";
            /* Delivered again later; meanwhile the refund is made due, so
             * the sync engine's own query settles it. */
            int64_t t = pt__sync_now_ms(s);
            struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
            p.next_attempt_at = t;
            if ((rc = pt_store_begin(st)) == PT_OK &&
                (rc = pt__sync_finish(st, pt_store_refund_patch(st, r.id, &p, t))) == PT_OK)
                pt_sync_wake(s);
            return rc ? rc : PT_EBUSY;
        }
    }
    int64_t now = pt__sync_now_ms(s);
    if ((rc = open_delivery(st, route, n, why, now, outcome)))
        return rc == DUPLICATE ? PT_OK : rc;
    if (!why && (rc = pt_store_refund_get_by_id(st, r.id, &r))) { /* as it is now, under the lock */
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
        return pt__sync_finish(st, rc);
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
        rc = pt__sync_refund_apply(s, st, &r, PT_GW_REFUND_QUERY, &q, now);
    } else if (reason[0]) {
        *outcome = "review";
        rc = pt__sync_refund_raise_review(st, &r, reason, now);
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
    return pt__sync_finish(st, rc);
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
    pthread_mutex_t *mu = pt__sync_charge_lock(s, n->order_id);
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

    int64_t now = pt__sync_now_ms(s);
    if ((rc = open_delivery(st, route, n, why, now, outcome)))
        return rc == DUPLICATE ? PT_OK : rc;
    /* The charge as it is now, under the write lock: a trade number learned
     * since the check above must still match. */
    int have = pt_store_charge_get(st, n->order_id, &c);
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
        rc = pt__sync_raise_review(st, &c, reason, actor, now);
        if (rc == PT_OK)
            rc = pt__sync_apply(s, st, &c, PT_GW_QUERY, &q, now);
    } else {
        rc = apply_bound(st, &c, n, actor, now, outcome);
    }
    return pt__sync_finish(st, rc);
}

int pt_sync_notify(void *p, struct pt_store *st, const char *gateway,
                   const struct pt_http_response *msg, struct pt_reply *out,
                   const char **content_type)
{
    struct pt_sync *s = p;
    const struct pt_gateway *gw = pt_gateway_find(gateway);
    const struct pt_gw_config *cfg = pt__sync_gw_cfg(s, gateway);
    if (!gw || !cfg) {
        memset(out, 0, sizeof *out);
        pt_reply_error(out, 404, "not_found", "gateway %s is not configured", gateway);
        *content_type = "application/json";
        return PT_OK;
    }
    struct pt_gw_env env = {0};
    if (pt__sync_wall_ms(s, &env.now_ms) != PT_OK && gw->notify_needs_time) {
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
    pt__sync_learn_peer_key(s, gw, cfg, msg);
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
    pt__sync_wake_to_wipe(s);
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
