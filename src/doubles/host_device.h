// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The host device: the Device interface (device.h) on CPU memory, so that
// every GPU code path above the seam runs, and is tested, where there is no
// GPU. What it keeps of a GPU's behaviour:
//  - device pointers fault when host code dereferences them (HostMemory);
//  - streams are worker threads (HostStream): queued work runs later, in
//    order, concurrently with the host and with other streams, so a missing
//    wait shows as a wrong result or a race (ThreadSanitizer);
//  - events are generations: Record queues a marker, StreamWait waits for
//    the generation current when it is called;
//  - copies between host and device refuse pageable host memory; every
//    pointer of a call is checked against the allocations;
//  - kernels are the CPU kernels (kernels/), so results match the CPU's
//    bit for bit;
//  - QueryPointer is counted (pointer_queries), so tests can tell that a
//    steady-state call asks nothing;
//  - "IPC" maps another host device's memory (its memfd, through
//    /proc/<pid>/fd) into this one's addresses, in this process or another;
//  - a fault of queued work (injected: FaultNextDeviceCopy) breaks the
//    device for good, as CUDA's sticky errors do: queued work no longer
//    runs, and every later call that queues work, waits or queries fails.
// Free, as cudaFree, waits for the device's queued work first.
//
// Thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>

#include "common/mutex.h"
#include "doubles/host_memory.h"
#include "doubles/host_stream.h"
#include "gpu/device.h"

namespace hora::gpu {

class HostDevice final : public Device {
 public:
  // Device `ordinal`, with `span` bytes of device addresses.
  static Result<std::unique_ptr<HostDevice>> Create(int ordinal = 0,
                                                    size_t span = size_t{16} << 30);
  ~HostDevice() override;

  const DeviceInfo& info() const override { return info_; }
  Result<void*> Allocate(size_t bytes) override;
  Status Free(void* p) override;
  Result<void*> AllocatePinned(size_t bytes) override;
  Status FreePinned(void* p) override;

  Result<Stream> CreateStream() override;
  Status DestroyStream(Stream s) override;
  Result<Event> CreateEvent() override;
  Status DestroyEvent(Event e) override;
  Status Record(Event e, Stream s) override;
  Status StreamWait(Stream s, Event e) override;
  Result<bool> Query(Event e) override;
  Status Wait(Event e, TimePoint deadline) override;

  Status Copy(void* dst, const void* src, size_t bytes, CopyKind kind, Stream s) override;
  Status BatchedCopy(std::span<const CopyPart> parts, Stream s) override;
  Status Memset(void* dst, uint8_t value, size_t bytes, Stream s) override;

  Result<PointerInfo> QueryPointer(const void* p) override;
  Result<IpcMemHandle> ExportMemory(void* p) override;
  Result<void*> OpenMemory(const IpcMemHandle& handle) override;
  Status CloseMemory(void* p) override;
  // (Every host device reaches every other's memory through its pointers
  // only when they are one device: see OpenMemory.)
  Status EnablePeerAccess(int) override { return Status::Ok(); }

  Status Reduce(DataType dtype, ReduceOp op, void* dst, std::span<const void* const> srcs,
                size_t count, Stream s) override;
  Status Scale(DataType dtype, double factor, void* dst, const void* src, size_t count,
               Stream s) override;
  Status Finalize(DataType dtype, ReduceOp op, int world_size, double postscale, void* data,
                  size_t count, Stream s) override;

  // Runs `work` on the host in stream order (as cudaLaunchHostFunc): for
  // tests, a gate that holds a stream back.
  Status RunOnStream(Stream s, std::function<void()> work);
  // The bytes behind device memory [p, p + bytes), for work that runs on a
  // stream (RunOnStream) and reads or writes them as a kernel would: such
  // work must not wait for the device (a blocking copy waits for every
  // stream, its own too).
  Result<std::byte*> Backing(const void* p, size_t bytes) const {
    return DeviceBytes(p, bytes, "memory");
  }

  // For tests: each copy from host to device memory queued from now on
  // starts `delay` late on its stream, as on a slow GPU (0: none).
  void DelayCopiesToDevice(Duration delay) { to_device_delay_ns_.store(delay.count()); }
  // For tests: from now until ReleaseCopies, each copy of `kind` queued
  // after the first `pass` of them waits on its stream until the release
  // (at most 60 s), as on a GPU that is still busy: what happens on the
  // host meanwhile is then known not to have waited for it.
  void HoldCopies(CopyKind kind, size_t pass = 0) HORA_EXCLUDES(mu_);
  void ReleaseCopies() HORA_EXCLUDES(mu_);

  // For tests: the next device-to-device copy queued from now on (a Copy
  // or a BatchedCopy) faults when it runs on its stream, after the call
  // that queued it returned, as a copy that reads freed memory does on a
  // GPU: it copies nothing, and the device is broken from then on.
  void FaultNextDeviceCopy() { fault_armed_.store(true); }

  // QueryPointer calls so far.
  uint64_t pointer_queries() const { return pointer_queries_.load(); }
  // CreateEvent calls so far.
  uint64_t events_created() const { return events_created_.load(); }
  // Copy calls of `kind` so far, and BatchedCopy calls (each one launch on a
  // GPU, whatever its parts).
  uint64_t copies(CopyKind kind) const { return copies_[static_cast<size_t>(kind)].load(); }
  uint64_t batched_copies() const { return batched_copies_.load(); }

 private:
  struct HostEvent;
  struct CopyHold;
  HostDevice(int ordinal, std::unique_ptr<HostMemory> memory);
  std::shared_ptr<HostStream> FindStream(Stream s) HORA_EXCLUDES(mu_);
  std::shared_ptr<HostEvent> FindEvent(Event e) HORA_EXCLUDES(mu_);
  void DrainAll() HORA_EXCLUDES(mu_);
  // The device's error once queued work faulted (OK before).
  Status Broken() const;
  // `work` as queued: skipped once the device is broken; `fault`: it
  // faults instead (FaultNextDeviceCopy).
  std::function<void()> Guarded(std::function<void()> work, bool fault = false);
  // The backing bytes of device range [p, p + bytes), or an error naming
  // `what` ("reduce destination").
  Result<std::byte*> DeviceBytes(const void* p, size_t bytes, const char* what) const;

  DeviceInfo info_;
  std::unique_ptr<HostMemory> memory_;
  Mutex mu_;
  std::map<uint64_t, std::shared_ptr<HostStream>> streams_ HORA_GUARDED_BY(mu_);
  std::map<uint64_t, std::shared_ptr<HostEvent>> events_ HORA_GUARDED_BY(mu_);
  // Stream and event ids start far from DLPack's reserved stream values (1:
  // CUDA's legacy default stream, 2: its per-thread one).
  uint64_t next_id_ HORA_GUARDED_BY(mu_) = 0x1000;
  std::shared_ptr<CopyHold> copy_hold_ HORA_GUARDED_BY(mu_);  // (HoldCopies)
  std::atomic<uint64_t> pointer_queries_{0};
  std::atomic<uint64_t> events_created_{0};
  std::atomic<uint64_t> copies_[3] = {0, 0, 0};  // by CopyKind
  std::atomic<uint64_t> batched_copies_{0};
  std::atomic<Duration::rep> to_device_delay_ns_{0};
  std::atomic<bool> fault_armed_{false};
  std::atomic<bool> broken_{false};
};

}  // namespace hora::gpu
