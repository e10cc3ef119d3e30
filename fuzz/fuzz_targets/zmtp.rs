//! Fuzz target `zmtp`: a ZMTP connection (every scenario: NULL, ZAP, XPUB, MAXMSGSIZE, PLAIN and
//! CURVE server and client) fed arbitrary bytes as from its socket
//! (`rzmq_core::testing::fuzz_zmtp`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rzmq_core::testing::fuzz_zmtp(data));
