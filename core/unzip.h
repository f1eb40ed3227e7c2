/*
 * unzip.h - one file out of a zip archive held in memory (PKWARE's
 * APPNOTE.TXT: the end of central directory record, the central directory,
 * the local file header; stored or deflated entries).  Alipay hands its
 * daily bill over as a zip (SPEC 19).
 *
 * The archive is hostile until read: every offset and length is checked
 * against the buffer, the central directory's sizes are the ones believed
 * (a local header may defer them to a data descriptor), an entry inflates
 * to exactly its stated size and CRC-32 and never past max, and what this
 * reader does not take - ZIP64, encryption, archives spanning disks,
 * methods other than stored and deflate - is refused by name.
 */
#ifndef PT_UNZIP_H
#define PT_UNZIP_H

#include <stddef.h>

/*
 * The one entry whose name ends with one of suffixes (NULL-terminated;
 * names compared byte for byte, so give each encoding a name may come in),
 * inflated into *out (malloc'd, NUL-terminated, *outlen bytes, at most max).
 * PT_OK; PT_ENOTFOUND (no such entry); PT_EPARSE (not a zip, damaged, two
 * entries match, a CRC that does not match) and PT_EUNSUPPORTED (ZIP64,
 * encrypted, another method) with err saying which; PT_ETOOBIG (more than
 * max); PT_ENOMEM.
 */
int pt_unzip_find(const void *zip, size_t len, const char *const *suffixes, size_t max, char **out,
                  size_t *outlen, char *err, size_t errlen);

/* 1 when buf begins as a zip archive does ("PK\3\4"). */
int pt_unzip_is_zip(const void *buf, size_t len);

#endif
