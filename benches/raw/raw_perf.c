/*
 * raw_perf: the ceiling under every ZeroMQ implementation on this machine. No ZeroMQ at all: the
 * roles of libzmq's perf tools (same command lines, same output lines) over plain blocking
 * sockets, framing messages as ZMTP does (a flags byte, then a 1-byte or 8-byte length).
 *
 *   raw_perf local_thr  <tcp://ip:port | ipc://path> <size> <count>   (binds, receives, reports)
 *   raw_perf remote_thr <endpoint> <size> <count>                     (connects, sends)
 *   raw_perf local_lat  <endpoint> <size> <roundtrips>                (binds, echoes)
 *   raw_perf remote_lat <endpoint> <size> <roundtrips>                (connects, reports)
 *
 * Each side reuses one buffer (no allocation, no page faults), small messages are written in
 * batches of up to 256 KiB and read in reads of up to 256 KiB, and a large body (8 KiB and up)
 * goes out by writev from its buffer and is read straight into the receiver's: the copies the
 * kernel makes, one wake-up per batch or per round trip, and nothing else. Bodies start half a
 * page into their buffer (the kernel's copies run slowly a few bytes off page alignment, see
 * rzmq-core/src/pool.rs). tcp connections between two addresses of this host run the congestion
 * control rzmq puts on them (RZMQ_TCP_LOCAL_CC, default reno; off keeps the host's), so the
 * ceiling is measured under the same kernel settings. Written for rzmq's benches/compare.py
 * (row `raw`).
 *
 * RAW_ROTATE=N (remote_thr, large bodies only) sends from N distinct buffers in turn, each
 * written once before the run, instead of one: the memory a ZeroMQ sender touches when it sends
 * a fresh message each time and its queue holds N of them (HWM 1000), without the page faults
 * of fresh memory. It tells how much of the gap to the one-buffer ceiling is the kernel copying
 * from memory that has left the caches.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define BATCH (256 * 1024)
#define READ_BUF (256 * 1024)
#define LARGE 8192

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* Binds and listens (server), or connects, retrying as the perf tools' peers do: the server
 * binds first, the client may start a little early. */
static void bind_or_connect(int fd, const struct sockaddr *a, socklen_t len, int server)
{
    if (server) {
        if (bind(fd, a, len) || listen(fd, 1))
            die("bind");
        return;
    }
    int tries = 0;
    while (connect(fd, a, len)) {
        if (++tries > 100)
            die("connect");
        usleep(20000);
    }
}

/* Parses the endpoint; returns a bound-and-listening (server) or connected (client) socket. */
/* As rzmq's transport::tune_same_host: reno (or RZMQ_TCP_LOCAL_CC) on a same-host tcp socket. */
static void tune_same_host(int fd)
{
    const char *cc = getenv("RZMQ_TCP_LOCAL_CC");
    if (!cc)
        cc = "reno";
    if (!*cc || strcmp(cc, "off") == 0 || strcmp(cc, "default") == 0)
        return;
    struct sockaddr_in l, p;
    socklen_t ll = sizeof l, pl = sizeof p;
    if (getsockname(fd, (struct sockaddr *)&l, &ll) || getpeername(fd, (struct sockaddr *)&p, &pl))
        return;
    if (l.sin_family != AF_INET || p.sin_family != AF_INET)
        return;
    int loopback = (ntohl(p.sin_addr.s_addr) >> 24) == 127;
    if (loopback || l.sin_addr.s_addr == p.sin_addr.s_addr)
        setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, strlen(cc));
}

