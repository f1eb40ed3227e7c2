/*
 * wechat_v2.h - WeChat Pay APIv2 wire helpers (付款码 payment-code calls).
 *
 * APIv2 speaks flat XML documents, <xml><name>value</name>...</xml>, both
 * ways, authenticated with a shared secret (the merchant's 32-character
 * APIv2 key):
 *
 *   stringA = the fields with non-empty values, `sign` excluded, sorted by
 *             name (byte order), joined as k=v&k=v (values as they are, no
 *             escaping)
 *   sign    = upper-case hex of HMAC-SHA256(key, stringA + "&key=" + key)
 *             (or MD5(stringA + "&key=" + key) for sign_type=MD5)
 *
 * This is what wechatpay-axios-plugin's Hash.sign(Formatter.ksort(...))
 * computes.  payterm sends sign_type=HMAC-SHA256 and accepts nothing else in
 * an answer; MD5 exists only for `payterm sign --gateway wechat-v2` (older
 * integrations still sign with it).
 *
 * The writer emits what the SDK's Transformer.toXml emits (plain text, a
 * CDATA section when a value holds one of < > & ' ", an empty element as
 * <name/>), with one difference: a value holding "]]>" is split across two
 * CDATA sections ("]]]]><![CDATA[>"), so it cannot close its section and
 * inject fields; the SDK writes it unsplit, which breaks the document.
 *
 * The reader is strict and bounded.  It takes exactly one flat <xml>
 * element: no DOCTYPE, no entity other than the five XML predefines (&lt;
 * &gt; &amp; &quot; &apos;: they need no DTD and expand to one character),
 * no numeric character references, comments, processing instructions (an
 * XML declaration at the very start is skipped), attributes or nested
 * elements; values are plain text and/or CDATA sections, concatenated,
 * never trimmed; a field given twice, a NUL or other control character
 * (tab, LF and CR aside), invalid UTF-8 and documents over
 * PT_WXV2_XML_MAX bytes are refused.
 *
 * The adapter half (micropay, orderquery, reverse) is reached through
 * pt_gateway_wechat's build/parse for method "barcode" (wechat.c); the
 * simulator and the CLI use these helpers directly.
 */
#ifndef PT_WECHAT_V2_H
#define PT_WECHAT_V2_H

#include <stddef.h>

#include "gateway.h"
#include "platform.h"

#define PT_WXV2_XML_MAX (32 * 1024) /* APIv2 answers are under 4 KiB */
#define PT_WXV2_FIELDS_MAX 128      /* orderquery with many coupons stays well below */
#define PT_WXV2_NAME_MAX 64
#define PT_WXV2_KEY_LEN 32  /* the APIv2 key is 32 characters */
#define PT_WXV2_SIGN_MAX 65 /* 64 hex digits (HMAC-SHA256) and the NUL */
#define PT_WXV2_CLIENT_IP_MAX 46

/* One field: name and value, both NUL-terminated (values never hold NUL). */
struct pt_wxv2_field {
    const char *name;
    const char *value;
};

/* A parsed document; the fields point into store.  Free with pt_wxv2_msg_free. */
struct pt_wxv2_msg {
    struct pt_wxv2_field *f;
    int n;
    char *store;
};

enum pt_wxv2_sign_type { PT_WXV2_HMAC_SHA256 = 0, PT_WXV2_MD5 };

/* Frees what a parse left in m; accepts NULL and a zeroed struct. */
void pt_wxv2_msg_free(struct pt_wxv2_msg *m);

/* The value of field name, or NULL when the document has none. */
const char *pt_wxv2_get(const struct pt_wxv2_msg *m, const char *name);

/*
 * The sign_type parameter's value: "HMAC-SHA256" or "MD5" (exactly, as
 * WeChat spells them).  PT_OK or PT_EINVAL.
 */
int pt_wxv2_sign_type(const char *s, enum pt_wxv2_sign_type *out);

/*
 * stringA of n fields (see above).  malloc'd, NUL-terminated (caller
 * frees), *len its length (may be NULL); NULL when out of memory, too big,
 * or a name appears twice.  Holds no secret.
 */
char *pt_wxv2_string_to_sign(const struct pt_wxv2_field *f, size_t n, size_t *len);

/*
 * The sign of n fields with key (keylen bytes, not empty) into out
 * (upper-case hex, NUL-terminated: 64 digits for HMAC-SHA256, 32 for MD5).
 * The message holding the key is built in one exact allocation and wiped.
 * PT_OK, PT_EINVAL (no key, a name twice), PT_ENOMEM, PT_ECRYPTO.
 */
