/* Cost as work grows (issue 30): small workloads against the libzmq C API, compiled once and run
 * on libzmq and on rzmq (LD_PRELOAD=target/release/libzmq.so RZMQ_RDMA=off), so that both
 * libraries run the same binary.
 *
 *   scale pubsub EP N_SUBS SIZE COUNT     PUB (ZMQ_XPUB_NODROP: lossless) -> N SUBs in this process,
 *                                         COUNT messages each; one thread polls all SUBs and drains
 *                                         those with input.
 *                                         result: delivered msg/s over all subscribers.
 *   scale router EP N_DEALERS SIZE COUNT  ROUTER (its own thread, echoes) serving N DEALERs driven
 *                                         by one thread (zmq_poll over all, then
 *                                         drain), max(1, 256/N) requests in flight per
 *                                         DEALER, COUNT round trips in all. result: round trips/s.
 *                                         SCALE_FORK=1: the ROUTER in a child process instead.
 *   scale pairs EP1,EP2,... N SIZE COUNT  N independent PUSH -> PULL pairs over tcp, a thread per
 *                                         socket, a context per pair (SCALE_SHARED_CTX=1: one),
 *                                         COUNT messages per pair. result: aggregate msg/s.
 *   scale memory EP N_CONNS               ROUTER + N DEALERs in this process, one 64 B round trip
 *                                         each. result: RSS bytes per connection (both ends).
 *   scale idle N_SOCKETS                  N DEALER sockets, unbound, unconnected.
 *                                         result: RSS bytes per socket.
 *
 * Every mode prints `result: <value> <unit>`; the throughput modes then `cpu: <us> us per ...`,
 * the process's CPU time (all threads, getrusage) over the timed part per message or round trip
 * (less sensitive than wall time to other work on a shared host; spinning counts in it); then
 * details. Connection set-up
 * is never timed: every mode first waits for a message through every connection.
 */
