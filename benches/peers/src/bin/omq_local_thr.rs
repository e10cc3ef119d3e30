fn main() {
    rzmq_bench_peers::omq::local_thr();
}
