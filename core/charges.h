/*
 * charges.h - the charge state machine and the fulfilment feed.
 *
 * Every function here runs inside the caller's write transaction and writes
 * the audit row (and, where SPEC section 6 says so, the fulfilment event) in
 * that same transaction, so a state, its audit and its event commit together
 * or not at all.  The conditional UPDATE itself is the store's
 * (pt_store_charge_transition); this module decides which source states are
 * allowed, audits refusals, and emits events exactly once.
 *
 * Actors: "api", "sync", "notify:<gateway>", "operator:<name>".
 */
#ifndef PT_CHARGES_H
#define PT_CHARGES_H

#include <stdint.h>

#include "charge.h"
#include "store.h"

/*
 * Inserts c (state INIT) and audits the creation.  PT_EEXIST when the
 * order_id exists already (data-layer uniqueness).
 */
int pt_charge_create(struct pt_store *st, struct pt_charge *c, const char *actor, int64_t now);

/*
 * Moves c to `to` if SPEC section 4 allows it from c's current state, applying
 * patch (may be NULL) in the same UPDATE.  On success *c is re-read.
 *   PT_OK      the charge moved (audited; event emitted when the new state
 *              calls for one)
 *   PT_EEXIST  the charge was already in `to`: a repeated transition, no-op
 *   PT_ESTATE  illegal from the stored state: refused and audited, *c re-read
 */
int pt_charge_transition(struct pt_store *st, struct pt_charge *c, enum pt_state to,
                         const struct pt_charge_patch *patch, const char *cause, const char *actor,
                         const char *detail, int64_t now);

/*
 * A verified gateway report that the money moved.  Any non-final state goes
 * to SUCCESS whatever we believed; SUCCESS is a no-op (PT_EEXIST); FAILED
 * and CANCELED are not changed but raise review ("succeeded_after_failed" /
 * "succeeded_after_canceled") and PT_ESTATE is returned.
 */
int pt_charge_gateway_succeeded(struct pt_store *st, struct pt_charge *c,
                                const struct pt_charge_patch *patch, const char *actor,
                                const char *detail, int64_t now);

/*
 * Raises (on=1) or clears (on=0) the review flag with a reason.  Raising
 * emits a charge.review event; clearing a SUCCESS charge releases its held
 * charge.succeeded event (once).  PT_EEXIST when the flag already had that
 * value (still audited as a no-op request by an operator).
 */
int pt_charge_review(struct pt_store *st, struct pt_charge *c, int on, const char *reason,
                     const char *actor, int64_t now);

/*
 * The charge object of the API (SPEC section 5), compact JSON (malloc'd;
 * caller frees).  NULL when out of memory.
 */
char *pt_charge_json_text(const struct pt_charge *c);

/*
 * Adds "queue" to parent, as /v1/status and `payterm status` show it: the
 * charges queued (INIT), the oldest one's age at now and, per currency,
 * their count and amount.
 */
struct cJSON;
void pt_queue_json(struct cJSON *parent, const struct pt_store_stats *s, int64_t now);

/*
 * The parameters that define a charge, defaults filled in, as canonical JSON
 * (json.h): amount, currency, customer, gateway, metadata, method, offline,
 * order_id, payment_code, payment_method, subject.  Two requests for one
 * order are "the same" when these texts are (the intake rebuilds the stored
 * charge's from its columns).  malloc'd; NULL when out of memory.
 */
char *pt_charge_params_text(const struct pt_charge *c);

/* The charge object's key for c's payment link ("qr_code", "code_url",
 * "payment_url"), or NULL for a method that has none. */
const char *pt_charge_action_key(const struct pt_charge *c);

struct pt_jw;
/* What the charge and the refund objects share (json.h writer): a
 * `"name":"v"` member, null when v is empty; and the tail of the object -
 * metadata (left out when empty), error (an object when failed or a code is
 * set, else null), created_at, updated_at and the closing brace. */
void pt_jw_opt_string(struct pt_jw *w, const char *name, const char *v);
void pt_jw_object_tail(struct pt_jw *w, const char *metadata, int failed, const char *error_code,
                       const char *error_message, int64_t created_at, int64_t updated_at);

/* Formats Unix milliseconds as RFC 3339 UTC ("2026-11-30T03:35:38.123Z"). */
void pt_rfc3339(int64_t ms, char out[32]);

#endif