int pt_wxv2_sign(enum pt_wxv2_sign_type type, const unsigned char *key, size_t keylen,
                 const struct pt_wxv2_field *f, size_t n, char out[PT_WXV2_SIGN_MAX]);

/*
 * Checks the `sign` field of a parsed document: HMAC-SHA256 over all its
 * other fields, compared in constant time.  An absent sign, one of another
 * length (an MD5 sign included) or a wrong one all fail.  PT_OK or PT_ESIG.
 */
int pt_wxv2_verify(const unsigned char *key, size_t keylen, const struct pt_wxv2_msg *m);

/*
 * Writes <xml>...</xml> for n fields (see above) into *out (malloc'd,
 * NUL-terminated, caller frees; *len may be NULL).  PT_OK, PT_EINVAL (a
 * name that is not [A-Za-z_][A-Za-z0-9_]*, a value with a control
 * character - CR included: an XML parser would read it as LF and the sign
 * would no longer match - or invalid UTF-8), PT_ETOOBIG, PT_ENOMEM.
 */
int pt_wxv2_xml(const struct pt_wxv2_field *f, size_t n, char **out, size_t *len);

/*
 * Parses a document into *out, every field kept.  PT_OK, PT_EPARSE
 * (anything the reader refuses, see above), PT_ETOOBIG (over
 * PT_WXV2_XML_MAX bytes or PT_WXV2_FIELDS_MAX fields), PT_ENOMEM.  *out is
 * empty on failure.
 */
int pt_wxv2_parse(const char *xml, size_t len, struct pt_wxv2_msg *out);

/*
 * What an adapter wants from an answer: parses it, verifies its sign with
 * key over every field it holds (also those not kept), then keeps only the
 * fields named in allow (NULL-terminated; NULL keeps all).  PT_ESIG when the
 * sign is absent or wrong, otherwise as pt_wxv2_parse.  *out is empty on
 * failure.
 */
int pt_wxv2_read(const char *xml, size_t len, const unsigned char *key, size_t keylen,
                 const char *const *allow, struct pt_wxv2_msg *out);

/*
 * Why a wechat gateway configured as in cannot take charges of method
 * (a sentence naming the missing key), or NULL when it can: "barcode"
 * needs gateways.wechat.apiv2_key_file and apiclient_cert_file.  For the
 * intake check (a 400 at once rather than a charge that can never be
 * built); lives in wechat.c, which knows the key slots.
 */
const char *pt_wechat_method_unavailable(const struct pt_gw_settings *in, const char *method);

/* ---- the adapter half, called by wechat.c for method "barcode" ----------- */

/*
 * PT_GW_PAY: POST {endpoint}/pay/micropay; PT_GW_QUERY: POST
 * /pay/orderquery; PT_GW_CANCEL: POST /secapi/pay/reverse with the
 * merchant's client certificate (cfg->client_cert_file and
 * client_key_file set in *out).  Conventions of pt_gateway.build.
 */
int pt__wechat_v2_build(const struct pt_gw_config *cfg, enum pt_gw_op op, const struct pt_charge *c,
                        const struct pt_gw_env *env, struct pt_http_request *out);

/*
 * POST {endpoint}/pay/downloadbill (下载对账单, SPEC 19): bill_date
 * yyyyMMdd of date (YYYY-MM-DD), bill_type ALL, signed HMAC-SHA256 with the
 * APIv2 key; no client certificate.  PT_OK, PT_EINVAL (no APIv2 key, a bad
 * date or nonce).  The answer is the bill as text, or an unsigned XML error
 * (pt_wxbill_v2_answer, wxbill.h).
 */
int pt__wechat_v2_bill_request(const struct pt_gw_config *cfg, const struct pt_gw_env *env,
                               const char *date, struct pt_http_request *out);

/* Classifies an APIv2 answer (conventions of pt_gateway.parse). */
int pt__wechat_v2_parse(const struct pt_gw_config *cfg, enum pt_gw_op op, const struct pt_charge *c,
                        const struct pt_http_response *resp, struct pt_gw_result *out);

/*
 * wechat_load()'s APIv2 half: the key and certificate files (both or
 * neither; "" = not configured), the merchant key file the certificate
 * belongs to (private_key_file) and spbill_create_ip ("" = 127.0.0.1) into
 * o.  PT_OK, or an error with a sentence naming the key in err.
 */
int pt__wechat_v2_load(const char *apiv2_key_file, const char *cert_file, const char *key_file,
                       const char *client_ip, pt_gw_random_fn rnd, void *ctx,
                       struct pt_gw_config *o, char *err, size_t errlen);

#endif
