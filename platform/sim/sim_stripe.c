/*
 * sim_stripe.c - the simulated Stripe API: PaymentIntents and webhooks.
 *
 *   POST /v1/payment_intents                 create (and confirm) a PaymentIntent
 *   GET  /v1/payment_intents/search?query=   search, metadata['order_id']:'...'
 *   GET  /v1/payment_intents/{id}            retrieve
 *   POST /v1/payment_intents/{id}/cancel     cancel
 *   POST /v1/refunds                         refund a PaymentIntent (payment_intent=)
 *   GET  /v1/refunds?payment_intent=&limit=  its refunds, newest first
 *   GET  /v1/refunds/{id}                    retrieve a refund
 *
 * Authentication is the secret key as a Bearer token (or HTTP Basic user, as
 * curl -u sends it); a wrong key is 401.  Idempotency follows Stripe's
 * documentation: a POST with an Idempotency-Key saves the status and body of
 * the first request that began executing (errors and 500s included) for the
 * key's lifetime (24 h) and replays them with `Idempotent-Replayed: true`; the
 * same key with other parameters is 400 idempotency_error; the same key while
 * the first request still runs is 409 idempotency_key_in_use; a request that
 * failed validation saves nothing.  metadata[order_id] is only a label to
 * Stripe: two keys make two PaymentIntents for one order - the ledger counts
 * both captures, which is what a test must catch.
 *
 * Amounts are read with Stripe's own units (sim_units.c: zero-decimal,
 * three-decimal and the special cases); the ledger keeps ISO minor units and
 * every answer writes Stripe's.  An amount Stripe cannot take is 400
 * parameter_invalid_integer, param amount.  Amount rules (on the ISO minor
 * units): ...51 declines (402 card_error, insufficient_funds), ...52
 * stays requires_action (pending), anything else succeeds at once.  Webhooks
 * go to <notify-base>/webhooks/stripe signed with the whsec secret
 * (Stripe-Signature, re-signed at every delivery attempt).
 *
 * Refunds follow the same idempotency rules (the Idempotency-Key is Stripe's
 * only refund deduplication: metadata[refund_id] is a label, and two keys
 * make two refunds, which the ledger counts).  A card refund succeeds at
 * once.  Above what is left: 400 amount_too_large ("Refund amount ($x) is
 * greater than unrefunded amount on charge ($y)"), or charge_already_refunded
 * when nothing is left; a PaymentIntent that has not succeeded: 400.  No
 * refund webhooks are sent (payterm confirms Stripe refunds by the answer or
 * by listing the intent's refunds).
 */
#include "sim_int.h"

#include "crypto.h"
#include "err.h"
#include "gateways/form.h"
#include "gateways/stripe.h"
#include "money.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API_VERSION "2024-06-20"

static void stripe_error(struct sim_resp *rs, int status, const char *type, const char *code,
                         const char *message, const char *param)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *e = cJSON_AddObjectToObject(o, "error");
    if (code)
        cJSON_AddStringToObject(e, "code", code);
    cJSON_AddStringToObject(e, "message", message);
    if (param)
        cJSON_AddStringToObject(e, "param", param);
    cJSON_AddStringToObject(e, "type", type);
    pt__sim_resp_json(rs, status, o);
}

/* ---- authentication ------------------------------------------------------ */

static int authenticated(struct pt_sim *s, const struct sim_req *rq, struct sim_resp *rs)
{
    const char *auth = pt__sim_req_header(rq, "Authorization");
    char key[200] = "";
    if (auth && strncmp(auth, "Bearer ", 7) == 0) {
        snprintf(key, sizeof key, "%s", auth + 7);
    } else if (auth && strncmp(auth, "Basic ", 6) == 0) {
        unsigned char dec[200];
        size_t n = 0;
        if (pt_base64_decode(auth + 6, strlen(auth + 6), dec, sizeof dec - 1, &n) == PT_OK) {
            dec[n] = '\0';
            char *colon = strchr((char *)dec, ':');
            if (colon)
                *colon = '\0';
            snprintf(key, sizeof key, "%s", (char *)dec);
        }
        pt_zeroize(dec, sizeof dec);
    }
    if (!key[0]) {
        stripe_error(rs, 401, "invalid_request_error", NULL,
                     "You did not provide an API key. You need to provide your API key in the "
                     "Authorization header, using Bearer auth (e.g. 'Authorization: Bearer "
                     "YOUR_SECRET_KEY').",
                     NULL);
        pt__sim_note(rs, "no API key");
        return 0;
    }
    size_t kl = strlen(key), sl = strlen(s->k.stripe_secret);
    int ok = kl == sl && pt_ct_equal(key, s->k.stripe_secret, sl);
    if (!ok) {
        /* Stripe echoes only the last four characters of a wrong key. */
        char msg[160];
        snprintf(msg, sizeof msg, "Invalid API Key provided: %.8s****%s", key,
                 kl > 4 ? key + kl - 4 : "");
        stripe_error(rs, 401, "invalid_request_error", NULL, msg, NULL);
        pt__sim_note(rs, "wrong API key");
    }
    pt_zeroize(key, sizeof key);
    return ok;
}

/* ---- PaymentIntent objects ------------------------------------------------ */

static const char *pi_status(const struct sim_trade *t, const cJSON *x)
{
    const char *st = pt__sim_json_str(x, "status");
    if (st)
        return st;
    if (strcmp(t->status, "captured") == 0)
        return "succeeded";
    if (strcmp(t->status, "declined") == 0)
        return "requires_payment_method";
    if (strcmp(t->status, "canceled") == 0)
        return "canceled";
    return "requires_action";
}

static void lower3(const char *in, char out[4])
{
    for (int i = 0; i < 3; i++)
        out[i] = (char)tolower((unsigned char)in[i]);
    out[3] = '\0';
}

