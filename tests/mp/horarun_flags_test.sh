#!/usr/bin/env bash
# horarun takes horovodrun's flags: each tunable reaches every rank as its
# HORA_* setting, a YAML --config-file gives the same (the command line
# wins), --output-filename writes each rank's output, a flag Hora cannot
# honour is refused saying why, and a program that cannot start is named
# before any rank starts.
set -u
horarun="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
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
show='echo $HORA_FUSION_THRESHOLD_BYTES $HORA_CYCLE_TIME_MS $HORA_CACHE_CAPACITY $HORA_TIMELINE $HORA_LOG_LEVEL $HORA_STALL_WARNING_S $HORA_STALL_SHUTDOWN_S $HORA_IFACE $NCCL_SOCKET_IFNAME'

# Tunables, as horovodrun spells them, reach every rank.
check tunables 0 "[1]: 33554432 2.5 7 $dir/tl.json debug 9 30 lo lo,lo2" \
  "$horarun" -np 2 --fusion-threshold-mb 32 --cycle-time-ms 2.5 --cache-capacity 7 \
  --timeline-filename "$dir/tl.json" --log-level DEBUG --stall-check-warning-time-seconds 9 \
  --stall-check-shutdown-time-seconds=30 --network-interface lo --network-interfaces lo2 \
  --no-hierarchical-allreduce --disable-cache --gloo sh -c "$show"
# A prefix of one flag is that flag (argparse's abbreviations).
check prefix 0 "[0]: 4" "$horarun" -np 1 --cycle-time 4 sh -c 'echo $HORA_CYCLE_TIME_MS'
# An interface this host lacks is named before a rank starts, even where
# the ranks (all here) would not use it.
check no-such-nic 2 "horarun: --network-interface: HORA_IFACE='hora-nope0': no such interface with an address (this host has lo" \
  "$horarun" -np 2 --network-interface hora-nope0 true
check no-stall-check 0 "[0]: 0 0" "$horarun" -np 1 --no-stall-check --stall-check-warning-time-seconds 9 \
  sh -c 'echo $HORA_STALL_WARNING_S $HORA_STALL_SHUTDOWN_S'
check flags-win-over-env 0 "[0]: 4" env HORA_CYCLE_TIME_MS=8 "$horarun" -np 1 --cycle-time-ms 4 sh -c 'echo $HORA_CYCLE_TIME_MS'
check print-config 0 "HORA_CACHE_CAPACITY=5 " "$horarun" --cache-capacity 5 --print-config
check dash-x 0 "[1]: a=1 home=$HOME" "$horarun" -np 2 -x A=1 -x HOME sh -c 'echo a=$A home=$HOME'
printf 'localhost slots=2\n' >hosts
check single-dash-hostfile 0 "[1]: 1 2" "$horarun" -hostfile hosts sh -c 'echo $HORA_RANK $HORA_SIZE'

# The config file: its keys as flags; the command line wins wherever it is.
cat >c.yaml <<'EOS'
# as horovodrun reads it
controller: gloo
params:
  fusion_threshold_mb: 16
  cycle_time_ms: 3
  cache_capacity: 512
  hierarchical_allreduce: false
autotune:
  enabled: false
timeline:
  filename: 'tl #2.json'
stall_check:
  enabled: true
  warning_time_seconds: 11
  shutdown_time_seconds: 0
logging:
  level: WARNING
EOS
check config-file 0 "[1]: 16777216 9 512 tl #2.json info 11 0" \
  "$horarun" -np 2 --cycle-time-ms 9 --config-file c.yaml --log-level INFO sh -c "$show"
printf 'params:\n  cycle_time_ms: -3\n' >bad.yaml
check config-negative 2 "bad.yaml:2 (params.cycle_time_ms): --cycle-time-ms '-3' is not a number, 0 or more" \
  "$horarun" -np 1 --config-file bad.yaml true
printf 'params:\n  - cycle_time_ms\n' >seq.yaml
check config-sequence 2 "seq.yaml:2: sequences ('- item') are not supported" \
  "$horarun" -np 1 --config-file seq.yaml true

# --output-filename: DIR/rank.N/{stdout,stderr}, and the terminal still gets it.
check output-terminal 0 "[1]: out 1" "$horarun" -np 2 --output-filename "$dir/logs" \
  sh -c 'echo out $HORA_RANK; echo err $HORA_RANK >&2'
if [ "$(cat "$dir/logs/rank.1/stdout")" = "out 1" ] && [ "$(cat "$dir/logs/rank.0/stderr")" = "err 0" ]; then
  pass=$((pass + 1))
