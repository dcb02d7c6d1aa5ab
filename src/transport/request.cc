// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "transport/request.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>
#include <thread>

#include "common/units.h"

namespace hora {

namespace {

// Sleeps while *word == expected, at most until `deadline` (Linux futex).
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, TimePoint deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - Clock::now());
  if (left.count() <= 0) return;
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(left.count() / 1000000000);
  ts.tv_nsec = static_cast<long>(left.count() % 1000000000);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, &ts, nullptr,
          0);
}

}  // namespace

void RequestState::Complete(Status status) {
  if (claimed_.test_and_set(std::memory_order_acq_rel)) return;  // first result wins
  status_ = std::move(status);
  if (state_.fetch_or(kDone, std::memory_order_acq_rel) & kWaiter) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
            nullptr, 0);
  }
}

Status RequestState::Wait(TimePoint deadline) {
  // A short spin catches completions that are microseconds away without a
  // sleep/wake round trip; then sleep on the futex.
  for (int i = 0; i < 64 && !done(); ++i) std::this_thread::yield();
  for (;;) {
    if (done()) return status_;
    if (Clock::now() >= deadline) return TimeoutError("timed out " + Describe());
    const uint32_t seen = state_.fetch_or(kWaiter, std::memory_order_acq_rel) | kWaiter;
    if (seen & kDone) return status_;
    FutexWait(&state_, seen, deadline);
  }
}

std::string RequestState::Describe() const {
  return std::string(is_send_ ? "sending " : "receiving ") + FormatBytes(bytes_) +
         (is_send_ ? " to rank " : " from rank ") +
         std::to_string(display_peer_ >= 0 ? display_peer_ : peer_);
}

}  // namespace hora
