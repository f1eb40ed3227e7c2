/*
 * cmd_demo.c - `payterm demo`: a kiosk session against the simulator.
 *
 * Runs the gateway simulator and the daemon in this process (each on a free
 * loopback port, state in --dir) and plays what a lane sees in a day: online
 * charges on all four gateways, a double tap, the network cut, charges queued
 * offline, retries with the same keys, the network back and the queue
 * drained, a gateway that took the money but lost the answer, customers
 * paying QR codes with the gateways notifying (deliberate duplicates
 * included), and refunds on all four gateways: in parts, one too many, one
 * queued while the network is cut, answers lost (Stripe, and 2C2P, whose
 * refund request has no refund key).  It then compares the daemon's
 * charges, refunds and fulfilment feed with the simulator's ledger and
 * exits 0 only if every order was captured exactly once, every refund
 * executed exactly once and every fulfilment event was delivered once.
 *
 * The kiosk side speaks plain HTTP to the API with libcurl, exactly as a POS
 * application would; nothing here reaches into the daemon's internals.
 */
#include "cli.h"
#include "pt_config.h"

#include <stdio.h>

#if PT_WITH_SIM

#include "config_load.h"
#include "daemon.h"
#include "err.h"
#include "gateway.h"
#include "linux.h"
#include "log.h"
#include "reconcile.h"
#include "sim.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char help[] =
    "usage: payterm demo [--dir DIR]\n\n"
    "Plays a kiosk session against the built-in gateway simulator: online charges on\n"
    "Alipay, WeChat Pay, Stripe and 2C2P, the network cut, charges queued offline,\n"
    "client retries, the network back, the queue drained, duplicate notifications,\n"
    "refunds on all four (partial, one too many, queued offline, answers lost).\n"
    "Prints a summary; exits 0 only if every order was captured exactly once at the\n"
    "simulator, every refund executed there exactly once and every fulfilment event\n"
    "was delivered once.\n\n"
    "  --dir DIR   state directory (default ./payterm-demo), emptied first\n\n"
    "The demo writes its own configuration (DIR/payterm.json): -c/--config FILE is\n"
    "accepted and ignored.\n";

struct demo {
    char dir[512];
    char api[64]; /* http://127.0.0.1:PORT */
    char sim[64]; /* https://127.0.0.1:PORT */
    char ca[700];
    CURL *h;
    int replays;
    int failures;
    time_t day; /* when the session began: its bill dates (a sale after midnight is the
                   next day's, which a run fetches as its neighbour) */
};

/* ---- HTTP as the kiosk does it ---------------------------------------------------- */

struct answer {
    long status;
    int replayed;
    char *body;
    size_t len;
};

static size_t on_body(char *p, size_t s, size_t n, void *u)
{
    struct answer *a = u;
    char *b = realloc(a->body, a->len + s * n + 1);
    if (!b)
        return 0;
    memcpy(b + a->len, p, s * n);
    a->body = b;
    a->len += s * n;
    a->body[a->len] = '\0';
    return s * n;
}

static size_t on_header(char *p, size_t s, size_t n, void *u)
{
    struct answer *a = u;
    if (s * n >= 26 && strncasecmp(p, "Idempotency-Replayed: true", 26) == 0)
        a->replayed = 1;
    return s * n;
}

