/*
 * gateway.h - the one interface every payment gateway adapter implements.
 *
 * An adapter is a table of pure functions: it turns a charge into a signed
 * HTTP request, and a response (or an incoming notification) into an
 * outcome, without touching the network, the clock or the database.  Time
 * and nonces come in through struct pt_gw_env so the functions are
 * deterministic and are tested with byte vectors alone.  The sync engine
 * sends the requests through the platform's pt_transport.
 *
 * Adding a gateway is adding core/gateways/<name>.c with one
 * `const struct pt_gateway pt_gateway_<name>` and a line in registry.c.
 * (Shape borrowed from curl's struct Curl_ssl, one table per TLS backend.)
 *
 * The wire-level helpers each adapter is built from (strings to sign,
 * signature checks, notification crypto) are public in
 * core/gateways/{alipay,wechat,stripe,2c2p}.h so the simulator and
 * `payterm sign`/`verify` reuse them instead of re-implementing them.
 *
 * Interface changes since the first draft (issue 4):
 *  - struct pt_gw_env gained tolerance_s (Stripe webhook and WeChat
 *    notification timestamp tolerance; 0 = the gateway's default, 300 s).
 *  - build() returns PT_EUNSUPPORTED for an operation the gateway does not
 *    have (2C2P has no cancel for an unpaid redirect: the token just expires).
 *  - pt_gw_config.secret holds the WeChat APIv3 key (32 bytes) for WeChat,
 *    the API secret key (sk_...) for Stripe, the merchant secret for 2C2P.
 *  - pt_notification.relevant is 0 for a verified event that carries no
 *    charge outcome (a Stripe event of another type, a WeChat refund event):
 *    acknowledge it, apply nothing.
 *  - pt_gw_config_free() lives in core/gateways/registry.c; the loader from
 *    the program's configuration is pt_gw_config_load() in firmware/gw_config.h.
 *
 * Issue 15 (WeChat payment code, APIv2): pt_gw_config gained apiv2_key,
 * client_cert_file / client_key_file (mutual TLS, handed to the transport in
 * struct pt_http_request) and client_ip; pt_gw_settings gained client_ip and
 * a fifth key-file slot (PT_GW_FILES 5).
 *
 * Issue 15 (WeChat platform key rotation, SPEC 8): pt_gw_config gained
 * peer_keys, a trust store of several peer keys by serial; pt_gw_settings
 * gained peer_files (the list form of platform_public_key_file, key kind
 * PT_GWK_KEYFILES); struct pt_gateway gained build_keys / parse_keys /
 * peer_serial, with which the sync engine downloads rotated keys.
 *
 * Issue 32 (each gateway's own currency units, SPEC 18): struct pt_gateway
 * gained amount_unit, the gateway's documented unit per currency, which its
 * adapter converts with and the intake checks an amount against
 * (pt_gateway_amount_ok) before anything is stored.
 *
 * Issue 32 (QR codes expire, SPEC 18): the operation PT_GW_CLOSE (close an
 * order nobody paid, never returning money: PT_EUNSUPPORTED where the
 * gateway has no such call); struct pt_gw_env gained expire_in_s and
 * expire_at_ms, the expiry an interactive create carries; struct
 * pt_gw_result gained paying; struct pt_gateway gained close_min_age_s and
 * default_utc_offset_min; pt_gw_settings and pt_gw_config gained
 * utc_offset_min (key kind PT_GWK_UTC_OFFSET).
 *
 * Issue 33 (2C2P refunds, SPEC 5a): a gateway whose refund request carries
 * no refund key.  struct pt_gateway gained refund_keyless (exactly once is
 * kept by the order of operations: one refund of a charge in flight, the
 * gateway's list of the charge's refunds read before every send),
 * parse_refund_list (that list, struct pt_gw_refund_list) and
 * refund_unavailable (the configuration lacks what refunds need: the 409
 * names it).  pt_gw_config and pt_gw_settings gained refund_endpoint (the
 * refunds' own API), pt_gw_env gained random (JWE keys and IVs, OAEP seeds,
 * PSS salts: a test fixes them).
 */
#ifndef PT_GATEWAY_H
#define PT_GATEWAY_H

#include <stddef.h>
#include <stdint.h>

#include "charge.h"
#include "money.h"
#include "platform.h"
#include "refund.h"

struct pt_pk;         /* an RSA key (crypto.h) */
struct pt_gw_cli;     /* sign/verify command options (gateways/gwcli.h) */
struct pt_recon_rows; /* records of a gateway's bill (reconcile.h) */
struct pt_gw_env;

/* A gateway conversation's caller, for adapters that make more than one
 * request (a bill and its file; pages): env fills the signing clock and
 * nonce (PT_ECLOCK when the wall clock is not trusted), send sends
 * (transport.h's results; req is freed). */
