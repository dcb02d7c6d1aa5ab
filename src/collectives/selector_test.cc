// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "collectives/selector.h"

#include <gtest/gtest.h>

#include <vector>

namespace hora {
namespace {

Selector Make(std::map<std::string, std::string> env) {
  auto c = ConfigFromEnv(env);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  auto s = Selector::Create(*c);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

std::string Allreduce(const Selector& s, int n, size_t bytes, bool shared = false) {
  return s.ChooseAllreduce(n, bytes, shared).name;
}
std::string Broadcast(const Selector& s, int n, size_t bytes, bool shared = false) {
  return s.ChooseBroadcast(n, bytes, shared).name;
}
std::string Reducescatter(const Selector& s, int n, size_t bytes, bool shared = false) {
  return s.ChooseReducescatter(n, bytes, shared).name;
}

TEST(Selector, CostModelPicksFewRoundsForSmallAndBandwidthForLarge) {
  Selector s = Make({});
  // Small messages: latency dominates; recursive doubling has fewest rounds.
  EXPECT_EQ(Allreduce(s, 8, 8), "recursive_doubling");
  EXPECT_EQ(Allreduce(s, 16, 64), "recursive_doubling");
  // Large messages: bandwidth-optimal algorithms.
  const std::string big = Allreduce(s, 8, 64u << 20);
  EXPECT_TRUE(big == "ring" || big == "halving_doubling") << big;
  EXPECT_NE(Allreduce(s, 16, 64u << 20), "recursive_doubling");
  // Broadcast: tree for small, scatter-allgather for large.
  EXPECT_EQ(Broadcast(s, 8, 8), "binomial");
  EXPECT_EQ(Broadcast(s, 8, 64u << 20), "scatter_allgather");
}

TEST(Selector, OverrideByNameAndByRange) {
  Selector all_ring = Make({{"HORA_ALLREDUCE_ALGO", "ring"}});
  EXPECT_EQ(Allreduce(all_ring, 8, 8), "ring");
  EXPECT_EQ(Allreduce(all_ring, 8, 1u << 30), "ring");

  Selector ranged = Make({{"HORA_ALLREDUCE_ALGO", "rd:0-64K,hd:64K-1M"}});
  EXPECT_EQ(Allreduce(ranged, 8, 0), "recursive_doubling");
  EXPECT_EQ(Allreduce(ranged, 8, 65535), "recursive_doubling");
  EXPECT_EQ(Allreduce(ranged, 8, 65536), "halving_doubling");
  // Outside every range: the cost model decides (not recursive doubling at 64 MiB, 16 ranks).
  EXPECT_NE(Allreduce(ranged, 16, 64u << 20), "recursive_doubling");

  Selector bcast = Make({{"HORA_BROADCAST_ALGO", "scatter_allgather"}});
  EXPECT_EQ(Broadcast(bcast, 4, 1), "scatter_allgather");
}

TEST(Selector, SharedMemoryWhereAWindowExistsAndOnlyThere) {
  Selector s = Make({});
  for (size_t bytes : {size_t{0}, size_t{8}, size_t{1} << 20, size_t{64} << 20}) {
    EXPECT_EQ(Allreduce(s, 8, bytes, /*shared=*/true), "shared_memory");
    EXPECT_NE(Allreduce(s, 8, bytes, /*shared=*/false), "shared_memory");
  }
  // An override wins over the window; one naming shared_memory where there
  // is no window falls back to the cost model.
  Selector ring = Make({{"HORA_ALLREDUCE_ALGO", "ring"}});
  EXPECT_EQ(Allreduce(ring, 8, 8, true), "ring");
  Selector shm = Make({{"HORA_ALLREDUCE_ALGO", "shm:0-1M"}});
  EXPECT_EQ(Allreduce(shm, 8, 8, true), "shared_memory");
  EXPECT_EQ(Allreduce(shm, 8, 8, false), "recursive_doubling");
  EXPECT_EQ(Allreduce(shm, 8, 2u << 20, true), "shared_memory");
}

// Broadcast on a window: from three ranks on, at every size (its one hop,
// every reader at once, beats the tree's log2(n) and the scatter-
// allgather's 2(n-1) messages); at two, the tree's one send, a step
// cheaper. Never without a window; an override wins over it.
TEST(Selector, SharedMemoryBroadcastFromThreeRanksWhereAWindowExists) {
  Selector s = Make({});
  // Every size from 0 to 2 GiB in steps of an eighth (the chunk's edges
  // included), on every world from 3 to 9 and some beyond.
  std::vector<size_t> sizes = {0, 1, 8, 255u << 10, 256u << 10, 257u << 10, 512u << 10};
  for (double b = 16; b <= double(size_t{1} << 31); b *= 1.125) sizes.push_back(size_t(b));
  for (size_t bytes : sizes) {
    for (int n : {3, 4, 5, 6, 7, 8, 9, 16, 64}) {
      EXPECT_EQ(Broadcast(s, n, bytes, /*shared=*/true), "shared_memory") << n << " " << bytes;
      EXPECT_NE(Broadcast(s, n, bytes, /*shared=*/false), "shared_memory") << n << " " << bytes;
    }
    EXPECT_EQ(Broadcast(s, 2, bytes, true), "binomial") << bytes;
  }
  Selector sag = Make({{"HORA_BROADCAST_ALGO", "sag:1M-"}});
  EXPECT_EQ(Broadcast(sag, 8, 8, true), "shared_memory");
  EXPECT_EQ(Broadcast(sag, 8, 1 << 20, true), "scatter_allgather");
  Selector shm = Make({{"HORA_BROADCAST_ALGO", "shm"}});
  EXPECT_EQ(Broadcast(shm, 2, 8, true), "shared_memory");
  EXPECT_EQ(Broadcast(shm, 8, 8, false), "binomial");
}

// Reducescatter runs on the window wherever there is one, at every size and
// world; elsewhere the ring; an override's ranges come first.
TEST(Selector, SharedMemoryReducescatterWhereAWindowExists) {
  Selector s = Make({});
  for (size_t bytes : {size_t{0}, size_t{8}, size_t{64} << 10, size_t{64} << 20}) {
    for (int n : {2, 3, 8, 64}) {
      EXPECT_EQ(Reducescatter(s, n, bytes, /*shared=*/true), "shared_memory") << n << " " << bytes;
      EXPECT_EQ(Reducescatter(s, n, bytes, /*shared=*/false), "ring") << n << " " << bytes;
    }
  }
  Selector ring = Make({{"HORA_REDUCESCATTER_ALGO", "ring:1M-"}});
  EXPECT_EQ(Reducescatter(ring, 4, 8, true), "shared_memory");
  EXPECT_EQ(Reducescatter(ring, 4, 1 << 20, true), "ring");
  auto c = ConfigFromEnv({{"HORA_REDUCESCATTER_ALGO", "tree"}});
  ASSERT_TRUE(c.ok());
  auto bad = Selector::Create(*c);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ring (ring), shared_memory (shm)"), std::string::npos)
      << bad.status().message();
}

// Allgather on the window wherever there is one, but where two ranks
// exchange large blocks in place; HORA_ALLGATHER_ALGO says otherwise.
TEST(Selector, AllgatherOnTheWindowButForTwoRanksInPlace) {
  Selector s = Make({});
  EXPECT_TRUE(s.AllgatherOnWindow(/*shared=*/true, /*pair=*/false));
  EXPECT_FALSE(s.AllgatherOnWindow(true, true));
  EXPECT_FALSE(s.AllgatherOnWindow(false, false));
  Selector ring = Make({{"HORA_ALLGATHER_ALGO", "ring"}});
  EXPECT_FALSE(ring.AllgatherOnWindow(true, false));
  Selector shm = Make({{"HORA_ALLGATHER_ALGO", "shared_memory"}});
  EXPECT_TRUE(shm.AllgatherOnWindow(true, true));
  EXPECT_FALSE(shm.AllgatherOnWindow(false, false));
  auto bad = ConfigFromEnv({{"HORA_ALLGATHER_ALGO", "tree"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("auto|ring|shared_memory"), std::string::npos)
      << bad.status().message();
}

// Alltoall on the window where its blocks take one round and are smaller
// than those read in place (at two ranks, small ones only);
// HORA_ALLTOALL_ALGO says otherwise.
TEST(Selector, AlltoallOnTheWindowForBlocksOfOneRound) {
  Selector s = Make({});
  const size_t slot = size_t{128} << 10;
  EXPECT_TRUE(s.AlltoallOnWindow(4, /*shared=*/true, 0, slot));
  EXPECT_TRUE(s.AlltoallOnWindow(8, true, slot, slot));
  EXPECT_FALSE(s.AlltoallOnWindow(8, true, slot + 1, slot));
  EXPECT_TRUE(s.AlltoallOnWindow(4, true, kAlltoallSharedBelowBytes - 1, 2 * slot));
  EXPECT_FALSE(s.AlltoallOnWindow(4, true, kAlltoallSharedBelowBytes, 2 * slot));
  EXPECT_FALSE(s.AlltoallOnWindow(4, false, 1, slot));
  EXPECT_TRUE(s.AlltoallOnWindow(2, true, kAlltoallSharedPairBytes, slot));
  EXPECT_FALSE(s.AlltoallOnWindow(2, true, kAlltoallSharedPairBytes + 1, slot));
  Selector pairwise = Make({{"HORA_ALLTOALL_ALGO", "pairwise"}});
  EXPECT_FALSE(pairwise.AlltoallOnWindow(4, true, 1, slot));
  Selector shm = Make({{"HORA_ALLTOALL_ALGO", "shared_memory"}});
  EXPECT_TRUE(shm.AlltoallOnWindow(2, true, size_t{1} << 30, slot));
  EXPECT_FALSE(shm.AlltoallOnWindow(4, false, 1, slot));
  auto bad = ConfigFromEnv({{"HORA_ALLTOALL_ALGO", "ring"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("auto|pairwise|shared_memory"), std::string::npos)
      << bad.status().message();
}

TEST(Selector, TheDefaultIsAnOverrideThatUsersCouldWrite) {
  // The default selection, written by a user, selects the same everywhere.
  Selector by_default = Make({});
  Selector written =
      Make({{"HORA_ALLREDUCE_ALGO", std::string(kDefaultAllreduceSelection)},
            {"HORA_BROADCAST_ALGO", std::string(kDefaultBroadcastSelection)},
            {"HORA_REDUCESCATTER_ALGO", std::string(kDefaultReducescatterSelection)}});
  for (int n : {1, 2, 3, 8, 33}) {
    for (size_t bytes : {size_t{0}, size_t{100}, size_t{40} << 10, size_t{64} << 20}) {
      for (bool shared : {false, true}) {
        EXPECT_EQ(Allreduce(by_default, n, bytes, shared), Allreduce(written, n, bytes, shared));
      }
      for (bool shared : {false, true}) {
        EXPECT_EQ(Broadcast(by_default, n, bytes, shared), Broadcast(written, n, bytes, shared));
        EXPECT_EQ(Reducescatter(by_default, n, bytes, shared),
                  Reducescatter(written, n, bytes, shared));
      }
    }
  }
  // A user's ranges come before the default's: outside them, a shared
  // window still runs shared_memory.
  Selector small_ring = Make({{"HORA_ALLREDUCE_ALGO", "ring:0-64K"}});
  EXPECT_EQ(Allreduce(small_ring, 8, 8, true), "ring");
  EXPECT_EQ(Allreduce(small_ring, 8, 1 << 20, true), "shared_memory");
  EXPECT_NE(Allreduce(small_ring, 8, 1 << 20, false), "shared_memory");
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
