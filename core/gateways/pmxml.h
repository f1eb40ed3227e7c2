/*
 * pmxml.h - the XML of 2C2P's Payment Maintenance API: one root element
 * (<PaymentProcessRequest>, <PaymentProcessResponse>) whose children are
 * fields with text, and, in a refund-status answer, a <refundList> of
 * <refund amount=".." status=".." referenceNo=".." dateTime=".."/>
 * elements (2C2P's developer guide, "Refund Status Inquiry";
 * 2C2P/agent-skills steering/payment-maintenance.md).
 *
 * The reader is strict where a lenient one could be fooled, and bounded:
 * no DOCTYPE, no entity other than the five XML predefines, no character
 * references, comments or processing instructions (an XML declaration at
 * the very start is skipped), no NUL or other control character (tab, LF,
 * CR aside), valid UTF-8 only, a field or an attribute given twice is
 * refused (which of the two would be true?), at most PMXML_MAX bytes.  It
 * is lenient where 2C2P may add what its samples do not show: attributes
 * of the root are ignored, and so is a child element with children of its
 * own other than <refundList> (at most 8 levels deep) - it is simply not a
 * field.  Values are text and/or CDATA, concatenated, never trimmed.
 *
 * The writer escapes & < > " ' in values, so no value can open an element.
 */
#ifndef PT_PMXML_H
#define PT_PMXML_H

#include <stddef.h>

#define PT_PMXML_MAX (32 * 1024)
#define PT_PMXML_FIELDS_MAX 64
#define PT_PMXML_REFUNDS_MAX 64
#define PT_PMXML_NAME_MAX 64

struct pt_pmxml_field {
    const char *name, *value;
};

/* One <refund/> of a <refundList>: each attribute, or NULL when absent. */
struct pt_pmxml_refund {
    const char *amount, *status, *reference_no, *date_time;
};

/* A parsed document; the strings point into store.  Free with pt_pmxml_free. */
struct pt_pmxml {
    struct pt_pmxml_field f[PT_PMXML_FIELDS_MAX];
    int n;
    int has_refund_list; /* a <refundList> element was there (maybe empty) */
    struct pt_pmxml_refund refunds[PT_PMXML_REFUNDS_MAX];
    int nrefunds;
    char *store;
};

/*
 * Parses xml whose root element must be named root.  PT_OK; PT_EPARSE
 * (anything the reader refuses, another root); PT_ETOOBIG (over
 * PT_PMXML_MAX bytes, more than PT_PMXML_FIELDS_MAX fields or
 * PT_PMXML_REFUNDS_MAX refunds); PT_ENOMEM.  *out is empty on failure.
 * out is large (about 2 KiB): keep it off small stacks.
 */
int pt_pmxml_parse(const char *xml, size_t len, const char *root, struct pt_pmxml *out);

/* The value of field name, or NULL. */
const char *pt_pmxml_get(const struct pt_pmxml *m, const char *name);

/* Frees what a parse left; accepts NULL and a zeroed struct. */
void pt_pmxml_free(struct pt_pmxml *m);

/*
 * Writes <root><name>value</name>...</root> for n fields and, when list_at
 * >= 0, a <refundList> of the nr refunds (empty elements with their
 * non-NULL attributes) after the first list_at fields (where 2C2P's sample
 * has it), into *out (malloc'd, NUL-terminated; *len may be NULL).
 * PT_OK, PT_EINVAL (a name that is not [A-Za-z][A-Za-z0-9]*, a value with a
 * control character or invalid UTF-8), PT_ETOOBIG, PT_ENOMEM.
 */
int pt_pmxml_write(const char *root, const struct pt_pmxml_field *f, int n,
                   const struct pt_pmxml_refund *r, int nr, int list_at, char **out, size_t *len);

#endif
