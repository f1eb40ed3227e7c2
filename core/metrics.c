/*
 * metrics.c - the process-wide counters (see metrics.h).
 */
#include "metrics.h"

#include <string.h>

struct pt_metrics pt_metrics;

const int64_t pt_latency_bounds_us[PT_LATENCY_BUCKETS] = {
    100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 1000000,
};

static const char *const sync_names[PT_MS__COUNT] = {
    "success", "declined", "pending", "ambiguous", "not_sent", "canceled", "not_found"};
static const char *const notify_names[PT_MN__COUNT] = {"applied", "duplicate",     "review",
                                                       "ignored", "bad_signature", "malformed",
                                                       "foreign", "deferred"};

int pt_metric_gateway_index(const char *gateway)
{
    return pt_gateway_index(gateway);
}

const char *pt_metric_gateway_name(int i)
{
    const struct pt_gateway *gw = pt_gateway_at(i);
    return gw ? gw->name : "";
}

int pt_metric_gateway_count(void)
{
    return pt_gateway_count();
}

const char *pt_metric_sync_name(int i)
{
    return sync_names[i];
}

const char *pt_metric_notify_name(int i)
{
    return notify_names[i];
}

void pt_metrics_http(int status, int64_t latency_us)
{
    int cls = status / 100;
    if (cls >= 1 && cls <= 5)
        atomic_fetch_add_explicit(&pt_metrics.http_by_class[cls], 1, memory_order_relaxed);
    int b = 0;
    while (b < PT_LATENCY_BUCKETS && latency_us > pt_latency_bounds_us[b])
        b++;
    atomic_fetch_add_explicit(&pt_metrics.latency_bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&pt_metrics.latency_sum_us, (uint_fast64_t)latency_us,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&pt_metrics.latency_count, 1, memory_order_relaxed);
}
