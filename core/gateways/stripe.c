/*
 * stripe.c - the Stripe adapter: PaymentIntents confirmed server-side with a
 * card on file (SPEC 8), and webhook verification.
 *
 * POST /v1/payment_intents (form, confirm=true, Idempotency-Key = order id),
 * GET /v1/payment_intents/search?query=metadata['order_id']:'<order id>',
 * POST /v1/payment_intents/{id}/cancel; Bearer auth with the secret key.
 * Stripe answers are not signed (TLS is the only protection), so the outcome
 * comes from the HTTP status, the error type and the PaymentIntent status.
 */
#include "gateways/stripe.h"
#include "buf.h"
#include "crypto.h"
#include "err.h"
#include "gateway.h"
#include "gateways/gwcli.h"
#include "gateways/gwcommon.h"
#include "gateways/jscan.h"
#include "money.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STRIPE_MAX_TEXT (64 * 1024)

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
    for (const char *p = header; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *item = p;
        trim(&item, &n);
        if (n > 2 && item[0] == 't' && item[1] == '=') {
            if (tv || parse_t(item + 2, n - 2, &t) != PT_OK)
                return PT_ESIG; /* two timestamps: ambiguous */
            tv = item + 2;
            tn = n - 2;
        }
        p = end ? end + 1 : p + strlen(p);
    }
    if (!tv || stripe_mac_hex(secret, secretlen, tv, tn, payload, len, expected) != PT_OK)
        return PT_ESIG;
    for (const char *p = header; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *item = p;
        trim(&item, &n);
        if (n > 3 && memcmp(item, "v1=", 3) == 0) {
            have_v1 = 1;
            /* Check every v1 so the time taken does not tell which matched. */
            if (n - 3 == 64 && pt_ct_equal(item + 3, expected, 64))
                matched = 1;
        }
        p = end ? end + 1 : p + strlen(p);
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

/* ---- build ---------------------------------------------------------------- */

static void form_pair(struct pt_buf *b, const char *k, const char *v)
{
    if (b->len)
        pt_buf_putc(b, '&');
    pt_buf_urlencode(b, k, strlen(k));
    pt_buf_putc(b, '=');
    pt_buf_urlencode(b, v, strlen(v));
}

/* The create body, parameters in the order of the generated vectors. */
static char *create_body(const struct pt_charge *c, size_t *len)
{
    struct pt_buf b;
    char amount[24], cur[4];
    snprintf(amount, sizeof amount, "%lld", (long long)c->amount);
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
        if (strcmp(c->method, "card_on_file") != 0 || !c->payment_method[0] || c->amount <= 0 ||
            !pt_money_currency_valid(c->currency))
            return PT_EINVAL;
        *method = "POST";
        snprintf(path, pathlen, "/v1/payment_intents");
        *body = create_body(c, blen);
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
    if (!pt__id_safe(c->gateway_trade_no))
        return PT_EINVAL; /* cancel needs the PaymentIntent id */
    *method = "POST";
    snprintf(path, pathlen, "/v1/payment_intents/%s/cancel", c->gateway_trade_no);
    return PT_OK;
}

static int stripe_build(const struct pt_gw_config *cfg, enum pt_gw_op op, const struct pt_charge *c,
                        const struct pt_gw_env *env, struct pt_http_request *out)
{
    const char *method = NULL;
    char path[512], auth[300];
    char *body = NULL;
    size_t blen = 0;
    (void)env;
    if (!cfg->secret_len || cfg->secret_len >= sizeof auth - 8 || !cfg->endpoint[0] ||
        !pt__id_safe(c->order_id) || memchr(cfg->secret, '\n', cfg->secret_len) ||
        memchr(cfg->secret, '\r', cfg->secret_len))
        return PT_EINVAL;
    int rc = stripe_route(op, c, &method, path, sizeof path, &body, &blen);
    if (rc != PT_OK)
        return rc;
    rc = pt__request_start(out, method, cfg->endpoint, path);
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
    /* The order id is the idempotency key: a resend inside Stripe's 24 h
     * window replays the first answer instead of charging again. */
    if (rc == PT_OK && op == PT_GW_PAY)
        rc = pt_http_request_add_header(out, "Idempotency-Key", c->order_id);
    if (rc != PT_OK)
        pt_http_request_free(out);
    return rc;
}

/* ---- parse ---------------------------------------------------------------- */

/* Classifies one PaymentIntent object (raw text pi, pilen bytes). */
/* What a succeeded PaymentIntent captured: amount_received (what moved),
 * or amount when the object names only that. */
static int captured_amount(const char *pi, size_t pilen, int64_t *out)
{
    static const char *const received[] = {"amount_received", NULL};
    static const char *const asked[] = {"amount", NULL};
    int rc = pt_jscan_int(pi, pilen, received, out);
    return rc == PT_ENOTFOUND ? pt_jscan_int(pi, pilen, asked, out) : rc;
}

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
            captured_amount(pi, pilen, &out->amount) != PT_OK)
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
                    ? captured_amount(pi, pilen, &n->amount)
                    : pt_jscan_int(pi, pilen, amount_path, &n->amount)) == PT_OK) {
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
    .build = stripe_build,
    .parse = stripe_parse,
    .parse_notify = stripe_parse_notify,
    .notify_ok_type = "application/json",
    .notify_ok_body = "{\"received\":true}",
    .notify_fail_type = "application/json",
    .notify_fail_body = "{\"error\":\"invalid signature\"}",
};
