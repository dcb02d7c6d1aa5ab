#!/usr/bin/env bash
# HORA_TCP_CONGESTION reaches every connection between hosts: the engine
# worker on 2 namespaced hosts x 2 ranks (netns_test.sh) with a congestion
# control other than the system's default; every rank's debug line, read
# back from its sockets, must say that its 2 connections to the other host
# use it, and the job must pass. Exits 77 where namespaces cannot be made.
set -u
horarun="$1"; worker="$2"
here=$(cd "$(dirname "$0")" && pwd)
default=$(cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null)
name=cubic
[ "$default" = cubic ] && name=reno
out=$(HORA_TCP_CONGESTION=$name HORA_LOG_LEVEL=debug \
  "$here/netns_test.sh" "$horarun" "$worker" 2 2 auto 2>&1)
rc=$?
echo "$out" | grep -v "DEBUG" | tail -20
[ "$rc" -eq 77 ] && exit 77
lines=$(echo "$out" | grep -cE "rank [0-3]: 2 connections to other hosts use $name congestion control \(read back\)")
echo "$lines of 4 ranks: 2 connections to the other host use $name (the system's default: $default)"
if [ "$rc" -ne 0 ] || [ "$lines" -ne 4 ]; then
  echo "$out" | grep "congestion" | head
  echo "0 passed, 1 failed"
  exit 1
fi
echo "1 passed, 0 failed"
