/*
 * jscan.c - raw JSON member lookup (see jscan.h).
 *
 * A small recursive-descent checker: it only needs to know where values
 * start and end, so strings are skipped escape by escape and numbers by
 * their grammar.  Depth is bounded; every read is bounds-checked.
 */
#include "jscan.h"
#include "err.h"
#include "money.h"

#include <string.h>

#define JSCAN_MAX_DEPTH 64

struct scan {
    const char *p;
    size_t len, i;
};

static void ws(struct scan *s)
{
    while (s->i < s->len &&
           (s->p[s->i] == ' ' || s->p[s->i] == '\t' || s->p[s->i] == '\n' || s->p[s->i] == '\r'))
        s->i++;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int skip_string(struct scan *s)
{
    if (s->i >= s->len || s->p[s->i] != '"')
        return PT_EPARSE;
    for (s->i++; s->i < s->len; s->i++) {
        unsigned char c = (unsigned char)s->p[s->i];
        if (c == '"') {
            s->i++;
            return PT_OK;
        }
        if (c < 0x20)
            return PT_EPARSE;
        if (c == '\\') {
            if (++s->i >= s->len)
                return PT_EPARSE;
            c = (unsigned char)s->p[s->i];
            if (c == 'u') {
                for (int k = 0; k < 4; k++) {
                    char h = ++s->i < s->len ? s->p[s->i] : 0;
                    if (!(is_digit(h) || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F')))
                        return PT_EPARSE;
                }
            } else if (!strchr("\"\\/bfnrt", c) || c == 0) {
                return PT_EPARSE;
            }
        }
    }
    return PT_EPARSE;
}

static int skip_digits(struct scan *s)
{
    size_t start = s->i;
    while (s->i < s->len && is_digit(s->p[s->i]))
        s->i++;
    return s->i > start ? PT_OK : PT_EPARSE;
}

static int skip_number(struct scan *s)
{
    if (s->i < s->len && s->p[s->i] == '-')
        s->i++;
    if (s->i < s->len && s->p[s->i] == '0')
        s->i++;
    else if (skip_digits(s) != PT_OK)
        return PT_EPARSE;
    if (s->i < s->len && s->p[s->i] == '.') {
        s->i++;
        if (skip_digits(s) != PT_OK)
            return PT_EPARSE;
    }
    if (s->i < s->len && (s->p[s->i] == 'e' || s->p[s->i] == 'E')) {
        s->i++;
        if (s->i < s->len && (s->p[s->i] == '+' || s->p[s->i] == '-'))
            s->i++;
        if (skip_digits(s) != PT_OK)
            return PT_EPARSE;
    }
    return PT_OK;
}

static int skip_literal(struct scan *s, const char *lit)
{
    size_t n = strlen(lit);
    if (s->len - s->i < n || memcmp(s->p + s->i, lit, n) != 0)
        return PT_EPARSE;
    s->i += n;
    return PT_OK;
}

static int skip_value(struct scan *s, int depth);

/* Walks an object or array; for an object at depth 0 looks for name. */
static int skip_container(struct scan *s, int depth, const char *name, size_t *vstart, size_t *vend,
                          int *found)
{
    char close = s->p[s->i] == '{' ? '}' : ']';
    int object = close == '}';
    s->i++;
    ws(s);
    if (s->i < s->len && s->p[s->i] == close) {
        s->i++;
        return PT_OK;
    }
    for (;;) {
        size_t kstart = s->i;
        if (object) {
            if (skip_string(s) != PT_OK)
                return PT_EPARSE;
            size_t kend = s->i;
            ws(s);
            if (s->i >= s->len || s->p[s->i] != ':')
                return PT_EPARSE;
            s->i++;
            ws(s);
            size_t start = s->i;
            if (skip_value(s, depth + 1) != PT_OK)
                return PT_EPARSE;
            if (name && kend - kstart - 2 == strlen(name) &&
                memcmp(s->p + kstart + 1, name, kend - kstart - 2) == 0) {
                if ((*found)++)
                    return PT_EPARSE; /* duplicate member */
                *vstart = start;
                *vend = s->i;
            }
        } else if (skip_value(s, depth + 1) != PT_OK) {
            return PT_EPARSE;
        }
        ws(s);
        if (s->i >= s->len)
            return PT_EPARSE;
        if (s->p[s->i] == close) {
            s->i++;
            return PT_OK;
        }
        if (s->p[s->i] != ',')
            return PT_EPARSE;
        s->i++;
        ws(s);
    }
}

static int skip_value(struct scan *s, int depth)
{
    if (depth > JSCAN_MAX_DEPTH || s->i >= s->len)
        return PT_EPARSE;
    switch (s->p[s->i]) {
    case '{':
    case '[': {
        size_t a, b;
        int found = 0;
        return skip_container(s, depth, NULL, &a, &b, &found);
    }
    case '"':
        return skip_string(s);
    case 't':
        return skip_literal(s, "true");
    case 'f':
        return skip_literal(s, "false");
    case 'n':
        return skip_literal(s, "null");
    default:
        return skip_number(s);
    }
}

int pt_jscan_member(const char *p, size_t len, const char *name, const char **val, size_t *vlen)
{
    struct scan s = {p, len, 0};
    size_t vstart = 0, vend = 0;
    int found = 0;
    ws(&s);
    if (s.i >= s.len || s.p[s.i] != '{')
        return PT_EPARSE;
    if (skip_container(&s, 0, name, &vstart, &vend, &found) != PT_OK)
        return PT_EPARSE;
    ws(&s);
    if (s.i != s.len)
        return PT_EPARSE;
    if (!found)
        return PT_ENOTFOUND;
    *val = p + vstart;
    *vlen = vend - vstart;
    return PT_OK;
}

int pt_jscan_index(const char *p, size_t len, size_t idx, const char **val, size_t *vlen)
{
    struct scan s = {p, len, 0};
    size_t count = 0;
    int rc = PT_ENOTFOUND;
    ws(&s);
    if (s.i >= s.len || s.p[s.i] != '[')
        return PT_EPARSE;
    s.i++;
    ws(&s);
    if (s.i < s.len && s.p[s.i] == ']') {
        s.i++;
        goto tail;
    }
    for (;;) {
        size_t start = s.i;
        if (skip_value(&s, 1) != PT_OK)
            return PT_EPARSE;
        if (count++ == idx) {
            *val = p + start;
            *vlen = s.i - start;
            rc = PT_OK;
        }
        ws(&s);
        if (s.i >= s.len)
            return PT_EPARSE;
        if (s.p[s.i] == ']') {
            s.i++;
            break;
        }
        if (s.p[s.i] != ',')
            return PT_EPARSE;
        s.i++;
        ws(&s);
    }
tail:
    ws(&s);
    return s.i == s.len ? rc : PT_EPARSE;
}

int pt_jscan_path(const char *p, size_t len, const char *const *path, const char **val,
                  size_t *vlen)
{
    const char *cur = p;
    size_t curlen = len;
    for (; *path; path++) {
        int rc = pt_jscan_member(cur, curlen, *path, &cur, &curlen);
        if (rc != PT_OK)
            return rc;
    }
    *val = cur;
    *vlen = curlen;
    return PT_OK;
}

int pt_jscan_int(const char *p, size_t len, const char *const *path, int64_t *out)
{
    const char *v;
    size_t n;
    int rc = pt_jscan_path(p, len, path, &v, &n);
    if (rc != PT_OK)
        return rc;
    if (n == 0 || n > 18 || (n > 1 && v[0] == '0'))
        return PT_EPARSE;
    int64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(v[i]))
            return PT_EPARSE;
        x = x * 10 + (v[i] - '0');
    }
    *out = x;
    return PT_OK;
}

int pt_jscan_amount(const char *p, size_t len, const char *const *path, const char *cur,
                    int64_t *minor)
{
    const char *v;
    size_t n;
    int rc = pt_jscan_path(p, len, path, &v, &n);
    if (rc != PT_OK)
        return rc;
    if (n >= 2 && v[0] == '"') {
        v++; /* a string: its content must be the plain decimal, no escapes */
        n -= 2;
    }
    if (pt_money_exponent(cur) < 0)
        return PT_EPARSE;
    rc = pt_money_from_decimal(v, n, cur, minor);
    return rc == PT_EINVAL ? PT_EPARSE : rc;
}
