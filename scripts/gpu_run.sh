#!/usr/bin/env bash
# Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#
# Hora on a GPU machine, one step per call (each well under 10 minutes), its
# results under $OUT (default: gpu-out/):
#   inventory  what the machine has -> inventory.txt
#   build      a GPU build in build-gpu/: CUDA on, kernels for sm_90 (H100,
#              H200; HORA_CUDA_ARCH=80 for an A100), the packages the image
#              lacks from .gpu-deps/ (scripts/gpu-deps)
#   test       ctest -L gpu: the device's checks and the GPU-tensor suites
#              on the GPU (threads np 1-4, processes np 2 and 4, hora.torch
#              on CUDA tensors at np 2) -> test.txt, gpu.xml
#   bench      the pointer-cache and kernel benchmarks on the GPU, and hora-bench
#              allreduce of GPU tensors at np 2 on device windows, staged whole
#              and in chunks, and at np 1 beside NCCL (--peers nccl)
#              -> bench.txt
#   profile    the engine's timeline of a GPU allreduce, summarized
#              -> profile.txt
#   latency    where a one-rank GPU allreduce's time goes, beside NCCL
#              (hora-gpu-latency) -> latency.txt
#   cold       the same, each call after the host wrote 64 MiB of its own
#              (cold caches), then after an upload of the input, as in
#              hora-bench -> cold.txt
#   all        the seven in order
# HORA_GPU_TARGETS (a list) builds those targets only.
# Every step prints what it ran and its exit code; a failing step does not
# stop the next ones under `all`. Record what ran, on which GPU, in
# docs/dev/gpu.md.
set -uo pipefail
if [[ $# -eq 0 || "$1" == "-h" || "$1" == "--help" ]]; then
  sed -n '3,28p' "$0" | sed 's/^# \{0,1\}//'
  [[ $# -eq 0 ]] && exit 2 || exit 0
fi
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/gpu-out}
build=$root/build-gpu
mkdir -p "$out"
cd "$root" || exit 1
python=$(command -v python3)

run() {  # run LOG CMD...: runs CMD, its output to LOG and the terminal
  local log=$1
  shift
  echo "+ [$(date +%T)] $*" | tee -a "$out/$log"
  "$@" 2>&1 | tee -a "$out/$log"
  local rc=${PIPESTATUS[0]}
  echo "= exit $rc" | tee -a "$out/$log"
  return "$rc"
}

inventory() {
  {
    echo "date: $(date -u)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1
    nvidia-smi topo -m 2>&1 | head -5
    echo "nvcc: $(nvcc --version 2>&1 | tail -2 | tr '\n' ' ')"
    echo "cmake: $(cmake --version | head -1); ninja: $(ninja --version 2>&1)"
    echo "c++: $(c++ --version | head -1)"
    echo "python: $python $($python --version 2>&1)"
    $python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'gpus', torch.cuda.device_count())" 2>&1
    $python -c "import sysconfig, os; i = sysconfig.get_paths()['include']; \
print('Python.h:', os.path.exists(os.path.join(i, 'Python.h')), i)" 2>&1
    for h in openssl/hmac.h gtest/gtest.h pybind11/pybind11.h dlpack/dlpack.h benchmark/benchmark.h \
      nlohmann/json.hpp nccl.h; do
      if [[ -e /usr/include/$h || -e /usr/local/cuda/include/$h ]]; then echo "header $h: yes"; else
        echo "header $h: no"; fi
    done
    # (Without the header, the build takes a framework's copy: bindings/python/CMakeLists.txt.)
    echo "dlpack.h in torch: $(find "$($python -c 'import os, torch; print(os.path.dirname(torch.__file__))' \
      2>/dev/null)/include" -name dlpack.h 2>/dev/null | tr '\n' ' ')"
    echo "nproc: $(nproc)"
    echo "nccl: ${HORA_NCCL_LIBRARY:-not found}"
    echo ".gpu-deps: $(cat .gpu-deps/PACKAGES 2>/dev/null | tr '\n' ' ')"
  } > "$out/inventory.txt" 2>&1
  cat "$out/inventory.txt"
}

build_step() {
  local deps=()
  [[ -d .gpu-deps ]] && deps=(-DHORA_DEPS_DIR="$root/.gpu-deps")
  local python_on=ON
  $python -c "import sysconfig, os, sys; \
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')) else 1)" ||
    python_on=OFF
  # The image's pybind11 (pip) before Debian's 2.10, which predates its Python.
  local pybind=()
  local dir
  dir=$($python -c "import pybind11; print(pybind11.get_cmake_dir())" 2>/dev/null) &&
    pybind=(-Dpybind11_DIR="$dir")
  # The image's compiler is not CI's: its warnings are counted, not fatal.
  configure() {
    run build.txt cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHORA_WERROR=OFF \
      -DHORA_WITH_CUDA=on -DCMAKE_CUDA_ARCHITECTURES="${HORA_CUDA_ARCH:-90}" "${deps[@]}" \
      "${pybind[@]}" -DHORA_BUILD_PYTHON=$python_on -DPython_EXECUTABLE="$python"
  }
  if ! configure; then
    [[ $python_on == OFF ]] && return 1
    echo "configure failed with the Python module; again without it" | tee -a "$out/build.txt"
    python_on=OFF
    rm -rf "$build"
    configure || return 1
  fi
  local targets=(horarun hora-gpu-check hora-mp-device-worker hora_tests
    hora-pointer-cache-bench hora-device-kernel-bench hora-bench hora-gpu-latency)
  [[ $python_on == ON ]] && targets+=(hora_python_core)
  # shellcheck disable=SC2206  # (a list, split on purpose)
  [[ -n "${HORA_GPU_TARGETS:-}" ]] && targets=($HORA_GPU_TARGETS)
  # (-k 0: a target that fails leaves the others built, and the steps after
  # run what there is.)
  local rc=0
  run build.txt cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" -- -k 0 || rc=1
  echo "warnings: $(grep -c 'warning:' "$out/build.txt")" | tee -a "$out/build.txt"
  return $rc
}

# NCCL: the toolkit's, else the one pip installed beside torch.
find_nccl() {
  [[ -n "${HORA_NCCL_LIBRARY:-}" ]] && return
  local lib
  lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}')
  [[ -z "$lib" ]] && lib=$(find /usr/local/cuda/ /usr/lib /opt -name 'libnccl.so.2' 2>/dev/null | head -1)
  if [[ -n "$lib" ]]; then export HORA_NCCL_LIBRARY=$lib; fi
}

test_step() {
  # (ctest -L gpu: the device's checks, the GPU-tensor suites as threads,
  # processes at np 2 and 4, and hora.torch on CUDA tensors where the Python
  # module was built: tests/CMakeLists.txt.)
  (cd "$build" && run test.txt ctest -L gpu --output-on-failure --output-junit "$out/gpu.xml")
}
bench_step() {
  local rc=0
  HORA_BENCH_DEVICE=cuda run bench.txt "$build/bin/hora-pointer-cache-bench" || rc=1
  HORA_BENCH_DEVICE=cuda run bench.txt "$build/bin/hora-device-kernel-bench" || rc=1
  # Two ranks on the one GPU: device windows (IPC), then staged whole and
  # in 4 MiB chunks.
  for path in "HORA_GPU_IPC=1" "HORA_GPU_IPC=0 HORA_STAGING_CHUNK_BYTES=0" \
    "HORA_GPU_IPC=0 HORA_STAGING_CHUNK_BYTES=4M"; do
    echo "== $path" >> "$out/bench.txt"
    # shellcheck disable=SC2086  # ($path is two settings, split on purpose)
    (export $path HORA_GPU_BACKEND=hora
      run bench.txt "$build/bin/horarun" -np 2 --timeout 120 "$build/bin/hora-bench" allreduce \
        --device cuda --sizes 4:64M --step-factor 16 --iters 20 --check) || rc=1
  done
  # NCCL beside Hora: one rank (NCCL needs a GPU per rank).
  run bench.txt "$build/bin/horarun" -np 1 --timeout 120 "$build/bin/hora-bench" allreduce \
    --device cuda --sizes 4:64M --step-factor 16 --iters 200 --check --peers nccl || rc=1
  return $rc
}

find_nccl
profile_step() {
  # Where a GPU allreduce's time goes: the engine's timeline (negotiating,
  # then the batch) at 4 bytes on the windows and staged (np 2), and at 64
  # MiB alone (np 1), summarized by bench/timeline_summary.py.
  local rc=0
  for setting in "HORA_GPU_IPC=1 np=2 size=4" "HORA_GPU_IPC=0 np=2 size=4" \
    "HORA_GPU_IPC=1 np=1 size=64M"; do
    local ipc np size
    read -r ipc np size <<< "$setting"
    rm -f /tmp/hora-tl.json
    echo "== $setting" >> "$out/profile.txt"
    (export "$ipc" HORA_GPU_BACKEND=hora HORA_TIMELINE=/tmp/hora-tl.json
      run profile.txt "$build/bin/horarun" -np "${np#np=}" --timeout 120 "$build/bin/hora-bench" \
        allreduce --device cuda --sizes "${size#size=}:${size#size=}" --iters 50) || rc=1
    run profile.txt "$python" bench/timeline_summary.py /tmp/hora-tl.json --skip 5 || rc=1
  done
  return $rc
}

latency_step() {
  local rc=0
  HORA_DEVICE=cuda run latency.txt "$build/bin/hora-gpu-latency" --sizes 4,4K,64K,1M,4M,16M,32M,64M \
    --iters "${HORA_LATENCY_ITERS:-2000}" || rc=1
  rm -f /tmp/hora-tl.json
  (export HORA_DEVICE=cuda HORA_TIMELINE=/tmp/hora-tl.json
    run latency.txt "$build/bin/hora-gpu-latency" --sizes 4 --iters 500) || rc=1
  run latency.txt "$python" bench/timeline_summary.py /tmp/hora-tl.json --skip 50 || rc=1
  return $rc
}

cold_step() {
  local rc=0 ways=memcpy,batched,batched-call,nccl,hora,hora-submit
  HORA_DEVICE=cuda run cold.txt "$build/bin/hora-gpu-latency" --sizes 4,256K,4M,64M --iters 200 \
    --ways $ways --cold 64M || rc=1
  HORA_DEVICE=cuda run cold.txt "$build/bin/hora-gpu-latency" --sizes 4,256K,4M,64M --iters 200 \
    --ways $ways --upload || rc=1
  return $rc
}

status=0
for step in "$@"; do
  case $step in
    inventory) inventory || status=1 ;;
    build) build_step || status=1 ;;
    test) test_step || status=1 ;;
    bench) bench_step || status=1 ;;
    profile) profile_step || status=1 ;;
    latency) latency_step || status=1 ;;
    cold) cold_step || status=1 ;;
    all)
      inventory
      build_step || status=1
      test_step || status=1
      bench_step || status=1
      profile_step || status=1
      latency_step || status=1
      cold_step || status=1
      ;;
    *) echo "gpu_run.sh: unknown step '$step' (inventory, build, test, bench, profile, latency, cold, all)" >&2; exit 2 ;;
  esac
done
exit $status
