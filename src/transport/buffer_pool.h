// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Buffers for messages that arrive before their receive is posted. A
// transport sets such a payload aside and copies it out once the receive
// comes; in a ring that happens for many segments of every large
// collective. Allocating each one afresh cost a zero fill and, for sizes the
// allocator maps from the kernel, a page fault per 4 KiB: on a virtual
// machine that made 8 MiB allreduces over TCP several times slower. The
// pool hands back buffers it was given, without clearing them.
//
// Thread-safety: none; the owning transport guards it with its own lock.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace hora {

struct PooledBuffer {
  std::unique_ptr<std::byte[]> data;
  size_t bytes = 0;     // in use
  size_t capacity = 0;  // allocated
};

class BufferPool {
 public:
  // Keeps at most `max_buffers` spare buffers of at most `max_bytes` in all.
  explicit BufferPool(size_t max_buffers = 32, size_t max_bytes = size_t{64} << 20)
      : max_buffers_(max_buffers), max_bytes_(max_bytes) {}

  // A buffer of `bytes` (contents unspecified): the smallest spare one that
  // is large enough, or a new one.
  PooledBuffer Take(size_t bytes);
  // Returns `buffer` for reuse, or frees it: when it holds no memory, or
  // when only dropping larger spares would make room for it.
  void Give(PooledBuffer buffer);

  size_t spare_buffers() const { return spare_.size(); }
  size_t spare_bytes() const { return spare_bytes_; }

 private:
  const size_t max_buffers_;
  const size_t max_bytes_;
  std::vector<PooledBuffer> spare_;
  size_t spare_bytes_ = 0;
};

}  // namespace hora
