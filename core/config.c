/*
 * config.c - configuration defaults and lookups (the loader is in
 * firmware/config_load.c).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

void pt_config_defaults(struct pt_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->data_dir, sizeof cfg->data_dir, "/var/lib/payterm");
    snprintf(cfg->listen, sizeof cfg->listen, "127.0.0.1:8080");
    cfg->log_level = PT_LOG_INFO;
    cfg->idem_ttl_s = 86400;
    cfg->idem_lock_timeout_s = 60;
    cfg->max_amount = 10000000;
    cfg->offline_max_count = 500;
    /* An Alipay barcode auth code is only valid for about a minute; a Stripe
     * idempotency key for 24 h, so queued card charges must go out within 23 h. */
    cfg->offline_ages[0] = (struct pt_cfg_offline_age){"alipay", "barcode", 60};
    cfg->offline_ages[1] = (struct pt_cfg_offline_age){"stripe", "card_on_file", 82800};
    cfg->n_offline_ages = 2;
    cfg->sync_interval_s = 5;
    cfg->sync_max_attempts = 3;
    cfg->sync_backoff_base_ms = 500;
    cfg->sync_backoff_max_ms = 60000;
    cfg->sync_resolve_timeout_s = 86400;
    cfg->sync_request_timeout_ms = 15000;
    snprintf(cfg->ca_file, sizeof cfg->ca_file, "/etc/ssl/certs/ca-certificates.crt");
}

const struct pt_cfg_offline_limit *pt_config_offline_limit(const struct pt_config *cfg,
                                                           const char *currency)
{
    for (int i = 0; i < cfg->n_offline_limits; i++)
        if (strcmp(cfg->offline_limits[i].currency, currency) == 0)
            return &cfg->offline_limits[i];
    return NULL;
}

int64_t pt_config_offline_max_age(const struct pt_config *cfg, const char *gateway,
                                  const char *method)
{
    for (int i = 0; i < cfg->n_offline_ages; i++)
        if (strcmp(cfg->offline_ages[i].gateway, gateway) == 0 &&
            strcmp(cfg->offline_ages[i].method, method) == 0)
            return cfg->offline_ages[i].max_age_s;
    return -1;
}

int pt_config_gateway_configured(const struct pt_config *cfg, const char *gateway)
{
    if (strcmp(gateway, "alipay") == 0)
        return cfg->alipay.configured;
    if (strcmp(gateway, "wechat") == 0)
        return cfg->wechat.configured;
    if (strcmp(gateway, "stripe") == 0)
        return cfg->stripe.configured;
    if (strcmp(gateway, "2c2p") == 0)
        return cfg->c2p.configured;
    return 0;
}

int pt_config_currency_allowed(const struct pt_config *cfg, const char *gateway,
                               const char *currency)
{
    if (strcmp(gateway, "alipay") != 0)
        return 1;
    /* Domestic Alipay settles CNY only; others need cross-border acquiring,
     * which the merchant states by listing them. */
    if (cfg->alipay.n_currencies == 0)
        return strcmp(currency, "CNY") == 0;
    for (int i = 0; i < cfg->alipay.n_currencies; i++)
        if (strcmp(cfg->alipay.currencies[i], currency) == 0)
            return 1;
    return 0;
}

void pt_config_db_path(const struct pt_config *cfg, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/payterm.db", cfg->data_dir);
}
