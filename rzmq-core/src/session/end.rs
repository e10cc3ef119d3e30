//! The end of a connection: reporting it, reconnecting (connect side) or ending (accepted
//! side), and the final teardown of a session.

use super::{Fate, Io, Phase, Session};
use crate::command::PeerPipe;
use crate::engine::{Closed, Engine, Proto};
use crate::monitor;
use crate::msg::Msg;
use crate::zmtp::{self, SocketType};

impl Session {
    /// The connection ended: report it, then reconnect (connect side) or end (accepted side).
    pub(super) fn broken(&mut self, r: &mut impl Io, token: u64, why: Closed) -> Fate {
        self.direct_kill();
        let Some(mut e) = self.engine.take() else {
            return Fate::Keep;
        };
        self.uncount(r);
        let fd = e.fd();
        let _ = r.registry().deregister(e.stream.source());
        end_alt(r, &mut e, &why);
        self.zap = None;
        // Refused by authentication (ZAP said no, or the peer sent ERROR): as libzmq, whose
        // session terminates on a protocol error, a connecting session does not try again.
        let mut refused = false;
        if self.phase != Phase::Up {
            let rejected = matches!(&e.proto, Proto::Zmtp(z) if z.is_rejected());
            refused =
                rejected || matches!(&why, Closed::Protocol(zmtp::ZmtpError::PeerError { .. }));
            // (RDMA required and not possible: NO_DETAIL with EPROTONOSUPPORT, before any
            // message moved.)
            if let Some((ev, val)) = crate::zap::handshake_failure_event(&why, rejected) {
                self.setup.monitor.event_at(ev, val, self.event_addrs());
            }
        }
        self.setup
            .monitor
            .event_at(monitor::EVENT_DISCONNECTED, fd as u32, self.event_addrs());
        let stream_notify =
            self.setup.socket_type == SocketType::Stream && self.setup.options.stream_notify;
        // ROUTER_NOTIFY's disconnect note: `[routing id][empty]`, for a peer that got past
        // the handshake (what remains of a message cut in half is rolled back first).
        let router_notify =
            self.phase == Phase::Up && self.router_notifies(crate::options::NOTIFY_DISCONNECT);
        // HICCUP_MSG: a connection this socket made broke after its handshake (CLIENT,
        // DEALER, PEER; libzmq `session_base_t::engine_error`).
        let hiccup = (self.phase == Phase::Up
            && self.connect.is_some()
            && !refused
            && self.setup.socket_type.receives_hiccup_msg()
            && !self.setup.options.hiccup_msg.is_empty())
        .then(|| Msg::copy_from(&self.setup.options.hiccup_msg));
        // DISCONNECT_MSG: an accepted connection broke after its handshake (ROUTER, SERVER,
        // PEER; libzmq `session_base_t::engine_error`): the socket receives it from that peer.
        let disconnect = (self.phase == Phase::Up
            && self.connect.is_none()
            && self.setup.socket_type.receives_disconnect_msg()
            && !self.setup.options.disconnect_msg.is_empty())
        .then(|| Msg::copy_from(&self.setup.options.disconnect_msg));
        drop(e);
        if self.connect.is_none()
            || refused
            || self.setup.options.immediate
            || self.setup.socket_type == SocketType::Stream
        {
            // The pipe dies with the connection.
            if let Some(p) = self.pipe.take() {
                let PeerPipe {
                    mut to_socket,
                    from_socket,
                } = p;
                if stream_notify && self.phase == Phase::Up {
                    let _ = to_socket.try_write(Msg::new());
                }
                if router_notify {
                    to_socket.rollback();
                    let _ = to_socket.try_write(Msg::new());
                }
                // libzmq writes these two past the high-water mark.
                if let Some(m) = hiccup.clone() {
                    to_socket.rollback();
                    to_socket.write_past_hwm(m);
                }
                if let Some(m) = disconnect {
                    to_socket.rollback();
                    to_socket.write_past_hwm(m);
                }
                drop(from_socket);
                drop(to_socket);
            }
            if self.connect.is_none() || refused {
                return Fate::Remove;
            }
        } else if let Some(p) = &mut self.pipe {
            // A multipart message cut in half is not resent: skip what remains of it.
            self.drop_partial = p.from_socket.in_multipart();
            p.to_socket.rollback();
            if router_notify {
                let _ = p.to_socket.try_write(Msg::new());
            }
            if let Some(m) = hiccup {
                p.to_socket.write_past_hwm(m);
            }
        }
        self.phase = Phase::Down;
        if self.socket_closed {
            if let Some(p) = &self.pipe {
                if p.from_socket.is_finished() {
                    return Fate::Remove;
                }
            } else {
                return Fate::Remove;
            }
        }
        self.retry_later(r, token)
    }

    /// True for a ROUTER whose `ZMQ_ROUTER_NOTIFY` has `bit` set.
    pub(super) fn router_notifies(&self, bit: i32) -> bool {
        self.setup.socket_type == SocketType::Router && self.setup.options.router_notify & bit != 0
    }

    /// Final cleanup when the session is removed (the thread forgets it in its listener).
    pub(crate) fn teardown(&mut self, r: &mut impl Io) {
        self.direct_kill();
        if let Some(mut e) = self.engine.take() {
            self.uncount(r);
            let _ = r.registry().deregister(e.stream.source());
            // No DISCONNECTED here: libzmq reports it only when the connection fails, never
            // when the socket that owns it closes (its test_monitor relies on that).
            end_alt(r, &mut e, &Closed::Local);
        }
        if let Some(ci) = self.connect.as_mut() {
            if let Some(mut s) = ci.pending.take() {
                let _ = r.registry().deregister(&mut s);
            }
        }
        self.pipe = None;
    }
}

/// Deregisters a connection's alternative path (before it is dropped) and logs its counters.
fn end_alt(r: &mut impl Io, e: &mut Engine, why: &Closed) {
    if let Some(u) = e.upgrade.as_ref() {
        if let Some(fd) = u.fd() {
            let _ = r.registry().deregister(&mut mio::unix::SourceFd(&fd));
            let why = match why {
                Closed::Eof => "peer closed".to_string(),
                Closed::Io(e) => format!("I/O error: {e}"),
                Closed::Protocol(e) => format!("protocol error: {e}"),
                Closed::Local => "closed here".to_string(),
                Closed::Upgrade(w) => w.clone(),
                Closed::Alt(e) => format!("RDMA failure: {e}"),
            };
            u.report_end(&why);
        }
    }
}
