"""CPUOmniPlatform: vLLM's CpuPlatform with vllm-omni's OmniPlatform interface."""

from __future__ import annotations

import psutil
import torch
from vllm.platforms.cpu import CpuPlatform

from vllm_omni.platforms.interface import OmniPlatform, OmniPlatformEnum


class CPUOmniPlatform(OmniPlatform, CpuPlatform):
    """vllm-omni on vLLM's CPU engines: AR and generation stages run in CPU workers."""

    _omni_enum = OmniPlatformEnum.OOT

    @classmethod
    def get_omni_ar_worker_cls(cls) -> str:
        return "rzmq_omni_cpu.worker.CPUARWorker"

    @classmethod
    def get_omni_generation_worker_cls(cls) -> str:
        return "rzmq_omni_cpu.worker.CPUGenerationWorker"

    @classmethod
    def get_default_stage_config_path(cls) -> str:
        return "vllm_omni/model_executor/stage_configs"

    @classmethod
    def get_diffusion_attn_backend_cls(cls, selected_backend, head_size, allow_trtllm_default=False) -> str:
        from vllm_omni.diffusion.attention.backends.registry import DiffusionAttentionBackendEnum

        return DiffusionAttentionBackendEnum.TORCH_SDPA.get_path()

    @classmethod
    def supports_torch_inductor(cls) -> bool:
        return False

    @classmethod
    def supports_talker_mtp_graph_capture(cls) -> bool:
        return False

    @classmethod
    def supports_diffusion_dense_flash_attention(cls) -> bool:
        return False

    @classmethod
    def get_torch_device(cls, local_rank: int | None = None) -> torch.device:
        return torch.device("cpu")

    @classmethod
    def get_device_count(cls) -> int:
        return 1

    @classmethod
    def get_device_version(cls) -> str | None:
        return None

    @classmethod
    def synchronize(cls) -> None:
        return None

    @classmethod
    def empty_cache(cls) -> None:
        return None

    @classmethod
    def get_free_memory(cls, device: torch.device | None = None) -> int:
        return psutil.virtual_memory().available

    @classmethod
    def get_device_memory(cls, device: torch.device | None = None) -> tuple[int, int]:
        vm = psutil.virtual_memory()
        return vm.available, vm.total
