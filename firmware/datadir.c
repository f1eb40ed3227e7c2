/*
 * datadir.c - the lock and the marker beside the database (see datadir.h).
 */
#include "datadir.h"
#include "err.h"
#include "host.h"
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Longest path built here: data_dir (PT_CFG_PATH_MAX) and a file name. */
#define PATH_MAX_HERE 1200

/*
 * SPEC 3: one daemon per database.  Two daemons on one file would each
 * believe its instance token owns every lock it holds, and each recover the
 * other's "stale" PROCESSING charges.  The lock lives as long as this
 * process (the kernel drops it with the last descriptor, also after
 * SIGKILL); the PID in the file is only for the message.
 */
int pt_datadir_lock(const char *data_dir, int *fd_out, char *err, size_t errlen)
{
    char path[PATH_MAX_HERE];
    snprintf(path, sizeof path, "%s/%s", data_dir, PT_DATADIR_LOCK);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open the lock file %s: %s", path, strerror(errno));
        return PT_EIO;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char pid[32] = "";
        ssize_t n = e == EWOULDBLOCK ? pread(fd, pid, sizeof pid - 1, 0) : -1;
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\r\n")] = '\0';
        close(fd);
        if (e != EWOULDBLOCK) {
            snprintf(err, errlen, "cannot lock %s: %s", path, strerror(e));
            return PT_EIO;
        }
        snprintf(err, errlen,
                 "another payterm serve is running on data_dir %s: PID %s holds %s "
                 "(one daemon per database)",
                 data_dir, pid[0] ? pid : "(not yet written)", path);
        return PT_EBUSY;
    }
    char text[32];
    int len = snprintf(text, sizeof text, "%ld\n", (long)getpid());
    if (fchmod(fd, 0600) != 0 || ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)len, 0) != len) {
        snprintf(err, errlen, "cannot write the lock file %s: %s", path, strerror(errno));
        close(fd);
        return PT_EIO;
    }
    *fd_out = fd;
    return PT_OK;
}

enum db_state { DB_MISSING, DB_EMPTY, DB_THERE };

/*
 * What is at db_path, without creating or changing anything.  Empty: zero
 * bytes (a payterm database never is: SQLite writes page 1 when it is put
 * in WAL mode, before any table, so a WAL beside a zero-byte file belongs
 * to another database), or a database without a schema version.  A file
 * SQLite cannot open is "there": the open that follows says what it is.
 */
static int database_state(const char *db_path, enum db_state *out, char *err, size_t errlen)
{
    struct stat sb;
    if (stat(db_path, &sb) != 0) {
        if (errno == ENOENT) {
            *out = DB_MISSING;
            return PT_OK;
        }
        snprintf(err, errlen, "database %s: %s", db_path, strerror(errno));
        return PT_EIO;
    }
    *out = sb.st_size == 0 ? DB_EMPTY : DB_THERE;
    if (*out == DB_EMPTY || !S_ISREG(sb.st_mode))
        return PT_OK;
    struct pt_store_options o = {.path = db_path, .readonly = 1};
    struct pt_store *st;
    int version = -1;
    if (pt_store_open(&o, &st, NULL, 0) != PT_OK)
        return PT_OK;
    if (pt_store_schema_version(st, &version) == PT_OK && version == 0)
        *out = DB_EMPTY;
    pt_store_close(st);
    return PT_OK;
}

static int has_marker(const char *data_dir, char *path, size_t len)
{
    struct stat sb;
    snprintf(path, len, "%s/%s", data_dir, PT_DATADIR_MARKER);
    return lstat(path, &sb) == 0;
}

int pt_datadir_check_database(const char *data_dir, const char *db_path, char *err, size_t errlen)
{
    char marker[PATH_MAX_HERE];
    if (!has_marker(data_dir, marker, sizeof marker))
        return PT_OK; /* a new data_dir, or one an older payterm created */
    enum db_state s;
    int rc = database_state(db_path, &s, err, errlen);
    if (rc != PT_OK || s == DB_THERE)
        return rc;
    snprintf(err, errlen,
             "database %s is %s, but data_dir %s held one (%s says so): a new, empty "
             "database in its place would drop the offline queue and every stored answer. "
             "Restore the database from a backup, or start a new one on purpose with "
             "payterm init --new-database (and the same -c options)",
             db_path, s == DB_MISSING ? "missing" : "empty (no payterm schema in it)", data_dir,
             marker);
    return PT_EGONE;
}

int pt_datadir_new_database(const char *db_path, int *is_new, char *err, size_t errlen)
{
    enum db_state s;
    int rc = database_state(db_path, &s, err, errlen);
    if (rc != PT_OK)
        return rc;
    *is_new = s != DB_THERE;
    if (!*is_new) {
        printf("database %s holds data: --new-database keeps it (never replaces a database)\n",
               db_path);
        return PT_OK;
    }
    char wal[PATH_MAX_HERE], shm[PATH_MAX_HERE], aside[PATH_MAX_HERE + 48], when[32] = "";
    snprintf(wal, sizeof wal, "%s-wal", db_path);
    snprintf(shm, sizeof shm, "%s-shm", db_path);
    struct stat sb;
    if (lstat(wal, &sb) == 0) {
        /* Kept, not deleted: it may hold the last pages of what is gone. */
        time_t t = (time_t)(pt_host_now_ms() / 1000);
        struct tm tm;
        strftime(when, sizeof when, "%Y%m%dT%H%M%SZ", gmtime_r(&t, &tm));
        snprintf(aside, sizeof aside, "%s.orphaned-%s", wal, when);
        if (rename(wal, aside) != 0) {
            snprintf(err, errlen, "cannot move %s aside: %s", wal, strerror(errno));
            return PT_EIO;
        }
        printf("the WAL left by the database that is gone was moved aside to %s\n", aside);
    }
    if (unlink(shm) != 0 && errno != ENOENT) {
        snprintf(err, errlen, "cannot remove %s: %s", shm, strerror(errno));
        return PT_EIO;
    }
    return PT_OK;
}

/* What the marker says to whoever finds it. */
static const char marker_text[] =
    "payterm keeps its database in this directory (payterm.db).\n"
    "While this file is here, payterm serve and payterm init refuse a missing or\n"
    "empty payterm.db instead of starting a new one without a word: restore the\n"
    "database from a backup, or run `payterm init --new-database` to start a new\n"
    "one on purpose.  Keep this file.\n";

int pt_datadir_mark(const char *data_dir, char *err, size_t errlen)
{
    char path[PATH_MAX_HERE], tmp[PATH_MAX_HERE + 8];
    if (has_marker(data_dir, path, sizeof path))
        return PT_OK;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    size_t len = sizeof marker_text - 1;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    int ok = fd >= 0 && fchmod(fd, 0600) == 0 && write(fd, marker_text, len) == (ssize_t)len &&
             fsync(fd) == 0;
    int e = errno;
    if (fd >= 0 && close(fd) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = 0;
        e = errno;
    }
    /* The rename is durable once the directory is. */
    int dfd = ok ? open(data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (ok && (dfd < 0 || fsync(dfd) != 0)) {
        ok = 0;
        e = errno;
    }
    if (dfd >= 0)
        close(dfd);
    if (ok)
        return PT_OK;
    unlink(tmp);
    snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
    return PT_EIO;
}
