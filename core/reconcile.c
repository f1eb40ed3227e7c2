/*
 * reconcile.c - a bill against the local records (see reconcile.h).
 *
 * Both sides go into one array of entries, grouped by (kind, merchant id)
 * through a hash table: a group is almost always one bill record and one
 * local record.  Within a group, sorted by (side, day, amount), each bill
 * record takes the unused local record nearest in day (at most one day
 * apart).  Groups are independent and the discrepancies are sorted at the
 * end, so the result does not depend on the order of either input.  O(n)
 * in the records of three days, but for the rare bill record named only by
 * the gateway's number (a binary search among the local records).
 */
#include "reconcile.h"
#include "civil.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

static const char *const kind_names[PT_RECON__KINDS] = {
    [PT_RECON_GATEWAY_ONLY] = "gateway_only",
    [PT_RECON_LOCAL_ONLY] = "local_only",
    [PT_RECON_AMOUNT_MISMATCH] = "amount_mismatch",
    [PT_RECON_CURRENCY_MISMATCH] = "currency_mismatch",
    [PT_RECON_REFUND_GATEWAY_ONLY] = "refund_gateway_only",
    [PT_RECON_REFUND_LOCAL_ONLY] = "refund_local_only",
    [PT_RECON_REFUND_AMOUNT_MISMATCH] = "refund_amount_mismatch",
};

const char *pt_recon_kind_name(enum pt_recon_kind k)
{
    return (unsigned)k < PT_RECON__KINDS ? kind_names[k] : "?";
}

enum { BILL = 0, LOCAL = 1 };

/* A record as the comparison sees it: what pairing and comparing read is
 * copied in, so that a group is compared without reaching its records
 * (scattered over two arrays of 100 000) - only a discrepancy does. */
struct entry {
    const struct pt_recon_record *r;
    const char *key; /* the merchant's id, or the gateway's number */
    int64_t amount;
    char currency[4];
    signed char side, day, refund, used;
};

static struct entry entry_of(const struct pt_recon_record *r, const char *key, int side)
{
    struct entry e = {.r = r,
                      .key = key,
                      .amount = r->amount,
                      .side = (signed char)side,
                      .day = (signed char)r->day,
                      .refund = (signed char)r->refund};
    memcpy(e.currency, r->currency, sizeof e.currency);
    return e;
}

/* The id a record is paired by: the merchant's; else the gateway's number
 * (a bill without the merchant's id), which a local record never has as its
 * key - so such a record is paired through the local number first
 * (named_by_number). */
static const char *key_of(const struct pt_recon_record *r)
{
    return r->refund ? r->refund_id : r->order_id;
}

static const char *number_of(const struct pt_recon_record *r);

/* The order within a group (one kind, one key): bill records first, then
 * by day; ties (the same id twice on one day) by amount, currency and the
 * gateway's number, so the result does not depend on the input's order. */
static int entry_cmp(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    if (x->side != y->side)
        return x->side - y->side;
    if (x->day != y->day)
        return x->day - y->day;
    if (x->amount != y->amount)
        return x->amount < y->amount ? -1 : 1;
    int c = memcmp(x->currency, y->currency, sizeof x->currency);
    return c ? c : strcmp(number_of(x->r), number_of(y->r));
}

static const char *number_of(const struct pt_recon_record *r)
{
    return r->refund ? r->gateway_refund_no : r->gateway_trade_no;
}

static int by_number_cmp(const void *a, const void *b)
{
    const struct pt_recon_record *x = *(const struct pt_recon_record *const *)a,
                                 *y = *(const struct pt_recon_record *const *)b;
    if (x->refund != y->refund)
        return x->refund - y->refund;
    return strcmp(number_of(x), number_of(y));
}

/* For a bill record without the merchant's id: the local record with its
 * gateway number gives it (NULL: none).  by_no: the local records sorted
 * by by_number_cmp. */
static const char *named_by_number(const struct pt_recon_record *b,
                                   const struct pt_recon_record *const *by_no, size_t nlocal)
{
    if (!number_of(b)[0] || !nlocal)
        return NULL;
    const struct pt_recon_record *const *hit =
        bsearch(&b, by_no, nlocal, sizeof *by_no, by_number_cmp);
    return hit ? key_of(*hit) : NULL;
}

struct out {
    struct pt_recon_result *res;
    size_t cap;
    int failed;
};

