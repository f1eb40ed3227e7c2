/*
 * sim_int.h - what the simulator's files share (not for use outside
 * platform/sim).
 *
 * sim.c        server: listener, one thread per TLS connection, HTTP/1.1
 *              keep-alive, routing, faults, the /_sim control endpoints
 * sim_files.c  DIR: CA, server certificate, gateway and merchant keys,
 *              secrets, gateways.json
 * sim_ledger.c the SQLite ledger (trades, refunds, Stripe keys, notification
 *              outbox)
 * sim_refund.c the refund rules every gateway shares: one refund per key,
 *              never more than is left
 * sim_notify.c the scheduler thread: the simulated customer paying QR and
 *              redirect orders, asynchronous refunds completing, and
 *              notification delivery with retries
 * sim_util.c   HTTP message helpers, URL decoding, ids, clocks
 * sim_<gw>.c   one file per gateway's wire protocol, one table each
 *              (sim_wechat_v2.c: WeChat Pay's APIv2 payment-code routes,
 *              served through the WeChat table)
 *
 * Locking: one mutex, pt_sim.lk, guards the ledger, the fault table, the
 * connection list and the outbox, and is the mutex of the scheduler's
 * condition variable.  Handlers hold it only around their ledger logic, never
 * across network I/O, crypto-heavy work they can do first, or a delay fault.
 */
#ifndef PT_SIM_INT_H
#define PT_SIM_INT_H

#include "money.h"
#include "sim.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>

struct pt_pk;
struct pt_drbg;
struct sqlite3;
struct sqlite3_stmt;

#define SIM_HEAD_MAX (16 * 1024)  /* request line + headers */
#define SIM_BODY_MAX (256 * 1024) /* request body */
#define SIM_MAX_HEADERS 48
#define SIM_MAX_CONNS 128
#define SIM_MAX_FAULTS 16
#define SIM_MAX_WX_CERTS 8 /* WeChat platform certificates: the first and 7 rotations */
#define SIM_MAX_INFLIGHT 256
#define SIM_RESP_HEADERS 12
#define SIM_NOTE_MAX_ATTEMPTS 25
#define SIM_PATH_MAX 512
#define SIM_EXTRA_MAX 4096
#define SIM_MAX_STMTS 40

enum sim_gw {
    SIM_GW_ANY = -1,
    SIM_GW_ALIPAY = 0,
    SIM_GW_WECHAT,
    SIM_GW_STRIPE,
    SIM_GW_2C2P,
    SIM_GW__COUNT
};

enum sim_fault_mode {
    SIM_FAULT_NONE = 0,
    SIM_FAULT_REFUSE_CONNECT,
    SIM_FAULT_FAIL_BEFORE_COMMIT,
    SIM_FAULT_DROP_AFTER_COMMIT,
    SIM_FAULT_HTTP_500_AFTER_COMMIT,
    SIM_FAULT_DELAY,
};

struct sim_fault {
    int gw; /* SIM_GW_ANY for "*" */
    enum sim_fault_mode mode;
    int count; /* requests (connections for refuse_connect) left; -1 = until cleared */
    int delay_ms;
    char method[8]; /* only requests with this HTTP method; "" = any */
    char path[64];  /* only requests whose path starts so; "" = any */
    /* Only 2C2P Payment Maintenance requests of this processType (R, RS,
     * I); "" = any.  Known only once the request is decrypted, so such a
     * fault is taken by the handler (pt__sim_fault_for), not by serve(). */
    char process_type[4];
};

/* The client certificate a connection presented in its TLS handshake. */
enum sim_client_cert {
    SIM_CERT_NONE = 0, /* none */
    SIM_CERT_MERCHANT, /* the WeChat merchant API certificate the simulator issued */
    SIM_CERT_OTHER,    /* another one, or one that did not verify against the CA */
};

