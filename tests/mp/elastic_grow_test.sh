#!/usr/bin/env bash
# Elastic training whose hosts change (tests/python/scripts/elastic_train.py)
# under horarun --host-discovery-script, once the first world has committed
# a step:
#   grow    the script names localhost:2, then localhost:3: horarun starts
#           a worker on the new slot, the two members raise
#           HostsUpdatedInterrupt at their next commit, and all three go on
#           as a world of 3.
#   shrink  localhost:3, then localhost:2: the newest worker leaves at the
#           next commit (HostsUpdatedInterrupt on every member, nothing
#           rolled back), and the two others go on as a world of 2.
#   respawn localhost:3 throughout, --blacklist-cooldown-range 1 2: the
#           worker of rank 2 kills itself (SIGKILL) at step 5; the two
#           others go on as a world of 2; after the host's 1 s cooldown
#           horarun starts a worker on the free slot, and the three go on.
#   alone   localhost:1, -np 1 --min-np 1 --max-np 1, the same cooldown:
#           the only worker kills itself at step 5; horarun waits with no
#           worker left, starts one on the freed slot after the cooldown,
#           and that one trains from the start and finishes.
# Each worker checks that every step was committed once and that its model
# equals a replay of the committed steps; its lines carry its current rank.
# grow and respawn average the gradients with DistributedOptimizer (a new
# worker's buckets are checked anew by every rank: they hung there once).
# Usage: elastic_grow_test.sh HORARUN PYTHON SCRIPT grow|shrink|respawn|alone [TRANSPORT]
set -u
. "$(dirname "$0")/lib.sh"
horarun="$1"; python="$2"; script="$3"; mode="$4"; transport="${5:-}"
dir=$(mktemp -d)
out=$dir/out
trap 'rm -rf "$dir"' EXIT
fail() { cat "$out"; echo "FAIL: $*"; exit 1; }
extra=()
case "$mode" in
  grow) before=2; after=3; extra=(--distributed-optimizer) ;;
  shrink) before=3; after=2 ;;
  respawn) before=3; after=3; extra=(--kill-at 5 --kill-rank 2 --steps 60 --distributed-optimizer) ;;
  alone) before=1; after=1; extra=(--kill-at 5 --kill-rank 0) ;;
esac
echo "localhost:$before" > "$dir/hosts"
printf '#!/bin/sh\ncat %s/hosts\n' "$dir" > "$dir/discover.sh"
chmod +x "$dir/discover.sh"
low=2; high=3
[ "$mode" = alone ] && { low=1; high=1; }
flags=(-np "$before" --min-np "$low" --max-np "$high" --host-discovery-script "$dir/discover.sh" --timeout 120)
[ -n "$transport" ] && flags+=(--transport "$transport")
case "$mode" in respawn|alone) flags+=(--blacklist-cooldown-range 1 2) ;; esac
start=$(date +%s)
HORA_TEST_TAG=$HORA_TEST_TAG HORA_PEER_TIMEOUT_S=2 OMP_NUM_THREADS=1 \
  "$horarun" "${flags[@]}" "$python" "$script" --steps 40 --step-sleep 0.1 "${extra[@]}" >"$out" 2>&1 &
pid=$!
for _ in $(seq 600); do
  grep -q "elastic first commit" "$out" && break
  sleep 0.1
