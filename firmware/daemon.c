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
#include "store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pt_daemon {
    struct pt_config cfg;
    char db_path[PT_CFG_PATH_MAX + 16];
    struct pt_store *st;
    struct pt_api *api;
    char token[256];
};

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

    struct pt_api_options ao = {
        .cfg = &d->cfg,
        .db_path = d->db_path,
        .intake = {.cfg = &d->cfg,
                   .idem = {.ttl_ms = d->cfg.idem_ttl_s * 1000,
                            .lock_timeout_ms = d->cfg.idem_lock_timeout_s * 1000,
                            .instance = instance}},
        .token = d->token[0] ? d->token : NULL,
    };
    if ((rc = pt_api_start(&ao, &d->api, err, errlen)) != PT_OK)
        goto fail;
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
    pt_api_stop(d->api);
    pt_store_close(d->st);
    pt_zeroize(d->token, sizeof d->token);
    free(d);
}
