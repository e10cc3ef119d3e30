//! PUB and XPUB: distribution to the subscribers whose subscriptions match (libzmq `xpub_t`,
//! `pub_t`).
//!
//! Subscriptions arrive on each pipe as messages `0x01 topic` (subscribe) and `0x00 topic`
//! (cancel); they are read as soon as a pipe is activated and kept in an [`MTrie`] (topic → pipes).
//! A message goes to every pipe subscribed to a prefix of its first frame (the empty topic matches
//! all; `ZMQ_INVERT_MATCHING` sends to the others instead). A pipe at its HWM misses the message,
//! all of it; with `ZMQ_XPUB_NODROP` the send fails with `Again` instead while any matching pipe is
//! full.
//!
//! XPUB hands subscriptions to the user: `recv` yields `0x01 topic` for a topic nobody had
//! subscribed to before and `0x00 topic` when a cancel leaves a topic without subscribers (or was
//! for a topic the pipe never had); `ZMQ_XPUB_VERBOSE` passes every subscribe, `ZMQ_XPUB_VERBOSER`
//! every cancel too. When a pipe goes, its topics are removed and XPUB reports a cancel for each
//! topic left without subscribers (each of its topics when verboser). Other messages from
//! subscribers (XSUB sends them) are passed to the user as they are. `ZMQ_XPUB_MANUAL` leaves the
//! table to the user: every subscribe/cancel is reported and `set_option(SUBSCRIBE/UNSUBSCRIBE)`
//! applies a topic to the pipe the last reported one came from. `ZMQ_XPUB_WELCOME_MSG` is written
//! to each new pipe. PUB reads subscriptions the same way but reports nothing; its `recv` fails with
//! `NotSup`.

use std::collections::VecDeque;

use super::dist::Dist;
use super::trie::{MTrie, RmResult};
use super::{opt_bool, Pattern, PipeId, PipeTable};
use crate::error::{Error, Result};
use crate::msg::Msg;
use crate::options as opt;

struct Pending {
    msg: Msg,
    /// For subscriptions in manual mode: the pipe it came from (None once generated locally).
    last_pipe: Option<Option<PipeId>>,
}

/// The PUB and XPUB patterns.
pub struct XPub {
    is_pub: bool,
    subscriptions: MTrie,
    manual_subscriptions: MTrie,
    dist: Dist,
    verbose_subs: bool,
    verbose_unsubs: bool,
    more_send: bool,
    more_recv: bool,
    process_subscribe: bool,
    only_first_subscribe: bool,
    lossy: bool,
    manual: bool,
    send_last_pipe: bool,
    invert: bool,
    last_pipe: Option<PipeId>,
    welcome: Option<Msg>,
    pending: VecDeque<Pending>,
}

impl XPub {
    fn new(is_pub: bool) -> XPub {
        XPub {
            is_pub,
            subscriptions: MTrie::new(),
            manual_subscriptions: MTrie::new(),
            dist: Dist::new(),
            verbose_subs: false,
            verbose_unsubs: false,
            more_send: false,
            more_recv: false,
            process_subscribe: false,
            only_first_subscribe: false,
            lossy: true,
            manual: false,
            send_last_pipe: false,
            invert: false,
            last_pipe: None,
            welcome: None,
            pending: VecDeque::new(),
        }
    }

    /// A PUB socket's pattern.
    pub fn new_pub() -> XPub {
        XPub::new(true)
    }

    /// An XPUB socket's pattern.
    pub fn new_xpub() -> XPub {
        XPub::new(false)
    }

    /// Number of distinct subscribed topics (`ZMQ_TOPICS_COUNT`).
    pub fn topics_count(&self) -> usize {
        self.subscriptions.num_prefixes()
    }