struct pt_gw_exchange {
    int (*env)(void *ctx, struct pt_gw_env *env, char nonce[33]);
    int (*send)(void *ctx, struct pt_http_request *req, struct pt_http_response *resp);
    void *ctx;
};
struct cJSON;

#define PT_GW_MAX_CURRENCIES 16
/* Most peer keys a gateway trusts at once (configured and downloaded). */
#define PT_GW_MAX_PEER_KEYS 8
/* A certificate serial as WeChat writes it: upper-case hex, 40 digits today. */
#define PT_GW_SERIAL_MAX 64
/* Most gateways the registry can hold (arrays indexed by registry index). */
#define PT_GW_MAX 6

/* What a gateway said, classified for the state machine (SPEC section 7). */
enum pt_outcome {
    PT_OUTCOME_SUCCESS = 0, /* the money moved */
    PT_OUTCOME_DECLINED,    /* terminal decline; code + message say why */
    PT_OUTCOME_PENDING,     /* accepted, waiting for the customer */
    PT_OUTCOME_CANCELED,    /* closed / canceled / reversed at the gateway */
    PT_OUTCOME_NOT_FOUND,   /* query: the gateway has no such order */
    PT_OUTCOME_AMBIGUOUS,   /* cannot tell: 5xx, Alipay 20000, bad response signature,
                               Stripe 409 idempotency_key_in_use, unparseable body */
};

const char *pt_outcome_name(enum pt_outcome o);

/*
 * A configured gateway: identifiers, endpoints and loaded keys.  Filled by
 * pt_gw_config_load() (the program) or by tests directly.  Secrets live in
 * fixed buffers wiped by pt_gw_config_free().
 */
struct pt_gw_config {
    char name[8];              /* "alipay", "wechat", "stripe", "2c2p" */
    char endpoint[256];        /* base URL (Alipay: the full gateway.do URL) */
    char app_id[64];           /* Alipay app_id, WeChat appid */
    char merchant_id[64];      /* WeChat mchid, 2C2P merchantID, Alipay seller_id ("" =
                                  not configured: notifications are not held to one) */
    char serial_no[128];       /* WeChat merchant certificate serial */
    char platform_serial[128]; /* WeChat platform key serial (hex) */
    char notify_url[256];
    /* Where refund calls go when the gateway has a separate API for them
     * (2C2P Payment Maintenance); "" = refunds through endpoint. */
    char refund_endpoint[256];
    struct pt_pk *private_key; /* merchant RSA key (Alipay, WeChat, 2C2P Payment Maintenance);
                                  NULL otherwise */
    /* The configuration key and file private_key came from, for the error
     * when it does not sign (pt_gw_build_error); "" when none. */
    char signing_key[64];
    char signing_file[512];
    struct pt_pk *peer_key;    /* Alipay public key / WeChat platform key / 2C2P's public key */
    unsigned char secret[256]; /* Stripe secret key, 2C2P secret, WeChat APIv3 key */
    size_t secret_len;
    unsigned char webhook_secret[256]; /* Stripe whsec_... (the whole string) */
    size_t webhook_secret_len;
    int barcode_timeout_s; /* Alipay: reverse an unpaid barcode charge after this */
    /* Alipay: the currencies this merchant may charge in (cross-border
     * acquiring); a charge in another currency is never built.  Empty list
     * = CNY only (domestic Alipay). */
    char currencies[PT_GW_MAX_CURRENCIES][4];
    int ncurrencies;
    char settle_currency[4]; /* Alipay settle_currency; "" = not sent */
    /* WeChat APIv2 (method barcode, SPEC 8): the APIv2 key (32 characters;
     * apiv2_key_len 0 = not configured, no barcode charges), the merchant's
     * API certificate and its key (private_key_file) for the mutual TLS of
     * /secapi/pay/reverse, and the spbill_create_ip sent with micropay. */
    unsigned char apiv2_key[64];
    size_t apiv2_key_len;
    char client_cert_file[512];
    char client_key_file[512];
    char client_ip[46];
    /* WeChat: the daily bill through APIv2 downloadbill rather than APIv3
     * tradebill (gateways.wechat.bill_api "v2"; SPEC 19). */
    int bill_apiv2;
    /* The gateway's local time, minutes east of UTC, for the times it reads
     * without a zone (2C2P paymentExpiry). */
    int utc_offset_min;
    /* Every peer key trusted, by serial (WeChat platform keys rotate, SPEC
     * 8): the configured ones and those downloaded since.  NULL for a
     * gateway with one fixed peer key (peer_key).  Owned; thread-safe. */
    struct pt_gw_keyring *peer_keys;
};

