/*
 * http.c - helpers for the HTTP message structs declared in platform.h.
 *
 * Adapters build requests with these, transports fill responses with them.
 * Header lines are kept whole ("Name: value") so that a transport can hand
 * them to libcurl as they are.
 */
#include "platform.h"
#include "crypto.h"
#include "err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Header lines and bodies are wiped before they are freed: a request
 * carries the Stripe secret key (Authorization: Bearer sk_...), the WeChat
 * signature, a customer's payment code in its body. */
static void wipe_free(void *p, size_t len)
{
    if (!p)
        return;
    pt_zeroize(p, len);
    free(p);
}

static void free_lines(char **lines, int *n)
{
    for (int i = 0; i < *n; i++) {
        wipe_free(lines[i], strlen(lines[i]));
        lines[i] = NULL;
    }
    *n = 0;
}

void pt_http_request_free(struct pt_http_request *r)
{
    if (!r)
        return;
    free(r->url);
    wipe_free(r->body, r->body_len);
    free_lines(r->headers, &r->nheaders);
    r->url = NULL;
    r->body = NULL;
    r->body_len = 0;
}

void pt_http_response_free(struct pt_http_response *r)
{
    if (!r)
        return;
    free(r->body);
    free_lines(r->headers, &r->nheaders);
    r->body = NULL;
    r->body_len = 0;
    r->status = 0;
}

static int add_line(char **lines, int *n, const char *name, const char *value)
{
    if (*n >= PT_HTTP_MAX_HEADERS)
        return PT_ETOOBIG;
    size_t len = strlen(name) + 2 + strlen(value) + 1;
    char *line = malloc(len);
    if (!line)
        return PT_ENOMEM;
    snprintf(line, len, "%s: %s", name, value);
    lines[(*n)++] = line;
    return PT_OK;
}

int pt_http_request_add_header(struct pt_http_request *r, const char *name, const char *value)
{
    return add_line(r->headers, &r->nheaders, name, value);
}

int pt_http_response_add_header(struct pt_http_response *r, const char *name, const char *value)
{
    return add_line(r->headers, &r->nheaders, name, value);
}

static const char *find_line(char *const *lines, int n, const char *name)
{
    size_t nlen = strlen(name);
    for (int i = 0; i < n; i++) {
        if (strncasecmp(lines[i], name, nlen) == 0 && lines[i][nlen] == ':') {
            const char *v = lines[i] + nlen + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            return v;
        }
    }
    return NULL;
}

const char *pt_http_request_header(const struct pt_http_request *r, const char *name)
{
    return find_line(r->headers, r->nheaders, name);
}

const char *pt_http_response_header(const struct pt_http_response *r, const char *name)
{
    return find_line(r->headers, r->nheaders, name);
}
