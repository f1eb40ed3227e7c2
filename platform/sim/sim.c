/*
 * sim.c - the simulator's HTTPS server: listener, connections, HTTP/1.1,
 * routing, faults and the /_sim control endpoints.
 *
 * One thread per TLS connection (at most SIM_MAX_CONNS): a connection reads
 * a request, answers it and waits for the next one (keep-alive) until the
 * client closes, it sits idle past idle_timeout_ms, or the server stops.  A
 * thread per connection keeps delay faults and the Stripe "request still in
 * flight" case trivial, and the simulator never needs more than a handful of
 * connections.  Threads block in poll(2) on their socket and a wake-up
 * eventfd: nothing spins.
 *
 * Gateways are told apart by path (/gateway.do Alipay, /v3/, /pay/ and
 * /secapi/ WeChat, /v1/ Stripe, /payment/4.3/ and the Payment Maintenance
 * /PaymentAction/2.0/action 2C2P).  The TLS server name (SNI) is used for one
 * thing only: refuse_connect for a single gateway, which has to act before
 * the client has written a byte, i.e. during the handshake, when no path is
 * known yet.  gateways.json therefore names each gateway by its own host
 * (alipay.localhost, wechat.localhost, ... - libcurl >= 7.85 resolves
 * *.localhost to the loopback addresses by itself, RFC 6761), all served by
 * this one port and one certificate.
 *
 * Faults (POST /_sim/faults) apply to the next N gateway requests that match:
 *   refuse_connect        the TLS handshake is refused (SNI names the gateway;
 *                         "*" means every gateway host name; connections
 *                         without one - the control plane - are never
 *                         refused), and kept-alive connections of that
 *                         gateway are closed first, so the client has to
 *                         reconnect: nothing of the request is ever read.
 *   fail_before_commit    the request is read, nothing is recorded, the
 *                         connection is reset.
 *   drop_after_commit     the request is processed and recorded, then the
 *                         connection is reset without an answer.
 *   http_500_after_commit processed and recorded, answered with HTTP 500.
 *   delay                 the answer (and the commit) waits delay_ms.
 * "method" and "path" (a prefix) narrow a fault to some requests: with
 * "path":"/v3/certificates" WeChat's certificate download fails while its
 * payments go through.  The prefix is matched against the request's target,
 * query included: "/v3/bill/tradebill?bill_date=2026-12-04" fails one day's
 * bill.  "process_type" (R, RS, I) narrows one to 2C2P
 * Payment Maintenance requests of that processType, so a fault can hit a
 * refund and not its status query; the request has to be read for that,
 * so it does not combine with refuse_connect.
 *
 * POST /_sim/rotate {"gateway":"wechat"} replaces WeChat's platform key
 * (sim_files.c issues it, sim_wechat.c signs with it).
 *
 * POST /_sim/clock {"advance_ms":N} lets N ms pass for the gateways at once:
 * orders expire, timers fall due (a test moves payterm's clocks as much).
 * POST /_sim/scan {"gateway":...,"order_id":...} is a customer who scans a
 * code and does not pay (Alipay creates a precreated code's trade then).
 *
 * Client certificates.  The TLS server asks every client for a certificate
 * but does not insist (MBEDTLS_SSL_VERIFY_OPTIONAL): WeChat Pay's
 * api.mch.weixin.qq.com serves its certificate-free routes (/pay/micropay)
 * and its mutual-TLS ones (/secapi/pay/reverse) on one host, and so do we.
 * What the handshake proved is recorded per connection (enum
 * sim_client_cert) and the /secapi/ handlers refuse a request whose
 * connection did not present the merchant certificate we issued.
 */
#define _GNU_SOURCE /* accept4, pipe2, memmem: this file is Linux-only */
#include "sim_int.h"

#include "crypto.h"
#include "err.h"
#include "log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>

#define HANDSHAKE_TIMEOUT_MS 10000
#define REQUEST_TIMEOUT_MS 10000 /* rest of a request once its first byte came */
#define SEND_TIMEOUT_S 5

struct sim_conn {
    struct pt_sim *s;
    int fd;
    int wake_fd; /* eventfd: stop, or close when the gateway "goes away" */
    mbedtls_ssl_context ssl;
    int gw;                           /* from SNI or the first request's path; SIM_GW_ANY */
    int kicked;                       /* asked to close (lk) */
    int timeout_ms;                   /* for the next read */
    int refused;                      /* handshake refused by a fault */
    enum sim_client_cert client_cert; /* what the handshake proved */
    char rbuf[SIM_HEAD_MAX];
    size_t rlen; /* bytes of the next request already read */
    struct sim_conn *next;
    pthread_t thread;
};

/* The connection served by this thread: mbedTLS's SNI callback has no per
 * connection argument, and each connection has its own thread. */
static _Thread_local struct sim_conn *tl_conn;

static const char *const gw_names[SIM_GW__COUNT] = {"alipay", "wechat", "stripe", "2c2p"};
static const char *const mode_names[] = {
    "none", "refuse_connect", "fail_before_commit", "drop_after_commit", "http_500_after_commit",
    "delay"};

const char *pt__sim_gw_name(int gw)
{
    return gw >= 0 && gw < SIM_GW__COUNT ? gw_names[gw] : "*";
}

int pt__sim_gw_parse(const char *name)
{
    if (strcmp(name, "*") == 0)
        return SIM_GW_ANY;
    for (int i = 0; i < SIM_GW__COUNT; i++)
        if (strcmp(name, gw_names[i]) == 0)
            return i;
    return -2;
}

const struct sim_gateway *pt__sim_gateway(int gw)
{
    static const struct sim_gateway *const table[SIM_GW__COUNT] = {&pt__sim_alipay, &pt__sim_wechat,
                                                                   &pt__sim_stripe, &pt__sim_2c2p};
    return gw >= 0 && gw < SIM_GW__COUNT ? table[gw] : NULL;
}

void pt__sim_lock(struct pt_sim *s)
{
    pthread_mutex_lock(&s->lk);
    pt__sim_db_begin(s);
}

void pt__sim_unlock(struct pt_sim *s)
{
    pt__sim_db_commit(s);
    pthread_mutex_unlock(&s->lk);
}

int pt__sim_random(struct pt_sim *s, void *buf, size_t len)
{
    return pt_drbg_random(s->drbg, buf, len);
}

int pt_sim_port(const struct pt_sim *s)
{
    return s->port;
}

/* ---- faults ----------------------------------------------------------------- */

/* Takes one matching fault (lk held); SIM_FAULT_NONE when none matches. */
static enum sim_fault_mode fault_take(struct pt_sim *s, int gw, const char *method,
                                      const char *path, const char *ptype, int refuse,
                                      int *delay_ms)
{
    for (int i = 0; i < s->nfaults; i++) {
        struct sim_fault *f = &s->faults[i];
        if ((f->mode == SIM_FAULT_REFUSE_CONNECT) != refuse)
            continue;
        if (f->gw != SIM_GW_ANY && f->gw != gw)
            continue;
        if (f->method[0] && (!method || strcmp(f->method, method) != 0))
            continue;
        if (f->path[0] && (!path || strncmp(path, f->path, strlen(f->path)) != 0))
            continue;
        if (strcmp(f->process_type, ptype ? ptype : "") != 0)
            continue; /* serve() matches unnarrowed faults, a handler narrowed ones */
        enum sim_fault_mode m = f->mode;
        if (delay_ms)
            *delay_ms = f->delay_ms;
        if (f->count > 0 && --f->count == 0) {
            memmove(f, f + 1, (size_t)(s->nfaults - i - 1) * sizeof *f);
            s->nfaults--;
        }
        return m;
    }
    return SIM_FAULT_NONE;
}

