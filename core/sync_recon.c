/*
 * sync_recon.c - a reconciliation run with the gateway's own books (SPEC
 * 19): the sync engine downloads the gateway's side of the bill date and
 * its neighbours (it owns the transport, the clock, the nonce and the
 * gateway configurations), then core/recon_run.c compares and stores.
 *
 * What a gateway's side is, is its adapter's fetch_bill (gateway.h): a
 * daily bill and its file, or its lists of a day; a gateway without one is
 * asked about each local record instead ("coverage":"local").
 *
 * The day before and after are fetched too, where the gateway has them, so
 * that a payment at midnight is found on either side; a neighbour that is
 * not there yet is left out (its records can only show as a discrepancy
 * of that day's own run, never of this one's - see reconcile.h).
 */
#include "archive.h"
#include "log.h"
#include "recon_run.h"
#include "sync_impl.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define DAY_MS 86400000LL

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
    /* A channel of its own: a bill's download never holds the connection
     * a customer's payment waits for. */
    char channel[32];
    snprintf(channel, sizeof channel, "%s-bill", f->gw->name);
    int rc = t ? t->send(t->ctx, channel, req, (int)f->s->opt.cfg->sync_request_timeout_ms, resp)
               : PT_ENOTSENT;
    pt_http_request_free(req);
    /* Not taken as the gateway's reachability (SPEC 18): its own channel,
     * and a charge's first contact with a gateway is the charge's. */
    if (rc == PT_OK)
        return GOT_BILL;
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

/* The exchange the adapters' fetch_bill talks through. */
static int x_env(void *ctx, struct pt_gw_env *env, char nonce[33])
{
    return env_of(ctx, env, nonce);
}

static int x_send(void *ctx, struct pt_http_request *req, struct pt_http_response *resp)
{
    struct fetch *f = ctx;
    return ask(f, req, resp) == GOT_BILL ? PT_OK : PT_ENOTSENT;
}

/* The gateway's side of one date, through its adapter. */
static enum got bill_day(struct fetch *f, const char *date, int day)
{
    struct pt_gw_exchange x = {.env = x_env, .send = x_send, .ctx = f};
    struct pt_recon_rows rows = {.rows = f->rows, .n = f->n, .cap = f->cap};
    char why[sizeof f->why] = "";
    int rc = f->gw->fetch_bill(f->cfg, &x, date, day, &rows, why, sizeof why);
    f->rows = rows.rows;
    f->n = rows.n;
    f->cap = rows.cap;
    if (rc == PT_OK)
        return GOT_BILL;
    if (why[0] || !f->why[0])
        snprintf(f->why, sizeof f->why, "%s: %.400s", f->gw->name, why[0] ? why : pt_strerror(rc));
    return rc == PT_EAGAIN                           ? GOT_PENDING
           : rc == PT_ENOTSENT || rc == PT_ENOANSWER ? GOT_OFFLINE
                                                     : GOT_FAILED;
}

/* ---- a gateway without a bill: each local record asked about ---- */

/* One query through the gateway's own adapter: its request, the answer. */
static enum got query(struct fetch *f, int refund_op, const struct pt_charge *c,
                      const struct pt_refund *r, struct pt_http_response *resp)
{
    struct pt_gw_env env;
    char nonce[33];
    struct pt_http_request req = {0};
    int rc = env_of(f, &env, nonce);
    if (rc == PT_OK)
        rc = refund_op ? f->gw->build_refund(f->cfg, PT_GW_REFUND_QUERY, c, r, &env, &req)
                       : f->gw->build(f->cfg, PT_GW_QUERY, c, &env, &req);
    if (rc != PT_OK) {
        if (!f->why[0])
            snprintf(f->why, sizeof f->why, "%s: the query of %s cannot be made: %s", f->gw->name,
                     c->order_id, pt_strerror(rc));
        return GOT_FAILED;
    }
    return ask(f, &req, resp);
}

/* The local refund of charge charge_id whose gateway number is no. */
static int refund_of_no(struct pt_store *st, int64_t charge_id, const char *no,
                        struct pt_refund *out)
{
    enum { PAGE = 32 };
    struct pt_refund *rows = malloc(PAGE * sizeof *rows);
    int64_t after = 0;
    int n = 0, more = 1, rc = rows ? PT_ENOTFOUND : PT_ENOMEM;
    while (rc == PT_ENOTFOUND && more &&
           pt_store_refunds_list(st, charge_id, -1, after, PAGE, rows, &n, &more) == PT_OK) {
        for (int i = 0; i < n && rc == PT_ENOTFOUND; i++)
            if (no[0] && strcmp(rows[i].gateway_refund_no, no) == 0) {
                *out = rows[i];
                rc = PT_OK;
            }
        if (n == 0)
            break;
        after = rows[n - 1].id;
    }
    free(rows);
    return rc;
}

