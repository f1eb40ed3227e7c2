/*
 * api.c - the local HTTP API on libmicrohttpd (see api.h).
 *
 * This file only speaks HTTP: it collects the request (bounded at 16 KiB),
 * checks the bearer token, routes, and turns pt_reply into a response.  The
 * guarded write operations live in core/intake.c, the SQL in the store's
 * backends (core/store_sqlite.c, core/store_pg.c).
 *
 * How connections are served, and why (SPEC 5, "Input strictness and
 * connection handling"): a kiosk has a handful of clients, but notify_listen
 * faces the internet, and a client that opens connections and trickles a
 * byte now and then must not lock the others out.  So no connection owns a
 * thread:
 *
 * - Each listener has one polling thread of its own (loop_main) that runs
 *   libmicrohttpd's epoll set in external-polling mode: it reads requests
 *   and writes responses for all of its connections, answers the quick
 *   ones itself, and between two rounds commits the writer's batch those
 *   left (group commit, settle_batch; docs/writer.md).  Apart from that one
 *   commit it only does things that do not wait.
 * - A request whose head and body have arrived is suspended and handed to a
 *   small pool of worker threads per listener (the handlers may wait for
 *   the database or for a gateway, up to sync.request_timeout_ms); the
 *   worker builds the response and resumes the connection, and the polling
 *   thread queues it.  A long-poll of /v1/events parks its request instead
 *   (still suspended, no thread) until a commit adds events, its wait ends,
 *   or the daemon stops.
 * - libmicrohttpd's connection timeout is an idle timeout, which a trickler
 *   never meets.  A timer thread here closes (shutdown()) every connection
 *   whose request head is not complete HEAD_TIMEOUT_S after it opened (or
 *   after its previous response, on a kept-alive connection), or whose body
 *   is not complete BODY_TIMEOUT_S after its head.
 * - An address other than the kiosk's own 127.0.0.1 / ::1 holds at most
 *   PER_ADDR_MAX connections over both listeners (connlimit.c).
 * - Each listener takes CONN_MAX connections; the open files limit is
 *   raised to fit them.
 * - A stop stops accepting, answers parked long-polls, waits for the
 *   requests in flight, and only then stops the listeners (libmicrohttpd
 *   must not be stopped while a connection is suspended).
 */
#include "api.h"
#include "listen.h"
#include "assets.h"
#include "gate.h"
#include "buf.h"
#include "charges.h"
#include "refunds.h"
#include "connlimit.h"
#include "crypto.h"
#include "err.h"
#include "host.h"
#include "json.h"
#include "linux.h"
#include "log.h"
#include "metrics.h"
#include "pool.h"
#include "pt_config.h"
#include "workers.h"

#include <cjson/cJSON.h>
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#if MHD_VERSION < 0x00097002
typedef int MHD_RESULT;
#else
typedef enum MHD_Result MHD_RESULT;
#endif

#define BODY_MAX (16 * 1024)
#define LIST_MAX 100
#define EVENTS_MAX 100
#define WAIT_MAX_S 60
#define AUDIT_MAX 200
/* How long a stop waits for requests in flight (a client that stalls in
 * the middle of its body must not hold the daemon forever). */
#define DRAIN_MAX_S 10

/* The connection rules (see the top of this file and the README). */
#define HEAD_TIMEOUT_S 10 /* a request head must be complete this long after it may start */
#define BODY_TIMEOUT_S 10 /* and its body this long after the head */
#define IDLE_TIMEOUT_S 30 /* libmicrohttpd's own: a client that stops reading its answer */
#define PER_ADDR_MAX 16   /* connections of one address other than 127.0.0.1 / ::1 */
#define CONN_MAX 1024     /* connections per listener */
/* Files the rest of the daemon keeps open: database, WAL, shared memory,
 * log, one TLS connection per gateway, the pool's connections. */
#define FD_RESERVE 64

/* Worker threads per listener.  Together they never need more database
 * connections than the pool has, so no worker waits for one. */
#define MAIN_WORKERS 6
#define NOTIFY_WORKERS 2
/* (+ one for each polling thread, which answers the quick requests itself.) */
#define POOL_SIZE (MAIN_WORKERS + NOTIFY_WORKERS + 2)
/* Set explicitly (musl's default is 128 KiB).  The handlers keep big
 * buffers on the heap: the whole integration suite, online charges over TLS
 * to the simulator included, passes with 64 KiB workers and a 32 KiB polling
 * thread and timer, so these leave four times that. */
#define WORKER_STACK (256 * 1024)
/* libmicrohttpd's polling thread and the timer run only short callbacks. */
#define SMALL_STACK (128 * 1024)

struct pt_api;

struct request;

/* One listening daemon, the thread that runs its event loop, and the
 * workers that run its handlers. */
struct listener {
    struct pt_api *api;
    struct MHD_Daemon *d;
    struct pt_workers *workers;
    int notify_only; /* notify_listen: only the notification routes */
    MHD_socket lfd;  /* after quiesce: closed only after MHD_stop_daemon() */
    pthread_t loop;
    int loop_started;
    int wake_fd; /* eventfd: the loop has a quiesce or a quit to do */
    /* Under api->mu: asked of the loop, and done by it. */
    int quiesce_asked, quiesced, quit;
    /* The loop's own: quick requests answered on a deferred commit, to be
     * sent when their batch is durable (settle_batch). */
    struct request *settling, **settling_tail;
};

/* One TCP connection (libmicrohttpd's socket context), from accept to close. */
struct conn {
    struct conn *prev, *next; /* api->conns, under api->mu */
    MHD_socket fd;
    struct sockaddr_storage addr;
    int admitted;        /* counted by api->limit (else refused: being closed) */
    int cut;             /* shut down by the timer */
    int64_t deadline_ms; /* what is being received must be complete by then; 0: none */
    /* The request target as libmicrohttpd first saw it (for the NUL check;
     * it is unescaped in place later). */
    const char *raw_uri;
    size_t raw_uri_len;
    int raw_uri_nul; /* it held %00 */
};

struct pt_api {
    struct pt_api_options opt;
    struct listener main, notify;
    struct pt_pool *pool;
    struct pt_connlimit *limit;
    /* Guards what follows: connections, parked long-polls, the feed's
     * version, the timer, the stop. */
    pthread_mutex_t mu;
    struct conn *conns;
    struct request *waiters; /* parked long-polls */
    /* The fulfilment feed's wake-up: bumped after a commit that added events. */
    uint64_t feed_version;
    int stopping; /* long-polls answer now; new requests get 503 */
    int closing;  /* the listeners are about to stop: nothing is suspended any more */
    /* Requests between their headers and the end of their response: a stop
     * waits for them, so what they commit is also what the client hears. */
    int in_flight;
    int suspended;          /* connections suspended here and not resumed yet */
    pthread_cond_t idle_cv; /* in_flight or suspended reached 0; CLOCK_MONOTONIC */
    pthread_t timer;
    int timer_started, timer_quit;
    int64_t timer_next_ms;   /* the timer sleeps until then (INT64_MAX: until kicked) */
    pthread_cond_t timer_cv; /* CLOCK_MONOTONIC */
};

/* PAYTERM_THREAD_STACK_KIB (api options' thread_stack) sets every thread's
 * stack, so the suites can run the daemon at musl's 128 KiB; otherwise the
 * defaults above. */
static size_t worker_stack(const struct pt_api *api)
{
    return api->opt.thread_stack ? api->opt.thread_stack : WORKER_STACK;
}

static size_t small_stack(const struct pt_api *api)
{
    return api->opt.thread_stack ? api->opt.thread_stack : SMALL_STACK;
}

#define LIVE_PATH "/healthz/live"
#define OPENAPI_PATH "/v1/openapi.json"

/* The methods url answers, as its Allow header ("GET, POST"); 0 when no
 * route has that path (the route table, below). */
#define ALLOW_MAX 32
static int path_methods(const char *url, char allow[ALLOW_MAX]);

/* Per-request state, kept across libmicrohttpd's calls for one request. */
struct request {
    struct pt_job job; /* first: a worker runs the request through it */
    struct listener *ln;
    struct conn *cs;
    struct MHD_Connection *conn;
    char *url, *method; /* copies, for the worker */
    char *body;
    size_t len;
    int too_big;
    int dispatched; /* handed to a worker */
    int64_t t0_us;
    /* For the debug request log: libmicrohttpd's own strings, valid until
     * the request completes. */
    const char *log_method, *log_url;
    /* The answer: built by a handler, queued by the polling thread. */
    struct MHD_Response *resp;
    unsigned status;
    /* A long-poll: its end, and its link while parked. */
    int polling;
    int64_t poll_deadline_ms;
    struct request *wnext;
    /* A quick write answered on a deferred commit: its place in the batch,
     * its answer, and its link in ln->settling. */
    struct pt_store_commit commit;
    struct pt_reply reply;
    struct request *snext;
    /* The request's Origin when it is listed in cors_origins: its answer
     * carries the CORS headers for it (SPEC 15).  had_origin: there was an
     * Origin at all (the answer varies with it). */
    char cors_origin[PT_CFG_ORIGIN_MAX];
    int had_origin;
    int problem; /* Accept: application/problem+json */
};

static void loop_wake(struct listener *ln);

/* Set by park() in the worker running a request: do not resume it. */
static _Thread_local int tl_parked;
/* On the polling thread (a quick request, see quick_route()); a handler that
 * finds it must wait after all sets tl_deferred and answers nothing. */
static _Thread_local int tl_inline, tl_deferred;
/* Set by a quick handler whose answer waits for its batch (rq->reply). */
static _Thread_local int tl_settling;

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Hands parked long-polls back to their workers. */
static void repost(struct request *list)
{
    while (list) {
        struct request *next = list->wnext;
        list->wnext = NULL;
        pt_workers_post(list->ln->workers, &list->job);
        list = next;
    }
}

void pt_api_feed_wake(void *p)
{
    struct pt_api *api = p;
    pthread_mutex_lock(&api->mu);
    api->feed_version++;
    struct request *list = api->waiters;
    api->waiters = NULL;
    pthread_mutex_unlock(&api->mu);
    repost(list);
}

/* Makes the timer wake by deadline_ms at the latest.  Under api->mu. */
static void timer_kick(struct pt_api *api, int64_t deadline_ms)
{
    if (deadline_ms < api->timer_next_ms) {
        api->timer_next_ms = deadline_ms;
        pthread_cond_signal(&api->timer_cv);
    }
}

/* What cs is receiving must be complete within secs (0: no deadline). */
static void conn_deadline(struct pt_api *api, struct conn *cs, int secs)
{
    pthread_mutex_lock(&api->mu);
    cs->deadline_ms = secs ? pt_host_mono_ms() + secs * 1000 : 0;
    if (secs)
        timer_kick(api, cs->deadline_ms);
    pthread_mutex_unlock(&api->mu);
}

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

static void answer_log_init(void)
{
    const char *d = getenv("PAYTERM_TEST_ANSWER_LOG");
    if (d && *d && strlen(d) < sizeof answer_dir)
        snprintf(answer_dir, sizeof answer_dir, "%s", d);
}