/* One parsed request.  Header names/values point into head. */
struct sim_req {
    char method[8];
    char target[2048]; /* request-target exactly as sent (path + '?' + query) */
    char path[2048];   /* target up to '?' */
    const char *query; /* into target after '?', or "" */
    int nheaders;
    struct {
        const char *name, *value;
    } h[SIM_MAX_HEADERS];
    char head[SIM_HEAD_MAX + 1];
    char *body; /* NUL-terminated, malloc'd */
    size_t body_len;
    int gw;                           /* from the path; SIM_GW_ANY for /_sim and unknown paths */
    enum sim_client_cert client_cert; /* of the connection it came on */
};

struct sim_resp {
    int status;
    char ctype[64];
    char hdr[SIM_RESP_HEADERS][768]; /* extra "Name: value" lines */
    int nhdr;
    char *body; /* malloc'd */
    size_t body_len;
    int drop;       /* close the connection without answering */
    char note[200]; /* summary for the request log line (no secrets) */
};

/* The fault riding on one gateway request, and whether its handler reached
 * the point where it writes to the ledger. */
struct sim_call {
    struct pt_sim *s;
    int gw;
    const char *path;
    enum sim_fault_mode mode;
    int delay_ms;
    int gated;
};

/* Identities and keys of the four simulated gateways and their merchant. */
struct sim_keys {
    mbedtls_x509_crt srv_cert; /* server certificate + CA, for TLS */
    mbedtls_pk_context srv_key;
    mbedtls_x509_crt client_ca;            /* ca.pem: verifies client certificates */
    mbedtls_x509_crt wechat_apiclient_crt; /* the merchant API certificate (mutual TLS) */
    struct pt_pk *alipay_key;              /* the simulated Alipay's private key */
    struct pt_pk *alipay_app_pub;          /* merchant app public key */
    struct pt_pk *wechat_platform_key;     /* the first platform key, the one gateways.json names */
    char wechat_platform_serial[64];
    /* Every WeChat platform certificate issued, oldest first ([0] is the
     * one above); the last is current: answers and notifications are signed
     * with it (POST /_sim/rotate appends one).  Entries are filled before
     * wechat_ncerts counts them and freed only at shutdown, so a signer
     * reads the current one without a lock. */
    struct sim_wx_cert {
        char serial[64];
        struct pt_pk *key;
        char *pem; /* the certificate, for GET /v3/certificates */
    } wechat_certs[SIM_MAX_WX_CERTS];
    atomic_int wechat_ncerts;
    struct pt_pk *wechat_merchant_cert;
    char wechat_merchant_serial[64];
    unsigned char wechat_apiv3_key[32];
    char wechat_apiv2_key[33]; /* 32 characters; its bytes are the HMAC key */
    char stripe_secret[128];
    char stripe_whsec[128];
    char c2p_secret[128];
    /* 2C2P Payment Maintenance (refunds): 2C2P's own key (signs answers,
     * decrypts requests) and the merchant's public key (verifies requests,
     * answers are encrypted to it). */
    struct pt_pk *c2p_pm_key;
    struct pt_pk *c2p_pm_merchant_pub;
    char alipay_app_id[32];
    char wechat_mchid[32];
    char wechat_appid[32];
    char c2p_merchant_id[32];
};

struct sim_conn;

struct pt_sim {
    char dir[SIM_PATH_MAX];
    char notify_base[256];
    char listen_host[256];
    int port;
    char gw_host[SIM_GW__COUNT][300]; /* host each gateway's endpoint names */
    int pay_delay_ms, idle_timeout_ms, notify_retry_ms, key_bits, quiet;
    int pm_refund_pending;     /* 2C2P refunds answer RP first, RF after the pay delay */
    int wechat_close_after_ms; /* see pt_sim_options */
    int bill_ready_min;        /* --bill-ready-after in minutes; -1 = at once */
    int64_t stripe_key_ttl_ms;

    int listen_fd;
    int stop_pipe[2];
    pthread_t listener, scheduler;
    int listener_started, scheduler_started;

