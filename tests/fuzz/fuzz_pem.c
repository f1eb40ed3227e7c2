/* fuzz_pem.c - PEM key and certificate loading. */
#include "crypto.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A fixed "random" source: the fuzzer needs speed, not secrecy. */
static int fixed_random(void *ctx, void *buf, size_t len)
{
    (void)ctx;
    for (size_t i = 0; i < len; i++)
        ((unsigned char *)buf)[i] = (unsigned char)i;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pt_pk *pk = NULL;
    char err[PT_PK_ERR_MAX];
    if (pt_pk_load_mem("fuzz", data, size, fixed_random, NULL, &pk, err, sizeof err) == 0) {
        pt_pk_serial(pk);
        pt_pk_verify(pk, "x", 1, data, size);
        pt_pk_free(pk);
    }
    return 0;
}
