/*
 * walvfs.c - one write() per commit for SQLite's write-ahead log.
 *
 * SQLite appends a commit to the WAL as two write() calls per page: the
 * 24-byte frame header, then the page.  A charge touches eight pages or so,
 * which makes sixteen system calls before the one fdatasync() the commit is
 * really about; on a board, and on these VMs, each of them costs more than
 * SQLite's own work on the page.
 *
 * This is a thin VFS over the default one that changes nothing but that:
 * writes to a WAL file are gathered in memory while they are contiguous, and
 * the whole run goes to the kernel in one pwrite() as soon as the last page
 * of a commit has been handed over (the frame whose header carries the
 * commit's database size), and in any case before anything else touches the
 * file - a read, a sync, a size query or truncation, a file control, close.
 * So when SQLite syncs the WAL or publishes the commit in the wal-index,
 * every byte it wrote is already in the file, as with the default VFS; the
 * bytes and their order on disk are the same.  Other files (the database,
 * the shared-memory index) go straight through.
 */
#include "walvfs.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

/* One commit of a charge is ~10 KiB of frames; a sync run of 16 charges
 * stays under this too.  Larger transactions are written in pieces of this
 * size, still far fewer calls than two per page. */
#define WALBUF_SIZE (64 * 1024)
#define WAL_FRAME_HEADER 24

struct walfile {
    sqlite3_file base;  /* our methods */
    sqlite3_file *real; /* the default VFS's file, allocated after us */
    unsigned char *buf; /* pending bytes for [start, start + len) */
    sqlite3_int64 start;
    int len;
    int commit_pending; /* the last header held a commit: flush after its page */
};

static sqlite3_vfs walvfs;
static sqlite3_vfs *base_vfs;

static int flush(struct walfile *f)
{
    if (f->len == 0)
        return SQLITE_OK;
    int n = f->len;
    f->len = 0;
    return f->real->pMethods->xWrite(f->real, f->buf, n, f->start);
}

static int wal_write(sqlite3_file *pf, const void *data, int amt, sqlite3_int64 off)
{
    struct walfile *f = (struct walfile *)pf;
    int rc;
    if (!f->buf)
        return f->real->pMethods->xWrite(f->real, data, amt, off);
    /* A frame header whose second word (the database size after commit) is
     * not zero starts the last frame of a commit. */
    int is_commit_header = 0;
    if (amt == WAL_FRAME_HEADER) {
        const unsigned char *h = data;
        is_commit_header = (h[4] | h[5] | h[6] | h[7]) != 0;
    }
    if (f->len > 0 && (off != f->start + f->len || f->len + amt > WALBUF_SIZE)) {
        /* Not the continuation of what we hold: keep the order of writes. */
        if ((rc = flush(f)) != SQLITE_OK)
            return rc;
    }
    if (amt > WALBUF_SIZE)
        return f->real->pMethods->xWrite(f->real, data, amt, off);
    if (f->len == 0)
        f->start = off;
    memcpy(f->buf + f->len, data, (size_t)amt);
    f->len += amt;
    if (is_commit_header) {
        f->commit_pending = 1;
        return SQLITE_OK;
    }
    if (f->commit_pending) {
        /* The page of the commit frame: the commit is complete. */
        f->commit_pending = 0;
        return flush(f);
    }
    return SQLITE_OK;
}

static int wal_close(sqlite3_file *pf)
{
    struct walfile *f = (struct walfile *)pf;
    int rc = flush(f);
    int rc2 = f->real->pMethods->xClose(f->real);
    sqlite3_free(f->buf);
    f->buf = NULL;
    return rc != SQLITE_OK ? rc : rc2;
}

static int wal_read(sqlite3_file *pf, void *out, int amt, sqlite3_int64 off)
{
    struct walfile *f = (struct walfile *)pf;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xRead(f->real, out, amt, off);
}

static int wal_truncate(sqlite3_file *pf, sqlite3_int64 size)
{
    struct walfile *f = (struct walfile *)pf;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xTruncate(f->real, size);
}

static int wal_sync(sqlite3_file *pf, int flags)
{
    struct walfile *f = (struct walfile *)pf;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xSync(f->real, flags);
}

static int wal_file_size(sqlite3_file *pf, sqlite3_int64 *size)
{
    struct walfile *f = (struct walfile *)pf;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xFileSize(f->real, size);
}

static int wal_lock(sqlite3_file *pf, int level)
{
    struct walfile *f = (struct walfile *)pf;
    return f->real->pMethods->xLock(f->real, level);
}

static int wal_unlock(sqlite3_file *pf, int level)
{
    struct walfile *f = (struct walfile *)pf;
    return f->real->pMethods->xUnlock(f->real, level);
}

static int wal_check_reserved(sqlite3_file *pf, int *out)
{
    struct walfile *f = (struct walfile *)pf;
    return f->real->pMethods->xCheckReservedLock(f->real, out);
}

