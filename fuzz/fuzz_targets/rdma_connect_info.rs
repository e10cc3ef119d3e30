//! Fuzz target `rdma_connect_info`: the RDMA upgrade blob (connect info and QP endpoint
//! descriptor), with a round-trip check (`rzmq_rdma::testing::fuzz_connect_info`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rzmq_rdma::testing::fuzz_connect_info(data));
