"""A CPU platform for vllm-omni 0.30, for rzmq's tests (never shipped in the rzmq wheel).

vllm-omni ships platforms for CUDA, ROCm, NPU, XPU and MUSA only; on a CPU machine a stage
fails in `get_omni_ar_worker_cls`. vllm-omni loads platforms from the
`vllm_omni.platform_plugins` entry point, which this package declares: `platform_plugin()`
activates `CPUOmniPlatform` when vLLM's own platform is its CPU one. The workers are vLLM's
CPU worker running vllm-omni's model runners, as vllm-omni's XPU workers pair XPUWorker with
the same runners.
"""

from __future__ import annotations


def platform_plugin() -> str | None:
    """The platform's qualified name when vLLM runs on its CPU platform, else None."""
    try:
        from vllm.platforms import current_platform

        if not current_platform.is_cpu():
            return None
    except Exception:  # noqa: BLE001  (vLLM missing or broken: not ours to activate)
        return None
    return "rzmq_omni_cpu.platform.CPUOmniPlatform"
