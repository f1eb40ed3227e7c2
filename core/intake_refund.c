/*
 * intake_refund.c - POST /v1/charges/{order_id}/refunds (SPEC 5a): the guarded refund.
 */
#include "intake_impl.h"

/* ---- POST /v1/charges/{order_id}/refunds (SPEC 5a) ----------------------------- */

static const char *const refund_fields[] = {"refund_id", "amount",   "reason", "offline",
                                            "metadata",  "operator", NULL};

void pt_reply_refund(struct pt_reply *r, int status, const struct pt_refund *rf)
{
    r->status = status;
    r->code[0] = '\0';
    pt__intake_set_body(r, pt_refund_json_text(rf));
}

int pt_intake_refund_status_for(const struct pt_refund *r)
{
    return r->state == PT_STATE_SUCCESS ? 201 : r->state == PT_STATE_FAILED ? 402 : 202;
}

/*
 * Validates a refund body into r (amount 0 = "everything not yet refunded",
 * decided once the charge is read).  Returns 1 when valid; otherwise msg
 * names every field that is wrong.
 */
static int validate_refund(const cJSON *body, const struct pt_json_member *amount,
                           struct pt_refund *r, char actor[80], char *msg, size_t cap)
{
    msg[0] = '\0';
    if (!cJSON_IsObject(body)) {
        pt__intake_problem(msg, cap, "body", "must be a JSON object");
        return 0;
    }
    for (const cJSON *m = body->child; m; m = m->next) {
        int known = 0;
        for (const char *const *f = refund_fields; *f; f++)
            known |= strcmp(m->string, *f) == 0;
        if (!known)
            pt__intake_problem(
                msg, cap, m->string,
                "unknown field (allowed: refund_id, amount, reason, offline, metadata, "
                "operator)");
    }
    pt__intake_operator_actor(body, actor, msg, cap);
    const cJSON *v;
    if (!pt__intake_string_field(body, "refund_id", &v))
        pt__intake_problem(msg, cap, "refund_id",
                           "required: 1-64 characters of A-Z a-z 0-9 _ . -, unique");
    else if (!cJSON_IsString(v) || !pt_order_id_valid(v->valuestring))
        pt__intake_problem(msg, cap, "refund_id", "must be 1-64 characters of A-Z a-z 0-9 _ . -");
    else
        snprintf(r->refund_id, sizeof r->refund_id, "%s", v->valuestring);
    if (pt__intake_string_field(body, "amount", &v) &&
        (!cJSON_IsNumber(v) || !amount->text ||
         pt_json_plain_int(amount->text, amount->len, 1, INT64_MAX, &r->amount) != PT_OK))
        pt__intake_problem(
            msg, cap, "amount",
            "must be a plain JSON integer (no leading zeros, fraction or exponent) of at "
            "least 1, in the charge currency's minor unit; leave it out to refund everything "
            "not yet refunded");
    if (pt__intake_string_field(body, "reason", &v)) {
        if (!cJSON_IsString(v) || !pt__intake_text_ok(v->valuestring, 256))
            pt__intake_problem(msg, cap, "reason",
                               "must be 1-256 bytes of text without control characters");
        else
            snprintf(r->reason, sizeof r->reason, "%s", v->valuestring);
    }
    r->offline = PT_OFFLINE_PREFER;
    if (pt__intake_string_field(body, "offline", &v) &&
        (!cJSON_IsString(v) || pt_offline_mode_parse(v->valuestring, &r->offline) != PT_OK))
        pt__intake_problem(msg, cap, "offline",
                           "must be prefer_online, require_online or force_offline");
    if (pt__intake_string_field(body, "metadata", &v))
        pt__intake_metadata_field(v, r->metadata, sizeof r->metadata, msg, cap);
    return msg[0] == '\0';
}

/* A refund_id that exists: the same refund asked again (200) or a
 * conflict.  "The same" = the same charge and parameters; an amount left
 * out matches the amount the refund was created with. */
static int existing_refund(struct pt_refund *have, struct pt_refund *want, struct pt_reply *out)
{
    if (strcmp(have->order_id, want->order_id) != 0) {
        pt_reply_error(out, 409, "refund_id_conflict",
                       "refund_id '%s' belongs to a refund of order %s, not %s; a refund_id is "
                       "used once",
                       have->refund_id, have->order_id, want->order_id);
        return PT_OK;
    }
    if (!want->amount)
        want->amount = have->amount;
    char *a = pt_refund_params_text(have), *b = pt_refund_params_text(want);
    int same = a && b && strcmp(a, b) == 0, rc = a && b ? PT_OK : PT_ENOMEM;
    free(a);
    free(b);
    if (rc)
        return rc;
    if (same)
        pt_reply_refund(out, 200, have);
    else
        pt_reply_error(out, 409, "refund_id_conflict",
                       "refund_id '%s' already exists with different parameters (amount %lld); "
                       "a refund_id is used once",
                       have->refund_id, (long long)have->amount);
    return PT_OK;
}

