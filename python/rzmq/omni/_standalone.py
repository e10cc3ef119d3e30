"""What RzmqConnector takes from vllm-omni, for processes that run vLLM without vllm-omni.

vLLM's own EC and KV connectors (rzmq.vllm) move their data through RzmqConnector. Where
vllm-omni is installed RzmqConnector subclasses its OmniConnectorBase and uses its environment
expansion; elsewhere it uses these. Payloads here are tensors, arrays and buffers only: a
Python object would need a serializer, and unpickling what a peer sent is not safe, so it is
refused.
"""

from __future__ import annotations

import os
import re
from typing import Any

AUTO_HOST_VALUES = {"", "auto", "*", "0.0.0.0", "::"}
_UNSET = re.compile(r"\$(\w+)|\$\{(\w+)\}")


def expand_env_value(value: Any, *, strict: bool = False, field_name: str = "value") -> Any:
    """`value` with $VAR and ${VAR} replaced from the environment; strict: an unset one is an error."""
    if not isinstance(value, str):
        return value
    out = os.path.expandvars(value)
    if strict:
        unset = sorted({a or b for a, b in _UNSET.findall(out)})
        if unset:
            raise ValueError(f"{field_name} names unset environment variable(s): {', '.join(unset)} ({value!r})")
    return out


def expand_env_int(value: Any, field_name: str) -> int:
    """expand_env_value, strict, as an integer."""
    out = expand_env_value(value, strict=True, field_name=field_name)
    try:
        return int(out)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{field_name} must be an integer, got {out!r}") from e


class OmniConnectorBase:
    """The base RzmqConnector needs: keys, context management, no object serializer."""

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        """Releases the connector's resources (subclasses)."""

    @staticmethod
    def serialize_obj(obj: Any) -> bytes:
        """Refused: without vllm-omni only tensors, arrays and buffers travel."""
        raise TypeError(f"RzmqConnector without vllm-omni moves tensors, arrays and buffers, not {type(obj).__name__}")

    @staticmethod
    def deserialize_obj(data: bytes) -> Any:
        """Refused, as serialize_obj."""
        raise TypeError("RzmqConnector without vllm-omni cannot decode an object payload")

    @staticmethod
    def _make_key(key: str, from_stage: str, to_stage: str, separator: str = "@") -> str:
        return f"{key}{separator}{from_stage}_{to_stage}"
