// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "doubles/host_memory.h"

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

uintptr_t HostMemory::Take(size_t len, size_t align) {
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const uintptr_t start = it->first;
    const uintptr_t end = start + it->second;
    const uintptr_t at = base_ + RoundUp(start - base_, align);
    if (at > end || end - at < len) continue;
    free_.erase(it);
    if (at > start) free_[start] = at - start;
    if (end > at + len) free_[at + len] = end - (at + len);
    return at;
  }
  return 0;
}

void HostMemory::GiveBack(uintptr_t at, size_t len) {
  uintptr_t start = at;
  size_t total = len;
  auto next = free_.lower_bound(at);
  if (next != free_.end() && next->first == at + len) {
    total += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == at) {
      start = prev->first;
      total += prev->second;
      free_.erase(prev);
    }
  }
  free_[start] = total;
}

Result<void*> HostMemory::Allocate(size_t bytes) {
  const size_t reserved = RoundUp(std::max<size_t>(bytes, 1), kAlign);
  uintptr_t at = 0;
  {
    MutexLock lock(mu_);
    at = Take(reserved, kAlign);
    if (at == 0) {
      return UnavailableError("host device: out of memory: " + std::to_string(bytes) +
                              " bytes asked, " + std::to_string(span_) + " in all");
    }
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
    if (it->second.mapped != 0) {
      return InvalidArgument("host device: free of " + PointerText(p) +
                             ", which was opened from another's handle: close it (CloseMemory)");
    }
    reserved = it->second.reserved;
    device_.erase(it);
    // Its whole pages go back to the system (a neighbour may use the
    // partial ones) before the range can be taken again: punched after, the
    // hole would zero what a new allocation there had written.
    const size_t off = at - base_;
    const size_t from = RoundUp(off, kPage);
    const size_t to = (off + reserved) / kPage * kPage;
    if (to > from) {
      fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(from),
                static_cast<off_t>(to - from));
    }
    GiveBack(at, reserved);
  }
  return Status::Ok();
}

namespace {

// What a handle holds, in its first bytes.
struct IpcWire {
  char magic[8];
  uint64_t pid;
  int64_t fd;
  uint64_t offset;  // of the allocation in the memfd
  uint64_t bytes;
};
constexpr char kIpcMagic[8] = {'h', 'o', 'r', 'a', 'i', 'p', 'c', '1'};
static_assert(sizeof(IpcWire) <= sizeof(IpcMemHandle::bytes));

}  // namespace

Result<IpcMemHandle> HostMemory::Export(const void* p) const {
  const auto at = reinterpret_cast<uintptr_t>(p);
  IpcWire w{};
  std::memcpy(w.magic, kIpcMagic, sizeof w.magic);
  {
    MutexLock lock(mu_);
    auto it = device_.find(at);
    if (it == device_.end() || it->second.mapped != 0) {
      return InvalidArgument("host device: export of " + PointerText(p) +
                             ", which is not the start of a device allocation of its own");
    }
    w.bytes = it->second.bytes;
  }
  w.pid = static_cast<uint64_t>(getpid());
  w.fd = fd_;
  w.offset = at - base_;
  IpcMemHandle h;
  std::memcpy(h.bytes.data(), &w, sizeof w);
  return h;
}

Result<void*> HostMemory::Open(const IpcMemHandle& handle) {
  IpcWire w;
  std::memcpy(&w, handle.bytes.data(), sizeof w);
  if (std::memcmp(w.magic, kIpcMagic, sizeof w.magic) != 0) {
    return InvalidArgument("host device: open of a handle no host device exported");
  }
  if (w.pid == static_cast<uint64_t>(getpid()) && w.fd == fd_) {
    return InvalidArgument(
        "host device: open of a handle of this device's own memory (use the "
        "pointer)");
  }
  const std::string path = "/proc/" + std::to_string(w.pid) + "/fd/" + std::to_string(w.fd);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    return UnavailableError("host device: open of the memory of process " + std::to_string(w.pid) +
                            ": " + ErrnoText(path.c_str()));
  }
  // Its whole pages, mapped at the same offset within a page here.
  const size_t first_page = w.offset / kPage * kPage;
  const size_t in_page = w.offset - first_page;
  const size_t span = RoundUp(in_page + std::max<size_t>(w.bytes, 1), kPage);
  uintptr_t start = 0;
  {
    MutexLock lock(mu_);
    start = Take(span, kPage);
  }
  if (start == 0) {
    close(fd);
    return UnavailableError("host device: out of addresses to open " + std::to_string(w.bytes) +
                            " bytes of process " + std::to_string(w.pid));
  }
  void* m = mmap(backing_ + (start - base_), span, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                 fd, static_cast<off_t>(first_page));
  const Status mapped =
      m == MAP_FAILED ? UnavailableError("host device: " + ErrnoText(("mmap " + path).c_str()))
                      : Status::Ok();
  close(fd);
  MutexLock lock(mu_);
  if (!mapped.ok()) {
    GiveBack(start, span);
    return mapped;
  }
  const uintptr_t at = start + in_page;
  device_[at] = {w.bytes, span, next_buffer_id_++, start};
  return reinterpret_cast<void*>(at);
}

Status HostMemory::Close(void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  uintptr_t start = 0;
  size_t span = 0;
  {
    MutexLock lock(mu_);
    auto it = device_.find(at);
    if (it == device_.end() || it->second.mapped == 0) {
      return InvalidArgument("host device: close of " + PointerText(p) +
                             ", which was not opened from a handle (OpenMemory)");
    }
    start = it->second.mapped;
    span = it->second.reserved;
    device_.erase(it);
  }
  // This device's own (unused) pages back in place of the other's.
  void* m = mmap(backing_ + (start - base_), span, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                 fd_, static_cast<off_t>(start - base_));
  MutexLock lock(mu_);
  if (m == MAP_FAILED) return UnavailableError("host device: " + ErrnoText("mmap (close)"));
  GiveBack(start, span);
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
