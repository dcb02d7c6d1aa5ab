// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Microbenchmarks of the reduction kernels against memcpy. Bytes/s count
// the bytes read plus written: memcpy moves 2x the buffer, Reduce3 (a + b ->
// dst) and in-place Reduce (dst += src) 3x. Buffers are written before the
// timed loop, so no first-touch page fault is measured.
//
//   build/bin/hora-kernel-bench --benchmark_filter='Memcpy|SumF32'
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Results and the sum/memcpy ratio: docs/dev/performance.md.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "benchmark_main.h"
#include "kernels/half.h"
#include "kernels/isa.h"
#include "kernels/reduce.h"

namespace hora::kernels {
namespace {

constexpr int64_t k1MiB = int64_t{1} << 20;
constexpr int64_t k64MiB = int64_t{64} << 20;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// `bytes` (a multiple of 64) at a 64-byte boundary, every element set to the
// `one` pattern of its type (so sums stay finite and normal).
class BenchBuffer {
 public:
  BenchBuffer(size_t bytes, const void* one, size_t element_size)
      : data_(static_cast<unsigned char*>(std::aligned_alloc(64, bytes))) {
    for (size_t i = 0; i < bytes; i += element_size)
      std::memcpy(data_.get() + i, one, element_size);
  }
  void* get() { return data_.get(); }

 private:
  std::unique_ptr<unsigned char[], FreeDeleter> data_;
};

// The pattern of 1 in `dtype`, as raw bytes.
uint64_t OnePattern(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16:
      return FloatToFloat16(1.0f);
    case DataType::kBFloat16:
      return FloatToBFloat16(1.0f);
    case DataType::kFloat32: {
      float f = 1.0f;
      uint32_t b;
      std::memcpy(&b, &f, 4);
      return b;
    }
    default:
      return 1;
  }
}

size_t ElementSize(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kInt16:
      return 2;
    case DataType::kFloat32:
    case DataType::kInt32:
      return 4;
    default:
      return 8;
  }
}

void BM_Memcpy(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  const uint64_t one = 1;
  BenchBuffer src(bytes, &one, 1), dst(bytes, &one, 1);
  for (auto _ : state) {
    std::memcpy(dst.get(), src.get(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * state.range(0));
}

// dst = a + b (Reduce3, three distinct buffers) with the best variant, or with
// `isa` when given.
void SumInto(benchmark::State& state, DataType dtype, int isa) {
  const auto bytes = static_cast<size_t>(state.range(0));
  const size_t es = ElementSize(dtype);
  const uint64_t one = OnePattern(dtype);
  BenchBuffer a(bytes, &one, es), b(bytes, &one, es), dst(bytes, &one, es);
  if (isa >= 0 && !internal::IsaSupported(static_cast<internal::Isa>(isa))) {
    state.SkipWithError("instruction set not supported by this CPU");
    return;
  }
  for (auto _ : state) {
    if (isa < 0) {
      Reduce3(dtype, ReduceOp::kSum, dst.get(), a.get(), b.get(), bytes / es);
    } else {
      internal::Reduce3With(static_cast<internal::Isa>(isa), dtype, ReduceOp::kSum, dst.get(),
                            a.get(), b.get(), bytes / es);
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 3 * state.range(0));
}

void BM_SumF32(benchmark::State& state) { SumInto(state, DataType::kFloat32, -1); }
void BM_SumF16(benchmark::State& state) { SumInto(state, DataType::kFloat16, -1); }
void BM_SumBF16(benchmark::State& state) { SumInto(state, DataType::kBFloat16, -1); }
void BM_SumI32(benchmark::State& state) { SumInto(state, DataType::kInt32, -1); }

// Reduce3 f32 sum per instruction-set variant (0 baseline, 1 x86-64-v3, 2 x86-64-v4).
void BM_SumF32Variant(benchmark::State& state) {
  state.SetLabel(internal::IsaName(static_cast<internal::Isa>(state.range(1))));
  SumInto(state, DataType::kFloat32, static_cast<int>(state.range(1)));
}

// dst += src (in-place Reduce): reads dst and src, writes dst.
void BM_ReduceInPlaceF32(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  const uint64_t one = OnePattern(DataType::kFloat32);
  BenchBuffer src(bytes, &one, 4), dst(bytes, &one, 4);
  for (auto _ : state) {
    Reduce(DataType::kFloat32, ReduceOp::kSum, dst.get(), src.get(), bytes / 4);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 3 * state.range(0));
}

BENCHMARK(BM_Memcpy)->Arg(k64MiB)->Arg(k1MiB)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SumF32)->Arg(k64MiB)->Arg(k1MiB)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ReduceInPlaceF32)->Arg(k64MiB)->Arg(k1MiB)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SumF16)->Arg(k64MiB)->Arg(k1MiB)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SumBF16)->Arg(k64MiB)->Arg(k1MiB)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SumI32)->Arg(k64MiB)->Arg(k1MiB)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SumF32Variant)
    ->ArgsProduct({{k64MiB, k1MiB}, {0, 1, 2}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace hora::kernels

int main(int argc, char** argv) {
  return hora::bench::RunBenchmarks(
      argc, argv,
      "usage: hora-kernel-bench [--benchmark_filter=REGEX] [Google Benchmark flags]\n"
      "Times Hora's reduction kernels (sum of f32, f16, bf16, i32) on 1 and 64 MiB.\n\n");
}