    pthread_mutex_t lk;
    pthread_cond_t cond;       /* scheduler: new work or stop */
    pthread_cond_t conns_cond; /* a connection thread ended */
    int stopping;
    struct sim_conn *conns;
    int nconns;
    struct sim_fault faults[SIM_MAX_FAULTS];
    int nfaults;
    char inflight[SIM_MAX_INFLIGHT][256]; /* Stripe keys being executed */
    int ninflight;
    struct sqlite3 *db;
    struct {
        const char *sql;
        struct sqlite3_stmt *st;
    } stmts[SIM_MAX_STMTS]; /* prepared statements, kept (sim_ledger.c) */
    int nstmts;

    /* How far POST /_sim/clock moved the gateways' time forward (ms). */
    _Atomic int64_t advance_ms;

    struct pt_drbg *drbg; /* TLS, key generation, identifiers (thread-safe) */
    mbedtls_ssl_config tls;
    struct sim_keys k;
};

/* A trade (Stripe: a PaymentIntent) as the ledger keeps it. */
struct sim_trade {
    int64_t id;
    int gw;
    char order_id[65];
    char trade_no[65];
    char method[16];
    int64_t amount;
    char currency[4];
    char status[12]; /* pending | captured | declined | canceled */
    int captures;    /* times money moved for this trade */
    char params_hash[65];
    char extra[SIM_EXTRA_MAX]; /* gateway-specific JSON object text */
    int64_t pay_at;            /* ms; when the simulated customer pays; 0 = never */
    int64_t created_at, updated_at, paid_at;
};

/*
 * A refund as the ledger keeps it.  (gw, scope, refund_key) is unique: the
 * key is the client's refund key (Alipay out_request_no, unique per trade,
 * so scope is the trade's order id; WeChat out_refund_no, unique per
 * merchant, scope ""), or for Stripe the refund's own re_ id, because Stripe
 * deduplicates by Idempotency-Key only (two keys make two refunds, which the
 * ledger must show), and for 2C2P its own refundReferenceNo, because a 2C2P
 * refund request has no key at all (each request is a refund).
 */
struct sim_refund {
    int64_t id;
    int gw;
    char scope[65];
    char refund_key[257];
    char refund_no[65]; /* the gateway's refund number */
    int64_t trade_id;
    char order_id[65];
    char trade_no[65];
    int64_t amount; /* minor units, > 0 */
    char currency[4];
    char status[12]; /* processing | succeeded */
    char params_hash[65];
    char extra[SIM_EXTRA_MAX]; /* gateway-specific JSON object text */
    int64_t settle_at;         /* ms; when a processing refund succeeds; 0 = not scheduled */
    int64_t created_at, updated_at, succeeded_at;
};

/* What pt__sim_refund_take() decided. */
enum sim_refund_rc {
    SIM_REFUND_NEW = 0,  /* executed now */
    SIM_REFUND_REPLAY,   /* the key's refund, with the same parameters: *r is it */
    SIM_REFUND_CONFLICT, /* the key's refund, other parameters or another trade: *r is it */
    SIM_REFUND_NOT_PAID, /* the trade has not been paid (or was reversed) */
    SIM_REFUND_EXCEEDS,  /* more than is left (*left) */
    SIM_REFUND_ERROR,    /* ledger error */
};

/* A notification in the outbox. */
struct sim_note {
    int64_t id;
    int gw;
    char order_id[65];
    char kind[48];
    char url[512];
    char ctype[64];
    char *body; /* malloc'd */
    size_t body_len;
    int64_t due_at;
    int attempts;
    int delivered;
    int duplicate;
    char last_error[160];
};

/* Stripe idempotency record. */
struct sim_idem {
    char key[256];
    char hash[65];
    int status;
    char *body; /* malloc'd */
    int64_t created_at;
};

