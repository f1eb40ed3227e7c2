/*
 * wechat.h - WeChat Pay APIv3 wire helpers (WECHATPAY2-SHA256-RSA2048).
 *
 * Requests are signed with the merchant key over
 *   METHOD\nURL\ntimestamp\nnonce\nbody\n      (URL = path + query)
 * and carry the result in the Authorization header.  Responses and
 * notifications are signed by the WeChat platform key over
 *   timestamp\nnonce\nbody\n
 * with the Wechatpay-Timestamp/-Nonce/-Signature/-Serial headers; the serial
 * names the platform key (hex, compared case-insensitively).  A
 * notification's `resource` is AES-256-GCM encrypted with the merchant's
 * APIv3 key (nonce and associated_data given beside the ciphertext, the
 * 16-byte tag appended to it).  The adapter is pt_gateway_wechat (wechat.c);
 * the simulator and `payterm sign`/`verify` use these helpers directly.
 */
#ifndef PT_WECHAT_H
#define PT_WECHAT_H

#include <stddef.h>
#include <stdint.h>

#include "crypto.h"
#include "platform.h"

#define PT_WECHAT_SIG_MAX 1400 /* base64 of an RSA-8192 signature, NUL included */

/*
 * "METHOD\nURL\ntimestamp\nnonce\nbody\n" (body may be NULL for an empty
 * body).  malloc'd (caller frees), *len its length (may be NULL); NULL when out
 * of memory or over 256 KiB.
 */
char *pt_wechat_request_message(const char *method, const char *url_path, const char *timestamp,
                                const char *nonce, const char *body, size_t body_len, size_t *len);

/* "timestamp\nnonce\nbody\n", same conventions. */
char *pt_wechat_response_message(const char *timestamp, const char *nonce, const char *body,
                                 size_t body_len, size_t *len);

/* The path and query of an absolute URL ("https://h:1/v3/x?a=b" -> "/v3/x?a=b"). */
const char *pt_wechat_url_path(const char *url);

/*
 * The Authorization value, fields in the order wechatpay-axios-plugin writes
 * them: WECHATPAY2-SHA256-RSA2048 mchid="..",serial_no="..",timestamp="..",
 * nonce_str="..",signature="..".  (The server parses key="value" pairs; the
 * order in WeChat's documentation differs and is equally accepted.)
 * PT_OK, PT_EINVAL (a field holds '"' or a line break), PT_ETOOBIG.
 */
int pt_wechat_authorization(const char *mchid, const char *serial, const char *timestamp,
                            const char *nonce, const char *signature, char *out, size_t outlen);

/* The fields of an Authorization header (what the simulator checks). */
struct pt_wechat_auth {
    char mchid[64];
    char serial_no[128];
    char timestamp[24];
    char nonce_str[64];
    char signature[PT_WECHAT_SIG_MAX];
};

/* Parses an Authorization value.  PT_OK or PT_EPARSE (scheme, syntax, a field missing). */
int pt_wechat_parse_authorization(const char *value, struct pt_wechat_auth *out);

/*
 * Verifies a response or notification: serial must equal expected_serial
 * (case-insensitive; a different serial means another key and fails), and
 * signature (base64) must verify with pub over timestamp\nnonce\nbody\n.
 * Any NULL argument fails.  PT_OK or PT_ESIG.
 */
int pt_wechat_verify(const struct pt_pk *pub, const char *expected_serial, const char *timestamp,
                     const char *nonce, const char *signature, const char *serial, const char *body,
                     size_t body_len);

/* Same, reading the four Wechatpay-* headers of msg. */
int pt_wechat_verify_message(const struct pt_pk *pub, const char *expected_serial,
                             const struct pt_http_response *msg);

/*
 * Decrypts a notification resource: ciphertext_b64 is base64 of ciphertext ||
 * 16-byte tag; nonce and aad are the resource's `nonce` and
 * `associated_data` strings (aad may be NULL for none).  key is the APIv3 key
 * (exactly 32 bytes).  On PT_OK *plain (malloc'd, NUL-terminated, caller
 * frees) and *plen.  PT_ESIG when the tag does not verify, PT_EPARSE on bad
 * base64 or sizes, PT_EINVAL on a key that is not 32 bytes.
 */
int pt_wechat_decrypt(const unsigned char *key, size_t keylen, const char *nonce, const char *aad,
                      const char *ciphertext_b64, char **plain, size_t *plen);

/* The simulator's side: base64(ciphertext || tag) into *out (malloc'd). */
int pt_wechat_encrypt(const unsigned char *key, size_t keylen, const char *nonce, const char *aad,
                      const char *plain, size_t plen, char **out);

/*
 * Decrypts the `resource` of a notification body (JSON text, len bytes):
 * checks algorithm AEAD_AES_256_GCM and decrypts as above.  PT_OK, PT_ESIG,
 * PT_EPARSE.
 */
int pt_wechat_notify_plaintext(const unsigned char *key, size_t keylen, const char *body,
                               size_t len, char **plain, size_t *plen);

/* ---- platform certificates (SPEC 8: platform keys rotate) ---------------- */

struct pt_gw_config;
struct pt_gw_env;
struct pt_gw_peer_cert;

/*
 * GET {endpoint}/v3/certificates, signed like every APIv3 call (the
 * adapter's build_keys).  *out as gateway.h's build.  PT_OK, PT_EINVAL.
 */
int pt_wechat_certs_build(const struct pt_gw_config *cfg, const struct pt_gw_env *env,
                          struct pt_http_request *out);

/*
 * The answer to it (the adapter's parse_keys, see gateway.h): its signature
 * verified with a platform key cfg already trusts (cfg->peer_keys, else
 * peer_key under platform_serial); each data[] entry's encrypt_certificate
 * AES-256-GCM-decrypted with the APIv3 key (cfg->secret), parsed as an
 * X.509 certificate whose own serial must be the entry's serial_no, and
 * effective_time/expire_time read.  Certificates expired at env->now_ms
 * (env NULL or now_ms 0: none) are left out.  A single bad entry refuses
 * the whole answer.
 */
int pt_wechat_certs_parse(const struct pt_gw_config *cfg, const struct pt_http_response *resp,
                          const struct pt_gw_env *env, struct pt_gw_peer_cert *out, int max,
                          int *n);

/* "2026-12-01T10:00:00+08:00" (RFC 3339, "Z" or an offset) to Unix seconds.
 * PT_OK or PT_EPARSE. */
int pt_wechat_parse_time(const char *s, int64_t *out);

/* Unix ms as WeChat Pay writes a time: RFC 3339 in China Standard Time,
 * "2025-11-30T13:01:00+08:00" (seconds; the fraction dropped). */
#define PT_WECHAT_TIME_LEN 26
void pt_wechat_time(int64_t ms, char out[PT_WECHAT_TIME_LEN]);

/* 1 when s is a certificate serial: 1 to 63 hex digits. */
int pt_wechat_serial_valid(const char *s);

struct pt_gateway;
/* The adapter's table (listed in registry.c). */
extern const struct pt_gateway pt_gateway_wechat;

/* For the adapter's other files (wxbill.c): a signed APIv3 request without
 * a body (method, path with its query) - PT_OK, PT_EINVAL when the
 * configuration cannot sign - and the check of an answer's signature with
 * the platform keys payterm trusts (PT_OK, PT_ESIG). */
int pt__wechat_v3_request(const struct pt_gw_config *cfg, const struct pt_gw_env *env,
                          const char *method, const char *path, struct pt_http_request *out);
int pt__wechat_v3_verify(const struct pt_gw_config *cfg, const struct pt_http_response *msg);

#endif
