/*
 * 2c2p_pm.c - 2C2P refunds through the Payment Maintenance API (see
 * 2c2p_pm.h): the request XML, the JOSE envelope with the configured keys,
 * and the classification of the answers to R, RS and I.
 *
 * Every reading of an answer that 2C2P's guide leaves open takes the side
 * that can never refund twice: what is not understood is "outcome unknown"
 * (AMBIGUOUS), which the sync engine resolves with the refund status
 * query, never with a resend.  docs/2c2p-refunds.md lists each reading.
 */
#include "gateways/2c2p_pm.h"
#include "crypto.h"
#include "err.h"
#include "gateways/gwcommon.h"
#include "gateways/jose.h"
#include "gateways/pmxml.h"
#include "money.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 2C2P's invoiceNo is at most 50 characters. */
#define C2P_INVOICE_MAX 50

static int is(const char *s, const char *want)
{
    return s && strcmp(s, want) == 0;
}

/* ---- requests ------------------------------------------------------------------ */

int pt_2c2p_pm_request(const struct pt_gw_config *cfg, const char *pt, const struct pt_charge *c,
                       int64_t amount, char **xml, size_t *len)
{
    char amt[PT_MONEY_DECIMAL_MAX];
    if (!cfg->merchant_id[0] || !c->order_id[0] || strlen(c->order_id) > C2P_INVOICE_MAX)
        return PT_EINVAL;
    /* The guide's samples write every decimal ("25.00"): the ISO exponent's. */
    if (pt_money_to_decimal(amount, c->currency, PT_MONEY_FIXED, amt, sizeof amt) != PT_OK)
        return PT_EINVAL;
    const struct pt_pmxml_field f[] = {
        {"version", PT_2C2P_PM_VERSION},
        {"merchantID", cfg->merchant_id},
        {"invoiceNo", c->order_id},
        {"actionAmount", amt},
        {"processType", pt},
    };
    return pt_pmxml_write("PaymentProcessRequest", f, 5, NULL, 0, -1, xml, len);
}

int pt_2c2p_pm_seal(const struct pt_gw_config *cfg, const struct pt_gw_env *env, const char *xml,
                    size_t len, char **token, size_t *tlen)
{
    if (!cfg->private_key || !cfg->peer_key)
        return PT_EINVAL;
    return pt_jose_seal(cfg->private_key, cfg->peer_key, env ? env->random : NULL,
                        env ? env->random_ctx : NULL, xml, len, token, tlen);
}

int pt_2c2p_pm_open(const struct pt_gw_config *cfg, const char *body, size_t len, char **xml,
                    size_t *xlen)
{
    if (!cfg->private_key || !cfg->peer_key)
        return PT_EINVAL;
    return pt_jose_open(cfg->peer_key, cfg->private_key, body, len, xml, xlen);
}

int pt__c2p_build_refund(const struct pt_gw_config *cfg, enum pt_gw_refund_op op,
                         const struct pt_charge *c, const struct pt_refund *r,
                         const struct pt_gw_env *env, struct pt_http_request *out)
{
    char *xml = NULL, *token = NULL;
    size_t xlen = 0, tlen = 0;
    memset(out, 0, sizeof *out);
    if (!cfg->refund_endpoint[0] || !cfg->private_key || !cfg->peer_key)
        return PT_EINVAL;
    /* RS names the original transaction's amount, R the refund's. */
    int rc = op == PT_GW_REFUND ? pt_2c2p_pm_request(cfg, "R", c, r->amount, &xml, &xlen)
                                : pt_2c2p_pm_request(cfg, "RS", c, c->amount, &xml, &xlen);
    if (rc != PT_OK)
        return rc;
    rc = pt_2c2p_pm_seal(cfg, env, xml, xlen, &token, &tlen);
    free(xml);
    if (rc == PT_ECRYPTO || rc == PT_EINVAL)
        return PT_EKEY; /* the merchant's key did not sign (pt_gw_build_error names it) */
    if (rc != PT_OK)
        return rc;
    if ((rc = pt__request_start(out, "POST", cfg->refund_endpoint, "")) != PT_OK) {
        free(token);
        return rc;
    }
    pt__request_body(out, token, tlen);
    rc = pt_http_request_add_header(out, "Content-Type", "text/plain");
    if (rc == PT_OK)
        rc = pt_http_request_add_header(out, "Accept", "text/plain");
    if (rc != PT_OK)
        pt_http_request_free(out);
    return rc;
}

