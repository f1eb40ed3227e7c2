/*
 * intake.c - guarded API operations (SPEC section 5): the guard, and
 * POST /v1/charges (cancel, review, payment: intake_order.c; refunds:
 * intake_refund.c).
 *
 * Shape of every operation:
 *   1. check the Idempotency-Key header, fingerprint method + path + body;
 *   2. fast path: a completed key is replayed with one read, no write lock;
 *   3. BEGIN IMMEDIATE; acquire the key (NEW / REPLAY / IN_USE / MISMATCH);
 *   4. do the business writes and store the response in the same
 *      transaction; COMMIT.
 * Responses that are stored (and replayed): 2xx, 402, 409 order_id_conflict,
 * 409 charge_not_cancelable, 400 invalid_request.  Not stored: 409
 * idempotency_key_in_use, 404, every 503 (the key is released so the client
 * may retry it once the condition passes).
 */
#include "intake_impl.h"

void pt_reply_free(struct pt_reply *r)
{
    if (!r)
        return;
    free(r->body);
    r->body = NULL;
    r->len = 0;
}

void pt__intake_set_body(struct pt_reply *r, char *text)
{
    free(r->body);
    r->body = text;
    r->len = text ? strlen(text) : 0;
}

void pt_reply_error(struct pt_reply *r, int status, const char *code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* The message may quote what the client sent, and vsnprintf may have cut
     * a character in half: the reply must stay valid UTF-8 (cJSON prints
     * bytes as they are). */
    pt_json_utf8_scrub(msg);
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "code", code);
    cJSON_AddStringToObject(e, "message", msg);
    r->status = status;
    snprintf(r->code, sizeof r->code, "%s", code);
    pt__intake_set_body(r, cJSON_PrintUnformatted(o));
    cJSON_Delete(o);
}

void pt_reply_charge(struct pt_reply *r, int status, const struct pt_charge *c)
{
    r->status = status;
    r->code[0] = '\0';
    pt__intake_set_body(r, pt_charge_json_text(c));
}

int pt_intake_status_for(const struct pt_charge *c)
{
    switch (c->state) {
    case PT_STATE_SUCCESS:
        return 201;
    case PT_STATE_FAILED:
        return 402;
    case PT_STATE_CANCELED:
        return 200;
    default:
        return 202;
    }
}

int pt_order_id_valid(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '.' || ch == '-'))
            return 0;
    }
    return 1;
}

/* The storage error behind this thread's last 503 storage_unavailable
 * (create_charge tells PT_EIO, a server gone, from the rest). */
_Thread_local int pt__intake_last_storage_rc;

void pt__intake_storage_unavailable(struct pt_reply *r, struct pt_store *st, int rc)
{
    pt__intake_last_storage_rc = rc;
    pt_log_error("storage failure: %s (%s)", pt_strerror(rc),
                 st ? pt_store_errmsg(st) : "the batch's commit");
    pt_reply_error(r, 503, "storage_unavailable",
                   "the charge could not be stored (%s); nothing was recorded, retry with the "
                   "same Idempotency-Key",
                   pt_strerror(rc));
    r->retry_after_s = RETRY_STORAGE_S;
}

/* A barcode charge made final here (canceled in the queue, or refused
 * before it left) erased its payment code: the background thread owes the
 * WAL a truncating checkpoint, and may be asleep. */
void pt__intake_wake_to_wipe(const struct pt_intake *in)
{
    if (pt_store_wipe_due() && in->online.wake)
        in->online.wake(in->online.ctx);
}

/* ---- the guard, shared by every operation --------------------------------- */

void pt__intake_guard_free(struct guard *g)
{
    cJSON_Delete(g->json);
    g->json = NULL;
}

/* The key and the body, before the store is asked anything: 0 with *out
 * the answer when the request is refused here. */
static int guard_prepare(struct pt_store *st, const char *path, const char *key_header,
                         const char *body, size_t len, int empty_is_object, struct guard *g,
                         struct pt_reply *out)
{
    memset(g, 0, sizeof *g);
    if (!key_header || !*key_header) {
        pt_reply_error(out, 400, "idempotency_key_missing",
                       "header Idempotency-Key is required: a unique key chosen by the client "
                       "for this payment intent (1-255 visible ASCII characters)");
        return 0;
    }
    if (pt_idem_key_normalize(key_header, g->key) != PT_OK) {
        pt_reply_error(out, 400, "idempotency_key_invalid",
                       "header Idempotency-Key must be 1-255 visible ASCII characters "
                       "(0x21-0x7e), optionally in double quotes");
        return 0;
    }
    snprintf(g->scope, sizeof g->scope, "POST %s", path);

    /* Only a body with a single meaning reaches cJSON (SPEC 5, input
     * strictness).  Fingerprint: canonical JSON when the body passed and
     * every number in it survives cJSON's double exactly (so key order and
     * spacing do not matter), the raw bytes otherwise: two bodies that differ
     * in any byte cJSON would lose are two requests. */
    char *canon = NULL;
    if (len == 0 && empty_is_object) {
        g->json = cJSON_CreateObject();
        canon = g->json ? pt_json_canonical(g->json) : NULL;
    } else if (len > 0) {
        struct pt_json_check chk = {.members = &g->amount, .n_members = 1};
        g->amount.name = "amount";
        int crc = pt_json_check(body, len, &chk);
        if (crc == PT_OK && !(g->json = cJSON_ParseWithLength(body, len)))
            crc = PT_ENOMEM;
        if (crc == PT_ENOMEM) {
            pt_reply_error(out, 503, "storage_unavailable", "out of memory");
            return 0;
        }
        if (crc)
            snprintf(g->refused, sizeof g->refused, "%s: %s", chk.field[0] ? chk.field : "body",
                     chk.problem);
        else if (chk.exact_numbers)
            canon = pt_json_canonical(g->json);
    }
    g->body_is_json = canon != NULL;
    int rc;
    if (canon) {
        rc = pt_idem_fingerprint("POST", path, canon, g->hash);
    } else {
        char *raw = malloc(len + 1);
        if (!raw) {
            pt_reply_error(out, 503, "storage_unavailable", "out of memory");
            return 0;
        }
        if (len) /* no body at all: body may be NULL */
            memcpy(raw, body, len);
        raw[len] = '\0';
        rc = pt_idem_fingerprint("POST", path, raw, g->hash);
        free(raw);
    }
    free(canon);
    if (rc) {
        pt__intake_storage_unavailable(out, st, rc);
        return 0;
    }
    return 1;
}

/* Steps 1-3 (see guard_enter). */
static void answer_recorded(const struct guard *g, struct pt_idem_result *res,
                            struct pt_reply *out);

