//! ZAP (RFC 27) on the I/O thread: the pipe pair from a connection's session to the handler bound
//! at `inproc://zeromq.zap.01`, and the handshake monitor events libzmq 4.3.5 raises.
//!
//! As libzmq's `session_base_t::zap_connect`, a session that needs authentication attaches a new,
//! unbounded pipe pair to the handler socket (REP or ROUTER; the pipe presents no identity, so a
//! ROUTER-based handler generates one), writes the request there (it starts with an empty
//! delimiter, which REP strips and puts back on the reply) and is woken through the pipe when the
//! reply is complete. The ZMTP handshake meanwhile keeps its `READY`/`WELCOME` back
//! ([`crate::zmtp::Connection::take_zap_request`]). A handler that goes away before answering
//! leaves the handshake waiting, as in libzmq: the peer leaving or the handshake timer ends it.

use std::sync::{Arc, Weak};

use crate::command::Attach;
use crate::engine::Closed;
use crate::monitor::{self, Monitor};
use crate::msg::{Metadata, Msg};
use crate::pattern::PipeEntry;
use crate::pipe::{self, Reader, Target, Writer};
use crate::transport::inproc::Inproc;
use crate::zmtp::{self, SocketType, ZapRequest, ZmtpError};

/// The inproc name ZAP handlers bind (`inproc://zeromq.zap.01`).
pub(crate) const ZAP_ENDPOINT_NAME: &str = "zeromq.zap.01";

/// A session's ends of its pipe pair to the ZAP handler.
pub(crate) struct ZapClient {
    to_handler: Writer,
    from_handler: Reader,
    reply: Vec<Msg>,
}

/// What the handler's side of the pipe holds.
enum Poll {
    /// Nothing complete yet.
    Pending,
    /// A whole reply (every frame of one message).
    Reply(Vec<Msg>),
    /// The handler closed its end without (a complete) reply.
    Closed,
}

impl ZapClient {
    /// Attaches a pipe pair to the socket bound at `inproc://zeromq.zap.01`; `None` when no
    /// socket is bound there or it cannot be a ZAP handler (libzmq insists on REP or ROUTER).
    /// `target` is told when the reply arrives or the handler goes.
    fn connect(inproc: &Inproc, target: Target) -> Option<ZapClient> {
        let (handler, ty) = inproc.bound_socket(ZAP_ENDPOINT_NAME)?;
        if !matches!(ty, SocketType::Rep | SocketType::Router) {
            return None;
        }
        let (to_handler, handler_reader) = pipe::pipe(0);
        let (handler_writer, from_handler) = pipe::pipe(0);
        // No Identity: the handler's ROUTER logic generates a routing id for this pipe.
        let mut md = Metadata::new();
        md.insert("Socket-Type", b"DEALER");
        let md = Arc::new(md);
        to_handler.set_peer(md.clone());
        to_handler.set_target(target.clone());
        from_handler.set_target(target);
        let mut entry = PipeEntry::new(handler_reader, handler_writer);
        entry.peer = Some(md);
        let id = handler.reserve_pipe_id();
        handler.attach(Attach { entry, id });
        Some(ZapClient {
            to_handler,
            from_handler,
            reply: Vec::new(),
        })
    }

    /// Writes the request (one multipart message; the pipe has no HWM).
    fn send(&mut self, req: &ZapRequest) {
        for f in req.frames() {
            self.to_handler.write(f);
        }
    }

    fn poll(&mut self) -> Poll {
        while let Some(m) = self.from_handler.read() {
            let last = !m.more();
            self.reply.push(m);
            if last {
                return Poll::Reply(std::mem::take(&mut self.reply));
            }
        }
        if self.from_handler.writer_closed() {
            Poll::Closed
        } else {
            Poll::Pending
        }
    }
}

/// What [`service`] did.
pub(crate) enum Step {
    /// Nothing changed.
    Idle,
    /// The handshake moved on (ZAP answered, or no handler is bound): pump the connection.
    Progress,
    /// The handshake failed; close the connection with this error.
    Failed(ZmtpError),
}

