//! RADIO: group fan-out, send only (libzmq 4.3.5 `radio_t`, draft).
//!
//! Every message carries a group ([`Msg::group`], empty when none set); it goes to each pipe
//! whose DISH joined that group, and to every UDP pipe (a UDP DISH filters for itself). On the
//! pipe a message is two frames, the group (MORE) and the body: the form libzmq's
//! `radio_session_t` writes to ZMTP, so a tcp/ipc engine sends the frames as they are and an
//! inproc DISH reads the same. A DISH's joins come back on the pipe as `JOIN`/`LEAVE` command
//! frames (`\x04JOIN` + group), read whenever the pipe is readable.
//!
//! Multipart messages are refused (`EINVAL`). Lossy by default: a DISH at its HWM misses the
//! message; with `ZMQ_XPUB_NODROP` the send waits (`EAGAIN`) while any matching pipe is full.
//! `recv` is `ENOTSUP`.

use std::collections::HashMap;

use super::dist::Dist;
use super::{opt_bool, Pattern, PipeId, PipeTable};
use crate::error::{Error, Result};
use crate::msg::Msg;
use crate::options as opt;
use crate::zmtp::parse_join_leave;

/// The RADIO pattern.
pub(crate) struct Radio {
    dist: Dist,
    /// Group -> the pipes that joined it (a pipe once per JOIN, as libzmq's multimap).
    subscriptions: HashMap<Vec<u8>, Vec<PipeId>>,
    /// UDP pipes: they get every group.
    udp: Vec<PipeId>,
    lossy: bool,
}

impl Radio {
    /// A RADIO with no DISH.
    pub(crate) fn new() -> Radio {
        Radio {
            dist: Dist::new(),
            subscriptions: HashMap::new(),
            udp: Vec::new(),
            lossy: true,
        }
    }

    fn forget(&mut self, id: PipeId) {
        self.subscriptions.retain(|_, ids| {
            ids.retain(|&p| p != id);
            !ids.is_empty()
        });
    }
}

impl Pattern for Radio {
    fn attach(&mut self, id: PipeId, pipes: &mut PipeTable) {
        self.dist.attach(id);
        let udp = pipes
            .get(id)
            .and_then(|e| e.endpoint.as_deref())
            .is_some_and(|ep| ep.starts_with("udp://"));
        if udp {
            self.udp.push(id);
        } else {
            self.read_activated(id, pipes);
        }
    }

