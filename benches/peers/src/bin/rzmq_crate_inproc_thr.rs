fn main() {
    rzmq_bench_peers::rzmq_crate::inproc_thr();
}
