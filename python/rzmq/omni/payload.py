"""What a put() sends and what a get() hands back.

put() turns its data into parts (buffers sent without copying) plus a description:
- raw buffers (bytes, bytearray, memoryview, numpy arrays, torch tensors, vllm-omni's
  ManagedBuffer or anything else with `.tensor` and `.release`): one part, the buffer itself
  (a CPU tensor or a C-contiguous array is not copied; a device tensor is copied to host once);
- `Parts([...])`: several raw buffers, one frame each (vLLM's own main-frame-plus-tensors shape);
- `Shared(data, content)`: the data, named by its content so that consumers on one host fetch it
  once and a producer stores it once;
- a dict, list or tuple holding torch tensors or numpy arrays at any depth (vllm-omni's stage
  payloads: `{"embed": {"prefill": Tensor}, "ids": {...}, "meta": {...}}`), kind "tree": part 0
  is vllm-omni's serializer's output for a skeleton in which each tensor is a small placeholder
  (`{TREE_KEY: [tag, part index or inline bytes, dtype, shape]}`), and each tensor is one more
  part, its bytes sent without copying (CPU contiguous tensors are not copied; others are made
  contiguous or copied to host once, counted in meta "copies"); tensors of at most INLINE_MAX
  bytes travel inside the skeleton;
- anything else: vllm-omni's own serializer (`OmniConnectorBase.serialize_obj`), one part.

get() hands raw payloads back as `RecvBuffer`s (vllm-omni's ManagedBuffer contract: `.tensor`,
`.as_tensor`, `.to_bytes`, `.release`, plus `.buffer` and `.numpy()`), which are views of the
received message or of the host cache's shared memory, never copies. A "tree" comes back as the
sender's dicts and lists with each tensor (array) a view of its received frame: same dtype, shape
and bytes, no copy; the tensor keeps the frame alive. Such tensors share memory with the message
(or the host cache's read-only mapping): read them, or clone before writing in place.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

TREE_KEY = "__rzmq_tree__"  # the one key of a placeholder dict in a "tree" skeleton
INLINE_MAX = 256  # tensors of at most this many bytes travel inside the skeleton (as vLLM's)
MAX_TREE_PARTS = 1024  # tensors beyond this many go through the serializer (meta stays small)


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


_LEAVES = frozenset((str, int, float, bool, type(None), bytes))  # what holds no tensor


def _is_struct(x) -> bool:
    msgspec = sys.modules.get("msgspec")
    return msgspec is not None and isinstance(x, msgspec.Struct)


def struct_to_dict(x):
    """A msgspec Struct (vllm-omni's OmniPayloadStruct and its parts) as the dict vllm-omni's
    serializer turns it into on the way through a connector: fields in order, those equal to
    their default left out (its structs are `omit_defaults`), nested structs converted too. The
    consumer gets the same dict whether the payload went through the serializer or as a tree."""
    import msgspec

    cfg = x.__struct_config__
    fields = x.__struct_fields__
    defaults = x.__struct_defaults__
    first_default = len(fields) - len(defaults)
    out = {}
    for i, name in enumerate(fields):
        value = getattr(x, name)
        if cfg.omit_defaults and i >= first_default:
            d = defaults[i - first_default]
            if isinstance(d, msgspec._core.Factory):
                d = d.factory()
            if value is d or (type(value) is type(d) and type(d) in _LEAVES | {list, dict, set}
                              and value == d):
                continue
        out[name] = struct_to_dict(value) if _is_struct(value) else value
    return out


class _Split:
    """Takes the tensors and arrays out of a payload: a skeleton plus one buffer per tensor."""

    def __init__(self):
        self.bufs: list = []  # the tensors' bytes, parts 1.. of the payload
        self.found = 0  # tensors and arrays replaced by placeholders
        self.copies = 0  # tensors whose bytes had to be copied (made contiguous, moved to host)
        self.copied = 0  # bytes those copies moved
        self.inlined = 0  # tensors that travel inside the skeleton
        self._seen: dict[int, dict] = {}  # id of a tensor met before -> its placeholder

    def walk(self, x):
        """`x` with its tensors replaced; the same object where nothing inside changed."""
        if type(x) in _LEAVES:
            return x
        if isinstance(x, dict):
            out = None
            for k, v in x.items():
                w = self.walk(v)
                if w is not v:
                    if out is None:
                        out = dict(x)
                    out[k] = w
            out = x if out is None else out
            # a user dict with the reserved key is wrapped, so it never reads as a placeholder
            return {TREE_KEY: ["d", out]} if TREE_KEY in x else out
        if isinstance(x, (list, tuple)):
            if _LEAVES.issuperset(map(type, x)):  # token ids and alike: no walk per item
                return x
            items = [self.walk(v) for v in x]
            if all(w is v for w, v in zip(items, x)):
                return x
            return items if isinstance(x, list) else tuple(items)
        if id(x) in self._seen:  # one tensor in two places: one part, two placeholders
            self.found += 1
            return self._seen[id(x)]
        if _is_tensor(x):
            return self._remember(x, self._tensor(x))
        np = sys.modules.get("numpy")
        if np is not None and type(x) is np.ndarray and x.dtype.kind not in "OV":
            return self._remember(x, self._array(x))
        return x  # other objects are the serializer's (it copies what tensors they hold)

    def _remember(self, x, placeholder):
        if placeholder is not x:
            self._seen[id(x)] = placeholder  # `x` lives in the payload while we walk: ids stay unique
        return placeholder

    def _full(self, nbytes: int) -> bool:
        return nbytes > INLINE_MAX and len(self.bufs) >= MAX_TREE_PARTS

    def _place(self, tag: str, buf, dtype: str, shape: list):
        if _nbytes(buf) <= INLINE_MAX:  # empty tensors always: a zero-length frame gains nothing
            self.inlined += 1
            where = memoryview(buf).tobytes()
        else:
            self.bufs.append(buf)
            where = len(self.bufs)  # part 0 is the skeleton
        self.found += 1
        return {TREE_KEY: [tag, where, dtype, shape]}

    def _tensor(self, x):
        torch = _torch()
        if x.layout != torch.strided or x.is_quantized or x.is_nested or x.device.type == "meta":
            return x  # no plain bytes to send: the serializer's
        if self._full(x.nbytes):
            return x
        t = x.detach() if x.requires_grad else x
        if t.is_conj() or t.is_neg():  # lazy bits: the bytes are not the values yet
            t = t.resolve_conj().resolve_neg()
            self._count_copy(t)
        if t.device.type != "cpu":
            host = torch.empty(t.shape, dtype=t.dtype)  # contiguous, whatever t's strides
            host.copy_(t)  # one copy to host
            t = host
            self._count_copy(t)
        elif not t.is_contiguous():
            t = t.contiguous()
            self._count_copy(t)
        # A slice (vllm-omni sends the prompt's and the output's rows of a request's hidden
        # states) goes from its storage as it is: no copy, and that storage stays alive until
        # the key is released. The producer must not change it before then (put_tracked says
        # when); the real pipeline's runs check every payload a consumer got against the put.
        buf = t.reshape(-1).view(torch.uint8).numpy()  # every dtype (bfloat16 too) as bytes
        return self._place("t", buf, str(t.dtype).removeprefix("torch."), list(t.shape))

    def _array(self, x):
        np = sys.modules["numpy"]
        if self._full(x.nbytes):
            return x
        a = x
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
            self._count_copy(a)
        buf = a.reshape(-1).view(np.uint8)
        return self._place("n", buf, a.dtype.str, list(a.shape))

    def _count_copy(self, t) -> None:
        self.copies += 1
        self.copied += t.nbytes


def _shape(shape) -> tuple[int, ...]:
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise ValueError(f"bad shape {shape!r} in a tree payload")
    return tuple(shape)


def _sized_shape(shape, itemsize: int, view, dtype) -> tuple[int, ...]:
    """The checked shape of a tensor or array whose bytes are `view` (ValueError if they differ)."""
    shape = _shape(shape)
    count = 1
    for d in shape:
        count *= d
    if count * itemsize != view.nbytes:
        raise ValueError(f"{view.nbytes} bytes for a {dtype}{list(shape)} tensor")
    return shape


def _tensor_of(view, dtype: str, shape) -> Any:
    """A torch tensor over `view` (no copy) that keeps the received memory alive."""
    import torch

    dt = getattr(torch, dtype, None) if isinstance(dtype, str) else None
    if not isinstance(dt, torch.dtype):
        raise ValueError(f"unknown torch dtype {dtype!r} in a tree payload")
    shape = _sized_shape(shape, dt.itemsize, view, dtype)
    if not view.nbytes:
        return torch.empty(shape, dtype=dt)
    # A new memoryview: torch keeps a reference to it but no buffer export, so it must be one
    # nobody releases; it holds the frame (or mapping) until the tensor goes.
    return torch.frombuffer(memoryview(view), dtype=torch.uint8).view(dt).reshape(shape)


def _array_of(view, dtype: str, shape) -> Any:
    """A read-only numpy array over `view` (no copy)."""
    import numpy as np

    dt = np.dtype(dtype) if isinstance(dtype, str) else None
    if dt is None or dt.kind in "OV":
        raise ValueError(f"bad numpy dtype {dtype!r} in a tree payload")
    shape = _sized_shape(shape, dt.itemsize, view, dtype)
    return np.frombuffer(memoryview(view), dtype=dt).reshape(shape)


class _Join:
    """Puts a tree payload back together: each placeholder becomes a view of its frame."""

    def __init__(self, views: list[memoryview]):
        self.views = views
        self.used: set[int] = set()  # parts a placeholder named

    def walk(self, x):
        """`x` (the deserialized skeleton, ours to change) with its placeholders replaced."""
        if type(x) in _LEAVES:
            return x
        if isinstance(x, dict):
            if TREE_KEY in x:
                return self._placeholder(x)
            for k, v in x.items():
                w = self.walk(v)
                if w is not v:
                    x[k] = w
            return x
        if isinstance(x, list):
            if not _LEAVES.issuperset(map(type, x)):
                for i, v in enumerate(x):
                    x[i] = self.walk(v)
            return x
        if isinstance(x, tuple):
            return tuple(self.walk(v) for v in x)
        return x

    def _placeholder(self, x: dict):
        spec = x[TREE_KEY]
        if len(x) != 1 or not isinstance(spec, list) or not spec:
            raise ValueError("bad placeholder in a tree payload")
        if spec[0] == "d" and len(spec) == 2 and isinstance(spec[1], dict):
            inner = spec[1]  # a user dict that has the reserved key: its values only
            for k, v in inner.items():
                inner[k] = self.walk(v)
            return inner
        if spec[0] not in ("t", "n") or len(spec) != 4:
            raise ValueError(f"bad placeholder {spec[0]!r} in a tree payload")
        tag, where, dtype, shape = spec
        if isinstance(where, (bytes, bytearray, memoryview)):
            view = memoryview(bytearray(where))  # inline: a tiny copy, writable like a tensor's own
        elif type(where) is int and 1 <= where < len(self.views):
            view = self.views[where]
            self.used.add(where)
        else:
            raise ValueError(f"placeholder names part {where!r} of {len(self.views)}")
        return _tensor_of(view, dtype, shape) if tag == "t" else _array_of(view, dtype, shape)


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
        if _is_struct(data):  # vllm-omni's stage payloads: a tree once seen as the dict it is
            data = struct_to_dict(data)
        raw = raw_part(data)
        split = _Split()
        skeleton = split.walk(data) if raw is None and isinstance(data, (dict, list, tuple)) else None
        if raw is not None:
            parts, meta = [raw[0]], {"kind": "raw", **raw[1]}
        elif split.found:
            head = serialize(skeleton)
            parts = [head, *split.bufs]
            meta = {"kind": "tree", "skeleton": _nbytes(head), "tensors": split.found,
                    "inlined": split.inlined, "copies": split.copies, "copied": split.copied}
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

        with warnings.catch_warnings():  # the view is read-only; torch warns about that
            warnings.simplefilter("ignore")
            # torch keeps a reference to the buffer object but no export: a new memoryview (not
            # `_view`, which release() ends) keeps the memory alive as long as the tensor
            return torch.frombuffer(memoryview(self._alive()), dtype=torch.uint8)

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
    if kind == "tree":
        join = _Join(views)
        with warnings.catch_warnings():  # a received frame is read-only to Python; torch warns
            warnings.simplefilter("ignore")
            obj = join.walk(deserialize(views[0]))
        if len(join.used) != len(views) - 1:  # e.g. a placeholder in an object the serializer rebuilt
            raise ValueError(f"tree payload: {len(views) - 1} tensor parts, {len(join.used)} placed")
        return obj
    return RecvParts(RecvBuffer(v, keep, {"kind": "raw", "size": v.nbytes, "parts": [v.nbytes]}) for v in views)
