/*
 * notifysock.c - plays systemd's side of sd_notify for the tests: binds a
 * datagram socket at PATH and writes each message it gets as one line,
 * "MONO_MS MESSAGE" (newlines inside a message shown as '|'), to stdout,
 * flushed at once.  Runs until killed.
 *
 * usage: pt_notifysock PATH
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 2 || strlen(argv[1]) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        fprintf(stderr, "usage: pt_notifysock PATH (shorter than 108 bytes)\n");
        return 2;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, argv[1], strlen(argv[1]));
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    unlink(argv[1]);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        perror("pt_notifysock: bind");
        return 1;
    }
    char buf[4096];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
        if (n < 0)
            continue;
        buf[n] = '\0';
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] == '\n')
                buf[i] = '|';
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        printf("%lld %s\n", (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, buf);
        fflush(stdout);
    }
}
