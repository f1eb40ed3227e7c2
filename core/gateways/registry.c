/*
 * registry.c - the list of gateway adapters and what they share.
 *
 * Adding a gateway is adding its table to `gateways` below.  The helpers of
 * gwcommon.h live here too, as does the one destructor of pt_gw_config.
 */
#include "gateway.h"
#include "crypto.h"
#include "err.h"
#include "gwcommon.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const struct pt_gateway pt_gateway_alipay, pt_gateway_wechat, pt_gateway_stripe,
    pt_gateway_2c2p;

/* Adding a gateway: its file, and a line here. */
static const struct pt_gateway *const gateways[] = {
    &pt_gateway_alipay,
    &pt_gateway_wechat,
    &pt_gateway_stripe,
    &pt_gateway_2c2p,
};

#define NGATEWAYS ((int)(sizeof gateways / sizeof gateways[0]))
_Static_assert(NGATEWAYS <= PT_GW_MAX, "raise PT_GW_MAX in gateway.h");

int pt_gateway_count(void)
{
    return NGATEWAYS;
}

const struct pt_gateway *pt_gateway_at(int i)
{
    return i >= 0 && i < NGATEWAYS ? gateways[i] : NULL;
}

int pt_gateway_index(const char *name)
{
    for (int i = 0; name && i < NGATEWAYS; i++)
        if (strcmp(gateways[i]->name, name) == 0)
            return i;
    return -1;
}

const struct pt_gateway *pt_gateway_find(const char *name)
{
    return pt_gateway_at(pt_gateway_index(name));
}

const struct pt_gateway *pt_gateway_by_route(const char *path)
{
    for (int i = 0; path && i < NGATEWAYS; i++)
        if (gateways[i]->notify_route && strcmp(gateways[i]->notify_route, path) == 0)
            return gateways[i];
    return NULL;
}

const struct pt_gw_method *pt_gateway_method(const struct pt_gateway *gw, const char *name)
{
    for (const struct pt_gw_method *m = gw ? gw->methods : NULL; m && m->name && name; m++)
        if (strcmp(m->name, name) == 0)
            return m;
    return NULL;
}

int pt_gateway_has_method(const struct pt_gateway *gw, const char *method)
{
    return pt_gateway_method(gw, method) != NULL;
}

const struct pt_gw_method *pt_gateway_lookup(const char *gateway, const char *method)
{
    return pt_gateway_method(pt_gateway_find(gateway), method);
}

int pt_gateway_method_named(const char *gateway, size_t n, const char *method)
{
    for (int i = 0; i < NGATEWAYS; i++)
        if (strlen(gateways[i]->name) == n && strncmp(gateways[i]->name, gateway, n) == 0)
            return pt_gateway_has_method(gateways[i], method);
    return 0;
}

void pt_gateway_method_pairs(char *out, size_t cap)
{
    int total = 0, k = 0;
    for (int i = 0; i < NGATEWAYS; i++)
        for (const struct pt_gw_method *m = gateways[i]->methods; m->name; m++)
            total++;
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < NGATEWAYS; i++)
        for (const struct pt_gw_method *m = gateways[i]->methods; m->name && o < cap; m++, k++)
            o += (size_t)snprintf(out + o, cap - o, "%s%s.%s",
                                  k == 0           ? ""
                                  : k == total - 1 ? " or "
                                                   : ", ",
                                  gateways[i]->name, m->name);
}

/* "a, b, c or d", built once (the table never changes). */
static char names_text[PT_GW_MAX * 16];

static void names_once(void)
{
    size_t o = 0;
    for (int i = 0; i < NGATEWAYS; i++)
        o += (size_t)snprintf(names_text + o, sizeof names_text - o, "%s%s",
                              i == 0               ? ""
                              : i == NGATEWAYS - 1 ? " or "
                                                   : ", ",
                              gateways[i]->name);
}

int pt_gateway_bill_offset_min(const char *name)
{
    const struct pt_gateway *gw = name ? pt_gateway_find(name) : NULL;
    return gw ? gw->bill_offset_min : -1;
}

const char *pt_gateway_names(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, names_once);
    return names_text;
}

