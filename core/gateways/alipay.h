/*
 * alipay.h - Alipay OpenAPI (gateway.do, RSA2) wire helpers.
 *
 * The adapter (pt_gateway_alipay in alipay.c) is built from these; the
 * simulator uses them to check what payterm sends and to sign what it
 * answers, and `payterm sign`/`verify` expose them to integrators.
 *
 * Two strings to sign, as the official SDKs build them:
 *  - request: every parameter except `sign` (so `sign_type` IS signed),
 *    empty values skipped, sorted by name (bytewise), `k=v` joined by `&`,
 *    values raw (neither URL-encoded nor trimmed), UTF-8;
 *  - notification: every parameter except `sign` and `sign_type`, form-decoded
 *    values, empty values kept, same sorting and joining.
 * A response is signed over the raw text of its `alipay_trade_xxx_response`
 * object exactly as it appears in the body.
 */
#ifndef PT_ALIPAY_H
#define PT_ALIPAY_H

#include <stddef.h>
#include <stdint.h>

#include "crypto.h"
#include "gateways/form.h"

enum pt_alipay_mode { PT_ALIPAY_REQUEST = 0, PT_ALIPAY_NOTIFY = 1 };

/*
 * The string to sign for params in the given mode (see above).  Returns a
 * malloc'd NUL-terminated string (caller frees) and its length in *len (may
 * be NULL), or NULL when out of memory / over 64 KiB.
 */
char *pt_alipay_string_to_sign(const struct pt_form *params, enum pt_alipay_mode mode, size_t *len);

/*
 * Signs params (mode as above) with key and appends the `sign` pair (base64).
 * params must not already hold `sign`.  PT_OK, PT_EINVAL, PT_ECRYPTO,
 * PT_ENOMEM, PT_ETOOBIG.
 */
int pt_alipay_sign_form(struct pt_pk *key, struct pt_form *params, enum pt_alipay_mode mode);

/* Verifies the `sign` of params with pub.  PT_OK or PT_ESIG (missing sign too). */
int pt_alipay_verify_form(const struct pt_pk *pub, const struct pt_form *params,
                          enum pt_alipay_mode mode);

/*
 * Finds in a response body the raw text of the `<method with dots as
 * underscores>_response` member (or `error_response` when that is absent) and
 * the `sign` member.  *raw and *rawlen point into body; *sign is malloc'd (caller
 * frees) or NULL when the body carries no sign.  PT_OK, PT_EPARSE (not a JSON
 * object, member missing or not an object, duplicate member).
 */
int pt_alipay_response_parts(const char *body, size_t len, const char *method, const char **raw,
                             size_t *rawlen, char **sign);

/*
 * Verifies a response body: the sign over the raw response object text.
 * On PT_OK *raw and *rawlen (may be NULL) give the verified object text.
 * PT_ESIG (bad or missing sign), PT_EPARSE.
 */
int pt_alipay_verify_response(const struct pt_pk *pub, const char *body, size_t len,
                              const char *method, const char **raw, size_t *rawlen);

/* "yyyy-MM-dd HH:mm:ss" in China time (UTC+8, no DST) for now_ms. */
void pt_alipay_timestamp(int64_t now_ms, char out[20]);

/* The OpenAPI method name for an operation on a charge method ("barcode"/"qr"). */
const char *pt_alipay_method_name(int op, const char *charge_method);

/* The OpenAPI method name of a refund call (enum pt_gw_refund_op):
 * alipay.trade.refund, alipay.trade.fastpay.refund.query; "" otherwise. */
const char *pt_alipay_refund_method_name(int op);

struct pt_gw_config;
struct pt_gw_env;
struct pt_http_request;
/* The signed gateway.do POST of method with biz_content biz (no
 * notify_url): how every call is signed, for the adapter's other files. */
int pt__alipay_signed_request(const struct pt_gw_config *cfg, const char *method, const char *biz,
                              const struct pt_gw_env *env, struct pt_http_request *out);

struct pt_gateway;
/* The adapter's table (listed in registry.c). */
extern const struct pt_gateway pt_gateway_alipay;

#endif
