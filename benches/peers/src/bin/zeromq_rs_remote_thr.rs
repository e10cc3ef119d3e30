fn main() {
    rzmq_bench_peers::zeromq_rs::remote_thr();
}
