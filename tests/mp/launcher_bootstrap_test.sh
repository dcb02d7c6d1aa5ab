#!/usr/bin/env bash
# Hora started by a launcher other than horarun with no HORA_* variable at
# all: it must find the rendezvous and the job secret by itself.
#   launcher_bootstrap_test.sh MODE NP PROGRAM [PYTHON PYTHONPATH]
# PROGRAM is the C++ multi-process worker, or "python" for
# tests/python/launcher_check.py (run by PYTHON with PYTHONPATH). Modes:
#   openmpi | mpich   plain `mpirun -np NP PROGRAM` (MPI carries rank 0's
#                     address and secret); Python must report mpi_enabled
#   mpirun-late-FLAVOUR  the last rank starts 30 s late; HORA_START_TIMEOUT_S=3
#                     (the one variable set) must end the job long before,
#                     rank 0 saying what it waited for
#   srun              NP processes started here with only Slurm's variables
#                     (SLURM_PROCID, SLURM_NTASKS, ..., SLURM_STEP_NODELIST=
#                     this host) and HOME in a temporary directory: the secret
#                     goes through ~/.hora/jobs/<job>.<step>, gone afterwards
#   srun-missing      as srun, but rank 0 never starts and
#                     HORA_START_TIMEOUT_S=3: the others must fail within
#                     about 3 s, naming the secret file and the shared home
# Every rank must pass its checks (except in the failing modes).
set -u
mode="$1"; np="$2"; program="$3"; python="${4:-python3}"; pythonpath="${5:-}"
here="$(cd "$(dirname "$0")" && pwd)"
fail() { echo "FAIL: $*"; exit 1; }
# No HORA_* variable from whoever runs the test.
for v in $(compgen -e | grep '^HORA_'); do unset "$v"; done
if [ "$program" = python ]; then
  export PYTHONPATH="$pythonpath" OMP_NUM_THREADS=1
  cmd=("$python" "$here/../python/launcher_check.py")
  pass_text="launcher checks passed"
else
  cmd=("$program")
  pass_text="checks passed"
fi
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
out=$(mktemp)
home=$(mktemp -d)
trap 'rm -rf "$out" "$home"' EXIT

mpirun_args() {  # flavour
  if [ "$1" = openmpi ]; then echo "-np $np --oversubscribe --bind-to none"; else echo "-np $np"; fi
}
# Starts rank $1 of an srun-like step (job 4242, step 7) in the background.
srun_rank() {
  local r="$1"; shift
  env -i PATH="$PATH" HOME="$home" PYTHONPATH="${PYTHONPATH:-}" OMP_NUM_THREADS=1 \
    SLURM_JOB_ID=4242 SLURM_STEP_ID=7 SLURM_PROCID="$r" SLURM_NTASKS="$np" \
    SLURM_LOCALID="$r" SLURM_NTASKS_PER_NODE="$np" SLURM_TASKS_PER_NODE="$np" \
    SLURM_NODEID=0 SLURM_NNODES=1 SLURM_STEP_NODELIST="$(hostname)" \
    SLURM_JOB_NODELIST="$(hostname)" "$@" "${cmd[@]}" &
}

start=$(date +%s.%N)
rc=0
case "$mode" in
  openmpi|mpich)
    [ "$program" = python ] && cmd+=(1)
    # shellcheck disable=SC2046
    timeout 240 "mpirun.$mode" $(mpirun_args "$mode") "${cmd[@]}" >"$out" 2>&1 || rc=$?
    ;;
  mpirun-late-*)
    flavour="${mode#mpirun-late-}"
    [ "$program" = python ] || fail "mode $mode runs the Python check"
    cmd+=(1 $((np - 1)) 30)
    if [ "$flavour" = openmpi ]; then set_timeout=(-x HORA_START_TIMEOUT_S=3); else
      set_timeout=(-genv HORA_START_TIMEOUT_S 3); fi
    # shellcheck disable=SC2046
    timeout 60 "mpirun.$flavour" $(mpirun_args "$flavour") "${set_timeout[@]}" "${cmd[@]}" \
      >"$out" 2>&1 || rc=$?
    ;;
  srun|srun-missing)
    [ "$program" = python ] && cmd+=(0)
    pids=()
    first=0
    if [ "$mode" = srun-missing ]; then first=1; fi
    for r in $(seq "$first" $((np - 1))); do
      if [ "$mode" = srun-missing ]; then
        srun_rank "$r" HORA_START_TIMEOUT_S=3
      else
        srun_rank "$r"
      fi
      pids+=($!)
    done >"$out" 2>&1
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    ;;
  *) fail "unknown mode $mode" ;;
esac
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
cat "$out"
echo "($mode, np $np: exit $rc after ${elapsed} s)"
case "$mode" in
  mpirun-late-*)
    [ "$rc" -ne 0 ] || fail "exit 0 although a rank was 30 s late with HORA_START_TIMEOUT_S=3"
    [ "$rc" -ne 124 ] || fail "the job did not end within 60 s"
    grep -q "init failed after" "$out" || fail "no rank reported a failed init"
    grep -q "HORA_START_TIMEOUT_S=3 s" "$out" || fail "the error does not name HORA_START_TIMEOUT_S"
    grep -q "waits for every rank of the MPI job" "$out" || fail "the error does not say what it waited for"
    [ "$(echo "$elapsed < 20" | bc)" = 1 ] || fail "took ${elapsed} s (HORA_START_TIMEOUT_S=3)"
    exit 0 ;;
  srun-missing)
    [ "$rc" -ne 0 ] || fail "exit 0 although rank 0 never started"
    grep -q "waiting for rank 0's job secret within HORA_START_TIMEOUT_S=3 s" "$out" ||
      fail "the error does not say it waited for rank 0's job secret"
    grep -q "$home/.hora/jobs/4242.7-[0-9]* did not appear" "$out" || fail "the error does not name the file"
    grep -q "which every host must share" "$out" || fail "the error does not name the shared home"
    [ "$(echo "$elapsed < 10" | bc)" = 1 ] || fail "took ${elapsed} s (HORA_START_TIMEOUT_S=3)"
    exit 0 ;;
esac
[ "$rc" -eq 0 ] || fail "exit code $rc"
# Occurrences, not lines: two ranks' output can share a line under mpirun.
passed=$(grep -o "$pass_text" "$out" | wc -l)
[ "$passed" -eq "$np" ] || fail "$passed of $np ranks passed their checks"
if [ "$mode" = srun ]; then
  [ -d "$home/.hora/jobs" ] || fail "no $home/.hora/jobs: the secret did not go through the home"
  [ "$(stat -c %a "$home/.hora" "$home/.hora/jobs" | sort -u)" = 700 ] ||
    fail "~/.hora or ~/.hora/jobs is not 0700"
  left=$(ls -A "$home/.hora/jobs")
  [ -z "$left" ] || fail "left in ~/.hora/jobs: $left"
fi
echo "$np ranks passed under $mode"