static cJSON *pi_json(const struct sim_trade *t)
{
    cJSON *x = cJSON_Parse(t->extra);
    cJSON *o = cJSON_CreateObject();
    char cur[4], secret[96];
    const char *st = pi_status(t, x);
    lower3(t->currency, cur);
    cJSON_AddStringToObject(o, "id", t->trade_no);
    cJSON_AddStringToObject(o, "object", "payment_intent");
    /* The ledger holds ISO minor units; Stripe writes its own. */
    int64_t amount = pt__sim_stripe_amount_out(t->currency, t->amount);
    cJSON_AddNumberToObject(o, "amount", (double)amount);
    cJSON_AddNumberToObject(o, "amount_capturable", 0);
    cJSON_AddNumberToObject(o, "amount_received",
                            strcmp(st, "succeeded") == 0 ? (double)amount : 0);
    cJSON_AddStringToObject(o, "capture_method", "automatic");
    snprintf(secret, sizeof secret, "%s_secret_%s", t->trade_no,
             pt__sim_json_str(x, "secret_suffix") ? pt__sim_json_str(x, "secret_suffix") : "x");
    cJSON_AddStringToObject(o, "client_secret", secret);
    cJSON_AddStringToObject(o, "confirmation_method", "automatic");
    cJSON_AddNumberToObject(o, "created", (double)(t->created_at / 1000));
    cJSON_AddStringToObject(o, "currency", cur);
    const char *v;
    if ((v = pt__sim_json_str(x, "customer")))
        cJSON_AddStringToObject(o, "customer", v);
    else
        cJSON_AddNullToObject(o, "customer");
    if ((v = pt__sim_json_str(x, "description")))
        cJSON_AddStringToObject(o, "description", v);
    else
        cJSON_AddNullToObject(o, "description");
    const cJSON *lpe = cJSON_GetObjectItemCaseSensitive(x, "last_payment_error");
    if (lpe)
        cJSON_AddItemToObject(o, "last_payment_error", cJSON_Duplicate(lpe, 1));
    else
        cJSON_AddNullToObject(o, "last_payment_error");
    if ((v = pt__sim_json_str(x, "latest_charge")))
        cJSON_AddStringToObject(o, "latest_charge", v);
    else
        cJSON_AddNullToObject(o, "latest_charge");
    cJSON_AddBoolToObject(o, "livemode", 0);
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(x, "metadata");
    cJSON_AddItemToObject(o, "metadata", md ? cJSON_Duplicate(md, 1) : cJSON_CreateObject());
    if (strcmp(st, "requires_action") == 0) {
        cJSON *na = cJSON_AddObjectToObject(o, "next_action");
        cJSON_AddStringToObject(na, "type", "use_stripe_sdk");
    } else {
        cJSON_AddNullToObject(o, "next_action");
    }
    if ((v = pt__sim_json_str(x, "payment_method")))
        cJSON_AddStringToObject(o, "payment_method", v);
    else
        cJSON_AddNullToObject(o, "payment_method");
    cJSON *types = cJSON_AddArrayToObject(o, "payment_method_types");
    cJSON_AddItemToArray(types, cJSON_CreateString("card"));
    if (strcmp(st, "canceled") == 0) {
        cJSON_AddNumberToObject(o, "canceled_at", (double)(t->updated_at / 1000));
        v = pt__sim_json_str(x, "cancellation_reason");
        if (v)
            cJSON_AddStringToObject(o, "cancellation_reason", v);
        else
            cJSON_AddNullToObject(o, "cancellation_reason");
    } else {
        cJSON_AddNullToObject(o, "canceled_at");
        cJSON_AddNullToObject(o, "cancellation_reason");
    }
    cJSON_AddStringToObject(o, "status", st);
    cJSON_Delete(x);
    return o;
}

/* Queues the webhook event `type` for t (lk held). */
static void event(struct pt_sim *s, const struct sim_trade *t, const char *type,
                  const char *idem_key, int64_t delay_ms, int duplicate)
{
    char id[40], req[40];
    memcpy(id, "evt_", 4);
    pt__sim_random_alnum(s, id + 4, 24);
    memcpy(req, "req_", 4);
    pt__sim_random_alnum(s, req + 4, 14);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "id", id);
    cJSON_AddStringToObject(e, "object", "event");
    cJSON_AddStringToObject(e, "api_version", API_VERSION);
    cJSON_AddNumberToObject(e, "created", (double)(pt__sim_now_ms(s) / 1000));
    cJSON *data = cJSON_AddObjectToObject(e, "data");
    cJSON_AddItemToObject(data, "object", pi_json(t));
    cJSON_AddBoolToObject(e, "livemode", 0);
    cJSON_AddNumberToObject(e, "pending_webhooks", 1);
    cJSON *r = cJSON_AddObjectToObject(e, "request");
    cJSON_AddStringToObject(r, "id", req);
    if (idem_key)
        cJSON_AddStringToObject(r, "idempotency_key", idem_key);
    else
        cJSON_AddNullToObject(r, "idempotency_key");
    cJSON_AddStringToObject(e, "type", type);
    char *text = cJSON_PrintUnformatted(e);
    cJSON_Delete(e);
    if (text)
        pt__sim_notify(s, SIM_GW_STRIPE, t->order_id, type, NULL, "application/json; charset=utf-8",
                       text, strlen(text), delay_ms, duplicate);
    free(text);
}

/* ---- idempotency ------------------------------------------------------------- */

/* SHA-256 over method, path and the parameters sorted by name: Stripe compares
 * parameters, not their order in the body. */
static void params_hash(const struct sim_req *rq, const struct pt_form *f, char out[65])
{
    const struct pt_form_pair *p[PT_FORM_MAX_PAIRS];
    size_t n = f->n;
    for (size_t i = 0; i < n; i++)
        p[i] = &f->pairs[i];
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(p[j - 1]->key, p[j]->key) > 0; j--) {
            const struct pt_form_pair *tmp = p[j];
            p[j] = p[j - 1];
            p[j - 1] = tmp;
        }
    size_t cap = strlen(rq->method) + strlen(rq->path) + 4;
    for (size_t i = 0; i < n; i++)
        cap += strlen(p[i]->key) + strlen(p[i]->value) + 2;
    char *buf = malloc(cap), *w = buf;
    if (!buf) {
        memset(out, '0', 64);
        out[64] = '\0';
        return;
    }
    w += sprintf(w, "%s %s\n", rq->method, rq->path);
    for (size_t i = 0; i < n; i++)
        w += sprintf(w, "%s=%s\n", p[i]->key, p[i]->value);
    pt__sim_sha256_hex(buf, (size_t)(w - buf), out);
    free(buf);
}

static int inflight_has(struct pt_sim *s, const char *key)
{
    for (int i = 0; i < s->ninflight; i++)
        if (strcmp(s->inflight[i], key) == 0)
            return 1;
    return 0;
}

static void inflight_del(struct pt_sim *s, const char *key)
{
    for (int i = 0; i < s->ninflight; i++) {
        if (strcmp(s->inflight[i], key) == 0) {
            memcpy(s->inflight[i], s->inflight[--s->ninflight], sizeof s->inflight[0]);
            return;
        }
    }
}

typedef void (*post_fn)(struct sim_call *c, const struct sim_req *rq, const struct pt_form *f,
                        const char *key, struct sim_resp *rs);

static void error_500(struct pt_sim *s, struct sim_resp *rs)
{
    (void)s;
    stripe_error(rs, 500, "api_error", NULL,
                 "An unknown error occurred while processing this request (simulated).", NULL);
    pt__sim_resp_header(rs, "Stripe-Should-Retry: true");
}

static void with_idempotency(struct sim_call *c, const struct sim_req *rq, const struct pt_form *f,
                             struct sim_resp *rs, post_fn fn)
{
    struct pt_sim *s = c->s;
    const char *key = pt__sim_req_header(rq, "Idempotency-Key");
    if (!key) {
        fn(c, rq, f, NULL, rs);
        return;
    }
    if (!*key || strlen(key) > 255) {
        stripe_error(rs, 400, "invalid_request_error", NULL,
                     "Idempotency-Key must be 1 to 255 characters.", NULL);
        return;
    }
    char hash[65];
    struct sim_idem r;
    params_hash(rq, f, hash);
    pt__sim_lock(s);
    if (inflight_has(s, key)) {
        pt__sim_unlock(s);
        stripe_error(rs, 409, "invalid_request_error", "idempotency_key_in_use",
                     "There is currently another in-progress request using this Idempotent "
                     "Key (that probably means you submitted twice, and the other request is "
                     "still going through). Please try again later.",
                     NULL);
        pt__sim_note(rs, "key %s in flight", key);
        return;
    }
    int found = pt__sim_idem_get(s, key, &r) == PT_OK;
    if (found && pt__sim_now_ms(s) - r.created_at > s->stripe_key_ttl_ms) {
        /* Keys are pruned after 24 h: the same key is then a new request. */
        pt__sim_idem_delete(s, key);
        pt__sim_idem_free(&r);
        found = 0;
    }
    if (found) {
        pt__sim_unlock(s);
        if (strcmp(r.hash, hash) != 0) {
            char msg[512];
            snprintf(msg, sizeof msg,
                     "Keys for idempotent requests can only be used with the same parameters "
                     "they were first used with. Try using a key other than '%.255s' if you "
                     "meant to execute a different request.",
                     key);
            stripe_error(rs, 400, "idempotency_error", NULL, msg, NULL);
            pt__sim_note(rs, "key %s reused with other parameters", key);
        } else {
            pt__sim_resp_set(rs, r.status, "application/json", r.body, strlen(r.body));
            pt__sim_resp_header(rs, "Idempotent-Replayed: true");
            pt__sim_note(rs, "replay of key %s", key);
        }
        pt__sim_resp_header(rs, "Idempotency-Key: %s", key);
        pt__sim_idem_free(&r);
        return;
    }
    if (s->ninflight >= SIM_MAX_INFLIGHT) {
        pt__sim_unlock(s);
        stripe_error(rs, 429, "invalid_request_error", "rate_limit", "Too many requests.", NULL);
        return;
    }
    snprintf(s->inflight[s->ninflight++], sizeof s->inflight[0], "%s", key);
    pt__sim_unlock(s);

