// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A batch of GPU tensors finished on the device: an event recorded on the
// rank's stream after the last copy of the batch's results (Horovod's async
// completion). The handles of the batch share it: the host waits for it
// (Handle::Wait), or hands it to a framework's stream, which waits for it
// in its own order (Handle::StreamWait), so the host does not.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "gpu/device.h"

namespace hora {

class DoneEvents;

class DeviceDone {
 public:
  // What errors name: the collective, the rank and its GPU ("allreduce 'w'
  // (and 2 more), rank 1 on host device 0 (cuda:0)"), put into words only
  // when one is made (every batch of a step has a DeviceDone).
  struct Batch {
    const char* op = "";  // OpTypeName
    std::string name;     // its first tensor's
    size_t more = 0;      // its other tensors
    int rank = 0;
  };
  // Holds `event` of `pool`'s device (recorded after this is made).
  DeviceDone(std::shared_ptr<DoneEvents> pool, gpu::Event event, Batch batch);
  ~DeviceDone();  // gives the event back to the pool
  DeviceDone(const DeviceDone&) = delete;
  DeviceDone& operator=(const DeviceDone&) = delete;

  // Whether the device got there (or failed on the way). Never blocks.
  bool Reached() HORA_EXCLUDES(mu_);
  // Waits for it until `deadline`: the device's error if it failed, a
  // TimeoutError (and it may be waited for again) if not there by then.
  Status Wait(TimePoint deadline) HORA_EXCLUDES(mu_);
  // Later work on `stream` (a native stream handle, as a cudaStream_t; 0 is
  // CUDA's legacy default stream) waits for it.
  Status HandTo(uint64_t stream);
  // Where the device has not got there yet, its work is about to be cut
  // short (its NCCL communicator aborted, which ends the kernels without
  // their results): Wait returns `why` from now on. (A stream it was
  // handed to still waits only for the event.)
  void FailIfPending(const Status& why) HORA_EXCLUDES(mu_);
  // Where the device was found to have failed on the way (by Reached or
  // Wait): that error. OK otherwise, and until it is known.
  Status DeviceFailure() HORA_EXCLUDES(mu_);

 private:
  // Remembers the outcome once known.
  Status Settle(Status st) HORA_REQUIRES(mu_);
  // The batch_ in words.
  std::string Where() const;

  const std::shared_ptr<DoneEvents> pool_;
  gpu::Device& device_;
  const gpu::Event event_;
  const Batch batch_;
  Mutex mu_;
  bool settled_ HORA_GUARDED_BY(mu_) = false;
  Status outcome_ HORA_GUARDED_BY(mu_);
  bool failed_on_purpose_ HORA_GUARDED_BY(mu_) = false;  // (FailIfPending's)
};

// The events of DeviceDone, kept for the next batches once their handles
// are gone: a steady step creates none. (Recording an event again is safe
// once nothing waits on it through a DeviceDone: a stream's wait binds to
// the record current when it was queued.)
//
// Thread-safe.
class DoneEvents {
 public:
  explicit DoneEvents(std::shared_ptr<gpu::Device> device) : device_(std::move(device)) {}
  ~DoneEvents();  // destroys the kept events
  DoneEvents(const DoneEvents&) = delete;
  DoneEvents& operator=(const DoneEvents&) = delete;

  gpu::Device& device() const { return *device_; }
  // A kept event, or a new one.
  Result<gpu::Event> Take() HORA_EXCLUDES(mu_);
  void Give(gpu::Event e) HORA_EXCLUDES(mu_);

 private:
  const std::shared_ptr<gpu::Device> device_;
  Mutex mu_;
  std::vector<gpu::Event> kept_ HORA_GUARDED_BY(mu_);
};

}  // namespace hora
