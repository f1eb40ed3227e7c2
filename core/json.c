/*
 * json.c - strict checking of JSON text, canonical JSON serialisation (see
 * json.h).
 */
#include "json.h"
#include "err.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* pt_jw is a pt_buf (one growable buffer type in the tree) that starts
 * zeroed; its limit is set on the first write. */
static void put(struct pt_jw *o, const char *s, size_t n)
{
    if (!o->b.max)
        pt_buf_init(&o->b, o->max ? o->max : PT_JSON_CANON_MAX);
    if (o->failed)
        o->b.failed = 1;
    pt_buf_put(&o->b, s, n);
}

static void put_string(struct pt_jw *o, const char *s)
{
    if (!o->b.max)
        pt_buf_init(&o->b, o->max ? o->max : PT_JSON_CANON_MAX);
    pt_buf_json_string(&o->b, s);
}

static int cmp_names(const void *a, const void *b)
{
    const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
    return strcmp(x->string, y->string);
}

static void put_value(struct pt_jw *o, const cJSON *v, int depth)
{
    if (o->failed)
        return;
    if (depth > 32) { /* a request body nested this deep is not a charge */
        o->failed = 1;
        return;
    }
    if (cJSON_IsNull(v)) {
        put(o, "null", 4);
    } else if (cJSON_IsTrue(v)) {
        put(o, "true", 4);
    } else if (cJSON_IsFalse(v)) {
        put(o, "false", 5);
    } else if (cJSON_IsString(v)) {
        put_string(o, v->valuestring);
    } else if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        char num[40];
        if (!isfinite(d)) {
            o->failed = 1;
            return;
        }
        if (d == floor(d) && fabs(d) <= 9007199254740992.0)
            snprintf(num, sizeof num, "%lld", (long long)d);
        else
            snprintf(num, sizeof num, "%.17g", d);
        put(o, num, strlen(num));
    } else if (cJSON_IsArray(v)) {
        put(o, "[", 1);
        int first = 1;
        for (const cJSON *c = v->child; c; c = c->next) {
            if (!first)
                put(o, ",", 1);
            first = 0;
            put_value(o, c, depth + 1);
        }
        put(o, "]", 1);
    } else if (cJSON_IsObject(v)) {
        size_t n = 0;
        for (const cJSON *c = v->child; c; c = c->next)
            n++;
        const cJSON **kids = n ? malloc(n * sizeof *kids) : NULL;
        if (n && !kids) {
            o->failed = 1;
            return;
        }
        n = 0;
        for (const cJSON *c = v->child; c; c = c->next)
            kids[n++] = c;
        if (n) /* qsort's pointer must not be NULL, even for zero elements */
            qsort(kids, n, sizeof *kids, cmp_names);
        put(o, "{", 1);
        for (size_t i = 0; i < n; i++) {
            if (i && strcmp(kids[i - 1]->string, kids[i]->string) == 0)
                o->failed = 1; /* duplicate key: no single meaning */
            if (i)
                put(o, ",", 1);
            put_string(o, kids[i]->string);
            put(o, ":", 1);
            put_value(o, kids[i], depth + 1);
        }
        put(o, "}", 1);
        free(kids);
    } else {
        o->failed = 1;
    }
}

char *pt_json_canonical(const cJSON *v)
{
    struct pt_jw o = {0};
    put_value(&o, v, 0);
    return pt_jw_finish(&o);
}

void pt_jw_raw(struct pt_jw *w, const char *s)
{
    put(w, s, strlen(s));
}

void pt_jw_string(struct pt_jw *w, const char *s)
{
    put_string(w, s);
}

void pt_jw_int(struct pt_jw *w, long long v)
{
    /* Digits by hand, right to left: snprintf costs more than the rest of
     * a member.  The magnitude as unsigned, so LLONG_MIN is exact too. */
    char num[24];
    char *p = num + sizeof num;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    put(w, p, (size_t)(num + sizeof num - p));
}

char *pt_jw_finish(struct pt_jw *w)
{
    if (w->failed || !w->b.max) {
        pt_buf_free(&w->b, 0);
        return NULL;
    }
    return pt_buf_take(&w->b, NULL);
}

