/*
 * test_transport.c - the libcurl transport (platform/linux/transport_curl.c)
 * against the gateway simulator over TLS.
 *
 * What matters is the failure report: PT_ENOTSENT only when no request byte
 * left (a resend is safe), PT_ENOANSWER when one did (the charge is UNKNOWN),
 * PT_OK with the status for any HTTP answer.  Each fault mode of the simulator
 * is checked for the class SPEC section 7 expects, and the ledger is checked
 * for the thing a customer cares about: how many times money moved.
 */
#define _GNU_SOURCE /* memmem */
#include "simtest.h"
#include "testutil.h"

#include "crypto.h"
#include "err.h"
#include "gateways/stripe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mbedtls/net_sockets.h>
#include <mbedtls/ssl.h>
#include <mbedtls/version.h>

static struct simtest T;

static int setup(void **state)
{
    (void)state;
    simtest_start(&T, NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    simtest_stop(&T);
    return 0;
}

/* Every test starts with no faults armed. */
static int clear(void **state)
{
    (void)state;
    simtest_fault(&T, "{\"mode\":\"none\"}");
    return 0;
}

static struct pt_curl *new_transport(const char *ca_file)
{
    struct pt_curl *c = NULL;
    struct pt_curl_options o = {.ca_file = ca_file};
    assert_int_equal(pt_curl_new(&o, &c), PT_OK);
    return c;
}

static int get(struct pt_curl *c, const char *channel, const char *host, int port, const char *path,
               int timeout_ms, struct pt_http_response *r)
{
    struct pt_http_request rq = {.method = "GET"};
    char url[300];
    snprintf(url, sizeof url, "https://%s:%d%s", host, port, path);
    rq.url = url;
    int rc = pt_curl_send(c, channel, &rq, timeout_ms, r);
    rq.url = NULL;
    return rc;
}

/* ---- connections -------------------------------------------------------------- */

static void test_keepalive_one_connection(void **state)
{
    (void)state;
    struct pt_curl *c = new_transport(T.cfg.ca_file);
    for (int i = 0; i < 20; i++) {
        struct pt_http_response r = {0};
        assert_int_equal(get(c, "stripe", "stripe.localhost", T.port, "/_sim/health", 5000, &r),
                         PT_OK);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, "{\"ok\":true}");
        pt_http_response_free(&r);
    }
    struct pt_curl_stats st;
    pt_curl_get_stats(c, "stripe", &st);
    assert_int_equal(st.requests, 20);
    assert_int_equal(st.answers, 20);
    assert_int_equal(st.connects, 1); /* one kept-alive connection for the whole run */
    pt_curl_destroy(c);
}

static void test_server_closed_idle_connection_is_not_reused(void **state)
{
    (void)state;
    /* A simulator that closes kept-alive connections after 200 ms idle, with a
     * TLS close_notify, as real servers do. */
    struct simtest t2;
    struct pt_sim_options o = {.idle_timeout_ms = 200};
    simtest_start(&t2, &o);
    struct pt_curl *c = new_transport(t2.cfg.ca_file);
    struct pt_http_response r = {0};
    assert_int_equal(get(c, "gw", "stripe.localhost", t2.port, "/_sim/health", 5000, &r), PT_OK);
    pt_http_response_free(&r);
    simtest_sleep_ms(600);
    assert_int_equal(get(c, "gw", "stripe.localhost", t2.port, "/_sim/health", 5000, &r), PT_OK);
    assert_int_equal(r.status, 200);
    pt_http_response_free(&r);
    struct pt_curl_stats st;
    pt_curl_get_stats(c, "gw", &st);
    assert_int_equal(st.connects, 2);
    assert_int_equal(st.stale_skipped, 1); /* noticed before a byte was written */
    assert_int_equal(st.resends_refused, 0);
    pt_curl_destroy(c);
    simtest_stop(&t2);
}

