// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Fusion plans (fusion.h): which tensors a cycle runs together, and the
// one-pass question a cached cycle asks of them.
#include "engine/fusion.h"

#include <gtest/gtest.h>

#include <vector>

namespace hora {
namespace {

TEST(EngineFusion, PlansBatchesByKindSizeAndGroup) {
  auto meta = [](const char* name, DataType t, int64_t n, const char* group = "") {
    RequestMeta m;
    m.name = name;
    m.dtype = t;
    m.shape = {n};
    m.group = group;
    m.group_size = *group ? 2 : 0;
    return m;
  };
  RequestMeta b = meta("b", DataType::kFloat32, 100);
  RequestMeta big = meta("big", DataType::kFloat32, 1000);
  RequestMeta ga = meta("g.0", DataType::kFloat32, 10, "g");
  RequestMeta gb = meta("g.1", DataType::kFloat32, 10, "g");
  RequestMeta i = meta("i", DataType::kInt32, 5);
  RequestMeta bc = meta("bc", DataType::kFloat32, 4);
  bc.op = OpType::kBroadcast;
  RequestMeta avg = meta("avg", DataType::kFloat32, 5);
  avg.reduction.op = ReduceOp::kAverage;
  const std::vector<const RequestMeta*> all = {&b, &ga, &i, &big, &gb, &bc, &avg};
  using Plan = std::vector<std::vector<size_t>>;
  // 4 KiB threshold: big (4000 B) does not fit with b (400 B).
  EXPECT_EQ(PlanBatches(all, 4096, true), (Plan{{0, 1, 4}, {2}, {3}, {5}, {6}}));
  EXPECT_EQ(PlanBatches(all, 4096, false), (Plan{{0}, {1, 4}, {2}, {3}, {5}, {6}}));
  EXPECT_EQ(PlanBatches(all, 1 << 20, true), (Plan{{0, 1, 3, 4}, {2}, {5}, {6}}));
  EXPECT_EQ(PlanBatches(all, 0, true), (Plan{{0}, {1}, {2}, {3}, {4}, {5}, {6}}));
}

// FusesIntoOneBatch (a cached cycle's question) answers as PlanBatches
// would, on every subset in order of those tensors and a few more, at
// every threshold around their sizes, with and without group fusion.
TEST(EngineFusion, OneBatchExactlyWhenThePlanIsOneBatch) {
  auto meta = [](DataType t, int64_t n, const char* group = "") {
    RequestMeta m;
    m.dtype = t;
    m.shape = {n};
    m.group = group;
    m.group_size = *group ? 2 : 0;
    return m;
  };
  std::vector<RequestMeta> pool = {
      meta(DataType::kFloat32, 100),     meta(DataType::kFloat32, 1000),
      meta(DataType::kFloat32, 10, "g"), meta(DataType::kFloat32, 10, "g"),
      meta(DataType::kInt32, 5),         meta(DataType::kFloat32, 4),
      meta(DataType::kFloat32, 5),       meta(DataType::kFloat32, 0)};
  pool[5].op = OpType::kBroadcast;
  pool[6].reduction.postscale_factor = 0.5;
  int one = 0, several = 0;
  for (uint32_t subset = 1; subset < (1u << pool.size()); ++subset) {
    std::vector<const RequestMeta*> tensors;
    uint64_t want_bytes = 0;
    for (size_t i = 0; i < pool.size(); ++i) {
      if (subset & (1u << i)) {
        tensors.push_back(&pool[i]);
        want_bytes += pool[i].num_bytes();
      }
    }
    for (uint64_t threshold : {0, 16, 399, 400, 440, 4000, 4439, 4440, 1 << 20}) {
      for (bool group_fusion : {false, true}) {
        const bool planned_one = PlanBatches(tensors, threshold, group_fusion).size() == 1;
        uint64_t bytes = 7;
        const bool got = FusesIntoOneBatch(tensors, threshold, group_fusion, &bytes);
        ASSERT_EQ(got, planned_one) << "subset " << subset << ", threshold " << threshold
                                    << ", group fusion " << group_fusion;
        if (got) {
          EXPECT_EQ(bytes, want_bytes);
        }
        (got ? one : several)++;
      }
    }
  }
  EXPECT_GT(one, 100);  // (both answers were asked for many times)
  EXPECT_GT(several, 100);
}

}  // namespace
}  // namespace hora
