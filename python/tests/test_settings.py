"""Pure-Python checks (no built library needed): the on/off rule of rzmq.env_flag, and that the
doctor's list of settings (rzmq.cli.SETTINGS) is docs/SETTINGS.md's table plus RZMQ_ACTIVATE."""

import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))  # the source package: these tests need no install

from rzmq import _activate, cli, env_flag  # noqa: E402


@pytest.mark.parametrize("value,default,expect", [
    (None, False, False), (None, True, True), ("", True, True), ("  ", False, False),
    ("1", False, True), ("on", False, True), ("TRUE", False, True), (" Yes ", False, True),
    ("0", True, False), ("off", True, False), ("False", True, False), ("NO", True, False),
    (True, False, True), (False, True, False),
])
def test_env_flag_rule(value, default, expect):
    assert env_flag(value, default) is expect


def test_env_flag_bad_value_without_name_is_none():
    assert env_flag("2") is None and env_flag("maybe", True) is None


def test_env_flag_bad_value_reported_once_and_default_used(capsys):
    _activate._reported.discard("RZMQ_TEST_FLAG")
    assert env_flag("perhaps", True, "RZMQ_TEST_FLAG") is True
    assert env_flag("perhaps", False, "RZMQ_TEST_FLAG") is False
    err = capsys.readouterr().err
    assert err.count("RZMQ_TEST_FLAG") == 1 and "'perhaps'" in err


def test_doctor_settings_match_docs_table():
    path = os.path.join(ROOT, "docs", "SETTINGS.md")
    if not os.path.isfile(path):
        pytest.skip("docs/SETTINGS.md is not here (not a source checkout)")
    with open(path) as f:
        table = [m.group(1) for m in (re.match(r"\| `(RZMQ_[A-Z0-9_]+)` \|", line) for line in f) if m]
    assert table, "no RZMQ_* rows found in docs/SETTINGS.md"
    python_only = [name for name, _ in cli.PYTHON_ONLY_SETTINGS]
    assert [name for name, _ in cli.SETTINGS] == python_only + table
