/*
 * jscan.h - finds members in JSON text without re-serialising anything.
 *
 * Two gateway details need the raw bytes of a JSON value rather than a parsed
 * tree: Alipay signs the text of its `..._response` object exactly as it sits
 * in the body, and amounts (2C2P's `1000.00`, WeChat's `amount.total`,
 * Stripe's `amount`) must be converted to minor units from their decimal
 * spelling, never through a double.  This scanner walks the text, checks it
 * is well formed, and hands back the span of one member's value.
 */
#ifndef PT_JSCAN_H
#define PT_JSCAN_H

#include <stddef.h>
#include <stdint.h>

/*
 * Looks up member `name` of the JSON object text [p, p+len) (blanks around it
 * allowed) and sets *val and *vlen to the raw text of its value (for a string,
 * quotes included).  Names are compared byte for byte as written.  PT_OK,
 * PT_ENOTFOUND, PT_EPARSE (not a well-formed object, nesting deeper than 64,
 * or `name` present twice: a body that can be read two ways is refused).
 */
int pt_jscan_member(const char *p, size_t len, const char *name, const char **val, size_t *vlen);

/*
 * Element idx (0-based) of the JSON array text [p, p+len): raw span of the
 * value.  PT_OK, PT_ENOTFOUND (fewer elements), PT_EPARSE.
 */
int pt_jscan_index(const char *p, size_t len, size_t idx, const char **val, size_t *vlen);

/* Follows a path of member names ("data", "object", "amount", NULL). */
int pt_jscan_path(const char *p, size_t len, const char *const *path, const char **val,
                  size_t *vlen);

/*
 * Reads the raw value at path as a non-negative JSON integer (digits only, no
 * sign, fraction or exponent, at most 18 digits).  PT_OK, PT_ENOTFOUND,
 * PT_EPARSE.
 */
int pt_jscan_int(const char *p, size_t len, const char *const *path, int64_t *out);

/*
 * Reads the raw value at path as an amount in major units - a JSON number
 * (2C2P) or a JSON string holding one (Alipay) - and converts it exactly to
 * minor units of currency cur with pt_money_from_decimal.  PT_OK,
 * PT_ENOTFOUND, PT_EPARSE (exponent, sign, more precision than the currency),
 * PT_ERANGE.
 */
int pt_jscan_amount(const char *p, size_t len, const char *const *path, const char *cur,
                    int64_t *minor);

#endif
