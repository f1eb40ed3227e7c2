/*
 * transport_curl.h - the libcurl implementation of core's pt_transport.
 *
 * core/ sends every gateway request through `struct pt_transport`
 * (platform.h) and needs to know exactly how far a failed request got:
 * PT_ENOTSENT (provably never delivered: safe to resend) versus PT_ENOANSWER
 * (sent or possibly sent, no complete answer: the charge is UNKNOWN).  This
 * transport keeps one keep-alive HTTPS connection per channel (gateway),
 * always verifies the server against the configured CA file, and tells the
 * two failure kinds apart by watching the request bytes leave (libcurl's
 * debug callback), not by guessing from curl's error code.
 *
 * Thread safety: one pt_curl may be shared by several threads.  Each channel
 * owns one curl easy handle (its connection) behind its own mutex, so requests
 * on one channel go out one after another on the same connection, and
 * different channels run in parallel.  A request that cannot get its channel
 * within its timeout is reported PT_ENOTSENT (nothing was written).
 *
 * Mutual TLS: a request that names a client certificate (client_cert_file,
 * client_key_file in struct pt_http_request) is sent on a connection that
 * presented exactly that certificate.  The connection cache is keyed by
 * (channel, certificate, key): "wechat" with the merchant's API certificate
 * and "wechat" without one are two connections, each kept alive on its own,
 * and a connection is never reused for a request with another certificate
 * or none.
 */
#ifndef PT_TRANSPORT_CURL_H
#define PT_TRANSPORT_CURL_H

#include <stdint.h>

#include "platform.h"

/* Most connections one transport keeps: one per channel (gateway) and client
 * certificate; four gateways and one certificate are used. */
#define PT_CURL_MAX_CHANNELS 16
/* Longest channel name, NUL excluded. */
#define PT_CURL_CHANNEL_MAX 31

struct pt_curl_options {
    /*
     * PEM file with the trust anchors for every server (config tls.ca_file).
     * Required: it is the only trust store used (libcurl's built-in CA path
     * is switched off), and peer and host name verification are always on.
     */
    const char *ca_file;
    /* TCP + TLS connect budget in ms; 0 = 5000.  Never more than a request's
     * own timeout. */
    int connect_timeout_ms;
    /*
     * A kept-alive connection idle longer than this is not reused (a new one
     * is opened instead); 0 = 30 s.  Keep it below the gateways' own idle
     * timeouts so that a server closing an idle connection and our next
     * request rarely cross (see transport_curl.c on why that matters).
     */
    int max_idle_s;
    /* User-Agent header; NULL = "payterm/<version>". */
    const char *user_agent;
};

struct pt_curl;

/*
 * Runs curl_global_init() once per process (thread-safe; later calls return
 * the first result).  pt_curl_new() calls it; other users of libcurl in the
 * program (the simulator's notifier) call it before curl_easy_init().
 * PT_OK or PT_ESYS.
 */
int pt_curl_global_init(void);

/*
 * Creates a transport.  Calls curl_global_init() once per process (the first
 * time, from whichever thread).  *out is destroyed with pt_curl_destroy().
 * PT_OK, PT_EINVAL (no ca_file, or it cannot be read), PT_ENOMEM.
 */
int pt_curl_new(const struct pt_curl_options *opt, struct pt_curl **out);

/* Closes every connection and frees the transport; accepts NULL.  No other
 * thread may be inside pt_curl_send() on it. */
void pt_curl_destroy(struct pt_curl *t);

/* The pt_transport table for core (platform.h); lives as long as t. */
const struct pt_transport *pt_curl_transport(struct pt_curl *t);

/*
 * Sends req over channel's connection (opening it if needed) and waits at most
 * timeout_ms (> 0) in total.  Returns, as platform.h defines:
 *   PT_OK        an HTTP answer arrived (any status); *resp holds status,
 *                headers and body (body at most PT_HTTP_MAX_BODY bytes)
 *   PT_ENOTSENT  not one request byte was written: DNS failure, refused,
 *                TLS handshake or certificate failure, connect timeout, or the
 *                channel stayed busy for the whole timeout
 *   PT_ENOANSWER request bytes were written (or a resend of them was refused,
 *                see below) and no complete answer came: timeout, reset,
 *                truncated or oversized response
 *                A client certificate or key file that cannot be read is
 *                PT_ENOTSENT too, with an error log line naming the file.
 *   PT_EINVAL    the request itself is unusable (no URL, not https://,
 *                unknown method, channel name too long or too many channels,
 *                a client key without its certificate)
 * Only https:// URLs are accepted.  With req->client_cert_file set, that PEM
 * certificate (and req->client_key_file, or the key in the certificate's
 * file when NULL) is presented in the TLS handshake; the server is verified
 * exactly as without one.  resp must be zeroed or freed; the caller
 * frees it with pt_http_response_free().  On failure *resp is left empty.
 */
int pt_curl_send(struct pt_curl *t, const char *channel, const struct pt_http_request *req,
                 int timeout_ms, struct pt_http_response *resp);

/* Counters of one channel, for tests, metrics and the benchmark. */
struct pt_curl_stats {
    uint64_t requests;        /* pt_curl_send calls that reached curl */
    uint64_t answers;         /* ... that returned PT_OK */
    uint64_t connects;        /* new connections opened (CURLINFO_NUM_CONNECTS) */
    uint64_t stale_skipped;   /* kept-alive connections found closing and not reused */
    uint64_t resends_refused; /* silent resends by libcurl that were stopped */
};

/* Copies the counters of channel into *out, summed over its connections
 * with and without client certificates (zeros for an unknown channel). */
void pt_curl_get_stats(struct pt_curl *t, const char *channel, struct pt_curl_stats *out);

/* The counters of channel's connection that presents cert_file (NULL: the
 * one without a client certificate); zeros when there is none. */
void pt_curl_get_cert_stats(struct pt_curl *t, const char *channel, const char *cert_file,
                            struct pt_curl_stats *out);

#endif
