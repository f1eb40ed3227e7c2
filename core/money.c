/*
 * money.c - ISO 4217 exponents and exact minor/major unit conversion.
 */
#include "money.h"
#include "err.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * ISO 4217 active codes with a minor unit other than 2, and the codes with 2
 * that payterm's gateways settle in.  Sorted for bsearch.  Source: the ISO
 * 4217 list one (current currency & funds code list).
 */
struct cur_exp {
    char code[4];
    unsigned char exp;
};

static const struct cur_exp currencies[] = {
    {"AED", 2}, {"AFN", 2}, {"ALL", 2}, {"AMD", 2}, {"ANG", 2}, {"AOA", 2}, {"ARS", 2}, {"AUD", 2},
    {"AWG", 2}, {"AZN", 2}, {"BAM", 2}, {"BBD", 2}, {"BDT", 2}, {"BGN", 2}, {"BHD", 3}, {"BIF", 0},
    {"BMD", 2}, {"BND", 2}, {"BOB", 2}, {"BRL", 2}, {"BSD", 2}, {"BTN", 2}, {"BWP", 2}, {"BYN", 2},
    {"BZD", 2}, {"CAD", 2}, {"CDF", 2}, {"CHF", 2}, {"CLF", 4}, {"CLP", 0}, {"CNY", 2}, {"COP", 2},
    {"CRC", 2}, {"CUP", 2}, {"CVE", 2}, {"CZK", 2}, {"DJF", 0}, {"DKK", 2}, {"DOP", 2}, {"DZD", 2},
    {"EGP", 2}, {"ERN", 2}, {"ETB", 2}, {"EUR", 2}, {"FJD", 2}, {"FKP", 2}, {"GBP", 2}, {"GEL", 2},
    {"GHS", 2}, {"GIP", 2}, {"GMD", 2}, {"GNF", 0}, {"GTQ", 2}, {"GYD", 2}, {"HKD", 2}, {"HNL", 2},
    {"HTG", 2}, {"HUF", 2}, {"IDR", 2}, {"ILS", 2}, {"INR", 2}, {"IQD", 3}, {"IRR", 2}, {"ISK", 0},
    {"JMD", 2}, {"JOD", 3}, {"JPY", 0}, {"KES", 2}, {"KGS", 2}, {"KHR", 2}, {"KMF", 0}, {"KPW", 2},
    {"KRW", 0}, {"KWD", 3}, {"KYD", 2}, {"KZT", 2}, {"LAK", 2}, {"LBP", 2}, {"LKR", 2}, {"LRD", 2},
    {"LSL", 2}, {"LYD", 3}, {"MAD", 2}, {"MDL", 2}, {"MGA", 2}, {"MKD", 2}, {"MMK", 2}, {"MNT", 2},
    {"MOP", 2}, {"MRU", 2}, {"MUR", 2}, {"MVR", 2}, {"MWK", 2}, {"MXN", 2}, {"MYR", 2}, {"MZN", 2},
    {"NAD", 2}, {"NGN", 2}, {"NIO", 2}, {"NOK", 2}, {"NPR", 2}, {"NZD", 2}, {"OMR", 3}, {"PAB", 2},
    {"PEN", 2}, {"PGK", 2}, {"PHP", 2}, {"PKR", 2}, {"PLN", 2}, {"PYG", 0}, {"QAR", 2}, {"RON", 2},
    {"RSD", 2}, {"RUB", 2}, {"RWF", 0}, {"SAR", 2}, {"SBD", 2}, {"SCR", 2}, {"SDG", 2}, {"SEK", 2},
    {"SGD", 2}, {"SHP", 2}, {"SLE", 2}, {"SOS", 2}, {"SRD", 2}, {"SSP", 2}, {"STN", 2}, {"SVC", 2},
    {"SYP", 2}, {"SZL", 2}, {"THB", 2}, {"TJS", 2}, {"TMT", 2}, {"TND", 3}, {"TOP", 2}, {"TRY", 2},
    {"TTD", 2}, {"TWD", 2}, {"TZS", 2}, {"UAH", 2}, {"UGX", 0}, {"USD", 2}, {"UYI", 0}, {"UYU", 2},
    {"UYW", 4}, {"UZS", 2}, {"VED", 2}, {"VES", 2}, {"VND", 0}, {"VUV", 0}, {"WST", 2}, {"XAF", 0},
    {"XCD", 2}, {"XOF", 0}, {"XPF", 0}, {"YER", 2}, {"ZAR", 2}, {"ZMW", 2}, {"ZWG", 2},
};

static int cmp_cur(const void *a, const void *b)
{
    return memcmp(a, ((const struct cur_exp *)b)->code, 3);
}

int pt_money_exponent(const char *cur)
{
    for (int i = 0; i < 3; i++)
        if (cur[i] < 'A' || cur[i] > 'Z')
            return PT_EINVAL;
    if (cur[3] != '\0')
        return PT_EINVAL;
    const struct cur_exp *e = bsearch(cur, currencies, sizeof currencies / sizeof currencies[0],
                                      sizeof currencies[0], cmp_cur);
    return e ? e->exp : PT_EINVAL;
}

int pt_money_currency_valid(const char *cur)
{
    return pt_money_exponent(cur) >= 0;
}

int pt_money_to_decimal(int64_t minor, const char *cur, enum pt_money_format fmt, char *out,
                        size_t outlen)
{
    int exp = pt_money_exponent(cur);
    return exp < 0 ? PT_EINVAL : pt_money_format(minor, exp, fmt, out, outlen);
}

