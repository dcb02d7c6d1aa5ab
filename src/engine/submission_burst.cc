// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/submission_burst.h"

#include <thread>

namespace hora {

void WaitOutSubmissionBurst(const std::atomic<uint64_t>& submissions,
                            const std::atomic<int>& drivers, Duration at_most) {
  constexpr auto kBurstGap = std::chrono::microseconds(5);
  uint64_t seen = submissions.load(std::memory_order_acquire);
  TimePoint last = Clock::now();
  const TimePoint until = last + at_most;
  for (;;) {
    std::this_thread::yield();
    if (drivers.load(std::memory_order_acquire) > 0) return;
    const TimePoint now = Clock::now();
    const uint64_t n = submissions.load(std::memory_order_acquire);
    if (n != seen) {
      seen = n;
      last = now;
    } else if (now - last >= kBurstGap) {
      return;
    }
    if (now >= until) return;
  }
}

}  // namespace hora