struct job {
    struct pt_curl *c;
    const char *channel, *host;
    int ok;
    pthread_t th;
};

static void *job_main(void *arg)
{
    struct job *j = arg;
    for (int i = 0; i < 25; i++) {
        struct pt_http_response r = {0};
        if (get(j->c, j->channel, j->host, T.port, "/_sim/health", 5000, &r) == PT_OK &&
            r.status == 200)
            j->ok++;
        pt_http_response_free(&r);
    }
    return NULL;
}

static void test_threads_share_one_connection_per_channel(void **state)
{
    (void)state;
    struct pt_curl *c = new_transport(T.cfg.ca_file);
    struct job jobs[4] = {{c, "alipay", "alipay.localhost", 0, 0},
                          {c, "alipay", "alipay.localhost", 0, 0},
                          {c, "wechat", "wechat.localhost", 0, 0},
                          {c, "wechat", "wechat.localhost", 0, 0}};
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&jobs[i].th, NULL, job_main, &jobs[i]), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(jobs[i].th, NULL);
        assert_int_equal(jobs[i].ok, 25);
    }
    struct pt_curl_stats a, w;
    pt_curl_get_stats(c, "alipay", &a);
    pt_curl_get_stats(c, "wechat", &w);
    /* Requests on one channel queue for its one connection. */
    assert_int_equal(a.answers, 50);
    assert_int_equal(w.answers, 50);
    assert_int_equal(a.connects, 1);
    assert_int_equal(w.connects, 1);
    pt_curl_destroy(c);
}

static void test_response_body_is_capped(void **state)
{
    (void)state;
    struct pt_http_response r = {0};
    assert_int_equal(get(T.curl, "blob", "localhost", T.port, "/_sim/blob?bytes=200000", 5000, &r),
                     PT_OK);
    assert_int_equal(r.body_len, 200000);
    pt_http_response_free(&r);
    /* Over PT_HTTP_MAX_BODY: the request went out, no usable answer came. */
    assert_int_equal(get(T.curl, "blob", "localhost", T.port, "/_sim/blob?bytes=300000", 5000, &r),
                     PT_ENOANSWER);
    assert_null(r.body);
}

/* A request may take a larger answer than the default (a day's bill: the
 * bills' downloads set max_body), and still no more than it says. */
static void test_response_body_cap_per_request(void **state)
{
    (void)state;
    struct pt_http_response r = {0};
    struct pt_http_request rq = {.method = "GET", .max_body = 700000};
    char url[300];
    snprintf(url, sizeof url, "https://localhost:%d/_sim/blob?bytes=600000", T.port);
    rq.url = url;
    assert_int_equal(pt_curl_send(T.curl, "blob", &rq, 5000, &r), PT_OK);
    assert_int_equal(r.body_len, 600000);
    pt_http_response_free(&r);
    snprintf(url, sizeof url, "https://localhost:%d/_sim/blob?bytes=700001", T.port);
    assert_int_equal(pt_curl_send(T.curl, "blob", &rq, 5000, &r), PT_ENOANSWER);
    assert_null(r.body);
    rq.url = NULL;
}

/* ---- requests that cannot be sent ----------------------------------------------- */

static void test_bad_options_and_requests_refused(void **state)
{
    (void)state;
    struct pt_curl *c = NULL;
    struct pt_curl_options none = {0}, missing = {.ca_file = "/nonexistent/ca.pem"};
    assert_int_equal(pt_curl_new(&none, &c), PT_EINVAL);
    assert_int_equal(pt_curl_new(&missing, &c), PT_EINVAL);
    assert_null(c);
    /* TLS is always on: a plain http:// URL is refused before anything is sent. */
    struct pt_http_request rq = {.method = "GET", .url = "http://127.0.0.1:1/"};
    struct pt_http_response r = {0};
    assert_int_equal(pt_curl_send(T.curl, "x", &rq, 1000, &r), PT_EINVAL);
    rq.url = NULL;
}