static void note_answer(const struct request *rq, int status, const char *type, const char *body,
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
static void answer_log_init(void) {}
static void note_answer(const struct request *rq, int status, const char *type, const char *body,
                        size_t len)
{
    (void)rq, (void)status, (void)type, (void)body, (void)len;
}
#endif

/* Keeps r as the request's answer (queued by flush() in the polling
 * thread); NULL (out of memory) leaves none, and the connection is closed. */
static MHD_RESULT set_response(struct request *rq, int status, struct MHD_Response *r)
{
    if (!r)
        return MHD_NO;
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
    int64_t us = mono_us() - rq->t0_us;
    pt_metrics_http(status, us);
    if (pt_log_get_level() >= PT_LOG_DEBUG &&
        !(rq->log_url && strcmp(rq->log_url, LIVE_PATH) == 0)) /* the watchdog's, each check */
        log_request(rq, status, us);
    return MHD_YES;
}

static MHD_RESULT send_text(struct MHD_Connection *conn, struct request *rq, int status,
                            const char *type, char *body, size_t len, int replayed, int retry_after)
{
    (void)conn; /* the polling thread queues it: see flush() */
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, body ? body : (char *)"", MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    note_answer(rq, status, type, body, len);
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
    return set_response(rq, status, r);
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

static MHD_RESULT send_reply(struct MHD_Connection *conn, struct request *rq, struct pt_reply *rep)
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
    MHD_RESULT ret = send_text(conn, rq, rep->status, type, rep->body, rep->len, rep->replayed,
                               rep->retry_after_s);
    pt_reply_free(rep);
    return ret;
}

static MHD_RESULT send_error(struct MHD_Connection *conn, struct request *rq, int status,
                             const char *code, const char *message)
{
    struct pt_reply rep = {0};
    pt_reply_error(&rep, status, code, "%s", message);
    return send_reply(conn, rq, &rep);
}

/* Sends text as a JSON body and frees it; NULL (out of memory) is a 500. */
static MHD_RESULT send_json_text(struct MHD_Connection *conn, struct request *rq, int status,
                                 char *text)
{
    if (!text)
        return send_error(conn, rq, 500, "internal_error", "out of memory");
    MHD_RESULT ret = send_text(conn, rq, status, "application/json", text, strlen(text), 0, 0);
    free(text);
    return ret;
}

static MHD_RESULT send_json(struct MHD_Connection *conn, struct request *rq, int status, cJSON *o)
{
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return send_json_text(conn, rq, status, text);
}

static MHD_RESULT storage_error(struct MHD_Connection *conn, struct request *rq, int rc)
{
    char msg[160];
    snprintf(msg, sizeof msg, "the database cannot be read right now (%s)", pt_strerror(rc));
    struct pt_reply rep = {0};
    pt_reply_error(&rep, 503, "storage_unavailable", "%s", msg);
    rep.retry_after_s = 2;
    return send_reply(conn, rq, &rep);
}

/* ---- query parameters ----------------------------------------------------------- */

/* Parses an optional integer query argument in [min, max]. */
static int query_int(struct MHD_Connection *conn, const char *name, int64_t def, int64_t min,
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

/* ---- read-only handlers ------------------------------------------------------------ */

static MHD_RESULT get_charge(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                             const char *order_id)
{
    struct pt_charge c;
    /* store.fallback local: one the lane queued in its own store during an
     * outage, and has not moved to the store server, is read there; one
     * being moved or canceled there, when the server has none or cannot be
     * asked (pt_intake_local_charge). */
    int where = pt_intake_local_charge(&api->opt.intake, order_id, &c);
    if (where == PT_LOCAL_OWN)
        return send_json_text(conn, rq, 200, pt_charge_json_text(&c));
    struct pt_store *st = pt_pool_get(api->pool);
    int rc = st ? pt_store_charge_get(st, order_id, &c) : PT_EIO;
    pt_pool_put(api->pool, st);
    if (where == PT_LOCAL_SHADOW && (rc == PT_ENOTFOUND || rc == PT_EIO) &&
        pt_intake_local_charge(&api->opt.intake, order_id, &c) != PT_LOCAL_NONE)
        return send_json_text(conn, rq, 200, pt_charge_json_text(&c));
    if (rc == PT_ENOTFOUND) {
        char msg[128];
        snprintf(msg, sizeof msg, "no charge with order_id '%s'", order_id);
        return send_error(conn, rq, 404, "not_found", msg);
    }
    if (rc)
        return storage_error(conn, rq, rc);
    return send_json_text(conn, rq, 200, pt_charge_json_text(&c));
}

static MHD_RESULT list_charges(struct pt_api *api, struct MHD_Connection *conn, struct request *rq)
{
    char msg[160];
    int64_t limit, after;
    int state = -1;
    const char *sv = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "state");
    if (sv) {
        enum pt_state s;
        if (pt_state_parse(sv, &s) != PT_OK)
            return send_error(conn, rq, 400, "invalid_request",
                              "query parameter 'state' must be INIT, PROCESSING, PENDING, "
                              "UNKNOWN, SUCCESS, FAILED or CANCELED");
        state = (int)s;
    }
    /* review=true: the charges under review (the operator page's list). */
    const char *rv = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "review");
    int review = rv && strcmp(rv, "true") == 0;
    if (rv && (!review || sv))
        return send_error(conn, rq, 400, "invalid_request",
                          sv && review ? "query parameters 'review' and 'state' cannot be combined"
                                       : "query parameter 'review' must be true");
    if (!query_int(conn, "limit", 50, 1, LIST_MAX, &limit, msg, sizeof msg) ||
        !query_int(conn, "after", 0, 0, INT64_MAX, &after, msg, sizeof msg))
        return send_error(conn, rq, 400, "invalid_request", msg);
    struct pt_charge *rows = malloc(sizeof *rows * (size_t)limit);
    if (!rows)
        return send_error(conn, rq, 500, "internal_error", "out of memory");
    struct pt_store *st = pt_pool_get(api->pool);
    int n = 0, more = 0;
    int rc = !st      ? PT_EIO
             : review ? pt_store_charges_list_review(st, after, (int)limit, rows, &n, &more)
                      : pt_store_charges_list(st, state, after, (int)limit, rows, &n, &more);
    pt_pool_put(api->pool, st);
    if (rc) {
        free(rows);
        return storage_error(conn, rq, rc);
    }
    /* Up to LIST_MAX charge objects of at most ~12 KiB (metadata). */
    struct pt_jw w = {.max = (size_t)LIST_MAX * 16 * 1024};
    pt_jw_raw(&w, "{\"data\":[");
    for (int i = 0; i < n; i++) {
        char *t = pt_charge_json_text(&rows[i]);
        if (i)
            pt_jw_raw(&w, ",");
        if (t)
            pt_jw_raw(&w, t);
        else
            w.failed = 1;
        free(t);
    }
    pt_jw_raw(&w, more ? "],\"has_more\":true}" : "],\"has_more\":false}");
    free(rows);
    return send_json_text(conn, rq, 200, pt_jw_finish(&w));
}

/* GET /v1/refunds/{refund_id} */
static MHD_RESULT get_refund(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                             const char *refund_id)
{
    struct pt_store *st = pt_pool_get(api->pool);
    struct pt_refund r;
    int rc = st ? pt_store_refund_get(st, refund_id, &r) : PT_EIO;
    pt_pool_put(api->pool, st);
    if (rc == PT_ENOTFOUND) {
        char msg[128];
        snprintf(msg, sizeof msg, "no refund with refund_id '%s'", refund_id);
        return send_error(conn, rq, 404, "not_found", msg);
    }
    if (rc)
        return storage_error(conn, rq, rc);
    return send_json_text(conn, rq, 200, pt_refund_json_text(&r));
}

/* GET /v1/refunds?state=&limit=&after= and GET /v1/charges/{order_id}/refunds:
 * the same paging as the charges (after = the last refund's id). */
static MHD_RESULT list_refunds(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                               const char *order_id)
{
    char msg[160];
    int64_t limit, after;
    int state = -1;
    const char *sv = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "state");
    if (sv) {
        enum pt_state s;
        if (order_id || pt_state_parse(sv, &s) != PT_OK || !pt_refund_state_valid(s))
            return send_error(conn, rq, 400, "invalid_request",
                              order_id ? "query parameter 'state' is for GET /v1/refunds"
                                       : "query parameter 'state' must be INIT, PROCESSING, "
                                         "PENDING, UNKNOWN, SUCCESS or FAILED");
        state = (int)s;
    }
    if (!query_int(conn, "limit", 50, 1, LIST_MAX, &limit, msg, sizeof msg) ||
        !query_int(conn, "after", 0, 0, INT64_MAX, &after, msg, sizeof msg))
        return send_error(conn, rq, 400, "invalid_request", msg);
    struct pt_refund *rows = malloc(sizeof *rows * (size_t)limit);
    if (!rows)
        return send_error(conn, rq, 500, "internal_error", "out of memory");
    struct pt_store *st = pt_pool_get(api->pool);
    int n = 0, more = 0, rc = st ? PT_OK : PT_EIO;
    struct pt_charge c = {0};
    if (rc == PT_OK && order_id)
        rc = pt_store_charge_get(st, order_id, &c);
    if (rc == PT_OK)
        rc = pt_store_refunds_list(st, order_id ? c.id : 0, state, after, (int)limit, rows, &n,
                                   &more);
    pt_pool_put(api->pool, st);
    if (rc) {
        free(rows);
        if (rc == PT_ENOTFOUND) {
            snprintf(msg, sizeof msg, "no charge with order_id '%s'", order_id);
            return send_error(conn, rq, 404, "not_found", msg);
        }
        return storage_error(conn, rq, rc);
    }
    struct pt_jw w = {.max = (size_t)LIST_MAX * 16 * 1024};
    pt_jw_raw(&w, "{\"data\":[");
    for (int i = 0; i < n; i++) {
        char *t = pt_refund_json_text(&rows[i]);
        if (i)
            pt_jw_raw(&w, ",");
        if (t)
            pt_jw_raw(&w, t);
        else
            w.failed = 1;
        free(t);
    }
    pt_jw_raw(&w, more ? "],\"has_more\":true}" : "],\"has_more\":false}");
    free(rows);
    return send_json_text(conn, rq, 200, pt_jw_finish(&w));
}

static MHD_RESULT charge_audit(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                               const char *order_id)
{
    struct pt_audit_row *rows = malloc(sizeof *rows * AUDIT_MAX);
    if (!rows)
        return send_error(conn, rq, 500, "internal_error", "out of memory");
    struct pt_store *st = pt_pool_get(api->pool);
    struct pt_charge c;
    int n = 0;
    int rc = st ? pt_store_charge_get(st, order_id, &c) : PT_EIO;
    if (rc == PT_OK)
        rc = pt_store_audit_list(st, c.id, AUDIT_MAX, rows, &n);
    pt_pool_put(api->pool, st);
    if (rc == PT_ENOTFOUND) {
        free(rows);
        char msg[128];
        snprintf(msg, sizeof msg, "no charge with order_id '%s'", order_id);
        return send_error(conn, rq, 404, "not_found", msg);
    }
    if (rc) {
        free(rows);
        return storage_error(conn, rq, rc);
    }
    cJSON *o = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(o, "data");
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        char t[32];
        cJSON_AddNumberToObject(e, "seq", (double)rows[i].seq);
        if (rows[i].from_state[0])
            cJSON_AddStringToObject(e, "from", rows[i].from_state);
        else
            cJSON_AddNullToObject(e, "from");
        cJSON_AddStringToObject(e, "to", rows[i].to_state);
        cJSON_AddStringToObject(e, "cause", rows[i].cause);
        cJSON_AddStringToObject(e, "actor", rows[i].actor);
        cJSON_AddBoolToObject(e, "refused", rows[i].refused);
        if (rows[i].refund_id[0])
            cJSON_AddStringToObject(e, "refund_id", rows[i].refund_id);
        if (rows[i].detail[0])
            cJSON_AddStringToObject(e, "detail", rows[i].detail);
        else
            cJSON_AddNullToObject(e, "detail");
        pt_rfc3339(rows[i].created_at, t);
        cJSON_AddStringToObject(e, "created_at", t);
        cJSON_AddItemToArray(data, e);
    }
    free(rows);
    return send_json(conn, rq, 200, o);
}

