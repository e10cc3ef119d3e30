fn main() {
    rzmq_bench_peers::omq::remote_lat();
}
