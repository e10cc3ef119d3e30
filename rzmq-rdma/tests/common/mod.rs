//! Helpers shared by the soft-provider tests.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rzmq_core::msg::Msg;

/// An external frame (as zmq_msg_init_data) whose release callback counts into `released`.
pub(crate) fn external(data: Vec<u8>, released: &Arc<AtomicUsize>) -> Msg {
    let mut data = data.into_boxed_slice();
    let (ptr, len) = (data.as_mut_ptr(), data.len());
    let r = released.clone();
    // SAFETY: the boxed slice moves into the release closure, which keeps it alive until the
    // last owner of the message runs it.
    unsafe {
        Msg::from_external(
            ptr,
            len,
            Some(Box::new(move || {
                drop(data);
                r.fetch_add(1, Ordering::SeqCst);
            })),
        )
    }
}