static int guard_try(const struct pt_intake *in, struct pt_store *st, const char *path,
                     const char *key_header, const char *body, size_t len, int empty_is_object,
                     int64_t now, struct guard *g, struct pt_reply *out, struct pt_idem_result *res)
{
    memset(res, 0, sizeof *res);
    if (!guard_prepare(st, path, key_header, body, len, empty_is_object, g, out))
        return 0;
    int rc;
    /* Fast path: a completed key needs no write lock. */
    rc = pt_idem_lookup(st, &in->idem, g->scope, g->key, g->hash, now, res);
    if (rc) {
        pt__intake_storage_unavailable(out, st, rc);
        return 0;
    }
    if (res->status == PT_IDEM_ABSENT) {
        if ((rc = pt_store_begin(st)) != PT_OK) {
            pt__intake_storage_unavailable(out, st, rc);
            return 0;
        }
        g->in_txn = 1;
        rc = pt_idem_acquire_later(st, &in->idem, g->scope, g->key, g->hash, now, res);
        if (rc) {
            pt_store_rollback(st);
            g->in_txn = 0;
            pt__intake_storage_unavailable(out, st, rc);
            return 0;
        }
    }
    if (res->status == PT_IDEM_NEW || res->status == PT_IDEM_RECOVERED) {
        g->lock = res->lock;
        return 1;
    }
    /* A stored answer is not replayed from a database file that is gone
     * (SPEC 18): what it acknowledges is in no file a restart would open. */
    if (res->status == PT_IDEM_REPLAY && (rc = pt_store_files_intact(st)) != PT_OK) {
        if (g->in_txn)
            pt_store_rollback(st);
        g->in_txn = 0;
        pt__intake_storage_unavailable(out, NULL, rc);
        return 0;
    }
    answer_recorded(g, res, out);
    if (g->in_txn) {
        /* The answer may rest on what other requests of a batch wrote (a key
         * they completed): it stands only once they are durable. */
        g->in_txn = 0;
        if ((rc = pt_store_rollback(st)) != PT_OK) {
            pt_reply_free(out);
            memset(out, 0, sizeof *out);
            pt__intake_storage_unavailable(out, st, rc);
        }
    }
    return 0;
}

/* The answer a key's record gives (anything but NEW and RECOVERED). */
static void answer_recorded(const struct guard *g, struct pt_idem_result *res, struct pt_reply *out)
{
    switch (res->status) {
    case PT_IDEM_REPLAY:
        out->status = res->response_status;
        pt__intake_set_body(out, res->body);
        out->len = res->body_len;
        res->body = NULL;
        out->replayed = 1;
        break;
    case PT_IDEM_MISMATCH:
        pt_reply_error(out, 422, "idempotency_key_reused",
                       "Idempotency-Key '%s' was used for a different request; use a new key "
                       "for a new payment intent",
                       g->key);
        break;
    case PT_IDEM_IN_USE:
        pt_reply_error(out, 409, "idempotency_key_in_use",
                       "the first request with Idempotency-Key '%s' is still running; retry "
                       "with the same key to get its result",
                       g->key);
        out->retry_after_s = RETRY_IN_USE_S;
        break;
    default:
        pt_reply_error(out, 503, "storage_unavailable", "unexpected idempotency state");
        break;
    }
}

/* The intake for the lane's own store: no gateway is asked from there
 * (what it holds is queued, or canceled), and it has no fallback itself. */
struct pt_intake pt__intake_on_the_lane(const struct pt_intake *in)
{
    struct pt_intake local = *in;
    memset(&local.online, 0, sizeof local.online);
    memset(&local.fallback, 0, sizeof local.fallback);
    return local;
}

/*
 * store.fallback "local" (SPEC 16): a key the lane used while the store
 * server was unreachable has its record in the lane's own store.  Until its
 * charge is moved (the next sync pass) the server does not know the key
 * and would take a retry as a new request: the lane's record answers it,
 * as during the outage - the same bytes, or 422 for another body.  After
 * the move the server's copy of the record says the same.  1 when *out is
 * that answer.
 */
int pt__intake_answered_locally(const struct pt_intake *in, const char *path,
                                const char *key_header, const char *body, size_t len,
                                int empty_is_object, int64_t now, struct pt_reply *out)
{
    if (!in->fallback.st)
        return 0;
    /* On the heap: the request's own guard is still to come on this stack,
     * which may be 64 KiB (thread_stack_kib). */
    struct guard *g = malloc(sizeof *g);
    if (!g)
        return 0; /* the store server's path answers */
    struct pt_reply refused = {0};
    int hit = 0;
    if (guard_prepare(in->fallback.st, path, key_header, body, len, empty_is_object, g, &refused)) {
        struct pt_idem_result res = {0};
        pthread_mutex_lock(in->fallback.mu);
        int rc = pt_idem_lookup(in->fallback.st, &in->idem, g->scope, g->key, g->hash, now, &res);
        pthread_mutex_unlock(in->fallback.mu);
        hit = rc == PT_OK && (res.status == PT_IDEM_REPLAY || res.status == PT_IDEM_MISMATCH);
        if (hit) {
            memset(out, 0, sizeof *out); /* the caller's, not filled yet */
            answer_recorded(g, &res, out);
        }
        pt_idem_result_free(&res);
    }
    pt_reply_free(&refused); /* a refusal is the store server's path to answer */
    pt__intake_guard_free(g);
    free(g);
    return hit;
}

int pt_intake_local_charge(const struct pt_intake *in, const char *order_id, struct pt_charge *c)
{
    if (!in->fallback.st)
        return PT_LOCAL_NONE;
    pthread_mutex_lock(in->fallback.mu);
    int rc = pt_store_charge_get(in->fallback.st, order_id, c);
    pthread_mutex_unlock(in->fallback.mu);
    /* Moved, or held for review (the server has another charge of that
     * order_id): the server's charge is the one. */
    if (rc != PT_OK || pt_fallback_is_moved(c) || c->review)
        return PT_LOCAL_NONE;
    /* Being moved (the server may have it), or canceled here before it
     * was (the server may have taken the order_id since): the server's
     * answer first. */
    if (pt_fallback_is_moving(c) || c->state != PT_STATE_INIT)
        return PT_LOCAL_SHADOW;
    return PT_LOCAL_OWN;
}

/*
 * Steps 1-3.  Returns 1 when the caller should go on with the business
 * writes (transaction open, key locked; the caller frees g and res), 0 when
 * *out is already the answer (nothing left to free).
 */
int pt__intake_guard_enter(const struct pt_intake *in, struct pt_store *st, const char *path,
                           const char *key_header, const char *body, size_t len,
                           int empty_is_object, int64_t now, struct guard *g, struct pt_reply *out,
                           struct pt_idem_result *res)
{
    if (guard_try(in, st, path, key_header, body, len, empty_is_object, now, g, out, res))
        return 1;
    pt_idem_result_free(res);
    pt__intake_guard_free(g);
    return 0;
}

/*
 * The request's lock was recovered by another request after lock_timeout_s
 * (this one took longer than that): the key's answer is the recoverer's, so
 * this request answers with it too - the stored one once it is stored,
 * 409 idempotency_key_in_use while the recoverer still runs.  One key never
 * has two answers.  Called after the rollback.
 */
int pt__intake_answer_as_the_key(struct pt_store *st, struct guard *g, struct pt_reply *out)
{
    struct pt_key_row row = {0};
    int rc = pt_store_key_get(st, g->scope, g->key, &row);
    pt_log_warn("key %s: lock taken over by a later request; answering with its result", g->key);
    pt_reply_free(out);
    memset(out, 0, sizeof *out);
    if (rc == PT_OK && row.completed_at) {
        out->status = row.response_status;
        pt__intake_set_body(out, row.response_body);
        out->len = row.response_len;
        row.response_body = NULL;
        out->replayed = 1;
    } else if (rc == PT_OK || rc == PT_ENOTFOUND) {
        pt_reply_error(out, 409, "idempotency_key_in_use",
                       "another request with Idempotency-Key '%s' took over after this one "
                       "ran longer than idempotency.lock_timeout_s; retry with the same key to "
                       "get its result",
                       g->key);
        out->retry_after_s = RETRY_IN_USE_S;
        rc = PT_OK;
    }
    pt_key_row_free(&row);
    return rc;
}