/* ---- answers ---------------------------------------------------------------------- */

enum pt_outcome pt_2c2p_pm_refund_status(const char *status)
{
    if (is(status, "RF"))
        return PT_OUTCOME_SUCCESS;
    if (is(status, "RP") || is(status, "REFUND_PENDING"))
        return PT_OUTCOME_PENDING;
    if (is(status, "RFF") || is(status, "RR") || is(status, "RR1") || is(status, "RR2") ||
        is(status, "RR3"))
        return PT_OUTCOME_DECLINED;
    return PT_OUTCOME_AMBIGUOUS;
}

/* Opens 2C2P's answer (HTTP 200, then the JOSE envelope) into *xml
 * (malloc'd); otherwise says why in *out (AMBIGUOUS) and returns non-zero. */
static int open_answer(const struct pt_gw_config *cfg, const struct pt_http_response *resp,
                       char **xml, size_t *n, struct pt_gw_result *out)
{
    if (resp->status != 200 || !resp->body) {
        char code[16];
        snprintf(code, sizeof code, "http_%d", resp->status);
        pt__result(out, PT_OUTCOME_AMBIGUOUS, code, "unexpected HTTP status from 2C2P");
        return PT_EPARSE;
    }
    int rc = pt_2c2p_pm_open(cfg, resp->body, resp->body_len, xml, n);
    if (rc != PT_OK)
        pt__result(out, PT_OUTCOME_AMBIGUOUS,
                   rc == PT_ESIG || rc == PT_EUNSUPPORTED ? "invalid_signature"
                                                          : "malformed_response",
                   pt_jose_why(rc));
    return rc;
}

/*
 * Reads the opened answer to call pt about charge c into *m; on failure
 * says why in *out (AMBIGUOUS) and returns non-zero.  An answer that names
 * another invoice or another call is not believed; one that names none is
 * the answer to our own request on our own TLS connection, and is.
 */
static int read_xml(const struct pt_charge *c, const char *pt, const char *xml, size_t n,
                    struct pt_pmxml *m, struct pt_gw_result *out)
{
    int rc = pt_pmxml_parse(xml, n, "PaymentProcessResponse", m);
    if (rc != PT_OK) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_response",
                   "2C2P's answer is not a PaymentProcessResponse payterm can read");
        return rc;
    }
    const char *got_pt = pt_pmxml_get(m, "processType"), *inv = pt_pmxml_get(m, "invoiceNo");
    if ((got_pt && !is(got_pt, pt)) || (inv && !is(inv, c->order_id))) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "foreign_answer",
                   "2C2P's answer is about another invoice or another call");
        return PT_ESTATE;
    }
    return PT_OK;
}

/* An amount of the answer in minor units of c's currency; PT_OK or not. */
static int amount_of(const char *s, const struct pt_charge *c, int64_t *minor)
{
    return s ? pt_money_from_decimal(s, strlen(s), c->currency, minor) : PT_ENOTFOUND;
}

/* The outcome of a refund answer's respCode (and status, for 00). */
static enum pt_outcome refund_outcome(const char *code, const char *status)
{
    if (is(code, "00"))
        return pt_2c2p_pm_refund_status(status);
    if (is(code, "42"))
        return PT_OUTCOME_PENDING;
    if (is(code, "40") || is(code, "30") || is(code, "16"))
        return PT_OUTCOME_DECLINED; /* exceeds what is refundable; no such transaction */
    /* 49 (already refunded: which refund?), 95, 99 and any code the guide
     * does not list: the refund status query decides. */
    return PT_OUTCOME_AMBIGUOUS;
}

