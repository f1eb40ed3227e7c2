/*
 * refunds.h - the refund state machine, its audit and its fulfilment events
 * (SPEC section 5a).
 *
 * As charges.h for charges: every function runs inside the caller's write
 * transaction and writes the audit row (in the charge's trail, naming the
 * refund) and, for SUCCESS and FAILED, the refund.succeeded /
 * refund.failed event in that same transaction.
 */
#ifndef PT_REFUNDS_H
#define PT_REFUNDS_H

#include <stdint.h>

#include "charge.h"
#include "refund.h"
#include "store.h"

/*
 * Inserts r (state INIT) and audits it.  The store's errors: PT_EEXIST
 * (refund_id taken), PT_ERANGE (would exceed the charge), PT_ESTATE (the
 * charge is not SUCCESS).
 */
int pt_refund_create(struct pt_store *st, struct pt_refund *r, const char *actor, int64_t now);

/*
 * Moves r to `to` when the refund machine allows it from r's state (patch
 * applied in the same UPDATE; its gateway_trade_no is the gateway's refund
 * number).  *r is re-read.  PT_OK, PT_EEXIST (already there), PT_ESTATE
 * (refused and audited).
 */
int pt_refund_transition(struct pt_store *st, struct pt_refund *r, enum pt_state to,
                         const struct pt_charge_patch *patch, const char *cause, const char *actor,
                         const char *detail, int64_t now);

/* Raises or clears the refund's review flag, audited.  PT_EEXIST when it
 * already had that value. */
int pt_refund_review(struct pt_store *st, struct pt_refund *r, int on, const char *reason,
                     const char *actor, int64_t now);

/* The refund object of the API (SPEC 5a), compact JSON, malloc'd. */
char *pt_refund_json_text(const struct pt_refund *r);

/* The parameters that define a refund, as canonical JSON: amount, metadata,
 * offline, order_id, reason, refund_id.  Two requests for one refund_id
 * are "the same" when these texts are.  malloc'd. */
char *pt_refund_params_text(const struct pt_refund *r);

#endif
