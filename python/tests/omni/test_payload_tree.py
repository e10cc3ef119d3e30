"""Tensor-holding stage payloads (kind "tree") with the real torch and vllm-omni's real serializer.

vllm-omni's stages hand each other dicts of tensors (thinker->talker: `{"embed": {"prefill":
Tensor}, "hidden_states": {"output": Tensor}, "ids": {...}}`; talker->code2wav: `{"codes": ...,
"meta": {"finished": Tensor}}`). payload.encode() sends each tensor as its own part without
copying and the serializer only a skeleton of placeholders; decode() makes each tensor a view of
its received frame. These tests check the bytes, dtypes and shapes, that no copy is made on either
side (addresses), that the frame lives as long as the tensor, and the placeholder scheme.

Needs the real torch, vLLM and vllm-omni (python/tests/real/env.sh makes such a venv); skipped
where torch is absent or vllm_omni_shim.py's stand-in.

    PYTHONPATH=python <venv>/bin/python -m pytest -q python/tests/omni/test_payload_tree.py
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref
from types import SimpleNamespace

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
IMPORTED_BEFORE = "rzmq.omni" in sys.modules  # by test_connector.py, maybe from an installed wheel
sys.path.insert(0, os.path.join(ROOT, "python"))  # this tree's payload.py, not an installed wheel's

torch = pytest.importorskip("torch")
if not hasattr(torch, "frombuffer"):  # vllm_omni_shim's stand-in, installed by test_connector.py
    pytest.skip("needs the real torch", allow_module_level=True)

import numpy as np  # noqa: E402
import zmq  # noqa: E402

from rzmq.omni import payload  # noqa: E402
from rzmq.omni.payload import TREE_KEY, Parts, RecvBuffer, Shared, decode, encode  # noqa: E402
from vllm_omni.distributed.omni_connectors.utils.serialization import OmniSerializer  # noqa: E402

SER, DESER = OmniSerializer.serialize, OmniSerializer.deserialize


def test_this_trees_payload_module_is_the_one_tested():
    if IMPORTED_BEFORE:
        pytest.skip(f"rzmq.omni was imported before this module, from {payload.__file__}")
    assert payload.__file__ == os.path.join(ROOT, "python", "rzmq", "omni", "payload.py")


# ----------------------------------------------------------------------------------------------
# helpers


def leaves(x, path=()):
    """(path, tensor or array) of every tensor and array in a payload."""
    if isinstance(x, dict):
        for k, v in x.items():
            yield from leaves(v, (*path, k))
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            yield from leaves(v, (*path, i))
    elif isinstance(x, (torch.Tensor, np.ndarray)):
        yield path, x


def assert_same(got, want, path="payload"):
    """Same structure (tuples come back as lists, as through the serializer), dtypes, shapes, bytes."""
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), path
        assert got.dtype == want.dtype and got.shape == want.shape, path
        assert torch.equal(got, want.detach().resolve_conj().resolve_neg().cpu()), path
    elif isinstance(want, np.ndarray):
        assert type(got) is np.ndarray and got.dtype == want.dtype and got.shape == want.shape, path
        assert np.array_equal(got, want), path
    elif isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), path
        for k in want:
            assert_same(got[k], want[k], f"{path}[{k!r}]")
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{path}[{i}]")
    else:
        assert got == want, path


def span(buf) -> tuple[int, int]:
    """[start, end) address of a buffer (a memoryview, a frame's buffer, an array)."""
    a = np.frombuffer(buf, dtype=np.uint8)
    start = a.__array_interface__["data"][0]
    return start, start + a.nbytes


def address(x) -> int:
    return x.data_ptr() if isinstance(x, torch.Tensor) else x.__array_interface__["data"][0]


def nbytes(x) -> int:
    return x.numel() * x.element_size() if isinstance(x, torch.Tensor) else x.nbytes


def round_trip_bytes(data):
    """encode, then decode from memoryviews of bytes objects (frames as a copy would make them)."""
    parts, meta, content = encode(data, SER)
    frames = [bytes(memoryview(p)) for p in parts]
    return decode(meta, [memoryview(f) for f in frames], frames, DESER), meta, parts


@pytest.fixture(scope="module")
def pair():
    """A PAIR of pyzmq sockets over TCP in this process (stock libzmq, or rzmq when preloaded)."""
    ctx = zmq.Context()
    a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    port = a.bind_to_random_port("tcp://127.0.0.1")
    b.connect(f"tcp://127.0.0.1:{port}")
    yield a, b
    a.close(0)
    b.close(0)
    ctx.term()


def through_zmq(pair, data):
    """(decoded, meta, parts sent, frames received): sent with copy=False, received as frames."""
    a, b = pair
    parts, meta, _ = encode(data, SER)
    a.send_multipart(parts, copy=False)
    frames = b.recv_multipart(copy=False)
    assert [len(f.buffer) for f in frames] == meta["parts"]
    return decode(meta, [f.buffer for f in frames], frames, DESER), meta, parts, frames


def assert_views_of_frames(decoded, frames):
    """Every decoded tensor that has its own part lies inside that part's received frame."""
    spans = [span(f.buffer) if len(f.buffer) else (0, 0) for f in frames]
    placed = 0
    for path, x in leaves(decoded):
        n = nbytes(x)
        if n <= payload.INLINE_MAX:
            continue
        inside = [i for i, (s, e) in enumerate(spans) if s <= address(x) and address(x) + n <= e]
        assert inside and inside[0] >= 1, f"{path} is not a view of a received frame (a copy)"
        placed += 1
    return placed


# ----------------------------------------------------------------------------------------------
# payloads


def nested():
    g = torch.Generator().manual_seed(7)
    base = torch.randn(64, 48, generator=g)
    return {
        "embed": {"prefill": torch.randn(37, 896, generator=g),
                  "decode": torch.randn(5, 896, generator=g).to(torch.bfloat16)},
        "ids": {"prompt": list(range(100)), "output": torch.arange(300, dtype=torch.int64)},
        "scalars": {"zero_dim": torch.tensor(3.25), "zero_dim_big": torch.tensor(7, dtype=torch.int64),
                    "flag": torch.tensor(True)},
        "empty": [torch.empty(0), torch.empty(0, 896, dtype=torch.bfloat16), torch.zeros(3, 0, 2, dtype=torch.int64)],
        "noncontig": {"t": base.t(), "every_other": base[:, ::2], "expanded": torch.arange(4.0).expand(64, 4)},
        "numpy": {"f32": np.random.default_rng(1).standard_normal((33, 65)).astype(np.float32),
                  "i16_strided": np.arange(4096, dtype=np.int16).reshape(64, 64)[::2, ::3],
                  "big_endian": np.arange(100, dtype=">u4"), "zero_dim": np.array(2.5),
                  "empty": np.zeros((0, 3), np.float32)},
        "list_of_tensors": [torch.full((128,), float(i)) for i in range(4)],
        "tuple": (torch.ones(2, 2, dtype=torch.float16), "text", 3, None),
        "dtypes": {str(dt): torch.arange(200).to(dt) for dt in (torch.uint8, torch.int8, torch.int16, torch.int32,
                                                               torch.float64, torch.bool, torch.complex64)},
        "plain": {"s": "x", "f": 1.5, "n": None, "b": b"raw", "nested": [[1, 2], {"k": [3]}]},
    }


def thinker_to_talker(prompt_len=300, output_len=50, hidden=3584):
    """The real qwen2_5_omni thinker->talker payload, made by vllm-omni's own builder from a
    request and the thinker's hidden states (float32, prompt_len + output_len rows)."""
    from vllm_omni.model_executor.stage_input_processors import qwen2_5_omni as q

    request = SimpleNamespace(request_id="req-0", prompt_token_ids=list(range(prompt_len)),
                              output_token_ids=list(range(output_len)),
                              status=SimpleNamespace(name="FINISHED_LENGTH_CAPPED"))
    h = torch.randn(prompt_len + output_len, hidden, generator=torch.Generator().manual_seed(3))
    built = q.thinker2talker_full_payload(None, {"hidden": h}, request)
    assert built is not None and isinstance(built["embed"]["prefill"], torch.Tensor)
    return built


# ----------------------------------------------------------------------------------------------
# round trips


def test_nested_round_trip_from_bytes():
    data = nested()
    got, meta, parts = round_trip_bytes(data)
    assert meta["kind"] == "tree"
    assert_same(got, data)
    assert meta["tensors"] == len(list(leaves(data)))
    assert len(parts) == 1 + meta["tensors"] - meta["inlined"]
    assert meta["inlined"] == sum(nbytes(x) <= payload.INLINE_MAX for _, x in leaves(data)) == 12
    assert meta["size"] == sum(meta["parts"]) and meta["parts"][0] == meta["skeleton"]


def test_nested_round_trip_through_zmq_is_zero_copy_on_both_sides(pair):
    data = nested()
    got, meta, parts, frames = through_zmq(pair, data)
    assert_same(got, data)
    # receiver: every tensor with its own part is a view of its received frame
    assert assert_views_of_frames(got, frames) == len(parts) - 1
    # sender: contiguous CPU tensors and arrays are sent from their own memory
    sent = {address(p) for p in parts[1:] if nbytes(p)}
    for path, x in leaves(data):
        contiguous = x.is_contiguous() if isinstance(x, torch.Tensor) else x.flags.c_contiguous
        if contiguous and nbytes(x) > payload.INLINE_MAX:
            assert address(x) in sent, path
    for key in ("f32", "big_endian"):  # arrays: the parts are the arrays' own memory
        assert any(np.shares_memory(p, data["numpy"][key]) for p in parts[1:]), key


def test_copies_are_counted_on_the_producer_side():
    data = nested()
    _, meta, _ = encode(data, SER)
    noncontig = [x for _, x in leaves(data) if not (x.is_contiguous() if isinstance(x, torch.Tensor)
                                                    else x.flags.c_contiguous)]
    assert meta["copies"] == len(noncontig) == 4  # t, every_other, expanded, i16_strided
    assert meta["copied"] == sum(nbytes(x) for x in noncontig)
    contiguous = {"a": torch.randn(1000, 64), "b": [np.ones(5000)], "c": {"d": torch.zeros(10, dtype=torch.bfloat16)}}
    assert encode(contiguous, SER)[1]["copies"] == 0


def test_real_thinker_to_talker_payload(pair):
    data = thinker_to_talker()
    got, meta, parts, frames = through_zmq(pair, data)
    assert_same(got, data)
    assert meta["kind"] == "tree" and meta["tensors"] == 2 and meta["copies"] == 0 and meta["copied"] == 0
    tensor_bytes = nbytes(data["embed"]["prefill"]) + nbytes(data["hidden_states"]["output"])  # 5 MB
    assert meta["skeleton"] < 4096  # the token id lists and two placeholders
    assert meta["size"] == meta["skeleton"] + tensor_bytes
    assert assert_views_of_frames(got, frames) == 2
    assert {address(p) for p in parts[1:]} == {data["embed"]["prefill"].data_ptr(),
                                               data["hidden_states"]["output"].data_ptr()}
    # what the serializer alone did before: every tensor's bytes inside its blob
    assert len(SER(data)) > tensor_bytes
    # the talker's wrapping
    wrapped = {"engine_inputs": {"prompt_token_ids": [1, 2, 3]},
               "embed": {"prefill": data["embed"]["prefill"],
                         "decode": data["hidden_states"]["output"].to(torch.bfloat16)},
               "hidden_states": {"output": data["hidden_states"]["output"]}, "ids": data["ids"],
               "meta": {"finished": torch.tensor(True), "next_stage_prompt_len": 300}}
    got, meta, _, frames = through_zmq(pair, wrapped)
    assert_same(got, wrapped)
    assert meta["tensors"] == 4 and meta["copies"] == 0
    assert assert_views_of_frames(got, frames) == 3  # the 0-dim bool travels in the skeleton


def test_real_talker_to_code2wav_payload(pair):
    from vllm_omni.model_executor.stage_input_processors import qwen2_5_omni as q

    request = SimpleNamespace(request_id="r", output_token_ids=list(range(2000)) + [q.TALKER_CODEC_END_TOKEN_ID])
    data = q.talker2code2wav_full_payload(None, {}, request)
    got, meta, parts, _ = through_zmq(pair, data)
    assert_same(got, data)
    assert meta["kind"] == "tree" and meta["tensors"] == 1 and len(parts) == 1  # 1-byte flag inlined
    codes = {"codes": torch.randint(0, 8000, (4, 1500)), "meta": data["meta"]}
    got, meta, parts, frames = through_zmq(pair, codes)
    assert_same(got, codes)
    assert assert_views_of_frames(got, frames) == 1


def test_the_serializer_sees_no_tensor():
    seen = []

    def spy(obj):
        seen.append(obj)
        return SER(obj)

    data = nested()
    parts, meta, _ = encode(data, spy)
    assert len(seen) == 1 and not list(leaves(seen[0]))  # no tensor and no array in the skeleton
    head = bytes(memoryview(parts[0]))
    assert b"__tensor__" not in head and b"__ndarray__" not in head  # OmniSerializer's markers
    skeleton = DESER(head)
    assert not list(leaves(skeleton))
    assert skeleton["embed"]["prefill"] == {TREE_KEY: ["t", 1, "float32", [37, 896]]}
    assert skeleton["ids"]["prompt"] == list(range(100))


def test_payloads_without_tensors_and_other_kinds_are_as_before():
    for data in ({"ids": [1, 2], "s": "t"}, [1, "a", None], (), {}, {"nested": {"x": [b"y"]}}):
        parts, meta, _ = encode(data, SER)
        assert meta["kind"] == "obj" and len(parts) == 1 and "copies" not in meta
    parts, meta, _ = encode(b"abc", SER)
    assert meta == {"kind": "raw", "parts": [3], "size": 3}
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    parts, meta, _ = encode(t, SER)
    assert meta["kind"] == "raw" and meta["dtype"] == "torch:float32" and meta["shape"] == [2, 3]
    parts, meta, _ = encode(Parts([b"head", t]), SER)
    assert meta["kind"] == "parts" and meta["parts"] == [4, 24]
    parts, meta, content = encode(Shared({"e": t}, "media-1"), SER)
    assert meta["kind"] == "tree" and content == "media-1"
    got = decode(meta, [memoryview(bytes(memoryview(p))) for p in parts], None, DESER)
    assert torch.equal(got["e"], t)


# ----------------------------------------------------------------------------------------------
# the placeholder scheme


def test_a_user_dict_with_the_reserved_key_is_not_a_placeholder():
    lookalike = {TREE_KEY: ["t", 1, "float32", [2]]}
    cases = [
        {"user": lookalike, "x": torch.ones(100)},
        {"user": {TREE_KEY: ["d", {"a": 1}], "other": torch.arange(100)}},
        {TREE_KEY: {TREE_KEY: torch.zeros(64)}, "t": torch.ones(70)},
        [lookalike, torch.ones(100), {TREE_KEY: None}],
    ]
    for data in cases:
        got, meta, _ = round_trip_bytes(data)
        assert meta["kind"] == "tree"
        assert_same(got, data)
    # without tensors the payload is the serializer's alone, reserved key and all
    got, meta, _ = round_trip_bytes({"user": lookalike})
    assert meta["kind"] == "obj" and got == {"user": lookalike}


def test_one_tensor_in_two_places_is_sent_once():
    t = torch.randn(1000)
    data = {"a": t, "b": {"again": t}, "c": [t, t[:500]]}
    got, meta, parts = round_trip_bytes(data)
    assert_same(got, data)
    assert meta["tensors"] == 4 and len(parts) == 3  # the skeleton, t, and the slice (its own part)
    assert got["a"].data_ptr() == got["b"]["again"].data_ptr()


def test_small_tensors_travel_in_the_skeleton():
    small = torch.arange(payload.INLINE_MAX // 4, dtype=torch.float32)  # exactly INLINE_MAX bytes
    data = {"small": small, "one_more": torch.arange(payload.INLINE_MAX // 4 + 1, dtype=torch.float32),
            "zero_dim": torch.tensor(1.0), "empty": torch.empty(0, 5), "np_small": np.arange(3)}
    got, meta, parts = round_trip_bytes(data)
    assert_same(got, data)
    assert meta["inlined"] == 4 and len(parts) == 2
    got["small"] += 1  # an inlined tensor is its own (writable) memory
    assert torch.equal(got["small"], small + 1)


def test_tensors_beyond_the_part_limit_go_through_the_serializer(monkeypatch):
    monkeypatch.setattr(payload, "MAX_TREE_PARTS", 2)
    data = [torch.full((100,), float(i)) for i in range(4)]
    got, meta, parts = round_trip_bytes(data)
    assert_same(got, data)
    assert len(parts) == 3 and meta["tensors"] == 2


def test_odd_tensors():
    g = torch.Generator().manual_seed(5)
    leaf = torch.randn(50, 3, generator=g, requires_grad=True)
    c = torch.randn(80, generator=g, dtype=torch.complex64)
    data = {"grad": leaf * 2, "leaf": leaf, "conj": c.conj(), "neg": c.conj().imag,
            "bf16_2d": torch.randn(7, 9).to(torch.bfloat16),
            "f8": torch.randn(100).to(torch.float8_e4m3fn), "u16": torch.arange(100).to(torch.uint16),
            "param": torch.nn.Parameter(torch.ones(70)), "storage_offset": torch.arange(1000.0)[500:600]}
    got, meta, _ = round_trip_bytes(data)
    for k in ("grad", "leaf", "conj", "bf16_2d", "param", "storage_offset"):
        assert_same(got[k], data[k], k)
    assert torch.equal(got["f8"].view(torch.uint8), data["f8"].view(torch.uint8))
    assert torch.equal(got["u16"].to(torch.int64), data["u16"].to(torch.int64))
    assert torch.equal(got["neg"], data["neg"].resolve_neg())
    assert not got["grad"].requires_grad
    assert meta["copies"] == 2  # the conj bit and the neg bit resolved; the rest sent as they are


def test_tensors_the_serializer_keeps():
    # quantized and sparse tensors have no plain bytes to send: the serializer's (as before)
    sparse = torch.eye(3).to_sparse()
    data = {"sparse": sparse, "dense": torch.ones(100)}
    parts, meta, _ = encode(data, lambda obj: b"skeleton" if obj["sparse"] is sparse else b"")
    assert meta["kind"] == "tree" and meta["tensors"] == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_device_tensors_are_copied_to_host_once():
    t = torch.randn(64, 128, device="cuda")
    data = {"a": t, "b": t.t(), "c": t.to(torch.bfloat16)}
    got, meta, _ = round_trip_bytes(data)
    assert meta["copies"] == 3 and meta["copied"] == sum(nbytes(x) for x in data.values())
    for k, v in data.items():
        assert torch.equal(got[k], v.cpu())


def test_through_the_connector(tmp_path):
    from rzmq.omni.connector import RzmqConnector

    p = RzmqConnector({"host": "127.0.0.1", "zmq_port": 0, "role": "sender", "consumers": 0})
    c = RzmqConnector({"host": "127.0.0.1", "role": "receiver", "get_timeout": 10,
                       "host_cache_dir": str(tmp_path)})
    try:
        data = thinker_to_talker()
        ok, n, meta = p.put("0", "1", "req-0", data)
        assert ok and meta["kind"] == "tree" and meta["is_fast_path"]
        got = c.get("0", "1", "req-0", meta)
        assert got is not None and got[1] == n
        assert_same(got[0], data)
        # a shared payload: decoded from the host cache's read-only mapping, still no copy
        ok, _, meta = p.put("0", "1", "req-1", Shared(data, "media-1"))
        got = c.get("0", "1", "req-1", meta)
        assert got is not None
        assert_same(got[0], data)
    finally:
        c.close()
        p.close()


# ----------------------------------------------------------------------------------------------
# lifetime of the received memory


def test_a_decoded_tensor_keeps_its_frame_alive(pair):
    """As the connector hands views: RecvBuffers over the frames, released once decode returned."""
    data = {"x": torch.arange(50_000, dtype=torch.float32), "y": np.arange(30_000, dtype=np.int64)}
    a, b = pair
    parts, meta, _ = encode(data, SER)
    a.send_multipart(parts, copy=False)
    frames = b.recv_multipart(copy=False)
    refs = [weakref.ref(f) for f in frames]
    bufs = [RecvBuffer(f.buffer, f, {"kind": "raw"}) for f in frames]
    got = decode(meta, [rb.buffer for rb in bufs], frames, DESER)
    for rb in bufs:
        rb.release()
    del bufs, frames
    gc.collect()
    assert refs[0]() is None  # the skeleton's frame goes
    assert refs[1]() is not None and refs[2]() is not None  # the tensors' and the array's stay
    garbage = [torch.full((50_000,), -1.0) for _ in range(20)]  # would reuse freed memory
    assert torch.equal(got["x"], data["x"]) and np.array_equal(got["y"], data["y"])
    del garbage
    x = got.pop("x")
    del got
    gc.collect()
    assert refs[1]() is not None and refs[2]() is None
    del x
    gc.collect()
    assert refs[1]() is None


def test_recv_buffer_tensor_keeps_the_frame_alive_after_release(pair):
    a, b = pair
    sent = np.random.default_rng(2).integers(0, 256, 100_000, dtype=np.uint8)
    a.send(sent, copy=False)
    frame = b.recv(copy=False)
    ref = weakref.ref(frame)
    rb = RecvBuffer(frame.buffer, frame, {"kind": "raw"})
    t = rb.tensor
    rb.release()
    del rb, frame
    gc.collect()
    assert ref() is not None
    garbage = [np.full(100_000, 7, np.uint8) for _ in range(20)]  # would reuse freed memory
    assert torch.equal(t, torch.from_numpy(sent))
    del garbage
    del t
    gc.collect()
    assert ref() is None


# ----------------------------------------------------------------------------------------------
# what a peer sends is checked


def test_bad_placeholders_are_refused():
    good_parts, good_meta, _ = encode({"t": torch.ones(100)}, SER)
    body = bytes(memoryview(good_parts[1]))

    def attempt(skeleton, parts=(body,)):
        head = SER(skeleton)
        frames = [head, *parts]
        meta = {"kind": "tree", "parts": [len(f) for f in frames], "size": sum(len(f) for f in frames)}
        return decode(meta, [memoryview(f) for f in frames], frames, DESER)

    assert torch.equal(attempt({"t": {TREE_KEY: ["t", 1, "float32", [100]]}})["t"], torch.ones(100))
    bad = [
        {TREE_KEY: ["t", 2, "float32", [100]]},  # no such part
        {TREE_KEY: ["t", 0, "float32", [100]]},  # the skeleton itself
        {TREE_KEY: ["t", 1, "load", [100]]},  # not a dtype (an attribute of torch)
        {TREE_KEY: ["t", 1, "float32", [101]]},  # the bytes do not fit the shape
        {TREE_KEY: ["t", 1, "float32", [-100]]},
        {TREE_KEY: ["n", 1, "O", [50]]},  # object arrays from bytes
        {TREE_KEY: ["x", 1, "float32", [100]]},  # unknown tag
        {TREE_KEY: ["t", 1, "float32", [100]], "extra": 1},
        {"unplaced": "a tensor part that no placeholder names"},
    ]
    for skeleton in bad:
        with pytest.raises((ValueError, TypeError)):
            attempt(skeleton)
    twice = {TREE_KEY: ["t", 1, "float32", [100]]}
    with pytest.raises(ValueError):  # part 1 named twice, part 2 by none
        attempt([twice, twice], parts=(body, body))


# ----------------------------------------------------------------------------------------------
# without torch


def test_without_torch_the_module_imports_and_arrays_still_travel_as_a_tree():
    code = f"""
import sys
sys.modules["torch"] = None  # import torch fails
sys.path.insert(0, {os.path.join(ROOT, "python")!r})
import numpy as np, msgspec
from rzmq.omni import payload
assert "torch" not in [m for m in sys.modules if sys.modules[m] is not None]
ser, de = msgspec.msgpack.encode, msgspec.msgpack.decode
data = {{"a": np.arange(1000, dtype=np.float32), "ids": [1, 2]}}
parts, meta, _ = payload.encode(data, ser)
assert meta["kind"] == "tree" and meta["copies"] == 0, meta
got = payload.decode(meta, [memoryview(bytes(memoryview(p))) for p in parts], None, de)
assert np.array_equal(got["a"], data["a"]) and got["ids"] == [1, 2]
assert payload.encode({{"ids": [1]}}, ser)[1]["kind"] == "obj"
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
