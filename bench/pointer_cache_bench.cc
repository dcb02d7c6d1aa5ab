// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The pointer cache (src/gpu/pointer_cache.h) against asking the device:
// the cost of a lookup that hits, for one pointer and for tensors carved out
// of one allocation, of a verified lookup (one query per allocation per
// batch), of the check every GPU tensor gets at submission (verified once
// per allocation per millisecond), and of the uncached query itself. On the host device the query
// is a map lookup under a lock -- the floor of a driver call, which costs
// more (cudaPointerGetAttributes; measured where a GPU is: docs/dev/gpu.md).
//
//   build/bin/hora-pointer-cache-bench                         # host device
//   HORA_BENCH_DEVICE=cuda build/bin/hora-pointer-cache-bench  # a GPU
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backends/device_choice.h"
#include "benchmark_main.h"
#include "gpu/lazy_device.h"
#include "gpu/pointer_cache.h"

namespace hora::gpu {
namespace {

constexpr size_t kTensors = 64;
constexpr size_t kTensorBytes = 64 << 10;

struct Fixture {
  Fixture() {
    const char* kind = std::getenv("HORA_BENCH_DEVICE");
    auto opened = ChooseDevice(kind != nullptr ? kind : "host")(0);
    if (!opened.ok()) {
      std::fprintf(stderr, "hora-pointer-cache-bench: %s\n", opened.status().ToString().c_str());
      std::exit(2);
    }
    dev = std::move(opened).value();
    block = static_cast<char*>(dev->Allocate(kTensors * kTensorBytes).value());
    for (size_t i = 0; i < kTensors; ++i) tensors.push_back(block + i * kTensorBytes);
  }
  ~Fixture() { (void)dev->Free(block); }
  std::unique_ptr<Device> dev;
  char* block = nullptr;
  std::vector<void*> tensors;
};

void BM_CacheHitOnePointer(benchmark::State& state) {
  Fixture f;
  PointerCache cache(*f.dev, PointerCache::Policy::kTrust);
  for (auto _ : state) benchmark::DoNotOptimize(cache.Lookup(f.tensors[0]));
}

void BM_CacheHitTensorsOfOneAllocation(benchmark::State& state) {
  Fixture f;
  PointerCache cache(*f.dev, PointerCache::Policy::kTrust);
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(cache.Lookup(f.tensors[i++ % kTensors]));
}

void BM_CacheVerifyBatchOf64(benchmark::State& state) {
  Fixture f;
  PointerCache cache(*f.dev, PointerCache::Policy::kVerify);
  for (auto _ : state) {
    cache.BeginBatch();
    for (void* t : f.tensors) benchmark::DoNotOptimize(cache.Lookup(t));
  }
  state.SetItemsProcessed(state.iterations() * kTensors);
}

void BM_DeviceQueryUncached(benchmark::State& state) {
  Fixture f;
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(f.dev->QueryPointer(f.tensors[i++ % kTensors]));
}

// The check a GPU tensor gets at submission (LazyDevice::CheckTensorMemory):
// a verified lookup whose batches are rounds of a millisecond, a clock read,
// and the lock of a Session's device.
void BM_SubmissionCheck(benchmark::State& state) {
  const char* kind = std::getenv("HORA_BENCH_DEVICE");
  const char* chosen = kind != nullptr ? kind : "host";
  LazyDevice lazy(chosen, ChooseDevice(chosen));
  Result<std::shared_ptr<Device>> dev = lazy.Get(0);
  if (!dev.ok()) {
    state.SkipWithError(dev.status().ToString().c_str());
    return;
  }
  auto* block = static_cast<char*>((*dev)->Allocate(kTensors * kTensorBytes).value());
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        lazy.CheckTensorMemory(0, block + (i++ % kTensors) * kTensorBytes, kTensorBytes));
  }
  (void)(*dev)->Free(block);
}

BENCHMARK(BM_CacheHitOnePointer);
BENCHMARK(BM_CacheHitTensorsOfOneAllocation);
BENCHMARK(BM_CacheVerifyBatchOf64);
BENCHMARK(BM_SubmissionCheck);
BENCHMARK(BM_DeviceQueryUncached);

}  // namespace
}  // namespace hora::gpu

int main(int argc, char** argv) {
  return hora::bench::RunBenchmarks(
      argc, argv,
      "usage: hora-pointer-cache-bench [--benchmark_filter=REGEX] [Google Benchmark flags]\n"
      "Times a pointer-cache lookup against the device's own query (HORA_BENCH_DEVICE=host\n"
      "or cuda; host by default).\n\n");
}