int pt_json_has_duplicate_keys(const cJSON *v)
{
    if (!v)
        return 0;
    for (const cJSON *c = v->child; c; c = c->next) {
        if (cJSON_IsObject(v))
            for (const cJSON *d = c->next; d; d = d->next)
                if (strcmp(c->string, d->string) == 0)
                    return 1;
        if (pt_json_has_duplicate_keys(c))
            return 1;
    }
    return 0;
}

/* ---- strict checking ------------------------------------------------------------ */

/*
 * Length of the well-formed UTF-8 sequence at p (1-4), or 0 when there is
 * none (Unicode table 3-7: no overlong forms, no surrogates, nothing above
 * U+10FFFF).  p < end.
 */
static size_t utf8_seq(const unsigned char *p, const unsigned char *end)
{
    unsigned c = p[0];
    size_t n = (size_t)(end - p);
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        return n >= 2 && (p[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        unsigned lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
        return n >= 3 && p[1] >= lo && p[1] <= hi && (p[2] & 0xc0) == 0x80 ? 3 : 0;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        unsigned lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
        return n >= 4 && p[1] >= lo && p[1] <= hi && (p[2] & 0xc0) == 0x80 && (p[3] & 0xc0) == 0x80
                   ? 4
                   : 0;
    }
    return 0;
}

size_t pt_json_utf8_scrub(char *s)
{
    unsigned char *p = (unsigned char *)s, *end = p + strlen(s);
    size_t bad = 0;
    while (p < end) {
        size_t n = utf8_seq(p, end);
        if (n == 0) {
            *p = '?';
            n = 1;
            bad++;
        }
        p += n;
    }
    return bad;
}

/* 1 for a byte that stands for itself inside a string: printable ASCII but
 * the quote and the backslash.  A table, because this loop is most of the
 * cost of a check. */
#define R16(v) v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v
static const unsigned char plain_byte[256] = {
    R16(0), R16(0), /* 0x00-0x1f */
    1,      1,      0,      1,      1,      1,      1,      1,
    1,      1,      1,      1,      1,      1,      1,      1, /* 0x20-0x2f: '"' */
    R16(1), R16(1),                                            /* 0x30-0x4f */
    1,      1,      1,      1,      1,      1,      1,      1,
    1,      1,      1,      1,      0,      1,      1,      1,      /* 0x50-0x5f: '\\' */
    R16(1), R16(1),                                                 /* 0x60-0x7f */
    R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), /* 0x80-0xff */
};
#undef R16

/* One open object or array, and where in it the scan is. */
struct level {
    const char *key; /* current member's name (decoded), NULL before the first */
    uint32_t klen;
    uint32_t index; /* current element of an array */
    uint32_t obj;   /* serial number of the object, for the duplicate table */
    char type;      /* '{' or '[' */
};

/* A member name seen, in an open-addressing table of every object's names. */
struct name_entry {
    const char *name; /* NULL: free slot */
    uint32_t len, hash, obj;
};

#define NAMES_INLINE 64 /* a charge has about a dozen names: no allocation */

struct scan {
    const unsigned char *p, *start, *end;
    struct pt_json_check *chk;
    struct level lv[PT_JSON_DEPTH_MAX];
    int depth, max_depth;
    uint32_t objects;
    struct name_entry inline_names[NAMES_INLINE], *names;
    size_t cap, used;
    char *arena; /* decoded names that had escapes; at most len bytes in all */
    size_t arena_used;
    struct pt_json_member *pending; /* top-level member whose value is being read */
    const unsigned char *pending_start;
};

/* Copies at most cap-1 bytes of the valid UTF-8 text s, never half a character. */
static size_t put_utf8(char *out, size_t cap, size_t at, const char *s, size_t n)
{
    if (at + 1 >= cap)
        return at;
    if (n > cap - 1 - at) {
        n = cap - 1 - at;
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--;
    }
    memcpy(out + at, s, n);
    out[at + n] = '\0';
    return at + n;
}

