"""Holds libzmq.so.5 (rzmq-capi) in built wheels."""