    /// Reads and applies everything queued on pipe `id` (libzmq `xread_activated`).
    fn read_subscriptions(&mut self, id: PipeId, pipes: &mut PipeTable) {
        while let Some(mut msg) = pipes.reader(id).and_then(|r| r.read()) {
            let first_part = !self.more_recv;
            self.more_recv = msg.more();
            let mut kind = None;
            if first_part || self.process_subscribe {
                kind = match msg.data().first() {
                    Some(0) => Some(false),
                    Some(1) => Some(true),
                    _ => None,
                };
            }
            if first_part {
                self.process_subscribe = !self.only_first_subscribe || kind.is_some();
            }
            match kind {
                Some(subscribe) => {
                    let topic = &msg.data()[1..];
                    let mut notify = false;
                    if self.manual {
                        if subscribe {
                            self.manual_subscriptions.add(topic, id);
                        } else {
                            self.manual_subscriptions.rm(topic, id);
                        }
                    } else if subscribe {
                        notify = self.subscriptions.add(topic, id) || self.verbose_subs;
                    } else {
                        notify = self.subscriptions.rm(topic, id) != RmResult::ValuesRemain
                            || self.verbose_unsubs;
                    }
                    if self.manual || (!self.is_pub && notify) {
                        msg.set_more(false);
                        msg.set_command(false);
                        let last_pipe = if self.manual { Some(Some(id)) } else { None };
                        self.pending.push_back(Pending { msg, last_pipe });
                    }
                }
                None if !self.is_pub => self.pending.push_back(Pending {
                    msg,
                    last_pipe: None,
                }),
                None => {}
            }
        }
    }

    fn queue_unsubscription(
        pending: &mut VecDeque<Pending>,
        is_pub: bool,
        manual: bool,
        topic: &[u8],
    ) {
        if is_pub {
            return;
        }
        let mut data = Vec::with_capacity(topic.len() + 1);
        data.push(0);
        data.extend_from_slice(topic);
        let last_pipe = if manual { Some(None) } else { None };
        pending.push_back(Pending {
            msg: Msg::from_vec(data),
            last_pipe,
        });
    }
}

impl Pattern for XPub {
    fn topics_count(&self) -> Option<usize> {
        Some(XPub::topics_count(self))
    }

    fn attach(&mut self, id: PipeId, pipes: &mut PipeTable) {
        self.dist.attach(id);
        if let Some(w) = &self.welcome {
            if let Some(writer) = pipes.writer(id) {
                let _ = writer.try_write(w.clone());
            }
        }
        self.read_subscriptions(id, pipes);
    }