static int wal_file_control(sqlite3_file *pf, int op, void *arg)
{
    struct walfile *f = (struct walfile *)pf;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xFileControl(f->real, op, arg);
}

static int wal_sector_size(sqlite3_file *pf)
{
    struct walfile *f = (struct walfile *)pf;
    return f->real->pMethods->xSectorSize(f->real);
}

static int wal_device_characteristics(sqlite3_file *pf)
{
    struct walfile *f = (struct walfile *)pf;
    return f->real->pMethods->xDeviceCharacteristics(f->real);
}

/* The database file's shared memory (the wal-index) and memory map. */
static int wal_shm_map(sqlite3_file *pf, int pg, int pgsz, int extend, void volatile **pp)
{
    struct walfile *f = (struct walfile *)pf;
    if (f->real->pMethods->iVersion < 2)
        return SQLITE_IOERR_SHMMAP;
    return f->real->pMethods->xShmMap(f->real, pg, pgsz, extend, pp);
}

static int wal_shm_lock(sqlite3_file *pf, int offset, int n, int flags)
{
    struct walfile *f = (struct walfile *)pf;
    if (f->real->pMethods->iVersion < 2)
        return SQLITE_IOERR_SHMLOCK;
    return f->real->pMethods->xShmLock(f->real, offset, n, flags);
}

static void wal_shm_barrier(sqlite3_file *pf)
{
    struct walfile *f = (struct walfile *)pf;
    if (f->real->pMethods->iVersion >= 2)
        f->real->pMethods->xShmBarrier(f->real);
}

static int wal_shm_unmap(sqlite3_file *pf, int del)
{
    struct walfile *f = (struct walfile *)pf;
    if (f->real->pMethods->iVersion < 2)
        return SQLITE_OK;
    return f->real->pMethods->xShmUnmap(f->real, del);
}

static int wal_fetch(sqlite3_file *pf, sqlite3_int64 off, int amt, void **pp)
{
    struct walfile *f = (struct walfile *)pf;
    int rc = flush(f);
    if (rc != SQLITE_OK)
        return rc;
    if (f->real->pMethods->iVersion < 3) {
        *pp = NULL; /* no memory map: SQLite reads instead */
        return SQLITE_OK;
    }
    return f->real->pMethods->xFetch(f->real, off, amt, pp);
}

static int wal_unfetch(sqlite3_file *pf, sqlite3_int64 off, void *p)
{
    struct walfile *f = (struct walfile *)pf;
    if (f->real->pMethods->iVersion < 3)
        return SQLITE_OK;
    return f->real->pMethods->xUnfetch(f->real, off, p);
}

static const sqlite3_io_methods methods = {
    .iVersion = 3,
    .xClose = wal_close,
    .xRead = wal_read,
    .xWrite = wal_write,
    .xTruncate = wal_truncate,
    .xSync = wal_sync,
    .xFileSize = wal_file_size,
    .xLock = wal_lock,
    .xUnlock = wal_unlock,
    .xCheckReservedLock = wal_check_reserved,
    .xFileControl = wal_file_control,
    .xSectorSize = wal_sector_size,
    .xDeviceCharacteristics = wal_device_characteristics,
    .xShmMap = wal_shm_map,
    .xShmLock = wal_shm_lock,
    .xShmBarrier = wal_shm_barrier,
    .xShmUnmap = wal_shm_unmap,
    .xFetch = wal_fetch,
    .xUnfetch = wal_unfetch,
};

static int vfs_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *pf, int flags, int *out_flags)
{
    (void)vfs;
    struct walfile *f = (struct walfile *)pf;
    memset(f, 0, sizeof *f);
    f->real = (sqlite3_file *)(f + 1);
    /* Only a WAL gets a buffer; every other file passes straight through. */
    if ((flags & SQLITE_OPEN_WAL) && !(f->buf = sqlite3_malloc(WALBUF_SIZE)))
        return SQLITE_NOMEM;
    int rc = base_vfs->xOpen(base_vfs, name, f->real, flags, out_flags);
    if (rc != SQLITE_OK || !f->real->pMethods) {
        sqlite3_free(f->buf);
        f->buf = NULL;
        return rc != SQLITE_OK ? rc : SQLITE_CANTOPEN;
    }
    f->base.pMethods = &methods;
    return SQLITE_OK;
}

static int register_rc = SQLITE_ERROR;

static void register_once(void)
{
    base_vfs = sqlite3_vfs_find(NULL);
    if (!base_vfs)
        return;
    walvfs = *base_vfs;
    walvfs.szOsFile = (int)sizeof(struct walfile) + base_vfs->szOsFile;
    walvfs.zName = PT_WALVFS_NAME;
    walvfs.pNext = NULL;
    walvfs.xOpen = vfs_open;
    register_rc = sqlite3_vfs_register(&walvfs, 0);
}

int pt_walvfs_register(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_once);
    return register_rc;
}