/* Parks a long-poll (its connection stays suspended) until a commit adds
 * events, its deadline or a stop; 0 when one of them came since `seen` (the
 * caller queries again).  After a 1, rq belongs to whoever reposts it. */
static int park(struct pt_api *api, struct request *rq, uint64_t seen)
{
    pthread_mutex_lock(&api->mu);
    int ok = api->feed_version == seen && !api->stopping;
    if (ok) {
        rq->wnext = api->waiters;
        api->waiters = rq;
        timer_kick(api, rq->poll_deadline_ms);
        tl_parked = 1;
    }
    pthread_mutex_unlock(&api->mu);
    return ok;
}

static MHD_RESULT events_feed(struct pt_api *api, struct MHD_Connection *conn, struct request *rq)
{
    char msg[160];
    int64_t after, limit, wait_s;
    if (!query_int(conn, "after", 0, 0, INT64_MAX, &after, msg, sizeof msg) ||
        !query_int(conn, "limit", 100, 1, EVENTS_MAX, &limit, msg, sizeof msg) ||
        !query_int(conn, "wait", 0, 0, WAIT_MAX_S, &wait_s, msg, sizeof msg))
        return send_error(conn, rq, 400, "invalid_request", msg);

    if (!rq->polling) { /* the first run; a parked request keeps its deadline */
        rq->polling = 1;
        rq->poll_deadline_ms = pt_host_mono_ms() + wait_s * 1000;
    }
    struct pt_event_row *rows = malloc(sizeof *rows * EVENTS_MAX);
    if (!rows)
        return send_error(conn, rq, 500, "internal_error", "out of memory");
    int n = 0, rc;
    for (;;) {
        pthread_mutex_lock(&api->mu);
        uint64_t seen = api->feed_version;
        int stop = api->stopping;
        pthread_mutex_unlock(&api->mu);

        struct pt_store *st = pt_pool_get(api->pool);
        rc = st ? pt_store_events_list(st, after, (int)limit, rows, &n) : PT_EIO;
        pt_pool_put(api->pool, st);
        if (rc) {
            free(rows);
            return storage_error(conn, rq, rc);
        }
        if (n > 0 || stop || pt_host_mono_ms() >= rq->poll_deadline_ms)
            break;
        /* Nothing yet: park until a commit adds events, the wait ends, or
         * we stop, holding no thread.  The version read before the query
         * closes the race with a commit between the query and the park. */
        if (park(api, rq, seen)) {
            free(rows);
            return MHD_YES;
        }
    }
    cJSON *o = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(o, "data");
    int64_t next = after;
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        char t[32];
        cJSON_AddNumberToObject(e, "seq", (double)rows[i].seq);
        cJSON_AddStringToObject(e, "type", rows[i].type);
        cJSON_AddStringToObject(e, "order_id", rows[i].order_id);
        pt_rfc3339(rows[i].created_at, t);
        cJSON_AddStringToObject(e, "created_at", t);
        cJSON *payload = cJSON_Parse(rows[i].payload);
        if (payload && strncmp(rows[i].type, "refund.", 7) == 0) {
            /* {"refund":{...},"charge":{...}} (refunds.c) */
            cJSON *rf = cJSON_DetachItemFromObjectCaseSensitive(payload, "refund");
            cJSON *ch = cJSON_DetachItemFromObjectCaseSensitive(payload, "charge");
            if (rf)
                cJSON_AddItemToObject(e, "refund", rf);
            if (ch)
                cJSON_AddItemToObject(e, "charge", ch);
            cJSON_Delete(payload);
        } else if (payload) {
            cJSON_AddItemToObject(e, "charge", payload);
        }
        cJSON_AddItemToArray(data, e);
        next = rows[i].seq;
    }
    pt_event_rows_free(rows, n);
    free(rows);
    cJSON_AddNumberToObject(o, "next", (double)next);
    return send_json(conn, rq, 200, o);
}

/* /v1/status's "clock" (SPEC 17): whether payterm may use the wall clock
 * now (it sends nothing while not), whether what it records is still
 * provisional, and the steps it saw. */
static void add_clock(struct pt_api *api, cJSON *o)
{
    if (!api->opt.hooks.clock)
        return;
    struct pt_clock_info ci;
    api->opt.hooks.clock(api->opt.hooks.ctx, &ci);
    cJSON *k = cJSON_AddObjectToObject(o, "clock");
    char t[32];
    cJSON_AddBoolToObject(k, "trusted", ci.trusted);
    cJSON_AddBoolToObject(k, "synchronized", ci.synced);
    cJSON_AddBoolToObject(k, "provisional", ci.provisional);
    pt_rfc3339(ci.wall_ms, t);
    cJSON_AddStringToObject(k, "wall", t);
    pt_rfc3339(ci.lane_ms, t);
    cJSON_AddStringToObject(k, "payterm", t);
    cJSON_AddNumberToObject(k, "steps", (double)ci.steps);
    cJSON_AddNumberToObject(k, "last_step_ms", (double)ci.last_step_ms);
}

/*
 * The storage as /healthz, /v1/status and /metrics tell it (SPEC 5, 15):
 * the store's, or - while the store server is gone - the lane's own
 * queue's, when that takes the charges.  st may be NULL (no connection).
 */
static void storage_health(struct pt_api *api, struct pt_store *st, struct pt_store_health *h)
{
    if (st) {
        pt_store_health(st, h);
    } else {
        memset(h, 0, sizeof *h);
        h->free_bytes = -1;
        snprintf(h->reason, sizeof h->reason, "no connection to the database");
    }
    const struct pt_intake_fallback *fb = &api->opt.intake.fallback;
    if (!h->writable && fb->st) {
        struct pt_store_health local;
        pthread_mutex_lock(fb->mu);
        pt_store_health(fb->st, &local);
        pthread_mutex_unlock(fb->mu);
        if (local.writable)
            *h = local;
    }
}

static MHD_RESULT status(struct pt_api *api, struct MHD_Connection *conn, struct request *rq)
{
    struct pt_store_stats s;
    struct pt_refund_stats rs;
    struct pt_store_health h;
    struct pt_store *st = pt_pool_get(api->pool);
    int rc = st ? pt_store_stats(st, 0, &s) : PT_EIO;
    if (rc == PT_OK)
        rc = pt_store_refund_stats(st, &rs);
    if (rc == PT_OK)
        storage_health(api, st, &h);
    pt_pool_put(api->pool, st);
    if (rc)
        return storage_error(conn, rq, rc);
    int64_t now = pt_host_now_ms();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "online",
                          api->opt.hooks.online && api->opt.hooks.online(api->opt.hooks.ctx));
    /* Each configured gateway, as the sync engine last saw it (the operator
     * page shows which one is down). */
    cJSON *gws = cJSON_AddObjectToObject(o, "gateways");
    const struct pt_online_ops *on = &api->opt.intake.online;
    for (int i = 0; i < pt_gateway_count(); i++) {
        const char *name = pt_gateway_at(i)->name;
        if (!pt_config_gateway_configured(api->opt.cfg, name))
            continue;
        cJSON *g = cJSON_AddObjectToObject(gws, name);
        cJSON_AddBoolToObject(g, "online", !on->reachable || on->reachable(on->ctx, name));
        /* SPEC 18: when that was last found out (a probe, or a request's
         * verdict); null before the first. */
        int64_t at =
            api->opt.hooks.last_probe ? api->opt.hooks.last_probe(api->opt.hooks.ctx, name) : 0;
        if (at > 0) {
            char t[32];
            pt_rfc3339(at, t);
            cJSON_AddStringToObject(g, "last_probe_at", t);
        } else {
            cJSON_AddNullToObject(g, "last_probe_at");
        }
    }
    cJSON *q = cJSON_AddObjectToObject(o, "queue");
    cJSON_AddNumberToObject(q, "count", (double)s.by_state[PT_STATE_INIT]);
    cJSON_AddNumberToObject(
        q, "oldest_age_s",
        s.queue_oldest_created_at ? (double)((now - s.queue_oldest_created_at) / 1000) : 0);
    cJSON *bc = cJSON_AddObjectToObject(q, "by_currency");
    for (int i = 0; i < s.ncur; i++) {
        cJSON *c = cJSON_AddObjectToObject(bc, s.queue[i].currency);
        cJSON_AddNumberToObject(c, "count", (double)s.queue[i].count);
        cJSON_AddNumberToObject(c, "amount", (double)s.queue[i].amount);
    }
    cJSON_AddNumberToObject(o, "pending", (double)s.by_state[PT_STATE_PENDING]);
    cJSON_AddNumberToObject(o, "unknown", (double)s.by_state[PT_STATE_UNKNOWN]);
    cJSON_AddNumberToObject(o, "processing", (double)s.by_state[PT_STATE_PROCESSING]);
    cJSON_AddNumberToObject(o, "review", (double)s.review);
    cJSON *rf = cJSON_AddObjectToObject(o, "refunds");
    cJSON_AddNumberToObject(rf, "queued", (double)rs.by_state[PT_STATE_INIT]);
    cJSON_AddNumberToObject(rf, "pending", (double)rs.by_state[PT_STATE_PENDING]);
    cJSON_AddNumberToObject(rf, "unknown", (double)rs.by_state[PT_STATE_UNKNOWN]);
    cJSON_AddNumberToObject(rf, "processing", (double)rs.by_state[PT_STATE_PROCESSING]);
    cJSON_AddNumberToObject(rf, "review", (double)rs.review);
    /* Whether a charge would be stored now, as /healthz says it, and why
     * not: the operator page shows it instead of "online". */
    cJSON *sg = cJSON_AddObjectToObject(o, "storage");
    cJSON_AddBoolToObject(sg, "writable", h.writable);
    if (h.free_bytes >= 0)
        cJSON_AddNumberToObject(sg, "free_bytes", (double)h.free_bytes);
    if (!h.writable)
        cJSON_AddStringToObject(sg, "reason", h.reason);
    add_clock(api, o);
    cJSON_AddStringToObject(o, "version", PT_VERSION);
    return send_json(conn, rq, 200, o);
}

/* GET /healthz/live: the listener's thread answers, nothing else is
 * asked (no database, no writer turn) - the watchdog's probe, which must
 * not fail because a commit is slow (pt_api_probe). */
static MHD_RESULT live(struct MHD_Connection *conn, struct request *rq)
{
    static const char body[] = "{\"status\":\"live\"}";
    return send_text(conn, rq, 200, "application/json", (char *)body, sizeof body - 1, 0, 0);
}

static MHD_RESULT healthz(struct pt_api *api, struct MHD_Connection *conn, struct request *rq)
{
    struct pt_store_health h;
    struct pt_store *st = pt_pool_get(api->pool);
    storage_health(api, st, &h);
    pt_pool_put(api->pool, st);
    int ok = h.writable;
    const char *body = ok ? "{\"status\":\"ok\"}" : "{\"status\":\"storage_unavailable\"}";
    return send_text(conn, rq, ok ? 200 : 503, "application/json", (char *)body, strlen(body), 0,
                     ok ? 0 : 2);
}

