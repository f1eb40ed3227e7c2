/*
 * connlimit.h - how many connections each client address holds (SPEC 5,
 * "Input strictness and connection handling").
 *
 * The HTTP API admits a connection only while its address holds fewer than
 * the cap, counted over both listeners.  The kiosk's own applications reach
 * the API at 127.0.0.1 or ::1 and are never capped; every other address is,
 * the rest of 127.0.0.0/8 included (nothing of the kiosk uses it, and it lets
 * the cap be tested from the machine itself).
 */
#ifndef PT_CONNLIMIT_H
#define PT_CONNLIMIT_H

#include <sys/socket.h>

struct pt_connlimit;

/* A table for up to `slots` capped connections at once (the listeners'
 * connection limit), at most `per_addr` of them from one address.  NULL
 * when out of memory.  Thread-safe. */
struct pt_connlimit *pt_connlimit_new(int per_addr, int slots);

/* Accepts NULL.  Every admitted connection must have been released. */
void pt_connlimit_destroy(struct pt_connlimit *l);

/* 1 for 127.0.0.1, ::1 and ::ffff:127.0.0.1: the addresses that are not
 * capped.  sa may be NULL (0). */
int pt_connlimit_uncapped(const struct sockaddr *sa);

/* 1 when a connection from sa would be admitted now (counts nothing: for
 * refusing at accept time, before a connection costs anything). */
int pt_connlimit_would_admit(struct pt_connlimit *l, const struct sockaddr *sa);

/* Admits a connection from sa and counts it: 1, or 0 when its address is at
 * the cap (nothing counted).  An uncapped address is always admitted. */
int pt_connlimit_acquire(struct pt_connlimit *l, const struct sockaddr *sa);

/* Releases a connection admitted by pt_connlimit_acquire. */
void pt_connlimit_release(struct pt_connlimit *l, const struct sockaddr *sa);

#endif
