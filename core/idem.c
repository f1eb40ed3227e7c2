/*
 * idem.c - the idempotency guard (see idem.h).
 */
#include "idem.h"
#include "crypto.h"
#include "err.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

void pt_idem_result_free(struct pt_idem_result *r)
{
    if (!r)
        return;
    free(r->body);
    r->body = NULL;
}

int pt_idem_key_normalize(const char *raw, char out[256])
{
    size_t n = strlen(raw);
    /* RFC 8941 sf-string: the draft Idempotency-Key header is one, so a
     * client may send "abc" (quoted); that is the same key as abc. */
    if (n >= 2 && raw[0] == '"' && raw[n - 1] == '"') {
        raw++;
        n -= 2;
    }
    if (n < 1 || n > 255)
        return PT_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (raw[i] < 0x21 || raw[i] > 0x7e)
            return PT_EINVAL;
    memcpy(out, raw, n);
    out[n] = '\0';
    return PT_OK;
}

int pt_idem_fingerprint(const char *method, const char *path, const char *body_canonical,
                        unsigned char out[32])
{
    size_t ml = strlen(method), pl = strlen(path);
    size_t bl = body_canonical ? strlen(body_canonical) : 0;
    char stackbuf[2048];
    size_t total = ml + 1 + pl + 1 + bl;
    char *buf = total <= sizeof stackbuf ? stackbuf : malloc(total);
    if (!buf)
        return PT_ENOMEM;
    memcpy(buf, method, ml);
    buf[ml] = '\n';
    memcpy(buf + ml + 1, path, pl);
    buf[ml + 1 + pl] = '\n';
    if (bl)
        memcpy(buf + ml + pl + 2, body_canonical, bl);
    int rc = pt_sha256(buf, total, out);
    if (buf != stackbuf)
        free(buf);
    return rc;
}

/* What the key's record says of this request; a replay takes the
 * recorded answer's body from row. */
static void fill_from_row(struct pt_key_row *row, const unsigned char hash[32], int64_t now,
                          struct pt_idem_result *out)
{
    memcpy(out->order_id, row->order_id, sizeof out->order_id);
    if (!pt_ct_equal(row->request_hash, hash, 32)) {
        out->status = PT_IDEM_MISMATCH;
    } else if (row->completed_at) {
        out->status = PT_IDEM_REPLAY;
        out->response_status = row->response_status;
        out->body = row->response_body;
        out->body_len = row->response_len;
        row->response_body = NULL;
    } else {
        out->status = PT_IDEM_IN_USE;
        out->lock_age_ms = now - row->locked_at;
    }
}

int pt_idem_lookup(struct pt_store *st, const struct pt_idem_options *opt, const char *scope,
                   const char *key, const unsigned char hash[32], int64_t now,
                   struct pt_idem_result *out)
{
    (void)opt;
    memset(out, 0, sizeof *out);
    struct pt_key_row row;
    int rc = pt_store_key_get(st, scope, key, &row);
    if (rc == PT_ENOTFOUND) {
        out->status = PT_IDEM_ABSENT;
        return PT_OK;
    }
    if (rc)
        return rc;
    if (row.expires_at <= now) {
        out->status = PT_IDEM_ABSENT;
    } else {
        fill_from_row(&row, hash, now, out);
        /* A lock, possibly stale: only acquire() may decide to recover it. */
        if (out->status == PT_IDEM_IN_USE)
            out->status = PT_IDEM_ABSENT;
    }
    pt_key_row_free(&row);
    return PT_OK;
}

int pt_idem_acquire(struct pt_store *st, const struct pt_idem_options *opt, const char *scope,
                    const char *key, const unsigned char hash[32], int64_t now,
                    struct pt_idem_result *out)
{
    /* The configuration loader refuses durations below 1 s: with a zero
     * lock timeout every retry would take over the first request's lock. */
    assert(opt->ttl_ms > 0 && opt->lock_timeout_ms > 0);
    memset(out, 0, sizeof *out);
    out->lock = (struct pt_key_lock){.at = now, .by = opt->instance};
    int rc = pt_store_key_insert(st, scope, key, hash, opt->instance, now, now + opt->ttl_ms);
    if (rc == PT_OK) {
        out->status = PT_IDEM_NEW;
        return PT_OK;
    }
    if (rc != PT_EEXIST)
        return rc;

    struct pt_key_row row;
    if ((rc = pt_store_key_get(st, scope, key, &row)) != PT_OK)
        return rc; /* we are in a write transaction: the row cannot vanish */

    if (row.expires_at <= now) {
        /* Expired but not yet swept: the key is free again.  The data layer
         * (order_id UNIQUE) still stops a second charge for the same order. */
        pt_key_row_free(&row);
        if ((rc = pt_store_key_delete_expired(st, scope, key, now)) != PT_OK)
            return rc;
        rc = pt_store_key_insert(st, scope, key, hash, opt->instance, now, now + opt->ttl_ms);
        if (rc == PT_OK)
            out->status = PT_IDEM_NEW;
        return rc == PT_EEXIST ? PT_ESTORAGE : rc;
    }

    struct pt_key_lock mine = out->lock;
    fill_from_row(&row, hash, now, out);
    out->lock = mine;
    if (out->status == PT_IDEM_IN_USE &&
        (row.locked_by != opt->instance || out->lock_age_ms >= opt->lock_timeout_ms)) {
        /* The holder is gone: another process instance (we restarted after a
         * crash) or a request that never finished within lock_timeout.  Take
         * the lock over; the caller finds out from the charge row how far the
         * first attempt got. */
        rc = pt_store_key_relock(st, scope, key, row.locked_at, row.locked_by, opt->instance, now);
        if (rc == PT_OK)
            out->status = PT_IDEM_RECOVERED;
        else if (rc != PT_EEXIST) {
            pt_key_row_free(&row);
            return rc;
        }
    }
    pt_key_row_free(&row);
    return PT_OK;
}

int pt_idem_acquire_later(struct pt_store *st, const struct pt_idem_options *opt, const char *scope,
                          const char *key, const unsigned char hash[32], int64_t now,
                          struct pt_idem_result *out)
{
    assert(opt->ttl_ms > 0 && opt->lock_timeout_ms > 0);
    memset(out, 0, sizeof *out);
    int rc = pt_store_key_take_later(st, scope, key, hash, opt->instance, now, now + opt->ttl_ms,
                                     &out->lock);
    if (rc == PT_OK) {
        out->status = PT_IDEM_NEW;
        return PT_OK;
    }
    if (rc != PT_EEXIST)
        return rc;
    /* A record exists (live, locked or expired): decided as ever. */
    return pt_idem_acquire(st, opt, scope, key, hash, now, out);
}

int pt_idem_complete(struct pt_store *st, struct pt_key_lock *held, const char *scope,
                     const char *key, int status, const char *body, size_t len, int64_t now)
{
    return pt_store_key_complete(st, scope, key, held, status, body, len, now);
}

int pt_idem_release(struct pt_store *st, struct pt_key_lock *held, const char *scope,
                    const char *key)
{
    return pt_store_key_delete(st, scope, key, held);
}

int pt_idem_sweep(struct pt_store *st, int64_t now, int *count)
{
    return pt_store_key_sweep(st, now, count);
}
