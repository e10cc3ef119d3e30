//! SUB and XSUB: fair-queued receiving, subscriptions sent upstream (libzmq `xsub_t`, `sub_t`).
//!
//! Subscriptions travel upstream as messages `0x01 topic` / `0x00 topic`, written to every pipe
//! (dropped for a pipe at its HWM, as libzmq). They are counted in a [`Trie`]: a cancel goes
//! upstream only when it removes the topic's last reference (or always, with the draft
//! `ZMQ_XSUB_VERBOSE_UNSUBSCRIBE`). Each new pipe gets every current topic once, and so does a
//! pipe whose peer completes a later handshake (a reconnect: libzmq's hiccup).
//!
//! SUB subscribes with `set_option(SUBSCRIBE/UNSUBSCRIBE, topic)`, cannot send, and delivers only
//! messages whose first frame starts with a subscribed topic (the empty topic matches all;
//! `ZMQ_INVERT_MATCHING` delivers the others instead); non-matching messages are dropped whole.
//! XSUB does not filter; what it sends goes upstream: `0x01`/`0x00` messages are (un)subscriptions
//! and are recorded, anything else is passed to the publishers as is (with the draft
//! `ZMQ_ONLY_FIRST_SUBSCRIBE`, frames after the first of a message that did not start with a
//! subscription are data too).
//!
//! The pipes, their reconnects and the message read ahead are [`super::subscriber`]'s, the
//! skeleton DISH shares.

use super::fq::Fq;
use super::subscriber::Subscriber;
use super::trie::Trie;
use super::{opt_bool, Pattern, PipeId, PipeTable};
use crate::error::{Error, Result};
use crate::msg::Msg;
use crate::options as opt;

/// What SUB delivers: messages whose first frame starts with a subscribed topic (or the others,
/// inverted). XSUB delivers everything.
struct Filter {
    is_sub: bool,
    subscriptions: Trie,
    invert: bool,
}

impl Filter {
    #[inline]
    fn matches(&self, m: &Msg) -> bool {
        !self.is_sub || (self.subscriptions.check(m.data()) ^ self.invert)
    }
}

/// The next message whose first frame `keep` accepts; the others are dropped whole.
#[inline]
fn next(fq: &mut Fq, pipes: &mut PipeTable, keep: impl Fn(&Msg) -> bool) -> Result<Msg> {
    loop {
        let (m, _) = fq.recv(pipes)?;
        if keep(&m) {
            return Ok(m);
        }
        skip_rest(fq, m, pipes);
    }
}

/// Drops the rest of a message whose first frame was `m`.
fn skip_rest(fq: &mut Fq, mut m: Msg, pipes: &mut PipeTable) {
    while m.more() {
        match fq.recv(pipes) {
            Ok((next, _)) => m = next,
            Err(_) => return,
        }
    }
}

/// The SUB and XSUB patterns.
pub(crate) struct XSub {
    sub: Subscriber,
    filter: Filter,
    verbose_unsubs: bool,
    more_send: bool,
    more_recv: bool,
    process_subscribe: bool,
    only_first_subscribe: bool,
    /// Pipes that reconnected while a multipart message was half-written to them.
    resend: Vec<PipeId>,
}

impl XSub {
    fn new(is_sub: bool) -> XSub {
        XSub {
            sub: Subscriber::new(),
            filter: Filter {
                is_sub,
                subscriptions: Trie::new(),
                invert: false,
            },
            verbose_unsubs: false,
            more_send: false,
            more_recv: false,
            process_subscribe: false,
            only_first_subscribe: false,
            resend: Vec::new(),
        }
    }

    /// A SUB socket's pattern.
    pub(crate) fn new_sub() -> XSub {
        XSub::new(true)
    }

    /// An XSUB socket's pattern.
    pub(crate) fn new_xsub() -> XSub {
        XSub::new(false)
    }

    /// Writes every current subscription to pipe `id` (dropped where the pipe is full).
    fn send_subscriptions(&mut self, id: PipeId, pipes: &mut PipeTable) {
        let Some(w) = pipes.writer(id) else { return };
        if w.in_multipart() {
            if !self.resend.contains(&id) {
                self.resend.push(id);
            }
            return;
        }
        self.filter.subscriptions.apply(|topic| {
            let mut data = Vec::with_capacity(topic.len() + 1);
            data.push(1);
            data.extend_from_slice(topic);
            let _ = w.try_write(Msg::from_vec(data));
        });
    }

