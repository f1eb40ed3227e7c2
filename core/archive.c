/*
 * archive.c - retention passes and archived reads (see archive.h).
 */
#include "archive.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "gateway.h"
#include "log.h"

#define DAY_MS 86400000LL

static int month_ok(const char *m)
{
    if (!m || strlen(m) != 7 || m[4] != '-')
        return 0;
    for (int i = 0; i < 7; i++)
        if (i != 4 && (m[i] < '0' || m[i] > '9'))
            return 0;
    int mon = (m[5] - '0') * 10 + (m[6] - '0');
    return mon >= 1 && mon <= 12;
}

int pt_archive_path(const char *data_dir, const char *month, char *out, size_t cap)
{
    if (!month_ok(month))
        return PT_EINVAL;
    int n = snprintf(out, cap, "%s/archive/%s.db", data_dir, month);
    return n < 0 || (size_t)n >= cap ? PT_ERANGE : PT_OK;
}

int pt_archive_bill_offsets(const struct pt_config *cfg, char *out, size_t cap)
{
    size_t k = (size_t)snprintf(out, cap, "{");
    for (int i = 0; i < pt_gateway_count() && k < cap; i++) {
        const struct pt_gateway *gw = pt_gateway_at(i);
        char beyond[4];
        int off = pt_gateway_bill_offset_min(gw->name);
        if (off < 0 || !gw->fetch_bill || !pt_config_bill_covers(cfg, gw->name, beyond))
            continue; /* no bill payterm reads: a closed Z suffices (archive.h) */
        k +=
            (size_t)snprintf(out + k, cap - k, "%s\"%s\":%d", k > 1 ? "," : "", gw->name, off * 60);
    }
    if (k + 2 > cap)
        return PT_ERANGE;
    memcpy(out + k, "}", 2);
    return PT_OK;
}

/* A directory's entries made durable: a file created in it (or the
 * directory itself, in its parent) survives a power cut before the live
 * rows it holds copies of are removed. */
static int sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = fd >= 0 && fsync(fd) == 0 ? PT_OK : PT_EIO;
    if (rc)
        pt_log_error("archive: cannot sync the directory %s: %s", dir, strerror(errno));
    if (fd >= 0)
        close(fd);
    return rc;
}

