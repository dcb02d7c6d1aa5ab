#!/usr/bin/env bash
# The Python latency benchmarks (bench/python/*_latency.py and
# optimizer_overhead.py) run to their end at np 2 with a few iterations,
# each printing a line per measured call (process_set_latency.py at
# np 3, where its set of two ranks has windows of its own). Usage: python_bench_test.sh
# HORARUN PYTHON PYTHONPATH_DIR
set -u
horarun="$1"; python="$2"; pypath="$3"
here="$(cd "$(dirname "$0")/../.." && pwd)/bench/python"
failed=0
run() {  # script want_lines args... (NP=n: n ranks, default 2)
  local script="$1" want="$2"; shift 2
  local out
  out=$(PYTHONPATH="$pypath" OMP_NUM_THREADS=1 TF_CPP_MIN_LOG_LEVEL=3 \
        "$horarun" -np "${NP:-2}" "$python" "$here/$script" "$@" 2>&1)
  local rc=$? got
  got=$(grep -c '^\[0\]: round 1 ' <<<"$out")
  if [ $rc -ne 0 ] || [ "$got" -ne "$want" ]; then
    echo "FAILED: $script (exit $rc, $got lines of $want)"; echo "$out" | tail -20
    failed=$((failed + 1))
  fi
}
few=(--iters 5 --warmup 1 --rounds 1)
run allreduce_latency.py 5 "${few[@]}"
run numpy_latency.py 6 "${few[@]}"
run collectives_latency.py 15 "${few[@]}"
run optimizer_overhead.py 2 "${few[@]}" --layers 3
NP=3 run process_set_latency.py 7 "${few[@]}"  # a set of two: on its windows
# (TensorFlow and JAX: the project environment pins both; only with
# HORATEST_OPTIONAL_FRAMEWORKS=1 is a python without them let off.)
for fw in "tensorflow tensorflow_latency.py 10" "jax jax_latency.py 4"; do
  read -r module script lines <<<"$fw"
  if "$python" -c "import $module" 2>/dev/null; then
    run "$script" "$lines" "${few[@]}"
  elif [ "${HORATEST_OPTIONAL_FRAMEWORKS:-}" != 1 ]; then
    echo "FAIL: $python cannot import $module ($script not run)"
    failed=$((failed + 1))
  fi
done
[ $failed -eq 0 ] && echo "python benchmarks: all ran"
exit $failed