static void sleep_interruptible(struct pt_sim *s, int ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    /* The connection-list condition doubles as a "stop" broadcast, so a
     * delay is cut short when the server stops. */
    pthread_mutex_lock(&s->lk);
    while (!s->stopping && pthread_cond_timedwait(&s->conns_cond, &s->lk, &until) != ETIMEDOUT)
        ;
    pthread_mutex_unlock(&s->lk);
}

void pt__sim_fault_for(struct sim_call *c, const char *process_type)
{
    if (c->mode != SIM_FAULT_NONE || !process_type || !*process_type)
        return;
    pthread_mutex_lock(&c->s->lk);
    c->mode = fault_take(c->s, c->gw, "POST", c->path, process_type, 0, &c->delay_ms);
    pthread_mutex_unlock(&c->s->lk);
}

int pt__sim_commit_gate(struct sim_call *c, struct sim_resp *rs)
{
    if (c->gated)
        return 0;
    c->gated = 1;
    if (c->mode == SIM_FAULT_FAIL_BEFORE_COMMIT) {
        rs->drop = 1;
        return -1;
    }
    if (c->mode == SIM_FAULT_DELAY && c->delay_ms > 0)
        sleep_interruptible(c->s, c->delay_ms);
    return 0;
}

/* Closes the kept-alive connections of gw (all for SIM_GW_ANY; a request in
 * progress is answered first) and waits (at most 2 s) until they are gone, so
 * that the client's next request must open a new connection, which the armed
 * refuse_connect then refuses. */
static void close_connections(struct pt_sim *s, int gw, struct sim_conn *self)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2;
    pthread_mutex_lock(&s->lk);
    for (;;) {
        int waiting = 0;
        for (struct sim_conn *c = s->conns; c; c = c->next) {
            if (c == self || (gw != SIM_GW_ANY && c->gw != gw))
                continue;
            /* A connection still finishing an answer closes right after it
             * (the client may already hold that answer while the thread has
             * not yet left the request: that race is why busy ones count). */
            if (!c->kicked) {
                uint64_t one = 1;
                c->kicked = 1;
                if (write(c->wake_fd, &one, sizeof one) < 0)
                    pt_log_warn("sim: cannot wake a connection: %s", strerror(errno));
            }
            waiting = 1;
        }
        if (!waiting || pthread_cond_timedwait(&s->conns_cond, &s->lk, &until) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&s->lk);
}

static cJSON *faults_json(struct pt_sim *s)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(root, "faults");
    for (int i = 0; arr && i < s->nfaults; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "gateway", pt__sim_gw_name(s->faults[i].gw));
        cJSON_AddStringToObject(o, "mode", mode_names[s->faults[i].mode]);
        cJSON_AddNumberToObject(o, "count", s->faults[i].count);
        cJSON_AddNumberToObject(o, "delay_ms", s->faults[i].delay_ms);
        if (s->faults[i].method[0])
            cJSON_AddStringToObject(o, "method", s->faults[i].method);
        if (s->faults[i].path[0])
            cJSON_AddStringToObject(o, "path", s->faults[i].path);
        if (s->faults[i].process_type[0])
            cJSON_AddStringToObject(o, "process_type", s->faults[i].process_type);
        cJSON_AddItemToArray(arr, o);
    }
    return root;
}

static void bad_request(struct sim_resp *rs, const char *msg)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "code", "invalid_request");
    cJSON_AddStringToObject(e, "message", msg);
    pt__sim_resp_json(rs, 400, o);
}

/* POST /_sim/faults {"gateway":"*"|name,"mode":...,"count":N,"delay_ms":N,"method":M,
 * "path":P,"process_type":T} */
static void post_faults(struct pt_sim *s, struct sim_conn *self, const struct sim_req *rq,
                        struct sim_resp *rs)
{
    char msg[200];
    cJSON *j = cJSON_ParseWithLength(rq->body, rq->body_len);
    const char *mode = pt__sim_json_str(j, "mode");
    const char *gwname = pt__sim_json_str(j, "gateway");
    int64_t count = 1, delay = 0;
    int gw = SIM_GW_ANY;
    enum sim_fault_mode m = SIM_FAULT_NONE;
    if (!cJSON_IsObject(j) || !mode) {
        bad_request(rs, "body must be a JSON object with \"mode\"");
        goto out;
    }
    for (size_t i = 0; i < sizeof mode_names / sizeof mode_names[0]; i++)
        if (strcmp(mode, mode_names[i]) == 0)
            m = (enum sim_fault_mode)i;
    if (m == SIM_FAULT_NONE && strcmp(mode, "none") != 0) {
        snprintf(msg, sizeof msg,
                 "mode: unknown \"%.40s\" (none, refuse_connect, fail_before_commit, "
                 "drop_after_commit, http_500_after_commit, delay)",
                 mode);
        bad_request(rs, msg);
        goto out;
    }
    if (gwname && (gw = pt__sim_gw_parse(gwname)) == -2) {
        snprintf(msg, sizeof msg, "gateway: unknown \"%.40s\" (*, alipay, wechat, stripe, 2c2p)",
                 gwname);
        bad_request(rs, msg);
        goto out;
    }
    if (cJSON_GetObjectItemCaseSensitive(j, "count") &&
        (pt__sim_json_int(j, "count", &count) || count == 0 || count < -1 || count > 1000000)) {
        bad_request(rs, "count: must be a positive integer (or -1: until cleared)");
        goto out;
    }
    if (cJSON_GetObjectItemCaseSensitive(j, "delay_ms") &&
        (pt__sim_json_int(j, "delay_ms", &delay) || delay < 0 || delay > 600000)) {
        bad_request(rs, "delay_ms: must be an integer from 0 to 600000");
        goto out;
    }
    /* "method": only requests with that HTTP method (a probe's GET passes). */
    const char *method = pt__sim_json_str(j, "method");
    if (method && strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0) {
        bad_request(rs, "method: GET or POST");
        goto out;
    }
    /* "path": only requests whose target (path and query) starts so (e.g.
     * /v3/certificates: the certificate download fails, the payments do
     * not). */
    const char *path = pt__sim_json_str(j, "path");
    if (path && (path[0] != '/' || strlen(path) >= sizeof(((struct sim_fault *)0)->path))) {
        bad_request(rs, "path: a path prefix starting with /, at most 63 characters");
        goto out;
    }
    /* "process_type": only 2C2P Payment Maintenance requests of it. */
    const char *ptype = pt__sim_json_str(j, "process_type");
    if (ptype && strcmp(ptype, "R") != 0 && strcmp(ptype, "RS") != 0 && strcmp(ptype, "I") != 0) {
        bad_request(rs, "process_type: R, RS or I (2C2P Payment Maintenance)");
        goto out;
    }
    if (ptype && m == SIM_FAULT_REFUSE_CONNECT) {
        bad_request(rs, "process_type: refuse_connect acts before a request is read");
        goto out;
    }
    if (m == SIM_FAULT_DELAY && delay == 0) {
        bad_request(rs, "delay_ms: required (> 0) for mode delay");
        goto out;
    }
    pthread_mutex_lock(&s->lk);
    if (m == SIM_FAULT_NONE) {
        /* Clears the gateway's faults, or all of them for "*" / no gateway. */
        int k = 0;
        for (int i = 0; i < s->nfaults; i++)
            if (gw != SIM_GW_ANY && s->faults[i].gw != gw)
                s->faults[k++] = s->faults[i];
        s->nfaults = k;
    } else if (s->nfaults >= SIM_MAX_FAULTS) {
        pthread_mutex_unlock(&s->lk);
        bad_request(rs, "too many faults armed (16); clear some with {\"mode\":\"none\"}");
        goto out;
    } else {
        struct sim_fault f = {.gw = gw, .mode = m, .count = (int)count, .delay_ms = (int)delay};
        if (method)
            snprintf(f.method, sizeof f.method, "%s", method);
        if (path)
            snprintf(f.path, sizeof f.path, "%s", path);
        if (ptype)
            snprintf(f.process_type, sizeof f.process_type, "%s", ptype);
        s->faults[s->nfaults++] = f;
    }
    cJSON *list = faults_json(s);
    pthread_mutex_unlock(&s->lk);
    if (m == SIM_FAULT_REFUSE_CONNECT)
        close_connections(s, gw, self);
    pt_log_info("sim: fault %s for %s, count %lld%s", mode, pt__sim_gw_name(gw), (long long)count,
                m == SIM_FAULT_DELAY ? " (delay)" : "");
    pt__sim_resp_json(rs, 200, list);
out:
    cJSON_Delete(j);
}