    fn(c, rq, f, key, rs);

    pt__sim_lock(s);
    inflight_del(s, key);
    /* Saved only when the endpoint began executing (reached its commit point)
     * and did not give up there; what is saved is what the client got, the
     * 500 of http_500_after_commit included. */
    if (c->gated && !rs->drop) {
        struct sim_resp r500 = {0};
        const struct sim_resp *saved = rs;
        if (c->mode == SIM_FAULT_HTTP_500_AFTER_COMMIT) {
            error_500(s, &r500);
            saved = &r500;
        }
        struct sim_idem rec = {
            .status = saved->status, .body = saved->body, .created_at = pt__sim_now_ms(s)};
        snprintf(rec.key, sizeof rec.key, "%s", key);
        memcpy(rec.hash, hash, sizeof rec.hash);
        pt__sim_idem_put(s, &rec);
        pt__sim_resp_free(&r500);
    }
    pt__sim_unlock(s);
    pt__sim_resp_header(rs, "Idempotency-Key: %s", key);
}

/* ---- endpoints ---------------------------------------------------------------- */

static int known_create_param(const char *k)
{
    static const char *const known[] = {"amount",
                                        "currency",
                                        "confirm",
                                        "payment_method",
                                        "customer",
                                        "description",
                                        "capture_method",
                                        "off_session",
                                        "return_url",
                                        "receipt_email",
                                        "statement_descriptor",
                                        "statement_descriptor_suffix",
                                        "setup_future_usage",
                                        "error_on_requires_action",
                                        "confirmation_method",
                                        "automatic_payment_methods[enabled]",
                                        "automatic_payment_methods[allow_redirects]",
                                        NULL};
    for (const char *const *p = known; *p; p++)
        if (strcmp(k, *p) == 0)
            return 1;
    return strncmp(k, "metadata[", 9) == 0 || strncmp(k, "payment_method_types[", 21) == 0 ||
           strncmp(k, "expand[", 7) == 0;
}

static void create(struct sim_call *c, const struct sim_req *rq, const struct pt_form *f,
                   const char *key, struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    char msg[200], upper[4];
    for (size_t i = 0; i < f->n; i++) {
        if (!known_create_param(f->pairs[i].key)) {
            snprintf(msg, sizeof msg, "Received unknown parameter: %.100s", f->pairs[i].key);
            stripe_error(rs, 400, "invalid_request_error", "parameter_unknown", msg,
                         f->pairs[i].key);
            return;
        }
    }
    const char *amount = pt_form_get(f, "amount"), *cur = pt_form_get(f, "currency");
    const char *pm = pt_form_get(f, "payment_method"), *confirm = pt_form_get(f, "confirm");
    const char *order = pt_form_get(f, "metadata[order_id]");
    char *end = NULL;
    long long amt = amount ? strtoll(amount, &end, 10) : 0;
    if (!amount || !*amount || *end || amt <= 0 || amt > 99999999) {
        stripe_error(rs, 400, "invalid_request_error",
                     amount ? "parameter_invalid_integer" : "parameter_missing",
                     amount ? "Invalid integer: amount must be a positive integer in the "
                              "smallest currency unit (at most 99999999)."
                            : "Missing required param: amount.",
                     "amount");
        return;
    }
    if (!cur || strlen(cur) != 3) {
        stripe_error(rs, 400, "invalid_request_error", "parameter_missing",
                     "Missing required param: currency.", "currency");
        return;
    }
    for (int i = 0; i < 4; i++)
        upper[i] = (char)toupper((unsigned char)cur[i]);
    if (!pt_money_currency_valid(upper) || strcmp(cur, "xxx") == 0) {
        snprintf(msg, sizeof msg, "Invalid currency: %s.", cur);
        stripe_error(rs, 400, "invalid_request_error", "parameter_invalid_string", msg, "currency");
        return;
    }
    int64_t minor = 0;
    if (pt__sim_stripe_amount_in(upper, amt, &minor, msg, sizeof msg) != PT_OK) {
        stripe_error(rs, 400, "invalid_request_error", "parameter_invalid_integer", msg, "amount");
        return;
    }
    int confirmed = confirm && strcmp(confirm, "true") == 0;
    if (confirmed && !pm) {
        stripe_error(rs, 400, "invalid_request_error", "parameter_missing",
                     "You must provide a payment_method to confirm this PaymentIntent.",
                     "payment_method");
        return;
    }
    if (pt__sim_commit_gate(c, rs))
        return;

    struct sim_trade *t = calloc(1, sizeof *t);
    cJSON *x = cJSON_CreateObject(), *md = cJSON_AddObjectToObject(x, "metadata");
    char suffix[32], charge[40];
    if (!t || !md) {
        free(t);
        cJSON_Delete(x);
        pt__sim_resp_set(rs, 500, "application/json", "{}", 2);
        return;
    }
    for (size_t i = 0; i < f->n; i++) {
        const char *k = f->pairs[i].key;
        size_t kl = strlen(k);
        if (strncmp(k, "metadata[", 9) == 0 && kl > 10 && k[kl - 1] == ']') {
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(kl - 10), k + 9);
            cJSON_AddStringToObject(md, name, f->pairs[i].value);
        }
    }
    t->gw = SIM_GW_STRIPE;
    memcpy(t->trade_no, "pi_", 3);
    pt__sim_random_alnum(s, t->trade_no + 3, 24);
    snprintf(t->method, sizeof t->method, "card");
    t->amount = minor;
    memcpy(t->currency, upper, 4);
    params_hash(rq, f, t->params_hash);
    pt__sim_random_alnum(s, suffix, 24);
    cJSON_AddStringToObject(x, "secret_suffix", suffix);
    if (pm)
        cJSON_AddStringToObject(x, "payment_method", pm);
    if (pt_form_get(f, "customer"))
        cJSON_AddStringToObject(x, "customer", pt_form_get(f, "customer"));
    if (pt_form_get(f, "description"))
        cJSON_AddStringToObject(x, "description", pt_form_get(f, "description"));
    t->created_at = t->updated_at = pt__sim_now_ms(s);
    enum sim_rule rule = confirmed ? pt__sim_amount_rule(minor) : SIM_RULE_PENDING;
    if (!confirmed) {
        cJSON_AddStringToObject(x, "status", "requires_confirmation");
        snprintf(t->status, sizeof t->status, "pending");
    } else if (rule == SIM_RULE_PAY) {
        memcpy(charge, "ch_", 3);
        pt__sim_random_alnum(s, charge + 3, 24);
        cJSON_AddStringToObject(x, "latest_charge", charge);
        snprintf(t->status, sizeof t->status, "captured");
        t->captures = 1;
        t->paid_at = t->created_at;
    } else if (rule == SIM_RULE_DECLINE) {
        cJSON *e = cJSON_AddObjectToObject(x, "last_payment_error");
        cJSON_AddStringToObject(e, "code", "card_declined");
        cJSON_AddStringToObject(e, "decline_code", "insufficient_funds");
        cJSON_AddStringToObject(e, "message", "Your card has insufficient funds.");
        cJSON_AddStringToObject(e, "type", "card_error");
        snprintf(t->status, sizeof t->status, "declined");
    } else {
        snprintf(t->status, sizeof t->status, "pending");
    }
    char *xt = cJSON_PrintUnformatted(x);
    cJSON_Delete(x);
    snprintf(t->extra, sizeof t->extra, "%s", xt ? xt : "{}");
    free(xt);

    pt__sim_lock(s);
    /* No metadata[order_id]: the PaymentIntent is its own order in the ledger. */
    snprintf(t->order_id, sizeof t->order_id, "%s", order && *order ? order : t->trade_no);
    int rc = pt__sim_trade_insert(s, t);
    if (rc == PT_OK) {
        /* Deliberately out of order: .created may come after .succeeded. */
        event(s, t, "payment_intent.created", key, 150, 0);
        if (rule == SIM_RULE_PAY && confirmed)
            event(s, t, "payment_intent.succeeded", key, 0, 1);
        else if (rule == SIM_RULE_DECLINE && confirmed)
            event(s, t, "payment_intent.payment_failed", key, 0, 1);
        else if (confirmed)
            event(s, t, "payment_intent.requires_action", key, 0, 0);
    }
    pt__sim_unlock(s);
    if (rc != PT_OK) {
        error_500(s, rs);
    } else if (rule == SIM_RULE_DECLINE && confirmed) {
        cJSON *o = cJSON_CreateObject();
        cJSON *e = cJSON_AddObjectToObject(o, "error");
        cJSON_AddStringToObject(e, "charge", "ch_declined");
        cJSON_AddStringToObject(e, "code", "card_declined");
        cJSON_AddStringToObject(e, "decline_code", "insufficient_funds");
        cJSON_AddStringToObject(e, "doc_url", "https://stripe.com/docs/error-codes/card-declined");
        cJSON_AddStringToObject(e, "message", "Your card has insufficient funds.");
        cJSON_AddItemToObject(e, "payment_intent", pi_json(t));
        cJSON_AddStringToObject(e, "type", "card_error");
        pt__sim_resp_json(rs, 402, o);
    } else {
        pt__sim_resp_json(rs, 200, pi_json(t));
    }
    pt__sim_note(rs, "%s %s %lld %s (%lld minor) -> %s", t->trade_no, t->order_id, amt, upper,
                 (long long)minor, t->status);
    free(t);
}