/* Stores out as the key's response and commits. */
int pt__intake_guard_complete(struct pt_store *st, struct guard *g, struct pt_reply *out,
                              int64_t now)
{
    /* The answer is stored in the request's own write transaction: outside
     * it, nothing would commit the key together with the business rows. */
    assert(g->in_txn);
    int rc =
        pt_idem_complete(st, &g->lock, g->scope, g->key, out->status, out->body, out->len, now);
    /* A lock taken over meanwhile: the key's answer is the recoverer's, but
     * what this request learned from the gateway (the outcome, the code to
     * show) is still the charge's, so it commits without the key. */
    int lost = rc == PT_ESTATE;
    if (rc == PT_OK || lost)
        rc = pt_store_commit(st);
    else
        pt_store_rollback(st);
    g->in_txn = 0;
    if (rc == PT_OK && lost)
        rc = pt__intake_answer_as_the_key(st, g, out);
    if (rc) {
        /* Nothing of this request survived the rollback. */
        pt__intake_storage_unavailable(out, st, rc);
        return rc;
    }
    return PT_OK;
}

/* Drops everything this request wrote, key included, keeping *out. */
void pt__intake_guard_abandon(struct pt_store *st, struct guard *g)
{
    if (g->in_txn)
        pt_store_rollback(st);
    g->in_txn = 0;
}

void pt__intake_guard_storage(struct pt_store *st, struct guard *g, struct pt_reply *out, int rc)
{
    pt__intake_guard_abandon(st, g);
    pt__intake_storage_unavailable(out, st, rc);
}

int pt__intake_guard_end(struct guard *g, struct pt_idem_result *res, const struct pt_reply *out,
                         int rc)
{
    pt_idem_result_free(res);
    pt__intake_guard_free(g);
    return out->status == 503 && rc ? rc : PT_OK;
}

/* ---- POST /v1/charges -------------------------------------------------------- */

/* Appends "field: problem; " to the message. */
void pt__intake_problem(char *msg, size_t cap, const char *field, const char *text)
{
    size_t n = strlen(msg);
    snprintf(msg + n, cap - n, "%s%s: %s", n ? "; " : "", field, text);
}

int pt__intake_body_fields(const struct guard *g, const char *const fields[], char *msg, size_t cap)
{
    if (g->refused[0]) {
        snprintf(msg, cap, "%s", g->refused);
        return 0;
    }
    if (!cJSON_IsObject(g->json)) {
        pt__intake_problem(msg, cap, "body", "must be a JSON object");
        return 0;
    }
    char unknown[160];
    size_t o = (size_t)snprintf(unknown, sizeof unknown, "unknown field (");
    for (int i = 0; fields[i]; i++) {
        o += (size_t)snprintf(unknown + o, sizeof unknown - o, "%s%s", i ? ", " : "", fields[i]);
        assert(o < sizeof unknown - 1); /* the callers' few short names */
    }
    snprintf(unknown + o, sizeof unknown - o, ")");
    for (const cJSON *m = g->json->child; m; m = m->next) {
        int known = 0;
        for (int i = 0; fields[i] && !known; i++)
            known = strcmp(m->string, fields[i]) == 0;
        if (!known)
            pt__intake_problem(msg, cap, m->string, unknown);
    }
    return 1;
}

int pt__intake_string_field(const cJSON *body, const char *name, const cJSON **out)
{
    *out = cJSON_GetObjectItemCaseSensitive(body, name);
    return *out && !cJSON_IsNull(*out);
}

int pt__intake_charset_ok(const char *s, size_t min, size_t max, const char *extra)
{
    size_t n = strlen(s);
    if (n < min || n > max)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              (extra && strchr(extra, ch))))
            return 0;
    }
    return 1;
}

/* Text a customer may see: UTF-8 without control characters. */
int pt__intake_text_ok(const char *s, size_t max_bytes)
{
    size_t n = strlen(s);
    if (n == 0 || n > max_bytes)
        return 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return 0;
    return 1;
}

/*
 * The optional "operator" of a request an operator made (the operator page's
 * cancel and refund): actor becomes "operator:<name>" for its audit rows,
 * else stays "api".  Returns 0 (and says why in msg) when it is not a name.
 */
int pt__intake_operator_actor(const cJSON *body, char actor[80], char *msg, size_t cap)
{
    snprintf(actor, 80, "api");
    const cJSON *op =
        cJSON_IsObject(body) ? cJSON_GetObjectItemCaseSensitive(body, "operator") : NULL;
    if (!op)
        return 1;
    if (!cJSON_IsString(op) || !pt__intake_charset_ok(op->valuestring, 1, 64, "_.@-")) {
        pt__intake_problem(msg, cap, "operator",
                           "must be the operator's name, 1-64 of A-Z a-z 0-9 _ . @ -");
        return 0;
    }
    snprintf(actor, 80, "operator:%s", op->valuestring);
    return 1;
}

static const char *const charge_fields[] = {
    "order_id",       "amount",   "currency", "gateway", "method",   "payment_code",
    "payment_method", "customer", "subject",  "offline", "metadata", NULL};

/* What the checks of one charge body share. */
struct check {
    const struct pt_intake *in;
    const cJSON *body;
    struct pt_charge *c;
    char *msg; /* every problem, "field: what; ..." */
    size_t cap;
    const struct pt_gateway *gw; /* once the gateway field is good */
};

/* Every field is one payterm knows. */
static void check_known_fields(struct check *k)
{
    /* Names given twice never get here: pt_json_check refused the body. */
    for (const cJSON *m = k->body->child; m; m = m->next) {
        int known = 0;
        for (const char *const *f = charge_fields; *f; f++)
            known |= strcmp(m->string, *f) == 0;
        if (!known)
            pt__intake_problem(
                k->msg, k->cap, m->string,
                "unknown field (allowed: order_id, amount, currency, gateway, method, "
                "payment_code, payment_method, customer, subject, offline, metadata)");
    }
}

/* order_id: 1-64 of [A-Za-z0-9_.-]. */
static void check_order_id(struct check *k)
{
    const cJSON *v;
    if (!pt__intake_string_field(k->body, "order_id", &v))
        pt__intake_problem(k->msg, k->cap, "order_id", "required");
    else if (!cJSON_IsString(v) || !pt_order_id_valid(v->valuestring))
        pt__intake_problem(k->msg, k->cap, "order_id",
                           "must be 1-64 characters of A-Z a-z 0-9 _ . -");
    else
        snprintf(k->c->order_id, sizeof k->c->order_id, "%s", v->valuestring);
}

/* amount: a plain integer from its digits (pt_json_check kept them). */
static void check_amount(struct check *k, const struct pt_json_member *amount)
{
    const cJSON *v;
    int64_t minor = 0;
    if (!pt__intake_string_field(k->body, "amount", &v)) {
        pt__intake_problem(k->msg, k->cap, "amount", "required (integer, minor units)");
    } else if (!cJSON_IsNumber(v) || !amount->text ||
               pt_json_plain_int(amount->text, amount->len, 1, INT64_MAX, &minor) != PT_OK) {
        pt__intake_problem(
            k->msg, k->cap, "amount",
            "must be a plain JSON integer (no leading zeros, fraction or exponent) between 1 "
            "and 9223372036854775807, in the currency's minor unit");
    } else if (minor > k->in->cfg->max_amount) {
        char t[96];
        snprintf(t, sizeof t, "must not exceed limits.max_amount (%lld)",
                 (long long)k->in->cfg->max_amount);
        pt__intake_problem(k->msg, k->cap, "amount", t);
    } else {
        k->c->amount = minor;
    }
}

