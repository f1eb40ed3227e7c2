/*
 * store_rows.c - a charge's and a refund's columns (store_rows.h).
 */
#include "store_rows.h"

#include <stdio.h>
#include <string.h>

#include "err.h"

#define PT_COL_DESC_(type, sql, kind, field)                                                       \
    {sql, PT_COL_##kind, offsetof(type, field), sizeof(((type *)0)->field)},
#define CHARGE_COL_(sql, kind, field) PT_COL_DESC_(struct pt_charge, sql, kind, field)
#define REFUND_COL_(sql, kind, field) PT_COL_DESC_(struct pt_refund, sql, kind, field)

static const struct pt_col charge_cols[] = {
    {"id", PT_COL_I64, offsetof(struct pt_charge, id), sizeof(int64_t)},
    PT_CHARGE_COLUMNS(CHARGE_COL_)};
static const struct pt_col refund_cols[] = {
    {"r.id", PT_COL_I64, offsetof(struct pt_refund, id), sizeof(int64_t)},
    PT_REFUND_COLUMNS(REFUND_COL_)};

const struct pt_row_kind pt_charge_row = {
    charge_cols, (int)(sizeof charge_cols / sizeof *charge_cols), sizeof(struct pt_charge)};
const struct pt_row_kind pt_refund_row = {
    refund_cols, (int)(sizeof refund_cols / sizeof *refund_cols), sizeof(struct pt_refund)};

void pt_row_read(const struct pt_row_kind *k, const struct pt_row_src *src, void *obj)
{
    unsigned char *base = obj;
    memset(obj, 0, k->size);
    for (int i = 0; i < k->ncols; i++) {
        const struct pt_col *c = &k->cols[i];
        void *field = base + c->off;
        const char *t;
        switch (c->kind) {
        case PT_COL_I64:
            *(int64_t *)field = src->int_at(src->ctx, i);
            break;
        case PT_COL_INT:
            *(int *)field = (int)src->int_at(src->ctx, i);
            break;
        case PT_COL_TEXT:
            t = src->text_at(src->ctx, i);
            snprintf(field, c->size, "%s", t ? t : "");
            break;
        case PT_COL_STATE:
            t = src->text_at(src->ctx, i);
            if (!t || pt_state_parse(t, field) != PT_OK)
                *(enum pt_state *)field = PT_STATE_UNKNOWN; /* the schema's CHECK: unreachable */
            break;
        case PT_COL_OFFLINE:
            t = src->text_at(src->ctx, i);
            if (!t || pt_offline_mode_parse(t, field) != PT_OK)
                *(enum pt_offline_mode *)field = PT_OFFLINE_PREFER;
            break;
        }
    }
}
