/*
 * stripe.h - Stripe webhook signatures (Stripe-Signature, scheme v1).
 *
 * Stripe signs a webhook with HMAC-SHA256 over "<t>.<raw body>", keyed with
 * the whole endpoint secret string (`whsec_...` included, not base64-decoded),
 * and sends `Stripe-Signature: t=<unix time>,v1=<hex>[,v1=<hex>...][,v0=...]`.
 * Any one v1 that matches is enough (several appear while a secret is being
 * rolled).  The age check is one-sided, like the official SDKs: a timestamp
 * older than the tolerance is refused, one from the future is not.
 * The adapter is pt_gateway_stripe (stripe.c); the simulator signs its
 * webhooks with pt_stripe_sign_header.
 */
#ifndef PT_STRIPE_H
#define PT_STRIPE_H

#include <stddef.h>
#include <stdint.h>

#define PT_STRIPE_DEFAULT_TOLERANCE 300

/*
 * Writes "t=<t>,v1=<hex>" for payload (len bytes) into out (outlen bytes).
 * PT_OK, PT_ETOOBIG, PT_ECRYPTO.
 */
int pt_stripe_sign_header(const void *secret, size_t secretlen, int64_t t, const char *payload,
                          size_t len, char *out, size_t outlen);

/*
 * Verifies a Stripe-Signature header value against payload.  now_s is the
 * current Unix time; tolerance_s <= 0 disables the age check (as the SDKs
 * do).  *t_out (may be NULL) gets the header's timestamp.  PT_OK, PT_ESIG (no
 * t, no v1, no v1 matching, or too old - all compared in constant time).
 */
int pt_stripe_verify_header(const char *header, const char *payload, size_t len, const void *secret,
                            size_t secretlen, int64_t now_s, int64_t tolerance_s, int64_t *t_out);

struct pt_gateway;
/* The adapter's table (listed in registry.c). */
extern const struct pt_gateway pt_gateway_stripe;

/* For the adapter's other files (stripe_bill.c): GET endpoint + path with
 * the secret key's Bearer auth.  PT_OK, PT_EINVAL (no usable key). */
struct pt_gw_config;
struct pt_http_request;
int pt__stripe_get(const struct pt_gw_config *cfg, const char *path, struct pt_http_request *out);

#endif
