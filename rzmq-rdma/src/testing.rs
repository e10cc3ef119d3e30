//! Not part of the API: entry points for fuzz targets and tests; may change without notice.
//!
//! Each `fuzz_*` function takes arbitrary bytes and drives one parser of what a peer sends
//! (the upgrade blob, the credit ring's records and mailbox, rendezvous descriptors) through
//! its public surface; none may panic, whatever the bytes. The `seed_*` functions produce
//! well-formed inputs, recorded from a genuine sender where there is one
//! (`fuzz/examples/gen_corpus.rs`).

use crate::datapath::ConnectInfo;
use crate::provider::{soft, Endpoint};
use crate::ring::{Credits, Kind, Op, Ring, RingConfig, MAILBOX_LEN};
use crate::rndv::{Descriptor, Inbox};

/// The peer's upgrade blob (`RZMQ-UP-EP`'s payload: [`ConnectInfo`] with its QP [`Endpoint`]).
/// Layout: the blob. Checks that whatever parses encodes back to the same bytes, and decodes
/// the same bytes as a bare endpoint descriptor and its GID as a soft GID-addressed endpoint.
pub fn fuzz_connect_info(data: &[u8]) {
    if let Ok(ci) = ConnectInfo::from_bytes(data) {
        assert_eq!(ci.to_bytes(), data, "connect info does not round-trip");
    }
    if let Ok(ep) = Endpoint::from_bytes(data) {
        assert_eq!(ep.to_bytes(), data, "endpoint does not round-trip");
        let _ = soft::endpoint_from_gid(&ep.gid, ep.qpn, ep.psn);
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = soft::WireAddr::parse(text);
    }
}

/// The soft provider's wire as a device reads it from a peer (`provider/soft/wire.rs`) and the
/// soft part of a peer's endpoint descriptor (`provider/soft/endpoint.rs`). Layout: byte 0 mod 4
/// is 0: the rest is a wire stream, split into 48-byte CRC-checked packet headers and the
/// payloads their lengths announce, until the framing is lost (the device then drops the wire);
/// odd: the rest is an endpoint's `extra`; 2: a wire's hello and the QP it names
/// (`fuzz_soft_hello`). Checks that a header whose CRC holds, and an `extra` that parses, decode
/// again to the same values from their own encoding.
pub fn fuzz_soft_wire(data: &[u8]) {
    let Some((&sel, mut rest)) = data.split_first() else {
        return;
    };
    if sel & 3 == 2 {
        fuzz_soft_hello(rest);
        return;
    }
    if sel & 1 == 1 {
        // Values, not bytes, must survive a round trip: an address may be spelled more than
        // one way (`tcp:127.0.0.1:0040` is port 40 and re-encodes as `:40`).
        if let Ok(decoded) = soft::decode_extra(rest) {
            let (dev, secret, ref addr, cma) = decoded;
            let again = soft::decode_extra(&soft::encode_extra(dev, secret, addr, cma));
            assert_eq!(again.ok(), Some(decoded), "extra does not round-trip");
        }
        return;
    }
    while rest.len() >= soft::HDR_LEN {
        let (head, tail) = rest.split_at(soft::HDR_LEN);
        let head: &[u8; soft::HDR_LEN] = head.try_into().expect("HDR_LEN bytes");
        let Ok((hdr, crc_ok)) = soft::decode_header(head) else {
            return;
        };
        // The reserved bytes (40..44) are ignored on receipt, so values, not bytes, round-trip.
        if crc_ok {
            assert_eq!(
                soft::decode_header(&hdr.encode()),
                Ok((hdr, true)),
                "header does not round-trip"
            );
        }
        rest = &tail[tail.len().min(hdr.len as usize)..];
    }
}

