"""rzmq for Python: serve pyzmq's zmq_* calls with rzmq's libzmq.so.5 (ZeroMQ in Rust, RDMA data path).

The stock pyzmq wheel stays unchanged. Nothing happens on install; rzmq takes over only when asked:

- ``rzmq run -- python app.py``: runs a command with rzmq serving its pyzmq, children included;
- ``RZMQ_ACTIVATE=1`` in the environment: every Python process of this environment (including
  multiprocessing spawn and fork children) loads rzmq before pyzmq;
- ``rzmq.activate()`` called before ``import zmq``.

``rzmq doctor`` (or ``python -m rzmq``) shows which libzmq serves pyzmq and tests the transport.
See docs/PYTHON.md in the repository for how activation works and its limits.
"""

from ._activate import ACTIVATE_ENV, activate, env_flag, is_active, library_path, served_by

__version__ = "0.1.0"

__all__ = ["ACTIVATE_ENV", "activate", "env_flag", "is_active", "library_path", "served_by", "__version__"]
