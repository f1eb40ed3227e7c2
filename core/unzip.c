/*
 * unzip.c - one file out of a zip archive (see unzip.h).
 *
 * Read from the end: the end of central directory record (the last
 * 22 + comment bytes), the central directory it points to, then the entry's
 * local header for where its data begins.  zlib inflates the raw deflate
 * stream.
 */
#include "unzip.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "err.h"

#define EOCD_SIG 0x06054b50u
#define CEN_SIG 0x02014b50u
#define LOC_SIG 0x04034b50u
#define EOCD_LEN 22
#define CEN_LEN 46
#define LOC_LEN 30
#define MAX_COMMENT 0xffff

static uint32_t le16(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int say(char *err, size_t errlen, int rc, const char *what)
{
    if (errlen)
        snprintf(err, errlen, "zip: %s", what);
    return rc;
}

int pt_unzip_is_zip(const void *buf, size_t len)
{
    return len >= 4 && le32(buf) == LOC_SIG;
}

/* The end of central directory record's offset; -1 when there is none. */
static long find_eocd(const unsigned char *z, size_t len)
{
    if (len < EOCD_LEN)
        return -1;
    size_t lowest = len - EOCD_LEN > MAX_COMMENT ? len - EOCD_LEN - MAX_COMMENT : 0;
    for (size_t i = len - EOCD_LEN + 1; i-- > lowest;)
        if (le32(z + i) == EOCD_SIG && i + EOCD_LEN + le16(z + i + 20) == len)
            return (long)i;
    return -1;
}

static int ends_with(const unsigned char *name, size_t n, const char *const *suffixes)
{
    for (size_t k = 0; suffixes[k]; k++) {
        size_t s = strlen(suffixes[k]);
        if (n >= s && memcmp(name + n - s, suffixes[k], s) == 0)
            return 1;
    }
    return 0;
}

struct entry {
    uint32_t flags, method, crc, csize, usize, local;
};

/* Walks the central directory; the one entry matching, in *e. */
static int find_entry(const unsigned char *z, size_t len, const char *const *suffixes,
                      struct entry *e, char *err, size_t errlen)
{
    long eo = find_eocd(z, len);
    if (eo < 0)
        return say(err, errlen, PT_EPARSE, "not a zip archive (no end of central directory)");
    const unsigned char *r = z + eo;
    uint32_t count = le16(r + 10), size = le32(r + 12), off = le32(r + 16);
    if (le16(r + 4) != 0 || le16(r + 6) != 0 || le16(r + 8) != count)
        return say(err, errlen, PT_EUNSUPPORTED, "an archive spanning disks");
    if (count == 0xffff || size == 0xffffffffu || off == 0xffffffffu)
        return say(err, errlen, PT_EUNSUPPORTED, "ZIP64");
    if ((size_t)off > (size_t)eo || (size_t)size > (size_t)eo - off)
        return say(err, errlen, PT_EPARSE, "the central directory lies outside the archive");
    size_t p = off, end = (size_t)off + size;
    int found = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (end - p < CEN_LEN || le32(z + p) != CEN_SIG)
            return say(err, errlen, PT_EPARSE, "a damaged central directory entry");
        const unsigned char *c = z + p;
        size_t nlen = le16(c + 28), xlen = le16(c + 30), clen = le16(c + 32);
        if (end - p - CEN_LEN < nlen + xlen + clen)
            return say(err, errlen, PT_EPARSE, "a central directory entry runs past its end");
        if (ends_with(c + CEN_LEN, nlen, suffixes)) {
            if (found++)
                return say(err, errlen, PT_EPARSE, "two entries of the same name");
            *e = (struct entry){.flags = le16(c + 8),
                                .method = le16(c + 10),
                                .crc = le32(c + 16),
                                .csize = le32(c + 20),
                                .usize = le32(c + 24),
                                .local = le32(c + 42)};
        }
        p += CEN_LEN + nlen + xlen + clen;
    }
    if (p != end)
        return say(err, errlen, PT_EPARSE, "the central directory's size is not its entries'");
    return found ? PT_OK : PT_ENOTFOUND;
}

/* Inflates (or copies) the entry's data [d, d+e->csize) into out. */
static int extract(const unsigned char *d, const struct entry *e, unsigned char *out, char *err,
                   size_t errlen)
{
    if (e->method == 0) {
        if (e->csize != e->usize)
            return say(err, errlen, PT_EPARSE, "a stored entry whose two sizes differ");
        memcpy(out, d, e->usize);
        return PT_OK;
    }
    z_stream s;
    memset(&s, 0, sizeof s);
    if (inflateInit2(&s, -MAX_WBITS) != Z_OK)
        return PT_ENOMEM;
    s.next_in = (Bytef *)(uintptr_t)d;
    s.avail_in = e->csize;
    s.next_out = out;
    s.avail_out = e->usize + 1; /* one byte more: a stream longer than said is caught */
    int z = inflate(&s, Z_FINISH);
    uLong got = s.total_out;
    inflateEnd(&s);
    if (z == Z_MEM_ERROR)
        return PT_ENOMEM;
    if (z != Z_STREAM_END || got != e->usize || s.avail_in != 0)
        return say(err, errlen, PT_EPARSE, "a deflate stream that is damaged or not its size");
    return PT_OK;
}

int pt_unzip_find(const void *zip, size_t len, const char *const *suffixes, size_t max, char **out,
                  size_t *outlen, char *err, size_t errlen)
{
    const unsigned char *z = zip;
    *out = NULL;
    *outlen = 0;
    if (errlen)
        err[0] = '\0';
    struct entry e = {0};
    int rc = find_entry(z, len, suffixes, &e, err, errlen);
    if (rc)
        return rc;
    if (e.flags & 1u)
        return say(err, errlen, PT_EUNSUPPORTED, "an encrypted entry");
    if (e.method != 0 && e.method != 8)
        return say(err, errlen, PT_EUNSUPPORTED, "an entry neither stored nor deflated");
    if (e.csize == 0xffffffffu || e.usize == 0xffffffffu || e.local == 0xffffffffu)
        return say(err, errlen, PT_EUNSUPPORTED, "ZIP64");
    if (e.usize > max)
        return say(err, errlen, PT_ETOOBIG, "an entry larger than payterm reads");
    /* Deflate expands at most 1032 times: a larger stated size is a lie,
     * refused before memory is taken for it. */
    if (e.method == 8 && (uint64_t)e.usize > (uint64_t)e.csize * 1032 + 64)
        return say(err, errlen, PT_EPARSE, "an entry's stated size is beyond what its data holds");
    if ((size_t)e.local > len || len - e.local < LOC_LEN || le32(z + e.local) != LOC_SIG)
        return say(err, errlen, PT_EPARSE, "an entry's local header is not where it is said to be");
    size_t data = (size_t)e.local + LOC_LEN + le16(z + e.local + 26) + le16(z + e.local + 28);
    if (data > len || len - data < e.csize)
        return say(err, errlen, PT_EPARSE, "an entry's data runs past the archive");
    unsigned char *buf = malloc((size_t)e.usize + 2);
    if (!buf)
        return PT_ENOMEM;
    rc = extract(z + data, &e, buf, err, errlen);
    if (rc == PT_OK && crc32(crc32(0L, Z_NULL, 0), buf, e.usize) != e.crc)
        rc = say(err, errlen, PT_EPARSE, "an entry whose CRC-32 does not match");
    if (rc) {
        free(buf);
        return rc;
    }
    buf[e.usize] = '\0';
    *out = (char *)buf;
    *outlen = e.usize;
    return PT_OK;
}
