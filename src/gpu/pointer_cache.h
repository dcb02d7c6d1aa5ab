// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The pointer cache (docs/dev/gpu.md, "The pointer cache"): what
// the device said of the allocations Hora was given, so that a steady-state
// call does not ask the driver about each tensor (at most about each
// allocation once per batch). Keyed by allocation range, not by pointer:
// a framework carves many tensors out of one allocation, and one entry
// serves them all. A lookup tries a small direct-mapped table on the exact
// pointer, then the ranges in order.
//
// Memory freed and allocated again at the same address is another
// allocation, with another buffer id (PointerInfo::buffer_id). Two policies:
//  - kTrust: a cached range is believed (no query at all). For uses where a
//    stale entry is harmless: the benchmark's baseline, hora-gpu-check, and
//    tests.
//  - kVerify: the first lookup of each allocation in a batch (BeginBatch)
//    asks the device again and drops the entry when the buffer id changed.
//    For uses that depend on the allocation's identity or its end: the
//    check of every GPU tensor at submission (lazy_device.h), whose batches
//    are rounds of a millisecond.
// Host memory the device does not know is not cached (its answer has no
// range); pinned and device memory are.
//
// Not thread-safe: one engine cycle at a time uses it.
#pragma once

#include <array>
#include <cstdint>
#include <map>

#include "gpu/device.h"

namespace hora::gpu {

class PointerCache {
 public:
  enum class Policy : uint8_t { kTrust, kVerify };

  PointerCache(Device& device, Policy policy) : device_(device), policy_(policy) {}

  // What `p` is.
  Result<PointerInfo> Lookup(const void* p);
  // Starts a batch: under kVerify, each allocation is checked again once.
  void BeginBatch() { ++epoch_; }
  // Forgets every entry (the device's memory was reset).
  void Clear();

  uint64_t hits() const { return hits_; }
  uint64_t queries() const { return queries_; }  // asked of the device
  size_t size() const { return by_base_.size(); }

 private:
  struct Entry {
    PointerInfo info;
    uint64_t verified = 0;  // the batch (epoch_) it was last checked in
  };
  static constexpr size_t kSlots = 64;
  struct Slot {
    uintptr_t pointer = 0;
    Entry* entry = nullptr;
  };
  static size_t SlotOf(uintptr_t p) { return (p >> 8) % kSlots; }
  Entry* FindRange(uintptr_t p);
  // Asks the device (or takes its answer, `info`) and caches it.
  Result<PointerInfo> Ask(uintptr_t p);
  Result<PointerInfo> Ask(uintptr_t p, const PointerInfo& info);
  void Drop(uintptr_t base);

  Device& device_;
  const Policy policy_;
  std::map<uintptr_t, Entry> by_base_;
  std::array<Slot, kSlots> slots_{};
  uint64_t epoch_ = 1;
  uint64_t hits_ = 0;
  uint64_t queries_ = 0;
};

}  // namespace hora::gpu
