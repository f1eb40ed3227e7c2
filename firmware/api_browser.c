/*
 * api_browser.c - browsers: the operator page, CORS and cross-site requests (SPEC 15).
 */
#include "api_impl.h"

/* ---- browsers: CORS and cross-site requests (SPEC 15) -------------------------------- */

/*
 * GET /: the operator page, from the binary.  It may not be framed by
 * another page (its buttons cancel and refund: no clickjacking), may talk
 * only to this listener, and loads nothing from anywhere.
 */
api_outcome pt__api_operator_page(struct MHD_Connection *conn, struct request *rq)
{
    (void)conn;
    struct MHD_Response *r = MHD_create_response_from_buffer(
        pt_asset_operator_html_len, (void *)pt_asset_operator_html, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return A_CLOSE;
    pt__api_note_answer(rq, 200, "text/html; charset=utf-8", pt_asset_operator_html,
                        pt_asset_operator_html_len);
    MHD_add_response_header(r, "Content-Type", "text/html; charset=utf-8");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'none'; script-src 'unsafe-inline'; style-src "
                            "'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'; "
                            "base-uri 'none'; form-action 'none'");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    return pt__api_set_response(rq, 200, r);
}

static int origin_listed(const struct pt_config *cfg, const char *origin)
{
    for (int i = 0; i < cfg->n_cors_origins; i++)
        if (strcmp(cfg->cors_origins[i], origin) == 0)
            return 1;
    return 0;
}

/*
 * A Host a browser may reach this listener by: an IP address (v4, or v6 in
 * brackets) or localhost, with a port or not, or a name whose http:// origin
 * is listed in cors_origins.  Any other name is what DNS rebinding looks
 * like: a page at http://evil.example:8080 whose name was re-pointed at
 * 127.0.0.1 reaches the API with Host and Origin both evil.example:8080 -
 * "same origin" - and could read and charge on a lane without a token.
 */
