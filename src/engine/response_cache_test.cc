// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The response cache alone: bit positions (lowest free first), least
// recently used eviction (uses count, in the order made), and generations
// that tell an entry from the one before it at the same bit.
#include "engine/response_cache.h"

#include <gtest/gtest.h>

#include <set>

namespace hora {
namespace {

ResponsePtr Entry(const std::string& name, int64_t elements = 4) {
  auto r = std::make_shared<Response>();
  r->params.name = name;
  r->params.shape = {elements};
  return r;
}

TEST(ResponseCache, FillsTheLowestFreeBitsAndFindsByName) {
  ResponseCache cache(4);
  EXPECT_EQ(cache.Insert(Entry("a")), 0u);
  EXPECT_EQ(cache.Insert(Entry("b")), 1u);
  EXPECT_EQ(cache.Insert(Entry("c")), 2u);
  cache.Erase(1);
  EXPECT_FALSE(cache.Occupied(1));
  EXPECT_EQ(cache.Find("b"), std::nullopt);
  EXPECT_EQ(cache.Insert(Entry("d")), 1u);  // the lowest free bit again
  EXPECT_EQ(cache.Find("d"), 1u);
  EXPECT_EQ(cache.Find("c"), 2u);
  EXPECT_EQ(cache.At(2).name, "c");
  EXPECT_EQ(cache.size(), 3u);
}

TEST(ResponseCache, EvictsTheLeastRecentlyUsed) {
  ResponseCache cache(3);
  cache.Insert(Entry("a"));                 // bit 0
  cache.Insert(Entry("b"));                 // bit 1
  cache.Insert(Entry("c"));                 // bit 2
  cache.Touch(0);                           // used: now b is the least recently used
  EXPECT_EQ(cache.Insert(Entry("d")), 1u);  // b was least recently used
  EXPECT_EQ(cache.Find("b"), std::nullopt);
  EXPECT_EQ(cache.evictions(), 1u);
  cache.Touch(2);
  cache.Touch(1);
  // Now a (touched before c and d) is the oldest.
  EXPECT_EQ(cache.Insert(Entry("e")), 0u);
  EXPECT_EQ(cache.Find("a"), std::nullopt);
  EXPECT_EQ(cache.evictions(), 2u);
  const std::set<std::string> left = {cache.At(0).name, cache.At(1).name, cache.At(2).name};
  EXPECT_EQ(left, (std::set<std::string>{"c", "d", "e"}));
}

TEST(ResponseCache, InsertingANameAgainReplacesItsEntry) {
  ResponseCache cache(2);
  cache.Insert(Entry("a", 4));
  cache.Insert(Entry("b"));
  EXPECT_EQ(cache.Insert(Entry("a", 9)), 0u);  // erased, then the lowest free bit
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.At(0).shape, std::vector<int64_t>{9});
  EXPECT_EQ(cache.evictions(), 0u);
}

TEST(ResponseCache, GenerationsTellEntriesAtOneBitApart) {
  ResponseCache cache(2);
  EXPECT_EQ(cache.Generation(0), 0u);  // nothing there
  cache.Insert(Entry("a"));
  const uint64_t first = cache.Generation(0);
  EXPECT_NE(first, 0u);
  cache.Touch(0);
  EXPECT_EQ(cache.Generation(0), first);  // use does not change the entry
  cache.Erase(0);
  EXPECT_EQ(cache.Generation(0), 0u);
  cache.Insert(Entry("a"));  // the same name and bit, a new entry
  EXPECT_EQ(cache.Find("a"), 0u);
  EXPECT_NE(cache.Generation(0), 0u);
  EXPECT_NE(cache.Generation(0), first);
}

TEST(ResponseCache, CapacityZeroCachesNothing) {
  ResponseCache cache(0);
  EXPECT_EQ(cache.Insert(Entry("a")), std::nullopt);
  EXPECT_EQ(cache.Find("a"), std::nullopt);
  EXPECT_EQ(cache.size(), 0u);
}

}  // namespace
}  // namespace hora
