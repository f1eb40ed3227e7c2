/*
 * 2c2p_pm.h - 2C2P's Payment Maintenance API (PaymentAction 2.0), the one
 * 2C2P documents refunds in: refund (processType R), refund status (RS)
 * and payment inquiry (I).  docs/2c2p-refunds.md says which documents the
 * wire format follows and lists every defensive reading.
 *
 *   POST {pm_endpoint}, Content-Type: text/plain, body: a compact JWS
 *   (PS256, the merchant's key) whose payload is a compact JWE (RSA-OAEP +
 *   A256GCM, to 2C2P's public key) of
 *
 *   <PaymentProcessRequest><version>4.3</version><merchantID>..</merchantID>
 *   <invoiceNo>..</invoiceNo><actionAmount>25.00</actionAmount>
 *   <processType>R</processType></PaymentProcessRequest>
 *
 * The answer is the mirror image (signed by 2C2P, encrypted to the
 * merchant) of a <PaymentProcessResponse> with respCode, respDesc,
 * processType, invoiceNo, amount, status, referenceNo (the payment's),
 * refundReferenceNo (the refund's) and, for RS, a <refundList> of
 * <refund amount status referenceNo dateTime/> - there referenceNo is the
 * refund's (2C2P's own RS example lists the refundReferenceNo of its R
 * example under it).
 *
 * The request names the invoice and an amount and nothing else: there is
 * no refund key.  The adapter's table says so (refund_keyless), and the
 * sync engine keeps exactly once by the order of its calls.
 */
#ifndef PT_2C2P_PM_H
#define PT_2C2P_PM_H

#include <stddef.h>
#include <stdint.h>

#include "gateway.h"

/* The version 2C2P's Payment Maintenance guide sends (agent-skills, SPEC 5a). */
#define PT_2C2P_PM_VERSION "4.3"

/*
 * The XML of a request: processType pt ("R", "RS", "I") for charge c with
 * actionAmount `amount` (minor units of c's currency, written as a decimal
 * with all of the currency's ISO 4217 decimals: 2500 THB minor -> "25.00").
 * *xml malloc'd (caller frees).  PT_OK, PT_EINVAL (no merchant id, an
 * invoice 2C2P does not take, an amount that cannot be written), PT_ENOMEM.
 */
int pt_2c2p_pm_request(const struct pt_gw_config *cfg, const char *pt, const struct pt_charge *c,
                       int64_t amount, char **xml, size_t *len);

/*
 * Seals xml for 2C2P (JWE to cfg->peer_key, JWS by cfg->private_key) into
 * *token (malloc'd).  env->random as in struct pt_gw_env.  PT_OK, PT_EINVAL
 * (the keys are not configured), jose.h's errors.
 */
int pt_2c2p_pm_seal(const struct pt_gw_config *cfg, const struct pt_gw_env *env, const char *xml,
                    size_t len, char **token, size_t *tlen);

/*
 * Opens 2C2P's answer: verifies with cfg->peer_key, decrypts with
 * cfg->private_key.  *xml malloc'd (caller frees).  jose.h's errors.
 */
int pt_2c2p_pm_open(const struct pt_gw_config *cfg, const char *body, size_t len, char **xml,
                    size_t *xlen);

/*
 * A refund's status as 2C2P writes it (SPEC 5a): RF -> SUCCESS; RP and
 * REFUND_PENDING -> PENDING; RFF, RR, RR1, RR2, RR3 -> DECLINED; anything
 * else -> AMBIGUOUS (the refund status query decides; never a resend).
 */
enum pt_outcome pt_2c2p_pm_refund_status(const char *status);

/*
 * Classifies a payment inquiry (processType I) answer about charge c: the
 * transaction's status in out->code (A authorised, S settled, RS ready for
 * settlement - a transaction status, not the processType -, V voided, RF
 * refunded...), its amount, referenceNo as out->trade_no.  SUCCESS for a
 * payment that took the money (A, S, RS, RF and partial refunds), CANCELED
 * for V, NOT_FOUND for respCode 16, AMBIGUOUS otherwise.  Always PT_OK.
 */
int pt_2c2p_pm_parse_inquiry(const struct pt_gw_config *cfg, const struct pt_charge *c,
                             const struct pt_http_response *resp, struct pt_gw_result *out);

/*
 * What the three parsers do once the JOSE envelope is open: reads xml as
 * the answer to call pt ("R", "RS", "I") about c, into *list for RS (list
 * not NULL) or *res.  Always fills the result; PT_OK or PT_ENOMEM.  (The
 * fuzzer's way to the XML classifiers without RSA on every input.)
 */
int pt__c2p_pm_classify(const char *pt, const struct pt_charge *c, const char *xml, size_t len,
                        struct pt_gw_result *res, struct pt_gw_refund_list *list);

/* The adapter's refund entries (struct pt_gateway, 2c2p.c). */
int pt__c2p_build_refund(const struct pt_gw_config *cfg, enum pt_gw_refund_op op,
                         const struct pt_charge *c, const struct pt_refund *r,
                         const struct pt_gw_env *env, struct pt_http_request *out);
int pt__c2p_parse_refund(const struct pt_gw_config *cfg, enum pt_gw_refund_op op,
                         const struct pt_charge *c, const struct pt_refund *r,
                         const struct pt_http_response *resp, struct pt_gw_result *out);
int pt__c2p_parse_refund_list(const struct pt_gw_config *cfg, const struct pt_charge *c,
                              const struct pt_http_response *resp, struct pt_gw_refund_list *out);
const char *pt__c2p_refund_unavailable(const struct pt_gw_settings *in);
/* Loads pm_private_key_file and pm_public_key_file (all three pm_ keys or
 * none); an error names the key and the file. */
int pt__c2p_load_pm(const struct pt_gw_settings *in, pt_gw_random_fn rnd, void *ctx,
                    struct pt_gw_config *o, char *err, size_t errlen);

/* Slots of the 2C2P key files in pt_gw_settings.files. */
enum { C2P_SECRET = 0, C2P_PM_PRIVATE_KEY = 1, C2P_PM_PUBLIC_KEY = 2 };

#endif
