// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Join with uneven data: rank r has 2(r+1) steps. While some ranks have
// joined, the others' allreduces go on with the joined ranks contributing
// identity values, averages divide by every rank (as Horovod's: a joined
// rank counts as a zero), other
// collectives fail naming the joined ranks, and the join ends (returning the
// last rank to join) only when every rank has joined. Two epochs, so the
// join state resets.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "support/thread_ranks.h"

namespace hora {
namespace {

using testing::ExpectAllOk;
using testing::TestSettings;
using testing::ThreadRanks;

constexpr auto kWait = std::chrono::seconds(60);

int StepsOf(int rank) { return 2 * (rank + 1); }
float ValueOf(int rank, int step, int i) { return static_cast<float>(rank * 100 + step * 3 + i); }

class EngineJoin : public ::testing::TestWithParam<int> {};

TEST_P(EngineJoin, UnevenDataAcrossRanks) {
  const int n = GetParam();
  ThreadRanks ranks(n, TestSettings());
  ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
    for (int epoch = 0; epoch < 2; ++epoch) {
      for (int step = 0; step < StepsOf(rank); ++step) {
        std::vector<float> sum(5), avg(5), mn(5);
        for (int i = 0; i < 5; ++i) sum[i] = avg[i] = mn[i] = ValueOf(rank, step, i);
        auto view = [](std::vector<float>& v) {
          return TensorView::Flat(v.data(), DataType::kFloat32, v.size());
        };
        Handle hs = s.AllreduceAsync("sum", view(sum), view(sum), {ReduceOp::kSum});
        Handle ha = s.AllreduceAsync("avg", view(avg), view(avg), {ReduceOp::kAverage});
        Handle hm = s.AllreduceAsync("min", view(mn), view(mn), {ReduceOp::kMin});
        HORA_RETURN_IF_ERROR(hs.Wait(kWait));
        HORA_RETURN_IF_ERROR(ha.Wait(kWait));
        HORA_RETURN_IF_ERROR(hm.Wait(kWait));
        for (int i = 0; i < 5; ++i) {
          float want_sum = 0, want_min = 1e30f;
          int active = 0;
          for (int p = 0; p < n; ++p) {
            if (step >= StepsOf(p)) continue;  // p has joined
            want_sum += ValueOf(p, step, i);
            want_min = std::min(want_min, ValueOf(p, step, i));
            ++active;
          }
          if (sum[i] != want_sum ||
              std::abs(avg[i] - want_sum / static_cast<float>(n)) > 1e-5f * std::abs(want_sum) ||
              mn[i] != want_min) {
            return InternalError(
                "epoch " + std::to_string(epoch) + " step " + std::to_string(step) + " element " +
                std::to_string(i) + ": sum " + std::to_string(sum[i]) + " avg " +
                std::to_string(avg[i]) + " min " + std::to_string(mn[i]) + ", expected " +
                std::to_string(want_sum) + " / " + std::to_string(n) + " (" +
                std::to_string(active) + " active)" + ", min " + std::to_string(want_min));
          }
        }
      }
      if (rank == n - 1 && n > 1) {
        // Every other rank has joined by now (they had less data): an
        // allgather cannot run and says who is missing.
        std::vector<float> x(2, 1.0f);
        Status st =
            s.AllgatherAsync("ag", TensorView::Flat(x.data(), DataType::kFloat32, 2)).Wait(kWait);
        std::string joined = n == 2 ? "rank 0 has joined" : "ranks 0";
        for (int p = 1; p + 1 < n; ++p) joined += ", " + std::to_string(p);
        if (n > 2) joined += " have joined";
        if (st.code() != StatusCode::kMismatch || st.message().find(joined) == std::string::npos) {
          return InternalError("allgather while others joined: " + st.ToString());
        }
      }
      Handle j = s.JoinAsync();
      HORA_RETURN_IF_ERROR(j.Wait(kWait));
      const Tensor* last = j.output();
      if (last == nullptr || *static_cast<const int32_t*>(last->data()) != n - 1) {
        return InternalError("join should return the last rank to join, " + std::to_string(n - 1));
      }
    }
    return Status::Ok();
  }));
}

INSTANTIATE_TEST_SUITE_P(Worlds, EngineJoin, ::testing::Values(1, 2, 3, 4));

}  // namespace
}  // namespace hora
