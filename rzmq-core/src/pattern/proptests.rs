//! Random interleavings of socket calls, peer actions and pipe events against simple models:
//! messages arrive whole, once, in order, and (where nothing could drop them) all of them.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::dealer::Dealer;
use super::pubsub::XPub;
use super::testutil::*;
use super::{Pattern, PipeId, PipeTable};

fn frame_bytes(seq: u32, idx: u8, len: u8) -> Vec<u8> {
    let mut v = seq.to_le_bytes().to_vec();
    v.push(idx);
    v.push(len);
    v
}

/// Checks a message is whole (each frame ends with its 6-byte tag); returns its sequence number.
fn whole(m: &[Vec<u8>]) -> u32 {
    let tail = |f: &Vec<u8>| f[f.len() - 6..].to_vec();
    let first = tail(&m[0]);
    let seq = u32::from_le_bytes(first[..4].try_into().unwrap());
    assert_eq!(m.len(), first[5] as usize, "message cut");
    for (i, f) in m.iter().enumerate() {
        assert_eq!(
            tail(f),
            frame_bytes(seq, i as u8, m.len() as u8),
            "frames mixed"
        );
    }
    seq
}

#[derive(Debug, Clone)]
enum DOp {
    Attach(u8),
    Detach(usize),
    Close(usize),
    PeerRead(usize),
    PeerWrite(usize, u8),
    Send(u8),
    Recv,
}

fn dop() -> impl Strategy<Value = DOp> {
    prop_oneof![
        (0u8..3).prop_map(DOp::Attach),
        any::<usize>().prop_map(DOp::Detach),
        any::<usize>().prop_map(DOp::Close),
        any::<usize>().prop_map(DOp::PeerRead),
        (any::<usize>(), 1u8..4).prop_map(|(k, n)| DOp::PeerWrite(k, n)),
        (1u8..4).prop_map(DOp::Send),
        Just(DOp::Recv),
    ]
}

proptest! {
    #[test]
    fn dealer_lb_and_fq_keep_messages_whole_ordered_and_unique(ops in prop::collection::vec(dop(), 1..120)) {
        let mut d = Dealer::new();
        let mut t = PipeTable::new();
        let mut peers: Vec<(PipeId, Option<Peer>)> = Vec::new();
        let mut seq = 0u32;
        let mut sent = BTreeSet::new();
        let mut delivered = BTreeSet::new();
        let mut last_out: BTreeMap<PipeId, u32> = BTreeMap::new();
        let mut in_seq = 0u32;
        let mut written: BTreeMap<u32, PipeId> = BTreeMap::new();
        let mut received_in = BTreeSet::new();
        let mut last_in: BTreeMap<PipeId, u32> = BTreeMap::new();
        let mut lossless = true;
        for op in ops {
            pump(&mut d, &mut t);
            match op {
                DOp::Attach(h) => {
                    let (id, p) = connect(&mut d, &mut t, u64::from(h));
                    peers.push((id, Some(p)));
                }
                DOp::Detach(k) if !peers.is_empty() => {
                    let (id, _) = peers.remove(k % peers.len());
                    detach(&mut d, &mut t, id);
                    lossless = false;
                }
                DOp::Close(k) if !peers.is_empty() => {
                    let i = k % peers.len();
                    peers[i].1 = None;
                    lossless = false;
                }
                DOp::PeerRead(k) if !peers.is_empty() => {
                    let i = k % peers.len();
                    let id = peers[i].0;
                    if let Some(p) = peers[i].1.as_mut() {
                        if let Some(m) = p.recv() {
                            let s = whole(&m);
                            prop_assert!(sent.contains(&s));
                            prop_assert!(delivered.insert(s), "delivered twice");
                            prop_assert!(!matches!(last_out.insert(id, s), Some(prev) if prev >= s), "reordered");
                        }
                    }
                }
                DOp::PeerWrite(k, n) if !peers.is_empty() => {
                    let i = k % peers.len();
                    let id = peers[i].0;
                    if let Some(p) = peers[i].1.as_mut() {
                        let frames: Vec<Vec<u8>> = (0..n).map(|j| frame_bytes(in_seq, j, n)).collect();
                        let refs: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
                        p.send(&refs);
                        written.insert(in_seq, id);
                        in_seq += 1;
                    }
                }
                DOp::Send(n) => {
                    // Only the first frame can be refused (no pipe has room); the rest always goes.
                    if d.send(frame(&frame_bytes(seq, 0, n), n > 1), &mut t).is_ok() {
                        for j in 1..n {
                            d.send(frame(&frame_bytes(seq, j, n), j + 1 < n), &mut t).unwrap();
                        }
                        sent.insert(seq);
                    }
                    seq += 1;
                }
                DOp::Recv => {
                    if let Ok(m) = recv(&mut d, &mut t) {
                        let s = whole(&m);
                        let from = written[&s];
                        prop_assert!(received_in.insert(s), "received twice");
                        prop_assert!(!matches!(last_in.insert(from, s), Some(prev) if prev >= s), "reordered");
                    }
                }
                _ => {}
            }
        }
        // Drain: everything the peers wrote to live pipes arrives, and everything sent is delivered
        // when nothing could have lost it.
        pump(&mut d, &mut t);
        while let Ok(m) = recv(&mut d, &mut t) {
            let s = whole(&m);
            prop_assert!(received_in.insert(s), "received twice");
        }
        for (s, from) in &written {
            if t.get(*from).is_some() {
                prop_assert!(received_in.contains(s), "message {} from a live pipe never received", s);
            }
        }
        for (_, p) in peers.iter_mut() {
            if let Some(p) = p {
                while let Some(m) = p.recv() {
                    prop_assert!(delivered.insert(whole(&m)), "delivered twice");
                }
            }
        }
        if lossless {
            prop_assert_eq!(&delivered, &sent);
        }
        prop_assert!(delivered.is_subset(&sent));
    }
}