/* Reads "name=value" from a query string into out (decoded); 0 when found. */
static int query_param(const char *q, const char *name, char *out, size_t outlen)
{
    size_t nl = strlen(name);
    while (q && *q) {
        const char *amp = strchr(q, '&');
        size_t seg = amp ? (size_t)(amp - q) : strlen(q);
        if (seg > nl && strncmp(q, name, nl) == 0 && q[nl] == '=')
            return pt__sim_url_decode(q + nl + 1, seg - nl - 1, 1, out, outlen) == PT_OK ? 0 : -1;
        q = amp ? amp + 1 : NULL;
    }
    return -1;
}

/*
 * POST /_sim/pay {"gateway":name,"order_id":id}: the customer of a pending
 * trade pays now, and the gateway sends no notification of it - so a test
 * can deliver (or forge) the notification itself, for a trade the gateway
 * really has paid.  404 for no such trade, 409 when it is not pending.
 */
/*
 * The trade a test's request names by its body {"gateway","order_id"}: a
 * new trade holding just those two (the caller reads the rest and frees
 * it), or NULL with 400 answered.
 */
static struct sim_trade *named_trade(const struct sim_req *rq, struct sim_resp *rs)
{
    cJSON *j = cJSON_ParseWithLength(rq->body, rq->body_len);
    const char *gwname = pt__sim_json_str(j, "gateway"), *order = pt__sim_json_str(j, "order_id");
    int gw = gwname ? pt__sim_gw_parse(gwname) : -2;
    struct sim_trade *t = calloc(1, sizeof *t);
    if (!t || gw < 0 || !order || strlen(order) >= sizeof t->order_id) {
        bad_request(rs, "body must be {\"gateway\": alipay|wechat|stripe|2c2p, \"order_id\": ...}");
        free(t);
        t = NULL;
    } else {
        t->gw = gw;
        snprintf(t->order_id, sizeof t->order_id, "%s", order);
    }
    cJSON_Delete(j);
    return t;
}

static void post_pay(struct pt_sim *s, const struct sim_req *rq, struct sim_resp *rs)
{
    struct sim_trade *t = named_trade(rq, rs);
    if (!t)
        return;
    pt__sim_lock(s);
    int rc = pt__sim_trade_get(s, t->gw, t->order_id, t);
    if (rc == PT_OK && pt__sim_expired(s, t)) {
        rc = 410; /* past the expiry its create named: the gateway takes no payment */
    } else if (rc == PT_OK && strcmp(t->status, "pending") == 0) {
        snprintf(t->status, sizeof t->status, "captured");
        t->captures++;
        t->pay_at = 0;
        t->paid_at = t->updated_at = pt__sim_now_ms(s);
        rc = pt__sim_trade_update(s, t);
        rc = rc == PT_OK ? 0 : 500;
    } else {
        rc = rc == PT_OK ? 409 : 404;
    }
    pt__sim_unlock(s);
    if (rc) {
        bad_request(rs, rc == 404   ? "no such trade"
                        : rc == 409 ? "the trade is not pending"
                        : rc == 410 ? "the order expired: it can no longer be paid"
                                    : "ledger error");
        rs->status = rc == 410 ? 409 : rc;
        goto out;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "order_id", t->order_id);
    cJSON_AddStringToObject(o, "trade_no", t->trade_no);
    cJSON_AddStringToObject(o, "status", t->status);
    pt__sim_resp_json(rs, 200, o);
    pt__sim_note(rs, "%s paid by the test", t->order_id);
out:
    free(t);
}

/*
 * POST /_sim/ledger/alter {"gateway","order_id","amount"?,"currency"?} |
 * {"gateway","refund_id","amount"} and POST /_sim/ledger/forget
 * {"gateway","order_id"} | {"gateway","refund_id"} (SPEC 19): what the
 * gateway's books say changes - a trade's amount or currency, a refund's
 * amount, or a line left out of the bills - so that a test reaches every
 * discrepancy.
 */
