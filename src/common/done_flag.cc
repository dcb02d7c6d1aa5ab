// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "common/done_flag.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

namespace hora {

void DoneFlag::Set() {
  if (state_.fetch_or(kDone, std::memory_order_acq_rel) & kWaiter) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
            nullptr, 0);
  }
}

bool DoneFlag::WaitUntil(TimePoint deadline) {
  for (;;) {
    if (IsSet()) return true;
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - Clock::now());
    if (left.count() <= 0) return IsSet();
    // Announce the sleeper; Set() after this sees kWaiter and wakes us, and
    // a Set() before it makes the futex return at once (value changed).
    const uint32_t seen = state_.fetch_or(kWaiter, std::memory_order_acq_rel) | kWaiter;
    if (seen & kDone) return true;
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(left.count() / 1000000000);
    ts.tv_nsec = static_cast<long>(left.count() % 1000000000);
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAIT_PRIVATE, seen, &ts, nullptr,
            0);
  }
}

}  // namespace hora
