/*
 * api_routes.c - the route table: one row per route, from which dispatch, Allow, CORS and the
 * quick/worker split are read.
 */
#include "api_impl.h"

/* ---- routing ---------------------------------------------------------------------------- */

static int authorized(struct pt_api *api, struct MHD_Connection *conn)
{
    if (!api->opt.token)
        return 1;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return 0;
    h += 7;
    size_t a = strlen(h), b = strlen(api->opt.token);
    /* Constant time over the expected token's length. */
    return a == b && pt_ct_equal(h, api->opt.token, b);
}

static api_outcome not_allowed(struct MHD_Connection *conn, struct request *rq, const char *allow)
{
    struct pt_reply rep = {0};
    pt_reply_error(&rep, 405, "method_not_allowed", "use %s for this path", allow);
    api_outcome ret = pt__api_send_reply(conn, rq, &rep);
    if (rq->resp)
        MHD_add_response_header(rq->resp, "Allow", allow);
    return ret;
}

/* ---- the route table ------------------------------------------------------------------ */

static api_outcome h_healthz(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                             const char *arg)
{
    (void)arg;
    return pt__api_healthz(api, conn, rq);
}

static api_outcome h_live(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                          const char *arg)
{
    (void)api;
    (void)arg;
    return pt__api_live(conn, rq);
}

/* The operator page asks for the token itself; it holds no data. */
static api_outcome h_page(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                          const char *arg)
{
    (void)api;
    (void)arg;
    return pt__api_operator_page(conn, rq);
}

/* The description of the API holds no data: a client may read it before
 * it has the token. */
static api_outcome h_openapi(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                             const char *arg)
{
    (void)api;
    (void)arg;
    return pt__api_send_text(conn, rq, 200, "application/json", (char *)pt_asset_openapi_json,
                             pt_asset_openapi_json_len, 0, 0);
}

static api_outcome h_metrics(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                             const char *arg)
{
    (void)arg;
    return pt__api_metrics(api, conn, rq);
}

static api_outcome h_status(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                            const char *arg)
{
    (void)arg;
    return pt__api_status(api, conn, rq);
}

static api_outcome h_sync(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                          const char *arg)
{
    (void)arg;
    return pt__api_sync_now(api, conn, rq);
}

static api_outcome h_events(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                            const char *arg)
{
    (void)arg;
    return pt__api_events_feed(api, conn, rq);
}

static api_outcome h_create(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                            const char *arg)
{
    (void)arg;
    return pt__api_guarded(api, conn, rq, NULL, NULL);
}

static api_outcome h_list_charges(struct pt_api *api, struct MHD_Connection *conn,
                                  struct request *rq, const char *arg)
{
    (void)arg;
    return pt__api_list_charges(api, conn, rq);
}

static api_outcome h_cancel(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                            const char *order)
{
    return pt__api_guarded(api, conn, rq, order, pt_intake_cancel);
}

static api_outcome h_review(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                            const char *order)
{
    return pt__api_guarded(api, conn, rq, order, pt_intake_review);
}

static api_outcome h_refund(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                            const char *order)
{
    return pt__api_guarded(api, conn, rq, order, pt_intake_refund);
}

/* A gateway's notification: its table names its pt__api_route (gateway.h). */
static api_outcome h_notify(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                            const char *gateway)
{
    return pt__api_notify(api, conn, rq, gateway);
}

static const struct route routes[] = {
    {"GET", "/", h_page, R_PUBLIC | R_QUICK},
    {"GET", "/healthz", h_healthz, R_PUBLIC | R_QUICK},
    {"GET", LIVE_PATH, h_live, R_PUBLIC | R_QUICK},
    {"GET", OPENAPI_PATH, h_openapi, R_PUBLIC | R_QUICK},
    /* /metrics counts every charge by state, a scan of the table, and
     * /v1/status reads every charge in progress (3-5 ms with 10 000
     * queued): workers, while the quick ones go on. */
    {"GET", "/metrics", h_metrics, 0},
    {"GET", "/v1/status", h_status, 0},
    {"POST", "/v1/sync", h_sync, R_QUICK},
    {"GET", "/v1/events", h_events, 0}, /* a long-poll */
    {"GET", "/v1/charges", h_list_charges, R_QUICK},
    /* Quick as long as it needs no gateway (pt_intake_create_charge_nowait
     * hands the others to a worker). */
    {"POST", "/v1/charges", h_create, R_QUICK},
    {"GET", "/v1/charges/{order_id}", pt__api_get_charge, R_QUICK},
    {"GET", "/v1/charges/{order_id}/events", pt__api_charge_audit, R_QUICK},
    {"GET", "/v1/charges/{order_id}/payment", pt__api_payment_link, 0}, /* may ask the gateway */
    {"POST", "/v1/charges/{order_id}/cancel", h_cancel, 0},
    {"POST", "/v1/charges/{order_id}/review", h_review, R_QUICK},
    {"GET", "/v1/charges/{order_id}/refunds", pt__api_list_refunds, R_QUICK},
    {"POST", "/v1/charges/{order_id}/refunds", h_refund, 0},
    {"GET", "/v1/refunds", pt__api_list_refunds, R_QUICK},
    {"GET", "/v1/refunds/{refund_id}", pt__api_get_refund, R_QUICK},
    /* The day's reports (SPEC 19): an X report adds up the day, a close
     * marks every final row of it - workers'. */
    {"GET", "/v1/reports/x", pt__api_report_x, 0},
    {"POST", "/v1/reports/z", pt__api_close_day, 0},
    {"GET", "/v1/reports/z/{z}", pt__api_report_z, R_QUICK},
    /* Reconciliation runs (SPEC 19): a run downloads the gateway's bill (a
     * worker's); the day's latest is one row. */
    {"POST", "/v1/reconciliations", pt__api_reconcile, 0},
    {"GET", "/v1/reconciliations/{gateway}/{date}", pt__api_reconciliation, R_QUICK},
    /* The gateways may reach these (notify_listen); their binding may ask
     * the gateway.  The signature is their credential. */
    {"POST", "/notify/{gateway}", h_notify, R_PUBLIC},
    {"POST", "/webhooks/{gateway}", h_notify, R_PUBLIC},
};
#define N_ROUTES (sizeof routes / sizeof routes[0])

