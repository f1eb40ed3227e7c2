/* fuzz_stripe_bill.c - a page of Stripe's lists of the day's charges and
 * refunds (gateways/stripe_bill.h).  data[0] picks the list (even:
 * charges, odd: refunds); the rest is the page.  A page read must give
 * records that hold together; a page refused adds nothing. */
#include "err.h"
#include "gateways/stripe_bill.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int refunds = data[0] & 1;
    struct pt_stripe_bill b = {0};
    char err[256];
    int rc = pt_stripe_bill_page((const char *)data + 1, size - 1, refunds, 1796428800,
                                 1796428800 + 86400, &b, err, sizeof err);
    if (rc != PT_OK && (b.n || (rc == PT_EPARSE && !err[0])))
        abort();
    for (size_t i = 0; i < b.n; i++) {
        const struct pt_recon_record *r = &b.rows[i];
        if (r->amount <= 0 || strlen(r->currency) != 3 || r->refund != refunds)
            abort();
        if (!r->gateway_trade_no[0] && !refunds)
            abort();
        if (refunds && !r->gateway_refund_no[0])
            abort();
    }
    pt_stripe_bill_free(&b);
    return 0;
}