#[derive(Debug, Clone)]
enum POp {
    Attach(bool),
    Detach(usize),
    Sub(usize, u8),
    Unsub(usize, u8),
    PeerRead(usize),
    Send(u8, u8),
}

const TOPICS: [&[u8]; 4] = [b"", b"a", b"ab", b"b"];

fn pop() -> impl Strategy<Value = POp> {
    prop_oneof![
        any::<bool>().prop_map(POp::Attach),
        any::<usize>().prop_map(POp::Detach),
        (any::<usize>(), 0u8..4).prop_map(|(k, t)| POp::Sub(k, t)),
        (any::<usize>(), 0u8..4).prop_map(|(k, t)| POp::Unsub(k, t)),
        any::<usize>().prop_map(POp::PeerRead),
        (0u8..4, 1u8..4).prop_map(|(t, n)| POp::Send(t, n)),
    ]
}

struct SubPeer {
    id: PipeId,
    peer: Peer,
    lossless: bool,
    topics: BTreeSet<u8>,
    expect: Vec<u32>,
    got: Vec<u32>,
}

proptest! {
    #[test]
    fn xpub_delivers_whole_matching_messages_once(ops in prop::collection::vec(pop(), 1..120)) {
        let mut x = XPub::new_xpub();
        let mut t = PipeTable::new();
        let mut peers: Vec<SubPeer> = Vec::new();
        let mut topic_of: BTreeMap<u32, u8> = BTreeMap::new();
        let mut seq = 0u32;
        for op in ops {
            pump(&mut x, &mut t);
            match op {
                POp::Attach(lossless) => {
                    let (id, peer) = connect(&mut x, &mut t, if lossless { 0 } else { 1 });
                    peers.push(SubPeer { id, peer, lossless, topics: BTreeSet::new(), expect: vec![], got: vec![] });
                }
                POp::Detach(k) if !peers.is_empty() => {
                    let p = peers.remove(k % peers.len());
                    detach(&mut x, &mut t, p.id);
                }
                POp::Sub(k, tp) | POp::Unsub(k, tp) if !peers.is_empty() => {
                    let subscribe = matches!(op, POp::Sub(..));
                    let i = k % peers.len();
                    let p = &mut peers[i];
                    p.peer.send(&[&[&[u8::from(subscribe)][..], TOPICS[tp as usize]].concat()]);
                    if subscribe { p.topics.insert(tp); } else { p.topics.remove(&tp); }
                    x.read_activated(p.id, &mut t);
                }
                POp::PeerRead(k) if !peers.is_empty() => {
                    let i = k % peers.len();
                    let p = &mut peers[i];
                    if let Some(m) = p.peer.recv() {
                        p.got.push(whole(&m));
                    }
                }
                POp::Send(tp, n) => {
                    let topic = TOPICS[tp as usize];
                    for j in 0..n {
                        let mut f = frame_bytes(seq, j, n);
                        if j == 0 {
                            // Topic, a byte no topic holds, then the tag.
                            f = [topic, &[0xff], &f[..]].concat();
                        }
                        x.send(frame(&f, j + 1 < n), &mut t).unwrap();
                    }
                    topic_of.insert(seq, tp);
                    for p in peers.iter_mut() {
                        if p.topics.iter().any(|&s| topic.starts_with(TOPICS[s as usize])) {
                            p.expect.push(seq);
                        }
                    }
                    seq += 1;
                }
                _ => {}
            }
        }
        while let Ok(m) = x.recv(&mut t) {
            prop_assert!(matches!(m.data().first(), Some(0) | Some(1)));
        }
        for p in peers.iter_mut() {
            while let Some(m) = p.peer.recv() {
                p.got.push(whole(&m));
            }
            let mut uniq = p.got.clone();
            uniq.dedup();
            prop_assert_eq!(&uniq, &p.got, "duplicates");
            prop_assert!(p.got.windows(2).all(|w| w[0] < w[1]), "reordered");
            let expect: BTreeSet<u32> = p.expect.iter().copied().collect();
            for s in &p.got {
                prop_assert!(expect.contains(s), "message {} (topic {:?}) delivered to a non-subscriber", s, topic_of[s]);
            }
            if p.lossless {
                prop_assert_eq!(&p.got, &p.expect);
            }
        }
    }
}
