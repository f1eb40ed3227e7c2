/*
 * json.h - canonical JSON and small cJSON helpers.
 *
 * The request fingerprint of the idempotency guard is SHA-256 over the
 * canonical form of the request body: object keys sorted by their bytes, no
 * insignificant whitespace, integers without a fraction.  Two bodies that
 * differ only in key order or spacing therefore have the same fingerprint.
 */
#ifndef PT_JSON_H
#define PT_JSON_H

#include <stddef.h>

#include <cjson/cJSON.h>

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
    char *buf;
    size_t len, cap;
    int failed;
    size_t max; /* largest text allowed; 0 = PT_JSON_CANON_MAX */
};
void pt_jw_raw(struct pt_jw *w, const char *s);    /* verbatim */
void pt_jw_string(struct pt_jw *w, const char *s); /* quoted and escaped */
void pt_jw_int(struct pt_jw *w, long long v);
/* The text (malloc'd; the caller frees), or NULL when a write failed. */
char *pt_jw_finish(struct pt_jw *w);

/* True when object v has two members with the same name (any depth). */
int pt_json_has_duplicate_keys(const cJSON *v);

#endif