static void test_wrong_ca_not_sent(void **state)
{
    (void)state;
    /* The system's public CAs do not vouch for the simulator: the handshake
     * fails, nothing is sent, and there is no fallback to unverified TLS. */
    char sys[600] = "/etc/ssl/certs/ca-certificates.crt";
    if (access(sys, R_OK) != 0) /* then a certificate that is not the server's CA */
        snprintf(sys, sizeof sys, "%s/wechat_platform_cert.pem", T.dir);
    struct pt_curl *c = new_transport(sys);
    char order[64];
    struct pt_charge ch;
    struct pt_gw_result res;
    simtest_order_id(order, sizeof order, "wrongca");
    simtest_charge(&ch, ST_STRIPE, order, 1200, "CNY");
    assert_int_equal(
        simtest_call_with(c, &T.gw[ST_STRIPE], ST_STRIPE, PT_GW_PAY, &ch, 5000, &res, NULL),
        PT_ENOTSENT);
    assert_int_equal(simtest_captures(&T, "stripe", order, NULL), -1);
    pt_curl_destroy(c);
}

static void test_connection_refused_not_sent(void **state)
{
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    getsockname(fd, (struct sockaddr *)&a, &al);
    int port = ntohs(a.sin_port);
    close(fd); /* nobody listens there now */
    struct pt_http_response r = {0};
    assert_int_equal(get(T.curl, "closed", "127.0.0.1", port, "/", 3000, &r), PT_ENOTSENT);
}

static void test_dns_failure_not_sent(void **state)
{
    (void)state;
    struct pt_http_response r = {0};
    assert_int_equal(get(T.curl, "dns", "payterm-test.invalid", 443, "/", 5000, &r), PT_ENOTSENT);
}

/* ---- fault modes (SPEC section 1 on demand) -------------------------------------- */

static void pay(struct pt_curl *c, const char *order, int64_t amount, int timeout_ms, int want_rc,
                struct pt_gw_result *res)
{
    struct pt_charge ch;
    simtest_charge(&ch, ST_STRIPE, order, amount, "CNY");
    assert_int_equal(
        simtest_call_with(c, &T.gw[ST_STRIPE], ST_STRIPE, PT_GW_PAY, &ch, timeout_ms, res, NULL),
        want_rc);
}

static void test_refuse_connect_not_sent(void **state)
{
    (void)state;
    char order[64], warm[64];
    struct pt_gw_result res;
    struct pt_curl *c = new_transport(T.cfg.ca_file);
    simtest_order_id(order, sizeof order, "refuse");
    simtest_order_id(warm, sizeof warm, "warm");
    /* A kept-alive connection to "Stripe" exists when the fault is armed: the
     * simulator closes it, so the next request must reconnect - and is refused
     * during the handshake, before any request byte. */
    pay(c, warm, 1000, 5000, PT_OK, &res);
    assert_int_equal(res.outcome, PT_OUTCOME_SUCCESS);
    simtest_fault(&T, "{\"gateway\":\"stripe\",\"mode\":\"refuse_connect\",\"count\":1}");
    pay(c, order, 1200, 5000, PT_ENOTSENT, &res);
    assert_int_equal(simtest_captures(&T, "stripe", order, NULL), -1);
    /* Resending is safe, and charges once. */
    pay(c, order, 1200, 5000, PT_OK, &res);
    assert_int_equal(res.outcome, PT_OUTCOME_SUCCESS);
    assert_int_equal(simtest_captures(&T, "stripe", order, NULL), 1);
    struct pt_curl_stats st;
    pt_curl_get_stats(c, "stripe", &st);
    assert_int_equal(st.resends_refused, 0);
    pt_curl_destroy(c);
}

