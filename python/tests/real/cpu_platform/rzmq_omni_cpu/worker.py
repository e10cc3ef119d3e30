"""vLLM's CPU worker running vllm-omni's AR and generation model runners.

Each runner class puts vllm-omni's runner before vLLM's CPUModelRunner in the MRO, so the omni
hooks (stage payloads, connectors) come from vllm-omni and the device handling (no CUDA
streams, CPU buffers, no graphs) from vLLM's CPU runner.
"""

from __future__ import annotations

import torch
from vllm.logger import init_logger
from vllm.v1.worker.cpu_model_runner import CPUModelRunner
from vllm.v1.worker.cpu_worker import CPUWorker

from vllm_omni.worker.gpu_ar_model_runner import GPUARModelRunner
from vllm_omni.worker.gpu_generation_model_runner import GPUGenerationModelRunner
from vllm_omni.worker.mixins import OmniWorkerMixin

logger = init_logger(__name__)


class CPUARModelRunner(GPUARModelRunner, CPUModelRunner):
    """vllm-omni's AR runner (thinker, talker) on CPU."""

    def _sync_device(self) -> None:
        return None


class CPUGenerationModelRunner(GPUGenerationModelRunner, CPUModelRunner):
    """vllm-omni's generation runner (code2wav) on CPU."""

    def _sync_device(self) -> None:
        return None

    def load_model(self, *args, **kwargs) -> None:
        super().load_model(*args, **kwargs)
        from rzmq_omni_cpu import trace

        trace.watch_noise(self.model)  # only when tracing (RZMQ_REAL_TRACE_DIR)


class _CPUOmniWorker(OmniWorkerMixin, CPUWorker):
    model_runner_cls: type

    def init_device(self):
        super().init_device()
        if self.use_v2_model_runner:
            logger.warning("rzmq_omni_cpu: the v2 model runner has no omni hooks; using v1")
            self.use_v2_model_runner = False
        self.model_runner = self.model_runner_cls(self.vllm_config, torch.device("cpu"))

    def compile_or_warm_up_model(self):
        # vLLM's GPU worker runs dummy forwards here; its CPU worker in eager mode runs none.
        # Qwen2.5-Omni's talker sets its voice_type during its first forward, so one dummy
        # forward is needed before the first request (the seed is reset afterwards).
        self.model_runner._dummy_run(min(16, self.scheduler_config.max_num_batched_tokens))
        return super().compile_or_warm_up_model()


class CPUARWorker(_CPUOmniWorker):
    """AR stages (thinker, talker) on vLLM's CPU worker."""

    model_runner_cls = CPUARModelRunner


class CPUGenerationWorker(_CPUOmniWorker):
    """Generation stages (code2wav) on vLLM's CPU worker."""

    model_runner_cls = CPUGenerationModelRunner
