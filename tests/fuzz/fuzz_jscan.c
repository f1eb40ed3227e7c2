/* fuzz_jscan.c - raw JSON member lookup and exact amount reading. */
#include "gateways/jscan.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const amount[] = {"amount", NULL};
    static const char *const nested[] = {"data", "object", "amount", NULL};
    const char *p = (const char *)data, *v;
    size_t n;
    int64_t x;
    pt_jscan_member(p, size, "alipay_trade_pay_response", &v, &n);
    pt_jscan_amount(p, size, amount, "CNY", &x);
    pt_jscan_amount(p, size, amount, "KWD", &x);
    pt_jscan_int(p, size, nested, &x);
    pt_jscan_index(p, size, 1, &v, &n);
    return 0;
}