/* One gateway's protocol. */
struct sim_gateway {
    const char *name;
    /* Answers one request (sets rs); calls pt__sim_commit_gate() before its
     * first ledger write and gives up (rs->drop) when that says so. */
    void (*handle)(struct sim_call *c, const struct sim_req *rq, struct sim_resp *rs);
    /* The simulated customer pays (or fails to pay) pending trade t; lk held. */
    void (*autopay)(struct pt_sim *s, struct sim_trade *t);
    /* Extra header lines for one delivery of n (signed per attempt), or NULL. */
    int (*note_headers)(struct pt_sim *s, const struct sim_note *n, char hdr[][768], int *nhdr);
    /* True when (status, body) is the gateway's exact "received" reply. */
    int (*note_ok)(int status, const char *body, size_t len);
    /* The answer of http_500_after_commit. */
    void (*error_500)(struct pt_sim *s, struct sim_resp *rs);
    /* A processing refund r completes (lk held, r->settle_at due): the
     * gateway marks it succeeded and notifies.  NULL: the gateway's refunds
     * are synchronous and never processing. */
    void (*refund_settle)(struct pt_sim *s, struct sim_refund *r);
};

extern const struct sim_gateway pt__sim_alipay, pt__sim_wechat, pt__sim_stripe, pt__sim_2c2p;

/* ---- sim_wechat_v2.c: WeChat Pay APIv2 (payment code), part of "wechat" ---- */
/* True for the APIv2 paths (/pay/..., /secapi/...). */
int pt__sim_wechat_v2_path(const char *path);
/* The trade bill of date (YYYY-MM-DD, China time) and bill_type (NULL =
 * ALL) from the ledger, as sim_wechat.c serves it: *text malloc'd (lines
 * end "\n").  PT_OK, PT_ENOTFOUND (no trade that day), PT_EAGAIN (not
 * ready), PT_EPARSE (date or type), PT_ENOMEM.  Takes the lock. */
int pt__sim_wechat_bill(struct pt_sim *s, const char *date, const char *type, char **text,
                        size_t *len, int64_t *rows);
/* Answers one APIv2 request (signed XML), like sim_gateway.handle. */
void pt__sim_wechat_v2_handle(struct sim_call *c, const struct sim_req *rq, struct sim_resp *rs);
/* The customer of a USERPAYING trade confirms (lk held): captured. */
void pt__sim_wechat_v2_confirm(struct pt_sim *s, struct sim_trade *t);
/* True when rs is an APIv2 answer (then error_500 answers in XML too). */
int pt__sim_wechat_v2_is_answer(const struct sim_resp *rs);
/* The answer of http_500_after_commit on an APIv2 route. */
void pt__sim_wechat_v2_error_500(struct pt_sim *s, struct sim_resp *rs);
const struct sim_gateway *pt__sim_gateway(int gw);
const char *pt__sim_gw_name(int gw);
int pt__sim_gw_parse(const char *name); /* SIM_GW_ANY for "*", -2 when unknown */

/* ---- sim.c ---- */
/* Takes lk and opens a ledger transaction; unlock commits it and releases. */
void pt__sim_lock(struct pt_sim *s);
void pt__sim_unlock(struct pt_sim *s);
/* The commit point of a gateway handler: sleeps for a delay fault, and
 * returns -1 with rs->drop set when a fail_before_commit fault says to drop
 * the request before anything is recorded (the handler then returns). */
int pt__sim_commit_gate(struct sim_call *c, struct sim_resp *rs);
/* A fault narrowed to a Payment Maintenance processType, taken once the
 * handler has read the request (unless serve() already took one). */
void pt__sim_fault_for(struct sim_call *c, const char *process_type);
int pt__sim_random(struct pt_sim *s, void *buf, size_t len);

/* ---- sim_files.c ---- */
int pt__sim_files_prepare(struct pt_sim *s, char *err, size_t errlen);
/* POST /_sim/rotate {"gateway":"wechat"}: a new WeChat platform key and
 * certificate (new serial), written into DIR beside the first one and
 * current from now on.  PT_OK with the serial in serial, or an error in
 * err (PT_ETOOBIG after SIM_MAX_WX_CERTS). */
