//! DISH: joins groups, receive only (libzmq 4.3.5 `dish_t`, draft).
//!
//! `join`/`leave` keep the set of groups (joining a group twice, or leaving one not joined, is
//! `EINVAL`) and send a `JOIN`/`LEAVE` command frame (`\x04JOIN` + group, libzmq
//! `dish_session_t`'s form) to every pipe; a pipe at its HWM misses it, as in libzmq. A new pipe
//! gets every joined group, and so does a pipe whose peer completes a later handshake (a
//! reconnect lost what was sent before). A UDP endpoint drops these commands: over UDP the DISH
//! filters alone.
//!
//! Messages arrive as two frames, the group (MORE) and the body (see [`super::radio`]); `recv`
//! returns the body with [`Msg::group`] set, and only for a joined group (others are dropped
//! here too, as libzmq's `xxrecv`). Two frames that are not that form (no MORE on the group, a
//! group of more than 255 bytes or with a NUL, more than one body frame) are a protocol error
//! of the peer, as libzmq's session fails with `EFAULT`: the message is dropped and the pipe
//! closed. `send` is `ENOTSUP`.
//!
//! The pipes, their reconnects and the message read ahead are [`super::subscriber`]'s, the
//! skeleton SUB shares.

use std::collections::HashSet;

use super::fq::Fq;
use super::subscriber::Subscriber;
use super::{Pattern, PipeId, PipeTable};
use crate::error::{Error, Result};
use crate::msg::{Msg, GROUP_MAX_LENGTH};
use crate::zmtp::join_leave_body;

/// The DISH pattern.
pub(crate) struct Dish {
    sub: Subscriber,
    subscriptions: HashSet<Vec<u8>>,
}

/// A `JOIN` (or `LEAVE`) command frame for `group`.
fn command(join: bool, group: &[u8]) -> Msg {
    let mut m = Msg::from_vec(join_leave_body(join, group));
    m.set_command(true);
    m
}

/// The next message of a joined group (libzmq `xxrecv`).
fn next(fq: &mut Fq, groups: &HashSet<Vec<u8>>, pipes: &mut PipeTable) -> Result<Msg> {
    loop {
        let (group, id) = fq.recv(pipes)?;
        let ok_group = group.more() && group.len() <= GROUP_MAX_LENGTH;
        let body = if group.more() {
            // The rest of a message is there once its first frame is.
            match fq.recv(pipes) {
                Ok((b, _)) => Some(b),
                Err(_) => None,
            }
        } else {
            None
        };
        let Some(mut body) = body.filter(|_| ok_group) else {
            malformed(id, pipes);
            continue;
        };
        if body.more() {
            malformed(id, pipes);
            continue;
        }
        if !groups.contains(group.data()) {
            continue;
        }
        if body.set_group(group.data()).is_err() {
            // A NUL inside the group: no C caller could read it.
            malformed(id, pipes);
            continue;
        }
        return Ok(body);
    }
}

/// The peer on `id` broke the RADIO wire form: skip the rest of its message, close it.
fn malformed(id: PipeId, pipes: &mut PipeTable) {
    if let Some(r) = pipes.reader(id) {
        if r.in_multipart() {
            while r.read().is_some_and(|m| m.more()) {}
        }
    }
    pipes.kill(id);
}

impl Dish {
    /// A DISH that joined nothing.
    pub(crate) fn new() -> Dish {
        Dish {
            sub: Subscriber::new(),
            subscriptions: HashSet::new(),
        }
    }

    /// Writes a `JOIN` for every joined group to pipe `id` (dropped where the pipe is full).
    fn send_subscriptions(&mut self, id: PipeId, pipes: &mut PipeTable) {
        let Some(w) = pipes.writer(id) else { return };
        for g in &self.subscriptions {
            let _ = w.try_write(command(true, g));
        }
    }
}

impl Pattern for Dish {
    fn attach(&mut self, id: PipeId, pipes: &mut PipeTable) {
        self.sub.attach(id);
        self.send_subscriptions(id, pipes);
    }

    fn peer_ready(&mut self, id: PipeId, pipes: &mut PipeTable) {
        if self.sub.reconnected(id) {
            self.send_subscriptions(id, pipes);
        }
    }

