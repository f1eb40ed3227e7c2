/*
 * faultvfs.c - the power-loss and I/O-error disk of make crash (faultvfs.h).
 *
 * The model of a disk is the one SQLite's own crash tests use: a write is
 * in the page cache until the file it went to is synced; a power loss
 * keeps, of each file, what it held at its last sync; a torn write is a
 * write of which only the first sectors reached the medium.  Truncation is
 * a pending change like a write.  The -shm file is not tracked: SQLite
 * rebuilds the wal-index from the WAL after a crash (and it is memory
 * mapped, so it has no writes to see).
 *
 * Real syncs are not made: durability is the model's, and the files (on a
 * tmpfs or not) only stand for the page cache.  One process, one thread:
 * the crash driver is single-threaded, so there is no locking here.
 */
#include "faultvfs.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SECTOR 512

/* A change made since the file's last sync. */
struct pending {
    struct pending *next;
    sqlite3_int64 off; /* truncate: the new size */
    int len;           /* -1: a truncate */
    unsigned char data[];
};

/* One file by its path, whichever connections have it open. */
struct tracked {
    struct tracked *next;
    char *path;
    unsigned char *dur; /* what a power loss leaves */
    size_t dur_len, dur_cap;
    int dur_exists;
    struct pending *head, **tail;
};

struct ffile {
    sqlite3_file base;
    sqlite3_file *real; /* the unix VFS's, allocated after us */
    struct tracked *t;  /* NULL: not tracked (temporary files) */
};

static sqlite3_vfs fault_vfs;
static sqlite3_vfs *unix_vfs;
static sqlite3_io_methods fault_methods;
static struct tracked *files;

static enum pt_fault_mode mode;
static long arm_at;
static int arm_enospc;
static long ops;
static int failing;

/* For the count run: tear points per op (capped), grown as ops are made. */
static unsigned char *tears;
static long tears_cap;

static void note_tears(long op, sqlite3_int64 off, int len)
{
    if (op > tears_cap) {
        long cap = tears_cap ? tears_cap * 2 : 4096;
        while (cap < op)
            cap *= 2;
        unsigned char *n = realloc(tears, (size_t)cap);
        if (!n)
            return;
        memset(n + tears_cap, 0, (size_t)(cap - tears_cap));
        tears = n;
        tears_cap = cap;
    }
    sqlite3_int64 first = (off / SECTOR + 1) * SECTOR, last = off + len;
    long n = first < last ? (long)((last - 1 - first) / SECTOR + 1) : 0;
    tears[op - 1] = (unsigned char)(n > 255 ? 255 : n);
}

long pt_fault_tear_points(const unsigned char **writes)
{
    *writes = tears;
    return ops < tears_cap ? ops : tears_cap;
}

static void dur_put(struct tracked *t, sqlite3_int64 off, const void *p, size_t n)
{
    size_t end = (size_t)off + n;
    if (end > t->dur_cap) {
        size_t cap = t->dur_cap ? t->dur_cap : 65536;
        while (cap < end)
            cap *= 2;
        unsigned char *d = realloc(t->dur, cap);
        if (!d)
            abort(); /* the model cannot go on without its image */
        t->dur = d;
        t->dur_cap = cap;
    }
    if ((size_t)off > t->dur_len)
        memset(t->dur + t->dur_len, 0, (size_t)off - t->dur_len);
    memcpy(t->dur + off, p, n);
    if (end > t->dur_len)
        t->dur_len = end;
}

static void apply(struct tracked *t, const struct pending *p)
{
    if (p->len < 0) {
        if ((size_t)p->off < t->dur_len)
            t->dur_len = (size_t)p->off;
        else
            dur_put(t, p->off, "", 0);
        return;
    }
    dur_put(t, p->off, p->data, (size_t)p->len);
}

static void drop_pending(struct tracked *t)
{
    for (struct pending *p = t->head, *n; p; p = n) {
        n = p->next;
        free(p);
    }
    t->head = NULL;
    t->tail = &t->head;
}

static void add_pending(struct tracked *t, sqlite3_int64 off, const void *data, int len)
{
    struct pending *p = malloc(sizeof *p + (len > 0 ? (size_t)len : 0));
    if (!p)
        abort();
    p->next = NULL;
    p->off = off;
    p->len = len;
    if (len > 0)
        memcpy(p->data, data, (size_t)len);
    *t->tail = p;
    t->tail = &p->next;
}

/* The file as it is now becomes its durable image (it exists on disk from
 * an earlier, clean run, or does not exist yet). */
