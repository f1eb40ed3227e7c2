/*
 * api_impl.h - what the files of the local HTTP API share (api.h is what
 * the daemon sees).  The server - listeners, polling loops, deadlines,
 * connection limits, workers - is api.c; the application is the route table
 * (api_routes.c), the handlers (api_read.c, api_write.c), the browser rules
 * (api_browser.c) and the answers (api_reply.c).  Internal names crossing
 * these files are pt__api_* (STYLE.md).
 */
#ifndef PT_API_IMPL_H
#define PT_API_IMPL_H

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

#define LIVE_PATH "/healthz/live"
#define OPENAPI_PATH "/v1/openapi.json"

/* An Allow header's room ("GET, POST"): pt__api_path_methods(). */
#define ALLOW_MAX 32

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
    /* Being run on the polling thread (a quick route, quick_route() in
     * api.c): a handler that finds it must wait answers A_TO_WORKER, and a
     * write's commit may join the writer's batch (A_SETTLING). */
    int on_loop;
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

/*
 * What a handler did with its request: the server (api.c) acts on it.  The
 * answer functions (pt__api_send_*) give A_ANSWERED, or A_CLOSE when no
 * answer could be built.  A_PARKED is a return value and never a flag in
 * rq: once parked, rq belongs to whichever thread reposts it.
 */
typedef enum {
    A_CLOSE,     /* no answer could be built: the connection is closed */
    A_ANSWERED,  /* the answer is in rq->resp */
    A_PARKED,    /* a long-poll waits in api->waiters (pt__api_park) */
    A_TO_WORKER, /* asked on the polling thread, it must wait: a worker runs it */
    A_SETTLING,  /* the answer (rq->reply) waits for its batch's commit */
} api_outcome;

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
typedef api_outcome (*route_fn)(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                                const char *arg);

struct route {
    const char *method, *path;
    route_fn fn;
    unsigned flags;
};

/* The path's parameter of one route, NUL-terminated (the longest: an id). */
#define ROUTE_ARG_MAX 80

/* api.c (the server): the time of a request; the timer's next wake-up, under
 * api->mu; a response sent on the polling thread or by a worker. */
int64_t pt__api_mono_us(void);
void pt__api_timer_kick(struct pt_api *api, int64_t deadline_ms);
MHD_RESULT pt__api_flush(struct MHD_Connection *conn, struct request *rq);

/* api_reply.c: every answer goes through these (status, headers, the debug
 * request log); storage_error maps a store error to 503/500; query_int
 * reads one bounded integer parameter (400 naming it). */
void pt__api_answer_log_init(void);
void pt__api_note_answer(const struct request *rq, int status, const char *type, const char *body,
                         size_t len);
api_outcome pt__api_set_response(struct request *rq, int status, struct MHD_Response *r);
api_outcome pt__api_send_text(struct MHD_Connection *conn, struct request *rq, int status,
                              const char *type, char *body, size_t len, int replayed,
                              int retry_after);
api_outcome pt__api_send_reply(struct MHD_Connection *conn, struct request *rq,
                               struct pt_reply *rep);
api_outcome pt__api_send_error(struct MHD_Connection *conn, struct request *rq, int status,
                               const char *code, const char *message);
api_outcome pt__api_send_json_text(struct MHD_Connection *conn, struct request *rq, int status,
                                   char *text);
api_outcome pt__api_send_json(struct MHD_Connection *conn, struct request *rq, int status,
                              cJSON *o);
api_outcome pt__api_storage_error(struct MHD_Connection *conn, struct request *rq, int rc);
int pt__api_query_int(struct MHD_Connection *conn, const char *name, int64_t def, int64_t min,
                      int64_t max, int64_t *out, char *msg, size_t cap);

/* api_read.c: the read-only handlers; park() hands a long-poll to
 * api->waiters (the handler then answers A_PARKED). */
api_outcome pt__api_get_charge(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                               const char *order_id);
api_outcome pt__api_list_charges(struct pt_api *api, struct MHD_Connection *conn,
                                 struct request *rq);
api_outcome pt__api_get_refund(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                               const char *refund_id);
api_outcome pt__api_list_refunds(struct pt_api *api, struct MHD_Connection *conn,
                                 struct request *rq, const char *order_id);
api_outcome pt__api_charge_audit(struct pt_api *api, struct MHD_Connection *conn,
                                 struct request *rq, const char *order_id);
int pt__api_park(struct pt_api *api, struct request *rq, uint64_t seen);
api_outcome pt__api_events_feed(struct pt_api *api, struct MHD_Connection *conn,
                                struct request *rq);
api_outcome pt__api_status(struct pt_api *api, struct MHD_Connection *conn, struct request *rq);
api_outcome pt__api_live(struct MHD_Connection *conn, struct request *rq);
api_outcome pt__api_healthz(struct pt_api *api, struct MHD_Connection *conn, struct request *rq);
api_outcome pt__api_metrics(struct pt_api *api, struct MHD_Connection *conn, struct request *rq);

/* api_write.c: a guarded operation of core/intake.c, as the handlers call it. */
typedef int (*order_op)(const struct pt_intake *, struct pt_store *, const char *, const char *,
                        const char *, size_t, int64_t, struct pt_reply *);

api_outcome pt__api_report_x(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                             const char *arg);
api_outcome pt__api_report_z(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                             const char *number);
api_outcome pt__api_close_day(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                              const char *arg);
api_outcome pt__api_reconcile(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                              const char *arg);
api_outcome pt__api_reconciliation(struct pt_api *api, struct MHD_Connection *conn,
                                   struct request *rq, const char *gateway_date);
api_outcome pt__api_guarded(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                            const char *order_id, order_op op);
api_outcome pt__api_payment_link(struct pt_api *api, struct MHD_Connection *conn,
                                 struct request *rq, const char *order_id);
api_outcome pt__api_sync_now(struct pt_api *api, struct MHD_Connection *conn, struct request *rq);
api_outcome pt__api_notify(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                           const char *gateway);

/* api_browser.c: the operator page; the request's Origin (note_origin);
 * cross_origin answers a preflight or refuses a cross-site write (1: *ret
 * is the answer); wants_problem: Accept asks for problem+json. */
api_outcome pt__api_operator_page(struct MHD_Connection *conn, struct request *rq);
void pt__api_note_origin(struct pt_api *api, struct MHD_Connection *conn, struct request *rq);
int pt__api_cross_origin(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                         const char *url, const char *method, api_outcome *ret);
int pt__api_wants_problem(struct MHD_Connection *conn);

/* api_routes.c: the methods url answers (0: no route has that path); the
 * row for method and url (its parameter in arg), NULL if none; route()
 * runs the request's handler, or answers 401/404/405. */
int pt__api_path_methods(const char *url, char allow[ALLOW_MAX]);
const struct route *pt__api_route_of(const char *method, const char *url, char arg[ROUTE_ARG_MAX]);
api_outcome pt__api_route(struct pt_api *api, struct MHD_Connection *conn, struct request *rq,
                          const char *url, const char *method);

#endif
