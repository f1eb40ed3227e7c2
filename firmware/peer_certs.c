/*
 * peer_certs.c - downloaded peer certificates in data_dir (see
 * peer_certs.h).
 *
 * A certificate is public, but what it decides is not: a file in data_dir
 * that payterm trusts as a WeChat platform key must not be replaceable by
 * others, so it is created 0600 like every file payterm writes (SPEC 11),
 * and written atomically, so a power cut leaves the old file or the new
 * one, never half of one.
 */
#define _GNU_SOURCE /* O_CLOEXEC, O_NOFOLLOW with older headers */
#include "peer_certs.h"
#include "err.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define SUFFIX ".pem"

static int serial_ok(const char *s, size_t n)
{
    return n > 0 && n < PT_GW_SERIAL_MAX && strspn(s, "0123456789abcdefABCDEF") >= n;
}

static void path_of(char *out, size_t cap, const char *dir, const char *gateway, const char *serial)
{
    snprintf(out, cap, "%s/%s-platform-%s" SUFFIX, dir, gateway, serial);
}

/* fsync of the directory, so that the rename itself is durable. */
static int sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int r = fsync(fd);
    close(fd);
    return r;
}

static int write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int pt_peer_certs_keep(const char *data_dir, const char *gateway, const char *serial,
                       const char *pem, size_t len)
{
    static atomic_uint seq; /* two threads may store the same serial at once */
    char path[1024], tmp[1100];
    if (!serial || !serial_ok(serial, strlen(serial)) || !gateway || strchr(gateway, '/'))
        return PT_EINVAL;
    path_of(path, sizeof path, data_dir, gateway, serial);
    if (!pem) {
        if (unlink(path) != 0 && errno != ENOENT) {
            pt_log_warn("cannot remove %s: %s", path, strerror(errno));
            return PT_EIO;
        }
        return PT_OK;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&seq, 1));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    int rc = PT_EIO;
    if (fd < 0)
        goto out;
    /* The umask only narrows the mode open() gives; fchmod makes it exact. */
    if (fchmod(fd, 0600) != 0 || write_all(fd, pem, len) != 0 || fsync(fd) != 0)
        goto out;
    if (close(fd) != 0) {
        fd = -1;
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) != 0)
        goto out;
    if (sync_dir(data_dir) != 0)
        pt_log_warn("cannot sync directory %s: %s", data_dir, strerror(errno));
    rc = PT_OK;
out:
    if (rc != PT_OK) {
        pt_log_warn("cannot store the platform certificate %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        unlink(tmp);
    }
    return rc;
}

/* The serial of a file called <gateway>-platform-<serial>.pem, or 0. */
static int serial_of(const char *name, const char *gateway, char serial[PT_GW_SERIAL_MAX])
{
    char prefix[64];
    int pl = snprintf(prefix, sizeof prefix, "%s-platform-", gateway);
    size_t nl = strlen(name), sl = sizeof SUFFIX - 1;
    if (pl <= 0 || (size_t)pl >= sizeof prefix || nl <= (size_t)pl + sl ||
        strncmp(name, prefix, (size_t)pl) != 0 || strcmp(name + nl - sl, SUFFIX) != 0)
        return 0;
    size_t n = nl - (size_t)pl - sl;
    if (!serial_ok(name + pl, n))
        return 0;
    memcpy(serial, name + pl, n);
    serial[n] = '\0';
    return 1;
}

int pt_peer_certs_load(const char *data_dir, const char *gateway, struct pt_gw_keyring *kr,
                       pt_random_fn rnd, void *rnd_ctx)
{
    DIR *dir = opendir(data_dir);
    int loaded = 0;
    if (!dir)
        return 0; /* a first start: nothing downloaded yet */
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        char serial[PT_GW_SERIAL_MAX], path[1024], err[PT_PK_ERR_MAX + 1100];
        if (!serial_of(e->d_name, gateway, serial))
            continue;
        snprintf(path, sizeof path, "%s/%s", data_dir, e->d_name);
        struct stat sb;
        struct pt_pk *pk = NULL;
        int rc = lstat(path, &sb) == 0 && S_ISREG(sb.st_mode)
                     ? pt_pk_load_file(path, rnd, rnd_ctx, &pk, err, sizeof err)
                     : (snprintf(err, sizeof err, "%.1000s: not a regular file", path), PT_EIO);
        if (rc == PT_OK &&
            (pt_pk_kind(pk) != PT_PK_CERT || strcasecmp(pt_pk_serial(pk), serial) != 0)) {
            snprintf(err, sizeof err, "%.1000s: not the certificate of serial %s", path, serial);
            rc = PT_EPARSE;
        }
        if (rc != PT_OK) {
            pt_log_warn("%s: stored platform certificate skipped: %s", gateway, err);
            pt_pk_free(pk);
            continue;
        }
        rc = pt_gw_keyring_add(kr, serial, pk, 0, 0);
        if (rc == PT_OK)
            loaded++;
        else if (rc != PT_EEXIST)
            pt_log_warn("%s: stored platform certificate %s skipped: %s", gateway, path,
                        pt_strerror(rc));
    }
    closedir(dir);
    return loaded;
}