static struct tracked *track(const char *path)
{
    for (struct tracked *t = files; t; t = t->next)
        if (strcmp(t->path, path) == 0)
            return t;
    struct tracked *t = calloc(1, sizeof *t);
    if (!t || !(t->path = strdup(path)))
        abort();
    t->tail = &t->head;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        t->dur_exists = 1;
        unsigned char buf[65536];
        ssize_t n;
        sqlite3_int64 off = 0;
        while ((n = read(fd, buf, sizeof buf)) > 0) {
            dur_put(t, off, buf, (size_t)n);
            off += n;
        }
        close(fd);
    }
    t->next = files;
    files = t;
    return t;
}

void pt_fault_power_cut(void)
{
    for (struct tracked *t = files; t; t = t->next) {
        if (!t->dur_exists) {
            unlink(t->path);
            continue;
        }
        int fd = open(t->path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
            abort();
        size_t done = 0;
        while (done < t->dur_len) {
            ssize_t n = pwrite(fd, t->dur + done, t->dur_len - done, (off_t)done);
            if (n <= 0)
                abort();
            done += (size_t)n;
        }
        if (ftruncate(fd, (off_t)t->dur_len) != 0)
            abort();
        close(fd);
    }
}

/* The power goes at op N: before it (POWER) or in the middle of it (TORN,
 * when it is a write that spans a sector boundary: its first sectors reach
 * the medium, nothing else that was not synced does). */
static void cut(struct tracked *t, sqlite3_int64 off, const void *data, int len)
{
    pt_fault_power_cut();
    if (mode == PT_FAULT_TORN && t && len > 0) {
        sqlite3_int64 first = (off / SECTOR + 1) * SECTOR, last = off + len;
        if (first < last) {
            long n = (long)((last - 1 - first) / SECTOR + 1);
            /* Which boundary: spread over the write by the cut number. */
            sqlite3_int64 at = first + (sqlite3_int64)((arm_at * 7919L) % n) * SECTOR;
            int fd = open(t->path, O_WRONLY | O_CLOEXEC);
            if (fd < 0 || pwrite(fd, data, (size_t)(at - off), (off_t)off) != at - off)
                abort();
            /* A file that grows by the torn write is as long as what reached it. */
            close(fd);
        }
    }
    _exit(PT_FAULT_CUT_EXIT);
}

/* Every op passes here first: counts it, and cuts or fails it when armed.
 * Returns 1 when the op must fail. */
static int op(struct ffile *f, sqlite3_int64 off, const void *data, int len)
{
    ops++;
    if (len > 0)
        note_tears(ops, off, len);
    if (mode == PT_FAULT_NONE || ops < arm_at)
        return 0;
    if (mode == PT_FAULT_POWER || mode == PT_FAULT_TORN) {
        if (ops == arm_at)
            cut(f->t, off, data, len);
        return 0;
    }
    failing = 1;
    return 1;
}

long pt_fault_ops(void)
{
    return ops;
}

int pt_fault_failing(void)
{
    return failing;
}

void pt_fault_clear(void)
{
    failing = 0;
    mode = PT_FAULT_NONE;
}

void pt_fault_arm(enum pt_fault_mode m, long at, int enospc)
{
    mode = m;
    arm_at = at;
    arm_enospc = enospc;
    failing = 0;
}

/* ---- the io methods ---------------------------------------------------------- */

static int f_write(sqlite3_file *pf, const void *data, int amt, sqlite3_int64 off)
{
    struct ffile *f = (struct ffile *)pf;
    if (!f->t)
        return f->real->pMethods->xWrite(f->real, data, amt, off);
    if (op(f, off, data, amt))
        return arm_enospc ? SQLITE_FULL : SQLITE_IOERR_WRITE;
    int rc = f->real->pMethods->xWrite(f->real, data, amt, off);
    if (rc == SQLITE_OK)
        add_pending(f->t, off, data, amt);
    return rc;
}

static int f_truncate(sqlite3_file *pf, sqlite3_int64 size)
{
    struct ffile *f = (struct ffile *)pf;
    if (!f->t)
        return f->real->pMethods->xTruncate(f->real, size);
    if (op(f, size, NULL, -1))
        return SQLITE_IOERR_TRUNCATE;
    int rc = f->real->pMethods->xTruncate(f->real, size);
    if (rc == SQLITE_OK)
        add_pending(f->t, size, NULL, -1);
    return rc;
}

static int f_sync(sqlite3_file *pf, int flags)
{
    struct ffile *f = (struct ffile *)pf;
    (void)flags;
    if (!f->t)
        return SQLITE_OK;
    if (op(f, 0, NULL, 0))
        return SQLITE_IOERR_FSYNC;
    /* Everything written to the file, by any connection, is durable now;
     * and so is the file itself (the unix VFS syncs the directory of a new
     * WAL at its first sync). */
    struct tracked *t = f->t;
    for (struct pending *p = t->head; p; p = p->next)
        apply(t, p);
    drop_pending(t);
    t->dur_exists = 1;
    return SQLITE_OK;
}

static int f_close(sqlite3_file *pf)
{
    struct ffile *f = (struct ffile *)pf;
    return f->real->pMethods->xClose(f->real);
}

#define FWD(name, proto, args)                                                                     \
    static int f_##name proto                                                                      \
    {                                                                                              \
        struct ffile *f = (struct ffile *)pf;                                                      \
        return f->real->pMethods->x##name args;                                                    \
    }
FWD(Read, (sqlite3_file * pf, void *p, int n, sqlite3_int64 o), (f->real, p, n, o))
FWD(FileSize, (sqlite3_file * pf, sqlite3_int64 *s), (f->real, s))
FWD(Lock, (sqlite3_file * pf, int l), (f->real, l))
FWD(Unlock, (sqlite3_file * pf, int l), (f->real, l))
FWD(CheckReservedLock, (sqlite3_file * pf, int *o), (f->real, o))
FWD(FileControl, (sqlite3_file * pf, int o, void *a), (f->real, o, a))
FWD(SectorSize, (sqlite3_file * pf), (f->real))
FWD(DeviceCharacteristics, (sqlite3_file * pf), (f->real))
FWD(ShmMap, (sqlite3_file * pf, int a, int b, int e, void volatile **pp), (f->real, a, b, e, pp))
FWD(ShmLock, (sqlite3_file * pf, int o, int n, int fl), (f->real, o, n, fl))
FWD(ShmUnmap, (sqlite3_file * pf, int d), (f->real, d))
FWD(Fetch, (sqlite3_file * pf, sqlite3_int64 o, int n, void **pp), (f->real, o, n, pp))
FWD(Unfetch, (sqlite3_file * pf, sqlite3_int64 o, void *p), (f->real, o, p))
#undef FWD

static void f_ShmBarrier(sqlite3_file *pf)
{
    struct ffile *f = (struct ffile *)pf;
    f->real->pMethods->xShmBarrier(f->real);
}

static int v_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *pf, int flags, int *out)
{
    (void)vfs;
    struct ffile *f = (struct ffile *)pf;
    memset(f, 0, sizeof *f);
    f->real = (sqlite3_file *)(f + 1);
    int keep = name && !(flags & SQLITE_OPEN_DELETEONCLOSE) &&
               (flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_WAL | SQLITE_OPEN_MAIN_JOURNAL));
    /* The image is taken before the open may create the file. */
    struct tracked *t = keep ? track(name) : NULL;
    int rc = unix_vfs->xOpen(unix_vfs, name, f->real, flags, out);
    if (rc != SQLITE_OK || !f->real->pMethods)
        return rc != SQLITE_OK ? rc : SQLITE_CANTOPEN;
    f->t = t;
    f->base.pMethods = &fault_methods;
    return SQLITE_OK;
}

