// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Hora's kernels on a device (src/gpu/device.h), each queued on a stream and
// waited for: the reduction over 2 and 8 sources (the staged path reduces 2,
// a within-host GPU allreduce reads every rank's buffer), the batched copy
// of a fused batch (64 tensors, their starts 16-byte aligned or only 4-byte
// aligned, as a packed batch's float32 tensors are), and a device-to-device
// copy of the same bytes as the floor. Bytes/s count the bytes read plus
// written. On the host device (the default) these are the CPU kernels run by
// a stream thread, so the figures are the CPU's; HORA_BENCH_DEVICE=cuda times
// the CUDA kernels on GPU 0.
//
//   build/bin/hora-device-kernel-bench                          # host device
//   HORA_BENCH_DEVICE=cuda build/bin/hora-device-kernel-bench   # a GPU
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backends/device_choice.h"
#include "benchmark_main.h"

namespace hora::gpu {
namespace {

constexpr size_t kParts = 64;

// A device, a stream and an event; `buffers` device buffers of `bytes` each.
struct Fixture {
  Fixture(size_t buffers, size_t bytes) {
    const char* kind = std::getenv("HORA_BENCH_DEVICE");
    auto opened = ChooseDevice(kind != nullptr ? kind : "host")(0);
    if (!opened.ok()) {
      std::fprintf(stderr, "hora-device-kernel-bench: %s\n", opened.status().ToString().c_str());
      std::exit(2);
    }
    dev = std::move(opened).value();
    stream = dev->CreateStream().value();
    done = dev->CreateEvent().value();
    for (size_t i = 0; i < buffers; ++i) {
      void* p = dev->Allocate(bytes).value();
      Require(dev->Memset(p, 0, bytes, stream));
      buffers_.push_back(p);
    }
    Finish();
  }
  ~Fixture() {
    for (void* p : buffers_) (void)dev->Free(p);
    (void)dev->DestroyEvent(done);
    (void)dev->DestroyStream(stream);
  }
  static void Require(const Status& st) {
    if (st.ok()) return;
    std::fprintf(stderr, "hora-device-kernel-bench: %s\n", st.ToString().c_str());
    std::exit(1);
  }
  // Waits for what was queued.
  void Finish() {
    Require(dev->Record(done, stream));
    Require(dev->Wait(done, Clock::now() + std::chrono::seconds(60)));
  }
  void* at(size_t i) const { return buffers_[i]; }

  std::unique_ptr<Device> dev;
  Stream stream;
  Event done;

 private:
  std::vector<void*> buffers_;
};

// Sum of float32 over state.range(1) sources of state.range(0) bytes each,
// into the first.
void BM_ReduceSumF32(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  const auto sources = static_cast<size_t>(state.range(1));
  Fixture f(sources, bytes);
  std::vector<const void*> src;
  for (size_t i = 0; i < sources; ++i) src.push_back(f.at(i));
  for (auto _ : state) {
    Fixture::Require(
        f.dev->Reduce(DataType::kFloat32, ReduceOp::kSum, f.at(0), src, bytes / 4, f.stream));
    f.Finish();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes * (sources + 1)));
}

// The same in bfloat16 (computed in float32, rounded after each step).
void BM_ReduceSumBF16(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  Fixture f(2, bytes);
  const std::vector<const void*> src = {f.at(0), f.at(1)};
  for (auto _ : state) {
    Fixture::Require(
        f.dev->Reduce(DataType::kBFloat16, ReduceOp::kSum, f.at(0), src, bytes / 2, f.stream));
    f.Finish();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes * 3));
}

// One batched copy of 64 parts covering state.range(0) bytes; range(1): 1
// for parts starting 16-byte aligned, 0 for parts 4 bytes off that.
void BM_BatchedCopy(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  const bool aligned = state.range(1) == 1;
  Fixture f(2, bytes + kParts * 16);
  const size_t part = bytes / kParts / 16 * 16;
  std::vector<CopyPart> parts;
  for (size_t i = 0; i < kParts; ++i) {
    const size_t off = i * (part + 16) + (aligned ? 0 : 4);
    parts.push_back({static_cast<char*>(f.at(1)) + off, static_cast<char*>(f.at(0)) + off,
                     aligned ? part : part - 4});
  }
  for (auto _ : state) {
    Fixture::Require(f.dev->BatchedCopy(parts, f.stream));
    f.Finish();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(2 * kParts * part));
}

// A device-to-device copy of state.range(0) bytes: the floor.
void BM_CopyWithinDevice(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  Fixture f(2, bytes);
  for (auto _ : state) {
    Fixture::Require(f.dev->Copy(f.at(1), f.at(0), bytes, CopyKind::kDeviceToDevice, f.stream));
    f.Finish();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(2 * bytes));
}

constexpr int64_t k1MiB = int64_t{1} << 20;
constexpr int64_t k64MiB = int64_t{64} << 20;

BENCHMARK(BM_ReduceSumF32)
    ->ArgsProduct({{k1MiB, k64MiB}, {2, 8}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ReduceSumBF16)->Arg(k1MiB)->Arg(k64MiB)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BatchedCopy)
    ->ArgsProduct({{k1MiB, k64MiB}, {1, 0}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CopyWithinDevice)
    ->Arg(k1MiB)
    ->Arg(k64MiB)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace hora::gpu

int main(int argc, char** argv) {
  return hora::bench::RunBenchmarks(
      argc, argv,
      "usage: hora-device-kernel-bench [--benchmark_filter=REGEX] [Google Benchmark flags]\n"
      "Times Hora's kernels on a device, queued on a stream and waited for (HORA_BENCH_DEVICE=\n"
      "host or cuda; host by default).\n\n");
}