static void classify_refund(const struct pt_pmxml *m, const struct pt_charge *c,
                            struct pt_gw_result *out)
{
    const char *code = pt_pmxml_get(m, "respCode"), *desc = pt_pmxml_get(m, "respDesc");
    const char *status = pt_pmxml_get(m, "status");
    const char *ref = pt_pmxml_get(m, "refundReferenceNo");
    enum pt_outcome oc = refund_outcome(code, status);
    pt__result(out, oc,
               is(code, "00") && status && *status ? status
               : code                              ? code
                                                   : "no_resp_code",
               desc);
    if (oc != PT_OUTCOME_SUCCESS && oc != PT_OUTCOME_PENDING)
        return;
    if (!ref || !*ref) {
        /* Without its number the refund cannot be told from another one of
         * the same amount later: not believed; the status query binds it. */
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "no_refund_reference",
                   "2C2P's answer does not name the refund (refundReferenceNo)");
        return;
    }
    pt__copy(out->trade_no, sizeof out->trade_no, ref);
    if (amount_of(pt_pmxml_get(m, "amount"), c, &out->amount) != PT_OK) {
        out->amount = 0;
        if (oc == PT_OUTCOME_SUCCESS)
            pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_amount",
                       "2C2P reported a refund amount payterm cannot read exactly");
    }
    if (out->outcome == PT_OUTCOME_SUCCESS)
        pt__copy(out->currency, sizeof out->currency, c->currency);
}

static int list_entry(const struct pt_pmxml_refund *x, const struct pt_charge *c,
                      struct pt_gw_refund_list *out)
{
    struct pt_gw_refund_entry *e = &out->e[out->n];
    if (amount_of(x->amount, c, &e->amount) != PT_OK || e->amount <= 0) {
        pt__result(&out->res, PT_OUTCOME_AMBIGUOUS, "malformed_amount",
                   "2C2P listed a refund whose amount payterm cannot read exactly");
        return PT_EPARSE;
    }
    if (!x->reference_no || !*x->reference_no || strlen(x->reference_no) >= sizeof e->refund_no) {
        pt__result(&out->res, PT_OUTCOME_AMBIGUOUS, "malformed_response",
                   "2C2P listed a refund without a usable referenceNo");
        return PT_EPARSE;
    }
    for (int i = 0; i < out->n; i++)
        if (strcmp(out->e[i].refund_no, x->reference_no) == 0) {
            pt__result(&out->res, PT_OUTCOME_AMBIGUOUS, "malformed_response",
                       "2C2P listed one referenceNo twice");
            return PT_EPARSE;
        }
    pt__copy(e->refund_no, sizeof e->refund_no, x->reference_no);
    pt__copy(e->code, sizeof e->code, x->status ? x->status : "");
    e->status = pt_2c2p_pm_refund_status(x->status);
    out->n++;
    return PT_OK;
}

static void classify_list(const struct pt_pmxml *m, const struct pt_charge *c,
                          struct pt_gw_refund_list *out)
{
    const char *code = pt_pmxml_get(m, "respCode"), *desc = pt_pmxml_get(m, "respDesc");
    int64_t total = 0;
    if (!is(code, "00")) {
        pt__result(&out->res, PT_OUTCOME_AMBIGUOUS, code ? code : "no_resp_code", desc);
        return;
    }
    /* RS carries the original transaction's amount: it must be this charge's. */
    const char *amount = pt_pmxml_get(m, "amount");
    if (amount && (amount_of(amount, c, &total) != PT_OK || total != c->amount)) {
        pt__result(&out->res, PT_OUTCOME_AMBIGUOUS, "amount_mismatch",
                   "2C2P's refund status names another transaction amount");
        return;
    }
    for (int i = 0; i < m->nrefunds; i++)
        if (list_entry(&m->refunds[i], c, out) != PT_OK) {
            out->n = 0;
            return;
        }
    pt__result(&out->res, PT_OUTCOME_SUCCESS, code, desc);
}

