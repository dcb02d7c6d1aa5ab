#!/usr/bin/env bash
# Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#
# Runs a GPU test where a GPU is, on it: `if_gpu.sh PROBE CMD...` asks PROBE
# (hora-gpu-check --probe) whether GPU 0 opens; if not, it prints why and
# exits 77, which ctest counts as skipped (ctest -L gpu). Otherwise it runs
# CMD with the tests' device set to CUDA (HORATEST_DEVICE, HORA_DEVICE).
set -u
probe=$1
shift
said=$("$probe" --probe 2>&1)
rc=$?
echo "$said"
if [[ $rc -eq 77 ]]; then
  echo "skipped: no usable GPU"
  exit 77
fi
[[ $rc -ne 0 ]] && exit "$rc"
export HORATEST_DEVICE=cuda HORA_DEVICE=cuda
exec "$@"