/// A wire's hello as the accepting device reads it, and the device's verdict on it. Layout:
/// the hello ([`soft::HELLO_LEN`] bytes), then the accepting device's id (8), the dialed QP's
/// configured peer device (8) and QPN (4) and its secret (8), and a flags byte (1: the QP
/// exists, 2: it has a peer, 4: RTR/RTS, 8: wired, 16: in error); missing bytes read as zero.
/// Checks that a hello's values round-trip and that a wire is attached only to an existing,
/// ready, unwired QP of this device whose peer and secret the hello names.
fn fuzz_soft_hello(data: &[u8]) {
    let mut b = [0u8; soft::HELLO_LEN + 29];
    let n = data.len().min(b.len());
    b[..n].copy_from_slice(&data[..n]);
    let (hello, target) = b.split_at(soft::HELLO_LEN);
    let hello_bytes: &[u8; soft::HELLO_LEN] = hello.try_into().expect("HELLO_LEN bytes");
    let hello = soft::Hello::decode(hello_bytes);
    if let Some(h) = hello {
        assert_eq!(
            soft::Hello::decode(&h.encode()),
            Some(h),
            "hello does not round-trip"
        );
    }
    let u64at = |o: usize| u64::from_be_bytes(target[o..o + 8].try_into().expect("8 bytes"));
    let dev = u64at(0);
    let flags = target[28];
    let qp = (flags & 1 != 0).then(|| soft::HelloTarget {
        remote: (flags & 2 != 0).then(|| {
            let qpn = u32::from_be_bytes(target[16..20].try_into().expect("4 bytes"));
            (u64at(8), qpn)
        }),
        secret: u64at(20),
        ready: flags & 4 != 0,
        wired: flags & 8 != 0,
        errored: flags & 16 != 0,
    });
    if soft::judge_hello(hello.as_ref(), dev, qp) == soft::HelloVerdict::Attach {
        let h = hello.expect("attached without a hello");
        let qp = qp.expect("attached without a QP");
        assert_eq!(h.dst_dev, dev, "attached to another device's hello");
        assert_eq!(
            qp.remote,
            Some((h.src_dev, h.src_qpn)),
            "attached a stranger"
        );
        assert_eq!(qp.secret, h.dst_secret, "attached without the secret");
        assert!(qp.ready && !qp.wired && !qp.errored, "attached to {qp:?}");
    }
}

/// Well-formed [`fuzz_soft_wire`] inputs: a stream of a SEND with its payload, a WRITE with
/// immediate data and an ACK, as a device encodes them; an endpoint `extra`; and a hello to a
/// QP that expects it.
pub fn seed_soft_wire() -> Vec<Vec<u8>> {
    let mut stream = vec![0u8];
    for (kind, flags, len) in [(1u8, 0u8, 5u32), (2, 1, 3), (5, 0, 0)] {
        let hdr = soft::Hdr {
            kind,
            flags,
            psn: 7,
            len,
            addr: 0x7f00_0000_1000,
            rkey: 0x1234,
            imm: 0xdead_beef,
            ..Default::default()
        };
        stream.extend_from_slice(&hdr.encode());
        stream.resize(stream.len() + len as usize, 0xab);
    }
    let addr = soft::WireAddr::parse("tcp:127.0.0.1:4000").expect("address");
    let mut plain = vec![1u8];
    plain.extend(soft::encode_extra(3, 0x55, &addr, None));
    // A hello as a device dials with it, to a ready QP that expects it.
    let hello = soft::Hello {
        src_dev: 3,
        src_qpn: 0x11,
        dst_dev: 4,
        dst_qpn: 0x22,
        dst_secret: 0x5eed,
    };
    let mut dial = vec![2u8];
    dial.extend_from_slice(&hello.encode());
    dial.extend_from_slice(&4u64.to_be_bytes());
    dial.extend_from_slice(&3u64.to_be_bytes());
    dial.extend_from_slice(&0x11u32.to_be_bytes());
    dial.extend_from_slice(&0x5eedu64.to_be_bytes());
    dial.push(1 | 2 | 4);
    vec![stream, plain, dial]
}

/// Well-formed [`fuzz_connect_info`] inputs: blobs with a soft endpoint (an `extra` of 40 bytes)
/// and an ibverbs-like one (no `extra`, a GID).
pub fn seed_connect_info() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for extra in [vec![7u8; 40], Vec::new()] {
        let mut ep = Endpoint {
            provider: crate::provider::ProviderKind::Soft,
            qpn: 0x12,
            psn: 0x345,
            lid: 0,
            gid: crate::provider::Gid([0; 16]),
            mtu: crate::provider::Mtu::M4096,
            extra,
        };
        if ep.extra.is_empty() {
            ep.gid.0[..2].copy_from_slice(&[0xfe, 0x80]);
            ep.gid.0[15] = 1;
        }
        let ci = ConnectInfo {
            endpoint: ep.clone(),
            ring_addr: 0x7f00_0000_1000,
            ring_rkey: 0x1234,
            ring_size: 1 << 20,
            mailbox_addr: 0x7f00_0000_9000,
            mailbox_rkey: 0x5678,
            recv_depth: 64,
        };
        seeds.push(ci.to_bytes());
        seeds.push(ep.to_bytes());
    }
    seeds
}