static void cancel(struct sim_call *c, const struct sim_req *rq, const struct pt_form *f,
                   const char *key, struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    char id[80], msg[256];
    const char *p = rq->path + strlen("/v1/payment_intents/");
    snprintf(id, sizeof id, "%.*s", (int)(strchr(p, '/') - p), p);
    const char *reason = pt_form_get(f, "cancellation_reason");
    for (size_t i = 0; i < f->n; i++) {
        if (strcmp(f->pairs[i].key, "cancellation_reason") != 0 &&
            strncmp(f->pairs[i].key, "expand[", 7) != 0) {
            snprintf(msg, sizeof msg, "Received unknown parameter: %.100s", f->pairs[i].key);
            stripe_error(rs, 400, "invalid_request_error", "parameter_unknown", msg,
                         f->pairs[i].key);
            return;
        }
    }
    if (pt__sim_commit_gate(c, rs))
        return;
    struct sim_trade *t = calloc(1, sizeof *t);
    if (!t) {
        error_500(s, rs);
        return;
    }
    pt__sim_lock(s);
    int rc = pt__sim_trade_by_no(s, SIM_GW_STRIPE, id, t);
    cJSON *x = rc == PT_OK ? cJSON_Parse(t->extra) : NULL;
    const char *st = rc == PT_OK ? pi_status(t, x) : NULL;
    if (rc != PT_OK) {
        pt__sim_unlock(s);
        snprintf(msg, sizeof msg, "No such payment_intent: '%s'", id);
        stripe_error(rs, 404, "invalid_request_error", "resource_missing", msg, "intent");
    } else if (strcmp(st, "succeeded") == 0 || strcmp(st, "canceled") == 0) {
        pt__sim_unlock(s);
        snprintf(msg, sizeof msg,
                 "You cannot cancel this PaymentIntent because it has a status of %s. Only a "
                 "PaymentIntent with one of the following statuses may be canceled: "
                 "requires_payment_method, requires_capture, requires_confirmation, "
                 "requires_action, processing.",
                 st);
        stripe_error(rs, 400, "invalid_request_error", "payment_intent_unexpected_state", msg,
                     NULL);
    } else {
        cJSON_DeleteItemFromObjectCaseSensitive(x, "status");
        cJSON_AddStringToObject(x, "status", "canceled");
        if (reason)
            cJSON_AddStringToObject(x, "cancellation_reason", reason);
        char *xt = cJSON_PrintUnformatted(x);
        snprintf(t->extra, sizeof t->extra, "%s", xt ? xt : "{}");
        free(xt);
        snprintf(t->status, sizeof t->status, "canceled");
        t->pay_at = 0;
        t->updated_at = pt__sim_now_ms(s);
        rc = pt__sim_trade_update(s, t);
        if (rc == PT_OK)
            event(s, t, "payment_intent.canceled", key, 0, 1);
        pt__sim_unlock(s);
        if (rc == PT_OK)
            pt__sim_resp_json(rs, 200, pi_json(t));
        else
            error_500(s, rs);
    }
    pt__sim_note(rs, "cancel %s", id);
    cJSON_Delete(x);
    free(t);
}

/* ---- search --------------------------------------------------------------------- */

struct search {
    char status[40];
    char mkey[64], mval[128]; /* metadata['mkey']:'mval' */
    cJSON *data;
    int limit, n;
};

/* Reads a quoted value ('x' or "x") at *p; advances past it. */
static int quoted(const char **p, char *out, size_t outlen)
{
    char q = **p;
    if (q != '\'' && q != '"')
        return -1;
    const char *e = strchr(*p + 1, q);
    if (!e || (size_t)(e - *p - 1) >= outlen)
        return -1;
    snprintf(out, outlen, "%.*s", (int)(e - *p - 1), *p + 1);
    *p = e + 1;
    return 0;
}

/* The search language subset payterm and the SDK examples use:
 * clauses `metadata['k']:'v'` and `status:'s'`, joined by AND. */