/* The path of the current member of each of the outer `levels` containers. */
static void put_path(const struct scan *s, int levels, char *out, size_t cap)
{
    size_t at = 0;
    out[0] = '\0';
    for (int i = 0; i < levels; i++) {
        const struct level *l = &s->lv[i];
        if (l->type == '[') {
            char ix[16];
            int n = snprintf(ix, sizeof ix, "[%u]", (unsigned)l->index);
            at = put_utf8(out, cap, at, ix, (size_t)n);
        } else if (l->key) {
            if (at)
                at = put_utf8(out, cap, at, ".", 1);
            at = put_utf8(out, cap, at, l->key, l->klen);
        }
    }
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int
fail(struct scan *s, int levels, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->chk->problem, sizeof s->chk->problem, fmt, ap);
    va_end(ap);
    put_path(s, levels, s->chk->field, sizeof s->chk->field);
    s->chk->offset = (size_t)(s->p - s->start);
    return PT_EPARSE;
}

static size_t pos(const struct scan *s)
{
    return (size_t)(s->p - s->start);
}

/* Loops over the text use a local pointer: a byte read may alias s->p, so
 * the compiler would reload and store it on every byte otherwise. */
static void skip_blanks(struct scan *s)
{
    const unsigned char *p = s->p, *e = s->end;
    while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    s->p = p;
}

static int hex4(const unsigned char *p, const unsigned char *end)
{
    if (end - p < 4)
        return -1;
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int c = p[i], d = c >= '0' && c <= '9'   ? c - '0'
                          : c >= 'a' && c <= 'f' ? c - 'a' + 10
                          : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                 : -1;
        if (d < 0)
            return -1;
        v = v << 4 | d;
    }
    return v;
}

/*
 * Checks the escape whose backslash is at s->p and steps over it.  Returns
 * NULL, or what is wrong with it.
 */
static const char *check_escape(struct scan *s)
{
    const unsigned char *p = s->p + 1, *e = s->end;
    if (p == e)
        return "is not terminated";
    if (*p && strchr("\"\\/bfnrt", *p)) {
        s->p = p + 1;
        return NULL;
    }
    if (*p != 'u')
        return "contains an invalid escape";
    int cp = hex4(p + 1, e);
    if (cp < 0)
        return "contains an invalid escape";
    if (cp == 0)
        return "contains U+0000";
    p += 5;
    if (cp >= 0xdc00 && cp <= 0xdfff)
        return "contains an unpaired surrogate escape";
    if (cp >= 0xd800 && cp <= 0xdbff) {
        int lo = e - p >= 6 && p[0] == '\\' && p[1] == 'u' ? hex4(p + 2, e) : -1;
        if (lo < 0xdc00 || lo > 0xdfff)
            return "contains an unpaired surrogate escape";
        p += 6;
    }
    s->p = p;
    return NULL;
}

/*
 * Scans the string whose opening quote is at s->p, leaving s->p after the
 * closing quote.  *escaped tells whether it holds a backslash.  A problem is
 * reported at the path of the `levels` outer containers; in a member name
 * (is_name) it is said to be the name's.
 */
static int scan_string(struct scan *s, int levels, int is_name, int *escaped)
{
    const unsigned char *e = s->end;
    const char *why = NULL;
    *escaped = 0;
    s->p++;
    for (;;) {
        /* The common case first: printable ASCII. */
        const unsigned char *p = s->p;
        while (p < e && plain_byte[*p])
            p++;
        s->p = p;
        if (s->p == e) {
            why = "is not terminated";
            break;
        }
        unsigned c = *s->p;
        if (c == '"') {
            s->p++;
            return PT_OK;
        }
        if (c == '\\') {
            *escaped = 1;
            if ((why = check_escape(s)))
                break;
        } else if (c == 0) {
            why = "contains U+0000";
            break;
        } else if (c < 0x20) {
            why = "contains an unescaped control character";
            break;
        } else {
            size_t n = utf8_seq(s->p, e);
            if (!n) {
                why = "is not valid UTF-8";
                break;
            }
            s->p += n;
        }
    }
    return fail(s, levels, "%s%s (byte %zu)", is_name ? "has a member name that " : "", why,
                pos(s));
}