/* One request; body NULL = GET.  The caller frees a->body. */
static void request(struct demo *d, const char *url, const char *key, const char *body,
                    struct answer *a)
{
    memset(a, 0, sizeof *a);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    char kh[300];
    if (key) {
        snprintf(kh, sizeof kh, "Idempotency-Key: %s", key);
        hdr = curl_slist_append(hdr, kh);
    }
    curl_easy_reset(d->h);
    curl_easy_setopt(d->h, CURLOPT_URL, url);
    curl_easy_setopt(d->h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(d->h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(d->h, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(d->h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(d->h, CURLOPT_HEADERDATA, a);
    curl_easy_setopt(d->h, CURLOPT_CAINFO, d->ca);
    curl_easy_setopt(d->h, CURLOPT_TIMEOUT, 30L);
    if (body)
        curl_easy_setopt(d->h, CURLOPT_POSTFIELDS, body);
    if (curl_easy_perform(d->h) == CURLE_OK)
        curl_easy_getinfo(d->h, CURLINFO_RESPONSE_CODE, &a->status);
    curl_slist_free_all(hdr);
}

static cJSON *get_json(struct demo *d, const char *base, const char *path)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", base, path);
    struct answer a;
    request(d, url, NULL, NULL, &a);
    cJSON *o = a.body ? cJSON_Parse(a.body) : NULL;
    free(a.body);
    return o;
}

static void post_quiet(struct demo *d, const char *base, const char *path, const char *body)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", base, path);
    struct answer a;
    request(d, url, NULL, body, &a);
    free(a.body);
}

static double num(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static const char *str(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* ---- the session ------------------------------------------------------------------- */

#define MAX_ORDERS 32
static struct {
    char order[32];
    int want_captured; /* 1 captured, 0 declined */
    int want_refunds;  /* refund ids payterm accepted for the order */
    long want_refunded;
} expected[MAX_ORDERS];
static int nexpected;

static void expect(const char *order, int captured)
{
    snprintf(expected[nexpected].order, sizeof expected[0].order, "%s", order);
    expected[nexpected++].want_captured = captured;
}

/* One more refund of `amount` accepted for an order expect()ed before. */
static void expect_refund(const char *order, long amount)
{
    for (int i = 0; i < nexpected; i++)
        if (strcmp(expected[i].order, order) == 0) {
            expected[i].want_refunds++;
            expected[i].want_refunded += amount;
        }
}

static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("\n== ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

static void note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("   ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

/* POST /v1/charges and print one line: order, status, state or error. */
static void charge(struct demo *d, const char *key, const char *order, const char *fields)
{
    char url[128], body[1024];
    snprintf(url, sizeof url, "%s/v1/charges", d->api);
    snprintf(body, sizeof body, "{\"order_id\":\"%s\",%s}", order, fields);
    struct answer a;
    request(d, url, key, body, &a);
    cJSON *o = a.body ? cJSON_Parse(a.body) : NULL;
    const cJSON *err = cJSON_GetObjectItem(o, "error");
    const char *what = cJSON_IsObject(err) && !cJSON_GetObjectItem(o, "state") ? str(err, "code")
                                                                               : str(o, "state");
    const char *detail = cJSON_IsObject(err) ? str(err, "message") : str(o, "qr_code");
    if (!*detail)
        detail = str(o, "code_url");
    if (!*detail)
        detail = str(o, "payment_url");
    printf("   %-10s %3ld  %-22s %.56s%s\n", order, a.status, what, detail,
           a.replayed ? "  (replayed)" : "");
    fflush(stdout);
    d->replays += a.replayed;
    cJSON_Delete(o);
    free(a.body);
}

/* POST /v1/charges/{order}/refunds and print one line like charge(): the
 * refund id, status, state and what it refunds; or the error code, with
 * the daemon's whole message on the next line (it says what is left). */
static void refund(struct demo *d, const char *key, const char *order, const char *refund_id,
                   long amount)
{
    char url[160], body[256], amt[32] = "";
    snprintf(url, sizeof url, "%s/v1/charges/%s/refunds", d->api, order);
    if (amount > 0)
        snprintf(amt, sizeof amt, ",\"amount\":%ld", amount);
    snprintf(body, sizeof body, "{\"refund_id\":\"%s\"%s,\"reason\":\"returned\"}", refund_id, amt);
    struct answer a;
    request(d, url, key, body, &a);
    cJSON *o = a.body ? cJSON_Parse(a.body) : NULL;
    const cJSON *err = cJSON_GetObjectItem(o, "error");
    if (cJSON_IsObject(err) && !cJSON_GetObjectItem(o, "state")) {
        printf("   %-10s %3ld  %s\n", refund_id, a.status, str(err, "code"));
        printf("   %-10s      \"%s\"\n", "", str(err, "message"));
    } else {
        printf("   %-10s %3ld  %-22s %.0f %s of %s%s\n", refund_id, a.status, str(o, "state"),
               num(o, "amount"), str(o, "currency"), order, a.replayed ? "  (replayed)" : "");
    }
    fflush(stdout);
    d->replays += a.replayed;
    cJSON_Delete(o);
    free(a.body);
}

/* Polls a refund until it is final or the time is up; its state. */
static void wait_refund(struct demo *d, const char *refund_id, int seconds, char *state, size_t cap)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/refunds/%s", refund_id);
    for (int i = 0; i < seconds * 10; i++) {
        cJSON *r = get_json(d, d->api, path);
        snprintf(state, cap, "%s", str(r, "state"));
        cJSON_Delete(r);
        if (strcmp(state, "SUCCESS") == 0 || strcmp(state, "FAILED") == 0)
            return;
        usleep(100 * 1000);
    }
}

/* Polls the status until pred() says done or the time is up. */
static int wait_status(struct demo *d, int seconds, int (*pred)(const cJSON *status))
{
    for (int i = 0; i < seconds * 10; i++) {
        cJSON *s = get_json(d, d->api, "/v1/status");
        int done = s && pred(s);
        cJSON_Delete(s);
        if (done)
            return 1;
        usleep(100 * 1000);
    }
    return 0;
}

static int queue_settled(const cJSON *s)
{
    return num(cJSON_GetObjectItem(s, "queue"), "count") + num(s, "unknown") +
               num(s, "processing") ==
           0;
}

static int all_final(const cJSON *s)
{
    return queue_settled(s) && num(s, "pending") == 0;
}

#define BARCODE                                                                                    \
    "\"amount\":%d,\"currency\":\"CNY\",\"gateway\":\"alipay\",\"method\":\"barcode\","            \
    "\"payment_code\":\"287634438256643941\",\"subject\":\"Latte\""
#define WXCODE                                                                                     \
    "\"amount\":%d,\"currency\":\"CNY\",\"gateway\":\"wechat\",\"method\":\"barcode\","            \
    "\"payment_code\":\"134567890123456789\",\"subject\":\"Dumplings\""
#define CARD                                                                                       \
    "\"amount\":%d,\"currency\":\"USD\",\"gateway\":\"stripe\",\"method\":\"card_on_file\","       \
    "\"payment_method\":\"pm_card_visa\",\"customer\":\"cus_demo\""

/* Act 8, on the four gateways.  Stripe, Alipay and 2C2P (cards) refund
 * synchronously; WeChat answers PROCESSING and notifies later, so the act
 * waits for its end too. */
/* 2C2P's refund request has no refund key (SPEC 5a): payterm reads 2C2P's
 * list of the charge's refunds before every send. */
static void refunds_2c2p(struct demo *d)
{
    char state[32];
    note("2C2P refunds through its Payment Maintenance API, whose request names no refund:");
    refund(d, "k-r7", "DEMO-T1", "R-T1-1", 50000);
    expect_refund("DEMO-T1", 50000);
    note("(first 2C2P's refund status: nothing listed, so it is sent)");
    post_quiet(d, d->sim, "/_sim/faults",
               "{\"gateway\":\"2c2p\",\"mode\":\"drop_after_commit\",\"count\":1,"
               "\"process_type\":\"R\"}");
    refund(d, "k-r8", "DEMO-T1", "R-T1-2", 30000);
    expect_refund("DEMO-T1", 30000);
    note("(2C2P refunded, the answer was lost: UNKNOWN.  Once the lost request can no longer");
    note(" arrive, payterm reads 2C2P's refund list, finds an entry of this amount no other");
    note(" refund explains and binds it - never a second refund)");
    wait_refund(d, "R-T1-2", 40, state, sizeof state);
    note("R-T1-2 is now %s", state);
}

static void refunds(struct demo *d)
{
    char state[32];
    say("8. Refunds on all four gateways: in parts, one too many, offline, answers lost");
    printf("   %-10s %3s  %-22s %s\n", "refund", "HTTP", "state", "detail");
    refund(d, "k-r1", "DEMO-S1", "R-S1-1", 500);
    expect_refund("DEMO-S1", 500);
    refund(d, "k-r2", "DEMO-S1", "R-S1-2", 400);
    expect_refund("DEMO-S1", 400);
    refund(d, "k-r1", "DEMO-S1", "R-S1-1", 500);
    note("(the same request again: the stored answer, not a second refund)");
    refund(d, "k-r3", "DEMO-S1", "R-S1-3", 500);
    note("(checked in the transaction that would insert it: never more than was paid)");

    note("the network to Alipay goes down:");
    post_quiet(d, d->sim, "/_sim/faults",
               "{\"gateway\":\"alipay\",\"mode\":\"refuse_connect\",\"count\":100000}");
    refund(d, "k-r4", "DEMO-O2", "R-O2-1", 0);
    expect_refund("DEMO-O2", 3100);
    note("(no amount: everything not yet refunded; Alipay cannot be reached, so it is queued)");
    cJSON *s = get_json(d, d->api, "/v1/status");
    char *t = cJSON_PrintUnformatted(cJSON_GetObjectItem(s, "refunds"));
    note("refunds: %s", t ? t : "?");
    free(t);
    cJSON_Delete(s);
    post_quiet(d, d->sim, "/_sim/faults", "{\"mode\":\"none\"}");
    post_quiet(d, d->api, "/v1/sync", "");
    wait_refund(d, "R-O2-1", 30, state, sizeof state);
    note("the network is back: R-O2-1 is now %s", state);

    note("Stripe takes the next refund, but its answer is lost (drop_after_commit):");
    post_quiet(d, d->sim, "/_sim/faults",
               "{\"gateway\":\"stripe\",\"mode\":\"drop_after_commit\",\"count\":1}");
    refund(d, "k-r5", "DEMO-O1", "R-O1-1", 1500);
    expect_refund("DEMO-O1", 1500);
    note("(UNKNOWN: payterm lists the intent's refunds and finds metadata[refund_id]");
    note(" instead of refunding again)");
    refund(d, "k-r5", "DEMO-O1", "R-O1-1", 1500);
    wait_refund(d, "R-O1-1", 30, state, sizeof state);
    note("R-O1-1 is now %s", state);

    note("WeChat Pay accepts a refund and finishes it later (PROCESSING, then a notification):");
    refund(d, "k-r6", "DEMO-W1", "R-W1-1", 600);
    expect_refund("DEMO-W1", 600);
    wait_refund(d, "R-W1-1", 30, state, sizeof state);
    note("R-W1-1 is now %s", state);
    refunds_2c2p(d);
}

static void day_end(struct demo *d);

static void session(struct demo *d)
{
    char f[512];
    d->day = time(NULL);
    say("1. Online: one charge per gateway and method");
    printf("   %-10s %3s  %-22s %s\n", "order", "HTTP", "state", "detail");
    snprintf(f, sizeof f, BARCODE, 2350);
    charge(d, "k-a1", "DEMO-A1", f);
    expect("DEMO-A1", 1);
    charge(d, "k-a2", "DEMO-A2",
           "\"amount\":1800,\"currency\":\"CNY\",\"gateway\":\"alipay\",\"method\":\"qr\","
           "\"subject\":\"Cake\"");
    expect("DEMO-A2", 1);
    charge(d, "k-w1", "DEMO-W1",
           "\"amount\":2600,\"currency\":\"CNY\",\"gateway\":\"wechat\",\"method\":\"qr\","
           "\"subject\":\"Tea\"");
    expect("DEMO-W1", 1);
    snprintf(f, sizeof f, WXCODE, 1600);
    charge(d, "k-w2", "DEMO-W2", f);
    expect("DEMO-W2", 1);
    snprintf(f, sizeof f, WXCODE, 2852);
    charge(d, "k-w3", "DEMO-W3", f);
    expect("DEMO-W3", 1);
    note("(WeChat payment codes go through APIv2 micropay; DEMO-W3's customer confirms with a");
    note(" password first (USERPAYING): PENDING, and payterm polls orderquery until it is paid)");
    snprintf(f, sizeof f, CARD, 1299);
    charge(d, "k-s1", "DEMO-S1", f);
    expect("DEMO-S1", 1);
    charge(d, "k-t1", "DEMO-T1",
           "\"amount\":150000,\"currency\":\"THB\",\"gateway\":\"2c2p\",\"method\":\"redirect\","
           "\"subject\":\"Room 12\"");
    expect("DEMO-T1", 1);
    snprintf(f, sizeof f, CARD, 1551);
    charge(d, "k-s2", "DEMO-S2", f);
    expect("DEMO-S2", 0);
    note("(amounts ending in 51 are declined by the simulator: 402 with the gateway's reason)");

    say("2. The customer double-taps: the same requests again, same keys");
    snprintf(f, sizeof f, BARCODE, 2350);
    charge(d, "k-a1", "DEMO-A1", f);
    snprintf(f, sizeof f, CARD, 1299);
    charge(d, "k-s1", "DEMO-S1", f);

    say("3. The network goes down: every gateway refuses connections");
    post_quiet(d, d->sim, "/_sim/faults",
               "{\"gateway\":\"*\",\"mode\":\"refuse_connect\",\"count\":100000}");
    snprintf(f, sizeof f, CARD, 4500);
    charge(d, "k-o1", "DEMO-O1", f);
    expect("DEMO-O1", 1);
    snprintf(f, sizeof f, BARCODE, 3100);
    charge(d, "k-o2", "DEMO-O2", f);
    expect("DEMO-O2", 1);
    snprintf(f, sizeof f, CARD, 800);
    charge(d, "k-o3", "DEMO-O3", f);
    expect("DEMO-O3", 1);
    charge(d, "k-o4", "DEMO-O4",
           "\"amount\":990,\"currency\":\"CNY\",\"gateway\":\"wechat\",\"method\":\"qr\"");
    note("(a QR code needs the gateway: 503, nothing stored, the same key works later)");
    snprintf(f, sizeof f, CARD, 90000);
    charge(d, "k-o5", "DEMO-O5", f);
    note("(above offline.limits.USD.max_amount: refused while offline)");
    cJSON *s = get_json(d, d->api, "/v1/status");
    char *t = cJSON_PrintUnformatted(cJSON_GetObjectItem(s, "queue"));
    note("online: %s, queue: %s", cJSON_IsTrue(cJSON_GetObjectItem(s, "online")) ? "yes" : "no",
         t ? t : "?");
    free(t);
    cJSON_Delete(s);

    say("4. The kiosk retries while offline: same keys, nothing new is created");
    snprintf(f, sizeof f, CARD, 4500);
    charge(d, "k-o1", "DEMO-O1", f);
    snprintf(f, sizeof f, BARCODE, 3100);
    charge(d, "k-o2", "DEMO-O2", f);

    say("5. The network comes back: the queue drains");
    post_quiet(d, d->sim, "/_sim/faults", "{\"mode\":\"none\"}");
    post_quiet(d, d->api, "/v1/sync", "");
    if (!wait_status(d, 30, queue_settled)) {
        note("the queue did not drain");
        d->failures++;
    }
    s = get_json(d, d->api, "/v1/status");
    t = cJSON_PrintUnformatted(cJSON_GetObjectItem(s, "queue"));
    note("online: %s, queue: %s", cJSON_IsTrue(cJSON_GetObjectItem(s, "online")) ? "yes" : "no",
         t ? t : "?");
    free(t);
    cJSON_Delete(s);

    say("6. The gateway takes the money but the answer is lost (drop_after_commit)");
    post_quiet(d, d->sim, "/_sim/faults",
               "{\"gateway\":\"stripe\",\"mode\":\"drop_after_commit\",\"count\":1}");
    snprintf(f, sizeof f, CARD, 2100);
    charge(d, "k-p1", "DEMO-P1", f);
    expect("DEMO-P1", 1);
    note("(UNKNOWN: payterm asks Stripe by metadata['order_id'] instead of charging again)");
    charge(d, "k-p1", "DEMO-P1", f);
    for (int i = 0; i < 300; i++) {
        cJSON *c = get_json(d, d->api, "/v1/charges/DEMO-P1");
        int done = strcmp(str(c, "state"), "SUCCESS") == 0;
        cJSON_Delete(c);
        if (done)
            break;
        usleep(100 * 1000);
    }
    cJSON *c = get_json(d, d->api, "/v1/charges/DEMO-P1");
    note("DEMO-P1 is now %s", str(c, "state"));
    cJSON_Delete(c);

    say("7. Customers scan the QR codes and pay; the gateways notify (with duplicates)");
    if (!wait_status(d, 60, all_final)) {
        note("charges are still open");
        d->failures++;
    }
    sleep(3); /* the simulator's deliberate late duplicates */
    refunds(d);
    day_end(d);
}

/* Sums a counter family from /metrics by its result label. */
static long metric_sum(struct demo *d, const char *result)
{
    char url[128], needle[64];
    snprintf(url, sizeof url, "%s/metrics", d->api);
    snprintf(needle, sizeof needle, "result=\"%s\"}", result);
    struct answer a;
    request(d, url, NULL, NULL, &a);
    long sum = 0;
    for (char *line = a.body ? strtok(a.body, "\n") : NULL; line; line = strtok(NULL, "\n"))
        if (strncmp(line, "payterm_notifications_total{", 28) == 0 && strstr(line, needle))
            sum += atol(strrchr(line, ' ') + 1);
    free(a.body);
    return sum;
}

/* The number of an order's refund.succeeded events in the feed. */
static int refund_events(const cJSON *events, const char *order)
{
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(events, "data"))
    {
        n += strcmp(str(e, "order_id"), order) == 0 &&
             strcmp(str(e, "type"), "refund.succeeded") == 0;
    }
    return n;
}

/* The refunds payterm accepted for an order (every one it stores: a
 * refused one is never stored), and how many of them are SUCCESS. */
static int accepted_refunds(struct demo *d, const char *order, int *succeeded)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/charges/%.64s/refunds?limit=100", order);
    cJSON *list = get_json(d, d->api, path);
    const cJSON *e;
    int n = 0;
    *succeeded = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(list, "data"))
    {
        n++;
        *succeeded += strcmp(str(e, "state"), "SUCCESS") == 0;
    }
    cJSON_Delete(list);
    return n;
}

/* POST a guarded request without a body's echo; the answer parsed. */
static cJSON *post_json(struct demo *d, const char *path, const char *key, const char *body,
                        long *status)
{
    char url[160];
    snprintf(url, sizeof url, "%s%s", d->api, path);
    struct answer a;
    request(d, url, key, body ? body : "", &a);
    cJSON *o = a.body ? cJSON_Parse(a.body) : NULL;
    *status = a.status;
    free(a.body);
    return o;
}

/*
 * The day ends: the till is closed (a Z report, chained to the last) and
 * each gateway's books are checked against the lane's (SPEC 19).  One
 * line of Alipay's books was changed at the simulator first: exactly that
 * one discrepancy must be found, and its charge put under review.
 */
static void day_end(struct demo *d)
{
    say("9. The day ends: close the till, check each gateway's books");
    post_quiet(d, d->sim, "/_sim/ledger/alter",
               "{\"gateway\":\"alipay\",\"order_id\":\"DEMO-A1\",\"amount\":2530}");
    note("(planted at the simulator: Alipay's books now say DEMO-A1 was 25.30, not 23.50)");
    long status;
    cJSON *z = post_json(d, "/v1/reports/z", "k-close-1", NULL, &status);
    const cJSON *open = cJSON_GetObjectItem(z, "open");
    note("Z report %d: %ld, hash %.16s..., prev_hash %.16s..., still open %d", (int)num(z, "z"),
         status, str(z, "hash"), str(z, "prev_hash"), (int)num(open, "queued"));
    if (status != 201)
        d->failures++;
    cJSON_Delete(z);
    int found = 0, wanted = 0;
    printf("   %-8s %-10s %3s  %-7s %-8s %-7s %s\n", "gateway", "bill date", "HTTP", "state",
           "source", "matched", "discrepancies");
    for (int i = 0; i < pt_gateway_count(); i++) {
        const char *gw = pt_gateway_at(i)->name;
        char date[11], body[96], key[48];
        pt_recon_date_of((int64_t)d->day * 1000, pt_gateway_bill_offset_min(gw), date);
        snprintf(body, sizeof body, "{\"gateway\":\"%s\",\"date\":\"%s\"}", gw, date);
        snprintf(key, sizeof key, "k-recon-%s", gw);
        cJSON *r = post_json(d, "/v1/reconciliations", key, body, &status);
        char kinds[256] = "";
        size_t k = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(r, "discrepancies"))
        {
            k += (size_t)snprintf(kinds + k, k < sizeof kinds ? sizeof kinds - k : 0, "%s%s %s",
                                  k ? "; " : "", str(e, "kind"), str(e, "order_id"));
            found++;
            wanted += strcmp(str(e, "kind"), "amount_mismatch") == 0 &&
                      strcmp(str(e, "order_id"), "DEMO-A1") == 0;
        }
        printf("   %-8s %-10s %3ld  %-7s %-8s %-7d %s\n", gw, date, status, str(r, "state"),
               str(r, "source"), (int)num(r, "matched"), k ? kinds : "none");
        if (status != 201 || strcmp(str(r, "state"), "done") != 0)
            d->failures++;
        cJSON_Delete(r);
    }
    cJSON *c = get_json(d, d->api, "/v1/charges/DEMO-A1");
    note("found %d discrepancy (the planted one: %s); DEMO-A1 under review: %s (%s)", found,
         wanted ? "yes" : "no", cJSON_IsTrue(cJSON_GetObjectItem(c, "review")) ? "yes" : "no",
         str(c, "review_reason"));
    if (found != 1 || wanted != 1 || !cJSON_IsTrue(cJSON_GetObjectItem(c, "review")))
        d->failures++;
    cJSON_Delete(c);
}

static int verdict(struct demo *d)
{
    say("Summary");
    cJSON *ledger = get_json(d, d->sim, "/_sim/ledger");
    cJSON *charges = get_json(d, d->api, "/v1/charges?limit=100");
    cJSON *events = get_json(d, d->api, "/v1/events?limit=100");
    int ok = ledger && charges && events && d->failures == 0;
    printf("   %-9s %-7s %-9s %-10s %-8s %-10s %-6s %s\n", "order", "gateway", "local", "simulator",
           "captures", "refunded", "events", "verdict");
    int refunds_accepted = 0, refunds_executed = 0;
    for (int i = 0; i < nexpected; i++) {
        const char *o = expected[i].order;
        const cJSON *ch = NULL, *e;
        cJSON_ArrayForEach(
            e, cJSON_GetObjectItem(charges, "data")) if (strcmp(str(e, "order_id"), o) == 0) ch = e;
        int captures = 0, sim_refunds = 0;
        long sim_refunded = 0;
        const char *simstate = "-";
        cJSON_ArrayForEach(
            e, cJSON_GetObjectItem(ledger, "data")) if (strcmp(str(e, "order_id"), o) == 0)
        {
            captures += (int)num(e, "captures");
            sim_refunds += (int)num(e, "refunds");
            sim_refunded += (long)num(e, "refunded");
            simstate = str(e, "status");
        }
        int evs = 0;
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(events, "data"))
        {
            const char *type = str(e, "type");
            if (strcmp(str(e, "order_id"), o) == 0 &&
                (strcmp(type, "charge.succeeded") == 0 || strcmp(type, "charge.failed") == 0))
                evs++;
        }
        const char *local = ch ? str(ch, "state") : "-";
        int good = expected[i].want_captured
                       ? captures == 1 && strcmp(local, "SUCCESS") == 0 && evs == 1
                       : captures == 0 && strcmp(local, "FAILED") == 0 && evs == 1;
        /* Every refund payterm accepted was executed exactly once at the
         * simulator, is SUCCESS here with its one event, and both sides
         * agree on the money. */
        int succeeded = 0, accepted = accepted_refunds(d, o, &succeeded);
        good &= accepted == expected[i].want_refunds && succeeded == accepted &&
                sim_refunds == accepted && sim_refunded == (long)num(ch, "amount_refunded") &&
                sim_refunded == expected[i].want_refunded && refund_events(events, o) == accepted;
        refunds_accepted += accepted;
        refunds_executed += sim_refunds;
        ok &= good;
        char refunded[24] = "-";
        if (sim_refunds || accepted)
            snprintf(refunded, sizeof refunded, "%ld (%d)", sim_refunded, sim_refunds);
        printf("   %-9s %-7s %-9s %-10s %-8d %-10s %-6d %s\n", o, ch ? str(ch, "gateway") : "-",
               local, simstate, captures, refunded, evs, good ? "ok" : "FAIL");
    }
    /* Nothing may have been captured twice or refunded behind payterm's
     * back, for any order. */
    int accepted = cJSON_GetArraySize(cJSON_GetObjectItem(charges, "data"));
    int captured = 0, twice = 0, sim_refunds_all = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(ledger, "data"))
    {
        captured += num(e, "captures") == 1;
        twice += num(e, "captures") > 1;
        sim_refunds_all += (int)num(e, "refunds");
    }
    ok &= twice == 0 && sim_refunds_all == refunds_executed;
    long dups = metric_sum(d, "duplicate");
    printf("   (refunded: minor units returned at the simulator, and how many refunds it "
           "executed)\n");
    printf("\n   charges accepted: %d, captured at the simulator: %d, captured twice: %d\n",
           accepted, captured, twice);
    printf("   refunds accepted: %d, executed at the simulator: %d (on any order: %d)\n",
           refunds_accepted, refunds_executed, sim_refunds_all);
    printf("   duplicates prevented: %ld (%d replayed requests, %ld duplicate notifications)\n",
           d->replays + dups, d->replays, dups);
    cJSON_Delete(ledger);
    cJSON_Delete(charges);
    cJSON_Delete(events);
    if (ok)
        printf("\nEvery order was captured exactly once, every refund executed exactly once; "
               "every fulfilment event was delivered once.\n");
    else
        printf("\nFAILED: see above and the log in %s/payterm.log\n", d->dir);
    return ok;
}

