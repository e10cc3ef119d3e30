//! Build script: gives the C ABI library libzmq 4.x's soname.

fn main() {
    // The shared library is libzmq.so with the soname of libzmq 4.x.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libzmq.so.5");
}