static int open_endpoint(const char *ep, int server)
{
    int fd;
    if (strncmp(ep, "tcp://", 6) == 0) {
        char host[256];
        const char *colon = strrchr(ep + 6, ':');
        if (!colon || (size_t)(colon - (ep + 6)) >= sizeof host) {
            fprintf(stderr, "bad endpoint %s\n", ep);
            exit(1);
        }
        memcpy(host, ep + 6, colon - (ep + 6));
        host[colon - (ep + 6)] = 0;
        struct sockaddr_in a = {0};
        a.sin_family = AF_INET;
        a.sin_port = htons(atoi(colon + 1));
        if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
            fprintf(stderr, "bad address %s\n", host);
            exit(1);
        }
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0)
            die("socket");
        int one = 1;
        if (server)
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        bind_or_connect(fd, (struct sockaddr *)&a, sizeof a, server);
        if (!server)
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    } else if (strncmp(ep, "ipc://", 6) == 0) {
        struct sockaddr_un a = {0};
        a.sun_family = AF_UNIX;
        if (strlen(ep + 6) >= sizeof a.sun_path) {
            fprintf(stderr, "path too long %s\n", ep);
            exit(1);
        }
        strcpy(a.sun_path, ep + 6);
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0)
            die("socket");
        if (server)
            unlink(a.sun_path);
        bind_or_connect(fd, (struct sockaddr *)&a, sizeof a, server);
    } else {
        fprintf(stderr, "raw_perf: tcp:// or ipc:// only, not %s\n", ep);
        exit(1);
    }
    if (server) {
        int c = accept(fd, NULL, NULL);
        if (c < 0)
            die("accept");
        int one = 1;
        if (strncmp(ep, "tcp://", 6) == 0)
            setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        close(fd);
        fd = c;
    }
    if (strncmp(ep, "tcp://", 6) == 0)
        tune_same_host(fd);
    return fd;
}

static size_t header(unsigned char *h, size_t size)
{
    if (size > 255) {
        h[0] = 2; /* LONG */
        uint64_t be = __builtin_bswap64((uint64_t)size);
        memcpy(h + 1, &be, 8);
        return 9;
    }
    h[0] = 0;
    h[1] = (unsigned char)size;
    return 2;
}

static void write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("write");
        c += w;
        n -= w;
    }
}

static void writev_all(int fd, struct iovec *v, int cnt)
{
    while (cnt) {
        ssize_t w = writev(fd, v, cnt);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("writev");
        while (cnt && (size_t)w >= v->iov_len) {
            w -= v->iov_len;
            v++;
            cnt--;
        }
        if (cnt) {
            v->iov_base = (char *)v->iov_base + w;
            v->iov_len -= w;
        }
    }
}

static void read_all(int fd, void *p, size_t n)
{
    char *c = p;
    while (n) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            fprintf(stderr, "raw_perf: the peer left early\n");
            exit(1);
        }
        c += r;
        n -= r;
    }
}

/* A buffered reader of framed messages. */
struct reader {
    int fd;
    unsigned char *buf;
    size_t start, end;
};

static void fill(struct reader *r, size_t need)
{
    if (r->end - r->start >= need)
        return;
    memmove(r->buf, r->buf + r->start, r->end - r->start);
    r->end -= r->start;
    r->start = 0;
    while (r->end < need) {
        ssize_t n = read(r->fd, r->buf + r->end, READ_BUF - r->end);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            fprintf(stderr, "raw_perf: the peer left early\n");
            exit(1);
        }
        r->end += n;
    }
}

/* Reads one message; a large body lands in `body`, a small one stays in the read buffer.
 * Returns its size. */