/// Runs the ZAP side of `conn`'s handshake: sends a pending request (or tells the connection no
/// handler is bound) and hands over a complete reply, raising `HANDSHAKE_FAILED_AUTH` for a
/// refusal as libzmq does when the reply arrives.
pub(crate) fn service(
    zap: &mut Option<ZapClient>,
    conn: &mut zmtp::Connection,
    inproc: &Weak<Inproc>,
    target: impl FnOnce() -> Target,
    monitor: &Monitor,
    endpoint: &str,
) -> Step {
    let mut step = Step::Idle;
    if let Some(req) = conn.take_zap_request() {
        let client = match zap.take() {
            Some(c) => Some(c),
            None => inproc
                .upgrade()
                .and_then(|i| ZapClient::connect(&i, target())),
        };
        match client {
            Some(mut c) => {
                c.send(&req);
                *zap = Some(c);
            }
            None => match conn.zap_unavailable() {
                Ok(()) => step = Step::Progress,
                Err(e) => return Step::Failed(e),
            },
        }
    }
    if !conn.zap_pending() {
        return step;
    }
    let Some(client) = zap.as_mut() else {
        return step;
    };
    match client.poll() {
        Poll::Pending => step,
        Poll::Closed => {
            // libzmq forgets the pipe and keeps waiting for a reply that cannot come.
            *zap = None;
            step
        }
        Poll::Reply(frames) => {
            *zap = None;
            match conn.zap_reply(&frames) {
                Ok(200) => {}
                Ok(status) => {
                    monitor.event(
                        monitor::EVENT_HANDSHAKE_FAILED_AUTH,
                        u32::from(status),
                        endpoint,
                    );
                }
                Err(e) => return Step::Failed(e),
            }
            Step::Progress
        }
    }
}

/// The monitor event libzmq 4.3.5 raises when a connection whose handshake had not completed
/// ends: the protocol error code, the authentication status of a peer's `ERROR`, or "no detail"
/// with an errno (`EPIPE` when the peer closed). Nothing when the handshake had already ended in
/// an authentication refusal (`rejected`): libzmq's mechanism is then in its error state.
pub(crate) fn handshake_failure_event(why: &Closed, rejected: bool) -> Option<(u16, u32)> {
    match why {
        Closed::Protocol(e) => {
            if let Some(code) = e.protocol_code() {
                Some((monitor::EVENT_HANDSHAKE_FAILED_PROTOCOL, code))
            } else if let Some(status) = e.auth_status() {
                Some((monitor::EVENT_HANDSHAKE_FAILED_AUTH, status))
            } else if rejected {
                None
            } else {
                Some((
                    monitor::EVENT_HANDSHAKE_FAILED_NO_DETAIL,
                    e.no_detail_errno() as u32,
                ))
            }
        }
        _ if rejected => None,
        Closed::Eof => Some((
            monitor::EVENT_HANDSHAKE_FAILED_NO_DETAIL,
            libc::EPIPE as u32,
        )),
        Closed::Io(e) => Some((
            monitor::EVENT_HANDSHAKE_FAILED_NO_DETAIL,
            e.raw_os_error().unwrap_or(libc::ECONNRESET) as u32,
        )),
        Closed::Local | Closed::Alt(_) => Some((
            monitor::EVENT_HANDSHAKE_FAILED_NO_DETAIL,
            libc::ECONNRESET as u32,
        )),
        Closed::Upgrade(_) => Some((
            monitor::EVENT_HANDSHAKE_FAILED_NO_DETAIL,
            libc::EPROTONOSUPPORT as u32,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_events() {
        let ev = |why: Closed, rejected| handshake_failure_event(&why, rejected);
        assert_eq!(
            ev(Closed::Eof, false),
            Some((
                monitor::EVENT_HANDSHAKE_FAILED_NO_DETAIL,
                libc::EPIPE as u32
            ))
        );
        assert_eq!(ev(Closed::Eof, true), None);
        assert_eq!(
            ev(
                Closed::Protocol(ZmtpError::ZapReply(zmtp::zap::ZapError::BadVersion)),
                false
            ),
            Some((monitor::EVENT_HANDSHAKE_FAILED_PROTOCOL, 0x2000_0003))
        );
        assert_eq!(
            ev(
                Closed::Protocol(ZmtpError::PeerError {
                    reason: b"500".to_vec()
                }),
                true
            ),
            Some((monitor::EVENT_HANDSHAKE_FAILED_AUTH, 500))
        );
        assert_eq!(
            ev(
                Closed::Protocol(ZmtpError::PeerError {
                    reason: b"x".to_vec()
                }),
                true
            ),
            None
        );
        assert_eq!(
            ev(Closed::Protocol(ZmtpError::ZapUnavailable), false),
            Some((
                monitor::EVENT_HANDSHAKE_FAILED_NO_DETAIL,
                libc::EFAULT as u32
            ))
        );
        assert_eq!(
            ev(Closed::Protocol(ZmtpError::HandshakeTimeout), true),
            None
        );
    }
}