/* currency: an ISO 4217 code the money table knows. */
static void check_currency(struct check *k)
{
    const cJSON *v;
    if (!pt__intake_string_field(k->body, "currency", &v))
        pt__intake_problem(k->msg, k->cap, "currency", "required (ISO 4217 code, e.g. CNY)");
    else if (!cJSON_IsString(v) || !pt_money_currency_valid(v->valuestring))
        pt__intake_problem(k->msg, k->cap, "currency",
                           "must be an upper-case ISO 4217 code such as CNY or USD");
    else
        snprintf(k->c->currency, sizeof k->c->currency, "%s", v->valuestring);
}

/* gateway: configured here; its own order id rules. */
static void check_gateway(struct check *k)
{
    const cJSON *v;
    char t[200];
    if (!pt__intake_string_field(k->body, "gateway", &v)) {
        snprintf(t, sizeof t, "required: %s", pt_gateway_names());
        pt__intake_problem(k->msg, k->cap, "gateway", t);
    } else if (!cJSON_IsString(v) || !(k->gw = pt_gateway_find(v->valuestring))) {
        snprintf(t, sizeof t, "must be %s", pt_gateway_names());
        pt__intake_problem(k->msg, k->cap, "gateway", t);
    } else if (!pt_config_gateway_configured(k->in->cfg, k->gw->name)) {
        snprintf(t, sizeof t, "'%s' is not configured on this device (gateways.%s)", k->gw->name,
                 k->gw->name);
        pt__intake_problem(k->msg, k->cap, "gateway", t);
        k->gw = NULL;
    } else {
        snprintf(k->c->gateway, sizeof k->c->gateway, "%s", k->gw->name);
        size_t n = strlen(k->c->order_id);
        if (k->c->order_id[0] &&
            (n < k->gw->order_id_min || n > k->gw->order_id_max ||
             (k->gw->order_id_forbidden && strpbrk(k->c->order_id, k->gw->order_id_forbidden)))) {
            snprintf(t, sizeof t, "%s needs %zu-%zu characters%s%s%s", k->gw->name,
                     k->gw->order_id_min, k->gw->order_id_max,
                     k->gw->order_id_forbidden ? " without '" : "",
                     k->gw->order_id_forbidden ? k->gw->order_id_forbidden : "",
                     k->gw->order_id_forbidden ? "'" : "");
            pt__intake_problem(k->msg, k->cap, "order_id", t);
        }
    }
}

/* method: one the gateway offers; the currency one it takes. */
static void check_method(struct check *k)
{
    const cJSON *v;
    char t[200];
    if (!pt__intake_string_field(k->body, "method", &v)) {
        pt__intake_problem(k->msg, k->cap, "method", "required");
    } else if (!cJSON_IsString(v) || strlen(v->valuestring) >= sizeof k->c->method) {
        pt__intake_problem(k->msg, k->cap, "method", "must be a string");
    } else if (k->gw && !pt_gateway_has_method(k->gw, v->valuestring)) {
        char list[96] = "";
        for (const struct pt_gw_method *m = k->gw->methods; m->name; m++) {
            size_t n = strlen(list);
            snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "", m->name);
        }
        snprintf(t, sizeof t, "%s does not offer '%s' (it offers: %s)", k->gw->name, v->valuestring,
                 list);
        pt__intake_problem(k->msg, k->cap, "method", t);
    } else if (k->gw && k->gw->method_unavailable &&
               k->gw->method_unavailable(&k->in->cfg->gw[pt_gateway_index(k->gw->name)],
                                         v->valuestring)) {
        snprintf(t, sizeof t, "%s.%s %s", k->gw->name, v->valuestring,
                 k->gw->method_unavailable(&k->in->cfg->gw[pt_gateway_index(k->gw->name)],
                                           v->valuestring));
        pt__intake_problem(k->msg, k->cap, "method", t);
    } else {
        snprintf(k->c->method, sizeof k->c->method, "%s", v->valuestring);
    }

    if (k->gw && k->c->currency[0] &&
        !pt_config_currency_allowed(k->in->cfg, k->gw->name, k->c->currency)) {
        snprintf(t, sizeof t,
                 "%.3s is not accepted by %.16s on this device (list it in "
                 "gateways.%.16s.currencies when the merchant's acquiring takes it)",
                 k->c->currency, k->gw->name, k->gw->name);
        pt__intake_problem(k->msg, k->cap, "currency", t);
    }
}

/* amount: one the gateway can represent in its own units (SPEC 18), once
 * the amount, the currency and the gateway are good (a currency the
 * gateway does not take at all is named as such above). */
static void check_amount_units(struct check *k)
{
    char t[300];
    if (k->gw && k->c->amount > 0 && k->c->currency[0] &&
        pt_config_currency_allowed(k->in->cfg, k->gw->name, k->c->currency) &&
        !pt_gateway_amount_ok(k->gw, k->c->currency, k->c->amount, t, sizeof t))
        pt__intake_problem(k->msg, k->cap, "amount", t);
}

/* The fields a method needs or refuses (payment code, saved card). */
static void check_method_fields(struct check *k)
{
    const cJSON *v;
    const struct pt_gw_method *how = pt_gateway_method(k->gw, k->c->method);
    int barcode = how && how->payment_code, card = how && how->card;
    if (pt__intake_string_field(k->body, "payment_code", &v)) {
        if (!barcode)
            pt__intake_problem(k->msg, k->cap, "payment_code", "only for method barcode");
        else if (!cJSON_IsString(v) || !pt__intake_charset_ok(v->valuestring, 6, 64, NULL))
            pt__intake_problem(k->msg, k->cap, "payment_code",
                               "must be the scanned code: 6-64 letters or digits");
        else
            snprintf(k->c->payment_code, sizeof k->c->payment_code, "%s", v->valuestring);
    } else if (barcode) {
        pt__intake_problem(k->msg, k->cap, "payment_code",
                           "required for method barcode (the customer's code)");
    }
    if (pt__intake_string_field(k->body, "payment_method", &v)) {
        if (!card)
            pt__intake_problem(k->msg, k->cap, "payment_method", "only for method card_on_file");
        else if (!cJSON_IsString(v) || !pt__intake_charset_ok(v->valuestring, 3, 128, "_"))
            pt__intake_problem(k->msg, k->cap, "payment_method",
                               "must be a payment method id such as pm_123");
        else
            snprintf(k->c->payment_method, sizeof k->c->payment_method, "%s", v->valuestring);
    } else if (card) {
        pt__intake_problem(k->msg, k->cap, "payment_method", "required for method card_on_file");
    }
    if (pt__intake_string_field(k->body, "customer", &v)) {
        if (!card)
            pt__intake_problem(k->msg, k->cap, "customer", "only for method card_on_file");
        else if (!cJSON_IsString(v) || !pt__intake_charset_ok(v->valuestring, 3, 128, "_"))
            pt__intake_problem(k->msg, k->cap, "customer", "must be a customer id such as cus_123");
        else
            snprintf(k->c->customer, sizeof k->c->customer, "%s", v->valuestring);
    }
}

