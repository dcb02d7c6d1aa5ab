#!/bin/bash
# Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#
# The examples as users run them under horarun:
# - examples/torch_digits.py at 1, 2 and 4 workers: each reaches 95% test
#   accuracy, and 2 and 4 workers are within one point of 1 worker (odd
#   world sizes: the suites at np 3, for CI's time);
# - examples/torch_synthetic_benchmark.py, a short resnet18 run at 2 workers
#   (Hora, and float16 on the wire): it prints images/s per worker and in
#   total with a confidence interval;
# - examples/torch_elastic.py at 3 workers under --min-np 2, one killed in
#   its second epoch: the other two finish at 95% test accuracy;
# - examples/keras_digits.py at 2 and 3 workers on Keras's TensorFlow
#   backend, examples/jax_digits.py at 2 workers, and
#   examples/ray_digits.py with 2 Ray workers: each reaches 95% (PYTHON
#   must have Keras, JAX and Ray, as the project environment does; with
#   HORATEST_OPTIONAL_FRAMEWORKS=1 they are left out where it has not).
#
#   examples_test.sh SOURCE_DIR PYTHON HORARUN
set -uo pipefail
src=$1 python=$2 horarun=$3
failed=0
fail() { echo "FAIL: $*"; failed=1; }

declare -A acc
for np in 1 2 4; do
  out=$("$horarun" -np "$np" --timeout 120 "$python" "$src/examples/torch_digits.py" 2>&1)
  rc=$?
  a=$(sed -n 's/^\[0\]: final test accuracy \([0-9.]*\).*/\1/p' <<<"$out")
  echo "digits, $np worker(s): final test accuracy ${a:-none} (exit $rc)"
  if [ "$rc" -ne 0 ] || [ -z "$a" ]; then fail "digits at np $np: $out"; continue; fi
  acc[$np]=$a
  awk -v a="$a" 'BEGIN { exit !(a >= 0.95) }' || fail "digits at np $np: accuracy $a < 0.95"
done
for np in 2 4; do
  if [ -n "${acc[1]:-}" ] && [ -n "${acc[$np]:-}" ]; then
    awk -v a="${acc[$np]}" -v b="${acc[1]}" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01 + 1e-9) }' ||
      fail "digits: $np workers reach ${acc[$np]}, more than one point from 1 worker's ${acc[1]}"
  fi
done

for run in "2 " "2 --fp16-allreduce"; do
  np=${run%% *} extra=${run#* }
  out=$("$horarun" -np "$np" --timeout 120 "$python" "$src/examples/torch_synthetic_benchmark.py" \
    --model resnet18 --batch-size 4 --image-size 32 --num-warmup-batches 1 \
    --num-batches-per-iter 2 --num-iters 2 $extra 2>&1)
  rc=$?
  per=$(grep -E '^\[0\]: Img/sec per worker: [0-9.]+ \+-[0-9.]+$' <<<"$out")
  total=$(grep -E "^\[0\]: Total img/sec on $np worker\(s\): [0-9.]+ \+-[0-9.]+$" <<<"$out")
  echo "synthetic benchmark, $np workers ${extra:-(float32)}: ${total:-no total line}"
  if [ "$rc" -ne 0 ] || [ -z "$per" ] || [ -z "$total" ]; then
    fail "synthetic benchmark $extra (exit $rc): $out"
  elif ! awk -v t="$(sed 's/.*: \([0-9.]*\) .*/\1/' <<<"$total")" 'BEGIN { exit !(t > 0) }'; then
    fail "synthetic benchmark $extra: total rate not positive: $total"
  fi
done

# Elastic: 3 workers, one killed in epoch 1; the other two finish.
out=$("$horarun" -np 3 --min-np 2 --max-np 3 --timeout 120 "$python" "$src/examples/torch_elastic.py" \
  --epochs 10 --kill-worker 2 --kill-at-epoch 1 --check 2>&1)
rc=$?
a=$(sed -n 's/^\[0\]: final test accuracy \([0-9.]*\) with 2 worker(s)$/\1/p' <<<"$out")
echo "elastic digits, 3 workers then 2: final test accuracy ${a:-none} (exit $rc)"
if [ "$rc" -ne 0 ] || [ -z "$a" ] || ! grep -q "world re-formed: 2 worker(s)" <<<"$out"; then
  fail "elastic example (exit $rc): $out"
fi

if "$python" -c "import keras, jax, ray" 2> /dev/null; then
  check_final() {  # what, exit code, output
    local a
    a=$(sed -n 's/^\(\[0\]: \)\{0,1\}final test accuracy \([0-9.]*\).*/\2/p' <<<"$3")
    echo "$1: final test accuracy ${a:-none} (exit $2)"
    if [ "$2" -ne 0 ] || [ -z "$a" ] || ! awk -v a="$a" 'BEGIN { exit !(a >= 0.95) }'; then
      fail "$1 (exit $2): $3"
    fi
  }
  # (Keras's JAX and torch backends train in python_keras_*: the example runs on
  # TensorFlow's, for CI's time.)
  for run in "tensorflow 2" "tensorflow 3"; do
    backend=${run% *} np=${run#* }
    out=$(KERAS_BACKEND=$backend TF_CPP_MIN_LOG_LEVEL=2 "$horarun" -np "$np" --timeout 120 \
      "$python" "$src/examples/keras_digits.py" --check 2>&1)
    check_final "keras digits on $backend, $np workers" $? "$out"
  done
  for np in 2; do
    out=$("$horarun" -np "$np" --timeout 120 "$python" "$src/examples/jax_digits.py" --check 2>&1)
    check_final "jax digits, $np workers" $? "$out"
  done
  out=$(RAY_USAGE_STATS_ENABLED=0 timeout 300 "$python" "$src/examples/ray_digits.py" \
    --num-workers 2 --check 2>&1)
  check_final "ray digits, 2 Ray workers" $? "$out"
elif [ "${HORATEST_OPTIONAL_FRAMEWORKS:-}" = 1 ]; then
  echo "examples of Keras, JAX and Ray: not run ($python has not all three)"
else
  fail "$python cannot import Keras, JAX and Ray, which the project environment pins: $("$python" -c "import keras, jax, ray" 2>&1 | tail -1)"
fi

[ "$failed" -eq 0 ] && echo "PASS: examples" || exit 1
