// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "transport/buffer_pool.h"

#include <algorithm>

namespace hora {

PooledBuffer BufferPool::Take(size_t bytes) {
  auto best = spare_.end();
  for (auto it = spare_.begin(); it != spare_.end(); ++it) {
    if (it->capacity >= bytes && (best == spare_.end() || it->capacity < best->capacity)) best = it;
  }
  PooledBuffer b;
  if (best != spare_.end()) {
    b = std::move(*best);
    spare_.erase(best);
    spare_bytes_ -= b.capacity;
  } else if (bytes > 0) {
    b.data = std::make_unique_for_overwrite<std::byte[]>(bytes);
    b.capacity = bytes;
  }
  b.bytes = bytes;
  return b;
}

void BufferPool::Give(PooledBuffer buffer) {
  if (buffer.capacity == 0 || buffer.capacity > max_bytes_ || max_buffers_ == 0) return;
  // Full: keep the larger buffers, which are the costly ones to make.
  while (!spare_.empty() &&
         (spare_.size() >= max_buffers_ || spare_bytes_ + buffer.capacity > max_bytes_)) {
    auto smallest = std::min_element(
        spare_.begin(), spare_.end(),
        [](const PooledBuffer& a, const PooledBuffer& b) { return a.capacity < b.capacity; });
    if (smallest->capacity >= buffer.capacity) return;  // this one is the least worth keeping
    spare_bytes_ -= smallest->capacity;
    spare_.erase(smallest);
  }
  spare_bytes_ += buffer.capacity;
  spare_.push_back(std::move(buffer));
}

}  // namespace hora