    fn terminated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        let (pending, is_pub) = (&mut self.pending, self.is_pub);
        if self.manual {
            let mut generated = false;
            self.manual_subscriptions.rm_pipe(id, false, |topic| {
                generated = true;
                XPub::queue_unsubscription(pending, is_pub, true, topic);
            });
            self.subscriptions.rm_pipe(id, false, |_| {});
            if generated && !is_pub {
                self.last_pipe = None;
            }
            if self.last_pipe == Some(id) {
                self.last_pipe = None;
            }
        } else {
            self.subscriptions
                .rm_pipe(id, !self.verbose_unsubs, |topic| {
                    XPub::queue_unsubscription(pending, is_pub, false, topic);
                });
        }
        self.dist.terminated(id);
    }

    fn read_activated(&mut self, id: PipeId, pipes: &mut PipeTable) {
        self.read_subscriptions(id, pipes);
    }

    fn write_activated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.dist.activated(id);
    }

    fn send(&mut self, msg: Msg, pipes: &mut PipeTable) -> std::result::Result<(), (Msg, Error)> {
        let more = msg.more();
        if !self.more_send {
            self.dist.unmatch();
            let dist = &mut self.dist;
            if self.manual && self.send_last_pipe && self.last_pipe.is_some() {
                let last = self.last_pipe.take();
                self.subscriptions.match_pipes(msg.data(), |p| {
                    if Some(p) == last {
                        dist.match_pipe(p)
                    }
                });
            } else {
                self.subscriptions
                    .match_pipes(msg.data(), |p| dist.match_pipe(p));
            }
            if self.invert {
                self.dist.reverse_match();
            }
        }
        if !self.lossy && !self.dist.check_hwm(pipes) {
            return Err((msg, Error::Again));
        }
        self.dist.send_to_matching(msg, pipes);
        if !more {
            self.dist.unmatch();
        }
        self.more_send = more;
        Ok(())
    }

    fn recv(&mut self, _pipes: &mut PipeTable) -> Result<Msg> {
        if self.is_pub {
            return Err(Error::NotSup);
        }
        let p = self.pending.pop_front().ok_or(Error::Again)?;
        if self.manual {
            if let Some(last) = p.last_pipe {
                self.last_pipe = last.filter(|id| self.dist.has_pipe(*id));
            }
        }
        Ok(p.msg)
    }

    fn has_in(&mut self, _pipes: &mut PipeTable) -> bool {
        !self.is_pub && !self.pending.is_empty()
    }

    fn has_out(&mut self, _pipes: &mut PipeTable) -> bool {
        true
    }

    fn set_option(&mut self, option: i32, value: &[u8], _pipes: &mut PipeTable) -> Result<()> {
        match option {
            opt::XPUB_VERBOSE => {
                self.verbose_subs = opt_bool(value)?;
                self.verbose_unsubs = false;
            }
            opt::XPUB_VERBOSER => {
                self.verbose_subs = opt_bool(value)?;
                self.verbose_unsubs = self.verbose_subs;
            }
            opt::XPUB_MANUAL_LAST_VALUE => {
                self.manual = opt_bool(value)?;
                self.send_last_pipe = self.manual;
            }
            opt::XPUB_NODROP => self.lossy = !opt_bool(value)?,
            opt::XPUB_MANUAL => self.manual = opt_bool(value)?,
            opt::ONLY_FIRST_SUBSCRIBE => self.only_first_subscribe = opt_bool(value)?,
            opt::INVERT_MATCHING => self.invert = opt_bool(value)?,
            opt::XPUB_WELCOME_MSG => {
                self.welcome = (!value.is_empty()).then(|| Msg::copy_from(value))
            }
            opt::SUBSCRIBE | opt::UNSUBSCRIBE => {
                // libzmq accepts these on (X)PUB only in manual mode.
                if !self.manual {
                    return Err(Error::Inval);
                }
                if let Some(last) = self.last_pipe {
                    if option == opt::SUBSCRIBE {
                        self.subscriptions.add(value, last);
                    } else {
                        self.subscriptions.rm(value, last);
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    fn on(p: &mut dyn Pattern, t: &mut PipeTable, o: i32) {
        p.set_option(o, &1i32.to_ne_bytes(), t).unwrap();
    }

    fn sub(p: &mut XPub, t: &mut PipeTable, id: PipeId, peer: &mut Peer, topic: &[u8]) {
        peer.send(&[&[&[1u8][..], topic].concat()]);
        p.read_activated(id, t);
    }

    fn unsub(p: &mut XPub, t: &mut PipeTable, id: PipeId, peer: &mut Peer, topic: &[u8]) {
        peer.send(&[&[&[0u8][..], topic].concat()]);
        p.read_activated(id, t);
    }

    fn notes(p: &mut XPub, t: &mut PipeTable) -> Vec<Vec<u8>> {
        std::iter::from_fn(|| p.recv(t).ok().map(|m| m.data().to_vec())).collect()
    }

    #[test]
    fn prefix_filtering_with_empty_and_overlapping_topics() {
        let mut p = XPub::new_pub();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut p, &mut t, 0);
        let (b, mut pb) = connect(&mut p, &mut t, 0);
        let (_c, mut pc) = connect(&mut p, &mut t, 0);
        sub(&mut p, &mut t, a, &mut pa, b"");
        sub(&mut p, &mut t, b, &mut pb, b"ab");
        sub(&mut p, &mut t, b, &mut pb, b"a");
        send(&mut p, &mut t, &[b"abc", b"tail"]).unwrap();
        send(&mut p, &mut t, &[b"b"]).unwrap();
        send(&mut p, &mut t, &[b""]).unwrap();
        assert_eq!(
            pa.recv_all(),
            vec![parts(&[b"abc", b"tail"]), parts(&[b"b"]), parts(&[b""])]
        );
        assert_eq!(
            pb.recv_all(),
            vec![parts(&[b"abc", b"tail"])],
            "overlapping topics deliver once"
        );
        assert!(pc.recv().is_none());
        assert_err(recv(&mut p, &mut t), Error::NotSup);
        assert!(!has_in(&mut p, &mut t));
        unsub(&mut p, &mut t, b, &mut pb, b"a");
        send(&mut p, &mut t, &[b"ax"]).unwrap();
        send(&mut p, &mut t, &[b"abx"]).unwrap();
        assert_eq!(pb.recv_all(), vec![parts(&[b"abx"])]);
    }

    #[test]
    fn hwm_drops_whole_messages_per_pipe_or_again_with_nodrop() {
        let mut p = XPub::new_xpub();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut p, &mut t, 1);
        let (b, mut pb) = connect(&mut p, &mut t, 0);
        sub(&mut p, &mut t, a, &mut pa, b"");
        sub(&mut p, &mut t, b, &mut pb, b"");
        send(&mut p, &mut t, &[b"1", b"1b"]).unwrap();
        send(&mut p, &mut t, &[b"2", b"2b"]).unwrap();
        send(&mut p, &mut t, &[b"3"]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"1", b"1b"])]);
        assert_eq!(
            pb.recv_all(),
            vec![parts(&[b"1", b"1b"]), parts(&[b"2", b"2b"]), parts(&[b"3"])]
        );
        // `a` was deactivated when full: it misses messages until its write activation.
        p.send(frame(b"3b", false), &mut t).unwrap();
        assert!(pa.recv().is_none());
        send(&mut p, &mut t, &[b"4"]).unwrap();
        pb.recv_all();
        on(&mut p, &mut t, opt::XPUB_NODROP);
        let (m, e) = p.send(frame(b"5", false), &mut t).unwrap_err();
        assert_eq!(e, Error::Again);
        assert!(
            pb.recv().is_none(),
            "nothing goes out while a matching pipe is full"
        );
        assert_eq!(pa.recv_all(), vec![parts(&[b"4"])]);
        p.send(m, &mut t).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"5"])]);
        assert_eq!(pb.recv_all(), vec![parts(&[b"5"])]);
    }

    #[test]
    fn pipe_joining_mid_multipart_gets_next_message_only() {
        let mut p = XPub::new_pub();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut p, &mut t, 0);
        sub(&mut p, &mut t, a, &mut pa, b"");
        p.send(frame(b"1", true), &mut t).unwrap();
        let (b, mut pb) = connect(&mut p, &mut t, 0);
        sub(&mut p, &mut t, b, &mut pb, b"");
        p.send(frame(b"2", false), &mut t).unwrap();
        send(&mut p, &mut t, &[b"3"]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"1", b"2"]), parts(&[b"3"])]);
        assert_eq!(pb.recv_all(), vec![parts(&[b"3"])]);
    }

    #[test]
    fn xpub_reports_new_subscriptions_only_unless_verbose() {
        let mut p = XPub::new_xpub();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut p, &mut t, 0);
        let (b, mut pb) = connect(&mut p, &mut t, 0);
        sub(&mut p, &mut t, a, &mut pa, b"t");
        sub(&mut p, &mut t, b, &mut pb, b"t");
        sub(&mut p, &mut t, a, &mut pa, b"t");
        assert_eq!(notes(&mut p, &mut t), vec![b"\x01t".to_vec()]);
        unsub(&mut p, &mut t, a, &mut pa, b"t");
        assert!(notes(&mut p, &mut t).is_empty(), "b still subscribes");
        unsub(&mut p, &mut t, b, &mut pb, b"t");
        assert_eq!(notes(&mut p, &mut t), vec![b"\x00t".to_vec()]);
        unsub(&mut p, &mut t, b, &mut pb, b"never");
        assert_eq!(
            notes(&mut p, &mut t),
            vec![b"\x00never".to_vec()],
            "libzmq reports unknown cancels"
        );
        on(&mut p, &mut t, opt::XPUB_VERBOSE);
        sub(&mut p, &mut t, a, &mut pa, b"v");
        sub(&mut p, &mut t, b, &mut pb, b"v");
        unsub(&mut p, &mut t, a, &mut pa, b"v");
        assert_eq!(
            notes(&mut p, &mut t),
            vec![b"\x01v".to_vec(), b"\x01v".to_vec()]
        );
        on(&mut p, &mut t, opt::XPUB_VERBOSER);
        unsub(&mut p, &mut t, b, &mut pb, b"v");
        sub(&mut p, &mut t, a, &mut pa, b"w");
        sub(&mut p, &mut t, b, &mut pb, b"w");
        unsub(&mut p, &mut t, a, &mut pa, b"w");
        assert_eq!(
            notes(&mut p, &mut t),
            vec![
                b"\x00v".to_vec(),
                b"\x01w".to_vec(),
                b"\x01w".to_vec(),
                b"\x00w".to_vec()
            ]
        );
    }

    #[test]
    fn terminated_pipe_cancels_orphaned_topics() {
        let mut p = XPub::new_xpub();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut p, &mut t, 0);
        let (b, mut pb) = connect(&mut p, &mut t, 0);
        sub(&mut p, &mut t, a, &mut pa, b"shared");
        sub(&mut p, &mut t, b, &mut pb, b"shared");
        sub(&mut p, &mut t, a, &mut pa, b"b-only");
        sub(&mut p, &mut t, a, &mut pa, b"a-only");
        notes(&mut p, &mut t);
        detach(&mut p, &mut t, a);
        assert_eq!(
            notes(&mut p, &mut t),
            vec![b"\x00a-only".to_vec(), b"\x00b-only".to_vec()]
        );
        send(&mut p, &mut t, &[b"shared!"]).unwrap();
        assert_eq!(pb.recv_all(), vec![parts(&[b"shared!"])]);
        assert_eq!(p.topics_count(), 1);
        on(&mut p, &mut t, opt::XPUB_VERBOSER);
        detach(&mut p, &mut t, b);
        assert_eq!(notes(&mut p, &mut t), vec![b"\x00shared".to_vec()]);
    }

    #[test]
    fn verboser_reports_every_topic_of_a_terminated_pipe() {
        let mut p = XPub::new_xpub();
        let mut t = PipeTable::new();
        on(&mut p, &mut t, opt::XPUB_VERBOSER);
        let (a, mut pa) = connect(&mut p, &mut t, 0);
        let (b, mut pb) = connect(&mut p, &mut t, 0);
        sub(&mut p, &mut t, a, &mut pa, b"x");
        sub(&mut p, &mut t, b, &mut pb, b"x");
        notes(&mut p, &mut t);
        detach(&mut p, &mut t, a);
        assert_eq!(notes(&mut p, &mut t), vec![b"\x00x".to_vec()]);
    }

    #[test]
    fn manual_mode_applies_user_subscriptions_to_last_pipe() {
        let mut p = XPub::new_xpub();
        let mut t = PipeTable::new();
        on(&mut p, &mut t, opt::XPUB_MANUAL);
        let (a, mut pa) = connect(&mut p, &mut t, 0);
        let (b, mut pb) = connect(&mut p, &mut t, 0);
        sub(&mut p, &mut t, a, &mut pa, b"req");
        sub(&mut p, &mut t, b, &mut pb, b"req");
        send(&mut p, &mut t, &[b"req: nothing applied yet"]).unwrap();
        assert!(pa.recv().is_none() && pb.recv().is_none());
        assert_eq!(p.recv(&mut t).unwrap().data(), b"\x01req");
        p.set_option(opt::SUBSCRIBE, b"granted", &mut t).unwrap();
        assert_eq!(p.recv(&mut t).unwrap().data(), b"\x01req");
        p.set_option(opt::SUBSCRIBE, b"other", &mut t).unwrap();
        send(&mut p, &mut t, &[b"granted!"]).unwrap();
        send(&mut p, &mut t, &[b"other!"]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"granted!"])]);
        assert_eq!(pb.recv_all(), vec![parts(&[b"other!"])]);
        p.set_option(opt::UNSUBSCRIBE, b"other", &mut t).unwrap();
        send(&mut p, &mut t, &[b"other!"]).unwrap();
        assert!(pb.recv().is_none());
        // Termination reports the pipe's own (manual) subscriptions as cancels.
        detach(&mut p, &mut t, a);
        assert_eq!(notes(&mut p, &mut t), vec![b"\x00req".to_vec()]);
        assert_eq!(p.set_option(opt::SUBSCRIBE, b"nowhere", &mut t), Ok(()));
        let mut x = XPub::new_xpub();
        assert_eq!(
            x.set_option(opt::SUBSCRIBE, b"t", &mut t),
            Err(Error::Inval)
        );
    }

    #[test]
    fn welcome_message_and_upstream_user_messages() {
        let mut p = XPub::new_xpub();
        let mut t = PipeTable::new();
        p.set_option(opt::XPUB_WELCOME_MSG, b"welcome", &mut t)
            .unwrap();
        let (a, mut pa) = connect(&mut p, &mut t, 0);
        assert_eq!(pa.recv_all(), vec![parts(&[b"welcome"])]);
        pa.send(&[b"user", b"data"]);
        p.read_activated(a, &mut t);
        assert_eq!(recv(&mut p, &mut t).unwrap(), parts(&[b"user", b"data"]));
        p.set_option(opt::XPUB_WELCOME_MSG, b"", &mut t).unwrap();
        let (_b, mut pb) = connect(&mut p, &mut t, 0);
        assert!(pb.recv().is_none());
    }

    #[test]
    fn invert_matching_sends_to_non_matching_pipes() {
        let mut p = XPub::new_pub();
        let mut t = PipeTable::new();
        on(&mut p, &mut t, opt::INVERT_MATCHING);
        let (a, mut pa) = connect(&mut p, &mut t, 0);
        let (_b, mut pb) = connect(&mut p, &mut t, 0);
        sub(&mut p, &mut t, a, &mut pa, b"x");
        send(&mut p, &mut t, &[b"xyz"]).unwrap();
        send(&mut p, &mut t, &[b"abc"]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"abc"])]);
        assert_eq!(pb.recv_all(), vec![parts(&[b"xyz"]), parts(&[b"abc"])]);
    }

    #[test]
    fn subscriptions_queued_before_attach_are_read_on_attach() {
        let mut p = XPub::new_xpub();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect_detached(&mut t, 0);
        pa.send(&[b"\x01early"]);
        p.attach(a, &mut t);
        assert_eq!(notes(&mut p, &mut t), vec![b"\x01early".to_vec()]);
        send(&mut p, &mut t, &[b"early bird"]).unwrap();
        assert_eq!(pa.recv_all().len(), 1);
    }

    #[test]
    fn only_first_subscribe_treats_later_frames_as_data() {
        let mut p = XPub::new_xpub();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut p, &mut t, 0);
        pa.send(&[b"\x01one", b"\x01two"]);
        p.read_activated(a, &mut t);
        assert_eq!(
            notes(&mut p, &mut t),
            vec![b"\x01one".to_vec(), b"\x01two".to_vec()]
        );
        on(&mut p, &mut t, opt::ONLY_FIRST_SUBSCRIBE);
        pa.send(&[b"data", b"\x01three"]);
        p.read_activated(a, &mut t);
        assert_eq!(
            recv(&mut p, &mut t).unwrap(),
            parts(&[b"data", b"\x01three"])
        );
        assert_eq!(p.topics_count(), 2);
    }
}
