"""Wire helpers shared by the Qwen-Omni traffic replica and its connector.

- vLLM's serialization (v1/serial_utils.py): a msgpack main frame plus each array of at least
  INLINE_MAX bytes as its own extra frame, sent without copying; the receiver builds arrays
  straight from the frames (read-only views, no copy).
- make_zmq_socket's options (vllm/utils/network_utils.py).
- Seeded synthetic tensors standing in for model compute: a slice of one random block at an
  offset derived from a 64-bit tag, stamped with (MAGIC, tag, nbytes) in its first 24 bytes, so a
  receiver can check both the bytes (digest) and where they came from (the tag it expects).
- A pool of reusable send buffers: a buffer is handed out again only once the MessageTracker of
  the message that carried it is done.
"""

import hashlib
import struct
import time

import msgpack
import numpy as np

INLINE_MAX = 256  # vLLM's threshold: smaller arrays travel inside the msgpack main frame
BUF = 512 << 20  # make_zmq_socket's SNDBUF/RCVBUF on big machines (the kernel caps it)
MAGIC = 0x4F4D4E49  # "OMNI"
STAMP = struct.Struct("<IIQQ")  # magic, reserved, tag, nbytes (24 bytes)
BLOCK_BYTES = 16 << 20
# numpy has no bfloat16: bf16 tensors travel as uint16 with this dtype label
DTYPES = {"bf16": np.uint16, "f32": np.float32, "i64": np.int64, "i32": np.int32, "i16": np.int16,
          "u8": np.uint8, "u16": np.uint16}
DTYPE_LABEL = {np.dtype(np.float32): "f32", np.dtype(np.int64): "i64", np.dtype(np.int32): "i32",
               np.dtype(np.int16): "i16", np.dtype(np.uint8): "u8", np.dtype(np.uint16): "u16"}


def vllm_options(sock, kind):
    """The options vLLM's make_zmq_socket sets for socket type `kind`."""
    import zmq

    if kind in (zmq.PULL, zmq.DEALER, zmq.ROUTER):
        sock.setsockopt(zmq.RCVHWM, 0)
        sock.setsockopt(zmq.RCVBUF, BUF)
    if kind in (zmq.PUSH, zmq.DEALER, zmq.ROUTER):
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.setsockopt(zmq.SNDBUF, BUF)
    if kind == zmq.ROUTER:
        sock.setsockopt(zmq.ROUTER_HANDOVER, 1)


def digest(buf):
    """64-bit BLAKE2b of a buffer, as an int (msgpack-friendly)."""
    return int.from_bytes(hashlib.blake2b(buf, digest_size=8).digest(), "little")


def tag_of(*parts):
    """A 64-bit tag derived from any msgpack-able parts (deterministic across processes)."""
    return int.from_bytes(hashlib.blake2b(msgpack.packb(list(parts)), digest_size=8).digest(), "little")


class Tensor:
    """A tensor on the wire: numpy array plus dtype label (bf16 is carried as uint16)."""

    __slots__ = ("array", "dtype")

    def __init__(self, array, dtype=None):
        self.array = array
        self.dtype = dtype or DTYPE_LABEL[array.dtype]

    @property
    def nbytes(self):
        return self.array.nbytes


class Shared:
    """A tensor that may be shared by content: `key` names its content (e.g. the hash of the
    media it encodes); a receiver known to hold the key gets a reference instead of the bytes."""

    __slots__ = ("key", "tensor")

    def __init__(self, key, tensor):
        self.key = key
        self.tensor = tensor if isinstance(tensor, Tensor) else Tensor(tensor)

    @property
    def nbytes(self):
        return self.tensor.nbytes


def array_from(buf, dtype, shape):
    """A read-only numpy view of a received frame (no copy)."""
    arr = np.frombuffer(buf, dtype=DTYPES[dtype])
    return arr.reshape(shape)


# --------------------------------------------------------------------------------------------
# seeded synthetic tensors

_BLOCK = None


def _block():
    global _BLOCK
    if _BLOCK is None:
        _BLOCK = np.random.default_rng(20240607).integers(0, 256, BLOCK_BYTES + 4096, dtype=np.uint8)
    return _BLOCK


def fill(out, tag):
    """Fills the uint8 view of `out` with the synthetic content for `tag`; returns `out`."""
    flat = out.reshape(-1).view(np.uint8)
    n = flat.size
    block = _block()
    pos, off = 0, tag % 4093
    while pos < n:
        take = min(n - pos, BLOCK_BYTES)
        flat[pos:pos + take] = block[off:off + take]
        pos += take
        off = (off + 977) % 4093
    if n >= STAMP.size:
        STAMP.pack_into(flat, 0, MAGIC, 0, tag & 0xFFFFFFFFFFFFFFFF, n)
    return out


