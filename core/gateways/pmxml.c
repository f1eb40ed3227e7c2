/*
 * pmxml.c - the XML reader and writer of 2C2P's Payment Maintenance
 * messages (see pmxml.h).
 */
#include "gateways/pmxml.h"
#include "buf.h"
#include "err.h"

#include <stdlib.h>
#include <string.h>

#define DEPTH_MAX 8

/* ---- text checks ---------------------------------------------------------------- */

/* Valid UTF-8 without NUL or control characters other than tab, LF, CR. */
static int text_ok(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        unsigned c = *p;
        if (c < 0x80) {
            if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f)
                return 0;
            p++;
            continue;
        }
        int n = c >= 0xf0 && c <= 0xf4 ? 3 : c >= 0xe0 ? 2 : c >= 0xc2 && c < 0xe0 ? 1 : -1;
        if (n < 0 || c > 0xf4 || end - p <= n)
            return 0;
        unsigned cp = c & (0x3f >> n);
        for (int i = 1; i <= n; i++) {
            if ((p[i] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (p[i] & 0x3f);
        }
        /* Overlong forms, surrogates, beyond U+10FFFF. */
        if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        p += n + 1;
    }
    return 1;
}

static int name_start(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static int name_char(unsigned char c)
{
    return name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == ':';
}

/* ---- the reader ------------------------------------------------------------------ */

struct rd {
    const char *p, *end;
    char *w; /* next free byte of the store */
};

static int at(const struct rd *r, const char *s)
{
    size_t n = strlen(s);
    return (size_t)(r->end - r->p) >= n && memcmp(r->p, s, n) == 0;
}

static int blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void skip_ws(struct rd *r)
{
    while (r->p < r->end && blank(*r->p))
        r->p++;
}

/* A name at r->p, copied to the store: returns it, NULL when none. */
static const char *take_name(struct rd *r, size_t *n)
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

/* One of the five predefined entities at r->p, written to the store. */
static int take_entity(struct rd *r)
{
    static const struct {
        const char *ref;
        char c;
    } ents[] = {{"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'}, {"&apos;", '\''}};
    for (size_t i = 0; i < sizeof ents / sizeof ents[0]; i++)
        if (at(r, ents[i].ref)) {
            r->p += strlen(ents[i].ref);
            *r->w++ = ents[i].c;
            return PT_OK;
        }
    return PT_EPARSE; /* other entities, character references, a lone '&' */
}

/* A quoted attribute value into the store. */
static const char *take_attr_value(struct rd *r)
{
    if (r->p >= r->end || (*r->p != '"' && *r->p != '\''))
        return NULL;
    char q = *r->p++;
    char *out = r->w;
    while (r->p < r->end && *r->p != q) {
        if (*r->p == '<')
            return NULL;
        if (*r->p == '&') {
            if (take_entity(r) != PT_OK)
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
static int take_attrs(struct rd *r, struct pt_pmxml_refund *rf, int *empty)
{
    const char *names[16];
    int n = 0;
    for (;;) {
        int ws = r->p < r->end && blank(*r->p);
        skip_ws(r);
        if (at(r, "/>") || at(r, ">")) {
            *empty = *r->p == '/';
            r->p += *empty ? 2 : 1;
            return PT_OK;
        }
        size_t nl;
        char *mark = r->w;
        const char *name = ws ? take_name(r, &nl) : NULL;
        if (!name)
            return PT_EPARSE;
        skip_ws(r);
        if (r->p >= r->end || *r->p != '=')
            return PT_EPARSE;
        r->p++;
        skip_ws(r);
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
static int take_end(struct rd *r, const char *name, size_t nl)
{
    if ((size_t)(r->end - r->p) < nl || memcmp(r->p, name, nl) != 0)
        return PT_EPARSE;
    r->p += nl;
    if (r->p < r->end && name_char((unsigned char)*r->p))
        return PT_EPARSE; /* </fieldx> for <field> */
    skip_ws(r);
    if (r->p >= r->end || *r->p != '>')
        return PT_EPARSE;
    r->p++;
    return PT_OK;
}

static int take_element(struct rd *r, int depth, struct pt_pmxml *m, const char **value);

/*
 * The content of element name up to and including its end tag.  Its text
 * goes into the store and *value points at it; an element with child
 * elements gets *value NULL (it is not a field) and its children are
 * skipped.  In a list (the content of <refundList>) only <refund> elements
 * and blanks may appear, and the refunds are recorded into m.
 */
static int take_content(struct rd *r, const char *name, size_t nl, int depth, struct pt_pmxml *m,
                        int list, const char **value)
{
    char *text = r->w;
    int nested = 0;
    while (r->p < r->end) {
        if (at(r, "</")) {
            r->p += 2;
            if (take_end(r, name, nl) != PT_OK)
                return PT_EPARSE;
            *r->w++ = '\0';
            *value = nested ? NULL : text;
            return PT_OK;
        }
        if (*r->p == '<' && !at(r, "<![CDATA[")) {
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
        if (list && !blank(*r->p))
            return PT_EPARSE; /* text in a list */
        if (at(r, "<![CDATA[")) {
            r->p += 9;
            const char *e = r->p;
            while (r->end - e >= 3 && memcmp(e, "]]>", 3) != 0)
                e++;
            if (r->end - e < 3)
                return PT_EPARSE;
            memcpy(r->w, r->p, (size_t)(e - r->p));
            r->w += e - r->p;
            r->p = e + 3;
        } else if (*r->p == '&') {
            if (take_entity(r) != PT_OK)
                return PT_EPARSE;
        } else if (at(r, "]]>")) {
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
static int take_element(struct rd *r, int depth, struct pt_pmxml *m, const char **value)
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

/* An XML declaration at the very start: skipped, nothing else starting "<?". */
static int skip_declaration(struct rd *r)
{
    if (!at(r, "<?xml") || r->end - r->p < 6 ||
        !(r->p[5] == ' ' || r->p[5] == '\t' || r->p[5] == '\n' || r->p[5] == '\r'))
        return PT_OK;
    for (const char *q = r->p + 5; r->end - q >= 2; q++) {
        if (*q == '<' || *q == '>')
            return PT_EPARSE;
        if (q[0] == '?' && q[1] == '>') {
            r->p = q + 2;
            return PT_OK;
        }
    }
    return PT_EPARSE;
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

static int parse_doc(struct rd *r, const char *root, struct pt_pmxml *m)
{
    if (skip_declaration(r) != PT_OK)
        return PT_EPARSE;
    skip_ws(r);
    if (r->p >= r->end || *r->p != '<')
        return PT_EPARSE;
    r->p++;
    size_t nl;
    const char *name = take_name(r, &nl);
    int empty = 0;
    if (!name || strcmp(name, root) != 0 || take_attrs(r, NULL, &empty) != PT_OK || empty)
        return PT_EPARSE;
    for (;;) {
        skip_ws(r);
        if (at(r, "</")) {
            r->p += 2;
            if (take_end(r, name, nl) != PT_OK)
                return PT_EPARSE;
            skip_ws(r);
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
    if (!text_ok(xml, len))
        return PT_EPARSE;
    /* Every name and value is at most as long as the markup it came from
     * (with its NUL), so the store cannot overflow. */
    out->store = malloc(len + 1);
    if (!out->store)
        return PT_ENOMEM;
    struct rd r = {.p = xml, .end = xml + len, .w = out->store};
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
    if (!text_ok(v, strlen(v)) || strpbrk(v, "\t\n\r"))
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
