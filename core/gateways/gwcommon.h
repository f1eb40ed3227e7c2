/*
 * gwcommon.h - small helpers shared by the four adapters (internal to
 * core/gateways; pt__ names).
 */
#ifndef PT_GWCOMMON_H
#define PT_GWCOMMON_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "gateway.h"

/* Copies src into dst (dstlen bytes), truncating; src NULL gives "". */
void pt__copy(char *dst, size_t dstlen, const char *src);

/* Sets outcome, code and message of r (code/message may be NULL). */
void pt__result(struct pt_gw_result *r, enum pt_outcome o, const char *code, const char *msg);

/*
 * An amount (ISO minor units of cur) in gw's own unit (SPEC 18): *units an
 * integer of it, or the decimal of it with the unit's decimals.  PT_OK,
 * PT_ERANGE (gw cannot carry it: nothing may be sent), PT_EINVAL,
 * PT_ETOOBIG.  pt__amount_in reads gw's units back into ISO minor units,
 * exactly (PT_ERANGE when that is not possible).
 */
int pt__amount_out(const struct pt_gateway *gw, const char *cur, int64_t minor, int64_t *units);
int pt__amount_decimal(const struct pt_gateway *gw, const char *cur, int64_t minor,
                       enum pt_money_format fmt, char *out, size_t cap);
int pt__amount_in(const struct pt_gateway *gw, const char *cur, int64_t units, int64_t *minor);

/* 1 when s is a non-empty id made of [A-Za-z0-9_.-] only (safe in a URL path). */
int pt__id_safe(const char *s);

/* Starts a request: method and url = base + path (copied). PT_OK, PT_ENOMEM. */
int pt__request_start(struct pt_http_request *r, const char *method, const char *base,
                      const char *path);

/* Takes ownership of body (len bytes, malloc'd) as the request body. */
void pt__request_body(struct pt_http_request *r, char *body, size_t len);

/* The string member name of obj, or NULL when absent or not a string. */
const char *pt__jstr(const cJSON *obj, const char *name);

/* Upper-cases a three-letter currency into out[4]; PT_OK or PT_EPARSE. */
int pt__currency_upper(const char *in, char out[4]);

/* 1 when a notification's merchant identifier is present and equals the
 * configured one (a missing field never matches: SPEC section 5). */
int pt__same_id(const char *notified, const char *configured);

/* Loads the key file of gateways.<gw>.<key> into *pk; an error names both. */
int pt__gw_load_key(const char *gw, const char *key, const char *path, pt_gw_random_fn rnd,
                    void *ctx, struct pt_pk **pk, char *err, size_t errlen);

/*
 * The merchant's private key, the one that signs the requests, from the
 * file of gateways.<gw>.<key> into o->private_key (o->signing_key and
 * signing_file say where it came from).  Refused, naming both, unless it
 * is a private key and a probe message signed with it verifies with it.
 */
int pt__gw_load_private_key(const char *gw, const char *key, const char *path, pt_gw_random_fn rnd,
                            void *ctx, struct pt_gw_config *o, char *err, size_t errlen);

/*
 * A key of the gateway's (its public key or certificate, which verifies
 * what it signs) from the file of gateways.<gw>.<key> into *pk.  Refused,
 * naming both, when it holds a private key, or when it is the public half
 * of o->private_key (the merchant's own key; not checked when NULL).
 */
int pt__gw_load_peer_key(const char *gw, const char *key, const char *path,
                         const struct pt_gw_config *o, pt_gw_random_fn rnd, void *ctx,
                         struct pt_pk **pk, char *err, size_t errlen);

/* Reads the secret file of gateways.<gw>.<key> into buf (at most cap - 1
 * bytes, trailing newlines dropped, wiped on failure); an error names both. */
int pt__gw_load_secret(const char *gw, const char *key, const char *path, unsigned char *buf,
                       size_t cap, size_t *len, char *err, size_t errlen);

/* The notification timestamp check: |now - t| within env's tolerance. */
int pt__within_tolerance(const struct pt_gw_env *env, int64_t t_s, int past_only);

#endif