/* Writes the UTF-8 form of code point cp; returns its length. */
static size_t put_cp(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Decodes the checked string body [p, end) (quotes excluded) into o; never
 * longer than the text.  Returns the decoded length. */
static size_t decode_string(const unsigned char *p, const unsigned char *end, char *o)
{
    size_t n = 0;
    while (p < end) {
        if (*p != '\\') {
            o[n++] = (char)*p++;
            continue;
        }
        unsigned c = p[1];
        p += 2;
        switch (c) {
        case 'b':
            o[n++] = '\b';
            break;
        case 'f':
            o[n++] = '\f';
            break;
        case 'n':
            o[n++] = '\n';
            break;
        case 'r':
            o[n++] = '\r';
            break;
        case 't':
            o[n++] = '\t';
            break;
        case 'u': {
            unsigned cp = (unsigned)hex4(p, end);
            p += 4;
            if (cp >= 0xd800 && cp <= 0xdbff) { /* the pair was checked */
                cp = 0x10000 + ((cp - 0xd800) << 10) + ((unsigned)hex4(p + 2, end) - 0xdc00);
                p += 6;
            }
            n += put_cp(o + n, cp);
            break;
        }
        default:
            o[n++] = (char)c; /* " \ / */
        }
    }
    return n;
}

static uint32_t name_hash(const char *p, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 16777619u;
    return h;
}

static struct name_entry *name_slot(struct name_entry *tab, size_t cap, const char *name,
                                    uint32_t len, uint32_t hash, uint32_t obj)
{
    size_t i = (hash ^ obj * 0x9e3779b1u) & (cap - 1);
    while (tab[i].name && !(tab[i].hash == hash && tab[i].obj == obj && tab[i].len == len &&
                            memcmp(tab[i].name, name, len) == 0))
        i = (i + 1) & (cap - 1);
    return &tab[i];
}

/* Records a member name of object obj.  1: new, 0: given twice, -1: no memory. */
static int add_name(struct scan *s, const char *name, uint32_t len, uint32_t obj)
{
    if ((s->used + 1) * 2 > s->cap) { /* keep the table at most half full */
        size_t cap = s->cap * 2;
        struct name_entry *t = calloc(cap, sizeof *t);
        if (!t)
            return -1;
        for (size_t i = 0; i < s->cap; i++)
            if (s->names[i].name)
                *name_slot(t, cap, s->names[i].name, s->names[i].len, s->names[i].hash,
                           s->names[i].obj) = s->names[i];
        if (s->names != s->inline_names)
            free(s->names);
        s->names = t;
        s->cap = cap;
    }
    uint32_t h = name_hash(name, len);
    struct name_entry *e = name_slot(s->names, s->cap, name, len, h, obj);
    if (e->name)
        return 0;
    *e = (struct name_entry){name, len, h, obj};
    s->used++;
    return 1;
}

/* After a number or literal: the value must end here. */
static int scalar_end(struct scan *s)
{
    if (s->p == s->end)
        return PT_OK;
    switch (*s->p) {
    case ' ':
    case '\t':
    case '\r':
    case '\n':
    case ',':
    case ']':
    case '}':
        return PT_OK;
    default:
        return fail(s, s->depth, "is not valid JSON (byte %zu)", pos(s));
    }
}

static int is_digit(const struct scan *s, const unsigned char *p)
{
    return p < s->end && *p >= '0' && *p <= '9';
}

static int scan_number(struct scan *s)
{
    const unsigned char *p = s->p;
    int neg = *p == '-', plain = 1, digits = 0;
    uint64_t v = 0;
    p += neg;
    if (!is_digit(s, p))
        return fail(s, s->depth, "is not a valid JSON number (byte %zu)", pos(s));
    if (*p == '0') {
        p++;
        if (is_digit(s, p))
            return fail(s, s->depth, "is not a valid JSON number: leading zero (byte %zu)", pos(s));
    }
    for (; is_digit(s, p); p++, digits++)
        if (digits < 17)
            v = v * 10 + (unsigned)(*p - '0');
    if (p < s->end && *p == '.') {
        plain = 0;
        if (!is_digit(s, ++p))
            return fail(s, s->depth, "is not a valid JSON number (byte %zu)", pos(s));
        while (is_digit(s, p))
            p++;
    }
    if (p < s->end && (*p == 'e' || *p == 'E')) {
        plain = 0;
        p++;
        if (p < s->end && (*p == '+' || *p == '-'))
            p++;
        if (!is_digit(s, p))
            return fail(s, s->depth, "is not a valid JSON number (byte %zu)", pos(s));
        while (is_digit(s, p))
            p++;
    }
    if (!plain && s->chk->integers_only)
        return fail(s, s->depth, "must be a plain JSON integer (no fraction or exponent)");
    if (!plain || digits > 16 || v >= (UINT64_C(1) << 53) || (neg && v == 0))
        s->chk->exact_numbers = 0;
    s->p = p;
    return scalar_end(s);
}

static int scan_literal(struct scan *s)
{
    static const char *const words[] = {"true", "false", "null"};
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(words[i]);
        if ((size_t)(s->end - s->p) >= n && memcmp(s->p, words[i], n) == 0) {
            s->p += n;
            return scalar_end(s);
        }
    }
    return fail(s, s->depth, "is not valid JSON (byte %zu)", pos(s));
}

