// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Host memory for the outputs of out-of-place collectives, kept when the
// tensor over it goes and handed out again.
//
// A fresh output of tens of MiB is fresh memory from the allocator on
// nearly every call, and its first touch faults every page: a 64 MiB
// out-of-place allreduce from Python took about 3x the in-place one, the
// faults (and the kernel's zeroing) taking the difference
// (bench/python/out_of_place.py). The pool keeps the memory of outputs
// whose tensors were destroyed (a framework's tensor frees its DLPack
// capsule, and the capsule the Tensor) and gives it to the next output of a
// size it fits: its pages are faulted already. Among blocks of one size,
// the one given back last goes first.
//
// Bounded: the memory kept idle (not under a live tensor) is at most
// `idle_limit` bytes (HORA_OUTPUT_POOL_BYTES); memory given back beyond it
// is freed, the largest idle blocks first. Outputs under kMinPooledBytes
// are allocated and freed as usual (the allocator keeps those warm).
//
// Thread-safe: tensors are destroyed on any thread (a framework's deleter).
// The pool lives while any tensor it gave out does (each holds it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "common/mutex.h"
#include "hora/tensor.h"

namespace hora {

class OutputPool : public std::enable_shared_from_this<OutputPool> {
 public:
  static constexpr size_t kMinPooledBytes = size_t{64} << 10;

  static std::shared_ptr<OutputPool> Create(size_t idle_limit) {
    return std::shared_ptr<OutputPool>(new OutputPool(idle_limit));
  }
  ~OutputPool();
  OutputPool(const OutputPool&) = delete;
  OutputPool& operator=(const OutputPool&) = delete;

  // An uninitialised host tensor (output_memory.h's memory): an idle block
  // that fits it (at least its bytes, at most a quarter more), else fresh
  // memory. Its memory comes back here when the tensor is destroyed.
  Tensor Take(DataType dtype, std::vector<int64_t> shape);

  struct Stats {
    uint64_t reused = 0;    // outputs given an idle block
    uint64_t fresh = 0;     // outputs given fresh memory (pooled sizes)
    uint64_t freed = 0;     // blocks freed rather than kept (over the limit)
    size_t idle_bytes = 0;  // kept now, under no tensor
  };
  Stats stats() const;

 private:
  explicit OutputPool(size_t idle_limit) : idle_limit_(idle_limit) {}
  // A block of `bytes` (a pooled size's rounding) back from its tensor.
  void GiveBack(void* p, size_t bytes);

  const size_t idle_limit_;
  mutable Mutex mu_;
  std::multimap<size_t, void*> idle_ HORA_GUARDED_BY(mu_);  // by size
  Stats stats_ HORA_GUARDED_BY(mu_);
};

}  // namespace hora