#define _GNU_SOURCE
#include <zmq.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(x)                                                                               \
    do {                                                                                       \
        if ((x) < 0) {                                                                         \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, zmq_strerror(errno)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)
#define NEED(p)                                                                                \
    do {                                                                                       \
        if (!(p)) {                                                                            \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #p, zmq_strerror(errno)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU time of the whole process (every thread, the libraries' I/O threads included), seconds. */
static double cpu_secs(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static void raise_nofile(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void *new_ctx(void) {
    void *ctx = zmq_ctx_new();
    NEED(ctx);
    CHECK(zmq_ctx_set(ctx, ZMQ_MAX_SOCKETS, 8192));
    return ctx;
}

static long rss_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb * 1024;
}

static int open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    if (d)
        closedir(d);
    return n - 1; /* the directory's own fd */
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---------------------------------------------------------------- pubsub */

struct pub_arg {
    void *ctx;
    const char *ep;
    size_t size;
    long count;
    atomic_int ready, bound;
    double t0, cpu0;
};

static void *publisher(void *p) {
    struct pub_arg *a = p;
    void *pub = zmq_socket(a->ctx, ZMQ_PUB);
    NEED(pub);
    int one = 1;
    CHECK(zmq_setsockopt(pub, ZMQ_XPUB_NODROP, &one, sizeof one));
    CHECK(zmq_bind(pub, a->ep));
    atomic_store(&a->bound, 1);
    /* Warm-up: a 'W' every millisecond until every SUB has seen one (connected, subscribed). */
    while (!atomic_load(&a->ready)) {
        zmq_send(pub, "W", 1, ZMQ_DONTWAIT);
        sleep_ms(1);
    }
    char *buf = calloc(1, a->size < 1 ? 1 : a->size);
    buf[0] = 'D';
    a->cpu0 = cpu_secs();
    a->t0 = now();
    for (long i = 0; i < a->count; i++)
        CHECK(zmq_send(pub, buf, a->size, 0));
    CHECK(zmq_send(pub, "E", 1, 0));
    free(buf);
    int linger = -1;
    zmq_setsockopt(pub, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(pub);
    return NULL;
}

static int mode_pubsub(const char *ep, int n, size_t size, long count) {
    void *ctx = new_ctx();
    struct pub_arg a = {ctx, ep, size, count, 0, 0, 0, 0};
    pthread_t th;
    pthread_create(&th, NULL, publisher, &a);
    while (!atomic_load(&a.bound))
        sleep_ms(1);
    void **subs = calloc(n, sizeof *subs);
    zmq_pollitem_t *items = calloc(n, sizeof *items);
    char *seen = calloc(n, 1), *done = calloc(n, 1);
    for (int i = 0; i < n; i++) {
        NEED(subs[i] = zmq_socket(ctx, ZMQ_SUB));
        CHECK(zmq_setsockopt(subs[i], ZMQ_SUBSCRIBE, "", 0));
        CHECK(zmq_connect(subs[i], ep));
        items[i].socket = subs[i];
        items[i].events = ZMQ_POLLIN;
    }
    int nseen = 0, ndone = 0;
    long delivered = 0;
    double t1 = 0, cpu1 = 0;
    zmq_msg_t m;
    zmq_msg_init(&m);
    while (ndone < n) {
        /* The usual loop: poll every SUB still running, then drain those that have input. */
        for (int i = 0; i < n; i++)
            items[i].events = done[i] ? 0 : ZMQ_POLLIN;
        CHECK(zmq_poll(items, n, 10));
        for (int i = 0; i < n; i++) {
            if (done[i] || !(items[i].revents & ZMQ_POLLIN))
                continue;
            while (zmq_msg_recv(&m, subs[i], ZMQ_DONTWAIT) >= 0) {
                char c = zmq_msg_size(&m) ? *(char *)zmq_msg_data(&m) : 0;
                if (c == 'D') {
                    delivered++;
                } else if (c == 'W') {
                    if (!seen[i]) {
                        seen[i] = 1;
                        if (++nseen == n)
                            atomic_store(&a.ready, 1);
                    }
                } else if (c == 'E') {
                    done[i] = 1;
                    if (++ndone == n) {
                        t1 = now();
                        cpu1 = cpu_secs();
                    }
                    break;
                }
            }
        }
    }
    pthread_join(th, NULL);
    double secs = t1 - a.t0;
    printf("result: %.0f msg/s\n", delivered / secs);
    printf("cpu: %.3f us per message delivered (all threads)\n", (cpu1 - a.cpu0) * 1e6 / delivered);
    printf("subscribers: %d, size: %zu, per subscriber: %ld, delivered: %ld (expected %ld), %.3f s\n",
           n, size, count, delivered, (long)n * count, secs);
    zmq_msg_close(&m);
    for (int i = 0; i < n; i++)
        zmq_close(subs[i]);
    zmq_ctx_term(ctx);
    return delivered == (long)n * count ? 0 : 2;
}

/* ---------------------------------------------------------------- router */

struct echo_arg {
    void *ctx;
    const char *ep;
    long requests;
    atomic_int bound;
};

static void *echo_server(void *p) {
    struct echo_arg *a = p;
    void *r = zmq_socket(a->ctx, ZMQ_ROUTER);
    NEED(r);
    int hwm = 0; /* replies never wait on the HWM; the client bounds what is in flight */
    CHECK(zmq_setsockopt(r, ZMQ_SNDHWM, &hwm, sizeof hwm));
    CHECK(zmq_bind(r, a->ep));
    atomic_store(&a->bound, 1);
    zmq_msg_t id, body;
    zmq_msg_init(&id);
    zmq_msg_init(&body);
    for (long i = 0; i < a->requests; i++) {
        CHECK(zmq_msg_recv(&id, r, 0));
        CHECK(zmq_msg_recv(&body, r, 0));
        CHECK(zmq_msg_send(&id, r, ZMQ_SNDMORE));
        CHECK(zmq_msg_send(&body, r, 0));
    }
    zmq_msg_close(&id);
    zmq_msg_close(&body);
    int linger = -1;
    zmq_setsockopt(r, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(r);
    return NULL;
}

static void **connect_dealers(void *ctx, const char *ep, int n) {
    void **d = calloc(n, sizeof *d);
    for (int i = 0; i < n; i++) {
        NEED(d[i] = zmq_socket(ctx, ZMQ_DEALER));
        CHECK(zmq_connect(d[i], ep));
    }
    return d;
}

static int mode_router(const char *ep, int n, size_t size, long count) {
    /* SCALE_FORK=1: the ROUTER runs in a child process with its own context (connections between
     * two processes, each with its own I/O thread) instead of a thread of this one. */
    int forked = getenv("SCALE_FORK") && atoi(getenv("SCALE_FORK"));
    pid_t child = -1;
    pthread_t th;
    if (forked) {
        child = fork();
        if (child == 0) {
            struct echo_arg c = {new_ctx(), ep, n + count, 0};
            echo_server(&c);
            zmq_ctx_term(c.ctx);
            _exit(0);
        }
        sleep_ms(200); /* the child binds; DEALER connects retry anyway */
    }
    void *ctx = new_ctx();
    struct echo_arg a = {ctx, ep, n + count, 0};
    if (!forked) {
        pthread_create(&th, NULL, echo_server, &a);
        while (!atomic_load(&a.bound))
            sleep_ms(1);
    }
    void **d = connect_dealers(ctx, ep, n);
    zmq_pollitem_t *items = calloc(n, sizeof *items);
    for (int i = 0; i < n; i++) {
        items[i].socket = d[i];
        items[i].events = ZMQ_POLLIN;
    }
    char *buf = calloc(1, size < 1 ? 1 : size);
    /* Warm-up: one round trip through every DEALER (all connected before timing). */
    double w0 = now();
    for (int i = 0; i < n; i++)
        CHECK(zmq_send(d[i], buf, size, 0));
    for (int i = 0; i < n; i++)
        CHECK(zmq_recv(d[i], buf, size, 0));
    double w1 = now();
    int window = n >= 256 ? 1 : 256 / n;
    long sent = 0, received = 0;
    double cpu0 = cpu_secs();
    double t0 = now();
    for (int i = 0; i < n && sent < count; i++)
        for (int w = 0; w < window && sent < count; w++, sent++)
            CHECK(zmq_send(d[i], buf, size, 0));
    zmq_msg_t m;
    zmq_msg_init(&m);
    long polls = 0;
    while (received < count) {
        /* The usual loop: poll every DEALER, then drain those that have input. */
        CHECK(zmq_poll(items, n, -1));
        polls++;
        for (int i = 0; i < n; i++) {
            if (!(items[i].revents & ZMQ_POLLIN))
                continue;
            while (zmq_msg_recv(&m, d[i], ZMQ_DONTWAIT) >= 0) {
                received++;
                if (sent < count) {
                    CHECK(zmq_send(d[i], buf, size, 0));
                    sent++;
                }
            }
        }
    }
    double t1 = now();
    double cpu1 = cpu_secs();
    if (getenv("SCALE_DEBUG"))
        fprintf(stderr, "polls %ld\n", polls);
    if (forked)
        waitpid(child, NULL, 0);
    else
        pthread_join(th, NULL);
    printf("result: %.0f msg/s\n", count / (t1 - t0));
    printf("cpu: %.3f us per round trip (all threads%s)\n", (cpu1 - cpu0) * 1e6 / count,
           forked ? " of the DEALERs' process only" : "");
    printf("dealers: %d, size: %zu, round trips: %ld, in flight per dealer: %d, %.3f s; warm-up (connect + 1 round trip each): %.3f s\n",
           n, size, count, window, t1 - t0, w1 - w0);
    zmq_msg_close(&m);
    for (int i = 0; i < n; i++)
        zmq_close(d[i]);
    zmq_ctx_term(ctx);
    return 0;
}

/* ---------------------------------------------------------------- pairs */

struct pair_arg {
    void *ctx;
    char ep[256];
    size_t size;
    long count;
    pthread_barrier_t *ready;
    double t_end;
};

static void *pair_pull(void *p) {
    struct pair_arg *a = p;
    void *s = zmq_socket(a->ctx, ZMQ_PULL);
    NEED(s);
    CHECK(zmq_bind(s, a->ep));
    zmq_msg_t m;
    zmq_msg_init(&m);
    CHECK(zmq_msg_recv(&m, s, 0)); /* the warm-up message */
    pthread_barrier_wait(a->ready);
    for (long i = 0; i < a->count; i++)
        CHECK(zmq_msg_recv(&m, s, 0));
    a->t_end = now();
    zmq_msg_close(&m);
    zmq_close(s);
    return NULL;
}

static void *pair_push(void *p) {
    struct pair_arg *a = p;
    void *s = zmq_socket(a->ctx, ZMQ_PUSH);
    NEED(s);
    CHECK(zmq_connect(s, a->ep));
    CHECK(zmq_send(s, "W", 1, 0));
    pthread_barrier_wait(a->ready);
    for (long i = 0; i < a->count; i++) {
        /* a fresh message per send, as libzmq's remote_thr */
        zmq_msg_t m;
        CHECK(zmq_msg_init_size(&m, a->size));
        memset(zmq_msg_data(&m), 0, a->size);
        CHECK(zmq_msg_send(&m, s, 0));
    }
    int linger = -1;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(s);
    return NULL;
}

static int mode_pairs(const char *eps, int n, size_t size, long count) {
    int shared = getenv("SCALE_SHARED_CTX") && atoi(getenv("SCALE_SHARED_CTX"));
    pthread_barrier_t ready;
    pthread_barrier_init(&ready, NULL, 2 * n + 1);
    struct pair_arg *a = calloc(n, sizeof *a);
    pthread_t *th = calloc(2 * n, sizeof *th);
    void *ctx = shared ? new_ctx() : NULL;
    const char *p = eps;
    for (int i = 0; i < n; i++) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (!len || len >= sizeof a[i].ep) {
            fprintf(stderr, "pairs: need %d comma-separated endpoints\n", n);
            return 1;
        }
        memcpy(a[i].ep, p, len);
        p = c ? c + 1 : p + len;
        a[i].ctx = shared ? ctx : new_ctx();
        a[i].size = size;
        a[i].count = count;
        a[i].ready = &ready;
        pthread_create(&th[2 * i], NULL, pair_pull, &a[i]);
    }
    sleep_ms(100); /* the PULLs bind; PUSH connects retry anyway */
    for (int i = 0; i < n; i++)
        pthread_create(&th[2 * i + 1], NULL, pair_push, &a[i]);
    pthread_barrier_wait(&ready);
    double cpu0 = cpu_secs();
    double t0 = now(), t1 = 0;
    for (int i = 0; i < 2 * n; i++)
        pthread_join(th[i], NULL);
    double cpu1 = cpu_secs();
    for (int i = 0; i < n; i++)
        if (a[i].t_end > t1)
            t1 = a[i].t_end;
    printf("result: %.0f msg/s\n", n * count / (t1 - t0));
    printf("cpu: %.3f us per message (all threads)\n", (cpu1 - cpu0) * 1e6 / (n * count));
    printf("pairs: %d, size: %zu, per pair: %ld, %.3f s, %s context%s\n", n, size, count, t1 - t0,
           shared ? "one" : "a", shared ? "" : " per pair");
    for (int i = 0; i < n; i++) {
        if (shared)
            continue;
        zmq_ctx_term(a[i].ctx);
    }
    if (shared)
        zmq_ctx_term(ctx);
    return 0;
}

/* ---------------------------------------------------------------- memory, idle */

static int mode_memory(const char *ep, int n) {
    raise_nofile();
    void *ctx = new_ctx();
    void *r = zmq_socket(ctx, ZMQ_ROUTER);
    NEED(r);
    CHECK(zmq_bind(r, ep));
    char buf[64] = {0};
    zmq_msg_t id, body;
    zmq_msg_init(&id);
    zmq_msg_init(&body);
    /* Baseline: one connection with a round trip (threads started, caches warm). */
    void **first = connect_dealers(ctx, ep, 1);
    CHECK(zmq_send(first[0], buf, sizeof buf, 0));
    CHECK(zmq_msg_recv(&id, r, 0));
    CHECK(zmq_msg_recv(&body, r, 0));
    CHECK(zmq_msg_send(&id, r, ZMQ_SNDMORE));
    CHECK(zmq_msg_send(&body, r, 0));
    CHECK(zmq_recv(first[0], buf, sizeof buf, 0));
    sleep_ms(200);
    long rss0 = rss_bytes();
    int fd0 = open_fds();
    void **d = connect_dealers(ctx, ep, n);
    for (int i = 0; i < n; i++)
        CHECK(zmq_send(d[i], buf, sizeof buf, 0));
    for (int i = 0; i < n; i++) {
        CHECK(zmq_msg_recv(&id, r, 0));
        CHECK(zmq_msg_recv(&body, r, 0));
        CHECK(zmq_msg_send(&id, r, ZMQ_SNDMORE));
        CHECK(zmq_msg_send(&body, r, 0));
    }
    for (int i = 0; i < n; i++)
        CHECK(zmq_recv(d[i], buf, sizeof buf, 0));
    sleep_ms(200);
    long rss1 = rss_bytes();
    int fd1 = open_fds();
    printf("result: %.0f B/connection\n", (double)(rss1 - rss0) / n);
    printf("connections: %d (ROUTER and DEALERs in this process, one 64 B round trip each): RSS %.1f -> %.1f MiB, fds %d -> %d (%.2f per connection)\n",
           n, rss0 / 1048576.0, rss1 / 1048576.0, fd0, fd1, (double)(fd1 - fd0) / n);
    zmq_msg_close(&id);
    zmq_msg_close(&body);
    int zero = 0;
    for (int i = 0; i < n; i++) {
        zmq_setsockopt(d[i], ZMQ_LINGER, &zero, sizeof zero);
        zmq_close(d[i]);
    }
    zmq_setsockopt(first[0], ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(first[0]);
    zmq_setsockopt(r, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(r);
    zmq_ctx_term(ctx);
    return 0;
}

static int mode_idle(int n) {
    raise_nofile();
    void *ctx = new_ctx();
    void *first = zmq_socket(ctx, ZMQ_DEALER); /* starts the context's threads */
    NEED(first);
    sleep_ms(100);
    long rss0 = rss_bytes();
    int fd0 = open_fds();
    void **s = calloc(n, sizeof *s);
    for (int i = 0; i < n; i++)
        NEED(s[i] = zmq_socket(ctx, ZMQ_DEALER));
    sleep_ms(100);
    long rss1 = rss_bytes();
    int fd1 = open_fds();
    printf("result: %.0f B/socket\n", (double)(rss1 - rss0) / n);
    printf("idle DEALER sockets: %d: RSS %.1f -> %.1f MiB, fds %d -> %d (%.2f per socket)\n", n,
           rss0 / 1048576.0, rss1 / 1048576.0, fd0, fd1, (double)(fd1 - fd0) / n);
    for (int i = 0; i < n; i++)
        zmq_close(s[i]);
    zmq_close(first);
    zmq_ctx_term(ctx);
    return 0;
}

int main(int argc, char **argv) {
    raise_nofile();
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "pubsub") && argc == 6)
        return mode_pubsub(argv[2], atoi(argv[3]), strtoul(argv[4], 0, 10), atol(argv[5]));
    if (!strcmp(mode, "router") && argc == 6)
        return mode_router(argv[2], atoi(argv[3]), strtoul(argv[4], 0, 10), atol(argv[5]));
    if (!strcmp(mode, "pairs") && argc == 6)
        return mode_pairs(argv[2], atoi(argv[3]), strtoul(argv[4], 0, 10), atol(argv[5]));
    if (!strcmp(mode, "memory") && argc == 4)
        return mode_memory(argv[2], atoi(argv[3]));
    if (!strcmp(mode, "idle") && argc == 3)
        return mode_idle(atoi(argv[2]));
    fprintf(stderr,
            "usage: scale pubsub EP N_SUBS SIZE COUNT | router EP N_DEALERS SIZE COUNT |\n"
            "       pairs EP1,...,EPN N SIZE COUNT | memory EP N_CONNS | idle N_SOCKETS\n");
    return 1;
}