static void post_ledger_change(struct pt_sim *s, const struct sim_req *rq, struct sim_resp *rs,
                               int forget)
{
    cJSON *j = cJSON_ParseWithLength(rq->body, rq->body_len);
    const char *gwname = pt__sim_json_str(j, "gateway"), *order = pt__sim_json_str(j, "order_id");
    const char *refund = pt__sim_json_str(j, "refund_id");
    int gw = gwname ? pt__sim_gw_parse(gwname) : -2;
    const char *currency = pt__sim_json_str(j, "currency");
    int64_t amount = -1;
    int has_amount = cJSON_GetObjectItemCaseSensitive(j, "amount") != NULL;
    int bad_amount = has_amount && (pt__sim_json_int(j, "amount", &amount) || amount <= 0);
    int bad_currency =
        currency && (strlen(currency) != 3 || strspn(currency, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != 3);
    if (gw < 0 || !order == !refund ||
        (!forget && (bad_amount || bad_currency ||
                     (refund ? !has_amount || currency : !has_amount && !currency)))) {
        bad_request(rs, forget ? "body must be {\"gateway\": alipay|wechat|stripe|2c2p, "
                                 "\"order_id\": ...} or {\"gateway\", \"refund_id\"}"
                               : "body must be {\"gateway\": alipay|wechat|stripe|2c2p, "
                                 "\"order_id\": ..., \"amount\": minor units > 0 and/or "
                                 "\"currency\": ISO 4217} or {\"gateway\", \"refund_id\", "
                                 "\"amount\"}");
        cJSON_Delete(j);
        return;
    }
    pt__sim_lock(s);
    int rc = forget ? pt__sim_ledger_forget(s, gw, order, refund)
                    : pt__sim_ledger_alter(s, gw, order, refund, amount, currency);
    pt__sim_unlock(s);
    if (rc == PT_OK) {
        pt__sim_resp_set(rs, 200, "application/json", "{\"ok\":true}", 11);
        pt__sim_note(rs, "%s %s %s", forget ? "forgot" : "altered", gwname, order ? order : refund);
    } else {
        bad_request(rs, rc == PT_ENOTFOUND ? "no such trade or refund" : "ledger error");
        rs->status = rc == PT_ENOTFOUND ? 404 : 500;
    }
    cJSON_Delete(j);
}

/*
 * POST /_sim/scan {"gateway":name,"order_id":id}: the customer of a pending
 * code scans it and leaves without paying.  Alipay creates the trade of a
 * precreated code at the scan (an unscanned code's close is answered
 * ACQ.TRADE_NOT_EXIST); the others do not care.  404 no such trade, 409
 * not pending (or expired).
 */
static void post_scan(struct pt_sim *s, const struct sim_req *rq, struct sim_resp *rs)
{
    struct sim_trade *t = named_trade(rq, rs);
    if (!t)
        return;
    int st = 500;
    pt__sim_lock(s);
    int rc = pt__sim_trade_get(s, t->gw, t->order_id, t);
    if (rc == PT_OK && strcmp(t->status, "pending") == 0 && !pt__sim_expired(s, t)) {
        pt__sim_extra_set_int(t, "scanned", 1);
        t->updated_at = pt__sim_now_ms(s);
        st = pt__sim_trade_update(s, t) == PT_OK ? 200 : 500;
    } else if (rc == PT_OK || rc == PT_ENOTFOUND) {
        st = rc == PT_OK ? 409 : 404;
    }
    pt__sim_unlock(s);
    if (st != 200) {
        bad_request(rs, st == 404   ? "no such trade"
                        : st == 409 ? "not a code to scan"
                                    : "ledger error");
        rs->status = st;
        goto out;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "order_id", t->order_id);
    cJSON_AddBoolToObject(o, "scanned", 1);
    pt__sim_resp_json(rs, 200, o);
    pt__sim_note(rs, "%s scanned by the test", t->order_id);
out:
    free(t);
}

/*
 * POST /_sim/clock {"advance_ms":N}: N ms pass for the gateways at once -
 * their time (created, paid and expiry times, signatures, Stripe's key
 * window) is the real clock plus every advance so far.  Only forward: a
 * gateway's clock never goes back.  Answers the total.
 */
static void post_clock(struct pt_sim *s, const struct sim_req *rq, struct sim_resp *rs)
{
    cJSON *j = cJSON_ParseWithLength(rq->body, rq->body_len);
    int64_t ms = -1;
    if (pt__sim_json_int(j, "advance_ms", &ms) != 0 || ms < 0 || ms > 366LL * 86400 * 1000) {
        bad_request(rs, "body must be {\"advance_ms\": 0 to 31622400000}");
        cJSON_Delete(j);
        return;
    }
    cJSON_Delete(j);
    int64_t total = atomic_fetch_add(&s->advance_ms, ms) + ms;
    pthread_mutex_lock(&s->lk);
    pthread_cond_signal(&s->cond); /* what fell due now: the scheduler looks again */
    pthread_mutex_unlock(&s->lk);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "advance_ms", (double)total);
    pt__sim_resp_json(rs, 200, o);
    pt_log_info("sim: the gateways' clock moved %lld ms forward (%lld in all)", (long long)ms,
                (long long)total);
}

/*
 * POST /_sim/rotate {"gateway":"wechat"}: the gateway replaces its platform
 * key, as WeChat Pay does from time to time.  Answers and notifications are
 * signed with the new key from now on; GET /v3/certificates lists old and
 * new.  Only WeChat names its keys by serial, so only WeChat rotates.
 */
static void post_rotate(struct pt_sim *s, const struct sim_req *rq, struct sim_resp *rs)
{
    cJSON *j = cJSON_ParseWithLength(rq->body, rq->body_len);
    const char *gwname = pt__sim_json_str(j, "gateway");
    char serial[64], err[512] = "";
    if (!gwname || pt__sim_gw_parse(gwname) != SIM_GW_WECHAT) {
        bad_request(rs, "body must be {\"gateway\": \"wechat\"} (only WeChat Pay rotates its "
                        "platform key)");
        goto out;
    }
    if (pt__sim_wechat_rotate(s, serial, sizeof serial, err, sizeof err) != PT_OK) {
        pt_log_warn("%s", err);
        bad_request(rs, err[0] ? err : "rotation failed");
        rs->status = 500;
        goto out;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "gateway", "wechat");
    cJSON_AddStringToObject(o, "serial", serial);
    cJSON *all = cJSON_AddArrayToObject(o, "serials");
    int n = atomic_load(&s->k.wechat_ncerts);
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(all, cJSON_CreateString(s->k.wechat_certs[i].serial));
    pt__sim_resp_json(rs, 200, o);
    pt_log_info("sim: wechat platform key rotated: serial %s", serial);
out:
    cJSON_Delete(j);
}

static void control(struct pt_sim *s, struct sim_conn *c, const struct sim_req *rq,
                    struct sim_resp *rs)
{
    if (strcmp(rq->path, "/_sim/faults") == 0 && strcmp(rq->method, "POST") == 0) {
        post_faults(s, c, rq, rs);
    } else if (strcmp(rq->path, "/_sim/faults") == 0 && strcmp(rq->method, "GET") == 0) {
        pthread_mutex_lock(&s->lk);
        cJSON *j = faults_json(s);
        pthread_mutex_unlock(&s->lk);
        pt__sim_resp_json(rs, 200, j);
    } else if (strcmp(rq->path, "/_sim/ledger") == 0 && strcmp(rq->method, "GET") == 0) {
        char gwname[16] = "", order[128] = "";
        query_param(rq->query, "gateway", gwname, sizeof gwname);
        query_param(rq->query, "order_id", order, sizeof order);
        int gw = gwname[0] ? pt__sim_gw_parse(gwname) : SIM_GW_ANY;
        if (gw == -2) {
            bad_request(rs, "gateway: unknown (alipay, wechat, stripe, 2c2p)");
            return;
        }
        pthread_mutex_lock(&s->lk);
        cJSON *j = pt__sim_ledger_json(s, gw, order[0] ? order : NULL);
        pthread_mutex_unlock(&s->lk);
        pt__sim_resp_json(rs, j ? 200 : 500, j);
    } else if (strcmp(rq->path, "/_sim/notifications") == 0 && strcmp(rq->method, "GET") == 0) {
        pthread_mutex_lock(&s->lk);
        cJSON *j = pt__sim_notes_json(s);
        pthread_mutex_unlock(&s->lk);
        pt__sim_resp_json(rs, j ? 200 : 500, j);
    } else if (strcmp(rq->path, "/_sim/blob") == 0 && strcmp(rq->method, "GET") == 0) {
        /* N bytes of filler: lets a test check a client's response size cap. */
        char n[16] = "";
        query_param(rq->query, "bytes", n, sizeof n);
        long bytes = atol(n);
        if (bytes < 0 || bytes > 1024 * 1024) {
            bad_request(rs, "bytes: 0 to 1048576");
            return;
        }
        char *blob = malloc((size_t)bytes + 1);
        if (!blob) {
            pt__sim_resp_set(rs, 500, "text/plain", "out of memory", 13);
            return;
        }
        memset(blob, 'x', (size_t)bytes);
        pt__sim_resp_set(rs, 200, "text/plain", blob, (size_t)bytes);
        free(blob);
    } else if (strcmp(rq->path, "/_sim/pay") == 0 && strcmp(rq->method, "POST") == 0) {
        post_pay(s, rq, rs);
    } else if (strcmp(rq->path, "/_sim/ledger/alter") == 0 && strcmp(rq->method, "POST") == 0) {
        post_ledger_change(s, rq, rs, 0);
    } else if (strcmp(rq->path, "/_sim/ledger/forget") == 0 && strcmp(rq->method, "POST") == 0) {
        post_ledger_change(s, rq, rs, 1);
    } else if (strcmp(rq->path, "/_sim/rotate") == 0 && strcmp(rq->method, "POST") == 0) {
        post_rotate(s, rq, rs);
    } else if (strcmp(rq->path, "/_sim/scan") == 0 && strcmp(rq->method, "POST") == 0) {
        post_scan(s, rq, rs);
    } else if (strcmp(rq->path, "/_sim/clock") == 0 && strcmp(rq->method, "POST") == 0) {
        post_clock(s, rq, rs);
    } else if (strcmp(rq->path, "/_sim/health") == 0) {
        pt__sim_resp_set(rs, 200, "application/json", "{\"ok\":true}", 11);
    } else {
        cJSON *o = cJSON_CreateObject();
        cJSON *e = cJSON_AddObjectToObject(o, "error");
        cJSON_AddStringToObject(e, "code", "not_found");
        cJSON_AddStringToObject(e, "message",
                                "simulator control endpoints: POST/GET /_sim/faults, "
                                "GET /_sim/ledger, GET /_sim/notifications, GET /_sim/health, "
                                "GET /_sim/blob?bytes=N, POST /_sim/pay, POST /_sim/rotate, "
                                "POST /_sim/scan, POST /_sim/clock, POST /_sim/ledger/alter, "
                                "POST /_sim/ledger/forget");
        pt__sim_resp_json(rs, 404, o);
    }
}

