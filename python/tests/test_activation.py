"""Tests of the installed rzmq wheel: activation (RZMQ_ACTIVATE, rzmq.activate(), `rzmq run`), its
refusals, and `rzmq doctor`. Run by scripts/test-wheel.sh with the python of a venv where
dist/rzmq-*.whl and pyzmq are installed; every case runs in a fresh interpreter.
"""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(HERE, "mp_workers.py")
BIN = os.path.dirname(sys.executable)
RZMQ = os.path.join(BIN, "rzmq")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("RZMQ_ACTIVATE", "LD_PRELOAD", "PYTHONPATH")}
    env.update(extra)
    return env


def run(cmd, env=None, timeout=120):
    proc = subprocess.run(cmd, env=env or clean_env(), capture_output=True, text=True, timeout=timeout, cwd="/")
    return proc


def py(code, **env):
    return run([sys.executable, "-c", code], env=clean_env(**env))


WHO = "import zmq, rzmq, json; print(json.dumps(dict(kind=rzmq.served_by()['kind'], active=rzmq.is_active())))"


def who(**env):
    proc = py(WHO, **env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def test_installed_not_source_tree():
    proc = py("import rzmq; print(rzmq.__file__); print(rzmq.library_path())")
    assert proc.returncode == 0, proc.stderr
    pkg, lib = proc.stdout.split()
    assert "site-packages" in pkg and os.path.isfile(lib) and lib.endswith("rzmq/_lib/libzmq.so.5")


@pytest.mark.parametrize("value,expect", [
    ("1", True), ("true", True), ("YES", True), (" on ", True),
    ("0", False), ("false", False), ("no", False), ("off", False), ("", False), (None, False),
    ("2", None), ("maybe", None),
])
def test_env_flag(value, expect):
    import rzmq

    assert rzmq.env_flag(value) is expect


def test_installed_never_takes_over_silently():
    info, err = who()
    assert info == {"kind": "stock", "active": False}
    assert "rzmq" not in err


@pytest.mark.parametrize("value", ["0", "off", ""])
def test_off_values(value):
    info, err = who(RZMQ_ACTIVATE=value)
    assert info["kind"] == "stock" and not info["active"]
    assert err == ""


def test_unknown_value_warns_and_stays_off():
    info, err = who(RZMQ_ACTIVATE="maybe")
    assert info["kind"] == "stock"
    assert "RZMQ_ACTIVATE='maybe' is not understood" in err and "rzmq stays off" in err


@pytest.mark.parametrize("value", ["1", "yes"])
def test_env_activation(value):
    info, err = who(RZMQ_ACTIVATE=value)
    assert info == {"kind": "rzmq", "active": True}, err


def test_activate_in_code_before_import():
    proc = py("import rzmq, os; path = rzmq.activate(); import zmq; "
              "assert rzmq.served_by()['kind'] == 'rzmq' and rzmq.is_active(); "
              "assert os.environ['RZMQ_ACTIVATE'] == '1'; assert rzmq.activate() == path; print('ok')")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_activate_after_stock_import_is_refused():
    proc = py("import zmq, rzmq\n"
              "try:\n    rzmq.activate()\nexcept RuntimeError as e:\n    print(e)\n"
              "else:\n    raise SystemExit('activate() accepted a process already on the stock libzmq')\n"
              "assert rzmq.served_by()['kind'] == 'stock' and not rzmq.is_active()\n")
    assert proc.returncode == 0, proc.stderr
    assert "already imported" in proc.stdout and "pyzmq.libs" in proc.stdout and "before `import zmq`" in proc.stdout


def test_env_activation_with_another_libzmq_preloaded_warns():
    # a stock libzmq in LD_PRELOAD owns the global scope: the .pth hook must warn, not crash
    bundled = py("import zmq, rzmq._libcheck as c; print(c.bundled_libzmq())").stdout.strip()
    proc = run([sys.executable, "-c", WHO], env=clean_env(RZMQ_ACTIVATE="1", LD_PRELOAD=bundled))
    assert proc.returncode == 0, proc.stderr
    assert "rzmq: warning: RZMQ_ACTIVATE is on but rzmq was not activated" in proc.stderr
    assert "another libzmq" in proc.stderr
    assert json.loads(proc.stdout)["active"] is False


def test_run_preload_serves_too():
    proc = run([RZMQ, "run", "--preload", "--", sys.executable, "-c",
                WHO + "; import os; print(os.environ['LD_PRELOAD'])"])
    assert proc.returncode == 0, proc.stderr
    info, preload = proc.stdout.strip().splitlines()
    assert json.loads(info) == {"kind": "rzmq", "active": True}
    assert preload.endswith("rzmq/_lib/libzmq.so.5")


def test_run_missing_command():
    proc = run([RZMQ, "run", "--", "no-such-command-rzmq"])
    assert proc.returncode == 127 and "cannot run 'no-such-command-rzmq'" in proc.stderr
    proc = run([RZMQ, "run"])
    assert proc.returncode == 2 and "no command given" in proc.stderr


@pytest.mark.parametrize("how,expect", [
    ("RZMQ_ACTIVATE=1", "rzmq"),
    ("rzmq run", "rzmq"),
    ("rzmq.activate()", "rzmq"),
    ("not activated", "stock"),
])
def test_spawn_and_fork_workers(how, expect, tmp_path):
    out = tmp_path / "workers.json"
    cmd = [sys.executable, WORKERS, "--expect", expect, "--json", str(out)]
    env = clean_env()
    if how == "RZMQ_ACTIVATE=1":
        env["RZMQ_ACTIVATE"] = "1"
    elif how == "rzmq run":
        cmd = [RZMQ, "run", "--"] + cmd
    elif how == "rzmq.activate()":
        cmd.append("--activate-in-code")
    proc = run(cmd, env=env)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reports = json.loads(out.read_text())["reports"]
    assert sorted(r["method"] for r in reports) == ["fork", "parent", "spawn"]
    pids = {r["pid"] for r in reports}
    assert len(pids) == 3
    for r in reports:
        assert r["kind"] == expect, r
        assert r["socket_is_ours"] is (expect == "rzmq"), r
        if expect == "rzmq":
            assert r["file"].endswith("rzmq/_lib/libzmq.so.5") and r["is_active"]
        else:
            assert "pyzmq.libs" in r["file"] and not r["is_active"]


@pytest.mark.parametrize("launcher", ["env", "run", "module"])
def test_doctor(launcher):
    if launcher == "env":
        cmd, env = [RZMQ, "doctor", "--json"], clean_env(RZMQ_ACTIVATE="1")
    elif launcher == "run":
        cmd, env = [RZMQ, "run", "--", RZMQ, "doctor", "--json"], clean_env()
    else:
        cmd, env = [RZMQ, "run", "--", sys.executable, "-m", "rzmq", "doctor", "--json"], clean_env()
    proc = run(cmd, env=env, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["problems"] == []
    for where in ("here", "spawned_child"):
        assert report[where]["kind"] == "rzmq" and report[where]["socket_is_ours"], report[where]
    assert report["here"]["pid"] != report["spawned_child"]["pid"]
    st = report["self_test"]
    assert st["ok"] and st["served"] == "rzmq" and st["socket_is_ours"]
    # no provider set by the user: doctor picks soft, and the loopback connection moves to RDMA
    assert st["provider"].startswith("soft") and st["transport_kind"].startswith("RDMA"), st
    assert report["settings"]["RZMQ_ACTIVATE"] == "1"


def test_doctor_text_not_activated():
    proc = run([sys.executable, "-m", "rzmq"], timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "RZMQ_ACTIVATE=(unset): off" in out
    assert "pyzmq in this process: " in out and "served by stock" in out
    assert "pyzmq in a spawned child: " in out
    assert "/sys/class/infiniband" in out and "libibverbs.so.1" in out
    assert "transport: RDMA (rdma/soft" in out and out.rstrip().endswith("doctor: OK")


def test_doctor_fails_when_self_test_fails():
    # RDMA required on a provider that does not exist: the self-test cannot connect
    proc = run([RZMQ, "doctor", "--timeout", "10"],
               env=clean_env(RZMQ_RDMA="require", RZMQ_RDMA_PROVIDER="ibverbs"), timeout=180)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "self-test:" in proc.stdout and "FAILED" in proc.stdout


def test_wheel_carries_the_omni_connector_and_its_entry_point():
    proc = py("import importlib.metadata as m, importlib.util as u, json\n"
              "eps = [(e.name, e.value) for e in m.entry_points(group='vllm_omni.general_plugins')]\n"
              "spec = u.find_spec('rzmq.omni')\n"
              "print(json.dumps(dict(eps=eps, omni=spec.origin if spec else None)))")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert ["rzmq", "rzmq.omni:register"] in out["eps"]
    assert out["omni"] and out["omni"].endswith("rzmq/omni/__init__.py") and "site-packages" in out["omni"]
