/*
 * sync_keys.c - peer key rotation (SPEC 8): a gateway's platform certificates, downloaded and
 * trusted.
 */
#include "sync_impl.h"

/* ---- peer key rotation (SPEC 8) ---------------------------------------------------------- */

/*
 * WeChat Pay rotates its platform key: a new certificate is published under
 * GET /v3/certificates, and from its switch on answers and notifications
 * carry its serial.  Downloads happen on this engine's threads because they
 * are gateway calls like any other (the same transport, timeouts and
 * reachability); storing what was downloaded is the daemon's business
 * (opt.keep_peer_cert).
 */

static int random_cb(void *ctx, void *buf, size_t len)
{
    const struct pt_platform *p = ctx;
    return p->random(p->ctx, buf, len);
}

/* Trusts the n certificates of a verified download and retires the
 * downloaded keys it no longer lists.  Returns how many were new. */
static int trust_certs(struct pt_sync *s, const struct pt_gateway *gw,
                       const struct pt_gw_config *cfg, const struct pt_gw_peer_cert *certs, int n,
                       int64_t now_s)
{
    char keep[PT_GW_MAX_PEER_KEYS][PT_GW_SERIAL_MAX], gone[PT_GW_MAX_PEER_KEYS][PT_GW_SERIAL_MAX];
    int added = 0;
    for (int i = 0; i < n; i++) {
        memcpy(keep[i], certs[i].serial, sizeof keep[i]);
        int known = pt_gw_keyring_has(cfg->peer_keys, certs[i].serial);
        struct pt_pk *pk = NULL;
        char err[PT_PK_ERR_MAX];
        int rc = pt_pk_load_mem("platform certificate", certs[i].pem, certs[i].pem_len, random_cb,
                                (void *)s->opt.platform, &pk, err, sizeof err);
        if (rc == PT_OK)
            rc = pt_gw_keyring_add(cfg->peer_keys, certs[i].serial, pk, certs[i].expire_s, 0);
        if (rc == PT_EEXIST)
            continue; /* configured: the operator's copy stays */
        if (rc != PT_OK) {
            pt_log_warn("%s: platform certificate %s not trusted: %s", gw->name, certs[i].serial,
                        pt_strerror(rc));
            continue;
        }
        if (known)
            continue;
        added++;
        pt_log_info("%s: platform certificate %s trusted (downloaded)", gw->name, certs[i].serial);
        if (s->opt.keep_peer_cert &&
            (rc = s->opt.keep_peer_cert(s->opt.ctx, gw->name, certs[i].serial, certs[i].pem,
                                        certs[i].pem_len)) != PT_OK)
            pt_log_warn("%s: platform certificate %s not stored (%s): it is trusted until the "
                        "daemon stops",
                        gw->name, certs[i].serial, pt_strerror(rc));
    }
    int ngone =
        pt_gw_keyring_retire(cfg->peer_keys, now_s, (const char(*)[PT_GW_SERIAL_MAX])keep, n, gone);
    for (int i = 0; i < ngone; i++) {
        pt_log_info("%s: platform certificate %s retired (expired, or no longer listed)", gw->name,
                    gone[i]);
        if (s->opt.keep_peer_cert)
            s->opt.keep_peer_cert(s->opt.ctx, gw->name, gone[i], NULL, 0);
    }
    return added;
}

