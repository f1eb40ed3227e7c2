/*
 * charges.c - state machine operations, audit and fulfilment events.
 */
#include "charges.h"
#include "civil.h"
#include "err.h"
#include "gateway.h"
#include "json.h"
#include "log.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void pt_rfc3339(int64_t ms, char out[32])
{
    /* By hand (gmtime_r + strftime cost more than the rest of rendering a
     * charge; civil.h). */
    int64_t secs = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
    int msec = (int)(ms - secs * 1000);
    int64_t days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400;
    int sod = (int)(secs - days * 86400);
    int64_t y;
    int m, d;
    pt_civil_from_days(days, &y, &m, &d);
    if (y < 0 || y > 9999) {
        /* Not a time payterm writes; keep the shape. */
        snprintf(out, 32, "%s", y < 0 ? "0000-01-01T00:00:00.000Z" : "9999-12-31T23:59:59.999Z");
        return;
    }
    char *o = out;
    int v = (int)y;
    o[0] = (char)('0' + v / 1000), o[1] = (char)('0' + v / 100 % 10);
    o[2] = (char)('0' + v / 10 % 10), o[3] = (char)('0' + v % 10);
    o[4] = '-', o[5] = (char)('0' + m / 10), o[6] = (char)('0' + m % 10);
    o[7] = '-', o[8] = (char)('0' + d / 10), o[9] = (char)('0' + d % 10);
    o[10] = 'T';
    int hh = sod / 3600, mm = sod / 60 % 60, ss = sod % 60;
    o[11] = (char)('0' + hh / 10), o[12] = (char)('0' + hh % 10), o[13] = ':';
    o[14] = (char)('0' + mm / 10), o[15] = (char)('0' + mm % 10), o[16] = ':';
    o[17] = (char)('0' + ss / 10), o[18] = (char)('0' + ss % 10), o[19] = '.';
    o[20] = (char)('0' + msec / 100), o[21] = (char)('0' + msec / 10 % 10);
    o[22] = (char)('0' + msec % 10), o[23] = 'Z', o[24] = '\0';
}

const char *pt_charge_action_key(const struct pt_charge *c)
{
    const struct pt_gw_method *m = pt_gateway_lookup(c->gateway, c->method);
    return m && m->interactive ? pt_gateway_find(c->gateway)->action_key : NULL;
}

void pt_jw_opt_string(struct pt_jw *w, const char *name, const char *v)
{
    pt_jw_raw(w, ",");
    pt_jw_string(w, name);
    pt_jw_raw(w, ":");
    if (v && *v)
        pt_jw_string(w, v);
    else
        pt_jw_raw(w, "null");
}

/* Written directly, not through a cJSON tree: this runs for every
 * response and event.  (test_charges holds it to the text cJSON made of the
 * same object before.) */
void pt_queue_json(cJSON *parent, const struct pt_store_stats *s, int64_t now)
{
    cJSON *q = cJSON_AddObjectToObject(parent, "queue");
    cJSON_AddNumberToObject(q, "count", (double)s->by_state[PT_STATE_INIT]);
    cJSON_AddNumberToObject(
        q, "oldest_age_s",
        s->queue_oldest_created_at ? (double)((now - s->queue_oldest_created_at) / 1000) : 0);
    cJSON *bc = cJSON_AddObjectToObject(q, "by_currency");
    for (int i = 0; i < s->ncur; i++) {
        cJSON *cur = cJSON_AddObjectToObject(bc, s->queue[i].currency);
        cJSON_AddNumberToObject(cur, "count", (double)s->queue[i].count);
        cJSON_AddNumberToObject(cur, "amount", (double)s->queue[i].amount);
    }
}

