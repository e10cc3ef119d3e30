/* REQ/REP over TCP: round trips, multipart replies, buffer truncation, and REQ's state machine. */
#include "testutil.h"

int main (void)
{
    check_version ();
    void *ctx = zmq_ctx_new ();
    void *rep = zmq_socket (ctx, ZMQ_REP);
    char ep[256];
    bind_tcp (rep, ep, sizeof ep);
    CHECK (strncmp (ep, "tcp://127.0.0.1:", 16) == 0);

    void *req = zmq_socket (ctx, ZMQ_REQ);
    OK (zmq_connect (req, ep));

    for (int i = 0; i < 10; i++) {
        char q[32], a[32];
        snprintf (q, sizeof q, "question %d", i);
        snprintf (a, sizeof a, "answer %d", i);
        send_str (req, q, 0);
        FAILS_WITH (EFSM, zmq_send (req, "again", 5, 0));
        recv_str (rep, q);
        FAILS_WITH (EFSM, zmq_recv (rep, NULL, 0, ZMQ_DONTWAIT));
        send_str (rep, a, 0);
        recv_str (req, a);
    }

    /* Multipart reply; RCVMORE tells the parts apart. */
    send_str (req, "parts", 0);
    recv_str (rep, "parts");
    send_str (rep, "one", ZMQ_SNDMORE);
    send_str (rep, "two", 0);
    recv_str (req, "one");
    int more = 0;
    size_t len = sizeof more;
    OK (zmq_getsockopt (req, ZMQ_RCVMORE, &more, &len));
    CHECK (more == 1 && len == sizeof (int));
    recv_str (req, "two");
    OK (zmq_getsockopt (req, ZMQ_RCVMORE, &more, &len));
    CHECK (more == 0);

    /* zmq_recv truncates and returns the full size. */
    send_str (req, "0123456789", 0);
    char small[4];
    CHECK (OK (zmq_recv (rep, small, sizeof small, 0)) == 10);
    CHECK (memcmp (small, "0123", 4) == 0);
    send_str (rep, "ok", 0);
    recv_str (req, "ok");

    /* zmq_msg API round trip. */
    zmq_msg_t m;
    OK (zmq_msg_init_size (&m, 5));
    memcpy (zmq_msg_data (&m), "hello", 5);
    CHECK (OK (zmq_msg_send (&m, req, 0)) == 5);
    CHECK (zmq_msg_size (&m) == 0);
    OK (zmq_msg_close (&m));
    OK (zmq_msg_init (&m));
    CHECK (OK (zmq_msg_recv (&m, rep, 0)) == 5);
    CHECK (memcmp (zmq_msg_data (&m), "hello", 5) == 0);
    CHECK (zmq_msg_more (&m) == 0);
    const char *st = zmq_msg_gets (&m, "Socket-Type");
    CHECK (st && strcmp (st, "REQ") == 0);
    OK (zmq_msg_close (&m));
    FAILS_WITH (EFAULT, zmq_msg_close (&m));

    OK (zmq_close (req));
    OK (zmq_close (rep));
    OK (zmq_ctx_term (ctx));
    printf ("reqrep ok\n");
    return 0;
}
