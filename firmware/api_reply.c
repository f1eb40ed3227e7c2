/*
 * api_reply.c - the local API's answers: JSON, problem+json, the request log, query parameters.
 */
#include "api_impl.h"

/* ---- responses -------------------------------------------------------------- */

/* SPEC 11: at debug, one line per request - method, path, status, time;
 * never a body, a header or the query string.  The path is the client's:
 * cut, and anything but printable ASCII shown as '?', so that it cannot
 * forge log lines. */
static void log_request(const struct request *rq, int status, int64_t us)
{
    char path[129], method[17];
    const char *u = rq->log_url ? rq->log_url : "?", *m = rq->log_method ? rq->log_method : "?";
    size_t n = 0, k = 0;
    for (; u[n] && n < sizeof path - 1; n++)
        path[n] = u[n] > 0x20 && u[n] < 0x7f ? u[n] : '?';
    path[n] = '\0';
    for (; m[k] && k < sizeof method - 1; k++)
        method[k] = m[k] > 0x20 && m[k] < 0x7f ? m[k] : '?';
    method[k] = '\0';
    pt_log_debug("http %s %s%s %d %lld.%03lld ms", method, path, u[n] ? "..." : "", status,
                 (long long)(us / 1000), (long long)(us % 1000));
}

#if PT_WITH_SIM
/*
 * Test builds only: with PAYTERM_TEST_ANSWER_LOG=DIR set, every answer the
 * API gives is kept in DIR (its body as N.body, a line "METHOD PATH STATUS
 * CONTENT-TYPE FILE LISTENER" in DIR/journal; N is pid.count), so that the suites can hold every
 * one of them, whoever asked, to the OpenAPI description (tests/integration/openapi_check.py, SPEC
 * 15).  Board builds have no such switch.
 */
static pthread_mutex_t answer_mu = PTHREAD_MUTEX_INITIALIZER;
static char answer_dir[PATH_MAX - 64];
static unsigned long answer_n;

void pt__api_answer_log_init(void)
{
    const char *d = getenv("PAYTERM_TEST_ANSWER_LOG");
    if (d && *d && strlen(d) < sizeof answer_dir)
        snprintf(answer_dir, sizeof answer_dir, "%s", d);
}

void pt__api_note_answer(const struct request *rq, int status, const char *type, const char *body,
                         size_t len)
{
    if (!answer_dir[0])
        return;
    pthread_mutex_lock(&answer_mu);
    char path[PATH_MAX];
    /* The pid too: a suite restarts its daemon in the same directory. */
    snprintf(path, sizeof path, "%s/%ld.%lu.body", answer_dir, (long)getpid(), ++answer_n);
    FILE *f = fopen(path, "wb");
    if (f) {
        if (len)
            fwrite(body, 1, len, f);
        fclose(f);
        char journal[PATH_MAX];
        snprintf(journal, sizeof journal, "%s/journal", answer_dir);
        FILE *j = fopen(journal, "a");
        if (j) {
            char url[512]; /* the decoded path, one field of one line */
            const char *u = rq->log_url ? rq->log_url : "?";
            size_t k = 0;
            for (; u[k] && k < sizeof url - 1; k++)
                url[k] = u[k] == '\t' || u[k] == '\n' || u[k] == '\r' ? '?' : u[k];
            url[k] = '\0';
            fprintf(j, "%s\t%s\t%d\t%s\t%s\t%s\n", rq->log_method ? rq->log_method : "?", url,
                    status, type ? type : "", path,
                    rq->ln && rq->ln->notify_only ? "notify" : "main");
            fclose(j);
        }
    }
    pthread_mutex_unlock(&answer_mu);
}
#else
void pt__api_answer_log_init(void) {}
void pt__api_note_answer(const struct request *rq, int status, const char *type, const char *body,
                         size_t len)
{
    (void)rq, (void)status, (void)type, (void)body, (void)len;
}
#endif

/* Keeps r as the request's answer (queued by pt__api_flush() in the polling
 * thread); NULL (out of memory) leaves none, and the connection is closed. */
api_outcome pt__api_set_response(struct request *rq, int status, struct MHD_Response *r)
{
    if (!r)
        return A_CLOSE;
    if (rq->cors_origin[0]) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", rq->cors_origin);
        MHD_add_response_header(r, "Access-Control-Expose-Headers",
                                "Idempotency-Replayed, Retry-After");
    }
    if (rq->had_origin)
        MHD_add_response_header(r, "Vary", "Origin");
    if (rq->resp)
        MHD_destroy_response(rq->resp);
    rq->resp = r;
    rq->status = (unsigned)status;
    int64_t us = pt__api_mono_us() - rq->t0_us;
    pt_metrics_http(status, us);
    if (pt_log_get_level() >= PT_LOG_DEBUG &&
        !(rq->log_url && strcmp(rq->log_url, LIVE_PATH) == 0)) /* the watchdog's, each check */
        log_request(rq, status, us);
    return A_ANSWERED;
}