/* ---- TLS I/O ------------------------------------------------------------------ */

/* Waits for the socket (or a wake-up) and reads; MBEDTLS_ERR_SSL_TIMEOUT on
 * timeout and on wake-up (the caller checks kicked/stopping). */
static int bio_recv(void *ctx, unsigned char *buf, size_t len)
{
    struct sim_conn *c = ctx;
    struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN}, {.fd = c->wake_fd, .events = POLLIN}};
    for (;;) {
        int n = poll(p, 2, c->timeout_ms);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || (p[1].revents & POLLIN))
            return MBEDTLS_ERR_SSL_TIMEOUT;
        ssize_t r = recv(c->fd, buf, len, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return errno == ECONNRESET ? MBEDTLS_ERR_NET_CONN_RESET : MBEDTLS_ERR_NET_RECV_FAILED;
        return (int)r;
    }
}

static int bio_send(void *ctx, const unsigned char *buf, size_t len)
{
    struct sim_conn *c = ctx;
    for (;;) {
        ssize_t r = send(c->fd, buf, len, MSG_NOSIGNAL);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return errno == EPIPE || errno == ECONNRESET ? MBEDTLS_ERR_NET_CONN_RESET
                                                         : MBEDTLS_ERR_NET_SEND_FAILED;
        return (int)r;
    }
}

static int gw_from_host(const unsigned char *name, size_t len)
{
    for (int g = 0; g < SIM_GW__COUNT; g++) {
        size_t nl = strlen(gw_names[g]);
        if (len > nl && memcmp(name, gw_names[g], nl) == 0 && name[nl] == '.')
            return g;
    }
    return SIM_GW_ANY;
}

static int sni_cb(void *p, mbedtls_ssl_context *ssl, const unsigned char *name, size_t len)
{
    struct pt_sim *s = p;
    struct sim_conn *c = tl_conn;
    (void)ssl;
    if (!c)
        return 0;
    c->gw = gw_from_host(name, len);
    if (c->gw == SIM_GW_ANY)
        return 0;
    pthread_mutex_lock(&s->lk);
    enum sim_fault_mode m = fault_take(s, c->gw, NULL, NULL, NULL, 1, NULL);
    pthread_mutex_unlock(&s->lk);
    if (m == SIM_FAULT_REFUSE_CONNECT) {
        /* A failing SNI callback aborts the handshake with a fatal alert:
         * the client has sent a ClientHello and not one byte of request. */
        c->refused = 1;
        return -1;
    }
    return 0;
}

