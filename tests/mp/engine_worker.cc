// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// One rank of the multi-process engine test (run under horarun or mpirun):
// each step submits 60 named tensors of mixed dtypes in a rank-specific
// shuffled order and checks every result against the reference; after the
// first step the response cache must carry every tensor (no slow-path cycle,
// no coordinator byte); a tensor whose shape differs on the last rank fails
// on every rank with a message naming each rank's shape while the others
// succeed. Prints "rank R: engine checks passed" and exits 0, or names the
// failure and exits 1.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hora/hora.h"
#include "support/reference.h"

namespace {

using namespace hora;

int Fail(const std::string& what) {
  std::fprintf(stderr, "FAIL %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help")) {
    std::printf(
        "usage: hora-mp-engine-worker [--kill-after-step K]\n"
        "One rank of the engine's multi-process test; run it under horarun (or mpirun).\n"
        "--kill-after-step K: rank 0 kills itself with SIGKILL after step K.\n");
    return 0;
  }
  // --kill-after-step K: rank 0 SIGKILLs itself after step K (the timeline
  // test then parses what it wrote).
  int kill_after = -1;
  if (argc == 3 && std::string(argv[1]) == "--kill-after-step") kill_after = std::atoi(argv[2]);
  auto created = Session::Create({});
  if (!created.ok()) return Fail("Session::Create: " + created.status().ToString());
  Session& s = **created;
  const int n = s.size(), me = s.rank();
  const DataType types[] = {DataType::kFloat32, DataType::kInt64, DataType::kFloat16,
                            DataType::kUInt8};
  const Reduction red{ReduceOp::kSum};
  std::mt19937 rng(static_cast<uint32_t>(me + 11));
  const int kTensors = 60, kSteps = 4;
  Session::EngineCounters after_first{};
  for (int step = 0; step < kSteps; ++step) {
    std::vector<int> order(kTensors);
    for (int i = 0; i < kTensors; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::vector<uint8_t>> bufs(kTensors);
    std::vector<Handle> hs(kTensors);
    for (int i : order) {
      const DataType t = types[i % 4];
      const size_t count = 1 + static_cast<size_t>(i) * 37;
      bufs[i].resize(count * DataTypeSize(t));
      hora::testing::FillInput(t, red.op, bufs[i].data(), count, 100 * step + i, me);
      TensorView v = TensorView::Flat(bufs[i].data(), t, count);
      hs[i] = s.AllreduceAsync("t" + std::to_string(i), v, v, red);
    }
    for (int i = 0; i < kTensors; ++i) {
      Status st = hs[i].Wait(std::chrono::seconds(60));
      if (!st.ok()) return Fail("t" + std::to_string(i) + ": " + st.ToString());
      const DataType t = types[i % 4];
      const size_t count = 1 + static_cast<size_t>(i) * 37;
      std::vector<std::vector<uint8_t>> in(static_cast<size_t>(n));
      std::vector<const void*> ptrs;
      for (int r = 0; r < n; ++r) {
        in[r].resize(bufs[i].size());
        hora::testing::FillInput(t, red.op, in[r].data(), count, 100 * step + i, r);
        ptrs.push_back(in[r].data());
      }
      const std::string diff = hora::testing::Compare(
          hora::testing::ReferenceAllreduce(t, red, ptrs, count), bufs[i].data(), 0, count);
      if (!diff.empty())
        return Fail("step " + std::to_string(step) + " t" + std::to_string(i) + ": " + diff);
    }
    // Every rank is past this step before the counters are read (a rank that
    // went on could already be negotiating the next tensors).
    Status b = s.Barrier();
    if (!b.ok()) return Fail("barrier: " + b.ToString());
    if (step == 0) after_first = s.engine_counters();
    if (step == kill_after && me == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let the timeline flush
      std::fprintf(stderr, "rank 0: killing myself with SIGKILL after step %d\n", step);
      std::fflush(stderr);
      raise(SIGKILL);
    }
  }
  const auto end = s.engine_counters();
  Status b = s.Barrier();
  if (!b.ok()) return Fail("barrier: " + b.ToString());
  if (end.slow_cycles != after_first.slow_cycles ||
      end.coordinator_bytes != after_first.coordinator_bytes) {
    return Fail("steady state used the coordinator: slow cycles " +
                std::to_string(after_first.slow_cycles) + " -> " + std::to_string(end.slow_cycles));
  }
  if (end.cache_hits - after_first.cache_hits != static_cast<uint64_t>(kTensors * (kSteps - 1))) {
    return Fail("cache hits " + std::to_string(end.cache_hits - after_first.cache_hits));
  }
  // A mismatch fails one tensor everywhere; its neighbour succeeds.
  std::vector<float> x(me == n - 1 ? 6 : 5, 1.0f), y(3, 1.0f);
  TensorView vx = TensorView::Flat(x.data(), DataType::kFloat32, x.size());
  TensorView vy = TensorView::Flat(y.data(), DataType::kFloat32, y.size());
  Handle hx = s.AllreduceAsync("odd", vx, vx);
  Handle hy = s.AllreduceAsync("even", vy, vy);
  Status sy = hy.Wait(std::chrono::seconds(60));
  if (!sy.ok() || y[0] != static_cast<float>(n)) return Fail("even: " + sy.ToString());
  Status sx = hx.Wait(std::chrono::seconds(60));
  const std::string want = "rank " + std::to_string(n - 1) + " float32[6] sum";
  if (sx.code() != StatusCode::kMismatch || sx.message().find(want) == std::string::npos)
    return Fail("odd: " + sx.ToString());
  std::printf("rank %d: engine checks passed (%llu cache hits, %llu slow cycles)\n", me,
              static_cast<unsigned long long>(end.cache_hits),
              static_cast<unsigned long long>(end.slow_cycles));
  return 0;
}
