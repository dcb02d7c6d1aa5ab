#!/usr/bin/env bash
# horarun's remote start, through a stand-in remote shell that logs its
# command line and runs it here: the job secret reaches the remote rank but
# no command line; after a failure the remote hosts' shared memory is
# removed; a horarun killed with SIGKILL takes its remote ranks with it.
set -u
. "$(dirname "$0")/lib.sh"
horarun="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
log="$dir/rsh.log"
cat >"$dir/rsh" <<EOS
#!/bin/sh
printf '%s\n' "\$*" >>"$log"
shift
exec "\$@"
EOS
# And a stand-in ssh, first on PATH: it hands its one command string to a
# shell, as sshd does with the remote user's login shell.
mkdir "$dir/bin"
cat >"$dir/bin/ssh" <<EOS
#!/bin/sh
printf '%s\n' "\$*" >>"$log"
while [ "\$#" -gt 2 ]; do shift; done
exec sh -c "\$2"
EOS
chmod +x "$dir/rsh" "$dir/bin/ssh"
pass=0; failed=0
ok() { pass=$((pass + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }
hosts=(-H localhost:1,hora-remote-test-host:1 --rsh "$dir/rsh" --bind 127.0.0.1 --stop-grace 5)

# 1. The secret reaches the remote rank through its stdin, not its command line.
secret="s3cr3t-$$-$RANDOM"
out=$(HORA_SECRET="$secret" "$horarun" -np 2 "${hosts[@]}" sh -c 'echo "rank $HORA_RANK secret $HORA_SECRET"' 2>&1)
rc=$?
if [ "$rc" -eq 0 ] && grep -qF "[1]: rank 1 secret $secret" <<<"$out" && grep -qF "[0]: rank 0 secret $secret" <<<"$out"; then ok; else fail "secret: rc=$rc, output: $out"; fi
if [ -s "$log" ] && ! grep -qF "$secret" "$log"; then ok; else fail "secret on the remote command line: $(cat "$log")"; fi

# The same through ssh (its default options, then the host, then one string).
: >"$log"
out=$(PATH="$dir/bin:$PATH" HORA_SECRET="$secret" "$horarun" -np 2 -H localhost:1,hora-remote-test-host:1 --bind 127.0.0.1 --stop-grace 5 sh -c 'echo "rank $HORA_RANK secret $HORA_SECRET in $(pwd)"' 2>&1)
rc=$?
if [ "$rc" -eq 0 ] && grep -qF "[1]: rank 1 secret $secret in $(pwd)" <<<"$out"; then ok; else fail "ssh: rc=$rc, output: $out"; fi
if grep -q "BatchMode=yes.*hora-remote-test-host sh -c" "$log" && ! grep -qF "$secret" "$log"; then ok; else fail "ssh command line: $(cat "$log")"; fi

# 2. A remote rank fails after leaving a segment: horarun exits with its code
#    and removes the job's segments on the remote host.
: >"$log"
out=$("$horarun" -np 2 "${hosts[@]}" sh -c 'if [ "$HORA_RANK" = 1 ]; then : >"/dev/shm/hora-$HORA_JOB_ID-g1-bell-0"; echo "job $HORA_JOB_ID"; exit 3; fi; sleep 30' 2>&1)
rc=$?
job=$(sed -n 's/.*job \([0-9a-f]*\).*/\1/p' <<<"$out" | head -1)
if [ "$rc" -eq 3 ] && [ -n "$job" ]; then ok; else fail "remote failure: rc=$rc (want 3), output: $out"; fi
if [ -n "$job" ] && ! ls /dev/shm/hora-"$job"-* >/dev/null 2>&1; then ok; else fail "segments left: $(ls /dev/shm/hora-"$job"-* 2>&1)"; fi
if grep -qF "hora-remote-test-host sh -c rm -f /dev/shm/hora-$job-*" "$log"; then ok; else fail "no remote cleanup ran: $(cat "$log")"; fi

# 3. horarun killed with SIGKILL: the remote rank (and its children) end too.
#    (The local rank execs sleep: the kernel ends a local rank whose horarun
#    died, but not processes that rank started.)
HORA_TEST_TAG=$HORA_TEST_TAG "$horarun" -np 2 "${hosts[@]}" sh -c 'if [ "$HORA_RANK" = 0 ]; then exec sleep 300; fi; sleep 300; echo never' >/dev/null 2>&1 &
hp=$!
count_sleeps() { tagged_processes | grep -c ' sleep 300 $'; }
for _ in $(seq 300); do [ "$(count_sleeps)" -ge 2 ] && break; sleep 0.1; done
started=$(count_sleeps)
kill -KILL "$hp"; wait "$hp" 2>/dev/null
for _ in $(seq 300); do [ -z "$(tagged_processes)" ] && break; sleep 0.1; done
left=$(tagged_processes)
if [ "$started" -ge 2 ] && [ -z "$left" ]; then ok; else fail "after SIGKILL: $started started, left running: $left"; fi

# 4. A remote rank that ignores SIGTERM while horarun stops the job (another
#    rank failed): killed after the grace period (--stop-grace 5), nothing left.
HORA_TEST_TAG=$HORA_TEST_TAG "$horarun" -np 2 "${hosts[@]}" sh -c 'if [ "$HORA_RANK" = 0 ]; then sleep 1; exit 5; fi; trap "" TERM; sleep 300; echo never' >/dev/null 2>&1
rc=$?
for _ in $(seq 300); do [ -z "$(tagged_processes)" ] && break; sleep 0.1; done
left=$(tagged_processes)
if [ "$rc" -eq 5 ] && [ -z "$left" ]; then ok; else fail "TERM ignored: rc=$rc (want 5), left running: $left"; fi

# 5. The environment reaches remote ranks (on their stdin, not a command
#    line): a stand-in ssh that, like a fresh login on another host, starts
#    the shell with an empty environment (env -i).
mkdir "$dir/clean"
cat >"$dir/clean/ssh" <<EOS
#!/bin/sh
printf '%s\n' "\$*" >>"$log"
while [ "\$#" -gt 2 ]; do shift; done
exec env -i /bin/sh -c "\$2"
EOS
chmod +x "$dir/clean/ssh"
: >"$log"
show='echo "rank $HORA_RANK pp=$PYTHONPATH user=$HORA_TEST_USER_VAR x=$XV cuda=${CUDA_VISIBLE_DEVICES-unset} oldpwd=${OLDPWD-unset} omp=$OMP_NUM_THREADS lines=$(printf %s "$MULTI" | wc -l) multi=$(printf %s "$MULTI" | tr "\n" /)"'
out=$(cd "$dir" && PATH="$dir/clean:$PATH" PYTHONPATH=/src/pp OMP_NUM_THREADS=3 OLDPWD=/old \
  CUDA_VISIBLE_DEVICES=5 HORA_TEST_USER_VAR="a b'c" MULTI=$'one %d\ntwo' \
  "$horarun" -np 2 -H localhost:1,hora-remote-test-host:1 --bind 127.0.0.1 -x XV=1 sh -c "$show" 2>&1)
rc=$?
# (OLDPWD there: where the remote shell was before its cd, not ours.)
want_remote="[1]: rank 1 pp=/src/pp user=a b'c x=1 cuda=unset oldpwd=$dir omp=3 lines=1 multi=one %d/two"
want_local="[0]: rank 0 pp=/src/pp user=a b'c x=1 cuda=5 oldpwd=/old omp=3 lines=1 multi=one %d/two"
if [ "$rc" -eq 0 ] && grep -qxF "$want_remote" <<<"$out" && grep -qxF "$want_local" <<<"$out"; then ok; else fail "environment: rc=$rc, output: $out"; fi
if [ -s "$log" ] && ! grep -qE "src/pp|XV=1|one %d" "$log"; then ok; else fail "variables on the remote command line: $(cat "$log")"; fi
# -x NAME forwards a name that is otherwise kept here.
out=$(cd "$dir" && PATH="$dir/clean:$PATH" CUDA_VISIBLE_DEVICES=5 "$horarun" -np 2 -H localhost:1,hora-remote-test-host:1 \
  --bind 127.0.0.1 -x CUDA_VISIBLE_DEVICES sh -c 'echo "cuda=$CUDA_VISIBLE_DEVICES"' 2>&1)
rc=$?
if [ "$rc" -eq 0 ] && grep -qxF "[1]: cuda=5" <<<"$out"; then ok; else fail "-x CUDA_VISIBLE_DEVICES: rc=$rc, output: $out"; fi

# 6. A host whose remote shell reads its stdin late (a slow or black-holed
#    ssh), with an environment larger than a pipe holds (64 KiB): the next
#    host's rank starts meanwhile, and horarun stops within the start
#    timeout naming the slow rank and host, nothing left running. (Only
#    the rank's start is slow: the shared-memory cleanup that follows a
#    failure, bounded by 30 s itself, goes through at once.)
cat >"$dir/slow-rsh" <<EOS
#!/bin/sh
case "\$1 \$*" in "hora-slow-host "*HORA_SECRET*) sleep 30 ;; esac
shift
exec "\$@"
EOS
chmod +x "$dir/slow-rsh"
# (BIG: the environment's extra bytes; what the fast rank says.)
slow_start() {
  local what="$1" big="$2" start rc elapsed left out
  start=$(date +%s)
  out=$(BIG="$big" HORA_TEST_TAG=$HORA_TEST_TAG timeout 60 "$horarun" -np 3 \
    -H localhost:1,hora-slow-host:1,hora-fast-host:1 --rsh "$dir/slow-rsh" --bind 127.0.0.1 \
    --stop-grace 2 --start-timeout 4 sh -c 'echo "rank $HORA_RANK up ${#BIG}"; sleep 30' 2>&1)
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  for _ in $(seq 100); do [ -z "$(tagged_processes)" ] && break; sleep 0.1; done
  left=$(tagged_processes)
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$elapsed" -lt 15 ] && [ -z "$left" ] &&
     grep -qF "[2]: rank 2 up ${#big}" <<<"$out" && ! grep -q "remote shell started" <<<"$out" &&
     grep -qF "rank 1 on hora-slow-host did not take its job secret and environment" <<<"$out"; then
    ok
  else
    fail "$what: rc=$rc after ${elapsed}s (want non-zero within 15 s), left running: $left, output: $(head -c 2000 <<<"$out")"
  fi
}
slow_start "slow remote shell" "$(head -c 100000 /dev/zero | tr '\0' x)"
# 6b. The same slow remote shell with a small environment, which its pipe
#    takes whole at once: written is not read (the bytes still in the pipe
#    tell), and horarun stops within the start timeout all the same,
#    naming the slow rank and host.
slow_start "slow remote shell, small environment" ""

# 6d. A remote command that takes the input but never starts the shell
#    (an ssh that connected, then hung): horarun cannot tell it from one
#    that hides the start line, so it warns within the start timeout,
#    naming the rank and host, and the job goes on (stopped here by
#    SIGTERM, leaving nothing).
cat >"$dir/swallow-rsh" <<'EOS'
#!/bin/sh
case "$1" in hora-hung-host) cat >/dev/null; exit 0 ;; esac
shift
exec "$@"
EOS
chmod +x "$dir/swallow-rsh"
log6=$(mktemp)
set -m
HORA_TEST_TAG=$HORA_TEST_TAG "$horarun" -np 3 \
  -H localhost:1,hora-hung-host:1,hora-fast-host:1 --rsh "$dir/swallow-rsh" --bind 127.0.0.1 \
  --stop-grace 2 --start-timeout 4 sh -c 'echo "rank $HORA_RANK up"; sleep 30' >"$log6" 2>&1 &
