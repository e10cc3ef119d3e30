"""What a put() sends and what a get() hands back.

put() turns its data into parts (buffers sent without copying) plus a description:
- raw buffers (bytes, bytearray, memoryview, numpy arrays, torch tensors, vllm-omni's
  ManagedBuffer or anything else with `.tensor` and `.release`): one part, the buffer itself
  (a CPU tensor or a C-contiguous array is not copied; a device tensor is copied to host once);
- `Parts([...])`: several raw buffers, one frame each (vLLM's own main-frame-plus-tensors shape);
- `Shared(data, content)`: the data, named by its content so that consumers on one host fetch it
  once and a producer stores it once;
- anything else: vllm-omni's own serializer (`OmniConnectorBase.serialize_obj`), one part.

get() hands raw payloads back as `RecvBuffer`s (vllm-omni's ManagedBuffer contract: `.tensor`,
`.as_tensor`, `.to_bytes`, `.release`, plus `.buffer` and `.numpy()`), which are views of the
received message or of the host cache's shared memory, never copies.
"""

from __future__ import annotations

import sys
from typing import Any


class Parts:
    """Several raw buffers sent as one payload, one frame each; get() returns a `RecvParts`."""

    __slots__ = ("items",)

    def __init__(self, items):
        self.items = list(items)


class Shared:
    """A payload named by its content (e.g. a hash of the media an embedding encodes).

    Consumers on one host fetch a shared payload once (the host cache), and a producer stores one
    copy for every key that names the same content.
    """

    __slots__ = ("data", "content")

    def __init__(self, data, content: str):
        if not isinstance(content, str) or not content:
            raise ValueError("Shared needs a non-empty content id (str)")
        self.data = data
        self.content = content


def _torch():
    return sys.modules.get("torch")


def _is_tensor(x) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, getattr(torch, "Tensor", ()))


def raw_part(x) -> tuple[Any, dict[str, Any]] | None:
    """(buffer, description) for a raw buffer, None when `x` is not one."""
    if isinstance(x, (bytes, bytearray)):
        return x, {}
    if isinstance(x, memoryview):
        return (x if x.contiguous else x.tobytes()), {}
    if hasattr(x, "tensor") and hasattr(x, "release"):  # vllm-omni ManagedBuffer and alikes
        x = x.tensor
    if _is_tensor(x):
        t = x.detach()
        if getattr(t.device, "type", "cpu") != "cpu":
            t = t.cpu()
        t = t.contiguous()
        desc = {"dtype": "torch:" + str(t.dtype).removeprefix("torch."), "shape": list(t.shape)}
        return t.view(-1).view(_torch().uint8).numpy(), desc
    np = sys.modules.get("numpy")
    if np is not None and isinstance(x, np.ndarray):
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        return x, {"dtype": "numpy:" + x.dtype.str, "shape": list(x.shape)}
    return None


def _nbytes(buf) -> int:
    return memoryview(buf).nbytes


def encode(data, serialize) -> tuple[list, dict[str, Any], str | None]:
    """(parts, meta, content id) for put()'s data; `serialize` turns other objects into bytes."""
    content = None
    if isinstance(data, Shared):
        content, data = data.content, data.data
    if isinstance(data, Parts):
        parts = []
        for item in data.items:
            raw = raw_part(item)
            if raw is None:
                raise TypeError(f"Parts holds a {type(item).__name__}, not a raw buffer")
            parts.append(raw[0])
        meta = {"kind": "parts"}
    else:
        raw = raw_part(data)
        if raw is not None:
            parts, meta = [raw[0]], {"kind": "raw", **raw[1]}
        else:
            parts, meta = [serialize(data)], {"kind": "obj"}
    sizes = [_nbytes(p) for p in parts]
    meta["parts"] = sizes
    meta["size"] = sum(sizes)
    return parts, meta, content


class RecvBuffer:
    """A received raw payload: a read-only view of memory rzmq received into (or of the host
    cache), released with `release()` (vllm-omni's ManagedBuffer contract)."""

    __slots__ = ("_view", "_keep", "meta", "size", "_released")

    def __init__(self, view: memoryview, keep, meta: dict[str, Any]):
        view = view.cast("B") if view.format != "B" or view.ndim != 1 else view
        self._view = view.toreadonly()
        self._keep = keep  # the zmq.Frame or mmap the view points into
        self.meta = meta
        self.size = self._view.nbytes
        self._released = False

    def _alive(self) -> memoryview:
        if self._released:
            raise ValueError("RecvBuffer used after release()")
        return self._view

    @property
    def buffer(self) -> memoryview:
        """The bytes, as a read-only memoryview (no copy)."""
        return self._alive()

    def numpy(self):
        """The payload as a numpy array: with the sender's dtype and shape for arrays, else uint8."""
        import numpy as np

        view = self._alive()
        dtype = self.meta.get("dtype") or ""
        if dtype.startswith("numpy:"):
            return np.frombuffer(view, dtype=np.dtype(dtype[6:])).reshape(self.meta["shape"])
        return np.frombuffer(view, dtype=np.uint8)

    @property
    def tensor(self):
        """A 1-D uint8 torch tensor over the bytes (no copy), as ManagedBuffer.tensor."""
        import torch

        import warnings

        with warnings.catch_warnings():  # the view is read-only; torch warns about that
            warnings.simplefilter("ignore")
            return torch.frombuffer(self._alive(), dtype=torch.uint8)

    def as_tensor(self, dtype, shape):
        """A typed, shaped torch view, as ManagedBuffer.as_tensor."""
        return self.tensor.view(dtype).reshape(shape)

    def to_tensor(self):
        """The sender's tensor (dtype and shape restored) when it sent one, else `tensor`."""
        import torch

        dtype = self.meta.get("dtype") or ""
        if dtype.startswith("torch:"):
            return self.as_tensor(getattr(torch, dtype[6:]), self.meta["shape"])
        return self.tensor

    def to_bytes(self) -> bytes:
        """A copy of the bytes."""
        return self._alive().tobytes()

    def release(self) -> None:
        """Gives the memory back (to rzmq's receive pool, or unmaps the host cache's file)."""
        if not self._released:
            self._released = True
            try:
                self._view.release()
            except BufferError:  # arrays made from it still live; they keep the memory until they go
                pass
            self._keep = None

    def __len__(self) -> int:
        return self.size

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __del__(self):
        try:
            self.release()
        except Exception:  # noqa: BLE001 (a view still exported elsewhere keeps the memory)
            pass


class RecvParts(list):
    """The parts of a `Parts` payload, each a RecvBuffer; `release()` releases them all."""

    @property
    def size(self) -> int:
        """Total bytes."""
        return sum(p.size for p in self)

    def release(self) -> None:
        """Releases every part."""
        for p in self:
            p.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def decode(meta: dict[str, Any], views: list[memoryview], keep, deserialize):
    """What get() returns for a payload described by `meta` whose parts are `views`."""
    kind = meta["kind"]
    if kind == "obj":
        return deserialize(views[0])
    if kind == "raw":
        return RecvBuffer(views[0], keep, meta)
    return RecvParts(RecvBuffer(v, keep, {"kind": "raw", "size": v.nbytes, "parts": [v.nbytes]}) for v in views)
