/* fuzz_wxbill.c - WeChat Pay's trade bill (gateways/wxbill.h): whatever
 * the bytes, the parser answers without a crash, and a bill it accepts
 * holds together: every row has an id and an amount above 0 in a currency
 * of three letters, a refund names a refund, and nothing is read from a
 * bill it refuses. */
#include "err.h"
#include "gateways/wxbill.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pt_wxbill b;
    char err[256];
    int rc = pt_wxbill_parse((const char *)data, size, "2026-12-05", &b, err, sizeof err);
    if (rc != PT_OK) {
        if (b.rows || b.n || !err[0] != (rc != PT_EPARSE))
            abort();
        return 0;
    }
    for (size_t i = 0; i < b.n; i++) {
        const struct pt_recon_record *r = &b.rows[i];
        if (r->amount <= 0 || strlen(r->currency) != 3 || r->day != 0)
            abort();
        if (!r->order_id[0] && !r->gateway_trade_no[0])
            abort();
        if (r->refund && !r->refund_id[0] && !r->gateway_refund_no[0])
            abort();
    }
    pt_wxbill_free(&b);
    return 0;
}
