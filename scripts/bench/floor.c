// Copied unchanged (but for this line) from the team's shared field tools (tools/floor/): the reference floor client.
// floor.c: the physical floor of "receive and time-stamp every streamed chunk".
// C keep-alive HTTP/1.1 connections to 127.0.0.1:PORT, each posting the captured streaming
// request (req.bin: full HTTP request bytes), one epoll loop (level-triggered), one read()
// per ready socket, one clock_gettime per read, count `data:` events, re-post when the
// chunked response ends (after `data: [DONE]`, at the `0\r\n\r\n` terminator).
// Usage: floor PORT C SECONDS REQFILE [BATCH_US]
//   BATCH_US > 0: sleep that long after each wake-up's reads (batching variant).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CARRY 8
#define BUFSZ 65536
#define RING 65536

struct conn {
    int fd;
    int done_seen;  // saw `[DONE]`: waiting for the chunked terminator
    int carry_len;
    char carry[CARRY];
    uint64_t last_ns;
};

static char *req;
static size_t req_len;
static uint64_t ring[RING];
static uint64_t nring;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void post(int fd) {
    size_t off = 0;
    for (int i = 0; i < 1000 && off < req_len; i++) {
        ssize_t n = write(fd, req + off, req_len - off);
        if (n > 0) off += (size_t)n;
        else if (n < 0 && errno != EAGAIN && errno != EINTR) { perror("write"); exit(3); }
    }
    if (off < req_len) { fprintf(stderr, "short write\n"); exit(3); }
}

static int open_conn(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { perror("connect"); exit(3); }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

// Occurrences of pat in b[0..n) that end after `fresh` (bytes before `fresh` are carry).
static long count_from(const char *b, size_t n, size_t fresh, const char *pat, size_t m,
                       const char **first_end) {
    long k = 0;
    const char *p = b, *end = b + n;
    *first_end = NULL;
    while (p < end) {
        const char *q = memmem(p, (size_t)(end - p), pat, m);
        if (!q) break;
        if ((size_t)(q - b) + m > fresh) {
            k++;
            if (!*first_end) *first_end = q + m;
        }
        p = q + 1;
    }
    return k;
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: floor PORT C SECONDS REQFILE [BATCH_US]\n"); return 2; }
    int port = atoi(argv[1]), c = atoi(argv[2]);
    double secs = atof(argv[3]);
    long batch_us = argc > 5 ? atol(argv[5]) : 0;
    FILE *f = fopen(argv[4], "rb");
    if (!f) { perror("reqfile"); return 2; }
    req = malloc(1 << 20);
    req_len = fread(req, 1, 1 << 20, f);
    fclose(f);

    static char buf[CARRY + BUFSZ];
    struct conn *cs = calloc((size_t)c, sizeof *cs);
    int ep = epoll_create1(0);
    for (int i = 0; i < c; i++) {
        cs[i].fd = open_conn(port);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev);
        post(cs[i].fd);
    }
    uint64_t t0 = now_ns(), deadline = t0 + (uint64_t)(secs * 1e9);
    long events = 0, reads = 0, wakeups = 0, responses = 0, errors = 0;
    uint64_t gap_sum = 0, gap_n = 0;
    struct epoll_event evs[256];
    struct timespec bt = {.tv_sec = 0, .tv_nsec = batch_us * 1000};
    for (long loop = 0; loop < 100000000L; loop++) {
        uint64_t t = now_ns();
        if (t >= deadline) break;
        int tmo = (int)((deadline - t) / 1000000) + 1;
        int n = epoll_wait(ep, evs, 256, tmo);
        if (n < 0) { if (errno == EINTR) continue; perror("epoll_wait"); return 3; }
        wakeups++;
        for (int e = 0; e < n; e++) {
            struct conn *k = &cs[evs[e].data.u32];
            ssize_t r = read(k->fd, buf + CARRY, BUFSZ);
            uint64_t ts = now_ns();  // the one clock read per read
            if (r <= 0) {
                if (r < 0 && errno == EAGAIN) continue;
                // Engine closed: reconnect (should not happen with keep-alive).
                errors++;
                epoll_ctl(ep, EPOLL_CTL_DEL, k->fd, NULL);
                close(k->fd);
                if (errors > 1000) { fprintf(stderr, "too many closes\n"); return 3; }
                k->fd = open_conn(port);
                k->done_seen = 0;
                k->carry_len = 0;
                struct epoll_event ev = {.events = EPOLLIN, .data.u32 = evs[e].data.u32};
                epoll_ctl(ep, EPOLL_CTL_ADD, k->fd, &ev);
                post(k->fd);
                continue;
            }
            reads++;
            ring[nring++ & (RING - 1)] = ts;
            if (k->last_ns) { gap_sum += ts - k->last_ns; gap_n++; }
            k->last_ns = ts;
            char *b = buf + CARRY - k->carry_len;
            memcpy(b, k->carry, (size_t)k->carry_len);
            size_t len = (size_t)k->carry_len + (size_t)r, fresh = (size_t)k->carry_len;
            const char *fe;
            events += count_from(b, len, fresh, "data:", 5, &fe);
            const char *scan = b;
            size_t scan_fresh = fresh;
            if (!k->done_seen) {
                count_from(b, len, fresh, "[DONE]", 6, &fe);
                if (fe) { k->done_seen = 1; scan_fresh = 0; scan = fe; }
            }
            if (k->done_seen) {
                size_t sl = len - (size_t)(scan - b);
                count_from(scan, sl, scan == b ? scan_fresh : 0, "\r\n0\r\n\r\n", 7, &fe);
                if (fe) {
                    k->done_seen = 0;
                    k->carry_len = 0;
                    responses++;
                    post(k->fd);
                    continue;
                }
            }
            k->carry_len = len < CARRY - 1 ? (int)len : CARRY - 1;
            memcpy(k->carry, b + len - (size_t)k->carry_len, (size_t)k->carry_len);
        }
        if (batch_us > 0) nanosleep(&bt, NULL);
    }
    double el = (double)(now_ns() - t0) / 1e9;
    printf("floor C=%d batch_us=%ld secs=%.2f events=%ld reads=%ld wakeups=%ld responses=%ld closes=%ld "
           "mean_gap_ms=%.3f ring_last=%llu\n",
           c, batch_us, el, events, reads, wakeups, responses, errors,
           gap_n ? (double)gap_sum / gap_n / 1e6 : 0.0,
           (unsigned long long)ring[(nring - 1) & (RING - 1)] % 1000);
    return 0;
}
