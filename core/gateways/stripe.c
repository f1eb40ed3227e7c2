/*
 * stripe.c - the Stripe adapter: PaymentIntents confirmed server-side with a
 * card on file (SPEC 8), and webhook verification.
 *
 * POST /v1/payment_intents (form, confirm=true, Idempotency-Key = order id),
 * GET /v1/payment_intents/search?query=metadata['order_id']:'<order id>',
 * POST /v1/payment_intents/{id}/cancel; Bearer auth with the secret key.
 * Stripe answers are not signed (TLS is the only protection), so the outcome
 * comes from the HTTP status, the error type and the PaymentIntent status.
 * Refunds (SPEC 5a): POST /v1/refunds (Idempotency-Key = refund_id) and
 * GET /v1/refunds?payment_intent=, and the refund.updated, refund.failed and
 * charge.refunded webhooks (see "refunds" and "webhooks" below).
 */
#include "gateways/stripe.h"
#include "gateways/stripe_bill.h"
#include "buf.h"
#include "crypto.h"
#include "err.h"
#include "gateway.h"
#include "gateways/gwcli.h"
#include "gateways/gwcommon.h"
#include "gateways/jscan.h"
#include "money.h"
#include "refund.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STRIPE_MAX_TEXT (64 * 1024)
/* "Bearer " and the secret key. */
#define STRIPE_AUTH_MAX 300

/* ---- webhook signatures -------------------------------------------------- */

static int stripe_mac_hex(const void *secret, size_t secretlen, const char *t, size_t tlen,
                          const char *payload, size_t len, char hex[65])
{
    struct pt_buf b;
    unsigned char mac[32];
    pt_buf_init(&b, PT_HTTP_MAX_BODY + 32);
    pt_buf_put(&b, t, tlen);
    pt_buf_putc(&b, '.');
    pt_buf_put(&b, payload, len);
    int rc = b.failed ? PT_ETOOBIG : pt_hmac_sha256(secret, secretlen, b.p, b.len, mac);
    pt_buf_free(&b, 0);
    if (rc == PT_OK)
        pt_hex_encode(mac, sizeof mac, hex);
    pt_zeroize(mac, sizeof mac);
    return rc;
}

int pt_stripe_sign_header(const void *secret, size_t secretlen, int64_t t, const char *payload,
                          size_t len, char *out, size_t outlen)
{
    char ts[24], hex[65];
    int tl = snprintf(ts, sizeof ts, "%lld", (long long)t);
    int rc = stripe_mac_hex(secret, secretlen, ts, (size_t)tl, payload, len, hex);
    if (rc != PT_OK)
        return rc;
    int n = snprintf(out, outlen, "t=%s,v1=%s", ts, hex);
    return n >= 0 && (size_t)n < outlen ? PT_OK : PT_ETOOBIG;
}

/* Trims blanks around [*s, *s + *n). */
static void trim(const char **s, size_t *n)
{
    while (*n && (**s == ' ' || **s == '\t')) {
        (*s)++;
        (*n)--;
    }
    while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
        (*n)--;
}

/* Parses the t= item: 1 to 18 digits. */
static int parse_t(const char *v, size_t n, int64_t *t)
{
    if (n == 0 || n > 18)
        return PT_ESIG;
    int64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return PT_ESIG;
        x = x * 10 + (v[i] - '0');
    }
    *t = x;
    return PT_OK;
}

/* The header's next comma-separated item from p, trimmed, in *item and *n;
 * returns where the one after it starts. */
static const char *next_item(const char *p, const char **item, size_t *n)
{
    const char *end = strchr(p, ',');
    *n = end ? (size_t)(end - p) : strlen(p);
    *item = p;
    trim(item, n);
    return end ? end + 1 : p + strlen(p);
}

int pt_stripe_verify_header(const char *header, const char *payload, size_t len, const void *secret,
                            size_t secretlen, int64_t now_s, int64_t tolerance_s, int64_t *t_out)
{
    const char *tv = NULL;
    size_t tn = 0;
    int64_t t = -1;
    int matched = 0, have_v1 = 0;
    char expected[65];
    if (!header || !secret || secretlen == 0)
        return PT_ESIG;
    /* First pass: the timestamp (the MAC covers its text as sent). */
    const char *item;
    size_t n;
    for (const char *p = header; *p;) {
        p = next_item(p, &item, &n);
        if (n > 2 && item[0] == 't' && item[1] == '=') {
            if (tv || parse_t(item + 2, n - 2, &t) != PT_OK)
                return PT_ESIG; /* two timestamps: ambiguous */
            tv = item + 2;
            tn = n - 2;
        }
    }
    if (!tv || stripe_mac_hex(secret, secretlen, tv, tn, payload, len, expected) != PT_OK)
        return PT_ESIG;
    for (const char *p = header; *p;) {
        p = next_item(p, &item, &n);
        if (n > 3 && memcmp(item, "v1=", 3) == 0) {
            have_v1 = 1;
            /* Check every v1 so the time taken does not tell which matched. */
            if (n - 3 == 64 && pt_ct_equal(item + 3, expected, 64))
                matched = 1;
        }
    }
    pt_zeroize(expected, sizeof expected);
    if (!have_v1 || !matched)
        return PT_ESIG;
    if (t_out)
        *t_out = t;
    if (tolerance_s > 0 && now_s - t > tolerance_s)
        return PT_ESIG;
    return PT_OK;
}

