#!/usr/bin/env bash
# The timeline of a job whose rank 0 is killed with SIGKILL mid-run must
# still be valid JSON holding the spans written so far.
set -u
horarun="$1"; worker="$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
HORA_TIMELINE="$dir/timeline.json" "$horarun" -np 2 --timeout 20 "$worker" --kill-after-step 1
rc=$?
[ "$rc" -ne 0 ] || fail "horarun exited 0 although rank 0 was killed"
[ -s "$dir/timeline.json" ] || fail "no timeline written"
/usr/bin/python3 - "$dir/timeline.json" <<'PY' || fail "the timeline is not valid JSON with spans"
import json, sys
events = json.load(open(sys.argv[1]))
rows = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M"}
spans = {(rows[e["tid"]], e["name"]) for e in events if e["ph"] == "X"}
need = {("t0", "queued"), ("t0", "negotiating"), ("t0", "allreduce"), ("t59", "allreduce")}
missing = need - spans
print(f"{len(events)} events, {len(spans)} distinct spans; missing: {sorted(missing)}")
sys.exit(1 if missing else 0)
PY
echo "1 passed, 0 failed"
