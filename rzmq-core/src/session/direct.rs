//! Direct I/O glue: a session grants its connection's output to the pipe's writer and offers
//! its input to the pipe's reader when the connection is idle, takes them back before its own
//! reads and writes, and stops listening while a reader holds the input (see [`crate::direct`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use mio::{Interest, Token};

use super::{Fate, Io, Phase, Session, Timer};
use crate::direct::{DirectRx, DirectTx};
use crate::engine::Engine;

impl Session {
    /// Grants the connection's output to the pipe's writer when the connection is idle.
    pub(super) fn direct_grant(&mut self, r: &impl Io) {
        let (Some(e), Some(p)) = (self.engine.as_ref(), self.pipe.as_ref()) else {
            return;
        };
        if !self.setup.options.rzmq.direct
            || self.last_moved > 1
            || !e.direct_capable()
            || !p.from_socket.is_idle()
            || self.direct.as_ref().is_some_and(|d| d.has_leftover())
        {
            return;
        }
        if let Some(d) = self.direct_tx(r) {
            d.grant();
        }
    }

    /// The connection's output as shared with the pipe's writer, created on first use.
    pub(super) fn direct_tx(&mut self, r: &impl Io) -> Option<Arc<DirectTx>> {
        let fd = self.engine.as_ref()?.fd();
        if self.direct.as_ref().is_some_and(|d| d.fd() != fd) {
            self.direct_kill();
        }
        if let Some(d) = &self.direct {
            return Some(d.clone());
        }
        let p = self.pipe.as_ref()?;
        let split = self.engine.as_ref().is_none_or(Engine::split_large);
        let d = Arc::new(DirectTx::new(fd, r.work().clone()).with_split_large(split));
        p.from_socket.set_direct(Some(d.clone()));
        if let Some(e) = self.engine.as_mut() {
            e.direct = Some(d.clone());
        }
        self.direct = Some(d.clone());
        Some(d)
    }

    /// Offers the connection's input to the pipe's reader when everything read was delivered
    /// and the connection is idle (see [`crate::direct::DirectRx`]).
    pub(super) fn rx_offer(&mut self, r: &impl Io, token: u64, cut_ok: bool) {
        let Some(fd) = self.engine.as_ref().map(Engine::fd) else {
            return;
        };
        if self.rx.as_ref().is_some_and(|x| x.fd() != fd) {
            self.rx_kill();
        }
        let Some(e) = self.engine.as_ref() else {
            return;
        };
        let o = &self.setup.options.rzmq;
        if !o.direct
            || !o.direct_rx
            || self.phase != Phase::Up
            || self.pipe.as_ref().is_none_or(|p| p.to_socket.conflates())
            || !e.input_may_be_offered()
        {
            return;
        }
        // The input's handle exists from here on, offered or not, so the socket can say it
        // receives with blocking calls (see DirectRx::want) even while this thread is ahead.
        let rx = match &self.rx {
            Some(x) => x.clone(),
            None => {
                let Some(dec) = e.fresh_decoder() else {
                    return;
                };
                let md = e.input_metadata();
                // The output too, so replies to what the socket reads itself can go directly.
                let tx = self.direct_tx(r);
                let Some(p) = self.pipe.as_ref() else {
                    return;
                };
                let x = Arc::new(DirectRx::new(
                    fd,
                    md,
                    dec,
                    tx,
                    self.target(r, token),
                    r.streams().clone(),
                ));
                p.to_socket.set_direct_rx(Some(x.clone()));
                self.rx = Some(x.clone());
                x
            }
        };
        if !self.engine.as_ref().is_some_and(|e| e.input_offerable_with(cut_ok))
            // Not in the middle of a multipart message: its first frames wait in the pipe's
            // writer for the last, which the socket must not read past them.
            || self.pipe.as_ref().is_none_or(|p| p.to_socket.in_multipart())
        {
            return;
        }
        if !self.engine.as_ref().is_some_and(Engine::input_clean) {
            // The last read cut a frame: the reader continues it with the decoder holding it,
            // and the I/O thread keeps the reader's clean one until input comes back.
            let Some(clean) = rx.take_spare() else {
                return;
            };
            match self
                .engine
                .as_mut()
                .and_then(|e| e.swap_input_decoder(clean))
            {
                Some(cut) => rx.keep_spare(cut),
                None => return,
            }
        }
        rx.offer();
    }

