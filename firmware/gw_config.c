/*
 * gw_config.c - pt_gw_config from the configuration file (see gw_config.h).
 *
 * What is common to every gateway (identifiers, endpoint, notify URL,
 * currencies) is copied here; the keys each gateway needs are loaded by its
 * own table's load() in core/gateways, which knows which files they are.
 */
#include "gw_config.h"
#include "err.h"

#include <stdio.h>
#include <string.h>

static void copy(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src);
}

int pt_gw_config_load(const struct pt_config *cfg, const char *gateway, pt_random_fn rnd,
                      void *rnd_ctx, struct pt_gw_config *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const struct pt_gateway *gw = pt_gateway_find(gateway);
    const struct pt_gw_settings *in = pt_config_gateway_c(cfg, gateway);
    if (!gw || !in || !in->configured) {
        snprintf(err, errlen, "gateways.%s: not configured", gateway);
        return PT_ECONFIG;
    }
    copy(out->name, sizeof out->name, gw->name);
    copy(out->endpoint, sizeof out->endpoint, in->endpoint);
    copy(out->app_id, sizeof out->app_id, in->app_id);
    copy(out->merchant_id, sizeof out->merchant_id, in->merchant_id);
    copy(out->serial_no, sizeof out->serial_no, in->serial_no);
    copy(out->platform_serial, sizeof out->platform_serial, in->platform_serial);
    copy(out->notify_url, sizeof out->notify_url, in->notify_url);
    copy(out->refund_endpoint, sizeof out->refund_endpoint, in->refund_endpoint);
    out->barcode_timeout_s = (int)in->barcode_timeout_s;
    out->utc_offset_min = in->utc_offset_min;
    out->ncurrencies = in->ncurrencies;
    memcpy(out->currencies, in->currencies, sizeof out->currencies);
    memcpy(out->settle_currency, in->settle_currency, sizeof out->settle_currency);
    int rc = gw->load(in, rnd, rnd_ctx, out, err, errlen);
    if (rc != PT_OK)
        pt_gw_config_free(out);
    return rc;
}
