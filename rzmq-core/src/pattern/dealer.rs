//! DEALER: load-balances outgoing and fair-queues incoming messages (libzmq `dealer_t`).
//!
//! With `ZMQ_PROBE_ROUTER` it writes an empty message to each new pipe, so a ROUTER peer learns
//! the DEALER's routing id at once.

use super::fq::Fq;
use super::lb::Lb;
use super::single::RecvPipe;
use super::{opt_bool, Pattern, PipeId, PipeTable};
use crate::error::{Error, Result};
use crate::msg::Msg;
use crate::options as opt;

/// The DEALER pattern (also the transport under REQ).
#[derive(Default)]
pub(crate) struct Dealer {
    pub(crate) lb: Lb,
    pub(crate) fq: Fq,
    probe_router: bool,
}

impl Dealer {
    /// A DEALER with no peers.
    pub(crate) fn new() -> Dealer {
        Dealer::default()
    }

    /// Sends one frame and tells which pipe took it (REQ remembers it for the reply).
    #[inline]
    pub(crate) fn send_pipe(
        &mut self,
        msg: Msg,
        pipes: &mut PipeTable,
    ) -> std::result::Result<Option<PipeId>, (Msg, Error)> {
        self.lb.send(msg, pipes)
    }
}

impl Pattern for Dealer {
    fn attach(&mut self, id: PipeId, pipes: &mut PipeTable) {
        if self.probe_router {
            if let Some(w) = pipes.writer(id) {
                let _ = w.try_write(Msg::new());
            }
        }
        self.fq.attach(id);
        self.lb.attach(id);
    }

    fn terminated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.fq.terminated(id);
        self.lb.terminated(id);
    }

    fn read_activated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.fq.activated(id);
    }

    fn write_activated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.lb.activated(id);
    }

    #[inline]
    fn send(&mut self, msg: Msg, pipes: &mut PipeTable) -> std::result::Result<(), (Msg, Error)> {
        self.lb.send(msg, pipes).map(|_| ())
    }

    #[inline]
    fn recv(&mut self, pipes: &mut PipeTable) -> Result<Msg> {
        self.fq.recv(pipes).map(|(m, _)| m)
    }

    fn has_in(&mut self, pipes: &mut PipeTable) -> bool {
        self.fq.has_in(pipes)
    }

    fn has_out(&mut self, pipes: &mut PipeTable) -> bool {
        self.lb.has_out(pipes)
    }

    fn set_option(&mut self, option: i32, value: &[u8], _pipes: &mut PipeTable) -> Result<()> {
        if option == opt::PROBE_ROUTER {
            self.probe_router = opt_bool(value)?;
        }
        Ok(())
    }
}

impl RecvPipe for Dealer {
    /// Receives one frame and the pipe it came from (REQ checks replies by it).
    #[inline]
    fn recv_pipe(&mut self, pipes: &mut PipeTable) -> Result<(Msg, PipeId)> {
        self.fq.recv(pipes)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn lb_out_fq_in() {
        let mut d = Dealer::new();
        let mut t = PipeTable::new();
        let (_a, mut pa) = connect(&mut d, &mut t, 0);
        let (_b, mut pb) = connect(&mut d, &mut t, 0);
        send(&mut d, &mut t, &[b"", b"1"]).unwrap();
        send(&mut d, &mut t, &[b"", b"2"]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"", b"1"])]);
        assert_eq!(pb.recv_all(), vec![parts(&[b"", b"2"])]);
        pb.send(&[b"from b"]);
        pa.send(&[b"from a"]);
        let mut got = vec![recv(&mut d, &mut t).unwrap(), recv(&mut d, &mut t).unwrap()];
        got.sort();
        assert_eq!(got, vec![parts(&[b"from a"]), parts(&[b"from b"])]);
    }

    #[test]
    fn probe_router_sends_empty_message_on_attach() {
        let mut d = Dealer::new();
        let mut t = PipeTable::new();
        d.set_option(opt::PROBE_ROUTER, &1i32.to_ne_bytes(), &mut t)
            .unwrap();
        let (_a, mut pa) = connect(&mut d, &mut t, 0);
        assert_eq!(pa.recv_all(), vec![parts(&[b""])]);
        assert_eq!(
            d.set_option(opt::PROBE_ROUTER, &[1], &mut t),
            Err(Error::Inval)
        );
    }
}