/* A refund provably never sent that may not wait (offline: require_online):
 * withdrawn before anything left the device (audited; the row goes), so the
 * background sync never surprises anyone, and the same refund_id and key
 * work once the gateway is back.  Inside g's transaction. */
static int refund_withdraw(struct pt_store *st, struct guard *g, const struct pt_charge *c,
                           struct pt_refund *r, int64_t now, struct pt_reply *out)
{
    int rc = pt_store_refund_audit(st, r, "INIT", NULL, "not_sent_withdrawn", "api", 0,
                                   "gateway unreachable and the refund may not be queued", now);
    if (rc == PT_OK)
        rc = pt_store_refund_withdraw(st, r->id);
    if (rc)
        return rc;
    if ((rc = pt_idem_release(st, &g->lock, g->scope, g->key)) == PT_OK &&
        (rc = pt_store_commit(st)) == PT_OK) {
        g->in_txn = 0;
        pt_reply_error(out, 503, "offline_not_allowed",
                       "the %s gateway could not be reached and refund %s may not wait in "
                       "the offline queue (offline: require_online); nothing was sent and "
                       "nothing was kept: retry with the same Idempotency-Key",
                       c->gateway, r->refund_id);
        out->retry_after_s = RETRY_OFFLINE_S;
    } else if (rc == PT_ESTATE && (rc = pt_store_commit(st)) == PT_OK) {
        g->in_txn = 0;
        rc = pt__intake_answer_as_the_key(st, g, out);
    }
    return rc;
}

/* The refund's request and its outcome, the transaction committed:
 * claimed PROCESSING by the caller, sent, settled in the next transaction;
 * or, for a gateway without refund keys, the sync engine's whole
 * conversation (its turn, the gateway's refund list, then bound or sent).
 * *not_sent: provably nothing left.  Returns with a transaction open. */
static int refund_exchange(const struct pt_intake *in, struct pt_store *st, struct guard *g,
                           const struct pt_charge *c, struct pt_refund *r, int keyless,
                           int *not_sent)
{
    int rc, verdict = PT_OK;
    if (keyless) {
        rc = in->online.refund_now(in->online.ctx, st, c, r, &verdict);
        *not_sent = verdict == PT_ENOTSENT || verdict == PT_ECLOCK;
        if (rc == PT_OK && (rc = pt_store_begin(st)) == PT_OK)
            g->in_txn = 1;
        return rc;
    }
    struct pt_online_send sent;
    in->online.refund_send(in->online.ctx, c, r, &sent);
    if ((rc = pt_store_begin(st)))
        return rc;
    g->in_txn = 1;
    rc = in->online.refund_settle(in->online.ctx, st, c, r, &sent);
    *not_sent = r->state == PT_STATE_INIT;
    return rc;
}

/* The online refund, as the online charge: INIT (and PROCESSING, unless
 * the gateway has no refund keys: then the engine moves it in turn)
 * committed with the key linked to the refund before any byte leaves, then
 * the outcome.  Returns with the second transaction open (g->in_txn). */
static int refund_online(const struct pt_intake *in, struct pt_store *st, struct guard *g,
                         struct pt_charge *c, struct pt_refund *r, const char *actor, int64_t now,
                         struct pt_reply *out, enum step *next)
{
    const struct pt_gateway *gw = pt_gateway_find(c->gateway);
    int keyless = gw && gw->refund_keyless && in->online.refund_now, not_sent = 0;
    *next = STEP_RELEASE;
    int rc;
    r->next_attempt_at = now;
    if ((rc = pt_refund_create(st, r, actor, now)) ||
        (!keyless && (rc = in->online.refund_claim(in->online.ctx, st, r, now))) ||
        (rc = pt_store_key_set_order(st, g->scope, g->key, &g->lock, r->refund_id)) ||
        (rc = pt_store_commit(st)))
        return rc;
    g->in_txn = 0;
    *next = STEP_DONE;
    if ((rc = refund_exchange(in, st, g, c, r, keyless, &not_sent)))
        return rc;
    if (r->state == PT_STATE_INIT && not_sent && r->offline == PT_OFFLINE_REQUIRE_ONLINE)
        return refund_withdraw(st, g, c, r, now, out);
    pt_reply_refund(out, pt_intake_refund_status_for(r), r);
    *next = STEP_COMPLETE;
    return PT_OK;
}

