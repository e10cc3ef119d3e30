//! Fuzz target `soft_wire`: the soft provider's wire (packet headers and payload framing) and
//! the soft part of an endpoint descriptor (`rzmq_rdma::testing::fuzz_soft_wire`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rzmq_rdma::testing::fuzz_soft_wire(data));