/* What the gateway says of local charge c: a record when it took the money. */
static enum got charge_asked(struct fetch *f, const struct pt_charge *c)
{
    struct pt_http_response resp = {0};
    enum got g = query(f, 0, c, NULL, &resp);
    if (g != GOT_BILL)
        return g;
    struct pt_gw_result res = {0};
    int rc = f->gw->parse(f->cfg, PT_GW_QUERY, c, &resp, &res);
    pt_http_response_free(&resp);
    if (rc != PT_OK || res.outcome == PT_OUTCOME_AMBIGUOUS) {
        snprintf(f->why, sizeof f->why, "%s: the query of %s has no answer to go by (%s %s)",
                 f->gw->name, c->order_id, res.code, res.message);
        return GOT_FAILED;
    }
    if (res.outcome != PT_OUTCOME_SUCCESS)
        return GOT_BILL; /* the gateway has no money for it: local_only */
    struct pt_recon_record r = {
        .refund = 0, .day = 0, .amount = res.amount ? res.amount : c->amount};
    snprintf(r.order_id, sizeof r.order_id, "%s", c->order_id);
    snprintf(r.gateway_trade_no, sizeof r.gateway_trade_no, "%s",
             res.trade_no[0] ? res.trade_no : c->gateway_trade_no);
    snprintf(r.currency, sizeof r.currency, "%s", res.currency[0] ? res.currency : c->currency);
    return keep(f, &r, 1, 0);
}

/* The gateway's refunds of charge c (a keyless gateway lists them all:
 * each SUCCESS entry is a record, named by the local refund of the same
 * gateway number when there is one); else local refund rf asked about. */
static enum got refunds_asked(struct fetch *f, const struct pt_charge *c,
                              const struct pt_refund *rf, struct pt_store *st)
{
    struct pt_http_response resp = {0};
    enum got g = query(f, 1, c, rf, &resp);
    if (g != GOT_BILL)
        return g;
    struct pt_recon_record r = {.refund = 1, .day = 0};
    snprintf(r.order_id, sizeof r.order_id, "%s", c->order_id);
    snprintf(r.gateway_trade_no, sizeof r.gateway_trade_no, "%s", c->gateway_trade_no);
    snprintf(r.currency, sizeof r.currency, "%s", c->currency);
    if (f->gw->refund_keyless) {
        struct pt_gw_refund_list *l = malloc(sizeof *l);
        if (!l) {
            pt_http_response_free(&resp);
            return GOT_FAILED;
        }
        f->gw->parse_refund_list(f->cfg, c, &resp, l);
        pt_http_response_free(&resp);
        g = l->res.outcome == PT_OUTCOME_SUCCESS ? GOT_BILL : GOT_FAILED;
        if (g == GOT_FAILED)
            snprintf(f->why, sizeof f->why, "%s: the refunds of %s cannot be read (%s %s)",
                     f->gw->name, c->order_id, l->res.code, l->res.message);
        for (int i = 0; g == GOT_BILL && i < l->n; i++) {
            if (l->e[i].status != PT_OUTCOME_SUCCESS)
                continue;
            struct pt_refund mine;
            r.refund_id[0] = '\0';
            if (refund_of_no(st, c->id, l->e[i].refund_no, &mine) == PT_OK)
                snprintf(r.refund_id, sizeof r.refund_id, "%s", mine.refund_id);
            snprintf(r.gateway_refund_no, sizeof r.gateway_refund_no, "%s", l->e[i].refund_no);
            r.amount = l->e[i].amount;
            g = keep(f, &r, 1, 0);
        }
        free(l);
        return g;
    }
    struct pt_gw_result res = {0};
    int rc = f->gw->parse_refund(f->cfg, PT_GW_REFUND_QUERY, c, rf, &resp, &res);
    pt_http_response_free(&resp);
    if (rc != PT_OK || res.outcome == PT_OUTCOME_AMBIGUOUS) {
        snprintf(f->why, sizeof f->why, "%s: the query of refund %s has no answer to go by",
                 f->gw->name, rf->refund_id);
        return GOT_FAILED;
    }
    if (res.outcome != PT_OUTCOME_SUCCESS)
        return GOT_BILL;
    snprintf(r.refund_id, sizeof r.refund_id, "%s", rf->refund_id);
    snprintf(r.gateway_refund_no, sizeof r.gateway_refund_no, "%s",
             res.trade_no[0] ? res.trade_no : rf->gateway_refund_no);
    r.amount = res.amount ? res.amount : rf->amount;
    return keep(f, &r, 1, 0);
}

