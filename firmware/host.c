/*
 * host.c - the process's platform (see host.h).
 */
#include "host.h"
#include "linux.h"

#include <stdatomic.h>

static _Atomic(const struct pt_platform *) current;

const struct pt_platform *pt_host(void)
{
    const struct pt_platform *p = atomic_load(&current);
    return p ? p : pt_linux_platform();
}

void pt_host_set(const struct pt_platform *p)
{
    atomic_store(&current, p);
}

int64_t pt_host_now_ms(void)
{
    const struct pt_platform *p = pt_host();
    return p->now_ms(p->ctx);
}

int64_t pt_host_mono_ms(void)
{
    const struct pt_platform *p = pt_host();
    return p->mono_ms(p->ctx);
}

int pt_host_random(void *buf, size_t len)
{
    const struct pt_platform *p = pt_host();
    return p->random(p->ctx, buf, len);
}
