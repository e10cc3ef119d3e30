"""compare.py's verdicts on made-up runs: which audio differences code2wav's noise explains.

    "$(python/tests/real/env.sh | tail -1)/bin/python" -m pytest -q python/tests/real/test_compare.py

(run.sh runs it first, with the real environment's python, which has pytest.)
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import compare  # noqa: E402

CODES = {0: "codes-0", 1: "codes-1", 2: "codes-2"}


def run(order: list[int], audio: dict[int, str], rng_of_position=None, codes=None) -> dict:
    """A Qwen2.5-Omni run whose code2wav took the requests in `order`; the i-th call starts from
    RNG state `rng_of_position(i)` (default: one state per position, as stock's global RNG)."""
    codes = codes or CODES
    rng_of_position = rng_of_position or (lambda i: f"state-{i}")
    traces = [{"op": "noise", "pid": 1, "t0": 10.0 + i, "rng": rng_of_position(i), "codes": codes[r],
               "audio": audio[r]} for i, r in enumerate(order)]
    traces.append({"op": "noise", "pid": 1, "t0": 1.0, "rng": "warm-up", "codes": "x", "audio": "warm-up-audio"})
    requests = [{"request": r, "thinker_token_ids": [1, 2, r],
                 "outputs": {"audio": {"sha256": audio[r], "shape": [8], "dtype": "torch.float32"}}}
                for r in sorted(audio)]
    return {"config": {}, "requests": requests, "traces": traces}


STOCK = run([0, 1, 2], {0: "a0", 1: "a1", 2: "a2"})


def test_identical_run_has_no_differences():
    same = run([0, 1, 2], {0: "a0", 1: "a1", 2: "a2"})
    assert compare.compare_outputs(STOCK, same) == []
    assert compare.timing_dependent_differences(STOCK, same) == []


def test_requests_swapped_at_code2wav_are_reported_not_failed():
    swapped = run([1, 0, 2], {0: "b0", 1: "b1", 2: "a2"})
    assert compare.compare_outputs(STOCK, swapped) == []
    reported = compare.timing_dependent_differences(STOCK, swapped)
    assert reported[:2] == ["request 0: output audio differs, as code2wav's noise did",
                            "request 1: output audio differs, as code2wav's noise did"]
    assert reported[2] == "code2wav took the requests in the order 1, 0, 2, stock 0, 1, 2"


def test_audio_differing_from_the_same_rng_state_fails():
    # request 2 kept its place (its RNG state equals stock's), yet its audio changed
    broken = run([0, 1, 2], {0: "a0", 1: "a1", 2: "other"})
    assert compare.compare_outputs(STOCK, broken) == ["request 2: output audio differs"]


def test_audio_from_other_codes_fails():
    codes = {**CODES, 0: "codes-changed"}
    other = run([1, 0, 2], {0: "b0", 1: "b1", 2: "a2"}, codes=codes)
    assert compare.compare_outputs(STOCK, other) == ["request 0: output audio differs"]


def test_audio_without_a_code2wav_record_fails():
    unrecorded = run([0, 1, 2], {0: "a0", 1: "a1", 2: "a2"})
    unrecorded["requests"][1]["outputs"]["audio"]["sha256"] = "never-made"
    assert compare.compare_outputs(STOCK, unrecorded) == ["request 1: output audio differs"]


def test_audio_of_another_shape_fails():
    swapped = run([1, 0, 2], {0: "b0", 1: "b1", 2: "a2"})
    swapped["requests"][0]["outputs"]["audio"]["shape"] = [4]
    assert compare.compare_outputs(STOCK, swapped) == ["request 0: output audio differs"]
