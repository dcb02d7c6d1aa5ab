// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "gpu/host/host_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace hora::gpu {
namespace {

constexpr size_t kAlign = 256;
constexpr size_t kPage = 4096;
constexpr uint8_t kFresh = 0xA5;

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

std::string ErrnoText(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

std::string PointerText(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

Result<std::unique_ptr<HostMemory>> HostMemory::Create(size_t span) {
  span = RoundUp(span, kPage);
  const int fd = memfd_create("hora-host-device", MFD_CLOEXEC);
  if (fd < 0) return UnavailableError("host device: " + ErrnoText("memfd_create"));
  if (ftruncate(fd, static_cast<off_t>(span)) != 0) {
    const Status st = UnavailableError("host device: " + ErrnoText("ftruncate"));
    close(fd);
    return st;
  }
  void* base = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    close(fd);
    return UnavailableError("host device: " + ErrnoText("mmap (device addresses)"));
  }
  void* backing = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (backing == MAP_FAILED) {
    munmap(base, span);
    close(fd);
    return UnavailableError("host device: " + ErrnoText("mmap (backing)"));
  }
  return std::unique_ptr<HostMemory>(new HostMemory(reinterpret_cast<uintptr_t>(base),
                                                    static_cast<std::byte*>(backing), span, fd));
}

HostMemory::HostMemory(uintptr_t base, std::byte* backing, size_t span, int fd)
    : base_(base), backing_(backing), span_(span), fd_(fd) {
  MutexLock lock(mu_);
  free_[base_] = span_;
}

HostMemory::~HostMemory() {
  munmap(reinterpret_cast<void*>(base_), span_);
  munmap(backing_, span_);
  close(fd_);
  MutexLock lock(mu_);
  for (auto& [p, a] : pinned_) std::free(reinterpret_cast<void*>(p));
}

Result<void*> HostMemory::Allocate(size_t bytes) {
  const size_t reserved = RoundUp(std::max<size_t>(bytes, 1), kAlign);
  uintptr_t at = 0;
  {
    MutexLock lock(mu_);
    auto it = free_.begin();
    while (it != free_.end() && it->second < reserved) ++it;
    if (it == free_.end()) {
      return UnavailableError("host device: out of memory: " + std::to_string(bytes) +
                              " bytes asked, " + std::to_string(span_) + " in all");
    }
    at = it->first;
    const size_t left = it->second - reserved;
    free_.erase(it);
    if (left > 0) free_[at + reserved] = left;
    device_[at] = {bytes, reserved, next_buffer_id_++};
  }
  std::memset(backing_ + (at - base_), kFresh, reserved);
  return reinterpret_cast<void*>(at);
}

Status HostMemory::Free(void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  size_t reserved = 0;
  {
    MutexLock lock(mu_);
    auto it = device_.find(at);
    if (it == device_.end()) {
      return InvalidArgument("host device: free of " + PointerText(p) +
                             ", which is not the start of a device allocation");
    }
    reserved = it->second.reserved;
    device_.erase(it);
    // Back into the free ranges, merged with its neighbours.
    uintptr_t start = at;
    size_t len = reserved;
    auto next = free_.lower_bound(at);
    if (next != free_.end() && next->first == at + reserved) {
      len += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == at) {
        start = prev->first;
        len += prev->second;
        free_.erase(prev);
      }
    }
    free_[start] = len;
  }
  // Give back its whole pages (a neighbour may use the partial ones).
  const size_t off = at - base_;
  const size_t from = RoundUp(off, kPage);
  const size_t to = (off + reserved) / kPage * kPage;
  if (to > from) {
    fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(from),
              static_cast<off_t>(to - from));
  }
  return Status::Ok();
}

Result<void*> HostMemory::AllocatePinned(size_t bytes) {
  const size_t reserved = RoundUp(std::max<size_t>(bytes, 1), kAlign);
  void* p = std::aligned_alloc(kAlign, reserved);
  if (p == nullptr) {
    return UnavailableError("host device: out of pinned memory: " + std::to_string(bytes) +
                            " bytes asked");
  }
  MutexLock lock(mu_);
  pinned_[reinterpret_cast<uintptr_t>(p)] = {bytes, reserved, next_buffer_id_++};
  return p;
}

Status HostMemory::FreePinned(void* p) {
  MutexLock lock(mu_);
  auto it = pinned_.find(reinterpret_cast<uintptr_t>(p));
  if (it == pinned_.end()) {
    return InvalidArgument("host device: pinned free of " + PointerText(p) +
                           ", which is not the start of a pinned allocation");
  }
  pinned_.erase(it);
  std::free(p);
  return Status::Ok();
}

template <typename Map>
const std::pair<const uintptr_t, HostMemory::Allocation>* HostMemory::Holder(const Map& map,
                                                                             uintptr_t p) {
  auto it = map.upper_bound(p);
  if (it == map.begin()) return nullptr;
  --it;
  // (One past the end of a zero-byte allocation is its start.)
  if (p < it->first || p > it->first + it->second.bytes) return nullptr;
  if (p == it->first + it->second.bytes && it->second.bytes > 0) return nullptr;
  return &*it;
}

std::byte* HostMemory::Translate(const void* p, size_t bytes) const {
  const auto at = reinterpret_cast<uintptr_t>(p);
  MutexLock lock(mu_);
  const auto* holder = Holder(device_, at);
  if (holder == nullptr && bytes == 0) {
    // An empty range just past an allocation's end is fine too.
    auto it = device_.lower_bound(at);
    if (it != device_.begin() && std::prev(it)->first + std::prev(it)->second.bytes == at) {
      return backing_ + (at - base_);
    }
  }
  if (holder == nullptr || at + bytes > holder->first + holder->second.bytes) return nullptr;
  return backing_ + (at - base_);
}

bool HostMemory::IsPinned(const void* p, size_t bytes) const {
  const auto at = reinterpret_cast<uintptr_t>(p);
  MutexLock lock(mu_);
  const auto* holder = Holder(pinned_, at);
  return holder != nullptr && at + bytes <= holder->first + holder->second.bytes;
}

PointerInfo HostMemory::Find(const void* p) const {
  const auto at = reinterpret_cast<uintptr_t>(p);
  MutexLock lock(mu_);
  if (const auto* d = Holder(device_, at)) {
    return {MemoryKind::kDevice, d->first, d->second.bytes, d->second.buffer_id};
  }
  if (const auto* h = Holder(pinned_, at)) {
    return {MemoryKind::kPinned, h->first, h->second.bytes, h->second.buffer_id};
  }
  return {};
}

}  // namespace hora::gpu
