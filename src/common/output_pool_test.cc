// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "common/output_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace hora {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// A float32 tensor of `bytes` (a multiple of 4).
Tensor Take(OutputPool& pool, size_t bytes) {
  return pool.Take(DataType::kFloat32, {static_cast<int64_t>(bytes / 4)});
}

TEST(OutputPool, AFreedOutputsMemoryGoesToTheNextOutputItFits) {
  auto pool = OutputPool::Create(64 * kMiB);
  void* first = nullptr;
  {
    Tensor t = Take(*pool, 3 * kMiB);
    first = t.data();
    std::memset(t.data(), 1, t.num_bytes());  // (written whole, as a collective's output)
    EXPECT_EQ(t.num_bytes(), 3 * kMiB);
  }
  EXPECT_EQ(pool->stats().idle_bytes, 3 * kMiB);
  Tensor again = Take(*pool, 3 * kMiB);
  EXPECT_EQ(again.data(), first);
  // The block is under `again` now: the next one is fresh.
  Tensor other = Take(*pool, 3 * kMiB);
  EXPECT_NE(other.data(), first);
  const OutputPool::Stats s = pool->stats();
  EXPECT_EQ(s.reused, 1u);
  EXPECT_EQ(s.fresh, 2u);
  EXPECT_EQ(s.idle_bytes, 0u);
}

TEST(OutputPool, OfBlocksOfOneSizeTheOneFreedLastGoesFirst) {
  auto pool = OutputPool::Create(64 * kMiB);
  std::vector<void*> freed;
  {
    std::vector<Tensor> ts;
    for (int k = 0; k < 3; ++k) ts.push_back(Take(*pool, 2 * kMiB));
    for (const Tensor& t : ts) freed.push_back(t.data());
    // Freed in the order 0, 1, 2.
    while (!ts.empty()) ts.erase(ts.begin());
  }
  Tensor a = Take(*pool, 2 * kMiB);
  Tensor b = Take(*pool, 2 * kMiB);
  Tensor c = Take(*pool, 2 * kMiB);
  EXPECT_EQ(a.data(), freed[2]);
  EXPECT_EQ(b.data(), freed[1]);
  EXPECT_EQ(c.data(), freed[0]);
  EXPECT_EQ(pool->stats().reused, 3u);
}

TEST(OutputPool, ABlockServesOnlySizesItFitsClosely) {
  auto pool = OutputPool::Create(64 * kMiB);
  void* block = nullptr;
  {
    Tensor t = Take(*pool, 4 * kMiB);
    block = t.data();
  }
  // Larger than the block, or less than four fifths of it: fresh memory.
  { EXPECT_NE(Take(*pool, 4 * kMiB + 4096).data(), block); }
  { EXPECT_NE(Take(*pool, 3 * kMiB).data(), block); }
  // Within a quarter: the block.
  Tensor fits = Take(*pool, 4 * kMiB - 4 * 1024 * 100);
  EXPECT_EQ(fits.data(), block);
  EXPECT_EQ(fits.num_bytes(), 4 * kMiB - 4 * 1024 * 100);
}

TEST(OutputPool, TheMemoryKeptIdleIsBounded) {
  auto pool = OutputPool::Create(5 * kMiB);
  {
    std::vector<Tensor> ts;
    for (int i = 0; i < 3; ++i) ts.push_back(Take(*pool, 2 * kMiB));
    ts.push_back(Take(*pool, 8 * kMiB));  // over the limit alone
  }
  const OutputPool::Stats s = pool->stats();
  EXPECT_EQ(s.idle_bytes, 4 * kMiB);  // two of the three blocks of 2 MiB
  EXPECT_EQ(s.freed, 2u);             // the third, and the one of 8 MiB
  // With no limit, nothing is kept.
  auto none = OutputPool::Create(0);
  { Tensor t = Take(*none, kMiB); }
  EXPECT_EQ(none->stats().idle_bytes, 0u);
  EXPECT_EQ(none->stats().freed, 1u);
}

TEST(OutputPool, SmallOutputsAndEmptyOnesAreNotPooled) {
  auto pool = OutputPool::Create(64 * kMiB);
  for (size_t bytes : {size_t{0}, size_t{4}, OutputPool::kMinPooledBytes - 4}) {
    Tensor t = Take(*pool, bytes);
    EXPECT_EQ(t.num_bytes(), bytes);
    if (bytes > 0) std::memset(t.data(), 0, bytes);
  }
  EXPECT_EQ(pool->stats().fresh, 0u);
  EXPECT_EQ(pool->stats().idle_bytes, 0u);
  // (Not bool: the pool keeps any dtype's shape.)
  Tensor shaped = pool->Take(DataType::kFloat64, {3, 1024, 7});
  EXPECT_EQ(shaped.shape(), (std::vector<int64_t>{3, 1024, 7}));
  EXPECT_EQ(shaped.num_bytes(), size_t{3} * 1024 * 7 * 8);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(shaped.data()) % 64, 0u);
}

TEST(OutputPool, AnOutputMayOutliveWhoeverMadeThePool) {
  auto pool = OutputPool::Create(64 * kMiB);
  Tensor t = Take(*pool, 2 * kMiB);
  std::weak_ptr<OutputPool> seen = pool;
  pool.reset();  // (the Session goes)
  EXPECT_FALSE(seen.expired());
  std::memset(t.data(), 2, t.num_bytes());
  t = Tensor();  // its memory back to the pool, which then goes
  EXPECT_TRUE(seen.expired());
}

TEST(OutputPool, OutputsTakenAndFreedOnManyThreadsAtOnce) {
  auto pool = OutputPool::Create(16 * kMiB);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      std::vector<Tensor> held;
      for (int i = 0; i < 200; ++i) {
        held.push_back(Take(*pool, (size_t{64} << 10) * static_cast<size_t>(1 + (i + k) % 5)));
        std::memset(held.back().data(), k, 64);
        if (held.size() > 3) held.erase(held.begin());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const OutputPool::Stats s = pool->stats();
  EXPECT_EQ(s.reused + s.fresh, 800u);
  EXPECT_GT(s.reused, 0u);
  EXPECT_LE(s.idle_bytes, 16 * kMiB);
}

}  // namespace
}  // namespace hora