else
  failed=$((failed + 1)); echo "FAIL output-filename: $(ls -R "$dir/logs" 2>&1)"
fi
"$horarun" -np 11 --output-filename "$dir/logs11" true >/dev/null 2>&1
if [ -d "$dir/logs11/rank.00" ] && [ -d "$dir/logs11/rank.10" ]; then
  pass=$((pass + 1))
else
  failed=$((failed + 1)); echo "FAIL output-filename padding: $(ls "$dir/logs11" 2>&1)"
fi

# Refused, with the reason; numbers below 0 too.
check elastic-bounds 2 "elastic mode needs --min-np <= -np <= --max-np (got 3, 2, 3)" \
  "$horarun" -np 2 --min-np 3 true
check elastic-mpi 2 "elastic mode starts its workers itself" "$horarun" -np 2 --min-np 1 --mpi true
check elastic-discovery 2 "--host-discovery-script: the host discovery script './nowhere.sh' cannot start: No such file or directory" \
  "$horarun" -np 2 --host-discovery-script ./nowhere.sh true
check elastic-blacklist 2 "--blacklist-cooldown-range needs --host-discovery-script" \
  "$horarun" -np 2 --min-np 1 --blacklist-cooldown-range 1 2 true
# Elastic mode runs a job whose workers all succeed, as a fixed one.
check elastic-runs 0 "" "$horarun" -np 2 --min-np 1 --max-np 2 true
check autotune 0 "[0]: 1 at.csv 0 4" "$horarun" -np 1 --autotune --autotune-log-file at.csv \
  --autotune-warmup-samples 0 --autotune-steps-per-sample 4 \
  sh -c 'echo $HORA_AUTOTUNE $HORA_AUTOTUNE_LOG $HORA_AUTOTUNE_WARMUP_SAMPLES $HORA_AUTOTUNE_STEPS_PER_SAMPLE'
check autotune-bayes 2 "--autotune-bayes-opt-max-samples: Hora's autotuning is not Bayesian" \
  "$horarun" -np 2 --autotune-bayes-opt-max-samples 5 true
check mark-cycles 2 "--timeline-mark-cycles: Hora's timeline does not mark engine cycles yet" \
  "$horarun" -np 2 --timeline-filename t.json --timeline-mark-cycles true
check hierarchical 0 "[0]: 1" "$horarun" -np 1 --hierarchical-allreduce sh -c 'echo $HORA_HIERARCHICAL_ALLREDUCE'
check hierarchical-allgather 2 "--hierarchical-allgather: Hora has no hierarchical allgather" \
  "$horarun" -np 2 --hierarchical-allgather true
check negative-fusion 2 "--fusion-threshold-mb '-1' is not a whole number of MiB, 0 or more" \
  "$horarun" -np 2 --fusion-threshold-mb -1 true
check negative-stall 2 "--stall-check-shutdown-time-seconds '-2' is not a number, 0 or more" \
  "$horarun" -np 2 --stall-check-shutdown-time-seconds -2 true
check bad-log-level 2 "--log-level 'LOUD' is not one of TRACE, DEBUG, INFO, WARNING, ERROR, FATAL" \
  "$horarun" -np 2 --log-level LOUD true
check gloo-and-mpi 2 "--gloo and --mpi exclude each other" "$horarun" -np 2 --gloo --mpi true
check x-unset 2 "-x HORA_TEST_UNSET_VAR: HORA_TEST_UNSET_VAR is not set" \
  "$horarun" -np 2 -x HORA_TEST_UNSET_VAR true
check version 0 "horarun (Hora) " "$horarun" -v
check check-build 0 "[X] horarun (Hora's own start, --gloo)" "$horarun" -cb
check help-lists 0 "--stall-check-shutdown-time-seconds SECONDS" "$horarun" --help

# A program that cannot start: said once, before any rank starts.
printf 'print("hi")\n' >ar.py
chmod -x ar.py
check not-executable 2 "horarun: ar.py is not executable; run it with python3 ar.py, or chmod +x ar.py" \
  "$horarun" -np 2 ar.py
check not-executable-path 2 "./ar.py is not executable" "$horarun" -np 2 ./ar.py
check not-found 2 "horarun: hora-no-such-program was not found" "$horarun" -np 2 hora-no-such-program
out=$("$horarun" -np 3 ./ar.py 2>&1)
if [ "$(grep -c . <<<"$out")" -eq 1 ] && ! grep -q '^\[' <<<"$out"; then
  pass=$((pass + 1))
else
  failed=$((failed + 1)); echo "FAIL not-executable said once, no rank output: $out"
fi

echo "$pass passed, $failed failed"
[ "$failed" -eq 0 ]