/* True when cfg allows charges in currency (Alipay's currencies list; every
 * other gateway takes any currency the money table knows). */
int pt_gw_currency_allowed(const struct pt_gw_config *cfg, const char *currency);

/* Wipes secrets and frees the keys; accepts NULL. */
void pt_gw_config_free(struct pt_gw_config *cfg);

/*
 * What to tell an operator about rc, the failure of cfg's build or
 * build_refund: PT_EKEY (the merchant's key did not sign) names the
 * configuration key and file it came from, and whether it holds a private
 * key at all; anything else is pt_strerror(rc).  Writes into buf (len
 * bytes) and returns it.
 */
const char *pt_gw_build_error(const struct pt_gw_config *cfg, int rc, char *buf, size_t len);
#define PT_GW_BUILD_ERROR_MAX 768 /* room for the key, its file and why */

/*
 * A keyring (core/gateways/keyring.c): the peer keys a gateway trusts, by
 * certificate serial (compared case-insensitively), at most
 * PT_GW_MAX_PEER_KEYS.  Safe to share between threads: verifications run
 * under a read lock, additions take the write lock.  Keys that come from
 * the configuration are pinned: never replaced, never retired.
 */
struct pt_gw_keyring;

/* PT_OK or PT_ENOMEM; free with pt_gw_keyring_destroy (accepts NULL). */
int pt_gw_keyring_new(struct pt_gw_keyring **out);
void pt_gw_keyring_destroy(struct pt_gw_keyring *kr);

/*
 * Trusts key (taken over: freed by the ring, also on failure) under serial
 * until expire_s (Unix seconds; 0 = no expiry known).  The same serial again
 * replaces an unpinned entry.  When the ring is full the unpinned key that
 * expires first makes room.  PT_OK, PT_EINVAL (no serial), PT_ETOOBIG
 * (full of pinned keys), PT_EEXIST (serial pinned: the configured key stays).
 */
int pt_gw_keyring_add(struct pt_gw_keyring *kr, const char *serial, struct pt_pk *key,
                      int64_t expire_s, int pinned);

/* 1 when serial is trusted (NULL kr or serial: 0). */
int pt_gw_keyring_has(const struct pt_gw_keyring *kr, const char *serial);

/* The number of keys held. */
int pt_gw_keyring_count(const struct pt_gw_keyring *kr);

/*
 * Verifies sig_b64 (RSASSA-PKCS1-v1_5 SHA-256, base64) over msg with the key
 * of serial.  PT_OK, PT_ENOTFOUND (nobody trusts serial), PT_ESIG.
 */
int pt_gw_keyring_verify(const struct pt_gw_keyring *kr, const char *serial, const void *msg,
                         size_t len, const char *sig_b64);

/*
 * Retires the unpinned keys that expired by now_s, and those whose serial is
 * not in keep[0..nkeep) when keep is not NULL (a verified download lists
 * every certificate the gateway still uses).  The serials retired are
 * written to gone[] (at most PT_GW_MAX_PEER_KEYS); returns their count.
 */
int pt_gw_keyring_retire(struct pt_gw_keyring *kr, int64_t now_s,
                         const char (*keep)[PT_GW_SERIAL_MAX], int nkeep,
                         char (*gone)[PT_GW_SERIAL_MAX]);

/* One peer certificate a gateway published (parse_keys). */
struct pt_gw_peer_cert {
    char serial[PT_GW_SERIAL_MAX]; /* as the certificate itself says (upper-case hex) */
    char *pem;                     /* the certificate, PEM, NUL-terminated (malloc'd) */
    size_t pem_len;
    int64_t effective_s, expire_s; /* Unix seconds */
};

/* Frees the PEM texts of n certificates (the array itself is the caller's). */
void pt_gw_peer_certs_free(struct pt_gw_peer_cert *certs, int n);

/*
 * A gateway's section of the configuration file (gateways.<name>), as read:
 * identifiers, endpoints and the paths of its key files, no keys yet.  Which
 * JSON key fills which field is the gateway's config_keys table; loading the
 * keys is its load().
 */
#define PT_GW_FILES 5
#define PT_GW_PATH_MAX 512
/* One entry of the list form of a peer key file: [{"serial","file"}]. */
struct pt_gw_keyfile {
    char serial[PT_GW_SERIAL_MAX];
    char file[PT_GW_PATH_MAX];
};
/*
 * Entry i of a list packed by the configuration loader into its files[]
 * slot ("serial\tfile\n" per entry: the configuration is a value copied
 * around and kept on stacks, so it does not grow a list of paths per
 * gateway).  PT_OK, PT_ENOTFOUND past the end.
 */
