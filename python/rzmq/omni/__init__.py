"""rzmq's vllm-omni connector: stage data (embeddings, hidden states, KV caches) over rzmq.

vllm-omni loads `register()` in every process through its `vllm_omni.general_plugins` entry
point (declared by the rzmq wheel), after which a stage config selects the connector by name:

    connectors:
      rzmq:
        name: RzmqConnector
        extra: {host: auto, zmq_port: 0, memory_pool_size: 1073741824, buffer_ttl_seconds: 300}

RzmqConnector subclasses vllm-omni's OmniConnectorBase where vllm-omni is installed; without it
(vLLM's own EC and KV connectors, rzmq.vllm) it moves tensors, arrays and buffers only.
"""

from __future__ import annotations

from .payload import Parts, RecvBuffer, RecvParts, Shared

CONNECTOR_NAME = "RzmqConnector"

__all__ = ["CONNECTOR_NAME", "Parts", "RecvBuffer", "RecvParts", "Shared", "register", "RzmqConnector"]


def _create(config):
    from .connector import RzmqConnector

    return RzmqConnector(config)


def register() -> bool:
    """Registers RzmqConnector with vllm-omni's OmniConnectorFactory (once; True if this call did)."""
    from vllm_omni.distributed.omni_connectors.factory import OmniConnectorFactory

    if CONNECTOR_NAME in OmniConnectorFactory.list_registered_connectors():
        return False
    OmniConnectorFactory.register_connector(CONNECTOR_NAME, _create)
    return True


def __getattr__(name):
    if name == "RzmqConnector":
        from .connector import RzmqConnector

        return RzmqConnector
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
