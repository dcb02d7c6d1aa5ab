// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "transport/request.h"

#include <thread>

#include "common/units.h"

namespace hora {

void RequestState::Complete(Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_.load(std::memory_order_relaxed)) return;
    status_ = std::move(status);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

Status RequestState::Wait(TimePoint deadline) {
  // A short spin catches completions that are microseconds away without a
  // sleep/wake round trip; then block.
  for (int i = 0; i < 64 && !done(); ++i) std::this_thread::yield();
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_until(lock, deadline, [&] { return done_.load(std::memory_order_acquire); })) {
    return TimeoutError("timed out " + Describe());
  }
  return status_;
}

Status RequestState::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

std::string RequestState::Describe() const {
  return std::string(is_send_ ? "sending " : "receiving ") + FormatBytes(bytes_) +
         (is_send_ ? " to rank " : " from rank ") +
         std::to_string(display_peer_ >= 0 ? display_peer_ : peer_);
}

}  // namespace hora
