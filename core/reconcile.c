/*
 * reconcile.c - a bill against the local records (see reconcile.h).
 *
 * Both sides go into one array of entries sorted by (kind, merchant id,
 * side, day); each run of equal ids is one group, almost always one bill
 * record and one local record.  Within a group each bill record takes the
 * unused local record nearest in day (at most one day apart).  O(n log n)
 * in the records of three days.
 */
#include "reconcile.h"
#include "civil.h"

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

struct entry {
    const struct pt_recon_record *r;
    const char *key; /* the merchant's id, or the gateway's number */
    int side;
    int used;
};

/* The id a record is paired by: the merchant's; else the gateway's number
 * (a bill without the merchant's id), which a local record never has as its
 * key - so such a record is paired through the local number first
 * (named_by_number). */
static const char *key_of(const struct pt_recon_record *r)
{
    return r->refund ? r->refund_id : r->order_id;
}

static int entry_cmp(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    if (x->r->refund != y->r->refund)
        return x->r->refund - y->r->refund;
    int c = strcmp(x->key, y->key);
    if (c)
        return c;
    if (x->side != y->side)
        return x->side - y->side;
    if (x->r->day != y->r->day)
        return x->r->day - y->r->day;
    /* Ties (the same id twice on one day): by amount, so the result does
     * not depend on the input's order. */
    return x->r->amount < y->r->amount ? -1 : x->r->amount > y->r->amount;
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
static void compare_pair(struct out *o, const struct pt_recon_record *b,
                         const struct pt_recon_record *l)
{
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
    } else {
        o->res->matched++;
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
            int gap = abs(e[j].r->day - e[i].r->day);
            if (gap < best_gap) {
                best = &e[j];
                best_gap = gap;
            }
        }
        if (!best)
            continue;
        e[i].used = best->used = 1;
        if (e[i].r->day == 0 || best->r->day == 0)
            compare_pair(o, e[i].r, best->r);
        /* Both on neighbouring days: that day's run's. */
    }
    for (size_t i = 0; i < n; i++) {
        const struct pt_recon_record *r = e[i].r;
        if (e[i].used || r->day != 0)
            continue;
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

int pt_recon_compare(const struct pt_recon_record *bill, size_t nbill,
                     const struct pt_recon_record *local, size_t nlocal,
                     struct pt_recon_result *out)
{
    memset(out, 0, sizeof *out);
    size_t n = nbill + nlocal;
    struct entry *e = n ? calloc(n, sizeof *e) : NULL;
    if (n && !e)
        return PT_ENOMEM;
    const struct pt_recon_record **by_no = nlocal ? malloc(nlocal * sizeof *by_no) : NULL;
    if (nlocal && !by_no) {
        free(e);
        return PT_ENOMEM;
    }
    for (size_t i = 0; i < nlocal; i++)
        by_no[i] = &local[i];
    if (nlocal)
        qsort(by_no, nlocal, sizeof *by_no, by_number_cmp);
    for (size_t i = 0; i < nbill; i++) {
        const char *key = key_of(&bill[i]);
        if (!key[0] && !(key = named_by_number(&bill[i], by_no, nlocal)))
            key = ""; /* nobody's: gateway_only on its day */
        e[i] = (struct entry){.r = &bill[i], .key = key, .side = BILL};
        add_totals(&out->bill, &bill[i]);
    }
    free(by_no);
    for (size_t i = 0; i < nlocal; i++) {
        e[nbill + i] = (struct entry){.r = &local[i], .key = key_of(&local[i]), .side = LOCAL};
        add_totals(&out->local, &local[i]);
    }
    if (n)
        qsort(e, n, sizeof *e, entry_cmp);
    struct out o = {.res = out};
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        /* A bill record with no id at all is a group of its own. */
        while (j < n && e[i].key[0] && e[j].r->refund == e[i].r->refund &&
               !strcmp(e[j].key, e[i].key))
            j++;
        group(&o, e + i, j - i);
        i = j;
    }
    free(e);
    if (o.failed) {
        pt_recon_result_free(out);
        return PT_ENOMEM;
    }
    if (out->n > 1)
        qsort(out->d, out->n, sizeof *out->d, discrepancy_cmp);
    return PT_OK;
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
