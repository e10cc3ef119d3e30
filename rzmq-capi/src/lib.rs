//! rzmq-capi: the libzmq 4.3 C ABI.