static struct pt_recon_discrepancy *add(struct out *o, enum pt_recon_kind kind,
                                        const struct pt_recon_record *r)
{
    struct pt_recon_result *res = o->res;
    if (res->n == o->cap) {
        size_t want = o->cap ? o->cap * 2 : 8;
        struct pt_recon_discrepancy *more = realloc(res->d, want * sizeof *more);
        if (!more) {
            o->failed = 1;
            return NULL;
        }
        res->d = more;
        o->cap = want;
    }
    struct pt_recon_discrepancy *d = &res->d[res->n++];
    memset(d, 0, sizeof *d);
    d->kind = kind;
    snprintf(d->order_id, sizeof d->order_id, "%s", r->order_id);
    snprintf(d->refund_id, sizeof d->refund_id, "%s", r->refund_id);
    snprintf(d->gateway_trade_no, sizeof d->gateway_trade_no, "%s", r->gateway_trade_no);
    snprintf(d->gateway_refund_no, sizeof d->gateway_refund_no, "%s", r->gateway_refund_no);
    d->amount = r->amount;
    snprintf(d->currency, sizeof d->currency, "%s", r->currency);
    return d;
}

/* The ids the bill does not know, from the local record of a pair. */
static void fill_ids(struct pt_recon_discrepancy *d, const struct pt_recon_record *l)
{
    if (!d->order_id[0])
        snprintf(d->order_id, sizeof d->order_id, "%s", l->order_id);
    if (!d->refund_id[0])
        snprintf(d->refund_id, sizeof d->refund_id, "%s", l->refund_id);
    if (!d->gateway_trade_no[0])
        snprintf(d->gateway_trade_no, sizeof d->gateway_trade_no, "%s", l->gateway_trade_no);
    if (!d->gateway_refund_no[0])
        snprintf(d->gateway_refund_no, sizeof d->gateway_refund_no, "%s", l->gateway_refund_no);
}

/* A pair with one side on the bill date: equal, or a mismatch. */
static void compare_pair(struct out *o, const struct entry *be, const struct entry *le)
{
    if (!strncmp(be->currency, le->currency, sizeof be->currency) && be->amount == le->amount) {
        o->res->matched++;
        return;
    }
    const struct pt_recon_record *b = be->r, *l = le->r;
    struct pt_recon_discrepancy *d;
    if (strcmp(b->currency, l->currency) != 0) {
        /* Amounts in two currencies are not compared: the currency is the
         * discrepancy (a refund's currency is its charge's). */
        if ((d = add(o, PT_RECON_CURRENCY_MISMATCH, b))) {
            fill_ids(d, l);
            d->amount_local = l->amount;
            d->amount_gateway = b->amount;
            snprintf(d->currency_local, sizeof d->currency_local, "%s", l->currency);
            snprintf(d->currency_gateway, sizeof d->currency_gateway, "%s", b->currency);
        }
    } else if (b->amount != l->amount) {
        d = add(o, b->refund ? PT_RECON_REFUND_AMOUNT_MISMATCH : PT_RECON_AMOUNT_MISMATCH, b);
        if (d) {
            fill_ids(d, l);
            d->amount_local = l->amount;
            d->amount_gateway = b->amount;
        }
    }
}

static void group(struct out *o, struct entry *e, size_t n)
{
    /* Bill records first (entry_cmp), each taking the nearest local one. */
    for (size_t i = 0; i < n && e[i].side == BILL; i++) {
        struct entry *best = NULL;
        int best_gap = 2;
        for (size_t j = 0; j < n; j++) {
            if (e[j].side != LOCAL || e[j].used)
                continue;
            int gap = abs(e[j].day - e[i].day);
            if (gap < best_gap) {
                best = &e[j];
                best_gap = gap;
            }
        }
        if (!best)
            continue;
        e[i].used = best->used = 1;
        if (e[i].day == 0 || best->day == 0)
            compare_pair(o, &e[i], best);
        /* Both on neighbouring days: that day's run's. */
    }
    for (size_t i = 0; i < n; i++) {
        if (e[i].used || e[i].day != 0)
            continue;
        const struct pt_recon_record *r = e[i].r;
        enum pt_recon_kind k =
            e[i].side == BILL ? (r->refund ? PT_RECON_REFUND_GATEWAY_ONLY : PT_RECON_GATEWAY_ONLY)
                              : (r->refund ? PT_RECON_REFUND_LOCAL_ONLY : PT_RECON_LOCAL_ONLY);
        add(o, k, r);
    }
}

static void add_totals(struct pt_recon_totals *t, const struct pt_recon_record *r)
{
    if (r->day != 0)
        return;
    if (r->refund) {
        t->refunds++;
        t->refunded += r->amount;
    } else {
        t->trades++;
        t->amount += r->amount;
    }
}

