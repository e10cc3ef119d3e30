fn main() {
    rzmq_bench_peers::rzmq_crate::remote_thr();
}
