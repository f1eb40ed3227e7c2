/*
 * transport_curl.c - core's HTTP transport (platform.h) on libcurl.
 *
 * The one thing this file must get exactly right is the failure report,
 * because it decides between "safe to resend" and "UNKNOWN, go and query":
 *
 *  - PT_ENOTSENT only when provably no request byte was written.  We do not
 *    infer that from curl's error code (CURLE_COULDNT_CONNECT can follow a
 *    request that already went out, see "silent resend" below); we count the
 *    request bytes curl hands to the connection, through the debug callback
 *    (CURLINFO_HEADER_OUT / CURLINFO_DATA_OUT are reported after the bytes
 *    were written).  Zero bytes out + any failure = not sent.
 *  - PT_ENOANSWER whenever one byte went out and no complete answer came.
 *
 * Silent resend.  libcurl (lib/transfer.c, Curl_retry_request) resends a
 * request by itself, on a fresh connection and up to 5 times, when it was
 * sent on a *reused* connection and not one response byte came back ("Connection
 * died, retrying a fresh connect").  It does this for POST too (it rewinds
 * CURLOPT_POSTFIELDS), and there is no option to turn it off in any released
 * libcurl (curl PR #18417 proposes CURLOPT_FORBID_RETRY_ON_REUSE).  That is
 * right for a stale idle connection the server closed before our request
 * arrived, and wrong for a payment: the server may have read the request,
 * moved the money and died before answering (SPEC section 1, case 3).  A
 * hidden second send would hide that from the sync engine's audit trail and
 * attempt count, and if the resend then failed to connect curl would report
 * CURLE_COULDNT_CONNECT, which by error code alone looks "not sent".  So:
 *
 *   1. Before reusing a kept-alive connection we poll its socket.  An idle
 *      HTTP/1.1 connection has nothing to read unless the server is closing
 *      it (FIN, TLS close_notify, a 408); then we ask curl for a fresh
 *      connection instead (CURLOPT_FRESH_CONNECT), so the common race never
 *      starts.  curl's own liveness check misses a pending close_notify: it
 *      peeks one byte and takes "readable" for "alive".
 *   2. If curl still decides to resend after request bytes went out, the
 *      open-socket callback refuses to open the new connection.  curl then
 *      fails (CURLE_COULDNT_CONNECT) and, since bytes went out, we report
 *      PT_ENOANSWER: the truth is "possibly delivered".
 *
 * Connections: one curl easy handle per channel (gateway) holds one
 * keep-alive connection (CURLOPT_MAXCONNECTS 1), reused across requests;
 * curl_easy_reset() between requests clears options but keeps the connection
 * and the TLS session.
 *
 * Client certificates (mutual TLS, WeChat Pay's /secapi/ calls): a TLS
 * connection is authenticated once, in its handshake, so a connection that
 * presented the merchant's API certificate must never carry a request that
 * was meant to go without it (or with another one), nor the other way round.
 * We do not rely on curl's connection-matching rules for that: the
 * connection cache is keyed by (channel, client certificate, client key), so
 * each such triple gets its own easy handle, connection and mutex, and
 * easy handles never share connections (there is no share handle).  A
 * channel's certificate-less and certificate-bearing connections are
 * therefore two independent entries that happen to have the same name.  HTTP/1.1 only (one request
 * at a time per connection is all a drain needs, and the failure semantics are simplest to state).
 * Proxies are disabled, environment variables included: a proxy in between
 * would make "request bytes written" mean "written to the proxy".
 */
#include "transport_curl.h"
#include "buf.h"
#include "err.h"
#include "log.h"
#include "pt_config.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Default connect budget and idle limit (see transport_curl.h). */
#define DEFAULT_CONNECT_MS 5000
#define DEFAULT_MAX_IDLE_S 30

/* Response headers we never keep: long, numerous and of no use to an adapter.
 * PT_HTTP_MAX_HEADERS is small, and Stripe alone sends about twenty. */
