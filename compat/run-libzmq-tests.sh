#!/usr/bin/env bash
# Compile libzmq 4.3.5's own tests (from the cargo registry copy of zeromq-src 0.3.x) against
# rzmq's include/zmq.h and libzmq.so, run them, and write docs/COMPAT.md.
#
#   compat/run-libzmq-tests.sh [--lib DIR] [--reference] [--reference-only] [--tests a,b]
#                              [--jobs N] [--timeout S] [--no-report] [--report-only]
#
#   (default)         build target/<release>/libzmq.so with cargo and test it
#   --lib DIR         test DIR/libzmq.so (or DIR/libzmq.so.5) instead; nothing is built by cargo
#   --reference       also run the tests against the system libzmq (a reference column)
#   --reference-only  only the system libzmq: checks the harness itself
#   --tests a,b       only these tests (no report; quick reruns while fixing)
#   --report-only     rewrite docs/COMPAT.md from the last full run (after editing the notes)
#
# Needs g++, python3 and the zeromq-src crate in the cargo registry (`cargo fetch`). Builds in
# compat/build/ (gitignored). Expected non-passes: compat/libzmq-test-notes.tsv. Exits 1 if a
# test fails on rzmq that the notes do not list as expected; the last line of output is
# "N passed, M failed, K skipped".
set -euo pipefail
cd "$(dirname "$0")/.."
command -v python3 >/dev/null || { echo "run-libzmq-tests: python3 is required" >&2; exit 2; }
exec python3 compat/libzmq_tests.py "$@"