static void test_refuse_connect_all_gateways(void **state)
{
    (void)state;
    char order[64];
    struct pt_charge ch;
    struct pt_gw_result res;
    struct pt_curl *c = new_transport(T.cfg.ca_file);
    simtest_order_id(order, sizeof order, "refuseall");
    simtest_fault(&T, "{\"gateway\":\"*\",\"mode\":\"refuse_connect\",\"count\":1}");
    simtest_charge(&ch, ST_ALIPAY, order, 1000, "CNY");
    assert_int_equal(
        simtest_call_with(c, &T.gw[ST_ALIPAY], ST_ALIPAY, PT_GW_PAY, &ch, 5000, &res, NULL),
        PT_ENOTSENT);
    assert_int_equal(simtest_captures(&T, "alipay", order, NULL), -1);
    pt_curl_destroy(c);
}

static void test_fail_before_commit_no_answer_nothing_recorded(void **state)
{
    (void)state;
    char order[64];
    struct pt_charge ch;
    struct pt_gw_result res;
    simtest_order_id(order, sizeof order, "fbc");
    simtest_fault(&T, "{\"gateway\":\"stripe\",\"mode\":\"fail_before_commit\",\"count\":1}");
    pay(T.curl, order, 1200, 5000, PT_ENOANSWER, &res);
    assert_int_equal(simtest_captures(&T, "stripe", order, NULL), -1);
    simtest_charge(&ch, ST_STRIPE, order, 1200, "CNY");
    assert_int_equal(simtest_call(&T, ST_STRIPE, PT_GW_QUERY, &ch, 5000, &res, NULL), PT_OK);
    assert_int_equal(res.outcome, PT_OUTCOME_NOT_FOUND);
}

static void test_drop_after_commit_on_fresh_connection(void **state)
{
    (void)state;
    char order[64];
    struct pt_gw_result res;
    struct pt_curl *c = new_transport(T.cfg.ca_file);
    simtest_order_id(order, sizeof order, "dacfresh");
    simtest_fault(&T, "{\"gateway\":\"stripe\",\"mode\":\"drop_after_commit\",\"count\":1}");
    pay(c, order, 1200, 5000, PT_ENOANSWER, &res);
    /* The money moved although the answer was lost. */
    assert_int_equal(simtest_captures(&T, "stripe", order, NULL), 1);
    pt_curl_destroy(c);
}

static void test_drop_after_commit_on_reused_connection_is_not_resent(void **state)
{
    (void)state;
    char order[64], warm[64];
    struct pt_gw_result res;
    struct pt_curl *c = new_transport(T.cfg.ca_file);
    simtest_order_id(order, sizeof order, "dacreuse");
    simtest_order_id(warm, sizeof warm, "warm");
    pay(c, warm, 1000, 5000, PT_OK, &res);
    /* A create WITHOUT an Idempotency-Key on the kept-alive connection: if
     * libcurl's silent resend ("Connection died, retrying a fresh connect")
     * got through, Stripe would make a second PaymentIntent for the order. */
    struct pt_charge ch;
    struct pt_http_request rq = {0};
    struct pt_http_response r = {0};
    struct pt_gw_env env = {.now_ms = 1};
    simtest_charge(&ch, ST_STRIPE, order, 1200, "CNY");
    assert_int_equal(pt_gateway_stripe.build(&T.gw[ST_STRIPE], PT_GW_PAY, &ch, &env, &rq), PT_OK);
    for (int i = 0; i < rq.nheaders; i++) {
        if (strncasecmp(rq.headers[i], "Idempotency-Key:", 16) == 0) {
            free(rq.headers[i]);
            rq.headers[i] = rq.headers[--rq.nheaders];
            rq.headers[rq.nheaders] = NULL;
        }
    }
    simtest_fault(&T, "{\"gateway\":\"stripe\",\"mode\":\"drop_after_commit\",\"count\":1}");
    assert_int_equal(pt_curl_send(c, "stripe", &rq, 5000, &r), PT_ENOANSWER);
    pt_http_request_free(&rq);
    struct pt_curl_stats st;
    pt_curl_get_stats(c, "stripe", &st);
    assert_int_equal(st.resends_refused, 1);
    assert_int_equal(simtest_captures(&T, "stripe", order, NULL), 1);
    cJSON *row = simtest_ledger_row(&T, "stripe", order);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(row, "trades")->valueint, 1);
    cJSON_Delete(row);
    pt_curl_destroy(c);
}

