/*
 * platform.h - what core/ needs from the outside world, as small tables of
 * function pointers.
 *
 * core/ never opens a socket or calls libcurl by itself, and every time it
 * records or compares with a stored one comes from here: it asks through
 * these interfaces.  (A thread's timed wait - a pthread_cond_timedwait or
 * pthread_mutex_timedlock deadline in sync.c and store_pg.c, and
 * store_pg.c's reconnect backoff - reads the kernel's clock itself.)
 * platform/linux fills them in for a real board or desktop (clock_gettime,
 * getrandom, libcurl, syslog/stderr), tests fill them in with controllable
 * fakes (a clock that jumps, a network that vanishes).  This is the same
 * shape as SQLite's sqlite3_vfs: the core states the contract, each
 * platform provides one table.
 */
#ifndef PT_PLATFORM_H
#define PT_PLATFORM_H

#include <stddef.h>
#include <stdint.h>

/* ---- HTTP messages ---------------------------------------------------- */

#define PT_HTTP_MAX_HEADERS 24
/* Largest response body a transport accepts; gateways answer in a few KiB. */
#define PT_HTTP_MAX_BODY (256 * 1024)

/*
 * An outgoing request, built by a gateway adapter.  Every pointer is owned by
 * the struct and released by pt_http_request_free().  Headers are stored as
 * complete "Name: value" lines.
 */
struct pt_http_request {
    char method[8];                     /* "GET", "POST" */
    char *url;                          /* absolute URL */
    char *headers[PT_HTTP_MAX_HEADERS]; /* "Name: value" */
    int nheaders;
    char *body; /* may be NULL for GET */
    size_t body_len;
    /*
     * Client certificate for mutual TLS (PEM file paths), or NULL for none.
     * Borrowed, not owned: they point into the gateway configuration and
     * are not freed by pt_http_request_free().  The transport keys its
     * keep-alive connection by (channel, client_cert_file).
     */
    const char *client_cert_file;
    const char *client_key_file;
    /* Largest answer body taken (bytes); 0 = PT_HTTP_MAX_BODY.  Only a
     * file a gateway serves (a day's bill) asks for more. */
    size_t max_body;
};

/* A received response (or, for notifications, a received request). */
struct pt_http_response {
    int status;
    char *headers[PT_HTTP_MAX_HEADERS]; /* "Name: value" */
    int nheaders;
    char *body; /* NUL-terminated for convenience; body_len excludes the NUL */
    size_t body_len;
};

/* Frees the members of r (not r itself); accepts NULL and zeroed structs. */
void pt_http_request_free(struct pt_http_request *r);
void pt_http_response_free(struct pt_http_response *r);

/* Adds a "name: value" header line (copied).  PT_ETOOBIG when full. */
int pt_http_request_add_header(struct pt_http_request *r, const char *name, const char *value);
int pt_http_response_add_header(struct pt_http_response *r, const char *name, const char *value);

/*
 * Returns the value of the first header called name (case-insensitive,
 * leading blanks skipped) or NULL.  The pointer points into the header line
 * and lives as long as the message.
 */
const char *pt_http_request_header(const struct pt_http_request *r, const char *name);
const char *pt_http_response_header(const struct pt_http_response *r, const char *name);

/* ---- transport -------------------------------------------------------- */

/*
 * Sends one request and waits for the answer.  `channel` names the
 * connection to reuse (one keep-alive connection per gateway).
 *
 * The return value says *how far the request got*, because that decides
 * between a safe resend and an UNKNOWN charge:
 *   PT_OK        an HTTP answer arrived (any status); *resp is filled in
 *   PT_ENOTSENT  provably never delivered: DNS failure, connection refused,
 *                TLS handshake failure, before any request byte was written
 *   PT_ENOANSWER sent (or possibly sent), no complete answer: timeout after
 *                sending, connection reset, truncated response
 * On failure *resp is left empty.  The caller frees resp with
 * pt_http_response_free().
 */
struct pt_transport {
    int (*send)(void *ctx, const char *channel, const struct pt_http_request *req, int timeout_ms,
                struct pt_http_response *resp);
    void *ctx;
};

/* ---- clock, randomness, connectivity, logging ------------------------- */

enum pt_log_level { PT_LOG_ERROR = 0, PT_LOG_WARN = 1, PT_LOG_INFO = 2, PT_LOG_DEBUG = 3 };

struct pt_platform {
    /* Milliseconds since the Unix epoch: what payterm records and measures
     * ages and deadlines with.  A raw platform gives the wall clock; the
     * platform of core/clock.c gives elapsed time on the same scale (SPEC
     * 17), and the wall clock through wall_ms. */
    int64_t (*now_ms)(void *ctx);
    /* Monotonic clock, milliseconds from an arbitrary origin. */
    int64_t (*mono_ms)(void *ctx);
    /* Fills buf with len bytes of cryptographic randomness; PT_OK or PT_ESYS. */
    int (*random)(void *ctx, void *buf, size_t len);
    /* Writes one complete log line (no trailing newline).  Never gets secrets. */
    void (*log)(void *ctx, enum pt_log_level level, const char *line);
    void *ctx;
    /* HTTP transport to the gateways; may be NULL where no network is used. */
    const struct pt_transport *transport;

    /*
     * Time as SPEC 17 sees it (core/clock.h).  The raw clocks are the
     * platform's; a NULL member is stood in for as each says.
     */
    /* Boot-time clock (Linux CLOCK_BOOTTIME): milliseconds since boot,
     * counting suspend, never stepped.  NULL: mono_ms stands in. */
    int64_t (*boot_ms)(void *ctx);
    /* This boot's identity (Linux /proc/sys/kernel/random/boot_id) into out
     * (NUL-terminated, at most cap bytes); PT_OK or an error when there is
     * none.  NULL: none (every start counts as a new boot). */
    int (*boot_id)(void *ctx, char *out, size_t cap);
    /* 1 when the kernel says the wall clock is synchronised (adjtimex:
     * STA_UNSYNC clear), else 0.  NULL: 0. */
    int (*wall_synced)(void *ctx);
    /* Filled in by core/clock.c's platform only, whose now_ms is elapsed
     * time: the wall clock, for what a gateway reads (a signed timestamp,
     * a notification's age).  PT_OK when the wall clock is trusted,
     * PT_ECLOCK when not (*ms filled either way).  NULL: now_ms is the wall
     * clock and is trusted (tests, the CLI's signing tools). */
    int (*wall_ms)(void *ctx, int64_t *ms);
};

/* The wall clock through p: its wall_ms, or its now_ms (trusted). */
int pt_platform_wall(const struct pt_platform *p, int64_t *ms);

#endif
