/*
 * json.c - canonical JSON serialisation (see json.h).
 */
#include "json.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(struct pt_jw *o, const char *s, size_t n)
{
    if (o->failed)
        return;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 512, max = o->max ? o->max : PT_JSON_CANON_MAX;
        while (cap < o->len + n + 1)
            cap *= 2;
        if (cap > max) {
            o->failed = 1;
            return;
        }
        char *b = realloc(o->buf, cap);
        if (!b) {
            o->failed = 1;
            return;
        }
        o->buf = b;
        o->cap = cap;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = '\0';
}

static void put_string(struct pt_jw *o, const char *s)
{
    put(o, "\"", 1);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        /* Copy the run of characters that need no escape in one go. */
        const unsigned char *run = p;
        while (*p >= 0x20 && *p != '"' && *p != '\\')
            p++;
        if (p > run)
            put(o, (const char *)run, (size_t)(p - run));
        if (!*p)
            break;
        char esc[8];
        switch (*p) {
        case '"':
            put(o, "\\\"", 2);
            break;
        case '\\':
            put(o, "\\\\", 2);
            break;
        case '\b':
            put(o, "\\b", 2);
            break;
        case '\f':
            put(o, "\\f", 2);
            break;
        case '\n':
            put(o, "\\n", 2);
            break;
        case '\r':
            put(o, "\\r", 2);
            break;
        case '\t':
            put(o, "\\t", 2);
            break;
        default:
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            put(o, esc, 6);
        }
        p++;
    }
    put(o, "\"", 1);
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
    if (o.failed) {
        free(o.buf);
        return NULL;
    }
    return o.buf;
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
    char num[24];
    int n = snprintf(num, sizeof num, "%lld", v);
    put(w, num, (size_t)n);
}

char *pt_jw_finish(struct pt_jw *w)
{
    if (w->failed || !w->buf) {
        free(w->buf);
        w->buf = NULL;
        return NULL;
    }
    char *text = w->buf;
    w->buf = NULL;
    return text;
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
