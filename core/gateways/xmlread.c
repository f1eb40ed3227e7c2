/*
 * xmlread.c - the lexical layer of the gateways' strict XML readers (see
 * xmlread.h): written once for wechat_v2.c and pmxml.c.
 */
#include "gateways/xmlread.h"
#include "err.h"

#include <string.h>

/* Length of the well-formed UTF-8 sequence at p (RFC 3629), 0 when there is none. */
static size_t utf8_seq(const unsigned char *p, size_t left)
{
    unsigned char c = p[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else
        return 0;
    if (left < n || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return n;
}

int pt__xml_text_ok(const char *s, size_t len, int cr_ok)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        if (p[i] < 0x20 && p[i] != '\t' && p[i] != '\n' && !(cr_ok && p[i] == '\r'))
            return 0;
        if (p[i] == 0x7F)
            return 0;
        size_t n = utf8_seq(p + i, len - i);
        if (!n)
            return 0;
        i += n;
    }
    return 1;
}

int pt__xml_at(const struct pt_xml_rd *r, const char *lit)
{
    size_t n = strlen(lit);
    return (size_t)(r->end - r->p) >= n && memcmp(r->p, lit, n) == 0;
}

int pt__xml_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

void pt__xml_skip_ws(struct pt_xml_rd *r)
{
    while (r->p < r->end && pt__xml_blank(*r->p))
        r->p++;
}

int pt__xml_entity(struct pt_xml_rd *r)
{
    static const struct {
        const char *ref;
        char c;
    } ents[] = {{"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'}, {"&apos;", '\''}};
    for (size_t i = 0; i < sizeof ents / sizeof ents[0]; i++)
        if (pt__xml_at(r, ents[i].ref)) {
            r->p += strlen(ents[i].ref);
            *r->w++ = ents[i].c;
            return PT_OK;
        }
    return PT_EPARSE;
}

int pt__xml_cdata(struct pt_xml_rd *r)
{
    const char *e = r->p;
    while (r->end - e >= 3 && memcmp(e, "]]>", 3) != 0)
        e++;
    if (r->end - e < 3)
        return PT_EPARSE;
    memcpy(r->w, r->p, (size_t)(e - r->p));
    r->w += e - r->p;
    r->p = e + 3;
    return PT_OK;
}

int pt__xml_skip_declaration(struct pt_xml_rd *r)
{
    if (!pt__xml_at(r, "<?xml") || r->end - r->p < 6 || !pt__xml_blank(r->p[5]))
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
