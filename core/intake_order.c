/*
 * intake_order.c - guarded operations on an existing charge (SPEC 5): cancel, review, the payment
 * link.
 */
#include "intake_impl.h"

/* ---- POST /v1/charges/{order_id}/cancel -------------------------------------- */

static int cancel(const struct pt_intake *in, struct pt_store *st, const char *order_id,
                  const char *key_header, const char *body, size_t len, int64_t now,
                  struct pt_reply *out);

/* pt_intake_local_charge without the charge, or with the copy's moving
 * mark (on the heap: a charge is 6.7 KB, and the cancel's own frame
 * follows on a stack that may be 64 KiB). */
static int held_locally(const struct pt_intake *in, const char *order_id, int *moving)
{
    *moving = 0;
    if (!in->fallback.st)
        return PT_LOCAL_NONE;
    struct pt_charge *c = malloc(sizeof *c);
    int where = c ? pt_intake_local_charge(in, order_id, c) : PT_LOCAL_NONE;
    *moving = where != PT_LOCAL_NONE && pt_fallback_is_moving(c);
    free(c);
    return where;
}

/* The cancel run on the lane's own store (nothing to ask a gateway:
 * what is there is INIT or canceled).  PT_EAGAIN: the copy is being moved
 * (marked since it was looked at): the server's to cancel. */
static int cancel_locally(const struct pt_intake *in, const char *order_id, const char *key_header,
                          const char *body, size_t len, int64_t now, struct pt_reply *out)
{
    struct pt_intake local = pt__intake_on_the_lane(in);
    pthread_mutex_lock(in->fallback.mu);
    int rc = cancel(&local, in->fallback.st, order_id, key_header, body, len, now, out);
    pthread_mutex_unlock(in->fallback.mu);
    return rc;
}

/*
 * store.fallback "local" (SPEC 16): a charge the lane queued in its own
 * store and has not moved is canceled there - it never left the lane.  One
 * being moved is the server's to cancel; while the server does not have it
 * yet (or cannot be asked) the answer is 503, never "canceled" for a charge
 * the server may hold.  One canceled here before it was moved is the
 * server's answer first (the order_id may have been taken there since),
 * else the lane's.  Otherwise the store server's charge is the one, and
 * with no connection to the server (st NULL) the answer is 503.
 */
int pt_intake_cancel(const struct pt_intake *in, struct pt_store *st, const char *order_id,
                     const char *key_header, const char *body, size_t len, int64_t now,
                     struct pt_reply *out)
{
    int moving = 0;
    int where = held_locally(in, order_id, &moving);
    if (where == PT_LOCAL_SHADOW) {
        /* A key this lane answered is answered so again, whatever the
         * server holds of that order_id now. */
        char path[128];
        snprintf(path, sizeof path, "/v1/charges/%s/cancel", order_id);
        if (pt__intake_answered_locally(in, path, key_header, body, len, 1, now, out))
            return PT_OK;
    }
    if (where == PT_LOCAL_OWN) {
        int rc = cancel_locally(in, order_id, key_header, body, len, now, out);
        if (rc != PT_EAGAIN)
            return rc;
        pt_reply_free(out);
        where = PT_LOCAL_SHADOW; /* marked moving meanwhile */
        moving = 1;
    }
    int rc = PT_EIO;
    if (st) {
        rc = cancel(in, st, order_id, key_header, body, len, now, out);
        /* Not there (yet), or the server gone: the lane's copy decides. */
        if (where == PT_LOCAL_NONE || (out->status != 404 && rc != PT_EIO))
            return rc;
        pt_reply_free(out);
    }
    if (where == PT_LOCAL_SHADOW && !moving)
        return cancel_locally(in, order_id, key_header, body, len, now, out);
    memset(out, 0, sizeof *out);
    if (moving)
        pt_reply_error(out, 503, "storage_unavailable",
                       "charge %s is being moved from this lane to the store server, which "
                       "cannot confirm it yet; nothing was canceled: retry with the same "
                       "Idempotency-Key",
                       order_id);
    else
        pt_reply_error(out, 503, "storage_unavailable",
                       "the store server cannot be reached; nothing was canceled: retry with "
                       "the same Idempotency-Key");
    out->retry_after_s = RETRY_STORAGE_S;
    return PT_EIO;
}