static int archive_dir(const char *data_dir)
{
    char dir[PT_STORE_PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s/archive", data_dir) >= (int)sizeof dir)
        return PT_ERANGE;
    if (mkdir(dir, 0700) == 0)
        return sync_dir(data_dir);
    if (errno == EEXIST)
        return PT_OK;
    pt_log_error("archive: cannot create %s: %s", dir, strerror(errno));
    return errno == ENOSPC ? PT_EFULL : PT_EIO;
}

/* One batch's items of one month: copied into its file. */
static int copy_month(struct pt_store *st, const char *data_dir, const struct pt_archive_item *it,
                      int n, int64_t *copied)
{
    char path[PT_STORE_PATH_MAX];
    int rc = pt_archive_path(data_dir, it[0].month, path, sizeof path);
    if (rc) {
        pt_log_error("archive: no file for month '%s' of charge %s", it[0].month, it[0].order_id);
        return rc;
    }
    int done = 0;
    struct stat sb;
    int fresh = stat(path, &sb) != 0;
    rc = pt_store_archive_copy(st, path, it, n, &done);
    *copied += done;
    if (rc == PT_OK && fresh) {
        char *slash = strrchr(path, '/'); /* data_dir/archive/<month>.db */
        *slash = '\0';
        rc = sync_dir(path); /* the new month's file, before the rows leave */
    }
    return rc;
}

static int by_month(const void *a, const void *b)
{
    const struct pt_archive_item *x = a, *y = b;
    int c = strcmp(x->month, y->month);
    return c ? c : (x->id > y->id) - (x->id < y->id);
}

int pt_archive_run(struct pt_store *st, const struct pt_config *cfg, int64_t now,
                   struct pt_archive_result *out)
{
    memset(out, 0, sizeof *out);
    char offsets[256];
    int rc = pt_archive_bill_offsets(cfg, offsets, sizeof offsets);
    if (rc)
        return rc;
    int64_t before = now - (int64_t)cfg->retention_days * DAY_MS;
    struct pt_archive_item *items = malloc(PT_ARCHIVE_BATCH * sizeof *items);
    if (!items)
        return PT_ENOMEM;
    int64_t after = 0;
    int dir_ready = 0;
    for (;;) {
        int n = 0;
        if ((rc = pt_store_archive_candidates(st, before, offsets, after, PT_ARCHIVE_BATCH, items,
                                              &n)) ||
            n == 0)
            break;
        after = items[n - 1].id;
        if (!dir_ready && (rc = archive_dir(cfg->data_dir)))
            break;
        dir_ready = 1;
        qsort(items, (size_t)n, sizeof *items, by_month);
        for (int i = 0; i < n && rc == PT_OK;) {
            int j = i + 1;
            while (j < n && !strcmp(items[j].month, items[i].month))
                j++;
            rc = copy_month(st, cfg->data_dir, items + i, j - i, &out->copied);
            i = j;
        }
        int moved = 0;
        if (rc == PT_OK && (rc = pt_store_archive_forget(st, items, n, &moved)) == PT_OK)
            out->moved += moved;
        if (rc || n < PT_ARCHIVE_BATCH)
            break;
    }
    free(items);
    if (out->moved)
        pt_log_info("retention: %lld charges older than %lld days moved to %s/archive",
                    (long long)out->moved, (long long)cfg->retention_days, cfg->data_dir);
    return rc;
}

/* The archive store of the month ext_id (of kind) went to, opened read-only. */
static int open_month(struct pt_store *st, const char *data_dir, const char *kind,
                      const char *ext_id, struct pt_store **arch)
{
    char month[PT_ARCHIVE_MONTH_LEN], path[PT_STORE_PATH_MAX], err[256];
    *arch = NULL;
    int rc = pt_store_archived_month(st, kind, ext_id, month);
    if (rc)
        return rc;
    if ((rc = pt_archive_path(data_dir, month, path, sizeof path)))
        return rc;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        pt_log_error("archive: %s %s is archived in %s, which is missing: %s", kind, ext_id, path,
                     strerror(errno));
        return PT_EIO; /* never "no such": the id was used */
    }
    /* Read-only, waiting a second at most for a pass writing into it; a
     * file an older payterm wrote is brought up to this schema first. */
    struct pt_store_options o = {
        .path = path, .no_wal_vfs = 1, .readonly = 1, .busy_timeout_ms = 1000};
    int version = 0;
    if ((rc = pt_store_open(&o, arch, err, sizeof err)) == PT_OK &&
        pt_store_schema_version(*arch, &version) == PT_OK && version < pt_store_schema_latest()) {
        pt_store_close(*arch);
        o.readonly = 0;
        rc = pt_store_open(&o, arch, err, sizeof err);
    }
    if (rc) {
        pt_log_error("archive: %s %s is archived in %s, which cannot be read: %s", kind, ext_id,
                     path, err);
        return rc == PT_ENOTFOUND ? PT_EIO : rc; /* the archive is gone: not "no such" */
    }
    return PT_OK;
}

static int charge_get(struct pt_store *st, const char *order_id, void *out)
{
    return pt_store_charge_get(st, order_id, out);
}

static int refund_get(struct pt_store *st, const char *refund_id, void *out)
{
    return pt_store_refund_get(st, refund_id, out);
}

/* The kind ("charge", "refund") ext_id, listed as archived, read from its
 * month's file by get. */
static int archived_get(struct pt_store *st, const char *data_dir, const char *kind,
                        const char *ext_id, int (*get)(struct pt_store *, const char *, void *),
                        void *out)
{
    struct pt_store *arch;
    int rc = open_month(st, data_dir, kind, ext_id, &arch);
    if (rc)
        return rc;
    rc = get(arch, ext_id, out);
    pt_store_close(arch);
    return rc == PT_ENOTFOUND ? PT_EIO : rc; /* listed as archived, not in its file */
}

int pt_archive_charge_get(struct pt_store *st, const char *data_dir, const char *order_id,
                          struct pt_charge *c)
{
    return archived_get(st, data_dir, "charge", order_id, charge_get, c);
}

int pt_archive_refund_get(struct pt_store *st, const char *data_dir, const char *refund_id,
                          struct pt_refund *r)
{
    return archived_get(st, data_dir, "refund", refund_id, refund_get, r);
}