int pt_gw_keyfile_at(const char *packed, int i, struct pt_gw_keyfile *out);
struct pt_gw_settings {
    int configured;
    char endpoint[256];
    char app_id[64];
    char merchant_id[64];
    char serial_no[128];
    char platform_serial[128];
    char notify_url[256];
    char refund_endpoint[256];
    int64_t barcode_timeout_s;
    char currencies[PT_GW_MAX_CURRENCIES][4];
    int ncurrencies;
    char settle_currency[4];
    char client_ip[46]; /* WeChat spbill_create_ip ("" = 127.0.0.1) */
    char bill_api[8];   /* WeChat: "v3" (tradebill, "" = v3) or "v2" (downloadbill) */
    int utc_offset_min; /* minutes east of UTC (PT_GWK_UTC_OFFSET); the gateway's default */
    char files[PT_GW_FILES][PT_GW_PATH_MAX]; /* key and secret files, by the gateway's slots */
    /* A PT_GWK_KEYFILES key given as a list: its npeer_files entries are
     * packed into the key's files[] slot (pt_gw_keyfile_at); 0 = a path. */
    int npeer_files;
};

/* How a configuration key of a gateway is read. */
enum pt_gw_key_kind {
    PT_GWK_TEXT,       /* a string */
    PT_GWK_HTTPS,      /* an https:// URL */
    PT_GWK_URL,        /* an http:// or https:// URL */
    PT_GWK_FILE,       /* a file path (a public key, a certificate) */
    PT_GWK_SECRET,     /* a file path that holds a secret: mode 0600 required */
    PT_GWK_SECONDS,    /* an integer between min and max */
    PT_GWK_CURRENCIES, /* a list of ISO 4217 codes */
    PT_GWK_CURRENCY,   /* one ISO 4217 code */
    /* A file path (into the text field), or a list of 1 to
     * PT_GW_MAX_PEER_KEYS {"serial": hex, "file": path}, packed into the
     * same field (npeer_files, pt_gw_keyfile_at). */
    PT_GWK_KEYFILES,
    /* A UTC offset "+07:00" (into an int field: minutes east of UTC). */
    PT_GWK_UTC_OFFSET,
};

struct pt_gw_key {
    const char *name; /* in gateways.<gateway>; NULL ends a table */
    enum pt_gw_key_kind kind;
    size_t offset; /* of the field in struct pt_gw_settings */
    size_t size;   /* of a text field */
    int required;
    int64_t min, max; /* PT_GWK_SECONDS */
};

/* A key table entry for a text-like field of struct pt_gw_settings. */
#define PT_GW_KEY(n, k, field, req)                                                                \
    {                                                                                              \
        .name = (n), .kind = (k), .offset = offsetof(struct pt_gw_settings, field),                \
        .size = sizeof(((struct pt_gw_settings *)0)->field), .required = (req)                     \
    }

typedef int (*pt_gw_random_fn)(void *ctx, void *buf, size_t len);

/* Inputs that would otherwise make an adapter impure. */
struct pt_gw_env {
    int64_t now_ms;      /* wall clock: Alipay timestamp, WeChat timestamp, Stripe tolerance */
    const char *nonce;   /* WeChat nonce_str (32 chars); NULL for other gateways */
    int64_t tolerance_s; /* notification age accepted; 0 = 300 s; < 0 = do not check */
    /* Randomness an adapter draws (2C2P: JWE content keys and IVs, OAEP
     * seeds, PSS salts); NULL = the signing key's own DRBG. */
    pt_gw_random_fn random;
    void *random_ctx;
    /* The create of a code or page the customer pays on (an interactive
     * method's PT_GW_PAY, SPEC 18) carries the gateway's expiry: how long it
     * stays payable (qr_timeout_s) and the wall-clock time it stops, the
     * same on every repeat of the create.  Each adapter sends the form its
     * gateway documents.  0 = no expiry is sent. */
    int64_t expire_in_s;
    int64_t expire_at_ms;
};

/* The classified result of one call. */
struct pt_gw_result {
    enum pt_outcome outcome;
    char trade_no[PT_SHORT_MAX];  /* Alipay trade_no, WeChat transaction_id, Stripe pi_..., 2C2P
                                     tranRef */
    char action_url[PT_URL_MAX];  /* qr_code / code_url / payment_url */
    char code[PT_SHORT_MAX];      /* gateway's code (declines and ambiguity) */
    char message[PT_MESSAGE_MAX]; /* gateway's message, no secrets */
    int64_t amount;               /* minor units when the gateway reported one, else 0 */
    char currency[4];
    int review; /* the adapter asks for an operator (e.g. Stripe
                   idempotency_error: same key, other parameters) */
    /* PENDING with the customer in the middle of paying (WeChat
     * USERPAYING, 2C2P "in progress"): not an unpaid code, even past its
     * expiry. */
    int paying;
};

