/*
 * gw_config.c - pt_gw_config from the configuration file (see gw_config.h).
 */
#include "gw_config.h"
#include "err.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void copy(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src);
}

/* Reads a secret file into buf (at most cap - 1 bytes), trailing newlines dropped. */
static int read_secret(const char *key, const char *path, unsigned char *buf, size_t cap,
                       size_t *len, char *err, size_t errlen)
{
    size_t n = 0;
    int rc = pt_secret_read(path, buf, cap, &n);
    if (rc == PT_ENOTFOUND || rc == PT_EIO) {
        snprintf(err, errlen, "%s: %s: cannot open: %s", key, path, strerror(errno));
        return PT_EIO;
    }
    if (rc == PT_ETOOBIG)
        n = cap;
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    if (n == 0 || n >= cap) {
        pt_zeroize(buf, cap);
        snprintf(err, errlen, "%s: %s: expected 1 to %zu bytes of secret", key, path, cap - 1);
        return PT_EPARSE;
    }
    *len = n;
    return PT_OK;
}

static int key(const char *name, const char *path, pt_random_fn rnd, void *ctx,
               struct pt_pk **pk, char *err, size_t errlen)
{
    char e[PT_PK_ERR_MAX];
    int rc = pt_pk_load_file(path, rnd, ctx, pk, e, sizeof e);
    if (rc != PT_OK)
        snprintf(err, errlen, "%s: %s", name, e);
    return rc;
}

static int load_alipay(const struct pt_cfg_alipay *a, pt_random_fn rnd, void *ctx,
                       struct pt_gw_config *o, char *err, size_t errlen)
{
    copy(o->endpoint, sizeof o->endpoint, a->endpoint);
    copy(o->app_id, sizeof o->app_id, a->app_id);
    copy(o->notify_url, sizeof o->notify_url, a->notify_url);
    o->barcode_timeout_s = (int)a->barcode_timeout_s;
    copy(o->merchant_id, sizeof o->merchant_id, a->seller_id);
    for (int i = 0; i < a->n_currencies && i < PT_GW_MAX_CURRENCIES; i++)
        memcpy(o->currencies[o->ncurrencies++], a->currencies[i], 4);
    memcpy(o->settle_currency, a->settle_currency, 4);
    int rc = key("gateways.alipay.private_key_file", a->private_key_file, rnd, ctx,
                 &o->private_key, err, errlen);
    if (rc == PT_OK)
        rc = key("gateways.alipay.alipay_public_key_file", a->alipay_public_key_file, rnd, ctx,
                 &o->peer_key, err, errlen);
    return rc;
}

static int load_wechat(const struct pt_cfg_wechat *w, pt_random_fn rnd, void *ctx,
                       struct pt_gw_config *o, char *err, size_t errlen)
{
    copy(o->endpoint, sizeof o->endpoint, w->endpoint);
    copy(o->app_id, sizeof o->app_id, w->appid);
    copy(o->merchant_id, sizeof o->merchant_id, w->mchid);
    copy(o->serial_no, sizeof o->serial_no, w->serial_no);
    copy(o->platform_serial, sizeof o->platform_serial, w->platform_serial);
    copy(o->notify_url, sizeof o->notify_url, w->notify_url);
    int rc = key("gateways.wechat.private_key_file", w->private_key_file, rnd, ctx,
                 &o->private_key, err, errlen);
    if (rc == PT_OK)
        rc = key("gateways.wechat.platform_public_key_file", w->platform_public_key_file, rnd,
                 ctx, &o->peer_key, err, errlen);
    if (rc == PT_OK && !o->platform_serial[0] && !pt_pk_serial(o->peer_key)[0]) {
        snprintf(err, errlen, "gateways.wechat.platform_serial: needed when "
                              "platform_public_key_file is a public key, not a certificate");
        rc = PT_ECONFIG;
    }
    if (rc == PT_OK)
        rc = read_secret("gateways.wechat.apiv3_key_file", w->apiv3_key_file, o->secret,
                         sizeof o->secret, &o->secret_len, err, errlen);
    if (rc == PT_OK && o->secret_len != 32) {
        snprintf(err, errlen, "gateways.wechat.apiv3_key_file: %s: the APIv3 key is 32 bytes, "
                              "this file holds %zu", w->apiv3_key_file, o->secret_len);
        rc = PT_EPARSE;
    }
    return rc;
}

static int load_stripe(const struct pt_cfg_stripe *s, struct pt_gw_config *o, char *err,
                       size_t errlen)
{
    copy(o->endpoint, sizeof o->endpoint, s->endpoint);
    int rc = read_secret("gateways.stripe.secret_key_file", s->secret_key_file, o->secret,
                         sizeof o->secret, &o->secret_len, err, errlen);
    if (rc == PT_OK && s->webhook_secret_file[0])
        rc = read_secret("gateways.stripe.webhook_secret_file", s->webhook_secret_file,
                         o->webhook_secret, sizeof o->webhook_secret, &o->webhook_secret_len,
                         err, errlen);
    return rc;
}

static int load_2c2p(const struct pt_cfg_2c2p *t, struct pt_gw_config *o, char *err,
                     size_t errlen)
{
    copy(o->endpoint, sizeof o->endpoint, t->endpoint);
    copy(o->merchant_id, sizeof o->merchant_id, t->merchant_id);
    copy(o->notify_url, sizeof o->notify_url, t->notify_url);
    return read_secret("gateways.2c2p.secret_key_file", t->secret_key_file, o->secret,
                       sizeof o->secret, &o->secret_len, err, errlen);
}

int pt_gw_config_load(const struct pt_config *cfg, const char *gateway, pt_random_fn rnd,
                      void *rnd_ctx, struct pt_gw_config *out, char *err, size_t errlen)
{
    int rc = PT_ECONFIG;
    memset(out, 0, sizeof *out);
    if (!pt_config_gateway_configured(cfg, gateway)) {
        snprintf(err, errlen, "gateways.%s: not configured", gateway);
        return PT_ECONFIG;
    }
    copy(out->name, sizeof out->name, gateway);
    if (strcmp(gateway, "alipay") == 0)
        rc = load_alipay(&cfg->alipay, rnd, rnd_ctx, out, err, errlen);
    else if (strcmp(gateway, "wechat") == 0)
        rc = load_wechat(&cfg->wechat, rnd, rnd_ctx, out, err, errlen);
    else if (strcmp(gateway, "stripe") == 0)
        rc = load_stripe(&cfg->stripe, out, err, errlen);
    else if (strcmp(gateway, "2c2p") == 0)
        rc = load_2c2p(&cfg->c2p, out, err, errlen);
    if (rc != PT_OK)
        pt_gw_config_free(out);
    return rc;
}