/* One download of gateway i's peer certificates. */
static int refresh_keys(struct pt_sync *s, int i)
{
    const struct pt_gateway *gw = pt_gateway_at(i);
    const struct pt_gw_config *cfg = s->opt.gw[i];
    const struct pt_transport *t = s->opt.platform->transport;
    if (!gw || !cfg || !gw->build_keys || !gw->parse_keys || !cfg->peer_keys)
        return PT_OK; /* nothing rotates here */
    if (!t)
        return PT_ECONFIG;
    char n[33];
    pt__sync_nonce(s, n);
    struct pt_gw_env env = {.nonce = n};
    if (pt__sync_wall_ms(s, &env.now_ms) != PT_OK)
        return PT_ECLOCK; /* signed with the time, and certificates' validity is judged by it */
    struct pt_http_request req = {0};
    int rc = gw->build_keys(cfg, &env, &req);
    if (rc)
        return rc;
    struct pt_http_response resp = {0};
    rc = t->send(t->ctx, gw->name, &req, (int)s->opt.cfg->sync_request_timeout_ms, &resp);
    pt_http_request_free(&req);
    struct pt_gw_peer_cert certs[PT_GW_MAX_PEER_KEYS];
    int ncerts = 0;
    if (rc == PT_OK) {
        pt__sync_set_reach(s, gw->name, 1);
        rc = gw->parse_keys(cfg, &resp, &env, certs, PT_GW_MAX_PEER_KEYS, &ncerts);
        if (rc != PT_OK)
            pt_log_warn("%s: platform certificates refused (HTTP %d): %s", gw->name, resp.status,
                        pt_strerror(rc));
    } else if (rc == PT_ENOTSENT) {
        pt__sync_set_reach(s, gw->name, 0);
    }
    pt_http_response_free(&resp);
    if (rc == PT_OK) {
        int added = trust_certs(s, gw, cfg, certs, ncerts, env.now_ms / 1000);
        pt_log_debug("%s: platform certificates downloaded: %d listed, %d new, %d trusted",
                     gw->name, ncerts, added, pt_gw_keyring_count(cfg->peer_keys));
    } else if (rc == PT_ENOTSENT || rc == PT_ENOANSWER) {
        pt_log_warn("%s: platform certificates not downloaded: %s", gw->name, pt_strerror(rc));
    }
    pt_gw_peer_certs_free(certs, ncerts);
    return rc;
}

int pt_sync_refresh_keys(struct pt_sync *s)
{
    int first = PT_OK;
    for (int i = 0; i < pt_gateway_count(); i++) {
        int rc = refresh_keys(s, i);
        first = first ? first : rc;
        if (pt__sync_tl_drain == s)
            pt__sync_mark_progress(s);
    }
    return first;
}

/* True when a download for serial at gateway i may start now, and records
 * it: one per serial per PT_SYNC_KEYS_SERIAL_MS and one per gateway per
 * PT_SYNC_KEYS_ON_DEMAND_MS, so that forged messages under made-up serials
 * cost the gateway at most one request per half minute. */
static int may_download(struct pt_sync *s, int i, const char *serial)
{
    int64_t now = s->opt.platform->mono_ms(s->opt.platform->ctx);
    int ok = 0;
    pthread_mutex_lock(&s->keys_mu);
    int slot = 0;
    for (int k = 0; k < KEY_ATTEMPTS; k++) {
        struct key_attempt *a = &s->attempts[k];
        if (a->at_ms && a->gw == i && strcasecmp(a->serial, serial) == 0 &&
            now - a->at_ms < PT_SYNC_KEYS_SERIAL_MS)
            goto out;
        if (a->at_ms < s->attempts[slot].at_ms)
            slot = k; /* the oldest (or a free one) is reused */
    }
    if (s->last_on_demand[i] && now - s->last_on_demand[i] < PT_SYNC_KEYS_ON_DEMAND_MS)
        goto out;
    s->last_on_demand[i] = now;
    s->attempts[slot].gw = i;
    snprintf(s->attempts[slot].serial, sizeof s->attempts[slot].serial, "%s", serial);
    s->attempts[slot].at_ms = now ? now : 1;
    ok = 1;
out:
    pthread_mutex_unlock(&s->keys_mu);
    return ok;
}

/* A message (an answer, a notification) names a peer key serial nobody
 * trusts: one download first, so that a key the gateway has just switched
 * to verifies; the caller then verifies as usual, and refuses the message
 * when the serial is still unknown. */
void pt__sync_learn_peer_key(struct pt_sync *s, const struct pt_gateway *gw,
                             const struct pt_gw_config *cfg, const struct pt_http_response *msg)
{
    if (!gw->peer_serial || !gw->build_keys || !cfg->peer_keys)
        return;
    const char *serial = gw->peer_serial(msg);
    if (!serial || !*serial || pt_gw_keyring_has(cfg->peer_keys, serial))
        return;
    /* The serial is the sender's word: only a plausible one is logged. */
    size_t len = strlen(serial);
    int plausible = len < PT_GW_SERIAL_MAX && strspn(serial, "0123456789abcdefABCDEF") == len;
    int i = pt__sync_gw_index(gw->name);
    if (i < 0 || !plausible || !may_download(s, i, serial)) {
        pt_log_debug(
            "%s: message under unknown key serial %s: no download now (not a serial, or one "
            "was made moments ago)",
            gw->name, plausible ? serial : "(not a serial)");
        return;
    }
    pt_log_info("%s: message under unknown key serial %s: downloading the platform certificates",
                gw->name, serial);
    refresh_keys(s, i);
}
