/*
 * refund_bind.c - binding a keyless gateway's listed refunds to local ones
 * (see refund_bind.h).
 */
#include "refund_bind.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int entry_of(const struct pt_gw_refund_list *list, const char *refund_no)
{
    for (int i = 0; i < list->n; i++)
        if (strcmp(list->e[i].refund_no, refund_no) == 0)
            return i;
    return -1;
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
unexplained(struct pt_bind_result *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    out->verdict = PT_BIND_UNEXPLAINED;
    vsnprintf(out->why, sizeof out->why, fmt, ap);
    va_end(ap);
}

/* A refund that reached the gateway (or may have) and is not FAILED. */
static int went_out(const struct pt_refund *l)
{
    return l->state == PT_STATE_PROCESSING || l->state == PT_STATE_UNKNOWN ||
           l->state == PT_STATE_PENDING || l->state == PT_STATE_SUCCESS;
}

/*
 * Marks the entries the other local refunds account for in taken[]; 0, or
 * -1 with out filled when a local refund cannot be squared with the list.
 */
static int explain_others(const struct pt_refund *r, const struct pt_refund *local, int n,
                          const struct pt_gw_refund_list *list, unsigned char *taken,
                          struct pt_bind_result *out)
{
    for (int i = 0; i < n; i++) {
        const struct pt_refund *l = &local[i];
        if (l->id == r->id || !l->gateway_refund_no[0])
            continue;
        int k = entry_of(list, l->gateway_refund_no);
        if (k >= 0)
            taken[k] = 1;
        else if (l->state != PT_STATE_FAILED) {
            /* Money we know went back is not on the gateway's books. */
            unexplained(out, "refund %s (%lld) is not in the gateway's refund list", l->refund_id,
                        (long long)l->amount);
            return -1;
        }
    }
    for (int i = 0; i < n; i++) {
        const struct pt_refund *l = &local[i];
        if (l->id == r->id || l->gateway_refund_no[0] || !went_out(l))
            continue;
        /* The ordering rule keeps this from happening; if it did, an entry
         * could be either refund's. */
        unexplained(out, "refund %s (%lld) is in flight or has no gateway number", l->refund_id,
                    (long long)l->amount);
        return -1;
    }
    /* A refusal the gateway lists anyway: explained by a FAILED refund of
     * its amount that never got a number (one entry each). */
    for (int i = 0; i < n; i++) {
        const struct pt_refund *l = &local[i];
        if (l->id == r->id || l->gateway_refund_no[0] || l->state != PT_STATE_FAILED ||
            !l->first_sent_at)
            continue;
        for (int k = 0; k < list->n; k++)
            if (!taken[k] && list->e[k].status == PT_OUTCOME_DECLINED &&
                list->e[k].amount == l->amount) {
                taken[k] = 1;
                break;
            }
    }
    return 0;
}

void pt_refund_bind(const struct pt_refund *r, const struct pt_refund *local, int n,
                    const struct pt_gw_refund_list *list, struct pt_bind_result *out)
{
    unsigned char taken[PT_GW_REFUND_LIST_MAX] = {0};
    memset(out, 0, sizeof *out);
    out->entry = -1;
    if (r->gateway_refund_no[0]) {
        out->entry = entry_of(list, r->gateway_refund_no);
        out->verdict = out->entry >= 0 ? PT_BIND_FOUND : PT_BIND_UNEXPLAINED;
        if (out->entry < 0)
            snprintf(out->why, sizeof out->why, "the gateway no longer lists its refund %s",
                     r->gateway_refund_no);
        return;
    }
    if (explain_others(r, local, n, list, taken, out) != 0)
        return;
    int left = 0, last = -1;
    for (int k = 0; k < list->n; k++)
        if (!taken[k]) {
            left++;
            last = k;
        }
    if (left == 0) {
        out->verdict = PT_BIND_NONE;
    } else if (left == 1 && list->e[last].amount == r->amount) {
        out->verdict = PT_BIND_FOUND;
        out->entry = last;
    } else if (left == 1) {
        unexplained(out, "the gateway lists refund %s of %lld, which no local refund explains",
                    list->e[last].refund_no, (long long)list->e[last].amount);
    } else {
        unexplained(out, "the gateway lists %d refunds no local refund explains", left);
    }
}
