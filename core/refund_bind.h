/*
 * refund_bind.h - which of a gateway's listed refunds is which local refund,
 * for a gateway whose refund request carries no refund key (2C2P Payment
 * Maintenance: struct pt_gateway refund_keyless).
 *
 * Such a gateway can only be asked "which refunds did you execute on this
 * charge" (a list of amount, status and the gateway's own refund number).
 * The sync engine keeps two rules - at most one refund of a charge is in
 * flight (PROCESSING or UNKNOWN), and before every send it reads the list -
 * and this pure function decides, for the refund r in question:
 *
 *   - r already has the gateway's number: its entry decides (FOUND), and
 *     an r the list no longer shows is UNEXPLAINED;
 *   - every entry whose number a local refund holds is explained; a
 *     FAILED local refund that was sent but never got a number may explain
 *     one failed entry of its amount (a refusal 2C2P lists anyway);
 *   - nothing left: r was never executed (NONE: it may be sent);
 *   - exactly one entry left, of r's amount: that entry is r (FOUND: bind
 *     its number, its status decides, nothing is sent);
 *   - anything else - an entry of another amount, more entries than r,
 *     a bound refund missing from the list, another refund of the charge
 *     in flight or sent without a number - is UNEXPLAINED: r is not sent
 *     and an operator looks (review).
 *
 * docs/2c2p-refunds.md gives the argument that this keeps exactly once,
 * and what it assumes of the gateway.
 */
#ifndef PT_REFUND_BIND_H
#define PT_REFUND_BIND_H

#include "gateway.h"
#include "refund.h"

enum pt_bind {
    PT_BIND_NONE = 0,    /* nothing listed is r: it was never executed */
    PT_BIND_FOUND,       /* list->e[entry] is r */
    PT_BIND_UNEXPLAINED, /* the list cannot be squared with the local refunds */
};

struct pt_bind_result {
    enum pt_bind verdict;
    int entry;                /* FOUND: the index in list->e */
    char why[PT_MESSAGE_MAX]; /* UNEXPLAINED: what does not add up, for the review reason */
};

/*
 * Decides for refund r of a charge whose refunds are local[0..n) (r among
 * them or not; compared by id) against the gateway's list (list->res must
 * be SUCCESS).  Pure: no store, no network.  Always fills *out.
 */
void pt_refund_bind(const struct pt_refund *r, const struct pt_refund *local, int n,
                    const struct pt_gw_refund_list *list, struct pt_bind_result *out);

#endif
