/*
 * sim_units.c - how each simulated gateway reads the amounts on its wire
 * (SPEC 9 and 18).
 *
 * The ledger keeps every amount in ISO 4217 minor units, derived here from
 * the wire amount with the gateway's own rules, written from the gateway's
 * documentation and deliberately apart from the product's adapters
 * (core/gateways): an adapter that converts wrongly shows as a wrong amount
 * in GET /_sim/ledger instead of agreeing with itself.  Only the ISO 4217
 * exponent table (core/money.c) is shared, because that is the standard
 * both sides are held to.
 *
 *   Stripe  https://docs.stripe.com/currencies ("Minor units in API
 *           amounts"): an integer of the currency's minor unit as Stripe
 *           counts it - two decimals unless listed as zero-decimal or
 *           three-decimal; ISK and UGX (special cases) are sent as
 *           two-decimal values whose decimals are always 00; three-decimal
 *           amounts must end in 0.  HUF and TWD are special only for payouts.
 *   Alipay  alipay.trade.pay / precreate total_amount (and refund_amount):
 *           单位为元, 精确到小数点后两位 - the major unit of trans_currency,
 *           at most two decimals.
 *   2C2P and WeChat Pay take ISO's own units (2C2P PGW v4.3 amount D(12,5)
 *           with the ISO 4217 currencyCode; WeChat total_fee / amount.total
 *           精确到币种的最小单位), so their handlers read amounts with the
 *           ISO table directly.
 */
#include "sim_int.h"

#include "err.h"
#include "money.h"

#include <stdio.h>
#include <string.h>

/* Stripe's zero-decimal list and three-decimal list (docs.stripe.com/currencies). */
static const char stripe_zero[][4] = {"BIF", "CLP", "DJF", "GNF", "JPY", "KMF", "KRW", "MGA",
                                      "PYG", "RWF", "VND", "VUV", "XAF", "XOF", "XPF"};
static const char stripe_three[][4] = {"BHD", "JOD", "KWD", "OMR", "TND"};
/* Special cases sent as two-decimal values ending in 00 (UGX also appears in
 * the zero-decimal list, as a currency; the special case says how it is
 * sent). */
static const char stripe_hundreds[][4] = {"ISK", "UGX"};

static int listed(const char (*list)[4], size_t n, const char *cur)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], cur) == 0)
            return 1;
    return 0;
}
#define LISTED(list, cur) listed(list, sizeof list / sizeof list[0], cur)

/* How many decimals Stripe's integer amount has in cur. */
static int stripe_decimals(const char *cur)
{
    if (LISTED(stripe_zero, cur))
        return 0;
    return LISTED(stripe_three, cur) ? 3 : 2;
}

static int64_t pow10i(int n)
{
    int64_t p = 1;
    while (n-- > 0)
        p *= 10;
    return p;
}

int pt__sim_stripe_amount_in(const char *cur, int64_t wire, int64_t *minor, char *why, size_t cap)
{
    int iso = pt_money_exponent(cur), dec = stripe_decimals(cur);
    if (iso < 0 || wire <= 0) {
        snprintf(why, cap, "Invalid amount for currency %s.", cur);
        return PT_EINVAL;
    }
    if (dec == 3 && wire % 10 != 0) {
        snprintf(why, cap,
                 "Invalid amount: %s is a three-decimal currency; the last digit of the amount "
                 "must be 0 (round %lld to the nearest ten).",
                 cur, (long long)wire);
        return PT_EINVAL;
    }
    if (LISTED(stripe_hundreds, cur) && wire % 100 != 0) {
        snprintf(why, cap,
                 "Invalid amount: %s is sent as a two-decimal value whose decimals are 00; %lld "
                 "is not divisible by 100.",
                 cur, (long long)wire);
        return PT_EINVAL;
    }
    int64_t m = wire;
    if (dec > iso) {
        if (wire % pow10i(dec - iso) != 0) {
            snprintf(why, cap, "Invalid amount: %lld is finer than one unit of %s.",
                     (long long)wire, cur);
            return PT_EINVAL;
        }
        m = wire / pow10i(dec - iso);
    } else if (dec < iso) {
        m = wire * pow10i(iso - dec); /* wire <= 99999999: no overflow */
    }
    *minor = m;
    return PT_OK;
}

int64_t pt__sim_stripe_amount_out(const char *cur, int64_t minor)
{
    int iso = pt_money_exponent(cur), dec = stripe_decimals(cur);
    if (iso < 0 || dec == iso)
        return minor;
    /* Every minor amount the ledger holds came in through the rule above, so
     * a division here is exact. */
    return dec > iso ? minor * pow10i(dec - iso) : minor / pow10i(iso - dec);
}

/* The decimals Alipay writes and reads in cur: ISO's, at most two. */
static int alipay_decimals(const char *cur)
{
    int iso = pt_money_exponent(cur);
    return iso > 2 ? 2 : iso;
}

int pt__sim_alipay_amount_in(const char *s, const char *cur, int64_t *minor)
{
    const char *dot = strchr(s, '.');
    if (pt_money_exponent(cur) < 0 || (dot && (int)strlen(dot + 1) > alipay_decimals(cur)))
        return PT_EPARSE; /* 精确到小数点后两位: a third decimal is malformed */
    return pt_money_from_decimal(s, strlen(s), cur, minor);
}

void pt__sim_alipay_amount_out(int64_t minor, const char *cur, char out[PT_MONEY_DECIMAL_MAX])
{
    if (pt_money_to_decimal(minor, cur, PT_MONEY_FIXED, out, PT_MONEY_DECIMAL_MAX) != PT_OK) {
        snprintf(out, PT_MONEY_DECIMAL_MAX, "0.00");
        return;
    }
    /* A three- or four-decimal currency's extra digits are zeros (the
     * amount came in through the rule above): Alipay writes two. */
    char *dot = strchr(out, '.');
    int keep = alipay_decimals(cur);
    if (dot && (int)strlen(dot + 1) > keep)
        dot[keep ? keep + 1 : 0] = '\0';
}
