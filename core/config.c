/*
 * config.c - configuration defaults and lookups (the loader is in
 * firmware/config_load.c).
 */
#include "config.h"
#include "err.h"
#include "store.h"

#include <stdio.h>
#include <string.h>

void pt_config_defaults(struct pt_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->data_dir, sizeof cfg->data_dir, "/var/lib/payterm");
    snprintf(cfg->listen, sizeof cfg->listen, "127.0.0.1:8080");
    cfg->log_level = PT_LOG_INFO;
    cfg->log_max_bytes = PT_CONFIG_LOG_MAX_BYTES;
    cfg->idem_ttl_s = 86400;
    cfg->idem_lock_timeout_s = 60;
    cfg->max_amount = 10000000;
    cfg->offline_max_count = 500;
    /* Each method's own age limit (an auth code lives about a minute, a
     * Stripe idempotency key 24 h): gateway.h's method tables. */
    for (int g = 0; g < pt_gateway_count(); g++)
        for (const struct pt_gw_method *m = pt_gateway_at(g)->methods; m->name; m++)
            if (m->offline_max_age_s > 0 && cfg->n_offline_ages < PT_CFG_MAX_AGES) {
                struct pt_cfg_offline_age *a = &cfg->offline_ages[cfg->n_offline_ages++];
                snprintf(a->gateway, sizeof a->gateway, "%s", pt_gateway_at(g)->name);
                snprintf(a->method, sizeof a->method, "%s", m->name);
                a->max_age_s = m->offline_max_age_s;
            }
    cfg->sync_interval_s = 5;
    cfg->sync_probe_idle_s = 60;
    cfg->reconcile_after_min = 10 * 60 + 30;
    cfg->reconcile_daily = 1;
    cfg->retention_days = 400;
    cfg->sync_max_attempts = 3;
    cfg->sync_backoff_base_ms = 500;
    cfg->sync_backoff_max_ms = 60000;
    cfg->sync_resolve_timeout_s = 86400;
    cfg->sync_request_timeout_ms = 15000;
    cfg->qr_timeout_s = 300;
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

struct pt_gw_settings *pt_config_gateway(struct pt_config *cfg, const char *gateway)
{
    int i = pt_gateway_index(gateway);
    return i < 0 ? NULL : &cfg->gw[i];
}

const struct pt_gw_settings *pt_config_gateway_c(const struct pt_config *cfg, const char *gateway)
{
    int i = pt_gateway_index(gateway);
    return i < 0 ? NULL : &cfg->gw[i];
}

int pt_config_gateway_configured(const struct pt_config *cfg, const char *gateway)
{
    const struct pt_gw_settings *g = pt_config_gateway_c(cfg, gateway);
    return g && g->configured;
}

int pt_config_bill_covers(const struct pt_config *cfg, const char *gateway, char beyond[4])
{
    const struct pt_gw_settings *g = pt_config_gateway_c(cfg, gateway);
    beyond[0] = '\0';
    return !g ||
           pt_gateway_bill_covers(pt_gateway_find(gateway), g->currencies, g->ncurrencies, beyond);
}

int pt_config_currency_allowed(const struct pt_config *cfg, const char *gateway,
                               const char *currency)
{
    const struct pt_gw_settings *g = pt_config_gateway_c(cfg, gateway);
    const struct pt_gateway *gw = pt_gateway_find(gateway);
    return g && gw && pt_gateway_takes_currency(gw, g->currencies, g->ncurrencies, currency);
}

int pt_config_lock_timeout_problem(const struct pt_config *cfg, char *why, size_t len)
{
    int64_t lock_ms = cfg->idem_lock_timeout_s * 1000;
    int64_t call_ms = cfg->sync_request_timeout_ms + PT_CONFIG_CALL_MARGIN_MS;
    if (lock_ms > call_ms)
        return 0;
    snprintf(why, len,
             "%lld s must be above sync.request_timeout_ms (%lld ms) + %d s, or a retry takes "
             "over the key of a charge still at its gateway and is answered 202 PROCESSING for "
             "a charge that succeeds",
             (long long)cfg->idem_lock_timeout_s, (long long)cfg->sync_request_timeout_ms,
             PT_CONFIG_CALL_MARGIN_MS / 1000);
    return 1;
}

void pt_config_db_path(const struct pt_config *cfg, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/payterm.db", cfg->data_dir);
}

unsigned pt_config_store_caps(const struct pt_config *cfg)
{
    struct pt_store_options o;
    pt_config_store_options(cfg, "", &o);
    return pt_store_caps_of(&o);
}

void pt_config_lane_store_options(const struct pt_config *cfg, const char *path,
                                  enum pt_lane_open when, struct pt_store_options *o)
{
    pt_config_store_options(cfg, path, o);
    unsigned caps = pt_store_caps_of(o);
    o->no_wal_vfs = 0; /* pt_store_set_wal_vfs, the daemon's */
    o->connect_later = cfg->store_fallback_local && (caps & PT_STORE_CAP_SHARED);
    o->existing = when == PT_LANE_OPEN_LATER && (caps & PT_STORE_CAP_DATADIR_FILE);
}

int pt_config_open_local_queue(const struct pt_config *cfg, const char *path,
                               struct pt_store **local, char *err, size_t errlen)
{
    *local = NULL;
    if (!cfg->store_fallback_local || !(pt_config_store_caps(cfg) & PT_STORE_CAP_SHARED))
        return PT_OK;
    /* The lane's own file, as a lane without a server keeps it. */
    struct pt_store_options lo = {.path = path, .synchronous_normal = cfg->synchronous_normal};
    return pt_store_open(&lo, local, err, errlen);
}

void pt_config_store_options(const struct pt_config *cfg, const char *path,
                             struct pt_store_options *o)
{
    memset(o, 0, sizeof *o);
    o->path = path;
    o->synchronous_normal = cfg->synchronous_normal;
    o->no_wal_vfs = cfg->wal_vfs_off;
    if (cfg->store_postgresql) {
        o->backend = PT_STORE_POSTGRESQL;
        o->dsn = cfg->store_dsn;
        o->password_file = cfg->store_password_file[0] ? cfg->store_password_file : NULL;
        o->lane_id = cfg->lane_id[0] ? cfg->lane_id : NULL;
        o->claim_timeout_ms = cfg->idem_lock_timeout_s * 1000;
    }
}
