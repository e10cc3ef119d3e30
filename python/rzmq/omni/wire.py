"""The connector's request protocol: what a consumer asks a producer and what comes back.

Pure functions over frames (no sockets), so every parser of peer input is testable on its own
and fuzzable. A consumer's DEALER sends requests to the producer's ROUTER; the ROUTER adds the
peer identity in front, which the producer strips before calling `parse_request`.

Request (consumer -> producer), two or three frames:
    [header, key, content?]
    header  HEADER: magic b"RZO1", version 1, op, flags (0), request id (u64, chosen by the
            consumer, echoed in the reply so late replies to an abandoned request are dropped)
    key     the internal key (`key@from_to`), UTF-8, at most MAX_KEY bytes
    content optional content id, UTF-8, at most MAX_KEY bytes
Reply (producer -> consumer):
    [header, meta, part...]
    header  HEADER with a status in place of the op
    meta    JSON object, at most MAX_META bytes: "size" (payload bytes), "kind" ("raw", "obj",
            "parts" or "tree": a serialized skeleton then one part per tensor, see payload.py),
            "parts" (the size of each part), "dtype"/"shape" for arrays, "content",
            "shared"; on errors "error" (text)
    part    the payload, one frame per part, sent without copying
Push (push.py): a consumer subscribes to an edge (SUBSCRIBE, key = the edge `from_to`, content =
the credit it grants in bytes, decimal); the producer answers OK with meta {"push", "known",
"producer"} and from then on sends each payload of that edge unasked: [PUSHED header (request
id 0), meta with "key" and "sent" (the producer's time.time() as it sent it, for traces),
part...]. The consumer returns credit with CREDIT (key "*", content = bytes, decimal; no reply).
PUSH_OFF [header, meta {"edge"}] tells a subscriber that the edge went to several subscribers and
is pulled from now on.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

MAGIC = b"RZO1"
VERSION = 1
HEADER = struct.Struct("!4sBBHQ")  # magic, version, op/status, flags, request id
MAX_KEY = 4096
MAX_META = 64 * 1024

# Request operations.
OP_GET = 1  # send the payload
OP_QUERY = 2  # send only the meta (size, kind): the partial-metadata path
OP_PING = 3  # liveness, answered with OK and empty meta
OP_DONE = 4  # the consumer had the payload already (host cache): count a delivery, no reply
OP_SUBSCRIBE = 5  # push this edge's payloads to me (key: the edge; content: credit in bytes)
OP_CREDIT = 6  # credit returned (key "*"; content: bytes), no reply
OPS = (OP_GET, OP_QUERY, OP_PING, OP_DONE, OP_SUBSCRIBE, OP_CREDIT)

# Reply statuses.
OK = 0
NOT_FOUND = 1
BAD_REQUEST = 2
ERROR = 3
PUSHED = 4  # a payload sent unasked (push.py); meta carries its "key"
PUSH_OFF = 5  # the edge in meta is pulled from now on
MAX_CREDIT = 1 << 50

KINDS = ("raw", "obj", "parts", "tree")


class ProtocolError(ValueError):
    """A frame sequence that breaks the protocol (answered with BAD_REQUEST, never raised out)."""


@dataclass(frozen=True)
class Request:
    """A parsed consumer request."""

    op: int
    req_id: int
    key: str
    content: str | None


def _text(frame: bytes, what: str) -> str:
    if len(frame) > MAX_KEY:
        raise ProtocolError(f"{what} of {len(frame)} bytes (at most {MAX_KEY})")
    try:
        return bytes(frame).decode("utf-8")
    except UnicodeDecodeError as e:
        raise ProtocolError(f"{what} is not UTF-8") from e


def _header(frame: bytes) -> tuple[int, int, int, int]:
    if len(frame) != HEADER.size:
        raise ProtocolError(f"header of {len(frame)} bytes (expected {HEADER.size})")
    magic, version, code, flags, req_id = HEADER.unpack(frame)
    if magic != MAGIC:
        raise ProtocolError("bad magic")
    if version != VERSION:
        raise ProtocolError(f"version {version} (this side speaks {VERSION})")
    return code, flags, req_id, version


def encode_request(op: int, req_id: int, key: str, content: str | None = None) -> list[bytes]:
    """The frames of a request."""
    frames = [HEADER.pack(MAGIC, VERSION, op, 0, req_id), key.encode("utf-8")]
    if content is not None:
        frames.append(content.encode("utf-8"))
    return frames


def parse_request(frames: list[bytes]) -> Request:
    """A request from its frames (identity already stripped); ProtocolError when malformed."""
    if len(frames) not in (2, 3):
        raise ProtocolError(f"{len(frames)} frames (expected 2 or 3)")
    op, _flags, req_id, _ = _header(frames[0])
    if op not in OPS:
        raise ProtocolError(f"unknown operation {op}")
    key = _text(frames[1], "key")
    if op != OP_PING and not key:
        raise ProtocolError("empty key")
    content = _text(frames[2], "content id") if len(frames) == 3 else None
    if op in (OP_SUBSCRIBE, OP_CREDIT):
        credit_bytes(content)
    return Request(op, req_id, key, content or None)


def credit_bytes(text: str | None) -> int:
    """The byte count of a SUBSCRIBE or CREDIT request; ProtocolError unless a bounded decimal."""
    if text is None or not text.isascii() or not text.isdigit() or len(text) > 16:
        raise ProtocolError(f"credit must be a decimal byte count, not {text!r}")
    n = int(text)
    if n > MAX_CREDIT:
        raise ProtocolError(f"credit of {n} bytes")
    return n


def request_id_of(frames: list[bytes]) -> int:
    """The request id of a request that may be malformed (0 when it has none), for the error reply."""
    if frames and len(frames[0]) == HEADER.size:
        return HEADER.unpack(frames[0])[4]
    return 0


def encode_reply(status: int, req_id: int, meta: dict[str, Any]) -> list[bytes]:
    """The header and meta frames of a reply (payload parts follow)."""
    return [HEADER.pack(MAGIC, VERSION, status, 0, req_id), json.dumps(meta, separators=(",", ":")).encode()]


def parse_reply(frames: list) -> tuple[int, int, dict[str, Any], list]:
    """(status, request id, meta, parts) of a reply; ProtocolError when malformed or inconsistent.

    `frames` may be bytes or zmq.Frame objects; parts are returned as they came (no copy).
    """
    if len(frames) < 2:
        raise ProtocolError(f"reply of {len(frames)} frames")
    status, _flags, req_id, _ = _header(_bytes(frames[0]))
    raw_meta = _bytes(frames[1])
    if len(raw_meta) > MAX_META:
        raise ProtocolError(f"meta of {len(raw_meta)} bytes")
    try:
        meta = json.loads(raw_meta)
    except (ValueError, UnicodeDecodeError) as e:
        raise ProtocolError("meta is not JSON") from e
    if not isinstance(meta, dict):
        raise ProtocolError("meta is not an object")
    parts = list(frames[2:])
    if status == PUSHED:
        key = meta.get("key")
        if not isinstance(key, str) or not key or len(key.encode()) > MAX_KEY or "kind" not in meta:
            raise ProtocolError("a push without its key or kind")
    if status in (OK, PUSHED) and "kind" in meta:
        check_meta(meta)
        if meta.get("query"):  # a QUERY's answer describes the payload without carrying it
            if parts:
                raise ProtocolError("a query answer with parts")
            return status, req_id, meta, parts
        sizes = meta["parts"]
        if len(sizes) != len(parts):
            raise ProtocolError(f"{len(parts)} parts, meta says {len(sizes)}")
        for want, part in zip(sizes, parts):
            if _len(part) != want:
                raise ProtocolError(f"part of {_len(part)} bytes, meta says {want}")
    return status, req_id, meta, parts


def check_meta(meta: dict[str, Any]) -> None:
    """Validates a payload description (from a peer or a cache file)."""
    if meta.get("kind") not in KINDS:
        raise ProtocolError(f"unknown kind {meta.get('kind')!r}")
    sizes = meta.get("parts")
    if not isinstance(sizes, list) or not all(isinstance(n, int) and n >= 0 for n in sizes):
        raise ProtocolError("bad part sizes")
    if meta.get("size") != sum(sizes):
        raise ProtocolError("size does not match the parts")
    if meta["kind"] == "tree" and not sizes:
        raise ProtocolError("kind tree without its skeleton part")
    if meta["kind"] not in ("parts", "tree") and len(sizes) != 1:
        raise ProtocolError(f"kind {meta['kind']} with {len(sizes)} parts")
    shape = meta.get("shape")
    if shape is not None and not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
        raise ProtocolError("bad shape")
    if meta.get("dtype") is not None and not isinstance(meta["dtype"], str):
        raise ProtocolError("bad dtype")


def _bytes(frame) -> bytes:
    return frame if isinstance(frame, (bytes, bytearray)) else frame.bytes


def _len(frame) -> int:
    if isinstance(frame, (bytes, bytearray, memoryview)):
        return len(frame)
    return len(frame.buffer)
