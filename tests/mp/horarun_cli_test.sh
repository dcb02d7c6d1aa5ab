#!/usr/bin/env bash
# horarun: bad input is a clear error before anything starts; a failing rank's
# exit code becomes horarun's; output lines carry the rank prefix.
set -u
horarun="$1"
pass=0; failed=0
check() {  # name, expected rc, expected text, command...
  local name="$1" want_rc="$2" want_text="$3"; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -eq "$want_rc" ] && grep -qF -- "$want_text" <<<"$out"; then
    pass=$((pass + 1))
  else
    failed=$((failed + 1)); echo "FAIL $name: rc=$rc (want $want_rc), output: $out"
  fi
}
check bad-np 2 "-np 'zero' is not a process count" "$horarun" -np zero true
check bad-hosts 2 "slot count must be at least 1" "$horarun" -np 2 -H a:0 true
check empty-hosts 2 "-H '': no hosts given" "$horarun" -np 2 -H "" true
check too-few-slots 2 "-np 5 asks for more processes than the 4 slot(s)" "$horarun" -np 5 -H localhost:4 true
check no-command 2 "no command given" "$horarun" -np 2
check bad-transport 2 "--transport 'carrier-pigeon' is not one of shm, tcp" "$horarun" -np 2 --transport carrier-pigeon true
check bad-bind 2 "--bind-to 'socket' is not one of core, none" "$horarun" -np 2 --bind-to socket true
check bind-env 0 "[1]: core" "$horarun" -np 2 --bind-to core sh -c 'echo $HORA_BIND_TO'
check bad-setting 2 "HORA_LOG_LEVEL='loud' is invalid" env HORA_LOG_LEVEL=loud "$horarun" -np 1 true
check missing-hostfile 2 "--hostfile '/nonexistent/hosts'" "$horarun" --hostfile /nonexistent/hosts true
check exit-code 7 "rank 1 (pid" "$horarun" -np 2 sh -c 'exit $((HORA_RANK * 7))'
check prefix 0 "[1]: hello from 1 of 2" "$horarun" -np 2 sh -c 'echo hello from $HORA_RANK of $HORA_SIZE'
# horarun's stdin is the first rank's; the others read /dev/null (as mpirun).
# (What each rank's fd 0 is, not who wins a read: that would pass by chance.)
reader=$(mktemp)
printf 'read -r x\necho "got [$x] from $(readlink /proc/self/fd/0)"\n' >"$reader"
check stdin-first 0 "[0]: got [piped] from pipe:" sh -c "echo piped | '$horarun' -np 3 sh '$reader'"
check stdin-others 0 "[2]: got [] from /dev/null" sh -c "echo piped | '$horarun' -np 3 sh '$reader'"
rm -f "$reader"
check no-prefix 0 "plain 0" "$horarun" -np 1 --no-prefix sh -c 'echo plain $HORA_RANK'
check layout 0 "[2]: 2 3 0 1 1 2" "$horarun" -np 3 -H localhost:2,127.0.0.1:2 sh -c 'echo $HORA_RANK $HORA_SIZE $HORA_LOCAL_RANK $HORA_LOCAL_SIZE $HORA_CROSS_RANK $HORA_CROSS_SIZE'
check layout-ipv6 0 "[1]: 1 2 1 2 0 1" "$horarun" -np 2 -H '[::1]:2' sh -c 'echo $HORA_RANK $HORA_SIZE $HORA_LOCAL_RANK $HORA_LOCAL_SIZE $HORA_CROSS_RANK $HORA_CROSS_SIZE'
check mpi-ipv6 2 "mpirun's host lists take no IPv6 addresses" "$horarun" -np 2 --mpi -H '[::1]:2' true
check bad-ipv6 2 "an IPv6 address goes in brackets, as in [::1]:2" "$horarun" -np 2 -H ::1:2 true
hostfile=$(mktemp)
trap 'rm -f "$hostfile"' EXIT
printf '# two hosts\nlocalhost slots=2\n127.0.0.1:1  # the second\n' >"$hostfile"
check hostfile 0 "[2]: 2 3 0 1 1 2" "$horarun" --hostfile "$hostfile" sh -c 'echo $HORA_RANK $HORA_SIZE $HORA_LOCAL_RANK $HORA_LOCAL_SIZE $HORA_CROSS_RANK $HORA_CROSS_SIZE'
printf 'localhost slots=2\nlocalhost:1\n' >"$hostfile"
check hostfile-twice 2 "$hostfile: host 'localhost' is listed twice" "$horarun" --hostfile "$hostfile" true
check print-config 0 "HORA_TIMEOUT_S=0" "$horarun" --print-config
check print-peer-timeout 0 "HORA_PEER_TIMEOUT_S=5" "$horarun" --print-config
check bad-timeout 2 "--timeout '1e12' is not a positive number of seconds (at most 1e8)" "$horarun" -np 1 --timeout 1e12 true
check bad-start-timeout 2 "--start-timeout 'soon' is not a positive number" "$horarun" -np 1 --start-timeout soon true
check bad-stop-grace 2 "--stop-grace '-1' is not a positive number" "$horarun" -np 1 --stop-grace -1 true
check start-timeout-env 0 "[0]: 7.000000" "$horarun" -np 1 --start-timeout 7 sh -c 'echo $HORA_START_TIMEOUT_S'
check horovod-layout 0 "[1]: 1 2 1 2 0 1 localhost" "$horarun" -np 2 sh -c 'echo $HOROVOD_RANK $HOROVOD_SIZE $HOROVOD_LOCAL_RANK $HOROVOD_LOCAL_SIZE $HOROVOD_CROSS_RANK $HOROVOD_CROSS_SIZE $HOROVOD_HOSTNAME'
check horovod-setting 0 "HORA_CYCLE_TIME_MS=5 " env HOROVOD_CYCLE_TIME=5 "$horarun" --print-config
check horovod-setting-loses 0 "HORA_CYCLE_TIME_MS=2 " env HOROVOD_CYCLE_TIME=5 HORA_CYCLE_TIME_MS=2 "$horarun" --print-config
check bad-horovod-setting 2 "HOROVOD_FUSION_THRESHOLD='lots' (taken as HORA_FUSION_THRESHOLD_BYTES='lots') is invalid" env HOROVOD_FUSION_THRESHOLD=lots "$horarun" -np 1 true
check big-env-timeout 2 "HORA_TIMEOUT_S='1e12' is invalid" env HORA_TIMEOUT_S=1e12 "$horarun" -np 1 true
check secret-hidden 0 "HORA_SECRET=(set)" env HORA_SECRET=hunter2 "$horarun" --print-config
# A signal to horarun stops every rank and leaves no process behind; horarun
# exits 128 + the signal. Job control on, so that the background horarun does
# not start with SIGINT ignored, as a script's background jobs do.
stop_check() {  # name, signal, expected rc, np
  local name="$1" sig="$2" want_rc="$3" np="$4" marker="hora-$1-test-$$" hp rc
  set -m
  "$horarun" -np "$np" bash -c "exec -a $marker sleep 300" >/dev/null 2>&1 &
  hp=$!
  set +m
  # horarun itself and its ranks (each a sleep named by the marker).
  for _ in $(seq 50); do [ "$(pgrep -fc "$marker")" -ge $((np + 1)) ] && break; sleep 0.1; done
  kill -"$sig" "$hp"; wait "$hp"; rc=$?
  sleep 0.5
  if [ "$rc" -eq "$want_rc" ] && ! pgrep -f "$marker" >/dev/null; then
    pass=$((pass + 1))
  else
    failed=$((failed + 1)); echo "FAIL $name: rc=$rc (want $want_rc), left: $(pgrep -af "$marker")"
    pkill -KILL -f "$marker"
  fi
}
# horarun's stdout closed early (`horarun ... | head -1`): the lines are
# dropped, the ranks run to their end and horarun exits 0 (it died by
# SIGPIPE before, and every rank with it).
pipe_dir=$(mktemp -d)
"$horarun" -np 2 sh -c "seq 1 50000; touch $pipe_dir/done.\$HORA_RANK" | head -1 >/dev/null
pipe_rc=${PIPESTATUS[0]}
if [ "$pipe_rc" -eq 0 ] && [ -e "$pipe_dir/done.0" ] && [ -e "$pipe_dir/done.1" ]; then
  pass=$((pass + 1))
else
  failed=$((failed + 1)); echo "FAIL stdout-closed: rc=$pipe_rc, ranks done: $(ls "$pipe_dir")"
fi
rm -rf "$pipe_dir"
stop_check sigterm TERM 143 3
stop_check sigint INT 130 2
echo "$pass passed, $failed failed"
[ "$failed" -eq 0 ]
