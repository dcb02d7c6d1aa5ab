// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/response_cache.h"

namespace hora {

ResponseCache::ResponseCache(size_t capacity)
    : capacity_(capacity), slots_(capacity), lru_pos_(capacity) {
  for (size_t b = capacity; b > 0; --b) free_.push_back(b - 1);
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
    Erase(lru_.back());
    ++evictions_;
  }
  const size_t bit = free_.back();
  free_.pop_back();
  slots_[bit] = std::move(r);
  by_name_[slots_[bit]->params.name] = bit;
  lru_.push_front(bit);
  lru_pos_[bit] = lru_.begin();
  return bit;
}

void ResponseCache::Touch(size_t bit) { lru_.splice(lru_.begin(), lru_, lru_pos_[bit]); }

void ResponseCache::Erase(size_t bit) {
  if (!slots_[bit]) return;
  by_name_.erase(slots_[bit]->params.name);
  slots_[bit].reset();
  lru_.erase(lru_pos_[bit]);
  // Keep the free list sorted so that the lowest free bit is reused first
  // (the same on every rank, and the bit vector stays short).
  auto it = free_.begin();
  while (it != free_.end() && *it > bit) ++it;
  free_.insert(it, bit);
}

}  // namespace hora