static size_t read_msg(struct reader *r, unsigned char *body)
{
    fill(r, 2);
    size_t size, hdr;
    if (r->buf[r->start] & 2) {
        fill(r, 9);
        uint64_t be;
        memcpy(&be, r->buf + r->start + 1, 8);
        size = (size_t)__builtin_bswap64(be);
        hdr = 9;
    } else {
        size = r->buf[r->start + 1];
        hdr = 2;
    }
    r->start += hdr;
    if (size >= LARGE) {
        size_t have = r->end - r->start;
        if (have > size)
            have = size;
        memcpy(body, r->buf + r->start, have);
        r->start += have;
        read_all(r->fd, body + have, size - have);
    } else {
        fill(r, size);
        r->start += size;
    }
    return size;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: raw_perf local_thr|remote_thr|local_lat|remote_lat <endpoint> <size> <count>\n");
        return 1;
    }
    const char *role = argv[1], *ep = argv[2];
    size_t size = strtoull(argv[3], NULL, 10);
    long count = atol(argv[4]);
    unsigned char *page = aligned_alloc(4096, (size + 1 + 2048 + 4095) / 4096 * 4096);
    unsigned char *body = page ? page + 2048 : NULL;
    struct reader rd = {0, malloc(READ_BUF), 0, 0};
    if (!body || !rd.buf)
        die("malloc");
    memset(body, 'x', size + 1);
    unsigned char h[9];
    size_t hl = header(h, size);

    if (strcmp(role, "remote_thr") == 0) {
        int fd = open_endpoint(ep, 0);
        if (size >= LARGE) {
            const char *rot = getenv("RAW_ROTATE");
            long nbuf = rot ? atol(rot) : 1;
            if (nbuf < 1)
                nbuf = 1;
            unsigned char **bodies = malloc(nbuf * sizeof *bodies);
            if (!bodies)
                die("malloc");
            bodies[0] = body;
            for (long k = 1; k < nbuf; k++) {
                unsigned char *pg = aligned_alloc(4096, (size + 2048 + 4095) / 4096 * 4096);
                if (!pg)
                    die("malloc");
                bodies[k] = pg + 2048;
                memset(bodies[k], 'x', size);
            }
            for (long i = 0; i < count; i++) {
                struct iovec v[2] = {{h, hl}, {bodies[i % nbuf], size}};
                writev_all(fd, v, 2);
            }
        } else {
            unsigned char *batch = malloc(BATCH + 9 + LARGE);
            size_t fillb = 0;
            for (long i = 0; i < count; i++) {
                memcpy(batch + fillb, h, hl);
                memcpy(batch + fillb + hl, body, size);
                fillb += hl + size;
                if (fillb >= BATCH) {
                    write_all(fd, batch, fillb);
                    fillb = 0;
                }
            }
            write_all(fd, batch, fillb);
        }
        /* Wait for the receiver to close: nothing is lost in a reset. */
        char c;
        while (read(fd, &c, 1) > 0) {
        }
        close(fd);
    } else if (strcmp(role, "local_thr") == 0) {
        rd.fd = open_endpoint(ep, 1);
        if (read_msg(&rd, body) != size) {
            printf("message of incorrect size received\n");
            return 255;
        }
        double t0 = now_us();
        for (long i = 1; i < count; i++) {
            if (read_msg(&rd, body) != size) {
                printf("message of incorrect size received\n");
                return 255;
            }
        }
        double el = now_us() - t0;
        if (el < 1)
            el = 1;
        double thr = count / el * 1e6;
        printf("message size: %zu [B]\n", size);
        printf("message count: %ld\n", count);
        printf("mean throughput: %d [msg/s]\n", (int)thr);
        printf("mean throughput: %.3f [Mb/s]\n", thr * size * 8 / 1e6);
        close(rd.fd);
    } else if (strcmp(role, "local_lat") == 0) {
        rd.fd = open_endpoint(ep, 1);
        for (long i = 0; i < count; i++) {
            if (read_msg(&rd, body) != size) {
                printf("message of incorrect size received\n");
                return 255;
            }
            struct iovec v[2] = {{h, hl}, {body, size}};
            writev_all(rd.fd, v, 2);
        }
        char c;
        while (read(rd.fd, &c, 1) > 0) {
        }
        close(rd.fd);
    } else if (strcmp(role, "remote_lat") == 0) {
        rd.fd = open_endpoint(ep, 0);
        double t0 = now_us();
        for (long i = 0; i < count; i++) {
            struct iovec v[2] = {{h, hl}, {body, size}};
            writev_all(rd.fd, v, 2);
            if (read_msg(&rd, body) != size) {
                printf("message of incorrect size received\n");
                return 255;
            }
        }
        double el = now_us() - t0;
        printf("message size: %d [B]\n", (int)size);
        printf("roundtrip count: %d\n", (int)count);
        printf("average latency: %.3f [us]\n", el / (count * 2));
        close(rd.fd);
    } else {
        fprintf(stderr, "raw_perf: unknown role %s\n", role);
        return 1;
    }
    return 0;
}
