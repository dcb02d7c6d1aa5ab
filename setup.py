"""Installs Hora into a Python environment (a virtual environment on Debian 12,
whose system Python is externally managed):

    python3 -m venv --system-site-packages .venv      # Debian's torch and numpy
    .venv/bin/pip install --no-build-isolation .      # builds the C++ core once
    # or: pip wheel --no-build-isolation --no-deps -w dist .   then, in any venv,
    #     pip install dist/hora-*.whl                  (seconds)

What it installs:
* the Python package ``hora`` (python/hora, the extension hora._core and the
  MPI plugins beside it);
* ``horarun`` on PATH (a console script that runs the launcher binary bundled
  in the package; also ``python -m hora.run``);
* for C++ users, under the environment's prefix: include/hora/*.h,
  lib/libhora.so with the MPI plugins beside it, lib/cmake/Hora
  (``find_package(Hora)``) and lib/pkgconfig/hora.pc.

Everything is built by the project's CMake (`cmake --install` into a staging
directory, then copied), so pip needs no network and no compiler flags of its
own. HORA_CMAKE_BUILD_DIR=build reuses the project's configured build tree
instead of configuring and building one of pip's own (the test does this).
"""

import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext
try:
    from setuptools.command.install_data import install_data
except ImportError:  # setuptools < 69 (Debian 12's 66) has no install_data of its own
    from distutils.command.install_data import install_data

ROOT = os.path.dirname(os.path.abspath(__file__))


def _staging(build_temp):
    return os.path.abspath(os.path.join(build_temp, "hora-install"))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        # HORA_CMAKE_BUILD_DIR: an already configured tree (such as the
        # project's build/) to build in, as it is configured; otherwise a
        # fresh tree of pip's own, with the build type `make` uses (GCC 12's
        # -O3 warns falsely in std::string code, and warnings are errors).
        tree = os.environ.get("HORA_CMAKE_BUILD_DIR")
        if tree:
            tree = os.path.abspath(tree)
        else:
            tree = os.path.abspath(os.path.join(self.build_temp, "cmake"))
            subprocess.check_call([
                "cmake", "-S", ROOT, "-B", tree, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                "-DHORA_BUILD_TESTS=OFF", "-DHORA_BUILD_BENCH=OFF", "-DHORA_BUILD_PYTHON=ON",
                "-DPython_EXECUTABLE=" + sys.executable])
        # Everything `cmake --install` installs (in the project's tree: what
        # `make` builds anyway).
        subprocess.check_call(["cmake", "--build", tree])
        staging = _staging(self.build_temp)
        shutil.rmtree(staging, ignore_errors=True)
        # --strip: the tree's RelWithDebInfo objects carry debug info, 5x the code.
        subprocess.check_call(["cmake", "--install", tree, "--prefix", staging, "--strip"])
        built = glob.glob(os.path.join(tree, "python", "hora", "_core*.so"))
        if len(built) != 1:
            raise RuntimeError("expected one hora/_core*.so under %s, found %s" % (tree, built))
        target = self.get_ext_fullpath(ext.name)
        package = os.path.dirname(target)
        os.makedirs(package, exist_ok=True)
        shutil.copyfile(built[0], target)
        if shutil.which("strip"):
            subprocess.check_call(["strip", "--strip-debug", target])
        # The MPI plugins beside _core, where Hora looks for them.
        for plugin in glob.glob(os.path.join(staging, "lib", "libhora-mpi-*.so")):
            shutil.copyfile(plugin, os.path.join(package, os.path.basename(plugin)))
        # The launcher, run by the console script `horarun` (hora/run.py).
        os.makedirs(os.path.join(package, "bin"), exist_ok=True)
        launcher = os.path.join(package, "bin", "horarun")
        shutil.copyfile(os.path.join(staging, "bin", "horarun"), launcher)
        os.chmod(launcher, 0o755)


class InstallStaged(install_data):
    """Installs the C++ part of the staging tree (include/, lib/) under the
    environment's prefix (the wheel's .data/data)."""

    def run(self):
        build_temp = self.get_finalized_command("build_ext").build_temp
        staging = _staging(build_temp)
        # Without them the wheel would hold no C++ part at all, silently.
        for top, needed in (("include", os.path.join("hora", "hora.h")), ("lib", "libhora.so")):
            if not os.path.isfile(os.path.join(staging, top, needed)):
                raise RuntimeError(
                    "the C++ staging tree %s has no %s/%s: build_ext installs it there "
                    "(cmake --install), and must run first" % (staging, top, needed))
        files = {}
        for top in ("include", "lib"):
            for path in glob.glob(os.path.join(staging, top, "**", "*"), recursive=True):
                if os.path.isfile(path):
                    rel = os.path.dirname(os.path.relpath(path, staging))
                    files.setdefault(rel, []).append(path)
        self.data_files = list(self.data_files or []) + sorted(files.items())
        super().run()


# The metadata (name, version, dependencies, extras, the horarun script) is
# pyproject.toml's [project] table; here only how the package is built.
setup(
    package_dir={"": "python"},
    packages=find_packages("python"),
    ext_modules=[Extension("hora._core", sources=[])],
    # (install_data runs only when there are data files: the license is one;
    # InstallStaged adds the headers and libraries once they are built.)
    data_files=[("share/hora", ["LICENSE"])],
    cmdclass={"build_ext": CMakeBuild, "install_data": InstallStaged},
    zip_safe=False,
)