static int discrepancy_cmp(const void *a, const void *b)
{
    const struct pt_recon_discrepancy *x = a, *y = b;
    if (x->kind != y->kind)
        return (int)x->kind - (int)y->kind;
    int c = strcmp(x->order_id, y->order_id);
    if (!c)
        c = strcmp(x->refund_id, y->refund_id);
    if (!c)
        c = strcmp(x->gateway_trade_no, y->gateway_trade_no);
    if (!c)
        c = strcmp(x->gateway_refund_no, y->gateway_refund_no);
    return c ? c : (x->amount < y->amount ? -1 : x->amount > y->amount);
}

/* FNV-1a of a group's key, its kind mixed in. */
static uint64_t key_hash(const struct entry *x)
{
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)x->refund;
    for (const unsigned char *p = (const unsigned char *)x->key; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return h ^ (h >> 29);
}

static int same_group(const struct entry *x, const struct entry *y)
{
    return x->refund == y->refund && !strcmp(x->key, y->key);
}

/* The groups of e[0..n): each entry's slot of an open-addressing table of
 * cap slots (a power of two above n), then the entries counted into their
 * slots' order, so that each group is one run of g; group() is called on
 * each run, sorted.  An entry without a key is a group of its own. */
static int compare_groups(struct out *o, const struct entry *e, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    uint32_t *slot = calloc(cap, sizeof *slot); /* first entry + 1; 0: free */
    uint32_t *at = malloc((n ? n : 1) * sizeof *at);
    size_t *start = calloc(cap + 1, sizeof *start);
    struct entry *g = malloc((n ? n : 1) * sizeof *g);
    int rc = slot && at && start && g ? PT_OK : PT_ENOMEM;
    for (size_t i = 0; rc == PT_OK && i < n; i++) {
        if (!e[i].key[0]) {
            at[i] = UINT32_MAX;
            continue;
        }
        size_t h = (size_t)key_hash(&e[i]) & (cap - 1);
        while (slot[h] && !same_group(&e[slot[h] - 1], &e[i]))
            h = (h + 1) & (cap - 1);
        if (!slot[h])
            slot[h] = (uint32_t)i + 1;
        at[i] = (uint32_t)h;
        start[h + 1]++;
    }
    for (size_t h = 0; rc == PT_OK && h < cap; h++)
        start[h + 1] += start[h];
    size_t keyed = rc == PT_OK ? start[cap] : 0, lone = keyed;
    for (size_t i = 0; rc == PT_OK && i < n; i++)
        g[at[i] == UINT32_MAX ? lone++ : start[at[i]]++] = e[i];
    /* start[h] is now the end of slot h's run, and the start of h + 1's. */
    for (size_t b = 0, h = 0; rc == PT_OK && b < n; h++) {
        size_t end = h < cap ? start[h] : b + 1; /* past the table: the lone ones */
        if (end == b)
            continue;
        if (end - b == 2) {
            if (entry_cmp(&g[b], &g[b + 1]) > 0) {
                struct entry t = g[b];
                g[b] = g[b + 1];
                g[b + 1] = t;
            }
        } else if (end - b > 2) {
            qsort(g + b, end - b, sizeof *g, entry_cmp);
        }
        group(o, g + b, end - b);
        b = end;
    }
    free(slot);
    free(at);
    free(start);
    free(g);
    return rc;
}

int pt_recon_compare(const struct pt_recon_record *bill, size_t nbill,
                     const struct pt_recon_record *local, size_t nlocal,
                     struct pt_recon_result *out)
{
    memset(out, 0, sizeof *out);
    size_t n = nbill + nlocal;
    if (n >= UINT32_MAX / 4)
        return PT_ENOMEM; /* the table's indexes are 32-bit, UINT32_MAX a marker */
    struct entry *e = n ? calloc(n, sizeof *e) : NULL;
    if (n && !e)
        return PT_ENOMEM;
    /* The local records by gateway number: only for a bill record that
     * lacks the merchant's id. */
    const struct pt_recon_record **by_no = NULL;
    for (size_t i = 0; i < nbill; i++) {
        const char *key = key_of(&bill[i]);
        if (!key[0] && nlocal && !by_no) {
            if (!(by_no = malloc(nlocal * sizeof *by_no))) {
                free(e);
                return PT_ENOMEM;
            }
            for (size_t k = 0; k < nlocal; k++)
                by_no[k] = &local[k];
            qsort(by_no, nlocal, sizeof *by_no, by_number_cmp);
        }
        if (!key[0] && !(key = named_by_number(&bill[i], by_no, by_no ? nlocal : 0)))
            key = ""; /* nobody's: gateway_only on its day */
        e[i] = entry_of(&bill[i], key, BILL);
        add_totals(&out->bill, &bill[i]);
    }
    free(by_no);
    for (size_t i = 0; i < nlocal; i++) {
        e[nbill + i] = entry_of(&local[i], key_of(&local[i]), LOCAL);
        add_totals(&out->local, &local[i]);
    }
    struct out o = {.res = out};
    int rc = compare_groups(&o, e, n);
    free(e);
    if (rc || o.failed) {
        pt_recon_result_free(out);
        return PT_ENOMEM;
    }
    if (out->n > 1)
        qsort(out->d, out->n, sizeof *out->d, discrepancy_cmp);
    return PT_OK;
}

