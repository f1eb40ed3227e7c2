/*
 * daemon.c - wiring of the daemon (see daemon.h).
 */
#include "daemon.h"
#include "api.h"
#include "cli.h"
#include "config_load.h"
#include "crypto.h"
#include "err.h"
#include "linux.h"
#include "log.h"
#include "gw_config.h"
#include "metrics.h"
#include "store.h"
#include "sync.h"
#include "syncer.h"
#include "transport_curl.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pt_daemon {
    struct pt_config cfg;
    char db_path[PT_CFG_PATH_MAX + 16];
    struct pt_store *st;
    struct pt_api *api;
    char token[256];
    struct pt_gw_config gw[PT_MG__COUNT];
    int ngw;
    struct pt_curl *curl;
    struct pt_platform platform;
    struct pt_sync *sync;
    struct pt_syncer *syncer; /* guarded by mu: HTTP threads wake it */
    pthread_mutex_t mu;
};

static int random_cb(void *ctx, void *buf, size_t len)
{
    (void)ctx;
    return pt_linux_random(buf, len);
}

/* The sync engine and the API ask for a drain through the daemon, because
 * the syncer thread starts after both exist. */
static void wake_syncer(void *p)
{
    struct pt_daemon *d = p;
    pthread_mutex_lock(&d->mu);
    if (d->syncer)
        pt_syncer_wake(d->syncer);
    pthread_mutex_unlock(&d->mu);
}

static int online(void *p)
{
    struct pt_daemon *d = p;
    return d->sync && pt_sync_online(d->sync);
}

static int notify(void *p, struct pt_store *st, const char *gateway,
                  const struct pt_http_response *msg, struct pt_reply *out,
                  const char **content_type)
{
    struct pt_daemon *d = p;
    return pt_sync_notify(d->sync, st, gateway, msg, out, content_type);
}

/* Loads the keys of every configured gateway and starts the sync engine. */
static int start_sync(struct pt_daemon *d, char *err, size_t errlen)
{
    struct pt_sync_options so = {.cfg = &d->cfg, .wake = wake_syncer, .ctx = d};
    for (int i = 0; i < PT_MG__COUNT; i++) {
        const char *name = pt_metric_gateway_name(i);
        if (!pt_config_gateway_configured(&d->cfg, name))
            continue;
        int rc = pt_gw_config_load(&d->cfg, name, random_cb, NULL, &d->gw[i], err, errlen);
        if (rc)
            return rc;
        so.gw[i] = &d->gw[i];
        d->ngw++;
    }
    d->platform = *pt_linux_platform();
    if (d->ngw) {
        struct pt_curl_options co = {.ca_file = d->cfg.ca_file};
        int rc = pt_curl_new(&co, &d->curl);
        if (rc) {
            snprintf(err, errlen, "tls.ca_file %s: cannot be used as the trust store (%s)",
                     d->cfg.ca_file, pt_strerror(rc));
            return rc;
        }
        d->platform.transport = pt_curl_transport(d->curl);
    }
    so.platform = &d->platform;
    return pt_sync_new(&so, &d->sync);
}

/* Reads the API token: one line, trailing line breaks dropped. */
static int read_token(const char *path, char *out, size_t cap, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "api_token_file %s: cannot read: %s", path, strerror(errno));
        return PT_EIO;
    }
    size_t n = fread(out, 1, cap - 1, f);
    int more = fgetc(f) != EOF;
    fclose(f);
    out[n] = '\0';
    while (n && (out[n - 1] == '\n' || out[n - 1] == '\r'))
        out[--n] = '\0';
    if (more || n < 16) {
        pt_zeroize(out, cap);
        snprintf(err, errlen, "api_token_file %s: the token must be one line of 16-%zu characters",
                 path, cap - 1);
        return PT_ECONFIG;
    }
    for (size_t i = 0; i < n; i++) {
        if (out[i] < 0x21 || out[i] > 0x7e) {
            pt_zeroize(out, cap);
            snprintf(err, errlen, "api_token_file %s: the token must be visible ASCII", path);
            return PT_ECONFIG;
        }
    }
    return PT_OK;
}

