/*
 * buf.h - a bounded, growable text buffer for building messages.
 *
 * The gateway adapters assemble form bodies, JSON and strings-to-sign with
 * it.  Every buffer has a hard maximum: once an append would pass it (or
 * memory runs out) the buffer is marked failed, later appends do nothing and
 * pt_buf_take() returns NULL, so callers check once at the end instead of
 * after every append (the curl dynbuf idea).
 */
#ifndef PT_BUF_H
#define PT_BUF_H

#include <stddef.h>

struct pt_buf {
    char *p;    /* NUL-terminated while not failed */
    size_t len; /* bytes used, NUL excluded */
    size_t cap; /* bytes allocated */
    size_t max; /* hard limit on len */
    int failed; /* 1 after overflow or allocation failure */
};

/* Starts an empty buffer that may grow to max bytes. */
void pt_buf_init(struct pt_buf *b, size_t max);

/* Appends n bytes / a C string / one character. */
void pt_buf_put(struct pt_buf *b, const void *s, size_t n);
void pt_buf_puts(struct pt_buf *b, const char *s);
void pt_buf_putc(struct pt_buf *b, char c);

/* printf-style append. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void pt_buf_printf(struct pt_buf *b, const char *fmt, ...);

/*
 * Appends s as a quoted JSON string, escaped exactly as JavaScript's
 * JSON.stringify does (", \, \b \f \n \r \t, other control characters as
 * \u00xx, everything else - '/', non-ASCII UTF-8 - as is), so bodies the
 * vendors' Node SDKs serialise come out byte for byte the same.
 */
void pt_buf_json_string(struct pt_buf *b, const char *s);

/*
 * Appends n bytes percent-encoded for a form body or query string the way
 * the Stripe Node SDK does: A-Z a-z 0-9 - _ . ~ [ ] as is, every other byte
 * as %XX (upper-case hex), spaces as %20.
 */
void pt_buf_urlencode(struct pt_buf *b, const char *s, size_t n);

/*
 * Hands the text over: returns the malloc'd NUL-terminated string (caller
 * frees) and its length in *len (may be NULL), or NULL when the buffer
 * failed (it is then freed).  The buffer is left empty either way.
 */
char *pt_buf_take(struct pt_buf *b, size_t *len);

/* Frees the text; wipe != 0 zeroes it first (it held a secret). */
void pt_buf_free(struct pt_buf *b, int wipe);

#endif
