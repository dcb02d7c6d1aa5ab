// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/response_cache.h"

namespace hora {

ResponseCache::ResponseCache(size_t capacity)
    : capacity_(capacity), slots_(capacity), used_(capacity), generation_(capacity) {
  for (size_t b = capacity; b > 0; --b) free_.push_back(b - 1);
}

void ResponseCache::Reset(size_t capacity) {
  by_name_.clear();
  slots_.assign(capacity, nullptr);
  used_.assign(capacity, 0);
  generation_.assign(capacity, 0);
  free_.clear();
  for (size_t b = capacity; b > 0; --b) free_.push_back(b - 1);
  capacity_ = capacity;
}

std::optional<size_t> ResponseCache::Find(std::string_view name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

std::optional<size_t> ResponseCache::Insert(ResponsePtr r) {
  if (capacity_ == 0) return std::nullopt;
  if (auto old = Find(r->params.name)) Erase(*old);
  if (free_.empty()) {
    Erase(LeastRecentlyUsed());
    ++evictions_;
  }
  const size_t bit = free_.back();
  free_.pop_back();
  slots_[bit] = std::move(r);
  by_name_[slots_[bit]->params.name] = bit;
  generation_[bit] = ++insertions_;
  Touch(bit);
  return bit;
}

size_t ResponseCache::LeastRecentlyUsed() const {
  size_t oldest = 0;
  for (size_t b = 1; b < capacity_; ++b) {
    if (used_[b] < used_[oldest]) oldest = b;
  }
  return oldest;
}

void ResponseCache::Erase(size_t bit) {
  if (!slots_[bit]) return;
  by_name_.erase(slots_[bit]->params.name);
  slots_[bit].reset();
  generation_[bit] = 0;
  // Keep the free list sorted so that the lowest free bit is reused first
  // (the same on every rank, and the bit vector stays short).
  auto it = free_.begin();
  while (it != free_.end() && *it > bit) ++it;
  free_.insert(it, bit);
}

}  // namespace hora
