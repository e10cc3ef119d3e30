//! Fuzz target `curve`: the CURVE handshake and `MESSAGE` boxes only, as server and as client
//! (`rzmq_core::testing::fuzz_zmtp` restricted to its two CURVE scenarios).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rzmq_core::testing::fuzz_curve(data));
