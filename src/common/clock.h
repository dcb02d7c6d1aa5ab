// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Time types used for every bounded wait, and the pause of a spin loop.
#pragma once

#include <chrono>

namespace hora {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Duration = std::chrono::nanoseconds;

inline Duration SecondsToDuration(double s) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s));
}

inline double DurationToSeconds(Duration d) { return std::chrono::duration<double>(d).count(); }

// Relaxes the CPU inside a spin loop (x86 PAUSE, ARM YIELD).
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace hora
