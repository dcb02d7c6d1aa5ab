#!/bin/bash
# Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#
# The install a user makes (README, docs/guide/install.md):
#   - a wheel built by PYTHON (the project environment's, not Debian's) with
#     `pip wheel --no-build-isolation`, and again with build isolation (pip
#     fetches setuptools and wheel from PyPI); its metadata declares numpy
#     and the frameworks' extras;
#   - installed with its dependencies into a fresh venv of that Python: numpy
#     comes from PyPI, hora.numpy runs under the venv's horarun, then (the
#     project environment's torch added) a part of the Python suite runs
#     against the installed package (HORA_TEST_INSTALLED=1);
#   - installed with no network into a venv of LEGACY_PYTHON
#     (--system-site-packages: Debian's torch 1.13), where
#     `horarun` on the venv's PATH (the console script) and `python -m hora.run`
#     run a 2-rank allreduce and allgather that import hora from the venv;
#   - the C++ trainer of examples/cpp built against the installed package with
#     find_package(Hora) (found through the venv's bin/ on PATH, no hints) and
#     with pkg-config (PKG_CONFIG_PATH=$VIRTUAL_ENV/lib/pkgconfig, as the
#     README says), run under the installed horarun;
#   - HORA_TRANSPORT=mpi under plain mpirun finds its MPI plugin beside the
#     installed libhora.so (no HORA_MPI_PLUGIN).
# The wheel's C++ is built in the configured tree given (HORA_CMAKE_BUILD_DIR),
# so the test checks the packaging without a second build of the core.
#
#   pip_install_test.sh SOURCE_DIR BUILD_DIR PYTHON LEGACY_PYTHON
set -euo pipefail
src=$1 build=$2 python=$3 legacy=${4:-$3}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1

# pip builds in a copy of the sources, so that the tree gets no build/ or
# egg-info; with HORA_CMAKE_BUILD_DIR setup.py builds and installs from that
# configured tree and does not configure from the copy.
mkdir "$scratch/src-tree"
cp -r "$src/python" "$src/setup.py" "$src/pyproject.toml" "$src/LICENSE" "$src/README.md" \
  "$scratch/src-tree/"
# Installing the C++ part before it is built fails, naming what is missing
# (it once installed nothing, silently).
if out=$(cd "$scratch/src-tree" && "$python" setup.py -q install_data --install-dir "$scratch/x" 2>&1); then
  fail "install_data without the C++ staging tree succeeded: $out"
fi
grep -q "C++ staging tree .* has no include/hora/hora.h" <<<"$out" || fail "install_data without staging: $out"
rm -rf "$scratch/src-tree/build" "$scratch/src-tree"/python/*.egg-info "$scratch/x"
HORA_CMAKE_BUILD_DIR="$build" "$python" -m pip wheel --quiet \
  --no-build-isolation --no-deps --no-index -w "$scratch/dist" "$scratch/src-tree"
wheel=$(ls "$scratch"/dist/hora-*.whl)
echo "wheel: $(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB"
rm -rf "$scratch/src-tree/build" "$scratch/src-tree"/python/*.egg-info
HORA_CMAKE_BUILD_DIR="$build" "$python" -m pip wheel --quiet --no-deps \
  -w "$scratch/dist-isolated" "$scratch/src-tree" || fail "pip wheel with build isolation"
ls "$scratch"/dist-isolated/hora-*.whl > /dev/null || fail "no wheel from the isolated build"
meta=$(unzip -p "$wheel" 'hora-*.dist-info/METADATA')
for want in "Requires-Python: >=3.9" "Requires-Dist: numpy" "Provides-Extra: torch" \
    "Provides-Extra: tensorflow" "Provides-Extra: jax" "Provides-Extra: ray"; do
  grep -q "^$want" <<<"$meta" || fail "the wheel's METADATA lacks '$want'"
done

# A venv of PYTHON with no framework: pip brings numpy; hora.numpy runs.
"$python" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)' 2>/dev/null &&
  base=$("$python" -c 'import sys, os; print(os.path.join(sys.base_prefix, "bin", "python3"))') ||
  base=$python
"$base" -m venv "$scratch/venv-new"
"$scratch/venv-new/bin/pip" install --quiet "$wheel" || fail "pip install of the wheel with its dependencies"
cat > "$scratch/check_numpy.py" <<'PY'
import numpy as np
import hora.numpy as hnp
hnp.init()
r, n = hnp.rank(), hnp.size()
total = hnp.allreduce(np.arange(4, dtype=np.float32) + r, op=hnp.Sum)
assert (total == sum(np.arange(4, dtype=np.float32) + q for q in range(n))).all(), total
hnp.shutdown()
print("rank %d: numpy-only install OK" % r)
PY
out=$(cd "$scratch" && env -u PYTHONPATH OMP_NUM_THREADS=1 "$scratch/venv-new/bin/horarun" -np 2 \
  --timeout 60 "$scratch/venv-new/bin/python" "$scratch/check_numpy.py" 2>&1) || fail "numpy-only venv: $out"
[[ $(grep -c "numpy-only install OK" <<<"$out") == 2 ]] || fail "numpy-only venv: $out"
# The project environment's frameworks beside the installed hora, and the
# suite's files that need no build tree, against the installed package.
site=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
newsite=$("$scratch/venv-new/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$site" > "$newsite/project-env.pth"
# The extra resolves (torch is there now, through that .pth: nothing to fetch).
"$scratch/venv-new/bin/pip" install --quiet "$wheel[torch]" || fail "pip install hora[torch]"
out=$(cd "$scratch" && env -u PYTHONPATH OMP_NUM_THREADS=1 HORA_TEST_INSTALLED=1 \
  "$scratch/venv-new/bin/horarun" -np 2 --timeout 120 "$scratch/venv-new/bin/python" -m pytest -q \
  -p no:cacheprovider "$src/tests/python/test_basics.py" "$src/tests/python/test_allreduce.py" \
  "$src/tests/python/test_functions.py" 2>&1) || fail "the suite against the installed package: $out"
grep -q "passed" <<<"$out" && ! grep -q "failed" <<<"$out" || fail "the suite against the installed package: $out"
echo "the suite against the installed package: $(grep -m1 passed <<<"$out")"

python=$legacy
"$python" -m venv --system-site-packages "$scratch/venv"
venv=$scratch/venv
start=$(date +%s%N)
"$venv/bin/pip" install --quiet --no-index --no-deps "$wheel"
echo "pip install of the wheel: $(( ($(date +%s%N) - start) / 1000000 )) ms"

[[ -x "$venv/bin/horarun" ]] || fail "no horarun in the venv's bin/"
for f in include/hora/hora.h lib/libhora.so lib/cmake/Hora/HoraConfig.cmake lib/pkgconfig/hora.pc; do
  [[ -f "$venv/$f" ]] || fail "$f not installed"
done
if ls "$build/lib/" | grep -q '^libhora-mpi-'; then
  ls "$venv/lib/" | grep -q '^libhora-mpi-' || fail "the MPI plugins are not beside libhora.so"
  ls "$venv"/lib/python3*/site-packages/hora/ | grep -q '^libhora-mpi-' ||
    fail "the MPI plugins are not beside hora/_core"
