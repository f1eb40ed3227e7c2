/*
 * api.c - the local HTTP API's server, on libmicrohttpd (see api.h).
 *
 * This file is the server: listeners, polling loops, workers, deadlines and
 * connection limits; it collects the request (bounded at 16 KiB) and hands
 * it to the route table (api_routes.c), whose handlers (api_read.c,
 * api_write.c, api_browser.c) answer through api_reply.c; what they share
 * is api_impl.h.  The guarded write operations live in core/intake.c, the
 * SQL in the store's backends (core/store_sqlite.c, core/store_pg.c).
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
#include "api_impl.h"
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

static void loop_wake(struct listener *ln);

int64_t pt__api_mono_us(void)
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
void pt__api_timer_kick(struct pt_api *api, int64_t deadline_ms)
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
        pt__api_timer_kick(api, cs->deadline_ms);
    pthread_mutex_unlock(&api->mu);
}

/* ---- serving a request ----------------------------------------------------------------- */

/* Queues the answer a handler left in rq (in the polling thread). */
MHD_RESULT pt__api_flush(struct MHD_Connection *conn, struct request *rq)
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
    pt_gate_enter(api->opt.gate);
    api_outcome out = pt__api_route(api, rq->conn, rq, rq->url, rq->method);
    pt_gate_leave(api->opt.gate);
    if (out == A_PARKED)
        return; /* a long-poll waits; rq is no longer ours to touch */
    assert(out == A_ANSWERED || out == A_CLOSE); /* a worker may wait: never handed on */
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
    const struct route *r = pt__api_route_of(method, url, arg);
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
    rq->dispatched = 1; /* after the resume: pt__api_flush() sends rq->resp */
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
        pt__api_send_reply(rq->conn, rq, &rq->reply);
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
        rq->on_loop = 1;
        api_outcome out = pt__api_route(api, conn, rq, url, method);
        rq->on_loop = 0;
        /* Nothing parks on the polling thread: the feed is a worker's. */
        assert(out != A_PARKED);
        if (out == A_SETTLING)
            return settle_later(ln, conn, rq);
        if (out != A_TO_WORKER)
            return rq->resp ? pt__api_flush(conn, rq) : out == A_ANSWERED ? MHD_YES : MHD_NO;
    }
    rq->url = strdup(url);
    rq->method = strdup(method);
    if (!rq->url || !rq->method)
        return pt__api_send_error(conn, rq, 500, "internal_error", "out of memory")
                   ? pt__api_flush(conn, rq)
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
        pt__api_send_error(conn, rq, 400, "invalid_request",
                           "the request target contains a NUL byte");
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
        pt__api_send_error(
            conn, rq, 400, "invalid_request",
            "a header line is continued on the next line (starts with a space or tab); "
            "send each header on one line");
        return 1;
    }
    if (h.nul_in) {
        snprintf(msg, sizeof msg, "header '%.64s' contains a NUL byte", h.nul_in);
        pt__api_send_error(conn, rq, 400, "invalid_request", msg);
        return 1;
    }
    if (h.idem_keys > 1) {
        snprintf(msg, sizeof msg,
                 "header Idempotency-Key was given %d times; send it once, with one key",
                 h.idem_keys);
        pt__api_send_error(conn, rq, 400, "idempotency_key_invalid", msg);
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
    rq->problem = pt__api_wants_problem(conn); /* for the answers given at the head too */
    pt__api_note_origin(api, conn, rq);
    conn_deadline(api, rq->cs, BODY_TIMEOUT_S);
    pthread_mutex_lock(&api->mu);
    int stopping = api->stopping;
    pthread_mutex_unlock(&api->mu);
    /* A body announced too big is not read at all (the connection closes). */
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    if (cl && strtoull(cl, NULL, 10) > BODY_MAX) {
        rq->too_big = 1;
        pt__api_send_error(conn, rq, 413, "payload_too_large",
                           "request bodies are limited to 16 KiB");
        return pt__api_flush(conn, rq);
    }
    /* These answers wait for the body (at most 16 KiB, read and dropped):
     * answering and closing while the client still sends would reset the
     * connection, and the client would see that instead of the answer. */
    if (stopping) {
        /* Requests in flight finish; a new one is told to come back. */
        pt__api_send_error(conn, rq, 503, "shutting_down",
                           "payterm is stopping; retry in a few seconds");
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
        rq->t0_us = pt__api_mono_us();
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
        return pt__api_flush(conn, rq);
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
        return pt__api_flush(conn, rq);
    if (rq->too_big) {
        pt__api_send_error(conn, rq, 413, "payload_too_large",
                           "request bodies are limited to 16 KiB");
        return pt__api_flush(conn, rq);
    }
    /* The notify listener serves only the notification routes. */
    if (ln->notify_only && strncmp(url, "/notify/", 8) != 0 &&
        strncmp(url, "/webhooks/", 10) != 0) {
        pt__api_send_error(conn, rq, 404, "not_found",
                           "this listener serves only /notify/* and /webhooks/*");
        return pt__api_flush(conn, rq);
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
        pt__api_timer_kick(api, cs->deadline_ms);
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
    pt__api_answer_log_init();
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