char *pt_charge_json_text(const struct pt_charge *c)
{
    struct pt_jw w = {0};
    pt_jw_raw(&w, "{\"id\":");
    pt_jw_int(&w, (long long)c->id);
    pt_jw_raw(&w, ",\"order_id\":");
    pt_jw_string(&w, c->order_id);
    pt_jw_raw(&w, ",\"gateway\":");
    pt_jw_string(&w, c->gateway);
    pt_jw_raw(&w, ",\"method\":");
    pt_jw_string(&w, c->method);
    pt_jw_raw(&w, ",\"amount\":");
    pt_jw_int(&w, (long long)c->amount);
    pt_jw_raw(&w, ",\"currency\":");
    pt_jw_string(&w, c->currency);
    pt_jw_raw(&w, ",\"state\":");
    pt_jw_string(&w, pt_state_name(c->state));
    pt_jw_raw(&w, c->review ? ",\"review\":true" : ",\"review\":false");
    pt_jw_opt_string(&w, "review_reason", c->review ? c->review_reason : NULL);
    pt_jw_opt_string(&w, "gateway_trade_no", c->gateway_trade_no);
    const char *ak = pt_charge_action_key(c);
    if (ak)
        pt_jw_opt_string(&w, ak, c->action_url);
    pt_jw_raw(&w, ",\"attempts\":");
    pt_jw_int(&w, c->attempts);
    pt_jw_raw(&w, ",\"amount_refunded\":");
    pt_jw_int(&w, (long long)c->amount_refunded);
    pt_jw_raw(&w, ",\"refunds\":");
    pt_jw_int(&w, c->refunds);
    pt_jw_raw(&w, ",\"offline\":");
    pt_jw_string(&w, pt_offline_mode_name(c->offline));
    if (c->subject[0]) {
        pt_jw_raw(&w, ",\"subject\":");
        pt_jw_string(&w, c->subject);
    }
    if (c->cancel_requested)
        pt_jw_raw(&w, ",\"cancel_requested\":true");
    pt_jw_object_tail(&w, c->metadata, c->state == PT_STATE_FAILED, c->error_code, c->error_message,
                      c->created_at, c->updated_at);
    return pt_jw_finish(&w);
}

void pt_jw_object_tail(struct pt_jw *w, const char *metadata, int failed, const char *error_code,
                       const char *error_message, int64_t created_at, int64_t updated_at)
{
    char t[32];
    if (metadata[0]) {
        /* Stored canonical; parsed and printed so that a damaged column
         * cannot break the object (it is left out, as before). */
        cJSON *m = cJSON_Parse(metadata);
        char *mt = m ? cJSON_PrintUnformatted(m) : NULL;
        if (mt) {
            pt_jw_raw(w, ",\"metadata\":");
            pt_jw_raw(w, mt);
        } else if (m) {
            w->failed = 1;
        }
        free(mt);
        cJSON_Delete(m);
    }
    if (failed || error_code[0]) {
        pt_jw_raw(w, ",\"error\":{\"code\":");
        pt_jw_string(w, error_code[0] ? error_code : "failed");
        pt_jw_raw(w, ",\"message\":");
        pt_jw_string(w, error_message);
        pt_jw_raw(w, "}");
    } else {
        pt_jw_raw(w, ",\"error\":null");
    }
    pt_rfc3339(created_at, t);
    pt_jw_raw(w, ",\"created_at\":");
    pt_jw_string(w, t);
    pt_rfc3339(updated_at, t);
    pt_jw_raw(w, ",\"updated_at\":");
    pt_jw_string(w, t);
    pt_jw_raw(w, "}");
}

char *pt_charge_params_text(const struct pt_charge *c)
{
    /* Written in key order, as pt_json_canonical would print the object. */
    struct pt_jw w = {0};
    pt_jw_raw(&w, "{\"amount\":");
    pt_jw_int(&w, (long long)c->amount);
    pt_jw_raw(&w, ",\"currency\":");
    pt_jw_string(&w, c->currency);
    pt_jw_raw(&w, ",\"customer\":");
    pt_jw_string(&w, c->customer);
    pt_jw_raw(&w, ",\"gateway\":");
    pt_jw_string(&w, c->gateway);
    pt_jw_raw(&w, ",\"metadata\":");
    pt_jw_string(&w, c->metadata);
    pt_jw_raw(&w, ",\"method\":");
    pt_jw_string(&w, c->method);
    pt_jw_raw(&w, ",\"offline\":");
    pt_jw_string(&w, pt_offline_mode_name(c->offline));
    pt_jw_raw(&w, ",\"order_id\":");
    pt_jw_string(&w, c->order_id);
    pt_jw_raw(&w, ",\"payment_code\":");
    pt_jw_string(&w, c->payment_code);
    pt_jw_raw(&w, ",\"payment_method\":");
    pt_jw_string(&w, c->payment_method);
    pt_jw_raw(&w, ",\"subject\":");
    pt_jw_string(&w, c->subject);
    pt_jw_raw(&w, "}");
    return pt_jw_finish(&w);
}

