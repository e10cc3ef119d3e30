fn main() {
    rzmq_bench_peers::zeromq_rs::local_lat();
}
