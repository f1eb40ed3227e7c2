/*
 * money.h - amounts in minor units and their decimal spellings.
 *
 * Every amount in payterm is an int64 count of the currency's minor unit
 * (fen, cents, satang; JPY has none, KWD has three).  Floats never touch
 * money.  Gateways want major-unit decimal strings (Alipay "88.88", 2C2P's
 * JSON number 1000 for 1000.00 THB); this module converts exactly in both
 * directions using the ISO 4217 exponent table.
 */
#ifndef PT_MONEY_H
#define PT_MONEY_H

#include <stddef.h>
#include <stdint.h>

/* Largest amount payterm represents: 10^15 minor units, far beyond any
 * card-present charge and well inside int64 and a double's exact range. */
#define PT_MONEY_MAX INT64_C(1000000000000000)

/* Longest decimal spelling: 16 digits, a point, NUL, with room to spare. */
#define PT_MONEY_DECIMAL_MAX 24

/*
 * Returns the ISO 4217 minor-unit exponent (0..4) of an upper-case
 * three-letter currency code, or PT_EINVAL when the code is not in the
 * table (or not three upper-case letters).  cur may not be NULL.
 */
int pt_money_exponent(const char *cur);

/* True (1) when cur is a three-letter upper-case code the table knows. */
int pt_money_currency_valid(const char *cur);

enum pt_money_format {
    PT_MONEY_FIXED = 0, /* always all exponent digits: "88.80", "100", "1.230" */
    PT_MONEY_TRIM = 1   /* shortest exact form, as a JSON number: "88.8", "1000" */
};

/*
 * Writes the major-unit decimal spelling of `minor` into out (size outlen).
 * PT_OK, PT_EINVAL (unknown currency), PT_ERANGE (amount <= 0 or above
 * PT_MONEY_MAX) or PT_ETOOBIG (out too small).
 */
int pt_money_to_decimal(int64_t minor, const char *cur, enum pt_money_format fmt, char *out,
                        size_t outlen);

/*
 * Parses a major-unit decimal string ("88.88", "100", "1.5") of at most
 * `len` bytes into minor units.  Accepts digits with an optional '.' and
 * fraction; more fraction digits than the exponent are accepted only when the
 * extra ones are zeros.  No sign, no exponent, no blanks.  PT_OK, PT_EPARSE
 * (bad spelling), PT_EINVAL (unknown currency), PT_ERANGE (more precision than
 * the currency has, or above PT_MONEY_MAX).
 */
int pt_money_from_decimal(const char *s, size_t len, const char *cur, int64_t *minor);

#endif
