/* fuzz_form.c - form decoding (Alipay notifications), then re-encoding. */
#include "gateways/form.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pt_form f;
    struct pt_buf b;
    pt_form_init(&f);
    if (pt_form_parse((const char *)data, size, &f) == 0) {
        pt_buf_init(&b, 1 << 20);
        pt_form_encode(&f, &b);
        pt_buf_free(&b, 0);
        pt_form_get(&f, "sign");
    }
    pt_form_free(&f);
    return 0;
}