/* The metrics text (a few KiB) in the one growable buffer type (buf.h). */
#define METRICS_MAX (256 * 1024)
#define tprintf pt_buf_printf

static MHD_RESULT metrics(struct pt_api *api, struct MHD_Connection *conn, struct request *rq)
{
    struct pt_store_stats s;
    struct pt_refund_stats rs;
    struct pt_store_health h;
    struct pt_store *st = pt_pool_get(api->pool);
    int rc = st ? pt_store_stats(st, 1, &s) : PT_EIO;
    if (rc == PT_OK)
        rc = pt_store_refund_stats(st, &rs);
    if (rc == PT_OK)
        storage_health(api, st, &h);
    pt_pool_put(api->pool, st);
    if (rc)
        return storage_error(conn, rq, rc);
    int64_t now = pt_host_now_ms();
    struct pt_buf t;
    pt_buf_init(&t, METRICS_MAX);
    tprintf(&t, "# HELP payterm_charges Charges by state.\n# TYPE payterm_charges gauge\n");
    for (int i = 0; i < PT_STATE__COUNT; i++)
        tprintf(&t, "payterm_charges{state=\"%s\"} %lld\n", pt_state_name((enum pt_state)i),
                (long long)s.by_state[i]);
    tprintf(&t,
            "# HELP payterm_charges_review Charges waiting for an operator.\n"
            "# TYPE payterm_charges_review gauge\npayterm_charges_review %lld\n",
            (long long)s.review);
    tprintf(&t, "# HELP payterm_refunds Refunds in progress by state.\n"
                "# TYPE payterm_refunds gauge\n");
    for (int i = 0; i < PT_STATE__COUNT; i++)
        if (pt_refund_state_valid((enum pt_state)i) && !pt_state_is_final((enum pt_state)i))
            tprintf(&t, "payterm_refunds{state=\"%s\"} %lld\n", pt_state_name((enum pt_state)i),
                    (long long)rs.by_state[i]);
    tprintf(&t,
            "# HELP payterm_refunds_review Refunds waiting for an operator.\n"
            "# TYPE payterm_refunds_review gauge\npayterm_refunds_review %lld\n",
            (long long)rs.review);
    tprintf(&t,
            "# HELP payterm_queue_depth Charges queued offline (INIT).\n"
            "# TYPE payterm_queue_depth gauge\npayterm_queue_depth %lld\n",
            (long long)s.by_state[PT_STATE_INIT]);
    tprintf(&t,
            "# HELP payterm_queue_oldest_age_seconds Age of the oldest queued charge.\n"
            "# TYPE payterm_queue_oldest_age_seconds gauge\n"
            "payterm_queue_oldest_age_seconds %lld\n",
            s.queue_oldest_created_at ? (long long)((now - s.queue_oldest_created_at) / 1000)
                                      : 0LL);
    tprintf(&t, "# HELP payterm_queue_amount Queued amount by currency, minor units.\n"
                "# TYPE payterm_queue_amount gauge\n");
    for (int i = 0; i < s.ncur; i++)
        tprintf(&t, "payterm_queue_amount{currency=\"%s\"} %lld\n", s.queue[i].currency,
                (long long)s.queue[i].amount);
    tprintf(&t,
            "# HELP payterm_storage_writable 1 when a charge would be stored now (/healthz).\n"
            "# TYPE payterm_storage_writable gauge\npayterm_storage_writable %d\n",
            h.writable ? 1 : 0);
    if (h.free_bytes >= 0)
        tprintf(&t,
                "# HELP payterm_storage_free_bytes Bytes free for the database on its file "
                "system.\n"
                "# TYPE payterm_storage_free_bytes gauge\npayterm_storage_free_bytes %lld\n",
                (long long)h.free_bytes);
    tprintf(&t,
            "# HELP payterm_online 1 when the gateways were reachable at last contact.\n"
            "# TYPE payterm_online gauge\npayterm_online %d\n",
            api->opt.hooks.online && api->opt.hooks.online(api->opt.hooks.ctx) ? 1 : 0);
    if (api->opt.hooks.clock) {
        struct pt_clock_info ci;
        api->opt.hooks.clock(api->opt.hooks.ctx, &ci);
        tprintf(&t,
                "# HELP payterm_clock_trusted 1 when the wall clock may be used (SPEC 17).\n"
                "# TYPE payterm_clock_trusted gauge\npayterm_clock_trusted %d\n"
                "# HELP payterm_clock_provisional 1 while recorded times wait for a trusted "
                "clock.\n"
                "# TYPE payterm_clock_provisional gauge\npayterm_clock_provisional %d\n"
                "# HELP payterm_clock_steps_total Steps of the wall clock seen.\n"
                "# TYPE payterm_clock_steps_total counter\npayterm_clock_steps_total %lld\n",
                ci.trusted, ci.provisional, (long long)ci.steps);
    }
    tprintf(&t, "# HELP payterm_gateway_online 1 when the gateway answered at last contact.\n"
                "# TYPE payterm_gateway_online gauge\n");
    for (int g = 0; g < pt_gateway_count(); g++)
        tprintf(&t, "payterm_gateway_online{gateway=\"%s\"} %d\n", pt_metric_gateway_name(g),
                atomic_load(&pt_metrics.online[g]));
    tprintf(&t, "# HELP payterm_sync_attempts_total Gateway sends by outcome.\n"
                "# TYPE payterm_sync_attempts_total counter\n");
    for (int g = 0; g < pt_gateway_count(); g++)
        for (int o = 0; o < PT_MS__COUNT; o++)
            tprintf(&t, "payterm_sync_attempts_total{gateway=\"%s\",outcome=\"%s\"} %llu\n",
                    pt_metric_gateway_name(g), pt_metric_sync_name(o),
                    (unsigned long long)atomic_load(&pt_metrics.sync_attempts[g][o]));
    tprintf(&t, "# HELP payterm_notifications_total Gateway notifications by result.\n"
                "# TYPE payterm_notifications_total counter\n");
    for (int g = 0; g < pt_gateway_count(); g++)
        for (int o = 0; o < PT_MN__COUNT; o++)
            tprintf(&t, "payterm_notifications_total{gateway=\"%s\",result=\"%s\"} %llu\n",
                    pt_metric_gateway_name(g), pt_metric_notify_name(o),
                    (unsigned long long)atomic_load(&pt_metrics.notifications[g][o]));
    tprintf(&t,
            "# HELP payterm_idempotency_total Idempotency guard outcomes.\n"
            "# TYPE payterm_idempotency_total counter\n"
            "payterm_idempotency_total{result=\"replayed\"} %llu\n"
            "payterm_idempotency_total{result=\"in_use\"} %llu\n"
            "payterm_idempotency_total{result=\"reused\"} %llu\n",
            (unsigned long long)atomic_load(&pt_metrics.idem_replays),
            (unsigned long long)atomic_load(&pt_metrics.idem_in_use),
            (unsigned long long)atomic_load(&pt_metrics.idem_reused));
    tprintf(&t, "# HELP payterm_http_responses_total Responses by status class.\n"
                "# TYPE payterm_http_responses_total counter\n");
    for (int c = 1; c <= 5; c++)
        tprintf(&t, "payterm_http_responses_total{class=\"%dxx\"} %llu\n", c,
                (unsigned long long)atomic_load(&pt_metrics.http_by_class[c]));
    tprintf(&t, "# HELP payterm_http_request_duration_seconds Request latency.\n"
                "# TYPE payterm_http_request_duration_seconds histogram\n");
    unsigned long long cum = 0;
    for (int b = 0; b <= PT_LATENCY_BUCKETS; b++) {
        cum += atomic_load(&pt_metrics.latency_bucket[b]);
        if (b < PT_LATENCY_BUCKETS)
            tprintf(&t, "payterm_http_request_duration_seconds_bucket{le=\"%g\"} %llu\n",
                    pt_latency_bounds_us[b] / 1e6, cum);
        else
            tprintf(&t, "payterm_http_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n", cum);
    }
    tprintf(&t,
            "payterm_http_request_duration_seconds_sum %.6f\n"
            "payterm_http_request_duration_seconds_count %llu\n",
            atomic_load(&pt_metrics.latency_sum_us) / 1e6,
            (unsigned long long)atomic_load(&pt_metrics.latency_count));
    size_t len = 0;
    char *text = pt_buf_take(&t, &len);
    if (!text)
        return send_error(conn, rq, 500, "internal_error", "out of memory");
    MHD_RESULT ret =
        send_text(conn, rq, 200, "text/plain; version=0.0.4; charset=utf-8", text, len, 0, 0);
    free(text);
    return ret;
}

/* ---- write handlers ------------------------------------------------------------------ */

typedef int (*order_op)(const struct pt_intake *, struct pt_store *, const char *, const char *,
                        const char *, size_t, int64_t, struct pt_reply *);

static MHD_RESULT guarded(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                          const char *order_id, order_op op)
{
    const char *key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Idempotency-Key");
    struct pt_store *st = pt_pool_get(api->pool);
    struct pt_reply rep;
    int64_t now = pt_host_now_ms();
    if (!st && api->opt.intake.fallback.st && (!order_id || op == pt_intake_cancel)) {
        /* No connection to the store server at all (store.fallback local):
         * the charge goes to the lane's own queue, and one queued there is
         * canceled there. */
        if (order_id)
            op(&api->opt.intake, NULL, order_id, key, rq->body, rq->len, now, &rep);
        else
            pt_intake_create_charge_locally(&api->opt.intake, key, rq->body, rq->len, now, &rep);
        MHD_RESULT ret = send_reply(conn, rq, &rep);
        pt_reply_free(&rep);
        return ret;
    }
    if (!st)
        return storage_error(conn, rq, PT_EIO);
    int rc = PT_OK;
    /* On the event loop, the commit joins the writer's batch; the loop
     * commits it once it has read every request that is in (settle_batch). */
    int defer = tl_inline && api->opt.writer;
    if (defer)
        pt_store_defer_commit(st, &rq->commit);
    if (order_id)
        op(&api->opt.intake, st, order_id, key, rq->body, rq->len, now, &rep);
    else if (tl_inline)
        rc =
            pt_intake_create_charge_nowait(&api->opt.intake, st, key, rq->body, rq->len, now, &rep);
    else
        pt_intake_create_charge(&api->opt.intake, st, key, rq->body, rq->len, now, &rep);
    int deferred = defer && pt_store_commit_deferred(st);
    if (defer)
        pt_store_defer_commit(st, NULL);
    pt_pool_put(api->pool, st);
    if (rc == PT_EAGAIN) { /* it goes to the gateway: a worker's job */
        /* Its rollback may have joined the batch (it read other requests'
         * rows): that place is settled now, not left open for nobody. */
        if (deferred)
            pt_store_writer_flush(api->opt.writer, &rq->commit);
        tl_deferred = 1;
        return MHD_YES;
    }
    tl_settling = deferred;
    if (tl_settling) {
        rq->reply = rep;
        return MHD_YES;
    }
    return send_reply(conn, rq, &rep);
}

