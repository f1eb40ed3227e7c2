/*
 * 2c2p.h - 2C2P PGW v4.3 wire helpers.
 *
 * Every request, (successful) response and backend notification body is
 * {"payload":"<JWT HS256>"} signed with the merchant's secret key, whose
 * bytes are the HMAC key as written (not hex-decoded).  Error answers come
 * back as plain, unsigned {"respCode":"9xxx","respDesc":"..."}.  Amounts are
 * JSON numbers in major units (1000.00 THB is sent as 1000, as JavaScript's
 * JSON.stringify writes it); they are produced from and read into minor units
 * with money.h, never through a double.  The adapter is pt_gateway_2c2p.
 */
#ifndef PT_2C2P_H
#define PT_2C2P_H

#include <stddef.h>

/*
 * Wraps payload (JSON text) into {"payload":"<JWT>"}.  *body is malloc'd
 * (caller frees), *blen its length (may be NULL).  PT_OK or pt_jwt_* errors.
 */
int pt_2c2p_seal(const void *key, size_t keylen, const char *payload, size_t plen, char **body,
                 size_t *blen);

/*
 * Opens a {"payload":"<JWT>"} body: verifies the JWT (HS256 only) and returns
 * the decoded payload text in *payload (malloc'd, caller frees) and *plen.
 * PT_OK, PT_ESIG (bad MAC, other algorithm), PT_ENOTFOUND (no "payload"
 * member: an unsigned error answer), PT_EPARSE.
 */
int pt_2c2p_open(const void *key, size_t keylen, const char *body, size_t len, char **payload,
                 size_t *plen);

/*
 * Removes insignificant whitespace from JSON text (in place; strings are left
 * untouched), so a pretty-printed payload signs like JSON.stringify's compact
 * output.  Returns the new length.
 */
size_t pt_2c2p_minify(char *json, size_t len);

struct pt_gateway;
/* The adapter's table (listed in registry.c). */
extern const struct pt_gateway pt_gateway_2c2p;

#endif
