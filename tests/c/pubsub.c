/* PUB/SUB over TCP: prefix filtering, multipart delivery, unsubscribe. */
#include "testutil.h"

/* Publishes "sync" until the subscriber sees it (subscriptions propagate asynchronously). */
static void sync_subscription (void *pub, void *sub)
{
    set_int (sub, ZMQ_RCVTIMEO, 20);
    for (int i = 0; i < 500; i++) {
        send_str (pub, "Async", 0);
        char buf[16];
        if (zmq_recv (sub, buf, sizeof buf, 0) >= 0)
            break;
        CHECK (zmq_errno () == EAGAIN);
        CHECK (i < 499);
    }
    /* Drain further sync messages. */
    char buf[16];
    while (zmq_recv (sub, buf, sizeof buf, ZMQ_DONTWAIT) >= 0) {
    }
    set_int (sub, ZMQ_RCVTIMEO, 2000);
}

int main (void)
{
    check_version ();
    void *ctx = zmq_ctx_new ();
    void *pub = zmq_socket (ctx, ZMQ_PUB);
    char ep[256];
    bind_tcp (pub, ep, sizeof ep);

    void *sub = zmq_socket (ctx, ZMQ_SUB);
    OK (zmq_setsockopt (sub, ZMQ_SUBSCRIBE, "A", 1));
    OK (zmq_connect (sub, ep));
    sync_subscription (pub, sub);

    send_str (pub, "B-ignored", 0);
    send_str (pub, "A1", 0);
    send_str (pub, "C-ignored", 0);
    send_str (pub, "A2", ZMQ_SNDMORE);
    send_str (pub, "second part", 0);
    send_str (pub, "A3", 0);

    recv_str (sub, "A1");
    recv_str (sub, "A2");
    int more = 0;
    size_t len = sizeof more;
    OK (zmq_getsockopt (sub, ZMQ_RCVMORE, &more, &len));
    CHECK (more == 1);
    recv_str (sub, "second part");
    recv_str (sub, "A3");
    FAILS_WITH (EAGAIN, zmq_recv (sub, NULL, 0, ZMQ_DONTWAIT));

    /* Unsubscribe: after it propagates nothing arrives. */
    OK (zmq_setsockopt (sub, ZMQ_UNSUBSCRIBE, "A", 1));
    msleep (200);
    send_str (pub, "A4", 0);
    set_int (sub, ZMQ_RCVTIMEO, 200);
    FAILS_WITH (EAGAIN, zmq_recv (sub, NULL, 0, 0));

    /* Sending on a SUB is not supported. */
    FAILS_WITH (ENOTSUP, zmq_send (sub, "x", 1, 0));

    OK (zmq_close (sub));
    OK (zmq_close (pub));
    OK (zmq_ctx_term (ctx));
    printf ("pubsub ok\n");
    return 0;
}