hp=$!
set +m
want="horarun: warning: rank 1 on hora-hung-host has not started within the start timeout"
for _ in $(seq 150); do grep -qF "$want" "$log6" && break; sleep 0.1; done
kill -TERM "$hp"; wait "$hp"; rc=$?
for _ in $(seq 100); do [ -z "$(tagged_processes)" ] && break; sleep 0.1; done
left=$(tagged_processes)
out=$(cat "$log6"); rm -f "$log6"
if [ "$rc" -eq 143 ] && [ -z "$left" ] && grep -qF "$want" <<<"$out" &&
   grep -qF "[2]: rank 2 up" <<<"$out"; then
  ok
else
  fail "remote command that swallows its input: rc=$rc (want 143 after the warning), left running: $left, output: $(head -c 2000 <<<"$out")"
fi

# 6c. A remote command that merges stderr into stdout and labels each
#    line, with a terminal's \r: the start line is found there, taken out,
#    and the job runs without a warning.
cat >"$dir/label-rsh" <<'EOS'
#!/bin/sh
shift
"$@" 2>&1 | sed -u 's/^/[remote] /; s/$/\r/'
EOS
chmod +x "$dir/label-rsh"
out=$(HORA_TEST_TAG=$HORA_TEST_TAG timeout 60 "$horarun" -np 2 -H localhost:1,hora-label-host:1 \
  --rsh "$dir/label-rsh" --bind 127.0.0.1 --start-timeout 4 \
  sh -c 'sleep 5; echo "rank $HORA_RANK up"' 2>&1)
rc=$?
if [ "$rc" -eq 0 ] && grep -q "^\[1\]: \[remote\] rank 1 up" <<<"$out" &&
   ! grep -q "remote shell started\|warning" <<<"$out"; then
  ok
else
  fail "labelled remote output: rc=$rc, output: $(head -c 2000 <<<"$out" | cat -v)"
fi

# 7. A user's variables named like the remote script's own (n, v, p, rc)
#    reach the remote rank unchanged.
out=$(n="user n" v="user v" p="user p" rc="user rc" "$horarun" -np 2 "${hosts[@]}" \
  -x n -x v -x p -x rc sh -c 'echo "rank $HORA_RANK n=$n v=$v p=$p rc=$rc"' 2>&1)
rc=$?
if [ "$rc" -eq 0 ] && grep -qxF "[1]: rank 1 n=user n v=user v p=user p rc=user rc" <<<"$out"; then ok; else fail "variables named like the script's: rc=$rc, output: $out"; fi

echo "$pass passed, $failed failed"
[ "$failed" -eq 0 ]