const char *pt_outcome_name(enum pt_outcome o)
{
    switch (o) {
    case PT_OUTCOME_SUCCESS:
        return "SUCCESS";
    case PT_OUTCOME_DECLINED:
        return "DECLINED";
    case PT_OUTCOME_PENDING:
        return "PENDING";
    case PT_OUTCOME_CANCELED:
        return "CANCELED";
    case PT_OUTCOME_NOT_FOUND:
        return "NOT_FOUND";
    case PT_OUTCOME_AMBIGUOUS:
        return "AMBIGUOUS";
    }
    return "?";
}

void pt_gw_config_free(struct pt_gw_config *cfg)
{
    if (!cfg)
        return;
    pt_pk_free(cfg->private_key);
    pt_pk_free(cfg->peer_key);
    pt_gw_keyring_destroy(cfg->peer_keys);
    /* Every secret lives in the struct itself (secret, webhook_secret,
     * apiv2_key): wiping it whole wipes them all. */
    pt_zeroize(cfg, sizeof *cfg);
}

static int covered(const struct pt_gateway *gw, const char *currency, char beyond[4])
{
    for (const char *const *c = gw->bill_currencies; *c; c++)
        if (strcmp(*c, currency) == 0)
            return 1;
    snprintf(beyond, 4, "%s", currency);
    return 0;
}

int pt_gateway_bill_covers(const struct pt_gateway *gw, const char (*listed)[4], int n,
                           char beyond[4])
{
    beyond[0] = '\0';
    if (!gw || !gw->bill_currencies)
        return 1;
    for (int i = 0; i < n; i++)
        if (!covered(gw, listed[i], beyond))
            return 0;
    for (const char *const *c = gw->default_currencies; !n && c && *c; c++)
        if (!covered(gw, *c, beyond))
            return 0;
    return 1;
}

int pt_gateway_takes_currency(const struct pt_gateway *gw, const char (*listed)[4], int n,
                              const char *currency)
{
    if (n > 0) {
        for (int i = 0; i < n; i++)
            if (strcmp(listed[i], currency) == 0)
                return 1;
        return 0;
    }
    if (!gw || !gw->default_currencies)
        return 1;
    for (const char *const *c = gw->default_currencies; *c; c++)
        if (strcmp(*c, currency) == 0)
            return 1;
    return 0;
}

const char *pt_gateway_amount_unit(const struct pt_gateway *gw, const char *currency,
                                   struct pt_money_unit *u)
{
    if (pt_money_iso_unit(currency, u) != PT_OK) {
        *u = (struct pt_money_unit){.exp = 0, .step = 1};
        return NULL;
    }
    return gw && gw->amount_unit ? gw->amount_unit(currency, u) : NULL;
}

int pt_gateway_amount_ok(const struct pt_gateway *gw, const char *currency, int64_t amount,
                         char *msg, size_t cap)
{
    struct pt_money_unit u;
    int64_t units;
    const char *rule = pt_gateway_amount_unit(gw, currency, &u);
    if (pt_money_to_unit(amount, currency, &u, &units) == PT_OK)
        return 1;
    int64_t q = pt_money_unit_quantum(currency, &u);
    const char *name = gw ? gw->name : "the gateway";
    if (q > 1 && amount % q != 0)
        snprintf(
            msg, cap, "%lld %.3s cannot be sent to %s: %s (the amount must be a multiple of %lld)",
            (long long)amount, currency, name, rule ? rule : "finer than its unit", (long long)q);
    else
        snprintf(msg, cap, "%lld %.3s cannot be sent to %s: out of the range it takes",
                 (long long)amount, currency, name);
    return 0;
}

int pt_gw_currency_allowed(const struct pt_gw_config *cfg, const char *currency)
{
    return pt_gateway_takes_currency(pt_gateway_find(cfg->name), cfg->currencies, cfg->ncurrencies,
                                     currency);
}

/* ---- gwcommon.h ---------------------------------------------------------- */

int pt__amount_out(const struct pt_gateway *gw, const char *cur, int64_t minor, int64_t *units)
{
    struct pt_money_unit u;
    pt_gateway_amount_unit(gw, cur, &u);
    return pt_money_to_unit(minor, cur, &u, units);
}

