"""The native library's build; everything else about the package is in pyproject.toml.

``kinematics/native/csrc`` is built by ``kinematics/native/build.py`` into one plain C shared library,
``kinematics/native/libkinematics_native.so`` (in place for ``pip install -e .``). It is declared as an Extension so
that every setuptools path (wheel, editable, sdist) builds it, but it is no Python extension module: no Python.h, no
module init, loaded with ctypes. So its name carries no Python ABI tag and the wheel is tagged ``py3-none-<platform>``:
it depends on neither the Python nor the torch version. Without a working C compiler the install still succeeds,
with a warning: ``kinematics.native`` then tries its first-use build, and else runs the torch ops.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
NATIVE = "kinematics.native.libkinematics_native"
_spec = importlib.util.spec_from_file_location("_kinematics_native_build", HERE / "kinematics/native/build.py")
native_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(native_build)


class BuildNative(build_ext):
    """Builds the plain C library with ``native_build``: each unit compiled in parallel, its object kept, so that a
    rebuild after an edit recompiles the edited units only."""

    def get_ext_filename(self, fullname: str) -> str:
        # asked with the full name (setuptools: "kinematics.native.libkinematics_native") or its last part
        # (distutils' get_ext_fullpath): no Python ABI tag in either
        if fullname == NATIVE:
            return os.path.join(*NATIVE.split(".")[:-1], native_build.LIBRARY)
        if fullname == NATIVE.rsplit(".", 1)[1]:
            return native_build.LIBRARY
        return super().get_ext_filename(fullname)

    def build_extension(self, ext: Extension) -> None:
        if ext.name != NATIVE:
            return super().build_extension(ext)
        output = Path(self.get_ext_fullpath(ext.name))
        # the objects in the user's cache, beside the first-use build's: pip's build folder is a new one each time
        objects = native_build.cache_dir() / "objects"
        try:
            objects.mkdir(parents=True, exist_ok=True)
        except OSError:
            objects = Path(self.build_temp) / "kinematics-native"
        try:
            native_build.build(output, objects, jobs=self.parallel if isinstance(self.parallel, int) else None)
        except (OSError, native_build.subprocess.SubprocessError) as exc:
            self.warn(
                f"the kinematics native library was not built ({exc}); it is built at first use, else the torch ops run"
            )


try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    bdist_wheel = None

cmdclass = {"build_ext": BuildNative}
if bdist_wheel is not None:

    class PlainWheel(bdist_wheel):
        """``py3-none-<platform>``: the library is plain C, loaded with ctypes (no Python ABI)."""

        def get_tag(self) -> tuple[str, str, str]:
            return ("py3", "none", super().get_tag()[2])

    cmdclass["bdist_wheel"] = PlainWheel

setup(
    ext_modules=[
        Extension(
            NATIVE,
            sources=[f"kinematics/native/csrc/{unit}" for unit in native_build.UNITS],
            depends=[f"kinematics/native/csrc/{p.name}" for p in native_build.sources() if p.suffix == ".h"],
        )
    ],
    cmdclass=cmdclass,
)
