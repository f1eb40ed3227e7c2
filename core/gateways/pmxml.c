/*
 * pmxml.c - the XML reader and writer of 2C2P's Payment Maintenance
 * messages (see pmxml.h).
 */
#include "gateways/pmxml.h"
#include "buf.h"
#include "err.h"
#include "gateways/xmlread.h"

#include <stdlib.h>
#include <string.h>

#define DEPTH_MAX 8

/* ---- names -------------------------------------------------------------------------- */

static int name_start(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static int name_char(unsigned char c)
{
    return name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == ':';
}

/* ---- the reader ------------------------------------------------------------------ */

/* A name at r->p, copied to the store: returns it, NULL when none. */
static const char *take_name(struct pt_xml_rd *r, size_t *n)
{
    const char *s = r->p;
    if (s >= r->end || !name_start((unsigned char)*s))
        return NULL;
    while (r->p < r->end && name_char((unsigned char)*r->p))
        r->p++;
    *n = (size_t)(r->p - s);
    if (*n > PT_PMXML_NAME_MAX)
        return NULL;
    char *out = r->w;
    memcpy(out, s, *n);
    out[*n] = '\0';
    r->w += *n + 1;
    return out;
}

/* A quoted attribute value into the store. */
static const char *take_attr_value(struct pt_xml_rd *r)
{
    if (r->p >= r->end || (*r->p != '"' && *r->p != '\''))
        return NULL;
    char q = *r->p++;
    char *out = r->w;
    while (r->p < r->end && *r->p != q) {
        if (*r->p == '<')
            return NULL;
        if (*r->p == '&') {
            if (pt__xml_entity(r) != PT_OK)
                return NULL;
            continue;
        }
        *r->w++ = *r->p++;
    }
    if (r->p >= r->end)
        return NULL;
    r->p++;
    *r->w++ = '\0';
    return out;
}

/* The attributes of a start tag, up to its '>' or '/>': *empty tells
 * which.  Those of a <refund> go into *rf (NULL: read and dropped). */
static int take_attrs(struct pt_xml_rd *r, struct pt_pmxml_refund *rf, int *empty)
{
    const char *names[16];
    int n = 0;
    for (;;) {
        int ws = r->p < r->end && pt__xml_blank(*r->p);
        pt__xml_skip_ws(r);
        if (pt__xml_at(r, "/>") || pt__xml_at(r, ">")) {
            *empty = *r->p == '/';
            r->p += *empty ? 2 : 1;
            return PT_OK;
        }
        size_t nl;
        char *mark = r->w;
        const char *name = ws ? take_name(r, &nl) : NULL;
        if (!name)
            return PT_EPARSE;
        pt__xml_skip_ws(r);
        if (r->p >= r->end || *r->p != '=')
            return PT_EPARSE;
        r->p++;
        pt__xml_skip_ws(r);
        const char *value = take_attr_value(r);
        if (!value || n == (int)(sizeof names / sizeof names[0]))
            return PT_EPARSE;
        for (int i = 0; i < n; i++)
            if (strcmp(names[i], name) == 0)
                return PT_EPARSE; /* an attribute twice: refused */
        names[n++] = name;
        if (!rf) {
            r->w = mark; /* not kept */
            continue;
        }
        if (strcmp(name, "amount") == 0)
            rf->amount = value;
        else if (strcmp(name, "status") == 0)
            rf->status = value;
        else if (strcmp(name, "referenceNo") == 0)
            rf->reference_no = value;
        else if (strcmp(name, "dateTime") == 0)
            rf->date_time = value;
    }
}

/* At r->p just past "</": the end tag of name. */
static int take_end(struct pt_xml_rd *r, const char *name, size_t nl)
{
    if ((size_t)(r->end - r->p) < nl || memcmp(r->p, name, nl) != 0)
        return PT_EPARSE;
    r->p += nl;
    if (r->p < r->end && name_char((unsigned char)*r->p))
        return PT_EPARSE; /* </fieldx> for <field> */
    pt__xml_skip_ws(r);
    if (r->p >= r->end || *r->p != '>')
        return PT_EPARSE;
    r->p++;
    return PT_OK;
}

static int take_element(struct pt_xml_rd *r, int depth, struct pt_pmxml *m, const char **value);

/*
 * The content of element name up to and including its end tag.  Its text
 * goes into the store and *value points at it; an element with child
 * elements gets *value NULL (it is not a field) and its children are
 * skipped.  In a list (the content of <refundList>) only <refund> elements
 * and blanks may appear, and the refunds are recorded into m.
 */
static int take_content(struct pt_xml_rd *r, const char *name, size_t nl, int depth,
                        struct pt_pmxml *m, int list, const char **value)
{
    char *text = r->w;
    int nested = 0;
    while (r->p < r->end) {
        if (pt__xml_at(r, "</")) {
            r->p += 2;
            if (take_end(r, name, nl) != PT_OK)
                return PT_EPARSE;
            *r->w++ = '\0';
            *value = nested ? NULL : text;
            return PT_OK;
        }
        if (*r->p == '<' && !pt__xml_at(r, "<![CDATA[")) {
            /* A child element (comments, PIs and DOCTYPE fail in there). */
            char *mark = r->w;
            const char *ignored;
            int rc = take_element(r, list ? -1 : depth + 1, m, &ignored);
            if (rc != PT_OK)
                return rc;
            if (!list)
                r->w = mark; /* skipped: nothing of it is kept */
            nested = 1;
            continue;
        }
        if (list && !pt__xml_blank(*r->p))
            return PT_EPARSE; /* text in a list */
        if (pt__xml_at(r, "<![CDATA[")) {
            r->p += 9;
            if (pt__xml_cdata(r) != PT_OK)
                return PT_EPARSE;
        } else if (*r->p == '&') {
            if (pt__xml_entity(r) != PT_OK)
                return PT_EPARSE;
        } else if (pt__xml_at(r, "]]>")) {
            return PT_EPARSE; /* not allowed in text (XML 1.0 section 2.4) */
        } else {
            *r->w++ = *r->p++;
        }
    }
    return PT_EPARSE;
}

/*
 * One element at r->p ('<').  depth -1: a child of <refundList> (a
 * <refund> is recorded into m, anything else skipped); depth 1: a child of
 * the root (a field, or the list); deeper: skipped.
 */
static int take_element(struct pt_xml_rd *r, int depth, struct pt_pmxml *m, const char **value)
{
    if (depth > DEPTH_MAX)
        return PT_EPARSE;
    r->p++;
    size_t nl;
    const char *name = take_name(r, &nl);
    if (!name)
        return PT_EPARSE; /* "<!", "<?", "</" out of place */
    int is_refund = depth == -1 && strcmp(name, "refund") == 0;
    int is_list = depth == 1 && strcmp(name, "refundList") == 0;
    struct pt_pmxml_refund rf = {0};
    int empty = 0;
    int rc = take_attrs(r, is_refund ? &rf : NULL, &empty);
    if (rc != PT_OK)
        return rc;
    if (is_list && m->has_refund_list)
        return PT_EPARSE; /* two lists: which one is true? */
    if (is_list)
        m->has_refund_list = 1;
    *value = "";
    if (!empty)
        rc = take_content(r, name, nl, depth < 0 ? DEPTH_MAX : depth, m, is_list, value);
    if (rc == PT_OK && is_refund) {
        if (m->nrefunds >= PT_PMXML_REFUNDS_MAX)
            return PT_ETOOBIG;
        m->refunds[m->nrefunds++] = rf;
    }
    return rc;
}

static int add_field(struct pt_pmxml *m, const char *name, const char *value)
{
    if (strcmp(name, "refundList") == 0)
        return PT_OK;
    if (!value)
        return PT_OK; /* an element with children of its own: not a field */
    if (pt_pmxml_get(m, name))
        return PT_EPARSE; /* which of the two would be true? */
    if (m->n >= PT_PMXML_FIELDS_MAX)
        return PT_ETOOBIG;
    m->f[m->n++] = (struct pt_pmxml_field){name, value};
    return PT_OK;
}

static int parse_doc(struct pt_xml_rd *r, const char *root, struct pt_pmxml *m)
{
    if (pt__xml_skip_declaration(r) != PT_OK)
        return PT_EPARSE;
    pt__xml_skip_ws(r);
    if (r->p >= r->end || *r->p != '<')
        return PT_EPARSE;
    r->p++;
    size_t nl;
    const char *name = take_name(r, &nl);
    int empty = 0;
    if (!name || strcmp(name, root) != 0 || take_attrs(r, NULL, &empty) != PT_OK || empty)
        return PT_EPARSE;
    for (;;) {
        pt__xml_skip_ws(r);
        if (pt__xml_at(r, "</")) {
            r->p += 2;
            if (take_end(r, name, nl) != PT_OK)
                return PT_EPARSE;
            pt__xml_skip_ws(r);
            return r->p == r->end ? PT_OK : PT_EPARSE;
        }
        if (r->p >= r->end || *r->p != '<')
            return PT_EPARSE; /* text beside the fields, or the end */
        const char *value = NULL;
        char *name_copy = r->w; /* take_element copies the name here first */
        int rc = take_element(r, 1, m, &value);
        if (rc != PT_OK)
            return rc;
        if ((rc = add_field(m, name_copy, value)) != PT_OK)
            return rc;
    }
}

int pt_pmxml_parse(const char *xml, size_t len, const char *root, struct pt_pmxml *out)
{
    memset(out, 0, sizeof *out);
    if (!xml)
        return PT_EPARSE;
    if (len > PT_PMXML_MAX)
        return PT_ETOOBIG;
    if (!pt__xml_text_ok(xml, len, 1))
        return PT_EPARSE;
    /* Every name and value is at most as long as the markup it came from
     * (with its NUL), so the store cannot overflow. */
    out->store = malloc(len + 1);
    if (!out->store)
        return PT_ENOMEM;
    struct pt_xml_rd r = {.p = xml, .end = xml + len, .w = out->store};
    int rc = parse_doc(&r, root, out);
    if (rc != PT_OK)
        pt_pmxml_free(out);
    return rc;
}

const char *pt_pmxml_get(const struct pt_pmxml *m, const char *name)
{
    for (int i = 0; m && i < m->n; i++)
        if (strcmp(m->f[i].name, name) == 0)
            return m->f[i].value;
    return NULL;
}

void pt_pmxml_free(struct pt_pmxml *m)
{
    if (!m)
        return;
    free(m->store);
    memset(m, 0, sizeof *m);
}

/* ---- the writer ------------------------------------------------------------------- */

static int plain_name(const char *s)
{
    if (!s || !((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z')))
        return 0;
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9')))
            return 0;
    return 1;
}

static int put_escaped(struct pt_buf *b, const char *v)
{
    if (!pt__xml_text_ok(v, strlen(v), 1) || strpbrk(v, "\t\n\r"))
        return PT_EINVAL; /* an XML reader would turn CR into LF */
    for (; *v; v++) {
        switch (*v) {
        case '&':
            pt_buf_puts(b, "&amp;");
            break;
        case '<':
            pt_buf_puts(b, "&lt;");
            break;
        case '>':
            pt_buf_puts(b, "&gt;");
            break;
        case '"':
            pt_buf_puts(b, "&quot;");
            break;
        case '\'':
            pt_buf_puts(b, "&apos;");
            break;
        default:
            pt_buf_putc(b, *v);
        }
    }
    return PT_OK;
}

static int put_list(struct pt_buf *b, const struct pt_pmxml_refund *r, int nr)
{
    pt_buf_puts(b, "<refundList>");
    for (int i = 0; i < nr; i++) {
        const char *names[] = {"amount", "status", "referenceNo", "dateTime"};
        const char *values[] = {r[i].amount, r[i].status, r[i].reference_no, r[i].date_time};
        pt_buf_puts(b, "<refund");
        for (int k = 0; k < 4; k++) {
            if (!values[k])
                continue;
            pt_buf_printf(b, " %s=\"", names[k]);
            if (put_escaped(b, values[k]) != PT_OK)
                return PT_EINVAL;
            pt_buf_putc(b, '"');
        }
        pt_buf_puts(b, "/>");
    }
    pt_buf_puts(b, "</refundList>");
    return PT_OK;
}

int pt_pmxml_write(const char *root, const struct pt_pmxml_field *f, int n,
                   const struct pt_pmxml_refund *r, int nr, int list_at, char **out, size_t *len)
{
    if (!plain_name(root))
        return PT_EINVAL;
    struct pt_buf b;
    pt_buf_init(&b, PT_PMXML_MAX);
    pt_buf_printf(&b, "<%s>", root);
    int rc = PT_OK;
    for (int i = 0; i <= n && rc == PT_OK; i++) {
        if (i == list_at)
            rc = put_list(&b, r, nr);
        if (i == n || rc != PT_OK)
            break;
        if (!plain_name(f[i].name) || !f[i].value) {
            rc = PT_EINVAL;
            break;
        }
        pt_buf_printf(&b, "<%s>", f[i].name);
        rc = put_escaped(&b, f[i].value);
        pt_buf_printf(&b, "</%s>", f[i].name);
    }
    pt_buf_printf(&b, "</%s>", root);
    if (rc != PT_OK) {
        pt_buf_free(&b, 0);
        return rc;
    }
    if (b.failed) {
        pt_buf_free(&b, 0);
        return PT_ETOOBIG;
    }
    *out = pt_buf_take(&b, len);
    return *out ? PT_OK : PT_ENOMEM;
}
