// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/coordinator.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hora {
namespace {

RequestMeta Allreduce(const std::string& name, int64_t count) {
  RequestMeta m;
  m.name = name;
  m.shape = {count};
  return m;
}

// Decided entries leave their per-rank lists for the next new tensors
// (Coordinator::Erase): a tensor that reuses one is decided only once
// every rank has submitted it, with this cycle's parameters, and an error
// names this cycle's values.
TEST(Coordinator, ReusedEntriesStartEmpty) {
  const int n = 3;
  Coordinator c(n, Duration::zero(), Duration::zero());
  const TimePoint now = Clock::now();
  std::vector<Response> out;
  for (int round = 0; round < 3; ++round) {
    for (int r = 0; r < n; ++r) {
      c.Add(r,
            {Allreduce("a" + std::to_string(round), 8), Allreduce("b" + std::to_string(round), 4)},
            now);
    }
    c.TakeResponses(now, &out);
    ASSERT_EQ(out.size(), 2u) << round;
    EXPECT_EQ(out[0].params.name, "a" + std::to_string(round));
    EXPECT_TRUE(out[0].error.empty()) << out[0].error;
    EXPECT_EQ(c.waiting(), 0u);
  }
  // Ranks 0 and 1 only: not decided, whatever rank 2's slot held before.
  c.Add(0, {Allreduce("c", 5)}, now);
  c.Add(1, {Allreduce("c", 5)}, now);
  c.TakeResponses(now, &out);
  EXPECT_TRUE(out.empty()) << out[0].params.name;
  EXPECT_EQ(c.waiting(), 1u);
  c.Add(2, {Allreduce("c", 6)}, now);
  c.TakeResponses(now, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NE(out[0].error.find("rank 2 float32[6] sum"), std::string::npos) << out[0].error;
  EXPECT_NE(out[0].error.find("rank 0 float32[5] sum"), std::string::npos) << out[0].error;
  // The value-returning form agrees.
  c.Add(0, {Allreduce("d", 1)}, now);
  c.Add(1, {Allreduce("d", 1)}, now);
  c.Add(2, {Allreduce("d", 1)}, now);
  std::vector<Response> taken = c.TakeResponses(now);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].params.name, "d");
  EXPECT_TRUE(taken[0].error.empty());
}

}  // namespace
}  // namespace hora
