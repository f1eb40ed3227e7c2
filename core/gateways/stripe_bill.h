/*
 * stripe_bill.h - Stripe's side of a day (SPEC 19): the pages of GET
 * /v1/charges and GET /v1/refunds with created[gte] and created[lt] (UTC
 * day), read into the records of core/reconcile.h.  Stripe has no daily
 * bill file; its lists of the day's charges and refunds are its books
 * (docs/reconcile.md names the pages of Stripe's API reference followed).
 *
 * Strict like every bill parser: a page that is not a list of the objects
 * asked for, of the day asked for, is refused naming the item and field,
 * and nothing of it is used.
 */
#ifndef PT_GW_STRIPE_BILL_H
#define PT_GW_STRIPE_BILL_H

#include <stddef.h>
#include <stdint.h>

#include "reconcile.h"

/* Items per page payterm asks for (limit=, Stripe's maximum). */
#define PT_STRIPE_BILL_PAGE 100
/* Largest page taken (bytes): Stripe's objects are a few KiB each. */
#define PT_STRIPE_BILL_PAGE_MAX_BYTES (4u << 20)

struct pt_stripe_bill {
    struct pt_recon_record *rows; /* malloc'd; pt_stripe_bill_free */
    size_t n, cap;
    size_t skipped;             /* not money moved: failed, pending, canceled */
    int has_more;               /* ask for the next page */
    char last_id[PT_SHORT_MAX]; /* its starting_after */
};

/*
 * Appends the records of one page (refunds: 0 GET /v1/charges, 1 GET
 * /v1/refunds) whose created must lie in [from_s, to_s), Unix seconds.  A
 * succeeded charge is a trade (metadata.order_id, payment_intent, amount,
 * currency); a succeeded refund a refund (metadata.refund_id and order_id,
 * its id, payment_intent, amount).  PT_OK; PT_EPARSE with err naming the
 * item; PT_ENOMEM.  On failure b keeps the earlier pages' rows.
 */
int pt_stripe_bill_page(const char *json, size_t len, int refunds, int64_t from_s, int64_t to_s,
                        struct pt_stripe_bill *b, char *err, size_t errlen);
void pt_stripe_bill_free(struct pt_stripe_bill *b);

struct pt_gw_config;
struct pt_http_request;
struct pt_gw_exchange;
struct pt_recon_rows;

/* The adapter's fetch_bill (gateway.h): the day's charges, then refunds. */
int pt__stripe_fetch_bill(const struct pt_gw_config *cfg, struct pt_gw_exchange *x,
                          const char *date, int day, struct pt_recon_rows *rows, char *why,
                          size_t whylen);

/*
 * GET {endpoint}/v1/charges (refunds: /v1/refunds)?created[gte]=from_s
 * &created[lt]=to_s&limit=100[&starting_after=after], with the secret
 * key's Bearer auth.  PT_OK, PT_EINVAL (no key, an id that cannot be one).
 */
int pt_stripe_bill_request(const struct pt_gw_config *cfg, int refunds, int64_t from_s,
                           int64_t to_s, const char *after, struct pt_http_request *out);

#endif
