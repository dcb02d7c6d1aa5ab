#!/usr/bin/env bash
# Elastic training under horarun --min-np/--max-np
# (tests/python/scripts/elastic_train.py), with its worker of rank 2 killed
# by SIGKILL at step 5:
#   survive  -np 3 --min-np 2: the two others re-form a world of 2 in place
#            and finish; each checks that every step was committed once and
#            that its model equals a replay of the committed steps; horarun
#            exits 0.
#   below    -np 3 --min-np 3 --elastic-timeout 3: the two left are fewer
#            than --min-np: each init() ends naming why, horarun exits
#            non-zero within the timeout and a few seconds, nothing left
#            running.
#   survive0 as survive, with the worker of rank 0 killed: the survivor
#            of rank 1 becomes rank 0, and the others sync from it.
# Usage: elastic_kill_test.sh HORARUN PYTHON SCRIPT survive|survive0|below [TRANSPORT]
set -u
. "$(dirname "$0")/lib.sh"
horarun="$1"; python="$2"; script="$3"; mode="$4"; transport="${5:-}"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { cat "$out"; echo "FAIL: $*"; exit 1; }
flags=(-np 3 --timeout 60)
[ -n "$transport" ] && flags+=(--transport "$transport")
victim=2
case "$mode" in
  survive) flags+=(--min-np 2 --max-np 3) ;;
  survive0) flags+=(--min-np 2 --max-np 3); victim=0 ;;
  below) flags+=(--min-np 3 --max-np 3 --elastic-timeout 3) ;;
esac
start=$(date +%s)
HORA_TEST_TAG=$HORA_TEST_TAG HORA_PEER_TIMEOUT_S=2 OMP_NUM_THREADS=1 \
  "$horarun" "${flags[@]}" "$python" "$script" --kill-at 5 --kill-rank "$victim" >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
grep -q "worker localhost/$victim (pid .*) was killed by signal 9" "$out" ||
  fail "horarun did not report the killed worker"
if [ "$mode" != below ]; then
  [ "$rc" -eq 0 ] || fail "horarun exited $rc"
  ok=$(grep -c "elastic ok: .* of 2, sizes \[3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2\], resets \[2\]" "$out")
  [ "$ok" -eq 2 ] || fail "$ok of 2 survivors finished with every step committed once"
  grep -q "world 2 formed with 2 worker(s)" "$out" || fail "horarun did not say it re-formed the world"
else
  [ "$rc" -ne 0 ] || fail "horarun exited 0 below --min-np"
  ended=$(grep -c "AbortedError: elastic worker localhost/[0-9] (its init() number 2): the job ended: only 2 worker(s) left, fewer than --min-np 3" "$out")
  [ "$ended" -eq 2 ] || fail "$ended of 2 survivors' init() ended naming the counts"
  [ "$elapsed" -lt 25 ] || fail "took ${elapsed}s for a 3 s elastic timeout"
fi
sleep 0.5
left=$(tagged_processes)
[ -z "$left" ] || fail "processes left running: $left"
cat "$out"
echo "1 passed, 0 failed (${elapsed}s)"