/* The member name at s->p, up to and including the ':' and the blanks after it. */
static int scan_name(struct scan *s)
{
    struct level *l = &s->lv[s->depth - 1];
    if (s->p == s->end || *s->p != '"')
        return fail(s, s->depth - 1, "is not valid JSON: a member name expected (byte %zu)",
                    pos(s));
    const unsigned char *q = s->p + 1;
    int escaped, rc = scan_string(s, s->depth - 1, 1, &escaped);
    if (rc)
        return rc;
    const char *name = (const char *)q;
    size_t len = (size_t)(s->p - 1 - q);
    if (escaped) {
        if (!s->arena && !(s->arena = malloc((size_t)(s->end - s->start))))
            return PT_ENOMEM;
        name = s->arena + s->arena_used;
        len = decode_string(q, s->p - 1, s->arena + s->arena_used);
        s->arena_used += len;
    }
    l->key = name;
    l->klen = (uint32_t)len;
    int added = add_name(s, name, (uint32_t)len, l->obj);
    if (added < 0)
        return PT_ENOMEM;
    if (!added)
        return fail(s, s->depth, "given twice");
    if (s->depth == 1)
        for (size_t i = 0; i < s->chk->n_members; i++)
            if (strncmp(s->chk->members[i].name, name, len) == 0 &&
                s->chk->members[i].name[len] == '\0')
                s->pending = &s->chk->members[i];
    skip_blanks(s);
    if (s->p == s->end || *s->p != ':')
        return fail(s, s->depth, "is not valid JSON: ':' expected (byte %zu)", pos(s));
    s->p++;
    skip_blanks(s);
    if (s->depth == 1)
        s->pending_start = s->p;
    return PT_OK;
}

/* Opens the object or array at s->p.  Sets *empty when it closes at once. */
static int open_container(struct scan *s, int *empty)
{
    *empty = 0;
    if (s->depth == s->max_depth)
        return fail(s, s->depth, "nests deeper than %d levels", s->max_depth);
    struct level *l = &s->lv[s->depth++];
    *l = (struct level){.type = (char)*s->p};
    if (l->type == '{')
        l->obj = s->objects++;
    s->p++;
    skip_blanks(s);
    *empty = s->p < s->end && *s->p == (l->type == '{' ? '}' : ']');
    if (*empty) {
        s->p++;
        s->depth--;
    }
    return PT_OK;
}

