/*
 * config.h - payterm's configuration (SPEC section 10) as plain data.
 *
 * The struct is what core's policies read (limits, timeouts, which gateways
 * exist); firmware/config_load.c fills it from JSON files and validates every
 * key.  Defaults are set by pt_config_defaults() and listed in the README.
 */
#ifndef PT_CONFIG_H_
#define PT_CONFIG_H_

#include <stddef.h>
#include <stdint.h>

#include "gateway.h"
#include "log.h"

#define PT_CFG_PATH_MAX 512
#define PT_CFG_STR_MAX 256
#define PT_CFG_MAX_CURRENCIES 32
#define PT_CFG_MAX_AGES 16
#define PT_CFG_MAX_ORIGINS 16
#define PT_CFG_ORIGIN_MAX 256 /* bytes of one origin, with the NUL */

struct pt_cfg_offline_limit {
    char currency[4];
    int64_t max_amount; /* one charge, minor units */
    int64_t max_total;  /* all queued charges, minor units */
};

struct pt_cfg_offline_age {
    char gateway[16];
    char method[16];
    int64_t max_age_s;
};

/* log.max_bytes: what a --log-file and its FILE.1 hold at most unless the
 * configuration says otherwise (a board's /var/log is often RAM), and the
 * least a limit may be (a few hundred lines a file). */
#define PT_CONFIG_LOG_MAX_BYTES (1024 * 1024)
#define PT_CONFIG_LOG_MIN_BYTES (16 * 1024)

#define PT_CFG_LANE_MAX 33 /* lane_id: 1..32 of [A-Za-z0-9_.-] */

struct pt_config {
    char data_dir[PT_CFG_PATH_MAX];
    char listen[128];
    char notify_listen[128]; /* "" = no second listener */
    char api_token_file[PT_CFG_PATH_MAX];
    enum pt_log_level log_level;
    int64_t log_max_bytes;  /* log.max_bytes: a --log-file and FILE.1 together; 0 = no limit */
    int synchronous_normal; /* storage.synchronous = "NORMAL" */
    int wal_vfs_off;        /* storage.wal_vfs = false: SQLite's own VFS (pt_store_set_wal_vfs) */

    /* store (SPEC 16): "sqlite" (default: data_dir/payterm.db) or
     * "postgresql" (one database for a shop's lanes). */
    int store_postgresql;
    char store_dsn[PT_CFG_PATH_MAX];
    char store_password_file[PT_CFG_PATH_MAX];
    char lane_id[PT_CFG_LANE_MAX]; /* this daemon's name among the lanes */
    int store_fallback_local;      /* store.fallback = "local" */

    int64_t idem_ttl_s;
    int64_t idem_lock_timeout_s;
    int64_t max_amount;

    struct pt_cfg_offline_limit offline_limits[PT_CFG_MAX_CURRENCIES];
    int n_offline_limits;
    int64_t offline_max_count;
    struct pt_cfg_offline_age offline_ages[PT_CFG_MAX_AGES];
    int n_offline_ages;

    int64_t sync_interval_s;
    /* SPEC 18: an idle daemon asks every configured gateway this often
     * whether it is reachable (a gateway that went away is seen). */
    int64_t sync_probe_idle_s;
    int64_t sync_max_attempts;
    int64_t sync_backoff_base_ms;
    int64_t sync_backoff_max_ms;
    int64_t sync_resolve_timeout_s;
    int64_t sync_request_timeout_ms;
    /* SPEC 19: the daily reconciliation of each gateway's previous bill
     * date runs after this time of day, minutes, in the gateway's bill
     * time zone (reconcile.after "HH:MM", default 10:30); reconcile.daily
     * false turns it off (runs are then asked for: POST
     * /v1/reconciliations, payterm reconcile). */
    int reconcile_after_min;
    int reconcile_daily;
    /* SPEC 19: charges and refunds final longer ago than this many days
     * (and closed, reconciled) move to data_dir/archive (default 400). */
    int64_t retention_days;

    char ca_file[PT_CFG_PATH_MAX];

    /* How long a QR code or payment page stays payable (SPEC 18): the
     * expiry its create carries, and when payterm closes it. */
    int64_t qr_timeout_s;

    /* cors_origins: browser origins allowed to call the API (SPEC 15),
     * serialized as browsers send them ("https://kiosk.example:8443"). */
    char cors_origins[PT_CFG_MAX_ORIGINS][PT_CFG_ORIGIN_MAX];
    int n_cors_origins;