static int parse_query(const char *q, struct search *sr)
{
    const char *p = q;
    while (*p) {
        while (*p == ' ')
            p++;
        if (strncmp(p, "metadata[", 9) == 0) {
            p += 9;
            if (quoted(&p, sr->mkey, sizeof sr->mkey) || *p++ != ']' || *p++ != ':' ||
                quoted(&p, sr->mval, sizeof sr->mval))
                return -1;
        } else if (strncmp(p, "status:", 7) == 0) {
            p += 7;
            if (quoted(&p, sr->status, sizeof sr->status))
                return -1;
        } else {
            return -1;
        }
        while (*p == ' ')
            p++;
        if (strncmp(p, "AND ", 4) == 0)
            p += 4;
        else if (*p)
            return -1;
    }
    return sr->mkey[0] || sr->status[0] ? 0 : -1;
}

static int search_cb(void *ctx, const struct sim_trade *t)
{
    struct search *sr = ctx;
    cJSON *pi = pi_json(t);
    const char *st = pt__sim_json_str(pi, "status");
    const char *mv =
        sr->mkey[0] ? pt__sim_json_str(cJSON_GetObjectItemCaseSensitive(pi, "metadata"), sr->mkey)
                    : NULL;
    int match = (!sr->status[0] || (st && strcmp(st, sr->status) == 0)) &&
                (!sr->mkey[0] || (mv && strcmp(mv, sr->mval) == 0));
    if (match && sr->n < sr->limit) {
        cJSON_AddItemToArray(sr->data, pi);
        sr->n++;
    } else {
        cJSON_Delete(pi);
    }
    return sr->n >= sr->limit;
}

static void search(struct pt_sim *s, const struct sim_req *rq, struct sim_resp *rs)
{
    struct pt_form f;
    struct search sr = {.limit = 10};
    pt_form_init(&f);
    if (pt_form_parse(rq->query, strlen(rq->query), &f) != PT_OK || !pt_form_get(&f, "query")) {
        stripe_error(rs, 400, "invalid_request_error", "parameter_missing",
                     "Missing required param: query.", "query");
        goto out;
    }
    const char *lim = pt_form_get(&f, "limit");
    if (lim) {
        sr.limit = atoi(lim);
        if (sr.limit < 1 || sr.limit > 100) {
            stripe_error(rs, 400, "invalid_request_error", "parameter_invalid_integer",
                         "limit must be between 1 and 100.", "limit");
            goto out;
        }
    }
    if (parse_query(pt_form_get(&f, "query"), &sr) != 0) {
        stripe_error(rs, 400, "invalid_request_error", "parameter_invalid_string",
                     "The simulator understands search queries of the form "
                     "metadata['key']:'value' [AND status:'value'].",
                     "query");
        goto out;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "search_result");
    sr.data = cJSON_AddArrayToObject(o, "data");
    pt__sim_lock(s);
    /* The ledger is indexed by metadata[order_id]; other keys scan. */
    int by_order = strcmp(sr.mkey, "order_id") == 0;
    pt__sim_trade_each(s, SIM_GW_STRIPE, by_order ? sr.mval : NULL, by_order ? 100 : 100000,
                       search_cb, &sr);
    pt__sim_unlock(s);
    cJSON_AddBoolToObject(o, "has_more", 0);
    cJSON_AddNullToObject(o, "next_page");
    cJSON_AddStringToObject(o, "url", "/v1/payment_intents/search");
    pt__sim_note(rs, "search %s:%s -> %d", sr.mkey, sr.mval, sr.n);
    pt__sim_resp_json(rs, 200, o);
out:
    pt_form_free(&f);
}

static void retrieve(struct pt_sim *s, const char *id, struct sim_resp *rs)
{
    struct sim_trade *t = calloc(1, sizeof *t);
    char msg[160];
    if (!t) {
        error_500(s, rs);
        return;
    }
    pt__sim_lock(s);
    int rc = pt__sim_trade_by_no(s, SIM_GW_STRIPE, id, t);
    pt__sim_unlock(s);
    if (rc == PT_OK) {
        pt__sim_resp_json(rs, 200, pi_json(t));
    } else {
        snprintf(msg, sizeof msg, "No such payment_intent: '%.80s'", id);
        stripe_error(rs, 404, "invalid_request_error", "resource_missing", msg, "intent");
    }
    free(t);
}

/* ---- refunds --------------------------------------------------------------------- */

static cJSON *refund_json(const struct sim_refund *r)
{
    cJSON *x = cJSON_Parse(r->extra);
    cJSON *o = cJSON_CreateObject();
    char cur[4];
    const char *v;
    lower3(r->currency, cur);
    cJSON_AddStringToObject(o, "id", r->refund_no);
    cJSON_AddStringToObject(o, "object", "refund");
    cJSON_AddNumberToObject(o, "amount", (double)pt__sim_stripe_amount_out(r->currency, r->amount));
    if ((v = pt__sim_json_str(x, "balance_transaction")))
        cJSON_AddStringToObject(o, "balance_transaction", v);
    else
        cJSON_AddNullToObject(o, "balance_transaction");
    if ((v = pt__sim_json_str(x, "charge")))
        cJSON_AddStringToObject(o, "charge", v);
    else
        cJSON_AddNullToObject(o, "charge");
    cJSON_AddNumberToObject(o, "created", (double)(r->created_at / 1000));
    cJSON_AddStringToObject(o, "currency", cur);
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(x, "metadata");
    cJSON_AddItemToObject(o, "metadata", md ? cJSON_Duplicate(md, 1) : cJSON_CreateObject());
    cJSON_AddStringToObject(o, "payment_intent", r->trade_no);
    if ((v = pt__sim_json_str(x, "reason")))
        cJSON_AddStringToObject(o, "reason", v);
    else
        cJSON_AddNullToObject(o, "reason");
    cJSON_AddNullToObject(o, "receipt_number");
    cJSON_AddNullToObject(o, "source_transfer_reversal");
    cJSON_AddStringToObject(o, "status",
                            strcmp(r->status, "succeeded") == 0 ? "succeeded" : "pending");
    cJSON_AddNullToObject(o, "transfer_reversal");
    cJSON_Delete(x);
    return o;
}

/* "$12.00" for USD (as Stripe's messages write it), "12.00 EUR" otherwise. */
static void money_text(int64_t minor, const char *cur, char *out, size_t outlen)
{
    char d[PT_MONEY_DECIMAL_MAX];
    if (pt_money_to_decimal(minor, cur, PT_MONEY_FIXED, d, sizeof d) != PT_OK)
        snprintf(d, sizeof d, "%lld", (long long)minor);
    if (strcmp(cur, "USD") == 0)
        snprintf(out, outlen, "$%s", d);
    else
        snprintf(out, outlen, "%s %s", d, cur);
}

static int known_refund_param(const char *k)
{
    static const char *const known[] = {
        "payment_intent",     "amount", "reason", "refund_application_fee", "reverse_transfer",
        "instructions_email", NULL};
    for (const char *const *p = known; *p; p++)
        if (strcmp(k, *p) == 0)
            return 1;
    return strncmp(k, "metadata[", 9) == 0 || strncmp(k, "expand[", 7) == 0;
}

/* metadata[k]=v pairs into md; Stripe's limits: 50 keys, key 40 characters,
 * value 500.  Returns 0, or -1 with msg set. */
static int read_metadata(const struct pt_form *f, cJSON *md, char *msg, size_t msglen)
{
    int n = 0;
    for (size_t i = 0; i < f->n; i++) {
        const char *k = f->pairs[i].key;
        size_t kl = strlen(k);
        if (strncmp(k, "metadata[", 9) != 0)
            continue;
        if (kl < 11 || k[kl - 1] != ']' || kl - 10 > 40 || memchr(k + 9, '[', kl - 10) ||
            strlen(f->pairs[i].value) > 500 || ++n > 50) {
            snprintf(msg, msglen,
                     "Invalid metadata: %.60s (at most 50 keys, keys of 1 to 40 characters, "
                     "values of at most 500)",
                     k);
            return -1;
        }
        char name[48];
        snprintf(name, sizeof name, "%.*s", (int)(kl - 10), k + 9);
        cJSON_AddStringToObject(md, name, f->pairs[i].value);
    }
    return 0;
}

