//! Fuzz target `curve`: the CURVE handshake and `MESSAGE` boxes only, as server and as client
//! (`rzmq_core::testing::fuzz_zmtp` restricted to its two CURVE scenarios).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let [role, rest @ ..] = data {
        let scenario = rzmq_core::testing::ZMTP_CURVE_SERVER + (role & 1);
        rzmq_core::testing::fuzz_zmtp(&[&[scenario][..], rest].concat());
    }
});
