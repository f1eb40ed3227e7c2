/*
 * pt_jose_tool.c - makes the payterm side of tests/vectors/2c2p_pm.json:
 * the generator (tests/vectors/gen/gen_2c2p_pm.mjs) runs it, has the npm
 * `jose` library open what it printed, and records both; test_jose.c makes
 * the same tokens again and compares them byte for byte.  Not part of the
 * product.
 *
 *   pt_jose_tool KIND SEED KEY [PEER] < input    (prints the token)
 *     jwe     the JWE of input to KEY's public half
 *     jws     the JWS (PS256) of input signed with KEY
 *     nested  the JWS by KEY of the JWE of input to PEER (2C2P's envelope)
 */
#include "crypto.h"
#include "detrand.h"
#include "err.h"
#include "gateways/jose.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct pt_pk *key(const char *path)
{
    char err[PT_PK_ERR_MAX];
    struct pt_pk *pk = NULL;
    if (pt_pk_load_file(path, NULL, NULL, &pk, err, sizeof err) != PT_OK) {
        fprintf(stderr, "pt_jose_tool: %s\n", err);
        exit(2);
    }
    return pk;
}

int main(int argc, char **argv)
{
    if (argc < 4 || (strcmp(argv[1], "nested") == 0 && argc < 5)) {
        fprintf(stderr, "usage: pt_jose_tool jwe|jws|nested SEED KEY [PEER] < input\n");
        return 2;
    }
    static char in[PT_JOSE_MAX + 1];
    size_t n = fread(in, 1, sizeof in - 1, stdin);
    struct pt_detrand d;
    pt_detrand_init(&d, argv[2]);
    struct pt_pk *k = key(argv[3]), *peer = argc > 4 ? key(argv[4]) : NULL;
    char *tok = NULL;
    int rc;
    if (strcmp(argv[1], "jwe") == 0)
        rc = pt_jwe_encrypt(k, pt_detrand_fn, &d, in, n, &tok, NULL);
    else if (strcmp(argv[1], "jws") == 0)
        rc = pt_jws_sign(k, pt_detrand_fn, &d, in, n, &tok, NULL);
    else
        rc = pt_jose_seal(k, peer, pt_detrand_fn, &d, in, n, &tok, NULL);
    if (rc != PT_OK) {
        fprintf(stderr, "pt_jose_tool: %s\n", pt_strerror(rc));
        return 1;
    }
    puts(tok);
    free(tok);
    pt_pk_free(k);
    pt_pk_free(peer);
    return 0;
}