/* A verified, normalised gateway notification. */
struct pt_notification {
    char gateway[8];
    char dedup_id[256]; /* applied once per (gateway, dedup_id) */
    char order_id[PT_ORDER_ID_MAX];
    char trade_no[PT_SHORT_MAX];
    int64_t amount; /* minor units, 0 if absent */
    char currency[4];
    char merchant_id[64]; /* app_id / mchid / merchantID as notified; "" if absent */
    /* 1 when every merchant identifier this gateway's notifications carry
     * is present and equals the configured one (Alipay app_id, and seller_id
     * when configured; WeChat mchid and appid; 2C2P merchantID; Stripe has
     * none beyond the webhook secret).  A notification without it is
     * acknowledged but never bound to a charge (SPEC section 5). */
    int merchant_ok;
    enum pt_outcome status; /* SUCCESS, DECLINED, CANCELED or PENDING */
    int relevant;           /* 0: valid but nothing to apply (e.g. other event type) */
    /* 1 for a refund notification (WeChat REFUND.SUCCESS/ABNORMAL/CLOSED,
     * Stripe charge.refunded/refund.updated/refund.failed): status is the
     * refund's (SUCCESS, DECLINED or PENDING), order_id and trade_no the
     * charge's, amount the refund's, and these two bind it to the refund
     * (out_refund_no / metadata[refund_id] and the gateway's refund number).
     * A Stripe charge.refunded event carries several refunds: it is one
     * notification per refund, parse_notify reports the first one whose
     * metadata names a refund_id (the rest are confirmed by query). */
    int refund;
    char refund_id[PT_REFUND_ID_MAX];
    char refund_no[PT_SHORT_MAX];
};

/* PT_GW_CANCEL stops a charge whatever became of it (a paid barcode order
 * is reversed); PT_GW_CLOSE closes an order only while nobody has paid it,
 * and is refused for a paid one - how an expired code ends (SPEC 18). */
enum pt_gw_op { PT_GW_PAY = 0, PT_GW_QUERY, PT_GW_CANCEL, PT_GW_CLOSE };

/*
 * A gateway's list of the refunds it executed on one charge (2C2P's refund
 * status inquiry), for a gateway whose refund request carries no refund
 * key (refund_keyless): the sync engine tells its refunds apart by the
 * gateway's refund number and, for the one in flight, by amount
 * (core/refund_bind.h).
 */
#define PT_GW_REFUND_LIST_MAX 64
struct pt_gw_refund_entry {
    int64_t amount;               /* minor units of the charge's currency */
    enum pt_outcome status;       /* SUCCESS, PENDING, DECLINED, or AMBIGUOUS (a status the
                                     adapter does not know) */
    char refund_no[PT_SHORT_MAX]; /* the gateway's reference of the refund, never empty */
    char code[PT_SHORT_MAX];      /* its status as the gateway wrote it */
};
struct pt_gw_refund_list {
    /* SUCCESS when the list was read (n entries; 0 = no refunds);
     * otherwise why not (AMBIGUOUS with code and message, as parse). */
    struct pt_gw_result res;
    int n;
    struct pt_gw_refund_entry e[PT_GW_REFUND_LIST_MAX];
};

/* Refund calls (SPEC 5a, 8 "Refunds"): send the refund with its refund_id as
 * the gateway's refund key, or ask the gateway what became of it. */
enum pt_gw_refund_op { PT_GW_REFUND = 0, PT_GW_REFUND_QUERY };

/* One payment method a gateway offers. */
struct pt_gw_method {
    const char *name; /* "barcode", "qr", "card_on_file", "redirect"; NULL ends a list */
    /* The customer pays on a code or page the gateway issues (qr, redirect):
     * the charge can never wait in the offline queue, and its create answer
     * carries the link the kiosk shows (the gateway's action_key). */
    int interactive;
    /* Default offline.max_age_s for it (0 = none): how long a queued charge
     * stays sendable (an Alipay auth code about a minute, a Stripe
     * idempotency key 24 h). */
    int64_t offline_max_age_s;
    /* A customer's payment code (needs payment_code; valid about a minute;
     * reversed when still unpaid after barcode_timeout_s). */
    int payment_code;
    /* A saved card (needs payment_method, takes an optional customer). */
    int card;
};

