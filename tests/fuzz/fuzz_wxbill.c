/* fuzz_wxbill.c - WeChat Pay's trade bill (gateways/wxbill.h) and APIv2
 * downloadbill's answer: whatever the bytes, both answer without a crash;
 * an answer not taken as the bill says why; and a bill the parser accepts
 * holds together: every row has an id and an amount above 0 in a currency
 * of three letters, a refund names a refund, and nothing is read from a
 * bill it refuses. */
#include "err.h"
#include "gateways/wxbill.h"
#include "platform.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pt_wxbill b;
    char err[256];
    /* APIv2 downloadbill's answer first: the bill, later, or refused with
     * why; a body that is no XML error is the bill (parsed below). */
    struct pt_http_response resp = {.status = 200, .body = (char *)data, .body_len = size};
    int v2 = pt_wxbill_v2_answer(&resp, err, sizeof err);
    if (v2 != PT_OK && v2 != PT_EAGAIN && v2 != PT_EPARSE)
        abort();
    if (v2 != PT_OK && !err[0])
        abort();
    if (v2 == PT_OK && size && data[0] == '<')
        abort();
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
