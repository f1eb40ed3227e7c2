/* fuzz_stripe_sig.c - the Stripe-Signature header parser. */
#include "gateways/stripe.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *hdr = malloc(size + 1);
    if (!hdr)
        return 0;
    memcpy(hdr, data, size);
    hdr[size] = '\0';
    int64_t t;
    pt_stripe_verify_header(hdr, "{}", 2, "whsec_x", 7, 1764478800, 300, &t);
    free(hdr);
    return 0;
}
