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
#   frozen   as survive, the worker stopped with SIGSTOP instead: once its
#            peers find it silent (HORA_PEER_TIMEOUT_S) and wait for it in
#            init(), horarun kills it and they re-form at once (not after
#            --elastic-timeout, 600 s here).
#   frozen_remote  as frozen, with the stopped worker on another host
#            (through a stand-in remote shell), whose processes horarun
#            cannot see: a peer that found it silent says so in the
#            store, and horarun stops it through its remote shell.
#   second   -np 3 --min-np 1: the worker of rank 1 is killed too, 0.1 s
#            after the first, while the others re-form: the last one forms
#            its world again alone and finishes, within seconds (not the
#            start timeout), leaving no shared-memory segment.
#   second_below  the same with --min-np 2: the job ends at once, saying
#            why, leaving nothing.
#   second_connecting  -np 3 --min-np 1: the worker of rank 1 is killed the
#            moment horarun says world 2 is formed (a reader of its output
#            does it), while that world connects: the other member stops
#            waiting for it, forms world 3 alone and finishes (it trained
#            no step at size 2), within seconds, leaving nothing.
#   slow_remote  -np 3 --min-np 2, the third worker on another host whose
#            remote shell never reads its input (a hung ssh): horarun stops
#            that worker alone at the start timeout, naming it and its
#            host, and the two others train at size 2 to the end.
#   exit0    -np 3 --min-np 2, the worker leaves with exit code 0 at step 5
#            (Horovod's rule: its success ends the job): the others' init()
#            fails, and horarun says why and exits non-zero, not 0.
# Usage: elastic_kill_test.sh HORARUN PYTHON SCRIPT survive|survive0|frozen|frozen_remote|
#        below|second|second_below|second_connecting|slow_remote|exit0 [TRANSPORT]
set -u
. "$(dirname "$0")/lib.sh"
horarun="$1"; python="$2"; script="$3"; mode="$4"; transport="${5:-}"
dir=$(mktemp -d)
out=$dir/out
trap 'rm -rf "$dir"' EXIT
fail() { cat "$out"; echo "FAIL: $*"; exit 1; }
flags=(-np 3 --timeout 60)
[ -n "$transport" ] && flags+=(--transport "$transport")
victim=2
how=KILL
case "$mode" in
  survive) flags+=(--min-np 2 --max-np 3) ;;
  survive0) flags+=(--min-np 2 --max-np 3); victim=0 ;;
  frozen) flags+=(--min-np 2 --max-np 3 --elastic-timeout 600); how=STOP ;;
  frozen_remote)
    # (The stand-in remote shell runs the command here; horarun takes the
    # host for another, whose processes it cannot see.)
    printf '#!/bin/sh\nshift\nexec "$@"\n' >"$dir/rsh"
    chmod +x "$dir/rsh"
    flags+=(--min-np 2 --max-np 3 --elastic-timeout 600 -H localhost:2,hora-remote-test-host:1
            --rsh "$dir/rsh" --bind 127.0.0.1 --stop-grace 5)
    how=STOP ;;
  slow_remote)
    printf '#!/bin/sh\ncase "$1" in hora-slow-host) sleep 30 ;; esac\nshift\nexec "$@"\n' >"$dir/rsh"
    chmod +x "$dir/rsh"
    flags+=(--min-np 2 --max-np 3 -H localhost:2,hora-slow-host:1 --rsh "$dir/rsh"
            --bind 127.0.0.1 --start-timeout 4 --stop-grace 2) ;;
  below) flags+=(--min-np 3 --max-np 3 --elastic-timeout 3) ;;
  exit0) flags+=(--min-np 2 --max-np 3); how=exit0 ;;
  second|second_connecting) flags+=(--min-np 1 --max-np 3) ;;
  second_below) flags+=(--min-np 2 --max-np 3) ;;
esac
extra=()
case "$mode" in second|second_below) extra=(--second-kill-rank 1 --second-kill-delay 0.1 --steps 40) ;; esac
shm_before=$(ls /dev/shm | grep '^hora-' | sort)
start=$(date +%s)
# (second_connecting: kills worker 1 when it reads "world 2 formed".)
killer='
import os, re, signal, sys
pid = None
for line in sys.stdin:
    sys.stdout.write(line)
    sys.stdout.flush()
    m = re.match(r"\[1\]: elastic started pid (\d+)", line)
    if m and pid is None:
        pid = int(m.group(1))
    if "world 2 formed with 2 worker(s)" in line and pid is not None:
        os.kill(pid, signal.SIGKILL)
        print("test: killed worker 1 (pid %d) as world 2 formed" % pid, flush=True)
'
[ "$mode" = second_connecting ] || killer='
import sys
for line in sys.stdin:
    sys.stdout.write(line)
'
HORA_TEST_TAG=$HORA_TEST_TAG HORA_PEER_TIMEOUT_S=2 OMP_NUM_THREADS=1 \
  "$horarun" "${flags[@]}" "$python" "$script" --kill-at 5 --kill-rank "$victim" \
  --kill-how "$how" "${extra[@]}" 2>&1 | "$python" -u -c "$killer" >"$out" 2>&1