fn ring_config(size: u32) -> RingConfig {
    RingConfig {
        size,
        recv_depth: 8,
        max_send_wr: 32,
        signal_every: 4,
        batch_bytes: 1024,
    }
}

/// Ring sizes the fuzzer picks from (`256 << (sel % 5)`: 256 B to 4 KiB, where wraps happen).
fn ring_size(sel: u8) -> u32 {
    256 << (sel % 5)
}

/// Reads every record now notified into `inbox` (rendezvous reads complete at once); false on
/// a protocol error.
fn drain_records(r: &mut Ring, inbox: &mut Inbox<Vec<u8>, ()>) -> bool {
    loop {
        match r.peek() {
            Ok(Some(rec)) => {
                let flags = rec.flags;
                match rec.kind {
                    Kind::Rndv => match Descriptor::decode(rec.data) {
                        Ok(d) if inbox.push_rndv(d, flags).is_ok() => {}
                        _ => return false,
                    },
                    _ => inbox.push_ready(rec.data.to_vec()),
                }
                r.advance();
            }
            Ok(None) => break,
            Err(_) => return false,
        }
    }
    let mut reads = Vec::new();
    while let Some((d, _)) = inbox.next_read(|_| Some(())) {
        reads.push(d.token);
    }
    for t in reads {
        if inbox.on_read_done(t).is_err() {
            return false;
        }
        r.rndv_completed(1);
    }
    while inbox.pop(|_, _, ()| Vec::new()).is_some() {}
    true
}

/// Takes the ring's work requests, completing the signaled ones; returns them.
fn ops(r: &mut Ring) -> Vec<Op> {
    let mut v = Vec::new();
    while let Some(op) = r.poll_op() {
        if let Op::Write {
            signal: Some(k), ..
        }
        | Op::Credits {
            signal: Some(k), ..
        } = op
        {
            r.on_send_complete(k);
        }
        v.push(op);
    }
    v
}

const EV_WRITE: u8 = 0;
const EV_NOTIFY: u8 = 1;
const EV_CREDITS: u8 = 2;
const EV_SEND: u8 = 3;

/// The receive side of a credit ring, fed what a peer's RDMA operations do. Layout: `[size,
/// event*]`: `size` picks the ring size (256 B to 4 KiB); an event is a tag (mod 4) and its
/// bytes: 0 = WRITE into the ring (`off: u16 LE` mod size, `len: u16 LE`, then the bytes), 1 =
/// a receive completion with its immediate (`u32 LE`: a byte count or the credit tag), after
/// which every notified record is read, 2 = the peer's credit update written into the mailbox
/// (32 bytes), 3 = we send a frame (`len` byte), spending the credits the peer claimed. Covers
/// record headers (length, kind, flags, sequence, padding at the wrap), the overrun checks,
/// the mailbox, rendezvous descriptors and their in-order inbox.
pub fn fuzz_ring(data: &[u8]) {
    ring_events(data);
}