api_outcome pt__api_send_text(struct MHD_Connection *conn, struct request *rq, int status,
                              const char *type, char *body, size_t len, int replayed,
                              int retry_after)
{
    (void)conn; /* the polling thread queues it: see pt__api_flush() */
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, body ? body : (char *)"", MHD_RESPMEM_MUST_COPY);
    if (!r)
        return A_CLOSE;
    pt__api_note_answer(rq, status, type, body, len);
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    if (replayed)
        MHD_add_response_header(r, "Idempotency-Replayed", "true");
    if (retry_after > 0) {
        char v[16];
        snprintf(v, sizeof v, "%d", retry_after);
        MHD_add_response_header(r, "Retry-After", v);
    }
    if (status == 401)
        MHD_add_response_header(r, "WWW-Authenticate", "Bearer realm=\"payterm\"");
    return pt__api_set_response(rq, status, r);
}

/*
 * An error body {"error":{"code","message"}} as RFC 9457 problem details,
 * for a client that asked with Accept: application/problem+json (SPEC 15):
 * {"type":"about:blank","title":<the status's reason phrase>,"status",
 * "detail":<message>,"code":<the same code>}.  A stored answer is turned
 * at each replay, so it is stored one way.  NULL: the body is not an
 * error object (sent as it is).
 */
static char *problem_text(int status, const char *body)
{
    cJSON *o = body ? cJSON_Parse(body) : NULL;
    /* Only an error object: a declined charge (402) or a refused cancel
     * (409) answers with the charge, whose "error" member says why. */
    const cJSON *e =
        o && o->child && !o->child->next ? cJSON_GetObjectItemCaseSensitive(o, "error") : NULL;
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(e, "message");
    char *text = NULL;
    if (cJSON_IsString(code) && cJSON_IsString(msg)) {
        const char *title = MHD_get_reason_phrase_for((unsigned)status);
        struct pt_jw w = {0};
        pt_jw_raw(&w, "{\"type\":\"about:blank\",\"title\":");
        pt_jw_string(&w, title && *title ? title : "Error");
        pt_jw_raw(&w, ",\"status\":");
        pt_jw_int(&w, status);
        pt_jw_raw(&w, ",\"detail\":");
        pt_jw_string(&w, msg->valuestring);
        pt_jw_raw(&w, ",\"code\":");
        pt_jw_string(&w, code->valuestring);
        pt_jw_raw(&w, "}");
        text = pt_jw_finish(&w);
    }
    cJSON_Delete(o);
    return text;
}

api_outcome pt__api_send_reply(struct MHD_Connection *conn, struct request *rq,
                               struct pt_reply *rep)
{
    if (rep->replayed)
        atomic_fetch_add(&pt_metrics.idem_replays, 1);
    if (strcmp(rep->code, "idempotency_key_in_use") == 0)
        atomic_fetch_add(&pt_metrics.idem_in_use, 1);
    if (strcmp(rep->code, "idempotency_key_reused") == 0)
        atomic_fetch_add(&pt_metrics.idem_reused, 1);
    const char *type = "application/json";
    char *problem = NULL;
    if (rq->problem && rep->status >= 400 && (problem = problem_text(rep->status, rep->body))) {
        type = "application/problem+json";
        free(rep->body);
        rep->body = problem;
        rep->len = strlen(problem);
    }
    api_outcome ret = pt__api_send_text(conn, rq, rep->status, type, rep->body, rep->len,
                                        rep->replayed, rep->retry_after_s);
    pt_reply_free(rep);
    return ret;
}

api_outcome pt__api_send_error(struct MHD_Connection *conn, struct request *rq, int status,
                               const char *code, const char *message)
{
    struct pt_reply rep = {0};
    pt_reply_error(&rep, status, code, "%s", message);
    return pt__api_send_reply(conn, rq, &rep);
}

/* Sends text as a JSON body and frees it; NULL (out of memory) is a 500. */
api_outcome pt__api_send_json_text(struct MHD_Connection *conn, struct request *rq, int status,
                                   char *text)
{
    if (!text)
        return pt__api_send_error(conn, rq, 500, "internal_error", "out of memory");
    api_outcome ret =
        pt__api_send_text(conn, rq, status, "application/json", text, strlen(text), 0, 0);
    free(text);
    return ret;
}

api_outcome pt__api_send_json(struct MHD_Connection *conn, struct request *rq, int status, cJSON *o)
{
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return pt__api_send_json_text(conn, rq, status, text);
}

api_outcome pt__api_storage_error(struct MHD_Connection *conn, struct request *rq, int rc)
{
    char msg[160];
    snprintf(msg, sizeof msg, "the database cannot be read right now (%s)", pt_strerror(rc));
    struct pt_reply rep = {0};
    pt_reply_error(&rep, 503, "storage_unavailable", "%s", msg);
    rep.retry_after_s = 2;
    return pt__api_send_reply(conn, rq, &rep);
}

/* ---- query parameters ----------------------------------------------------------- */

/* Parses an optional integer query argument in [min, max]. */
int pt__api_query_int(struct MHD_Connection *conn, const char *name, int64_t def, int64_t min,
                      int64_t max, int64_t *out, char *msg, size_t cap)
{
    const char *v = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, name);
    *out = def;
    if (!v || !*v) /* absent or empty ("?after=") means the default */
        return 1;
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (!*v || *end || errno || n < min || n > max) {
        snprintf(msg, cap, "query parameter '%s' must be an integer from %lld to %lld", name,
                 (long long)min, (long long)max);
        return 0;
    }
    *out = n;
    return 1;
}
