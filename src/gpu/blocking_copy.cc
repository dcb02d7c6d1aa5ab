// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "gpu/blocking_copy.h"

#include <cstring>

namespace hora::gpu {
namespace {

// A stream, an event and a pinned buffer of `bytes`, given back when it goes
// (errors then have nobody to go to).
class Scratch {
 public:
  Scratch(Device& device, size_t bytes) : device_(device) {
    Result<Stream> s = device_.CreateStream();
    Result<Event> e = s.ok() ? device_.CreateEvent() : Result<Event>(s.status());
    Result<void*> p = e.ok() ? device_.AllocatePinned(bytes) : Result<void*>(e.status());
    if (s.ok()) stream_ = *s;
    if (e.ok()) event_ = *e;
    if (p.ok()) pinned_ = *p;
    status_ = p.status();
  }
  ~Scratch() {
    if (pinned_ != nullptr) (void)device_.FreePinned(pinned_);
    if (event_.id != 0) (void)device_.DestroyEvent(event_);
    if (stream_.id != 0) (void)device_.DestroyStream(stream_);
  }
  const Status& status() const { return status_; }
  void* pinned() const { return pinned_; }
  Status Copy(void* dst, const void* src, size_t bytes, CopyKind kind, Duration timeout) {
    HORA_RETURN_IF_ERROR(device_.Copy(dst, src, bytes, kind, stream_));
    HORA_RETURN_IF_ERROR(device_.Record(event_, stream_));
    return device_.Wait(event_, DeadlineAfter(Clock::now(), timeout));
  }

 private:
  Device& device_;
  Stream stream_;
  Event event_;
  void* pinned_ = nullptr;
  Status status_;
};

}  // namespace

Status CopyHostToDevice(Device& device, void* dst, const void* src, size_t bytes,
                        Duration timeout) {
  if (bytes == 0) return Status::Ok();
  Scratch s(device, bytes);
  HORA_RETURN_IF_ERROR(s.status());
  std::memcpy(s.pinned(), src, bytes);
  return s.Copy(dst, s.pinned(), bytes, CopyKind::kHostToDevice, timeout);
}

Status CopyDeviceToHost(Device& device, void* dst, const void* src, size_t bytes,
                        Duration timeout) {
  if (bytes == 0) return Status::Ok();
  Scratch s(device, bytes);
  HORA_RETURN_IF_ERROR(s.status());
  HORA_RETURN_IF_ERROR(s.Copy(s.pinned(), src, bytes, CopyKind::kDeviceToHost, timeout));
  std::memcpy(dst, s.pinned(), bytes);
  return Status::Ok();
}

Status CopyWithinDevice(Device& device, Stream stream, void* dst, const void* src, size_t bytes,
                        Duration timeout) {
  if (bytes == 0) return Status::Ok();
  HORA_ASSIGN_OR_RETURN(const Event e, device.CreateEvent());
  Status st = device.Copy(dst, src, bytes, CopyKind::kDeviceToDevice, stream);
  if (st.ok()) st = device.Record(e, stream);
  if (st.ok()) st = device.Wait(e, DeadlineAfter(Clock::now(), timeout));
  (void)device.DestroyEvent(e);
  return st;
}

}  // namespace hora::gpu
