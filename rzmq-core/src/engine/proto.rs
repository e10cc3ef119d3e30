//! The protocol spoken on a connection: ZMTP 3.x ([`crate::zmtp`]) or raw bytes for STREAM
//! sockets ([`RawCodec`]), behind one [`Proto`] the engine drives.

use std::io::{self, Write};
use std::time::Instant;

use super::Stream;
use crate::msg::Msg;
use crate::zmtp::{self, ZmtpError};

/// Raw framing for STREAM sockets: every read is one message, every message is written as is.
pub(crate) struct RawCodec {
    inbuf: Vec<u8>,
    events: std::collections::VecDeque<zmtp::Event>,
    out: std::collections::VecDeque<Msg>,
    out_off: usize,
    close_requested: bool,
    /// Connection properties attached to every received chunk (Peer-Address, __fd).
    metadata: Option<std::sync::Arc<crate::msg::Metadata>>,
}

impl RawCodec {
    fn new() -> RawCodec {
        RawCodec {
            inbuf: vec![0; 64 * 1024],
            events: Default::default(),
            out: Default::default(),
            out_off: 0,
            close_requested: false,
            metadata: None,
        }
    }
}

/// The protocol spoken on a connection.
pub(crate) enum Proto {
    /// ZMTP 3.x.
    Zmtp(Box<zmtp::Connection>),
    /// Raw bytes (STREAM sockets).
    Raw(RawCodec),
}

impl Proto {
    /// ZMTP for a socket, or raw framing for STREAM.
    pub(crate) fn new_zmtp(cfg: zmtp::Config, now: Instant) -> Proto {
        Proto::Zmtp(Box::new(zmtp::Connection::new(cfg, now)))
    }

    /// Raw framing.
    pub(crate) fn new_raw() -> Proto {
        Proto::Raw(RawCodec::new())
    }

    /// Sets the properties attached to received raw chunks (no effect on ZMTP, whose handshake
    /// supplies them).
    pub(crate) fn set_raw_metadata(&mut self, md: std::sync::Arc<crate::msg::Metadata>) {
        if let Proto::Raw(r) = self {
            r.metadata = Some(md);
        }
    }

    /// The properties attached to received raw chunks.
    pub(crate) fn raw_metadata(&self) -> Option<std::sync::Arc<crate::msg::Metadata>> {
        match self {
            Proto::Raw(r) => r.metadata.clone(),
            Proto::Zmtp(_) => None,
        }
    }

    /// True once the handshake is done (raw: always).
    pub(crate) fn is_ready(&self) -> bool {
        match self {
            Proto::Zmtp(z) => z.is_ready(),
            Proto::Raw(_) => true,
        }
    }

    pub(super) fn recv_buffer(&mut self) -> &mut [u8] {
        match self {
            Proto::Zmtp(z) => z.recv_buffer(),
            Proto::Raw(r) => &mut r.inbuf,
        }
    }

    pub(super) fn received(&mut self, n: usize, now: Instant) -> Result<(), ZmtpError> {
        match self {
            Proto::Zmtp(z) => z.received(n, now),
            Proto::Raw(r) => {
                let mut m = Msg::copy_from(&r.inbuf[..n]);
                m.set_metadata(r.metadata.clone());
                r.events.push_back(zmtp::Event::Message(m));
                Ok(())
            }
        }
    }

    /// The next decoded event.
    pub(crate) fn poll_event(&mut self) -> Result<Option<zmtp::Event>, ZmtpError> {
        match self {
            Proto::Zmtp(z) => z.poll_event(),
            Proto::Raw(r) => Ok(r.events.pop_front()),
        }
    }

    pub(super) fn send(&mut self, msg: Msg) -> Result<(), ZmtpError> {
        match self {
            Proto::Zmtp(z) => z.send(msg),
            Proto::Raw(r) => {
                if msg.is_empty() {
                    r.close_requested = true;
                } else {
                    r.out.push_back(msg);
                }
                Ok(())
            }
        }
    }

    pub(super) fn pending_output(&self) -> usize {
        match self {
            Proto::Zmtp(z) => z.pending_output_bytes(),
            Proto::Raw(r) => r.out.iter().map(|m| m.len()).sum::<usize>() - r.out_off,
        }
    }

    pub(super) fn has_output(&self) -> bool {
        match self {
            Proto::Zmtp(z) => z.has_output(),
            Proto::Raw(r) => !r.out.is_empty(),
        }
    }

    pub(super) fn write_to(&mut self, w: &mut Stream) -> io::Result<usize> {
        match self {
            Proto::Zmtp(z) => z.write_to(w),
            Proto::Raw(r) => {
                let mut total = 0;
                while let Some(m) = r.out.front() {
                    let n = w.write(&m.data()[r.out_off..])?;
                    total += n;
                    r.out_off += n;
                    if r.out_off == m.len() {
                        r.out.pop_front();
                        r.out_off = 0;
                    }
                }
                Ok(total)
            }
        }
    }

    pub(super) fn close_requested(&self) -> bool {
        matches!(self, Proto::Raw(r) if r.close_requested && r.out.is_empty())
    }

    /// The next protocol deadline (handshake, heartbeat).
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        match self {
            Proto::Zmtp(z) => z.poll_timeout(),
            Proto::Raw(_) => None,
        }
    }

    pub(super) fn handle_timeout(&mut self, now: Instant) -> Result<(), ZmtpError> {
        match self {
            Proto::Zmtp(z) => z.handle_timeout(now),
            Proto::Raw(_) => Ok(()),
        }
    }
}