static int v_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
    (void)vfs;
    for (struct tracked *t = files; t; t = t->next)
        if (strcmp(t->path, name) == 0) {
            /* An unlink is taken as durable at once: SQLite deletes a WAL
             * only after the database holds everything it held. */
            drop_pending(t);
            t->dur_len = 0;
            t->dur_exists = 0;
        }
    return unix_vfs->xDelete(unix_vfs, name, sync_dir);
}

void pt_fault_install(void)
{
    unix_vfs = sqlite3_vfs_find(NULL);
    if (!unix_vfs)
        abort();
    fault_vfs = *unix_vfs;
    fault_vfs.zName = "payterm-crash";
    fault_vfs.szOsFile = (int)sizeof(struct ffile) + unix_vfs->szOsFile;
    fault_vfs.xOpen = v_open;
    fault_vfs.xDelete = v_delete;
    fault_vfs.pNext = NULL;
    fault_methods = (sqlite3_io_methods){
        .iVersion = 3,
        .xClose = f_close,
        .xRead = f_Read,
        .xWrite = f_write,
        .xTruncate = f_truncate,
        .xSync = f_sync,
        .xFileSize = f_FileSize,
        .xLock = f_Lock,
        .xUnlock = f_Unlock,
        .xCheckReservedLock = f_CheckReservedLock,
        .xFileControl = f_FileControl,
        .xSectorSize = f_SectorSize,
        .xDeviceCharacteristics = f_DeviceCharacteristics,
        .xShmMap = f_ShmMap,
        .xShmLock = f_ShmLock,
        .xShmBarrier = f_ShmBarrier,
        .xShmUnmap = f_ShmUnmap,
        .xFetch = f_Fetch,
        .xUnfetch = f_Unfetch,
    };
    if (sqlite3_vfs_register(&fault_vfs, 1) != SQLITE_OK)
        abort();
}