struct pt_gateway {
    const char *name;
    const struct pt_gw_method *methods; /* ends with a {.name = NULL} entry */
    /* Charge-object key of an interactive method's link: "qr_code",
     * "code_url", "payment_url"; NULL when it has none. */
    const char *action_key;
    /* Where its notifications arrive: "/notify/alipay", "/webhooks/stripe". */
    const char *notify_route;
    /* Currencies a charge may be in when the configuration lists none
     * (Alipay: {"CNY", NULL}, domestic acquiring); NULL = any ISO 4217
     * currency. */
    const char *const *default_currencies;
    /* Verifying its notifications reads the wall clock (a signed timestamp
     * that must be recent: Stripe, WeChat APIv3).  While the wall clock is
     * not trusted they are answered 503 and recorded nowhere, and the
     * gateway delivers them again (SPEC 17). */
    int notify_needs_time;
    /* Cancel needs the gateway's trade number (Stripe cancels a
     * PaymentIntent by id): the trade is looked up by query first when
     * the charge does not know it. */
    int cancel_needs_trade_no;
    /* How long a resend with the same key is safe (Stripe 24 h); 0 = never. */
    int64_t resend_window_s;
    /* The gateway refuses to close an order younger than this (WeChat Pay:
     * five minutes): an expired code is confirmed by query until then. */
    int64_t close_min_age_s;
    /* Order ids the gateway accepts as its idempotency key (out_trade_no,
     * invoiceNo), beyond payterm's own 1-64 of [A-Za-z0-9_.-]: length bounds
     * and characters it refuses.  Checked at intake, so a charge the gateway
     * would reject is a 400 at once, not a decline later. */
    size_t order_id_min, order_id_max;
    const char *order_id_forbidden; /* characters not allowed; NULL = none */

    /*
     * Builds the signed request for op on charge c (for CANCEL of a Stripe
     * charge c->gateway_trade_no must be set).  *out is filled and owned by the
     * caller (pt_http_request_free); on failure it is left empty.  PT_OK,
     * PT_EINVAL (charge lacks a field the gateway needs, or the config lacks a
     * key), PT_EUNSUPPORTED (the gateway has no such operation), PT_ECRYPTO.
     */
    int (*build)(const struct pt_gw_config *cfg, enum pt_gw_op op, const struct pt_charge *c,
                 const struct pt_gw_env *env, struct pt_http_request *out);

    /*
     * Classifies the answer to op.  A response whose signature does not
     * verify is never SUCCESS (AMBIGUOUS with code "invalid_signature").
     * Returns PT_OK whenever *out was filled (whatever the outcome).
     */
    int (*parse)(const struct pt_gw_config *cfg, enum pt_gw_op op, const struct pt_charge *c,
                 const struct pt_http_response *resp, struct pt_gw_result *out);

    /*
     * Verifies and normalises an incoming notification (headers and body in
     * msg; msg->status unused).  PT_OK when valid, PT_ESIG when the
     * signature/MAC/decryption fails, PT_EPARSE when malformed.
     */
    int (*parse_notify)(const struct pt_gw_config *cfg, const struct pt_http_response *msg,
                        const struct pt_gw_env *env, struct pt_notification *out);

    /*
     * Refunds (SPEC 5a).  build_refund builds the signed request for op on
     * refund r of charge c (c is the SUCCESS charge: its order id, amount,
     * currency and gateway_trade_no).  parse_refund classifies the answer
     * into out: SUCCESS = the money went back (Alipay: fund_change=Y or the
     * query shows the refund; WeChat SUCCESS); PENDING = accepted, finished
     * asynchronously (WeChat PROCESSING); DECLINED = refused for good (code
     * and message say why: over-refund, trade not refundable; WeChat
     * ABNORMAL/CLOSED); NOT_FOUND = a query found no refund under this
     * refund_id (it was never executed: the same refund_id may be sent
     * again); AMBIGUOUS otherwise.  out->trade_no is the gateway's refund
     * number when it gave one; out->amount the refunded amount it reported.
     * The same return conventions as build and parse.  Both NULL for a
     * gateway without refunds.
     */
    int (*build_refund)(const struct pt_gw_config *cfg, enum pt_gw_refund_op op,
                        const struct pt_charge *c, const struct pt_refund *r,
                        const struct pt_gw_env *env, struct pt_http_request *out);
    int (*parse_refund)(const struct pt_gw_config *cfg, enum pt_gw_refund_op op,
                        const struct pt_charge *c, const struct pt_refund *r,
                        const struct pt_http_response *resp, struct pt_gw_result *out);

    /*
     * A refund request without a refund key (2C2P Payment Maintenance: the
     * invoice and an amount, nothing that names the refund).  Then the
     * engine never lets two refunds of one charge be in flight, and before
     * every send - first or retry - it reads the gateway's list of the
     * charge's refunds (build_refund PT_GW_REFUND_QUERY, parse_refund_list)
     * and binds an entry it cannot otherwise explain instead of sending
     * (core/refund_bind.h, docs/2c2p-refunds.md).  parse_refund then only
     * sees PT_GW_REFUND answers, whose out->trade_no must be the gateway's
     * refund number for a SUCCESS or PENDING (else AMBIGUOUS: the list
     * decides).  parse_refund_list fills *out (always; PT_OK).
     */
    int refund_keyless;
    int (*parse_refund_list)(const struct pt_gw_config *cfg, const struct pt_charge *c,
                             const struct pt_http_response *resp, struct pt_gw_refund_list *out);