/// [`fuzz_ring`]; true when every event was taken without a protocol error.
fn ring_events(data: &[u8]) -> bool {
    let [sel, rest @ ..] = data else {
        return false;
    };
    let mut rest: &[u8] = rest;
    let size = ring_size(*sel);
    let Ok(mut r) = Ring::new(ring_config(size), size, 8) else {
        return false;
    };
    let mut inbox: Inbox<Vec<u8>, ()> = Inbox::new(2);
    while let [tag, tail @ ..] = rest {
        rest = tail;
        match tag % 4 {
            EV_WRITE => {
                let [o0, o1, l0, l1, tail @ ..] = rest else {
                    return false;
                };
                let off = usize::from(u16::from_le_bytes([*o0, *o1])) % size as usize;
                let len = usize::from(u16::from_le_bytes([*l0, *l1]))
                    .min(size as usize - off)
                    .min(tail.len());
                // SAFETY: the region is ours alone (single thread, no record borrowed now) and
                // off + len is within its `size` bytes.
                unsafe { r.ring_region().write(off, &tail[..len]) };
                rest = &tail[len..];
            }
            EV_NOTIFY => {
                let [a, b, c, d, tail @ ..] = rest else {
                    return false;
                };
                rest = tail;
                if r.on_recv(u32::from_le_bytes([*a, *b, *c, *d])).is_err()
                    || !drain_records(&mut r, &mut inbox)
                {
                    return false;
                }
                ops(&mut r);
            }
            EV_CREDITS => {
                if rest.len() < MAILBOX_LEN {
                    return false;
                }
                // SAFETY: as above, MAILBOX_LEN bytes into the MAILBOX_LEN-byte mailbox.
                unsafe { r.mailbox_region().write(0, &rest[..MAILBOX_LEN]) };
                rest = &rest[MAILBOX_LEN..];
                r.read_mailbox();
                ops(&mut r);
            }
            _ => {
                let [len, tail @ ..] = rest else {
                    return false;
                };
                rest = tail;
                let _ = r.send(Kind::Data, 0, &vec![0x33; usize::from(*len)]);
                r.flush();
                ops(&mut r);
            }
        }
    }
    let _ = (r.peer_credits(), r.unconsumed(), r.is_stalled());
    r.stats().msgs_rx > 0 || data.len() == 1
}

