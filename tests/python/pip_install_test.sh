#!/bin/bash
# Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#
# `pip install --no-build-isolation` of the source tree with no network
# (--no-index), into a scratch target, then a 2-rank allreduce and allgather
# that import hora from there alone (not from build/python). The extension is
# built in the configured tree given (HORA_CMAKE_BUILD_DIR), so the test
# checks the packaging (pyproject.toml, setup.py, package list, MPI plugins
# beside _core) without a second build of the core.
#
#   pip_install_test.sh SOURCE_DIR BUILD_DIR PYTHON HORARUN
set -euo pipefail
src=$1 build=$2 python=$3 horarun=$4
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# pip builds in a copy of the package sources, so that the tree gets no
# build/ or egg-info; with HORA_CMAKE_BUILD_DIR setup.py builds the extension
# target in that configured tree and does not configure from the copy.
mkdir "$scratch/src-tree"
cp -r "$src/python" "$src/setup.py" "$src/pyproject.toml" "$scratch/src-tree/"
PIP_ROOT_USER_ACTION=ignore HORA_CMAKE_BUILD_DIR="$build" "$python" -m pip install --no-build-isolation --no-deps --no-index \
  --quiet --target "$scratch/site" "$scratch/src-tree"

ls "$scratch/site/hora/" | grep -q '^_core.*\.so$' || { echo "FAIL: no hora/_core*.so installed"; exit 1; }
[[ -f "$scratch/site/hora/torch/__init__.py" || -f "$scratch/site/hora/torch.py" ]] ||
  { echo "FAIL: hora.torch not installed"; ls -R "$scratch/site/hora"; exit 1; }
if ls "$build/python/hora/" | grep -q '^libhora-mpi-'; then
  ls "$scratch/site/hora/" | grep -q '^libhora-mpi-' ||
    { echo "FAIL: the MPI plugins were not installed beside _core"; exit 1; }
fi

cat > "$scratch/check.py" <<'PY'
import sys
import hora
import hora.torch as hvd
import torch
site = sys.argv[1]
assert hora.__file__.startswith(site), "hora imported from %s, not %s" % (hora.__file__, site)
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
PYTHONPATH="$scratch/site" OMP_NUM_THREADS=1 "$horarun" -np 2 --timeout 60 \
  "$python" "$scratch/check.py" "$scratch/site"
echo "PASS: pip install --no-build-isolation --no-index, then np 2 from the installed package"
