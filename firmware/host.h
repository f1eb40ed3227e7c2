/*
 * host.h - the platform this process runs on, for firmware/.
 *
 * core/ is handed a struct pt_platform (clock, randomness, logging, the
 * transport); firmware/ asks the same table through these calls instead of
 * reading the Linux clock or getrandom() itself, so that a test can move the
 * clock under a running daemon (desktop builds: PAYTERM_TEST_CLOCK_FILE, see
 * platform/sim/clock.c) and every part of the daemon sees the same time.
 * The default is platform/linux; `serve` installs its own at start.
 */
#ifndef PT_HOST_H
#define PT_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "platform.h"

/* The platform in use (never NULL). */
const struct pt_platform *pt_host(void);
/* Installs p (NULL: back to platform/linux); p must outlive its use. */
void pt_host_set(const struct pt_platform *p);

int64_t pt_host_now_ms(void);
int64_t pt_host_mono_ms(void);
int pt_host_random(void *buf, size_t len);

/*
 * The whole file at path, NUL-terminated (malloc'd; *len its size), or NULL
 * with why set: "cannot open: <the system's reason>", "cannot be read",
 * "out of memory", or too_big when it is larger than max bytes.
 */
char *pt_host_read_file(const char *path, size_t max, const char *too_big, size_t *len, char *why,
                        size_t whylen);

#endif
