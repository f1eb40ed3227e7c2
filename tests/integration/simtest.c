/*
 * simtest.c - simulator fixtures for the integration tests (see simtest.h).
 */
#define _GNU_SOURCE /* strcasestr */
#include "simtest.h"
#include "testutil.h"

#include "err.h"
#include "config_load.h"
#include "gw_config.h"
#include "log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

const char *const simtest_gw_names[ST__COUNT] = {"alipay", "wechat", "stripe", "2c2p"};

void simtest_sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

void simtest_order_id(char *out, size_t outlen, const char *prefix)
{
    static int n;
    snprintf(out, outlen, "T-%s-%d-%d", prefix, ++n, (int)getpid() % 100000);
}

static void load_configs(struct simtest *t)
{
    char path[600], err[768];
    snprintf(path, sizeof path, "%s/gateways.json", t->dir);
    const char *paths[1] = {path};
    int rc = pt_config_load(paths, 1, &t->cfg, err, sizeof err);
    if (rc != PT_OK)
        fail_msg("%s", err);
    /* payterm refuses secrets others can read: the files must pass as written. */
    rc = pt_config_check_secrets(&t->cfg, err, sizeof err);
    if (rc != PT_OK)
        fail_msg("%s", err);
    for (int g = 0; g < ST__COUNT; g++) {
        pt_gw_config_free(&t->gw[g]);
        rc =
            pt_gw_config_load(&t->cfg, simtest_gw_names[g], NULL, NULL, &t->gw[g], err, sizeof err);
        if (rc != PT_OK)
            fail_msg("%s", err);
    }
    pt_curl_destroy(t->curl);
    t->curl = NULL;
    struct pt_curl_options co = {.ca_file = t->cfg.ca_file};
    assert_int_equal(pt_curl_new(&co, &t->curl), PT_OK);
}

static void start_sim(struct simtest *t)
{
    char err[768];
    int rc = pt_sim_start(&t->opt, &t->sim, err, sizeof err);
    if (rc != PT_OK)
        fail_msg("pt_sim_start: %s", err);
    t->port = pt_sim_port(t->sim);
    load_configs(t);
}

void simtest_start(struct simtest *t, const struct pt_sim_options *opt)
{
    memset(t, 0, sizeof *t);
    signal(SIGPIPE, SIG_IGN);
    /* PT_TEST_VERBOSE=1: the simulator's request log; =debug: curl's too. */
    const char *v = getenv("PT_TEST_VERBOSE");
    pt_log_set_level(!v ? PT_LOG_ERROR : strcmp(v, "debug") == 0 ? PT_LOG_DEBUG : PT_LOG_INFO);
    pt_test_tmpdir(t->dir, sizeof t->dir);
    if (opt)
        t->opt = *opt;
    t->opt.dir = t->dir;
    t->opt.listen = "127.0.0.1:0";
    t->opt.quiet = !v;
    if (!t->opt.pay_delay_ms)
        t->opt.pay_delay_ms = 300;
    if (!t->opt.notify_retry_ms)
        t->opt.notify_retry_ms = 100;
    start_sim(t);
}

void simtest_restart(struct simtest *t)
{
    pt_sim_stop(t->sim);
    t->sim = NULL;
    start_sim(t);
}

void simtest_stop(struct simtest *t)
{
    pt_curl_destroy(t->curl);
    pt_sim_stop(t->sim);
    for (int g = 0; g < ST__COUNT; g++)
        pt_gw_config_free(&t->gw[g]);
    pt_test_rmtree(t->dir);
    memset(t, 0, sizeof *t);
}

/* A request to the control endpoints (same port; no gateway name). */
static int control(struct simtest *t, const char *method, const char *path, const char *body,
                   struct pt_http_response *resp)
{
    struct pt_http_request rq = {0};
    char url[256];
    snprintf(url, sizeof url, "https://localhost:%d%s", t->port, path);
    snprintf(rq.method, sizeof rq.method, "%s", method);
    rq.url = strdup(url);
    if (body) {
        rq.body = strdup(body);
        rq.body_len = strlen(body);
        pt_http_request_add_header(&rq, "Content-Type", "application/json");
    }
    int rc = pt_curl_send(t->curl, "_sim", &rq, 10000, resp);
    pt_http_request_free(&rq);
    return rc;
}

void simtest_fault(struct simtest *t, const char *json)
{
    struct pt_http_response r = {0};
    assert_int_equal(control(t, "POST", "/_sim/faults", json, &r), PT_OK);
    if (r.status != 200)
        fail_msg("POST /_sim/faults %s -> %d %s", json, r.status, r.body);
    pt_http_response_free(&r);
}

