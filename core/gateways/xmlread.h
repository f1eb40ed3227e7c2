/*
 * xmlread.h - the lexical layer the gateways' two strict XML readers share:
 * WeChat Pay APIv2 answers (wechat_v2.c: flat fields, CDATA) and 2C2P's
 * Payment Maintenance messages (pmxml.c: nested elements, attributes).
 * Each reader keeps its own grammar and name rules; what they read the
 * same way lives here: the text itself, blanks, the five predefined
 * entities, CDATA sections and the XML declaration.  Nothing else that
 * starts with '&' or "<!" is taken (no DOCTYPE, no other entity, no
 * character reference): SPEC 8 has the readers refuse them.
 *
 * The reader copies what it keeps (names, decoded text) into a store the
 * caller sized: decoded text is never longer than its markup, so a store
 * of the document's length plus one never overflows.
 */
#ifndef PT_GATEWAYS_XMLREAD_H
#define PT_GATEWAYS_XMLREAD_H

#include <stddef.h>

/* A position in the document (p up to end) and the next free byte of the
 * store (w). */
struct pt_xml_rd {
    const char *p, *end;
    char *w;
};

/* 1 when s (len bytes) is well-formed UTF-8 (RFC 3629: no overlong form,
 * no surrogate, nothing above U+10FFFF) without NUL, DEL or control
 * characters other than tab and LF - and CR when cr_ok. */
int pt__xml_text_ok(const char *s, size_t len, int cr_ok);

/* 1 when the document continues with lit at r->p. */
int pt__xml_at(const struct pt_xml_rd *r, const char *lit);

/* 1 for the four blanks of XML (space, tab, LF, CR). */
int pt__xml_blank(char c);

/* Moves r->p past blanks. */
void pt__xml_skip_ws(struct pt_xml_rd *r);

/* One of the five predefined entities at r->p ('&'), its character written
 * to the store; PT_EPARSE for anything else (other entities, character
 * references, a lone '&'). */
int pt__xml_entity(struct pt_xml_rd *r);

/* At r->p just past "<![CDATA[": its text up to "]]>" copied to the store,
 * r->p moved past "]]>"; PT_EPARSE when it never ends. */
int pt__xml_cdata(struct pt_xml_rd *r);

/* An XML declaration ("<?xml" and a blank, up to "?>") at the very start
 * is skipped; a "<?" that is not one is left for the caller to refuse.
 * PT_EPARSE for a declaration that never ends or holds markup. */
int pt__xml_skip_declaration(struct pt_xml_rd *r);

#endif
