#!/usr/bin/env bash
# pyzmq 27 built from its sdist with the DRAFT API against rzmq's DRAFT libzmq.so and
# include/zmq.h, in a scratch venv (compat/build/pyzmq-draft), then pyzmq's DRAFT tests
# (tests/test_draft.py of the sdist). Expected failures: compat/pyzmq-draft-test-notes.tsv;
# exits 1 on any other failure.
#
#   compat/run-pyzmq-draft-tests.sh [--lib DIR]   (default: builds target/draft/release)
#
# Needs network access to PyPI (the sdist, its build requirements and pytest), a C compiler and
# cmake (pip brings scikit-build-core, cython and cmake).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LIBDIR=""
if [ "${1:-}" = "--lib" ]; then LIBDIR=$2; fi
if [ -z "$LIBDIR" ]; then
  cargo build --release -p rzmq-capi --features draft --target-dir target/draft
  LIBDIR=target/draft/release
fi
B=compat/build/pyzmq-draft
rm -rf "$B/prefix" "$B/tests"
mkdir -p "$B/prefix/include" "$B/prefix/lib" "$B/sdist"
cp include/zmq.h include/zmq_utils.h "$B/prefix/include/"
cp "$LIBDIR/libzmq.so" "$B/prefix/lib/libzmq.so.5"
ln -sf libzmq.so.5 "$B/prefix/lib/libzmq.so"
[ -x "$B/venv/bin/python" ] || python3 -m venv "$B/venv"
ls "$B"/sdist/pyzmq-27.*.tar.gz >/dev/null 2>&1 ||
  "$B/venv/bin/pip" download -q --no-binary :all: --no-deps "pyzmq==27.*" -d "$B/sdist"
SDIST=$(ls "$B"/sdist/pyzmq-27.*.tar.gz | sort -V | tail -1)
# ZMQ_PREFIX: link against our library (pyzmq sets its RPATH to $B/prefix/lib);
# ZMQ_DRAFT_API=1: build the DRAFT bindings (zmq.DRAFT_API).
ZMQ_PREFIX="$ROOT/$B/prefix" ZMQ_DRAFT_API=1 \
  "$B/venv/bin/pip" install -q --force-reinstall --no-deps "$SDIST"
"$B/venv/bin/pip" install -q pytest
tar -xzf "$SDIST" -C "$B" --wildcards '*/tests/*'
mv "$B"/pyzmq-27.*/tests "$B/tests"
rm -rf "$B"/pyzmq-27.*/
"$B/venv/bin/python" -c "import zmq; assert zmq.DRAFT_API and zmq.has('draft'), 'not a DRAFT build'"
# Run from the tests' own directory, not the sdist's (whose zmq/ would shadow the install).
cd "$B/tests"
set +e
"$ROOT/$B/venv/bin/python" -m pytest -p no:cacheprovider -q -rA test_draft.py > pytest.log 2>&1
set -e
tail -3 pytest.log
python3 - "$ROOT/compat/pyzmq-draft-test-notes.tsv" pytest.log <<'PY'
import re, sys
expected = {l.split("\t")[0] for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")
            and l.split("\t")[1] in ("fail", "flaky")}
failed = set(re.findall(r"^(?:FAILED|ERROR) (\S+)", open(sys.argv[2]).read(), re.M))
bad = sorted(failed - expected)
fixed = sorted(n for n in expected if n not in failed)
for n in fixed:
    print(f"passes now (remove its line from the notes): {n}")
for n in bad:
    print(f"UNEXPECTED failure: {n}")
sys.exit(1 if bad else 0)
PY
