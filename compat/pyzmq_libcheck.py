"""Which libzmq is serving pyzmq's calls in this process.

Used by compat/run-pyzmq-tests.sh (through pyzmq_compat_plugin.py, pyzmq_preload_check.py and
pyzmq_vllm_traffic.py) to prove that LD_PRELOAD=target/release/libzmq.so really takes over from the
libzmq that the stock pyzmq wheel bundles in site-packages/pyzmq.libs/, and that a source build
of pyzmq runs on our library.

Three independent pieces of evidence:

1. resolve(): the dynamic linker's lookup for the backend's undefined zmq_* symbols, redone with
   dlsym + dladdr: the global scope first (the program and LD_PRELOAD libraries), then the pyzmq
   extension module's own dependencies (its DT_NEEDED libzmq). dladdr names the file that defines
   the symbol found.
2. behaviour(): calls zmq_has("curve") and zmq_version() directly in every libzmq mapped into the
   process, and compares with what pyzmq reports through its backend (zmq.has("curve")): the
   wheel's bundled libzmq has CURVE, rzmq does not yet, so the answer tells who served the call.
3. pyzmq_preload_check.py re-runs a socket round trip under LD_DEBUG=bindings, where the dynamic
   linker itself logs which file each of the backend's zmq_* references was bound to.

The symbol lookup, /proc/self/maps scan and the wheel's bundled library come from the package's
python/rzmq/_libcheck.py (the one implementation, loaded here by path so that the rzmq package is
neither imported nor needed to be installed); this module adds the direct-call evidence, the
verdict and the report the compat scripts print.

Standard library only (plus zmq, imported lazily).
"""

import ctypes
import importlib.util
import os


def _load_package_libcheck():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "rzmq", "_libcheck.py")
    spec = importlib.util.spec_from_file_location("rzmq_libcheck", os.path.realpath(path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_lib = _load_package_libcheck()
file_of = _lib.file_of
mapped_libzmq = _lib.mapped_libzmq
library_version = _lib.library_version

# The scope names the compat reports have always printed, for the package's bound_file() answers.
_SCOPES = {"global scope": "global scope (LD_PRELOAD, RTLD_GLOBAL)",
           "backend's own dependencies": "backend's DT_NEEDED"}


def backend_path():
    """Path of pyzmq's compiled backend module (the object whose zmq_* references matter)."""
    import zmq.backend.cython._zmq as backend  # noqa: F401  (Cython backend, CPython)

    return os.path.realpath(backend.__file__)


def resolve(symbol="zmq_msg_init_data"):
    """(file, scope) that the dynamic linker binds the pyzmq backend's `symbol` to."""
    backend_path()  # the backend must be loaded for the fallback lookup in its own dependencies
    found, scope = _lib.bound_file(symbol)
    return found, _SCOPES.get(scope, scope)


def behaviour():
    """{path: {"curve": bool, "version": str}} for every mapped libzmq, called directly."""
    out = {}
    for path in mapped_libzmq():
        handle = ctypes.CDLL(path)  # already loaded: same handle, its own definitions first
        handle.zmq_has.argtypes = [ctypes.c_char_p]
        handle.zmq_has.restype = ctypes.c_int
        out[path] = {"curve": bool(handle.zmq_has(b"curve")), "version": library_version(path)}
    return out


def bundled_libzmq():
    """The libzmq the stock wheel bundles (site-packages/pyzmq.libs/libzmq-*.so*), or None."""
    import zmq  # noqa: F401  (the package's lookup reads it from sys.modules)

    return _lib.bundled_libzmq()


def identify(expect_path=None):
    """Everything above in one dict, plus a verdict: served_by is the file that serves pyzmq's
    calls, kind is 'rzmq' when that is `expect_path` (our library), 'stock' when it is the wheel's
    bundled libzmq, else 'other'; consistent tells whether the direct calls agree."""
    import zmq

    served, scope = resolve()
    served_has = {sym: resolve(sym)[0] for sym in ("zmq_socket", "zmq_msg_send", "zmq_poll", "zmq_has")}
    beh = behaviour()
    pyzmq_curve = bool(zmq.has("curve"))
    expect = os.path.realpath(expect_path) if expect_path else None
    bundled = bundled_libzmq()
    if expect and served == expect:
        kind = "rzmq"
    elif bundled and served == bundled:
        kind = "stock"
    else:
        kind = "other"
    # pyzmq's answer must equal the serving library's own answer; when the mapped libraries
    # disagree on CURVE the answer alone also names the serving one.
    consistent = served in beh and beh[served]["curve"] == pyzmq_curve
    others = [p for p in beh if p != served]
    discriminating = any(beh[p]["curve"] != beh.get(served, {}).get("curve") for p in others)
    return {
        "kind": kind,
        "served_by": served,
        "scope": scope,
        "all_symbols_same_file": len(set(served_has.values()) | {served}) == 1,
        "mapped_libzmq": list(beh),
        "direct_calls": beh,
        "pyzmq_has_curve": pyzmq_curve,
        "pyzmq_zmq_version": zmq.zmq_version(),
        "pyzmq_version": zmq.pyzmq_version(),
        "consistent": consistent,
        "curve_discriminates": discriminating,
        "expected": expect,
    }


def summary(info):
    """One line for logs and reports."""
    text = (
        f"libzmq serving pyzmq: {info['kind']} ({info['served_by']}, via {info['scope']}); "
        f"zmq_version {info['pyzmq_zmq_version']}, pyzmq {info['pyzmq_version']}; "
        f"zmq.has('curve')={info['pyzmq_has_curve']}"
    )
    if len(info["mapped_libzmq"]) > 1:
        direct = ", ".join(
            f"{os.path.basename(p)} curve={v['curve']}" for p, v in info["direct_calls"].items()
        )
        text += f"; mapped: {direct}"
    return text


def check(info, expect_kind):
    """List of problems (empty when the process runs on the expected library)."""
    problems = []
    if expect_kind and info["kind"] != expect_kind:
        problems.append(f"expected {expect_kind} to serve pyzmq, found {info['kind']} ({info['served_by']})")
    if not info["all_symbols_same_file"]:
        problems.append("zmq_* symbols resolve to more than one file")
    if not info["consistent"]:
        problems.append("zmq.has('curve') through pyzmq differs from the serving library's own answer")
    return problems
