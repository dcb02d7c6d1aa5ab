#!/usr/bin/env bash
# Hora under an MPI launcher (OpenMPI's or MPICH's mpirun), np ranks of the
# multi-process worker, in one of these modes:
#   transport-mpi   HORA_TRANSPORT=mpi: Hora's algorithms over MPI point-to-point
#   backend-mpi     HORA_BACKEND=mpi: MPI's own collectives (nonblocking forms)
#   backend-mpi-blocking  HORA_BACKEND=mpi-blocking: MPI_Allreduce, MPI_Bcast, ...
#   stall-blocking  HORA_BACKEND=mpi-blocking, the last rank stops calling
#                   (sleeps): the watchdog must abort the job within the timeout
#   shm | tcp       Hora's transports, rendezvous served by rank 0 (no horarun)
#   horarun-mpi     horarun --transport mpi --mpirun mpirun.FLAVOUR
#   horarun-shm     horarun --mpi (mpirun starts the ranks, horarun serves the store)
#   kill            horarun --transport mpi, the last rank SIGKILLs itself:
#                   the job must end non-zero within the timeout, nothing left
#   disagree        HORA_TRANSPORT=mpi with HORA_ALLREDUCE_ALGO=ring and
#                   HORA_BLOCKS_AT_ONCE=1 on rank 0 only: every rank's Session
#                   fails at once, naming both (the comparison's own
#                   allgathers must not take rank 0's setting first)
# Every rank must print "checks passed" (except in kill mode).
set -u
. "$(dirname "$0")/lib.sh"
flavour="$1"; np="$2"; mode="$3"; worker="$4"; horarun="${5:-}"
mpirun="mpirun.$flavour"
command -v "$mpirun" >/dev/null || { echo "FAIL: $mpirun is not installed (scripts/setup-deps installs it)"; exit 1; }
fail() { echo "FAIL: $*"; exit 1; }

if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
# Run directly under mpirun with the given HORA_* settings.
direct() {
  local args=()
  if [ "$flavour" = openmpi ]; then
    args=(-np "$np" --oversubscribe --bind-to none)
    for kv in "$@"; do args+=(-x "$kv"); done
  else
    args=(-np "$np")
    for kv in "$@"; do args+=(-genv "${kv%%=*}" "${kv#*=}"); done
  fi
  timeout 240 "$mpirun" "${args[@]}" "$worker"
}
free_port() {  # a port with nothing listening on it nor on the next 3
  # Below the kernel's ephemeral range (32768 up): a port picked there could
  # be the local end of some other test's connection ("Address already in
  # use" when rank 0 starts the store; seen once in make test).
  local p
  for _ in $(seq 50); do
    p=$(( 20000 + RANDOM % 12000 ))
    if ! ss -ltnH | awk '{print $4}' | grep -qE ":($p|$((p+1))|$((p+2))|$((p+3)))\$"; then echo "$p"; return; fi
  done
  echo 29500
}

out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
case "$mode" in
  transport-mpi) direct HORA_TRANSPORT=mpi HORA_TIMEOUT_S=60 >"$out" 2>&1 ;;
  backend-mpi) direct HORA_BACKEND=mpi HORA_TIMEOUT_S=60 >"$out" 2>&1 ;;
  backend-mpi-blocking) direct HORA_BACKEND=mpi-blocking HORA_TIMEOUT_S=60 >"$out" 2>&1 ;;
  stall-blocking) HORA_TEST_TAG=$HORA_TEST_TAG timeout 60 "$horarun" -np "$np" --mpi --mpirun "$mpirun" \
                    --timeout 5 -- env HORA_BACKEND=mpi-blocking "$worker" --stall-at 5 >"$out" 2>&1 ;;
  shm|tcp) direct HORA_TRANSPORT="$mode" HORA_TIMEOUT_S=60 HORA_STORE_ADDR="127.0.0.1:$(free_port)" \
             HORA_SECRET="test-$RANDOM$RANDOM" >"$out" 2>&1 ;;
  horarun-mpi) timeout 240 "$horarun" -np "$np" --transport mpi --mpirun "$mpirun" --timeout 60 \
                 "$worker" >"$out" 2>&1 ;;
  horarun-shm) timeout 240 "$horarun" -np "$np" --mpi --mpirun "$mpirun" --transport shm \
                 --timeout 60 "$worker" >"$out" 2>&1 ;;
  kill) HORA_TEST_TAG=$HORA_TEST_TAG timeout 60 "$horarun" -np "$np" --transport mpi --mpirun "$mpirun" --timeout 20 \
          "$worker" --die-at 5 >"$out" 2>&1 ;;
  disagree)  # (MPMD: rank 0 with a setting of its own)
    if [ "$flavour" = openmpi ]; then
      # (-x belongs to its app context: each gets its own.)
      HORA_TEST_TAG=$HORA_TEST_TAG HORA_TRANSPORT=mpi timeout 60 "$mpirun" --oversubscribe \
        --bind-to none -np 1 -x HORA_TRANSPORT -x HORA_TEST_TAG -x HORA_ALLREDUCE_ALGO=ring \
        -x HORA_BLOCKS_AT_ONCE=1 \
        "$worker" : -np $((np - 1)) -x HORA_TRANSPORT -x HORA_TEST_TAG "$worker" >"$out" 2>&1
    else
      HORA_TEST_TAG=$HORA_TEST_TAG timeout 60 "$mpirun" -genv HORA_TRANSPORT mpi \
        -genv HORA_TEST_TAG "$HORA_TEST_TAG" -np 1 -env HORA_ALLREDUCE_ALGO ring \
        -env HORA_BLOCKS_AT_ONCE 1 "$worker" : \
        -np $((np - 1)) "$worker" >"$out" 2>&1
    fi ;;
  *) fail "unknown mode $mode" ;;
esac
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
# A job one of whose ranks failed on purpose: it must end non-zero within
# max_s, saying `expect`, with nothing left running.
expect_stopped() {  # text the output must hold, max seconds
  [ "$rc" -ne 0 ] || fail "exit 0 although a rank failed on purpose"
  [ "$rc" -ne 124 ] || fail "the job did not end within 60 s"
  grep -q "$1" "$out" || fail "the output does not say '$1'"
  [ "$elapsed" -lt "$2" ] || fail "took ${elapsed}s, more than $2 s"
  sleep 0.5
  left=$(tagged_processes)
  [ -z "$left" ] || fail "processes left running: $left"
  echo "1 passed, 0 failed (exit $rc after ${elapsed}s)"
  exit 0
}
case "$mode" in
  stall-blocking)
    grep -q "stalling for 300 s" "$out" || fail "the rank did not stall"
    expect_stopped "MPI_Allreduce did not finish within 5 s (HORA_TIMEOUT_S)" 30 ;;
  kill) expect_stopped "killing myself" 25 ;;
  disagree)
    grep -q "HORA_BLOCKS_AT_ONCE is '1' on rank 0 and 'auto' on ranks 1, 2" "$out" ||
      fail "the output does not name HORA_BLOCKS_AT_ONCE's values"
    expect_stopped "ranks disagree on settings every rank must share: HORA_ALLREDUCE_ALGO is 'ring' on rank 0 and '' on ranks 1, 2" 30 ;;
esac
[ "$rc" -eq 0 ] || fail "exit code $rc"
passed=$(grep -c "checks passed" "$out")
[ "$passed" -eq "$np" ] || fail "$passed of $np ranks passed their checks"
echo "$np ranks passed under $mpirun ($mode)"