static void test_http_500_after_commit_is_an_answer(void **state)
{
    (void)state;
    char order[64];
    struct pt_gw_result res;
    simtest_order_id(order, sizeof order, "h500");
    simtest_fault(&T, "{\"gateway\":\"stripe\",\"mode\":\"http_500_after_commit\",\"count\":1}");
    pay(T.curl, order, 1200, 5000, PT_OK, &res);
    assert_int_equal(res.outcome, PT_OUTCOME_AMBIGUOUS);
    assert_int_equal(simtest_captures(&T, "stripe", order, NULL), 1);
}

static void test_delay_past_timeout_no_answer(void **state)
{
    (void)state;
    char order[64];
    struct pt_gw_result res;
    simtest_order_id(order, sizeof order, "delay");
    simtest_fault(&T, "{\"gateway\":\"stripe\",\"mode\":\"delay\",\"delay_ms\":1500,\"count\":1}");
    pay(T.curl, order, 1200, 400, PT_ENOANSWER, &res);
    /* Mid-processing: the gateway finishes after the client gave up. */
    simtest_sleep_ms(1700);
    assert_int_equal(simtest_captures(&T, "stripe", order, NULL), 1);
}

struct slow {
    char order[64];
    int rc;
    struct pt_gw_result res;
};

static void *slow_pay(void *arg)
{
    struct slow *sl = arg;
    struct pt_charge ch;
    simtest_charge(&ch, ST_STRIPE, sl->order, 1200, "CNY");
    sl->rc = simtest_call(&T, ST_STRIPE, PT_GW_PAY, &ch, 5000, &sl->res, NULL);
    return NULL;
}

static void test_busy_channel_past_timeout_not_sent(void **state)
{
    (void)state;
    struct slow sl = {0};
    char order[64];
    pthread_t th;
    struct pt_gw_result res;
    simtest_order_id(sl.order, sizeof sl.order, "slow");
    simtest_order_id(order, sizeof order, "queued");
    simtest_fault(&T, "{\"gateway\":\"stripe\",\"mode\":\"delay\",\"delay_ms\":1200,\"count\":1}");
    assert_int_equal(pthread_create(&th, NULL, slow_pay, &sl), 0);
    simtest_sleep_ms(200);
    /* The channel's one connection is busy for longer than this request may
     * wait: it gives up without writing anything. */
    pay(T.curl, order, 1300, 300, PT_ENOTSENT, &res);
    pthread_join(th, NULL);
    assert_int_equal(sl.rc, PT_OK);
    assert_int_equal(sl.res.outcome, PT_OUTCOME_SUCCESS);
    assert_int_equal(simtest_captures(&T, "stripe", order, NULL), -1);
}

/* ---- client certificates (mutual TLS) --------------------------------------------- */

static struct pt_http_request mtls_request(const char *host, int port, const char *path,
                                           const char *cert, const char *key)
{
    struct pt_http_request rq = {.method = "POST"};
    char url[300];
    snprintf(url, sizeof url, "https://%s:%d%s", host, port, path);
    rq.url = strdup(url);
    rq.body = strdup("<xml></xml>");
    rq.body_len = strlen(rq.body);
    rq.client_cert_file = cert;
    rq.client_key_file = key;
    return rq;
}

/* The simulator's /secapi/ routes answer 403 on a connection that did not
 * present the merchant certificate, and go on to read the request (here: a
 * request without fields, which is an answer of 200) on one that did: the
 * status says which connection each request went out on. */
