/*
 * refunds.c - the refund's transitions, audit and fulfilment events.
 */
#include "refunds.h"
#include "charges.h"
#include "err.h"
#include "json.h"
#include "log.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define B(s) (1u << PT_STATE_##s)

/* legal[from] = mask of the states a refund may reach from `from`. */
static const unsigned legal[PT_STATE__COUNT] = {
    [PT_STATE_INIT] = B(PROCESSING) | B(FAILED),
    [PT_STATE_PROCESSING] = B(SUCCESS) | B(FAILED) | B(PENDING) | B(UNKNOWN) | B(INIT),
    [PT_STATE_PENDING] = B(SUCCESS) | B(FAILED) | B(UNKNOWN),
    [PT_STATE_UNKNOWN] = B(SUCCESS) | B(FAILED) | B(PENDING) | B(PROCESSING),
};

int pt_refund_state_valid(enum pt_state s)
{
    return (unsigned)s < PT_STATE__COUNT && s != PT_STATE_CANCELED;
}

int pt_refund_transition_legal(enum pt_state from, enum pt_state to)
{
    if (!pt_refund_state_valid(from) || !pt_refund_state_valid(to))
        return 0;
    return (legal[from] >> to) & 1u;
}

unsigned pt_refund_allowed_from(enum pt_state to)
{
    unsigned mask = 0;
    for (int from = 0; from < PT_STATE__COUNT; from++)
        if (pt_refund_transition_legal((enum pt_state)from, to))
            mask |= 1u << from;
    return mask;
}

char *pt_refund_json_text(const struct pt_refund *r)
{
    struct pt_jw w = {0};
    pt_jw_raw(&w, "{\"id\":");
    pt_jw_int(&w, (long long)r->id);
    pt_jw_raw(&w, ",\"refund_id\":");
    pt_jw_string(&w, r->refund_id);
    pt_jw_raw(&w, ",\"order_id\":");
    pt_jw_string(&w, r->order_id);
    pt_jw_raw(&w, ",\"gateway\":");
    pt_jw_string(&w, r->gateway);
    pt_jw_raw(&w, ",\"amount\":");
    pt_jw_int(&w, (long long)r->amount);
    pt_jw_raw(&w, ",\"currency\":");
    pt_jw_string(&w, r->currency);
    pt_jw_raw(&w, ",\"state\":");
    pt_jw_string(&w, pt_state_name(r->state));
    pt_jw_raw(&w, r->review ? ",\"review\":true" : ",\"review\":false");
    pt_jw_opt_string(&w, "review_reason", r->review ? r->review_reason : NULL);
    pt_jw_opt_string(&w, "reason", r->reason);
    pt_jw_opt_string(&w, "gateway_refund_no", r->gateway_refund_no);
    pt_jw_raw(&w, ",\"attempts\":");
    pt_jw_int(&w, r->attempts);
    pt_jw_raw(&w, ",\"offline\":");
    pt_jw_string(&w, pt_offline_mode_name(r->offline));
    pt_jw_object_tail(&w, r->metadata, r->state == PT_STATE_FAILED, r->error_code, r->error_message,
                      r->created_at, r->updated_at);
    return pt_jw_finish(&w);
}

char *pt_refund_params_text(const struct pt_refund *r)
{
    /* In key order, as pt_json_canonical prints an object. */
    struct pt_jw w = {0};
    pt_jw_raw(&w, "{\"amount\":");
    pt_jw_int(&w, (long long)r->amount);
    pt_jw_raw(&w, ",\"metadata\":");
    pt_jw_string(&w, r->metadata);
    pt_jw_raw(&w, ",\"offline\":");
    pt_jw_string(&w, pt_offline_mode_name(r->offline));
    pt_jw_raw(&w, ",\"order_id\":");
    pt_jw_string(&w, r->order_id);
    pt_jw_raw(&w, ",\"reason\":");
    pt_jw_string(&w, r->reason);
    pt_jw_raw(&w, ",\"refund_id\":");
    pt_jw_string(&w, r->refund_id);
    pt_jw_raw(&w, "}");
    return pt_jw_finish(&w);
}

/* refund.succeeded / refund.failed, once per refund: the refund object and
 * its charge as they are after this transaction's changes. */
