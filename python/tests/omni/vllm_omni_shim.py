"""Imports vllm-omni 0.30.0's connector layer on a machine without torch (tests and benchmarks only).

vllm-omni's package `__init__` files import torch and vLLM (vllm_omni/patch.py, the model
config, every connector in omni_connectors/__init__.py), which cannot be installed here. The
connector layer itself does not need them. `install()` therefore:

1. registers the packages `vllm_omni`, `vllm_omni.distributed`, `vllm_omni.distributed.
   omni_connectors`, `vllm_omni.config` and `vllm_omni.entrypoints` as empty package shells
   whose `__path__` is the installed wheel's own directory: every module imported below them
   (connectors/base.py, factory.py, utils/config.py, utils/initialization.py,
   utils/serialization.py, connectors/shm_connector.py, entrypoints/stage_utils.py,
   config/yaml_util.py) is the wheel's real file, run unmodified; only the package `__init__`
   files are not run;
2. provides stand-ins for what those real modules import but never use on the paths under test:
   - `torch`: a module whose `Tensor` class nothing is an instance of (OmniSerializer's
     `isinstance(obj, torch.Tensor)` checks then take the numpy and plain-object branches);
   - `vllm.outputs`: `RequestOutput` and `CompletionOutput` classes, likewise never instantiated;
   - `vllm_omni.platforms`: `current_omni_platform = None` (stage_utils uses it only to pick a
     GPU, in functions the shared-memory connector does not call).
Nothing is stubbed when the real modules are importable (a machine with torch and vLLM).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types

_SHELLS = ("vllm_omni", "vllm_omni.distributed", "vllm_omni.distributed.omni_connectors", "vllm_omni.config",
           "vllm_omni.entrypoints")


def _real_importable(name: str) -> bool:
    try:
        __import__(name)
        return True
    except ImportError:
        return False


def install() -> list[str]:
    """Installs the shells and stand-ins this machine needs; returns the names stood in for."""
    if "vllm_omni.distributed.omni_connectors.factory" in sys.modules:
        return []
    spec = importlib.util.find_spec("vllm_omni")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("vllm-omni is not installed (pip install --no-deps vllm-omni==0.30.0)")
    if _real_importable("torch") and _real_importable("vllm"):
        import vllm_omni.distributed.omni_connectors  # noqa: F401  (the real thing)
        return []
    stood_in = []
    root = list(spec.submodule_search_locations)[0]
    for name in _SHELLS:
        mod = types.ModuleType(name)
        rel = name.split(".")[1:]
        mod.__path__ = [os.path.join(root, *rel)]
        mod.__package__ = name
        mod.__file__ = os.path.join(root, *rel, "__init__.py")
        sys.modules[name] = mod
        stood_in.append(name + " (package shell)")
    if "torch" not in sys.modules and not _real_importable("torch"):
        torch = types.ModuleType("torch")

        class Tensor:  # noqa: D401 - nothing is ever an instance
            """Stand-in: no object is a torch.Tensor here."""

        torch.Tensor = Tensor
        sys.modules["torch"] = torch
        stood_in.append("torch")
    if not _real_importable("vllm.outputs"):
        vllm = sys.modules.get("vllm") or types.ModuleType("vllm")
        vllm.__path__ = []
        outputs = types.ModuleType("vllm.outputs")

        class RequestOutput:
            """Stand-in, never instantiated."""

        class CompletionOutput:
            """Stand-in, never instantiated."""

        outputs.RequestOutput, outputs.CompletionOutput = RequestOutput, CompletionOutput
        vllm.outputs = outputs
        sys.modules["vllm"], sys.modules["vllm.outputs"] = vllm, outputs
        stood_in.append("vllm.outputs")
    if "vllm_omni.platforms" not in sys.modules:
        platforms = types.ModuleType("vllm_omni.platforms")
        platforms.current_omni_platform = None
        sys.modules["vllm_omni.platforms"] = platforms
        stood_in.append("vllm_omni.platforms")
    return stood_in
