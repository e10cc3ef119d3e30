/* zmq_msg_init_data: the free callback runs exactly once, after the last owner is done,
 * including a copy and a transmission over TCP (on an I/O thread). */
#include "testutil.h"
#include <stdatomic.h>

static atomic_int freed;
static void *freed_data;
static void *freed_hint;

static void free_fn (void *data, void *hint)
{
    freed_data = data;
    freed_hint = hint;
    atomic_fetch_add (&freed, 1);
    free (data);
}

static void wait_freed (int expected)
{
    for (int i = 0; i < 500 && atomic_load (&freed) < expected; i++)
        msleep (10);
    CHECK (atomic_load (&freed) == expected);
}

int main (void)
{
    check_version ();
    void *ctx = zmq_ctx_new ();
    void *pull = zmq_socket (ctx, ZMQ_PULL);
    char ep[256];
    bind_tcp (pull, ep, sizeof ep);
    void *push = zmq_socket (ctx, ZMQ_PUSH);
    OK (zmq_connect (push, ep));

    /* 1. Closed without sending. */
    char *buf = malloc (100);
    zmq_msg_t m;
    OK (zmq_msg_init_data (&m, buf, 100, free_fn, (void *) 0x1234));
    CHECK (zmq_msg_data (&m) == buf);
    CHECK (zmq_msg_size (&m) == 100);
    CHECK (atomic_load (&freed) == 0);
    OK (zmq_msg_close (&m));
    CHECK (atomic_load (&freed) == 1);
    CHECK (freed_data == buf && freed_hint == (void *) 0x1234);

    /* 2. Copied, then the copy sent over TCP and the original closed. */
    const size_t size = 1 << 20;
    buf = malloc (size);
    for (size_t i = 0; i < size; i++)
        buf[i] = (char) (i * 7);
    OK (zmq_msg_init_data (&m, buf, size, free_fn, NULL));
    zmq_msg_t c;
    OK (zmq_msg_init (&c));
    OK (zmq_msg_copy (&c, &m));
    CHECK (zmq_msg_get (&m, ZMQ_SHARED) == 1);
    CHECK (zmq_msg_data (&c) == buf);
    CHECK (OK (zmq_msg_send (&c, push, 0)) == (long) size);
    OK (zmq_msg_close (&c));
    OK (zmq_msg_close (&m));

    zmq_msg_t r;
    OK (zmq_msg_init (&r));
    CHECK (OK (zmq_msg_recv (&r, pull, 0)) == (long) size);
    const char *d = zmq_msg_data (&r);
    for (size_t i = 0; i < size; i++)
        CHECK (d[i] == (char) (i * 7));
    OK (zmq_msg_close (&r));
    wait_freed (2);

    /* 3. Sent directly; the callback runs once the I/O thread is done with it. */
    buf = malloc (5000);
    memset (buf, 'q', 5000);
    OK (zmq_msg_init_data (&m, buf, 5000, free_fn, NULL));
    CHECK (OK (zmq_msg_send (&m, push, 0)) == 5000);
    OK (zmq_msg_close (&m)); /* the now-empty message */
    char rb[5000];
    CHECK (OK (zmq_recv (pull, rb, sizeof rb, 0)) == 5000);
    CHECK (rb[0] == 'q' && rb[4999] == 'q');
    wait_freed (3);

    /* 4. NULL free function: the caller keeps the buffer (a constant message). */
    static const char constant[] = "constant data";
    OK (zmq_msg_init_data (&m, (void *) constant, sizeof constant, NULL, NULL));
    CHECK (zmq_msg_get (&m, ZMQ_SHARED) == 1);
    OK (zmq_msg_close (&m));
    CHECK (OK (zmq_send_const (push, constant, sizeof constant, 0)) == (long) sizeof constant);
    char cb[64];
    CHECK (OK (zmq_recv (pull, cb, sizeof cb, 0)) == (long) sizeof constant);
    CHECK (strcmp (cb, constant) == 0);

    OK (zmq_close (push));
    OK (zmq_close (pull));
    OK (zmq_ctx_term (ctx));
    msleep (50);
    CHECK (atomic_load (&freed) == 3);
    printf ("msg_data ok\n");
    return 0;
}