/*
 * A gateway without a daily bill (2C2P; Alipay until its bill is
 * downloaded): each of the day's local SUCCESS charges and refunds is asked
 * about, so the run can find local_only and mismatches but never
 * gateway_only ("coverage":"local").  A keyless gateway's list is read once
 * per charge.
 */
static enum got local_coverage(struct fetch *f, struct pt_store *st, const char *date)
{
    struct pt_recon_record *loc = NULL;
    size_t n = 0;
    if (pt_recon_local(st, f->gw->name, date, &loc, &n) != PT_OK) {
        snprintf(f->why, sizeof f->why, "the local records could not be read");
        return GOT_FAILED;
    }
    enum got g = GOT_BILL;
    char listed[PT_ORDER_ID_MAX] = ""; /* the last charge whose refund list was read */
    for (size_t i = 0; g == GOT_BILL && i < n; i++) {
        if (loc[i].day != 0)
            continue;
        struct pt_charge c;
        struct pt_refund rf;
        if (pt_store_charge_get(st, loc[i].order_id, &c) != PT_OK ||
            (loc[i].refund && pt_store_refund_get(st, loc[i].refund_id, &rf) != PT_OK)) {
            snprintf(f->why, sizeof f->why, "the local record %s could not be read",
                     loc[i].order_id);
            g = GOT_FAILED;
        } else if (!loc[i].refund) {
            g = charge_asked(f, &c);
        } else if (!f->gw->refund_keyless || strcmp(listed, c.order_id) != 0) {
            g = refunds_asked(f, &c, &rf, st);
            snprintf(listed, sizeof listed, "%s", c.order_id);
        }
        if (pt__sync_tl_drain == f->s)
            pt__sync_mark_progress(f->s);
    }
    free(loc);
    return g;
}

static int run_locked(struct pt_sync *s, struct pt_store *st, const char *gateway, const char *date,
                      const char *actor, int64_t now, char **body);