static const char *const noise_headers[] = {
    "access-control-",
    "content-security-policy",
    "strict-transport-security",
    "x-content-type-options",
    "x-xss-protection",
    "x-frame-options",
    "report-to",
    "nel",
    "vary",
    "cache-control",
    "pragma",
    "expires",
    "server",
    "x-powered-by",
    "keep-alive",
    "connection",
    "set-cookie",
    "alt-svc",
    "via",
    NULL,
};

struct channel {
    char name[PT_CURL_CHANNEL_MAX + 1];
    /* Client certificate and key (PEM paths) presented on this connection;
     * NULL = none.  Part of the channel's identity (see the top of the file). */
    char *cert_file;
    char *key_file;
    pthread_mutex_t lock; /* held for a whole request */
    CURL *easy;
    /* Socket of the kept-alive connection, CURL_SOCKET_BAD when none.  Only
     * touched under lock: curl opens and closes sockets of this handle only
     * inside calls we make while holding it. */
    curl_socket_t fd;
    struct pt_curl_stats stats;

    /* State of the request in progress (valid while lock is held). */
    size_t bytes_out; /* request bytes curl reported written */
    int resend_refused;
    struct pt_http_response *resp;
    struct pt_buf body; /* the answer's body, bounded by the request's max_body (buf.h) */
    int body_overflow;
    int headers_dropped;
    char errbuf[CURL_ERROR_SIZE];
};

struct pt_curl {
    struct pt_transport table;
    pthread_mutex_t lock; /* guards ch[] and nch */
    struct channel *ch[PT_CURL_MAX_CHANNELS];
    int nch;
    char *ca_file;
    int connect_timeout_ms;
    int max_idle_s;
    char user_agent[96];
};

/* ---- process-wide init ------------------------------------------------ */

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

