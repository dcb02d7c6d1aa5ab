#!/usr/bin/env bash
# Hora under torchrun (torch.distributed.run), without horarun: the layout
# comes from RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE / GROUP_RANK,
# rank 0 serves Hora's store one port above MASTER_PORT (torch's own store
# holds MASTER_PORT), and every collective of the multi-process worker is
# checked against its reference. Needs Debian's python3-torch.
#   torchrun_test.sh WORKER NP TRANSPORT PYTHON [nosecret]
# (TRANSPORT auto: Hora's choice). With "nosecret", no HORA_SECRET: rank 0
# passes a secret through a private file of HOME (a temporary directory
# here), which must be gone afterwards.
set -u
. "$(dirname "$0")/lib.sh"
worker="$1"; np="$2"; transport="$3"; python="$4"; secret_mode="${5:-secret}"
fail() { echo "FAIL: $*"; exit 1; }
"$python" -c "import torch.distributed.run" 2>/dev/null ||
  fail "torch.distributed.run is not importable by $python (scripts/setup-deps installs python3-torch)"
free_port() {  # a port with nothing listening on it nor on the next 4
  # (torch's store, then the stores of the worker's 4 Sessions)
  local p
  for _ in $(seq 50); do
    p=$(( 20000 + RANDOM % 12000 ))
    if ! ss -ltnH | awk '{print $4}' |
         grep -qE ":($p|$((p+1))|$((p+2))|$((p+3))|$((p+4)))\$"; then echo "$p"; return; fi
  done
  echo 29500
}
port=$(free_port)
out=$(mktemp)
logs=$(mktemp -d)
home=$(mktemp -d)
trap 'rm -rf "$out" "$logs" "$home"' EXIT
secret=(HORA_SECRET="torchrun-$RANDOM$RANDOM")
[ "$secret_mode" = nosecret ] && secret=(HOME="$home")
# --redirects/--tee: with their default "0" torch 1.13 under Python 3.11 fails
# before starting anything (Std.from_str finds no member for 0); "1" tees each
# rank's stdout to this output and a log file.
env -u HORA_SECRET HORA_TEST_TAG=$HORA_TEST_TAG "${secret[@]}" HORA_TIMEOUT_S=60 \
  HORA_TRANSPORT="${transport#auto}" OMP_NUM_THREADS=1 \
  timeout 240 "$python" -m torch.distributed.run --redirects 1 --tee 1 \
  --log_dir "$logs" --nnodes 1 --nproc_per_node "$np" \
  --master_addr 127.0.0.1 --master_port "$port" --no_python "$worker" >"$out" 2>&1
rc=$?
cat "$out"
[ "$rc" -eq 0 ] || fail "torchrun exited $rc"
passed=$(grep -c "checks passed" "$out")
[ "$passed" -eq "$np" ] || fail "$passed of $np ranks passed their checks"
# Each rank read its layout from torchrun's variables (one node).
for r in $(seq 0 $((np - 1))); do
  grep -q "rank $r layout: size $np local $r/$np cross 0/1" "$out" ||
    fail "rank $r did not report torchrun's layout (rank $r of $np, local $r/$np, node 0 of 1)"
done
if [ "$secret_mode" = nosecret ]; then
  [ -d "$home/.hora/jobs" ] || fail "no $home/.hora/jobs: the secret did not go through HOME"
  files=$(ls -A "$home/.hora/jobs")
  [ -z "$files" ] || fail "left in ~/.hora/jobs: $files"
fi
sleep 0.5
left=$(tagged_processes)
[ -z "$left" ] || fail "processes left running: $left"
echo "$np ranks passed under torchrun ($transport, store at port $((port + 1)), $secret_mode)"
