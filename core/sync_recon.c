/*
 * sync_recon.c - a reconciliation run with the gateway's own books (SPEC
 * 19): the sync engine downloads the gateway's side of the bill date and
 * its neighbours (it owns the transport, the clock, the nonce and the
 * gateway configurations), then core/recon_run.c compares and stores.
 *
 *   WeChat Pay  GET /v3/bill/tradebill, then its file, SHA-1 checked
 *               (core/gateways/wxbill.c)
 *   Stripe      GET /v1/charges and /v1/refunds of the day, paged
 *               (core/gateways/stripe_bill.c)
 *
 * The day before and after are fetched too, where the gateway has them, so
 * that a payment at midnight is found on either side; a neighbour that is
 * not there yet is left out (its records can only show as a discrepancy
 * of that day's own run, never of this one's - see reconcile.h).
 */
#include "gateways/stripe_bill.h"
#include "gateways/wxbill.h"
#include "log.h"
#include "recon_run.h"
#include "sync_impl.h"

#include <stdlib.h>
#include <string.h>

/* Stripe pages one list of a day holds at most (100 objects each). */
#define STRIPE_PAGES_MAX 1000

/* What fetching one day came to. */
enum got { GOT_BILL, GOT_PENDING, GOT_FAILED, GOT_OFFLINE };

struct fetch {
    struct pt_sync *s;
    const struct pt_gateway *gw;
    const struct pt_gw_config *cfg;
    struct pt_recon_record *rows;
    size_t n, cap;
    char why[512];
};

static enum got keep(struct fetch *f, const struct pt_recon_record *rows, size_t n, int day)
{
    for (size_t i = 0; i < n; i++) {
        struct pt_recon_record *r = pt_recon_push(&f->rows, &f->n, &f->cap);
        if (!r) {
            snprintf(f->why, sizeof f->why, "out of memory");
            return GOT_FAILED;
        }
        *r = rows[i];
        r->day = day;
    }
    return GOT_BILL;
}

/* One exchange; GOT_BILL when an answer came (any status). */
static enum got ask(struct fetch *f, struct pt_http_request *req, struct pt_http_response *resp)
{
    const struct pt_transport *t = f->s->opt.platform->transport;
    int rc =
        t ? t->send(t->ctx, f->gw->name, req, (int)f->s->opt.cfg->sync_request_timeout_ms, resp)
          : PT_ENOTSENT;
    pt_http_request_free(req);
    if (rc == PT_OK) {
        pt__sync_set_reach(f->s, f->gw->name, 1);
        return GOT_BILL;
    }
    if (rc == PT_ENOTSENT)
        pt__sync_set_reach(f->s, f->gw->name, 0);
    snprintf(f->why, sizeof f->why, "%s could not be asked: %s", f->gw->name, pt_strerror(rc));
    return GOT_OFFLINE;
}

/* A signed request's environment: the wall clock and a nonce. */
static int env_of(struct fetch *f, struct pt_gw_env *env, char nonce[33])
{
    pt__sync_nonce(f->s, nonce);
    memset(env, 0, sizeof *env);
    env->nonce = nonce;
    if (pt__sync_wall_ms(f->s, &env->now_ms) != PT_OK) {
        snprintf(f->why, sizeof f->why, "the wall clock is not trusted yet (SPEC 17)");
        return PT_ECLOCK;
    }
    return PT_OK;
}

static enum got wechat_day(struct fetch *f, const char *date, int day)
{
    struct pt_gw_env env;
    char nonce[33], path[PT_URL_MAX], sha1[41];
    struct pt_http_request req = {0};
    struct pt_http_response resp = {0};
    if (env_of(f, &env, nonce) || pt_wxbill_request(f->cfg, &env, date, &req) != PT_OK) {
        if (!f->why[0])
            snprintf(f->why, sizeof f->why, "wechat: the bill request cannot be signed");
        return GOT_FAILED;
    }
    enum got g = ask(f, &req, &resp);
    if (g != GOT_BILL)
        return g;
    int rc = pt_wxbill_answer(f->cfg, &resp, path, sizeof path, sha1, f->why, sizeof f->why);
    pt_http_response_free(&resp);
    if (rc == PT_EAGAIN)
        return GOT_PENDING;
    if (rc != PT_OK)
        return GOT_FAILED;
    if (env_of(f, &env, nonce) || pt_wxbill_file_request(f->cfg, &env, path, &req) != PT_OK)
        return GOT_FAILED;
    if ((g = ask(f, &req, &resp)) != GOT_BILL)
        return g;
    struct pt_wxbill b = {0};
    rc = pt_wxbill_file_check(&resp, sha1, f->why, sizeof f->why);
    if (rc == PT_OK)
        rc = pt_wxbill_parse(resp.body, resp.body_len, date, &b, f->why, sizeof f->why);
    pt_http_response_free(&resp);
    g = rc == PT_OK ? keep(f, b.rows, b.n, day) : GOT_FAILED;
    pt_wxbill_free(&b);
    return g;
}

