// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Time types used for every bounded wait, and the pause of a spin loop.
#pragma once

#include <chrono>
#include <thread>

namespace hora {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Duration = std::chrono::nanoseconds;

// Saturates: a number of seconds beyond what nanoseconds hold (about 292
// years) gives the largest Duration, a negative one or NaN zero.
inline Duration SecondsToDuration(double s) {
  if (!(s > 0)) return Duration::zero();
  if (s >= 9.2e9) return Duration::max();
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s));
}

inline double DurationToSeconds(Duration d) { return std::chrono::duration<double>(d).count(); }

// `d` from `now`, saturating at the clock's end (Duration::max() means never).
inline TimePoint DeadlineAfter(TimePoint now, Duration d) {
  return d >= TimePoint::max() - now ? TimePoint::max() : now + d;
}

// Relaxes the CPU inside a spin loop (x86 PAUSE, ARM YIELD).
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins (pausing the CPU, and yielding it to other threads every few
// microseconds, so that a spinning waiter on a busy core does not hold up the
// thread it waits for) until `ready()` is true or `limit` has passed; returns
// ready(). Waking a sleeping thread costs 10-30 us on a virtual machine, so a
// wait that usually ends within microseconds spins first and sleeps after.
template <typename Ready>
bool SpinUntil(Ready&& ready, Duration limit) {
  if (ready()) return true;
  const TimePoint until = Clock::now() + limit;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      CpuRelax();
    }
    if (Clock::now() >= until) return ready();
    std::this_thread::yield();
  }
}

}  // namespace hora
