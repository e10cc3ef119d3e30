//! Fuzz target `rdma_ring`: the credit ring's receive side fed a peer's WRITEs, notifications and
//! credit updates (`rzmq_rdma::testing::fuzz_ring`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rzmq_rdma::testing::fuzz_ring(data));
