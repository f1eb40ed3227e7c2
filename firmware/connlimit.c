/*
 * connlimit.c - connections per client address (see connlimit.h).
 *
 * A flat table searched linearly: it holds at most one entry per address
 * with a connection open, a kiosk sees a handful and an attack a few
 * hundred, and a search of a thousand 20-byte entries costs about a
 * microsecond per accepted connection.
 */
#include "connlimit.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct entry {
    unsigned char addr[16]; /* IPv6, or IPv4 as ::ffff:a.b.c.d */
    int count;              /* 0: free */
};

struct pt_connlimit {
    pthread_mutex_t mu;
    int per_addr, slots;
    struct entry *e;
};

static const unsigned char v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/* The address as 16 bytes, so that a client reaching one listener over IPv4
 * and the other over IPv4-mapped IPv6 counts once.  0 for other families. */
static int key_of(const struct sockaddr *sa, unsigned char out[16])
{
    if (!sa)
        return 0;
    if (sa->sa_family == AF_INET) {
        memcpy(out, v4_mapped, 12);
        memcpy(out + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 1;
    }
    if (sa->sa_family == AF_INET6) {
        memcpy(out, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        return 1;
    }
    return 0;
}

int pt_connlimit_uncapped(const struct sockaddr *sa)
{
    static const unsigned char lo4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
    static const unsigned char lo6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    unsigned char k[16];
    return key_of(sa, k) && (memcmp(k, lo4, 16) == 0 || memcmp(k, lo6, 16) == 0);
}

struct pt_connlimit *pt_connlimit_new(int per_addr, int slots)
{
    struct pt_connlimit *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->per_addr = per_addr;
    l->slots = slots > 0 ? slots : 1;
    l->e = calloc((size_t)l->slots, sizeof *l->e);
    if (!l->e) {
        free(l);
        return NULL;
    }
    pthread_mutex_init(&l->mu, NULL);
    return l;
}

void pt_connlimit_destroy(struct pt_connlimit *l)
{
    if (!l)
        return;
    pthread_mutex_destroy(&l->mu);
    free(l->e);
    free(l);
}

/* The entry of key k, else a free one (*found = 0), else NULL.  Under mu. */
static struct entry *lookup(struct pt_connlimit *l, const unsigned char k[16], int *found)
{
    struct entry *free_e = NULL;
    for (int i = 0; i < l->slots; i++) {
        struct entry *e = &l->e[i];
        if (e->count && memcmp(e->addr, k, 16) == 0) {
            *found = 1;
            return e;
        }
        if (!e->count && !free_e)
            free_e = e;
    }
    *found = 0;
    return free_e;
}

int pt_connlimit_would_admit(struct pt_connlimit *l, const struct sockaddr *sa)
{
    unsigned char k[16] = {0};
    if (pt_connlimit_uncapped(sa))
        return 1;
    key_of(sa, k);
    pthread_mutex_lock(&l->mu);
    int found;
    struct entry *e = lookup(l, k, &found);
    int ok = e && (!found || e->count < l->per_addr);
    pthread_mutex_unlock(&l->mu);
    return ok;
}

int pt_connlimit_acquire(struct pt_connlimit *l, const struct sockaddr *sa)
{
    unsigned char k[16] = {0};
    if (pt_connlimit_uncapped(sa))
        return 1;
    key_of(sa, k);
    pthread_mutex_lock(&l->mu);
    int found, ok = 0;
    struct entry *e = lookup(l, k, &found);
    if (e && (!found || e->count < l->per_addr)) {
        if (!found)
            memcpy(e->addr, k, 16);
        e->count++;
        ok = 1;
    }
    pthread_mutex_unlock(&l->mu);
    return ok;
}

void pt_connlimit_release(struct pt_connlimit *l, const struct sockaddr *sa)
{
    unsigned char k[16] = {0};
    if (pt_connlimit_uncapped(sa))
        return;
    key_of(sa, k);
    pthread_mutex_lock(&l->mu);
    int found;
    struct entry *e = lookup(l, k, &found);
    if (e && found)
        e->count--;
    pthread_mutex_unlock(&l->mu);
}