    /* NULL, or why the configured gateway cannot send refunds (2C2P without
     * its Payment Maintenance keys): a sentence naming the missing keys,
     * NULL when it can.  The intake answers 409 charge_not_refundable. */
    const char *(*refund_unavailable)(const struct pt_gw_settings *in);

    /*
     * The unit the gateway writes amounts of currency in, from its own
     * documentation (SPEC 18).  Called through pt_gateway_amount_unit, with
     * *u holding ISO 4217's unit of currency on entry: it changes *u where
     * the gateway differs and returns the documented rule in a sentence for
     * messages ("Stripe counts this currency as zero-decimal, so only whole
     * units can be charged"), NULL when the unit is ISO's own.  NULL for a
     * gateway whose amounts are ISO minor units in every currency.
     */
    const char *(*amount_unit)(const char *currency, struct pt_money_unit *u);

    /* NULL, or why the configured gateway cannot take a method it offers
     * (WeChat barcode without the APIv2 key): a sentence naming the keys,
     * NULL when it can.  The intake answers 400 naming `method`. */
    const char *(*method_unavailable)(const struct pt_gw_settings *in, const char *method);

    /*
     * Peer keys that rotate (WeChat Pay platform certificates, SPEC 8); all
     * three NULL for a gateway whose peer key is configured once.
     * build_keys builds the signed request for the gateway's current
     * certificates (same conventions as build).  parse_keys verifies the
     * answer with a key cfg->peer_keys ALREADY trusts (never with one of the
     * certificates it carries), decrypts and checks every certificate, and
     * fills out[0..*n) (at most max; free with pt_gw_peer_certs_free) with
     * those not expired at env->now_ms.  PT_OK; PT_ESIG (the signature,
     * a certificate's serial or its decryption); PT_EPARSE (malformed);
     * PT_ENOTFOUND (not an HTTP 200 answer); PT_ETOOBIG (more than max
     * certificates).  On failure *n is 0 and nothing is to be freed.
     * peer_serial is the serial a response or notification
     * says it is signed with (NULL when it names none).
     */
    int (*build_keys)(const struct pt_gw_config *cfg, const struct pt_gw_env *env,
                      struct pt_http_request *out);
    int (*parse_keys)(const struct pt_gw_config *cfg, const struct pt_http_response *resp,
                      const struct pt_gw_env *env, struct pt_gw_peer_cert *out, int max, int *n);
    const char *(*peer_serial)(const struct pt_http_response *msg);

    /*
     * Reconciliation (SPEC 19).  bill_offset_min: the gateway's bill day,
     * minutes east of UTC (Alipay, WeChat Pay: China time, 480).
     * fetch_bill: the gateway's side of bill date `date` (its daily bill,
     * or its lists of that day), each record appended to *rows with day
     * set to `day`, through x (requests go out, signed with x's clock and
     * nonce).  PT_OK; PT_EAGAIN the gateway has no bill of it yet;
     * PT_ENOTSENT / PT_ENOANSWER the gateway could not be asked; another
     * error with why filled.  NULL: no bill - each local record is asked
     * about instead (build PT_GW_QUERY; "coverage":"local").
     */
    int bill_offset_min;
    int (*fetch_bill)(const struct pt_gw_config *cfg, struct pt_gw_exchange *x, const char *date,
                      int day, struct pt_recon_rows *rows, char *why, size_t whylen);
    /* Its bill as a file the merchant downloaded (payterm reconcile
     * --bill): the records of bill date `date` (day 0) appended to rows;
     * PT_OK, PT_EPARSE with err naming the line, PT_ETOOBIG, PT_ENOMEM.
     * NULL: no file payterm reads. */
    int (*parse_bill)(const char *text, size_t len, const char *date, struct pt_recon_rows *rows,
                      char *err, size_t errlen);
    /* The currencies its bill covers (Alipay's: CNY, domestic acquiring);
     * NULL = whatever it charges in.  A lane allowed other currencies
     * (gateways.<name>.currencies) is not reconciled (SPEC 19). */
    const char *const *bill_currencies;

