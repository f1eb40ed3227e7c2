/*
 * sim_util.c - small helpers of the gateway simulator: HTTP messages, form
 * decoding, random identifiers, clocks and the amount rules.
 */
#include "sim_int.h"

#include "crypto.h"
#include "err.h"
#include "gateways/alipay.h"
#include "gateways/wechat.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

int64_t pt__sim_now_ms(const struct pt_sim *s)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + atomic_load(&s->advance_ms);
}

const char *pt__sim_req_header(const struct sim_req *rq, const char *name)
{
    for (int i = 0; i < rq->nheaders; i++)
        if (strcasecmp(rq->h[i].name, name) == 0)
            return rq->h[i].value;
    return NULL;
}

void pt__sim_resp_set(struct sim_resp *rs, int status, const char *ctype, const char *body,
                      size_t len)
{
    free(rs->body);
    rs->body = malloc(len + 1);
    rs->body_len = 0;
    rs->status = status;
    snprintf(rs->ctype, sizeof rs->ctype, "%s", ctype ? ctype : "");
    if (!rs->body) {
        /* Out of memory while answering: the best remaining honest answer. */
        rs->status = 500;
        return;
    }
    if (len)
        memcpy(rs->body, body, len);
    rs->body[len] = '\0';
    rs->body_len = len;
}

void pt__sim_resp_json(struct sim_resp *rs, int status, cJSON *j)
{
    char *text = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!text) {
        pt__sim_resp_set(rs, 500, "application/json", "{\"error\":\"out of memory\"}", 25);
        return;
    }
    pt__sim_resp_set(rs, status, "application/json", text, strlen(text));
    free(text);
}

void pt__sim_resp_header(struct sim_resp *rs, const char *fmt, ...)
{
    if (rs->nhdr >= SIM_RESP_HEADERS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rs->hdr[rs->nhdr++], sizeof rs->hdr[0], fmt, ap);
    va_end(ap);
}

void pt__sim_note(struct sim_resp *rs, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rs->note, sizeof rs->note, fmt, ap);
    va_end(ap);
}

void pt__sim_resp_free(struct sim_resp *rs)
{
    free(rs->body);
    rs->body = NULL;
    rs->body_len = 0;
}

/* ---- URLs ----------------------------------------------------- */

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

int pt__sim_url_decode(const char *s, size_t len, int plus_is_space, char *out, size_t outlen)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            if (i + 2 >= len)
                return PT_EPARSE;
            int a = hexval((unsigned char)s[i + 1]), b = hexval((unsigned char)s[i + 2]);
            if (a < 0 || b < 0)
                return PT_EPARSE;
            c = a * 16 + b;
            i += 2;
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        if (o + 1 >= outlen)
            return PT_ETOOBIG;
        out[o++] = (char)c;
    }
    out[o] = '\0';
    return PT_OK;
}

/* ---- identifiers, hashes, clocks ------------------------------------------ */

void pt__sim_random_alnum(struct pt_sim *s, char *out, size_t n)
{
    static const char set[] = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    unsigned char r[128];
    if (n > sizeof r)
        n = sizeof r;
    pt__sim_random(s, r, n);
    for (size_t i = 0; i < n; i++)
        out[i] = set[r[i] % 62];
    out[n] = '\0';
}

void pt__sim_random_digits(struct pt_sim *s, char *out, size_t n)
{
    unsigned char r[128];
    if (n > sizeof r)
        n = sizeof r;
    pt__sim_random(s, r, n);
    for (size_t i = 0; i < n; i++)
        out[i] = (char)('0' + r[i] % 10);
    out[n] = '\0';
}

void pt__sim_sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char d[32];
    if (pt_sha256(data, len, d) != PT_OK)
        memset(d, 0, sizeof d);
    pt_hex_encode(d, sizeof d, out);
}

enum sim_rule pt__sim_amount_rule(int64_t minor)
{
    switch (minor % 100) {
    case 51:
        return SIM_RULE_DECLINE;
    case 52:
        return SIM_RULE_PENDING;
    default:
        return SIM_RULE_PAY;
    }
}

int pt__sim_customer_pays(struct pt_sim *s, struct sim_trade *t, enum sim_rule *rule)
{
    enum sim_rule r = pt__sim_amount_rule(t->amount);
    t->pay_at = 0;
    t->updated_at = pt__sim_now_ms(s);
    if (r == SIM_RULE_PAY) {
        snprintf(t->status, sizeof t->status, "captured");
        t->captures++;
        t->paid_at = t->updated_at;
    } else {
        snprintf(t->status, sizeof t->status, "declined");
    }
    if (rule)
        *rule = r;
    return pt__sim_trade_update(s, t);
}

