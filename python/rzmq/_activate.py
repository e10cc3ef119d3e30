"""Activation: load rzmq's libzmq.so.5 into the global symbol scope before pyzmq's backend.

rzmq-activate.pth (installed at the root of site-packages) calls activate_from_env() at every
interpreter start of this environment, and it returns at once unless RZMQ_ACTIVATE is on. activate()
dlopens our library with RTLD_GLOBAL: the dynamic linker searches the global scope before a
library's own dependencies, so when pyzmq's backend extension is loaded afterwards its zmq_*
references bind to us instead of the libzmq bundled in pyzmq.libs/ (which still gets mapped, but
serves nothing), exactly as with LD_PRELOAD. When zmq is imported later, a one-shot import hook
checks that the backend's symbols really bind to our file, and fails the import if they do not.
"""

import ctypes
import os
import sys

from . import _libcheck

ACTIVATE_ENV = "RZMQ_ACTIVATE"
SONAME = "libzmq.so.5"
_ON = {"1", "true", "yes", "on"}
_OFF = {"0", "false", "no", "off"}
_reported = set()  # variables whose bad value was already reported on stderr

_handle = None  # our library, once loaded with RTLD_GLOBAL
_verified = None  # None: zmq not imported since activation; else the describe() dict
_started = False  # activate_from_env() ran (site may process the .pth once per site-packages path)


def env_flag(value, default=False, name=None):
    """Parse an on/off setting by the rule of docs/SETTINGS.md ("On/off rule"), the Rust side's:
    unset (None) or empty -> `default`; 1/on/true/yes -> True; 0/off/false/no -> False (any case,
    surrounding blanks ignored); a bool passes through. Anything else is an error: with `name` (the
    variable) it is reported once on stderr and `default` is used; without `name` the answer is
    None, for callers that report it themselves.
    """
    if value is None or isinstance(value, bool):
        return default if value is None else value
    text = str(value).strip().lower()
    if not text:
        return default
    if text in _ON:
        return True
    if text in _OFF:
        return False
    if name is None:
        return None
    if name not in _reported:
        _reported.add(name)
        sys.stderr.write(f"rzmq: warning: {name}={value!r} is not an on/off value (on: 1, on, true, yes; "
                         f"off: 0, off, false, no); using the default ({'on' if default else 'off'})\n")
    return default


def library_path():
    """Absolute path of the libzmq.so.5 this package carries (rzmq/_lib/libzmq.so.5)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lib", SONAME)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"rzmq's library is missing: {path} (is this a source checkout? build and install the wheel: "
            "scripts/build-wheel.sh && pip install dist/rzmq-*.whl)")
    return path


def _ours():
    return os.path.realpath(library_path())


def served_by():
    """Who serves pyzmq's zmq_* calls in this process: a dict with 'kind' ('rzmq', 'stock', 'other',
    'mixed' or 'not loaded'), 'file' (the library the calls bind to) and the evidence."""
    try:
        ours = _ours()
    except FileNotFoundError:
        ours = None
    return _libcheck.describe(ours)


def is_active():
    """True when rzmq is loaded for pyzmq here and, if zmq is imported, really serves its calls."""
    if _handle is None:
        return False
    if _libcheck.backend_module() is None:
        return True
    return served_by()["kind"] == "rzmq"


def _refuse_if_taken():
    """RuntimeError when pyzmq or the global scope already runs on another libzmq."""
    ours = _ours()
    backend = _libcheck.backend_module()
    if backend is not None:
        info = _libcheck.describe(ours)
        if info["kind"] != "rzmq":
            raise RuntimeError(
                f"rzmq.activate(): pyzmq was already imported and is served by {info['file']} "
                f"({info['kind']}), not by rzmq; call rzmq.activate() before `import zmq`, or start "
                f"the program with {ACTIVATE_ENV}=1 or `rzmq run -- ...`")
        return
    other = _libcheck.global_definition()
    if other and other != ours:
        raise RuntimeError(
            f"rzmq.activate(): another libzmq ({other}) is already in the process's global scope "
            "(LD_PRELOAD, or linked by the program) and would keep serving pyzmq; remove it first")


class _CheckAfterImport:
    """One-shot import hook (a sys.meta_path finder): after `zmq` is imported, verify that rzmq serves it.

    A plain class, not importlib.abc.MetaPathFinder: that import costs ~25 ms at every interpreter
    start of an activated environment.
    """

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "zmq":
            return None
        import importlib.util

        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader_exec = spec.loader.exec_module

        def exec_module(module):
            loader_exec(module)
            _verify_after_import()

        spec.loader.exec_module = exec_module
        return spec


def _verify_after_import():
    global _verified
    info = served_by()
    _verified = info
    if info["kind"] == "rzmq":
        return
    if info["kind"] == "not loaded":
        sys.stderr.write("rzmq: warning: zmq was imported but its compiled backend was not found; "
                         "cannot verify that rzmq serves it\n")
        return
    raise ImportError(
        f"rzmq is activated, but pyzmq's zmq_* calls bind to {info['file']} ({info['kind']}; "
        f"per symbol: {info['symbols']}), not to rzmq's {_ours()}; unset {ACTIVATE_ENV} to run on "
        "pyzmq's own libzmq, or see `rzmq doctor`")


def activate():
    """Load rzmq's libzmq.so.5 for pyzmq; call before `import zmq`. Returns the library's path.

    Sets RZMQ_ACTIVATE=1 in os.environ so that multiprocessing spawn children and subprocesses
    activate too (fork children inherit the loaded library). Raises RuntimeError when pyzmq was
    already imported with another libzmq (or another libzmq is in the global scope).
    """
    global _handle
    path = library_path()
    if _handle is not None:
        return path
    _refuse_if_taken()
    _handle = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    os.environ[ACTIVATE_ENV] = "1"
    if _libcheck.backend_module() is None:
        if not any(isinstance(f, _CheckAfterImport) for f in sys.meta_path):
            sys.meta_path.insert(0, _CheckAfterImport())
    else:  # zmq was imported on our library already (LD_PRELOAD of it)
        _verify_after_import()
    return path


def activate_from_env():
    """Interpreter-start hook (rzmq-activate.pth): activate when RZMQ_ACTIVATE is on; never raises."""
    global _started
    if _started:
        return
    _started = True
    raw = os.environ.get(ACTIVATE_ENV)
    flag = env_flag(raw)
    if flag is None:
        sys.stderr.write(
            f"rzmq: warning: {ACTIVATE_ENV}={raw!r} is not understood (on: 1, true, yes, on; off: 0, "
            "false, no, off, empty); rzmq stays off\n")
        return
    if not flag:
        return
    try:
        activate()
    except Exception as e:  # noqa: BLE001 - the interpreter must start anyway
        sys.stderr.write(f"rzmq: warning: {ACTIVATE_ENV} is on but rzmq was not activated: {e}\n")