/* A refund's wire amount in the minor units of its PaymentIntent's currency:
 * validated before anything executes, as Stripe validates parameters (an
 * unknown PaymentIntent is left to the 404 below). */
static int refund_amount_in(struct pt_sim *s, const char *pi, int64_t wire, int64_t *minor,
                            char *why, size_t cap)
{
    struct sim_trade *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(why, cap, "out of memory (simulated Stripe)");
        return PT_ENOMEM;
    }
    pt__sim_lock(s);
    int rc = pt__sim_trade_by_no(s, SIM_GW_STRIPE, pi, t);
    pt__sim_unlock(s);
    rc = rc == PT_OK ? pt__sim_stripe_amount_in(t->currency, wire, minor, why, cap) : PT_OK;
    free(t);
    return rc;
}

static void create_refund(struct sim_call *c, const struct sim_req *rq, const struct pt_form *f,
                          const char *key, struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    char msg[300];
    (void)rq;
    for (size_t i = 0; i < f->n; i++) {
        if (!known_refund_param(f->pairs[i].key)) {
            snprintf(msg, sizeof msg, "Received unknown parameter: %.100s", f->pairs[i].key);
            stripe_error(rs, 400, "invalid_request_error", "parameter_unknown", msg,
                         f->pairs[i].key);
            return;
        }
    }
    const char *pi = pt_form_get(f, "payment_intent"), *amount = pt_form_get(f, "amount");
    const char *reason = pt_form_get(f, "reason");
    if (!pi || !*pi || strlen(pi) > 64) {
        stripe_error(rs, 400, "invalid_request_error", "parameter_missing",
                     "Missing required param: payment_intent. (The simulator refunds "
                     "PaymentIntents; it has no Charges API.)",
                     "payment_intent");
        return;
    }
    char *end = NULL;
    long long amt = amount ? strtoll(amount, &end, 10) : 0;
    if (amount &&
        (!*amount || *end || amount[0] == '-' || amount[0] == '+' || amt <= 0 || amt > 99999999)) {
        snprintf(msg, sizeof msg, "Invalid integer: %.40s", amount);
        stripe_error(rs, 400, "invalid_request_error", "parameter_invalid_integer", msg, "amount");
        return;
    }
    if (reason && strcmp(reason, "duplicate") != 0 && strcmp(reason, "fraudulent") != 0 &&
        strcmp(reason, "requested_by_customer") != 0) {
        stripe_error(rs, 400, "invalid_request_error", "parameter_invalid_string",
                     "Invalid reason: must be one of duplicate, fraudulent, or "
                     "requested_by_customer",
                     "reason");
        return;
    }
    cJSON *x = cJSON_CreateObject(), *md = cJSON_AddObjectToObject(x, "metadata");
    struct sim_trade *t = calloc(1, sizeof *t);
    struct sim_refund *r = calloc(1, sizeof *r);
    if (!x || !md || !t || !r) {
        error_500(s, rs);
        goto out;
    }
    if (read_metadata(f, md, msg, sizeof msg) != 0) {
        stripe_error(rs, 400, "invalid_request_error", "parameter_invalid_string", msg, "metadata");
        goto out;
    }
    if (reason)
        cJSON_AddStringToObject(x, "reason", reason);
    int64_t minor = 0;
    if (amount && refund_amount_in(s, pi, amt, &minor, msg, sizeof msg) != PT_OK) {
        stripe_error(rs, 400, "invalid_request_error", "parameter_invalid_integer", msg, "amount");
        goto out;
    }
    if (pt__sim_commit_gate(c, rs))
        goto out;
    r->gw = SIM_GW_STRIPE;
    memcpy(r->refund_no, "re_", 3);
    pt__sim_random_alnum(s, r->refund_no + 3, 24);
    /* Stripe has no refund key of its own beyond the Idempotency-Key: each
     * executed request is a refund of its own. */
    snprintf(r->refund_key, sizeof r->refund_key, "%s", r->refund_no);
    snprintf(r->status, sizeof r->status, "succeeded");
    char txn[32] = "txn_";
    pt__sim_random_alnum(s, txn + 4, 24);
    cJSON_AddStringToObject(x, "balance_transaction", txn);
    if (key)
        cJSON_AddStringToObject(x, "idempotency_key", key);

    enum sim_refund_rc rrc = SIM_REFUND_ERROR;
    int64_t left = 0;
    pt__sim_lock(s);
    int rc = pt__sim_trade_by_no(s, SIM_GW_STRIPE, pi, t);
    if (rc == PT_OK) {
        cJSON *tx = cJSON_Parse(t->extra);
        const char *ch = pt__sim_json_str(tx, "latest_charge");
        if (ch)
            cJSON_AddStringToObject(x, "charge", ch);
        cJSON_Delete(tx);
        char *xt = cJSON_PrintUnformatted(x);
        snprintf(r->extra, sizeof r->extra, "%s", xt ? xt : "{}");
        free(xt);
        int64_t taken = 0;
        if (pt__sim_refund_totals(s, t->id, &taken, NULL, NULL) == PT_OK)
            r->amount = amount ? minor : t->amount - taken; /* default: all that is left */
        pt__sim_sha256_hex(r->refund_no, strlen(r->refund_no), r->params_hash);
        rrc = pt__sim_refund_take(s, t, r, &left);
    }
    pt__sim_unlock(s);
    if (rc == PT_ENOTFOUND) {
        snprintf(msg, sizeof msg, "No such payment_intent: '%.64s'", pi);
        stripe_error(rs, 404, "invalid_request_error", "resource_missing", msg, "payment_intent");
    } else if (rc != PT_OK || rrc == SIM_REFUND_ERROR || rrc == SIM_REFUND_REPLAY ||
               rrc == SIM_REFUND_CONFLICT) {
        error_500(s, rs); /* a fresh re_ id cannot collide; anything else is the ledger's */
    } else if (rrc == SIM_REFUND_NOT_PAID) {
        snprintf(msg, sizeof msg,
                 "This PaymentIntent (%.64s) does not have a successful charge to refund.", pi);
        stripe_error(rs, 400, "invalid_request_error", NULL, msg, "payment_intent");
    } else if (rrc == SIM_REFUND_EXCEEDS && left == 0) {
        const char *ch = pt__sim_json_str(x, "charge");
        snprintf(msg, sizeof msg, "Charge %.64s has already been refunded.", ch ? ch : pi);
        stripe_error(rs, 400, "invalid_request_error", "charge_already_refunded", msg, NULL);
    } else if (rrc == SIM_REFUND_EXCEEDS) {
        char want[48], have[48];
        money_text(r->amount, t->currency, want, sizeof want);
        money_text(left, t->currency, have, sizeof have);
        snprintf(msg, sizeof msg,
                 "Refund amount (%s) is greater than unrefunded amount on charge (%s)", want, have);
        stripe_error(rs, 400, "invalid_request_error", "amount_too_large", msg, "amount");
    } else {
        pt__sim_resp_json(rs, 200, refund_json(r));
    }
    pt__sim_note(rs, "refund %s %lld", pi, (long long)r->amount);
out:
    cJSON_Delete(x);
    free(r);
    free(t);
}

