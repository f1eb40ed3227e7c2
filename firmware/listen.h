/*
 * listen.h - the daemon's listening sockets, bound before anything is
 * written.
 *
 * SPEC 18: a listen address that cannot be bound says which address and
 * why (in use, permission, not an address of this host) before the
 * database is created.  So the daemon binds listen and notify_listen right
 * after it has taken data_dir's lock and before it opens the store, and
 * only starts listening once the HTTP API is ready to take the sockets
 * (until then a client is refused, not left waiting in a backlog).
 */
#ifndef PT_LISTEN_H
#define PT_LISTEN_H

#include <stddef.h>

/*
 * Binds a TCP socket to addr ("HOST:PORT", "[v6]:PORT"; the configuration
 * has checked its shape).  *fd gets the socket (close-on-exec, non-blocking,
 * SO_REUSEADDR; IPv6 only for an IPv6 address), the caller's to close.  On
 * failure *fd is -1 and err names the configuration key and the address
 * and says why: "listen 127.0.0.1:8080: cannot bind: address in use (...)".
 * PT_OK, PT_EIO.
 */
int pt_listen_bind(const char *key, const char *addr, int *fd, char *err, size_t errlen);

/* Starts listening on a socket pt_listen_bind() bound.  PT_OK, or PT_EIO
 * with err worded as pt_listen_bind's. */
int pt_listen_start(const char *key, const char *addr, int fd, char *err, size_t errlen);

#endif