/* ---- amounts in Stripe's units ----------------------------------------------
 *
 * Stripe's `amount` is an integer of "the currency's minor unit" as Stripe
 * counts it, which is not always ISO 4217's.  The table follows Stripe's
 * "Supported currencies" page, https://docs.stripe.com/currencies, section
 * "Minor units in API amounts" (two-decimal unless listed; the zero-decimal
 * and three-decimal lists; the "Special cases" table).  Of the special
 * cases, ISK and UGX are sent as two-decimal values whose decimals are
 * always 00 (5 ISK is amount=500; UGX is also in the zero-decimal list, but
 * its special case says how it is sent); HUF and TWD are special for
 * payouts only - charges take two-decimal amounts - so they follow the
 * default.  MGA is zero-decimal at Stripe although ISO gives it two
 * decimals: 10.00 MGA is amount=10, and 10.50 MGA cannot be charged.
 * Three-decimal amounts "require the least-significant (last) digit to be
 * 0".  Every conversion, out and back, goes through stripe_unit, so a
 * PaymentIntent, a refund and a webhook are all read the way they were sent.
 */
static const char stripe_zero_decimal[][4] = {"BIF", "CLP", "DJF", "GNF", "JPY",
                                              "KMF", "KRW", "MGA", "PYG", "RWF",
                                              "VND", "VUV", "XAF", "XOF", "XPF"};
static const char stripe_three_decimal[][4] = {"BHD", "JOD", "KWD", "OMR", "TND"};
static const char stripe_sent_in_hundreds[][4] = {"ISK", "UGX"};

static int listed(const char (*list)[4], size_t n, const char *cur)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], cur) == 0)
            return 1;
    return 0;
}
#define LISTED(list, cur) listed(list, sizeof list / sizeof list[0], cur)

static const char *stripe_unit(const char *cur, struct pt_money_unit *u)
{
    int iso = pt_money_exponent(cur);
    if (LISTED(stripe_sent_in_hundreds, cur)) {
        *u = (struct pt_money_unit){.exp = 2, .step = 100};
        return "Stripe takes this currency as a two-decimal value whose decimals are always 00";
    }
    if (LISTED(stripe_zero_decimal, cur)) {
        *u = (struct pt_money_unit){.exp = 0, .step = 1};
        return iso > 0 ? "Stripe counts this currency as zero-decimal, so only whole units can be "
                         "charged"
                       : NULL;
    }
    if (LISTED(stripe_three_decimal, cur)) {
        *u = (struct pt_money_unit){.exp = 3, .step = 10};
        return "Stripe takes three-decimal amounts only when their last digit is 0";
    }
    *u = (struct pt_money_unit){.exp = 2, .step = 1};
    return iso != 2 ? "Stripe counts this currency as two-decimal" : NULL;
}

/* ---- build ---------------------------------------------------------------- */

static void form_pair(struct pt_buf *b, const char *k, const char *v)
{
    if (b->len)
        pt_buf_putc(b, '&');
    pt_buf_urlencode(b, k, strlen(k));
    pt_buf_putc(b, '=');
    pt_buf_urlencode(b, v, strlen(v));
}

/* The create body, parameters in the order of the generated vectors;
 * wire is the amount in Stripe's units. */
static char *create_body(const struct pt_charge *c, int64_t wire, size_t *len)
{
    struct pt_buf b;
    char amount[24], cur[4];
    snprintf(amount, sizeof amount, "%lld", (long long)wire);
    for (int i = 0; i < 4; i++) /* Stripe wants lower-case ISO codes */
        cur[i] = (char)(c->currency[i] >= 'A' && c->currency[i] <= 'Z' ? c->currency[i] + 32
                                                                       : c->currency[i]);
    pt_buf_init(&b, STRIPE_MAX_TEXT);
    form_pair(&b, "amount", amount);
    form_pair(&b, "currency", cur);
    form_pair(&b, "confirm", "true");
    form_pair(&b, "payment_method", c->payment_method);
    if (c->customer[0])
        form_pair(&b, "customer", c->customer);
    form_pair(&b, "metadata[order_id]", c->order_id);
    /* A card on file needs no redirect; without this, recent API versions
     * enable redirect-based methods and refuse confirm=true lacking return_url. */
    form_pair(&b, "payment_method_types[0]", "card");
    return pt_buf_take(&b, len);
}

static int stripe_route(enum pt_gw_op op, const struct pt_charge *c, const char **method,
                        char *path, size_t pathlen, char **body, size_t *blen)
{
    struct pt_buf b;
    *body = NULL;
    *blen = 0;
    if (op == PT_GW_PAY) {
        int64_t wire = 0;
        if (strcmp(c->method, "card_on_file") != 0 || !c->payment_method[0] || c->amount <= 0 ||
            !pt_money_currency_valid(c->currency))
            return PT_EINVAL;
        int rc = pt__amount_out(&pt_gateway_stripe, c->currency, c->amount, &wire);
        if (rc != PT_OK)
            return rc; /* Stripe cannot charge it (the intake refuses such amounts) */
        *method = "POST";
        snprintf(path, pathlen, "/v1/payment_intents");
        *body = create_body(c, wire, blen);
        return *body ? PT_OK : PT_ENOMEM;
    }
    if (op == PT_GW_QUERY) {
        char q[160];
        snprintf(q, sizeof q, "metadata['order_id']:'%s'", c->order_id);
        pt_buf_init(&b, pathlen - 1);
        pt_buf_puts(&b, "/v1/payment_intents/search?query=");
        pt_buf_urlencode(&b, q, strlen(q));
        *method = "GET";
        int ok = !b.failed;
        if (ok)
            memcpy(path, b.p, b.len + 1);
        pt_buf_free(&b, 0);
        return ok ? PT_OK : PT_ETOOBIG;
    }
    if (op != PT_GW_CANCEL)
        return PT_EUNSUPPORTED; /* a card charge shows no code to close */
    if (!pt__id_safe(c->gateway_trade_no))
        return PT_EINVAL; /* cancel needs the PaymentIntent id */
    *method = "POST";
    snprintf(path, pathlen, "/v1/payment_intents/%s/cancel", c->gateway_trade_no);
    return PT_OK;
}

