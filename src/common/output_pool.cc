// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "common/output_pool.h"

#include <cstdlib>
#include <iterator>

#include "common/output_memory.h"

namespace hora {

OutputPool::~OutputPool() {
  MutexLock lock(mu_);
  for (const auto& [bytes, p] : idle_) std::free(p);
}

Tensor OutputPool::Take(DataType dtype, std::vector<int64_t> shape) {
  const size_t bytes = TensorView(nullptr, dtype, shape).num_bytes();
  if (bytes < kMinPooledBytes) return Tensor::Uninitialized(dtype, std::move(shape));
  const size_t rounded = OutputMemoryBytes(bytes);
  void* p = nullptr;
  size_t block = rounded;
  {
    MutexLock lock(mu_);
    const auto it = idle_.lower_bound(rounded);
    if (it != idle_.end() && it->first <= rounded + rounded / 4) {
      block = it->first;
      p = it->second;
      idle_.erase(it);
      stats_.idle_bytes -= block;
      ++stats_.reused;
    } else {
      ++stats_.fresh;
    }
  }
  if (p == nullptr) p = OutputMemory(block);
  std::shared_ptr<OutputPool> self = shared_from_this();
  return Tensor::Adopt(TensorView(p, dtype, std::move(shape)),
                       [self = std::move(self), block](void* q) { self->GiveBack(q, block); });
}

void OutputPool::GiveBack(void* p, size_t bytes) {
  std::vector<void*> to_free;
  {
    MutexLock lock(mu_);
    if (bytes > idle_limit_) {
      to_free.push_back(p);
    } else {
      // Room for it: the largest idle blocks go first.
      while (stats_.idle_bytes + bytes > idle_limit_) {
        const auto largest = std::prev(idle_.end());
        stats_.idle_bytes -= largest->first;
        to_free.push_back(largest->second);
        idle_.erase(largest);
      }
      // First among the blocks of its size: the next output of that size
      // takes the one freed last, whose pages are likeliest in the caches.
      idle_.emplace_hint(idle_.lower_bound(bytes), bytes, p);
      stats_.idle_bytes += bytes;
    }
    stats_.freed += to_free.size();
  }
  for (void* q : to_free) std::free(q);  // (outside the lock: munmap may take a while)
}

OutputPool::Stats OutputPool::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

}  // namespace hora
