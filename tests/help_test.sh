#!/usr/bin/env bash
# Every program the build puts in its bin folder answers --help and -h with
# a usage text and exit status 0, without doing its work (each within 10 s).
# The programs are found, not listed: a new one without --help fails here.
set -u
bin="$1"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
pass=0; failed=0; seen=0
for prog in "$bin"/*; do
  [ -f "$prog" ] && [ -x "$prog" ] || continue
  seen=$((seen + 1))
  for flag in --help -h; do
    # At most 64 KiB is kept: a program that prints on and on ends on SIGPIPE.
    timeout 10 "$prog" "$flag" 2>&1 </dev/null | head -c 65536 >"$tmp"
    rc=${PIPESTATUS[0]}
    out=$(cat "$tmp")
    if [ "$rc" -eq 0 ] && grep -qi '^usage' <<<"$out"; then
      pass=$((pass + 1))
    else
      failed=$((failed + 1))
      echo "FAIL $(basename "$prog") $flag: rc=$rc (want 0 and a line starting with 'usage'), output: $(head -5 <<<"$out")"
    fi
  done
done
echo "$seen programs, $pass passed, $failed failed"
[ "$seen" -gt 0 ] && [ "$failed" -eq 0 ]