/* The secret key is usable in a header: set, and without a line break. */
static int secret_ok(const struct pt_gw_config *cfg)
{
    return cfg->secret_len && cfg->secret_len < STRIPE_AUTH_MAX - 8 && cfg->endpoint[0] &&
           !memchr(cfg->secret, '\n', cfg->secret_len) &&
           !memchr(cfg->secret, '\r', cfg->secret_len);
}

/*
 * A request to the Stripe API: method, endpoint + path, body (taken over,
 * may be NULL), Bearer auth, the form Content-Type on a POST and, when
 * idem_key is not NULL, the Idempotency-Key header.  Shared by the charge
 * and the refund calls.
 */
static int stripe_request(const struct pt_gw_config *cfg, const char *method, const char *path,
                          char *body, size_t blen, const char *idem_key,
                          struct pt_http_request *out)
{
    char auth[STRIPE_AUTH_MAX];
    int rc = pt__request_start(out, method, cfg->endpoint, path);
    if (rc != PT_OK) {
        free(body);
        return rc;
    }
    pt__request_body(out, body, blen);
    snprintf(auth, sizeof auth, "Bearer %.*s", (int)cfg->secret_len, (const char *)cfg->secret);
    rc = pt_http_request_add_header(out, "Authorization", auth);
    pt_zeroize(auth, sizeof auth);
    if (rc == PT_OK && strcmp(method, "POST") == 0)
        rc = pt_http_request_add_header(out, "Content-Type", "application/x-www-form-urlencoded");
    if (rc == PT_OK && idem_key)
        rc = pt_http_request_add_header(out, "Idempotency-Key", idem_key);
    if (rc != PT_OK)
        pt_http_request_free(out);
    return rc;
}

int pt__stripe_get(const struct pt_gw_config *cfg, const char *path, struct pt_http_request *out)
{
    if (!secret_ok(cfg))
        return PT_EINVAL;
    return stripe_request(cfg, "GET", path, NULL, 0, NULL, out);
}

static int stripe_build(const struct pt_gw_config *cfg, enum pt_gw_op op, const struct pt_charge *c,
                        const struct pt_gw_env *env, struct pt_http_request *out)
{
    const char *method = NULL;
    char path[512];
    char *body = NULL;
    size_t blen = 0;
    (void)env;
    if (!secret_ok(cfg) || !pt__id_safe(c->order_id))
        return PT_EINVAL;
    int rc = stripe_route(op, c, &method, path, sizeof path, &body, &blen);
    if (rc != PT_OK)
        return rc;
    /* The order id is the idempotency key: a resend inside Stripe's 24 h
     * window replays the first answer instead of charging again. */
    return stripe_request(cfg, method, path, body, blen, op == PT_GW_PAY ? c->order_id : NULL, out);
}

/* ---- parse ---------------------------------------------------------------- */

/* An integer amount member of Stripe's (at path) in ISO minor units of cur. */
static int stripe_amount(const char *obj, size_t len, const char *const *path, const char *cur,
                         int64_t *out)
{
    int64_t wire = 0;
    int rc = pt_jscan_int(obj, len, path, &wire);
    return rc == PT_OK ? pt__amount_in(&pt_gateway_stripe, cur, wire, out) : rc;
}

/* What a succeeded PaymentIntent captured, in ISO minor units of cur:
 * amount_received (what moved), or amount when the object names only that. */
static int captured_amount(const char *pi, size_t pilen, const char *cur, int64_t *out)
{
    static const char *const received[] = {"amount_received", NULL};
    static const char *const asked[] = {"amount", NULL};
    int rc = stripe_amount(pi, pilen, received, cur, out);
    return rc == PT_ENOTFOUND ? stripe_amount(pi, pilen, asked, cur, out) : rc;
}

/* Classifies one PaymentIntent object (raw text pi, pilen bytes). */
static void classify_pi(const char *pi, size_t pilen, struct pt_gw_result *out)
{
    cJSON *o = cJSON_ParseWithLength(pi, pilen);
    const char *st = pt__jstr(o, "status");
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(o, "last_payment_error");
    pt__copy(out->trade_no, sizeof out->trade_no, pt__jstr(o, "id"));
    if (!st) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_response", "no PaymentIntent status");
    } else if (strcmp(st, "succeeded") == 0) {
        pt__result(out, PT_OUTCOME_SUCCESS, st, NULL);
        if (pt__currency_upper(pt__jstr(o, "currency"), out->currency) != PT_OK ||
            captured_amount(pi, pilen, out->currency, &out->amount) != PT_OK)
            pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_amount",
                       "Stripe reported an amount payterm cannot read exactly");
    } else if (strcmp(st, "processing") == 0 || strcmp(st, "requires_action") == 0) {
        pt__result(out, PT_OUTCOME_PENDING, st, NULL);
    } else if (strcmp(st, "requires_payment_method") == 0) {
        const char *code = pt__jstr(err, "decline_code");
        pt__result(out, PT_OUTCOME_DECLINED, code ? code : pt__jstr(err, "code"),
                   pt__jstr(err, "message"));
        if (!out->code[0])
            pt__copy(out->code, sizeof out->code, st);
    } else if (strcmp(st, "canceled") == 0) {
        pt__result(out, PT_OUTCOME_CANCELED, pt__jstr(o, "cancellation_reason"), NULL);
    } else {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, st, "unexpected PaymentIntent status");
    }
    cJSON_Delete(o);
}