/* A transaction status of an I answer: the money is taken (A, S, RS - ready
 * for settlement -, refunded later, fully or in part), voided, or unknown. */
static enum pt_outcome transaction_outcome(const char *status)
{
    static const char *const taken[] = {"A", "S", "RS", "RF", "RP", NULL};
    for (const char *const *t = taken; *t; t++)
        if (is(status, *t))
            return PT_OUTCOME_SUCCESS;
    return is(status, "V") ? PT_OUTCOME_CANCELED : PT_OUTCOME_AMBIGUOUS;
}

static void classify_inquiry(const struct pt_pmxml *m, const struct pt_charge *c,
                             struct pt_gw_result *out)
{
    const char *code = pt_pmxml_get(m, "respCode"), *status = pt_pmxml_get(m, "status");
    if (is(code, "16")) {
        pt__result(out, PT_OUTCOME_NOT_FOUND, code, pt_pmxml_get(m, "respDesc"));
        return;
    }
    enum pt_outcome oc = is(code, "00") ? transaction_outcome(status) : PT_OUTCOME_AMBIGUOUS;
    pt__result(out, oc,
               is(code, "00") && status ? status
               : code                   ? code
                                        : "no_resp_code",
               pt_pmxml_get(m, "respDesc"));
    pt__copy(out->trade_no, sizeof out->trade_no, pt_pmxml_get(m, "referenceNo"));
    if (amount_of(pt_pmxml_get(m, "amount"), c, &out->amount) == PT_OK)
        pt__copy(out->currency, sizeof out->currency, c->currency);
    else if (oc == PT_OUTCOME_SUCCESS)
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "malformed_amount",
                   "2C2P reported an amount payterm cannot read exactly");
}

int pt__c2p_pm_classify(const char *pt, const struct pt_charge *c, const char *xml, size_t len,
                        struct pt_gw_result *res, struct pt_gw_refund_list *list)
{
    struct pt_gw_result *out = list ? &list->res : res;
    if (list)
        memset(list, 0, sizeof *list);
    else
        memset(res, 0, sizeof *res);
    struct pt_pmxml *m = calloc(1, sizeof *m); /* ~3 KiB: off the stack */
    if (!m) {
        pt__result(out, PT_OUTCOME_AMBIGUOUS, "out_of_memory", NULL);
        return PT_ENOMEM;
    }
    if (read_xml(c, pt, xml, len, m, out) == PT_OK) {
        if (list)
            classify_list(m, c, list);
        else if (is(pt, "I"))
            classify_inquiry(m, c, res);
        else
            classify_refund(m, c, res);
    }
    pt_pmxml_free(m);
    free(m);
    return PT_OK;
}

/* An answer to call pt: opened, then classified. */
static int parse_answer(const struct pt_gw_config *cfg, const char *pt, const struct pt_charge *c,
                        const struct pt_http_response *resp, struct pt_gw_result *res,
                        struct pt_gw_refund_list *list)
{
    struct pt_gw_result *out = list ? &list->res : res;
    char *xml = NULL;
    size_t n = 0;
    if (list)
        memset(list, 0, sizeof *list);
    else
        memset(res, 0, sizeof *res);
    if (open_answer(cfg, resp, &xml, &n, out) != PT_OK)
        return PT_OK;
    pt__c2p_pm_classify(pt, c, xml, n, res, list);
    pt_zeroize(xml, n);
    free(xml);
    return PT_OK;
}