/* GET /v1/charges/{order_id}/payment (may ask the gateway: an API thread). */
static MHD_RESULT payment_link(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                               const char *order_id)
{
    struct pt_store *st = pt_pool_get(api->pool);
    if (!st)
        return storage_error(conn, rq, PT_EIO);
    struct pt_reply rep;
    pt_intake_payment(&api->opt.intake, st, order_id, &rep);
    pt_pool_put(api->pool, st);
    return send_reply(conn, rq, &rep);
}

static MHD_RESULT sync_now(struct pt_api *api, struct MHD_Connection *conn, struct request *rq)
{
    if (api->opt.hooks.sync_now)
        api->opt.hooks.sync_now(api->opt.hooks.ctx);
    const char *body = "{\"status\":\"sync started\"}";
    return send_text(conn, rq, 202, "application/json", (char *)body, strlen(body), 0, 0);
}

/* Collects the request headers as "Name: value" lines for the adapters. */
static MHD_RESULT collect_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
    (void)kind;
    struct pt_http_response *msg = cls;
    pt_http_response_add_header(msg, key, value ? value : "");
    return MHD_YES;
}

static MHD_RESULT notify(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                         const char *gateway)
{
    if (!api->opt.hooks.notify)
        return send_error(conn, rq, 404, "not_found", "notifications are not handled here");
    struct pt_http_response msg = {0};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, collect_header, &msg);
    msg.body = rq->body;
    msg.body_len = rq->len;
    struct pt_store *st = pt_pool_get(api->pool);
    if (!st) {
        msg.body = NULL;
        pt_http_response_free(&msg);
        return storage_error(conn, rq, PT_EIO);
    }
    struct pt_reply rep = {0};
    const char *type = "application/json";
    api->opt.hooks.notify(api->opt.hooks.ctx, st, gateway, &msg, &rep, &type);
    pt_pool_put(api->pool, st);
    msg.body = NULL; /* owned by rq */
    pt_http_response_free(&msg);
    MHD_RESULT ret = send_text(conn, rq, rep.status, type, rep.body, rep.len, 0, 0);
    pt_reply_free(&rep);
    return ret;
}

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

static MHD_RESULT not_allowed(struct MHD_Connection *conn, struct request *rq, const char *allow)
{
    struct pt_reply rep = {0};
    pt_reply_error(&rep, 405, "method_not_allowed", "use %s for this path", allow);
    MHD_RESULT ret = send_reply(conn, rq, &rep);
    if (rq->resp)
        MHD_add_response_header(rq->resp, "Allow", allow);
    return ret;
}

/* ---- browsers: CORS and cross-site requests (SPEC 15) -------------------------------- */

/*
 * GET /: the operator page, from the binary.  It may not be framed by
 * another page (its buttons cancel and refund: no clickjacking), may talk
 * only to this listener, and loads nothing from anywhere.
 */
