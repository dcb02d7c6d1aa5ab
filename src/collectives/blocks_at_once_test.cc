// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// BlocksReadInPlace: every rank's block read in place by every other, or
// no; over a transport whose pairs' answers a table gives. (The at-once
// allgather itself runs over shared memory: shm_algorithms_test.cc.)
#include "collectives/blocks_at_once.h"

#include <gtest/gtest.h>

#include <vector>

namespace hora {
namespace {

// Rank `to` reads rank `from`'s sends in place from min[from][to] bytes
// (0: never).
class Table final : public Transport {
 public:
  explicit Table(std::vector<std::vector<size_t>> min) : min_(std::move(min)) {}
  int rank() const override { return 0; }
  int size() const override { return static_cast<int>(min_.size()); }
  const char* name() const override { return "table"; }
  Request Isend(int, Tag, const void*, size_t) override { return nullptr; }
  Request Irecv(int, Tag, void*, size_t) override { return nullptr; }
  Request IrecvReduce(int, Tag, void*, size_t, const ReduceSpec&) override { return nullptr; }
  void Cancel(const Request&) override {}
  bool ReadsInPlace(int from, int to, size_t bytes) override {
    const size_t m = min_[static_cast<size_t>(from)][static_cast<size_t>(to)];
    return m != 0 && bytes >= m;
  }

 private:
  std::vector<std::vector<size_t>> min_;
};

std::vector<std::vector<size_t>> Every(size_t n, size_t min) {
  std::vector<std::vector<size_t>> m(n, std::vector<size_t>(n, min));
  for (size_t i = 0; i < n; ++i) m[i][i] = 0;
  return m;
}

TEST(BlocksReadInPlace, EveryBlockByEveryOtherRank) {
  Table three(Every(3, 100));
  EXPECT_TRUE(BlocksReadInPlace(three, std::vector<size_t>{100, 100, 100}));
  EXPECT_FALSE(BlocksReadInPlace(three, std::vector<size_t>{100, 99, 100}));  // one below
  EXPECT_TRUE(BlocksReadInPlace(three, std::vector<size_t>{100, 0, 100}));    // none to read
  EXPECT_TRUE(BlocksReadInPlace(three, std::vector<size_t>{0, 0, 0}));
  // One way only: rank 2 does not read rank 1.
  auto one_way = Every(3, 100);
  one_way[1][2] = 0;
  Table t(one_way);
  EXPECT_FALSE(BlocksReadInPlace(t, std::vector<size_t>{100, 100, 100}));
  EXPECT_TRUE(BlocksReadInPlace(t, std::vector<size_t>{100, 0, 100}));  // rank 1 sends nothing
  // Below three ranks: the ring's one exchange.
  Table two(Every(2, 100));
  EXPECT_FALSE(BlocksReadInPlace(two, std::vector<size_t>{100, 100}));
}

}  // namespace
}  // namespace hora
