/*
 * fuzz_common.h - fixtures shared by the notification/response fuzzers:
 * gateway configs with the test keys, loaded once.  The harnesses sign what
 * the fuzzer produces with the *gateway's* key, so inputs get past the
 * signature check and reach the parsers behind it.
 */
#ifndef PT_FUZZ_COMMON_H
#define PT_FUZZ_COMMON_H

#include "crypto.h"
#include "gateway.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline int fuzz_random(void *ctx, void *buf, size_t len)
{
    (void)ctx;
    memset(buf, 0x42, len);
    return 0;
}

static inline struct pt_pk *fuzz_key(const char *name)
{
    char path[1024], err[PT_PK_ERR_MAX];
    struct pt_pk *pk = NULL;
    snprintf(path, sizeof path, "%s/keys/%s", PT_TEST_DATA_DIR, name);
    if (pt_pk_load_file(path, fuzz_random, NULL, &pk, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        abort();
    }
    return pk;
}

static inline void fuzz_secret(struct pt_gw_config *c, const char *s)
{
    c->secret_len = strlen(s);
    memcpy(c->secret, s, c->secret_len);
}

#endif
