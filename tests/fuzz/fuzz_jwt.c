/* fuzz_jwt.c - HS256 JWT verification (2C2P). */
#include "gateways/jwt.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *payload = NULL;
    size_t plen = 0;
    if (pt_jwt_hs256_verify("secret", 6, (const char *)data, size, &payload, &plen) == 0)
        free(payload);
    return 0;
}