static MHD_RESULT operator_page(struct MHD_Connection *conn, struct request *rq)
{
    (void)conn;
    struct MHD_Response *r = MHD_create_response_from_buffer(
        pt_asset_operator_html_len, (void *)pt_asset_operator_html, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    note_answer(rq, 200, "text/html; charset=utf-8", pt_asset_operator_html,
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
    return set_response(rq, 200, r);
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
static void note_origin(struct pt_api *api, struct MHD_Connection *conn, struct request *rq)
{
    const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
    rq->had_origin = origin != NULL;
    rq->cors_origin[0] = '\0';
    if (origin && origin_listed(api->opt.cfg, origin))
        snprintf(rq->cors_origin, sizeof rq->cors_origin, "%s", origin);
}

/*
 * Before any route (and before the bearer token, which a preflight never
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
static int cross_origin(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                        const char *url, const char *method, MHD_RESULT *ret)
{
    const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
    int options = strcmp(method, "OPTIONS") == 0;
    note_origin(api, conn, rq);
    char methods[ALLOW_MAX];
    int known = path_methods(url, methods);
    /* A browser that reached us by a name nobody configured: refused,
     * reads too (DNS rebinding; host_allowed). */
    const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host");
    if (from_browser(conn) && !host_allowed(api->opt.cfg, host)) {
        char msg[400];
        snprintf(msg, sizeof msg,
                 "a browser reached payterm as '%.120s': browsers may use an IP address, "
                 "localhost, or a name whose http:// origin is in cors_origins",
                 host ? host : "");
        *ret = send_error(conn, rq, 421, "host_not_allowed", msg);
        return 1;
    }
    int reads = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    if (origin && !rq->cors_origin[0] && !same_origin(conn, origin) && !reads) {
        char msg[400];
        snprintf(msg, sizeof msg,
                 "requests from the web page at '%.200s' may not %s: only the operator page "
                 "served here and the origins in cors_origins may",
                 origin, options ? "call this API" : "change anything");
        *ret = send_error(conn, rq, 403, "origin_not_allowed", msg);
        return 1;
    }
    if (!options)
        return 0;
    if (!known) {
        *ret = send_error(conn, rq, 404, "not_found", "no such path");
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
    note_answer(rq, 204, "", NULL, 0);
    *ret = set_response(rq, 204, r);
    return 1;
}

/* Accept names application/problem+json (with a q other than 0). */
static int wants_problem(struct MHD_Connection *conn)
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

/* ---- the route table ------------------------------------------------------------------ */

/*
 * Every route is one row: its method, its path (a "{name}" segment takes
 * the path's parameter: an order id, a refund id, a gateway's route),
 * its handler and how it is served.  Dispatch, the Allow header (405,
 * OPTIONS), CORS preflight and the quick/worker split are read from here,
 * and tests/unit/test_api_routes.c holds firmware/openapi.json to it.
 */
enum {
    R_PUBLIC = 1, /* served without the bearer token (holds no data, or a gateway's) */
    R_QUICK = 2,  /* answered on the polling thread: never waits for a gateway */
};

/* A handler gets the path's parameter (NULL when the route has none). */
typedef MHD_RESULT (*route_fn)(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                               const char *arg);

struct route {
    const char *method, *path;
    route_fn fn;
    unsigned flags;
};

static MHD_RESULT h_healthz(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                            const char *arg)
{
    (void)arg;
    return healthz(api, conn, rq);
}

static MHD_RESULT h_live(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                         const char *arg)
{
    (void)api;
    (void)arg;
    return live(conn, rq);
}

/* The operator page asks for the token itself; it holds no data. */
static MHD_RESULT h_page(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                         const char *arg)
{
    (void)api;
    (void)arg;
    return operator_page(conn, rq);
}

/* The description of the API holds no data: a client may read it before
 * it has the token. */
static MHD_RESULT h_openapi(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                            const char *arg)
{
    (void)api;
    (void)arg;
    return send_text(conn, rq, 200, "application/json", (char *)pt_asset_openapi_json,
                     pt_asset_openapi_json_len, 0, 0);
}

static MHD_RESULT h_metrics(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                            const char *arg)
{
    (void)arg;
    return metrics(api, conn, rq);
}

static MHD_RESULT h_status(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                           const char *arg)
{
    (void)arg;
    return status(api, conn, rq);
}

static MHD_RESULT h_sync(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                         const char *arg)
{
    (void)arg;
    return sync_now(api, conn, rq);
}

static MHD_RESULT h_events(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                           const char *arg)
{
    (void)arg;
    return events_feed(api, conn, rq);
}

static MHD_RESULT h_create(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                           const char *arg)
{
    (void)arg;
    return guarded(api, conn, rq, NULL, NULL);
}

static MHD_RESULT h_list_charges(struct pt_api *api, struct MHD_Connection *conn,
                                 struct request *rq, const char *arg)
{
    (void)arg;
    return list_charges(api, conn, rq);
}

static MHD_RESULT h_cancel(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                           const char *order)
{
    return guarded(api, conn, rq, order, pt_intake_cancel);
}

static MHD_RESULT h_review(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                           const char *order)
{
    return guarded(api, conn, rq, order, pt_intake_review);
}

static MHD_RESULT h_refund(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                           const char *order)
{
    return guarded(api, conn, rq, order, pt_intake_refund);
}

/* A gateway's notification: its table names its route (gateway.h). */
static MHD_RESULT h_notify(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                           const char *gateway)
{
    return notify(api, conn, rq, gateway);
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
    {"GET", "/v1/charges/{order_id}", get_charge, R_QUICK},
    {"GET", "/v1/charges/{order_id}/events", charge_audit, R_QUICK},
    {"GET", "/v1/charges/{order_id}/payment", payment_link, 0}, /* may ask the gateway */
    {"POST", "/v1/charges/{order_id}/cancel", h_cancel, 0},
    {"POST", "/v1/charges/{order_id}/review", h_review, R_QUICK},
    {"GET", "/v1/charges/{order_id}/refunds", list_refunds, R_QUICK},
    {"POST", "/v1/charges/{order_id}/refunds", h_refund, 0},
    {"GET", "/v1/refunds", list_refunds, R_QUICK},
    {"GET", "/v1/refunds/{refund_id}", get_refund, R_QUICK},
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

/* The path's parameter of one route, NUL-terminated (the longest: an id). */
#define ROUTE_ARG_MAX 80

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
            snprintf(arg, ROUTE_ARG_MAX, "%.*s", n < ROUTE_ARG_MAX ? (int)n : ROUTE_ARG_MAX - 1,
                     url);
            if (n == 0 || n >= ROUTE_ARG_MAX)
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

static int path_methods(const char *url, char allow[ALLOW_MAX])
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
static const struct route *route_of(const char *method, const char *url, char arg[ROUTE_ARG_MAX])
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
    if (strstr(r->path, "{gateway}") && !pt_gateway_by_route(url))
        return "no such path";
    return NULL;
}

static MHD_RESULT route(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                        const char *url, const char *method)
{
    rq->problem = wants_problem(conn);
    MHD_RESULT answered;
    if (cross_origin(api, conn, rq, url, method, &answered))
        return answered;
    char arg[ROUTE_ARG_MAX], allow[ALLOW_MAX];
    const struct route *r = route_of(method, url, arg);
    int known = path_methods(url, allow);
    /* Without the token only the public routes answer anything (a path
     * that does not exist included: nothing is told about it). */
    int is_public = r ? (r->flags & R_PUBLIC) != 0 : 0;
    if (!r && known) {
        /* Another method of this path: public when that route is. */
        char any[ROUTE_ARG_MAX];
        const struct route *other = route_of(strcmp(allow, "POST") == 0 ? "POST" : "GET", url, any);
        is_public = other && (other->flags & R_PUBLIC);
    }
    if (!is_public && !authorized(api, conn))
        return send_error(conn, rq, 401, "unauthorized",
                          "missing or wrong bearer token (Authorization: Bearer <token from "
                          "api_token_file>)");
    if (!known)
        return send_error(conn, rq, 404, "not_found", "no such path");
    const struct route *which = r ? r : route_of(strstr(allow, "GET") ? "GET" : "POST", url, arg);
    const char *why = which ? bad_arg(which, arg, url) : NULL;
    if (why)
        return send_error(conn, rq, 404, "not_found", why);
    if (!r)
        return not_allowed(conn, rq, allow);
    if (strstr(r->path, "{gateway}"))
        return r->fn(api, conn, rq, pt_gateway_by_route(url)->name);
    return r->fn(api, conn, rq, arg[0] ? arg : NULL);
}

/* ---- serving a request ----------------------------------------------------------------- */

/* Queues the answer a handler left in rq (in the polling thread). */
static MHD_RESULT flush(struct MHD_Connection *conn, struct request *rq)
{
    struct MHD_Response *r = rq->resp;
    if (!r)
        return MHD_NO; /* no answer could be built: close the connection */
    rq->resp = NULL;
    MHD_RESULT ret = MHD_queue_response(conn, rq->status, r);
    MHD_destroy_response(r);
    return ret;
}

/* A worker: runs the handler, then lets the polling thread send its answer. */
static void serve(struct pt_job *job)
{
    struct request *rq = (struct request *)job;
    struct pt_api *api = rq->ln->api;
    tl_parked = 0;
    pt_gate_enter(api->opt.gate);
    route(api, rq->conn, rq, rq->url, rq->method);
    pt_gate_leave(api->opt.gate);
    if (tl_parked)
        return; /* a long-poll waits; rq is no longer ours to touch */
    struct MHD_Connection *conn = rq->conn;
    struct listener *ln = rq->ln;
    /* After the resume the polling thread may answer and free rq at once. */
    MHD_resume_connection(conn);
    /* libmicrohttpd's channel does not wake an external epoll loop. */
    loop_wake(ln);
    pthread_mutex_lock(&api->mu);
    if (--api->suspended == 0)
        pthread_cond_broadcast(&api->idle_cv);
    pthread_mutex_unlock(&api->mu);
}

/*
 * Requests that never wait for a gateway or a long-poll: reads, the review
 * flag, a sync wake-up, and a new charge as long as it needs no gateway (a
 * replay, a refusal, the offline queue; pt_intake_create_charge_nowait).
 * Handing them to a worker would cost more than they do (two thread
 * switches, ~100 us here, against a few microseconds of work or one
 * durable commit); they run on the polling thread.  Gateway calls, the
 * notification routes (whose binding may ask the gateway) and the feed stay
 * on the workers.
 */
static int quick_route(const char *url, const char *method)
{
    char arg[ROUTE_ARG_MAX];
    const struct route *r = route_of(method, url, arg);
    if (r)
        return (r->flags & R_QUICK) != 0;
    /* No such route: a GET is answered at once (404, 405), as a read
     * would be; anything else (OPTIONS, other methods) by a worker. */
    return strcmp(method, "GET") == 0;
}

/*
 * Group commit on the event loop (docs/writer.md).  A quick write's
 * transaction is left in the writer's open batch and its connection
 * suspended; once libmicrohttpd has run every connection that had
 * something to read (MHD_run returns), the loop commits the batch - one
 * sync for all the requests that came in meanwhile - and only then sends
 * their answers.  One client pays no more than before (no thread switch);
 * eight share one sync.
 */
static MHD_RESULT settle_later(struct listener *ln, struct MHD_Connection *conn, struct request *rq)
{
    struct pt_api *api = ln->api;
    pthread_mutex_lock(&api->mu);
    api->suspended++;
    pthread_mutex_unlock(&api->mu);
    rq->conn = conn;
    rq->dispatched = 1; /* after the resume: flush() sends rq->resp */
    rq->snext = NULL;
    *ln->settling_tail = rq;
    ln->settling_tail = &rq->snext;
    MHD_suspend_connection(conn);
    return MHD_YES;
}

/* Makes the batch durable and sends the answers that waited for it; 0
 * when none did. */
static int settle_batch(struct listener *ln)
{
    struct pt_api *api = ln->api;
    struct request *rq = ln->settling;
    if (!rq)
        return 0;
    ln->settling = NULL;
    ln->settling_tail = &ln->settling;
    while (rq) {
        struct request *next = rq->snext;
        int rc = pt_store_writer_flush(api->opt.writer, &rq->commit);
        pt_intake_settle(&api->opt.intake, rc, &rq->reply);
        send_reply(rq->conn, rq, &rq->reply);
        MHD_resume_connection(rq->conn);
        pthread_mutex_lock(&api->mu);
        if (--api->suspended == 0)
            pthread_cond_broadcast(&api->idle_cv);
        pthread_mutex_unlock(&api->mu);
        rq = next;
    }
    return 1;
}

/* The whole request is in: answer a quick one here; otherwise suspend the
 * connection and hand it to a worker, so that the polling thread goes on
 * serving the others. */
static MHD_RESULT dispatch(struct listener *ln, struct MHD_Connection *conn, struct request *rq,
                           const char *url, const char *method)
{
    struct pt_api *api = ln->api;
    if (quick_route(url, method)) {
        pthread_mutex_lock(&api->mu);
        rq->cs->deadline_ms = 0; /* received: no more deadline */
        pthread_mutex_unlock(&api->mu);
        tl_inline = 1;
        tl_deferred = tl_settling = 0;
        MHD_RESULT r = route(api, conn, rq, url, method);
        tl_inline = 0;
        if (tl_settling) {
            tl_settling = 0;
            return settle_later(ln, conn, rq);
        }
        if (!tl_deferred)
            return rq->resp ? flush(conn, rq) : r;
        tl_deferred = 0;
    }
    rq->url = strdup(url);
    rq->method = strdup(method);
    if (!rq->url || !rq->method)
        return send_error(conn, rq, 500, "internal_error", "out of memory") ? flush(conn, rq)
                                                                            : MHD_NO;
    pthread_mutex_lock(&api->mu);
    int closing = api->closing;
    if (!closing) {
        api->suspended++;
        rq->cs->deadline_ms = 0; /* received: no more deadline */
    }
    pthread_mutex_unlock(&api->mu);
    if (closing) /* the listener stops now: nothing may stay suspended */
        return MHD_NO;
    rq->conn = conn;
    rq->dispatched = 1;
    rq->job.run = serve;
    MHD_suspend_connection(conn);
    pt_workers_post(ln->workers, &rq->job);
    return MHD_YES;
}

/*
 * libmicrohttpd before 1.0 keeps a NUL byte in a header line: the value is
 * silently cut at it (an Idempotency-Key "a\0b" would be "a"), and so is the
 * request target.  Its values are pointers into the head as received, with
 * each line end (CRLF or LF) overwritten by NULs, so a value whose line goes
 * on after its end held a NUL.  (Not seen: a single NUL right before a bare
 * LF, "a\0\n", which leaves the same bytes as "a\r\n"; the value is then
 * "a", as the client's bytes up to the NUL say.)  1.0 refuses such requests
 * itself.
 */
#if MHD_VERSION < 0x01000000
#define PT_MHD_KEEPS_NUL 1
#else
#define PT_MHD_KEEPS_NUL 0
#endif

/* What the header scan found. */
struct head_scan {
    uintptr_t head, head_end; /* the head as received (0: unknown) */
    int idem_keys;            /* Idempotency-Key headers */
    const char *prev_name;    /* the header before the one being looked at */
    uintptr_t prev_end;       /* where its value ended */
    const char *nul_in;       /* the first header whose line held a NUL */
    int folded;               /* a line continued another (obs-fold) */
};

static MHD_RESULT scan_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                              const char *value, size_t value_size)
{
    (void)kind;
    struct head_scan *h = cls;
    if (strcasecmp(key, "Idempotency-Key") == 0)
        h->idem_keys++;
    uintptr_t start = (uintptr_t)key;
    /* libmicrohttpd 0.9 copies a header continued on the next line (which
     * RFC 9112 lets a server refuse) out of the head. */
    if (PT_MHD_KEEPS_NUL && h->head && (start < h->head || start >= h->head_end))
        h->folded = 1;
    /* Between the end of the previous value and this name: its line end. */
    else if (PT_MHD_KEEPS_NUL && h->prev_name && !h->nul_in &&
             (start < h->prev_end + 1 || start > h->prev_end + 2))
        h->nul_in = h->prev_name;
    h->prev_name = key;
    h->prev_end = value ? (uintptr_t)value + value_size : start + key_size;
    return MHD_YES;
}

/* The last header ends its line and the empty line ends the head: two line
 * ends of 1 or 2 bytes before head_end. */
static void scan_last(struct head_scan *h, uintptr_t head_end)
{
    if (PT_MHD_KEEPS_NUL && h->prev_name && !h->nul_in &&
        (head_end < h->prev_end + 2 || head_end > h->prev_end + 4))
        h->nul_in = h->prev_name;
}

/* Headers containing NUL and a repeated Idempotency-Key are 400 (SPEC 5);
 * 1 when rq holds that answer. */
static int head_invalid(struct MHD_Connection *conn, struct request *rq, const char *method,
                        const char *version)
{
    struct conn *cs = rq->cs;
    /* The target ended where libmicrohttpd cut the request line before the
     * version; a NUL makes it end earlier. */
    /* %00 too: unescaped, it would cut the path short just the same. */
    if ((PT_MHD_KEEPS_NUL && cs->raw_uri && version && version[0] &&
         (uintptr_t)cs->raw_uri + cs->raw_uri_len + 1 != (uintptr_t)version) ||
        cs->raw_uri_nul) {
        send_error(conn, rq, 400, "invalid_request", "the request target contains a NUL byte");
        return 1;
    }
    struct head_scan h = {0};
    const union MHD_ConnectionInfo *hs =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    if (hs) {
        h.head = (uintptr_t)method;
        h.head_end = h.head + hs->header_size;
    }
    MHD_get_connection_values_n(conn, MHD_HEADER_KIND, scan_header, &h);
    if (hs && !h.folded)
        scan_last(&h, h.head_end);
    char msg[200];
    if (h.folded) {
        send_error(conn, rq, 400, "invalid_request",
                   "a header line is continued on the next line (starts with a space or tab); "
                   "send each header on one line");
        return 1;
    }
    if (h.nul_in) {
        snprintf(msg, sizeof msg, "header '%.64s' contains a NUL byte", h.nul_in);
        send_error(conn, rq, 400, "invalid_request", msg);
        return 1;
    }
    if (h.idem_keys > 1) {
        snprintf(msg, sizeof msg,
                 "header Idempotency-Key was given %d times; send it once, with one key",
                 h.idem_keys);
        send_error(conn, rq, 400, "idempotency_key_invalid", msg);
        return 1;
    }
    return 0;
}

/* libmicrohttpd's URI log callback: the raw request target, before it is
 * cut at '?' and unescaped in place. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)cls;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct conn *cs = ci ? ci->socket_context : NULL;
    if (cs) {
        cs->raw_uri = uri;
        cs->raw_uri_len = strlen(uri);
        cs->raw_uri_nul = strstr(uri, "%00") != NULL;
    }
    return NULL; /* the request's state is made at the first access call */
}

/* The first call, with the head: checks what can be answered at once. */
static MHD_RESULT request_head(struct listener *ln, struct MHD_Connection *conn, struct request *rq,
                               const char *method, const char *version)
{
    struct pt_api *api = ln->api;
    rq->problem = wants_problem(conn); /* for the answers given at the head too */
    note_origin(api, conn, rq);
    conn_deadline(api, rq->cs, BODY_TIMEOUT_S);
    pthread_mutex_lock(&api->mu);
    int stopping = api->stopping;
    pthread_mutex_unlock(&api->mu);
    /* A body announced too big is not read at all (the connection closes). */
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    if (cl && strtoull(cl, NULL, 10) > BODY_MAX) {
        rq->too_big = 1;
        send_error(conn, rq, 413, "payload_too_large", "request bodies are limited to 16 KiB");
        return flush(conn, rq);
    }
    /* These answers wait for the body (at most 16 KiB, read and dropped):
     * answering and closing while the client still sends would reset the
     * connection, and the client would see that instead of the answer. */
    if (stopping) {
        /* Requests in flight finish; a new one is told to come back. */
        send_error(conn, rq, 503, "shutting_down", "payterm is stopping; retry in a few seconds");
        if (rq->resp) {
            MHD_add_response_header(rq->resp, "Connection", "close");
            MHD_add_response_header(rq->resp, "Retry-After", "5");
        }
        return MHD_YES;
    }
    head_invalid(conn, rq, method, version);
    return MHD_YES;
}

/* libmicrohttpd's access handler, in the polling thread: called once with
 * the head, then once per body chunk, then with *upload_data_size == 0 when
 * the request is complete, and once more after a worker resumed it. */
static MHD_RESULT on_request(void *cls, struct MHD_Connection *conn, const char *url,
                             const char *method, const char *version, const char *upload_data,
                             size_t *upload_data_size, void **con_cls)
{
    struct listener *ln = cls;
    struct pt_api *api = ln->api;
    struct request *rq = *con_cls;
    if (!rq) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        struct conn *cs = ci ? ci->socket_context : NULL;
        if (!cs || !cs->admitted)
            return MHD_NO; /* refused at accept (per-address cap), or out of memory */
        rq = calloc(1, sizeof *rq);
        if (!rq)
            return MHD_NO;
        rq->t0_us = mono_us();
        rq->log_method = method;
        rq->log_url = url;
        rq->ln = ln;
        rq->cs = cs;
        *con_cls = rq;
        pthread_mutex_lock(&api->mu);
        api->in_flight++;
        pthread_mutex_unlock(&api->mu);
        return request_head(ln, conn, rq, method, version);
    }
    if (rq->dispatched) /* a worker's answer (none: it ran out of memory) */
        return flush(conn, rq);
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (rq->resp) /* answered at the head (request_head) */
            return MHD_YES;
        if (rq->too_big || rq->len + n > BODY_MAX) {
            rq->too_big = 1; /* chunked body beyond the limit: drop the rest */
            return MHD_YES;
        }
        char *b = realloc(rq->body, rq->len + n + 1);
        if (!b)
            return MHD_NO;
        memcpy(b + rq->len, upload_data, n);
        rq->body = b;
        rq->len += n;
        rq->body[rq->len] = '\0';
        return MHD_YES;
    }
    if (rq->resp)
        return flush(conn, rq);
    if (rq->too_big) {
        send_error(conn, rq, 413, "payload_too_large", "request bodies are limited to 16 KiB");
        return flush(conn, rq);
    }
    /* The notify listener serves only the notification routes. */
    if (ln->notify_only && strncmp(url, "/notify/", 8) != 0 &&
        strncmp(url, "/webhooks/", 10) != 0) {
        send_error(conn, rq, 404, "not_found",
                   "this listener serves only /notify/* and /webhooks/*");
        return flush(conn, rq);
    }
    return dispatch(ln, conn, rq, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    struct listener *ln = cls;
    struct pt_api *api = ln->api;
    struct request *rq = *con_cls;
    /* A kept-alive connection must start its next request in time. */
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (ci && ci->socket_context)
        conn_deadline(api, ci->socket_context, HEAD_TIMEOUT_S);
    if (!rq)
        return;
    if (rq->resp)
        MHD_destroy_response(rq->resp);
    free(rq->url);
    free(rq->method);
    free(rq->body);
    free(rq);
    *con_cls = NULL;
    pthread_mutex_lock(&api->mu);
    if (--api->in_flight == 0)
        pthread_cond_broadcast(&api->idle_cv);
    pthread_mutex_unlock(&api->mu);
}