cJSON *simtest_ledger_row(struct simtest *t, const char *gateway, const char *order_id)
{
    struct pt_http_response r = {0};
    char path[256];
    snprintf(path, sizeof path, "/_sim/ledger?gateway=%s&order_id=%s", gateway, order_id);
    assert_int_equal(control(t, "GET", path, NULL, &r), PT_OK);
    assert_int_equal(r.status, 200);
    cJSON *j = cJSON_ParseWithLength(r.body, r.body_len);
    pt_http_response_free(&r);
    cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data");
    assert_true(cJSON_IsArray(data));
    cJSON *row = NULL;
    if (cJSON_GetArraySize(data) > 0)
        row = cJSON_DetachItemFromArray(data, 0);
    assert_true(cJSON_GetArraySize(data) == 0); /* one row per (gateway, order) */
    cJSON_Delete(j);
    return row;
}

int simtest_captures(struct simtest *t, const char *gateway, const char *order_id, char status[16])
{
    cJSON *row = simtest_ledger_row(t, gateway, order_id);
    if (!row) {
        if (status)
            snprintf(status, 16, "%s", "");
        return -1;
    }
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(row, "captures");
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(row, "status");
    if (status)
        snprintf(status, 16, "%s", cJSON_IsString(st) ? st->valuestring : "?");
    int n = cJSON_IsNumber(c) ? c->valueint : -2;
    cJSON_Delete(row);
    return n;
}

void simtest_charge(struct pt_charge *c, int gw, const char *order_id, int64_t amount,
                    const char *currency)
{
    static const char *const methods[ST__COUNT] = {"barcode", "qr", "card_on_file", "redirect"};
    memset(c, 0, sizeof *c);
    snprintf(c->order_id, sizeof c->order_id, "%s", order_id);
    snprintf(c->gateway, sizeof c->gateway, "%s", simtest_gw_names[gw]);
    snprintf(c->method, sizeof c->method, "%s", methods[gw]);
    c->amount = amount;
    snprintf(c->currency, sizeof c->currency, "%s", currency);
    snprintf(c->subject, sizeof c->subject, "Large latte");
    if (gw == ST_ALIPAY)
        snprintf(c->payment_code, sizeof c->payment_code, "287634438256643941");
    if (gw == ST_STRIPE)
        snprintf(c->payment_method, sizeof c->payment_method, "pm_card_visa");
}

int simtest_call_with(struct pt_curl *curl, const struct pt_gw_config *cfg, int gw,
                      enum pt_gw_op op, const struct pt_charge *c, int timeout_ms,
                      struct pt_gw_result *res, struct pt_http_response *raw)
{
    const struct pt_gateway *g = pt_gateway_find(simtest_gw_names[gw]);
    struct pt_http_request rq = {0};
    struct pt_http_response resp = {0};
    char nonce[33];
    static unsigned counter;
    snprintf(nonce, sizeof nonce, "%08x%024d", ++counter, (int)getpid());
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct pt_gw_env env = {.now_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000,
                            .nonce = nonce};
    assert_non_null(g);
    int rc = g->build(cfg, op, c, &env, &rq);
    if (rc != PT_OK)
        fail_msg("%s build op %d: %s", g->name, op, pt_strerror(rc));
    rc = pt_curl_send(curl, g->name, &rq, timeout_ms, &resp);
    pt_http_request_free(&rq);
    memset(res, 0, sizeof *res);
    if (rc == PT_OK)
        assert_int_equal(g->parse(cfg, op, c, &resp, res), PT_OK);
    if (raw)
        *raw = resp;
    else
        pt_http_response_free(&resp);
    return rc;
}

int simtest_call(struct simtest *t, int gw, enum pt_gw_op op, const struct pt_charge *c,
                 int timeout_ms, struct pt_gw_result *res, struct pt_http_response *raw)
{
    return simtest_call_with(t->curl, &t->gw[gw], gw, op, c, timeout_ms, res, raw);
}

/* ---- notification receiver --------------------------------------------------- */

