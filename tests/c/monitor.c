/* zmq_socket_monitor: the event stream of a server and a client over TCP. */
#include "testutil.h"
#include <stdint.h>

/* Reads one event: returns its number (or -1 on timeout), stores value and endpoint. */
static int get_event (void *mon, uint32_t *value, char *ep, size_t cap)
{
    zmq_msg_t m;
    OK (zmq_msg_init (&m));
    if (zmq_msg_recv (&m, mon, 0) == -1) {
        CHECK (zmq_errno () == EAGAIN);
        OK (zmq_msg_close (&m));
        return -1;
    }
    CHECK (zmq_msg_more (&m));
    CHECK (zmq_msg_size (&m) == 6);
    const uint8_t *d = zmq_msg_data (&m);
    uint16_t ev;
    memcpy (&ev, d, 2);
    memcpy (value, d + 2, 4);
    OK (zmq_msg_close (&m));
    OK (zmq_msg_init (&m));
    OK (zmq_msg_recv (&m, mon, 0));
    CHECK (!zmq_msg_more (&m));
    size_t n = zmq_msg_size (&m) < cap - 1 ? zmq_msg_size (&m) : cap - 1;
    memcpy (ep, zmq_msg_data (&m), n);
    ep[n] = 0;
    OK (zmq_msg_close (&m));
    return ev;
}

/* Collects events until a timeout; returns the OR of all events seen. */
static int collect (void *mon, const char *name, const char *bound, int *listening_ok)
{
    int seen = 0;
    uint32_t value;
    char ep[256];
    int ev;
    while ((ev = get_event (mon, &value, ep, sizeof ep)) != -1) {
        fprintf (stderr, "%s: event 0x%04x value %u endpoint '%s'\n", name, ev, value, ep);
        seen |= ev;
        if (ev == ZMQ_EVENT_LISTENING && listening_ok)
            *listening_ok = (int) value >= 0 && strcmp (ep, bound) == 0;
        if (ev == ZMQ_EVENT_MONITOR_STOPPED)
            break;
    }
    return seen;
}

int main (void)
{
    check_version ();
    void *ctx = zmq_ctx_new ();
    void *server = zmq_socket (ctx, ZMQ_REP);
    void *client = zmq_socket (ctx, ZMQ_REQ);

    FAILS_WITH (EPROTONOSUPPORT, zmq_socket_monitor (server, "tcp://127.0.0.1:5555", ZMQ_EVENT_ALL));
    FAILS_WITH (EINVAL, zmq_socket_monitor (server, "inproc://bad", 0x10000));

    OK (zmq_socket_monitor (server, "inproc://monitor-server", ZMQ_EVENT_ALL));
    OK (zmq_socket_monitor (client, "inproc://monitor-client", ZMQ_EVENT_ALL));
    void *server_mon = zmq_socket (ctx, ZMQ_PAIR);
    void *client_mon = zmq_socket (ctx, ZMQ_PAIR);
    OK (zmq_connect (server_mon, "inproc://monitor-server"));
    OK (zmq_connect (client_mon, "inproc://monitor-client"));
    set_int (server_mon, ZMQ_RCVTIMEO, 2000);
    set_int (client_mon, ZMQ_RCVTIMEO, 2000);

    char ep[256];
    bind_tcp (server, ep, sizeof ep);
    OK (zmq_connect (client, ep));
    send_str (client, "ping", 0);
    recv_str (server, "ping");
    send_str (server, "pong", 0);
    recv_str (client, "pong");

    set_int (client, ZMQ_LINGER, 0);
    set_int (server, ZMQ_LINGER, 0);
    OK (zmq_close (client));
    OK (zmq_close (server));

    int listening_ok = 0;
    int s = collect (server_mon, "server", ep, &listening_ok);
    int c = collect (client_mon, "client", ep, NULL);
    CHECK (s & ZMQ_EVENT_LISTENING);
    CHECK (listening_ok);
    CHECK (s & ZMQ_EVENT_ACCEPTED);
    CHECK (s & ZMQ_EVENT_HANDSHAKE_SUCCEEDED);
    CHECK (s & ZMQ_EVENT_MONITOR_STOPPED);
    CHECK (c & ZMQ_EVENT_CONNECTED);
    CHECK (c & ZMQ_EVENT_HANDSHAKE_SUCCEEDED);
    CHECK (c & ZMQ_EVENT_MONITOR_STOPPED);

    OK (zmq_close (server_mon));
    OK (zmq_close (client_mon));
    OK (zmq_ctx_term (ctx));
    printf ("monitor ok\n");
    return 0;
}
