//! The upgrade of a connection to an alternative data path (RDMA, [`crate::alt`]): the
//! `RZMQ-UP-EP` / `GO` / `NAK` state machine run over ZMTP commands after the handshake, and
//! the switch of output to the path at a message boundary.

use std::os::fd::RawFd;

use super::{Closed, Engine, Progress, Proto};
use crate::alt::{self, AltPath, HalfPath, Mode, Upgrader};
use crate::monitor::{self, Monitor};
use crate::msg::{Metadata, Msg};
use crate::zmtp;

pub(super) enum UpState {
    /// Before the handshake.
    Waiting,
    /// The connecting end sent its blob and waits for the peer's.
    Offered(Box<dyn HalfPath>),
    /// Connected; switching or switched.
    Up,
    /// Staying on the stream.
    Declined,
}

/// One connection's upgrade: the protocol of [`crate::alt`] and the path once up.
pub(crate) struct Upgrade {
    up: &'static std::sync::Arc<dyn Upgrader>,
    connecting: bool,
    pub(super) required: bool,
    local: Option<std::net::SocketAddr>,
    pub(super) state: UpState,
    pub(super) path: Option<Box<dyn AltPath>>,
    /// The path's fd, until the session registers it.
    new_fd: Option<RawFd>,
    /// Our `GO` is due at the next message boundary.
    pub(super) go_due: bool,
    pub(super) out_switched: bool,
    pub(super) in_switched: bool,
    /// A frame the path had no room for.
    pub(super) held: Option<Msg>,
    /// The path failed: deliver what arrived before, then close.
    pub(super) failed: bool,
    /// Peer metadata attached to frames from the path.
    pub(super) md: Option<std::sync::Arc<Metadata>>,
    monitor: Monitor,
    endpoint: String,
    /// The connection is encrypted (CURVE) and its socket's `ZMQ_RDMA_CURVE_PLAINTEXT` is off:
    /// its messages stay on the stream.
    encrypted: bool,
}

impl Upgrade {
    /// An upgrade for a tcp connection, or `None` when none applies (no upgrader installed, or
    /// `RZMQ_RDMA=off` and not `required` by the endpoint).
    pub(crate) fn new(
        connecting: bool,
        required_by_endpoint: bool,
        encrypted: bool,
        local: Option<std::net::SocketAddr>,
        monitor: Monitor,
        endpoint: String,
    ) -> Option<Box<Upgrade>> {
        let up = alt::upgrader()?;
        let mode = up.mode();
        if mode == Mode::Off && !required_by_endpoint {
            return None;
        }
        Some(Box::new(Upgrade {
            up,
            connecting,
            required: required_by_endpoint || mode == Mode::Require,
            local,
            state: UpState::Waiting,
            path: None,
            new_fd: None,
            go_due: false,
            out_switched: false,
            in_switched: false,
            held: None,
            failed: false,
            md: None,
            monitor,
            endpoint,
            encrypted,
        }))
    }

    /// The `READY` property to advertise, when this process can upgrade.
    pub(crate) fn advertise(&self) -> Option<Vec<u8>> {
        self.up.advertise().ok()
    }

    /// True once the peer's GO was read: input comes from the alternative path.
    pub(crate) fn input_switched(&self) -> bool {
        self.in_switched
    }

    /// True once messages move on the alternative path (both directions switched).
    pub(crate) fn is_up(&self) -> bool {
        self.out_switched && self.in_switched
    }

    /// The path's fd once, for the session to register.
    pub(crate) fn take_new_fd(&mut self) -> Option<RawFd> {
        self.new_fd.take()
    }

    /// The path's fd (to deregister).
    pub(crate) fn fd(&self) -> Option<RawFd> {
        self.path.as_ref().map(|p| p.fd())
    }

    fn note(&self, value: u32, what: &str) {
        if self.up.log_enabled() {
            eprintln!(
                "rzmq[{}]: {} {}: {what}",
                std::process::id(),
                if self.connecting { "connect" } else { "accept" },
                self.endpoint
            );
        }
        if self.up.events_enabled() {
            self.monitor
                .event(monitor::EVENT_TRANSPORT, value, &self.endpoint);
        }
    }

    /// Stays on the stream, or refuses the connection when the upgrade is required.
    fn decline(&mut self, why: &str) -> Result<(), Closed> {
        self.state = UpState::Declined;
        self.path = None;
        self.go_due = false;
        if self.required {
            self.note(
                monitor::TRANSPORT_REFUSED,
                &format!("refused: RDMA required but {why}"),
            );
            return Err(Closed::Upgrade(format!("RDMA required but {why}")));
        }
        self.note(monitor::TRANSPORT_TCP, &format!("transport tcp ({why})"));
        Ok(())
    }

    fn set_path(&mut self, p: Box<dyn AltPath>) {
        self.new_fd = Some(p.fd());
        self.path = Some(p);
        self.state = UpState::Up;
    }