static int secapi_status(struct pt_curl *c, const char *cert, const char *key)
{
    struct pt_http_request rq =
        mtls_request("wechat.localhost", T.port, "/secapi/pay/reverse", cert, key);
    struct pt_http_response r = {0};
    int rc = pt_curl_send(c, "wechat", &rq, 5000, &r);
    pt_http_request_free(&rq);
    int status = rc == PT_OK ? r.status : rc;
    pt_http_response_free(&r);
    return status;
}

static void mtls_files(char cert[600], char key[600])
{
    snprintf(cert, 600, "%s/wechat_apiclient_cert.pem", T.dir);
    snprintf(key, 600, "%s/wechat_apiclient_key.pem", T.dir);
}

static void test_client_cert_connections_never_mix(void **state)
{
    (void)state;
    char cert[600], key[600];
    mtls_files(cert, key);
    struct pt_curl *c = new_transport(T.cfg.ca_file);
    /* Interleaved on one channel: each request goes out on the connection
     * of its own certificate (or of none), each of them kept alive. */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(secapi_status(c, cert, key), 200);
        assert_int_equal(secapi_status(c, NULL, NULL), 403);
    }
    struct pt_curl_stats with, without, all;
    pt_curl_get_cert_stats(c, "wechat", cert, &with);
    pt_curl_get_cert_stats(c, "wechat", NULL, &without);
    pt_curl_get_stats(c, "wechat", &all);
    assert_int_equal(with.requests, 3);
    assert_int_equal(without.requests, 3);
    assert_int_equal(with.connects, 1);
    assert_int_equal(without.connects, 1);
    assert_int_equal(all.answers, 6);
    assert_int_equal(all.connects, 2);
    /* Another certificate (the CA signed it too, it is not the merchant's)
     * is yet another connection, and the simulator tells it apart. */
    char other[600], other_key[600];
    snprintf(other, sizeof other, "%s/server.pem", T.dir);
    snprintf(other_key, sizeof other_key, "%s/server.key", T.dir);
    assert_int_equal(secapi_status(c, other, other_key), 403);
    assert_int_equal(secapi_status(c, cert, key), 200);
    pt_curl_get_cert_stats(c, "wechat", cert, &with);
    assert_int_equal(with.connects, 1);
    pt_curl_get_stats(c, "wechat", &all);
    assert_int_equal(all.connects, 3);
    pt_curl_destroy(c);
}

static void test_client_cert_file_unreadable_not_sent(void **state)
{
    (void)state;
    char cert[600], key[600], missing[600];
    mtls_files(cert, key);
    snprintf(missing, sizeof missing, "%s/no-such-cert.pem", T.dir);
    struct pt_curl *c = new_transport(T.cfg.ca_file);
    assert_int_equal(secapi_status(c, missing, key), PT_ENOTSENT);
    snprintf(missing, sizeof missing, "%s/no-such-key.pem", T.dir);
    assert_int_equal(secapi_status(c, cert, missing), PT_ENOTSENT);
    /* A key without its certificate is not a usable request. */
    assert_int_equal(secapi_status(c, NULL, key), PT_EINVAL);
    /* A file that is there but is not a certificate: curl fails in the
     * handshake, before any request byte. */
    snprintf(missing, sizeof missing, "%s/gateways.json", T.dir);
    assert_int_equal(secapi_status(c, missing, key), PT_ENOTSENT);
    struct pt_curl_stats st;
    pt_curl_get_stats(c, "wechat", &st);
    assert_int_equal(st.answers, 0);
    pt_curl_destroy(c);
}

/*
 * A TLS server that insists on a client certificate from the simulator's CA
 * (MBEDTLS_SSL_VERIFY_REQUIRED): the handshake itself fails without one, as
 * WeChat's /secapi/ host does.  One connection at a time, one request per
 * connection (it answers "Connection: close").
 */
struct strict_server {
    mbedtls_ssl_config conf;
    mbedtls_x509_crt chain, ca;
    mbedtls_pk_context key;
    struct pt_drbg *drbg;
    int fd, port, stop;
    int handshakes_ok, handshakes_failed;
    pthread_t th;
};