static int host_allowed(const struct pt_config *cfg, const char *host)
{
    if (!host || !*host)
        return 0;
    size_t n = strcspn(host, ":");
    if (host[0] == '[') { /* [v6]:port */
        const char *end = strchr(host, ']');
        if (!end)
            return 0;
        for (const char *p = host + 1; p < end; p++)
            if (!strchr("0123456789abcdefABCDEF:.", *p))
                return 0;
        return end[1] == '\0' || end[1] == ':';
    }
    if (n == 9 && strncasecmp(host, "localhost", 9) == 0)
        return 1;
    int digits_and_dots = n > 0;
    for (size_t i = 0; i < n; i++)
        digits_and_dots &= (host[i] >= '0' && host[i] <= '9') || host[i] == '.';
    if (digits_and_dots)
        return 1;
    char origin[PT_CFG_ORIGIN_MAX];
    if ((size_t)snprintf(origin, sizeof origin, "http://%s", host) >= sizeof origin)
        return 0;
    for (char *p = origin; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    return origin_listed(cfg, origin);
}

/* The origin of a page this listener served itself: http:// and the Host
 * the request was sent to, when that Host is one a browser may use
 * (host_allowed).  (The API is plain HTTP; a proxy in front that
 * terminates TLS lists its https:// origin in cors_origins.) */
static int same_origin(struct MHD_Connection *conn, const char *origin)
{
    const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host");
    return host && *host && strncmp(origin, "http://", 7) == 0 && strcasecmp(origin + 7, host) == 0;
}

/* The request comes from a browser: it says where from (Origin), or how
 * (the Fetch Metadata headers every current browser sends, reads too). */
static int from_browser(struct MHD_Connection *conn)
{
    return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin") ||
           MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Sec-Fetch-Site") ||
           MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Sec-Fetch-Mode");
}

/* What the answer of a listed origin carries: noted at the head, so that
 * the answers given there (413, 503 shutting_down) have it too. */
void pt__api_note_origin(struct pt_api *api, struct MHD_Connection *conn, struct request *rq)
{
    const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
    rq->had_origin = origin != NULL;
    rq->cors_origin[0] = '\0';
    if (origin && origin_listed(api->opt.cfg, origin))
        snprintf(rq->cors_origin, sizeof rq->cors_origin, "%s", origin);
}

/*
 * Before any pt__api_route (and before the bearer token, which a preflight never
 * carries): a request from a browser page names its Origin.
 *  - A listed origin's answers carry Access-Control-Allow-Origin for it and
 *    expose Idempotency-Replayed and Retry-After; its preflight (OPTIONS
 *    with Access-Control-Request-Method) is answered 204 with the path's
 *    methods and the headers a kiosk sends.
 *  - Any other origin (not listed, not the page's own) may read nothing
 *    (no CORS headers) and change nothing: a POST from it is refused 403
 *    origin_not_allowed before it is looked at, so a page elsewhere cannot
 *    charge, cancel or refund through a kiosk's browser (no CSRF).
 *  - OPTIONS without a preflight's header is answered 204 with Allow.
 * Returns 1 when *ret is the answer.
 */
int pt__api_cross_origin(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                         const char *url, const char *method, api_outcome *ret)
{
    const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
    int options = strcmp(method, "OPTIONS") == 0;
    pt__api_note_origin(api, conn, rq);
    char methods[ALLOW_MAX];
    int known = pt__api_path_methods(url, methods);
    /* A browser that reached us by a name nobody configured: refused,
     * reads too (DNS rebinding; host_allowed). */
    const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host");
    if (from_browser(conn) && !host_allowed(api->opt.cfg, host)) {
        char msg[400];
        snprintf(msg, sizeof msg,
                 "a browser reached payterm as '%.120s': browsers may use an IP address, "
                 "localhost, or a name whose http:// origin is in cors_origins",
                 host ? host : "");
        *ret = pt__api_send_error(conn, rq, 421, "host_not_allowed", msg);
        return 1;
    }
    int reads = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    if (origin && !rq->cors_origin[0] && !same_origin(conn, origin) && !reads) {
        char msg[400];
        snprintf(msg, sizeof msg,
                 "requests from the web page at '%.200s' may not %s: only the operator page "
                 "served here and the origins in cors_origins may",
                 origin, options ? "call this API" : "change anything");
        *ret = pt__api_send_error(conn, rq, 403, "origin_not_allowed", msg);
        return 1;
    }
    if (!options)
        return 0;
    if (!known) {
        *ret = pt__api_send_error(conn, rq, 404, "not_found", "no such path");
        return 1;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (char *)"", MHD_RESPMEM_PERSISTENT);
    if (r) {
        MHD_add_response_header(r, "Allow", methods);
        if (rq->cors_origin[0] &&
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Access-Control-Request-Method")) {
            MHD_add_response_header(r, "Access-Control-Allow-Methods", methods);
            MHD_add_response_header(r, "Access-Control-Allow-Headers",
                                    "Authorization, Content-Type, Idempotency-Key");
            MHD_add_response_header(r, "Access-Control-Max-Age", "600");
        }
    }
    pt__api_note_answer(rq, 204, "", NULL, 0);
    *ret = pt__api_set_response(rq, 204, r);
    return 1;
}

/* Accept names application/problem+json (with a q other than 0). */
int pt__api_wants_problem(struct MHD_Connection *conn)
{
    const char *a = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept");
    while (a && *a) {
        while (*a == ' ' || *a == ',')
            a++;
        const char *end = strchr(a, ',');
        size_t n = end ? (size_t)(end - a) : strlen(a);
        static const char type[] = "application/problem+json";
        if (n >= sizeof type - 1 && strncasecmp(a, type, sizeof type - 1) == 0) {
            const char *p = a + sizeof type - 1, *stop = a + n;
            int ok = 1;
            for (; p < stop; p++)
                if ((*p == 'q' || *p == 'Q') && p + 1 < stop && p[1] == '=') {
                    ok = strtod(p + 2, NULL) > 0;
                    break;
                }
            if (ok && (a[sizeof type - 1] == ';' || a[sizeof type - 1] == ' ' ||
                       a + sizeof type - 1 == stop))
                return 1;
        }
        a = end;
    }
    return 0;
}
