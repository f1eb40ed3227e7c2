/*
 * api.h - the local HTTP API (SPEC section 5) on libmicrohttpd.
 *
 * One listener for the kiosk application (default 127.0.0.1:8080) and an
 * optional second one (notify_listen) that serves only the gateway
 * notification routes, the part a gateway may reach.  No connection owns a
 * thread: one polling thread per listener serves them all, handlers run on a
 * few worker threads, a long-poll waits on none, and late, slow or too many
 * connections are closed (how and why: the top of api.c).  Database
 * connections come from a pool.
 */
#ifndef PT_API_H
#define PT_API_H

#include <stddef.h>

#include "config.h"
#include "clock.h"
#include "intake.h"
#include "platform.h"

struct pt_store;

/* What the API asks of the rest of the daemon (all optional). */
struct pt_api_hooks {
    /* POST /v1/sync: start a sync pass now. */
    void (*sync_now)(void *ctx);
    /* true when the gateways were reachable at last contact */
    int (*online)(void *ctx);
    /*
     * A gateway notification (POST /notify/<gw>, /webhooks/stripe): verify,
     * apply and fill *out with the gateway's expected reply (status, body)
     * and *content_type.  msg holds the request headers and body.
     */
    int (*notify)(void *ctx, struct pt_store *st, const char *gateway,
                  const struct pt_http_response *msg, struct pt_reply *out,
                  const char **content_type);
    /* Lane time gateway's reachability was last found out (SPEC 18), 0
     * never; NULL: none. */
    int64_t (*last_probe)(void *ctx, const char *gateway);
    /* The clock's state (SPEC 17) for /v1/status and /metrics; NULL: none. */
    void (*clock)(void *ctx, struct pt_clock_info *out);
    void *ctx;
};

struct pt_gate;

struct pt_api_options {
    const struct pt_config *cfg;
    const char *db_path;
    struct pt_store_writer *writer; /* every write of the API goes through it */
    struct pt_intake intake;
    struct pt_api_hooks hooks;
    const char *token;   /* bearer token, NULL = none */
    size_t thread_stack; /* bytes for each HTTP thread; 0 = the libc default */
    /* Each listener round and each worker's request is a unit of work of
     * this gate: the configuration changes only between them.  NULL: none. */
    struct pt_gate *gate;
    /* The sockets of listen and notify_listen (-1: none), bound by
     * pt_listen_bind before the database was opened.  pt_api_start owns
     * them from the call on, also when it fails. */
    int listen_fd, notify_fd;
};

struct pt_api;

/* Starts listening on the bound sockets and serving.  On failure writes
 * which address could not be used and why. */
int pt_api_start(const struct pt_api_options *opt, struct pt_api **out, char *err, size_t errlen);

/* Stops accepting, lets in-flight requests finish, wakes long-polls, closes
 * the database connections.  Accepts NULL. */
void pt_api_stop(struct pt_api *api);

/* The watchdog's question (SPEC 11): does each listener answer
 * GET /healthz/live (no database involved) within timeout_ms?
 * 0 both do; 1 the main listener does not; 2 the notification listener
 * does not.  Blocks the caller. */
int pt_api_probe(struct pt_api *api, int timeout_ms);

/* The route table (one row per method and path; a "{name}" segment is the
 * path's parameter), for the test that holds openapi.json to it. */
int pt_api_route_count(void);
void pt_api_route_at(int i, const char **method, const char **path);

/* Wakes long-polling readers of /v1/events (an event was committed). */
void pt_api_feed_wake(void *api);

#endif
