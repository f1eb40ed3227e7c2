/*
 * charge.h - the charge: one payment intent, its states and its fields.
 *
 * The legal transitions (SPEC section 4) are listed in charge.c and enforced
 * by the store as conditional updates; this header is the vocabulary shared
 * by the store, the sync engine, the gateway adapters and the HTTP API.
 */
#ifndef PT_CHARGE_H
#define PT_CHARGE_H

#include <stdint.h>

enum pt_state {
    PT_STATE_INIT = 0,   /* accepted, not yet sent */
    PT_STATE_PROCESSING, /* being sent */
    PT_STATE_PENDING,    /* gateway accepted it, waits for the customer */
    PT_STATE_UNKNOWN,    /* sent, outcome not known */
    PT_STATE_SUCCESS,
    PT_STATE_FAILED,
    PT_STATE_CANCELED,
    PT_STATE__COUNT
};

enum pt_offline_mode { PT_OFFLINE_PREFER = 0, PT_OFFLINE_REQUIRE_ONLINE, PT_OFFLINE_FORCE };

/* Field sizes include the terminating NUL. */
#define PT_ORDER_ID_MAX 65
#define PT_GATEWAY_MAX 8
#define PT_METHOD_MAX 16
#define PT_SHORT_MAX 129 /* gateway trade numbers, payment methods, codes */
#define PT_SUBJECT_MAX 257
#define PT_URL_MAX 1025
#define PT_MESSAGE_MAX 257
#define PT_METADATA_MAX 4097

/*
 * A charge as stored.  Plain fixed-size fields so a charge can live on the
 * stack and be copied without ownership questions; empty string = absent.
 */
struct pt_charge {
    int64_t id;
    char order_id[PT_ORDER_ID_MAX];
    char gateway[PT_GATEWAY_MAX];
    char method[PT_METHOD_MAX];
    int64_t amount; /* minor units */
    char currency[4];
    enum pt_state state;
    enum pt_offline_mode offline;
    char subject[PT_SUBJECT_MAX];
    char payment_code[PT_SHORT_MAX]; /* customer's barcode: never logged */
    char payment_method[PT_SHORT_MAX];
    char customer[PT_SHORT_MAX];
    char metadata[PT_METADATA_MAX]; /* canonical JSON object text, or "" */
    int attempts;
    int64_t next_attempt_at; /* ms */
    int64_t first_sent_at;   /* ms, 0 = never sent */
    char gateway_trade_no[PT_SHORT_MAX];
    char action_url[PT_URL_MAX]; /* qr_code / code_url / payment_url */
    char error_code[PT_SHORT_MAX];
    char error_message[PT_MESSAGE_MAX];
    int review;
    char review_reason[PT_MESSAGE_MAX];
    int64_t created_at, updated_at; /* ms */
    int64_t amount_refunded;        /* sum of its SUCCESS refunds */
    int refunds;                    /* how many refunds it has (any state) */
    /* A client asked to cancel while the charge was on its way (SPEC 18):
     * the sync engine carries it out after the charge's own request, and
     * never sends the charge again. */
    int cancel_requested;
    /* Answered 202 as queued (SPEC 18): counts in the offline limits until
     * it is final.  A charge sent online while the customer waits is not. */
    int offline_accepted;
};

/* "INIT", "PROCESSING", ...; NULL for an out-of-range value. */
const char *pt_state_name(enum pt_state s);
/* Parses a state name; PT_OK or PT_EINVAL. */
int pt_state_parse(const char *name, enum pt_state *out);
/* True for SUCCESS, FAILED, CANCELED. */
int pt_state_is_final(enum pt_state s);
/*
 * True when `from -> to` is one of the legal transitions of SPEC section 4.
 * A verified success from the gateway is handled separately: it may move any
 * non-final state to SUCCESS (see pt_charge_success_allowed_from).
 */
int pt_state_transition_legal(enum pt_state from, enum pt_state to);

/* Bit mask (1 << state) of the states `to` may be entered from. */
unsigned pt_state_allowed_from(enum pt_state to);

const char *pt_offline_mode_name(enum pt_offline_mode m);
int pt_offline_mode_parse(const char *name, enum pt_offline_mode *out);

#endif
