// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The response cache (docs/dev/design.md §4, fast path): the parameters of tensors
// that were negotiated before, each at a fixed bit position. Every rank
// applies the same operations in the same order (insertions in response
// order, uses in bit order, erasures in bit order), so the caches -- bit
// positions and LRU order included -- stay identical on every rank without
// any message. A rank then says "these cached tensors are ready here" with
// one bit each, and a bitwise AND across ranks finds those ready everywhere.
//
// Not thread-safe: the engine thread owns it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/messages.h"

namespace hora {

// A decision as the cache holds it: shared, never changed, so that the
// fast path hands it on without copying it.
using ResponsePtr = std::shared_ptr<const Response>;

class ResponseCache {
 public:
  // capacity 0: nothing is ever cached.
  explicit ResponseCache(size_t capacity);

  size_t capacity() const { return capacity_; }
  size_t size() const { return by_name_.size(); }

  // Bit position of `name`, if cached.
  std::optional<size_t> Find(std::string_view name) const;
  // The cached parameters at `bit` (which must be occupied).
  const RequestMeta& At(size_t bit) const { return slots_[bit]->params; }
  // The whole cached decision at `bit` (allgather and alltoall: with every
  // rank's rows).
  const Response& ResponseAt(size_t bit) const { return *slots_[bit]; }
  const ResponsePtr& Shared(size_t bit) const { return slots_[bit]; }
  bool Occupied(size_t bit) const { return slots_[bit] != nullptr; }

  // Which entry sits at `bit`: a number given to each insertion, never
  // given again (0: none). A caller that checked a request against the
  // entry may skip the check while this stays the same.
  uint64_t Generation(size_t bit) const { return generation_[bit]; }

  // Caches the decision `r` (replacing an entry of the same name), evicting
  // the least recently used entry when full. Returns its bit, or nullopt when
  // the capacity is 0.
  std::optional<size_t> Insert(ResponsePtr r);
  // Marks the entry at `bit` most recently used.
  void Touch(size_t bit) { used_[bit] = ++clock_; }
  void Erase(size_t bit);
  // Empties the cache and gives it `capacity` bits. Generations go on from
  // where they were: a caller's remembered generation never matches again.
  void Reset(size_t capacity);

  uint64_t evictions() const { return evictions_; }

 private:
  size_t LeastRecentlyUsed() const;  // of the occupied bits (the cache is full)

  size_t capacity_;
  std::vector<ResponsePtr> slots_;
  // Keyed by the name inside the slot's decision (which outlives its key).
  std::unordered_map<std::string_view, size_t> by_name_;
  // Recency: when each bit's entry was last inserted or used, in a count of
  // those events. Using an entry is one store (a cached step uses hundreds);
  // an eviction scans the bits for the oldest, on the slow path only.
  std::vector<uint64_t> used_;
  uint64_t clock_ = 0;
  std::vector<uint64_t> generation_;
  uint64_t insertions_ = 0;
  std::vector<size_t> free_;  // free bit positions, lowest last
  uint64_t evictions_ = 0;
};

}  // namespace hora