/* subject and offline. */
static void check_text_fields(struct check *k)
{
    const cJSON *v;
    if (pt__intake_string_field(k->body, "subject", &v)) {
        if (!cJSON_IsString(v) || !pt__intake_text_ok(v->valuestring, 256))
            pt__intake_problem(k->msg, k->cap, "subject",
                               "must be 1-256 bytes of text without control characters");
        else
            snprintf(k->c->subject, sizeof k->c->subject, "%s", v->valuestring);
    }
    k->c->offline = PT_OFFLINE_PREFER;
    if (pt__intake_string_field(k->body, "offline", &v) &&
        (!cJSON_IsString(v) || pt_offline_mode_parse(v->valuestring, &k->c->offline) != PT_OK))
        pt__intake_problem(k->msg, k->cap, "offline",
                           "must be prefer_online, require_online or force_offline");
}

/* A metadata member (a charge's or a refund's): Stripe's limits, so it
 * survives the trip to any gateway; its canonical text into out. */
void pt__intake_metadata_field(const cJSON *v, char *out, size_t outcap, char *msg, size_t cap)
{
    int ok = cJSON_IsObject(v), count = 0;
    for (const cJSON *m = ok ? v->child : NULL; m && ok; m = m->next, count++)
        ok = count < 20 && strlen(m->string) >= 1 && strlen(m->string) <= 40 && cJSON_IsString(m) &&
             strlen(m->valuestring) <= 500;
    char *text = ok ? pt_json_canonical(v) : NULL;
    if (!text || strlen(text) >= outcap)
        pt__intake_problem(
            msg, cap, "metadata",
            "must be an object of at most 20 string values (keys 1-40, values up to 500 "
            "characters)");
    else
        snprintf(out, outcap, "%s", text);
    free(text);
}

/* metadata: within Stripe's limits, so it survives any gateway. */
static void check_metadata(struct check *k)
{
    const cJSON *v;
    if (pt__intake_string_field(k->body, "metadata", &v))
        pt__intake_metadata_field(v, k->c->metadata, sizeof k->c->metadata, k->msg, k->cap);
}

/*
 * Validates the body into c, defaults filled in.  Returns 1 when valid;
 * otherwise msg names every field that is wrong.
 */
static int validate_charge(const struct pt_intake *in, const cJSON *body,
                           const struct pt_json_member *amount, struct pt_charge *c, char *msg,
                           size_t cap)
{
    memset(c, 0, sizeof *c);
    msg[0] = '\0';
    if (!cJSON_IsObject(body)) {
        pt__intake_problem(msg, cap, "body", "must be a JSON object");
        return 0;
    }
    struct check k = {.in = in, .body = body, .c = c, .msg = msg, .cap = cap};
    check_known_fields(&k);
    check_order_id(&k);
    check_amount(&k, amount);
    check_currency(&k);
    check_gateway(&k);
    check_method(&k);
    check_amount_units(&k);
    check_method_fields(&k);
    check_text_fields(&k);
    check_metadata(&k);
    return msg[0] == '\0';
}

/* Methods the customer cannot complete until the gateway has answered. */
int pt__intake_needs_gateway(const struct pt_charge *c)
{
    const struct pt_gw_method *m = pt_gateway_lookup(c->gateway, c->method);
    return m && m->interactive;
}

/* Why a charge may not wait in the offline queue (code NULL: it may). */
struct offline_no {
    const char *code; /* offline_not_allowed, offline_limit_exceeded */
    char why[256];    /* names the configuration key that decides */
};

/*
 * May c join the offline queue?  Fills *no; PT_OK or a storage error.  Runs
 * inside the write transaction, so the totals cannot change under us.  The
 * totals hold every charge accepted offline and not final (SPEC 18); c is
 * not among them yet.
 */
static int offline_check(const struct pt_intake *in, struct pt_store *st, const struct pt_charge *c,
                         struct offline_no *no)
{
    const struct pt_cfg_offline_limit *lim = pt_config_offline_limit(in->cfg, c->currency);
    no->code = "offline_limit_exceeded";
    if (!lim) {
        no->code = "offline_not_allowed";
        snprintf(no->why, sizeof no->why,
                 "%s charges are not taken offline (no offline.limits.%s in the configuration)",
                 c->currency, c->currency);
        return PT_OK;
    }
    if (c->amount > lim->max_amount) {
        snprintf(no->why, sizeof no->why,
                 "amount %lld exceeds the offline limit for one %s charge "
                 "(offline.limits.%s.max_amount = %lld)",
                 (long long)c->amount, c->currency, c->currency, (long long)lim->max_amount);
        return PT_OK;
    }
    int64_t count = 0, total = 0;
    int rc = pt_store_queue_figures(st, c->currency, &count, &total);
    if (rc)
        return rc;
    if (count >= in->cfg->offline_max_count)
        snprintf(no->why, sizeof no->why,
                 "the offline queue is full (%lld charges; offline.max_count = %lld)",
                 (long long)count, (long long)in->cfg->offline_max_count);
    else if (total + c->amount > lim->max_total)
        snprintf(no->why, sizeof no->why,
                 "queued %s charges would total %lld, above offline.limits.%s.max_total (%lld)",
                 c->currency, (long long)(total + c->amount), c->currency,
                 (long long)lim->max_total);
    else
        no->code = NULL;
    return PT_OK;
}

/*
 * Answers a request for an order that already exists under another key: the
 * same parameters (defaults filled in) get the charge, different ones a
 * conflict.  The charge row keeps every parameter as it was given, so they
 * are compared as the canonical text of both.  Returns PT_OK or PT_ENOMEM.
 */
static int existing_order(struct pt_charge *have, const struct pt_charge *want,
                          struct pt_reply *out)
{
    /* A final charge no longer has its payment code (erased, SPEC section
     * 3): the retry's code cannot be compared, and nothing can move money
     * for the order any more, so the other parameters decide. */
    int erased = pt_state_is_final(have->state) && !have->payment_code[0];
    if (erased)
        memcpy(have->payment_code, want->payment_code, sizeof have->payment_code);
    char *a = pt_charge_params_text(have), *b = pt_charge_params_text(want);
    if (erased)
        pt_zeroize(have->payment_code, sizeof have->payment_code);
    int same = a && b && strcmp(a, b) == 0, rc = a && b ? PT_OK : PT_ENOMEM;
    free(a);
    free(b);
    if (rc)
        return rc;
    if (!same)
        pt_reply_error(out, 409, "order_id_conflict",
                       "order_id '%s' already exists with different parameters; an order is "
                       "charged once",
                       have->order_id);
    else
        pt_reply_charge(out, 200, have);
    return PT_OK;
}

/* The gateway cannot take c now and c may not wait: the 503 that says so. */
static void cannot_wait(struct pt_reply *out, const struct pt_charge *c, const char *code,
                        const char *why)
{
    pt_reply_error(out, 503, code,
                   "the %s gateway cannot be reached now and this charge cannot wait in the "
                   "offline queue (%s); nothing was recorded, retry with the same "
                   "Idempotency-Key",
                   c->gateway, why);
    out->retry_after_s = RETRY_OFFLINE_S;
}

/*
 * Online or queued?  A charge that could not wait in the queue
 * (require_online, qr/redirect, or beyond the offline limits) goes online
 * only when the gateway answers a probe right now: otherwise the 503
 * leaves nothing behind and the same key works once the link is back.
 */
