// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "gpu/device_done.h"

namespace hora {

DeviceDone::DeviceDone(std::shared_ptr<DoneEvents> pool, gpu::Event event, Batch batch)
    : pool_(std::move(pool)), device_(pool_->device()), event_(event), batch_(std::move(batch)) {}

std::string DeviceDone::Where() const {
  std::string w = std::string(batch_.op) + " '" + batch_.name + "'";
  if (batch_.more > 0) w += " (and " + std::to_string(batch_.more) + " more)";
  const gpu::DeviceInfo& info = device_.info();
  return w + ", rank " + std::to_string(batch_.rank) + " on " + info.name +
         " (cuda:" + std::to_string(info.ordinal) + ")";
}

DeviceDone::~DeviceDone() { pool_->Give(event_); }

DoneEvents::~DoneEvents() {
  MutexLock lock(mu_);
  for (gpu::Event e : kept_) (void)device_->DestroyEvent(e);
}

Result<gpu::Event> DoneEvents::Take() {
  {
    MutexLock lock(mu_);
    if (!kept_.empty()) {
      const gpu::Event e = kept_.back();
      kept_.pop_back();
      return e;
    }
  }
  return device_->CreateEvent();
}

void DoneEvents::Give(gpu::Event e) {
  MutexLock lock(mu_);
  kept_.push_back(e);
}

Status DeviceDone::Settle(Status st) {
  settled_ = true;
  outcome_ = st.ok() ? st : st.WithContext("the GPU's copies for " + Where());
  return outcome_;
}

void DeviceDone::FailIfPending(const Status& why) {
  MutexLock lock(mu_);
  if (settled_) return;
  const Result<bool> reached = device_.Query(event_);
  if (reached.ok() && *reached) {
    (void)Settle(Status::Ok());
    return;
  }
  settled_ = true;
  failed_on_purpose_ = true;
  outcome_ = why.WithContext(Where());
}

Status DeviceDone::DeviceFailure() {
  MutexLock lock(mu_);
  return settled_ && !failed_on_purpose_ ? outcome_ : Status::Ok();
}

bool DeviceDone::Reached() {
  MutexLock lock(mu_);
  if (settled_) return true;
  Result<bool> reached = device_.Query(event_);
  if (!reached.ok()) {
    (void)Settle(reached.status());
    return true;
  }
  if (*reached) (void)Settle(Status::Ok());
  return *reached;
}

Status DeviceDone::Wait(TimePoint deadline) {
  {
    MutexLock lock(mu_);
    if (settled_) return outcome_;
  }
  // (Without the lock: Reached() does not wait behind this.)
  const Status st = device_.Wait(event_, deadline);
  if (st.code() == StatusCode::kTimeout) return st.WithContext(Where());
  MutexLock lock(mu_);
  if (settled_) return outcome_;
  return Settle(st);
}

Status DeviceDone::HandTo(uint64_t stream) {
  const Status st = device_.StreamWait(gpu::Stream{stream}, event_);
  if (st.ok()) return st;
  return st.WithContext("making stream " + std::to_string(stream) + " wait for the results, " +
                        Where());
}

}  // namespace hora
