/*
 * slowclient.c - many misbehaving HTTP clients at once, for
 * test_slow_clients.sh (SPEC 5, "Input strictness and connection handling").
 *
 *   slowclient trickle HOST PORT N [--body] [--from ADDR] [--for-s S]
 *       N connections, each sending one byte every 2 s of a request head
 *       that never ends (--body: a whole head, then the body byte by byte).
 *       Prints "ready" once every connection is open and has sent a byte,
 *       then waits until the server has closed them all (or S seconds,
 *       default 30) and prints how many it closed and when.
 *   slowclient hold HOST PORT N [--from ADDR] [--for-s S]
 *       N connections that send nothing; after S seconds (default 2)
 *       prints how many the server refused (closed) and how many are open.
 *   slowclient longpoll HOST PORT N PATH [--expect TEXT] [--for-s S]
 *       N connections, each sending GET PATH; prints "ready" once all are
 *       sent, then waits for the N answers (or S seconds, default 30) and
 *       prints how many came, how many were 200 with TEXT in them, and when.
 *
 * Results are one line of key=value pairs on stdout; times are ms since the
 * connection was opened.  Exit status 0 unless the tool itself failed
 * (bad arguments, cannot open N sockets).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TRICKLE_MS 2000
#define ANSWER_MAX 4096

struct client {
    int fd;
    int64_t opened_ms, next_send_ms, ended_ms;
    size_t sent;
    char answer[ANSWER_MAX];
    size_t got;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void die(const char *what)
{
    fprintf(stderr, "slowclient: %s: %s\n", what, strerror(errno));
    exit(2);
}

/* One socket per client, more than the usual 1024: raise the soft limit. */
static void want_files(int n)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        die("getrlimit");
    if (rl.rlim_cur < (rlim_t)n + 16) {
        rl.rlim_cur = rl.rlim_max;
        if (rl.rlim_cur < (rlim_t)n + 16) {
            fprintf(stderr, "slowclient: %d sockets need a higher file limit (hard limit %llu)\n",
                    n, (unsigned long long)rl.rlim_max);
            exit(2);
        }
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            die("setrlimit");
    }
}

static int open_one(const char *host, int port, const char *from)
{
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &to.sin_addr) != 1) {
        fprintf(stderr, "slowclient: bad IPv4 address %s\n", host);
        exit(2);
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket");
    if (from) {
        struct sockaddr_in src = {.sin_family = AF_INET};
        if (inet_pton(AF_INET, from, &src.sin_addr) != 1) {
            fprintf(stderr, "slowclient: bad IPv4 address %s\n", from);
            exit(2);
        }
        if (bind(fd, (struct sockaddr *)&src, sizeof src) != 0)
            die("bind --from");
    }
    if (connect(fd, (struct sockaddr *)&to, sizeof to) != 0)
        die("connect");
    return fd;
}

/* Sends the next piece of what this client sends; 0 when the server has
 * closed the connection. */
static int send_next(struct client *c, const char *text, size_t len, size_t piece)
{
    if (c->sent >= len)
        return 1;
    size_t n = len - c->sent < piece ? len - c->sent : piece;
    ssize_t w = send(c->fd, text + c->sent, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && (errno == EAGAIN || errno == EINTR))
        return 1;
    if (w <= 0)
        return 0;
    c->sent += (size_t)w;
    return 1;
}