    /* gateways.<name>, by the registry's index (gateway.h). */
    struct pt_gw_settings gw[PT_GW_MAX];
};

/* How long after sync.request_timeout_ms a gateway call still counts as in
 * flight (its outcome is being recorded): a charge being sent is not picked
 * up by another thread before then (sync.c), and an idempotency lock must
 * not expire before then either (pt_config_lock_timeout_problem). */
#define PT_CONFIG_CALL_MARGIN_MS 5000

/* Fills cfg with the documented defaults. */
void pt_config_defaults(struct pt_config *cfg);

/* Finds the offline limit for a currency; NULL when the currency has none. */
const struct pt_cfg_offline_limit *pt_config_offline_limit(const struct pt_config *cfg,
                                                           const char *currency);
/* Offline age limit for gateway+method in seconds; -1 when none configured. */
int64_t pt_config_offline_max_age(const struct pt_config *cfg, const char *gateway,
                                  const char *method);

/* True when the configured gateway takes charges in currency: the list in
 * gateways.<name>.currencies, or the gateway's default currencies. */
int pt_config_currency_allowed(const struct pt_config *cfg, const char *gateway,
                               const char *currency);

/* 1 when the configured gateway's bill covers every currency it may charge
 * in (SPEC 19: cross-border Alipay is not reconciled); else 0 with the
 * first currency beyond it in beyond. */
int pt_config_bill_covers(const struct pt_config *cfg, const char *gateway, char beyond[4]);

/* True when the named gateway is configured. */
int pt_config_gateway_configured(const struct pt_config *cfg, const char *gateway);

/* The settings of a gateway by name; NULL when it is not one payterm knows. */
struct pt_gw_settings *pt_config_gateway(struct pt_config *cfg, const char *gateway);
const struct pt_gw_settings *pt_config_gateway_c(const struct pt_config *cfg, const char *gateway);

/*
 * SPEC 18: idempotency.lock_timeout_s must be above sync.request_timeout_ms
 * + PT_CONFIG_CALL_MARGIN_MS.  A lock that expires while its request still
 * waits for the gateway lets a retry take the key over, and the retry is
 * answered 202 PROCESSING for a charge that then succeeds.  Returns 0 when
 * cfg keeps the rule; otherwise 1, with why (len bytes) saying what is
 * wrong, both keys and their values named.
 */
int pt_config_lock_timeout_problem(const struct pt_config *cfg, char *why, size_t len);

/* Path of the database inside data_dir. */
void pt_config_db_path(const struct pt_config *cfg, char *out, size_t outlen);

/* The store's options for cfg: the backend, the SQLite file at path (from
 * pt_config_db_path) or the PostgreSQL DSN, password file and lane.  The
 * strings stay cfg's and path's. */
struct pt_store_options;
void pt_config_store_options(const struct pt_config *cfg, const char *path,
                             struct pt_store_options *o);

/* PT_STORE_CAP_* (store.h) of cfg's backend, before anything is opened:
 * what firmware asks instead of the backend's name. */
unsigned pt_config_store_caps(const struct pt_config *cfg);

/*
 * How the daemon's threads open the lane's store, one recipe for all: the
 * options above, and
 *  - storage.wal_vfs from the process-wide switch the daemon set once
 *    (pt_store_set_wal_vfs), not per store;
 *  - with store.fallback "local", a server out of reach is no error at open
 *    (connect_later): the lane starts, and queues on its own file;
 *  - PT_LANE_OPEN_LATER (the API's pool, the syncer): the daemon created the
 *    database, so a database file found gone is an error, never a new empty
 *    one (SPEC 18).
 */
enum pt_lane_open { PT_LANE_OPEN_FIRST, PT_LANE_OPEN_LATER };
void pt_config_lane_store_options(const struct pt_config *cfg, const char *path,
                                  enum pt_lane_open when, struct pt_store_options *o);

/* The lane's own queue while the store server is out of reach
 * (store.fallback "local", SPEC 16): the SQLite file at path, opened into
 * *local; *local is NULL when the lane has none.  PT_OK, or the error
 * with a sentence in err. */
struct pt_store;
int pt_config_open_local_queue(const struct pt_config *cfg, const char *path,
                               struct pt_store **local, char *err, size_t errlen);

#endif
