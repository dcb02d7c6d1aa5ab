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
  if (!buffer.data || buffer.capacity == 0 || buffer.capacity > max_bytes_ || max_buffers_ == 0)
    return;
  // Full: make room by dropping spare buffers smaller than this one, the
  // smallest first (the larger ones are the costly ones to make), but only
  // when that makes enough room; otherwise keep the spares and drop this one.
  std::sort(spare_.begin(), spare_.end(),
            [](const PooledBuffer& a, const PooledBuffer& b) { return a.capacity < b.capacity; });
  size_t drop = 0, count = spare_.size(), bytes = spare_bytes_;
  while (count >= max_buffers_ || bytes + buffer.capacity > max_bytes_) {
    if (drop == spare_.size() || spare_[drop].capacity >= buffer.capacity) return;
    bytes -= spare_[drop].capacity;
    --count;
    ++drop;
  }
  spare_.erase(spare_.begin(), spare_.begin() + static_cast<ptrdiff_t>(drop));
  spare_bytes_ = bytes + buffer.capacity;
  spare_.push_back(std::move(buffer));
}

}  // namespace hora