/* The answer to a cancel once the gateway was asked (SPEC 18): what the
 * charge came to - and what a cancel answered 202 before is answered by
 * from then on (charges.c answer_cancels). */
static void cancel_answer(struct pt_reply *out, const struct pt_charge *c)
{
    if (c->state == PT_STATE_SUCCESS)
        pt_reply_error(out, 409, "charge_already_succeeded",
                       "charge %s succeeded before its cancel could be carried out: the money "
                       "moved; refund it with POST /v1/charges/%s/refunds",
                       c->order_id, c->order_id);
    else if (c->state == PT_STATE_FAILED)
        pt_reply_error(out, 409, "charge_not_cancelable",
                       "charge %s is FAILED and cannot be canceled", c->order_id);
    else
        pt_reply_charge(out, c->state == PT_STATE_CANCELED ? 200 : 202, c);
}

static int cancel(const struct pt_intake *in, struct pt_store *st, const char *order_id,
                  const char *key_header, const char *body, size_t len, int64_t now,
                  struct pt_reply *out)
{
    memset(out, 0, sizeof *out);
    char path[128];
    snprintf(path, sizeof path, "/v1/charges/%s/cancel", order_id);
    struct guard g;
    struct pt_idem_result res;
    pt__intake_last_storage_rc = 0;
    if (!pt__intake_guard_enter(in, st, path, key_header, body, len, 1, now, &g, out, &res))
        return out->status == 503
                   ? (pt__intake_last_storage_rc ? pt__intake_last_storage_rc : PT_ESTORAGE)
                   : PT_OK;
    int rc = PT_OK;
    struct pt_charge c;
    char actor[80], msg[200] = "";
    int body_ok = !g.refused[0] && cJSON_IsObject(g.json) &&
                  (!g.json->child || (!g.json->child->next && g.json->child->string &&
                                      strcmp(g.json->child->string, "operator") == 0));
    if (!body_ok || !pt__intake_operator_actor(g.json, actor, msg, sizeof msg)) {
        pt_reply_error(out, 400, "invalid_request",
                       "%s%s%sbody: cancel takes no body, {} or {\"operator\": \"<name>\"}",
                       g.refused, msg, g.refused[0] || msg[0] ? "; " : "");
        goto complete;
    }
    if ((rc = pt__intake_find_order(st, &g, order_id, &c, out)) == PT_ENOTFOUND)
        goto out; /* answered 404: not a store error */
    if (rc)
        goto storage;
    if (pt_fallback_is_moving(&c) || pt_fallback_is_moved(&c)) {
        /* A lane's local copy, being moved or moved meanwhile: the
         * server's to cancel. */
        pt__intake_guard_abandon(st, &g);
        rc = PT_EAGAIN;
        goto out;
    }
    switch (c.state) {
    case PT_STATE_INIT:
        rc = pt_charge_transition(st, &c, PT_STATE_CANCELED, NULL, "canceled_by_client", actor,
                                  NULL, now);
        if (rc && rc != PT_EEXIST && rc != PT_ESTATE)
            goto storage;
        pt_reply_charge(out, c.state == PT_STATE_CANCELED ? 200 : 409, &c);
        break;
    case PT_STATE_CANCELED:
        pt_reply_charge(out, 200, &c);
        break;
    case PT_STATE_SUCCESS:
    case PT_STATE_FAILED:
        if (c.state == PT_STATE_SUCCESS)
            pt_reply_error(out, 409, "charge_not_cancelable",
                           "charge %s is SUCCESS and cannot be canceled: the money moved; refund "
                           "it with POST /v1/charges/%s/refunds",
                           order_id, order_id);
        else
            pt_reply_error(out, 409, "charge_not_cancelable",
                           "charge %s is FAILED and cannot be canceled", order_id);
        break;
    default: {
        if (pt_gateway_find(c.gateway) && pt_gateway_find(c.gateway)->no_cancel) {
            pt_reply_error(out, 409, "charge_not_cancelable", "charge %s is %s: %s", order_id,
                           pt_state_name(c.state), pt_gateway_find(c.gateway)->no_cancel);
            break;
        }
        if (!in->online.cancel_now) {
            pt_reply_error(out, 503, "offline_not_allowed",
                           "charge %s is %s: canceling it needs the gateway, which this build "
                           "cannot reach",
                           order_id, pt_state_name(c.state));
            out->retry_after_s = RETRY_OFFLINE_S;
            pt__intake_guard_abandon(st, &g);
            goto out;
        }
        /* SPEC 18: the cancel is recorded first, with who asked, in the
         * transaction that holds the key - durable before any answer, so
         * a 202 is never dropped, and the charge is never sent again. */
        const unsigned on_its_way =
            (1u << PT_STATE_PROCESSING) | (1u << PT_STATE_PENDING) | (1u << PT_STATE_UNKNOWN);
        rc = pt_store_charge_request_cancel(st, c.id, on_its_way, -1, now);
        if ((rc && rc != PT_ESTATE) ||
            (rc = pt_store_audit(st, c.id, pt_state_name(c.state), NULL, "cancel_requested", actor,
                                 0, NULL, now)) ||
            (rc = pt_store_charge_get_by_id(st, c.id, &c)))
            goto storage;
        if (c.state == PT_STATE_PROCESSING) {
            /* Its own request is out (or it waits in a run): the sync
             * engine cancels it once that request has an outcome, never
             * beside it.  Answered 202 now; the stored answer becomes the
             * charge's fate when it is final (charges.c). */
            pt_reply_charge(out, 202, &c);
            if (in->online.wake)
                in->online.wake(in->online.ctx);
            break;
        }
        /* PENDING or UNKNOWN: nothing of ours is on its way.  Commit the
         * lock and the request, ask the gateway (the sync engine serialises
         * it with its own queries of the charge), then store the answer. */
        if ((rc = pt_store_key_set_order(st, g.scope, g.key, &g.lock, c.order_id)) ||
            (rc = pt_store_commit(st)))
            goto storage;
        g.in_txn = 0;
        if ((rc = in->online.cancel_now(in->online.ctx, st, &c)))
            goto storage;
        if ((rc = pt_store_begin(st)))
            goto storage;
        g.in_txn = 1;
        cancel_answer(out, &c);
        break;
    }
    }
complete:
    rc = pt__intake_guard_complete(st, &g, out, now);
    goto out;
storage:
    pt__intake_guard_storage(st, &g, out, rc);
out:
    pt__intake_wake_to_wipe(in);
    int end = pt__intake_guard_end(&g, &res, out, rc);
    return rc == PT_EAGAIN ? rc : end;
}

