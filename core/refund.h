/*
 * refund.h - a refund: money of a SUCCESS charge returned, fully or in
 * parts (SPEC section 5a).
 *
 * A refund has the states of a charge except CANCELED (enum pt_state):
 * INIT (taken, not sent), PROCESSING (being sent), PENDING (accepted, the
 * gateway processes it asynchronously: WeChat PROCESSING), UNKNOWN (sent,
 * outcome not known), SUCCESS, FAILED.  Its refund_id is unique forever and
 * is the gateway's refund idempotency key (Alipay out_request_no, WeChat
 * out_refund_no, Stripe Idempotency-Key and metadata[refund_id], 2C2P's
 * merchant reference), so a resend or a query can never make a second
 * refund.
 */
#ifndef PT_REFUND_H
#define PT_REFUND_H

#include <stdint.h>

#include "charge.h"

#define PT_REFUND_ID_MAX 65
#define PT_REASON_MAX 257

struct pt_refund {
    int64_t id;
    int64_t charge_id;
    char refund_id[PT_REFUND_ID_MAX];
    char order_id[PT_ORDER_ID_MAX]; /* the charge's */
    char gateway[PT_GATEWAY_MAX];   /* the charge's */
    int64_t amount;                 /* minor units, > 0 */
    char currency[4];               /* the charge's */
    enum pt_state state;            /* never PT_STATE_CANCELED */
    enum pt_offline_mode offline;
    char reason[PT_REASON_MAX];
    char metadata[PT_METADATA_MAX]; /* canonical JSON object text, or "" */
    char gateway_refund_no[PT_SHORT_MAX];
    int attempts;
    int64_t next_attempt_at; /* ms */
    int64_t first_sent_at;   /* ms, 0 = never sent */
    char error_code[PT_SHORT_MAX];
    char error_message[PT_MESSAGE_MAX];
    int review;
    char review_reason[PT_MESSAGE_MAX];
    int64_t created_at, updated_at; /* ms */
};

/* True when a refund may move from -> to: INIT -> PROCESSING | FAILED;
 * PROCESSING -> SUCCESS | FAILED | PENDING | UNKNOWN | INIT (provably not
 * sent); PENDING -> SUCCESS | FAILED | UNKNOWN; UNKNOWN -> SUCCESS | FAILED
 * | PENDING | PROCESSING (a resend inside the gateway's window). */
int pt_refund_transition_legal(enum pt_state from, enum pt_state to);
/* Bit mask (1 << state) of the states a refund may enter `to` from. */
unsigned pt_refund_allowed_from(enum pt_state to);
/* True for a state a refund can be in (every pt_state but CANCELED). */
int pt_refund_state_valid(enum pt_state s);

#endif
