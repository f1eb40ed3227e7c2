/* fuzz_pm_xml.c - 2C2P's Payment Maintenance XML: the reader
 * (gateways/pmxml.h) and the adapter's answer classifiers behind the JOSE
 * envelope (pt__c2p_pm_classify).  data[0] picks the call the answer is
 * read for (0 R, 1 RS, 2 I, 3 the reader alone, with a write-and-read-back
 * check); the rest is the XML.  Whatever the classifiers decide must hold
 * together: a refund believed SUCCESS or PENDING names its refund, a listed
 * refund has a number and an amount, and what the writer writes reads
 * back as the same fields. */
#include "fuzz_common.h"
#include "err.h"
#include "gateways/2c2p_pm.h"
#include "gateways/pmxml.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void classify(int call, const char *xml, size_t len)
{
    static const char *const calls[] = {"R", "RS", "I"};
    struct pt_charge c = {0};
    strcpy(c.gateway, "2c2p");
    strcpy(c.order_id, "260121085327");
    strcpy(c.currency, "THB");
    c.amount = 2500;
    c.state = PT_STATE_SUCCESS;
    if (call == 1) {
        struct pt_gw_refund_list *l = malloc(sizeof *l);
        if (!l)
            return;
        pt__c2p_pm_classify("RS", &c, xml, len, NULL, l);
        if (l->res.outcome != PT_OUTCOME_SUCCESS && l->n != 0)
            abort();
        for (int i = 0; i < l->n; i++)
            if (!l->e[i].refund_no[0] || l->e[i].amount <= 0)
                abort();
        free(l);
        return;
    }
    struct pt_gw_result r;
    pt__c2p_pm_classify(calls[call], &c, xml, len, &r, NULL);
    if (call == 0 && (r.outcome == PT_OUTCOME_SUCCESS || r.outcome == PT_OUTCOME_PENDING) &&
        !r.trade_no[0])
        abort();
}

static void write_back(const char *xml, size_t len)
{
    struct pt_pmxml *m = calloc(1, sizeof *m), *back = calloc(1, sizeof *back);
    char *again = NULL;
    size_t n = 0;
    if (m && back && pt_pmxml_parse(xml, len, "PaymentProcessResponse", m) == PT_OK &&
        pt_pmxml_write("PaymentProcessResponse", m->f, m->n, m->refunds, m->nrefunds,
                       m->has_refund_list ? 0 : -1, &again, &n) == PT_OK) {
        if (pt_pmxml_parse(again, n, "PaymentProcessResponse", back) != PT_OK || back->n != m->n ||
            back->nrefunds != m->nrefunds)
            abort();
        for (int i = 0; i < m->n; i++)
            if (strcmp(back->f[i].name, m->f[i].name) || strcmp(back->f[i].value, m->f[i].value))
                abort();
    }
    free(again);
    if (m)
        pt_pmxml_free(m);
    if (back)
        pt_pmxml_free(back);
    free(m);
    free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t len = size - 1;
    char *xml = malloc(len + 1);
    if (!xml)
        return 0;
    memcpy(xml, data + 1, len);
    xml[len] = '\0';
    int call = data[0] % 4;
    if (call == 3)
        write_back(xml, len);
    else
        classify(call, xml, len);
    free(xml);
    return 0;
}
