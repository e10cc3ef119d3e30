//! Writes the seed corpora under `fuzz/corpus/<target>/` from rzmq's own encoders and genuine
//! peers (`rzmq_core::testing::seed_*`, `rzmq_rdma::testing::seed_*`):
//! `cargo +nightly run --manifest-path fuzz/Cargo.toml --example gen_corpus`.
//!
//! Seeds recorded from CURVE peers hold fresh ephemeral keys and cookies, so they differ from
//! run to run; the rest are deterministic.

use std::fs;
use std::path::{Path, PathBuf};

fn write(dir: &Path, target: &str, seeds: &[Vec<u8>]) {
    let d = dir.join(target);
    fs::create_dir_all(&d).expect("create the corpus directory");
    for (i, s) in seeds.iter().enumerate() {
        fs::write(d.join(format!("seed-{i:02}")), s).expect("write a seed");
    }
    println!("{target}: {} seeds", seeds.len());
}

fn main() {
    let dir: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    use rzmq_core::testing as c;
    use rzmq_rdma::testing as r;

    let mut zmtp = Vec::new();
    for s in 0..c::ZMTP_SCENARIOS {
        let seed = c::seed_zmtp(s);
        // The same bytes read 7 at a time (a greeting and frames cut across reads).
        let mut split = seed.clone();
        split[1] = 7;
        zmtp.push(seed);
        zmtp.push(split);
    }
    write(&dir, "zmtp", &zmtp);
    // The curve target's first byte picks server (even) or client (odd).
    let curve: Vec<Vec<u8>> = (0..2)
        .map(|role| {
            let mut s = c::seed_zmtp(c::ZMTP_CURVE_SERVER + role);
            s.remove(0);
            s.insert(0, role);
            s
        })
        .collect();
    write(&dir, "curve", &curve);
    write(&dir, "zap_reply", &c::seed_zap_reply());
    write(&dir, "socks", &c::seed_socks());
    write(&dir, "endpoint", &c::seed_endpoint());
    write(&dir, "sockopt", &c::seed_sockopt());
    write(&dir, "rdma_connect_info", &r::seed_connect_info());
    write(&dir, "soft_wire", &r::seed_soft_wire());
    let ring: Vec<Vec<u8>> = (0..5u8).map(|sel| r::seed_ring(sel, 40)).collect();
    write(&dir, "rdma_ring", &ring);
}
