// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "collectives/selector.h"

#include <gtest/gtest.h>

namespace hora {
namespace {

Selector Make(std::map<std::string, std::string> env) {
  auto c = ConfigFromEnv(env);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  auto s = Selector::Create(*c);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

TEST(Selector, CostModelPicksFewRoundsForSmallAndBandwidthForLarge) {
  Selector s = Make({});
  // Small messages: latency dominates; recursive doubling has fewest rounds.
  EXPECT_EQ(s.ChooseAllreduce(8, 8), AllreduceAlgorithm::kRecursiveDoubling);
  EXPECT_EQ(s.ChooseAllreduce(16, 64), AllreduceAlgorithm::kRecursiveDoubling);
  // Large messages: bandwidth-optimal algorithms.
  const AllreduceAlgorithm big = s.ChooseAllreduce(8, 64u << 20);
  EXPECT_TRUE(big == AllreduceAlgorithm::kRing || big == AllreduceAlgorithm::kHalvingDoubling);
  EXPECT_NE(s.ChooseAllreduce(16, 64u << 20), AllreduceAlgorithm::kRecursiveDoubling);
  // Broadcast: tree for small, scatter-allgather for large.
  EXPECT_EQ(s.ChooseBroadcast(8, 8), BroadcastAlgorithm::kBinomial);
  EXPECT_EQ(s.ChooseBroadcast(8, 64u << 20), BroadcastAlgorithm::kScatterAllgather);
}

TEST(Selector, CostModelFormulas) {
  const CostModel m{1e-6, 1e-9, 1e-10};
  // Ring on 4 ranks, 1000 bytes: 6 alpha + 2*(3/4)*1000 beta + (3/4)*1000 gamma.
  EXPECT_NEAR(m.Allreduce(AllreduceAlgorithm::kRing, 4, 1000), 6e-6 + 1.5e-6 + 0.075e-6, 1e-12);
  // Recursive doubling on 4 ranks: 2 rounds of (alpha + B beta + B gamma).
  EXPECT_NEAR(m.Allreduce(AllreduceAlgorithm::kRecursiveDoubling, 4, 1000),
              2 * (1e-6 + 1e-6 + 1e-7), 1e-12);
  // One rank costs nothing.
  EXPECT_EQ(m.Allreduce(AllreduceAlgorithm::kRing, 1, 1000), 0.0);
  // A non-power of two pays for the fold.
  EXPECT_GT(m.Allreduce(AllreduceAlgorithm::kHalvingDoubling, 5, 1000),
            m.Allreduce(AllreduceAlgorithm::kHalvingDoubling, 4, 1000));
}

TEST(Selector, OverrideByNameAndByRange) {
  Selector all_ring = Make({{"HORA_ALLREDUCE_ALGO", "ring"}});
  EXPECT_EQ(all_ring.ChooseAllreduce(8, 8), AllreduceAlgorithm::kRing);
  EXPECT_EQ(all_ring.ChooseAllreduce(8, 1u << 30), AllreduceAlgorithm::kRing);

  Selector ranged = Make({{"HORA_ALLREDUCE_ALGO", "rd:0-64K,hd:64K-1M"}});
  EXPECT_EQ(ranged.ChooseAllreduce(8, 0), AllreduceAlgorithm::kRecursiveDoubling);
  EXPECT_EQ(ranged.ChooseAllreduce(8, 65535), AllreduceAlgorithm::kRecursiveDoubling);
  EXPECT_EQ(ranged.ChooseAllreduce(8, 65536), AllreduceAlgorithm::kHalvingDoubling);
  // Outside every range: the cost model decides (not recursive doubling at 64 MiB, 16 ranks).
  EXPECT_NE(ranged.ChooseAllreduce(16, 64u << 20), AllreduceAlgorithm::kRecursiveDoubling);

  Selector bcast = Make({{"HORA_BROADCAST_ALGO", "scatter_allgather"}});
  EXPECT_EQ(bcast.ChooseBroadcast(4, 1), BroadcastAlgorithm::kScatterAllgather);
}

TEST(Selector, SharedMemoryWhereAWindowExistsAndOnlyThere) {
  Selector s = Make({});
  for (size_t bytes : {size_t{0}, size_t{8}, size_t{1} << 20, size_t{64} << 20}) {
    EXPECT_EQ(s.ChooseAllreduce(8, bytes, /*shared=*/true), AllreduceAlgorithm::kSharedMemory);
    EXPECT_NE(s.ChooseAllreduce(8, bytes, /*shared=*/false), AllreduceAlgorithm::kSharedMemory);
  }
  // An override wins over the window; one naming shared_memory where there
  // is no window falls back to the cost model.
  Selector ring = Make({{"HORA_ALLREDUCE_ALGO", "ring"}});
  EXPECT_EQ(ring.ChooseAllreduce(8, 8, true), AllreduceAlgorithm::kRing);
  Selector shm = Make({{"HORA_ALLREDUCE_ALGO", "shm:0-1M"}});
  EXPECT_EQ(shm.ChooseAllreduce(8, 8, true), AllreduceAlgorithm::kSharedMemory);
  EXPECT_EQ(shm.ChooseAllreduce(8, 8, false), AllreduceAlgorithm::kRecursiveDoubling);
  EXPECT_EQ(shm.ChooseAllreduce(8, 2u << 20, true), AllreduceAlgorithm::kSharedMemory);
}

TEST(Selector, UnknownNamesAreErrorsListingAcceptedNames) {
  auto c = ConfigFromEnv({{"HORA_ALLREDUCE_ALGO", "rd:0-1K,fastest:1K-"}});
  ASSERT_TRUE(c.ok());
  auto s = Selector::Create(*c);
  ASSERT_FALSE(s.ok());
  const std::string& m = s.status().message();
  EXPECT_NE(m.find("HORA_ALLREDUCE_ALGO='rd:0-1K,fastest:1K-'"), std::string::npos) << m;
  EXPECT_NE(m.find("unknown algorithm 'fastest'"), std::string::npos) << m;
  EXPECT_NE(m.find("ring (ring), recursive_doubling (rd), halving_doubling (hd)"),
            std::string::npos)
      << m;
}

}  // namespace
}  // namespace hora