static int goes_online(const struct pt_intake *in, struct pt_store *st, const struct pt_charge *c,
                       enum pt_offline_mode mode, int reach, int *online)
{
    *online = reach;
    if (!*online || !in->online.probe)
        return PT_OK;
    struct offline_no no = {0};
    int rc = mode == PT_OFFLINE_REQUIRE_ONLINE ? PT_OK : offline_check(in, st, c, &no);
    if (rc == PT_OK && (mode == PT_OFFLINE_REQUIRE_ONLINE || no.code) &&
        !in->online.probe(in->online.ctx, c->gateway))
        *online = 0;
    return rc;
}

/* The gateway is not to be asked now: c waits in the queue, or the 503. */
static int queue_new(const struct pt_intake *in, struct pt_store *st, struct guard *g,
                     struct pt_charge *c, enum pt_offline_mode mode, int64_t now,
                     struct pt_reply *out, enum step *next)
{
    *next = STEP_RELEASE;
    if (mode == PT_OFFLINE_REQUIRE_ONLINE) {
        cannot_wait(out, c, "offline_not_allowed",
                    pt__intake_needs_gateway(c) ? "the customer pays on the gateway's page or code"
                                                : "offline: require_online");
        return PT_OK;
    }
    struct offline_no no;
    int rc = offline_check(in, st, c, &no);
    if (rc || no.code) {
        if (!rc)
            cannot_wait(out, c, no.code, no.why);
        return rc;
    }
    /* The key completes in this same transaction, so it needs no link to
     * the order for lock recovery; its record still names the order, for a
     * lane's local store whose keys move with their charges. */
    c->next_attempt_at = now;
    c->offline_accepted = 1; /* counts in the limits until final (SPEC 18) */
    if ((rc = pt_charge_create(st, c, "api", now)))
        return rc;
    pt_store_key_name_order(&g->lock, c->order_id);
    pt_log_info("charge %s queued offline (%s %lld %s)", c->order_id, c->gateway,
                (long long)c->amount, c->currency);
    pt_reply_charge(out, 202, c);
    *next = STEP_COMPLETE;
    return PT_OK;
}

/*
 * The online charge was provably never sent (inside commit 2).
 * prefer_online waits in the queue if the offline limits allow it;
 * otherwise (or for require_online) the order is canceled before anything
 * left the device, so the background sync never surprises the client, and
 * the key is released: the client decides what to do next.
 */
static int not_sent(const struct pt_intake *in, struct pt_store *st, struct guard *g,
                    struct pt_charge *c, enum pt_offline_mode mode, int64_t now,
                    struct pt_reply *out, enum step *next)
{
    struct offline_no no = {.code = "offline_not_allowed"};
    snprintf(no.why, sizeof no.why, "this charge must go online");
    int rc = mode == PT_OFFLINE_PREFER ? offline_check(in, st, c, &no) : PT_OK;
    if (rc)
        return rc;
    *next = STEP_COMPLETE;
    if (!no.code) {
        /* Accepted offline from now on: it counts in the limits (it was
         * sent online while the customer waited, and did not, till now). */
        if ((rc = pt_store_charge_accept_offline(st, c, now)) ||
            (rc = pt_store_charge_get_by_id(st, c->id, c)))
            return rc;
        pt_log_info("charge %s not sent, queued offline", c->order_id);
        pt_reply_charge(out, 202, c);
        return PT_OK;
    }
    rc = pt_charge_transition(st, c, PT_STATE_CANCELED, NULL, "not_sent_offline_refused", "api",
                              "gateway unreachable and the charge may not be queued", now);
    if (rc && rc != PT_EEXIST && rc != PT_ESTATE)
        return rc;
    if ((rc = pt_idem_release(st, &g->lock, g->scope, g->key)) == PT_OK &&
        (rc = pt_store_commit(st)) == PT_OK) {
        g->in_txn = 0;
        *next = STEP_DONE;
        pt_reply_error(out, 503, no.code,
                       "the %s gateway could not be reached and the charge cannot wait in the "
                       "offline queue (%s); nothing was sent and order %s was canceled: charge "
                       "it again with a new order_id",
                       c->gateway, no.why, c->order_id);
        out->retry_after_s = RETRY_OFFLINE_S;
    } else if (rc == PT_ESTATE) { /* our lock was taken over: its answer is the key's */
        if ((rc = pt_store_commit(st)) == PT_OK) {
            g->in_txn = 0;
            *next = STEP_DONE;
            rc = pt__intake_answer_as_the_key(st, g, out);
        }
    }
    return rc;
}

/*
 * The online charge, in two durable commits (docs/online-charge.md): the
 * charge INIT and PROCESSING with the key linked to it, before any byte
 * leaves; then the outcome with the stored answer.
 */
static int charge_online(const struct pt_intake *in, struct pt_store *st, struct guard *g,
                         struct pt_charge *c, enum pt_offline_mode mode, int64_t now,
                         struct pt_reply *out, enum step *next)
{
    *next = STEP_RELEASE;
    int rc;
    c->next_attempt_at = now;
    if ((rc = pt_charge_create(st, c, "api", now)) ||
        (rc = in->online.claim(in->online.ctx, st, c, now)) ||
        (rc = pt_store_key_set_order(st, g->scope, g->key, &g->lock, c->order_id)) ||
        (rc = pt_store_commit(st)))
        return rc;
    g->in_txn = 0;
    /* From here the charge keeps its lock when storage fails: a retry after
     * lock recovery is answered from the charge row. */
    *next = STEP_DONE;
    struct pt_online_send sent;
    in->online.send(in->online.ctx, c, &sent);
    if ((rc = pt_store_begin(st)))
        return rc;
    g->in_txn = 1;
    if ((rc = in->online.settle(in->online.ctx, st, c, &sent)))
        return rc;
    if (c->state == PT_STATE_INIT)
        return not_sent(in, st, g, c, mode, now, out, next);
    pt_reply_charge(out, pt_intake_status_for(c) == 200 ? 202 : pt_intake_status_for(c), c);
    *next = STEP_COMPLETE;
    return PT_OK;
}

/* A new order: online, queued, or refused. */
/* A gateway believed down, tried for this charge before its transaction
 * (SPEC 18, pt_online_ops.try_down). */
struct tried {
    int done, up, trial, can_wait;
    char gateway[PT_GATEWAY_MAX];
};
/* new_charge's answer when the gateway is to be tried first (positive:
 * never a PT_E* code). */
#define TRY_FIRST 2

static int new_charge(const struct pt_intake *in, struct pt_store *st, struct guard *g,
                      struct pt_charge *c, int nowait, int64_t now, struct pt_reply *out,
                      enum step *next, struct tried *tried)
{
    enum pt_offline_mode mode =
        pt__intake_needs_gateway(c) ? PT_OFFLINE_REQUIRE_ONLINE : c->offline;
    int online = 0;
    *next = STEP_RELEASE;
    /* Whether the gateway is up is asked once: asked twice, it could come
     * up in between and a nowait request would send on the event loop,
     * its first commit deferred into a batch - before it is durable. */
    int reach = mode != PT_OFFLINE_FORCE && in->online.claim &&
                (!in->online.reachable || in->online.reachable(in->online.ctx, c->gateway));
    /* A customer-present charge for a gateway believed down tries it at
     * once (SPEC 18) - one at a time, the others wait for that try -
     * instead of being queued (or refused) until a sync pass finds it
     * back. */
    if (!reach && mode != PT_OFFLINE_FORCE && in->online.claim && in->online.try_down) {
        if (nowait)
            return PT_EAGAIN; /* a try may wait: not on the event loop */
        if (!tried->done) {
            /* The try (or the wait for another one's) is made outside the
             * write transaction, which would hold every other request. */
            snprintf(tried->gateway, sizeof tried->gateway, "%s", c->gateway);
            tried->can_wait = mode == PT_OFFLINE_PREFER;
            return TRY_FIRST;
        }
        reach = tried->up;
    }
    /* nowait: a probe or a send is not for this thread. */
    if (nowait && reach)
        return PT_EAGAIN;
    int rc = goes_online(in, st, c, mode, reach, &online);
    if (rc)
        return rc;
    return online ? charge_online(in, st, g, c, mode, now, out, next)
                  : queue_new(in, st, g, c, mode, now, out, next);
}

