//! Fuzz target `sockopt`: socket option values, Z85 CURVE keys and TCP accept filters included
//! (`rzmq_core::testing::fuzz_sockopt`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rzmq_core::testing::fuzz_sockopt(data));
