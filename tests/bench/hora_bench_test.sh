#!/usr/bin/env bash
# hora-bench end to end: every collective at 2 and 3 ranks with --check
# against the reference in bench/hora_bench/data.cc, for Hora and, where
# built, the Gloo peer; --json records checked field by field; the torch peer
# (np 2) and the MPI peer (horarun --mpi, np 2); GPU tensors on the host
# device (--device host, np 2), and the NCCL peer there (its stand-in); bad flags exit 2 naming the flag. Usage: hora_bench_test.sh HORARUN HORA_BENCH PYTHON
set -u
horarun="$1"; bench="$2"; python="$3"
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
passed=0; failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAILED: $*"; }
gloo=""; "$bench" allreduce --peers gloo --sizes 4 --iters 1 >/dev/null 2>&1 && gloo="--peers gloo"

# Checks a --json file: the fields the issue names, no wrong element, no
# error for Hora, and `impls` implementations x `sizes` sizes of records.
check_json() {  # file collective ranks impls sizes
  "$python" - "$@" <<'PY'
import json, sys
path, collective, ranks, impls, sizes = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(","), int(sys.argv[5])
records = json.load(open(path))
need = ["impl", "collective", "size_bytes", "dtype", "avg_us", "busbw_gbps", "wrong", "ranks"]
problems = []
for r in records:
    missing = [k for k in need if k not in r]
    if missing:
        problems.append("record %s lacks %s" % (r, missing))
    if r.get("collective") != collective or r.get("ranks") != ranks:
        problems.append("record %s: wrong collective or ranks" % r)
    if "error" in r:
        if r["impl"] == "hora":
            problems.append("hora failed: %s" % r["error"])
        continue
    if r["wrong"] != 0:
        problems.append("%s %s B: %s wrong" % (r["impl"], r["size_bytes"], r["wrong"]))
    if not r["avg_us"] > 0 or not r["busbw_gbps"] >= 0:
        problems.append("%s: implausible time %s" % (r["impl"], r["avg_us"]))
for impl in impls:
    n = sum(1 for r in records if r["impl"] == impl and "error" not in r)
    if n != sizes:
        problems.append("%s: %d records, want %d" % (impl, n, sizes))
if problems:
    print("\n".join(problems))
sys.exit(1 if problems else 0)
PY
}

for np in 2 3; do
  for spec in "allreduce f32 sum" "allreduce bf16 average" "allreduce i32 min" "allreduce f16 product" \
              "allgather f64 sum" "broadcast i8 sum" "alltoall f32 sum" "reducescatter f16 max"; do
    set -- $spec
    coll=$1; dtype=$2; op=$3
    peers=$gloo; impls=hora
    [ -n "$gloo" ] && [ "$op" != average ] && [ "$dtype" != bf16 ] &&
      impls=$([ "$coll" = allreduce ] && echo hora,gloo_ring,gloo_hd || echo hora,gloo)
    json="$out/$coll-$dtype-$np.json"
    # 0..2 elements per rank-block (1 B), odd counts (13 B), one segment and more (1 MiB).
    if "$horarun" -np "$np" --timeout 120 "$bench" "$coll" --dtype "$dtype" --op "$op" \
         --sizes 1:1M --step-factor 13 --iters 2 --warmup 1 --check $peers --json "$json" \
         >"$out/log" 2>&1 && check_json "$json" "$coll" "$np" "$impls" 6; then
      ok
    else
      bad "$coll $dtype $op np $np"; tail -20 "$out/log"
    fi
  done
done

# Every record's count of timed iterations: --iters-small up to 64 KiB,
# --iters above.
check_iters() {  # file small large
  "$python" - "$@" <<'PY'
import json, sys
path, small, large = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
bad = [r for r in json.load(open(path))
       if r.get("iters") != (small if r["size_bytes"] <= 65536 else large)]
print("\n".join("%s %s B: %s iterations" % (r["impl"], r["size_bytes"], r.get("iters")) for r in bad))
sys.exit(1 if bad else 0)
PY
}

# In place, with a forced algorithm; more iterations for small sizes.
if "$horarun" -np 3 "$bench" allreduce --inplace --algo recursive_doubling --sizes 4:256K \
     --step-factor 16 --iters 2 --iters-small 3 --check --json "$out/ip.json" >"$out/log" 2>&1 &&
   check_json "$out/ip.json" allreduce 3 hora 5 && check_iters "$out/ip.json" 3 2; then ok
else bad "in place"; tail "$out/log"; fi

# Over TCP (the limit is then a TCP stream while every rank streams to the
# next at once, beside one stream alone; both measured, so both positive).
if HORA_TRANSPORT=tcp "$horarun" -np 3 "$bench" allreduce --sizes 4:64K --step-factor 16 --iters 2 \
     --check $gloo --json "$out/tcp.json" >"$out/log" 2>&1 &&
   check_json "$out/tcp.json" allreduce 3 "$([ -n "$gloo" ] && echo hora,gloo_ring,gloo_hd || echo hora)" 4 &&
   grep -q '"limit_kind": "tcp_ring"' "$out/tcp.json" &&
   grep -Eq 'limit: link bandwidth [0-9.]*[1-9][0-9.]* GB/s per TCP stream, every rank streaming a 2 MiB buffer to the next at once \(one stream alone: [0-9.]*[1-9]' "$out/log"
then ok; else bad "tcp"; tail "$out/log"; fi

