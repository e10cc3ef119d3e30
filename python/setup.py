"""Builds the rzmq wheel: the rzmq Python package plus rzmq-capi's cdylib as rzmq/_lib/libzmq.so.5.

setuptools-rust runs cargo on ../rzmq-capi (the workspace's target/ is reused). The library is not
a Python extension module, so it is built with Binding.NoBinding, installed under its soname, and
the wheel is tagged py3-none-<platform> (scripts/build-wheel.sh turns the platform into a
manylinux tag with auditwheel). rzmq-activate.pth goes to the root of site-packages; it does
nothing unless RZMQ_ACTIVATE is on (rzmq/_activate.py).
"""

import os
import shutil

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py
from setuptools_rust import Binding, RustExtension, build_rust

HERE = os.path.dirname(os.path.abspath(__file__))
PTH = "rzmq-activate.pth"
SONAME = "libzmq.so.5"


class BuildRust(build_rust):
    """Places the cdylib as rzmq/_lib/libzmq.so.5 instead of an extension-module file name."""

    def get_dylib_ext_path(self, ext, target_fname):
        default = super().get_dylib_ext_path(ext, target_fname)
        return os.path.join(os.path.dirname(default), SONAME)


class BuildPy(build_py):
    """Also copies the activation .pth file to the root of the build (site-packages once installed)."""

    def run(self):
        super().run()
        shutil.copy2(os.path.join(HERE, PTH), os.path.join(self.build_lib, PTH))

    def get_outputs(self, include_bytecode=True):
        return super().get_outputs(include_bytecode) + [os.path.join(self.build_lib, PTH)]


class BdistWheel(bdist_wheel):
    """Tags the wheel py3-none-<platform>: it holds a C library, no CPython extension module."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


setup(
    rust_extensions=[
        RustExtension(
            "rzmq._lib.libzmq",
            path=os.path.join(HERE, "..", "rzmq-capi", "Cargo.toml"),
            binding=Binding.NoBinding,
            debug=False,
        )
    ],
    cmdclass={"build_rust": BuildRust, "build_py": BuildPy, "bdist_wheel": BdistWheel},
    zip_safe=False,
)