/*
 * Everything before a new order is taken: a recovered lock, the body, an
 * order that exists.  Returns 1 when *out is the answer (*next says what
 * to do with the guard), 0 to go on with the new charge *c.
 */
static int answered_before_new(const struct pt_intake *in, struct pt_store *st, struct guard *g,
                               const struct pt_idem_result *res, struct pt_charge *c,
                               struct pt_reply *out, int *rc)
{
    char msg[1024];
    struct pt_charge have;
    *rc = PT_OK;
    /* A lock taken over from a request that died: its charge row (if any)
     * says how far it got, and the client gets that charge. */
    if (res->status == PT_IDEM_RECOVERED && res->order_id[0]) {
        *rc = pt_store_charge_get(st, res->order_id, &have);
        if (*rc == PT_OK) {
            pt_log_warn("recovered lock of key %s: order %s is %s", g->key, have.order_id,
                        pt_state_name(have.state));
            pt_reply_charge(out, pt_intake_status_for(&have), &have);
            return 1;
        }
        if (*rc != PT_ENOTFOUND)
            return 1;
        *rc = PT_OK;
    }
    if (g->refused[0]) {
        pt_reply_error(out, 400, "invalid_request", "%s", g->refused);
        return 1;
    }
    if (!g->json) {
        pt_reply_error(out, 400, "invalid_request",
                       "body: required, a JSON object describing the charge");
        return 1;
    }
    if (!validate_charge(in, g->json, &g->amount, c, msg, sizeof msg)) {
        pt_reply_error(out, 400, "invalid_request", "%s", msg);
        return 1;
    }
    *rc = pt_store_charge_get(st, c->order_id, &have);
    if (*rc == PT_OK) {
        *rc = existing_order(&have, c, out);
        return 1;
    }
    if (*rc == PT_ENOTFOUND)
        *rc = PT_OK;
    return *rc != PT_OK;
}

/*
 * The guarded new charge queued offline in one statement, where the store
 * has one (PostgreSQL: one round trip, SPEC 16).  Only the plain case is
 * taken here - a well-formed charge that goes to the queue (its gateway
 * unreachable, or force_offline) within the offline limits, under a key
 * never used - with the answer the usual path would have given, byte for
 * byte.  Anything else, and any doubt, returns 0 with nothing written, and
 * the usual path answers as it always has.
 */
static int queue_in_one(const struct pt_intake *in, struct pt_store *st, const char *key_header,
                        const char *body, size_t len, int64_t now, struct pt_reply *out)
{
    struct guard g;
    struct pt_reply refused = {0};
    struct pt_charge c = {0};
    char msg[1024], *text = NULL;
    int done = 0;
    if (!pt_store_has_queue_guarded(st))
        return 0;
    if (!guard_prepare(st, "/v1/charges", key_header, body, len, 0, &g, &refused) || g.refused[0] ||
        !g.json || !validate_charge(in, g.json, &g.amount, &c, msg, sizeof msg))
        goto out;
    enum pt_offline_mode mode =
        pt__intake_needs_gateway(&c) ? PT_OFFLINE_REQUIRE_ONLINE : c.offline;
    const struct pt_cfg_offline_limit *lim = pt_config_offline_limit(in->cfg, c.currency);
    if (mode == PT_OFFLINE_REQUIRE_ONLINE || !lim || c.amount > lim->max_amount)
        goto out;
    if (mode != PT_OFFLINE_FORCE && in->online.claim &&
        (!in->online.reachable || in->online.try_down ||
         in->online.reachable(in->online.ctx, c.gateway)))
        goto out; /* it may go online (or try a gateway believed down): the usual path decides */
    c.state = PT_STATE_INIT;
    c.offline_accepted = 1;
    c.next_attempt_at = now;
    c.created_at = c.updated_at = now;
    static const char head[] = "{\"id\":";
    if (!(text = pt_charge_json_text(&c)) || strncmp(text, "{\"id\":0,", 8) != 0)
        goto out;
    struct pt_store_queued_charge q = {.scope = g.scope,
                                       .key = g.key,
                                       .hash = g.hash,
                                       .c = &c,
                                       .body_head = head,
                                       .body_tail = text + 7,
                                       .expires_at = now + in->idem.ttl_ms,
                                       .max_count = in->cfg->offline_max_count,
                                       .max_total = lim->max_total,
                                       .actor = "api"};
    if (pt_store_charge_queue_guarded(st, &q, now) != PT_OK)
        goto out;
    /* The answer is what was stored with the key: head, id, tail. */
    char id[24];
    snprintf(id, sizeof id, "%lld", (long long)c.id);
    size_t n = strlen(head) + strlen(id) + strlen(text + 7);
    char *answer = malloc(n + 1);
    if (!answer)
        goto out; /* stored: a retry with the key replays it */
    snprintf(answer, n + 1, "%s%s%s", head, id, text + 7);
    pt_log_info("charge %s queued offline (%s %lld %s)", c.order_id, c.gateway, (long long)c.amount,
                c.currency);
    out->status = 202;
    pt__intake_set_body(out, answer);
    done = 1;
    if (in->online.wake &&
        (!in->online.reachable || in->online.reachable(in->online.ctx, c.gateway)))
        in->online.wake(in->online.ctx);
out:
    free(text);
    pt_reply_free(&refused);
    pt__intake_guard_free(&g);
    return done;
}

static int create_once(const struct pt_intake *in, struct pt_store *st, const char *key_header,
                       const char *body, size_t len, int64_t now, int nowait, struct pt_reply *out,
                       struct tried *tried);

static int create_charge(const struct pt_intake *in, struct pt_store *st, const char *key_header,
                         const char *body, size_t len, int64_t now, int nowait,
                         struct pt_reply *out)
{
    memset(out, 0, sizeof *out);
    if (queue_in_one(in, st, key_header, body, len, now, out))
        return PT_OK;
    struct tried tried = {0};
    int rc = create_once(in, st, key_header, body, len, now, nowait, out, &tried);
    if (rc == TRY_FIRST) {
        /* Nothing was written; the same request again, knowing the try's
         * outcome (another request may have taken the key meanwhile). */
        tried.up = in->online.try_down(in->online.ctx, tried.gateway, tried.can_wait, &tried.trial);
        tried.done = 1;
        memset(out, 0, sizeof *out);
        rc = create_once(in, st, key_header, body, len, now, nowait, out, &tried);
    }
    if (tried.trial) /* its send had a verdict, or never happened: the next may try */
        in->online.end_try(in->online.ctx, tried.gateway);
    return rc;
}