    fn terminated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.sub.terminated(id);
    }

    fn read_activated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.sub.read_activated(id);
    }

    fn write_activated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.sub.write_activated(id);
    }

    fn send(&mut self, msg: Msg, _pipes: &mut PipeTable) -> std::result::Result<(), (Msg, Error)> {
        Err((msg, Error::NotSup))
    }

    fn recv(&mut self, pipes: &mut PipeTable) -> Result<Msg> {
        let groups = &self.subscriptions;
        self.sub.recv(pipes, |fq, pipes| next(fq, groups, pipes))
    }

    fn has_in(&mut self, pipes: &mut PipeTable) -> bool {
        let groups = &self.subscriptions;
        self.sub.has_in(pipes, |fq, pipes| next(fq, groups, pipes))
    }

    fn has_out(&mut self, _pipes: &mut PipeTable) -> bool {
        true
    }

    fn join(&mut self, group: &[u8], pipes: &mut PipeTable) -> Result<()> {
        if group.len() > GROUP_MAX_LENGTH || !self.subscriptions.insert(group.to_vec()) {
            return Err(Error::Inval);
        }
        self.sub.send_upstream(command(true, group), pipes);
        Ok(())
    }

    fn leave(&mut self, group: &[u8], pipes: &mut PipeTable) -> Result<()> {
        if group.len() > GROUP_MAX_LENGTH || !self.subscriptions.remove(group) {
            return Err(Error::Inval);
        }
        self.sub.send_upstream(command(false, group), pipes);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    fn commands(peer: &mut Peer) -> Vec<(bool, Vec<u8>)> {
        std::iter::from_fn(|| peer.r.read())
            .map(|m| {
                assert!(m.is_command() && !m.more());
                let (j, g) = crate::zmtp::parse_join_leave(m.data()).unwrap();
                (j, g.to_vec())
            })
            .collect()
    }

    #[test]
    fn join_and_leave_send_commands_and_check_the_set() {
        let mut p = Dish::new();
        let mut t = PipeTable::new();
        let (_a, mut pa) = connect(&mut p, &mut t, 0);
        p.join(b"weather", &mut t).unwrap();
        assert_eq!(p.join(b"weather", &mut t), Err(Error::Inval));
        assert_eq!(p.leave(b"news", &mut t), Err(Error::Inval));
        assert_eq!(p.join(&[b'x'; 256], &mut t), Err(Error::Inval));
        p.join(b"", &mut t).unwrap();
        p.leave(b"weather", &mut t).unwrap();
        assert_eq!(
            commands(&mut pa),
            vec![
                (true, b"weather".to_vec()),
                (true, b"".to_vec()),
                (false, b"weather".to_vec())
            ]
        );
        // The wire body is libzmq's: "\x04JOIN" + group.
        assert_eq!(command(true, b"g").data(), b"\x04JOINg");
        assert_eq!(command(false, b"g").data(), b"\x05LEAVEg");
        assert_err(send(&mut p, &mut t, &[b"x"]), Error::NotSup);
    }

    #[test]
    fn new_pipes_and_reconnects_get_the_joined_groups() {
        let mut p = Dish::new();
        let mut t = PipeTable::new();
        p.join(b"g", &mut t).unwrap();
        let (a, mut pa) = connect(&mut p, &mut t, 0);
        assert_eq!(commands(&mut pa), vec![(true, b"g".to_vec())]);
        ready(&mut p, &mut t, a, &pa, None);
        assert!(
            commands(&mut pa).is_empty(),
            "first handshake: nothing more"
        );
        ready(&mut p, &mut t, a, &pa, None);
        assert_eq!(commands(&mut pa), vec![(true, b"g".to_vec())]);
    }

    #[test]
    fn only_joined_groups_are_received_with_their_group() {
        let mut p = Dish::new();
        let mut t = PipeTable::new();
        let (_a, mut pa) = connect(&mut p, &mut t, 0);
        p.join(b"weather", &mut t).unwrap();
        pa.send(&[b"news", b"n1"]);
        pa.send(&[b"weather", b"w1"]);
        assert!(has_in(&mut p, &mut t));
        let m = p.recv(&mut t).unwrap();
        assert_eq!(
            (m.data(), m.group(), m.more()),
            (&b"w1"[..], &b"weather"[..], false)
        );
        assert_err(recv(&mut p, &mut t), Error::Again);
        assert!(t.take_kills().is_empty());
    }

    #[test]
    fn a_peer_breaking_the_wire_form_is_closed() {
        for bad in [
            &[&b"no-more"[..]][..],
            &[b"g", b"body", b"extra"],
            &[&[b'g'; 256][..], b"body"],
            &[b"g\0x", b"body"],
        ] {
            let mut p = Dish::new();
            let mut t = PipeTable::new();
            p.join(b"g", &mut t).unwrap();
            p.join(b"g\0x", &mut t).unwrap();
            p.join(&[b'g'; 255], &mut t).unwrap();
            let (a, mut pa) = connect(&mut p, &mut t, 0);
            pa.send(bad);
            pa.send(&[b"g", b"fine"]);
            pump(&mut p, &mut t);
            // The bad message is dropped; the pipe is asked to close.
            let r = p.recv(&mut t);
            assert_eq!(t.take_kills(), vec![a], "{bad:?}");
            if let Ok(m) = r {
                assert_eq!(m.data(), b"fine");
            }
        }
    }
}