/* An error answer: {"error":{"type","code","decline_code","message","payment_intent"}}. */
static void classify_error(enum pt_gw_op op, int status, const cJSON *e, struct pt_gw_result *out)
{
    const char *type = pt__jstr(e, "type"), *code = pt__jstr(e, "code");
    const char *decline = pt__jstr(e, "decline_code"), *msg = pt__jstr(e, "message");
    const cJSON *pi = cJSON_GetObjectItemCaseSensitive(e, "payment_intent");
    pt__copy(out->trade_no, sizeof out->trade_no, pt__jstr(pi, "id"));
    if (status == 402 || (type && strcmp(type, "card_error") == 0)) {
        pt__result(out, PT_OUTCOME_DECLINED, decline ? decline : code ? code : "card_error", msg);
    } else if (type && strcmp(type, "idempotency_error") == 0) {
        /* Same key, different parameters: never guess which charge is real. */
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "idempotency_error", msg);
        out->review = 1;
    } else if (status == 409 || (code && strcmp(code, "idempotency_key_in_use") == 0)) {
        /* The first request with this key is still running at Stripe. */
        pt__result(out, PT_OUTCOME_AMBIGUOUS, code ? code : "idempotency_key_in_use", msg);
    } else if (op == PT_GW_PAY && (status == 400 || status == 401 || status == 403)) {
        pt__result(out, PT_OUTCOME_DECLINED, code ? code : type ? type : "invalid_request", msg);
    } else {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, code ? code : type ? type : "http_error", msg);
    }
}

/* Search results: a succeeded PaymentIntent wins, else the first one. */
static void classify_search(const char *body, size_t len, struct pt_gw_result *out)
{
    static const char *const data_path[] = {"data", NULL};
    const char *data, *el, *pick = NULL;
    size_t dlen, ellen, picklen = 0;
    if (pt_jscan_path(body, len, data_path, &data, &dlen) != PT_OK) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_response", "search without data");
        return;
    }
    for (size_t i = 0; pt_jscan_index(data, dlen, i, &el, &ellen) == PT_OK; i++) {
        cJSON *o = cJSON_ParseWithLength(el, ellen);
        const char *st = pt__jstr(o, "status");
        if (!pick || (st && strcmp(st, "succeeded") == 0)) {
            pick = el;
            picklen = ellen;
        }
        cJSON_Delete(o);
    }
    if (!pick)
        pt__result(out, PT_OUTCOME_NOT_FOUND, "no_payment_intent", NULL);
    else
        classify_pi(pick, picklen, out);
}

static int stripe_parse(const struct pt_gw_config *cfg, enum pt_gw_op op, const struct pt_charge *c,
                        const struct pt_http_response *resp, struct pt_gw_result *out)
{
    (void)cfg;
    (void)c;
    memset(out, 0, sizeof *out);
    cJSON *o = resp->body_len ? cJSON_ParseWithLength(resp->body, resp->body_len) : NULL;
    if (resp->status >= 500 || !cJSON_IsObject(o)) {
        char code[16];
        snprintf(code, sizeof code, "http_%d", resp->status);
        pt__result(out, PT_OUTCOME_AMBIGUOUS, code, "no usable answer from Stripe");
    } else if (resp->status != 200) {
        classify_error(op, resp->status, cJSON_GetObjectItemCaseSensitive(o, "error"), out);
    } else if (op == PT_GW_QUERY) {
        classify_search(resp->body, resp->body_len, out);
    } else {
        classify_pi(resp->body, resp->body_len, out);
    }
    cJSON_Delete(o);
    return PT_OK;
}

/* ---- refunds ---------------------------------------------------------------
 *
 * POST /v1/refunds with payment_intent, amount and metadata[refund_id] /
 * [order_id] (/ [reason]), Idempotency-Key = refund_id; the query lists the
 * PaymentIntent's refunds and picks the one whose metadata names the
 * refund_id (SPEC 5a, 8).  From the stripe SDK (stripe@23, see
 * tests/vectors/gen/gen_refund_alipay_stripe.js): it keys every POST itself
 * (stripe-node-retry-<uuid>) unless told a key, so only an explicit key
 * makes a resend the same refund; a Refund's status is pending,
 * requires_action, succeeded, failed or canceled, failure_reason says why it
 * failed; Stripe's own `reason` only takes duplicate, fraudulent or
 * requested_by_customer, so the free text goes in metadata[reason].
 * Stripe's idempotency layer replays the saved answer of a key for 24 h,
 * "including 500 errors" (docs.stripe.com/idempotency), which is why an
 * unknown outcome is settled by the list query, not by sending again.
 */

/* wire: the refund's amount in Stripe's units. */
static char *refund_body(const struct pt_charge *c, const struct pt_refund *r, int64_t wire,
                         size_t *len)
{
    struct pt_buf b;
    char amount[24];
    snprintf(amount, sizeof amount, "%lld", (long long)wire);
    pt_buf_init(&b, STRIPE_MAX_TEXT);
    form_pair(&b, "payment_intent", c->gateway_trade_no);
    form_pair(&b, "amount", amount);
    form_pair(&b, "metadata[refund_id]", r->refund_id);
    form_pair(&b, "metadata[order_id]", c->order_id);
    if (r->reason[0])
        form_pair(&b, "metadata[reason]", r->reason);
    return pt_buf_take(&b, len);
}

