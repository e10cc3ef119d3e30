/* Shared helpers of the C smoke tests: checks that print the failing line and errno. */
#ifndef RZMQ_TESTUTIL_H
#define RZMQ_TESTUTIL_H

#define _DEFAULT_SOURCE
#include <zmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            int e_ = zmq_errno ();                                                             \
            fprintf (stderr, "%s:%d: CHECK failed: %s (errno %d: %s)\n", __FILE__, __LINE__,   \
                     #cond, e_, zmq_strerror (e_));                                            \
            exit (1);                                                                          \
        }                                                                                      \
    } while (0)

/* Evaluates expr once; fails unless it is not -1. Yields the value. */
#define OK(expr)                                                                               \
    __extension__({                                                                            \
        long v_ = (long) (expr);                                                               \
        if (v_ == -1) {                                                                        \
            int e_ = zmq_errno ();                                                             \
            fprintf (stderr, "%s:%d: %s failed (errno %d: %s)\n", __FILE__, __LINE__, #expr,   \
                     e_, zmq_strerror (e_));                                                   \
            exit (1);                                                                          \
        }                                                                                      \
        v_;                                                                                    \
    })

/* Fails unless expr is -1 with errno err. */
#define FAILS_WITH(err, expr)                                                                  \
    do {                                                                                       \
        long v_ = (long) (expr);                                                               \
        int e_ = zmq_errno ();                                                                 \
        if (v_ != -1 || e_ != (err)) {                                                         \
            fprintf (stderr, "%s:%d: %s: expected -1/%s, got %ld/errno %d (%s)\n", __FILE__,    \
                     __LINE__, #expr, #err, v_, e_, zmq_strerror (e_));                        \
            exit (1);                                                                          \
        }                                                                                      \
    } while (0)

static inline void msleep (int ms)
{
    usleep ((useconds_t) ms * 1000);
}

static inline long now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Makes sure the program runs against rzmq (Debian's libzmq says 4.3.4). */
static inline void check_version (void)
{
    int major, minor, patch;
    zmq_version (&major, &minor, &patch);
    CHECK (major == 4 && minor == 3 && patch == 5);
    CHECK (ZMQ_VERSION == 40305);
}

static inline void set_int (void *s, int opt, int v)
{
    OK (zmq_setsockopt (s, opt, &v, sizeof v));
}

/* Binds s to an ephemeral TCP port on loopback and writes the endpoint into ep. */
static inline void bind_tcp (void *s, char *ep, size_t cap)
{
    OK (zmq_bind (s, "tcp://127.0.0.1:*"));
    size_t len = cap;
    OK (zmq_getsockopt (s, ZMQ_LAST_ENDPOINT, ep, &len));
    CHECK (len == strlen (ep) + 1);
}

static inline void send_str (void *s, const char *str, int flags)
{
    CHECK (OK (zmq_send (s, str, strlen (str), flags)) == (long) strlen (str));
}

/* Receives one frame and checks it equals str. */
static inline void recv_str (void *s, const char *str)
{
    char buf[256];
    int n = (int) OK (zmq_recv (s, buf, sizeof buf - 1, 0));
    CHECK (n < (int) sizeof buf);
    buf[n] = 0;
    if (strcmp (buf, str) != 0) {
        fprintf (stderr, "expected '%s', received '%s'\n", str, buf);
        exit (1);
    }
}

#endif
