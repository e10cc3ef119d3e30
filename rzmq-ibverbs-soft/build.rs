//! The cdylib is loaded as `libibverbs.so.1`: give it that soname.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libibverbs.so.1");
}