/* Reads what the server sent; 0 once it has closed the connection. */
static int read_some(struct client *c)
{
    char junk[512];
    char *dst = c->got < ANSWER_MAX - 1 ? c->answer + c->got : junk;
    size_t room = c->got < ANSWER_MAX - 1 ? ANSWER_MAX - 1 - c->got : sizeof junk;
    ssize_t r = recv(c->fd, dst, room, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return 1;
    if (r <= 0)
        return 0;
    if (dst != junk) {
        c->got += (size_t)r;
        c->answer[c->got] = '\0';
    }
    return 1;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Prints closed=K min_ms= median_ms= max_ms= over the clients that ended. */
static void print_ended(struct client *cl, int n)
{
    int64_t *t = malloc(sizeof *t * (size_t)(n ? n : 1));
    int k = 0;
    for (int i = 0; i < n; i++)
        if (cl[i].ended_ms)
            t[k++] = cl[i].ended_ms - cl[i].opened_ms;
    qsort(t, (size_t)k, sizeof *t, cmp_i64);
    printf(" closed=%d", k);
    if (k)
        printf(" min_ms=%lld median_ms=%lld max_ms=%lld", (long long)t[0], (long long)t[k / 2],
               (long long)t[k - 1]);
    free(t);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: slowclient trickle|hold|longpoll HOST PORT N [PATH] [options]\n");
        return 2;
    }
    const char *mode = argv[1], *host = argv[2], *from = NULL, *expect = NULL, *path = "/";
    int port = atoi(argv[3]), n = atoi(argv[4]), body = 0, argi = 5;
    int trickle = strcmp(mode, "trickle") == 0, hold = strcmp(mode, "hold") == 0,
        longpoll = strcmp(mode, "longpoll") == 0;
    int for_s = hold ? 2 : 30;
    if ((!trickle && !hold && !longpoll) || n < 1 || port < 1) {
        fprintf(stderr, "slowclient: bad arguments (see the comment at the top)\n");
        return 2;
    }
    if (longpoll) {
        if (argc < 6)
            return 2;
        path = argv[argi++];
    }
    for (; argi < argc; argi++) {
        if (strcmp(argv[argi], "--body") == 0)
            body = 1;
        else if (strcmp(argv[argi], "--from") == 0 && argi + 1 < argc)
            from = argv[++argi];
        else if (strcmp(argv[argi], "--for-s") == 0 && argi + 1 < argc)
            for_s = atoi(argv[++argi]);
        else if (strcmp(argv[argi], "--expect") == 0 && argi + 1 < argc)
            expect = argv[++argi];
        else {
            fprintf(stderr, "slowclient: unknown option %s\n", argv[argi]);
            return 2;
        }
    }
    want_files(n);

    /* What each client sends: a head that never ends (the header goes on
     * for longer than anyone waits), or a head and then a body. */
    char text[1024];
    size_t head_len = 0, len;
    if (longpoll) {
        len = (size_t)snprintf(text, sizeof text,
                               "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path,
                               host);
    } else if (body) {
        head_len = (size_t)snprintf(text, sizeof text,
                                    "POST /v1/charges HTTP/1.1\r\nHost: %s\r\nContent-Type: "
                                    "application/json\r\nIdempotency-Key: slow\r\n"
                                    "Content-Length: 600\r\n\r\n",
                                    host);
        memset(text + head_len, ' ', 600);
        len = head_len + 600;
    } else {
        len = (size_t)snprintf(text, sizeof text,
                               "GET /healthz HTTP/1.1\r\nHost: %s\r\nX-Slow: ", host);
        memset(text + len, 'a', 600);
        len += 600;
    }

    struct client *cl = calloc((size_t)n, sizeof *cl);
    struct pollfd *pf = calloc((size_t)n, sizeof *pf);
    if (!cl || !pf)
        die("calloc");
    for (int i = 0; i < n; i++) {
        cl[i].fd = open_one(host, port, from);
        cl[i].opened_ms = now_ms();
        if (hold)
            continue;
        /* trickle: the first byte (or the whole head) now; longpoll: all. */
        size_t first = longpoll ? len : body ? head_len : 1;
        if (!send_next(&cl[i], text, len, first))
            cl[i].ended_ms = now_ms();
        cl[i].next_send_ms = cl[i].opened_ms + TRICKLE_MS;
    }
    if (!hold) {
        printf("ready\n");
        fflush(stdout);
    }

    int64_t end = now_ms() + (int64_t)for_s * 1000;
    for (;;) {
        int live = 0;
        int64_t now = now_ms(), wake = end;
        for (int i = 0; i < n; i++) {
            pf[i].fd = cl[i].ended_ms ? -1 : cl[i].fd;
            pf[i].events = POLLIN;
            pf[i].revents = 0;
            if (cl[i].ended_ms)
                continue;
            live++;
            if (trickle && now >= cl[i].next_send_ms) {
                if (!send_next(&cl[i], text, len, 1))
                    cl[i].ended_ms = now;
                cl[i].next_send_ms = now + TRICKLE_MS;
            }
            if (trickle && cl[i].next_send_ms < wake)
                wake = cl[i].next_send_ms;
        }
        if (!live || now >= end)
            break;
        int r = poll(pf, (nfds_t)n, (int)(wake > now ? wake - now : 0));
        if (r < 0 && errno != EINTR)
            die("poll");
        now = now_ms();
        for (int i = 0; i < n && r > 0; i++)
            if (pf[i].revents && !cl[i].ended_ms && !read_some(&cl[i]))
                cl[i].ended_ms = now;
    }

    int open_left = 0, ok = 0, answered = 0;
    for (int i = 0; i < n; i++) {
        open_left += !cl[i].ended_ms;
        if (cl[i].got) {
            answered++;
            ok += strncmp(cl[i].answer, "HTTP/1.1 200 ", 13) == 0 &&
                  (!expect || strstr(cl[i].answer, expect));
        }
    }
    if (hold) {
        printf("opened=%d refused=%d open=%d\n", n, n - open_left, open_left);
    } else if (longpoll) {
        /* Connection: close, so the server closes after its answer. */
        printf("sent=%d answered=%d ok=%d", n, answered, ok);
        print_ended(cl, n);
        printf(" open=%d\n", open_left);
    } else {
        printf("opened=%d", n);
        print_ended(cl, n);
        printf(" open=%d answered=%d\n", open_left, answered);
    }
    for (int i = 0; i < n; i++)
        close(cl[i].fd);
    free(cl);
    free(pf);
    return 0;
}
