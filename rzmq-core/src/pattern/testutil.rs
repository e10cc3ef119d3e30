//! Test helpers: real pipes whose far ends the test drives as the peer.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use super::{Pattern, PipeEntry, PipeId, PipeTable};
use crate::error::{Error, Result};
use crate::msg::{Metadata, Msg};
use crate::pipe::{pipe, Notify, Reader, Target, Writer};

/// Records the activations pipes send to the socket, for [`pump`] to deliver.
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<(bool, u64)>>,
}

impl Notify for Recorder {
    fn activate_read(&self, token: u64) {
        self.events.lock().unwrap().push((true, token));
    }
    fn activate_write(&self, token: u64) {
        self.events.lock().unwrap().push((false, token));
    }
    fn pipe_closed(&self, _token: u64) {}
}

thread_local! {
    static RECORDER: RefCell<Arc<Recorder>> = RefCell::new(Arc::new(Recorder::default()));
}

fn recorder() -> Arc<Recorder> {
    RECORDER.with(|r| r.borrow().clone())
}

/// Delivers recorded activations to the pattern, as the socket's command loop does.
pub(crate) fn pump(p: &mut dyn Pattern, t: &mut PipeTable) {
    let events = std::mem::take(&mut *recorder().events.lock().unwrap());
    for (read, token) in events {
        let id = PipeId(token);
        if t.get(id).is_some() {
            if read {
                p.read_activated(id, t);
            } else {
                p.write_activated(id, t);
            }
        }
    }
}

/// The far side of one attached pipe: what the engine or peer socket would hold.
pub(crate) struct Peer {
    /// Writes messages to the pattern.
    pub w: Writer,
    /// Reads what the pattern sent.
    pub r: Reader,
}

impl Peer {
    /// Writes one message (frames with MORE except the last), ignoring the HWM.
    pub(super) fn send(&mut self, parts: &[&[u8]]) {
        for (i, p) in parts.iter().enumerate() {
            let mut m = Msg::copy_from(p);
            m.set_more(i + 1 < parts.len());
            self.w.write(m);
        }
    }

    /// Reads one whole message the pattern sent.
    pub(super) fn recv(&mut self) -> Option<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        loop {
            let m = self.r.read()?;
            out.push(m.data().to_vec());
            if !m.more() {
                return Some(out);
            }
        }
    }

    /// Reads every whole message queued.
    pub(super) fn recv_all(&mut self) -> Vec<Vec<Vec<u8>>> {
        std::iter::from_fn(|| self.recv()).collect()
    }

    /// Publishes handshake properties (as the engine does), with an optional "Identity".
    pub(super) fn handshake(&self, identity: Option<&[u8]>) -> Arc<Metadata> {
        let mut md = Metadata::new();
        md.insert("Socket-Type", b"DEALER");
        if let Some(id) = identity {
            md.insert("Identity", id);
        }
        let md = Arc::new(md);
        self.w.set_peer(md.clone());
        md
    }
}

/// Creates a pipe pair (pattern-to-peer HWM `out_hwm`, peer-to-pattern unbounded), inserts it
/// and attaches it.
pub(crate) fn connect(p: &mut dyn Pattern, t: &mut PipeTable, out_hwm: u64) -> (PipeId, Peer) {
    let (id, peer) = connect_detached(t, out_hwm);
    p.attach(id, t);
    (id, peer)
}

/// As [`connect`] without calling `attach`.
pub(crate) fn connect_detached(t: &mut PipeTable, out_hwm: u64) -> (PipeId, Peer) {
    let (to_peer_w, to_peer_r) = pipe(out_hwm);
    let (from_peer_w, from_peer_r) = pipe(0);
    let id = t.next_id();
    let target = Target {
        notify: recorder(),
        token: id.0,
    };
    from_peer_r.set_target(target.clone());
    to_peer_w.set_target(target);
    t.insert(id, PipeEntry::new(from_peer_r, to_peer_w));
    (
        id,
        Peer {
            w: from_peer_w,
            r: to_peer_r,
        },
    )
}

/// Runs the handshake of `id`'s peer through the socket's path: metadata, then `peer_ready`.
pub(crate) fn ready(
    p: &mut dyn Pattern,
    t: &mut PipeTable,
    id: PipeId,
    peer: &Peer,
    identity: Option<&[u8]>,
) {
    let md = peer.handshake(identity);
    t.get_mut(id).unwrap().peer = Some(md);
    p.peer_ready(id, t);
}

/// Removes a pipe as the socket does: `terminated`, then out of the table.
pub(crate) fn detach(p: &mut dyn Pattern, t: &mut PipeTable, id: PipeId) {
    p.terminated(id, t);
    t.remove(id);
}

/// A frame with the given MORE flag.
pub(crate) fn frame(data: &[u8], more: bool) -> Msg {
    let mut m = Msg::copy_from(data);
    m.set_more(more);
    m
}

/// Sends a whole message through the pattern (after pending activations); the first error
/// stops it.
pub(crate) fn send(p: &mut dyn Pattern, t: &mut PipeTable, parts: &[&[u8]]) -> Result<()> {
    pump(p, t);
    for (i, d) in parts.iter().enumerate() {
        p.send(frame(d, i + 1 < parts.len()), t)
            .map_err(|(_, e)| e)?;
    }
    Ok(())
}

/// Receives a whole message from the pattern (after pending activations).
pub(crate) fn recv(p: &mut dyn Pattern, t: &mut PipeTable) -> Result<Vec<Vec<u8>>> {
    pump(p, t);
    let mut out = Vec::new();
    loop {
        let m = p.recv(t)?;
        out.push(m.data().to_vec());
        if !m.more() {
            return Ok(out);
        }
    }
}

/// `vec![b"a".to_vec(), ...]` from byte-string literals.
pub(crate) fn parts(ps: &[&[u8]]) -> Vec<Vec<u8>> {
    ps.iter().map(|p| p.to_vec()).collect()
}

/// `has_in` after pending activations.
pub(crate) fn has_in(p: &mut dyn Pattern, t: &mut PipeTable) -> bool {
    pump(p, t);
    p.has_in(t)
}

/// `has_out` after pending activations.
pub(crate) fn has_out(p: &mut dyn Pattern, t: &mut PipeTable) -> bool {
    pump(p, t);
    p.has_out(t)
}

/// Asserts a call failed with `e`.
pub(crate) fn assert_err<T: std::fmt::Debug>(r: Result<T>, e: Error) {
    assert_eq!(r.unwrap_err(), e);
}
