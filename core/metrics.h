/*
 * metrics.h - process-wide counters for /metrics (Prometheus text format).
 *
 * Plain C11 atomics, bumped by whoever observes the event (the HTTP layer,
 * the sync engine, notification intake) and read by the /metrics handler.
 * Gauges that live in the database (charges by state, queue depth) are read
 * from the store at scrape time instead.
 */
#ifndef PT_METRICS_H
#define PT_METRICS_H

#include <stdatomic.h>
#include <stdint.h>

#include "gateway.h"

/* Per-gateway counters are indexed by the registry's index (gateway.h). */
#define PT_MG__COUNT PT_GW_MAX

/* Outcome classes of one sync send (SPEC section 7). */
enum pt_metric_sync {
    PT_MS_SUCCESS = 0,
    PT_MS_DECLINED,
    PT_MS_PENDING,
    PT_MS_AMBIGUOUS,
    PT_MS_NOT_SENT,
    PT_MS_CANCELED,
    PT_MS_NOT_FOUND,
    PT_MS__COUNT
};

enum pt_metric_notify {
    PT_MN_APPLIED = 0, /* changed a charge */
    PT_MN_DUPLICATE,   /* seen before: acknowledged, nothing changed */
    PT_MN_REVIEW,      /* mismatch: review raised */
    PT_MN_IGNORED,     /* valid but nothing to apply */
    PT_MN_BAD_SIGNATURE,
    PT_MN_MALFORMED,
    PT_MN_FOREIGN,  /* verified but bound to no charge of ours: nothing changed */
    PT_MN_DEFERRED, /* not verified while the wall clock is untrusted: 503 (SPEC 17) */
    PT_MN__COUNT
};

/* Upper bounds of the request latency histogram, in microseconds. */
#define PT_LATENCY_BUCKETS 12
extern const int64_t pt_latency_bounds_us[PT_LATENCY_BUCKETS];

struct pt_metrics {
    atomic_uint_fast64_t http_by_class[6];                       /* index = status / 100 */
    atomic_uint_fast64_t latency_bucket[PT_LATENCY_BUCKETS + 1]; /* last = +Inf */
    atomic_uint_fast64_t latency_sum_us;
    atomic_uint_fast64_t latency_count;
    atomic_uint_fast64_t idem_replays;
    atomic_uint_fast64_t idem_in_use;
    atomic_uint_fast64_t idem_reused;
    atomic_uint_fast64_t sync_attempts[PT_MG__COUNT][PT_MS__COUNT];
    atomic_uint_fast64_t notifications[PT_MG__COUNT][PT_MN__COUNT];
    atomic_int online[PT_MG__COUNT]; /* 1 = reachable at last contact */
};

extern struct pt_metrics pt_metrics;

/* Index of a gateway name (the registry's), or -1; its name ("" past the
 * registry's end). */
int pt_metric_gateway_index(const char *gateway);
const char *pt_metric_gateway_name(int i);
/* How many gateways the per-gateway counters cover. */
int pt_metric_gateway_count(void);
const char *pt_metric_sync_name(int i);
const char *pt_metric_notify_name(int i);

/* Records one HTTP request's status and latency. */
void pt_metrics_http(int status, int64_t latency_us);

#endif