static int create_once(const struct pt_intake *in, struct pt_store *st, const char *key_header,
                       const char *body, size_t len, int64_t now, int nowait, struct pt_reply *out,
                       struct tried *tried)
{
    struct guard g;
    struct pt_idem_result res;
    pt__intake_last_storage_rc = 0;
    if (!pt__intake_guard_enter(in, st, "/v1/charges", key_header, body, len, 0, now, &g, out,
                                &res))
        return out->status == 503
                   ? (pt__intake_last_storage_rc ? pt__intake_last_storage_rc : PT_ESTORAGE)
                   : PT_OK;
    struct pt_charge c = {0};
    enum step next = STEP_COMPLETE;
    int rc;
    if (!answered_before_new(in, st, &g, &res, &c, out, &rc))
        rc = new_charge(in, st, &g, &c, nowait, now, out, &next, tried);
    if (rc == PT_EEXIST) {
        /* The order was not there when read, and is now: another lane of a
         * shared store (PostgreSQL, SPEC 16) took it meanwhile; its insert
         * waited for that lane's commit.  Answered as an order that exists.
         * (With SQLite's one writer the read and the insert are in one
         * write transaction: this cannot happen there.) */
        struct pt_charge have;
        pt_reply_free(out);
        memset(out, 0, sizeof *out);
        if ((rc = pt_store_charge_get(st, c.order_id, &have)) == PT_OK) {
            rc = existing_order(&have, &c, out);
            next = STEP_COMPLETE;
        } else if (rc == PT_ENOTFOUND && pt__intake_archived(st, "charge", c.order_id, out)) {
            rc = PT_OK; /* SQLite: the order_id of an archived charge */
            next = STEP_COMPLETE;
        }
    }
    if (rc == PT_EAGAIN || rc == TRY_FIRST) {
        pt__intake_guard_abandon(st, &g); /* nothing written: the waiting thread starts over */
        pt_reply_free(out);
        memset(out, 0, sizeof *out);
    } else if (rc) {
        pt__intake_guard_abandon(st, &g);
        pt__intake_storage_unavailable(out, st, rc);
    } else if (next == STEP_COMPLETE) {
        rc = pt__intake_guard_complete(st, &g, out, now);
        /* Work for the background sync, unless its gateway is down (then
         * the probe every sync.interval_s brings it back; waking now would
         * only cost the other core a pass that finds nothing to do). */
        if (rc == PT_OK && out->status == 202 && in->online.wake &&
            (!in->online.reachable || in->online.reachable(in->online.ctx, c.gateway))) {
            /* Not before the charge is durable: the sync would not see it. */
            if (pt_store_commit_deferred(st))
                out->wake_on_settle = 1;
            else
                in->online.wake(in->online.ctx);
        }
    } else if (next == STEP_RELEASE) {
        pt__intake_guard_abandon(st, &g);
    }
    pt__intake_wake_to_wipe(in);
    pt_idem_result_free(&res);
    pt__intake_guard_free(&g);
    if (rc == PT_EAGAIN || rc == TRY_FIRST)
        return rc;
    return out->status == 503 && rc ? rc : PT_OK;
}

void pt_intake_settle(const struct pt_intake *in, int rc, struct pt_reply *out)
{
    if (rc != PT_OK) {
        pt_reply_free(out);
        memset(out, 0, sizeof *out);
        pt__intake_storage_unavailable(out, NULL, rc);
        return;
    }
    if (out->wake_on_settle && in->online.wake)
        in->online.wake(in->online.ctx);
    out->wake_on_settle = 0;
}

/*
 * store.fallback "local" (SPEC 16): the store server could not be reached
 * (PT_EIO: the connection is gone, so nothing of the request was kept
 * there), and the charge is taken into the lane's own SQLite queue instead
 * - queued, never sent from there: the sync engine moves it to the store
 * server when it answers again (fallback.c), and the order_id, unique in
 * both, keeps it one charge.  Replays of its key during the outage are
 * answered there too.
 */
int pt_intake_create_charge_locally(const struct pt_intake *in, const char *key_header,
                                    const char *body, size_t len, int64_t now, struct pt_reply *out)
{
    struct pt_intake local = pt__intake_on_the_lane(in); /* queued, never sent from here */
    memset(out, 0, sizeof *out); /* not filled yet (the API's), or freed by the caller below */
    pthread_mutex_lock(in->fallback.mu);
    int rc = create_charge(&local, in->fallback.st, key_header, body, len, now, 0, out);
    pthread_mutex_unlock(in->fallback.mu);
    if (out->status == 202 && !out->replayed)
        pt_log_warn("store server unreachable: the charge is queued in this lane's local store "
                    "and moves to the store server when it answers again");
    return rc;
}

/* Either variant, the lane's own records and queue first and last. */
static int create_anywhere(const struct pt_intake *in, struct pt_store *st, const char *key_header,
                           const char *body, size_t len, int64_t now, int nowait,
                           struct pt_reply *out)
{
    if (pt__intake_answered_locally(in, "/v1/charges", key_header, body, len, 0, now, out))
        return PT_OK;
    int rc = create_charge(in, st, key_header, body, len, now, nowait, out);
    if (rc == PT_EIO && in->fallback.st) {
        pt_reply_free(out); /* the 503 */
        rc = pt_intake_create_charge_locally(in, key_header, body, len, now, out);
    }
    return rc;
}

/* A completed or refused request under the nowait variant still answers
 * (and stores its answer) as the other does; only PT_EAGAIN differs. */
int pt_intake_create_charge(const struct pt_intake *in, struct pt_store *st, const char *key_header,
                            const char *body, size_t len, int64_t now, struct pt_reply *out)
{
    return create_anywhere(in, st, key_header, body, len, now, 0, out);
}

int pt_intake_create_charge_nowait(const struct pt_intake *in, struct pt_store *st,
                                   const char *key_header, const char *body, size_t len,
                                   int64_t now, struct pt_reply *out)
{
    return create_anywhere(in, st, key_header, body, len, now, 1, out);
}

/*
 * Reads the charge an operation on one order is about.  An unknown order is
 * answered 404 and nothing of the request is stored (the order may still be
 * created; a retry must then work): PT_ENOTFOUND with *out set.
 */
int pt__intake_find_order(struct pt_store *st, struct guard *g, const char *order_id,
                          struct pt_charge *c, struct pt_reply *out)
{
    int rc = pt_store_charge_get(st, order_id, c);
    if (rc == PT_ENOTFOUND) {
        if (!pt__intake_archived(st, "charge", order_id, out))
            pt_reply_error(out, 404, "not_found", "no charge with order_id '%s'", order_id);
        pt__intake_guard_abandon(st, g);
    }
    return rc;
}

int pt__intake_archived(struct pt_store *st, const char *kind, const char *id, struct pt_reply *out)
{
    char month[PT_ARCHIVE_MONTH_LEN];
    if (pt_store_archived_month(st, kind, id, month) != PT_OK)
        return 0; /* not archived, PostgreSQL, or unreadable: the usual answer */
    int charge = strcmp(kind, "charge") == 0;
    pt_reply_error(out, 409, charge ? "order_id_archived" : "refund_id_archived",
                   "%s '%s' belongs to a %s archived in %s (retention_days): it is never used "
                   "again, and the %s can only be read (GET)",
                   charge ? "order_id" : "refund_id", id, kind, month, kind);
    return 1;
}
