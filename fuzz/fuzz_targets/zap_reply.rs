//! Fuzz target `zap_reply`: ZAP replies decoded by NULL, PLAIN and CURVE servers waiting for one
//! (`rzmq_core::testing::fuzz_zap_reply`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rzmq_core::testing::fuzz_zap_reply(data));
