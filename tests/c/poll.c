/* zmq_poll over sockets and a plain file descriptor, with libzmq's timeout semantics. */
#include "testutil.h"

int main (void)
{
    check_version ();
    void *ctx = zmq_ctx_new ();
    void *a = zmq_socket (ctx, ZMQ_PAIR);
    void *b = zmq_socket (ctx, ZMQ_PAIR);
    OK (zmq_bind (a, "inproc://poll"));
    OK (zmq_connect (b, "inproc://poll"));

    int fds[2];
    CHECK (pipe (fds) == 0);

    zmq_pollitem_t items[4] = {
      {a, 0, ZMQ_POLLIN, 0},
      {b, 0, ZMQ_POLLIN, 0},
      {NULL, fds[0], ZMQ_POLLIN, 0},
      {a, 0, ZMQ_POLLIN | ZMQ_POLLOUT, 0}, /* the same socket twice */
    };

    /* Nothing readable: timeout 0 returns at once. Item 3 is writable though. */
    CHECK (OK (zmq_poll (items, 3, 0)) == 0);
    CHECK (items[0].revents == 0 && items[1].revents == 0 && items[2].revents == 0);

    /* A timeout of 100 ms waits about that long. */
    long t0 = now_ms ();
    CHECK (OK (zmq_poll (items, 3, 100)) == 0);
    long dt = now_ms () - t0;
    CHECK (dt >= 90 && dt < 2000);

    /* A message makes a readable; the duplicate entry sees POLLIN and POLLOUT. */
    send_str (b, "hi", 0);
    CHECK (OK (zmq_poll (items, 4, 1000)) == 2);
    CHECK (items[0].revents == ZMQ_POLLIN);
    CHECK (items[1].revents == 0);
    CHECK (items[2].revents == 0);
    CHECK (items[3].revents == (ZMQ_POLLIN | ZMQ_POLLOUT));
    recv_str (a, "hi");

    /* A plain fd. */
    CHECK (write (fds[1], "x", 1) == 1);
    CHECK (OK (zmq_poll (items, 3, -1)) == 1);
    CHECK (items[2].revents == ZMQ_POLLIN);
    char c;
    CHECK (read (fds[0], &c, 1) == 1);

    /* ZMQ_FD and ZMQ_EVENTS, the edge-triggered integration. */
    int fd = -1;
    size_t len = sizeof fd;
    OK (zmq_getsockopt (a, ZMQ_FD, &fd, &len));
    CHECK (fd >= 0 && len == sizeof fd);
    send_str (b, "again", 0);
    int events = 0;
    len = sizeof events;
    for (int i = 0; i < 100 && !(events & ZMQ_POLLIN); i++) {
        OK (zmq_getsockopt (a, ZMQ_EVENTS, &events, &len));
        if (!(events & ZMQ_POLLIN))
            msleep (5);
    }
    CHECK (events & ZMQ_POLLIN);
    recv_str (a, "again");

    /* Errors. */
    FAILS_WITH (EINVAL, zmq_poll (items, -1, 0));
    zmq_pollitem_t bogus = {items, 0, ZMQ_POLLIN, 0};
    FAILS_WITH (ENOTSOCK, zmq_poll (&bogus, 1, 0));
    CHECK (zmq_poll (NULL, 0, 10) == 0);

    close (fds[0]);
    close (fds[1]);
    OK (zmq_close (a));
    OK (zmq_close (b));
    OK (zmq_ctx_term (ctx));
    printf ("poll ok\n");
    return 0;
}
