#!/usr/bin/env bash
# Several hosts on one machine: network namespaces (3 by default), each
# joined by a veth pair to a bridge in this namespace, each running
# per_host ranks (shared memory between them with transport "auto"; a
# comma-separated per_host, such as 2,1, gives each host its own count and
# sets the number of hosts); horarun
# starts them with `ip netns exec` and serves the rendezvous on the bridge.
# Every collective is checked by hora-mp-worker over TCP between the hosts.
# Exits 77 (reported by CTest as skipped) where namespaces cannot be made.
# With HORATEST_EXPECT_LINE set, the job's output must hold that text.
set -u
horarun="$1"; worker="$2"; hosts="${3:-3}"; per_host="${4:-1}"; transport="${5:-tcp}"
slots=()
if [[ "$per_host" == *,* ]]; then
  IFS=, read -r -a slots <<<"$per_host"
  hosts=${#slots[@]}
else
  for _ in $(seq 1 "$hosts"); do slots+=("$per_host"); done
fi
np=0
for s in "${slots[@]}"; do np=$((np + s)); done
tag=$(( $$ % 100000 ))
br="hbr$tag"
skip() { echo "SKIPPED: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "creating network namespaces needs root"
command -v ip >/dev/null || skip "ip (iproute2) is not installed"
cleanup() {
  for i in $(seq 1 "$hosts"); do ip netns del "hora$tag-$i" 2>/dev/null; done
  ip link del "$br" 2>/dev/null
}
trap cleanup EXIT
ip link add "$br" type bridge 2>/dev/null || skip "cannot create a bridge (no CAP_NET_ADMIN?)"
ip addr add 10.231.0.254/24 dev "$br" && ip link set "$br" up || skip "cannot configure the bridge"
list=""
for i in $(seq 1 "$hosts"); do
  ns="hora$tag-$i"
  ip netns add "$ns" || skip "cannot create namespace $ns"
  ip link add "hv$tag-$i" type veth peer name eth0 netns "$ns" || skip "cannot create veth pairs"
  ip link set "hv$tag-$i" master "$br" up
  ip -n "$ns" addr add "10.231.0.$i/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  list="$list${list:+,}$ns:${slots[$((i - 1))]}"
done
transport_flag=()
[ "$transport" = auto ] || transport_flag=(--transport "$transport")
out=$(mktemp)
"$horarun" -np "$np" -H "$list" --rsh "ip netns exec" --bind 10.231.0.254 "${transport_flag[@]}" \
  --timeout 60 "$worker" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
# HORATEST_EXPECT_LINE: text the job's output must hold (a route taken).
if [ "$rc" -eq 0 ] && [ -n "${HORATEST_EXPECT_LINE:-}" ] && ! grep -qF -- "$HORATEST_EXPECT_LINE" "$out"; then
  echo "FAIL: no line with '$HORATEST_EXPECT_LINE' in the job's output"
  rc=1
fi
rm -f "$out"
[ "$rc" -eq 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit "$rc"
