/* High-water marks: over inproc a sender can queue SNDHWM + the peer's RCVHWM messages, then
 * gets EAGAIN; draining the receiver lets it send again. A bound-only PUSH (no peer) blocks. */
#include "testutil.h"

int main (void)
{
    check_version ();
    void *ctx = zmq_ctx_new ();
    CHECK (ctx);

    void *pull = zmq_socket (ctx, ZMQ_PULL);
    CHECK (pull);
    set_int (pull, ZMQ_RCVHWM, 7);
    OK (zmq_bind (pull, "inproc://hwm"));

    void *push = zmq_socket (ctx, ZMQ_PUSH);
    CHECK (push);
    set_int (push, ZMQ_SNDHWM, 5);
    OK (zmq_connect (push, "inproc://hwm"));

    int sent = 0;
    while (zmq_send (push, "x", 1, ZMQ_DONTWAIT) == 1)
        sent++;
    CHECK (zmq_errno () == EAGAIN);
    CHECK (sent == 5 + 7);

    for (int i = 0; i < sent; i++) {
        char c;
        CHECK (OK (zmq_recv (pull, &c, 1, 0)) == 1);
    }
    FAILS_WITH (EAGAIN, zmq_recv (pull, NULL, 0, ZMQ_DONTWAIT));
    CHECK (OK (zmq_send (push, "y", 1, ZMQ_DONTWAIT)) == 1);
    recv_str (pull, "y");

    /* No peer: a PUSH has nowhere to send, so a non-blocking send fails and a send with a
     * timeout returns EAGAIN after about the timeout. */
    void *lonely = zmq_socket (ctx, ZMQ_PUSH);
    OK (zmq_bind (lonely, "inproc://nobody"));
    FAILS_WITH (EAGAIN, zmq_send (lonely, "z", 1, ZMQ_DONTWAIT));
    set_int (lonely, ZMQ_SNDTIMEO, 100);
    long t0 = now_ms ();
    FAILS_WITH (EAGAIN, zmq_send (lonely, "z", 1, 0));
    long dt = now_ms () - t0;
    CHECK (dt >= 90 && dt < 2000);

    set_int (push, ZMQ_LINGER, 0);
    set_int (lonely, ZMQ_LINGER, 0);
    OK (zmq_close (lonely));
    OK (zmq_close (push));
    OK (zmq_close (pull));
    OK (zmq_ctx_term (ctx));
    printf ("hwm ok\n");
    return 0;
}