    fn terminated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.forget(id);
        self.udp.retain(|&p| p != id);
        self.dist.terminated(id);
    }

    fn read_activated(&mut self, id: PipeId, pipes: &mut PipeTable) {
        let Some(r) = pipes.reader(id) else { return };
        while let Some(m) = r.read() {
            // Anything but a JOIN/LEAVE command is dropped, as libzmq does.
            let Some((join, group)) = m.is_command().then(|| parse_join_leave(m.data())).flatten()
            else {
                continue;
            };
            if join {
                self.subscriptions
                    .entry(group.to_vec())
                    .or_default()
                    .push(id);
            } else if let Some(ids) = self.subscriptions.get_mut(group) {
                if let Some(i) = ids.iter().position(|&p| p == id) {
                    ids.swap_remove(i);
                }
                if ids.is_empty() {
                    self.subscriptions.remove(group);
                }
            }
        }
    }

    fn write_activated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.dist.activated(id);
    }

    fn send(&mut self, msg: Msg, pipes: &mut PipeTable) -> std::result::Result<(), (Msg, Error)> {
        if msg.more() {
            return Err((msg, Error::Inval));
        }
        self.dist.unmatch();
        if let Some(ids) = self.subscriptions.get(msg.group()) {
            for &id in ids {
                self.dist.match_pipe(id);
            }
        }
        for &id in &self.udp {
            self.dist.match_pipe(id);
        }
        if !self.lossy && !self.dist.check_hwm(pipes) {
            return Err((msg, Error::Again));
        }
        let mut group = Msg::copy_from(msg.group());
        group.set_more(true);
        self.dist.send_to_matching(group, pipes);
        self.dist.send_to_matching(msg, pipes);
        Ok(())
    }

    fn recv(&mut self, _pipes: &mut PipeTable) -> Result<Msg> {
        Err(Error::NotSup)
    }

    fn has_in(&mut self, _pipes: &mut PipeTable) -> bool {
        false
    }

    fn has_out(&mut self, _pipes: &mut PipeTable) -> bool {
        true
    }

    fn set_option(&mut self, option: i32, value: &[u8], _pipes: &mut PipeTable) -> Result<()> {
        if option == opt::XPUB_NODROP {
            self.lossy = !opt_bool(value)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use crate::zmtp::join_leave_body;

    fn join(peer: &mut Peer, join: bool, group: &[u8]) {
        let mut m = Msg::from_vec(join_leave_body(join, group));
        m.set_command(true);
        peer.w.write(m);
    }

    fn grouped(group: &str, body: &[u8]) -> Msg {
        let mut m = Msg::copy_from(body);
        m.set_group(group).unwrap();
        m
    }

    #[test]
    fn messages_go_to_the_pipes_that_joined_their_group() {
        let mut p = Radio::new();
        let mut t = PipeTable::new();
        let (_a, mut pa) = connect(&mut p, &mut t, 0);
        let (_b, mut pb) = connect(&mut p, &mut t, 0);
        join(&mut pa, true, b"weather");
        join(&mut pb, true, b"news");
        join(&mut pb, true, b"weather");
        pump(&mut p, &mut t);
        p.send(grouped("weather", b"sunny"), &mut t).unwrap();
        p.send(grouped("news", b"none"), &mut t).unwrap();
        p.send(grouped("sports", b"x"), &mut t).unwrap();
        p.send(Msg::copy_from(b"no group"), &mut t).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"weather", b"sunny"])]);
        assert_eq!(
            pb.recv_all(),
            vec![parts(&[b"weather", b"sunny"]), parts(&[b"news", b"none"])]
        );
        join(&mut pb, false, b"weather");
        // Not a command: ignored.
        pb.send(&[b"\x04JOINnews"]);
        join(&mut pa, false, b"never-joined");
        pump(&mut p, &mut t);
        p.send(grouped("weather", b"rain"), &mut t).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"weather", b"rain"])]);
        assert!(pb.recv_all().is_empty());
    }

    #[test]
    fn udp_pipes_get_every_group_and_multipart_is_refused() {
        let mut p = Radio::new();
        let mut t = PipeTable::new();
        let (u, mut pu) = connect_detached(&mut t, 0);
        t.get_mut(u).unwrap().endpoint = Some("udp://127.0.0.1:5555".into());
        p.attach(u, &mut t);
        p.send(grouped("g", b"1"), &mut t).unwrap();
        assert_eq!(pu.recv_all(), vec![parts(&[b"g", b"1"])]);
        let mut m = grouped("g", b"2");
        m.set_more(true);
        assert_eq!(p.send(m, &mut t).map_err(|(_, e)| e), Err(Error::Inval));
        assert!(pu.recv_all().is_empty());
        assert_err(recv(&mut p, &mut t), Error::NotSup);
        assert!(!has_in(&mut p, &mut t));
        detach(&mut p, &mut t, u);
        p.send(grouped("g", b"3"), &mut t).unwrap();
    }

    #[test]
    fn lossy_by_default_and_nodrop_waits() {
        let mut p = Radio::new();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut p, &mut t, 1);
        join(&mut pa, true, b"g");
        pump(&mut p, &mut t);
        p.send(grouped("g", b"1"), &mut t).unwrap();
        // Full: dropped silently.
        p.send(grouped("g", b"2"), &mut t).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"g", b"1"])]);
        p.write_activated(a, &mut t);
        p.set_option(opt::XPUB_NODROP, &1i32.to_ne_bytes(), &mut t)
            .unwrap();
        p.send(grouped("g", b"3"), &mut t).unwrap();
        let r = p.send(grouped("g", b"4"), &mut t);
        let (back, e) = r.unwrap_err();
        assert_eq!((e, back.data()), (Error::Again, &b"4"[..]));
        // A group nobody joined never waits.
        p.send(grouped("other", b"5"), &mut t).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"g", b"3"])]);
        pump(&mut p, &mut t);
        p.send(grouped("g", b"4"), &mut t).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"g", b"4"])]);
    }

    #[test]
    fn a_terminated_pipe_loses_its_joins() {
        let mut p = Radio::new();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut p, &mut t, 0);
        join(&mut pa, true, b"g");
        pump(&mut p, &mut t);
        detach(&mut p, &mut t, a);
        assert!(p.subscriptions.is_empty());
        p.send(grouped("g", b"x"), &mut t).unwrap();
    }
}
