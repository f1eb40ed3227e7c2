/*
 * civil.h - days since 1970-01-01 and proleptic Gregorian dates, both ways
 * (Howard Hinnant's days_from_civil and civil_from_days, exact for every
 * date of int64 days): the one calendar the RFC 3339 writer, the bill dates
 * and the gateways' time readers share.
 */
#ifndef PT_CIVIL_H
#define PT_CIVIL_H

#include <stdint.h>

/* Days since 1970-01-01 of y-m-d (m 1..12, d 1..31). */
static inline int64_t pt_days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* The date of day z since 1970-01-01. */
static inline void pt_civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

#endif
