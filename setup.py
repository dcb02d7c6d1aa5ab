"""Installs the Python package `hora` (python/hora and the extension hora._core).

    /usr/bin/python3 -m pip install --no-build-isolation .

HORA_CMAKE_BUILD_DIR=build reuses the project's configured build tree instead
of configuring and building a tree of its own (the test does this).

The extension is built by the project's CMake (target hora_python_core, with
the interpreter running pip), so pip needs no network and no compiler flags of
its own; `make` builds the same package under build/python for use in place.
"""

import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        # HORA_CMAKE_BUILD_DIR: an already configured tree (such as the
        # project's build/) to build the extension in, as it is configured;
        # otherwise a fresh tree of pip's own, with the build type `make` uses
        # (GCC 12's -O3 warns falsely in std::string code, and warnings are errors).
        tree = os.environ.get("HORA_CMAKE_BUILD_DIR")
        if tree:
            tree = os.path.abspath(tree)
        else:
            tree = os.path.abspath(os.path.join(self.build_temp, "cmake"))
            subprocess.check_call([
                "cmake", "-S", ROOT, "-B", tree, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                "-DHORA_BUILD_TESTS=OFF", "-DHORA_BUILD_BENCH=OFF", "-DHORA_BUILD_PYTHON=ON",
                "-DPython_EXECUTABLE=" + sys.executable])
        subprocess.check_call(["cmake", "--build", tree, "--target", "hora_python_core"])
        built = glob.glob(os.path.join(tree, "python", "hora", "_core*.so"))
        if len(built) != 1:
            raise RuntimeError("expected one hora/_core*.so under %s, found %s" % (tree, built))
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built[0], target)
        # The MPI plugins (one per MPI installed) go beside _core, where Hora
        # looks for them.
        for plugin in glob.glob(os.path.join(tree, "python", "hora", "libhora-mpi-*.so")):
            shutil.copyfile(plugin, os.path.join(os.path.dirname(target),
                                                 os.path.basename(plugin)))


setup(
    name="hora",
    version="0.1.0",
    description="Data-parallel distributed training: Horovod's API over Hora's collectives",
    package_dir={"": "python"},
    packages=find_packages("python"),
    ext_modules=[Extension("hora._core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    zip_safe=False,
)
