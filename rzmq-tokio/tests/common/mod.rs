//! Helpers shared by rzmq-tokio's integration tests.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use rzmq_core::options as opt;
use rzmq_core::{Context as ZmqContext, Msg, SocketType};
use rzmq_tokio::AsyncSocket;

/// A hang guard only: every test finishes far sooner, or has a bug.
pub const HANG: Duration = Duration::from_secs(120);

/// Runs `f` under the hang guard, failing instead of hanging.
pub async fn guarded<T>(what: &str, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(HANG, f).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: hung (a missed wake-up?)"),
    }
}

/// An async socket of type `ty` with the given high-water marks (0: unlimited) and linger.
pub fn socket(ctx: &ZmqContext, ty: SocketType, hwm: i32) -> AsyncSocket {
    let mut s = ctx.socket(ty).unwrap();
    s.set_option_i32(opt::SNDHWM, hwm).unwrap();
    s.set_option_i32(opt::RCVHWM, hwm).unwrap();
    s.set_option_i32(opt::LINGER, 5000).unwrap();
    AsyncSocket::new(s).unwrap()
}

/// A fresh endpoint of `transport` (tcp with a wildcard port: read it back with
/// [`bound_endpoint`]).
pub fn endpoint(transport: &str, tag: &str) -> String {
    match transport {
        "tcp" => "tcp://127.0.0.1:*".to_string(),
        "ipc" => rzmq_tests::ipc_endpoint(tag),
        "inproc" => rzmq_tests::inproc_endpoint(tag),
        other => panic!("no transport {other}"),
    }
}

/// Binds `s` to a fresh endpoint of `transport`; returns the endpoint to connect to.
pub fn bind(s: &mut AsyncSocket, transport: &str, tag: &str) -> String {
    s.bind(&endpoint(transport, tag)).unwrap();
    s.get_ref().last_endpoint().to_string()
}

/// Message `i` of a test stream: three frames, the middle one numbered.
pub fn numbered(i: u64) -> Vec<Msg> {
    vec![
        Msg::from(&b"head"[..]),
        Msg::from(i.to_le_bytes().to_vec()),
        Msg::from(rzmq_tests::payload((i % 97) as usize, i as u8)),
    ]
}

/// The number of a message made by [`numbered`], checking its frames.
pub fn number_of(parts: &[Msg]) -> u64 {
    assert_eq!(parts.len(), 3, "three frames");
    assert_eq!(parts[0].data(), b"head");
    let i = u64::from_le_bytes(parts[1].data().try_into().expect("8 bytes"));
    assert!(
        parts[2].data() == rzmq_tests::payload((i % 97) as usize, i as u8).as_slice(),
        "payload of message {i}"
    );
    i
}

/// A small deterministic pseudo-random sequence (xorshift64).
pub struct Rng(pub u64);

impl Rng {
    /// The next value below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A future that completes on its `n`th poll (waking itself in between): a cancellation at a
/// chosen poll of a `select!` partner, with no timer involved.
pub struct AfterPolls(pub u64);

impl Future for AfterPolls {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 == 0 {
            return Poll::Ready(());
        }
        self.0 -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// A cancellation point: after a few polls, or (one time in `sleep_one_in`) after a short
/// sleep.
pub async fn cancel_point(rng: &mut Rng, sleep_one_in: u64) {
    if rng.below(sleep_one_in) == 0 {
        tokio::time::sleep(Duration::from_micros(rng.below(500) + 1)).await;
    } else {
        AfterPolls(rng.below(4)).await;
    }
}