struct refund_list {
    cJSON *data;
    int limit, n, more;
};

static int list_cb(void *ctx, const struct sim_refund *r)
{
    struct refund_list *l = ctx;
    if (l->n >= l->limit) {
        l->more = 1;
        return 1;
    }
    cJSON_AddItemToArray(l->data, refund_json(r));
    l->n++;
    return 0;
}

/* ---- a day's charges and refunds (SPEC 19: Stripe's books) ------------------------ */

static cJSON *charge_json(const struct sim_trade *t)
{
    cJSON *x = cJSON_Parse(t->extra);
    cJSON *o = cJSON_CreateObject();
    char cur[4], id[80];
    lower3(t->currency, cur);
    const char *ch = pt__sim_json_str(x, "latest_charge");
    snprintf(id, sizeof id, "%s", ch ? ch : t->trade_no);
    if (!ch && strncmp(id, "pi_", 3) == 0)
        memcpy(id, "ch_", 3);
    int64_t amount = pt__sim_stripe_amount_out(t->currency, t->amount);
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", "charge");
    cJSON_AddNumberToObject(o, "amount", (double)amount);
    cJSON_AddNumberToObject(o, "amount_captured", (double)amount);
    cJSON_AddBoolToObject(o, "captured", 1);
    cJSON_AddNumberToObject(o, "created", (double)(t->paid_at / 1000));
    cJSON_AddStringToObject(o, "currency", cur);
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(x, "metadata");
    cJSON_AddItemToObject(o, "metadata", md ? cJSON_Duplicate(md, 1) : cJSON_CreateObject());
    cJSON_AddBoolToObject(o, "paid", 1);
    cJSON_AddStringToObject(o, "payment_intent", t->trade_no);
    cJSON_AddStringToObject(o, "status", "succeeded");
    cJSON_Delete(x);
    return o;
}

struct day_list {
    int refunds;
    cJSON *all; /* oldest first */
};

static int day_trade(void *ctx, const struct sim_trade *t)
{
    struct day_list *l = ctx;
    if (!l->refunds)
        cJSON_AddItemToArray(l->all, charge_json(t));
    return 0;
}

static int day_refund(void *ctx, const struct sim_refund *r)
{
    struct day_list *l = ctx;
    if (l->refunds)
        cJSON_AddItemToArray(l->all, refund_json(r));
    return 0;
}

/* A created[...] bound: Unix seconds. */
static int created_bound(const struct pt_form *f, const char *key, int64_t *out)
{
    const char *v = pt_form_get(f, key);
    if (!v)
        return 0;
    char *end;
    long long n = strtoll(v, &end, 10);
    if (!*v || *end || n < 0)
        return -1;
    *out = n;
    return 1;
}

/*
 * GET /v1/charges and GET /v1/refunds with created[gte] / created[lt]
 * (Unix seconds), limit (1-100, default 10) and starting_after: what moved
 * in that time, newest first, as Stripe pages its lists.  Charges are the
 * captured ones; the lines a test told the books to forget are not there.
 */