    /// libzmq `xsub_t::xsend`.
    fn xsend(&mut self, msg: Msg, pipes: &mut PipeTable) {
        let first_part = !self.more_send;
        self.more_send = msg.more();
        if first_part {
            self.process_subscribe = !self.only_first_subscribe;
        } else if !self.process_subscribe {
            self.sub.send_upstream(msg, pipes);
            return self.after_send(pipes);
        }
        match msg.data().first() {
            Some(1) => {
                self.filter.subscriptions.add(&msg.data()[1..]);
                self.process_subscribe = true;
                self.sub.send_upstream(msg, pipes);
            }
            Some(0) => {
                self.process_subscribe = true;
                if self.filter.subscriptions.rm(&msg.data()[1..]) || self.verbose_unsubs {
                    self.sub.send_upstream(msg, pipes);
                }
            }
            _ => self.sub.send_upstream(msg, pipes),
        }
        self.after_send(pipes);
    }

    fn after_send(&mut self, pipes: &mut PipeTable) {
        if !self.more_send && !self.resend.is_empty() {
            for id in std::mem::take(&mut self.resend) {
                self.send_subscriptions(id, pipes);
            }
        }
    }
}

impl Pattern for XSub {
    fn topics_count(&self) -> Option<usize> {
        Some(self.filter.subscriptions.num_prefixes())
    }

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
        self.resend.retain(|&p| p != id);
    }

    fn read_activated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.sub.read_activated(id);
    }

    fn write_activated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.sub.write_activated(id);
    }

    fn send(&mut self, msg: Msg, pipes: &mut PipeTable) -> std::result::Result<(), (Msg, Error)> {
        if self.filter.is_sub {
            return Err((msg, Error::NotSup));
        }
        self.xsend(msg, pipes);
        Ok(())
    }

    #[inline]
    fn recv(&mut self, pipes: &mut PipeTable) -> Result<Msg> {
        // The rest of a message passes whatever it holds.
        let (filter, more) = (&self.filter, self.more_recv);
        let m = self.sub.recv(pipes, |fq, pipes| {
            next(fq, pipes, |m| more || filter.matches(m))
        })?;
        self.more_recv = m.more();
        Ok(m)
    }

    fn has_in(&mut self, pipes: &mut PipeTable) -> bool {
        if self.more_recv {
            return true;
        }
        let filter = &self.filter;
        self.sub
            .has_in(pipes, |fq, pipes| next(fq, pipes, |m| filter.matches(m)))
    }

    fn has_out(&mut self, _pipes: &mut PipeTable) -> bool {
        !self.filter.is_sub
    }

    fn set_option(&mut self, option: i32, value: &[u8], pipes: &mut PipeTable) -> Result<()> {
        let is_sub = self.filter.is_sub;
        match option {
            opt::SUBSCRIBE | opt::UNSUBSCRIBE if is_sub => {
                let mut data = Vec::with_capacity(value.len() + 1);
                data.push(u8::from(option == opt::SUBSCRIBE));
                data.extend_from_slice(value);
                self.xsend(Msg::from_vec(data), pipes);
            }
            opt::INVERT_MATCHING => self.filter.invert = opt_bool(value)?,
            opt::ONLY_FIRST_SUBSCRIBE if !is_sub => self.only_first_subscribe = opt_bool(value)?,
            opt::XSUB_VERBOSE_UNSUBSCRIBE if !is_sub => {
                let v: [u8; 4] = value.try_into().map_err(|_| Error::Inval)?;
                self.verbose_unsubs = i32::from_ne_bytes(v) != 0;
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

    fn subscribe(p: &mut XSub, t: &mut PipeTable, topic: &[u8]) {
        p.set_option(opt::SUBSCRIBE, topic, t).unwrap();
    }

    fn unsubscribe(p: &mut XSub, t: &mut PipeTable, topic: &[u8]) {
        p.set_option(opt::UNSUBSCRIBE, topic, t).unwrap();
    }

    #[test]
    fn sub_filters_by_prefix_and_drops_whole_messages() {
        let mut s = XSub::new_sub();
        let mut t = PipeTable::new();
        let (_a, mut pa) = connect(&mut s, &mut t, 0);
        subscribe(&mut s, &mut t, b"ab");
        pa.send(&[b"abc", b"1"]);
        pa.send(&[b"b", b"2"]);
        pa.send(&[b"a", b"3"]);
        pa.send(&[b"ab"]);
        assert_eq!(recv(&mut s, &mut t).unwrap(), parts(&[b"abc", b"1"]));
        assert_eq!(recv(&mut s, &mut t).unwrap(), parts(&[b"ab"]));
        assert_err(recv(&mut s, &mut t), Error::Again);
        assert_err(send(&mut s, &mut t, &[b"x"]), Error::NotSup);
        assert!(!has_out(&mut s, &mut t));
        subscribe(&mut s, &mut t, b"");
        pa.send(&[b"zzz"]);
        assert!(has_in(&mut s, &mut t));
        assert_eq!(recv(&mut s, &mut t).unwrap(), parts(&[b"zzz"]));
    }

    #[test]
    fn subscriptions_go_to_every_pipe_and_cancels_only_on_last_reference() {
        let mut s = XSub::new_sub();
        let mut t = PipeTable::new();
        let (_a, mut pa) = connect(&mut s, &mut t, 0);
        subscribe(&mut s, &mut t, b"t");
        subscribe(&mut s, &mut t, b"t");
        let (_b, mut pb) = connect(&mut s, &mut t, 0);
        assert_eq!(pa.recv_all(), vec![parts(&[b"\x01t"]), parts(&[b"\x01t"])]);
        assert_eq!(
            pb.recv_all(),
            vec![parts(&[b"\x01t"])],
            "a new pipe gets each topic once"
        );
        unsubscribe(&mut s, &mut t, b"t");
        assert!(pa.recv().is_none(), "one reference remains");
        unsubscribe(&mut s, &mut t, b"t");
        assert_eq!(pa.recv_all(), vec![parts(&[b"\x00t"])]);
        assert_eq!(pb.recv_all(), vec![parts(&[b"\x00t"])]);
        unsubscribe(&mut s, &mut t, b"t");
        assert!(
            pa.recv().is_none(),
            "cancel of an unknown topic is not sent"
        );
    }

    #[test]
    fn resend_on_reconnect_but_not_on_first_handshake() {
        let mut s = XSub::new_xsub();
        let mut t = PipeTable::new();
        send(&mut s, &mut t, &[b"\x01a"]).unwrap();
        send(&mut s, &mut t, &[b"\x01b"]).unwrap();
        let (a, mut pa) = connect(&mut s, &mut t, 0);
        ready(&mut s, &mut t, a, &pa, None);
        assert_eq!(pa.recv_all(), vec![parts(&[b"\x01a"]), parts(&[b"\x01b"])]);
        ready(&mut s, &mut t, a, &pa, None);
        assert_eq!(pa.recv_all(), vec![parts(&[b"\x01a"]), parts(&[b"\x01b"])]);
    }

    #[test]
    fn resend_waits_for_a_half_sent_message() {
        let mut s = XSub::new_xsub();
        let mut t = PipeTable::new();
        send(&mut s, &mut t, &[b"\x01a"]).unwrap();
        let (a, mut pa) = connect(&mut s, &mut t, 0);
        ready(&mut s, &mut t, a, &pa, None);
        pa.recv_all();
        s.send(frame(b"data", true), &mut t).unwrap();
        ready(&mut s, &mut t, a, &pa, None);
        s.send(frame(b"end", false), &mut t).unwrap();
        assert_eq!(
            pa.recv_all(),
            vec![parts(&[b"data", b"end"]), parts(&[b"\x01a"])]
        );
    }

    #[test]
    fn xsub_passes_everything_and_forwards_user_messages() {
        let mut s = XSub::new_xsub();
        let mut t = PipeTable::new();
        let (_a, mut pa) = connect(&mut s, &mut t, 0);
        pa.send(&[b"any"]);
        assert_eq!(recv(&mut s, &mut t).unwrap(), parts(&[b"any"]));
        assert!(has_out(&mut s, &mut t));
        send(&mut s, &mut t, &[b"user", b"msg"]).unwrap();
        send(&mut s, &mut t, &[b"\x00never"]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"user", b"msg"])]);
        s.set_option(opt::XSUB_VERBOSE_UNSUBSCRIBE, &1i32.to_ne_bytes(), &mut t)
            .unwrap();
        send(&mut s, &mut t, &[b"\x00never"]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"\x00never"])]);
        assert_eq!(s.topics_count(), Some(0));
    }

    #[test]
    fn invert_matching_delivers_the_rest() {
        let mut s = XSub::new_sub();
        let mut t = PipeTable::new();
        s.set_option(opt::INVERT_MATCHING, &1i32.to_ne_bytes(), &mut t)
            .unwrap();
        let (_a, mut pa) = connect(&mut s, &mut t, 0);
        pa.send(&[b"no subscriptions: everything passes"]);
        assert_eq!(recv(&mut s, &mut t).unwrap().len(), 1);
        subscribe(&mut s, &mut t, b"x");
        pa.send(&[b"xyz", b"dropped"]);
        pa.send(&[b"abc"]);
        assert_eq!(recv(&mut s, &mut t).unwrap(), parts(&[b"abc"]));
    }

    #[test]
    fn subscriptions_dropped_at_hwm() {
        let mut s = XSub::new_sub();
        let mut t = PipeTable::new();
        let (_a, mut pa) = connect(&mut s, &mut t, 1);
        subscribe(&mut s, &mut t, b"1");
        subscribe(&mut s, &mut t, b"2");
        assert_eq!(pa.recv_all(), vec![parts(&[b"\x011"])]);
    }
}
