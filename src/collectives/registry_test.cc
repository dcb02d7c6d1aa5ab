// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "collectives/registry.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace hora {
namespace {

const AllreduceAlgorithm& Allreduce(std::string_view name) {
  const AllreduceAlgorithm* a = FindAlgorithm<AllreduceAlgorithm>(name);
  EXPECT_NE(a, nullptr) << name;
  return a != nullptr ? *a : kAllAllreduceAlgorithms[0];
}

template <typename Algorithm>
void ExpectCompleteRowsWithDistinctNames() {
  std::set<std::string> names;
  for (const Algorithm& a : Algorithms<Algorithm>()) {
    EXPECT_TRUE(names.insert(a.name).second) << a.name;
    if (std::string(a.alias) != a.name) {
      EXPECT_TRUE(names.insert(a.alias).second) << a.alias;
    }
    EXPECT_NE(std::string(a.description), "") << a.name;
    EXPECT_NE(a.run, nullptr) << a.name;
    EXPECT_NE(a.cost, nullptr) << a.name;
    EXPECT_EQ(FindAlgorithm<Algorithm>(a.name), &a);
    EXPECT_EQ(FindAlgorithm<Algorithm>(a.alias), &a);
  }
}

TEST(Registry, EveryRowIsCompleteAndNamedOnce) {
  ExpectCompleteRowsWithDistinctNames<AllreduceAlgorithm>();
  ExpectCompleteRowsWithDistinctNames<BroadcastAlgorithm>();
  ExpectCompleteRowsWithDistinctNames<ReducescatterAlgorithm>();
  EXPECT_EQ(FindAlgorithm<AllreduceAlgorithm>("fastest"), nullptr);
  EXPECT_EQ(FindAlgorithm<BroadcastAlgorithm>("ring"), nullptr);
}

TEST(Registry, OnlySharedMemoryNeedsAWindowAndReadsPartsInPlace) {
  for (const AllreduceAlgorithm& a : kAllAllreduceAlgorithms) {
    const bool shm = std::string(a.name) == "shared_memory";
    EXPECT_EQ(a.needs == Needs::kSharedWindow, shm) << a.name;
    EXPECT_EQ(a.run_parts != nullptr, shm) << a.name;
  }
  EXPECT_TRUE(RunsOn(Needs::kAnyComm, false));
  EXPECT_FALSE(RunsOn(Needs::kSharedWindow, false));
  EXPECT_TRUE(RunsOn(Needs::kSharedWindow, true));
}

TEST(Registry, CostFormulas) {
  const CostModel m{1e-6, 1e-9, 1e-10};
  // Ring on 4 ranks, 1000 bytes: 6 alpha + 2*(3/4)*1000 beta + (3/4)*1000 gamma.
  EXPECT_NEAR(m.Predict(Allreduce("ring"), 4, 1000), 6e-6 + 1.5e-6 + 0.075e-6, 1e-12);
  // Recursive doubling on 4 ranks: 2 rounds of (alpha + B beta + B gamma).
  EXPECT_NEAR(m.Predict(Allreduce("rd"), 4, 1000), 2 * (1e-6 + 1e-6 + 1e-7), 1e-12);
  // One rank costs nothing.
  EXPECT_EQ(m.Predict(Allreduce("ring"), 1, 1000), 0.0);
  // A non-power of two pays for the fold: 2 (alpha + B beta) + B gamma.
  EXPECT_NEAR(m.Predict(Allreduce("hd"), 5, 1000) - m.Predict(Allreduce("hd"), 4, 1000),
              2 * (1e-6 + 1e-6) + 1e-7, 1e-12);
  // Shared memory: 2 alpha + 2 B beta + (n-1)/n B gamma.
  EXPECT_NEAR(m.Predict(Allreduce("shm"), 4, 1000), 2e-6 + 2e-6 + 0.075e-6, 1e-12);
  // Broadcast on 8 ranks: the tree's 3 rounds; scatter-allgather's
  // 2 (n-1) alpha + 2 (n-1)/n B beta.
  const BroadcastAlgorithm& tree = *FindAlgorithm<BroadcastAlgorithm>("binomial");
  const BroadcastAlgorithm& sag = *FindAlgorithm<BroadcastAlgorithm>("sag");
  EXPECT_NEAR(m.Predict(tree, 8, 1000), 3 * (1e-6 + 1e-6), 1e-12);
  EXPECT_NEAR(m.Predict(sag, 8, 1000), 14e-6 + 1.75e-6, 1e-12);
}

// A ring's reduce-scatter step reduces each segment as it arrives while the
// next is in flight: of the block's transfer T and reduction R, all but one
// segment's share of the smaller overlaps, T + R - min(T, R) (1 - s / b).
TEST(Registry, RingOverlapsItsSegments) {
  CostModel m{1e-6, 1e-9, 1e-10};
  m.segment_bytes = 1000;
  const double a = 1e-6, b = 1e-9, g = 1e-10;
  // 4 ranks, 16000 B: blocks of 4000 B, 4 segments; R = 0.4 us < T = 5 us.
  const double T = a + 4000 * b, R = 4000 * g;
  const double step = T + R - R * (1 - 1000.0 / 4000);
  EXPECT_NEAR(m.Predict(Allreduce("ring"), 4, 16000), 3 * step + 3 * T, 1e-15);
  // A reduction slower than the transfer hides the transfer instead.
  CostModel slow = m;
  slow.gamma_s_per_byte = 1e-8;  // R = 40 us > T = 5 us
  const double slow_step = T + 4000 * 1e-8 - T * (1 - 1000.0 / 4000);
  EXPECT_NEAR(slow.Predict(Allreduce("ring"), 4, 16000), 3 * slow_step + 3 * T, 1e-15);
  // Blocks of one segment overlap nothing: the formula of CostFormulas.
  EXPECT_NEAR(m.Predict(Allreduce("ring"), 4, 4000), 6 * (a + 1000 * b) + 3000 * g, 1e-15);
  // Halving-doubling reduces after each whole half came: no overlap.
  EXPECT_NEAR(m.Predict(Allreduce("hd"), 4, 16000), 4 * a + 1.5 * 16000 * b + 0.75 * 16000 * g,
              1e-15);
  // From config: HORA_RING_SEGMENT_BYTES.
  auto c = ConfigFromEnv({{"HORA_RING_SEGMENT_BYTES", "4K"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(CostModel::FromConfig(*c).segment_bytes, 4096.0);
}

// The same formulas with ranks on hosts: steps that cross between hosts pay
// the network's alpha and beta, and where a host's ranks cross at once
// they share its link.
TEST(Registry, CostFormulasOnHosts) {
  const CostModel m{1e-6, 1e-9, 1e-10, 1e-5, 1e-8};
  // On one host (no placement, or all n ranks on it) the closed forms of
  // one link: with p the largest power of two <= n and the fold
  // 2 (a + B b) + B g where p < n,
  //   ring  2 (n-1) a + 2 (n-1)/n B b + (n-1)/n B g
  //   rd    fold + log2(p) (a + B b + B g)
  //   hd    fold + 2 log2(p) a + 2 (p-1)/p B b + (p-1)/p B g
  const double a = 1e-6, b = 1e-9, g = 1e-10, B = 1000;
  for (int n : {4, 5}) {
    const double fold = n == 4 ? 0 : 2 * (a + B * b) + B * g;
    const double ring = 2 * (n - 1) * a + 2.0 * (n - 1) / n * B * b + (n - 1.0) / n * B * g;
    const double rd = fold + 2 * (a + B * b + B * g);
    const double hd = fold + 4 * a + 2 * 0.75 * B * b + 0.75 * B * g;
    for (const CostModel& one : {m, m.OnHosts(n)}) {
      EXPECT_NEAR(one.Predict(Allreduce("ring"), n, 1000), ring, 1e-15) << n;
      EXPECT_NEAR(one.Predict(Allreduce("rd"), n, 1000), rd, 1e-15) << n;
      EXPECT_NEAR(one.Predict(Allreduce("hd"), n, 1000), hd, 1e-15) << n;
    }
  }
  // 2 hosts x 2 ranks, 1000 B. Ring: 6 steps, each crossing once with a
  // quarter: 6 (net alpha + 250 net beta), + (3/4) B gamma.
  const CostModel two = m.OnHosts(2);
  EXPECT_NEAR(two.Predict(Allreduce("ring"), 4, 1000), 6 * (1e-5 + 2.5e-6) + 0.075e-6, 1e-12);
  // Recursive doubling: the exchange 1 away within hosts (alpha + B beta),
  // the one 2 away across, both ranks of a host over its link (net alpha
  // + 2 B net beta); 2 B gamma.
  EXPECT_NEAR(two.Predict(Allreduce("rd"), 4, 1000), (1e-6 + 1e-6) + (1e-5 + 2e-5) + 2e-7, 1e-12);
  // Halving-doubling: half the message 2 away, twice (reduce-scatter and
  // allgather), both ranks crossing; a quarter 1 away, twice; (3/4) B gamma.
  EXPECT_NEAR(two.Predict(Allreduce("hd"), 4, 1000),
              2 * (1e-5 + 500 * 1e-8 * 2) + 2 * (1e-6 + 250e-9) + 0.075e-6, 1e-12);
  // So across hosts the ring's 1.5 B over a link beats halving-doubling's
  // 2 B for large messages; on one host too, where its blocks span several
  // segments (the overlap, RingOverlapsItsSegments), while halving-doubling's
  // fewer rounds win where they do not.
  EXPECT_LT(two.Predict(Allreduce("ring"), 4, 1 << 26), two.Predict(Allreduce("hd"), 4, 1 << 26));
  EXPECT_LT(m.Predict(Allreduce("ring"), 4, 1 << 26), m.Predict(Allreduce("hd"), 4, 1 << 26));
  EXPECT_GT(m.Predict(Allreduce("ring"), 4, 1 << 20), m.Predict(Allreduce("hd"), 4, 1 << 20));
  // One rank a host, two such Comms sharing each link: a ring of 2 crosses
  // twice with half the message, at half the link's rate.
  EXPECT_NEAR(m.OnHosts(1, 2).Predict(Allreduce("ring"), 2, 1000),
              2 * (1e-5 + 500 * 1e-8 * 2) + 0.05e-6, 1e-12);
  // 2 hosts x 3 (ranks 0-2, 3-5): the fold pairs 0-1 and 2-3, and 2-3
  // crosses; the virtual ranks are real 1, 3, 4, 5, so the round 1 apart
  // pairs 1-3 (crossing) and 4-5, the round 2 apart 1-4 (crossing) and 3-5.
  // Every crossing is one rank a host: net alpha + B net beta each.
  EXPECT_NEAR(m.OnHosts(3).Predict(Allreduce("rd"), 6, 1000),
              2 * (1e-5 + 1e-5) + 1e-7 + 2 * (1e-5 + 1e-5 + 1e-7), 1e-12);
  EXPECT_EQ(cost::CrossingFlows(6, 3, 0), 1);
  EXPECT_EQ(cost::CrossingFlows(6, 3, 1), 1);
  EXPECT_EQ(cost::CrossingFlows(6, 3, 2), 1);
  // 4 hosts x 2: 1 apart within hosts, 2 and 4 apart both ranks cross.
  EXPECT_EQ(cost::CrossingFlows(8, 2, 1), 0);
  EXPECT_EQ(cost::CrossingFlows(8, 2, 2), 2);
  EXPECT_EQ(cost::CrossingFlows(8, 2, 4), 2);
  // 2 hosts x 4: 1 and 2 apart within, 4 apart all four cross.
  EXPECT_EQ(cost::CrossingFlows(8, 4, 2), 0);
  EXPECT_EQ(cost::CrossingFlows(8, 4, 4), 4);
}

}  // namespace
}  // namespace hora
