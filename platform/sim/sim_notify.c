/*
 * sim_notify.c - the simulator's clock-driven side: the simulated customer
 * and notification delivery.
 *
 * One thread sleeps on a condition variable until the next thing is due:
 * a pending QR/redirect trade whose customer now pays (each gateway's
 * autopay decides what happens by the amount rules), a refund the gateway
 * processes asynchronously (WeChat answers PROCESSING and completes the
 * refund after the pay delay: the gateway's refund_settle), or a
 * notification in the outbox.  Delivery is an HTTP(S) POST with libcurl; a
 * notification counts as delivered only when the receiver gives the
 * gateway's exact success reply (Alipay reads the body `success`, WeChat
 * wants 200/204, Stripe any 2xx, 2C2P 200), otherwise it is retried with a
 * doubling delay (capped at 60 s, at most SIM_NOTE_MAX_ATTEMPTS attempts).
 * The outbox lives in sim.db, so pending notifications survive a restart of
 * the simulator.
 *
 * Deliberate at-least-once behaviour: most notifications are queued twice
 * (the copy a little later), and every one gets a random extra delay, so
 * notifications of different orders - and the events of one order - arrive
 * out of order.  A receiver that applies each exactly once passes.
 */
#include "sim_int.h"

#include "err.h"
#include "log.h"
#include "transport_curl.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DELIVERY_TIMEOUT_MS 5000
#define REPLY_MAX 4096
#define RETRY_CAP_MS 60000

struct reply {
    char buf[REPLY_MAX + 1];
    size_t len;
};

static size_t reply_cb(char *data, size_t size, size_t n, void *userp)
{
    struct reply *r = userp;
    size_t len = size * n, room = REPLY_MAX - r->len;
    memcpy(r->buf + r->len, data, len < room ? len : room);
    r->len += len < room ? len : room;
    r->buf[r->len] = '\0';
    return len; /* a long reply is not an error, it is just not kept */
}

/* One delivery attempt of n (lk not held).  Updates n's bookkeeping. */
static void deliver(struct pt_sim *s, CURL *h, struct sim_note *n)
{
    const struct sim_gateway *g = pt__sim_gateway(n->gw);
    char hdr[SIM_RESP_HEADERS][768], ctype[128], errbuf[CURL_ERROR_SIZE] = "";
    int nhdr = 0;
    struct curl_slist *list = NULL;
    struct reply *r = calloc(1, sizeof *r);
    if (!r)
        return;
    /* WeChat and Stripe sign with the time of sending: sign every attempt. */
    if (g->note_headers && g->note_headers(s, n, hdr, &nhdr) != PT_OK) {
        snprintf(n->last_error, sizeof n->last_error, "cannot sign the notification");
        goto fail;
    }
    snprintf(ctype, sizeof ctype, "Content-Type: %s", n->ctype);
    list = curl_slist_append(list, ctype);
    list = curl_slist_append(list, "Expect:");
    for (int i = 0; i < nhdr && list; i++)
        list = curl_slist_append(list, hdr[i]);
    if (!list)
        goto fail;
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, n->url);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)n->body_len);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, n->body);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)DELIVERY_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, reply_cb);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    CURLcode cc = curl_easy_perform(h);
    long status = 0;
    if (cc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    n->attempts++;
    if (cc == CURLE_OK && g->note_ok((int)status, r->buf, r->len)) {
        n->delivered = 1;
        n->last_error[0] = '\0';
        pt_log_info("sim: notified %s %s %s (attempt %d%s)", pt__sim_gw_name(n->gw), n->kind,
                    n->order_id, n->attempts, n->duplicate ? ", deliberate duplicate" : "");
        goto out;
    }
    if (cc != CURLE_OK)
        snprintf(n->last_error, sizeof n->last_error, "%.150s",
                 errbuf[0] ? errbuf : curl_easy_strerror(cc));
    else
        snprintf(n->last_error, sizeof n->last_error,
                 "HTTP %ld, reply \"%.60s\" is not the "
                 "%s success reply",
                 status, r->buf, pt__sim_gw_name(n->gw));
fail:
    if (n->attempts >= SIM_NOTE_MAX_ATTEMPTS) {
        n->delivered = 2; /* gave up, as the real gateways eventually do */
        pt_log_warn("sim: giving up notifying %s %s %s after %d attempts: %s",
                    pt__sim_gw_name(n->gw), n->kind, n->order_id, n->attempts, n->last_error);
    } else {
        int64_t wait = (int64_t)s->notify_retry_ms << (n->attempts > 6 ? 6 : n->attempts - 1);
        n->due_at = pt__sim_now_ms(s) + (wait > RETRY_CAP_MS ? RETRY_CAP_MS : wait);
        pt_log_info("sim: notifying %s %s %s failed (attempt %d): %s; retrying",
                    pt__sim_gw_name(n->gw), n->kind, n->order_id, n->attempts, n->last_error);
    }
out:
    curl_slist_free_all(list);
    free(r);
}

static void deadline(int64_t ms, struct timespec *ts)
{
    ts->tv_sec = (time_t)(ms / 1000);
    ts->tv_nsec = (long)(ms % 1000) * 1000000L;
}

