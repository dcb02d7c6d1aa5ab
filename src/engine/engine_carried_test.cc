// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A cached cycle's allreduce sent with the bit vector (negotiator_carried.cc):
// in a steady state of grouped allreduces (a group is in one cycle on every
// rank) every step's batch goes with the bits, counted, and every result
// matches the reference; a group that makes two batches (two dtypes), or
// one too large for half the data window, never does, and its results are
// right too.
#include <gtest/gtest.h>

#include <chrono>

#include "support/reference.h"
#include "support/thread_ranks.h"

namespace hora {
namespace {

using testing::CompareFilledAllreduce;
using testing::ExpectAllOk;
using testing::FillInput;
using testing::TestSettings;
using testing::ThreadRanks;

constexpr auto kWait = std::chrono::seconds(60);

struct Member {
  DataType dtype;
  size_t count;
};

// `steps` steps of one grouped allreduce of `members`; each result checked.
std::vector<Status> GroupSteps(ThreadRanks& ranks, const std::vector<Member>& members, int steps,
                               const Reduction& red) {
  const int n = ranks.size();
  return ranks.Run([&](int rank, Session& s) -> Status {
    for (int step = 0; step < steps; ++step) {
      std::vector<std::vector<uint8_t>> bufs(members.size());
      std::vector<TensorView> views;
      for (size_t i = 0; i < members.size(); ++i) {
        const Member& m = members[i];
        bufs[i].resize(m.count * DataTypeSize(m.dtype));
        FillInput(m.dtype, red.op, bufs[i].data(), m.count, 100 * step + i, rank);
        views.push_back(TensorView::Flat(bufs[i].data(), m.dtype, m.count));
      }
      std::vector<Handle> handles = s.GroupedAllreduceAsync("g", views, views, red);
      for (size_t i = 0; i < members.size(); ++i) {
        HORA_RETURN_IF_ERROR(handles[i].Wait(kWait));
        const Member& m = members[i];
        const std::string diff =
            CompareFilledAllreduce(n, m.dtype, red, 100 * step + i, bufs[i].data(), m.count);
        if (!diff.empty()) {
          return InternalError("step " + std::to_string(step) + " member " + std::to_string(i) +
                               ": " + diff);
        }
      }
    }
    return Status::Ok();
  });
}

std::vector<uint64_t> Carried(ThreadRanks& ranks) {
  std::vector<uint64_t> c;
  for (int r = 0; r < ranks.size(); ++r)
    c.push_back(ranks.session(r).engine_counters().carried_batches);
  return c;
}

class EngineCarried : public ::testing::TestWithParam<int> {};

TEST_P(EngineCarried, EachCachedStepGoesWithTheBitsAndMatchesTheReference) {
  const int n = GetParam();
  ThreadRanks ranks(n, TestSettings());
  struct Kind {
    DataType dtype;
    Reduction red;
  };
  // Below and above 16 KiB (one step and two), every reduction kind.
  const Kind kinds[] = {{DataType::kFloat32, {ReduceOp::kSum}},
                        {DataType::kBFloat16, {ReduceOp::kAverage, 0.5, 2.0}},
                        {DataType::kFloat16, {ReduceOp::kSum, 1.0, 0.25}},
                        {DataType::kInt32, {ReduceOp::kMax}},
                        {DataType::kFloat64, {ReduceOp::kProduct}}};
  for (const Kind& k : kinds) {
    for (const std::vector<size_t>& counts :
         {std::vector<size_t>{1, 7, 0, 13}, std::vector<size_t>{1, 5001, 0, 7}}) {
      std::vector<Member> members;
      for (size_t c : counts) members.push_back({k.dtype, c});
      ExpectAllOk(GroupSteps(ranks, members, 1, k.red));  // negotiated, cached
      const auto before = Carried(ranks);
      ExpectAllOk(GroupSteps(ranks, members, 3, k.red));
      const auto after = Carried(ranks);
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(after[r] - before[r], n > 1 ? 3u : 0u)
            << DataTypeName(k.dtype) << ", " << counts[1] << " elements, rank " << r;
      }
    }
  }
}

TEST_P(EngineCarried, GroupsThatCannotGoWithTheBitsRunApartAndRight) {
  const int n = GetParam();
  ThreadRanks ranks(n, TestSettings());
  // Two batches (two dtypes); one batch larger than half the data window
  // (1.2 MB of float32, where 1 MiB goes).
  for (const std::vector<Member>& members :
       {std::vector<Member>{{DataType::kFloat32, 9}, {DataType::kInt32, 11}},
        std::vector<Member>{{DataType::kFloat32, 300000}, {DataType::kFloat32, 3}}}) {
    ExpectAllOk(GroupSteps(ranks, members, 4, {ReduceOp::kSum}));
    for (uint64_t c : Carried(ranks)) EXPECT_EQ(c, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, EngineCarried, ::testing::Values(1, 2, 3, 4));

}  // namespace
}  // namespace hora