    /// Stops listening for the stream's readiness (writes are still heard) while the reader
    /// holds its input.
    pub(super) fn go_deaf(&mut self, r: &mut impl Io, token: u64) {
        let (Some(e), Some(rx)) = (self.engine.as_mut(), self.rx.as_ref()) else {
            return;
        };
        if r.registry()
            .reregister(e.stream.source(), Token(token as usize), Interest::WRITABLE)
            .is_err()
        {
            return;
        }
        self.deaf = true;
        if !rx.set_deaf() {
            // The reader let go meanwhile.
            self.hear(r, token);
        }
    }

    /// Listens for the stream's readiness again; a stream readable now reports it at once.
    pub(super) fn hear(&mut self, r: &mut impl Io, token: u64) {
        if !self.deaf {
            return;
        }
        self.deaf = false;
        if let Some(rx) = self.rx.as_ref() {
            rx.set_hearing();
        }
        if let Some(e) = self.engine.as_mut() {
            let _ = r.registry().reregister(
                e.stream.source(),
                Token(token as usize),
                Interest::READABLE | Interest::WRITABLE,
            );
        }
    }

    /// The timer set when readiness was left to a reader holding input: takes the input back
    /// and reads it when the reader has not read since (`seen` claims), looks again later while
    /// it is still at work.
    pub(super) fn check_held(&mut self, r: &mut impl Io, token: u64, seen: u64) -> Option<Fate> {
        use crate::direct::Stale;
        let rx = self.rx.clone()?;
        match rx.steal_if_stale(seen, self.deaf) {
            Stale::Taken(dec) => {
                self.hear(r, token);
                if let Some(dec) = dec {
                    if let Some(old) = self.engine.as_mut().and_then(|e| e.swap_input_decoder(dec))
                    {
                        rx.keep_spare(old);
                    }
                }
                self.pump_in(r, token, false)
            }
            Stale::Held(now) => {
                self.held_seen = Some(now);
                let at = Instant::now() + crate::direct::hold_stale();
                self.arm(r, Timer::HeldStale, at, token);
                None
            }
            // Not held (a reader in its receive meets readiness itself, and marks what the I/O
            // thread hears for when it holds input again).
            Stale::Gone => {
                self.hear(r, token);
                None
            }
        }
    }

    /// Takes the connection's input back from the pipe's reader before reading; false while
    /// the reader holds it.
    pub(super) fn rx_reclaim(&mut self) -> bool {
        let Some(rx) = self.rx.as_ref() else {
            return true;
        };
        match rx.reclaim() {
            None => false,
            Some(None) => true,
            Some(Some(dec)) => {
                if let Some(old) = self.engine.as_mut().and_then(|e| e.swap_input_decoder(dec)) {
                    rx.keep_spare(old);
                }
                true
            }
        }
    }

    /// The connection is ending: its input is never offered again (a reader holding it is
    /// woken and waited for).
    pub(super) fn rx_kill(&mut self) {
        if let Some(rx) = self.rx.take() {
            let pipe = self.pipe.as_ref();
            rx.kill(|| {
                if let Some(p) = pipe {
                    p.to_socket.poke_reader();
                }
            });
            if let Some(p) = self.pipe.as_ref() {
                p.to_socket.set_direct_rx(None);
            }
        }
    }

    /// The engine's stream is gone from the I/O thread's count of connections.
    pub(super) fn uncount(&mut self, r: &impl Io) {
        if self.counted {
            self.counted = false;
            r.streams().fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// The connection is ending: its output is never granted again.
    pub(super) fn direct_kill(&mut self) {
        self.rx_kill();
        if let Some(d) = self.direct.take() {
            d.kill();
            if let Some(e) = self.engine.as_mut() {
                e.direct = None;
            }
            if let Some(p) = self.pipe.as_ref() {
                p.from_socket.set_direct(None);
            }
        }
    }
}