static void strict_serve_one(struct strict_server *sv, int fd)
{
    mbedtls_net_context net = {.fd = fd};
    mbedtls_ssl_context ssl;
    struct timeval tv = {.tv_sec = 3};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    mbedtls_ssl_init(&ssl);
    if (mbedtls_ssl_setup(&ssl, &sv->conf) != 0)
        goto out;
    mbedtls_ssl_set_bio(&ssl, &net, mbedtls_net_send, mbedtls_net_recv, NULL);
    int r;
    while ((r = mbedtls_ssl_handshake(&ssl)) == MBEDTLS_ERR_SSL_WANT_READ ||
           r == MBEDTLS_ERR_SSL_WANT_WRITE)
        ;
    if (r != 0) {
        sv->handshakes_failed++;
        goto out;
    }
    sv->handshakes_ok++;
    char head[4096];
    size_t n = 0;
    while (n < sizeof head - 1 && !memmem(head, n, "\r\n\r\n", 4)) {
        r = mbedtls_ssl_read(&ssl, (unsigned char *)head + n, sizeof head - 1 - n);
        if (r <= 0)
            goto out;
        n += (size_t)r;
    }
    static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                 "Content-Length: 4\r\nConnection: close\r\n\r\nmtls";
    mbedtls_ssl_write(&ssl, (const unsigned char *)answer, sizeof answer - 1);
    mbedtls_ssl_close_notify(&ssl);
out:
    mbedtls_ssl_free(&ssl);
    close(fd);
}

static void *strict_main(void *arg)
{
    struct strict_server *sv = arg;
    while (!__atomic_load_n(&sv->stop, __ATOMIC_ACQUIRE)) {
        struct pollfd p = {.fd = sv->fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        int fd = accept(sv->fd, NULL, NULL);
        if (fd >= 0)
            strict_serve_one(sv, fd);
    }
    return NULL;
}

static void strict_start(struct strict_server *sv)
{
    char p[600];
    memset(sv, 0, sizeof *sv);
    mbedtls_ssl_config_init(&sv->conf);
    mbedtls_x509_crt_init(&sv->chain);
    mbedtls_x509_crt_init(&sv->ca);
    mbedtls_pk_init(&sv->key);
    assert_int_equal(pt_drbg_new(NULL, NULL, "strict-mtls", &sv->drbg), PT_OK);
    snprintf(p, sizeof p, "%s/server.pem", T.dir);
    assert_int_equal(mbedtls_x509_crt_parse_file(&sv->chain, p), 0);
    snprintf(p, sizeof p, "%s/ca.pem", T.dir);
    assert_int_equal(mbedtls_x509_crt_parse_file(&sv->ca, p), 0);
    snprintf(p, sizeof p, "%s/server.key", T.dir);
#if MBEDTLS_VERSION_NUMBER >= 0x03000000
    assert_int_equal(mbedtls_pk_parse_keyfile(&sv->key, p, NULL, pt_drbg_mbedtls_rng, sv->drbg), 0);
#else
    assert_int_equal(mbedtls_pk_parse_keyfile(&sv->key, p, NULL), 0);
#endif
    assert_int_equal(mbedtls_ssl_config_defaults(&sv->conf, MBEDTLS_SSL_IS_SERVER,
                                                 MBEDTLS_SSL_TRANSPORT_STREAM,
                                                 MBEDTLS_SSL_PRESET_DEFAULT),
                     0);
    assert_int_equal(mbedtls_ssl_conf_own_cert(&sv->conf, &sv->chain, &sv->key), 0);
    mbedtls_ssl_conf_rng(&sv->conf, pt_drbg_mbedtls_rng, sv->drbg);
    mbedtls_ssl_conf_authmode(&sv->conf, MBEDTLS_SSL_VERIFY_REQUIRED);
    mbedtls_ssl_conf_ca_chain(&sv->conf, &sv->ca, NULL);
    sv->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_int_equal(bind(sv->fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(sv->fd, 16), 0);
    getsockname(sv->fd, (struct sockaddr *)&a, &al);
    sv->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&sv->th, NULL, strict_main, sv), 0);
}

