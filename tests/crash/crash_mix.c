/*
 * crash_mix.c - the work make crash cuts the power under (crash.h).
 *
 * A deterministic mix through the store as the daemon drives it (one
 * writer, group commit, a request store attached to it): new charges
 * online (a fake sync engine answers by amount, as tests/unit/test_intake.c
 * does) and offline, replays, the sync engine's transitions, gateway
 * notifications (and their duplicates), refunds online and queued, their
 * sync, a cancel, truncating checkpoints, the day's close (a Z report), a
 * reconciliation run (its bill empty: every Stripe sale of the day is
 * local_only and goes under review in the run's transaction) and, after
 * the third close, retention as it runs 400 days on (SPEC 19: what is
 * final, closed and reconciled moves to data_dir/archive/YYYY-MM.db).  Every answer the client
 * received with a stored status and every transaction whose commit returned goes to the ledger, a
 * plain file outside the faulty disk (the client's memory, which survives the terminal's power
 * cut).
 *
 * Under an I/O error the mix checks what the client is told at once: 503
 * storage_unavailable, the key released, /healthz 503 while the disk fails
 * and 200 when it works again, and the same request then succeeding.
 */
#include "crash.h"
#include "faultvfs.h"

#include "archive.h"
#include "charges.h"
#include "err.h"
#include "recon_run.h"
#include "reconcile.h"
#include "refunds.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_ORDERS 512
#define MAX_REFUNDS 256

struct order {
    char order_id[32];
    char key[32];
    char body[320];
    int64_t amount;
    enum pt_state state; /* as last acknowledged */
    int64_t refundable;
    char *answer; /* the body first answered (a replay must equal it) */
    int status;
    int archived; /* moved by retention: no more refunds or replays */
};

struct refund_rec {
    char refund_id[32];
    char order_id[32];
    enum pt_state state;
};

struct drv {
    const struct crash_run *run;
    struct pt_store_writer *w;
    struct pt_store *st;
    struct pt_config cfg;
    struct pt_intake in;
    int ledger;
    int64_t now;
    unsigned rng;
    int online;
    int n_orders, n_refunds, seq;
    struct order orders[MAX_ORDERS];
    struct refund_rec refunds[MAX_REFUNDS];
};

static struct drv D;

static void die(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    crash_fail(D.run, "mix (op %ld): %s", pt_fault_ops(), msg);
    _exit(1);
}

/* ---- the ledger -------------------------------------------------------------------- */

