/*
 * host.c - the process's platform (see host.h).
 */
#include "host.h"
#include "linux.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

char *pt_host_read_file(const char *path, size_t max, const char *too_big, size_t *len, char *why,
                        size_t whylen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, whylen, "cannot open: %s", strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap || cap > max)
            break;
        char *more = realloc(buf, cap * 2 + 1);
        if (!more) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = more;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad || n > max) {
        snprintf(why, whylen, "%s", !buf ? "out of memory" : bad ? "cannot be read" : too_big);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}