static void list_day(struct pt_sim *s, const struct sim_req *rq, struct sim_resp *rs, int refunds)
{
    struct pt_form f;
    char msg[200];
    int64_t gte = 0, lt = INT64_MAX / 1000 - 1;
    int limit = 10;
    pt_form_init(&f);
    if (pt_form_parse(rq->query, strlen(rq->query), &f) != PT_OK) {
        stripe_error(rs, 400, "invalid_request_error", NULL, "Invalid query string.", NULL);
        goto out;
    }
    for (size_t i = 0; i < f.n; i++) {
        const char *k = f.pairs[i].key;
        if (strcmp(k, "created[gte]") && strcmp(k, "created[lt]") && strcmp(k, "limit") &&
            strcmp(k, "starting_after")) {
            snprintf(msg, sizeof msg, "Received unknown parameter: %.100s", k);
            stripe_error(rs, 400, "invalid_request_error", "parameter_unknown", msg, k);
            goto out;
        }
    }
    const char *lim = pt_form_get(&f, "limit"), *after = pt_form_get(&f, "starting_after");
    if (created_bound(&f, "created[gte]", &gte) < 0 || created_bound(&f, "created[lt]", &lt) < 0) {
        stripe_error(rs, 400, "invalid_request_error", "parameter_invalid_integer",
                     "Invalid integer: created must be a Unix timestamp.", "created");
        goto out;
    }
    if (lim) {
        char *end;
        long v = strtol(lim, &end, 10);
        if (!*lim || *end || v < 1 || v > 100) {
            stripe_error(rs, 400, "invalid_request_error", "parameter_invalid_integer",
                         "limit must be between 1 and 100.", "limit");
            goto out;
        }
        limit = (int)v;
    }
    struct day_list l = {.refunds = refunds, .all = cJSON_CreateArray()};
    pt__sim_lock(s);
    int rc = pt__sim_bill_each(s, SIM_GW_STRIPE, gte * 1000, lt * 1000, day_trade, day_refund, &l);
    pt__sim_unlock(s);
    if (rc != PT_OK) {
        cJSON_Delete(l.all);
        error_500(s, rs);
        goto out;
    }
    /* Newest first; a page starts after starting_after's object. */
    int n = cJSON_GetArraySize(l.all), start = n - 1, found = !after;
    for (int i = n - 1; after && i >= 0; i--) {
        const char *id = pt__sim_json_str(cJSON_GetArrayItem(l.all, i), "id");
        if (id && !strcmp(id, after)) {
            start = i - 1;
            found = 1;
            break;
        }
    }
    if (!found) {
        cJSON_Delete(l.all);
        snprintf(msg, sizeof msg, "No such %s: '%.64s'", refunds ? "refund" : "charge", after);
        stripe_error(rs, 400, "invalid_request_error", "resource_missing", msg, "starting_after");
        goto out;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(o, "data");
    int taken = 0;
    for (int i = start; i >= 0 && taken < limit; i--, taken++)
        cJSON_AddItemToArray(data, cJSON_Duplicate(cJSON_GetArrayItem(l.all, i), 1));
    cJSON_AddBoolToObject(o, "has_more", start - taken >= 0);
    cJSON_AddStringToObject(o, "url", refunds ? "/v1/refunds" : "/v1/charges");
    cJSON_Delete(l.all);
    pt__sim_resp_json(rs, 200, o);
    pt__sim_note(rs, "%s created %lld..%lld -> %d", refunds ? "refunds" : "charges", (long long)gte,
                 (long long)lt, taken);
out:
    pt_form_free(&f);
}

static void list_refunds(struct pt_sim *s, const struct sim_req *rq, struct sim_resp *rs)
{
    struct pt_form f;
    struct refund_list l = {.limit = 10};
    char msg[200];
    pt_form_init(&f);
    if (pt_form_parse(rq->query, strlen(rq->query), &f) != PT_OK) {
        stripe_error(rs, 400, "invalid_request_error", NULL, "Invalid query string.", NULL);
        goto out;
    }
    for (size_t i = 0; i < f.n; i++) {
        const char *k = f.pairs[i].key;
        if (strcmp(k, "payment_intent") != 0 && strcmp(k, "limit") != 0 &&
            strncmp(k, "expand[", 7) != 0) {
            snprintf(msg, sizeof msg, "Received unknown parameter: %.100s", k);
            stripe_error(rs, 400, "invalid_request_error", "parameter_unknown", msg, k);
            goto out;
        }
    }
    const char *pi = pt_form_get(&f, "payment_intent"), *lim = pt_form_get(&f, "limit");
    if (lim) {
        char *end;
        long v = strtol(lim, &end, 10);
        if (!*lim || *end || v < 1 || v > 100) {
            stripe_error(rs, 400, "invalid_request_error", "parameter_invalid_integer",
                         "limit must be between 1 and 100.", "limit");
            goto out;
        }
        l.limit = (int)v;
    }
    if (!pi || !*pi) {
        stripe_error(rs, 400, "invalid_request_error", "parameter_missing",
                     "The simulator lists refunds by payment_intent only.", "payment_intent");
        goto out;
    }
    struct sim_trade *t = calloc(1, sizeof *t);
    cJSON *o = cJSON_CreateObject();
    if (!t || !o) {
        free(t);
        cJSON_Delete(o);
        error_500(s, rs);
        goto out;
    }
    cJSON_AddStringToObject(o, "object", "list");
    l.data = cJSON_AddArrayToObject(o, "data");
    pt__sim_lock(s);
    int rc = pt__sim_trade_by_no(s, SIM_GW_STRIPE, pi, t);
    if (rc == PT_OK)
        rc = pt__sim_refund_each(s, t->id, list_cb, &l);
    pt__sim_unlock(s);
    free(t);
    if (rc == PT_ENOTFOUND) {
        cJSON_Delete(o);
        snprintf(msg, sizeof msg, "No such payment_intent: '%.64s'", pi);
        stripe_error(rs, 404, "invalid_request_error", "resource_missing", msg, "payment_intent");
        goto out;
    }
    if (rc != PT_OK) {
        cJSON_Delete(o);
        error_500(s, rs);
        goto out;
    }
    cJSON_AddBoolToObject(o, "has_more", l.more);
    cJSON_AddStringToObject(o, "url", "/v1/refunds");
    pt__sim_resp_json(rs, 200, o);
    pt__sim_note(rs, "refunds of %s -> %d", pi, l.n);
out:
    pt_form_free(&f);
}

static void retrieve_refund(struct pt_sim *s, const char *id, struct sim_resp *rs)
{
    struct sim_refund *r = calloc(1, sizeof *r);
    char msg[160];
    if (!r) {
        error_500(s, rs);
        return;
    }
    pt__sim_lock(s);
    int rc = pt__sim_refund_get(s, SIM_GW_STRIPE, "", id, r);
    pt__sim_unlock(s);
    if (rc == PT_OK) {
        pt__sim_resp_json(rs, 200, refund_json(r));
    } else {
        snprintf(msg, sizeof msg, "No such refund: '%.80s'", id);
        stripe_error(rs, 404, "invalid_request_error", "resource_missing", msg, "id");
    }
    free(r);
}

static void handle(struct sim_call *c, const struct sim_req *rq, struct sim_resp *rs)
{
    struct pt_sim *s = c->s;
    char req[24] = "req_";
    pt__sim_random_alnum(s, req + 4, 14);
    pt__sim_resp_header(rs, "Request-Id: %s", req);
    pt__sim_resp_header(rs, "Stripe-Version: %s", API_VERSION);
    if (!authenticated(s, rq, rs))
        return;
    const char *prefix = "/v1/payment_intents";
    size_t pl = strlen(prefix);
    const char *rest = strncmp(rq->path, prefix, pl) == 0 ? rq->path + pl : NULL;
    const char *slash = rest && rest[0] == '/' ? strchr(rest + 1, '/') : NULL;
    int post = strcmp(rq->method, "POST") == 0, get = strcmp(rq->method, "GET") == 0;
    /* POST /v1/payment_intents, POST /v1/payment_intents/{id}/cancel */
    if (rest && post && (!*rest || (slash && slash > rest + 1 && strcmp(slash, "/cancel") == 0))) {
        struct pt_form f;
        pt_form_init(&f);
        if (pt_form_parse(rq->body, rq->body_len, &f) != PT_OK)
            stripe_error(rs, 400, "invalid_request_error", NULL,
                         "Invalid request body: not application/x-www-form-urlencoded.", NULL);
        else
            with_idempotency(c, rq, &f, rs, *rest ? cancel : create);
        pt_form_free(&f);
        return;
    }
    /* POST /v1/refunds, GET /v1/refunds, GET /v1/refunds/{id} */
    if (strcmp(rq->path, "/v1/refunds") == 0 && post) {
        struct pt_form f;
        pt_form_init(&f);
        if (pt_form_parse(rq->body, rq->body_len, &f) != PT_OK)
            stripe_error(rs, 400, "invalid_request_error", NULL,
                         "Invalid request body: not application/x-www-form-urlencoded.", NULL);
        else
            with_idempotency(c, rq, &f, rs, create_refund);
        pt_form_free(&f);
        return;
    }
    if ((strcmp(rq->path, "/v1/refunds") == 0 || strcmp(rq->path, "/v1/charges") == 0) && get &&
        strstr(rq->query, "created")) {
        list_day(s, rq, rs, rq->path[4] == 'r');
        return;
    }
    if (strcmp(rq->path, "/v1/refunds") == 0 && get) {
        list_refunds(s, rq, rs);
        return;
    }
    if (strncmp(rq->path, "/v1/refunds/", 12) == 0 && get && rq->path[12] &&
        !strchr(rq->path + 12, '/') && strlen(rq->path + 12) < 64) {
        retrieve_refund(s, rq->path + 12, rs);
        return;
    }
    /* GET /v1/payment_intents/search, GET /v1/payment_intents/{id} */
    if (rest && get && strcmp(rest, "/search") == 0) {
        search(s, rq, rs);
        return;
    }
    if (rest && get && rest[0] == '/' && rest[1] && !slash) {
        retrieve(s, rest + 1, rs);
        return;
    }
    char msg[400];
    snprintf(msg, sizeof msg,
             "Unrecognized request URL (%s: %.200s). The simulator serves PaymentIntents, "
             "Refunds and the day's lists of charges and refunds only.",
             rq->method, rq->path);
    stripe_error(rs, 404, "invalid_request_error", NULL, msg, NULL);
}

static void autopay(struct pt_sim *s, struct sim_trade *t)
{
    /* Card-on-file PaymentIntents are decided at confirmation; a customer
     * never completes requires_action in the simulator. */
    (void)s;
    t->pay_at = 0;
}

static int note_headers(struct pt_sim *s, const struct sim_note *n, char hdr[][768], int *nhdr)
{
    char sig[300];
    int rc = pt_stripe_sign_header(s->k.stripe_whsec, strlen(s->k.stripe_whsec),
                                   pt__sim_now_ms(s) / 1000, n->body, n->body_len, sig, sizeof sig);
    if (rc != PT_OK)
        return rc;
    snprintf(hdr[0], sizeof hdr[0], "Stripe-Signature: %s", sig);
    snprintf(hdr[1], sizeof hdr[1], "User-Agent: Stripe/1.0 (+https://stripe.com/docs/webhooks)");
    *nhdr = 2;
    return PT_OK;
}

static int note_ok(int status, const char *body, size_t len)
{
    (void)body;
    (void)len;
    return status >= 200 && status < 300;
}

const struct sim_gateway pt__sim_stripe = {
    .name = "stripe",
    .handle = handle,
    .autopay = autopay,
    .note_headers = note_headers,
    .note_ok = note_ok,
    .error_500 = error_500,
};