static void global_init(void)
{
    /* curl_global_init is not thread-safe on every libcurl build, so it runs
     * exactly once, and it is never undone: other parts of the program (the
     * simulator's notifier) may use libcurl too. */
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int pt_curl_global_init(void)
{
    pthread_once(&global_once, global_init);
    return global_rc == CURLE_OK ? PT_OK : PT_ESYS;
}

/* ---- small helpers ---------------------------------------------------- */

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Absolute CLOCK_REALTIME time ms from now, for pthread_mutex_timedlock. */
static struct timespec realtime_in(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* "https://host:port/path?query" -> "host:port/path" for log lines: the query
 * of an Alipay request carries signed parameters, and logs stay short. */
static void url_for_log(const char *url, char *out, size_t outlen)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    size_t n = strcspn(p, "?#");
    snprintf(out, outlen, "%.*s", (int)(n > 200 ? 200 : n), p);
}

static int is_noise(const char *name, size_t len)
{
    for (const char *const *n = noise_headers; *n; n++) {
        size_t nl = strlen(*n);
        if ((*n)[nl - 1] == '-' ? len >= nl && strncasecmp(name, *n, nl) == 0
                                : len == nl && strncasecmp(name, *n, nl) == 0)
            return 1;
    }
    return 0;
}

/* ---- curl callbacks --------------------------------------------------- */

static int debug_cb(CURL *h, curl_infotype type, char *data, size_t size, void *userp)
{
    struct channel *ch = userp;
    (void)h;
    /* Reported by curl after the bytes were handed to the connection; TLS
     * records (CURLINFO_SSL_DATA_OUT) of the handshake are not request bytes. */
    if (type == CURLINFO_HEADER_OUT || type == CURLINFO_DATA_OUT)
        ch->bytes_out += size;
    else if (type == CURLINFO_TEXT && pt_log_get_level() >= PT_LOG_DEBUG) {
        /* curl's own narration ("Re-using existing connection", "Connection
         * died, retrying"); it names hosts and states, never header values. */
        while (size > 0 && (data[size - 1] == '\n' || data[size - 1] == '\r'))
            size--;
        pt_log_debug("transport %s: curl: %.*s", ch->name, (int)(size > 300 ? 300 : size), data);
    }
    return 0;
}

static curl_socket_t opensocket_cb(void *clientp, curlsocktype purpose, struct curl_sockaddr *addr)
{
    struct channel *ch = clientp;
    (void)purpose;
    if (ch->bytes_out > 0) {
        /* curl wants a new connection after request bytes already went out:
         * that is its silent resend (see the top of this file).  Refuse it;
         * the request stays "possibly delivered" and the caller decides. */
        ch->resend_refused = 1;
        return CURL_SOCKET_BAD;
    }
    return socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
}

static int closesocket_cb(void *clientp, curl_socket_t s)
{
    struct channel *ch = clientp;
    if (s == ch->fd)
        ch->fd = CURL_SOCKET_BAD;
    return close(s);
}

static size_t header_cb(char *buf, size_t size, size_t n, void *userp)
{
    struct channel *ch = userp;
    struct pt_http_response *r = ch->resp;
    size_t len = size * n, l = len;
    while (l > 0 && (buf[l - 1] == '\n' || buf[l - 1] == '\r'))
        l--;
    if (l >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
        /* A new status line: an interim 1xx answer came before, keep only the
         * final response's headers and body. */
        pt_http_response_free(r);
        ch->headers_dropped = 0;
        return len;
    }
    const char *colon = memchr(buf, ':', l);
    if (l == 0 || !colon)
        return len;
    size_t nlen = (size_t)(colon - buf);
    if (is_noise(buf, nlen))
        return len;
    const char *v = colon + 1;
    while (v < buf + l && (*v == ' ' || *v == '\t'))
        v++;
    char name[128], value[4096];
    if (nlen >= sizeof name || (size_t)(buf + l - v) >= sizeof value) {
        ch->headers_dropped++;
        return len;
    }
    memcpy(name, buf, nlen);
    name[nlen] = '\0';
    memcpy(value, v, (size_t)(buf + l - v));
    value[buf + l - v] = '\0';
    int rc = pt_http_response_add_header(r, name, value);
    if (rc == PT_ENOMEM)
        return 0; /* aborts the transfer */
    if (rc != PT_OK)
        ch->headers_dropped++;
    return len;
}

static size_t write_cb(char *data, size_t size, size_t n, void *userp)
{
    struct channel *ch = userp;
    size_t len = size * n;
    pt_buf_put(&ch->body, data, len);
    if (ch->body.failed) {
        ch->body_overflow = ch->body.len + len > ch->body.max;
        return 0; /* CURLE_WRITE_ERROR: the answer is not usable */
    }
    return len;
}

/* ---- channels --------------------------------------------------------- */

/* NULL-tolerant string equality: two NULLs are equal, NULL and "x" are not. */
static int same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

static void channel_free(struct channel *ch)
{
    if (!ch)
        return;
    /* curl_easy_cleanup closes the kept-alive connection through our
     * close-socket callback, which still needs ch. */
    if (ch->easy)
        curl_easy_cleanup(ch->easy);
    free(ch->cert_file);
    free(ch->key_file);
    free(ch);
}

/* The connection for (name, cert, key), created on first use. */
static struct channel *channel_get(struct pt_curl *t, const char *name, const char *cert,
                                   const char *key, int *rc)
{
    struct channel *found = NULL;
    pthread_mutex_lock(&t->lock);
    for (int i = 0; i < t->nch && !found; i++)
        if (strcmp(t->ch[i]->name, name) == 0 && same_str(t->ch[i]->cert_file, cert) &&
            same_str(t->ch[i]->key_file, key))
            found = t->ch[i];
    if (!found) {
        if (t->nch >= PT_CURL_MAX_CHANNELS) {
            *rc = PT_EINVAL;
            goto out;
        }
        struct channel *ch = calloc(1, sizeof *ch);
        if (!ch || !(ch->easy = curl_easy_init()) || (cert && !(ch->cert_file = strdup(cert))) ||
            (key && !(ch->key_file = strdup(key)))) {
            channel_free(ch);
            *rc = PT_ENOMEM;
            goto out;
        }
        snprintf(ch->name, sizeof ch->name, "%s", name);
        pthread_mutex_init(&ch->lock, NULL);
        ch->fd = CURL_SOCKET_BAD;
        t->ch[t->nch++] = ch;
        found = ch;
    }
out:
    pthread_mutex_unlock(&t->lock);
    return found;
}

/* True when the idle kept-alive connection has something to read: for
 * HTTP/1.1 between requests that only happens when the server is closing it. */
static int connection_closing(curl_socket_t fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) != 0;
}