# GPU tensors on the host device (hora@host beside hora), every collective.
for coll in allreduce allgather broadcast alltoall reducescatter; do
  if "$horarun" -np 2 --timeout 120 "$bench" "$coll" --device host --sizes 4:1M --step-factor 64 \
       --iters 2 --check --json "$out/dev-$coll.json" >"$out/log" 2>&1 &&
     check_json "$out/dev-$coll.json" "$coll" 2 hora,hora@host 4; then ok; else
    bad "--device host $coll"; tail "$out/log"; fi
done
# The NCCL peer, on the host device's stand-in for NCCL (nccl@host).
for coll in allreduce broadcast; do
  if "$horarun" -np 2 --timeout 120 "$bench" "$coll" --device host --peers nccl --sizes 4:1M \
       --step-factor 64 --iters 2 --check --json "$out/nccl-$coll.json" >"$out/log" 2>&1 &&
     check_json "$out/nccl-$coll.json" "$coll" 2 hora,hora@host,nccl@host 4; then ok; else
    bad "--device host --peers nccl $coll"; tail "$out/log"; fi
done

# The torch.distributed peer, and more iterations for small sizes.
"$python" -c "import torch.distributed" 2>/dev/null || bad "$python has no torch.distributed"
if "$python" -c "import torch.distributed" 2>/dev/null; then
  if "$horarun" -np 2 --timeout 200 "$bench" allreduce --sizes 16K:256K --step-factor 4 --iters 2 \
       --iters-small 3 --check --peers torch --python "$python" --json "$out/t.json" >"$out/log" 2>&1 &&
     check_json "$out/t.json" allreduce 2 hora,torch 3 && check_iters "$out/t.json" 3 2 &&
     grep -q "2 iterations (3 up to 64 KiB) after" "$out/log"
  then ok; else bad "torch peer"; tail "$out/log"; fi
fi

# The MPI peer, under horarun --mpi.
command -v mpirun >/dev/null || bad "no mpirun (scripts/setup-deps installs it)"
if command -v mpirun >/dev/null; then
  if "$horarun" --mpi -np 2 --timeout 120 "$bench" allgather --sizes 4:64K --step-factor 64 \
       --iters 2 --check --peers mpi --json "$out/m.json" >"$out/log" 2>&1 &&
     check_json "$out/m.json" allgather 2 hora,mpi 3; then ok; else bad "mpi peer"; tail "$out/log"; fi
fi

# Bad input: exit 2 and an error naming the flag and its value.
for argv in "allreduce --dtype f99" "allreduce --sizes 8:4" "allgather --inplace" \
            "alltoall --algo ring" "allreduce --peers nvlink" "allreduce --device tpu" "scan"; do
  msg=$("$bench" $argv 2>&1); rc=$?
  first=$(echo "$argv" | awk '{print $NF}')
  if [ "$rc" -eq 2 ] && echo "$msg" | grep -qF -- "$first"; then ok; else bad "'$argv': rc $rc: $msg"; fi
done
# The mpi peer without an MPI launcher is an error on every rank, not a hang.
msg=$("$horarun" -np 2 --timeout 60 "$bench" allreduce --peers mpi 2>&1); rc=$?
if [ "$rc" -ne 0 ] && echo "$msg" | grep -q "needs an MPI launcher"; then ok; else bad "mpi without mpirun: $msg"; fi
# The nccl peer needs GPU buffers: without --device it is an error on its
# ranks, naming what it needs, not a hang.
msg=$("$horarun" -np 2 --timeout 60 "$bench" allreduce --peers nccl 2>&1); rc=$?
if [ "$rc" -ne 0 ] && [ "$(echo "$msg" | grep -c -- "--peers nccl needs --device cuda")" -ge 1 ]; then
  ok; else bad "nccl without --device: $msg"; fi

# hora-gpu-latency (built beside hora-bench) on the host device: every way
# timed, with a figure each; Hora's calls on its own path, not NCCL's, even
# where NCCL loads (the host device's); a bad flag is exit 2.
latency="$(dirname "$bench")/hora-gpu-latency"
if [ -x "$latency" ]; then
  msg=$(HORA_DEVICE=host "$latency" --sizes 4,1K --iters 20 2>&1); rc=$?
  missing=""
  for way in sync memcpy batched batched2 memcpy-call batched-call record-call hora hora-anon \
             hora-submit; do
    [ "$(echo "$msg" | grep -cE "^ +(4|1024) +$way +[0-9.]+ ")" -eq 2 ] || missing="$missing $way"
  done
  if [ "$rc" -eq 0 ] && [ -z "$missing" ]; then ok; else bad "hora-gpu-latency: rc $rc, missing:$missing: $msg"; fi
  msg=$(HORA_DEVICE=host HORA_NCCL_LIBRARY=host "$latency" --sizes 1M --iters 4 --ways hora 2>&1)
  if echo "$msg" | grep -qE "hora's calls: [1-9][0-9]* on the GPU alone, 0 by NCCL"; then ok; else
    bad "hora-gpu-latency went to NCCL: $msg"; fi
  msg=$("$latency" --iters 2>&1); rc=$?
  if [ "$rc" -eq 2 ] && echo "$msg" | grep -q "usage"; then ok; else bad "hora-gpu-latency --iters: rc $rc"; fi
else
  bad "hora-gpu-latency is not built beside $bench"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
