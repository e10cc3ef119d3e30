//! Socket monitor events (`zmq_socket_monitor`, `zmq_socket_monitor_versioned`), libzmq 4.3's
//! set and its two wire forms.
//!
//! Version 1 (`zmq_socket_monitor`): a two-frame message, 6 bytes (u16 event id and u32 value,
//! host byte order, as libzmq writes them) then the endpoint as text. Version 2 (DRAFT): the
//! event id as a u64, the number of values as a u64, each value as a u64, then the local and
//! the remote endpoint as text (empty when there is none). Events go out on an inproc PAIR,
//! PUB or PUSH socket. They are raised by the socket and by its connections on I/O threads; a
//! [`Monitor`] serialises them.

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
/// All events of version 1.
pub const EVENT_ALL: u16 = 0xFFFF;
/// Version 2 only: one per pipe after `zmq_socket_monitor_pipes_stats` (values: the messages
/// queued towards the peer, the messages queued from it).
pub const EVENT_PIPES_STATS: u64 = 0x10000;
/// All events of version 2.
pub const EVENT_ALL_V2: u64 = EVENT_ALL as u64 | EVENT_PIPES_STATS;
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
    mask: u64,
    /// The wire form: 1 or 2.
    version: u8,
    sink: Box<dyn EventSink>,
}

/// Where an event happened, as version 2 reports it: the local and the remote endpoint (empty
/// when there is none), and which of them version 1 reports.
#[derive(Debug, Clone, Copy)]
pub struct EventAddrs<'a> {
    /// The local endpoint (a listener's, or the local side of a connection).
    pub local: &'a str,
    /// The remote endpoint (the address connected to, or the peer of an accepted connection).
    pub remote: &'a str,
    /// The endpoint version 1 names.
    pub v1: &'a str,
}

impl<'a> EventAddrs<'a> {
    /// An event of a listener (or of anything with only a local endpoint).
    pub fn local(endpoint: &'a str) -> EventAddrs<'a> {
        EventAddrs {
            local: endpoint,
            remote: "",
            v1: endpoint,
        }
    }
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

    /// Installs a sink for the version 1 events in `mask`, replacing (and stopping) any
    /// previous one.
    pub fn start(&self, mask: u16, sink: Box<dyn EventSink>) {
        self.start_versioned(u64::from(mask), 1, sink);
    }

    /// Installs a sink for the events in `mask` in wire form `version` (1 or 2), replacing
    /// (and stopping) any previous one.
    pub fn start_versioned(&self, mask: u64, version: u8, sink: Box<dyn EventSink>) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mut old) = g.take() {
            Self::emit(&mut old, EVENT_MONITOR_STOPPED, &[0], EventAddrs::local(""));
        }
        *g = Some(Active {
            mask,
            version,
            sink,
        });
    }

    /// Stops monitoring, sending MONITOR_STOPPED if it was subscribed.
    pub fn stop(&self) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mut old) = g.take() {
            if old.mask & u64::from(EVENT_MONITOR_STOPPED) != 0 {
                Self::emit(&mut old, EVENT_MONITOR_STOPPED, &[0], EventAddrs::local(""));
            }
        }
    }

    /// True when the events in `mask` are asked for in version 2's form.
    pub fn wants_v2(&self, mask: u64) -> bool {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.as_ref()
            .is_some_and(|a| a.version >= 2 && a.mask & mask != 0)
    }

    /// True when a sink is installed.
    pub fn is_active(&self) -> bool {
        self.inner.lock().map(|g| g.is_some()).unwrap_or(false)
    }

    /// Raises an event of an endpoint with no remote side (a listener's) if the sink asked
    /// for it.
    pub fn event(&self, event: u16, value: u32, endpoint: &str) {
        self.event_at(event, value, EventAddrs::local(endpoint));
    }

    /// Raises an event at `addrs` if the sink asked for it.
    pub fn event_at(&self, event: u16, value: u32, addrs: EventAddrs<'_>) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = g.as_mut() {
            if a.mask & u64::from(event) != 0 {
                Self::emit(a, event, &[u64::from(value)], addrs);
            }
        }
    }

    /// Raises a version 2 event with several values (`EVENT_PIPES_STATS`) if the sink asked
    /// for it in that form.
    pub fn event_v2(&self, event: u64, values: &[u64], addrs: EventAddrs<'_>) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = g.as_mut() {
            if a.version >= 2 && a.mask & event != 0 {
                Self::emit_v2(a, event, values, addrs);
            }
        }
    }

    fn emit(a: &mut Active, event: u16, values: &[u64], addrs: EventAddrs<'_>) {
        if a.version >= 2 {
            return Self::emit_v2(a, u64::from(event), values, addrs);
        }
        let mut head = [0u8; 6];
        head[..2].copy_from_slice(&event.to_ne_bytes());
        let value = values.first().copied().unwrap_or(0) as u32;
        head[2..].copy_from_slice(&value.to_ne_bytes());
        let mut first = Msg::copy_from(&head);
        first.set_more(true);
        if a.sink.deliver(first) {
            a.sink.deliver(Msg::copy_from(addrs.v1.as_bytes()));
        }
    }

    fn emit_v2(a: &mut Active, event: u64, values: &[u64], addrs: EventAddrs<'_>) {
        let more = |b: &[u8]| {
            let mut m = Msg::copy_from(b);
            m.set_more(true);
            m
        };
        // The first frame decides: a sink that takes it takes the rest (a monitor socket that
        // drops an event drops it whole).
        if !a.sink.deliver(more(&event.to_ne_bytes())) {
            return;
        }
        a.sink.deliver(more(&(values.len() as u64).to_ne_bytes()));
        for v in values {
            a.sink.deliver(more(&v.to_ne_bytes()));
        }
        a.sink.deliver(more(addrs.local.as_bytes()));
        a.sink.deliver(Msg::copy_from(addrs.remote.as_bytes()));
    }
}

/// Decodes a version 2 event's frames into (event, values, local endpoint, remote endpoint).
pub fn parse_event_v2(frames: &[Msg]) -> Option<(u64, Vec<u64>, String, String)> {
    let u64_of = |m: &Msg| -> Option<u64> { Some(u64::from_ne_bytes(m.data().try_into().ok()?)) };
    let event = u64_of(frames.first()?)?;
    let n = u64_of(frames.get(1)?)? as usize;
    if frames.len() != n + 4 {
        return None;
    }
    let values = frames[2..2 + n]
        .iter()
        .map(u64_of)
        .collect::<Option<Vec<_>>>()?;
    let text = |m: &Msg| String::from_utf8_lossy(m.data()).into_owned();
    Some((event, values, text(&frames[n + 2]), text(&frames[n + 3])))
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