static void ledger(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    /* (A reconciliation's answer names every discrepancy: lines grow.) */
    char *line = n > 0 && n < CRASH_LEDGER_LINE_MAX ? malloc((size_t)n + 1) : NULL;
    if (line) {
        va_start(ap, fmt);
        vsnprintf(line, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    if (!line || write(D.ledger, line, (size_t)n) != n)
        die("cannot write the ledger");
    free(line);
}

static void ledger_answer(const char *scope, const char *key, const struct pt_reply *r)
{
    char *hex = crash_hex(r->body, r->len);
    ledger("A\t%s\t%s\t%d\t%s\n", scope, key, r->status, hex);
    free(hex);
}

/* ---- a fake sync engine (the online path of the intake) ------------------------------- */

static int fake_reachable(void *ctx, const char *gw)
{
    (void)ctx;
    (void)gw;
    return D.online;
}

/* As pt_sync_claim: PROCESSING, not picked up again until the send is over. */
static struct pt_charge_patch processing_patch(int64_t now)
{
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    p.first_sent_at = now;
    p.next_attempt_at = now + 20000;
    return p;
}

static int fake_claim(void *ctx, struct pt_store *s, struct pt_charge *c, int64_t now)
{
    (void)ctx;
    struct pt_charge_patch p = processing_patch(now);
    return pt_charge_transition(s, c, PT_STATE_PROCESSING, &p, "send", "sync", NULL, now);
}

/* Amounts ending in 51 are declined, 52 wait for the customer, 53 lose the answer. */
static void fake_send(void *ctx, const struct pt_charge *c, struct pt_online_send *out)
{
    (void)ctx;
    memset(out, 0, sizeof *out);
    out->verdict = c->amount % 100 == 53 ? PT_ENOANSWER : PT_OK;
    out->res.outcome = c->amount % 100 == 51   ? PT_OUTCOME_DECLINED
                       : c->amount % 100 == 52 ? PT_OUTCOME_PENDING
                                               : PT_OUTCOME_SUCCESS;
    out->res.amount = c->amount;
    memcpy(out->res.currency, c->currency, 4);
    snprintf(out->res.trade_no, sizeof out->res.trade_no, "pi_%s", c->order_id);
}

static enum pt_state outcome_state(const struct pt_online_send *sent)
{
    return sent->verdict == PT_ENOTSENT               ? PT_STATE_INIT
           : sent->verdict != PT_OK                   ? PT_STATE_UNKNOWN
           : sent->res.outcome == PT_OUTCOME_DECLINED ? PT_STATE_FAILED
           : sent->res.outcome == PT_OUTCOME_PENDING  ? PT_STATE_PENDING
                                                      : PT_STATE_SUCCESS;
}

static int fake_settle(void *ctx, struct pt_store *s, struct pt_charge *c,
                       const struct pt_online_send *sent)
{
    (void)ctx;
    enum pt_state to = outcome_state(sent);
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    p.gateway_trade_no = sent->res.trade_no[0] ? sent->res.trade_no : NULL;
    p.next_attempt_at = D.now + 500; /* PENDING and UNKNOWN are polled */
    if (to == PT_STATE_FAILED) {
        p.error_code = "card_declined";
        p.error_message = "declined by the issuer";
    }
    int rc = pt_charge_transition(s, c, to, &p, "answer", "sync", NULL, D.now);
    return rc == PT_EEXIST ? PT_OK : rc;
}

static int fake_refund_claim(void *ctx, struct pt_store *s, struct pt_refund *r, int64_t now)
{
    (void)ctx;
    struct pt_charge_patch p = processing_patch(now);
    return pt_refund_transition(s, r, PT_STATE_PROCESSING, &p, "send", "sync", NULL, now);
}

static void fake_refund_send(void *ctx, const struct pt_charge *c, const struct pt_refund *r,
                             struct pt_online_send *out)
{
    (void)ctx;
    (void)c;
    memset(out, 0, sizeof *out);
    out->verdict = PT_OK;
    out->res.outcome = r->amount % 100 == 51 ? PT_OUTCOME_DECLINED : PT_OUTCOME_SUCCESS;
    snprintf(out->res.trade_no, sizeof out->res.trade_no, "re_%s", r->refund_id);
}

static int fake_refund_settle(void *ctx, struct pt_store *s, const struct pt_charge *c,
                              struct pt_refund *r, const struct pt_online_send *sent)
{
    (void)ctx;
    (void)c;
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    p.gateway_trade_no = sent->res.trade_no[0] ? sent->res.trade_no : NULL;
    p.next_attempt_at = D.now + 500;
    int rc = pt_refund_transition(s, r, outcome_state(sent), &p, "answer", "sync", NULL, D.now);
    return rc == PT_EEXIST ? PT_OK : rc;
}

/* ---- storage faults: what the client is told, and the recovery ------------------------ */

/* The disk failed under the last step: /healthz must say so while it
 * fails, and 200 once it works again. */
static void disk_recovers(const char *what)
{
    if (pt_store_writable(D.st))
        die("%s: the storage failed but /healthz (pt_store_writable) would answer 200", what);
    pt_fault_clear();
    if (!pt_store_writable(D.st))
        die("%s: the disk works again but /healthz (pt_store_writable) still answers 503", what);
}

static int is_storage_503(const struct pt_reply *r)
{
    return r->status == 503 && strcmp(r->code, "storage_unavailable") == 0;
}

/* After a 503: the key is free for a retry - absent, or (an online charge
 * or refund whose first commit stood, a reconciliation whose lock was
 * committed before its download) still locked, linked to its row, which a
 * retry after lock_timeout_s recovers.  Returns 1 for the latter. */
static int key_released(const char *scope, const char *key)
{
    struct pt_key_row row = {0};
    int rc = pt_store_key_get(D.st, scope, key, &row);
    int locked = 0;
    if (rc == PT_OK && row.completed_at)
        die("key %s answered 503 storage_unavailable but its record is completed (%d)", key,
            row.response_status);
    if (rc == PT_OK) {
        /* A refund's key is linked to its refund id, a charge's to its order. */
        struct pt_charge c;
        struct pt_refund r;
        int linked =
            row.order_id[0] &&
            (strstr(scope, "/refunds") ? pt_store_refund_get(D.st, row.order_id, &r)
                                       : pt_store_charge_get(D.st, row.order_id, &c)) == PT_OK;
        /* A reconciliation's lock names no order (its run is run again). */
        if (!linked && !(strstr(scope, "/reconciliations") && !row.order_id[0]))
            die("key %s answered 503: still locked, with nothing to recover it from", key);
        locked = 1;
    } else if (rc != PT_ENOTFOUND) {
        die("key %s: cannot read it back after a 503: %s", key, pt_strerror(rc));
    }
    pt_key_row_free(&row);
    return locked;
}

typedef int (*request_fn)(const struct pt_intake *in, struct pt_store *st, const char *order,
                          const char *key, const char *body, size_t len, int64_t now,
                          struct pt_reply *out);

static int do_charge(const struct pt_intake *in, struct pt_store *st, const char *order,
                     const char *key, const char *body, size_t len, int64_t now,
                     struct pt_reply *out)
{
    (void)order;
    return pt_intake_create_charge(in, st, key, body, len, now, out);
}

/*
 * One guarded request, as a client sends it: retried with the same key
 * after a 503 storage_unavailable (which only an I/O error may cause), and
 * its answer noted in the ledger when the status is one the key stores.
 * Returns 1 when the answer came from a recovered lock (the row as the
 * failed request left it, not the gateway's outcome).
 */
static int request(request_fn fn, const char *scope, const char *order, const char *key,
                   const char *body, struct pt_reply *r)
{
    int64_t at = D.now;
    int recovered = 0;
    for (int attempt = 0;; attempt++) {
        memset(r, 0, sizeof *r);
        fn(&D.in, D.st, order, key, body, body ? strlen(body) : 0, at, r);
        int failed = pt_fault_failing();
        if (!is_storage_503(r)) {
            if (failed)
                disk_recovers(key); /* the fault met work that was not this request's */
            break;
        }
        if (!failed || attempt > 0)
            die("key %s: 503 storage_unavailable %s: %.200s", key,
                failed ? "again after the disk recovered" : "without any storage fault", r->body);
        recovered = key_released(scope, key);
        disk_recovers(key);
        pt_reply_free(r);
        /* A lock this process still holds is recovered after the timeout. */
        at += recovered ? D.in.idem.lock_timeout_ms + 1000 : 1000;
    }
    D.now = at;
    if (r->status == 200 || r->status == 201 || r->status == 202 || r->status == 402)
        ledger_answer(scope, key, r);
    return recovered;
}

/*
 * A transaction of the sync engine: fn runs inside it (re-reading what it
 * changes), and under an I/O error it is retried once the disk recovers,
 * as the drain's next pass would.  Returns fn's own verdict.
 */
static int txn(int (*fn)(void *arg), void *arg, const char *what)
{
    for (int attempt = 0;; attempt++) {
        int rc = pt_store_begin(D.st), res = 0;
        if (rc == PT_OK) {
            res = fn(arg);
            rc = res < 0 ? res : PT_OK;
            if (rc == PT_OK)
                rc = pt_store_commit(D.st);
            else
                pt_store_rollback(D.st);
        }
        if (rc == PT_OK) {
            if (pt_fault_failing())
                disk_recovers(what);
            return res;
        }
        if (!pt_fault_failing() || attempt > 0)
            die("%s: %s %s", what, pt_strerror(rc),
                pt_fault_failing() ? "" : "without any storage fault");
        disk_recovers(what);
    }
}

/* ---- the steps ------------------------------------------------------------------------ */

static struct order *new_order(void)
{
    if (D.n_orders == MAX_ORDERS)
        die("too many orders");
    struct order *o = &D.orders[D.n_orders++];
    memset(o, 0, sizeof *o);
    snprintf(o->order_id, sizeof o->order_id, "O-%u-%d", D.run->seed, D.seq);
    snprintf(o->key, sizeof o->key, "k-%d", D.seq);
    D.seq++;
    return o;
}

static enum pt_state reply_state(const struct pt_reply *r)
{
    const char *s = strstr(r->body ? r->body : "", "\"state\":\"");
    enum pt_state st = PT_STATE_INIT;
    char name[16] = "";
    if (s)
        sscanf(s + 9, "%15[A-Z]", name);
    if (!name[0] || pt_state_parse(name, &st) != PT_OK)
        die("answer without a state: %.200s", r->body ? r->body : "");
    return st;
}

static void charge(int online, const char *gateway, int64_t amount)
{
    struct order *o = new_order();
    o->amount = amount;
    int alipay = strcmp(gateway, "alipay") == 0;
    char id[sizeof o->order_id];
    memcpy(id, o->order_id, sizeof id);
    snprintf(o->body, sizeof o->body,
             "{\"order_id\":\"%s\",\"amount\":%lld,\"currency\":\"%s\",\"gateway\":\"%s\","
             "\"method\":\"%s\",%s\"subject\":\"crash mix\"}",
             id, (long long)amount, alipay ? "CNY" : "USD", gateway,
             alipay ? "barcode" : "card_on_file",
             alipay ? "\"payment_code\":\"287634438256643941\",\"offline\":\"force_offline\","
                    : "\"payment_method\":\"pm_card_visa\",");
    D.online = online;
    struct pt_reply r;
    int recovered = request(do_charge, "POST /v1/charges", o->order_id, o->key, o->body, &r);
    D.online = 0;
    int want = !online ? 202 : amount % 100 == 51 ? 402 : amount % 100 >= 52 ? 202 : 201;
    /* A recovered lock answers with the charge as the first commit left it. */
    if (recovered && r.status == 202)
        want = 202;
    if (r.status != want)
        die("charge %s: %d instead of %d: %.300s", o->order_id, r.status, want, r.body);
    o->state = reply_state(&r);
    o->refundable = o->state == PT_STATE_SUCCESS ? amount : 0;
    o->status = r.status;
    o->answer = r.body; /* kept for the replays */
}

/* The same request again: the stored answer, byte for byte. */
static void replay(struct order *o)
{
    struct pt_reply r;
    request(do_charge, "POST /v1/charges", o->order_id, o->key, o->body, &r);
    if (r.status != o->status || !r.replayed || strcmp(r.body, o->answer) != 0)
        die("replay of %s: %d%s %.200s, first answered %d %.200s", o->key, r.status,
            r.replayed ? " (replayed)" : "", r.body, o->status, o->answer);
    pt_reply_free(&r);
}

struct move {
    struct order *o;
    enum pt_state from, to;
    const char *cause;
};

/* The sync engine's conditional transition of one charge. */
static int move_fn(void *arg)
{
    struct move *m = arg;
    struct pt_charge c;
    int rc = pt_store_charge_get(D.st, m->o->order_id, &c);
    if (rc)
        return rc;
    if (c.state != m->from)
        return c.state == m->to ? 0 : PT_ESTATE;
    struct pt_charge_patch p = m->to == PT_STATE_PROCESSING
                                   ? processing_patch(D.now)
                                   : (struct pt_charge_patch)PT_CHARGE_PATCH_NONE;
    if (m->to == PT_STATE_SUCCESS)
        p.gateway_trade_no = "pi_synced";
    rc = pt_charge_transition(D.st, &c, m->to, &p, m->cause, "sync", NULL, D.now);
    return rc == PT_EEXIST ? 0 : rc;
}

static void move(struct order *o, enum pt_state from, enum pt_state to, const char *cause)
{
    struct move m = {o, from, to, cause};
    int rc = txn(move_fn, &m, o->order_id);
    if (rc)
        die("%s %s -> %s: %s", o->order_id, pt_state_name(from), pt_state_name(to),
            pt_strerror(rc));
    o->state = to;
    if (to == PT_STATE_SUCCESS)
        o->refundable = o->amount;
    ledger("C\t%s\t%s\n", o->order_id, pt_state_name(to));
}

static struct order *find_state(enum pt_state s, int nth)
{
    for (int i = 0; i < D.n_orders; i++)
        if (D.orders[i].state == s && nth-- == 0)
            return &D.orders[i];
    return NULL;
}

/* A queued charge sent by the sync engine and paid. */
static void sync_one(void)
{
    struct order *o = find_state(PT_STATE_INIT, 0);
    if (!o)
        return;
    move(o, PT_STATE_INIT, PT_STATE_PROCESSING, "send");
    D.now += 300;
    move(o, PT_STATE_PROCESSING, PT_STATE_SUCCESS, "answer");
}

/* A gateway notification: recorded and applied in one transaction. */
static int notify_fn(void *arg)
{
    struct order *o = arg;
    char dedup[48];
    snprintf(dedup, sizeof dedup, "evt_%s", o->order_id);
    int rc = pt_store_notification_insert(D.st, "stripe", dedup, o->order_id, "succeeded",
                                          "applied", D.now);
    if (rc == PT_EEXIST)
        return 1; /* a duplicate: acknowledged, changes nothing */
    struct pt_charge c;
    if (rc || (rc = pt_store_charge_get(D.st, o->order_id, &c)))
        return rc;
    struct pt_charge_patch p = PT_CHARGE_PATCH_NONE;
    rc = pt_charge_gateway_succeeded(D.st, &c, &p, "notify:stripe", NULL, D.now);
    return rc == PT_EEXIST ? 0 : rc;
}

static void notify_one(void)
{
    struct order *o = find_state(PT_STATE_PENDING, 0);
    if (!o)
        return;
    if (txn(notify_fn, o, o->order_id) != 0)
        die("notification of %s taken as a duplicate the first time", o->order_id);
    o->state = PT_STATE_SUCCESS;
    o->refundable = o->amount;
    ledger("N\tstripe\tevt_%s\t%s\n", o->order_id, o->order_id);
    /* The gateway sends it again. */
    if (txn(notify_fn, o, o->order_id) != 1)
        die("the duplicate notification of %s was applied", o->order_id);
}

/* An UNKNOWN charge resolved by a query. */
static void resolve_one(void)
{
    struct order *o = find_state(PT_STATE_UNKNOWN, 0);
    if (o)
        move(o, PT_STATE_UNKNOWN, PT_STATE_SUCCESS, "query");
}

static int do_refund(const struct pt_intake *in, struct pt_store *st, const char *order,
                     const char *key, const char *body, size_t len, int64_t now,
                     struct pt_reply *out)
{
    return pt_intake_refund(in, st, order, key, body, len, now, out);
}

static int do_cancel(const struct pt_intake *in, struct pt_store *st, const char *order,
                     const char *key, const char *body, size_t len, int64_t now,
                     struct pt_reply *out)
{
    return pt_intake_cancel(in, st, order, key, body, len, now, out);
}

static void refund(int online, int64_t amount)
{
    struct order *o = NULL;
    for (int i = 0; i < D.n_orders && !o; i++)
        if (D.orders[i].state == PT_STATE_SUCCESS && D.orders[i].refundable >= amount &&
            !D.orders[i].archived)
            o = &D.orders[i];
    if (!o || D.n_refunds == MAX_REFUNDS)
        return;
    struct refund_rec *rf = &D.refunds[D.n_refunds++];
    snprintf(rf->refund_id, sizeof rf->refund_id, "R-%u-%d", D.run->seed, D.seq);
    memcpy(rf->order_id, o->order_id, sizeof rf->order_id);
    char key[32], scope[128], body[160];
    snprintf(key, sizeof key, "rk-%d", D.seq++);
    snprintf(scope, sizeof scope, "POST /v1/charges/%s/refunds", o->order_id);
    snprintf(body, sizeof body, "{\"refund_id\":\"%s\",\"amount\":%lld,\"reason\":\"returned\"}",
             rf->refund_id, (long long)amount);
    D.online = online;
    struct pt_reply r;
    int recovered = request(do_refund, scope, o->order_id, key, body, &r);
    D.online = 0;
    int want = online && !recovered ? 201 : 202;
    if (r.status != want)
        die("refund %s: %d instead of %d: %.300s", rf->refund_id, r.status, want, r.body);
    rf->state = reply_state(&r);
    o->refundable -= amount;
    pt_reply_free(&r);
    /* One more than is left: refused, and nothing stored that says otherwise. */
    snprintf(key, sizeof key, "rk-%d", D.seq++);
    snprintf(body, sizeof body, "{\"refund_id\":\"R-%u-x%d\",\"amount\":%lld}", D.run->seed, D.seq,
             (long long)o->refundable + 1);
    request(do_refund, scope, o->order_id, key, body, &r);
    if (r.status != 409)
        die("refund over what is left of %s: %d %.200s", o->order_id, r.status, r.body);
    pt_reply_free(&r);
}

struct rmove {
    struct refund_rec *rf;
    enum pt_state from, to;
};

static int rmove_fn(void *arg)
{
    struct rmove *m = arg;
    struct pt_refund r;
    int rc = pt_store_refund_get(D.st, m->rf->refund_id, &r);
    if (rc)
        return rc;
    if (r.state != m->from)
        return r.state == m->to ? 0 : PT_ESTATE;
    struct pt_charge_patch p = m->to == PT_STATE_PROCESSING
                                   ? processing_patch(D.now)
                                   : (struct pt_charge_patch)PT_CHARGE_PATCH_NONE;
    rc = pt_refund_transition(D.st, &r, m->to, &p, "sync", "sync", NULL, D.now);
    return rc == PT_EEXIST ? 0 : rc;
}

static void refund_sync_one(void)
{
    struct refund_rec *rf = NULL;
    for (int i = 0; i < D.n_refunds && !rf; i++)
        if (D.refunds[i].state == PT_STATE_INIT)
            rf = &D.refunds[i];
    if (!rf)
        return;
    static const enum pt_state path[] = {PT_STATE_INIT, PT_STATE_PROCESSING, PT_STATE_SUCCESS};
    for (int i = 0; i < 2; i++) {
        struct rmove m = {rf, path[i], path[i + 1]};
        int rc = txn(rmove_fn, &m, rf->refund_id);
        if (rc)
            die("refund %s -> %s: %s", rf->refund_id, pt_state_name(path[i + 1]), pt_strerror(rc));
        rf->state = path[i + 1];
        ledger("R\t%s\t%s\n", rf->refund_id, pt_state_name(rf->state));
        D.now += 200;
    }
}

/* A queued charge canceled by the client (charge.canceled). */
static void cancel_one(void)
{
    struct order *o = find_state(PT_STATE_INIT, 1);
    if (!o)
        return;
    char key[32], scope[128];
    snprintf(key, sizeof key, "ck-%d", D.seq++);
    snprintf(scope, sizeof scope, "POST /v1/charges/%s/cancel", o->order_id);
    struct pt_reply r;
    request(do_cancel, scope, o->order_id, key, NULL, &r);
    if (r.status != 200)
        die("cancel of %s: %d %.200s", o->order_id, r.status, r.body);
    o->state = PT_STATE_CANCELED;
    pt_reply_free(&r);
}

/* What the daemon's background thread does after erasing payment codes:
 * the WAL copied into the database and truncated. */
static int do_close(const struct pt_intake *in, struct pt_store *st, const char *order,
                    const char *key, const char *body, size_t len, int64_t now,
                    struct pt_reply *out)
{
    (void)order;
    return pt_intake_close_day(in, st, key, body, len, now, out);
}

/* The day closed, as an operator does at the till. */
static void close_day(void)
{
    char scope[PT_CFG_LANE_MAX + 32], key[32], lane[PT_CFG_LANE_MAX];
    pt_intake_lane_name(&D.in, lane);
    snprintf(scope, sizeof scope, "POST /v1/reports/z lane=%s", lane);
    snprintf(key, sizeof key, "close-%d", D.seq++);
    struct pt_reply r;
    request(do_close, scope, NULL, key, NULL, &r);
    pt_reply_free(&r);
}

/* The gateway's side of the day as the fake engine downloads it: nothing,
 * so every local sale of the day is a discrepancy (and its review). */
static int fake_reconcile(void *ctx, struct pt_store *st, const char *gateway, const char *date,
                          const char *actor, int64_t now, char **run)
{
    (void)ctx;
    struct pt_recon_bill bill = {.rows = NULL, .n = 0, .source = "download"};
    size_t found = 0;
    return pt_recon_run(st, gateway, date, &bill, actor, now, run, &found);
}

static int do_reconcile(const struct pt_intake *in, struct pt_store *st, const char *order,
                        const char *key, const char *body, size_t len, int64_t now,
                        struct pt_reply *out)
{
    (void)order;
    return pt_intake_reconcile(in, st, key, body, len, now, out);
}

static void reconcile(void)
{
    char key[32], date[11], body[64];
    pt_recon_date_of(D.now, 0, date);
    snprintf(key, sizeof key, "recon-%d", D.seq++);
    snprintf(body, sizeof body, "{\"gateway\":\"stripe\",\"date\":\"%s\"}", date);
    struct pt_reply r;
    request(do_reconcile, "POST /v1/reconciliations", NULL, key, body, &r);
    pt_reply_free(&r);
}

/* The daily reconciliation of the mix's day, run after the day ended and
 * finding nothing: what it reconciles may move. */
static int runs_fn(void *arg)
{
    (void)arg;
    char date[11];
    int64_t later = D.now + 3 * 86400000LL;
    pt_recon_date_of(D.now, 0, date);
    int rc = pt_store_recon_insert(D.st, "stripe", date, "done", "{\"state\":\"done\"}", later);
    pt_recon_date_of(D.now, 8 * 60, date);
    if (rc == PT_OK)
        rc = pt_store_recon_insert(D.st, "alipay", date, "done", "{\"state\":\"done\"}", later);
    return rc;
}

/* Retention as the sync thread runs it once a day, here 400 days on: the
 * power may go in the archive's copy, between it and the removal, or in
 * the removal.  What left the live database is marked, for the steps that
 * would refund or replay it. */
static void retain(void)
{
    txn(runs_fn, NULL, "reconciliation runs");
    struct pt_config cfg = D.cfg;
    snprintf(cfg.data_dir, sizeof cfg.data_dir, "%s", D.run->db);
    char *slash = strrchr(cfg.data_dir, '/');
    if (slash)
        *slash = '\0';
    cfg.retention_days = 400;
    struct pt_archive_result res;
    int rc = pt_archive_run(D.st, &cfg, D.now + 404 * 86400000LL, &res);
    if (rc && !pt_fault_failing())
        die("retention: %s without any storage fault", pt_strerror(rc));
    if (pt_fault_failing())
        disk_recovers("retention");
    /* The standard mix has sales to move (FAILED, CANCELED, unreviewed
     * Alipay ones): a pass that moves none tests nothing. */
    if (D.run->mode == PT_FAULT_NONE && !D.run->seed && rc == PT_OK && res.moved < 3)
        die("retention moved %lld charges: the mix no longer reaches it", (long long)res.moved);
    ledger("M\t%lld\n", (long long)(rc == PT_OK ? res.moved : -1));
    for (int i = 0; i < D.n_orders; i++) {
        struct pt_charge c;
        if (!D.orders[i].archived &&
            pt_store_charge_get(D.st, D.orders[i].order_id, &c) == PT_ENOTFOUND)
            D.orders[i].archived = 1;
    }
}

static void checkpoint(void)
{
    int rc = pt_store_checkpoint_truncate(D.st);
    if (rc && rc != PT_EBUSY && !pt_fault_failing())
        die("checkpoint: %s without any storage fault", pt_strerror(rc));
    if (pt_fault_failing())
        disk_recovers("checkpoint");
}

static unsigned next_rand(void)
{
    D.rng = D.rng * 1103515245u + 12345u;
    return (D.rng >> 16) & 0x7fff;
}

/* One step of the mix; seed 0 walks the kinds in order, other seeds draw. */
static void step(int i)
{
    int kind = D.run->seed ? (int)(next_rand() % 12) : i % 12;
    int64_t base = 1000 + 100 * (int64_t)(i % 50);
    ledger("T\t%lld\n", (long long)D.now);
    switch (kind) {
    case 0:
        charge(0, "stripe", 100 + i);
        break;
    case 1:
        charge(1, "stripe", base);
        break;
    case 2:
        charge(1, "stripe", base + 51);
        break;
    case 3:
        charge(1, "stripe", base + 52);
        break;
    case 4:
        charge(1, "stripe", base + 53);
        break;
    case 5:
        if (D.n_orders && !D.orders[(i * 7) % D.n_orders].archived)
            replay(&D.orders[(i * 7) % D.n_orders]);
        charge(0, "alipay", 200 + i);
        break;
    case 6:
        sync_one();
        break;
    case 7:
        notify_one();
        resolve_one();
        break;
    case 8:
        refund(1, 100);
        refund(0, 50);
        break;
    case 9:
        refund_sync_one();
        cancel_one();
        break;
    case 10:
        sync_one();
        charge(0, "stripe", 300 + i);
        if ((i / 12) % 2 == 0)
            close_day();
        else
            reconcile();
        if (i / 12 == 4)
            retain();
        break;
    default:
        checkpoint();
        break;
    }
    D.now += 1000;
}

static void setup(const struct crash_run *run)
{
    memset(&D, 0, sizeof D);
    D.run = run;
    D.now = CRASH_T0;
    D.rng = run->seed;
    pt_config_defaults(&D.cfg);
    crash_config(&D.cfg);
    D.in = (struct pt_intake){.cfg = &D.cfg, .idem = crash_idem(7)};
    D.in.online = (struct pt_online_ops){.reachable = fake_reachable,
                                         .claim = fake_claim,
                                         .send = fake_send,
                                         .settle = fake_settle,
                                         .refund_claim = fake_refund_claim,
                                         .refund_send = fake_refund_send,
                                         .refund_settle = fake_refund_settle,
                                         .reconcile = fake_reconcile};
    D.ledger = open(run->ledger, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (D.ledger < 0)
        die("cannot create %s", run->ledger);
    char err[512];
    /* PT_CRASH_SYNC_NORMAL=1: commits not synced (what make crash must
     * catch - the harness's own test, docs/crash.md). */
    struct pt_store_options o = {.path = run->db,
                                 .no_wal_vfs = run->no_wal_vfs,
                                 .synchronous_normal = getenv("PT_CRASH_SYNC_NORMAL") != NULL};
    if (pt_store_writer_new(&o, &D.w, err, sizeof err) != PT_OK ||
        pt_store_open(&o, &D.st, err, sizeof err) != PT_OK)
        die("open: %s", err);
    pt_store_attach(D.st, D.w);
}

void crash_mix(const struct crash_run *run)
{
    pt_fault_install();
    pt_fault_arm(run->mode, run->at, run->enospc);
    setup(run);
    for (int i = 0; i < run->steps; i++)
        step(i);
    ledger("E\t%lld\n", (long long)D.now);
}