static int tls_write_all(struct sim_conn *c, const void *data, size_t len)
{
    const unsigned char *p = data;
    while (len > 0) {
        int r = mbedtls_ssl_write(&c->ssl, p, len);
        if (r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

/* Reads more bytes into c->rbuf (or into dst for a body).  >0 bytes, 0 closed,
 * -1 error or timeout. */
static int tls_read(struct sim_conn *c, unsigned char *dst, size_t cap)
{
    for (;;) {
        int r = mbedtls_ssl_read(&c->ssl, dst, cap);
        if (r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE)
            continue;
        if (r == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY || r == 0)
            return 0;
        return r > 0 ? r : -1;
    }
}

/* ---- HTTP/1.1 ------------------------------------------------------------------ */

static int write_response(struct sim_conn *c, const struct sim_resp *rs, int keep_alive)
{
    char head[SIM_RESP_HEADERS * 800 + 512];
    int n =
        snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\n", rs->status, pt__sim_reason(rs->status));
    if (rs->status != 204 || rs->body_len)
        n += snprintf(head + n, sizeof head - (size_t)n, "Content-Type: %s\r\n",
                      rs->ctype[0] ? rs->ctype : "application/json");
    n += snprintf(head + n, sizeof head - (size_t)n, "Content-Length: %zu\r\nConnection: %s\r\n",
                  rs->body_len, keep_alive ? "keep-alive" : "close");
    for (int i = 0; i < rs->nhdr && (size_t)n < sizeof head; i++)
        n += snprintf(head + n, sizeof head - (size_t)n, "%s\r\n", rs->hdr[i]);
    if ((size_t)n + 3 > sizeof head)
        return -1;
    n += snprintf(head + n, sizeof head - (size_t)n, "\r\n");
    if (tls_write_all(c, head, (size_t)n))
        return -1;
    return rs->body_len ? tls_write_all(c, rs->body, rs->body_len) : 0;
}

static void simple(struct sim_conn *c, int status, const char *msg)
{
    struct sim_resp rs = {0};
    char body[256];
    int n = snprintf(body, sizeof body, "{\"error\":{\"code\":\"http_%d\",\"message\":\"%s\"}}",
                     status, msg);
    pt__sim_resp_set(&rs, status, "application/json", body, (size_t)n);
    write_response(c, &rs, 0);
    pt__sim_resp_free(&rs);
}

static int gw_from_path(const char *path)
{
    if (strcmp(path, "/gateway.do") == 0 || pt__sim_alipay_bill_path(path))
        return SIM_GW_ALIPAY;
    if (strncmp(path, "/v3/", 4) == 0 || pt__sim_wechat_v2_path(path))
        return SIM_GW_WECHAT;
    if (strncmp(path, "/v1/", 4) == 0)
        return SIM_GW_STRIPE;
    if (strncmp(path, "/payment/4.3/", 13) == 0 || strcmp(path, "/PaymentAction/2.0/action") == 0 ||
        strcmp(path, "/2C2PFrontend/PaymentAction/2.0/action") == 0)
        return SIM_GW_2C2P;
    return SIM_GW_ANY;
}

/* Parses the head (request line + headers, NUL-terminated in rq->head).
 * Returns 0, or an HTTP status to answer with before closing. */
static int parse_head(struct sim_req *rq, size_t *content_length, int *keep_alive, int *expect)
{
    char *line = rq->head, *eol = strstr(line, "\r\n");
    if (!eol)
        return 400;
    *eol = '\0';
    char target[sizeof rq->target + 1], version[16];
    if (sscanf(line, "%7s %2048s %15s", rq->method, target, version) != 3 ||
        strlen(target) >= sizeof rq->target || target[0] != '/')
        return 400;
    if (strcmp(version, "HTTP/1.1") != 0 && strcmp(version, "HTTP/1.0") != 0)
        return 400;
    memcpy(rq->target, target, strlen(target) + 1);
    char *qm = strchr(target, '?');
    if (qm)
        *qm = '\0';
    memcpy(rq->path, target, strlen(target) + 1);
    rq->query = strchr(rq->target, '?') ? strchr(rq->target, '?') + 1 : "";
    *keep_alive = strcmp(version, "HTTP/1.1") == 0;
    *content_length = 0;
    *expect = 0;
    int have_cl = 0;
    for (line = eol + 2; *line; line = eol + 2) {
        eol = strstr(line, "\r\n");
        if (!eol)
            return 400;
        *eol = '\0';
        if (!*line)
            break;
        char *colon = strchr(line, ':');
        if (!colon || colon == line || rq->nheaders >= SIM_MAX_HEADERS)
            return colon ? 431 : 400;
        *colon = '\0';
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        for (char *e = v + strlen(v); e > v && (e[-1] == ' ' || e[-1] == '\t'); e--)
            e[-1] = '\0';
        rq->h[rq->nheaders].name = line;
        rq->h[rq->nheaders].value = v;
        rq->nheaders++;
        if (strcasecmp(line, "Content-Length") == 0) {
            char *end;
            unsigned long long n = strtoull(v, &end, 10);
            if (*end || end == v || have_cl)
                return 400;
            if (n > SIM_BODY_MAX)
                return 413;
            *content_length = (size_t)n;
            have_cl = 1;
        } else if (strcasecmp(line, "Transfer-Encoding") == 0) {
            return 411; /* every client of a payment API sends a length */
        } else if (strcasecmp(line, "Connection") == 0) {
            if (strcasecmp(v, "close") == 0)
                *keep_alive = 0;
            else if (strcasecmp(v, "keep-alive") == 0)
                *keep_alive = 1;
        } else if (strcasecmp(line, "Expect") == 0 && strcasecmp(v, "100-continue") == 0) {
            *expect = 1;
        }
    }
    return 0;
}

/* Reads one request into rq.  1 = got one, 0 = connection over (closed, idle
 * timeout, stop, or an error already answered). */
static int read_request(struct sim_conn *c, struct sim_req *rq, int *keep_alive)
{
    struct pt_sim *s = c->s;
    char *end = NULL;
    /* Waiting for the first byte of a request is idle time; after it, the
     * rest must come promptly. */
    c->timeout_ms = c->rlen ? REQUEST_TIMEOUT_MS : s->idle_timeout_ms;
    for (;;) {
        if (c->rlen) {
            c->rbuf[c->rlen < sizeof c->rbuf ? c->rlen : sizeof c->rbuf - 1] = '\0';
            end = memmem(c->rbuf, c->rlen, "\r\n\r\n", 4);
            if (end)
                break;
        }
        if (c->rlen >= sizeof c->rbuf - 1) {
            simple(c, 431, "request head larger than 16 KiB");
            return 0;
        }
        pthread_mutex_lock(&s->lk);
        int stop = s->stopping || c->kicked;
        pthread_mutex_unlock(&s->lk);
        if (stop)
            return 0;
        int r = tls_read(c, (unsigned char *)c->rbuf + c->rlen, sizeof c->rbuf - 1 - c->rlen);
        if (r <= 0)
            return 0;
        c->rlen += (size_t)r;
        c->timeout_ms = REQUEST_TIMEOUT_MS;
    }
    size_t head_len = (size_t)(end - c->rbuf) + 4;
    memcpy(rq->head, c->rbuf, head_len);
    rq->head[head_len] = '\0';
    size_t clen;
    int expect;
    int st = parse_head(rq, &clen, keep_alive, &expect);
    if (st) {
        simple(c, st,
               st == 413   ? "request body larger than 256 KiB"
               : st == 411 ? "Content-Length required"
                           : "malformed request");
        return 0;
    }
    rq->body = malloc(clen + 1);
    if (!rq->body)
        return 0;
    size_t have = c->rlen - head_len;
    if (have > clen)
        have = clen;
    memcpy(rq->body, c->rbuf + head_len, have);
    /* Keep bytes of a pipelined next request. */
    memmove(c->rbuf, c->rbuf + head_len + have, c->rlen - head_len - have);
    c->rlen -= head_len + have;
    if (have < clen && expect) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (tls_write_all(c, cont, sizeof cont - 1))
            return 0;
    }
    while (have < clen) {
        int r = tls_read(c, (unsigned char *)rq->body + have, clen - have);
        if (r <= 0)
            return 0;
        have += (size_t)r;
    }
    rq->body[clen] = '\0';
    rq->body_len = clen;
    rq->gw = gw_from_path(rq->path);
    return 1;
}

/* ---- dispatch ---------------------------------------------------------------- */

static void gateway_500(struct pt_sim *s, int gw, struct sim_resp *rs)
{
    const struct sim_gateway *g = pt__sim_gateway(gw);
    char note[sizeof rs->note];
    memcpy(note, rs->note, sizeof note);
    rs->nhdr = 0;
    g->error_500(s, rs);
    memcpy(rs->note, note, sizeof note);
}

/* Serves one request; returns 0 to keep the connection, -1 to reset it. */
static int serve(struct sim_conn *c, struct sim_req *rq, int keep_alive)
{
    struct pt_sim *s = c->s;
    struct sim_resp rs = {0};
    struct sim_call call = {.s = s, .gw = rq->gw, .path = rq->path};
    int rc = 0;
    rq->client_cert = c->client_cert;
    if (c->gw == SIM_GW_ANY && rq->gw != SIM_GW_ANY) {
        pthread_mutex_lock(&s->lk);
        c->gw = rq->gw; /* lets refuse_connect close this connection later */
        pthread_mutex_unlock(&s->lk);
    }
    if (rq->gw == SIM_GW_ANY) {
        static const char no_gateway[] = "{\"error\":{\"code\":\"not_found\",\"message\":"
                                         "\"no gateway serves this path\"}}";
        if (strncmp(rq->path, "/_sim/", 6) == 0)
            control(s, c, rq, &rs);
        else
            pt__sim_resp_set(&rs, 404, "application/json", no_gateway, sizeof no_gateway - 1);
    } else {
        pthread_mutex_lock(&s->lk);
        call.mode = fault_take(s, rq->gw, rq->method, rq->target, NULL, 0, &call.delay_ms);
        pthread_mutex_unlock(&s->lk);
        pt__sim_gateway(rq->gw)->handle(&call, rq, &rs);
        /* A handler that never reached its commit point (a query, a refused
         * signature) still obeys the fault: dropped before anything, or late. */
        if (!call.gated)
            pt__sim_commit_gate(&call, &rs);
        if (!rs.drop && call.mode == SIM_FAULT_DROP_AFTER_COMMIT)
            rs.drop = 1;
        if (!rs.drop && call.mode == SIM_FAULT_HTTP_500_AFTER_COMMIT)
            gateway_500(s, rq->gw, &rs);
    }
    if (!s->quiet)
        pt_log_info("sim: %s %s %s -> %s%d %s%s%s%s", pt__sim_gw_name(rq->gw), rq->method, rq->path,
                    rs.drop ? "dropped, would have been " : "", rs.status, rs.note,
                    call.mode ? " [fault " : "", call.mode ? mode_names[call.mode] : "",
                    call.mode ? "]" : "");
    if (rs.drop)
        rc = -1;
    else if (write_response(c, &rs, keep_alive) != 0)
        rc = -1;
    pt__sim_resp_free(&rs);
    return rc;
}

/* ---- connections ------------------------------------------------------------- */

static void conn_unlink(struct pt_sim *s, struct sim_conn *c)
{
    pthread_mutex_lock(&s->lk);
    for (struct sim_conn **pp = &s->conns; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    s->nconns--;
    pthread_cond_broadcast(&s->conns_cond);
    pthread_mutex_unlock(&s->lk);
}

/* Closes without a TLS close_notify and with a TCP reset: the "connection
 * dropped" of the fault modes. */
static void reset_socket(int fd)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
}

/* What the client's certificate (if any) proved, after the handshake.  With
 * VERIFY_OPTIONAL mbedTLS completes the handshake whatever the certificate
 * was, and leaves the verdict in the verify result; it has checked the
 * CertificateVerify, so a client that presents the merchant certificate also
 * holds its private key. */
static enum sim_client_cert client_cert_of(struct pt_sim *s, const mbedtls_ssl_context *ssl)
{
    const mbedtls_x509_crt *peer = mbedtls_ssl_get_peer_cert(ssl);
    const mbedtls_x509_crt *mch = &s->k.wechat_apiclient_crt;
    if (!peer)
        return SIM_CERT_NONE;
    if (mbedtls_ssl_get_verify_result(ssl) == 0 && peer->raw.len == mch->raw.len &&
        memcmp(peer->raw.p, mch->raw.p, mch->raw.len) == 0)
        return SIM_CERT_MERCHANT;
    return SIM_CERT_OTHER;
}

static void *conn_main(void *arg)
{
    struct sim_conn *c = arg;
    struct pt_sim *s = c->s;
    struct sim_req *rq = malloc(sizeof *rq);
    int abortive = 0;
    tl_conn = c;
    mbedtls_ssl_init(&c->ssl);
    if (!rq || mbedtls_ssl_setup(&c->ssl, &s->tls) != 0)
        goto out;
    mbedtls_ssl_set_bio(&c->ssl, c, bio_send, bio_recv, NULL);
    c->timeout_ms = HANDSHAKE_TIMEOUT_MS;
    int r;
    while ((r = mbedtls_ssl_handshake(&c->ssl)) != 0) {
        if (r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE)
            continue;
        if (c->refused) {
            pt_log_info("sim: %s: connection refused during the TLS handshake "
                        "[fault refuse_connect]",
                        pt__sim_gw_name(c->gw));
        } else if (!s->stopping) {
            char msg[120];
            mbedtls_strerror(r, msg, sizeof msg);
            pt_log_debug("sim: TLS handshake failed: %s", msg);
        }
        abortive = 1;
        goto out;
    }
    c->client_cert = client_cert_of(s, &c->ssl);
    for (;;) {
        int keep_alive = 0;
        memset(rq, 0, offsetof(struct sim_req, head));
        rq->head[0] = '\0';
        rq->body = NULL;
        int got = read_request(c, rq, &keep_alive);
        if (!got) {
            free(rq->body);
            break;
        }
        int rc = serve(c, rq, keep_alive);
        free(rq->body);
        rq->body = NULL;
        if (rc != 0) {
            abortive = 1;
            break;
        }
        if (!keep_alive)
            break;
    }
out:
    if (!abortive)
        mbedtls_ssl_close_notify(&c->ssl);
    else
        reset_socket(c->fd);
    mbedtls_ssl_free(&c->ssl);
    close(c->fd);
    close(c->wake_fd);
    free(rq);
    conn_unlink(s, c);
    free(c);
    return NULL;
}

static void accept_one(struct pt_sim *s)
{
    int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {.tv_sec = SEND_TIMEOUT_S};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);

    /* refuse_connect ("*" included) acts in the SNI callback, on connections
     * that name a gateway: the control plane (/_sim/..., reached by IP
     * address, no SNI) stays reachable while "the network is down", so a
     * test or the demo can end the outage. */
    pthread_mutex_lock(&s->lk);
    int full = s->nconns >= SIM_MAX_CONNS;
    pthread_mutex_unlock(&s->lk);
    if (full) {
        pt_log_warn("sim: %d connections open; refusing another", SIM_MAX_CONNS);
        reset_socket(fd);
        close(fd);
        return;
    }
    struct sim_conn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return;
    }
    c->s = s;
    c->fd = fd;
    c->gw = SIM_GW_ANY;
    c->wake_fd = eventfd(0, EFD_CLOEXEC);
    if (c->wake_fd < 0) {
        close(fd);
        free(c);
        return;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_mutex_lock(&s->lk);
    c->next = s->conns;
    s->conns = c;
    s->nconns++;
    if (pthread_create(&c->thread, &attr, conn_main, c) != 0) {
        s->conns = c->next;
        s->nconns--;
        pthread_mutex_unlock(&s->lk);
        close(fd);
        close(c->wake_fd);
        free(c);
    } else {
        pthread_mutex_unlock(&s->lk);
    }
    pthread_attr_destroy(&attr);
}

static void *listener_main(void *arg)
{
    struct pt_sim *s = arg;
    struct pollfd p[2] = {{.fd = s->listen_fd, .events = POLLIN},
                          {.fd = s->stop_pipe[0], .events = POLLIN}};
    for (;;) {
        int n = poll(p, 2, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || (p[1].revents & POLLIN))
            break;
        if (p[0].revents & POLLIN)
            accept_one(s);
    }
    return NULL;
}

/* ---- start and stop ------------------------------------------------------------ */

static int split_listen(const char *listen, char *host, size_t hostlen, int *port)
{
    const char *colon;
    if (listen[0] == '[') {
        const char *rb = strchr(listen, ']');
        if (!rb || rb[1] != ':')
            return -1;
        snprintf(host, hostlen, "%.*s", (int)(rb - listen - 1), listen + 1);
        colon = rb + 1;
    } else {
        colon = strrchr(listen, ':');
        if (!colon || colon == listen)
            return -1;
        snprintf(host, hostlen, "%.*s", (int)(colon - listen), listen);
    }
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end || end == colon + 1 || p < 0 || p > 65535)
        return -1;
    *port = (int)p;
    return 0;
}