    /* Its section of the configuration (SPEC section 10): the URL used when
     * none is configured, the keys it takes, the default barcode_timeout_s. */
    const char *default_endpoint;
    const struct pt_gw_key *config_keys;
    int64_t default_barcode_timeout_s;
    int default_utc_offset_min; /* its utc_offset when none is configured */
    /*
     * Loads the keys the settings name into *out (whose identifiers and
     * endpoint are already copied), checking what the gateway needs (the
     * WeChat APIv3 key is 32 bytes...).  PT_OK, or an error with a sentence
     * naming the key and the file in err.  rnd seeds RSA blinding.
     */
    int (*load)(const struct pt_gw_settings *in, pt_gw_random_fn rnd, void *rnd_ctx,
                struct pt_gw_config *out, char *err, size_t errlen);

    /*
     * `payterm sign` / `payterm verify --gateway <name>` (gateways/gwcli.h):
     * build the JSON object to print from the options and the message on
     * standard input; return the exit status (usage errors in a->err).  The
     * usage lines and what sign prints are for the commands' --help.
     */
    int (*cli_sign)(struct pt_gw_cli *a, char *in, size_t len, struct cJSON **out);
    int (*cli_verify)(struct pt_gw_cli *a, char *in, size_t len, struct cJSON **out);
    const char *cli_sign_usage, *cli_sign_prints, *cli_verify_usage;

    /* NULL when the gateway can stop a charge it has already seen (close,
     * cancel, reverse); otherwise why it cannot, for the 409
     * charge_not_cancelable a client gets instead of a cancel that would
     * wait for something that never comes. */
    const char *no_cancel;

    /* The exact replies the gateway wants for a notification. */
    const char *notify_ok_type; /* Content-Type of the success reply */
    const char *notify_ok_body; /* "success", {"code":"SUCCESS"}, ... */
    const char *notify_fail_type;
    const char *notify_fail_body; /* "fail", {"code":"FAIL","message":"..."}, ... */
};

/*
 * The registry (core/gateways/registry.c): every gateway payterm knows, in a
 * fixed order.  Metrics, configuration, routes, the CLI and the sync engine
 * loop over it by index; nothing outside core/gateways names a gateway.
 */
int pt_gateway_count(void);
/* The gateway at index i (0 <= i < pt_gateway_count()). */
const struct pt_gateway *pt_gateway_at(int i);
/* The index of a gateway by name, or -1. */
int pt_gateway_index(const char *name);
/* Looks a gateway up by name; NULL when unknown. */
const struct pt_gateway *pt_gateway_find(const char *name);
/* The one rule behind both lists (configured settings, a loaded config):
 * in the n listed currencies when there are any, else in the gateway's
 * default_currencies (none: any currency). */
int pt_gateway_takes_currency(const struct pt_gateway *gw, const char (*listed)[4], int n,
                              const char *currency);
/* 1 when gw's bill covers every currency of listed[0..n) (the configured
 * list; none: the gateway's default currencies); else 0 with the first
 * one it does not cover in beyond. */
int pt_gateway_bill_covers(const struct pt_gateway *gw, const char (*listed)[4], int n,
                           char beyond[4]);

/*
 * The unit gw writes amounts of currency in (ISO 4217's minor unit when
 * the gateway has no rule of its own for it) into *u; returns the rule's
 * sentence or NULL, as amount_unit.  *u is {0, 1} for an unknown currency.
 */
const char *pt_gateway_amount_unit(const struct pt_gateway *gw, const char *currency,
                                   struct pt_money_unit *u);

/*
 * Whether gw can carry amount (ISO minor units) of currency: 1, or 0 with
 * the reason in msg (cap bytes, NUL-terminated): "1050 MGA cannot be sent
 * to stripe: <the rule> (the amount must be a multiple of 100)".
 */
int pt_gateway_amount_ok(const struct pt_gateway *gw, const char *currency, int64_t amount,
                         char *msg, size_t cap);

/* The gateway whose notify_route is path; NULL when none. */
const struct pt_gateway *pt_gateway_by_route(const char *path);

/* The method called name, or NULL when the gateway does not offer it. */
const struct pt_gw_method *pt_gateway_method(const struct pt_gateway *gw, const char *name);
/* True when the gateway offers the method. */
int pt_gateway_has_method(const struct pt_gateway *gw, const char *method);
/* The method of gateway/method names (NULL when either is unknown). */
const struct pt_gw_method *pt_gateway_lookup(const char *gateway, const char *method);
/* Minutes east of UTC of the gateway's bill day (SPEC 19); -1 for a name
 * that is no gateway. */
int pt_gateway_bill_offset_min(const char *name);
/* "alipay, wechat, stripe or 2c2p" (every gateway of the registry). */
const char *pt_gateway_names(void);
/* True when the first n bytes of gateway name a gateway offering method. */
int pt_gateway_method_named(const char *gateway, size_t n, const char *method);
/* Every "gateway.method" pair, as "a.x, a.y, b.x or c.z", into out. */
void pt_gateway_method_pairs(char *out, size_t cap);

#endif
