"""The stock reference runs, cached (docs/TESTING.md, "Caches").

A stock run (vllm-omni with SharedMemoryConnector on the pyzmq wheel's libzmq, or one vLLM
instance without connectors) involves no rzmq code: its outputs depend only on the pinned
packages, the model files, the prompts and the configuration. So its output directory is kept
under ~/.cache/rzmq/refs/<name>-<key>, the key a hash of all of those (the caller lists them),
and a later run with the same key copies it instead of starting the instances again. Entries are
sealed and checked by scripts/cache.py: a missing or unsealed entry is a miss, a corrupt one is
reported loudly and run again. RZMQ_REF_CACHE=0 turns the cache off (every reference runs).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
ROOTS = os.environ.get("RZMQ_REF_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "rzmq", "refs"))

_spec = importlib.util.spec_from_file_location("rzmq_cache", os.path.join(ROOT, "scripts", "cache.py"))
cache = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cache)


def enabled() -> bool:
    return os.environ.get("RZMQ_REF_CACHE", "1") != "0"


def key(texts: list[str], files: list[str], dirs: list[str]) -> str:
    """A 16-hex key over literal texts (command lines, versions), files' contents and every file
    under each directory (names and contents; bytecode left out)."""
    h = hashlib.sha256()
    for t in texts:
        h.update(b"text\0" + t.encode() + b"\0")
    for f in files:
        h.update(b"file\0" + os.path.basename(f).encode() + b"\0")
        with open(f, "rb") as fh:
            h.update(hashlib.file_digest(fh, "sha256").digest())
    for d in dirs:
        h.update(b"dir\0" + os.path.basename(os.path.normpath(d)).encode() + b"\0")
        for rel, (size, digest) in cache.scan(d).items():
            h.update(f"{rel}\0{size}\0{digest}\0".encode())
    return h.hexdigest()[:16]


def entry(name: str, k: str) -> str:
    return os.path.join(ROOTS, f"{name}-{k}")


def restore(name: str, k: str, dest: str) -> bool:
    """Copies the cached run `name` for key `k` to `dest` (replacing it): True on a hit."""
    if not enabled():
        return False
    src = entry(name, k)
    ns = type("A", (), {"dir": src, "key": k, "quiet": True})
    rc = cache.cmd_check(ns) if os.path.isdir(src) else 1
    if rc == 2:
        print(f"[refcache] {name}: the cached reference {src} is CORRUPT (above): running it again",
              file=sys.stderr, flush=True)
    if rc != 0:
        shutil.rmtree(src, ignore_errors=True)
        return False
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest, symlinks=True)
    os.remove(os.path.join(dest, cache.MANIFEST))
    print(f"[refcache] {name}: reference reused from {src} (key {k})", flush=True)
    return True


def store(name: str, k: str, src: str) -> None:
    """Keeps the finished reference run in `src` for key `k` (sealed), replacing older keys'."""
    if not enabled():
        return
    os.makedirs(ROOTS, exist_ok=True)
    dest = entry(name, k)
    tmp = dest + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp, symlinks=True)
    ns = type("A", (), {"dir": tmp, "key": k})
    cache.cmd_seal(ns)
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(tmp, dest)
    for other in os.listdir(ROOTS):  # this reference's older keys (not "a-chunk-*" for "a")
        rest = other[len(name) + 1:]
        if other.startswith(f"{name}-") and len(rest) == 16 and other != os.path.basename(dest):
            shutil.rmtree(os.path.join(ROOTS, other), ignore_errors=True)
    print(f"[refcache] {name}: reference stored as {dest}", flush=True)
