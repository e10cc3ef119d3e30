fn main() {
    rzmq_bench_peers::rzmq_crate::local_lat();
}
