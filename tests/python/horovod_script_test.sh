#!/bin/bash
# Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#
# Issue 25's drop-in check: one Horovod training script, unchanged but for
# its import (tests/python/scripts/horovod_train.py: DistributedOptimizer,
# broadcast state, metric averaging, a sparse embedding, join), run
#   - under horarun at np 2 and 3,
#   - under plain mpirun (OpenMPI and MPICH) at np 2, with no HORA_* variable,
#   - as srun starts ranks (only SLURM_* variables) at np 2,
# each rank checking its result.
#
#   horovod_script_test.sh SOURCE_DIR HORARUN PYTHON
set -euo pipefail
src=$1 horarun=$2 python=$3
script=$src/tests/python/scripts/horovod_train.py
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export OMP_NUM_THREADS=1
# Nothing of Hora's own from the caller's environment.
for v in $(env | grep -o '^HORA_[A-Z_]*' || true); do unset "$v"; done

expect_ok() {  # what output: every rank printed OK
  local what=$1 n=$2 out=$3
  [[ $(grep -o "rank [0-9]*: OK" <<<"$out" | wc -l) == "$n" ]] || { echo "$out"; fail "$what"; }
  echo "ok: $what"
}

for np in 2 3; do
  out=$("$horarun" -np "$np" --timeout 120 "$python" "$script" 2>&1) || true
  expect_ok "horarun -np $np" "$np" "$out"
done

for m in mpirun.openmpi mpirun.mpich; do
  command -v "$m" > /dev/null || fail "$m is not installed (scripts/setup-deps installs it)"
done
out=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 \
  mpirun.openmpi -np 2 --oversubscribe -x PYTHONPATH -x OMP_NUM_THREADS "$python" "$script" 2>&1) || true
expect_ok "mpirun.openmpi -np 2" 2 "$out"
out=$(timeout 300 mpirun.mpich -np 2 "$python" "$script" 2>&1) || true
expect_ok "mpirun.mpich -np 2" 2 "$out"

# srun's variables for 2 tasks on this node; HOME private to the test.
pids=()
for r in 0 1; do
  env HOME="$scratch" SLURM_JOB_ID=4242 SLURM_STEP_ID=0 SLURM_PROCID=$r SLURM_NTASKS=2 \
    SLURM_LOCALID=$r SLURM_NODEID=0 SLURM_NNODES=1 SLURM_TASKS_PER_NODE=2 \
    SLURM_NTASKS_PER_NODE=2 SLURM_STEP_NODELIST="$(hostname)" SLURM_JOB_NODELIST="$(hostname)" \
    timeout 300 "$python" "$script" > "$scratch/srun.$r" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || true; done
expect_ok "srun-style variables, 2 tasks" 2 "$(cat "$scratch"/srun.*)"
echo "PASS: the Horovod script under horarun, mpirun and srun"
