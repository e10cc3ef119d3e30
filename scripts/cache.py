#!/usr/bin/env python3
"""Checked caches for CI and the test scripts: what does not change with the commit, kept outside
the clone (docs/TESTING.md, "Caches").

A cache entry is a directory. Once complete it is sealed: a manifest (`.rzmq-cache`) lists every
file's size and SHA-256 and the key the entry was made for. Before an entry is used it is checked
against its manifest; an entry that is missing, made for another key, or unsealed (its maker
stopped half way) is a miss, and one whose files differ from its manifest is corrupt. Either way
the caller gets a non-zero exit and rebuilds the entry; a corrupt one is reported loudly first.

usage:
  cache.py key [--file F]... [--text T]... [--cmd CMD]...
      prints a 16-hex key over the contents of files, literal texts and commands' outputs
  cache.py check DIR KEY [--quiet]
      0: sealed for KEY and intact (a hit); 1: miss (absent, unsealed or another key);
      2: corrupt (the differing files are printed on stderr)
  cache.py seal DIR KEY [--exclude GLOB]...
      writes DIR's manifest for KEY (after the entry is complete); files whose path relative to
      DIR matches an --exclude glob are left out, then and at every check (parts of an entry
      that its user rewrites on purpose, such as a package reinstalled at every run)
  cache.py unseal DIR
      removes the manifest (an entry about to be modified in place, such as a cargo target
      directory during a build)
  cache.py corrupt DIR
      flips one byte of one file of DIR (tests of the check itself)

Files under __pycache__ and *.pyc are left out (interpreters write them when they import).
"""

import argparse
import fnmatch
import hashlib
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

MANIFEST = ".rzmq-cache"
SKIP_DIRS = {"__pycache__"}


def say(msg: str) -> None:
    print(f"[cache] {msg}", file=sys.stderr)


def files_of(root: str, exclude=()):
    """Every regular file under root (relative paths, sorted), without the manifest, caches of
    bytecode and paths matching an `exclude` glob. Symbolic links are recorded by their target,
    not followed."""
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS)
        for f in files:
            if f.endswith(".pyc"):
                continue
            rel = os.path.relpath(os.path.join(d, f), root)
            if rel == MANIFEST or any(fnmatch.fnmatch(rel, g) for g in exclude):
                continue
            out.append(rel)
    out.sort()
    return out


def digest(path: str) -> str:
    if os.path.islink(path):
        return "link:" + os.readlink(path)
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def scan(root: str, exclude=()):
    rels = files_of(root, exclude)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        sums = list(pool.map(lambda r: digest(os.path.join(root, r)), rels))
    sizes = [os.lstat(os.path.join(root, r)).st_size for r in rels]
    return {r: (s, h) for r, s, h in zip(rels, sizes, sums)}


def cmd_key(a) -> int:
    h = hashlib.sha256()
    for f in a.file or []:
        h.update(b"file\0" + f.encode() + b"\0")
        with open(f, "rb") as fh:
            h.update(hashlib.file_digest(fh, "sha256").digest())
    for t in a.text or []:
        h.update(b"text\0" + t.encode() + b"\0")
    for c in a.cmd or []:
        out = subprocess.run(c, shell=True, check=True, capture_output=True).stdout
        h.update(b"cmd\0" + c.encode() + b"\0" + out)
    print(h.hexdigest()[:16])
    return 0


def read_manifest(root: str):
    path = os.path.join(root, MANIFEST)
    if not os.path.isfile(path):
        return None, None, []
    key, entries, exclude = None, {}, []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("key\t"):
                key = line.split("\t", 1)[1]
                continue
            if line.startswith("exclude\t"):
                exclude.append(line.split("\t", 1)[1])
                continue
            h, size, rel = line.split("\t", 2)
            entries[rel] = (int(size), h)
    return key, entries, exclude


def cmd_check(a) -> int:
    if not os.path.isdir(a.dir):
        if not a.quiet:
            say(f"miss: {a.dir} (absent)")
        return 1
    key, want, exclude = read_manifest(a.dir)
    if want is None:
        if not a.quiet:
            say(f"miss: {a.dir} (unsealed: its maker did not finish)")
        return 1
    if key != a.key:
        if not a.quiet:
            say(f"miss: {a.dir} (made for key {key}, wanted {a.key})")
        return 1
    have = scan(a.dir, exclude)
    bad = sorted(
        set(r for r in want if have.get(r) != want[r]) | set(r for r in have if r not in want)
    )
    if bad:
        say(f"CORRUPT: {a.dir}: {len(bad)} of {len(want)} files differ from the manifest:")
        for r in bad[:20]:
            what = "missing" if r not in have else ("unexpected" if r not in want else "changed")
            say(f"  {what}: {r}")
        return 2
    if not a.quiet:
        total = sum(s for s, _ in want.values())
        say(f"hit: {a.dir} ({len(want)} files, {total / 1e9:.2f} GB, intact)")
    return 0


def cmd_seal(a) -> int:
    exclude = getattr(a, "exclude", None) or []
    entries = scan(a.dir, exclude)
    tmp = os.path.join(a.dir, MANIFEST + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(f"key\t{a.key}\n")
        for g in exclude:
            f.write(f"exclude\t{g}\n")
        for rel, (size, h) in entries.items():
            f.write(f"{h}\t{size}\t{rel}\n")
    os.replace(tmp, os.path.join(a.dir, MANIFEST))
    say(f"sealed: {a.dir} ({len(entries)} files, key {a.key})")
    return 0


def cmd_unseal(a) -> int:
    try:
        os.remove(os.path.join(a.dir, MANIFEST))
    except FileNotFoundError:
        pass
    return 0


def cmd_corrupt(a) -> int:
    rels = [r for r in files_of(a.dir) if not os.path.islink(os.path.join(a.dir, r))
            and os.path.getsize(os.path.join(a.dir, r)) > 0]
    if not rels:
        say(f"nothing to corrupt in {a.dir}")
        return 1
    rel = rels[len(rels) // 2]
    path = os.path.join(a.dir, rel)
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0xFF]))
    print(rel)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="op", required=True)
    k = sub.add_parser("key")
    k.add_argument("--file", action="append")
    k.add_argument("--text", action="append")
    k.add_argument("--cmd", action="append")
    c = sub.add_parser("check")
    c.add_argument("dir")
    c.add_argument("key")
    c.add_argument("--quiet", action="store_true")
    s = sub.add_parser("seal")
    s.add_argument("dir")
    s.add_argument("key")
    s.add_argument("--exclude", action="append")
    u = sub.add_parser("unseal")
    u.add_argument("dir")
    x = sub.add_parser("corrupt")
    x.add_argument("dir")
    a = p.parse_args()
    return {"key": cmd_key, "check": cmd_check, "seal": cmd_seal, "unseal": cmd_unseal,
            "corrupt": cmd_corrupt}[a.op](a)


if __name__ == "__main__":
    sys.exit(main())
