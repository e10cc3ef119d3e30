//! Socket monitor events (`zmq_socket_monitor`), libzmq 4.3's stable set and wire form.
//!
//! Each event is a two-frame message on an inproc PAIR socket: 6 bytes (u16 event id and u32 value,
//! host byte order, as libzmq writes them) then the endpoint as text. Events are raised by the
//! socket and by its connections on I/O threads; a [`Monitor`] serialises them.

use std::sync::{Arc, Mutex};

use crate::msg::Msg;

/// A connection was established (value: fd).
pub const EVENT_CONNECTED: u16 = 0x0001;
/// A connect is pending (value: errno).
pub const EVENT_CONNECT_DELAYED: u16 = 0x0002;
/// A reconnect was scheduled (value: interval in ms).
pub const EVENT_CONNECT_RETRIED: u16 = 0x0004;
/// The socket is listening (value: fd).
pub const EVENT_LISTENING: u16 = 0x0008;
/// A bind failed (value: errno).
pub const EVENT_BIND_FAILED: u16 = 0x0010;
/// A connection was accepted (value: fd).
pub const EVENT_ACCEPTED: u16 = 0x0020;
/// An accept failed (value: errno).
pub const EVENT_ACCEPT_FAILED: u16 = 0x0040;
/// A listener or connection was closed (value: fd).
pub const EVENT_CLOSED: u16 = 0x0080;
/// Closing failed (value: errno).
pub const EVENT_CLOSE_FAILED: u16 = 0x0100;
/// A session was disconnected (value: fd).
pub const EVENT_DISCONNECTED: u16 = 0x0200;
/// Monitoring stopped (value: 0).
pub const EVENT_MONITOR_STOPPED: u16 = 0x0400;
/// The handshake failed without more detail (value: errno).
pub const EVENT_HANDSHAKE_FAILED_NO_DETAIL: u16 = 0x0800;
/// The handshake succeeded (value: 0).
pub const EVENT_HANDSHAKE_SUCCEEDED: u16 = 0x1000;
/// The handshake failed on a protocol error (value: ZMQ_PROTOCOL_ERROR_* code).
pub const EVENT_HANDSHAKE_FAILED_PROTOCOL: u16 = 0x2000;
/// The handshake failed on authentication (value: ZAP status code).
pub const EVENT_HANDSHAKE_FAILED_AUTH: u16 = 0x4000;
/// All events.
pub const EVENT_ALL: u16 = 0xFFFF;
/// rzmq's own event (unused by libzmq 4.3.5; sent only when `RZMQ_RDMA_EVENTS=1`, so that
/// monitors of programs written for libzmq never see an unknown event): which transport carries
/// a tcp connection's messages. Value: one of the `TRANSPORT_*` codes.
pub const EVENT_TRANSPORT: u16 = 0x8000;
/// [`EVENT_TRANSPORT`] value: the connection stays on TCP (the log line says why).
pub const TRANSPORT_TCP: u32 = 0;
/// [`EVENT_TRANSPORT`] value: messages now move over RDMA.
pub const TRANSPORT_RDMA: u32 = 1;
/// [`EVENT_TRANSPORT`] value: RDMA was required and could not be used; the connection closes.
pub const TRANSPORT_REFUSED: u32 = 2;
/// [`EVENT_TRANSPORT`] value: an RDMA connection ended (its counters go to the log).
pub const TRANSPORT_ENDED: u32 = 3;

/// Something that accepts monitor event messages (the monitor's PAIR socket).
pub trait EventSink: Send {
    /// Delivers one frame without blocking; returns false when it could not be queued.
    fn deliver(&mut self, frame: Msg) -> bool;
}

struct Active {
    mask: u16,
    sink: Box<dyn EventSink>,
}

/// The monitor hook of one socket, shared with its connections.
#[derive(Clone, Default)]
pub struct Monitor {
    inner: Arc<Mutex<Option<Active>>>,
}

impl Monitor {
    /// A monitor with no sink.
    pub fn new() -> Monitor {
        Monitor::default()
    }

    /// Installs a sink for the events in `mask`, replacing (and stopping) any previous one.
    pub fn start(&self, mask: u16, sink: Box<dyn EventSink>) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mut old) = g.take() {
            Self::emit(&mut old, EVENT_MONITOR_STOPPED, 0, "");
        }
        *g = Some(Active { mask, sink });
    }

    /// Stops monitoring, sending MONITOR_STOPPED if it was subscribed.
    pub fn stop(&self) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mut old) = g.take() {
            if old.mask & EVENT_MONITOR_STOPPED != 0 {
                Self::emit(&mut old, EVENT_MONITOR_STOPPED, 0, "");
            }
        }
    }

    /// True when a sink is installed.
    pub fn is_active(&self) -> bool {
        self.inner.lock().map(|g| g.is_some()).unwrap_or(false)
    }

    /// Raises an event if the sink asked for it.
    pub fn event(&self, event: u16, value: u32, endpoint: &str) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = g.as_mut() {
            if a.mask & event != 0 {
                Self::emit(a, event, value, endpoint);
            }
        }
    }

    fn emit(a: &mut Active, event: u16, value: u32, endpoint: &str) {
        let mut head = [0u8; 6];
        head[..2].copy_from_slice(&event.to_ne_bytes());
        head[2..].copy_from_slice(&value.to_ne_bytes());
        let mut first = Msg::copy_from(&head);
        first.set_more(true);
        if a.sink.deliver(first) {
            a.sink.deliver(Msg::copy_from(endpoint.as_bytes()));
        }
    }
}

/// Decodes an event message's first frame into (event, value).
pub fn parse_event(frame: &[u8]) -> Option<(u16, u32)> {
    if frame.len() != 6 {
        return None;
    }
    let ev = u16::from_ne_bytes([frame[0], frame[1]]);
    let val = u32::from_ne_bytes([frame[2], frame[3], frame[4], frame[5]]);
    Some((ev, val))
}