static enum got stripe_list(struct fetch *f, int refunds, int64_t from_s, int64_t to_s, int day)
{
    struct pt_stripe_bill b = {0};
    enum got g = GOT_BILL;
    for (int page = 0; g == GOT_BILL; page++) {
        if (page == STRIPE_PAGES_MAX) {
            snprintf(f->why, sizeof f->why, "stripe: more than %d pages of %s in a day",
                     STRIPE_PAGES_MAX, refunds ? "refunds" : "charges");
            g = GOT_FAILED;
            break;
        }
        struct pt_http_request req = {0};
        struct pt_http_response resp = {0};
        if (pt_stripe_bill_request(f->cfg, refunds, from_s, to_s, page ? b.last_id : NULL, &req) !=
            PT_OK) {
            snprintf(f->why, sizeof f->why, "stripe: the list request cannot be made");
            g = GOT_FAILED;
            break;
        }
        if ((g = ask(f, &req, &resp)) != GOT_BILL)
            break;
        if (resp.status != 200) {
            snprintf(f->why, sizeof f->why, "stripe: GET /v1/%s answered HTTP %d: %.200s",
                     refunds ? "refunds" : "charges", resp.status, resp.body ? resp.body : "");
            g = GOT_FAILED;
        } else if (pt_stripe_bill_page(resp.body, resp.body_len, refunds, from_s, to_s, &b, f->why,
                                       sizeof f->why) != PT_OK) {
            g = GOT_FAILED;
        }
        pt_http_response_free(&resp);
        if (g == GOT_BILL && !b.has_more)
            break;
    }
    if (g == GOT_BILL)
        g = keep(f, b.rows, b.n, day);
    pt_stripe_bill_free(&b);
    return g;
}

static enum got stripe_day(struct fetch *f, const char *date, int day)
{
    int64_t start;
    if (pt_recon_day_start("stripe", date, &start) != PT_OK)
        return GOT_FAILED;
    enum got g = stripe_list(f, 0, start / 1000, start / 1000 + 86400, day);
    return g == GOT_BILL ? stripe_list(f, 1, start / 1000, start / 1000 + 86400, day) : g;
}

static enum got (*day_fetcher(const char *gateway))(struct fetch *, const char *, int)
{
    return !strcmp(gateway, "wechat") ? wechat_day : !strcmp(gateway, "stripe") ? stripe_day : NULL;
}

static int run_locked(struct pt_sync *s, struct pt_store *st, const char *gateway, const char *date,
                      const char *actor, int64_t now, char **body);

int pt_sync_reconcile(void *ctx, struct pt_store *st, const char *gateway, const char *date,
                      const char *actor, int64_t now, char **body)
{
    struct pt_sync *s = ctx;
    *body = NULL;
    if (pt_recon_bill_offset_min(gateway) < 0 || !pt_recon_date_ok(date))
        return PT_EINVAL;
    /* One run at a time: in this process (the mutex), and of this gateway
     * and date across the lanes of a PostgreSQL store (its lock). */
    if (pthread_mutex_trylock(&s->recon_mu) != 0)
        return PT_EBUSY;
    int rc = pt_store_recon_lock(st, gateway, date);
    if (rc == PT_OK) {
        rc = run_locked(s, st, gateway, date, actor, now, body);
        pt_store_recon_unlock(st, gateway, date);
    }
    pthread_mutex_unlock(&s->recon_mu);
    return rc;
}