int pt__amount_decimal(const struct pt_gateway *gw, const char *cur, int64_t minor,
                       enum pt_money_format fmt, char *out, size_t cap)
{
    struct pt_money_unit u;
    int64_t units = 0;
    pt_gateway_amount_unit(gw, cur, &u);
    int rc = pt_money_to_unit(minor, cur, &u, &units);
    return rc == PT_OK ? pt_money_format(units, u.exp, fmt, out, cap) : rc;
}

int pt__amount_in(const struct pt_gateway *gw, const char *cur, int64_t units, int64_t *minor)
{
    struct pt_money_unit u;
    pt_gateway_amount_unit(gw, cur, &u);
    return pt_money_from_unit(units, cur, &u, minor);
}

int pt__gw_load_key(const char *gw, const char *key, const char *path, pt_gw_random_fn rnd,
                    void *ctx, struct pt_pk **pk, char *err, size_t errlen)
{
    char e[PT_PK_ERR_MAX];
    int rc = pt_pk_load_file(path, rnd, ctx, pk, e, sizeof e);
    if (rc != PT_OK)
        snprintf(err, errlen, "gateways.%s.%s: %s", gw, key, e);
    return rc;
}

static const char *holds(enum pt_pk_kind kind)
{
    return kind == PT_PK_PRIVATE ? "a private key"
           : kind == PT_PK_CERT  ? "a certificate"
                                 : "a public key";
}

int pt__gw_load_private_key(const char *gw, const char *key, const char *path, pt_gw_random_fn rnd,
                            void *ctx, struct pt_gw_config *o, char *err, size_t errlen)
{
    struct pt_pk *pk = NULL;
    int rc = pt__gw_load_key(gw, key, path, rnd, ctx, &pk, err, errlen);
    if (rc != PT_OK)
        return rc;
    /* A key that loads may still not sign: a public key in its place used
     * to pass, and the first charge then failed with "invalid argument". */
    rc = PT_EPARSE;
    int probe = pt_pk_kind(pk) == PT_PK_PRIVATE ? pt_pk_probe(pk, pk) : PT_EINVAL;
    if (pt_pk_kind(pk) != PT_PK_PRIVATE)
        snprintf(err, errlen,
                 "gateways.%s.%s: %s holds %s, not a private key: payterm signs its requests "
                 "with the merchant's private key (its public half is the one given to the "
                 "gateway)",
                 gw, key, path, holds(pt_pk_kind(pk)));
    else if (probe != PT_OK)
        snprintf(err, errlen, "gateways.%s.%s: %s: %s", gw, key, path,
                 probe == PT_ESIG ? "a probe message signed with this key does not verify with "
                                    "it (the key is damaged)"
                                  : "this key does not sign (a damaged key?)");
    else
        rc = PT_OK;
    if (rc != PT_OK) {
        pt_pk_free(pk);
        return rc;
    }
    o->private_key = pk;
    snprintf(o->signing_key, sizeof o->signing_key, "gateways.%s.%s", gw, key);
    pt__copy(o->signing_file, sizeof o->signing_file, path);
    return PT_OK;
}

int pt__gw_load_peer_key(const char *gw, const char *key, const char *path,
                         const struct pt_gw_config *o, pt_gw_random_fn rnd, void *ctx,
                         struct pt_pk **pk, char *err, size_t errlen)
{
    int rc = pt__gw_load_key(gw, key, path, rnd, ctx, pk, err, errlen);
    if (rc != PT_OK)
        return rc;
    rc = PT_EPARSE;
    if (pt_pk_kind(*pk) == PT_PK_PRIVATE)
        snprintf(err, errlen,
                 "gateways.%s.%s: %s holds a private key, not the gateway's public key or "
                 "certificate (and a private key does not belong in a file that is not held to "
                 "mode 0600)",
                 gw, key, path);
    /* The merchant's own public half here (Alipay's console shows both
     * keys side by side) would make every answer the gateway signs fail
     * verification. */
    else if (o && o->private_key && pt_pk_probe(o->private_key, *pk) == PT_OK)
        snprintf(err, errlen,
                 "gateways.%s.%s: %s is the public half of %s, the merchant's own key: it must be "
                 "the key %s signs with",
                 gw, key, path, o->signing_key, gw);
    else
        rc = PT_OK;
    if (rc != PT_OK) {
        pt_pk_free(*pk);
        *pk = NULL;
    }
    return rc;
}

