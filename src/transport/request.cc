// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "transport/request.h"

#include <thread>

#include "common/units.h"

namespace hora {

void RequestState::Complete(Status status) {
  if (!done_.Claim()) return;  // first result wins
  status_ = std::move(status);
  done_.Set();
}

Status RequestState::Wait(TimePoint deadline) {
  // A short spin catches completions that are microseconds away without a
  // sleep/wake round trip; then sleep on the futex.
  for (int i = 0; i < 64 && !done(); ++i) std::this_thread::yield();
  if (done_.WaitUntil(deadline)) return status_;
  return TimeoutError("timed out " + Describe());
}

std::string RequestState::Describe() const {
  return std::string(is_send_ ? "sending " : "receiving ") + FormatBytes(bytes_) +
         (is_send_ ? " to rank " : " from rank ") +
         std::to_string(display_peer_ >= 0 ? display_peer_ : peer_);
}

}  // namespace hora