static void reply(int fd, const char *path, int wrong)
{
    const char *status = "200 OK", *ctype = "application/json", *body = "{\"code\":\"SUCCESS\"}";
    if (strcmp(path, "/notify/alipay") == 0) {
        ctype = "text/plain";
        body = wrong ? "ok" : "success"; /* Alipay wants exactly "success" */
    } else if (strcmp(path, "/webhooks/stripe") == 0) {
        status = wrong ? "400 Bad Request" : "200 OK";
        body = wrong ? "{\"error\":\"try later\"}" : "{\"received\":true}";
    } else if (strcmp(path, "/notify/wechat") == 0) {
        status = wrong ? "500 Internal Server Error" : "200 OK";
        body = wrong ? "{\"code\":\"FAIL\",\"message\":\"busy\"}" : "{\"code\":\"SUCCESS\"}";
    } else if (wrong) {
        status = "500 Internal Server Error";
        body = "busy";
    } else {
        body = "";
        ctype = "text/plain";
    }
    char out[512];
    int n = snprintf(out, sizeof out,
                     "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s",
                     status, ctype, strlen(body), body);
    if (write(fd, out, (size_t)n) < 0)
        return;
}

static void serve_one(struct receiver *r, int fd)
{
    char *buf = malloc(256 * 1024);
    size_t len = 0, need = 0, head = 0;
    if (!buf)
        return;
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (;;) {
        ssize_t n = read(fd, buf + len, 256 * 1024 - 1 - len);
        if (n <= 0)
            goto out;
        len += (size_t)n;
        buf[len] = '\0';
        if (!head) {
            char *e = strstr(buf, "\r\n\r\n");
            if (!e)
                continue;
            head = (size_t)(e - buf) + 4;
            const char *cl = strcasestr(buf, "\r\nContent-Length:");
            need = head + (cl ? strtoul(cl + 17, NULL, 10) : 0);
        }
        if (len >= need)
            break;
    }
    struct recv_msg m = {0};
    sscanf(buf, "%*s %63s", m.path);
    char *line = strstr(buf, "\r\n") + 2;
    while (line < buf + head - 2) {
        char *eol = strstr(line, "\r\n");
        *eol = '\0';
        char *colon = strchr(line, ':');
        if (colon) {
            *colon = '\0';
            char *v = colon + 1;
            while (*v == ' ')
                v++;
            pt_http_response_add_header(&m.msg, line, v);
        }
        line = eol + 2;
    }
    m.msg.body = malloc(need - head + 1);
    memcpy(m.msg.body, buf + head, need - head);
    m.msg.body[need - head] = '\0';
    m.msg.body_len = need - head;
    pthread_mutex_lock(&r->lk);
    int wrong = r->wrong_given < r->wrong_first;
    if (wrong)
        r->wrong_given++;
    if (r->n < RECV_MAX)
        r->msgs[r->n++] = m;
    else
        pt_http_response_free(&m.msg);
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lk);
    reply(fd, m.path, wrong);
out:
    free(buf);
}

static void *receiver_main(void *arg)
{
    struct receiver *r = arg;
    struct pollfd p[2] = {{.fd = r->fd, .events = POLLIN},
                          {.fd = r->stop_pipe[0], .events = POLLIN}};
    while (poll(p, 2, -1) >= 0 && !(p[1].revents & POLLIN)) {
        if (!(p[0].revents & POLLIN))
            continue;
        int fd = accept(r->fd, NULL, NULL);
        if (fd < 0)
            continue;
        serve_one(r, fd);
        close(fd);
    }
    return NULL;
}

void receiver_start(struct receiver *r)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->lk, NULL);
    pthread_cond_init(&r->cond, NULL);
    r->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_int_equal(bind(r->fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(r->fd, 64), 0);
    getsockname(r->fd, (struct sockaddr *)&a, &al);
    r->port = ntohs(a.sin_port);
    assert_int_equal(pipe(r->stop_pipe), 0);
    assert_int_equal(pthread_create(&r->thread, NULL, receiver_main, r), 0);
}

void receiver_stop(struct receiver *r)
{
    char b = 1;
    if (write(r->stop_pipe[1], &b, 1) == 1)
        pthread_join(r->thread, NULL);
    close(r->fd);
    close(r->stop_pipe[0]);
    close(r->stop_pipe[1]);
    for (int i = 0; i < r->n; i++)
        pt_http_response_free(&r->msgs[i].msg);
    pthread_mutex_destroy(&r->lk);
    pthread_cond_destroy(&r->cond);
}

static int count(struct receiver *r, const char *needle)
{
    int n = 0;
    for (int i = 0; i < r->n; i++)
        n += !needle || strstr(r->msgs[i].msg.body, needle) != NULL;
    return n;
}

int receiver_wait(struct receiver *r, const char *needle, int n, int timeout_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->lk);
    int have;
    while ((have = count(r, needle)) < n &&
           pthread_cond_timedwait(&r->cond, &r->lk, &until) != ETIMEDOUT)
        ;
    have = count(r, needle);
    pthread_mutex_unlock(&r->lk);
    return have;
}
