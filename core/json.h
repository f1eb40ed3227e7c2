/*
 * json.h - strict checking of JSON text, canonical JSON, small cJSON helpers.
 *
 * Every JSON body the API takes, and the configuration files, are checked by
 * pt_json_check before cJSON sees them: cJSON accepts text that has no single
 * meaning (a duplicate key, "\u0000" cutting a string short, invalid UTF-8,
 * trailing bytes) and turns every number into a double.
 *
 * The request fingerprint of the idempotency guard is SHA-256 over the
 * canonical form of the request body: object keys sorted by their bytes, no
 * insignificant whitespace, integers without a fraction.  Two bodies that
 * differ only in key order or spacing therefore have the same fingerprint.
 */
#ifndef PT_JSON_H
#define PT_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "buf.h"

/* Largest canonical text produced (request bodies are capped at 16 KiB). */
#define PT_JSON_CANON_MAX (64 * 1024)

/*
 * Returns the canonical text of v (malloc'd, NUL-terminated; caller frees),
 * or NULL when out of memory, when the text would exceed PT_JSON_CANON_MAX, or
 * when v holds something without a canonical form (a non-finite number, a
 * number beyond 2^53 that is not exact, an object with a duplicate key).
 */
char *pt_json_canonical(const cJSON *v);

/*
 * Writing JSON text directly, where building a cJSON tree would cost more
 * than the work it describes (the charge object is rendered for every
 * response and event).  Strings are escaped exactly as cJSON escapes them.
 * Start from a zeroed struct (max set for texts that may exceed
 * PT_JSON_CANON_MAX); a failed allocation or a text over the maximum makes
 * pt_jw_finish return NULL.
 */
struct pt_jw {
    struct pt_buf b; /* the text (buf.h) */
    size_t max;      /* largest text allowed; 0 = PT_JSON_CANON_MAX */
    int failed;      /* set by a writer that gives up; pt_jw_finish gives NULL */
};
void pt_jw_raw(struct pt_jw *w, const char *s);    /* verbatim */
void pt_jw_string(struct pt_jw *w, const char *s); /* quoted and escaped */
void pt_jw_int(struct pt_jw *w, long long v);
/* The text (malloc'd; the caller frees), or NULL when a write failed. */
char *pt_jw_finish(struct pt_jw *w);

/* True when object v has two members with the same name (any depth). */
int pt_json_has_duplicate_keys(const cJSON *v);

/* ---- strict checking ---------------------------------------------------------- */

/* Containers nested deeper than this are refused (a charge has two levels). */
#define PT_JSON_DEPTH_MAX 16
/* Longest field path reported ("metadata.lane"); longer ones are cut. */
#define PT_JSON_FIELD_MAX 128

/* A member of the top-level object whose value's text the caller wants. */
struct pt_json_member {
    const char *name; /* in: the member's name, as cJSON would decode it */
    const char *text; /* out: its value's first byte in the checked text; NULL: absent */
    size_t len;       /* out: length of the value's text */
};

/*
 * In and out of pt_json_check.  Zero it, then set the inputs.
 */
struct pt_json_check {
    /* in */
    int max_depth;                  /* 0: PT_JSON_DEPTH_MAX */
    int integers_only;              /* a number with a fraction or exponent is refused */
    struct pt_json_member *members; /* NULL or n_members entries */
    size_t n_members;
    /* out */
    int exact_numbers;             /* every number is a plain integer of magnitude below 2^53, so
                                      the double cJSON makes of it prints back as the same text */
    char field[PT_JSON_FIELD_MAX]; /* where the problem is: "metadata.lane", "items[2]";
                                      "" for the text as a whole; always valid UTF-8 */
    char problem[96];              /* what is wrong, e.g. "given twice"; "" when fine */
    size_t offset;                 /* byte of the text where it was found */
};

/*
 * Checks that [text, text+len) is exactly one JSON value (RFC 8259) with a
 * single meaning: strings are valid UTF-8 (no overlong forms, no surrogates,
 * nothing above U+10FFFF) without U+0000, raw or escaped, and without
 * unpaired surrogate escapes; no object has a member name twice (compared as
 * decoded, at any depth); numbers follow the grammar (no leading zeros) and,
 * with integers_only, have neither fraction nor exponent;
 * nesting stays within max_depth; nothing follows the value but blanks.  One
 * pass over the text, no allocation for small texts.  text may be NULL when
 * len is 0.
 *
 * PT_OK; PT_EPARSE with chk->field and chk->problem set; PT_ENOMEM.
 */
int pt_json_check(const char *text, size_t len, struct pt_json_check *chk);

/*
 * Reads the JSON number text [s, s+n) as an integer written plainly:
 * -?(0|[1-9][0-9]*), no fraction, no exponent.  PT_OK with *out set,
 * PT_EPARSE (anything else), PT_ERANGE (outside min..max).
 */
int pt_json_plain_int(const char *s, size_t n, int64_t min, int64_t max, int64_t *out);

/*
 * Replaces every byte of the NUL-terminated s that is not part of a valid
 * UTF-8 sequence by '?', so that text built from untrusted bytes can go
 * into a JSON string.  Returns the number of bytes replaced.
 */
size_t pt_json_utf8_scrub(char *s);

#endif