/* Everything the refund's charge decides: 404, 409s, the default amount.
 * Returns 1 when *out is the answer. */
static int refund_refused(const struct pt_intake *in, struct pt_store *st,
                          const struct pt_charge *c, struct pt_refund *r, struct pt_reply *out,
                          int *rc, int *release)
{
    const struct pt_gateway *gw = pt_gateway_find(c->gateway);
    *rc = PT_OK;
    /* The refund_id is the gateway's refund key: it must be one the gateway
     * takes (WeChat's out_refund_no has no '.', like its out_trade_no). */
    if (gw && gw->order_id_forbidden && strpbrk(r->refund_id, gw->order_id_forbidden)) {
        pt_reply_error(out, 400, "invalid_request",
                       "refund_id: the %s gateway does not accept '%s' in its refund key", gw->name,
                       gw->order_id_forbidden);
        return 1;
    }
    /* An amount the gateway cannot represent in its own units (SPEC 18);
     * a refund of everything left always can: so could the charge and
     * every refund before it. */
    char why[300];
    if (gw && r->amount && !pt_gateway_amount_ok(gw, c->currency, r->amount, why, sizeof why)) {
        pt_reply_error(out, 400, "invalid_request", "amount: %s", why);
        return 1;
    }
    if (c->state != PT_STATE_SUCCESS) {
        /* Not stored while the charge may still succeed: the same key
         * works once it has. */
        *release = !pt_state_is_final(c->state);
        pt_reply_error(out, 409, "charge_not_refundable",
                       "charge %s is %s: only a SUCCESS charge can be refunded%s", c->order_id,
                       pt_state_name(c->state),
                       pt_state_is_final(c->state) ? "" : " (wait for its outcome, or cancel it)");
        return 1;
    }
    if (!gw || !gw->build_refund) {
        pt_reply_error(out, 409, "charge_not_refundable",
                       "charge %s was paid through %s, for which payterm does not send refunds "
                       "yet (see the README); refund it in the gateway's merchant portal",
                       c->order_id, c->gateway);
        return 1;
    }
    /* The gateway refunds through keys the configuration lacks (2C2P's
     * Payment Maintenance): the message names them. */
    const char *missing = gw->refund_unavailable
                              ? gw->refund_unavailable(&in->cfg->gw[pt_gateway_index(gw->name)])
                              : NULL;
    if (missing) {
        pt_reply_error(out, 409, "charge_not_refundable", "charge %s cannot be refunded: %s",
                       c->order_id, missing);
        return 1;
    }
    int64_t left = 0;
    if ((*rc = pt_store_refund_left(st, c->id, &left)))
        return 1;
    if (left <= 0) {
        pt_reply_error(out, 409, "refund_exceeds_charge",
                       "charge %s (%lld %s) has nothing left to refund: its refunds that did not "
                       "fail add up to its amount",
                       c->order_id, (long long)c->amount, c->currency);
        return 1;
    }
    if (!r->amount)
        r->amount = left;
    if (r->amount > left) {
        pt_reply_error(out, 409, "refund_exceeds_charge",
                       "charge %s (%lld %s) has %lld %s left to refund; this refund asks for %lld",
                       c->order_id, (long long)c->amount, c->currency, (long long)left, c->currency,
                       (long long)r->amount);
        return 1;
    }
    return 0;
}

