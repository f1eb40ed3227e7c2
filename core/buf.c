/*
 * buf.c - bounded growable text buffer (see buf.h).
 */
#include "buf.h"
#include "crypto.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pt_buf_init(struct pt_buf *b, size_t max)
{
    memset(b, 0, sizeof *b);
    b->max = max;
}

static int grow(struct pt_buf *b, size_t n)
{
    if (b->failed)
        return -1;
    assert(b->len <= b->max); /* appends never pass the limit: the text stays bounded */
    if (n > b->max - b->len) {
        b->failed = 1;
        return -1;
    }
    size_t need = b->len + n + 1;
    if (need <= b->cap)
        return 0;
    /* 512 first: a charge or refund object (~400 bytes) is built without
     * growing, each growth being a copy and a wipe of the old block. */
    size_t cap = b->cap ? b->cap : 512;
    while (cap < need)
        cap *= 2;
    /* realloc could leave a copy of a secret behind; grow by copy and wipe. */
    char *p = malloc(cap);
    if (!p) {
        b->failed = 1;
        return -1;
    }
    if (b->p) {
        memcpy(p, b->p, b->len + 1);
        pt_zeroize(b->p, b->cap);
        free(b->p);
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void pt_buf_put(struct pt_buf *b, const void *s, size_t n)
{
    if (grow(b, n) != 0)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void pt_buf_puts(struct pt_buf *b, const char *s)
{
    pt_buf_put(b, s, strlen(s));
}

void pt_buf_putc(struct pt_buf *b, char c)
{
    pt_buf_put(b, &c, 1);
}

void pt_buf_printf(struct pt_buf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        b->failed = 1; /* only short fragments are formatted */
        return;
    }
    pt_buf_put(b, tmp, (size_t)n);
}

void pt_buf_json_string(struct pt_buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    pt_buf_putc(b, '"');
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        /* The run of characters that need no escape goes in one copy. */
        const unsigned char *run = p;
        while (*p >= 0x20 && *p != '"' && *p != '\\')
            p++;
        if (p > run)
            pt_buf_put(b, run, (size_t)(p - run));
        if (!*p)
            break;
        char esc[6] = {'\\', 0};
        size_t n = 2;
        switch (*p) {
        case '"':
            esc[1] = '"';
            break;
        case '\\':
            esc[1] = '\\';
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[*p >> 4];
            esc[5] = hex[*p & 15];
            n = 6;
        }
        pt_buf_put(b, esc, n);
        p++;
    }
    pt_buf_putc(b, '"');
}

void pt_buf_urlencode(struct pt_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~' || c == '[' || c == ']') {
            pt_buf_putc(b, (char)c);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            pt_buf_put(b, e, 3);
        }
    }
}

char *pt_buf_take(struct pt_buf *b, size_t *len)
{
    if (!b->failed && !b->p)
        grow(b, 0); /* an empty text is still a string */
    if (b->failed) {
        pt_buf_free(b, 1);
        return NULL;
    }
    char *p = b->p;
    if (len)
        *len = b->len;
    b->p = NULL;
    b->len = b->cap = 0;
    return p;
}

void pt_buf_free(struct pt_buf *b, int wipe)
{
    if (b->p && wipe)
        pt_zeroize(b->p, b->cap);
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}
