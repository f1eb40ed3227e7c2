/*
 * intake.h - the API's write operations, independent of any HTTP library.
 *
 * firmware/api.c parses HTTP with libmicrohttpd and hands the idempotency
 * key header and the body to these functions; they run the whole guarded
 * operation (key check, validation, business rows, stored response) against
 * the store and return the status and body to send.  Keeping this in core
 * means the outcome table of SPEC section 5 is tested without a socket.
 */
#ifndef PT_INTAKE_H
#define PT_INTAKE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "charge.h"
#include "config.h"
#include "gateway.h"
#include "idem.h"
#include "store.h"

/* What to send back. */
struct pt_reply {
    int status;
    char *body; /* malloc'd JSON; pt_reply_free */
    size_t len;
    int replayed;       /* send Idempotency-Replayed: true */
    int retry_after_s;  /* > 0: send Retry-After */
    char code[48];      /* error code, "" on success (for logs and metrics) */
    int wake_on_settle; /* its commit was deferred: wake the sync in pt_intake_settle */
};

void pt_reply_free(struct pt_reply *r);

/* Fills r with {"error":{"code":..,"message":..}}. */
void pt_reply_error(struct pt_reply *r, int status, const char *code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Fills r with the charge object. */
void pt_reply_charge(struct pt_reply *r, int status, const struct pt_charge *c);

/* What one pay request came to: the transport's verdict (PT_OK with an
 * answer, PT_ENOTSENT, PT_ENOANSWER, or a build error) and, for an answer,
 * the adapter's classification. */
struct pt_online_send {
    int verdict;
    struct pt_gw_result res;
};

/*
 * The online side, provided by the sync engine.  All optional: without them
 * every charge that may be queued is queued, and the others get 503.
 */
struct pt_online_ops {
    /* Is the gateway reachable right now (connectivity as last observed)? */
    int (*reachable)(void *ctx, const char *gateway);
    /* Ask the gateway now, without side effects (any HTTP answer = yes).
     * Used before a charge that may not wait in the queue is created, so a
     * dead link answers 503 with nothing stored. */
    int (*probe)(void *ctx, const char *gateway);
    /* The gateway is believed down: may a customer-present charge try it
     * now (SPEC 18, pt_sync_try_down)?  With *trial set, end_try follows
     * once the charge's own send has a verdict.  NULL: it is not tried. */
    int (*try_down)(void *ctx, const char *gateway, int can_wait, int *trial);
    void (*end_try)(void *ctx, const char *gateway);
    /*
     * The online charge in three steps, the transactions the intake's own
     * (docs/online-charge.md: two durable commits per charge).  claim runs
     * inside the caller's write transaction: moves the freshly created INIT
     * charge *c to PROCESSING (re-read).  send runs outside any
     * transaction: the pay request, its verdict in *out.  settle runs inside
     * the caller's next write transaction: applies *sent to *c (re-read; INIT
     * again when provably not sent).  Storage errors are returned.
     */
    int (*claim)(void *ctx, struct pt_store *st, struct pt_charge *c, int64_t now);
    void (*send)(void *ctx, const struct pt_charge *c, struct pt_online_send *out);
    int (*settle)(void *ctx, struct pt_store *st, struct pt_charge *c,
                  const struct pt_online_send *sent);
    /*
     * Cancels a PROCESSING/PENDING/UNKNOWN charge at the gateway (close,
     * cancel or reverse), committing the result.  PT_OK with *c re-read.
     */
    int (*cancel_now)(void *ctx, struct pt_store *st, struct pt_charge *c);
    /*
     * Asks the gateway again for the payment link (QR code, payment page) of
     * a PENDING/UNKNOWN charge that has none stored - its create answer was
     * lost: a repeat of the create with the same order id, committed like
     * any send.  PT_OK with *c re-read (action_url set when the gateway gave
     * one), or a storage error.
     */
    int (*payment_link)(void *ctx, struct pt_store *st, struct pt_charge *c);
    /*
     * The online refund in the same three steps (SPEC 5a): refund_claim
     * moves the fresh INIT refund *r to PROCESSING inside the caller's
     * transaction; refund_send sends it (outside any transaction);
     * refund_settle applies the verdict inside the next one (*r re-read;
     * INIT again when provably not sent).  c is its SUCCESS charge.
     */
    int (*refund_claim)(void *ctx, struct pt_store *st, struct pt_refund *r, int64_t now);
    void (*refund_send)(void *ctx, const struct pt_charge *c, const struct pt_refund *r,
                        struct pt_online_send *out);
    int (*refund_settle)(void *ctx, struct pt_store *st, const struct pt_charge *c,
                         struct pt_refund *r, const struct pt_online_send *sent);
    /*
     * The online refund of a gateway without refund keys (struct
     * pt_gateway refund_keyless, SPEC 5a: 2C2P), whose INIT the caller has
     * committed: the whole conversation - its turn (one refund of a charge
     * in flight), the gateway's list of the charge's refunds, then bound
     * to an entry or sent - each step committed by the sync engine.  *r is
     * re-read; *verdict is PT_OK, PT_EAGAIN (another refund of the charge
     * goes first: it waits in INIT) or PT_ENOTSENT / PT_ECLOCK (nothing
     * could be asked).  Storage errors are returned.
     */
    int (*refund_now)(void *ctx, struct pt_store *st, const struct pt_charge *c,
                      struct pt_refund *r, int *verdict);
    /* A reconciliation run with the gateway's bill (pt_sync_reconcile):
     * stored, its body in *body.  NULL: none. */
    int (*reconcile)(void *ctx, struct pt_store *st, const char *gateway, const char *date,
                     const char *actor, int64_t now, char **body);
    /* A charge now waits for the background sync (queued, UNKNOWN, PENDING):
     * look at the work list again. */
    void (*wake)(void *ctx);
    void *ctx;
};

/* store.fallback "local" (SPEC 16): the lane's own SQLite store, where a
 * new charge is queued while the store server cannot be reached; one
 * connection, used by one request at a time (mu). */
struct pt_intake_fallback {
    struct pt_store *st;
    pthread_mutex_t *mu;
};

struct pt_intake {
    const struct pt_config *cfg;
    struct pt_idem_options idem;
    struct pt_online_ops online;
    struct pt_intake_fallback fallback; /* st NULL: none */
};

/*
 * store.fallback "local": what the lane's own store says of order_id, the
 * charge read into *c.  PT_LOCAL_OWN: queued there during an outage and
 * not moved - the lane answers for it.  PT_LOCAL_SHADOW: being moved, or
 * canceled there before it was - the server's answer first, the lane's
 * when the server has no such order or cannot be asked.  PT_LOCAL_NONE:
 * no fallback store, not there, moved, or held for review - the server's.
 */
enum { PT_LOCAL_NONE, PT_LOCAL_OWN, PT_LOCAL_SHADOW };
int pt_intake_local_charge(const struct pt_intake *in, const char *order_id, struct pt_charge *c);

/* POST /v1/charges.  key_header may be NULL (missing).  Always fills out;
 * returns PT_OK or the storage error that made it answer 503. */
int pt_intake_create_charge(const struct pt_intake *in, struct pt_store *st, const char *key_header,
                            const char *body, size_t len, int64_t now, struct pt_reply *out);

/*
 * The same without ever waiting for the network: a replay, a refusal or a
 * charge that goes to the offline queue is answered here, while one that
 * would ask the gateway (a probe, an online send) writes nothing and
 * returns PT_EAGAIN with *out empty, for a thread that may wait to run
 * pt_intake_create_charge.  (The HTTP API answers the quick ones on its
 * polling thread.)
 */
int pt_intake_create_charge_nowait(const struct pt_intake *in, struct pt_store *st,
                                   const char *key_header, const char *body, size_t len,
                                   int64_t now, struct pt_reply *out);

/* The same, queued in in->fallback.st (the lane's own store) because the
 * store server cannot be reached (pt_intake_create_charge does this itself
 * when the server goes away in the middle of a request). */
int pt_intake_create_charge_locally(const struct pt_intake *in, const char *key_header,
                                    const char *body, size_t len, int64_t now,
                                    struct pt_reply *out);

/*
 * When st had its commit deferred (pt_store_defer_commit), the answer in
 * *out stands only once the batch is settled: rc is the batch's result
 * (pt_store_writer_flush).  On a failure *out becomes the 503
 * storage_unavailable a commit that failed in place gives (the key is
 * released: nothing of the request was kept); on success the background
 * sync is woken if the answer queued work for it.
 */
void pt_intake_settle(const struct pt_intake *in, int rc, struct pt_reply *out);

/* POST /v1/charges/{order_id}/cancel. */
int pt_intake_cancel(const struct pt_intake *in, struct pt_store *st, const char *order_id,
                     const char *key_header, const char *body, size_t len, int64_t now,
                     struct pt_reply *out);

/* ---- the day's reports (SPEC 19, core/report.h) ---- */

/* This lane's name on its reports: store.lane_id, else the host's name. */
void pt_intake_lane_name(const struct pt_intake *in, char out[PT_CFG_LANE_MAX]);
/* GET /v1/reports/x: 200 and the X report. */
int pt_intake_report_x(const struct pt_intake *in, struct pt_store *st, int64_t now,
                       struct pt_reply *out);
/* GET /v1/reports/z/{z}: 200 and the report as stored, byte for byte; 404,
 * 400 for a number that is not one. */
int pt_intake_report_z(const struct pt_intake *in, struct pt_store *st, const char *number,
                       struct pt_reply *out);
/* POST /v1/reports/z: closes the day (201 and the Z report), once per
 * Idempotency-Key; no body. */
int pt_intake_close_day(const struct pt_intake *in, struct pt_store *st, const char *key_header,
                        const char *body, size_t len, int64_t now, struct pt_reply *out);

/* ---- reconciliation (SPEC 19, core/recon_run.h) ---- */

/* GET /v1/reconciliations/{gateway}/{date}: 200 and the day's latest run
 * as stored; 404 when none ran; 400 naming a gateway or date that is not
 * one. */
int pt_intake_reconciliation(const struct pt_intake *in, struct pt_store *st, const char *gateway,
                             const char *date, struct pt_reply *out);

/* POST /v1/reconciliations {"gateway","date"}: a run with the gateway's
 * bill, once per Idempotency-Key; 201 and the run (done, pending or
 * failed), 400 naming the field. */
int pt_intake_reconcile(const struct pt_intake *in, struct pt_store *st, const char *key_header,
                        const char *body, size_t len, int64_t now, struct pt_reply *out);

/* POST /v1/charges/{order_id}/review. */
int pt_intake_review(const struct pt_intake *in, struct pt_store *st, const char *order_id,
                     const char *key_header, const char *body, size_t len, int64_t now,
                     struct pt_reply *out);

/*
 * GET /v1/charges/{order_id}/payment: the payment link of a qr/redirect
 * charge that is PENDING or UNKNOWN, {"qr_code"|"code_url"|"payment_url":..}
 * - the stored one, or fetched again when none is stored.  404 not_found for
 * an unknown order, another method or a final charge; 503
 * gateway_unavailable (Retry-After) when the gateway gave none now.  Not
 * guarded by a key: it changes nothing the client asked for.
 */
int pt_intake_payment(const struct pt_intake *in, struct pt_store *st, const char *order_id,
                      struct pt_reply *out);

/* The status code a charge in its current state is reported with
 * (201 SUCCESS, 402 FAILED, 202 not final, 200 CANCELED). */
int pt_intake_status_for(const struct pt_charge *c);

/* True when s is a valid order id: 1-64 chars of [A-Za-z0-9_.-]. */
int pt_order_id_valid(const char *s);

/*
 * POST /v1/charges/{order_id}/refunds (SPEC 5a): every outcome of the
 * table there, stored and replayed under the key rules of section 5.
 * Always fills out; returns PT_OK or the storage error behind a 503.
 */
int pt_intake_refund(const struct pt_intake *in, struct pt_store *st, const char *order_id,
                     const char *key_header, const char *body, size_t len, int64_t now,
                     struct pt_reply *out);
/* The refund object as the answer. */
void pt_reply_refund(struct pt_reply *r, int status, const struct pt_refund *rf);
/* 201 SUCCESS, 402 FAILED, 202 otherwise. */
int pt_intake_refund_status_for(const struct pt_refund *r);

#endif