static int stripe_build_refund(const struct pt_gw_config *cfg, enum pt_gw_refund_op op,
                               const struct pt_charge *c, const struct pt_refund *r,
                               const struct pt_gw_env *env, struct pt_http_request *out)
{
    char path[256];
    (void)env;
    /* The PaymentIntent id goes into the path or the form, the refund_id
     * into a header: both must be plain ids. */
    if (!secret_ok(cfg) || !pt__id_safe(c->order_id) || !pt__id_safe(c->gateway_trade_no) ||
        !pt__id_safe(r->refund_id) || strcmp(r->currency, c->currency) != 0)
        return PT_EINVAL;
    if (op == PT_GW_REFUND_QUERY) {
        int n = snprintf(path, sizeof path, "/v1/refunds?payment_intent=%s&limit=100",
                         c->gateway_trade_no);
        if (n < 0 || (size_t)n >= sizeof path)
            return PT_EINVAL;
        return stripe_request(cfg, "GET", path, NULL, 0, NULL, out);
    }
    if (op != PT_GW_REFUND || r->amount <= 0 || r->amount > c->amount)
        return PT_EINVAL;
    int64_t wire = 0;
    int rc = pt__amount_out(&pt_gateway_stripe, r->currency, r->amount, &wire);
    if (rc != PT_OK)
        return rc; /* Stripe cannot refund it (the intake refuses such amounts) */
    size_t blen = 0;
    char *body = refund_body(c, r, wire, &blen);
    if (!body)
        return PT_ENOMEM;
    /* The refund_id is the idempotency key: a resend inside the 24 h window
     * replays the first answer instead of refunding twice. */
    return stripe_request(cfg, "POST", "/v1/refunds", body, blen, r->refund_id, out);
}

/* Classifies one Refund object (raw text re, relen bytes) as the answer
 * about refund r of charge c: it must be that refund, of that amount. */
static void classify_refund(const char *re, size_t relen, const struct pt_charge *c,
                            const struct pt_refund *r, struct pt_gw_result *out)
{
    static const char *const amount_path[] = {"amount", NULL};
    cJSON *o = cJSON_ParseWithLength(re, relen);
    const char *id = pt__jstr(o, "id"), *st = pt__jstr(o, "status");
    const char *rid = pt__jstr(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "refund_id");
    const char *pi = pt__jstr(o, "payment_intent");
    int64_t amount = 0;
    char cur[4];
    if (!id || !*id || strlen(id) >= sizeof out->trade_no || !st) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_response", "not a Refund object");
    } else if (!rid || strcmp(rid, r->refund_id) != 0) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "refund_id_mismatch",
                   "the Refund does not carry this refund_id");
    } else if (!pi || strcmp(pi, c->gateway_trade_no) != 0) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "payment_intent_mismatch",
                   "the Refund is of another PaymentIntent");
    } else if (pt__currency_upper(pt__jstr(o, "currency"), cur) != PT_OK ||
               stripe_amount(re, relen, amount_path, cur, &amount) != PT_OK) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_amount",
                   "Stripe reported an amount payterm cannot read exactly");
    } else if (amount != r->amount) {
        /* Money may have moved, and not as asked: an operator looks (as for
         * WeChat), rather than a wait of resolve_timeout_s. */
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "amount_mismatch",
                   "the Refund is not of this refund's amount");
        out->review = 1;
    } else if (strcmp(cur, r->currency) != 0) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "currency_mismatch",
                   "the Refund is not in this refund's currency");
        out->review = 1;
    } else {
        enum pt_outcome oc = PT_OUTCOME_AMBIGUOUS;
        const char *msg = "unexpected Refund status";
        if (strcmp(st, "succeeded") == 0) {
            oc = PT_OUTCOME_SUCCESS;
            msg = NULL;
        } else if (strcmp(st, "pending") == 0 || strcmp(st, "requires_action") == 0) {
            oc = PT_OUTCOME_PENDING;
            msg = pt__jstr(o, "pending_reason");
        } else if (strcmp(st, "failed") == 0 || strcmp(st, "canceled") == 0) {
            oc = PT_OUTCOME_DECLINED;
            msg = pt__jstr(o, "failure_reason");
        }
        pt__result(out, oc, st, msg);
        pt__copy(out->trade_no, sizeof out->trade_no, id);
        if (oc != PT_OUTCOME_AMBIGUOUS) {
            out->amount = amount;
            memcpy(out->currency, cur, sizeof cur);
        }
    }
    cJSON_Delete(o);
}

/* At most this many refunds are looked at in a list answer (limit=100). */
#define STRIPE_MAX_LIST 100

/* The list answer of GET /v1/refunds?payment_intent=: the refund whose
 * metadata names r's refund_id. */