static void strict_stop(struct strict_server *sv)
{
    __atomic_store_n(&sv->stop, 1, __ATOMIC_RELEASE);
    pthread_join(sv->th, NULL);
    close(sv->fd);
    mbedtls_ssl_config_free(&sv->conf);
    mbedtls_x509_crt_free(&sv->chain);
    mbedtls_x509_crt_free(&sv->ca);
    mbedtls_pk_free(&sv->key);
    pt_drbg_destroy(sv->drbg);
}

static int strict_send(struct pt_curl *c, int port, const char *cert, const char *key,
                       struct pt_http_response *r)
{
    struct pt_http_request rq = mtls_request("localhost", port, "/secapi/pay/reverse", cert, key);
    int rc = pt_curl_send(c, "wechat", &rq, 5000, r);
    pt_http_request_free(&rq);
    return rc;
}

static void test_client_cert_server_requires_one(void **state)
{
    (void)state;
    char cert[600], key[600];
    mtls_files(cert, key);
    struct strict_server sv;
    strict_start(&sv);
    struct pt_curl *c = new_transport(T.cfg.ca_file);
    struct pt_http_response r = {0};
    /* With the certificate: the request gets through. */
    assert_int_equal(strict_send(c, sv.port, cert, key, &r), PT_OK);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "mtls");
    pt_http_response_free(&r);
    /* Without: the server refuses the handshake - nothing was sent. */
    assert_int_equal(strict_send(c, sv.port, NULL, NULL, &r), PT_ENOTSENT);
    assert_null(r.body);
    /* And with it again: fine, on a new connection (the server closed it). */
    assert_int_equal(strict_send(c, sv.port, cert, key, &r), PT_OK);
    assert_int_equal(r.status, 200);
    pt_http_response_free(&r);
    pt_curl_destroy(c);
    strict_stop(&sv);
    assert_int_equal(sv.handshakes_ok, 2);
    assert_int_equal(sv.handshakes_failed, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_keepalive_one_connection, clear),
        cmocka_unit_test_setup(test_server_closed_idle_connection_is_not_reused, clear),
        cmocka_unit_test_setup(test_threads_share_one_connection_per_channel, clear),
        cmocka_unit_test_setup(test_response_body_is_capped, clear),
        cmocka_unit_test_setup(test_response_body_cap_per_request, clear),
        cmocka_unit_test_setup(test_bad_options_and_requests_refused, clear),
        cmocka_unit_test_setup(test_wrong_ca_not_sent, clear),
        cmocka_unit_test_setup(test_connection_refused_not_sent, clear),
        cmocka_unit_test_setup(test_dns_failure_not_sent, clear),
        cmocka_unit_test_setup(test_refuse_connect_not_sent, clear),
        cmocka_unit_test_setup(test_refuse_connect_all_gateways, clear),
        cmocka_unit_test_setup(test_fail_before_commit_no_answer_nothing_recorded, clear),
        cmocka_unit_test_setup(test_drop_after_commit_on_fresh_connection, clear),
        cmocka_unit_test_setup(test_drop_after_commit_on_reused_connection_is_not_resent, clear),
        cmocka_unit_test_setup(test_http_500_after_commit_is_an_answer, clear),
        cmocka_unit_test_setup(test_delay_past_timeout_no_answer, clear),
        cmocka_unit_test_setup(test_busy_channel_past_timeout_not_sent, clear),
        cmocka_unit_test_setup(test_client_cert_connections_never_mix, clear),
        cmocka_unit_test_setup(test_client_cert_file_unreadable_not_sent, clear),
        cmocka_unit_test_setup(test_client_cert_server_requires_one, clear),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