/* Appends the fulfilment event for c's current situation, at most once. */
static int emit(struct pt_store *st, const struct pt_charge *c, const char *type, int64_t now)
{
    char *payload = pt_charge_json_text(c);
    if (!payload)
        return PT_ENOMEM;
    int64_t seq = 0;
    int rc = pt_store_event_insert(st, type, c->id, c->order_id, payload, now, &seq);
    free(payload);
    if (rc == PT_EEXIST)
        return PT_OK; /* already delivered for this charge: once is the point */
    if (rc == PT_OK)
        pt_log_info("event %lld %s order=%s", (long long)seq, type, c->order_id);
    return rc;
}

/* The event a state calls for (SPEC section 6), or NULL. */
static const char *event_for(const struct pt_charge *c)
{
    switch (c->state) {
    case PT_STATE_SUCCESS:
        return c->review ? NULL : "charge.succeeded"; /* held while under review */
    case PT_STATE_FAILED:
        return "charge.failed";
    case PT_STATE_CANCELED:
        return "charge.canceled";
    default:
        return NULL;
    }
}

int pt_charge_create(struct pt_store *st, struct pt_charge *c, const char *actor, int64_t now)
{
    assert(pt_store_in_txn(st)); /* its row, audit and event commit together or not at all */
    c->state = PT_STATE_INIT;
    int rc = pt_store_charge_insert(st, c, now);
    if (rc)
        return rc;
    return pt_store_audit_first(st, c->id, "INIT", "created", actor, now);
}

/*
 * A charge whose cancel was requested while it was on its way has become
 * final (SPEC 18): each cancel answered 202 meanwhile is answered from now
 * on by what became of it - 200 with the canceled charge, 409
 * charge_already_succeeded when its own request took the money first (no
 * reverse is sent: the client refunds if it wants the money back), 409
 * charge_not_cancelable when it failed.
 */
static int answer_cancels(struct pt_store *st, const struct pt_charge *c)
{
    char scope[128], msg[320];
    snprintf(scope, sizeof scope, "POST /v1/charges/%s/cancel", c->order_id);
    int status = 200;
    char *body = NULL;
    if (c->state == PT_STATE_CANCELED) {
        body = pt_charge_json_text(c);
    } else {
        const char *code = "charge_not_cancelable";
        status = 409;
        if (c->state == PT_STATE_SUCCESS) {
            code = "charge_already_succeeded";
            snprintf(msg, sizeof msg,
                     "charge %s succeeded before its cancel could be carried out: the money "
                     "moved; refund it with POST /v1/charges/%s/refunds",
                     c->order_id, c->order_id);
        } else {
            snprintf(msg, sizeof msg, "charge %s is %s and cannot be canceled", c->order_id,
                     pt_state_name(c->state));
        }
        cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
        cJSON_AddStringToObject(e, "code", code);
        cJSON_AddStringToObject(e, "message", msg);
        body = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
    }
    if (!body)
        return PT_ENOMEM;
    int n = 0;
    int rc = pt_store_key_reanswer(st, scope, 202, status, body, strlen(body), &n);
    free(body);
    if (rc == PT_OK && n)
        pt_log_info("charge %s: %d cancel(s) answered 202 now answer %d (the charge is %s)",
                    c->order_id, n, status, pt_state_name(c->state));
    return rc;
}

static int moved(struct pt_store *st, struct pt_charge *c, enum pt_state from, const char *cause,
                 const char *actor, const char *detail, int64_t now)
{
    int rc = pt_store_charge_get_by_id(st, c->id, c);
    if (rc)
        return rc;
    /* The UPDATE's WHERE allowed only sources of a legal move (SPEC 4), or
     * a non-final one for a verified success: nothing else can land here. */
    assert(pt_state_transition_legal(from, c->state) ||
           (c->state == PT_STATE_SUCCESS && !pt_state_is_final(from)));
    rc = pt_store_audit(st, c->id, pt_state_name(from), pt_state_name(c->state), cause, actor, 0,
                        detail, now);
    if (rc)
        return rc;
    pt_log_info("charge %s: %s -> %s (%s by %s)", c->order_id, pt_state_name(from),
                pt_state_name(c->state), cause, actor);
    if (c->cancel_requested && pt_state_is_final(c->state) && (rc = answer_cancels(st, c)))
        return rc;
    const char *ev = event_for(c);
    return ev ? emit(st, c, ev, now) : PT_OK;
}

static int refused(struct pt_store *st, struct pt_charge *c, enum pt_state to, const char *cause,
                   const char *actor, int64_t now)
{
    int rc = pt_store_charge_get_by_id(st, c->id, c);
    if (rc)
        return rc;
    pt_log_warn("charge %s: refused %s -> %s (%s by %s)", c->order_id, pt_state_name(c->state),
                pt_state_name(to), cause, actor);
    rc = pt_store_audit(st, c->id, pt_state_name(c->state), pt_state_name(to), cause, actor, 1,
                        "illegal transition", now);
    return rc ? rc : PT_ESTATE;
}

