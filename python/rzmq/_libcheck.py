"""Which libzmq serves pyzmq's calls in this process (standard library only, zmq never imported here).

The dynamic linker binds an undefined zmq_* reference of pyzmq's backend extension by searching
the global scope first (the program, LD_PRELOAD libraries, libraries dlopened with RTLD_GLOBAL)
and only then the extension's own dependencies (the libzmq the wheel bundles in pyzmq.libs/).
bound_file() redoes that lookup with dlsym + dladdr; socket_is_ours() checks behaviour: a socket
pyzmq created is one of ours only if our library recognises its handle.
"""

import ctypes
import os
import sys

# A few symbols every pyzmq backend imports; all must bind to the same file.
SYMBOLS = ("zmq_ctx_new", "zmq_socket", "zmq_msg_init_data", "zmq_msg_send", "zmq_poll", "zmq_has")
ZMQ_TYPE = 16  # zmq_getsockopt option: the socket type


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def _dladdr():
    fn = getattr(ctypes.CDLL(None), "dladdr", None)
    if fn is None:  # glibc < 2.34 keeps dladdr in libdl
        from ctypes.util import find_library  # here: it costs ~10 ms at every activated start

        fn = ctypes.CDLL(find_library("dl")).dladdr
    fn.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    fn.restype = ctypes.c_int
    return fn


def file_of(addr):
    """Real path of the loaded object that contains address `addr` (None if none)."""
    info = _DlInfo()
    if not addr or _dladdr()(addr, ctypes.byref(info)) == 0 or not info.dli_fname:
        return None
    return os.path.realpath(info.dli_fname.decode())


def _addr(handle, symbol):
    try:
        return ctypes.cast(getattr(handle, symbol), ctypes.c_void_p).value
    except AttributeError:
        return None


def global_definition(symbol="zmq_msg_init_data"):
    """File defining `symbol` in the process's global scope, or None when none does."""
    return file_of(_addr(ctypes.CDLL(None), symbol))


def backend_module():
    """pyzmq's loaded compiled backend module (the object whose zmq_* references matter), or None."""
    for name in ("zmq.backend.cython._zmq", "zmq.backend.cython.context", "zmq.backend.cffi._cffi"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            return module
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None) or ""
        if name.startswith("zmq.backend.") and path.endswith(".so"):
            return module
    return None


def bound_file(symbol="zmq_msg_init_data"):
    """(file, scope) the pyzmq backend's reference to `symbol` binds to; (None, why) if unknown."""
    found = global_definition(symbol)
    if found:
        return found, "global scope"
    backend = backend_module()
    if backend is None:
        return None, "pyzmq's backend is not loaded"
    found = file_of(_addr(ctypes.CDLL(backend.__file__), symbol))
    return found, "backend's own dependencies"


def mapped_libzmq():
    """Real paths of every libzmq* file mapped into this process, in first-mapped order."""
    seen = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split(None, 5)
            if len(parts) == 6 and os.path.basename(parts[5].strip()).startswith("libzmq"):
                real = os.path.realpath(parts[5].strip())
                if real not in seen:
                    seen.append(real)
    return seen


def bundled_libzmq():
    """The libzmq the stock pyzmq wheel bundles (site-packages/pyzmq.libs/libzmq*.so*), or None."""
    import glob

    zmq = sys.modules.get("zmq")
    if zmq is None or not getattr(zmq, "__file__", None):
        return None
    site = os.path.dirname(os.path.dirname(os.path.realpath(zmq.__file__)))
    found = sorted(glob.glob(os.path.join(site, "pyzmq.libs", "libzmq*.so*")))
    return os.path.realpath(found[0]) if found else None


def library_version(path):
    """zmq_version() of the library at `path`, called directly ("4.3.5")."""
    handle = ctypes.CDLL(path)
    major, minor, patch = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    handle.zmq_version(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(patch))
    return f"{major.value}.{minor.value}.{patch.value}"


def socket_is_ours(ours_path, socket_handle, socket_type):
    """Whether our library recognises `socket_handle` (a zmq.Socket's .underlying) as a live socket
    of type `socket_type`: true only when our zmq_socket created it.

    Our handles start with a 32-bit tag that is checked before anything else is read; a socket of
    libzmq's begins with its vtable pointer, so our library answers ENOTSOCK for it.
    """
    ours = ctypes.CDLL(ours_path)
    getsockopt = ours.zmq_getsockopt
    getsockopt.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
    getsockopt.restype = ctypes.c_int
    value, size = ctypes.c_int(-1), ctypes.c_size_t(ctypes.sizeof(ctypes.c_int))
    rc = getsockopt(socket_handle, ZMQ_TYPE, ctypes.byref(value), ctypes.byref(size))
    return rc == 0 and value.value == socket_type


def describe(ours_path):
    """{kind, file, scope, symbols, mapped, bundled}: who serves pyzmq's zmq_* calls here.

    kind is 'rzmq' (every checked symbol binds to `ours_path`), 'stock' (to the wheel's bundled
    libzmq), 'other', 'mixed' (symbols bind to different files) or 'not loaded' (no pyzmq backend).
    When our library is in the global scope this makes no dlsym on the backend's own handle: such a
    lookup is logged by LD_DEBUG=bindings as a binding of the backend, which would muddle that proof.
    """
    ours = os.path.realpath(ours_path) if ours_path else None
    backend = backend_module()
    if backend is None:
        return {"kind": "not loaded", "file": None, "scope": "pyzmq's backend is not loaded",
                "symbols": {}, "mapped": mapped_libzmq(), "bundled": None}
    symbols = {sym: bound_file(sym)[0] for sym in SYMBOLS}
    served, scope = bound_file()
    files = set(symbols.values()) | {served}
    bundled = bundled_libzmq()
    backend_file = os.path.realpath(backend.__file__)
    if len(files) > 1:
        kind = "mixed"
    elif ours and served == ours:
        kind = "rzmq"
    elif bundled and served == bundled:
        kind = "stock"
    else:
        kind = "other"
    return {"kind": kind, "file": served, "scope": scope, "symbols": symbols,
            "mapped": mapped_libzmq(), "bundled": bundled, "backend": backend_file}