    /// The handshake completed with `peer`: offer our half (connecting end) or wait for the
    /// peer's offer. `Err`: close before anything is delivered.
    pub(super) fn on_ready(
        &mut self,
        peer: &zmtp::Peer,
        z: &mut zmtp::Connection,
    ) -> Result<(), Closed> {
        self.md = Some(peer.metadata.clone());
        if self.encrypted {
            return self.decline(
                "the connection uses CURVE: its messages stay on the encrypted TCP path \
                 (the socket option ZMQ_RDMA_CURVE_PLAINTEXT moves them to RDMA unencrypted)",
            );
        }
        let Some(value) = peer.metadata.get(alt::PROPERTY) else {
            return self.decline("the peer does not offer it (libzmq, or RZMQ_RDMA=off there)");
        };
        let value = value.to_vec();
        if let Err(e) = self.up.advertise() {
            return self.decline(&format!("it is unavailable here: {e}"));
        }
        if let Err(e) = self.up.compatible(&value) {
            return self.decline(&e.0);
        }
        if !self.connecting {
            return Ok(());
        }
        match self.up.start(self.local) {
            Ok((half, blob)) => {
                z.send_command(alt::CMD_EP, &blob)
                    .map_err(Closed::Protocol)?;
                self.state = UpState::Offered(half);
                Ok(())
            }
            Err(e) => {
                let _ = z.send_command(alt::CMD_NAK, e.0.as_bytes());
                self.decline(&format!("setup failed here: {e}"))
            }
        }
    }

    /// An upgrade command from the peer.
    pub(super) fn on_command(
        &mut self,
        body: &[u8],
        z: &mut zmtp::Connection,
    ) -> Result<(), Closed> {
        let Some((name, data)) = zmtp::parse_command(body) else {
            return Ok(());
        };
        let state = std::mem::replace(&mut self.state, UpState::Declined);
        match (name, state) {
            (n, UpState::Waiting) if n == alt::CMD_EP && !self.connecting => {
                let res = self
                    .up
                    .start(self.local)
                    .and_then(|(half, blob)| Ok((half.complete(data)?, blob)));
                match res {
                    Ok((path, blob)) => {
                        z.send_command(alt::CMD_EP, &blob)
                            .map_err(Closed::Protocol)?;
                        self.set_path(path);
                        Ok(())
                    }
                    Err(e) => {
                        let _ = z.send_command(alt::CMD_NAK, e.0.as_bytes());
                        self.decline(&format!("setup failed here: {e}"))
                    }
                }
            }
            // We declined at the handshake (CURVE, no provider here) but the peer offers: say no.
            (n, UpState::Declined) if n == alt::CMD_EP => {
                let _ = z.send_command(alt::CMD_NAK, b"declined by the peer");
                Ok(())
            }
            (n, UpState::Offered(half)) if n == alt::CMD_EP => match half.complete(data) {
                Ok(path) => {
                    self.set_path(path);
                    self.go_due = true;
                    Ok(())
                }
                Err(e) => {
                    let _ = z.send_command(alt::CMD_NAK, e.0.as_bytes());
                    self.decline(&format!("connecting to the peer failed: {e}"))
                }
            },
            (n, UpState::Up) if n == alt::CMD_GO && !self.in_switched => {
                self.state = UpState::Up;
                self.in_switched = true;
                if !self.connecting {
                    self.go_due = true;
                }
                if self.is_up() {
                    self.report_up();
                }
                Ok(())
            }
            (n, _) if n == alt::CMD_NAK => {
                let why = String::from_utf8_lossy(&data[..data.len().min(200)]).into_owned();
                self.decline(&format!("the peer declined: {why}"))
            }
            (_, st) => {
                self.state = st;
                Err(Closed::Upgrade(format!(
                    "unexpected upgrade command {}",
                    String::from_utf8_lossy(name)
                )))
            }
        }
    }

    fn report_up(&self) {
        if let Some(p) = &self.path {
            self.note(
                monitor::TRANSPORT_RDMA,
                &format!("transport {}", p.describe()),
            );
        }
    }

    /// Logs the path's counters when the connection ends.
    pub(crate) fn report_end(&self, why: &str) {
        if let Some(p) = &self.path {
            let s = p.stats();
            self.note(
                monitor::TRANSPORT_ENDED,
                &format!(
                    "{} closed ({why}): tx {} msgs {} B ({} zero-copy), rx {} msgs {} B ({} zero-copy reads), {} copies, {} credit stalls",
                    p.describe(),
                    s.msgs_tx,
                    s.bytes_tx,
                    s.rndv_tx,
                    s.msgs_rx,
                    s.bytes_rx,
                    s.rndv_reads,
                    s.copies,
                    s.credit_stalls
                ),
            );
        }
    }

    /// Whether output must wait (a required upgrade not yet switched).
    pub(super) fn output_held(&self) -> bool {
        self.required && !self.out_switched
    }

    /// Neither declined nor switched both ways (meaningful after the handshake).
    pub(super) fn settling(&self) -> bool {
        !matches!(self.state, UpState::Declined) && !self.is_up()
    }

    /// True while something is owed to the peer on the path.
    pub(super) fn busy(&self) -> bool {
        self.held.is_some()
            || self.go_due
            || (self.out_switched && self.path.as_ref().is_some_and(|p| !p.is_idle()))
    }
}

impl Engine {
    /// Sends our `GO` when it is due and we are at a message boundary; output then moves to the
    /// alternative path.
    pub(super) fn maybe_go(&mut self) -> Option<Progress> {
        let (Some(u), Proto::Zmtp(z)) = (self.upgrade.as_deref_mut(), &mut self.proto) else {
            return None;
        };
        if !u.go_due || self.out_in_multipart {
            return None;
        }
        if let Err(e) = z.send_command(alt::CMD_GO, &[]) {
            return Some(Progress::Closed(Closed::Protocol(e)));
        }
        u.go_due = false;
        u.out_switched = true;
        if u.is_up() {
            u.report_up();
        }
        None
    }
}
