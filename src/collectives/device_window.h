// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// DeviceWindow: device memory that every rank of a host reads directly
// (CUDA IPC windows, docs/dev/gpu.md, "Within a host"), for the GPU collectives written on
// it (allreduce_device_window.h). Each rank allocates its own window of two
// halves on its device and exports it; the others map it by its handle
// (Device::OpenMemory), or, for a rank of the same process whose memory the
// device already reaches, use its pointer (CUDA refuses a process its own
// handles). The ranks keep in step through the host shared window of the
// same Comm (transport/shared_window.h); the device is waited for by the
// host before each step, so that a step proves every rank's device work
// before it is done.
//
// Open is collective: every rank of the Comm calls it at the same point, and
// all get a window or all get none (a rank that is not willing, or whose
// device cannot allocate, export or map, says so in its step word). Close is
// collective too: every rank unmaps its peers' windows, then a step, then
// each frees its own, so that no rank frees memory another still maps. A
// window destroyed without Close (the job failing) waits for its device
// (bounded), then unmaps and frees.
//
// Not thread-safe: one collective at a time (the engine's cycle).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/comm.h"
#include "common/clock.h"
#include "gpu/device.h"

namespace hora {

class DeviceWindow {
 public:
  // How the host waits for an event, at most `bound`: the device's own
  // wait where empty. (The engine's waits in slices where NCCL's work on
  // the stream may wait for a peer that was lost: device/device_staging.h.)
  using Await = std::function<Status(gpu::Event event, Duration bound)>;

  // Collective on `comm` (SharedUsable: more than one rank, a host window):
  // a window of `bytes` per rank on `device`, worked on `stream`, with host
  // waits for the device bounded by `timeout`, through `await`. Null (and
  // `why_not` set) when some rank is not `willing`, asked for another size,
  // or failed to set up its part; an error only when the step itself fails
  // (a rank lost, a mismatch of collectives), which leaves the host window
  // broken.
  static Result<std::unique_ptr<DeviceWindow>> Open(Comm& comm, std::shared_ptr<gpu::Device> device,
                                                    gpu::Stream stream, size_t bytes,
                                                    Duration timeout, bool willing, Await await,
                                                    std::string* why_not);
  ~DeviceWindow();
  DeviceWindow(const DeviceWindow&) = delete;
  DeviceWindow& operator=(const DeviceWindow&) = delete;

  // Collective: waits for this rank's device to finish its work on the
  // windows, unmaps the peers', steps, frees its own. A rank whose device
  // does not finish (or a retired window) leaves its window and mappings in
  // place, and so does every rank once one says so; after a failed step it
  // still unmaps and frees (its peers are gone or failing).
  Status Close(Comm& comm);

  // Given up (the same on every rank: a step said a rank's device may still
  // be at work on the windows): no collective uses it again, and it is not
  // freed (a device may still read it).
  void Retire() { retired_ = true; }
  bool retired() const { return retired_; }

  int size() const { return static_cast<int>(regions_.size()); }
  // Bytes of one half of a region (a multiple of 256).
  size_t half_bytes() const { return half_bytes_; }
  // Half `half` (0 or 1) of rank k's region, in this device's addresses.
  std::byte* region(int k, size_t half) const {
    return regions_[static_cast<size_t>(k)] + half * half_bytes_;
  }
  // 0, 1, 0, ...: the half the next chunk uses (the same on every rank).
  size_t NextHalf() { return static_cast<size_t>(halves_++ & 1u); }

  gpu::Device& device() const { return *device_; }
  gpu::Stream stream() const { return stream_; }
  // Waits on the host until the device has done what was queued on the
  // stream (at most the timeout); `what` names the step in the error.
  Status WaitDevice(const char* what);
  // Waits (as bounded) for `event`, recorded on this window's stream.
  Status WaitEvent(gpu::Event event, const char* what);
  // Replaces the waits' way (the owner clears it before it goes, so that
  // the destructor's wait needs nothing of it).
  void AwaitWith(Await await) { await_ = std::move(await); }
  // A private device buffer of at least `bytes` (the small-chunk path's
  // accumulator), allocated at Open for up to kScratchBytes.
  std::byte* scratch() const { return scratch_; }
  static constexpr size_t kScratchBytes = 16 * 1024;

 private:
  DeviceWindow(Comm& comm, std::shared_ptr<gpu::Device> device, gpu::Stream stream,
               Duration timeout, Await await);
  // This rank's part of Open before the exchange: window, scratch, event,
  // export. An error means this rank cannot take part.
  Status SetUpLocal(size_t bytes);
  // Maps every peer's window from what it published.
  Status MapPeers(Comm& comm, size_t half);
  // Unmaps the peers' windows.
  void UnmapPeers();
  // Frees this rank's window, scratch and event.
  void FreeLocal();
  // Forgets them without freeing (a device may still use them).
  void Leak();

  std::shared_ptr<gpu::Device> device_;
  const gpu::Stream stream_;
  const Duration timeout_;
  Await await_;
  const int rank_;
  size_t half_bytes_ = 0;
  uint64_t halves_ = 0;
  bool retired_ = false;
  std::byte* own_ = nullptr;
  std::byte* scratch_ = nullptr;
  gpu::Event event_;
  gpu::IpcMemHandle handle_;
  std::vector<std::byte*> regions_;  // every rank's window, this rank's own included
  std::vector<bool> opened_;         // mapped by OpenMemory (to be closed)
};

}  // namespace hora