def synth(shape, dtype, tag):
    """A new array of `shape` with the synthetic content for `tag`."""
    return fill(np.empty(shape, dtype=DTYPES[dtype]), tag)


def stamp_of(arr):
    """(tag, nbytes) stamped in an array's first bytes, or None."""
    flat = np.asarray(arr).reshape(-1).view(np.uint8)
    if flat.size < STAMP.size:
        return None
    magic, _, tag, n = STAMP.unpack_from(flat[:STAMP.size].tobytes())
    return (tag, n) if magic == MAGIC else None


def check_stamp(arr, tag, what):
    """Raises ValueError unless `arr` is the synthetic content for `tag`."""
    nbytes = np.asarray(arr).nbytes
    if nbytes < STAMP.size:
        return
    got = stamp_of(arr)
    if got != (tag & 0xFFFFFFFFFFFFFFFF, nbytes):
        raise ValueError(f"{what}: stamp {got}, expected ({tag}, {nbytes})")


# --------------------------------------------------------------------------------------------
# buffers reused only once the tracker is done


class _Taken:
    """Tracker placeholder of a buffer handed out and not yet sent."""

    done = False

    def wait(self, timeout=None):
        raise RuntimeError("pool exhausted: every buffer is taken and not sent")


TAKEN = _Taken()


class TrackedPool:
    """Reusable send buffers. take(shape, dtype) returns an entry [array, tracker, storage]
    whose storage is not referenced by any message libzmq may still be sending: its last
    MessageTracker is done (or it is new). The caller sends entry[0] with copy=False, track=True
    and stores the tracker in entry[1]. A buffer at least as large as asked is reused (the
    smallest free one); past `limit` bytes, free buffers are dropped and, when every buffer is
    in flight, take() waits for the oldest tracker."""

    def __init__(self, limit=512 << 20, timeout=60.0):
        self.limit = limit
        self.timeout = timeout
        self.entries = []  # [view, tracker, storage (flat uint8)], oldest use first
        self.waits = 0
        self.allocs = 0
        self.reuses = 0

    @staticmethod
    def _free(entry):
        return entry[1] is None or entry[1].done

    def _pick(self, nbytes):
        best = None
        for e in self.entries:
            if e[2].size >= nbytes and self._free(e) and (best is None or e[2].size < best[2].size):
                best = e
        return best

    def _make_room(self, nbytes):
        """Drops free buffers until `nbytes` more fit; False when only busy ones are left."""
        total = sum(e[2].size for e in self.entries)
        for e in list(self.entries):
            if total + nbytes <= self.limit:
                return True
            if self._free(e):
                self._remove(e)
                total -= e[2].size
        return total + nbytes <= self.limit or not self.entries

    def _shape(self, entry, shape, dtype):
        dt = np.dtype(DTYPES[dtype])
        n = int(np.prod(shape)) * dt.itemsize
        entry[0] = entry[2][:n].view(dt).reshape(shape)
        entry[1] = TAKEN  # until the caller stores the tracker of the message that carries it
        self._remove(entry)
        self.entries.append(entry)
        return entry

    def _remove(self, entry):
        for i, e in enumerate(self.entries):
            if e is entry:  # identity: list.remove would compare the arrays
                del self.entries[i]
                return

    def _new(self, nbytes, shape, dtype):
        self.allocs += 1
        entry = [None, None, np.empty(max(nbytes, 1), dtype=np.uint8)]
        self.entries.append(entry)
        return self._shape(entry, shape, dtype)

    def take(self, shape, dtype):
        nbytes = int(np.prod(shape)) * np.dtype(DTYPES[dtype]).itemsize
        while True:
            entry = self._pick(nbytes)
            if entry is not None:
                self.reuses += 1
                return self._shape(entry, shape, dtype)
            if self._make_room(nbytes):
                return self._new(nbytes, shape, dtype)
            busy = next((e for e in self.entries if e[1] is not TAKEN and not self._free(e)), None)
            if busy is None:
                raise RuntimeError("pool exhausted: every buffer is taken and not sent")
            self.waits += 1
            busy[1].wait(self.timeout)  # raises zmq.NotDone on timeout

    async def take_async(self, shape, dtype):
        """take() for asyncio code: waits for trackers without blocking the loop."""
        import asyncio

        nbytes = int(np.prod(shape)) * np.dtype(DTYPES[dtype]).itemsize
        end = time.monotonic() + self.timeout
        while True:
            entry = self._pick(nbytes)
            if entry is not None:
                self.reuses += 1
                return self._shape(entry, shape, dtype)
            if self._make_room(nbytes):
                return self._new(nbytes, shape, dtype)
            if time.monotonic() > end:
                raise TimeoutError("no MessageTracker done in time")
            self.waits += 1
            await asyncio.sleep(0.001)

    def release(self, entry):
        """Gives back a buffer that was not sent."""
        if entry[1] is TAKEN:
            entry[1] = None

    def drain(self, timeout=30.0):
        for e in self.entries:
            if e[1] is not None and e[1] is not TAKEN:
                e[1].wait(timeout)
                e[1] = None


