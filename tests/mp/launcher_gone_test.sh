#!/usr/bin/env bash
# horarun and its watcher killed together (what `pkill -9 horarun` does): a
# rank wrapped in `sh -c` has no kernel link left to horarun (the
# parent-death signal reached only the shell), and no watcher to stop its
# group. Its Session watches horarun (HORA_LAUNCHER) and ends the rank, saying
# why (on the rank's stderr, kept in a file here: horarun forwarded it), within
# a second and the time SIGTERM takes.
# Usage: launcher_gone_test.sh HORARUN PYTHON
set -u
. "$(dirname "$0")/lib.sh"
horarun="$1"; python="$2"
out=$(mktemp)
errs=$(mktemp)
kill_tagged() {
  local pid
  for pid in $(tagged_processes | cut -d' ' -f1); do kill -KILL "$pid" 2>/dev/null; done
}
trap 'kill_tagged; rm -f "$out" "$errs"' EXIT
fail() { cat "$out"; echo "FAIL: $*"; exit 1; }
code='import time, hora.numpy as hvd; hvd.init(); print("training", hvd.rank(), flush=True); time.sleep(300)'
env "HORA_TEST_TAG=$HORA_TEST_TAG" "$horarun" -np 2 \
  sh -c "\"$python\" -c '$code' 2>>\"$errs\"; echo never" \
  >"$out" 2>&1 &
hp=$!
for _ in $(seq 300); do [ "$(grep -c '^\[.\]: training' "$out")" -eq 2 ] && break; sleep 0.1; done
[ "$(grep -c '^\[.\]: training' "$out")" -eq 2 ] || fail "the ranks did not start"
watcher=""
for pid in $(tagged_processes | cut -d' ' -f1); do
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = horarun-watch ] && watcher=$pid
done
[ -n "$watcher" ] || fail "no watcher among: $(tagged_processes)"
# (The watcher stopped first: killed together, it can still see horarun go
# and stop the ranks itself, and the Sessions' watch would go untested.)
kill -STOP "$watcher"
kill -KILL "$hp"
kill -KILL "$watcher"
wait "$hp" 2>/dev/null
start=$(date +%s)
for _ in $(seq 150); do [ -z "$(tagged_processes)" ] && break; sleep 0.1; done
left=$(tagged_processes)
[ -z "$left" ] || fail "left running 15 s after horarun and its watcher were killed: $left"
elapsed=$(( $(date +%s) - start ))
[ "$elapsed" -le 4 ] || fail "the ranks ended ${elapsed}s after horarun, not within a second or two"
said=$(grep -c "horarun (pid $hp), which started this rank, is gone: ending this process" "$errs")
[ "$said" -eq 2 ] || fail "$said of 2 ranks said why they ended: $(cat "$errs")"
echo "1 passed, 0 failed (${elapsed}s)"