/* ---- POST /v1/charges/{order_id}/review -------------------------------------- */

int pt_intake_review(const struct pt_intake *in, struct pt_store *st, const char *order_id,
                     const char *key_header, const char *body, size_t len, int64_t now,
                     struct pt_reply *out)
{
    memset(out, 0, sizeof *out);
    char path[128];
    snprintf(path, sizeof path, "/v1/charges/%s/review", order_id);
    struct guard g;
    struct pt_idem_result res;
    if (!pt__intake_guard_enter(in, st, path, key_header, body, len, 0, now, &g, out, &res)) {
        return out->status == 503 ? PT_ESTORAGE : PT_OK;
    }
    int rc = PT_OK;
    struct pt_charge c;
    char msg[512] = "";
    const cJSON *action = cJSON_GetObjectItemCaseSensitive(g.json, "action");
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(g.json, "operator");
    const cJSON *note = cJSON_GetObjectItemCaseSensitive(g.json, "note");
    int on = 0;
    static const char *const fields[] = {"action", "operator", "note", NULL};
    if (pt__intake_body_fields(&g, fields, msg, sizeof msg)) {
        if (!cJSON_IsString(action) ||
            (strcmp(action->valuestring, "clear") && strcmp(action->valuestring, "hold")))
            pt__intake_problem(msg, sizeof msg, "action", "must be \"clear\" or \"hold\"");
        else
            on = strcmp(action->valuestring, "hold") == 0;
        if (!cJSON_IsString(op) || !pt__intake_charset_ok(op->valuestring, 1, 64, "_.@-"))
            pt__intake_problem(msg, sizeof msg, "operator",
                               "required: the operator's name, 1-64 of A-Z a-z 0-9 _ . @ -");
        if (note && !cJSON_IsNull(note) &&
            (!cJSON_IsString(note) || !pt__intake_text_ok(note->valuestring, 200)))
            pt__intake_problem(msg, sizeof msg, "note", "must be 1-200 bytes of text");
    }
    if (msg[0]) {
        pt_reply_error(out, 400, "invalid_request", "%s", msg);
        goto complete;
    }
    if ((rc = pt__intake_find_order(st, &g, order_id, &c, out)) == PT_ENOTFOUND)
        goto out; /* answered 404: not a store error */
    if (rc)
        goto storage;
    char actor[80], reason[PT_MESSAGE_MAX];
    snprintf(actor, sizeof actor, "operator:%s", op->valuestring);
    snprintf(reason, sizeof reason, "%s",
             cJSON_IsString(note) ? note->valuestring
             : on                 ? "held by operator"
                                  : "cleared");
    rc = pt_charge_review(st, &c, on, reason, actor, now);
    if (rc && rc != PT_EEXIST)
        goto storage;
    pt_reply_charge(out, 200, &c);
complete:
    rc = pt__intake_guard_complete(st, &g, out, now);
    goto out;
storage:
    pt__intake_guard_storage(st, &g, out, rc);
out:
    return pt__intake_guard_end(&g, &res, out, rc);
}

