/*
 * keyring.c - the peer keys a gateway trusts, by certificate serial (see
 * gateway.h, struct pt_gw_keyring).
 *
 * WeChat Pay signs answers and notifications with a platform key named by
 * its certificate serial (Wechatpay-Serial) and rotates that key: for a
 * while old and new are both in use, so payterm holds several and takes the
 * serial a message names to pick one.  The configured keys are pinned; the
 * sync engine adds the ones it downloads (core/sync.c) and retires those
 * the gateway no longer lists.  The API threads verify while the sync
 * thread adds, hence the read-write lock: a verification holds the read
 * lock for the duration of one RSA public operation, so a key is never
 * freed under it.
 */
#include "crypto.h"
#include "err.h"
#include "gateway.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct ring_entry {
    char serial[PT_GW_SERIAL_MAX];
    struct pt_pk *key;
    int64_t expire_s; /* 0 = not known */
    int pinned;
};

struct pt_gw_keyring {
    /* Writers (additions, retirements) are rare: a download every 12 h. */
    pthread_rwlock_t lock;
    struct ring_entry e[PT_GW_MAX_PEER_KEYS];
    int n;
};

int pt_gw_keyring_new(struct pt_gw_keyring **out)
{
    struct pt_gw_keyring *kr = calloc(1, sizeof *kr);
    if (!kr)
        return PT_ENOMEM;
    if (pthread_rwlock_init(&kr->lock, NULL) != 0) {
        free(kr);
        return PT_ENOMEM;
    }
    *out = kr;
    return PT_OK;
}

void pt_gw_keyring_destroy(struct pt_gw_keyring *kr)
{
    if (!kr)
        return;
    for (int i = 0; i < kr->n; i++)
        pt_pk_free(kr->e[i].key);
    pthread_rwlock_destroy(&kr->lock);
    free(kr);
}

/* The entry of serial, or -1 (lock held). */
static int find(const struct pt_gw_keyring *kr, const char *serial)
{
    for (int i = 0; i < kr->n; i++)
        if (strcasecmp(kr->e[i].serial, serial) == 0)
            return i;
    return -1;
}

/* Where a new key goes in a full ring: the unpinned key that expires
 * first (an unknown expiry counts as the latest), or -1 (lock held). */
static int victim(const struct pt_gw_keyring *kr)
{
    int v = -1;
    for (int i = 0; i < kr->n; i++) {
        if (kr->e[i].pinned)
            continue;
        int64_t x = kr->e[i].expire_s ? kr->e[i].expire_s : INT64_MAX;
        int64_t y = v < 0 ? 0 : kr->e[v].expire_s ? kr->e[v].expire_s : INT64_MAX;
        if (v < 0 || x < y)
            v = i;
    }
    return v;
}

int pt_gw_keyring_add(struct pt_gw_keyring *kr, const char *serial, struct pt_pk *key,
                      int64_t expire_s, int pinned)
{
    if (!kr || !serial || !*serial || strlen(serial) >= PT_GW_SERIAL_MAX || !key) {
        pt_pk_free(key);
        return PT_EINVAL;
    }
    int rc = PT_OK;
    pthread_rwlock_wrlock(&kr->lock);
    int i = find(kr, serial);
    if (i >= 0 && kr->e[i].pinned && !pinned) {
        rc = PT_EEXIST; /* a download never replaces what the operator configured */
    } else if (i < 0 && kr->n < PT_GW_MAX_PEER_KEYS) {
        i = kr->n++;
    } else if (i < 0 && (i = victim(kr)) < 0) {
        rc = PT_ETOOBIG;
    }
    if (rc == PT_OK) {
        pt_pk_free(kr->e[i].key); /* NULL for a new slot */
        struct ring_entry *e = &kr->e[i];
        memset(e, 0, sizeof *e);
        memcpy(e->serial, serial, strlen(serial) + 1);
        e->key = key;
        e->expire_s = expire_s;
        e->pinned = pinned;
        key = NULL;
    }
    pthread_rwlock_unlock(&kr->lock);
    pt_pk_free(key);
    return rc;
}

