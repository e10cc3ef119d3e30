#!/usr/bin/env python3
"""Which parts of scripts/test.sh a change touches (`scripts/test.sh --changed [REV]`).

usage: test_parts.py [REV]    prints the parts, comma-separated (empty when none)
       test_parts.py --explain [REV]   also lists each changed file and the parts it selects

The change is everything between REV (default: the merge-base of HEAD and main) and the working
tree: commits, staged and unstaged edits, and untracked files. docs/TESTING.md has the map.
"""

import fnmatch
import subprocess
import sys

PARTS = ["rust", "capi", "python", "real", "vllm"]

# The first matching pattern decides. Rust crates feed the C ABI and, through libzmq.so, every
# Python part; but a change there is checked by the rust and capi parts (the Python parts use
# the library only through pyzmq, which the capi part's suites exercise), so those two run.
MAP = [
    # Docs whose contents tests read (the layering rule, the settings table, the examples).
    ("docs/ARCHITECTURE.md", ["rust"]),
    ("docs/SETTINGS.md", ["rust", "capi"]),
    ("docs/OMNI_CONNECTOR.md", ["python", "real"]),
    ("docs/VLLM_CONNECTORS.md", ["vllm"]),
    ("README.md", ["rust", "python", "real"]),
    ("docs/*", []),
    ("*.md", []),
    ("LICENSE", []),
    ("api/*", ["rust"]),
    ("fuzz/*", ["rust"]),
    ("benches/*", ["rust"]),
    ("rzmq-capi/*", ["rust", "capi"]),
    ("include/*", ["rust", "capi"]),
    ("compat/*", ["capi"]),
    ("rzmq-*/*", ["rust", "capi"]),
    ("tests/*", ["rust"]),
    ("Cargo.*", ["rust", "capi"]),
    (".cargo/*", ["rust", "capi"]),
    ("python/rzmq/omni/*", ["python", "real"]),
    ("python/rzmq/vllm/*", ["python", "vllm"]),
    ("python/tests/omni/*", ["python"]),
    ("python/tests/real/*", ["real", "vllm"]),
    ("python/tests/vllm/*", ["vllm"]),
    ("python/*", ["capi", "python"]),
    ("examples/omni/*", ["python"]),
    ("scripts/test.sh", PARTS),
    ("scripts/test_parts.py", PARTS),
    ("scripts/cache.py", PARTS),
    ("scripts/build-wheel.sh", ["capi", "python"]),
    ("scripts/test-wheel.sh", ["capi"]),
    ("scripts/*", ["rust"]),
    (".ci/*", PARTS),
]


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def changed(rev: str) -> list[str]:
    if not rev:
        rev = git("merge-base", "HEAD", "main").strip()
    files = set(git("diff", "--name-only", rev).split())
    files |= set(git("ls-files", "--others", "--exclude-standard").split())
    return sorted(files)


def parts_of(path: str) -> list[str]:
    for pattern, parts in MAP:
        if fnmatch.fnmatch(path, pattern):
            return parts
    return PARTS  # anything unmapped: everything, rather than too little


def main() -> int:
    args = sys.argv[1:]
    explain = "--explain" in args
    args = [a for a in args if a != "--explain"]
    rev = args[0] if args else ""
    chosen = set()
    for f in changed(rev):
        p = parts_of(f)
        chosen.update(p)
        if explain:
            print(f"{f}: {','.join(p) or '-'}", file=sys.stderr)
    print(",".join(p for p in PARTS if p in chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
