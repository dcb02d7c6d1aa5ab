#!/usr/bin/env bash
# Elastic training with each worker in a network namespace of its own
# (tests/python/scripts/elastic_train.py under horarun -np 3 --min-np 2):
# the workers reach each other and horarun's store only over TCP, through
# veth pairs on a bridge, as on three hosts. The worker of rank 2 kills
# itself with SIGKILL at step 5; the two others re-form a world of 2 and
# finish, each checking that every step was committed once and that its
# model equals a replay of the committed steps.
# Where network namespaces cannot be made (not root, no `ip`, a sandbox
# that refuses them), it says why and exits 77: ctest counts it skipped.
# Usage: elastic_netns_test.sh HORARUN PYTHON SCRIPT
set -u
. "$(dirname "$0")/lib.sh"
horarun="$1"; python="$2"; script="$3"
tag=$(( $$ % 100000 ))
br="hbr$tag"
net=10.$(( 100 + $$ % 100 )).$(( $$ / 100 % 250 ))
dir=$(mktemp -d)
out=$dir/out
cleanup() {
  for k in 0 1 2; do ip netns del "hora$tag-$k" 2>/dev/null; done
  ip link del "$br" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
skip() { echo "SKIP: $*"; exit 77; }
fail() { cat "$out"; echo "FAIL: $*"; exit 1; }
command -v ip > /dev/null || skip "no ip command"
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
ip netns add "hora$tag-0" 2> "$dir/why" || skip "cannot make a network namespace: $(cat "$dir/why")"
ip link add "$br" type bridge 2> "$dir/why" || skip "cannot make a bridge: $(cat "$dir/why")"
ip addr add "$net.1/24" dev "$br" && ip link set "$br" up || fail "bridge $br: no address"
for k in 0 1 2; do
  ns="hora$tag-$k"
  [ "$k" -eq 0 ] || ip netns add "$ns" || fail "namespace $ns"
  # (Each namespace's end is eth0; the other end joins the bridge.)
  ip link add "hv$tag$k" type veth peer name eth0 netns "$ns" 2> "$dir/why" ||
    skip "cannot make a veth pair: $(cat "$dir/why")"
  ip link set "hv$tag$k" master "$br" up || fail "veth hv$tag$k"
  ip -n "$ns" addr add "$net.$(( 10 + k ))/24" dev eth0 || fail "address in $ns"
  ip -n "$ns" link set eth0 up && ip -n "$ns" link set lo up || fail "links up in $ns"
done
# Worker localhost/K runs in namespace K.
cat > "$dir/inns.sh" <<EOS
#!/bin/sh
exec ip netns exec "hora$tag-\${HORA_WORKER_ID##*/}" sh -c \
  'echo "\$HORA_WORKER_ID \$(ip netns identify)" >> "$dir/where"; exec "\$@"' sh "\$@"
EOS
chmod +x "$dir/inns.sh"
start=$(date +%s)
HORA_TEST_TAG=$HORA_TEST_TAG HORA_PEER_TIMEOUT_S=2 OMP_NUM_THREADS=1 HORA_IFACE=eth0 \
  "$horarun" -np 3 --min-np 2 --max-np 3 --transport tcp --bind "$net.1" --timeout 120 \
  "$dir/inns.sh" "$python" "$script" --kill-at 5 --kill-rank 2 >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
[ "$rc" -eq 0 ] || fail "horarun exited $rc"
grep -q "worker localhost/2 (pid .*) was killed by signal 9" "$out" ||
  fail "horarun did not report the killed worker"
grep -q "world 2 formed with 2 worker(s)" "$out" || fail "horarun did not say it re-formed the world"
for k in 0 1 2; do
  grep -qx "localhost/$k hora$tag-$k" "$dir/where" || fail "worker localhost/$k ran outside its namespace: $(cat "$dir/where")"
done
ok=$(grep -c "elastic ok: .* of 2, sizes \[3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2\], resets \[2\]" "$out")
[ "$ok" -eq 2 ] || fail "$ok of 2 survivors finished with every step committed once"
sleep 0.5
left=$(tagged_processes)
[ -z "$left" ] || fail "processes left running: $left"
cat "$out"
echo "1 passed, 0 failed (${elapsed}s)"
