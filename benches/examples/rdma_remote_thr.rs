//! `remote_thr` (rzmq-core/examples/remote_thr.rs, libzmq's command line and output) with the RDMA
//! upgrader installed first, as the C ABI does when it creates a context: tcp connections move
//! to RDMA as `RZMQ_RDMA` and `RZMQ_RDMA_PROVIDER` say (e.g. `RZMQ_RDMA=require
//! RZMQ_RDMA_PROVIDER=soft`; `RZMQ_RDMA_LOG=1` prints the transport of each connection).

#[path = "../../rzmq-core/examples/remote_thr.rs"]
mod tool;

fn main() {
    rzmq_rdma::install();
    tool::main();
}
