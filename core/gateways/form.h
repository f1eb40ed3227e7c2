/*
 * form.h - application/x-www-form-urlencoded bodies, both directions.
 *
 * Alipay requests and notifications and Stripe requests are forms.  A parsed
 * form keeps its pairs in arrival order; decoding is strict (a bad %-escape,
 * a decoded NUL or a repeated name is an error, because a notification that
 * can be read two ways must not be verified one way and applied the other).
 * The simulator uses the same functions to read what payterm sends.
 */
#ifndef PT_FORM_H
#define PT_FORM_H

#include <stddef.h>

#include "buf.h"

/* Hard limits for a form we parse (notifications are a few hundred bytes). */
#define PT_FORM_MAX_PAIRS 128
#define PT_FORM_MAX_BODY (64 * 1024)

struct pt_form_pair {
    char *key;   /* decoded, NUL-terminated, malloc'd */
    char *value; /* decoded, NUL-terminated, malloc'd */
};

struct pt_form {
    struct pt_form_pair pairs[PT_FORM_MAX_PAIRS];
    size_t n;
};

/* Empties f (it may live on the stack: fields are zeroed). */
void pt_form_init(struct pt_form *f);

/*
 * Decodes body (len bytes): pairs split on '&', name and value on the first
 * '=', '+' is a space, %XX a byte.  Empty segments ("a=1&&b=2") are skipped;
 * a name without '=' has the empty value.  PT_OK, PT_EPARSE (bad escape,
 * decoded NUL, empty name, repeated name), PT_ETOOBIG (body or pair count
 * over the limits), PT_ENOMEM.  f must be initialised; on error it is emptied.
 */
int pt_form_parse(const char *body, size_t len, struct pt_form *f);

/* Appends a copy of key=value. PT_OK, PT_ETOOBIG, PT_ENOMEM. */
int pt_form_add(struct pt_form *f, const char *key, const char *value);

/* Value of key or NULL; the pointer lives as long as f. */
const char *pt_form_get(const struct pt_form *f, const char *key);

/* Frees the pairs; f is empty afterwards. */
void pt_form_free(struct pt_form *f);

/* Appends "k=v&k=v" in pair order, both sides pt_buf_urlencode()d. */
void pt_form_encode(const struct pt_form *f, struct pt_buf *out);

#endif
