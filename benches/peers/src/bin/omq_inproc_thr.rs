fn main() {
    rzmq_bench_peers::omq::inproc_thr();
}