int pt_intake_refund(const struct pt_intake *in, struct pt_store *st, const char *order_id,
                     const char *key_header, const char *body, size_t len, int64_t now,
                     struct pt_reply *out)
{
    memset(out, 0, sizeof *out);
    char path[128], msg[1024], actor[80];
    snprintf(path, sizeof path, "/v1/charges/%s/refunds", order_id);
    struct guard g;
    struct pt_idem_result res;
    if (!pt__intake_guard_enter(in, st, path, key_header, body, len, 0, now, &g, out, &res))
        return out->status == 503 ? PT_ESTORAGE : PT_OK;
    struct pt_charge c;
    struct pt_refund r, have;
    memset(&r, 0, sizeof r);
    memset(&c, 0, sizeof c);
    enum step next = STEP_COMPLETE;
    int rc = PT_OK;
    if (res.status == PT_IDEM_RECOVERED && res.order_id[0]) {
        /* A lock taken over from a request that died: its refund says how
         * far it got. */
        rc = pt_store_refund_get(st, res.order_id, &have);
        if (rc == PT_OK) {
            pt_reply_refund(out, pt_intake_refund_status_for(&have), &have);
            goto complete;
        }
        if (rc != PT_ENOTFOUND)
            goto storage;
        rc = PT_OK;
    }
    if (g.refused[0]) {
        pt_reply_error(out, 400, "invalid_request", "%s", g.refused);
        goto complete;
    }
    if (!g.json) {
        pt_reply_error(out, 400, "invalid_request",
                       "body: required, a JSON object with refund_id (and amount, reason, "
                       "offline, metadata)");
        goto complete;
    }
    if (!validate_refund(g.json, &g.amount, &r, actor, msg, sizeof msg)) {
        pt_reply_error(out, 400, "invalid_request", "%s", msg);
        goto complete;
    }
    if ((rc = pt__intake_find_order(st, &g, order_id, &c, out)) == PT_ENOTFOUND)
        goto out; /* answered 404: not a store error */
    if (rc)
        goto storage;
    snprintf(r.order_id, sizeof r.order_id, "%s", c.order_id);
    snprintf(r.gateway, sizeof r.gateway, "%s", c.gateway);
    snprintf(r.currency, sizeof r.currency, "%s", c.currency);
    r.charge_id = c.id;
    rc = pt_store_refund_get(st, r.refund_id, &have);
    if (rc == PT_OK) {
        if ((rc = existing_refund(&have, &r, out)))
            goto storage;
        goto complete;
    }
    if (rc != PT_ENOTFOUND)
        goto storage;
    rc = PT_OK;
    if (pt__intake_archived(st, "refund", r.refund_id, out))
        goto complete;
    int release = 0;
    if (refund_refused(in, st, &c, &r, out, &rc, &release)) {
        if (rc)
            goto storage;
        if (release) {
            pt__intake_guard_abandon(st, &g);
            goto out;
        }
        goto complete;
    }
    /* A gateway without refund keys goes online only through the engine's
     * ordering rule (refund_now); without it, the queue keeps the rule. */
    const struct pt_gateway *rgw = pt_gateway_find(c.gateway);
    int can_send = rgw && rgw->refund_keyless ? in->online.refund_now != NULL
                                              : in->online.refund_claim && in->online.refund_send;
    int online = r.offline != PT_OFFLINE_FORCE && can_send &&
                 (!in->online.reachable || in->online.reachable(in->online.ctx, c.gateway));
    if (online && r.offline == PT_OFFLINE_REQUIRE_ONLINE && in->online.probe &&
        !in->online.probe(in->online.ctx, c.gateway))
        online = 0;
    if (online) {
        rc = refund_online(in, st, &g, &c, &r, actor, now, out, &next);
        if (rc)
            goto storage;
        if (next != STEP_COMPLETE)
            goto out;
    } else if (r.offline == PT_OFFLINE_REQUIRE_ONLINE) {
        pt_reply_error(out, 503, "offline_not_allowed",
                       "the %s gateway cannot be reached now and this refund may not wait in the "
                       "offline queue (offline: require_online); nothing was recorded, retry "
                       "with the same Idempotency-Key",
                       c.gateway);
        out->retry_after_s = RETRY_OFFLINE_S;
        pt__intake_guard_abandon(st, &g);
        goto out;
    } else {
        r.next_attempt_at = now;
        if ((rc = pt_refund_create(st, &r, actor, now)))
            goto storage;
        pt_log_info("refund %s of %s queued offline (%lld %s)", r.refund_id, r.order_id,
                    (long long)r.amount, r.currency);
        pt_reply_refund(out, 202, &r);
    }
complete:
    rc = pt__intake_guard_complete(st, &g, out, now);
    if (rc == PT_OK && out->status == 202 && in->online.wake &&
        (!in->online.reachable || in->online.reachable(in->online.ctx, c.gateway)))
        in->online.wake(in->online.ctx);
    goto out;
storage:
    pt__intake_guard_abandon(st, &g);
    if (rc == PT_ERANGE || rc == PT_ESTATE) {
        /* The data layer refused what the checks above let through: it
         * cannot happen with one writer, and must not turn into a 503 that
         * a retry would repeat forever. */
        pt_reply_free(out);
        memset(out, 0, sizeof *out);
        pt_reply_error(out, 409,
                       rc == PT_ERANGE ? "refund_exceeds_charge" : "charge_not_refundable",
                       "refund %s of charge %s refused by the store", r.refund_id, order_id);
        rc = PT_OK;
        goto out;
    }
    pt__intake_storage_unavailable(out, st, rc);
out:
    pt__intake_wake_to_wipe(in);
    return pt__intake_guard_end(&g, &res, out, rc);
}