/* ---- GET /v1/charges/{order_id}/payment --------------------------------------- */

static int payment_link_reply(const struct pt_charge *c, struct pt_reply *out)
{
    struct pt_jw w = {0};
    pt_jw_raw(&w, "{");
    pt_jw_string(&w, pt_charge_action_key(c));
    pt_jw_raw(&w, ":");
    pt_jw_string(&w, c->action_url);
    pt_jw_raw(&w, "}");
    char *text = pt_jw_finish(&w);
    if (!text)
        return PT_ENOMEM;
    out->status = 200;
    pt__intake_set_body(out, text);
    return PT_OK;
}

int pt_intake_payment(const struct pt_intake *in, struct pt_store *st, const char *order_id,
                      struct pt_reply *out)
{
    memset(out, 0, sizeof *out);
    struct pt_charge c;
    int rc = pt_store_charge_get(st, order_id, &c);
    if (rc == PT_ENOTFOUND) {
        pt_reply_error(out, 404, "not_found", "no charge with order_id '%s'", order_id);
        return PT_OK;
    }
    if (rc) {
        pt__intake_storage_unavailable(out, st, rc);
        return rc;
    }
    if (!pt_charge_action_key(&c) || !pt__intake_needs_gateway(&c)) {
        pt_reply_error(out, 404, "not_found",
                       "charge %s is paid by %s %s, which shows the customer no code or page",
                       order_id, c.gateway, c.method);
        return PT_OK;
    }
    if (!c.action_url[0] && (c.state == PT_STATE_PENDING || c.state == PT_STATE_UNKNOWN) &&
        in->online.payment_link && (rc = in->online.payment_link(in->online.ctx, st, &c))) {
        pt__intake_storage_unavailable(out, st, rc);
        return rc;
    }
    if (pt_state_is_final(c.state)) {
        pt_reply_error(out, 404, "not_found", "charge %s is %s: there is no code to pay any more",
                       order_id, pt_state_name(c.state));
        return PT_OK;
    }
    if (c.state == PT_STATE_INIT || c.state == PT_STATE_PROCESSING) {
        /* Its create is on its way (or about to be): the link comes with the
         * answer. */
        pt_reply_error(out, 503, "gateway_unavailable",
                       "charge %s is %s: the gateway has not answered its create yet; retry",
                       order_id, pt_state_name(c.state));
        out->retry_after_s = RETRY_IN_USE_S;
        return PT_OK;
    }
    if (!c.action_url[0]) {
        pt_reply_error(out, 503, "gateway_unavailable",
                       "the %s gateway gave no payment link for %s just now (its create answer "
                       "was lost and asking again did not bring one); retry",
                       c.gateway, order_id);
        out->retry_after_s = RETRY_OFFLINE_S;
        return PT_OK;
    }
    if ((rc = payment_link_reply(&c, out)))
        pt_reply_error(out, 503, "storage_unavailable", "out of memory");
    return rc;
}