/// A genuine sender and receiver exchanging `frames` records (eager frames of growing size and
/// every third a rendezvous descriptor), recorded as a [`fuzz_ring`] input: the sender's
/// credits, WRITEs and notifications (the receiver's credit updates go back to the sender, as
/// they would, unrecorded), then a reply. Enough frames wrap the ring.
pub fn seed_ring(sel: u8, frames: usize) -> Vec<u8> {
    let size = ring_size(sel);
    let (Ok(mut tx), Ok(mut rx)) = (
        Ring::new(ring_config(size), size, 8),
        Ring::new(ring_config(size), size, 8),
    ) else {
        return Vec::new();
    };
    let mut inbox: Inbox<Vec<u8>, ()> = Inbox::new(2);
    let mut seed = vec![sel, EV_CREDITS];
    let credits = Credits {
        consumed: 0,
        recvs_posted: 16,
        rndv_done: 0,
    };
    seed.extend_from_slice(&credits.encode());
    let mut token = 1;
    let mut i = 0;
    let mut rounds = 0;
    while i < frames && rounds < 4 * frames {
        rounds += 1;
        let sent = if i % 3 == 2 {
            let d = Descriptor {
                token,
                addr: 0x10000,
                len: 1 << 20,
                rkey: 9,
            };
            tx.send(Kind::Rndv, 0, &d.encode())
        } else {
            tx.send(Kind::Data, 1, &vec![i as u8; (20 + 13 * i) % 200])
        };
        if matches!(sent, Ok(true)) {
            if i % 3 == 2 {
                token += 1;
            }
            i += 1;
        }
        tx.flush();
        for op in ops(&mut tx) {
            match op {
                Op::Write { off, len, imm, .. } => {
                    let (off, len) = (off as usize, len as usize);
                    // SAFETY: the ring stages its writes within its mirror of the peer's ring;
                    // the bytes are copied out before the mirror changes.
                    let bytes = unsafe { tx.mirror_region().slice(off, len) }.to_vec();
                    // SAFETY: rx's ring has the same size; nothing borrows it now.
                    unsafe { rx.ring_region().write(off, &bytes) };
                    seed.push(EV_WRITE);
                    seed.extend_from_slice(&(off as u16).to_le_bytes());
                    seed.extend_from_slice(&(len as u16).to_le_bytes());
                    seed.extend_from_slice(&bytes);
                    if let Some(imm) = imm {
                        seed.push(EV_NOTIFY);
                        seed.extend_from_slice(&imm.to_le_bytes());
                        if rx.on_recv(imm).is_err() || !drain_records(&mut rx, &mut inbox) {
                            return seed;
                        }
                    }
                }
                Op::Credits { credits, .. } => {
                    seed.push(EV_CREDITS);
                    seed.extend_from_slice(&credits.encode());
                }
                Op::PostRecv(_) => {}
            }
        }
        for op in ops(&mut rx) {
            if let Op::Credits { credits, .. } = op {
                // SAFETY: MAILBOX_LEN bytes into tx's MAILBOX_LEN-byte mailbox, nothing
                // borrows it.
                unsafe { tx.mailbox_region().write(0, &credits.encode()) };
                tx.read_mailbox();
            }
        }
    }
    seed.extend_from_slice(&[EV_SEND, 40]);
    seed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every committed input of this crate's fuzz targets (seeds and `regress-*` crash inputs)
    /// replays through its entry point without a panic, and every corpus directory belongs to
    /// a target of one of the two testing modules.
    #[cfg_attr(miri, ignore)] // reads files
    #[test]
    fn committed_corpus_replays() {
        let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
        let ours: [rzmq_core::testing::FuzzTarget; 3] = [
            ("rdma_connect_info", fuzz_connect_info),
            ("rdma_ring", fuzz_ring),
            ("soft_wire", fuzz_soft_wire),
        ];
        for (target, f) in ours {
            assert!(
                rzmq_core::testing::replay_corpus(&corpus, target, f) > 0,
                "{target}: empty corpus"
            );
        }
        let mut known: Vec<&str> = ours.iter().map(|t| t.0).collect();
        known.extend(rzmq_core::testing::FUZZ_TARGETS.iter().map(|t| t.0));
        for entry in std::fs::read_dir(&corpus).expect("fuzz/corpus") {
            let name = entry.expect("a corpus directory").file_name();
            let name = name.to_string_lossy();
            assert!(
                known.contains(&&*name),
                "corpus/{name} belongs to no target"
            );
        }
    }

    /// The recorded exchanges replay without a protocol error, and the longer ones wrap.
    #[test]
    fn ring_seeds_replay() {
        for sel in 0..5 {
            let seed = seed_ring(sel, 40);
            assert!(ring_events(&seed), "ring seed {sel} does not replay");
        }
        let small = seed_ring(0, 40);
        assert!(
            small.len() > 2 * ring_size(0) as usize,
            "the 256 B ring never wrapped"
        );
    }

    /// Soft-wire seeds decode whole (every header's CRC holds, the stream ends on a packet
    /// boundary); truncations and flips do not panic.
    #[test]
    fn soft_wire_seeds() {
        let seeds = seed_soft_wire();
        let stream = &seeds[0][1..];
        let mut at = 0;
        while at < stream.len() {
            let head: &[u8; soft::HDR_LEN] = stream[at..at + soft::HDR_LEN].try_into().unwrap();
            let (hdr, crc_ok) = soft::decode_header(head).expect("framing");
            assert!(crc_ok);
            at += soft::HDR_LEN + hdr.len as usize;
        }
        assert_eq!(at, stream.len());
        assert!(soft::decode_extra(&seeds[1][1..]).is_ok());
        // The hello seed reaches the attach verdict (so the fuzzer starts past the checks).
        let dial = &seeds[2][1..];
        let hello = soft::Hello::decode(dial[..soft::HELLO_LEN].try_into().unwrap());
        let target = soft::HelloTarget {
            remote: Some((3, 0x11)),
            secret: 0x5eed,
            ready: true,
            wired: false,
            errored: false,
        };
        assert_eq!(
            soft::judge_hello(hello.as_ref(), 4, Some(target)),
            soft::HelloVerdict::Attach
        );
        for seed in &seeds {
            for cut in 0..seed.len() {
                fuzz_soft_wire(&seed[..cut]);
            }
            for i in 1..seed.len() {
                let mut m = seed.clone();
                m[i] ^= 0x5a;
                fuzz_soft_wire(&m);
            }
        }
    }

    /// Connect-info seeds parse and round-trip; truncations and flips do not panic.
    #[test]
    fn connect_info_seeds() {
        for seed in seed_connect_info() {
            assert!(
                ConnectInfo::from_bytes(&seed).is_ok() || Endpoint::from_bytes(&seed).is_ok(),
                "seed does not parse"
            );
            fuzz_connect_info(&seed);
            for cut in 0..seed.len() {
                fuzz_connect_info(&seed[..cut]);
            }
            for i in 0..seed.len() {
                let mut m = seed.clone();
                m[i] ^= 0x5a;
                fuzz_connect_info(&m);
            }
        }
        for seed in (0..5).map(|sel| seed_ring(sel, 20)) {
            for i in (1..seed.len()).step_by(5) {
                let mut m = seed.clone();
                m[i] ^= 0x5a;
                fuzz_ring(&m);
            }
        }
    }
}