int pt__c2p_parse_refund(const struct pt_gw_config *cfg, enum pt_gw_refund_op op,
                         const struct pt_charge *c, const struct pt_refund *r,
                         const struct pt_http_response *resp, struct pt_gw_result *out)
{
    (void)r;
    if (op == PT_GW_REFUND)
        return parse_answer(cfg, "R", c, resp, out, NULL);
    /* The status query is a list (parse_refund_list). */
    memset(out, 0, sizeof *out);
    pt__result(out, PT_OUTCOME_AMBIGUOUS, "unsupported", "read with parse_refund_list");
    return PT_OK;
}

int pt__c2p_parse_refund_list(const struct pt_gw_config *cfg, const struct pt_charge *c,
                              const struct pt_http_response *resp, struct pt_gw_refund_list *out)
{
    return parse_answer(cfg, "RS", c, resp, NULL, out);
}

int pt_2c2p_pm_parse_inquiry(const struct pt_gw_config *cfg, const struct pt_charge *c,
                             const struct pt_http_response *resp, struct pt_gw_result *out)
{
    return parse_answer(cfg, "I", c, resp, out, NULL);
}

/* ---- configuration ---------------------------------------------------------------- */

const char *pt__c2p_refund_unavailable(const struct pt_gw_settings *in)
{
    if (in->refund_endpoint[0] && in->files[C2P_PM_PRIVATE_KEY][0] &&
        in->files[C2P_PM_PUBLIC_KEY][0])
        return NULL;
    return "2C2P refunds go through its Payment Maintenance API, which needs "
           "gateways.2c2p.pm_endpoint, gateways.2c2p.pm_private_key_file and "
           "gateways.2c2p.pm_public_key_file; they are not configured";
}

/* The names of the pm_ keys that are missing, when some are set. */
static int pm_missing(const struct pt_gw_settings *in, char *out, size_t cap)
{
    const char *names[] = {"pm_endpoint", "pm_private_key_file", "pm_public_key_file"};
    const char *values[] = {in->refund_endpoint, in->files[C2P_PM_PRIVATE_KEY],
                            in->files[C2P_PM_PUBLIC_KEY]};
    int set = 0;
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < 3; i++) {
        if (values[i][0]) {
            set++;
            continue;
        }
        o += (size_t)snprintf(out + o, o < cap ? cap - o : 0, "%sgateways.2c2p.%s", o ? ", " : "",
                              names[i]);
    }
    return set;
}

int pt__c2p_load_pm(const struct pt_gw_settings *in, pt_gw_random_fn rnd, void *ctx,
                    struct pt_gw_config *o, char *err, size_t errlen)
{
    char missing[160];
    int set = pm_missing(in, missing, sizeof missing);
    if (set == 0)
        return PT_OK; /* no Payment Maintenance: 2C2P refunds are refused (409) */
    if (set < 3) {
        snprintf(err, errlen,
                 "%s: required with the other Payment Maintenance settings (pm_endpoint, "
                 "pm_private_key_file and pm_public_key_file go together; without all three, "
                 "2C2P refunds are refused)",
                 missing);
        return PT_ECONFIG;
    }
    const char *priv = in->files[C2P_PM_PRIVATE_KEY], *pub = in->files[C2P_PM_PUBLIC_KEY];
    int rc = pt__gw_load_private_key("2c2p", "pm_private_key_file", priv, rnd, ctx, o, err, errlen);
    if (rc != PT_OK)
        return rc;
    if (pt_pk_probe_jose(o->private_key) != PT_OK) {
        snprintf(err, errlen,
                 "gateways.2c2p.pm_private_key_file: %s: this key does not sign PS256 and decrypt "
                 "RSA-OAEP (a damaged key?)",
                 priv);
        return PT_EPARSE;
    }
    rc = pt__gw_load_peer_key("2c2p", "pm_public_key_file", pub, o, rnd, ctx, &o->peer_key, err,
                              errlen);
    if (rc != PT_OK)
        return rc;
    pt__copy(o->refund_endpoint, sizeof o->refund_endpoint, in->refund_endpoint);
    return PT_OK;
}
