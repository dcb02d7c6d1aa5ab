#!/usr/bin/env bash
# Hora under torchrun --max-restarts 1 (tests/python/scripts/torchrun_restart.py):
# the first attempt loses rank 1, torchrun restarts the whole group, and every
# worker initializes Hora afresh (rank 0 serves the store one port above
# MASTER_PORT again) and finishes. With "nosecret", no HORA_SECRET: the
# secret goes through a private file of HOME, named by the restart count,
# which must be gone afterwards.
#   torchrun_restart_test.sh PYTHON SCRIPT [nosecret]
set -u
. "$(dirname "$0")/lib.sh"
python="$1"; script="$2"; secret_mode="${3:-secret}"
fail() { cat "$out"; echo "FAIL: $*"; exit 1; }
port=$(( 20000 + RANDOM % 12000 ))
out=$(mktemp)
logs=$(mktemp -d)
home=$(mktemp -d)
trap 'rm -rf "$out" "$logs" "$home"' EXIT
secret=(HORA_SECRET="torchrun-$RANDOM$RANDOM")
[ "$secret_mode" = nosecret ] && secret=(HOME="$home")
env -u HORA_SECRET HORA_TEST_TAG=$HORA_TEST_TAG "${secret[@]}" HORA_PEER_TIMEOUT_S=2 \
  OMP_NUM_THREADS=1 timeout 240 "$python" -m torch.distributed.run --redirects 1 --tee 1 \
  --log_dir "$logs" --nnodes 1 --nproc_per_node 2 --max_restarts 1 \
  --master_addr 127.0.0.1 --master_port "$port" "$script" >"$out" 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "torchrun exited $rc"
for r in 0 1; do
  grep -q "attempt 0 rank $r of 2: sum ok" "$out" || fail "rank $r's first attempt did not run"
  grep -q "attempt 1 rank $r done" "$out" || fail "rank $r's second attempt did not finish"
done
if [ "$secret_mode" = nosecret ] && [ -n "$(ls -A "$home/.hora/jobs" 2>/dev/null)" ]; then
  fail "secret files left behind: $(ls "$home/.hora/jobs")"
fi
sleep 0.5
left=$(tagged_processes)
[ -z "$left" ] || fail "processes left running: $left"
echo "1 passed, 0 failed"