done
grep -q "elastic first commit" "$out" || { kill "$pid"; wait "$pid"; fail "no commit within 60 s"; }
# (Renamed into place: the script never reads a half-written file.)
echo "localhost:$after" > "$dir/hosts.new" && mv "$dir/hosts.new" "$dir/hosts"
wait "$pid"
rc=$?
elapsed=$(( $(date +%s) - start ))
[ "$rc" -eq 0 ] || fail "horarun exited $rc"
if [ "$mode" = grow ]; then
  grep -q "host localhost has a free slot; started worker localhost/2" "$out" ||
    fail "horarun started no worker on the new slot"
  grep -q "world 2 formed with 3 worker(s)" "$out" || fail "horarun formed no world of 3"
  # Horovod's variables at the start: the place each would have if all came.
  for w in "0: RANK=0 SIZE=2 LOCAL_RANK=0 LOCAL_SIZE=2" "1: RANK=1 SIZE=2 LOCAL_RANK=1" \
      "2: RANK=2 SIZE=3 LOCAL_RANK=2 LOCAL_SIZE=3 CROSS_RANK=0"; do
    grep -q "elastic spawned as localhost/$w" "$out" ||
      fail "worker localhost/${w%%:*} was not started with HOROVOD_* as $w"
  done
  ok=$(grep -c "elastic ok: worker localhost/[0-2] rank [0-2] of 3, sizes \[2, .*, 3\], resets \[\(3\)\?\]" "$out")
  [ "$ok" -eq 3 ] || fail "$ok of 3 workers finished in the world of 3 with every step committed once"
  members=$(grep -c "elastic ok: worker localhost/[01] .*resets \[3\]" "$out")
  [ "$members" -eq 2 ] || fail "$members of 2 members reset once, into the world of 3"
elif [ "$mode" = alone ]; then
  grep -q "worker localhost/0 (pid .*) was killed by signal 9" "$out" ||
    fail "horarun did not report the killed worker"
  grep -q "host localhost has a free slot; started worker localhost/1" "$out" ||
    fail "horarun started no worker on the freed slot"
  grep -q "elastic ok: worker localhost/1 rank 0 of 1, sizes \[1, .*, 1\], resets \[\]" "$out" ||
    fail "the new worker did not finish the training"
elif [ "$mode" = respawn ]; then
  grep -q "worker localhost/2 (pid .*) was killed by signal 9" "$out" ||
    fail "horarun did not report the killed worker"
  grep -q "host localhost gets no new worker for 1 s (1 failure(s) there)" "$out" ||
    fail "horarun did not leave the host out for its cooldown"
  grep -q "host localhost has a free slot; started worker localhost/3" "$out" ||
    fail "horarun started no worker on the freed slot"
  grep -q "elastic spawned as localhost/3: RANK=2 SIZE=3 LOCAL_RANK=2 LOCAL_SIZE=3" "$out" ||
    fail "the worker on the freed slot was not started with HOROVOD_RANK=2 of 3"
  ok=$(grep -c "elastic ok: worker localhost/[013] rank [0-2] of 3, sizes \[3, .*, 2, .*, 3\], resets \[\(2, 3\)\?\]" "$out")
  [ "$ok" -eq 3 ] || fail "$ok of 3 workers finished in the world of 3 with every step committed once"
else
  # As in Horovod: the worker of the slot gone trains on to the next
  # commit, where every member hears of it; nothing is rolled back.
  grep -q "host localhost has fewer slots; worker localhost/2 leaves at the next commit" "$out" ||
    fail "horarun did not take the worker of the slot gone out of the next world"
  grep -q "world 2 formed with 2 worker(s)" "$out" || fail "horarun formed no world of 2"
  grep -q "worker localhost/2 left with its slot; stopping it" "$out" ||
    fail "horarun did not stop the worker that left"
  ok=$(grep -c "elastic ok: worker localhost/[01] rank [01] of 2, sizes \[3, .*, 2\], resets \[2\], restores 0" "$out")
  [ "$ok" -eq 2 ] || fail "$ok of 2 workers finished in the world of 2 with every step committed once, none rolled back"
fi
# Each worker's last line carries its rank in the last world (respawn: the
# worker started third, localhost/3, has rank 2 there).
wrong=$(grep "elastic ok: worker" "$out" | grep -vE '^\[([0-9]+)\]: elastic ok: worker [^ ]+ rank \1 of')
[ -z "$wrong" ] || fail "output lines not prefixed with their worker's current rank: $wrong"
sleep 0.5
left=$(tagged_processes)
[ -z "$left" ] || fail "processes left running: $left"
cat "$out"
echo "1 passed, 0 failed (${elapsed}s)"