rc=${PIPESTATUS[0]}
elapsed=$(( $(date +%s) - start ))
if [ "$mode" = frozen ]; then
  grep -q "worker localhost/$victim (pid .*) is stopped (SIGSTOP or a debugger) while the others wait for it in init(); killing it" "$out" ||
    fail "horarun did not take the stopped worker out"
  [ "$elapsed" -lt 60 ] || fail "took ${elapsed}s: the others waited for the stopped worker"
fi
if [ "$mode" = frozen_remote ]; then
  grep -q "worker hora-remote-test-host/2 (rank 2 of world 1) is silent while the others wait for it in init() (rank [01] (worker localhost/[01]): .*no sign of life.*); stopping it" "$out" ||
    fail "horarun did not stop the silent remote worker"
  [ "$elapsed" -lt 60 ] || fail "took ${elapsed}s: the others waited for the stopped worker"
fi
if [ "$mode" = exit0 ]; then
  [ "$rc" -ne 0 ] || fail "horarun exited 0 though workers failed after one left with 0"
  grep -q "horarun: elastic: worker localhost/$victim ended with 0 (its work completed) while worker localhost/[01] had not finished; the job fails" "$out" ||
    fail "horarun did not say why the job failed"
  grep -q "completed its work" "$out" || fail "the others did not say why they ended"
elif [ "$mode" = frozen_remote ] || [ "$mode" = slow_remote ]; then
  :  # (a worker horarun stopped is not reported as failed)
elif ! grep -q "worker localhost/$victim (pid .*) was killed by signal 9" "$out"; then
  fail "horarun did not report the killed worker"
fi
if [ "$mode" = exit0 ]; then
  :
elif [ "$mode" = second ]; then
  [ "$rc" -eq 0 ] || fail "horarun exited $rc"
  grep -q "worker localhost/1 (pid .*) was killed by signal 9" "$out" ||
    fail "horarun did not report the second killed worker"
  ok=$(grep -c "elastic ok: .* of 1, sizes \[3, 3, 3, 3, 3, .*1\], resets" "$out")
  [ "$ok" -eq 1 ] || fail "the survivor did not finish alone with every step committed once"
  [ "$elapsed" -lt 60 ] || fail "took ${elapsed}s: the survivor waited for the second worker"
elif [ "$mode" = second_connecting ]; then
  [ "$rc" -eq 0 ] || fail "horarun exited $rc"
  grep -q "test: killed worker 1" "$out" || fail "worker 1 was not killed"
  grep -q "world 3 formed with 1 worker(s)" "$out" || fail "no world of 1 was formed after the loss"
  ok=$(grep -c "elastic ok: .* of 1, sizes \[3, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1\], resets" "$out")
  [ "$ok" -eq 1 ] || fail "the survivor did not finish alone, with no step at size 2, every step committed once"
  [ "$elapsed" -lt 60 ] || fail "took ${elapsed}s: the survivor waited for the worker lost while connecting"
elif [ "$mode" = slow_remote ]; then
  [ "$rc" -eq 0 ] || fail "horarun exited $rc"
  grep -q "horarun: rank 2 on hora-slow-host did not take its job secret and environment within the start timeout .*(this worker is stopped)" "$out" ||
    fail "horarun did not stop the worker whose remote shell hung, naming it"
  ok=$(grep -c "elastic ok: .* of 2, sizes \[2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2\], resets" "$out")
  [ "$ok" -eq 2 ] || fail "$ok of 2 workers trained at size 2 to the end"
  [ "$elapsed" -lt 60 ] || fail "took ${elapsed}s: the others waited for the hung worker"
elif [ "$mode" = second_below ]; then
  [ "$rc" -ne 0 ] || fail "horarun exited 0 below --min-np"
  grep -q "only 1 worker(s) left, fewer than --min-np 2, and no new worker can come" "$out" ||
    fail "horarun did not say why the job ended"
  [ "$elapsed" -lt 60 ] || fail "took ${elapsed}s to end below --min-np"
elif [ "$mode" != below ]; then
  [ "$rc" -eq 0 ] || fail "horarun exited $rc"
  ok=$(grep -c "elastic ok: .* of 2, sizes \[3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2\], resets \[2\]" "$out")
  [ "$ok" -eq 2 ] || fail "$ok of 2 survivors finished with every step committed once"
  grep -q "world 2 formed with 2 worker(s)" "$out" || fail "horarun did not say it re-formed the world"
  said=$(grep -c "WARNING: elastic: .*Error: .*; restoring the last commit and re-forming the world" "$out")
  [ "$said" -ge 2 ] || fail "$said of 2 survivors said which failure made them reset"
else
  [ "$rc" -ne 0 ] || fail "horarun exited 0 below --min-np"
  ended=$(grep -c "AbortedError: elastic worker localhost/[0-9] (its init() number 2): the job ended: only 2 worker(s) left, fewer than --min-np 3" "$out")
  [ "$ended" -eq 2 ] || fail "$ended of 2 survivors' init() ended naming the counts"
  [ "$elapsed" -lt 25 ] || fail "took ${elapsed}s for a 3 s elastic timeout"
fi
sleep 0.5
left=$(tagged_processes)
[ -z "$left" ] || fail "processes left running: $left"
shm_new=$(comm -13 <(echo "$shm_before") <(ls /dev/shm | grep '^hora-' | sort))
[ -z "$shm_new" ] || fail "shared-memory segments left: $shm_new"
cat "$out"
echo "1 passed, 0 failed (${elapsed}s)"