#define SET(opt, val)                                                                              \
    do {                                                                                           \
        if (curl_easy_setopt(h, opt, val) != CURLE_OK)                                             \
            goto setopt_failed;                                                                    \
    } while (0)

/* Sets every option of one request on the channel's handle.  PT_OK,
 * PT_EINVAL (unknown method), PT_ENOMEM. */
static int configure(struct pt_curl *t, struct channel *ch, const struct pt_http_request *req,
                     int64_t budget_ms, struct curl_slist **hdrs)
{
    CURL *h = ch->easy;
    curl_easy_reset(h);
    int has_expect = 0;
    for (int i = 0; i < req->nheaders; i++) {
        struct curl_slist *n = curl_slist_append(*hdrs, req->headers[i]);
        if (!n)
            return PT_ENOMEM;
        *hdrs = n;
        has_expect |= strncasecmp(req->headers[i], "Expect:", 7) == 0;
    }
    if (!has_expect) {
        /* No "Expect: 100-continue" round trip for larger POST bodies: it only
         * adds latency, and a gateway must answer the whole request anyway. */
        struct curl_slist *n = curl_slist_append(*hdrs, "Expect:");
        if (!n)
            return PT_ENOMEM;
        *hdrs = n;
    }
    long connect_ms = t->connect_timeout_ms < budget_ms ? t->connect_timeout_ms : (long)budget_ms;

    SET(CURLOPT_URL, req->url);
#if LIBCURL_VERSION_NUM >= 0x075500
    SET(CURLOPT_PROTOCOLS_STR, "https");
#else
    SET(CURLOPT_PROTOCOLS, (long)CURLPROTO_HTTPS);
#endif
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_PROXY, ""); /* no proxy, environment included */
    SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    /* Verification is always on; there is deliberately no option to relax it. */
    SET(CURLOPT_CAINFO, t->ca_file);
    SET(CURLOPT_CAPATH, NULL);
    SET(CURLOPT_SSL_VERIFYPEER, 1L);
    SET(CURLOPT_SSL_VERIFYHOST, 2L);
    SET(CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    if (ch->cert_file) {
        /* Mutual TLS.  Without a separate key file the key is expected in
         * the certificate's PEM file (curl's rule for CURLOPT_SSLKEY unset). */
        SET(CURLOPT_SSLCERT, ch->cert_file);
        SET(CURLOPT_SSLCERTTYPE, "PEM");
        if (ch->key_file) {
            SET(CURLOPT_SSLKEY, ch->key_file);
            SET(CURLOPT_SSLKEYTYPE, "PEM");
        }
    }
    SET(CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
    SET(CURLOPT_TIMEOUT_MS, (long)budget_ms);
    SET(CURLOPT_MAXCONNECTS, 1L);
    SET(CURLOPT_MAXAGE_CONN, (long)t->max_idle_s);
    SET(CURLOPT_TCP_KEEPALIVE, 1L);
    SET(CURLOPT_TCP_NODELAY, 1L);
    SET(CURLOPT_USERAGENT, t->user_agent);
    SET(CURLOPT_HTTPHEADER, *hdrs);
    SET(CURLOPT_MAXFILESIZE_LARGE,
        (curl_off_t)(req->max_body ? req->max_body : (size_t)PT_HTTP_MAX_BODY));
    SET(CURLOPT_ERRORBUFFER, ch->errbuf);
    SET(CURLOPT_VERBOSE, 1L); /* the debug callback only runs in verbose mode */
    SET(CURLOPT_DEBUGFUNCTION, debug_cb);
    SET(CURLOPT_DEBUGDATA, ch);
    SET(CURLOPT_OPENSOCKETFUNCTION, opensocket_cb);
    SET(CURLOPT_OPENSOCKETDATA, ch);
    SET(CURLOPT_CLOSESOCKETFUNCTION, closesocket_cb);
    SET(CURLOPT_CLOSESOCKETDATA, ch);
    SET(CURLOPT_HEADERFUNCTION, header_cb);
    SET(CURLOPT_HEADERDATA, ch);
    SET(CURLOPT_WRITEFUNCTION, write_cb);
    SET(CURLOPT_WRITEDATA, ch);

    if (strcmp(req->method, "GET") == 0) {
        SET(CURLOPT_HTTPGET, 1L);
    } else if (strcmp(req->method, "POST") == 0 || strcmp(req->method, "PUT") == 0 ||
               strcmp(req->method, "PATCH") == 0 || strcmp(req->method, "DELETE") == 0) {
        if (strcmp(req->method, "POST") != 0)
            SET(CURLOPT_CUSTOMREQUEST, req->method);
        if (strcmp(req->method, "DELETE") != 0 || req->body_len > 0) {
            SET(CURLOPT_POST, 1L);
            SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
            SET(CURLOPT_POSTFIELDS, req->body ? req->body : "");
        }
    } else {
        return PT_EINVAL;
    }
    return PT_OK;
setopt_failed:
    return PT_ENOMEM;
}

#undef SET

static int request_valid(const char *channel, const struct pt_http_request *req, int timeout_ms)
{
    return channel && *channel && strlen(channel) <= PT_CURL_CHANNEL_MAX && req && req->url &&
           strncasecmp(req->url, "https://", 8) == 0 && timeout_ms > 0 &&
           (req->client_cert_file || !req->client_key_file) &&
           (!req->client_cert_file || req->client_cert_file[0]) &&
           (!req->client_key_file || req->client_key_file[0]);
}

/* The client certificate and key must be readable before anything is sent:
 * curl would only find out in the handshake, with a message naming neither
 * the gateway nor the config key.  PT_OK or PT_ENOTSENT. */
static int client_files_readable(const char *channel, const struct pt_http_request *req)
{
    const char *files[2] = {req->client_cert_file, req->client_key_file};
    const char *what[2] = {"certificate", "private key"};
    for (int i = 0; i < 2; i++) {
        if (files[i] && access(files[i], R_OK) != 0) {
            pt_log_error("transport %s: client %s %s: cannot read: %s; not sent", channel, what[i],
                         files[i], strerror(errno));
            return PT_ENOTSENT;
        }
    }
    return PT_OK;
}

int pt_curl_send(struct pt_curl *t, const char *channel, const struct pt_http_request *req,
                 int timeout_ms, struct pt_http_response *resp)
{
    int rc = PT_EINVAL;
    memset(resp, 0, sizeof *resp);
    if (!t || !request_valid(channel, req, timeout_ms)) {
        pt_log_error("transport: unusable request (channel '%s', url %s, timeout %d ms): "
                     "only https:// URLs with a positive timeout are sent, and a client key "
                     "only with its certificate",
                     channel ? channel : "(null)", req && req->url ? "given" : "missing",
                     timeout_ms);
        return PT_EINVAL;
    }
    if ((rc = client_files_readable(channel, req)) != PT_OK)
        return rc;
    int64_t deadline = mono_ms() + timeout_ms;
    struct channel *ch = channel_get(t, channel, req->client_cert_file, req->client_key_file, &rc);
    if (!ch) {
        pt_log_error("transport: cannot open channel '%s': %s", channel, pt_strerror(rc));
        return rc;
    }
    /* Another thread may be using this gateway's connection; wait for it, but
     * never past our own deadline.  Giving up here sent nothing. */
    struct timespec until = realtime_in(timeout_ms);
    int lrc = pthread_mutex_timedlock(&ch->lock, &until);
    if (lrc != 0) {
        pt_log_warn("transport %s: connection busy for the whole %d ms timeout; not sent", ch->name,
                    timeout_ms);
        return PT_ENOTSENT;
    }
    int64_t budget = deadline - mono_ms();
    struct curl_slist *hdrs = NULL;
    char where[256];
    url_for_log(req->url, where, sizeof where);
    if (budget <= 0) {
        rc = PT_ENOTSENT;
        goto out;
    }
    if (!ch->easy && !(ch->easy = curl_easy_init())) {
        rc = PT_ENOMEM; /* an earlier handle reset failed; nothing sent */
        goto out_no_handle;
    }
    if (ch->fd != CURL_SOCKET_BAD && connection_closing(ch->fd)) {
        /* The server is closing the kept-alive connection.  A fresh handle
         * drops it for certain (CURLOPT_FRESH_CONNECT would leave it cached,
         * to be picked again if the new connection fails). */
        ch->stats.stale_skipped++;
        pt_log_debug("transport %s: kept-alive connection is being closed by the server; "
                     "opening a new one",
                     ch->name);
        curl_easy_cleanup(ch->easy);
        ch->fd = CURL_SOCKET_BAD;
        if (!(ch->easy = curl_easy_init())) {
            rc = PT_ENOMEM;
            goto out_no_handle;
        }
    }
    ch->bytes_out = 0;
    ch->resend_refused = 0;
    ch->resp = resp;
    pt_buf_init(&ch->body, req->max_body ? req->max_body : PT_HTTP_MAX_BODY);
    ch->body_overflow = 0;
    ch->headers_dropped = 0;
    ch->errbuf[0] = '\0';
    if ((rc = configure(t, ch, req, budget, &hdrs)) != PT_OK)
        goto out;

    ch->stats.requests++;
    CURLcode cc = curl_easy_perform(ch->easy);

    long nconn = 0;
    if (curl_easy_getinfo(ch->easy, CURLINFO_NUM_CONNECTS, &nconn) == CURLE_OK && nconn > 0)
        ch->stats.connects += (uint64_t)nconn;
    curl_socket_t active = CURL_SOCKET_BAD;
    if (curl_easy_getinfo(ch->easy, CURLINFO_ACTIVESOCKET, &active) != CURLE_OK)
        active = CURL_SOCKET_BAD;
    ch->fd = active;
    if (ch->resend_refused)
        ch->stats.resends_refused++;

    if (cc == CURLE_OK) {
        long status = 0;
        curl_easy_getinfo(ch->easy, CURLINFO_RESPONSE_CODE, &status);
        resp->status = (int)status;
        /* Callers may treat body as a string whatever the status: an empty
         * answer is "". */
        if (!(resp->body = pt_buf_take(&ch->body, &resp->body_len))) {
            rc = PT_ENOMEM;
            goto out;
        }
        ch->stats.answers++;
        if (ch->headers_dropped)
            pt_log_debug("transport %s: %d response header(s) beyond %d not kept", ch->name,
                         ch->headers_dropped, PT_HTTP_MAX_HEADERS);
        pt_log_debug("transport %s: %s %s -> HTTP %d (%zu bytes)", ch->name, req->method, where,
                     resp->status, resp->body_len);
        rc = PT_OK;
        goto out;
    }
    rc = ch->bytes_out > 0 ? PT_ENOANSWER : PT_ENOTSENT;
    pt_log_warn("transport %s: %s %s: %s after %zu request bytes (curl %d: %s)%s%s", ch->name,
                req->method, where, rc == PT_ENOTSENT ? "not sent" : "no answer", ch->bytes_out,
                (int)cc, ch->errbuf[0] ? ch->errbuf : curl_easy_strerror(cc),
                ch->resend_refused ? "; refused curl's silent resend on a new connection" : "",
                ch->body_overflow ? "; response body larger than the limit" : "");
out:
    pt_buf_free(&ch->body, 1);
    if (rc != PT_OK)
        pt_http_response_free(resp);
    ch->resp = NULL;
    curl_slist_free_all(hdrs);
    /* The slist and the error buffer die here; the handle must not point at
     * them while it sits idle with its connection. */
    curl_easy_setopt(ch->easy, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(ch->easy, CURLOPT_ERRORBUFFER, NULL);
out_no_handle:
    pthread_mutex_unlock(&ch->lock);
    return rc;
}

static int send_cb(void *ctx, const char *channel, const struct pt_http_request *req,
                   int timeout_ms, struct pt_http_response *resp)
{
    return pt_curl_send(ctx, channel, req, timeout_ms, resp);
}

int pt_curl_new(const struct pt_curl_options *opt, struct pt_curl **out)
{
    int rc = PT_EINVAL;
    struct pt_curl *t = NULL;
    *out = NULL;
    if (!opt || !opt->ca_file || !opt->ca_file[0]) {
        pt_log_error("transport: tls.ca_file is required (TLS peer verification is always on)");
        goto out;
    }
    if (access(opt->ca_file, R_OK) != 0) {
        pt_log_error("transport: tls.ca_file %s: cannot read: %s", opt->ca_file, strerror(errno));
        goto out;
    }
    if (pt_curl_global_init() != PT_OK) {
        pt_log_error("transport: curl_global_init failed: %s", curl_easy_strerror(global_rc));
        rc = PT_ESYS;
        goto out;
    }
    const curl_version_info_data *vi = curl_version_info(CURLVERSION_NOW);
    if (!vi || !(vi->features & CURL_VERSION_SSL)) {
        pt_log_error("transport: this libcurl has no TLS support");
        rc = PT_EUNSUPPORTED;
        goto out;
    }
    rc = PT_ENOMEM;
    t = calloc(1, sizeof *t);
    if (!t || !(t->ca_file = strdup(opt->ca_file)))
        goto out;
    pthread_mutex_init(&t->lock, NULL);
    t->connect_timeout_ms =
        opt->connect_timeout_ms > 0 ? opt->connect_timeout_ms : DEFAULT_CONNECT_MS;
    t->max_idle_s = opt->max_idle_s > 0 ? opt->max_idle_s : DEFAULT_MAX_IDLE_S;
    snprintf(t->user_agent, sizeof t->user_agent, "%s",
             opt->user_agent ? opt->user_agent : "payterm/" PT_VERSION);
    t->table.send = send_cb;
    t->table.ctx = t;
    *out = t;
    t = NULL;
    rc = PT_OK;
out:
    if (t)
        free(t->ca_file);
    free(t);
    return rc;
}

void pt_curl_destroy(struct pt_curl *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->nch; i++) {
        pthread_mutex_destroy(&t->ch[i]->lock);
        channel_free(t->ch[i]);
    }
    pthread_mutex_destroy(&t->lock);
    free(t->ca_file);
    free(t);
}

const struct pt_transport *pt_curl_transport(struct pt_curl *t)
{
    return &t->table;
}

static void stats_add(struct pt_curl_stats *to, const struct pt_curl_stats *from)
{
    to->requests += from->requests;
    to->answers += from->answers;
    to->connects += from->connects;
    to->stale_skipped += from->stale_skipped;
    to->resends_refused += from->resends_refused;
}

/* The sum of the stats of channel's connections, or (by_cert) of those
 * with cert_file only. */
static void sum_stats(struct pt_curl *t, const char *channel, int by_cert, const char *cert_file,
                      struct pt_curl_stats *out)
{
    memset(out, 0, sizeof *out);
    /* Channels are only ever added, never removed, until pt_curl_destroy. */
    pthread_mutex_lock(&t->lock);
    int n = t->nch;
    pthread_mutex_unlock(&t->lock);
    for (int i = 0; i < n; i++) {
        struct channel *ch = t->ch[i];
        if (strcmp(ch->name, channel) != 0 || (by_cert && !same_str(ch->cert_file, cert_file)))
            continue;
        pthread_mutex_lock(&ch->lock);
        stats_add(out, &ch->stats);
        pthread_mutex_unlock(&ch->lock);
    }
}

void pt_curl_get_stats(struct pt_curl *t, const char *channel, struct pt_curl_stats *out)
{
    sum_stats(t, channel, 0, NULL, out);
}

void pt_curl_get_cert_stats(struct pt_curl *t, const char *channel, const char *cert_file,
                            struct pt_curl_stats *out)
{
    sum_stats(t, channel, 1, cert_file, out);
}
