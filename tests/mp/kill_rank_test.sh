#!/usr/bin/env bash
# A rank killed with SIGKILL in the middle of allreduces: every other rank
# must get an error naming it, horarun must exit non-zero, and no process of
# the job may be left running.
set -u
. "$(dirname "$0")/lib.sh"
# `transport`: a --transport value, or hosts for -H (host names, as
# localhost:2,127.0.0.1:2, that horarun starts locally).
horarun="$1"; worker="$2"; np="${3:-3}"; transport="${4:-tcp}"
where=(--transport "$transport")
case "$transport" in *:*) where=(-H "$transport") ;; esac
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
HORA_TEST_TAG=$HORA_TEST_TAG "$horarun" -np "$np" "${where[@]}" --timeout 20 "$worker" --die-at 5 >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
fail() { echo "FAIL: $*"; exit 1; }
[ "$rc" -ne 0 ] || fail "horarun exited 0 although a rank was killed"
grep -q "rank $((np - 1)) (pid .*) was killed by signal 9" "$out" || fail "horarun did not report the killed rank"
survivors=$(grep -c "failed as expected:.*rank $((np - 1))" "$out")
[ "$survivors" -eq $((np - 1)) ] || fail "$survivors of $((np - 1)) surviving ranks reported an error naming rank $((np - 1))"
[ "$elapsed" -lt 20 ] || fail "took ${elapsed}s, not within the 20 s timeout"
# (A worker asked to run on the device windows, HORATEST_EXPECT_WINDOW=1,
# says where none of its allreduces did.)
! grep -q "no allreduce ran on the device windows" "$out" ||
  fail "a survivor's allreduces did not run on the device windows (HORATEST_EXPECT_WINDOW)"
sleep 0.5
left=$(tagged_processes)
[ -z "$left" ] || fail "processes left running: $left"
echo "1 passed, 0 failed"
