//! Fuzz target `endpoint`: endpoint strings: parsing, tcp syntax, numeric resolution, ipc paths,
//! SOCKS targets (`rzmq_core::testing::fuzz_endpoint`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rzmq_core::testing::fuzz_endpoint(data));
