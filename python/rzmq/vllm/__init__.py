"""rzmq's connectors for vLLM's own disaggregation: encoder embeddings and KV caches over rzmq.

- RzmqECConnector (rzmq.vllm.ec): encoder-cache (EC) connector, encoder instances -> prefill or
  prefill/decode instances (`--ec-transfer-config`, roles ec_producer, ec_consumer, ec_both).
- RzmqKVConnector (rzmq.vllm.kv): KV connector, prefill -> decode, layer by layer
  (`--kv-transfer-config`, roles kv_producer, kv_consumer).

vLLM loads `register()` in every process it starts through the `vllm.general_plugins` entry
point the rzmq wheel declares (plugin name `rzmq`; with VLLM_PLUGINS set, include `rzmq`), after
which the connector names work in vLLM's configs with no change to vLLM. In a vllm-omni process
it registers vllm-omni's RzmqConnector as well (vllm-omni's engine-core processes load only
vLLM's plugins). Both move their data through RzmqConnector (rzmq.omni.connector): over rzmq's RDMA data path between rzmq hosts
(processes started with `rzmq run`), over TCP elsewhere. docs/VLLM_CONNECTORS.md has the flags.
"""

from __future__ import annotations

import sys

EC_CONNECTOR = "RzmqECConnector"
KV_CONNECTOR = "RzmqKVConnector"

__all__ = ["EC_CONNECTOR", "KV_CONNECTOR", "register"]


def register() -> list[str]:
    """Registers both connectors with vLLM's factories by name; returns the names this call added."""
    added = []
    try:
        from vllm.distributed.ec_transfer.ec_connector.factory import ECConnectorFactory
    except ImportError:  # a vLLM without EC transfer: the KV connector still registers
        ECConnectorFactory = None
    if ECConnectorFactory is not None and EC_CONNECTOR not in ECConnectorFactory._registry:
        ECConnectorFactory.register_connector(EC_CONNECTOR, "rzmq.vllm.ec", EC_CONNECTOR)
        added.append(EC_CONNECTOR)
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    if KV_CONNECTOR not in KVConnectorFactory._registry:
        KVConnectorFactory.register_connector(KV_CONNECTOR, "rzmq.vllm.kv", KV_CONNECTOR)
        added.append(KV_CONNECTOR)
    if "vllm_omni" in sys.modules:
        # A vllm-omni stage's engine-core process loads vLLM's plugins only, not vllm-omni's, yet
        # its scheduler creates the stage's connector for streaming (async_chunk): RzmqConnector
        # must be known there too. Only where vllm-omni is already loaded: plain vLLM never
        # imports it because of us.
        from .. import omni

        if omni.register():
            added.append(omni.CONNECTOR_NAME)
    return added
