//! Fuzz target `socks`: a SOCKS5 handshake fed the proxy's answers
//! (`rzmq_core::testing::fuzz_socks`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rzmq_core::testing::fuzz_socks(data));
