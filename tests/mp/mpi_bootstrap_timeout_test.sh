#!/usr/bin/env bash
# The MPI bootstrap with a late rank (tests/mp/mpi_bootstrap_worker.cc):
#   abandon   rank 1's broadcast times out; later ones are refused at once
#   deadline  MPI's start and broadcast share HORA_START_TIMEOUT_S
# In each mode both ranks must report their checks and the job must end
# well within its limit (no MPI_Finalize waiting on an abandoned request).
# The launcher's exit code is not checked: ranks that abandoned a request
# leave without MPI_Finalize, which mpirun may report as an improper exit.
#   mpi_bootstrap_timeout_test.sh FLAVOUR WORKER PLUGIN
set -u
flavour="$1"; worker="$2"; plugin="$3"
fail() { echo "FAIL: $*"; exit 1; }
for v in $(compgen -e | grep '^HORA_'); do unset "$v"; done
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
args=(-np 2)
[ "$flavour" = openmpi ] && args+=(--oversubscribe --bind-to none)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for mode in abandon deadline; do
  start=$(date +%s)
  timeout 60 "mpirun.$flavour" "${args[@]}" "$worker" "$plugin" "$mode" >"$out" 2>&1
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  echo "== $mode (mpirun exit $rc after ${elapsed}s)"
  cat "$out"
  [ "$rc" -ne 124 ] || fail "$mode: the job did not end within 60 s"
  for r in 0 1; do
    grep -q "^rank $r: bootstrap checks passed" "$out" || fail "$mode: rank $r did not pass its checks"
  done
  [ "$elapsed" -lt 30 ] || fail "$mode: took ${elapsed}s"
done
echo "2 passed, 0 failed"