static int emit(struct pt_store *st, const struct pt_refund *r, const char *type, int64_t now)
{
    struct pt_charge c;
    int rc = pt_store_charge_get_by_id(st, r->charge_id, &c);
    if (rc)
        return rc;
    char *rt = pt_refund_json_text(r), *ct = pt_charge_json_text(&c);
    struct pt_jw w = {0};
    pt_jw_raw(&w, "{\"refund\":");
    pt_jw_raw(&w, rt ? rt : "null");
    pt_jw_raw(&w, ",\"charge\":");
    pt_jw_raw(&w, ct ? ct : "null");
    pt_jw_raw(&w, "}");
    char *payload = rt && ct ? pt_jw_finish(&w) : (free(pt_jw_finish(&w)), NULL);
    free(rt);
    free(ct);
    if (!payload)
        return PT_ENOMEM;
    int64_t seq = 0;
    rc = pt_store_refund_event_insert(st, type, r, payload, now, &seq);
    free(payload);
    if (rc == PT_EEXIST)
        return PT_OK; /* delivered once already */
    if (rc == PT_OK)
        pt_log_info("event %lld %s refund=%s order=%s", (long long)seq, type, r->refund_id,
                    r->order_id);
    return rc;
}

int pt_refund_create(struct pt_store *st, struct pt_refund *r, const char *actor, int64_t now)
{
    assert(pt_store_in_txn(st)); /* its row, audit and event commit together or not at all */
    r->state = PT_STATE_INIT;
    int rc = pt_store_refund_insert(st, r, now);
    if (rc)
        return rc;
    char detail[64];
    snprintf(detail, sizeof detail, "refund of %lld", (long long)r->amount);
    return pt_store_refund_audit(st, r, NULL, "INIT", "refund_created", actor, 0, detail, now);
}

int pt_refund_transition(struct pt_store *st, struct pt_refund *r, enum pt_state to,
                         const struct pt_charge_patch *patch, const char *cause, const char *actor,
                         const char *detail, int64_t now)
{
    assert(pt_store_in_txn(st)); /* its row, audit and event commit together or not at all */
    if (r->state == to)
        return PT_EEXIST;
    enum pt_state from = r->state;
    int rc = pt_refund_transition_legal(from, to)
                 ? pt_store_refund_transition(st, r->id, pt_refund_allowed_from(to), to, patch, now)
                 : PT_ESTATE;
    if (rc && rc != PT_ESTATE)
        return rc;
    int refused = rc == PT_ESTATE;
    int grc = pt_store_refund_get_by_id(st, r->id, r);
    if (grc)
        return grc;
    if (refused && r->state == to)
        return PT_EEXIST; /* another writer got there first: the same move */
    if (refused) {
        pt_log_warn("refund %s: refused %s -> %s (%s by %s)", r->refund_id, pt_state_name(r->state),
                    pt_state_name(to), cause, actor);
        rc = pt_store_refund_audit(st, r, pt_state_name(r->state), pt_state_name(to), cause, actor,
                                   1, "illegal transition", now);
        return rc ? rc : PT_ESTATE;
    }
    if ((rc = pt_store_refund_audit(st, r, pt_state_name(from), pt_state_name(r->state), cause,
                                    actor, 0, detail, now)))
        return rc;
    pt_log_info("refund %s of %s: %s -> %s (%s by %s)", r->refund_id, r->order_id,
                pt_state_name(from), pt_state_name(r->state), cause, actor);
    if (r->state == PT_STATE_SUCCESS)
        return emit(st, r, "refund.succeeded", now);
    if (r->state == PT_STATE_FAILED)
        return emit(st, r, "refund.failed", now);
    return PT_OK;
}

int pt_refund_review(struct pt_store *st, struct pt_refund *r, int on, const char *reason,
                     const char *actor, int64_t now)
{
    assert(pt_store_in_txn(st)); /* its row, audit and event commit together or not at all */
    int rc = pt_store_refund_set_review(st, r->id, on, on ? reason : NULL, now);
    int changed = rc == PT_OK;
    if (rc && rc != PT_ESTATE)
        return rc;
    if ((rc = pt_store_refund_get_by_id(st, r->id, r)))
        return rc;
    char detail[PT_MESSAGE_MAX + 32];
    snprintf(detail, sizeof detail, "%s%s", changed ? "" : "no change: ", reason ? reason : "");
    rc = pt_store_refund_audit(st, r, pt_state_name(r->state), pt_state_name(r->state),
                               on ? "review_raised" : "review_cleared", actor, 0, detail, now);
    if (rc || !changed)
        return rc ? rc : PT_EEXIST;
    pt_log_warn("refund %s: review %s by %s: %s", r->refund_id, on ? "raised" : "cleared", actor,
                reason ? reason : "");
    return PT_OK;
}