int pt_daemon_start(const struct pt_config *cfg, struct pt_daemon **out, char *err,
                    size_t errlen)
{
    int rc = PT_ENOMEM;
    struct pt_daemon *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "out of memory");
        return rc;
    }
    d->cfg = *cfg;
    pthread_mutex_init(&d->mu, NULL);
    if ((rc = pt_config_check_secrets(&d->cfg, err, errlen)) != PT_OK)
        goto fail;
    rc = PT_EIO;
    if (pt_cli_ensure_dir("serve", d->cfg.data_dir)) {
        snprintf(err, errlen, "data_dir %s is not usable (see above)", d->cfg.data_dir);
        goto fail;
    }
    pt_config_db_path(&d->cfg, d->db_path, sizeof d->db_path);
    struct pt_store_options so = {.path = d->db_path,
                                  .synchronous_normal = d->cfg.synchronous_normal};
    if ((rc = pt_store_open(&so, &d->st, err, errlen)) != PT_OK)
        goto fail;
    if (d->cfg.api_token_file[0] &&
        (rc = read_token(d->cfg.api_token_file, d->token, sizeof d->token, err, errlen)))
        goto fail;

    /* A random token for this run: a lock held by another token belongs to
     * a process that is gone, and can be recovered at once. */
    int64_t instance = 0;
    if ((rc = pt_linux_random(&instance, sizeof instance)) != PT_OK) {
        snprintf(err, errlen, "no randomness from the kernel (getrandom)");
        goto fail;
    }

    if ((rc = start_sync(d, err, errlen)) != PT_OK)
        goto fail;

    struct pt_api_options ao = {
        .cfg = &d->cfg,
        .db_path = d->db_path,
        .intake = {.cfg = &d->cfg,
                   .idem = {.ttl_ms = d->cfg.idem_ttl_s * 1000,
                            .lock_timeout_ms = d->cfg.idem_lock_timeout_s * 1000,
                            .instance = instance}},
        .hooks = {.sync_now = wake_syncer, .online = online, .notify = notify, .ctx = d},
        .token = d->token[0] ? d->token : NULL,
    };
    if (d->ngw)
        ao.intake.online = pt_sync_online_ops(d->sync);
    if ((rc = pt_api_start(&ao, &d->api, err, errlen)) != PT_OK)
        goto fail;
    struct pt_syncer *y = NULL;
    rc = pt_syncer_start(d->sync, &d->cfg, d->db_path, pt_api_feed_wake, d->api, &y);
    pthread_mutex_lock(&d->mu);
    d->syncer = y;
    pthread_mutex_unlock(&d->mu);
    if (rc != PT_OK) {
        snprintf(err, errlen, "cannot start the sync engine: %s", pt_strerror(rc));
        goto fail;
    }
    *out = d;
    return PT_OK;
fail:
    pt_daemon_stop(d);
    return rc ? rc : PT_EIO;
}

struct pt_store *pt_daemon_store(struct pt_daemon *d)
{
    return d->st;
}

void pt_daemon_stop(struct pt_daemon *d)
{
    if (!d)
        return;
    /* The drain in progress first (it wakes the API's long-polls, so the API
     * must still exist), then the listeners (requests in flight finish and
     * may still use the sync engine), then connections and keys. */
    pthread_mutex_lock(&d->mu);
    struct pt_syncer *y = d->syncer;
    d->syncer = NULL;
    pthread_mutex_unlock(&d->mu);
    pt_syncer_stop(y);
    pt_api_stop(d->api);
    pt_sync_destroy(d->sync);
    pt_curl_destroy(d->curl);
    for (int i = 0; i < PT_MG__COUNT; i++)
        if (d->gw[i].name[0])
            pt_gw_config_free(&d->gw[i]);
    pt_store_close(d->st);
    pt_zeroize(d->token, sizeof d->token);
    pthread_mutex_destroy(&d->mu);
    free(d);
}
