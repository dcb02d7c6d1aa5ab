// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// What the order of NCCL calls across process sets (src/device/nccl_order.h)
// adds to a rank's GPU work, on the host alone (no device, no NCCL):
//  - per tensor: its number at submission and its leaving the order;
//  - per batch: a turn awaited and ended, with `sets` process sets of the
//    rank, the others each holding one tensor submitted after the batch's
//    (so none holds it back: the look at each set is all it costs). Each
//    iteration also numbers and finishes those tensors: subtract the first
//    figure per tensor ("tensors" counts them) for the turn alone.
//
//   build/bin/hora-nccl-order-bench
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "benchmark_main.h"
#include "device/nccl_order.h"

namespace hora {
namespace {

NcclOrder::Wait Forever() {
  return {Duration::zero(), Duration::zero(), nullptr, [] { return std::string("bench"); }};
}

void BM_TensorNumberedAndFinished(benchmark::State& state) {
  NcclOrder order;
  const std::string name = "grad";
  for (auto _ : state) {
    const uint64_t n = order.Submitted(0, &name);
    order.Finished(0, n);
  }
}

void BM_TurnAwaitedAndEnded(benchmark::State& state) {
  const int sets = static_cast<int>(state.range(0));
  NcclOrder order;
  const std::string name = "grad";
  std::vector<uint64_t> batch(1);
  std::vector<uint64_t> later(static_cast<size_t>(sets));
  const NcclOrder::Wait wait = Forever();
  for (auto _ : state) {
    batch[0] = order.Submitted(0, &name);
    for (int s = 1; s < sets; ++s) later[s] = order.Submitted(s, &name);  // (after: no hold)
    {
      Result<NcclOrder::Turn> turn = order.Await(0, batch, wait);
      benchmark::DoNotOptimize(turn.ok());
    }
    for (int s = 1; s < sets; ++s) order.Finished(s, later[s]);
  }
  state.counters["tensors"] = static_cast<double>(sets);
}

// Two sets taking turns, each leaving a mark for the other's next turn (as
// DeviceStaging does; its event's record on the GPU is not in this): two
// tensors and two turns an iteration.
void BM_TwoSetsTakeTurnsWithMarks(benchmark::State& state) {
  NcclOrder order;
  const std::string name = "grad";
  std::vector<uint64_t> batch(1);
  const NcclOrder::Wait wait = Forever();
  const auto mark = std::make_shared<NcclOrder::Mark>();
  for (auto _ : state) {
    for (int set = 0; set < 2; ++set) {
      batch[0] = order.Submitted(set, &name);
      Result<NcclOrder::Turn> turn = order.Await(set, batch, wait);
      benchmark::DoNotOptimize(turn.ok() && turn->previous() != nullptr);
      if (turn.ok()) turn->Leave(mark);
    }
  }
}

BENCHMARK(BM_TensorNumberedAndFinished);
BENCHMARK(BM_TurnAwaitedAndEnded)->Arg(1)->Arg(2)->Arg(8);
BENCHMARK(BM_TwoSetsTakeTurnsWithMarks);

}  // namespace
}  // namespace hora

int main(int argc, char** argv) {
  return hora::bench::RunBenchmarks(
      argc, argv,
      "usage: hora-nccl-order-bench [--benchmark_filter=REGEX] [Google Benchmark flags]\n"
      "Times what the order of NCCL calls across a rank's process sets costs: a tensor's\n"
      "number and its leaving the order, a turn awaited and ended with 1, 2 or 8 sets, and two\n"
      "sets' turns leaving marks for each other.\n\n");
}