int pt__sim_wechat_rotate(struct pt_sim *s, char *serial, size_t serial_len, char *err,
                          size_t errlen);
void pt__sim_files_free(struct pt_sim *s);

/* ---- sim_ledger.c (caller holds lk) ---- */
int pt__sim_db_open(struct pt_sim *s, char *err, size_t errlen);
void pt__sim_db_close(struct pt_sim *s);
/* One transaction around a handler's ledger work (called by pt__sim_lock/unlock). */
void pt__sim_db_begin(struct pt_sim *s);
void pt__sim_db_commit(struct pt_sim *s);
int pt__sim_trade_get(struct pt_sim *s, int gw, const char *order_id, struct sim_trade *t);
int pt__sim_trade_by_no(struct pt_sim *s, int gw, const char *trade_no, struct sim_trade *t);
int pt__sim_trade_insert(struct pt_sim *s, struct sim_trade *t);
int pt__sim_trade_update(struct pt_sim *s, const struct sim_trade *t);
/* Calls cb for the trades of gw (of order_id when not NULL), newest first,
 * until cb returns non-zero or limit trades were given. */
int pt__sim_trade_each(struct pt_sim *s, int gw, const char *order_id, int limit,
                       int (*cb)(void *ctx, const struct sim_trade *t), void *ctx);
/* The pending trade whose customer pays next; PT_ENOTFOUND when none. */
int pt__sim_trade_next_pay(struct pt_sim *s, struct sim_trade *t);
cJSON *pt__sim_ledger_json(struct pt_sim *s, int gw, const char *order_id);
/* The refund (gw, scope, key); PT_ENOTFOUND when none. */
int pt__sim_refund_get(struct pt_sim *s, int gw, const char *scope, const char *key,
                       struct sim_refund *r);
int pt__sim_refund_insert(struct pt_sim *s, struct sim_refund *r);
int pt__sim_refund_update(struct pt_sim *s, const struct sim_refund *r);
/* Sums of the refunds of trade_id: every refund (what is no longer
 * refundable) and the succeeded ones (what went back); either may be NULL. */
int pt__sim_refund_totals(struct pt_sim *s, int64_t trade_id, int64_t *taken, int64_t *succeeded,
                          int *count);
/* Calls cb for the refunds of trade_id, newest first, until cb returns
 * non-zero. */
int pt__sim_refund_each(struct pt_sim *s, int64_t trade_id,
                        int (*cb)(void *ctx, const struct sim_refund *r), void *ctx);
/* The processing refund that completes next; PT_ENOTFOUND when none. */
int pt__sim_refund_next_settle(struct pt_sim *s, struct sim_refund *r);
int pt__sim_idem_get(struct pt_sim *s, const char *key, struct sim_idem *r);
int pt__sim_idem_put(struct pt_sim *s, const struct sim_idem *r);
int pt__sim_idem_delete(struct pt_sim *s, const char *key);
int pt__sim_note_add(struct pt_sim *s, struct sim_note *n);
int pt__sim_note_next(struct pt_sim *s, struct sim_note *n);
int pt__sim_note_update(struct pt_sim *s, const struct sim_note *n);
cJSON *pt__sim_notes_json(struct pt_sim *s);
/*
 * The gateway's books of [from, to) (gateways' ms): trade_cb for each trade
 * captured then (by paid_at), then refund_cb for each refund that succeeded
 * then; lines forgotten by POST /_sim/ledger/forget left out.  A callback's
 * non-zero stops the walk.
 */
int pt__sim_bill_each(struct pt_sim *s, int gw, int64_t from, int64_t to,
                      int (*trade_cb)(void *ctx, const struct sim_trade *t),
                      int (*refund_cb)(void *ctx, const struct sim_refund *r), void *ctx);
/* POST /_sim/ledger/alter: the order's trade (order_id) now says amount
 * (minor units; <= 0 keeps it) and currency (NULL keeps it), or the refund
 * (refund_id) says amount.  PT_ENOTFOUND. */