int pt_gw_keyring_has(const struct pt_gw_keyring *kr, const char *serial)
{
    if (!kr || !serial || !*serial)
        return 0;
    struct pt_gw_keyring *w = (struct pt_gw_keyring *)kr; /* the lock is not the data */
    pthread_rwlock_rdlock(&w->lock);
    int found = find(kr, serial) >= 0;
    pthread_rwlock_unlock(&w->lock);
    return found;
}

int pt_gw_keyring_count(const struct pt_gw_keyring *kr)
{
    if (!kr)
        return 0;
    struct pt_gw_keyring *w = (struct pt_gw_keyring *)kr;
    pthread_rwlock_rdlock(&w->lock);
    int n = kr->n;
    pthread_rwlock_unlock(&w->lock);
    return n;
}

int pt_gw_keyring_verify(const struct pt_gw_keyring *kr, const char *serial, const void *msg,
                         size_t len, const char *sig_b64)
{
    if (!kr || !serial || !*serial)
        return PT_ENOTFOUND;
    if (!sig_b64)
        return PT_ESIG;
    struct pt_gw_keyring *w = (struct pt_gw_keyring *)kr;
    int rc = PT_ENOTFOUND;
    pthread_rwlock_rdlock(&w->lock);
    int i = find(kr, serial);
    if (i >= 0)
        rc = pt_pk_verify_base64(kr->e[i].key, msg, len, sig_b64, strlen(sig_b64)) == PT_OK
                 ? PT_OK
                 : PT_ESIG;
    pthread_rwlock_unlock(&w->lock);
    return rc;
}

static int listed(const char (*keep)[PT_GW_SERIAL_MAX], int nkeep, const char *serial)
{
    for (int i = 0; i < nkeep; i++)
        if (strcasecmp(keep[i], serial) == 0)
            return 1;
    return 0;
}

int pt_gw_keyring_retire(struct pt_gw_keyring *kr, int64_t now_s,
                         const char (*keep)[PT_GW_SERIAL_MAX], int nkeep,
                         char (*gone)[PT_GW_SERIAL_MAX])
{
    int ngone = 0;
    if (!kr)
        return 0;
    pthread_rwlock_wrlock(&kr->lock);
    for (int i = 0; i < kr->n;) {
        struct ring_entry *e = &kr->e[i];
        int expired = e->expire_s && now_s >= e->expire_s;
        if (e->pinned || (!expired && (!keep || listed(keep, nkeep, e->serial)))) {
            i++;
            continue;
        }
        if (gone)
            memcpy(gone[ngone], e->serial, sizeof e->serial);
        ngone++;
        pt_pk_free(e->key);
        kr->e[i] = kr->e[--kr->n];
        memset(&kr->e[kr->n], 0, sizeof kr->e[kr->n]);
    }
    pthread_rwlock_unlock(&kr->lock);
    return ngone;
}

int pt_gw_keyfile_at(const char *packed, int i, struct pt_gw_keyfile *out)
{
    const char *p = packed;
    for (; p && *p && i > 0; i--) {
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    const char *tab = p && *p ? strchr(p, '\t') : NULL;
    const char *nl = tab ? strchr(tab, '\n') : NULL;
    if (!nl || (size_t)(tab - p) >= sizeof out->serial ||
        (size_t)(nl - tab - 1) >= sizeof out->file)
        return PT_ENOTFOUND;
    memcpy(out->serial, p, (size_t)(tab - p));
    out->serial[tab - p] = '\0';
    memcpy(out->file, tab + 1, (size_t)(nl - tab - 1));
    out->file[nl - tab - 1] = '\0';
    return PT_OK;
}

void pt_gw_peer_certs_free(struct pt_gw_peer_cert *certs, int n)
{
    for (int i = 0; certs && i < n; i++) {
        free(certs[i].pem);
        certs[i].pem = NULL;
    }
}
