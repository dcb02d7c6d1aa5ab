#!/usr/bin/env bash
# Synthetic training throughput of the TensorFlow/Keras and JAX adapters at 1
# and 2 workers, beside tf.distribute.MultiWorkerMirroredStrategy, in rounds
# interleaved so that the machine's drift hits every case alike. Prints one
# line per run and a summary (median of the rounds' totals; scaling
# efficiency = total at n / (n x total at 1)).
#
#   bench/frameworks/run.sh [ROUNDS] [BUILD]     (default 3, build)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3} build=${2:-build}
python=$(scripts/python-env --print)
export PYTHONPATH=$PWD/$build/python OMP_NUM_THREADS=1 TF_CPP_MIN_LOG_LEVEL=2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
cases=("keras-hora|examples/keras_synthetic_benchmark.py --model resnet18ish"
       "keras-mwms|examples/keras_synthetic_benchmark.py --model resnet18ish --mwms"
       "jax-hora|examples/jax_synthetic_benchmark.py")
for round in $(seq "$rounds"); do
  for c in "${cases[@]}"; do
    for np in 1 2; do
      name=${c%%|*} cmd=${c#*|}
      # shellcheck disable=SC2086
      total=$("$build/bin/horarun" -np "$np" --timeout 120 "$python" $cmd --num-iters 5 2>&1 |
        sed -n 's/^\[0\]: Total img\/sec on [0-9]* worker(s): \([0-9.]*\) .*/\1/p')
      echo "round $round $name np $np: ${total:-FAILED} img/s"
      echo "$name $np ${total:-nan}" >> "$out"
    done
  done
done
python3 - "$out" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, np_, total = line.split()
    rows.setdefault((name, int(np_)), []).append(float(total))
print("\n| case | 1 worker img/s | 2 workers img/s | scaling efficiency |")
print("|---|---|---|---|")
for name in dict.fromkeys(k[0] for k in rows):
    one, two = statistics.median(rows[(name, 1)]), statistics.median(rows[(name, 2)])
    print("| %s | %.1f (%s) | %.1f (%s) | %.2f |" % (
        name, one, ", ".join("%.1f" % v for v in rows[(name, 1)]), two,
        ", ".join("%.1f" % v for v in rows[(name, 2)]), two / (2 * one)))
PY