int pt_api_route_count(void)
{
    return (int)N_ROUTES;
}

void pt_api_route_at(int i, const char **method, const char **path)
{
    assert(i >= 0 && i < (int)N_ROUTES); /* callers loop to pt_api_route_count() */
    *method = routes[i].method;
    *path = routes[i].path;
}

/*
 * Does url match path?  "{name}" matches one segment, copied to arg - an
 * empty one, or one too long for an id, too (marked: no id is valid then),
 * so that the answer is "no such charge" rather than "no such path"; a
 * "{gateway}" that ends the path takes the rest of the url (a gateway's
 * route is looked up whole).
 */
static int path_match(const char *path, const char *url, char arg[ROUTE_ARG_MAX])
{
    arg[0] = '\0';
    while (*path) {
        if (*path == '{') {
            const char *p_end = strchr(path, '}');
            if (!p_end)
                return 0;
            int rest = !p_end[1] && strncmp(path, "{gateway}", 9) == 0;
            size_t n = rest ? strlen(url) : strcspn(url, "/");
            /* A second "{name}" is appended after a '/': "wechat/2026-12-05". */
            size_t k = strlen(arg);
            if (k && k + 1 < ROUTE_ARG_MAX)
                arg[k++] = '/';
            snprintf(arg + k, ROUTE_ARG_MAX - k, "%.*s",
                     k + n < ROUTE_ARG_MAX ? (int)n : (int)(ROUTE_ARG_MAX - 1 - k), url);
            if (n == 0 || k + n >= ROUTE_ARG_MAX)
                arg[0] = '\x01'; /* empty or too long: no id */
            path = p_end + 1;
            url += n;
            continue;
        }
        if (*path++ != *url++)
            return 0;
    }
    return *url == '\0';
}

int pt__api_path_methods(const char *url, char allow[ALLOW_MAX])
{
    char arg[ROUTE_ARG_MAX];
    int get = 0, post = 0;
    for (size_t i = 0; i < N_ROUTES; i++)
        if (path_match(routes[i].path, url, arg)) {
            get |= strcmp(routes[i].method, "GET") == 0;
            post |= strcmp(routes[i].method, "POST") == 0;
        }
    snprintf(allow, ALLOW_MAX, "%s%s%s", get ? "GET" : "", get && post ? ", " : "",
             post ? "POST" : "");
    return get || post;
}

/* The route of (method, url), NULL when none; *arg its parameter. */
const struct route *pt__api_route_of(const char *method, const char *url, char arg[ROUTE_ARG_MAX])
{
    for (size_t i = 0; i < N_ROUTES; i++)
        if (strcmp(routes[i].method, method) == 0 && path_match(routes[i].path, url, arg))
            return &routes[i];
    return NULL;
}

/* Is the route's parameter one its path can name?  Else the 404 to send. */
static const char *bad_arg(const struct route *r, const char *arg, const char *url)
{
    if (strstr(r->path, "{order_id}") && !pt_order_id_valid(arg))
        return arg[0] == '\x01' ? "no such charge"
                                : "no such charge (order ids are 1-64 of A-Z a-z 0-9 _ . -)";
    if (strstr(r->path, "{refund_id}") && !pt_order_id_valid(arg))
        return "no such refund (refund ids are 1-64 of A-Z a-z 0-9 _ . -)";
    if (r->fn == h_notify && !pt_gateway_by_route(url))
        return "no such path"; /* a gateway's route is its table's (gateway.h) */
    return NULL;
}

api_outcome pt__api_route(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                          const char *url, const char *method)
{
    rq->problem = pt__api_wants_problem(conn);
    api_outcome answered;
    if (pt__api_cross_origin(api, conn, rq, url, method, &answered))
        return answered;
    char arg[ROUTE_ARG_MAX], allow[ALLOW_MAX];
    const struct route *r = pt__api_route_of(method, url, arg);
    int known = pt__api_path_methods(url, allow);
    /* Without the token only the public routes answer anything (a path
     * that does not exist included: nothing is told about it). */
    int is_public = r ? (r->flags & R_PUBLIC) != 0 : 0;
    if (!r && known) {
        /* Another method of this path: public when that route is. */
        char any[ROUTE_ARG_MAX];
        const struct route *other =
            pt__api_route_of(strcmp(allow, "POST") == 0 ? "POST" : "GET", url, any);
        is_public = other && (other->flags & R_PUBLIC);
    }
    if (!is_public && !authorized(api, conn))
        return pt__api_send_error(
            conn, rq, 401, "unauthorized",
            "missing or wrong bearer token (Authorization: Bearer <token from "
            "api_token_file>)");
    if (!known)
        return pt__api_send_error(conn, rq, 404, "not_found", "no such path");
    const struct route *which =
        r ? r : pt__api_route_of(strstr(allow, "GET") ? "GET" : "POST", url, arg);
    const char *why = which ? bad_arg(which, arg, url) : NULL;
    if (why)
        return pt__api_send_error(conn, rq, 404, "not_found", why);
    if (!r)
        return not_allowed(conn, rq, allow);
    if (r->fn == h_notify)
        return r->fn(api, conn, rq, pt_gateway_by_route(url)->name);
    return r->fn(api, conn, rq, arg[0] ? arg : NULL);
}
