/*
 * form.c - strict form decoding and SDK-compatible encoding (see form.h).
 */
#include "form.h"
#include "crypto.h"
#include "err.h"

#include <stdlib.h>
#include <string.h>

void pt_form_init(struct pt_form *f)
{
    memset(f, 0, sizeof *f);
}

void pt_form_free(struct pt_form *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->pairs[i].key);
        free(f->pairs[i].value);
    }
    pt_form_init(f);
}

/* Decodes s[0..n) into a new string; NULL with *rc set on failure. */
static char *decode(const char *s, size_t n, int *rc)
{
    char *out = malloc(n + 1);
    size_t o = 0;
    if (!out) {
        *rc = PT_ENOMEM;
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '+') {
            c = ' ';
        } else if (c == '%') {
            int hi = i + 2 < n ? pt_hex_digit(s[i + 1]) : -1;
            int lo = i + 2 < n ? pt_hex_digit(s[i + 2]) : -1;
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
                free(out);
                *rc = PT_EPARSE;
                return NULL;
            }
            c = (char)(hi << 4 | lo);
            i += 2;
        } else if (c == '\0') {
            free(out);
            *rc = PT_EPARSE;
            return NULL;
        }
        out[o++] = c;
    }
    out[o] = '\0';
    return out;
}

static int add_owned(struct pt_form *f, char *key, char *value)
{
    if (f->n >= PT_FORM_MAX_PAIRS) {
        free(key);
        free(value);
        return PT_ETOOBIG;
    }
    f->pairs[f->n].key = key;
    f->pairs[f->n].value = value;
    f->n++;
    return PT_OK;
}

static int parse_pair(struct pt_form *f, const char *s, size_t n)
{
    int rc = PT_OK;
    const char *eq = memchr(s, '=', n);
    size_t klen = eq ? (size_t)(eq - s) : n;
    if (klen == 0)
        return PT_EPARSE;
    char *key = decode(s, klen, &rc);
    if (!key)
        return rc;
    char *value = eq ? decode(eq + 1, n - klen - 1, &rc) : decode("", 0, &rc);
    if (!value) {
        free(key);
        return rc;
    }
    if (pt_form_get(f, key)) {
        free(key);
        free(value);
        return PT_EPARSE;
    }
    return add_owned(f, key, value);
}

int pt_form_parse(const char *body, size_t len, struct pt_form *f)
{
    int rc = PT_ETOOBIG;
    if (len > PT_FORM_MAX_BODY)
        goto out;
    rc = PT_OK;
    size_t start = 0;
    for (size_t i = 0; i <= len && rc == PT_OK; i++) {
        if (i < len && body[i] != '&')
            continue;
        if (i > start)
            rc = parse_pair(f, body + start, i - start);
        start = i + 1;
    }
out:
    if (rc != PT_OK)
        pt_form_free(f);
    return rc;
}

int pt_form_add(struct pt_form *f, const char *key, const char *value)
{
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        return PT_ENOMEM;
    }
    return add_owned(f, k, v);
}

const char *pt_form_get(const struct pt_form *f, const char *key)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->pairs[i].key, key) == 0)
            return f->pairs[i].value;
    return NULL;
}

void pt_form_encode(const struct pt_form *f, struct pt_buf *out)
{
    for (size_t i = 0; i < f->n; i++) {
        if (i)
            pt_buf_putc(out, '&');
        pt_buf_urlencode(out, f->pairs[i].key, strlen(f->pairs[i].key));
        pt_buf_putc(out, '=');
        pt_buf_urlencode(out, f->pairs[i].value, strlen(f->pairs[i].value));
    }
}
