/*
 * listen.c - binding the daemon's listen addresses (see listen.h).
 *
 * libmicrohttpd could bind them itself, but only when the API starts,
 * after the database: and all it says then is "Failed to bind to port 0".
 */
#include "listen.h"
#include "err.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* What the operator can do about errno e from bind() or listen(). */
static const char *why(int e, char *buf, size_t len)
{
    switch (e) {
    case EADDRINUSE:
        return "address in use (another payterm serve, or another program, listens there)";
    case EACCES:
    case EPERM:
        return "permission denied (a port below 1024 needs root or CAP_NET_BIND_SERVICE; "
               "under systemd, AmbientCapabilities= and CapabilityBoundingSet= in a drop-in)";
    case EADDRNOTAVAIL:
        return "address not available (not an address of this host)";
    default:
        snprintf(buf, len, "%s", strerror(e));
        return buf;
    }
}

int pt_listen_bind(const char *key, const char *addr, int *fd, char *err, size_t errlen)
{
    *fd = -1;
    char host[128], text[160];
    const char *colon = strrchr(addr, ':');
    if (!colon) { /* the configuration refuses it first */
        snprintf(err, errlen, "%s %s: not HOST:PORT", key, addr);
        return PT_EIO;
    }
    snprintf(host, sizeof host, "%.*s", (int)(colon - addr), addr);
    size_t hl = strlen(host);
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *ai = NULL;
    int gai = getaddrinfo(host, colon + 1, &hints, &ai);
    if (gai != 0 || !ai) {
        snprintf(err, errlen, "%s %s: cannot resolve the host: %s", key, addr,
                 gai == EAI_SYSTEM ? strerror(errno) : gai_strerror(gai));
        return PT_EIO;
    }
    int s = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1, e = errno;
    /* As libmicrohttpd did: a restart binds again at once, whatever
     * connections of the last run linger in TIME_WAIT; IPv6 only, so
     * that [::]:8080 and 0.0.0.0:8080 are two addresses. */
    int ok = s >= 0 && setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
             (ai->ai_family != AF_INET6 ||
              setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) == 0) &&
             bind(s, ai->ai_addr, ai->ai_addrlen) == 0;
    if (!ok)
        e = errno;
    freeaddrinfo(ai);
    if (!ok) {
        if (s >= 0)
            close(s);
        snprintf(err, errlen, "%s %s: cannot bind: %s", key, addr, why(e, text, sizeof text));
        return PT_EIO;
    }
    *fd = s;
    return PT_OK;
}

int pt_listen_start(const char *key, const char *addr, int fd, char *err, size_t errlen)
{
    char text[160];
    if (listen(fd, SOMAXCONN) != 0) {
        int e = errno;
        snprintf(err, errlen, "%s %s: cannot listen: %s", key, addr, why(e, text, sizeof text));
        return PT_EIO;
    }
    return PT_OK;
}