static void classify_refund_list(const char *body, size_t len, const struct pt_charge *c,
                                 const struct pt_refund *r, struct pt_gw_result *out)
{
    static const char *const data_path[] = {"data", NULL};
    const char *data, *el, *pick = NULL;
    size_t dlen, ellen, picklen = 0, i, found = 0;
    if (pt_jscan_path(body, len, data_path, &data, &dlen) != PT_OK || data[0] != '[') {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_response", "list without data");
        return;
    }
    for (i = 0; i < STRIPE_MAX_LIST && pt_jscan_index(data, dlen, i, &el, &ellen) == PT_OK; i++) {
        cJSON *o = cJSON_ParseWithLength(el, ellen);
        const char *rid = pt__jstr(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "refund_id");
        if (rid && strcmp(rid, r->refund_id) == 0 && found++ == 0) {
            pick = el;
            picklen = ellen;
        }
        cJSON_Delete(o);
    }
    cJSON *l = cJSON_ParseWithLength(body, len);
    int more = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(l, "has_more")) ||
               (i == STRIPE_MAX_LIST && pt_jscan_index(data, dlen, i, &el, &ellen) == PT_OK);
    cJSON_Delete(l);
    if (found > 1) {
        /* One refund_id, two refunds: the very thing the key exists to stop. */
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "duplicate_refund",
                   "two Stripe refunds carry this refund_id");
        out->review = 1;
    } else if (found == 1) {
        classify_refund(pick, picklen, c, r, out);
    } else if (more) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "refund_list_truncated",
                   "the PaymentIntent has more refunds than one page");
    } else {
        pt__result(out, PT_OUTCOME_NOT_FOUND, "no_refund",
                   "no Stripe refund carries this refund_id");
    }
}

/*
 * An error answer to a refund call.  Stripe refuses a refund it will not
 * make with 400 invalid_request_error: over the unrefunded amount ("Refund
 * amount ($X) is greater than unrefunded amount on charge ($Y)", sent with
 * param amount and, depending on the path, no code or amount_too_large),
 * charge_already_refunded, resource_missing...; nothing was refunded, so it
 * is DECLINED.  idempotency_error is the key reused on "a request that does
 * not match the first request's API endpoint and parameters": payterm's
 * parameters for a refund_id never change, so another request holds this key
 * (a charge whose order id is the same string, within 24 h) and this one was
 * not executed - DECLINED, and an operator looks (review).  409
 * idempotency_key_in_use (the first request with the key is still running),
 * 429 and everything else: AMBIGUOUS.  A failed query says nothing about the
 * refund: never a decline.
 */
static void classify_refund_error(enum pt_gw_refund_op op, int status, const cJSON *e,
                                  struct pt_gw_result *out)
{
    const char *type = pt__jstr(e, "type"), *code = pt__jstr(e, "code");
    const char *msg = pt__jstr(e, "message");
    const char *what = code ? code : type ? type : "http_error";
    if (type && strcmp(type, "idempotency_error") == 0) {
        pt__result(out, op == PT_GW_REFUND ? PT_OUTCOME_DECLINED : PT_OUTCOME_AMBIGUOUS,
                   "idempotency_error", msg);
        out->review = 1;
    } else if (status == 409 || (code && strcmp(code, "idempotency_key_in_use") == 0)) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, code ? code : "idempotency_key_in_use", msg);
    } else if (op == PT_GW_REFUND && status >= 400 && status <= 404) {
        pt__result(out, PT_OUTCOME_DECLINED, what, msg);
    } else {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, what, msg);
    }
}

static int stripe_parse_refund(const struct pt_gw_config *cfg, enum pt_gw_refund_op op,
                               const struct pt_charge *c, const struct pt_refund *r,
                               const struct pt_http_response *resp, struct pt_gw_result *out)
{
    (void)cfg;
    memset(out, 0, sizeof *out);
    cJSON *o = resp->body_len ? cJSON_ParseWithLength(resp->body, resp->body_len) : NULL;
    if (op != PT_GW_REFUND && op != PT_GW_REFUND_QUERY) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "unsupported_operation", NULL);
    } else if (resp->status >= 500 || !cJSON_IsObject(o)) {
        char code[16];
        snprintf(code, sizeof code, "http_%d", resp->status);
        pt__result(out, PT_OUTCOME_AMBIGUOUS, code, "no usable answer from Stripe");
    } else if (resp->status != 200) {
        classify_refund_error(op, resp->status, cJSON_GetObjectItemCaseSensitive(o, "error"), out);
    } else if (op == PT_GW_REFUND_QUERY) {
        classify_refund_list(resp->body, resp->body_len, c, r, out);
    } else {
        classify_refund(resp->body, resp->body_len, c, r, out);
    }
    cJSON_Delete(o);
    return PT_OK;
}

/* ---- webhooks ------------------------------------------------------------- */

static int event_status(const char *type, struct pt_notification *n)
{
    n->relevant = 1;
    if (strcmp(type, "payment_intent.succeeded") == 0)
        n->status = PT_OUTCOME_SUCCESS;
    else if (strcmp(type, "payment_intent.payment_failed") == 0)
        n->status = PT_OUTCOME_DECLINED;
    else if (strcmp(type, "payment_intent.canceled") == 0)
        n->status = PT_OUTCOME_CANCELED;
    else
        n->relevant = 0;
    return n->relevant;
}

static int is_refund_event(const char *type)
{
    return strcmp(type, "refund.updated") == 0 || strcmp(type, "refund.failed") == 0 ||
           strcmp(type, "charge.refunded") == 0;
}

/* The refund's string field, or the charge's when the refund has none; both
 * present and different is a contradiction (PT_EPARSE). */
static int pick_field(const char *of_refund, const char *of_charge, const char **out)
{
    if (of_refund && of_charge && strcmp(of_refund, of_charge) != 0)
        return PT_EPARSE;
    *out = of_refund ? of_refund : of_charge;
    return PT_OK;
}

/*
 * Fills n from one Refund object (raw text re, relen bytes); order and pi are
 * its charge's metadata.order_id and payment_intent when it came inside a
 * charge (charge.refunded), else NULL.  A refund payterm did not make (no
 * metadata.refund_id or order_id) or in a status it does not know is valid
 * but relevant 0.
 */