fi

cat > "$scratch/check.py" <<'PY'
import sys
import hora
import hora.torch as hvd
import torch
assert hora.__file__.startswith(sys.argv[1]), "hora imported from %s, not %s" % (hora.__file__, sys.argv[1])
hvd.init()
r, n = hvd.rank(), hvd.size()
x = torch.arange(5, dtype=torch.float32) + 10 * r
total = hvd.allreduce(x, op=hvd.Sum)
expected = sum(torch.arange(5, dtype=torch.float32) + 10 * q for q in range(n))
assert torch.equal(total, expected), (total, expected)
g = hvd.allgather(torch.full((r + 1, 2), float(r)))
assert g.shape == (sum(q + 1 for q in range(n)), 2), g.shape
hvd.shutdown()
print("rank %d: installed package OK" % r)
PY
cd "$scratch"
# A user's shell after `source venv/bin/activate`: the venv's bin/ first.
export PATH="$venv/bin:$PATH" OMP_NUM_THREADS=1
unset PYTHONPATH
out=$(horarun -np 2 --timeout 60 python "$scratch/check.py" "$venv")
[[ $(grep -c "installed package OK" <<<"$out") == 2 ]] || fail "horarun (console script): $out"
out=$(python -m hora.run -np 2 --timeout 60 python "$scratch/check.py" "$venv")
[[ $(grep -c "installed package OK" <<<"$out") == 2 ]] || fail "python -m hora.run: $out"

cmake -S "$src/examples/cpp" -B "$scratch/trainer" -G Ninja > "$scratch/cmake.log" 2>&1 ||
  { cat "$scratch/cmake.log"; fail "find_package(Hora)"; }
cmake --build "$scratch/trainer" > "$scratch/build.log" 2>&1 ||
  { cat "$scratch/build.log"; fail "building examples/cpp against the installed package"; }
out=$(horarun -np 2 --timeout 60 "$scratch/trainer/trainer")
grep -q "(ok)" <<<"$out" || fail "C++ trainer (find_package): $out"

# A read-only install whose launcher lost its x bit: a clear message, not
# a traceback.
out=$(python - 2>&1 <<'PY'
import os
import hora.run as run
path = run.launcher_path()
os.chmod(path, 0o644)
def read_only(*args):
    raise PermissionError(30, "Read-only file system")
os.chmod = read_only
print("rc", run.main(["--version"]))
PY
) || true
chmod 755 "$(python -c 'import hora.run as r; print(r.launcher_path())')"
grep -q "is not executable and cannot be made so (Read-only file system)" <<<"$out" &&
  grep -q "^rc 2$" <<<"$out" || fail "hora.run with a launcher it cannot make executable: $out"

export PKG_CONFIG_PATH="$venv/lib/pkgconfig"
[[ " $(pkg-config --libs hora) " == *" -pthread "* ]] || fail "pkg-config --libs hora: no -pthread"
# shellcheck disable=SC2046
g++ $(pkg-config --cflags hora) "$src/examples/cpp/trainer.cc" -o "$scratch/trainer-pc" \
  $(pkg-config --libs hora) || fail "building with pkg-config hora"
out=$(horarun -np 3 --timeout 60 "$scratch/trainer-pc")
grep -q "(ok)" <<<"$out" || fail "C++ trainer (pkg-config): $out"

if command -v mpirun.openmpi > /dev/null && ls "$venv/lib/" | grep -q '^libhora-mpi-openmpi'; then
  out=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 \
    mpirun.openmpi -np 2 --oversubscribe -x HORA_TRANSPORT=mpi "$scratch/trainer/trainer" 2>&1) ||
    fail "HORA_TRANSPORT=mpi under mpirun: $out"
  grep -q "(ok)" <<<"$out" || fail "HORA_TRANSPORT=mpi under mpirun: $out"
fi
echo "PASS: wheels (with and without build isolation), numpy-only venv, the suite installed, venv install, horarun, python -m hora.run, find_package(Hora), pkg-config, MPI plugin"