int pt_money_format(int64_t units, int exp, enum pt_money_format fmt, char *out, size_t outlen)
{
    if (exp < 0 || exp > 4)
        return PT_EINVAL;
    if (units <= 0 || units > PT_MONEY_MAX)
        return PT_ERANGE;

    /* Digits of units, least significant first, padded so there is at least
     * one digit before the point. */
    char digits[24];
    int n = 0;
    for (int64_t v = units; v > 0; v /= 10)
        digits[n++] = (char)('0' + v % 10);
    while (n <= exp)
        digits[n++] = '0';

    int frac = exp;
    if (fmt == PT_MONEY_TRIM)
        while (frac > 0 && digits[exp - frac] == '0')
            frac--;

    size_t need = (size_t)(n - exp) + (frac ? 1 + (size_t)frac : 0) + 1;
    if (need > outlen)
        return PT_ETOOBIG;
    size_t o = 0;
    for (int i = n - 1; i >= exp; i--)
        out[o++] = digits[i];
    if (frac) {
        out[o++] = '.';
        for (int i = exp - 1; i >= exp - frac; i--)
            out[o++] = digits[i];
    }
    out[o] = '\0';
    return PT_OK;
}

int pt_money_from_decimal(const char *s, size_t len, const char *cur, int64_t *minor)
{
    int exp = pt_money_exponent(cur);
    if (exp < 0)
        return PT_EINVAL;
    if (len == 0 || len > 32)
        return len ? PT_ERANGE : PT_EPARSE;

    int64_t v = 0;
    size_t i = 0, int_digits = 0;
    /* v never exceeds PT_MONEY_MAX before a multiply, so v * 10 + 9 fits. */
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++, int_digits++) {
        v = v * 10 + (s[i] - '0');
        if (v > PT_MONEY_MAX)
            return PT_ERANGE;
    }
    if (int_digits == 0)
        return PT_EPARSE;
    int frac = 0;
    if (i < len && s[i] == '.') {
        i++;
        if (i == len)
            return PT_EPARSE; /* "88." is not a number a gateway sends */
        for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
            if (frac < exp) {
                v = v * 10 + (s[i] - '0');
                frac++;
                if (v > PT_MONEY_MAX)
                    return PT_ERANGE;
            } else if (s[i] != '0') {
                return PT_ERANGE; /* finer than the currency's minor unit */
            }
        }
    }
    if (i != len)
        return PT_EPARSE;
    for (; frac < exp; frac++) {
        v *= 10;
        if (v > PT_MONEY_MAX)
            return PT_ERANGE;
    }
    *minor = v;
    return PT_OK;
}

/* ---- a gateway's own unit ----------------------------------------------------- */

static const int64_t pow10s[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};

/* log10 of a unit's step, or -1 when the step is not 1, 10, ... 10^4 (so
 * that a quantum, 10^(step digits + 4 at most), stays in pow10s). */
static int step_digits(int64_t step)
{
    for (int k = 0; k <= 4; k++)
        if (pow10s[k] == step)
            return k;
    return -1;
}

int pt_money_iso_unit(const char *cur, struct pt_money_unit *u)
{
    int exp = pt_money_exponent(cur);
    if (exp < 0)
        return PT_EINVAL;
    *u = (struct pt_money_unit){.exp = exp, .step = 1};
    return PT_OK;
}

int64_t pt_money_unit_quantum(const char *cur, const struct pt_money_unit *u)
{
    int iso = pt_money_exponent(cur), k = step_digits(u->step);
    if (iso < 0 || k < 0 || u->exp < 0 || u->exp > 4)
        return 0;
    /* One unit of u is 10^(iso - exp) minor units; a step of 10^k of them
     * is 10^(k + iso - exp), at least one minor unit. */
    int d = k + iso - u->exp;
    return d > 0 ? pow10s[d] : 1;
}

int pt_money_to_unit(int64_t minor, const char *cur, const struct pt_money_unit *u, int64_t *units)
{
    int64_t q = pt_money_unit_quantum(cur, u);
    if (q == 0)
        return PT_EINVAL;
    if (minor <= 0 || minor % q != 0)
        return PT_ERANGE;
    int iso = pt_money_exponent(cur);
    if (u->exp < iso) {
        *units = minor / pow10s[iso - u->exp]; /* exact: minor is a multiple of q */
        return PT_OK;
    }
    int64_t per = pow10s[u->exp - iso];
    if (minor > INT64_MAX / per)
        return PT_ERANGE;
    *units = minor * per;
    return PT_OK;
}

int pt_money_from_unit(int64_t units, const char *cur, const struct pt_money_unit *u,
                       int64_t *minor)
{
    int iso = pt_money_exponent(cur);
    if (iso < 0 || u->exp < 0 || u->exp > 4)
        return PT_EINVAL;
    if (units < 0)
        return PT_ERANGE;
    if (u->exp >= iso) {
        int64_t per = pow10s[u->exp - iso];
        if (units % per != 0)
            return PT_ERANGE; /* finer than ISO's minor unit */
        *minor = units / per;
        return PT_OK;
    }
    int64_t per = pow10s[iso - u->exp];
    if (units > INT64_MAX / per)
        return PT_ERANGE;
    *minor = units * per;
    return PT_OK;
}