int pt__sim_ledger_alter(struct pt_sim *s, int gw, const char *order_id, const char *refund_id,
                         int64_t amount, const char *currency);
/* POST /_sim/ledger/forget: the order's trade (order_id) or the refund
 * (refund_id) is left out of the bills.  PT_ENOTFOUND. */
int pt__sim_ledger_forget(struct pt_sim *s, int gw, const char *order_id, const char *refund_id);
void pt__sim_idem_free(struct sim_idem *r);
void pt__sim_note_free(struct sim_note *n);

/* ---- sim_refund.c (caller holds lk) ---- */
/*
 * The refund rules all gateways share.  r names the refund asked for (gw,
 * scope, refund_key, amount, params_hash; refund_no, status, settle_at and
 * extra as it is to be recorded when new); t is the trade it refunds.  An
 * existing refund under the key is never executed again: REPLAY when its
 * params_hash and trade match, CONFLICT otherwise (*r is then the existing
 * refund).  Otherwise the trade must be captured (NOT_PAID) and the amount
 * at most what the refunds not failed leave (EXCEEDS, *left says how much);
 * then the refund is recorded (NEW).  left may be NULL.
 */
enum sim_refund_rc pt__sim_refund_take(struct pt_sim *s, const struct sim_trade *t,
                                       struct sim_refund *r, int64_t *left);

/* ---- sim_notify.c ---- */
int pt__sim_scheduler_start(struct pt_sim *s);
void pt__sim_scheduler_stop(struct pt_sim *s);
/*
 * Queues a notification (lk held): delivered after delay_ms, and when
 * duplicate is set once more a little later (same content: the receiver must
 * de-duplicate).  url NULL/"" = the default for gw under notify_base.
 */
int pt__sim_notify(struct pt_sim *s, int gw, const char *order_id, const char *kind,
                   const char *url, const char *ctype, const char *body, size_t len,
                   int64_t delay_ms, int duplicate);
/* Schedules the simulated customer of t (lk held): sets t->pay_at. */
void pt__sim_schedule_pay(struct pt_sim *s, struct sim_trade *t);

/* ---- sim_util.c ---- */
/* The gateways' time: the real clock plus what POST /_sim/clock moved it
 * by (so a test lets hours pass for an order without waiting). */
int64_t pt__sim_now_ms(const struct pt_sim *s);
const char *pt__sim_req_header(const struct sim_req *rq, const char *name);
void pt__sim_resp_set(struct sim_resp *rs, int status, const char *ctype, const char *body,
                      size_t len);
/* Prints j unformatted into rs (and deletes j). */
void pt__sim_resp_json(struct sim_resp *rs, int status, cJSON *j);
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void pt__sim_resp_header(struct sim_resp *rs, const char *fmt, ...);
void pt__sim_resp_free(struct sim_resp *rs);
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void pt__sim_note(struct sim_resp *rs, const char *fmt, ...);

/* Percent-decodes len bytes of s into out (outlen); PT_EPARSE, PT_ETOOBIG. */
int pt__sim_url_decode(const char *s, size_t len, int plus_is_space, char *out, size_t outlen);

/* Random lower-case alphanumerics into out (n chars + NUL). */
void pt__sim_random_alnum(struct pt_sim *s, char *out, size_t n);
/* Random decimal digits. */
void pt__sim_random_digits(struct pt_sim *s, char *out, size_t n);
/* SHA-256 hex (64 chars + NUL) of len bytes. */
void pt__sim_sha256_hex(const void *data, size_t len, char out[65]);

/* An HTTP status's reason phrase ("Status" for one the simulator never sends). */
const char *pt__sim_reason(int status);

/* Amount rules: what the simulated customer's money does. */
enum sim_rule { SIM_RULE_PAY = 0, SIM_RULE_DECLINE, SIM_RULE_PENDING };
enum sim_rule pt__sim_amount_rule(int64_t minor);
/* A pending trade's customer acts now, as its amount's rule says: captured
 * (paid now) or declined, written to the ledger (lk held); the rule in
 * *rule when given.  The ledger's answer. */
