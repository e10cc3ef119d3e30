//! rzmq-core: ZeroMQ sockets in Rust.
pub mod error;
pub mod msg;
