// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "gpu/pointer_cache.h"

#include <gtest/gtest.h>

#include "doubles/host_device.h"

namespace hora::gpu {
namespace {

class PointerCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { dev_ = std::move(HostDevice::Create(0, size_t{1} << 28)).value(); }
  std::unique_ptr<HostDevice> dev_;
};

TEST_F(PointerCacheTest, SteadyLookupsOfOneAllocationAskTheDeviceOnce) {
  PointerCache cache(*dev_, PointerCache::Policy::kTrust);
  auto* p = static_cast<char*>(dev_->Allocate(1 << 20).value());
  const uint64_t before = dev_->pointer_queries();
  // Tensors carved out of one allocation: one entry serves them all.
  for (int step = 0; step < 1000; ++step) {
    const PointerInfo info = cache.Lookup(p + (step % 100) * 4096).value();
    ASSERT_EQ(info.kind, MemoryKind::kDevice);
    ASSERT_EQ(info.base, reinterpret_cast<uintptr_t>(p));
  }
  EXPECT_EQ(dev_->pointer_queries() - before, 1u);
  EXPECT_EQ(cache.queries(), 1u);
  EXPECT_EQ(cache.hits(), 999u);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_TRUE(dev_->Free(p).ok());
}

TEST_F(PointerCacheTest, ReusedAddressIsStaleUnderTrustAndCaughtUnderVerify) {
  PointerCache trust(*dev_, PointerCache::Policy::kTrust);
  PointerCache verify(*dev_, PointerCache::Policy::kVerify);
  void* a = dev_->Allocate(8192).value();
  const uint64_t old_id = trust.Lookup(a).value().buffer_id;
  EXPECT_EQ(verify.Lookup(a).value().buffer_id, old_id);
  ASSERT_TRUE(dev_->Free(a).ok());
  void* b = dev_->Allocate(8192).value();
  ASSERT_EQ(a, b);
  const uint64_t new_id = dev_->QueryPointer(b).value().buffer_id;
  ASSERT_NE(new_id, old_id);
  // trust believes its entry (documented: only for harmless uses) ...
  EXPECT_EQ(trust.Lookup(b).value().buffer_id, old_id);
  // ... verify checks once per batch and sees the new allocation.
  verify.BeginBatch();
  EXPECT_EQ(verify.Lookup(b).value().buffer_id, new_id);
  EXPECT_EQ(verify.size(), 1u);
  EXPECT_TRUE(dev_->Free(b).ok());
}

TEST_F(PointerCacheTest, VerifyAsksOncePerAllocationPerBatch) {
  PointerCache cache(*dev_, PointerCache::Policy::kVerify);
  auto* a = static_cast<char*>(dev_->Allocate(4096).value());
  auto* b = static_cast<char*>(dev_->Allocate(4096).value());
  for (int batch = 0; batch < 5; ++batch) {
    cache.BeginBatch();
    const uint64_t before = dev_->pointer_queries();
    for (int i = 0; i < 50; ++i) {
      ASSERT_TRUE(cache.Lookup(a + i).ok());
      ASSERT_TRUE(cache.Lookup(b + i).ok());
    }
    EXPECT_EQ(dev_->pointer_queries() - before, 2u) << "batch " << batch;
  }
  EXPECT_TRUE(dev_->Free(a).ok());
  EXPECT_TRUE(dev_->Free(b).ok());
}

TEST_F(PointerCacheTest, HostMemoryIsNotCachedPinnedIsAndRangesEndWhereTheyEnd) {
  PointerCache cache(*dev_, PointerCache::Policy::kTrust);
  int local = 0;
  EXPECT_EQ(cache.Lookup(&local).value().kind, MemoryKind::kHost);
  EXPECT_EQ(cache.Lookup(&local).value().kind, MemoryKind::kHost);
  EXPECT_EQ(cache.queries(), 2u);  // (no range to cache)
  EXPECT_EQ(cache.size(), 0u);
  auto* pinned = static_cast<char*>(dev_->AllocatePinned(1000).value());
  EXPECT_EQ(cache.Lookup(pinned + 999).value().kind, MemoryKind::kPinned);
  EXPECT_EQ(cache.Lookup(pinned).value().kind, MemoryKind::kPinned);
  EXPECT_EQ(cache.queries(), 3u);
  // Two neighbouring allocations: the end of one is not the other.
  auto* a = static_cast<char*>(dev_->Allocate(256).value());
  auto* b = static_cast<char*>(dev_->Allocate(256).value());
  ASSERT_EQ(b, a + 256);
  EXPECT_EQ(cache.Lookup(a + 255).value().base, reinterpret_cast<uintptr_t>(a));
  EXPECT_EQ(cache.Lookup(b).value().base, reinterpret_cast<uintptr_t>(b));
  // A zero-byte allocation holds its start.
  void* z = dev_->Allocate(0).value();
  EXPECT_EQ(cache.Lookup(z).value().kind, MemoryKind::kDevice);
  EXPECT_EQ(cache.Lookup(z).value().base, reinterpret_cast<uintptr_t>(z));
  EXPECT_TRUE(dev_->FreePinned(pinned).ok());
  for (void* p : {static_cast<void*>(a), static_cast<void*>(b), z}) EXPECT_TRUE(dev_->Free(p).ok());
}

TEST_F(PointerCacheTest, ALargerAllocationOverAnOldRangeReplacesIt) {
  PointerCache cache(*dev_, PointerCache::Policy::kVerify);
  auto* a = static_cast<char*>(dev_->Allocate(256).value());
  auto* b = static_cast<char*>(dev_->Allocate(256).value());
  ASSERT_TRUE(cache.Lookup(a).ok());
  ASSERT_TRUE(cache.Lookup(b).ok());
  ASSERT_TRUE(dev_->Free(a).ok());
  ASSERT_TRUE(dev_->Free(b).ok());
  auto* c = static_cast<char*>(dev_->Allocate(512).value());
  ASSERT_EQ(c, a);
  cache.BeginBatch();
  const PointerInfo info = cache.Lookup(c + 300).value();  // where b was
  EXPECT_EQ(info.base, reinterpret_cast<uintptr_t>(c));
  EXPECT_EQ(info.size, 512u);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_TRUE(dev_->Free(c).ok());
}

}  // namespace
}  // namespace hora::gpu
