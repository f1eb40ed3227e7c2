/*
 * detrand.h - a reproducible byte stream for the JOSE tests: SHA-256 of
 * (seed, counter), block after block.  JWE content keys, IVs, OAEP seeds
 * and PSS salts drawn from it make payterm's tokens the same bytes every
 * time, so a token the npm `jose` library once opened
 * (tests/vectors/2c2p_pm.json) can be made again and compared byte for
 * byte.  Never for anything but tests.
 */
#ifndef PT_DETRAND_H
#define PT_DETRAND_H

#include <stdint.h>
#include <string.h>

#include "crypto.h"
#include "err.h"

struct pt_detrand {
    char seed[64];
    uint32_t counter;
    unsigned char block[32];
    size_t used; /* bytes of block already given out (32 = none left) */
};

static inline void pt_detrand_init(struct pt_detrand *d, const char *seed)
{
    memset(d, 0, sizeof *d);
    strncpy(d->seed, seed, sizeof d->seed - 1);
    d->used = sizeof d->block;
}

/* A pt_random_fn: ctx is a struct pt_detrand. */
static inline int pt_detrand_fn(void *ctx, void *buf, size_t len)
{
    struct pt_detrand *d = ctx;
    unsigned char *out = buf;
    while (len > 0) {
        if (d->used == sizeof d->block) {
            unsigned char in[sizeof d->seed + 4];
            size_t n = strlen(d->seed);
            memcpy(in, d->seed, n);
            in[n] = (unsigned char)(d->counter >> 24);
            in[n + 1] = (unsigned char)(d->counter >> 16);
            in[n + 2] = (unsigned char)(d->counter >> 8);
            in[n + 3] = (unsigned char)d->counter;
            d->counter++;
            if (pt_sha256_portable(in, n + 4, d->block) != PT_OK)
                return PT_ECRYPTO;
            d->used = 0;
        }
        size_t k = sizeof d->block - d->used < len ? sizeof d->block - d->used : len;
        memcpy(out, d->block + d->used, k);
        d->used += k;
        out += k;
        len -= k;
    }
    return PT_OK;
}

#endif
