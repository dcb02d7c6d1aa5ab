#!/usr/bin/env bash
# horarun under faults (issue 24): a horarun killed with SIGKILL takes the
# processes its local ranks started along; what a rank leaves running in the
# background ends with it, also after a success; a rank's line of 100 MiB
# is forwarded intact in bounded memory; the rank that failed first is named
# (and gives horarun's exit code) even when its peers die right after it; a
# rank left stopped is named.
# Conditions are polled for with generous bounds, not slept for; every case
# kills what its job left behind, so that nothing outlives the test.
set -u
. "$(dirname "$0")/lib.sh"
horarun="$1"
dir=$(mktemp -d)
kill_tagged() {
  local pid
  for pid in $(tagged_processes | cut -d' ' -f1); do kill -KILL "$pid" 2>/dev/null; done
}
trap 'kill_tagged; rm -rf "$dir"' EXIT
pass=0; failed=0
ok() { pass=$((pass + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL $*"; kill_tagged; }
# Polls (up to 30 s) until `$@` succeeds.
wait_for() {
  local _
  for _ in $(seq 300); do "$@" && return 0; sleep 0.1; done
  return 1
}
count_tagged() { tagged_processes | grep -c -- "$1"; }
at_least() { [ "$(count_tagged "$1")" -ge "$2" ]; }
none_left() { [ -z "$(tagged_processes)" ]; }
is_zombie() { [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" = Z ]; }
# horarun with the job's tag (env execs it: $! of a background job is
# horarun's pid).
horarun_tagged=(env "HORA_TEST_TAG=$HORA_TEST_TAG" "$horarun")

# 1. horarun killed with SIGKILL: the ranks' own processes (here a sleep
#    under sh, which the kernel's parent-death signal does not reach) end
#    too, and so does horarun's watcher. Killing horarun's whole process
#    group must not take the watcher along; ranks that ignore SIGTERM get
#    SIGKILL after the grace period (--stop-grace 2).
kill_case() {  # name, kill target (pid or group), rank command
  local name="$1" target="$2" hp
  set -m  # horarun in a process group of its own, as from a shell
  "${horarun_tagged[@]}" -np 2 --stop-grace 2 sh -c "$3" >/dev/null 2>&1 &
  hp=$!
  set +m
  if ! wait_for at_least ' sleep 300 $' 2; then
    fail "$name: the ranks did not start: $(tagged_processes)"
    return
  fi
  if [ "$target" = group ]; then kill -KILL -- "-$hp"; else kill -KILL "$hp"; fi
  wait "$hp" 2>/dev/null
  if wait_for none_left; then ok; else fail "$name: left running 30 s after horarun's SIGKILL: $(tagged_processes)"; fi
}
kill_case sigkill pid 'sleep 300; echo never'
kill_case sigkill-group group 'sleep 300; echo never'
kill_case sigkill-term-ignored pid 'trap "" TERM; sleep 300; echo never'

# 2. What a rank started in the background ends when the rank ends, also
#    after a success; its output flows until then (here the line it prints
#    on SIGTERM). One that ignores SIGTERM gets SIGKILL after the grace
#    period. horarun exits 0 and leaves nothing behind.
ready="$dir/ready"
rm -f "$ready"
out=$("${horarun_tagged[@]}" -np 1 --stop-grace 2 sh -c "(trap 'echo child got TERM; exit 0' TERM; : >'$ready'; while :; do sleep 0.1; done) & while [ ! -e '$ready' ]; do sleep 0.05; done; echo started" 2>&1)
rc=$?
left=$(tagged_processes)
if [ "$rc" -eq 0 ] && grep -qF "[0]: started" <<<"$out" && grep -qF "[0]: child got TERM" <<<"$out" && [ -z "$left" ]; then
  ok
else
  fail "background child: rc=$rc (want 0), output: $out, left running: $left"
fi
out=$("${horarun_tagged[@]}" -np 2 --stop-grace 2 sh -c "(trap '' TERM; exec sleep 301) & echo started" 2>&1)
rc=$?
left=$(tagged_processes)
if [ "$rc" -eq 0 ] && [ "$(grep -c ': started$' <<<"$out")" -eq 2 ] && [ -z "$left" ]; then
  ok
else
  fail "background child ignoring SIGTERM: rc=$rc (want 0), output: $out, left running: $left"
fi

# 3. A line of 100 MiB without a newline: forwarded byte for byte, after one
#    prefix, while horarun's peak memory grows far less than the line's size
#    (peak read before the rank writes, and once it has written it all but
#    before the job ends; a growth, so that sanitizer builds compare alike).
size=$((100 << 20))
rm -f "$dir/started" "$dir/write" "$dir/written" "$dir/go"
"${horarun_tagged[@]}" -np 1 sh -c "wait_for() { while [ ! -e \"\$1\" ]; do sleep 0.05; done; }; : >'$dir/started'; wait_for '$dir/write'; head -c $size /dev/zero | tr '\\0' x; : >'$dir/written'; wait_for '$dir/go'" >"$dir/long.out" 2>"$dir/long.err" &
hp=$!
peak_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$hp/status"; }
growth_kib="(the rank did not start)"
if wait_for test -e "$dir/started"; then
  base_kib=$(peak_kib)
  : >"$dir/write"
  if wait_for test -e "$dir/written"; then
    growth_kib=$(($(peak_kib) - base_kib))
  else
    growth_kib="(the rank did not finish writing)"
  fi
fi
: >"$dir/write"; : >"$dir/go"
wait "$hp"; rc=$?
expected_size=$((5 + size + 1))  # "[0]: ", the line, the newline horarun ends it with
actual_size=$(stat -c %s "$dir/long.out")
if [ "$rc" -eq 0 ] && [ "$actual_size" -eq "$expected_size" ] &&
   [ "$(head -c 5 "$dir/long.out")" = "[0]: " ] &&
   [ "$(tail -c +6 "$dir/long.out" | head -c "$size" | tr -d x | wc -c)" -eq 0 ] &&
   [ "$(tail -c 1 "$dir/long.out" | od -An -c | tr -d ' ')" = '\n' ] &&
   [[ "$growth_kib" =~ ^[0-9]+$ ]] && [ "$growth_kib" -lt $((32 << 10)) ]; then
  ok
else
  fail "100 MiB line: rc=$rc, $actual_size bytes out (want $expected_size), horarun's peak memory grew by ${growth_kib} KiB (want < 32 MiB), stderr: $(head -c 500 "$dir/long.err")"
fi

# 4. The rank that failed first is named, even when its peers' deaths reach
#    horarun in the same round. horarun is held stopped (SIGSTOP) while
#    rank 0 exits 0, rank 2 is killed with SIGKILL, and rank 1, seeing rank
#    2's end of a FIFO close, exits 1; then it goes on. waitpid(-1) would
#    report 0, 1, 2 (the order they were forked), naming rank 1.
mkfifo "$dir/fifo"
cat >"$dir/rank.sh" <<'EOS'
d=$1
echo $$ >"$d/pid.$HORA_RANK.tmp" && mv "$d/pid.$HORA_RANK.tmp" "$d/pid.$HORA_RANK"
case $HORA_RANK in
  0) while [ ! -e "$d/exit0" ]; do sleep 0.05; done; exit 0 ;;
  1) cat "$d/fifo" >/dev/null; echo "lost rank 2" >&2; exit 1 ;;
  2) exec sleep 300 3>"$d/fifo" ;;
esac
EOS
"${horarun_tagged[@]}" -np 3 --stop-grace 5 sh "$dir/rank.sh" "$dir" >"$dir/order.out" 2>&1 &
hp=$!
steps_ok=false
if wait_for test -e "$dir/pid.0" -a -e "$dir/pid.1" -a -e "$dir/pid.2" &&
   wait_for at_least ' sleep 300 $' 1; then
  kill -STOP "$hp"
  : >"$dir/exit0"
  if wait_for is_zombie "$(cat "$dir/pid.0")"; then
    kill -KILL "$(cat "$dir/pid.2")"
    wait_for is_zombie "$(cat "$dir/pid.1")" && steps_ok=true
  fi
  kill -CONT "$hp"
fi
wait "$hp"; rc=$?
first=$(grep -m1 'horarun: rank' "$dir/order.out")
if $steps_ok && [ "$rc" -eq 137 ] &&
   grep -q "^horarun: rank 2 (pid $(cat "$dir/pid.2") on .*) was killed by signal 9 (.*); stopping the other ranks$" <<<"$first"; then
  ok
else
  fail "first failure: steps done: $steps_ok, rc=$rc (want 137), output: $(cat "$dir/order.out")"
fi
if wait_for none_left; then ok; else fail "first failure: left running: $(tagged_processes)"; fi

# 5. A job that ends normally leaves no process behind (the watcher
#    included) and exits 0.
"${horarun_tagged[@]}" -np 3 true; rc=$?
left=$(tagged_processes)
if [ "$rc" -eq 0 ] && [ -z "$left" ]; then ok; else fail "normal end: rc=$rc, left running: $left"; fi

# 6. A rank stopped (SIGSTOP) after the others ended with 0: horarun, which
#    waits for it, says so within seconds, naming it (it waited without a
#    word before); SIGTERM to horarun then ends the job, the stopped rank
#    included.
"${horarun_tagged[@]}" -np 2 sh -c 'if [ "$HORA_RANK" = 1 ]; then kill -STOP $$; fi' \
  >"$dir/stopped.out" 2>&1 &
hp=$!
said() { grep -q "horarun: rank 1 (pid [0-9]* on localhost) has been stopped for [0-9]* s (SIGSTOP, or a debugger); ranks that ended: 0; horarun waits" "$dir/stopped.out"; }
if wait_for said; then ok; else fail "stopped rank: not said: $(cat "$dir/stopped.out")"; fi
kill -TERM "$hp"
wait "$hp"; rc=$?
if [ "$rc" -eq 143 ] && wait_for none_left; then ok; else
  fail "stopped rank: rc=$rc after SIGTERM, left running: $(tagged_processes)"
fi

echo "$pass passed, $failed failed"
[ "$failed" -eq 0 ]
