// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/coordinator.h"

#include <gtest/gtest.h>

#include <algorithm>
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

RequestMeta Join() {
  RequestMeta m;
  m.op = OpType::kJoin;
  m.name = "join";
  return m;
}

RequestMeta Allgather(const std::string& name) {
  RequestMeta m = Allreduce(name, 4);
  m.op = OpType::kAllgather;
  return m;
}

// While a rank has joined, a collective other than allreduce fails at once
// on each rank that submits it, naming the joined rank, even when the other
// ranks' (unnamed) names never line up with it; an allreduce still waits for
// every rank that has not joined, and the last join ends it.
TEST(Coordinator, OnlyAllreduceRunsWhileRanksAreJoined) {
  const int n = 3;
  Coordinator c(n, Duration::zero(), Duration::zero());
  const TimePoint now = Clock::now();
  std::vector<Response> out;
  c.Add(1, {Join()}, now);
  c.TakeResponses(now, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].params.op, OpType::kJoin);
  EXPECT_EQ(out[0].rows, (std::vector<int64_t>{1, 0}));

  c.Add(0, {Allgather("allgather.noname.0")}, now);
  c.Add(2, {Allgather("allgather.noname.1"), Allreduce("w", 8)}, now);
  c.TakeResponses(now, &out);
  ASSERT_EQ(out.size(), 2u);
  for (const Response& r : out) {
    EXPECT_EQ(r.params.op, OpType::kAllgather);
    EXPECT_NE(r.error.find("rank 1 has joined"), std::string::npos) << r.error;
    EXPECT_EQ(r.error.find("rank 0 has"), std::string::npos) << r.error;
  }
  EXPECT_EQ(c.waiting(), 1u);  // the allreduce waits for rank 0
  c.Add(0, {Allreduce("w", 8)}, now);
  c.TakeResponses(now, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].params.name, "w");
  EXPECT_TRUE(out[0].error.empty()) << out[0].error;

  c.Add(0, {Join()}, now);
  c.Add(2, {Join()}, now);
  c.TakeResponses(now, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].rows, (std::vector<int64_t>{2, 1}));  // the last: the join is over
  c.Add(0, {Allgather("g")}, now);
  c.TakeResponses(now, &out);
  EXPECT_TRUE(out.empty());  // waits for ranks 1 and 2 again
  EXPECT_EQ(c.waiting(), 1u);
}

// Ranks whose groups differ in size: the members every rank submitted fail
// (their group sizes differ), and so do those some ranks never submit,
// at once, in the same round; nothing is left waiting.
TEST(Coordinator, GroupsOfDifferentSizesFailWhole) {
  Coordinator c(2, Duration::zero(), Duration::zero());
  const TimePoint now = Clock::now();
  auto member = [](int i, uint32_t of) {
    RequestMeta m = Allreduce("g." + std::to_string(i), 4);
    m.group = "g";
    m.group_size = of;
    return m;
  };
  c.Add(0, {member(0, 3), member(1, 3), member(2, 3)}, now);
  c.Add(1, {member(0, 1)}, now);
  std::vector<Response> out;
  c.TakeResponses(now, &out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].params.name, "g.0");
  EXPECT_NE(out[0].error.find("in group 'g' of 3"), std::string::npos) << out[0].error;
  EXPECT_NE(out[0].error.find("in group 'g' of 1"), std::string::npos) << out[0].error;
  std::vector<std::string> left = {out[1].params.name, out[2].params.name};
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"g.1", "g.2"}));
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_NE(out[i].error.find("a member of group 'g' that rank 1 did not submit, fails with its "
                                "group: "),
              std::string::npos)
        << out[i].error;
  }
  EXPECT_EQ(c.waiting(), 0u);
  // Members some ranks never submit that time out in the round their group
  // fails (HORA_TIMEOUT_S): failed once, with the group (the timeout's
  // look for them found them gone, and crashed).
  Coordinator timed(2, Duration::zero(), Duration::zero(), std::chrono::seconds(1));
  timed.Add(0, {member(0, 3), member(1, 3), member(2, 3)}, now);
  timed.Add(1, {member(0, 1)}, now + std::chrono::seconds(2));
  timed.TakeResponses(now + std::chrono::seconds(2), &out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(timed.waiting(), 0u);
  // The next group of that name runs.
  c.Add(0, {member(0, 1)}, now);
  c.Add(1, {member(0, 1)}, now);
  c.TakeResponses(now, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].error.empty()) << out[0].error;
}

// Ranks in different collectives: each stall report says what the missing
// rank waits in instead (its oldest call), and says nothing of a rank that
// waits in none.
TEST(Coordinator, AStallReportSaysWhatTheMissingRankWaitsIn) {
  Coordinator c(3, std::chrono::seconds(1), Duration::zero());
  const TimePoint t0 = Clock::now();
  RequestMeta b = Allreduce("b", 4);
  b.op = OpType::kBroadcast;
  c.Add(0, {Allreduce("a", 4)}, t0);
  c.Add(1, {b, Allgather("c")}, t0);
  EXPECT_TRUE(c.StallReports(t0).empty());
  std::vector<std::string> reports = c.StallReports(t0 + std::chrono::seconds(2));
  ASSERT_EQ(reports.size(), 3u);
  std::sort(reports.begin(), reports.end());
  EXPECT_EQ(reports[0],
            "allgather 'c' has waited 2 s for ranks 0, 2 (submitted by rank 1); "
            "rank 0 waits in allreduce 'a'")
      << reports[0];
  EXPECT_EQ(reports[1],
            "allreduce 'a' has waited 2 s for ranks 1, 2 (submitted by rank 0); "
            "rank 1 waits in broadcast 'b'")
      << reports[1];
  EXPECT_EQ(reports[2],
            "broadcast 'b' has waited 2 s for ranks 0, 2 (submitted by rank 1); "
            "rank 0 waits in allreduce 'a'")
      << reports[2];
}

}  // namespace
}  // namespace hora