static int is_loopback(const char *host)
{
    return strcmp(host, "localhost") == 0 || strncmp(host, "127.", 4) == 0 ||
           strcmp(host, "::1") == 0 || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0;
}

static int bind_listener(struct pt_sim *s, int port, char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *res = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int gai = getaddrinfo(s->listen_host, ps, &hints, &res);
    if (gai != 0) {
        snprintf(err, errlen, "sim: --listen %s:%d: %s", s->listen_host, port, gai_strerror(gai));
        return PT_EINVAL;
    }
    int fd = -1, e = 0;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 128) != 0) {
            e = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errlen, "sim: cannot listen on %s:%d: %s", s->listen_host, port,
                 strerror(e ? e : errno));
        return PT_ESYS;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                             : ((struct sockaddr_in *)&ss)->sin_port);
    s->listen_fd = fd;
    return PT_OK;
}

static int tls_setup(struct pt_sim *s, char *err, size_t errlen)
{
    mbedtls_ssl_config_init(&s->tls);
    if (mbedtls_ssl_config_defaults(&s->tls, MBEDTLS_SSL_IS_SERVER, MBEDTLS_SSL_TRANSPORT_STREAM,
                                    MBEDTLS_SSL_PRESET_DEFAULT) != 0 ||
        mbedtls_ssl_conf_own_cert(&s->tls, &s->k.srv_cert, &s->k.srv_key) != 0) {
        snprintf(err, errlen, "sim: TLS server configuration failed (certificate/key)");
        return PT_ECRYPTO;
    }
    mbedtls_ssl_conf_rng(&s->tls, pt_drbg_mbedtls_rng, s->drbg);
    mbedtls_ssl_conf_sni(&s->tls, sni_cb, s);
    /* Ask for a client certificate, never insist (see the top of the file). */
    mbedtls_ssl_conf_authmode(&s->tls, MBEDTLS_SSL_VERIFY_OPTIONAL);
    mbedtls_ssl_conf_ca_chain(&s->tls, &s->k.client_ca, NULL);
    mbedtls_ssl_conf_min_version(&s->tls, MBEDTLS_SSL_MAJOR_VERSION_3, MBEDTLS_SSL_MINOR_VERSION_3);
    return PT_OK;
}