static int fill_refund(const char *re, size_t relen, const char *type, const char *order,
                       const char *pi, struct pt_notification *n)
{
    static const char *const amount_path[] = {"amount", NULL};
    int rc = PT_EPARSE;
    cJSON *o = cJSON_ParseWithLength(re, relen);
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    const char *rid = pt__jstr(md, "refund_id"), *id = pt__jstr(o, "id");
    const char *st = pt__jstr(o, "status");
    if (!cJSON_IsObject(o) || pick_field(pt__jstr(md, "order_id"), order, &order) != PT_OK ||
        pick_field(pt__jstr(o, "payment_intent"), pi, &pi) != PT_OK)
        goto out;
    n->relevant = 0;
    rc = PT_OK;
    if (!rid || !*rid || !order || !*order || !st)
        goto out; /* not a refund payterm asked for */
    if (strcmp(st, "succeeded") == 0)
        n->status = PT_OUTCOME_SUCCESS;
    else if (strcmp(st, "pending") == 0 || strcmp(st, "requires_action") == 0)
        n->status = PT_OUTCOME_PENDING;
    else if (strcmp(st, "failed") == 0 || strcmp(st, "canceled") == 0)
        n->status = PT_OUTCOME_DECLINED;
    else
        goto out; /* a status this adapter does not know: the query settles it */
    rc = PT_EPARSE;
    /* refund.failed about a refund that did not fail reads two ways. */
    if (strcmp(type, "refund.failed") == 0 && n->status != PT_OUTCOME_DECLINED)
        goto out;
    if (!id || !*id || strlen(id) >= sizeof n->refund_no || strlen(rid) >= sizeof n->refund_id ||
        strlen(order) >= sizeof n->order_id || (pi && strlen(pi) >= sizeof n->trade_no) ||
        pt__currency_upper(pt__jstr(o, "currency"), n->currency) != PT_OK ||
        stripe_amount(re, relen, amount_path, n->currency, &n->amount) != PT_OK)
        goto out;
    pt__copy(n->refund_id, sizeof n->refund_id, rid);
    pt__copy(n->refund_no, sizeof n->refund_no, id);
    pt__copy(n->order_id, sizeof n->order_id, order);
    pt__copy(n->trade_no, sizeof n->trade_no, pi);
    n->refund = 1;
    n->relevant = 1;
    n->merchant_ok = 1; /* the webhook secret is the merchant check */
    rc = PT_OK;
out:
    cJSON_Delete(o);
    return rc;
}

/* At most this many refunds of a charge.refunded event are looked at (Stripe
 * embeds the first page of ten). */
#define STRIPE_MAX_EMBEDDED 100

/*
 * refund.updated / refund.failed carry the Refund as data.object;
 * charge.refunded the Charge, whose refunds.data (when the API version still
 * embeds it: since 2022-11-15 it does not) lists its refunds.  That event is
 * about the first refund whose metadata names a refund_id (gateway.h); a
 * charge without such a refund is relevant 0 and its refunds are confirmed by
 * query.
 */
static int fill_refund_event(const char *body, size_t len, const char *type,
                             struct pt_notification *n)
{
    static const char *const obj_path[] = {"data", "object", NULL};
    static const char *const list_path[] = {"refunds", "data", NULL};
    const char *obj, *list, *el;
    size_t objlen, listlen, ellen;
    if (pt_jscan_path(body, len, obj_path, &obj, &objlen) != PT_OK || obj[0] != '{')
        return PT_EPARSE;
    if (strcmp(type, "charge.refunded") != 0)
        return fill_refund(obj, objlen, type, NULL, NULL, n);
    int rc = pt_jscan_path(obj, objlen, list_path, &list, &listlen);
    if (rc == PT_ENOTFOUND) {
        n->relevant = 0;
        return PT_OK;
    }
    if (rc != PT_OK || list[0] != '[')
        return PT_EPARSE;
    for (size_t i = 0;
         i < STRIPE_MAX_EMBEDDED && pt_jscan_index(list, listlen, i, &el, &ellen) == PT_OK; i++) {
        cJSON *re = cJSON_ParseWithLength(el, ellen);
        const char *rid = pt__jstr(cJSON_GetObjectItemCaseSensitive(re, "metadata"), "refund_id");
        int ours = rid && *rid;
        cJSON_Delete(re);
        if (!ours)
            continue;
        cJSON *ch = cJSON_ParseWithLength(obj, objlen);
        const char *order = pt__jstr(cJSON_GetObjectItemCaseSensitive(ch, "metadata"), "order_id");
        rc = fill_refund(el, ellen, type, order, pt__jstr(ch, "payment_intent"), n);
        cJSON_Delete(ch);
        return rc;
    }
    n->relevant = 0;
    return PT_OK;
}

