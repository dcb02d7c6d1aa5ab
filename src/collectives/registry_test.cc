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

}  // namespace
}  // namespace hora
