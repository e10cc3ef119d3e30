//! rzmq-rdma: the RDMA transport (providers, credit ring, rendezvous).