int pt_sync_reconcile(void *ctx, struct pt_store *st, const char *gateway, const char *date,
                      const char *actor, int64_t now, char **body)
{
    struct pt_sync *s = ctx;
    *body = NULL;
    if (pt_gateway_bill_offset_min(gateway) < 0 || !pt_recon_date_ok(date))
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
    if (!f.gw)
        return PT_EINVAL;
    enum got (*day_of)(struct fetch *, const char *, int) = f.gw->fetch_bill ? bill_day : NULL;
    enum got g;
    int local = 0;
    if (!f.cfg) {
        snprintf(f.why, sizeof f.why, "%s is not configured (gateways.%s)", gateway, gateway);
        g = GOT_FAILED;
    } else if (!day_of) {
        g = local_coverage(&f, st, date);
        local = 1;
    } else {
        g = day_of(&f, date, 0);
    }
    /* The neighbouring days, where the gateway has them already. */
    for (int d = -1; g == GOT_BILL && !local && d <= 1; d += 2) {
        char other[11];
        size_t before = f.n;
        if (pt_recon_shift_date(date, d, other) != PT_OK)
            continue;
        enum got n = day_of(&f, other, d);
        /* Today's bill is not there to be had (Alipay: 不支持下载当日账单),
         * whatever a gateway answers for it: left out, as a bill not ready. */
        if (n == GOT_FAILED && d > 0 && pt_recon_date_after_today(gateway, other, now - DAY_MS))
            n = GOT_PENDING;
        if (n == GOT_FAILED || n == GOT_OFFLINE) {
            /* Not "not there yet": a neighbour that cannot be read would
             * make a payment at midnight look like a discrepancy. */
            g = n;
            break;
        }
        if (n != GOT_BILL) {
            pt_log_debug("reconciliation %s %s: the bill of %s is left out: %s", gateway, date,
                         other, f.why);
            f.n = before;
            f.why[0] = '\0';
        }
    }
    int rc;
    if (g == GOT_BILL) {
        struct pt_recon_bill bill = {
            .rows = f.rows, .n = f.n, .source = local ? "queries" : "download", .local = local};
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

/* 1 when a stored run's state is "done" (its JSON read, not searched:
 * nothing else in a run may pass for it). */
/* A run that is done and began at or after `since` (RFC 3339, as run_at is
 * written): one that ran while its bill day was not over compared only
 * part of it, and retention does not count it (store_sqlite_archive.c). */
static int is_done(const char *body, const char *since)
{
    cJSON *o = body ? cJSON_Parse(body) : NULL;
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(o, "state");
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(o, "run_at");
    int done = cJSON_IsString(state) && strcmp(state->valuestring, "done") == 0 &&
               cJSON_IsString(at) && strcmp(at->valuestring, since) >= 0;
    cJSON_Delete(o);
    return done;
}

/* 1 once gateway i's bill day has passed reconcile.after. */
static int due(const struct pt_sync *s, int i, int64_t wall)
{
    int64_t local = wall + (int64_t)pt_gateway_bill_offset_min(pt_gateway_at(i)->name) * MINUTE_MS;
    return (local / MINUTE_MS) % DAY_MIN >= s->opt.cfg->reconcile_after_min;
}

/* Gateway i's daily run, if due; how long until it should be looked at
 * again (monotonic ms). */
static int64_t daily_one(struct pt_sync *s, struct pt_store *st, int i, int64_t wall, int64_t mono)
{
    const char *name = pt_gateway_at(i)->name;
    int64_t after = s->opt.cfg->reconcile_after_min;
    int64_t local = wall + (int64_t)pt_gateway_bill_offset_min(name) * MINUTE_MS;
    int64_t minute = (local / MINUTE_MS) % DAY_MIN;
    int64_t tomorrow = (DAY_MIN - minute + after) * MINUTE_MS;
    if (minute < after)
        return (after - minute) * MINUTE_MS;
    char date[11], day_end[32];
    pt_recon_previous_date(name, wall, date);
    int64_t start = 0;
    if (pt_recon_day_start(name, date, &start) != PT_OK)
        return tomorrow;
    pt_rfc3339(start + DAY_MIN * MINUTE_MS, day_end);
    char *latest = NULL;
    int rc = pt_store_recon_latest(st, name, date, &latest);
    int done = rc == PT_OK && is_done(latest, day_end);
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
    done = rc == PT_OK && is_done(body, day_end);
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

/* ---- the walk back over missed days ---- */

/* How far back: within every gateway's bill download window (WeChat keeps
 * three months of trade bills). */
#define WALK_DAYS 30

struct walk {
    int64_t first;                 /* the start of the oldest day looked at */
    unsigned char held[WALK_DAYS]; /* 1: the lane holds final records of it */
};

static int walk_row(void *ctx, int64_t at)
{
    struct walk *w = ctx;
    int64_t d = (at - w->first) / DAY_MS;
    if (at >= w->first && d < WALK_DAYS)
        w->held[d] = 1;
    return PT_OK;
}

/*
 * Gateway i's days before `yesterday` that the daily run missed - the
 * daemon was down at the time, or the day was still pending the next
 * midnight: each of the last WALK_DAYS that the lane holds final records
 * of and that no run begun after its end reconciled, oldest first, one per
 * look (the next look, after the next drain, takes the next), each tried
 * once per walk; a walk ends for the day when none is left.  A day without
 * local records is not walked back to (its bill could only hold sales
 * made outside payterm).  How long until it should be looked at again.
 */
/* 1 when a stored run failed because its gateway could not be asked (the
 * error fetch() writes): the network, not the bill. */
static int not_asked(const char *body)
{
    cJSON *o = body ? cJSON_Parse(body) : NULL;
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(o, "state");
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(o, "error");
    int yes = cJSON_IsString(state) && strcmp(state->valuestring, "failed") == 0 &&
              cJSON_IsString(error) && strstr(error->valuestring, " could not be asked: ");
    cJSON_Delete(o);
    return yes;
}

static int64_t walk_back(struct pt_sync *s, struct pt_store *st, int i, const char *yesterday)
{
    const char *name = pt_gateway_at(i)->name;
    int off = pt_gateway_bill_offset_min(name);
    int64_t ystart;
    if (!strcmp(s->recon_walked[i], yesterday) || off < 0 ||
        pt_recon_day_start(name, yesterday, &ystart) != PT_OK)
        return DAY_MIN * MINUTE_MS;
    if (strcmp(s->recon_walk_for[i], yesterday) != 0) {
        /* A new day's walk: every missed day is tried again. */
        snprintf(s->recon_walk_for[i], sizeof s->recon_walk_for[i], "%s", yesterday);
        s->recon_walk_at[i][0] = '\0';
    }
    struct walk w = {.first = ystart - WALK_DAYS * DAY_MS};
    /* Final in any state: a day of declined sales only needs its run too
     * (the gateway may hold money for one; retention waits for it). */
    int rc = pt_store_recon_final_times(st, name, w.first, ystart, walk_row, &w);
    if (rc)
        return MINUTE_MS; /* the store will answer again */
    int64_t now = pt__sync_now_ms(s);
    for (int d = 0; d < WALK_DAYS; d++) {
        char date[11], day_end[32];
        pt_recon_date_of(w.first + d * DAY_MS, off, date);
        if (!w.held[d] || (s->recon_walk_at[i][0] && strcmp(date, s->recon_walk_at[i]) <= 0) ||
            pt_recon_date_archived(name, date, now, s->opt.cfg->retention_days))
            continue;
        pt_rfc3339(w.first + (d + 1) * DAY_MS, day_end);
        char *body = NULL;
        rc = pt_store_recon_latest(st, name, date, &body);
        int done = rc == PT_OK && is_done(body, day_end);
        free(body);
        if (rc != PT_OK && rc != PT_ENOTFOUND)
            return MINUTE_MS;
        if (done)
            continue;
        rc = pt_sync_reconcile(s, st, name, date, "schedule", now, &body);
        done = rc == PT_OK && is_done(body, day_end);
        int away = rc == PT_OK && !done && not_asked(body);
        free(body);
        if (rc == PT_EBUSY)
            return MINUTE_MS; /* a run is on: this day next time */
        if (away) {
            /* The gateway could not be asked (offline): not a try. */
            pt_log_info("reconciliation %s %s: a day the daily run missed; the gateway could "
                        "not be asked, tried again in %lld min",
                        name, date, (long long)(RETRY_FIRST_MS / MINUTE_MS));
            return RETRY_FIRST_MS;
        }
        snprintf(s->recon_walk_at[i], sizeof s->recon_walk_at[i], "%s", date);
        pt_log_info("reconciliation %s %s: a day the daily run missed, %s", name, date,
                    done ? "done" : "not done; tried again on the next walk");
        return 1000;
    }
    snprintf(s->recon_walked[i], sizeof s->recon_walked[i], "%s", yesterday);
    s->recon_walk_at[i][0] = '\0';
    pt_log_info("reconciliation %s: the walk back found no missed day before %s left to run", name,
                yesterday);
    return DAY_MIN * MINUTE_MS;
}

int64_t pt_sync_archive_daily(struct pt_sync *s, struct pt_store *st)
{
    int64_t wall;
    if (!(pt_store_caps(st) & PT_STORE_CAP_DATADIR_FILE))
        return DAY_MIN * MINUTE_MS;
    if (pt__sync_wall_ms(s, &wall) != PT_OK)
        return MINUTE_MS;
    struct pt_archive_result res;
    int rc = pt_archive_run(st, s->opt.cfg, pt__sync_now_ms(s), &res);
    if (rc) {
        pt_log_error("retention: the pass stopped: %s (%lld charges moved before)", pt_strerror(rc),
                     (long long)res.moved);
        return 60 * MINUTE_MS;
    }
    return DAY_MIN * MINUTE_MS;
}

int64_t pt_sync_reconcile_daily(struct pt_sync *s, struct pt_store *st, int64_t mono)
{
    int64_t wall, next = DAY_MIN * MINUTE_MS;
    if (!s->opt.cfg->reconcile_daily)
        return next;
    if (pt__sync_wall_ms(s, &wall) != PT_OK)
        return MINUTE_MS; /* which day it is is not known yet (SPEC 17) */
    for (int i = 0; i < pt_gateway_count() && i < PT_GW_MAX; i++) {
        char beyond[4];
        if (!s->opt.gw[i] || !pt_gateway_at(i)->fetch_bill)
            continue; /* not configured, or no bill to download (docs/reconcile.md) */
        if (!pt_gateway_bill_covers(pt_gateway_at(i), s->opt.gw[i]->currencies,
                                    s->opt.gw[i]->ncurrencies, beyond))
            continue; /* cross-border: its bill does not cover the lane's sales (SPEC 19) */
        int64_t d = daily_one(s, st, i, wall, mono);
        if (d < next)
            next = d;
        if (due(s, i, wall)) {
            char yesterday[11];
            pt_recon_previous_date(pt_gateway_at(i)->name, wall, yesterday);
            if ((d = walk_back(s, st, i, yesterday)) < next)
                next = d;
        }
        if (pt__sync_tl_drain == s)
            pt__sync_mark_progress(s);
    }
    return next < 1000 ? 1000 : next;
}