/* ---- connections -------------------------------------------------------------------------- */

/* Before a connection costs anything: refuses an address at its cap. */
static MHD_RESULT on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    (void)addrlen;
    struct listener *ln = cls;
    return pt_connlimit_would_admit(ln->api->limit, addr) ? MHD_YES : MHD_NO;
}

static void conn_started(struct pt_api *api, struct MHD_Connection *conn, void **socket_context)
{
    const union MHD_ConnectionInfo *fd =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *sa =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    struct conn *cs = fd ? calloc(1, sizeof *cs) : NULL;
    *socket_context = cs;
    if (!cs) {
        if (fd)
            shutdown(fd->connect_fd, SHUT_RDWR); /* out of memory: close it */
        return;
    }
    cs->fd = fd->connect_fd;
    if (sa && sa->client_addr) {
        size_t len = sa->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                            : sizeof(struct sockaddr_in);
        memcpy(&cs->addr, sa->client_addr, len);
    }
    /* The accept policy only looked: two listeners may have let the same
     * address in at once.  This is the count that holds. */
    cs->admitted = pt_connlimit_acquire(api->limit, (struct sockaddr *)&cs->addr);
    pthread_mutex_lock(&api->mu);
    cs->next = api->conns;
    if (api->conns)
        api->conns->prev = cs;
    api->conns = cs;
    if (cs->admitted) {
        cs->deadline_ms = pt_host_mono_ms() + HEAD_TIMEOUT_S * 1000;
        timer_kick(api, cs->deadline_ms);
    }
    pthread_mutex_unlock(&api->mu);
    if (!cs->admitted)
        shutdown(cs->fd, SHUT_RDWR);
}

static void conn_closed(struct pt_api *api, void **socket_context)
{
    struct conn *cs = *socket_context;
    if (!cs)
        return;
    /* Under mu, so the timer never shuts down a descriptor that
     * libmicrohttpd closes (and the kernel reuses) right after this. */
    pthread_mutex_lock(&api->mu);
    if (cs->prev)
        cs->prev->next = cs->next;
    else
        api->conns = cs->next;
    if (cs->next)
        cs->next->prev = cs->prev;
    pthread_mutex_unlock(&api->mu);
    if (cs->admitted)
        pt_connlimit_release(api->limit, (struct sockaddr *)&cs->addr);
    free(cs);
    *socket_context = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct listener *ln = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        conn_started(ln->api, conn, socket_context);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        conn_closed(ln->api, socket_context);
}

/* Closes the connections that are late with their request and answers the
 * long-polls whose wait is over.  Under mu; returns the long-polls to
 * repost and sets *next to the earliest deadline left. */
static struct request *timer_scan(struct pt_api *api, int64_t now, int64_t *next)
{
    int cut = 0;
    *next = INT64_MAX;
    for (struct conn *cs = api->conns; cs; cs = cs->next) {
        if (!cs->deadline_ms || cs->cut)
            continue;
        if (now >= cs->deadline_ms) {
            /* libmicrohttpd sees the end of the stream and closes it. */
            shutdown(cs->fd, SHUT_RDWR);
            cs->cut = 1;
            cut++;
        } else if (cs->deadline_ms < *next) {
            *next = cs->deadline_ms;
        }
    }
    if (cut)
        pt_log_debug("http: closed %d connection(s) whose request did not arrive in time", cut);
    struct request *due = NULL, **pp = &api->waiters;
    while (*pp) {
        struct request *rq = *pp;
        if (now >= rq->poll_deadline_ms) {
            *pp = rq->wnext;
            rq->wnext = due;
            due = rq;
        } else {
            if (rq->poll_deadline_ms < *next)
                *next = rq->poll_deadline_ms;
            pp = &rq->wnext;
        }
    }
    return due;
}

/* The deadline timer: sleeps until the earliest deadline, or until kicked
 * when there is none (an idle daemon has no wake-ups here). */
static void *timer_main(void *p)
{
    struct pt_api *api = p;
    pthread_mutex_lock(&api->mu);
    while (!api->timer_quit) {
        int64_t next;
        struct request *due = timer_scan(api, pt_host_mono_ms(), &next);
        api->timer_next_ms = next;
        if (due) {
            pthread_mutex_unlock(&api->mu);
            repost(due);
            pthread_mutex_lock(&api->mu);
            continue;
        }
        if (next == INT64_MAX) {
            pthread_cond_wait(&api->timer_cv, &api->mu);
            continue;
        }
        struct timespec ts = {.tv_sec = next / 1000, .tv_nsec = (next % 1000) * 1000000};
        pthread_cond_timedwait(&api->timer_cv, &api->mu, &ts);
    }
    pthread_mutex_unlock(&api->mu);
    return NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    pt_log_warn("http: %s", line);
}

/* ---- listeners ----------------------------------------------------------------------------- */

/*
 * How many connections each listener may take: CONN_MAX, when the open
 * files limit allows it (its soft value is raised as far as needed and the
 * hard one allows), else what fits, with a warning.
 */
static unsigned conn_limit(int listeners)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)CONN_MAX * (rlim_t)listeners + FD_RESERVE;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return CONN_MAX;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
        struct rlimit up = rl;
        up.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &up) == 0)
            rl = up;
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want)
        return CONN_MAX;
    unsigned n = rl.rlim_cur > FD_RESERVE + 2 * 16
                     ? (unsigned)((rl.rlim_cur - FD_RESERVE) / (rlim_t)listeners)
                     : 16;
    pt_log_warn("http: the open files limit (%llu) allows %u connections per listener, not %d: "
                "raise it (ulimit -n, LimitNOFILE=)",
                (unsigned long long)rl.rlim_cur, n, CONN_MAX);
    return n;
}

static void loop_wake(struct listener *ln)
{
    uint64_t one = 1;
    if (write(ln->wake_fd, &one, sizeof one) < 0) {
        /* EAGAIN: the counter is full, so the loop is awake anyway. */
    }
}

/*
 * A listener's thread: libmicrohttpd in external-polling mode over its
 * epoll set, and between two of its rounds the commit of what the quick
 * requests of that round left in the writer's batch (settle_batch).  The
 * stop's requests (quiesce, quit) come through wake_fd, so that only this
 * thread ever calls into its daemon.  A connection resumed from a worker
 * did not wake this loop through libmicrohttpd 0.9.75's own channel (the
 * request hung until the next event), so the worker writes wake_fd too.
 */
static void *loop_main(void *p)
{
    struct listener *ln = p;
    struct pt_api *api = ln->api;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(ln->d, MHD_DAEMON_INFO_EPOLL_FD);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 0};
    if (ep < 0 || !di || epoll_ctl(ep, EPOLL_CTL_ADD, di->epoll_fd, &ev) != 0 ||
        (ev.data.u32 = 1, epoll_ctl(ep, EPOLL_CTL_ADD, ln->wake_fd, &ev)) != 0) {
        /* Nothing can be served: say so where it shows, and stop serving. */
        pt_log_error("http: cannot wait for the listener's events: %s", strerror(errno));
        abort();
    }
    int again = 0; /* answers were just resumed: the next round sends them */
    for (;;) {
        MHD_UNSIGNED_LONG_LONG to = 0;
        int timeout = -1; /* nothing timed: sleep until something happens */
        if (again)
            timeout = 0;
        else if (MHD_get_timeout(ln->d, &to) == MHD_YES)
            timeout = to > INT_MAX ? INT_MAX : (int)to;
        struct epoll_event got[2];
        int n = epoll_wait(ep, got, 2, timeout);
        for (int i = 0; i < n; i++) {
            uint64_t v;
            if (got[i].data.u32 == 1 && read(ln->wake_fd, &v, sizeof v) < 0) {
                /* EAGAIN: read already */
            }
        }
        pthread_mutex_lock(&api->mu);
        int quiesce = ln->quiesce_asked && !ln->quiesced, quit = ln->quit;
        pthread_mutex_unlock(&api->mu);
        if (quit)
            break;
        if (quiesce) {
            ln->lfd = MHD_quiesce_daemon(ln->d);
            if (ln->lfd != MHD_INVALID_SOCKET)
                shutdown(ln->lfd, SHUT_RDWR);
            pthread_mutex_lock(&api->mu);
            ln->quiesced = 1;
            pthread_cond_broadcast(&api->idle_cv);
            pthread_mutex_unlock(&api->mu);
        }
        /* One round is one unit of work for a configuration reload. */
        pt_gate_enter(api->opt.gate);
        MHD_run(ln->d);
        /* Connections resumed here are sent their answers by the next round
         * (which may read new requests for the next batch); it runs at once,
         * after a look at the stop's requests. */
        again = settle_batch(ln);
        pt_gate_leave(api->opt.gate);
    }
    close(ep);
    return NULL;
}