const char *pt_gw_build_error(const struct pt_gw_config *cfg, int rc, char *buf, size_t len)
{
    if (rc == PT_EKEY && cfg && cfg->signing_key[0] && cfg->private_key)
        snprintf(buf, len, "%s %s does not sign: it holds %s (payterm init checks every key)",
                 cfg->signing_key, cfg->signing_file,
                 pt_pk_kind(cfg->private_key) == PT_PK_PRIVATE
                     ? "a private key that failed to sign"
                     : holds(pt_pk_kind(cfg->private_key)));
    else
        snprintf(buf, len, "%s", pt_strerror(rc));
    return buf;
}

int pt__gw_load_secret(const char *gw, const char *key, const char *path, unsigned char *buf,
                       size_t cap, size_t *len, char *err, size_t errlen)
{
    size_t n = 0;
    int rc = pt_secret_read_line(path, buf, cap, &n);
    if (rc == PT_ENOTFOUND || rc == PT_EIO) {
        snprintf(err, errlen, "gateways.%s.%s: %s: cannot open: %s", gw, key, path,
                 strerror(errno));
        return PT_EIO;
    }
    if (rc != PT_OK || n == 0) { /* too big: buf already wiped */
        snprintf(err, errlen, "gateways.%s.%s: %s: expected 1 to %zu bytes of secret", gw, key,
                 path, cap - 1);
        return PT_EPARSE;
    }
    *len = n;
    return PT_OK;
}

int pt__same_id(const char *notified, const char *configured)
{
    return notified && *notified && configured && strcmp(notified, configured) == 0;
}

void pt__copy(char *dst, size_t dstlen, const char *src)
{
    if (!dstlen)
        return;
    size_t n = src ? strlen(src) : 0;
    if (n >= dstlen)
        n = dstlen - 1;
    if (n)
        memcpy(dst, src, n);
    dst[n] = '\0';
}

void pt__result(struct pt_gw_result *r, enum pt_outcome o, const char *code, const char *msg)
{
    r->outcome = o;
    pt__copy(r->code, sizeof r->code, code);
    pt__copy(r->message, sizeof r->message, msg);
}

int pt__id_safe(const char *s)
{
    if (!s || !*s)
        return 0;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return 0;
    }
    return 1;
}

int pt__request_start(struct pt_http_request *r, const char *method, const char *base,
                      const char *path)
{
    memset(r, 0, sizeof *r);
    pt__copy(r->method, sizeof r->method, method);
    size_t bl = strlen(base), pl = strlen(path);
    while (bl > 0 && base[bl - 1] == '/' && pl > 0 && path[0] == '/')
        bl--; /* "https://host/" + "/v1/x" */
    r->url = malloc(bl + pl + 1);
    if (!r->url)
        return PT_ENOMEM;
    memcpy(r->url, base, bl);
    memcpy(r->url + bl, path, pl + 1);
    return PT_OK;
}

void pt__request_body(struct pt_http_request *r, char *body, size_t len)
{
    free(r->body);
    r->body = body;
    r->body_len = len;
}

const char *pt__jstr(const cJSON *obj, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int pt__currency_upper(const char *in, char out[4])
{
    if (!in || strlen(in) != 3)
        return PT_EPARSE;
    for (int i = 0; i < 3; i++) {
        char c = in[i];
        if (c >= 'a' && c <= 'z')
            c = (char)(c - 'a' + 'A');
        if (c < 'A' || c > 'Z')
            return PT_EPARSE;
        out[i] = c;
    }
    out[3] = '\0';
    return PT_OK;
}

int pt__within_tolerance(const struct pt_gw_env *env, int64_t t_s, int past_only)
{
    if (!env || env->tolerance_s < 0)
        return 1;
    int64_t tol = env->tolerance_s ? env->tolerance_s : 300;
    int64_t age = env->now_ms / 1000 - t_s;
    return age <= tol && (past_only || age >= -tol);
}
