#!/usr/bin/env bash
# A rank lost while the others' NCCL calls are queued, waiting for its:
# processes started by horarun on the host device's NCCL, its calls queued
# on each rank's stream (hora-mp-device-worker --lose-in-nccl). The last
# rank's call of allreduce 3 is refused, and it SIGKILLs itself; the others'
# calls stay queued. Each of them must fail that allreduce naming it, found
# lost by the watch of their NCCL work, well within the 20 s timeout (which
# would end it otherwise); horarun must exit non-zero, and no process of the
# job may be left running.
set -u
. "$(dirname "$0")/lib.sh"
horarun="$1"; worker="$2"; np="${3:-3}"; transport="${4:-shm}"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
HORA_TEST_TAG=$HORA_TEST_TAG HORA_GPU_BACKEND=nccl HORA_NCCL_LIBRARY=host:queued \
  "$horarun" -np "$np" --transport "$transport" --timeout 20 "$worker" --lose-in-nccl 3 \
  >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
fail() { echo "FAIL: $*"; exit 1; }
last=$((np - 1))
[ "$rc" -ne 0 ] || fail "horarun exited 0 although a rank was killed"
grep -q "rank $last: allreduce 3 failed (.*refused its call 4" "$out" ||
  fail "rank $last's NCCL call of allreduce 3 was not the one refused"
grep -q "rank $last (pid .*) was killed by signal 9" "$out" || fail "horarun did not report the killed rank"
survivors=$(grep -c "allreduce 3 failed as expected:.*a rank of the job being lost: .*rank $last (pid [0-9]*) is gone" "$out")
[ "$survivors" -eq "$last" ] ||
  fail "$survivors of $last surviving ranks failed allreduce 3 naming rank $last as lost"
[ "$elapsed" -lt 15 ] || fail "took ${elapsed}s: the others waited toward the 20 s timeout"
sleep 0.5
left=$(tagged_processes)
[ -z "$left" ] || fail "processes left running: $left"
echo "1 passed, 0 failed"