int pt__sim_customer_pays(struct pt_sim *s, struct sim_trade *t, enum sim_rule *rule);

/*
 * Amounts on the gateways' wires (sim_units.c): the gateway's own rules,
 * the ledger's ISO 4217 minor units.  Stripe's integer `amount` in cur to
 * minor units: PT_OK, or PT_EINVAL with Stripe's reason in why (cap bytes)
 * when Stripe refuses it; and back.  Alipay's decimal total_amount /
 * refund_amount: PT_OK, PT_EPARSE (more than two decimals, not a number),
 * PT_ERANGE; and back, written with Alipay's decimals.
 */
int pt__sim_stripe_amount_in(const char *cur, int64_t wire, int64_t *minor, char *why, size_t cap);
int64_t pt__sim_stripe_amount_out(const char *cur, int64_t minor);
int pt__sim_alipay_amount_in(const char *s, const char *cur, int64_t *minor);
/* Alipay's signed answer {"<method>_response":o,"sign":...} (o is taken),
 * and its error answer. */
void pt__sim_alipay_respond(struct pt_sim *s, struct sim_resp *rs, const char *method, cJSON *o);
void pt__sim_alipay_fail(struct pt_sim *s, struct sim_resp *rs, const char *method,
                         const char *code, const char *sub_code, const char *sub_msg);
/* The trade bill (sim_alipay_bill.c): downloadurl.query's answer, the
 * download's path, and the zip it serves. */
void pt__sim_alipay_bill_url(struct sim_call *c, const char *method, const cJSON *biz,
                             struct sim_resp *rs);
int pt__sim_alipay_bill_path(const char *path);
void pt__sim_alipay_bill_file(struct pt_sim *s, const struct sim_req *rq, struct sim_resp *rs);
void pt__sim_alipay_amount_out(int64_t minor, const char *cur, char out[PT_MONEY_DECIMAL_MAX]);

/*
 * A trade's expiry (SPEC 18), kept in its extra JSON: the field the create
 * named it with and the text sent ("timeout_express", "1m"), and the
 * gateways' time it stops (expires_at, ms).  A trade whose create named
 * none never expires.  Expired: still pending past expires_at - nobody can
 * pay it any more.
 */
void pt__sim_set_expiry(struct sim_trade *t, const char *field, const char *sent,
                        int64_t expires_at);
int pt__sim_expired(const struct pt_sim *s, const struct sim_trade *t);
/* A number member of t's extra (0 when absent), and setting one. */
int64_t pt__sim_extra_int(const struct sim_trade *t, const char *name);
void pt__sim_extra_set_int(struct sim_trade *t, const char *name, int64_t v);

/* A zone-less "yyyy-MM-dd HH:mm:ss" read in the UTC offset zone ("+08:00")
 * into Unix ms.  PT_OK or PT_EPARSE. */
int pt__sim_local_time(const char *text, const char *zone, int64_t *ms);

/* "2006-01-02 15:04:05" in China time (UTC+8), as Alipay writes times. */
void pt__sim_time_cn(int64_t ms, char out[20]);
/* RFC 3339 with offset +08:00, as WeChat writes times. */
void pt__sim_time_rfc3339_cn(int64_t ms, char out[32]);

/*
 * A bill date ("YYYY-MM-DD") of a gateway whose bill day is at offset_min
 * east of UTC: its 00:00 in the gateways' ms.  PT_OK, PT_EPARSE.
 */
int pt__sim_bill_day(const char *date, int offset_min, int64_t *start);
/* 1 when the bill of the day starting at start is ready (--bill-ready-after). */
int pt__sim_bill_ready(const struct pt_sim *s, int64_t start);

/* cJSON helpers: string member or NULL; integer member (exact) or -1. */
const char *pt__sim_json_str(const cJSON *o, const char *name);
int pt__sim_json_int(const cJSON *o, const char *name, int64_t *out);

#endif
