/*
 * sim.h - the gateway simulator: Alipay, WeChat Pay, Stripe and 2C2P on one
 * HTTPS port, for desktop simulation and for the tests.
 *
 * The simulator is the far side of payterm's gateway adapters.  It speaks the
 * four wire protocols of SPEC section 8 over TLS (mbedTLS), checks request
 * signatures the way each gateway does, signs its answers and notifications,
 * keeps a ledger with each gateway's idempotency rules in a small SQLite file,
 * pays QR/redirect orders by itself after a delay and notifies payterm at
 * least once (with deliberate duplicates and reordering).  Faults on demand
 * (POST /_sim/faults) produce the three failure modes of SPEC section 1, and
 * GET /_sim/ledger shows how many times money moved per order.
 *
 * `payterm sim` (firmware/cmd_sim.c) is a thin front end; tests start the
 * same server in-process with pt_sim_start() on port 0 in a temporary
 * directory and stop it with pt_sim_stop().
 *
 * Left out of board builds (CMake option PT_WITH_SIM).
 */
#ifndef PT_SIM_H
#define PT_SIM_H

#include <stddef.h>
#include <stdint.h>

#define PT_SIM_DEFAULT_NOTIFY_BASE "http://127.0.0.1:8080"

struct pt_sim_options {
    /* "HOST:PORT" to listen on ("[::1]:PORT" for IPv6).  PORT 0 picks a free
     * port; pt_sim_port() tells which. */
    const char *listen;
    /* State directory: keys, certificates, gateways.json, sim.db.  Created
     * (mode 0700) when missing; files already there are reused. */
    const char *dir;
    /* Where notifications go when a request names no notify URL (and always
     * for Stripe webhooks: <base>/webhooks/stripe).  NULL = the default above. */
    const char *notify_base;
    /* Delay before the simulated customer pays a qr/redirect order; 0 = 1000. */
    int pay_delay_ms;
    /* A kept-alive connection idle this long is closed; 0 = 30000. */
    int idle_timeout_ms;
    /* First notification retry delay (doubles per attempt, capped at 60 s);
     * 0 = 1000. */
    int notify_retry_ms;
    /* How long a Stripe Idempotency-Key is remembered; 0 = 86400 s. */
    int64_t stripe_key_ttl_s;
    /* RSA modulus size for keys made on first start; 0 = 2048. */
    int key_bits;
    /* 1: no per-request log lines (errors are still logged). */
    int quiet;
    /* 1: a 2C2P Payment Maintenance refund is answered RP (pending) and
     * becomes RF after pay_delay_ms, as 2C2P's alternative payment methods
     * refund; 0: RF at once, as cards. */
    int pm_refund_pending;
    /* WeChat Pay refuses to close an order younger than this (it documents
     * 5 minutes: 300000); 0 = closes at once, which client cancels of a
     * fresh code rely on in the tests. */
    int wechat_close_after_ms;
    /* "HH:MM": a day's bill is ready this long after the day ends, in the
     * gateway's bill time zone (China time for WeChat Pay and Alipay, UTC
     * for Stripe); before then the gateway's "not ready" answer.  NULL =
     * every bill is ready at once (SPEC 19). */
    const char *bill_ready_after;
};

struct pt_sim;

/*
 * Prepares DIR (creating keys, certificates and gateways.json on first use),
 * opens the ledger, binds the listener and starts serving in background
 * threads.  On failure returns a negative pt_err and writes a sentence naming
 * the file, address or field at fault into err (errlen bytes; err may be
 * NULL).  *out is stopped and freed with pt_sim_stop().
 */
int pt_sim_start(const struct pt_sim_options *opt, struct pt_sim **out, char *err, size_t errlen);

/* The TCP port actually bound. */
int pt_sim_port(const struct pt_sim *s);

/*
 * Graceful stop: stops accepting, lets requests in progress finish (a delay
 * fault is cut short), closes kept-alive connections with a TLS close_notify,
 * stops the notifier (undelivered notifications stay in sim.db and resume on
 * the next start), closes the ledger and frees s.  Accepts NULL.
 */
void pt_sim_stop(struct pt_sim *s);

/*
 * A platform whose wall clock is base's plus the milliseconds written in the
 * file at path (tests move the clock under a running daemon; clock.c).
 * NULL when path is NULL or empty.  One per process.
 */
struct pt_platform;
const struct pt_platform *pt_sim_test_clock(const struct pt_platform *base, const char *path);

#endif