int pt_sim_start(const struct pt_sim_options *opt, struct pt_sim **out, char *err, size_t errlen)
{
    char dummy[8];
    if (!err) {
        err = dummy;
        errlen = sizeof dummy;
    }
    err[0] = '\0';
    *out = NULL;
    int rc = PT_EINVAL, port = 0;
    struct pt_sim *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "sim: out of memory");
        return PT_ENOMEM;
    }
    s->listen_fd = -1;
    s->stop_pipe[0] = s->stop_pipe[1] = -1;
    pthread_mutex_init(&s->lk, NULL);
    pthread_cond_init(&s->cond, NULL);
    pthread_cond_init(&s->conns_cond, NULL);
    mbedtls_ssl_config_init(&s->tls);
    if (!opt || !opt->dir || !opt->dir[0] || strlen(opt->dir) >= sizeof s->dir - 64) {
        snprintf(err, errlen, "sim: --dir is required (a directory for keys and state)");
        goto fail;
    }
    if (!opt->listen ||
        split_listen(opt->listen, s->listen_host, sizeof s->listen_host, &port) != 0) {
        snprintf(err, errlen, "sim: --listen must be HOST:PORT (got \"%s\")",
                 opt->listen ? opt->listen : "");
        goto fail;
    }
    const char *nb = opt->notify_base ? opt->notify_base : PT_SIM_DEFAULT_NOTIFY_BASE;
    if ((strncmp(nb, "http://", 7) != 0 && strncmp(nb, "https://", 8) != 0) ||
        strlen(nb) >= sizeof s->notify_base) {
        snprintf(err, errlen, "sim: --notify-base must be an http:// or https:// URL (got \"%s\")",
                 nb);
        goto fail;
    }
    snprintf(s->dir, sizeof s->dir, "%s", opt->dir);
    snprintf(s->notify_base, sizeof s->notify_base, "%s", nb);
    size_t nbl = strlen(s->notify_base);
    while (nbl > 0 && s->notify_base[nbl - 1] == '/')
        s->notify_base[--nbl] = '\0';
    s->pay_delay_ms = opt->pay_delay_ms > 0 ? opt->pay_delay_ms : 1000;
    s->wechat_close_after_ms = opt->wechat_close_after_ms;
    s->bill_ready_min = -1;
    if (opt->bill_ready_after) {
        const char *b = opt->bill_ready_after;
        int ok = strlen(b) == 5 && b[2] == ':' && isdigit((unsigned char)b[0]) &&
                 isdigit((unsigned char)b[1]) && isdigit((unsigned char)b[3]) &&
                 isdigit((unsigned char)b[4]);
        int h = ok ? (b[0] - '0') * 10 + (b[1] - '0') : 0,
            m = ok ? (b[3] - '0') * 10 + (b[4] - '0') : 0;
        if (!ok || h > 23 || m > 59) {
            snprintf(err, errlen,
                     "sim: --bill-ready-after must be HH:MM, 00:00 to 23:59 (got \"%s\")", b);
            goto fail;
        }
        s->bill_ready_min = h * 60 + m;
    }
    s->idle_timeout_ms = opt->idle_timeout_ms > 0 ? opt->idle_timeout_ms : 30000;
    s->notify_retry_ms = opt->notify_retry_ms > 0 ? opt->notify_retry_ms : 1000;
    s->stripe_key_ttl_ms = (opt->stripe_key_ttl_s > 0 ? opt->stripe_key_ttl_s : 86400) * 1000;
    s->key_bits = opt->key_bits > 0 ? opt->key_bits : 2048;
    s->quiet = opt->quiet;
    s->pm_refund_pending = opt->pm_refund_pending;
    for (int g = 0; g < SIM_GW__COUNT; g++) {
        /* Per-gateway host names only where they resolve to this server. */
        if (is_loopback(s->listen_host))
            snprintf(s->gw_host[g], sizeof s->gw_host[g], "%s.localhost", gw_names[g]);
        else if (strchr(s->listen_host, ':'))
            snprintf(s->gw_host[g], sizeof s->gw_host[g], "[%s]", s->listen_host);
        else
            snprintf(s->gw_host[g], sizeof s->gw_host[g], "%s", s->listen_host);
    }

    if ((rc = pt_drbg_new(NULL, NULL, "payterm-sim", &s->drbg)) != PT_OK) {
        snprintf(err, errlen, "sim: cannot seed the random generator");
        goto fail;
    }
    /* Bind first: the port goes into gateways.json. */
    if ((rc = bind_listener(s, port, err, errlen)) != PT_OK ||
        (rc = pt__sim_files_prepare(s, err, errlen)) != PT_OK ||
        (rc = tls_setup(s, err, errlen)) != PT_OK ||
        (rc = pt__sim_db_open(s, err, errlen)) != PT_OK)
        goto fail;
    if (pipe2(s->stop_pipe, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "sim: pipe: %s", strerror(errno));
        rc = PT_ESYS;
        goto fail;
    }
    if ((rc = pt__sim_scheduler_start(s)) != PT_OK) {
        snprintf(err, errlen, "sim: cannot start the notifier thread");
        goto fail;
    }
    if (pthread_create(&s->listener, NULL, listener_main, s) != 0) {
        snprintf(err, errlen, "sim: cannot start the listener thread");
        rc = PT_ESYS;
        goto fail;
    }
    s->listener_started = 1;
    pt_log_info("sim: listening on https://%s:%d (state in %s, notifications to %s)",
                s->listen_host, s->port, s->dir, s->notify_base);
    *out = s;
    return PT_OK;
fail:
    if (!err[0])
        snprintf(err, errlen, "sim: start failed: %s", pt_strerror(rc));
    pt_sim_stop(s);
    return rc;
}

void pt_sim_stop(struct pt_sim *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lk);
    s->stopping = 1;
    /* Wake idle connections (they close with close_notify) and delays. */
    for (struct sim_conn *c = s->conns; c; c = c->next) {
        uint64_t one = 1;
        if (write(c->wake_fd, &one, sizeof one) < 0)
            pt_log_warn("sim: cannot wake a connection: %s", strerror(errno));
    }
    pthread_cond_broadcast(&s->conns_cond);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lk);
    if (s->listener_started) {
        char b = 1;
        if (write(s->stop_pipe[1], &b, 1) < 0)
            pt_log_warn("sim: cannot stop the listener: %s", strerror(errno));
        pthread_join(s->listener, NULL);
    }
    /* Requests in progress finish; then their threads end. */
    pthread_mutex_lock(&s->lk);
    while (s->nconns > 0)
        pthread_cond_wait(&s->conns_cond, &s->lk);
    pthread_mutex_unlock(&s->lk);
    pt__sim_scheduler_stop(s);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (s->stop_pipe[0] >= 0)
        close(s->stop_pipe[0]);
    if (s->stop_pipe[1] >= 0)
        close(s->stop_pipe[1]);
    pt__sim_db_close(s);
    mbedtls_ssl_config_free(&s->tls);
    pt__sim_files_free(s);
    pt_drbg_destroy(s->drbg);
    pthread_cond_destroy(&s->cond);
    pthread_cond_destroy(&s->conns_cond);
    pthread_mutex_destroy(&s->lk);
    free(s);
}