int pt__sim_local_time(const char *text, const char *zone, int64_t *ms)
{
    char rfc[40];
    int64_t sec = 0;
    if (strlen(text) != 19 || text[10] != ' ')
        return PT_EPARSE;
    snprintf(rfc, sizeof rfc, "%.10sT%.8s%s", text, text + 11, zone);
    if (pt_wechat_parse_time(rfc, &sec) != PT_OK)
        return PT_EPARSE;
    *ms = sec * 1000;
    return PT_OK;
}

int pt__sim_bill_day(const char *date, int offset_min, int64_t *start)
{
    char text[24], zone[24];
    if (!date || strlen(date) != 10 || date[4] != '-' || date[7] != '-')
        return PT_EPARSE;
    for (int i = 0; i < 10; i++)
        if (i != 4 && i != 7 && (date[i] < '0' || date[i] > '9'))
            return PT_EPARSE;
    snprintf(text, sizeof text, "%s 00:00:00", date);
    snprintf(zone, sizeof zone, "+%02d:%02d", offset_min / 60, offset_min % 60);
    int rc = pt__sim_local_time(text, zone, start);
    if (rc == PT_OK) {
        /* A date that does not exist (02-30) comes back as another day. */
        char back[20];
        int64_t ms = *start + (int64_t)offset_min * 60000;
        time_t t = (time_t)(ms / 1000);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(back, sizeof back, "%Y-%m-%d", &tm);
        if (strcmp(back, date) != 0)
            rc = PT_EPARSE;
    }
    return rc;
}

int pt__sim_bill_ready(const struct pt_sim *s, int64_t start)
{
    return s->bill_ready_min < 0 ||
           pt__sim_now_ms(s) >= start + 86400000LL + (int64_t)s->bill_ready_min * 60000;
}

void pt__sim_time_cn(int64_t ms, char out[20])
{
    pt_alipay_timestamp(ms, out); /* the adapter's own "yyyy-MM-dd HH:mm:ss" in UTC+8 */
}

void pt__sim_time_rfc3339_cn(int64_t ms, char out[32])
{
    /* China Standard Time has had no daylight saving since 1991. */
    time_t t = (time_t)(ms / 1000) + 8 * 3600;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%S+08:00", &tm);
}

const char *pt__sim_json_str(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int pt__sim_json_int(const cJSON *o, const char *name, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsNumber(v))
        return -1;
    double d = v->valuedouble;
    /* Exact integers only: amounts in minor units never have a fraction. */
    if (d != floor(d) || d < -9007199254740992.0 || d > 9007199254740992.0)
        return -1;
    *out = (int64_t)d;
    return 0;
}

/* ---- a trade's extra JSON ------------------------------------------------------ */

/* Stores x (deleted) as t's extra, when it fits. */
static void extra_store(struct sim_trade *t, cJSON *x)
{
    char *text = cJSON_PrintUnformatted(x);
    cJSON_Delete(x);
    if (text && strlen(text) < sizeof t->extra)
        memcpy(t->extra, text, strlen(text) + 1);
    free(text);
}

static cJSON *extra_of(const struct sim_trade *t)
{
    cJSON *x = cJSON_Parse(t->extra[0] ? t->extra : "{}");
    return cJSON_IsObject(x) ? x : (cJSON_Delete(x), cJSON_CreateObject());
}

int64_t pt__sim_extra_int(const struct sim_trade *t, const char *name)
{
    cJSON *x = extra_of(t);
    int64_t v = 0;
    if (pt__sim_json_int(x, name, &v) != 0)
        v = 0;
    cJSON_Delete(x);
    return v;
}

void pt__sim_extra_set_int(struct sim_trade *t, const char *name, int64_t v)
{
    cJSON *x = extra_of(t);
    cJSON_DeleteItemFromObjectCaseSensitive(x, name);
    cJSON_AddNumberToObject(x, name, (double)v);
    extra_store(t, x);
}

void pt__sim_set_expiry(struct sim_trade *t, const char *field, const char *sent,
                        int64_t expires_at)
{
    cJSON *x = extra_of(t);
    cJSON_AddStringToObject(x, "expiry_field", field);
    cJSON_AddStringToObject(x, "expiry", sent);
    cJSON_AddNumberToObject(x, "expires_at", (double)expires_at);
    extra_store(t, x);
}

int pt__sim_expired(const struct pt_sim *s, const struct sim_trade *t)
{
    int64_t at = pt__sim_extra_int(t, "expires_at");
    return at > 0 && strcmp(t->status, "pending") == 0 && pt__sim_now_ms(s) >= at;
}

const char *pt__sim_reason(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 204:
        return "No Content";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 402:
        return "Payment Required";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 411:
        return "Length Required";
    case 413:
        return "Payload Too Large";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    default:
        return "Status";
    }
}
