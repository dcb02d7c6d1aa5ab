// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The host device's memory. Device memory is a range of addresses reserved
// with no access at all, so that host code that dereferences a device
// pointer faults at once, as it would with a GPU's; its bytes live in a
// second mapping of the same size (the backing) that only the device's own
// work reaches, through Translate. Allocations are 256-byte aligned, first
// fit, and a freed range is the first reused (so that a free and an
// allocation of the same size give the same address, with a new buffer id,
// as CUDA's allocator often does); their fresh contents are 0xA5 bytes, so
// that reading memory never written shows. Pinned memory is ordinary host
// memory, recorded.
//
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/mutex.h"
#include "gpu/device.h"

namespace hora::gpu {

// "0x7f...": a pointer as the host device's errors name it.
std::string PointerText(const void* p);

class HostMemory {
 public:
  // Reserves `span` bytes of device addresses (none committed until used).
  static Result<std::unique_ptr<HostMemory>> Create(size_t span);
  ~HostMemory();
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;

  Result<void*> Allocate(size_t bytes) HORA_EXCLUDES(mu_);
  Status Free(void* p) HORA_EXCLUDES(mu_);
  Result<void*> AllocatePinned(size_t bytes) HORA_EXCLUDES(mu_);
  Status FreePinned(void* p) HORA_EXCLUDES(mu_);

  // IPC (device.h): the handle of the allocation at `p` (this process's pid,
  // the memfd, where the allocation is in it); another HostMemory's
  // allocation mapped into page-aligned addresses of this one, from its
  // handle; unmapped again.
  Result<IpcMemHandle> Export(const void* p) const HORA_EXCLUDES(mu_);
  Result<void*> Open(const IpcMemHandle& handle) HORA_EXCLUDES(mu_);
  Status Close(void* p) HORA_EXCLUDES(mu_);

  // Where the bytes of device memory [p, p + bytes) are, when the range is
  // inside one allocation; null otherwise.
  std::byte* Translate(const void* p, size_t bytes) const HORA_EXCLUDES(mu_);
  // Whether [p, p + bytes) is inside one pinned allocation.
  bool IsPinned(const void* p, size_t bytes) const HORA_EXCLUDES(mu_);
  PointerInfo Find(const void* p) const HORA_EXCLUDES(mu_);

 private:
  struct Allocation {
    size_t bytes = 0;     // as asked
    size_t reserved = 0;  // rounded up
    uint64_t buffer_id = 0;
    uintptr_t mapped = 0;  // opened (IPC): its whole pages start here (0: not opened)
  };
  // `len` free bytes starting at a multiple of `align` (from base_), taken
  // out of the free ranges; 0 when there are none.
  uintptr_t Take(size_t len, size_t align) HORA_REQUIRES(mu_);
  // [start, start + len) back into the free ranges, merged with neighbours.
  void GiveBack(uintptr_t start, size_t len) HORA_REQUIRES(mu_);
  HostMemory(uintptr_t base, std::byte* backing, size_t span, int fd);
  // The allocation of `map` that holds p, if any.
  template <typename Map>
  static const std::pair<const uintptr_t, Allocation>* Holder(const Map& map, uintptr_t p);

  const uintptr_t base_;      // the reserved device addresses
  std::byte* const backing_;  // their bytes
  const size_t span_;
  const int fd_;
  mutable Mutex mu_;
  std::map<uintptr_t, Allocation> device_ HORA_GUARDED_BY(mu_);  // by start address
  std::map<uintptr_t, size_t> free_ HORA_GUARDED_BY(mu_);        // free ranges: start, bytes
  std::map<uintptr_t, Allocation> pinned_ HORA_GUARDED_BY(mu_);
  uint64_t next_buffer_id_ HORA_GUARDED_BY(mu_) = 1;
};

}  // namespace hora::gpu