static int fill_event(const char *body, size_t len, struct pt_notification *n)
{
    static const char *const obj_path[] = {"data", "object", NULL};
    static const char *const amount_path[] = {"amount", NULL};
    int rc = PT_EPARSE;
    const char *pi;
    size_t pilen;
    cJSON *e = cJSON_ParseWithLength(body, len);
    const char *id = pt__jstr(e, "id"), *type = pt__jstr(e, "type");
    if (!id || !*id || !type || strlen(id) >= sizeof n->dedup_id)
        goto out;
    pt__copy(n->gateway, sizeof n->gateway, "stripe");
    pt__copy(n->dedup_id, sizeof n->dedup_id, id);
    if (is_refund_event(type)) {
        rc = fill_refund_event(body, len, type, n);
        goto out;
    }
    if (!event_status(type, n)) {
        rc = PT_OK;
        goto out;
    }
    if (pt_jscan_path(body, len, obj_path, &pi, &pilen) != PT_OK)
        goto out;
    cJSON *o = cJSON_ParseWithLength(pi, pilen);
    const char *order = pt__jstr(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "order_id");
    pt__copy(n->trade_no, sizeof n->trade_no, pt__jstr(o, "id"));
    if (!order || !*order) {
        n->relevant = 0; /* not a PaymentIntent payterm created */
        rc = PT_OK;
    } else if (strlen(order) < sizeof n->order_id &&
               pt__currency_upper(pt__jstr(o, "currency"), n->currency) == PT_OK &&
               (n->status == PT_OUTCOME_SUCCESS
                    ? captured_amount(pi, pilen, n->currency, &n->amount)
                    : stripe_amount(pi, pilen, amount_path, n->currency, &n->amount)) == PT_OK) {
        pt__copy(n->order_id, sizeof n->order_id, order);
        /* The webhook secret belongs to one account's endpoint: the
         * signature is the merchant check. */
        n->merchant_ok = 1;
        rc = PT_OK;
    }
    cJSON_Delete(o);
out:
    cJSON_Delete(e);
    return rc;
}

static int stripe_parse_notify(const struct pt_gw_config *cfg, const struct pt_http_response *msg,
                               const struct pt_gw_env *env, struct pt_notification *out)
{
    memset(out, 0, sizeof *out);
    int64_t tol = env && env->tolerance_s ? env->tolerance_s : PT_STRIPE_DEFAULT_TOLERANCE;
    int64_t now_s = env ? env->now_ms / 1000 : 0;
    int rc = pt_stripe_verify_header(pt_http_response_header(msg, "Stripe-Signature"),
                                     msg->body ? msg->body : "", msg->body_len, cfg->webhook_secret,
                                     cfg->webhook_secret_len, now_s, tol < 0 ? 0 : tol, NULL);
    if (rc != PT_OK)
        return PT_ESIG;
    rc = fill_event(msg->body, msg->body_len, out);
    if (rc != PT_OK)
        memset(out, 0, sizeof *out);
    return rc;
}

/* gateways.stripe (SPEC section 10). */
enum { STRIPE_SECRET_KEY, STRIPE_WEBHOOK_SECRET };
static const struct pt_gw_key stripe_keys[] = {
    PT_GW_KEY("endpoint", PT_GWK_HTTPS, endpoint, 0),
    PT_GW_KEY("secret_key_file", PT_GWK_SECRET, files[STRIPE_SECRET_KEY], 1),
    PT_GW_KEY("webhook_secret_file", PT_GWK_SECRET, files[STRIPE_WEBHOOK_SECRET], 0),
    {.name = NULL},
};

static int stripe_load(const struct pt_gw_settings *in, pt_gw_random_fn rnd, void *ctx,
                       struct pt_gw_config *o, char *err, size_t errlen)
{
    (void)rnd;
    (void)ctx;
    int rc = pt__gw_load_secret("stripe", "secret_key_file", in->files[STRIPE_SECRET_KEY],
                                o->secret, sizeof o->secret, &o->secret_len, err, errlen);
    if (rc == PT_OK && in->files[STRIPE_WEBHOOK_SECRET][0])
        rc = pt__gw_load_secret("stripe", "webhook_secret_file", in->files[STRIPE_WEBHOOK_SECRET],
                                o->webhook_secret, sizeof o->webhook_secret, &o->webhook_secret_len,
                                err, errlen);
    return rc;
}

/* A Stripe idempotency key lives 24 h: queued card charges must go out
 * within 23 h. */
static const struct pt_gw_method stripe_methods[] = {
    {.name = "card_on_file", .offline_max_age_s = 82800, .card = 1},
    {.name = NULL},
};

const struct pt_gateway pt_gateway_stripe = {
    .name = "stripe",
    .methods = stripe_methods,
    .notify_route = "/webhooks/stripe",
    .notify_needs_time = 1,
    .default_endpoint = "https://api.stripe.com",
    .config_keys = stripe_keys,
    .load = stripe_load,
    .cli_sign = pt__cli_sign_stripe,
    .cli_verify = pt__cli_verify_stripe,
    .cli_sign_usage = "--gateway stripe (--secret whsec_... | --secret-file F)\n"
                      "        [--timestamp T] < payload",
    .cli_sign_prints = "{\"signed_payload\":...,\"signature\":...,\"header\":...}",
    .cli_verify_usage = "--gateway stripe (--secret whsec_... | --secret-file F)\n"
                        "        --header 'Stripe-Signature: ...' [--now UNIX] [--tolerance 300]\n"
                        "        < payload",
    .cancel_needs_trade_no = 1,
    .resend_window_s = 24 * 3600,
    .order_id_min = 1,
    .order_id_max = 64,
    .amount_unit = stripe_unit,
    .build = stripe_build,
    .parse = stripe_parse,
    .parse_notify = stripe_parse_notify,
    .build_refund = stripe_build_refund,
    .parse_refund = stripe_parse_refund,
    .notify_ok_type = "application/json",
    .notify_ok_body = "{\"received\":true}",
    .notify_fail_type = "application/json",
    .notify_fail_body = "{\"error\":\"invalid signature\"}",
    .bill_offset_min = 0, /* Stripe's day: UTC */
    .fetch_bill = pt__stripe_fetch_bill,
};