/* ---- setting up ------------------------------------------------------------------------ */

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

int pt_cmd_demo(int argc, char **argv)
{
    struct demo d = {0};
    struct pt_cli_common ignored = {0};
    snprintf(d.dir, sizeof d.dir, "payterm-demo");
    for (int i = 1; i < argc; i++) {
        int r = pt_cli_take_config(&ignored, argc, argv, &i);
        if (r < 0)
            return PT_EXIT_USAGE;
        if (r)
            continue;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(help, stdout);
            return PT_EXIT_OK;
        } else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
            snprintf(d.dir, sizeof d.dir, "%s", argv[++i]);
        } else {
            pt_cli_error("demo", "unexpected argument '%s' (see payterm demo --help)", argv[i]);
            return PT_EXIT_USAGE;
        }
    }
    char cmd[1200], err[1024];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", d.dir, d.dir);
    if (strchr(d.dir, '\'') || system(cmd) != 0) {
        pt_cli_error("demo", "cannot prepare --dir %s", d.dir);
        return PT_EXIT_FAIL;
    }
    char log[560];
    snprintf(log, sizeof log, "%s/payterm.log", d.dir);
    if (!freopen(log, "a", stderr)) {
        pt_cli_error("demo", "cannot write %s: %s", log, strerror(errno));
        return PT_EXIT_FAIL;
    }
    pt_linux_log_use_syslog(0); /* the daemon's own lines: time and level first */
    int api_port = free_port();
    char notify[64], simdir[560];
    snprintf(notify, sizeof notify, "http://127.0.0.1:%d", api_port);
    snprintf(simdir, sizeof simdir, "%s/sim", d.dir);
    struct pt_sim_options so = {.listen = "127.0.0.1:0", .dir = simdir, .notify_base = notify};
    struct pt_sim *sim = NULL;
    struct pt_daemon *daemon = NULL;
    int ok = 0;
    say("Starting the gateway simulator (Alipay, WeChat Pay, Stripe, 2C2P over TLS)");
    if (pt_sim_start(&so, &sim, err, sizeof err) != PT_OK) {
        printf("   simulator: %s\n", err);
        goto out;
    }
    snprintf(d.sim, sizeof d.sim, "https://127.0.0.1:%d", pt_sim_port(sim));
    snprintf(d.api, sizeof d.api, "http://127.0.0.1:%d", api_port);
    snprintf(d.ca, sizeof d.ca, "%s/ca.pem", simdir);
    note("%s; keys, certificates and gateways.json in %s", d.sim, simdir);

    char base[560], gw[600];
    snprintf(base, sizeof base, "%s/payterm.json", d.dir);
    snprintf(gw, sizeof gw, "%s/gateways.json", simdir);
    FILE *f = fopen(base, "w");
    if (!f) {
        printf("   cannot write %s\n", base);
        goto out;
    }
    fprintf(f,
            "{\n  \"data_dir\": \"data\",\n  \"listen\": \"127.0.0.1:%d\",\n"
            "  \"offline\": {\n"
            "    \"limits\": {\"CNY\": {\"max_amount\": 50000, \"max_total\": 500000},\n"
            "               \"USD\": {\"max_amount\": 20000, \"max_total\": 200000},\n"
            "               \"THB\": {\"max_amount\": 500000, \"max_total\": 5000000}},\n"
            "    \"max_count\": 100\n  },\n"
            "  \"sync\": {\"interval_s\": 1, \"backoff_base_ms\": 200, \"backoff_max_ms\": 2000,\n"
            "           \"request_timeout_ms\": 3000},\n"
            "  \"reconcile\": {\"daily\": false}\n}\n",
            api_port);
    fclose(f);
    static struct pt_config cfg; /* ~34 KiB: off the stack (one command per process) */
    const char *paths[] = {base, gw};
    if (pt_config_load(paths, 2, &cfg, err, sizeof err) != PT_OK) {
        printf("   %s\n", err);
        goto out;
    }
    say("Starting payterm serve on %s (payterm.json + the simulator's gateways.json)", d.api);
    if (pt_daemon_start(&cfg, &daemon, err, sizeof err) != PT_OK) {
        printf("   %s\n", err);
        goto out;
    }
    note("database %s/data/payterm.db (SQLite WAL, synchronous=FULL); log %s", d.dir, log);
    d.h = curl_easy_init();
    session(&d);
    ok = verdict(&d);
out:
    if (d.h)
        curl_easy_cleanup(d.h);
    pt_daemon_stop(daemon);
    pt_sim_stop(sim);
    return ok ? PT_EXIT_OK : PT_EXIT_FAIL;
}

#else

int pt_cmd_demo(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "payterm demo: this build has no simulator (PT_WITH_SIM=OFF, a board "
                    "build); run the demo from a desktop build\n");
    return PT_EXIT_FAIL;
}

#endif
