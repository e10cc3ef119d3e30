//! Compile-time checks of which rzmq-tokio types, and which of the futures their methods return,
//! are `Send`, `Sync` and `Unpin`: a change that makes a future `!Send` (it could no longer be
//! spawned on the multi-thread runtime) or a socket `Sync` (two threads could then call it at
//! once through `&`) fails to compile here. The negative checks use a trait that is ambiguous
//! exactly when the property holds, so they compile only when it does not.
#![allow(dead_code, clippy::diverging_sub_expression, unreachable_code)]

use std::future::Future;

use futures_util::stream::{SplitSink, SplitStream};
use rzmq_core::Msg;
use rzmq_tokio::{AsyncSocket, RecvMsg, RecvMultipart, SendMsg};

/// Positive checks: these functions accept only values with the property.
fn send<T: Send>(_: &T) {}
fn sync<T: Sync>(_: &T) {}
fn unpin<T: Unpin>(_: &T) {}

/// `()` for every type; `Is` as well for types with the property, which makes
/// `<T as AmbiguousIf*<_>>::check` ambiguous (a compile error) exactly for those.
trait AmbiguousIfSend<A> {
    fn check() {}
}
impl<T: ?Sized> AmbiguousIfSend<()> for T {}
struct Is;
impl<T: ?Sized + Send> AmbiguousIfSend<Is> for T {}

trait AmbiguousIfSync<A> {
    fn check() {}
}
impl<T: ?Sized> AmbiguousIfSync<()> for T {}
impl<T: ?Sized + Sync> AmbiguousIfSync<Is> for T {}

/// A value of any type, for the checks (never run).
fn any<T>() -> T {
    unreachable!("compile-time checks only")
}

macro_rules! assert_value {
    ($t:ty: Send & !Sync & Unpin) => {
        const _: fn() = || {
            let v: $t = any();
            send(&v);
            unpin(&v);
            let _ = <$t as AmbiguousIfSync<_>>::check;
        };
    };
    ($t:ty: Send & Sync & Unpin) => {
        const _: fn() = || {
            let v: $t = any();
            send(&v);
            sync(&v);
            unpin(&v);
        };
    };
    ($t:ty: !Send & !Sync) => {
        const _: fn() = || {
            let _ = <$t as AmbiguousIfSend<_>>::check;
            let _ = <$t as AmbiguousIfSync<_>>::check;
        };
    };
}

/// Checks the future an expression over `s: &mut AsyncSocket` returns.
macro_rules! assert_future {
    (|$s:ident| $e:expr, Send & Unpin) => {
        const _: fn() = || {
            let $s: &mut AsyncSocket = any();
            let f = $e;
            fn future<F: Future>(_: &F) {}
            future(&f);
            send(&f);
            unpin(&f);
        };
    };
}

// The socket: movable between threads (into a task), one user at a time.
assert_value!(AsyncSocket: Send & !Sync & Unpin);
// The futures: spawnable on the multi-thread runtime, borrowing the socket mutably.
assert_value!(SendMsg<'static>: Send & !Sync & Unpin);
assert_value!(RecvMsg<'static>: Send & !Sync & Unpin);
assert_value!(RecvMultipart<'static>: Send & !Sync & Unpin);
assert_future!(|s| s.send("x"), Send & Unpin);
assert_future!(|s| s.send_multipart(["a", "b"]), Send & Unpin);
assert_future!(|s| s.recv(), Send & Unpin);
assert_future!(|s| s.recv_multipart(), Send & Unpin);
// The halves of a split, each moved into its own task (tests/scheduling.rs does).
assert_value!(SplitSink<AsyncSocket, Vec<Msg>>: Send & Sync & Unpin);
assert_value!(SplitStream<AsyncSocket>: Send & Sync & Unpin);

/// An async block awaiting the socket's futures is `Send` too (what `tokio::spawn` needs).
const _: fn() = || {
    let mut s: AsyncSocket = any();
    let task = async move {
        s.send("ping").await.unwrap();
        let _ = s.recv().await.unwrap();
        let _ = s.recv_multipart().await.unwrap();
        s
    };
    send(&task);
};
