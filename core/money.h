/*
 * money.h - amounts in minor units and their decimal spellings.
 *
 * Every amount in payterm is an int64 count of the currency's minor unit
 * (fen, cents, satang; JPY has none, KWD has three).  Floats never touch
 * money.  Gateways want major-unit decimal strings (Alipay "88.88", 2C2P's
 * JSON number 1000 for 1000.00 THB) or integers in units of their own
 * (Stripe's zero-decimal MGA); this module converts exactly in both
 * directions using the ISO 4217 exponent table and, for a gateway's own
 * unit, a struct pt_money_unit its adapter gives.
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
 * Writes units, a count of 10^-exp of the major unit (exp 0..4), as a
 * major-unit decimal with exp fraction digits (PT_MONEY_TRIM: the shortest
 * exact form).  pt_money_to_decimal with the currency's ISO exponent is this
 * function.  PT_OK, PT_EINVAL (exp out of range), PT_ERANGE (units <= 0 or
 * above PT_MONEY_MAX), PT_ETOOBIG (out too small).
 */
int pt_money_format(int64_t units, int exp, enum pt_money_format fmt, char *out, size_t outlen);

/*
 * A gateway's own unit for the amounts of one currency (SPEC 18): its
 * amounts are integers counting 10^-exp of the major unit that are
 * multiples of step (a power of ten).  Stripe writes MGA with exp 0 although
 * ISO 4217 gives MGA two decimals, ISK with exp 2 although ISO gives none,
 * and three-decimal currencies with exp 3 and step 10 (the last digit 0).
 */
struct pt_money_unit {
    int exp;      /* 0..4 */
    int64_t step; /* 1, 10, 100, 1000 or 10000: amounts are multiples of it */
};

/* The unit that is ISO 4217's own for cur: {exponent, 1}.  PT_OK, PT_EINVAL. */
int pt_money_iso_unit(const char *cur, struct pt_money_unit *u);

/*
 * The smallest amount of cur, in ISO minor units, that unit u can carry:
 * u carries exactly the positive multiples of it (100 for Stripe's MGA, 10
 * for its KWD, 1 for its ISK).  PT_EINVAL (0 returned) for an unknown
 * currency or a unit out of range.
 */
int64_t pt_money_unit_quantum(const char *cur, const struct pt_money_unit *u);

/*
 * minor (ISO minor units of cur) in unit u, into *units.  PT_OK; PT_ERANGE
 * when u cannot carry it (finer than u, not a multiple of its step, <= 0,
 * or beyond int64 in u); PT_EINVAL (unknown currency, unit out of range).
 * *units is untouched on failure.
 */
int pt_money_to_unit(int64_t minor, const char *cur, const struct pt_money_unit *u, int64_t *units);

/*
 * units of u back into ISO minor units of cur, exactly (0 stays 0: an answer
 * that captured nothing).  PT_OK; PT_ERANGE (negative, finer than ISO's
 * minor unit - 150 of Stripe's ISK units is 1.5 kronur - or beyond int64);
 * PT_EINVAL.  *minor untouched on failure.
 */
int pt_money_from_unit(int64_t units, const char *cur, const struct pt_money_unit *u,
                       int64_t *minor);

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