/* Iterative, so that the nesting depth costs no stack. */
static int scan_text(struct scan *s)
{
    int rc, escaped, empty = 0;
    skip_blanks(s);
value:
    if (s->p == s->end)
        return fail(s, s->depth, "is not valid JSON: a value expected (byte %zu)", pos(s));
    switch (*s->p) {
    case '{':
    case '[':
        if ((rc = open_container(s, &empty)))
            return rc;
        if (empty)
            goto after;
        if (s->lv[s->depth - 1].type == '[')
            goto value;
        goto member;
    case '"':
        if ((rc = scan_string(s, s->depth, 0, &escaped)) || (rc = scalar_end(s)))
            return rc;
        goto after;
    case 't':
    case 'f':
    case 'n':
        if ((rc = scan_literal(s)))
            return rc;
        goto after;
    default:
        if (*s->p != '-' && !is_digit(s, s->p))
            return fail(s, s->depth, "is not valid JSON (byte %zu)", pos(s));
        if ((rc = scan_number(s)))
            return rc;
        goto after;
    }
member:
    if ((rc = scan_name(s)))
        return rc;
    goto value;
after:
    /* A value ended at s->p; s->depth containers are still open. */
    if (s->depth == 1 && s->pending) {
        s->pending->text = (const char *)s->pending_start;
        s->pending->len = (size_t)(s->p - s->pending_start);
        s->pending = NULL;
    }
    skip_blanks(s);
    if (s->depth == 0) {
        if (s->p != s->end)
            return fail(s, 0, "is not valid JSON: more text after the value (byte %zu)", pos(s));
        return PT_OK;
    }
    struct level *l = &s->lv[s->depth - 1];
    char close = l->type == '{' ? '}' : ']';
    if (s->p < s->end && *s->p == ',') {
        s->p++;
        skip_blanks(s);
        if (l->type == '{')
            goto member;
        l->index++;
        goto value;
    }
    if (s->p < s->end && *s->p == close) {
        s->p++;
        s->depth--;
        goto after;
    }
    return fail(s, s->depth - 1, "is not valid JSON: ',' or '%c' expected (byte %zu)", close,
                pos(s));
}

int pt_json_check(const char *text, size_t len, struct pt_json_check *chk)
{
    /* Only the name table needs zeroes (free slots); the rest is set here
     * or before it is read. */
    struct scan scan, *s = &scan;
    memset(s->inline_names, 0, sizeof s->inline_names);
    s->depth = 0;
    s->objects = 0;
    s->used = 0;
    s->arena = NULL;
    s->arena_used = 0;
    s->pending = NULL;
    s->pending_start = NULL;
    s->start = s->p = (const unsigned char *)(text ? text : "");
    s->end = s->start + (text ? len : 0);
    s->chk = chk;
    s->max_depth = chk->max_depth > 0 && chk->max_depth < PT_JSON_DEPTH_MAX ? chk->max_depth
                                                                            : PT_JSON_DEPTH_MAX;
    s->names = s->inline_names;
    s->cap = NAMES_INLINE;
    chk->exact_numbers = 1;
    chk->field[0] = chk->problem[0] = '\0';
    chk->offset = 0;
    for (size_t i = 0; i < chk->n_members; i++) {
        chk->members[i].text = NULL;
        chk->members[i].len = 0;
    }
    int rc = scan_text(s);
    if (rc == PT_ENOMEM) {
        snprintf(chk->problem, sizeof chk->problem, "out of memory");
        chk->field[0] = '\0';
    }
    if (s->names != s->inline_names)
        free(s->names);
    free(s->arena);
    return rc;
}

int pt_json_plain_int(const char *s, size_t n, int64_t min, int64_t max, int64_t *out)
{
    size_t i = n && s[0] == '-';
    int neg = i == 1, over = 0;
    if (i == n || (s[i] == '0' && n - i > 1))
        return PT_EPARSE;
    uint64_t v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return PT_EPARSE;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            over = 1;
        else
            v = v * 10 + d;
    }
    if (over || v > (uint64_t)INT64_MAX + neg)
        return PT_ERANGE;
    int64_t x = !neg ? (int64_t)v : v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    if (x < min || x > max)
        return PT_ERANGE;
    *out = x;
    return PT_OK;
}