static int run_locked(struct pt_sync *s, struct pt_store *st, const char *gateway, const char *date,
                      const char *actor, int64_t now, char **body)
{
    int i = pt_gateway_index(gateway);
    struct fetch f = {
        .s = s, .gw = i >= 0 ? pt_gateway_at(i) : NULL, .cfg = i >= 0 ? s->opt.gw[i] : NULL};
    if (!f.gw || pt_recon_bill_offset_min(gateway) < 0 || !pt_recon_date_ok(date))
        return PT_EINVAL;
    enum got (*day_of)(struct fetch *, const char *, int) = !strcmp(gateway, "wechat") ? wechat_day
                                                            : !strcmp(gateway, "stripe")
                                                                ? stripe_day
                                                                : NULL;
    enum got g;
    if (!f.cfg) {
        snprintf(f.why, sizeof f.why, "%s is not configured (gateways.%s)", gateway, gateway);
        g = GOT_FAILED;
    } else if (!day_of) {
        snprintf(f.why, sizeof f.why,
                 "downloading %s's bill is not built yet (docs/reconcile.md): nothing compared",
                 gateway);
        g = GOT_FAILED;
    } else {
        g = day_of(&f, date, 0);
    }
    /* The neighbouring days, where the gateway has them already. */
    for (int d = -1; g == GOT_BILL && d <= 1; d += 2) {
        char other[11];
        size_t before = f.n;
        if (pt_recon_shift_date(date, d, other) != PT_OK)
            continue;
        enum got n = day_of(&f, other, d);
        if (n != GOT_BILL) {
            pt_log_debug("reconciliation %s %s: the bill of %s is left out: %s", gateway, date,
                         other, f.why);
            f.n = before;
            f.why[0] = '\0';
        }
    }
    int rc;
    if (g == GOT_BILL) {
        struct pt_recon_bill bill = {.rows = f.rows, .n = f.n, .source = "download"};
        size_t found = 0;
        rc = pt_recon_run(st, gateway, date, &bill, actor, now, body, &found);
    } else {
        rc = pt_recon_run_unfinished(st, gateway, date, g == GOT_PENDING ? "pending" : "failed",
                                     f.why, now, body);
    }
    free(f.rows);
    return rc;
}

/* ---- the daily runs ---- */

#define MINUTE_MS 60000LL
#define DAY_MIN 1440
#define RETRY_FIRST_MS (15 * MINUTE_MS)
#define RETRY_MAX_MS (240 * MINUTE_MS)

/* The state a stored run body says ("done", "pending", "failed"). */
static int is_done(const char *body)
{
    return body && strstr(body, "\"state\":\"done\"") != NULL;
}

/* Gateway i's daily run, if due; how long until it should be looked at
 * again (monotonic ms). */
static int64_t daily_one(struct pt_sync *s, struct pt_store *st, int i, int64_t wall, int64_t mono)
{
    const char *name = pt_gateway_at(i)->name;
    int64_t after = s->opt.cfg->reconcile_after_min;
    int64_t local = wall + (int64_t)pt_recon_bill_offset_min(name) * MINUTE_MS;
    int64_t minute = (local / MINUTE_MS) % DAY_MIN;
    int64_t tomorrow = (DAY_MIN - minute + after) * MINUTE_MS;
    if (minute < after)
        return (after - minute) * MINUTE_MS;
    char date[11];
    pt_recon_previous_date(name, wall, date);
    char *latest = NULL;
    int rc = pt_store_recon_latest(st, name, date, &latest);
    int done = rc == PT_OK && is_done(latest);
    free(latest);
    if (done)
        return tomorrow;
    if (rc != PT_OK && rc != PT_ENOTFOUND)
        return MINUTE_MS; /* the store will answer again */
    if (strcmp(s->recon_date[i], date) != 0) {
        snprintf(s->recon_date[i], sizeof s->recon_date[i], "%s", date);
        s->recon_retry_at[i] = s->recon_backoff[i] = 0;
    }
    if (mono < s->recon_retry_at[i])
        return s->recon_retry_at[i] - mono;
    char *body = NULL;
    rc = pt_sync_reconcile(s, st, name, date, "schedule", pt__sync_now_ms(s), &body);
    done = rc == PT_OK && is_done(body);
    free(body);
    if (rc == PT_EBUSY)
        return MINUTE_MS; /* a run is on (asked for, or another lane's) */
    if (done)
        return tomorrow;
    int64_t b = s->recon_backoff[i];
    s->recon_backoff[i] = b ? (2 * b > RETRY_MAX_MS ? RETRY_MAX_MS : 2 * b) : RETRY_FIRST_MS;
    s->recon_retry_at[i] = mono + s->recon_backoff[i];
    pt_log_info("reconciliation %s %s: not done; tried again in %lld min", name, date,
                (long long)(s->recon_backoff[i] / MINUTE_MS));
    return s->recon_backoff[i];
}

int64_t pt_sync_reconcile_daily(struct pt_sync *s, struct pt_store *st, int64_t mono)
{
    int64_t wall, next = DAY_MIN * MINUTE_MS;
    if (!s->opt.cfg->reconcile_daily)
        return next;
    if (pt__sync_wall_ms(s, &wall) != PT_OK)
        return MINUTE_MS; /* which day it is is not known yet (SPEC 17) */
    for (int i = 0; i < pt_gateway_count() && i < PT_GW_MAX; i++) {
        if (!s->opt.gw[i] || !day_fetcher(pt_gateway_at(i)->name))
            continue; /* not configured, or no bill to download (docs/reconcile.md) */
        int64_t d = daily_one(s, st, i, wall, mono);
        if (d < next)
            next = d;
        if (pt__sync_tl_drain == s)
            pt__sync_mark_progress(s);
    }
    return next < 1000 ? 1000 : next;
}