int pt_recon_next_line(const char **p, const char *end, const char **line, size_t *n)
{
    if (*p >= end)
        return 0;
    const char *nl = memchr(*p, '\n', (size_t)(end - *p));
    const char *stop = nl ? nl : end;
    *line = *p;
    *n = (size_t)(stop - *p);
    if (*n && (*line)[*n - 1] == '\r')
        (*n)--;
    *p = nl ? nl + 1 : end;
    return 1;
}

void pt_recon_result_free(struct pt_recon_result *r)
{
    free(r->d);
    memset(r, 0, sizeof *r);
}

struct pt_recon_record *pt_recon_push(struct pt_recon_record **rows, size_t *n, size_t *cap)
{
    if (*n == *cap) {
        size_t want = *cap ? *cap * 2 : 64;
        struct pt_recon_record *more = realloc(*rows, want * sizeof *more);
        if (!more)
            return NULL;
        *rows = more;
        *cap = want;
    }
    struct pt_recon_record *r = &(*rows)[(*n)++];
    memset(r, 0, sizeof *r);
    return r;
}

int pt_recon_vfail(char *err, size_t errlen, const char *where, const char *fmt, va_list ap)
{
    if (err && errlen) {
        int k = snprintf(err, errlen, "%s", where);
        if (k > 0 && (size_t)k < errlen)
            vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
    }
    return PT_EPARSE;
}

int pt_recon_line_fail(char *err, size_t errlen, const char *bill, size_t line, const char *fmt,
                       ...)
{
    char where[64];
    snprintf(where, sizeof where, "%s bill line %zu: ", bill, line);
    va_list ap;
    va_start(ap, fmt);
    int rc = pt_recon_vfail(err, errlen, where, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- bill dates ---- */

#define DAY_MS 86400000LL

static int parse_date(const char *s, int *y, int *m, int *d)
{
    if (!s || strlen(s) != 10 || s[4] != '-' || s[7] != '-')
        return 0;
    for (int i = 0; i < 10; i++)
        if (i != 4 && i != 7 && (s[i] < '0' || s[i] > '9'))
            return 0;
    *y = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0');
    *m = (s[5] - '0') * 10 + (s[6] - '0');
    *d = (s[8] - '0') * 10 + (s[9] - '0');
    static const int mdays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (*y < 2000 || *y > 2999 || *m < 1 || *m > 12 || *d < 1 || *d > mdays[*m - 1])
        return 0;
    int leap = (*y % 4 == 0 && *y % 100 != 0) || *y % 400 == 0;
    return !(*m == 2 && *d == 29 && !leap);
}

int pt_recon_date_ok(const char *date)
{
    int y, m, d;
    return parse_date(date, &y, &m, &d);
}

int pt_recon_date_start(const char *date, int offset_min, int64_t *start)
{
    int y, m, d;
    if (!parse_date(date, &y, &m, &d))
        return PT_EINVAL;
    *start = pt_days_from_civil(y, m, d) * DAY_MS - (int64_t)offset_min * 60000;
    return PT_OK;
}

void pt_recon_date_of(int64_t ms, int offset_min, char out[11])
{
    int64_t local = ms + (int64_t)offset_min * 60000;
    int64_t days = local >= 0 ? local / DAY_MS : (local - DAY_MS + 1) / DAY_MS;
    int64_t y;
    int m, d;
    pt_civil_from_days(days, &y, &m, &d);
    if (y < 0 || y > 9999)
        y = y < 0 ? 0 : 9999;
    snprintf(out, 11, "%04d-%02d-%02d", (int)y, m, d);
}

int pt_recon_shift_date(const char *date, int days, char out[11])
{
    int64_t start;
    if (pt_recon_date_start(date, 0, &start) != PT_OK)
        return PT_EINVAL;
    pt_recon_date_of(start + (int64_t)days * DAY_MS, 0, out);
    return PT_OK;
}