static void *scheduler_main(void *arg)
{
    struct pt_sim *s = arg;
    CURL *h = curl_easy_init();
    struct sim_trade *t = malloc(sizeof *t);
    struct sim_refund *r = malloc(sizeof *r);
    if (!h || !t || !r) {
        pt_log_error("sim: notifier cannot start: out of memory");
        goto done;
    }
    pthread_mutex_lock(&s->lk);
    while (!s->stopping) {
        int64_t now = pt__sim_now_ms(s), next = INT64_MAX;
        /* The simulated customers whose turn it is. */
        while (pt__sim_trade_next_pay(s, t) == PT_OK) {
            if (t->pay_at > now) {
                next = t->pay_at;
                break;
            }
            int64_t was = t->pay_at;
            pt__sim_db_begin(s);
            if (pt__sim_expired(s, t)) /* too late: the gateway takes no payment */
                pt_log_info("sim: %s %s: the customer came after the order expired",
                            pt__sim_gw_name(t->gw), t->order_id);
            else
                pt__sim_gateway(t->gw)->autopay(s, t);
            if (t->pay_at == was) { /* never loop on a trade autopay left alone */
                t->pay_at = 0;
                pt__sim_trade_update(s, t);
            }
            pt__sim_db_commit(s);
        }
        /* The refunds whose processing is over. */
        int64_t settled = 0;
        while (pt__sim_refund_next_settle(s, r) == PT_OK && r->id != settled) {
            settled = r->id; /* a ledger that cannot record it must not spin us */
            if (r->settle_at > now) {
                if (r->settle_at < next)
                    next = r->settle_at;
                break;
            }
            const struct sim_gateway *g = pt__sim_gateway(r->gw);
            pt__sim_db_begin(s);
            if (g && g->refund_settle)
                g->refund_settle(s, r);
            if (r->settle_at != 0 || strcmp(r->status, "processing") == 0) {
                /* Never loop on a refund: whatever the gateway did, it is over. */
                snprintf(r->status, sizeof r->status, "succeeded");
                r->settle_at = 0;
                r->updated_at = r->succeeded_at = pt__sim_now_ms(s);
                pt__sim_refund_update(s, r);
            }
            pt__sim_db_commit(s);
        }
        struct sim_note n;
        if (pt__sim_note_next(s, &n) == PT_OK) {
            if (n.due_at <= now) {
                pthread_mutex_unlock(&s->lk);
                deliver(s, h, &n);
                pthread_mutex_lock(&s->lk);
                pt__sim_note_update(s, &n);
                pt__sim_note_free(&n);
                continue;
            }
            if (n.due_at < next)
                next = n.due_at;
            pt__sim_note_free(&n);
        }
        if (next == INT64_MAX) {
            pthread_cond_wait(&s->cond, &s->lk);
        } else {
            /* next is the gateways' time; the wait is on the real clock. */
            struct timespec ts;
            deadline(next - atomic_load(&s->advance_ms), &ts);
            pthread_cond_timedwait(&s->cond, &s->lk, &ts);
        }
    }
    pthread_mutex_unlock(&s->lk);
done:
    free(r);
    free(t);
    if (h)
        curl_easy_cleanup(h);
    return NULL;
}

int pt__sim_scheduler_start(struct pt_sim *s)
{
    if (pt_curl_global_init() != PT_OK)
        return PT_ESYS;
    if (pthread_create(&s->scheduler, NULL, scheduler_main, s) != 0)
        return PT_ESYS;
    s->scheduler_started = 1;
    return PT_OK;
}

void pt__sim_scheduler_stop(struct pt_sim *s)
{
    if (!s->scheduler_started)
        return;
    pthread_mutex_lock(&s->lk);
    s->stopping = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lk);
    pthread_join(s->scheduler, NULL);
    s->scheduler_started = 0;
}

static int64_t jitter(struct pt_sim *s, int max_ms)
{
    uint16_t r = 0;
    pt__sim_random(s, &r, sizeof r);
    return max_ms > 0 ? r % max_ms : 0;
}

int pt__sim_notify(struct pt_sim *s, int gw, const char *order_id, const char *kind,
                   const char *url, const char *ctype, const char *body, size_t len,
                   int64_t delay_ms, int duplicate)
{
    static const char *const paths[SIM_GW__COUNT] = {"/notify/alipay", "/notify/wechat",
                                                     "/webhooks/stripe", "/notify/2c2p"};
    struct sim_note n = {.gw = gw};
    snprintf(n.order_id, sizeof n.order_id, "%s", order_id);
    snprintf(n.kind, sizeof n.kind, "%s", kind);
    if (url && *url)
        snprintf(n.url, sizeof n.url, "%s", url);
    else
        snprintf(n.url, sizeof n.url, "%s%s", s->notify_base, paths[gw]);
    snprintf(n.ctype, sizeof n.ctype, "%s", ctype);
    n.body = (char *)body;
    n.body_len = len;
    int64_t now = pt__sim_now_ms(s);
    /* A random extra delay shuffles notifications of different orders. */
    n.due_at = now + delay_ms + jitter(s, 250);
    int rc = pt__sim_note_add(s, &n);
    if (rc == PT_OK && duplicate) {
        n.duplicate = 1;
        n.due_at += 300 + jitter(s, 1200);
        rc = pt__sim_note_add(s, &n);
    }
    pthread_cond_signal(&s->cond);
    return rc;
}

void pt__sim_schedule_pay(struct pt_sim *s, struct sim_trade *t)
{
    t->pay_at = pt__sim_amount_rule(t->amount) == SIM_RULE_PENDING
                    ? 0 /* this customer never pays: the order stays pending */
                    : pt__sim_now_ms(s) + s->pay_delay_ms;
    pthread_cond_signal(&s->cond);
}