# --------------------------------------------------------------------------------------------
# encoding of payload trees: dict/list/scalars, Tensor, Shared


def encode(obj, frames, shared_out=None, send_ref=None):
    """Encodes a payload tree for msgpack: arrays of INLINE_MAX bytes or more become extra frames
    (appended to `frames`), smaller ones are inlined. A Shared becomes a reference when
    send_ref(key) says the receiver holds it; `shared_out` collects (key, sent_bytes, nbytes)."""
    if isinstance(obj, Shared):
        t = obj.tensor
        node = {"__s": obj.key, "dt": t.dtype, "sh": list(t.array.shape), "n": t.nbytes}
        if send_ref is not None and send_ref(obj.key):
            node["ref"] = True
            if shared_out is not None:
                shared_out.append((obj.key, 0, t.nbytes))
            return node
        node["d"] = digest(t.array)
        node["f"] = len(frames)
        frames.append(t.array)
        if shared_out is not None:
            shared_out.append((obj.key, t.nbytes, t.nbytes))
        return node
    if isinstance(obj, Tensor):
        a = obj.array
        node = {"__t": obj.dtype, "sh": list(a.shape), "d": digest(a)}
        if a.nbytes >= INLINE_MAX:
            node["f"] = len(frames)
            frames.append(a)
        else:
            node["b"] = a.tobytes()
        return node
    if isinstance(obj, np.ndarray):
        return encode(Tensor(obj), frames, shared_out, send_ref)
    if isinstance(obj, dict):
        return {k: encode(v, frames, shared_out, send_ref) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [encode(v, frames, shared_out, send_ref) for v in obj]
    return obj


def decode(node, frames, resolve_ref=None, verify=True):
    """Inverse of encode(): arrays are views of the frames. A reference is resolved through
    resolve_ref(key) (the receiver's cache). Digests are checked when `verify`."""
    if isinstance(node, dict):
        if "__t" in node:
            if "f" in node:
                arr = array_from(frames[node["f"]], node["__t"], node["sh"])
            else:
                arr = array_from(node["b"], node["__t"], node["sh"])
            if verify and digest(arr) != node["d"]:
                raise ValueError(f"tensor {node['__t']}{node['sh']}: digest mismatch")
            return arr
        if "__s" in node:
            if node.get("ref"):
                buf = resolve_ref(node["__s"])
            else:
                buf = frames[node["f"]]
                if verify and digest(buf) != node["d"]:
                    raise ValueError(f"shared tensor {node['__s']}: digest mismatch")
            arr = array_from(buf, node["dt"], node["sh"])
            if arr.nbytes != node["n"]:
                raise ValueError(f"shared tensor {node['__s']}: {arr.nbytes} bytes, expected {node['n']}")
            return arr
        return {k: decode(v, frames, resolve_ref, verify) for k, v in node.items()}
    if isinstance(node, list):
        return [decode(v, frames, resolve_ref, verify) for v in node]
    return node


def shared_nodes(node, out):
    """All shared-tensor nodes of an encoded tree."""
    if isinstance(node, dict):
        if "__s" in node:
            out.append(node)
        else:
            for v in node.values():
                shared_nodes(v, out)
    elif isinstance(node, list):
        for v in node:
            shared_nodes(v, out)
    return out


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True)


def unpack(buf):
    return msgpack.unpackb(buf, raw=False, strict_map_key=False)


def buffer_of(frame):
    """The buffer of a received frame (zmq.Frame with copy=False, or bytes)."""
    return frame.buffer if hasattr(frame, "buffer") else memoryview(frame)