/*
 * Starts one listener on *fd, the socket pt_listen_bind() bound to addr
 * (the value of the configuration key `key`).  The socket is
 * libmicrohttpd's from MHD_start_daemon() on (*fd becomes -1), also when
 * that fails: it closes the socket on most of its failure paths, and a
 * second close could hit a descriptor another thread has just opened.
 */
static int listen_on(struct listener *ln, const char *key, const char *addr, int *fd,
                     unsigned max_conns, int workers, char *err, size_t errlen)
{
    int rc = pt_listen_start(key, addr, *fd, err, errlen);
    if (rc != PT_OK)
        return rc;
    if (pt_workers_start(workers, worker_stack(ln->api), &ln->workers) != PT_OK) {
        snprintf(err, errlen, "cannot start the HTTP worker threads for %s", addr);
        return PT_ENOMEM;
    }
    /* One polling thread of ours (loop_main) over libmicrohttpd's epoll;
     * suspending and resuming needs its inter-thread channel. */
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | MHD_USE_TURBO;
    ln->d = MHD_start_daemon(flags, 0, on_accept, ln, on_request, ln, MHD_OPTION_EXTERNAL_LOGGER,
                             mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)*fd,
                             MHD_OPTION_CONNECTION_LIMIT, max_conns, MHD_OPTION_CONNECTION_TIMEOUT,
                             (unsigned)IDLE_TIMEOUT_S, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
                             ln, MHD_OPTION_NOTIFY_COMPLETED, on_completed, ln,
                             MHD_OPTION_URI_LOG_CALLBACK, on_uri, ln, MHD_OPTION_END);
    *fd = -1;
    if (!ln->d) {
        snprintf(err, errlen, "%s %s: the HTTP server cannot start on it (see the line before)",
                 key, addr);
        return PT_EIO;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, small_stack(ln->api));
    ln->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    ln->loop_started = ln->wake_fd >= 0 && pthread_create(&ln->loop, &attr, loop_main, ln) == 0;
    pthread_attr_destroy(&attr);
    if (!ln->loop_started) {
        snprintf(err, errlen, "cannot start the HTTP thread for %s", addr);
        return PT_ENOMEM;
    }
    return PT_OK;
}

int pt_api_start(const struct pt_api_options *opt, struct pt_api **out, char *err, size_t errlen)
{
    /* The sockets are ours now, whatever happens (api.h). */
    int listen_fd = opt->listen_fd, notify_fd = opt->notify_fd;
    answer_log_init();
    struct pt_api *api = calloc(1, sizeof *api);
    if (!api) {
        snprintf(err, errlen, "out of memory");
        if (listen_fd >= 0)
            close(listen_fd);
        if (notify_fd >= 0)
            close(notify_fd);
        return PT_ENOMEM;
    }
    api->opt = *opt;
    api->opt.intake.cfg = opt->cfg;
    api->main = (struct listener){.api = api, .lfd = MHD_INVALID_SOCKET, .wake_fd = -1};
    api->notify =
        (struct listener){.api = api, .notify_only = 1, .lfd = MHD_INVALID_SOCKET, .wake_fd = -1};
    api->main.settling_tail = &api->main.settling;
    api->notify.settling_tail = &api->notify.settling;
    api->timer_next_ms = INT64_MAX;
    pthread_mutex_init(&api->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the platform's mono_ms() */
    pthread_cond_init(&api->idle_cv, &ca);
    pthread_cond_init(&api->timer_cv, &ca);
    pthread_condattr_destroy(&ca);
    int listeners = opt->cfg->notify_listen[0] ? 2 : 1;
    unsigned max_conns = conn_limit(listeners);
    /* With a local queue, a connection opens while the server is gone and
     * fails at once (store_pg.c's backoff): the request falls back.  The
     * daemon created the database: a connection opened later that finds
     * it gone fails, it never starts an empty one (SPEC 18). */
    struct pt_store_options so;
    pt_config_lane_store_options(opt->cfg, opt->db_path, PT_LANE_OPEN_LATER, &so);
    int rc =
        pt_pool_new(opt->db_path, &so, POOL_SIZE, pt_api_feed_wake, api, opt->writer, &api->pool);
    if (rc)
        goto fail;
    rc = PT_ENOMEM;
    if (!(api->limit = pt_connlimit_new(PER_ADDR_MAX, (int)max_conns * listeners)))
        goto fail;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, small_stack(api));
    api->timer_started = pthread_create(&api->timer, &attr, timer_main, api) == 0;
    pthread_attr_destroy(&attr);
    if (!api->timer_started)
        goto fail;
    rc = listen_on(&api->main, "listen", opt->cfg->listen, &listen_fd, max_conns, MAIN_WORKERS, err,
                   errlen);
    if (rc == PT_OK && listeners == 2)
        rc = listen_on(&api->notify, "notify_listen", opt->cfg->notify_listen, &notify_fd,
                       max_conns, NOTIFY_WORKERS, err, errlen);
    if (rc)
        goto fail;
    *out = api;
    return PT_OK;
fail:
    if (listen_fd >= 0)
        close(listen_fd);
    if (notify_fd >= 0)
        close(notify_fd);
    pt_api_stop(api);
    return rc;
}

/* Stops accepting: new connections are refused at once (the listening
 * socket is shut down) while the connections already open go on. */
static void quiesce(struct listener *ln)
{
    if (!ln->loop_started)
        return;
    struct pt_api *api = ln->api;
    pthread_mutex_lock(&api->mu);
    ln->quiesce_asked = 1;
    pthread_mutex_unlock(&api->mu);
    loop_wake(ln);
    pthread_mutex_lock(&api->mu);
    while (!ln->quiesced)
        pthread_cond_wait(&api->idle_cv, &api->mu);
    pthread_mutex_unlock(&api->mu);
}

/* Waits until no request is between its headers and its response's end
 * (DRAIN_MAX_S at most), then until no connection is suspended: after that
 * nothing gets suspended any more, and the listeners may stop.  A worker's
 * request ends by itself (its timeouts bound it), so that wait has none. */
static void drain(struct pt_api *api)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += DRAIN_MAX_S;
    pthread_mutex_lock(&api->mu);
    while (api->in_flight > 0 && pthread_cond_timedwait(&api->idle_cv, &api->mu, &ts) == 0)
        ;
    if (api->in_flight > 0)
        pt_log_warn("stopping with %d requests still in flight after %d s", api->in_flight,
                    DRAIN_MAX_S);
    api->closing = 1;
    while (api->suspended > 0)
        pthread_cond_wait(&api->idle_cv, &api->mu);
    pthread_mutex_unlock(&api->mu);
}

static void listener_stop(struct listener *ln)
{
    if (ln->loop_started) {
        pthread_mutex_lock(&ln->api->mu);
        ln->quit = 1;
        pthread_mutex_unlock(&ln->api->mu);
        loop_wake(ln);
        pthread_join(ln->loop, NULL);
    }
    if (ln->wake_fd >= 0)
        close(ln->wake_fd);
    if (ln->d)
        MHD_stop_daemon(ln->d);
    if (ln->lfd != MHD_INVALID_SOCKET)
        close(ln->lfd);
    pt_workers_stop(ln->workers);
}

void pt_api_stop(struct pt_api *api)
{
    if (!api)
        return;
    /* Long-polls answer now rather than at the end of their wait. */
    pthread_mutex_lock(&api->mu);
    api->stopping = 1;
    struct request *list = api->waiters;
    api->waiters = NULL;
    pthread_mutex_unlock(&api->mu);
    repost(list);
    /* MHD_stop_daemon shuts down every open connection, responses being
     * written included: first stop accepting and let the requests in
     * flight finish, commit and be answered. */
    quiesce(&api->notify);
    quiesce(&api->main);
    drain(api);
    listener_stop(&api->notify);
    listener_stop(&api->main);
    if (api->timer_started) {
        pthread_mutex_lock(&api->mu);
        api->timer_quit = 1;
        pthread_cond_signal(&api->timer_cv);
        pthread_mutex_unlock(&api->mu);
        pthread_join(api->timer, NULL);
    }
    pt_connlimit_destroy(api->limit);
    pt_pool_destroy(api->pool);
    pthread_cond_destroy(&api->timer_cv);
    pthread_cond_destroy(&api->idle_cv);
    pthread_mutex_destroy(&api->mu);
    free(api);
}

/* ---- the watchdog's probe ------------------------------------------------------------------- */

/* Waits for fd to be ready for events until deadline (monotonic ms). */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - pt_host_mono_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, (int)left);
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return 0;
    }
}

/* One listener: 1 when it answered the probe's request in time. */
static int probe_one(struct listener *ln, int timeout_ms)
{
    const union MHD_DaemonInfo *di =
        ln->d ? MHD_get_daemon_info(ln->d, MHD_DAEMON_INFO_LISTEN_FD) : NULL;
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    if (!di || getsockname(di->listen_fd, (struct sockaddr *)&sa, &sl) != 0)
        return 0;
    /* A wildcard address is asked on the loopback. */
    if (sa.ss_family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&sa;
        if (in->sin_addr.s_addr == htonl(INADDR_ANY))
            in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    } else if (sa.ss_family == AF_INET6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&sa;
        if (IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr))
            in6->sin6_addr = in6addr_loopback;
    }
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int64_t deadline = pt_host_mono_ms() + timeout_ms;
    static const char req[] =
        "GET " LIVE_PATH " HTTP/1.1\r\nHost: payterm\r\nConnection: close\r\n\r\n";
    /* Any status line: the notification listener answers 404 (it serves
     * only /notify and /webhooks), the main one 200, both from the thread
     * under test. */
    static const char want[] = "HTTP/1.1 ";
    char got[sizeof want - 1];
    size_t have = 0;
    if (connect(fd, (struct sockaddr *)&sa, sl) == 0 || errno == EINPROGRESS) {
        int err = 0;
        socklen_t el = sizeof err;
        if (wait_fd(fd, POLLOUT, deadline) &&
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0 &&
            send(fd, req, sizeof req - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof req - 1)) {
            while (have < sizeof got && wait_fd(fd, POLLIN, deadline)) {
                ssize_t n = recv(fd, got + have, sizeof got - have, 0);
                if (n <= 0)
                    break;
                have += (size_t)n;
            }
        }
    }
    close(fd);
    return have == sizeof got && memcmp(got, want, sizeof got) == 0;
}

int pt_api_probe(struct pt_api *api, int timeout_ms)
{
    if (!probe_one(&api->main, timeout_ms))
        return 1;
    if (api->notify.d && !probe_one(&api->notify, timeout_ms))
        return 2;
    return 0;
}
