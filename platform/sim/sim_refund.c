/*
 * sim_refund.c - the refund rules every simulated gateway shares.
 *
 * Each gateway file reads its own wire format (Alipay alipay.trade.refund,
 * WeChat POST /v3/refund/domestic/refunds, Stripe POST /v1/refunds, 2C2P
 * Payment Maintenance processType R) and answers in it; what a refund may
 * do is decided here, once, so that a gateway's refund route is a parser
 * and an answer, not a new set of rules:
 *
 *   - a refund key is executed at most once: asked again with the same
 *     parameters, the gateway answers with the refund it already made; with
 *     other parameters (or for another trade) it refuses, and neither moves
 *     money;
 *   - only a captured trade is refunded;
 *   - the refunds of a trade never add up to more than the trade: a refund
 *     still processing counts, as it does at WeChat.
 *
 * The caller holds pt_sim.lk inside one ledger transaction (pt__sim_lock), so
 * the check and the insert cannot interleave with another refund of the same
 * trade, and the UNIQUE key of the refunds table backs the first rule up.
 */
#include "sim_int.h"

#include "err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum sim_refund_rc pt__sim_refund_take(struct pt_sim *s, const struct sim_trade *t,
                                       struct sim_refund *r, int64_t *left)
{
    int64_t dummy;
    if (!left)
        left = &dummy;
    *left = 0;
    struct sim_refund *old = malloc(sizeof *old); /* 5 KiB: not on a connection's stack */
    if (!old)
        return SIM_REFUND_ERROR;
    int rc = pt__sim_refund_get(s, r->gw, r->scope, r->refund_key, old);
    if (rc == PT_OK) {
        int same = old->trade_id == t->id && strcmp(old->params_hash, r->params_hash) == 0;
        *r = *old;
        free(old);
        return same ? SIM_REFUND_REPLAY : SIM_REFUND_CONFLICT;
    }
    free(old);
    if (rc != PT_ENOTFOUND)
        return SIM_REFUND_ERROR;
    if (strcmp(t->status, "captured") != 0)
        return SIM_REFUND_NOT_PAID;
    int64_t taken = 0;
    if (pt__sim_refund_totals(s, t->id, &taken, NULL, NULL) != PT_OK)
        return SIM_REFUND_ERROR;
    *left = t->amount > taken ? t->amount - taken : 0;
    if (r->amount <= 0 || r->amount > *left)
        return SIM_REFUND_EXCEEDS;
    r->trade_id = t->id;
    snprintf(r->order_id, sizeof r->order_id, "%s", t->order_id);
    snprintf(r->trade_no, sizeof r->trade_no, "%s", t->trade_no);
    memcpy(r->currency, t->currency, sizeof r->currency);
    r->created_at = r->updated_at = pt__sim_now_ms(s);
    if (strcmp(r->status, "succeeded") == 0)
        r->succeeded_at = r->created_at;
    else
        snprintf(r->status, sizeof r->status, "processing");
    rc = pt__sim_refund_insert(s, r);
    if (rc == PT_OK && r->settle_at > 0)
        pthread_cond_signal(&s->cond); /* the scheduler completes it later */
    return rc == PT_OK ? SIM_REFUND_NEW : SIM_REFUND_ERROR;
}
