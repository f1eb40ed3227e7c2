/* fuzz_alipaybill.c - Alipay's trade bill (gateways/alipaybill.h) and the
 * zip it comes in (unzip.h).  The first byte chooses: 0 the detail file as
 * it is, else the bytes as the zip (Alipay's, or the merchant portal's)
 * taken apart first.  Whatever the bytes, no crash, no read past them, and
 * a bill accepted holds together: every row has an amount above 0 in CNY
 * and the gateway's trade number, and a refused one adds no row. */
#include "err.h"
#include "gateways/alipaybill.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    struct pt_recon_rows rows = {0};
    char err[256];
    const char *text = (const char *)data + 1;
    int rc = data[0] == 0
                 ? pt_alipaybill_parse(text, size - 1, "2026-12-05", 0, &rows, err, sizeof err)
                 : pt__alipay_parse_bill(text, size - 1, "2026-12-05", &rows, err, sizeof err);
    if (rc != PT_OK) {
        if (rows.n || (rc == PT_EPARSE && !err[0]))
            abort();
        free(rows.rows);
        return 0;
    }
    for (size_t i = 0; i < rows.n; i++) {
        const struct pt_recon_record *r = &rows.rows[i];
        if (r->amount <= 0 || strcmp(r->currency, "CNY") != 0 || r->day != 0)
            abort();
        if (!r->gateway_trade_no[0])
            abort();
    }
    free(rows.rows);
    return 0;
}