int pt_charge_transition(struct pt_store *st, struct pt_charge *c, enum pt_state to,
                         const struct pt_charge_patch *patch, const char *cause, const char *actor,
                         const char *detail, int64_t now)
{
    assert(pt_store_in_txn(st)); /* its row, audit and event commit together or not at all */
    if (c->state == to)
        return PT_EEXIST;
    enum pt_state from = c->state;
    if (!pt_state_transition_legal(from, to))
        return refused(st, c, to, cause, actor, now);
    /* The allowed set, not just our belief about `from`: if another writer
     * moved the charge meanwhile to a state from which `to` is still legal,
     * the move is still right; if not, the UPDATE changes nothing. */
    int had_code = c->payment_code[0] != '\0';
    int rc = pt_store_charge_transition(st, c->id, pt_state_allowed_from(to), to, patch, now);
    if (rc == PT_ESTATE)
        return refused(st, c, to, cause, actor, now);
    if (rc)
        return rc;
    if (had_code && pt_state_is_final(to))
        pt_store_note_erased(st); /* the store erased it; the WAL still has it */
    return moved(st, c, from, cause, actor, detail, now);
}

int pt_charge_gateway_succeeded(struct pt_store *st, struct pt_charge *c,
                                const struct pt_charge_patch *patch, const char *actor,
                                const char *detail, int64_t now)
{
    assert(pt_store_in_txn(st)); /* its row, audit and event commit together or not at all */
    const unsigned not_final = (1u << PT_STATE_INIT) | (1u << PT_STATE_PROCESSING) |
                               (1u << PT_STATE_PENDING) | (1u << PT_STATE_UNKNOWN);
    enum pt_state from = c->state;
    int had_code = c->payment_code[0] != '\0';
    int rc = pt_store_charge_transition(st, c->id, not_final, PT_STATE_SUCCESS, patch, now);
    if (rc == PT_OK && had_code)
        pt_store_note_erased(st);
    if (rc == PT_OK)
        return moved(st, c, from, "gateway_succeeded", actor, detail, now);
    if (rc != PT_ESTATE)
        return rc;
    if ((rc = pt_store_charge_get_by_id(st, c->id, c)))
        return rc;
    if (c->state == PT_STATE_SUCCESS)
        return PT_EEXIST;
    /* Money moved for a charge we consider FAILED or CANCELED: a human must
     * decide (refund, or deliver after all). */
    char reason[64];
    snprintf(reason, sizeof reason, "succeeded_after_%s",
             c->state == PT_STATE_FAILED ? "failed" : "canceled");
    rc = pt_store_audit(st, c->id, pt_state_name(c->state), "SUCCESS", "gateway_succeeded", actor,
                        1, detail, now);
    if (rc)
        return rc;
    rc = pt_charge_review(st, c, 1, reason, actor, now);
    return (rc == PT_OK || rc == PT_EEXIST) ? PT_ESTATE : rc;
}

int pt_charge_review(struct pt_store *st, struct pt_charge *c, int on, const char *reason,
                     const char *actor, int64_t now)
{
    assert(pt_store_in_txn(st)); /* its row, audit and event commit together or not at all */
    int rc = pt_store_charge_set_review(st, c->id, on, on ? reason : NULL, now);
    int changed = rc == PT_OK;
    if (rc && rc != PT_ESTATE)
        return rc;
    if ((rc = pt_store_charge_get_by_id(st, c->id, c)))
        return rc;
    char detail[PT_MESSAGE_MAX + 32];
    snprintf(detail, sizeof detail, "%s%s", changed ? "" : "no change: ", reason ? reason : "");
    rc = pt_store_audit(st, c->id, pt_state_name(c->state), pt_state_name(c->state),
                        on ? "review_raised" : "review_cleared", actor, 0, detail, now);
    if (rc || !changed)
        return rc ? rc : PT_EEXIST;
    pt_log_warn("charge %s: review %s by %s: %s", c->order_id, on ? "raised" : "cleared", actor,
                reason ? reason : "");
    if (on)
        return emit(st, c, "charge.review", now);
    /* Cleared: a SUCCESS that was held now goes out (once). */
    return c->state == PT_STATE_SUCCESS ? emit(st, c, "charge.succeeded", now) : PT_OK;
}
