// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A one-shot completion flag: the first Claim() wins the right to write a
// result, Set() publishes it (release) and wakes sleepers, and waiters see
// it (acquire) without a lock. Sleeping is a Linux futex on the flag's own
// word, so a flag nobody sleeps on costs no system call to set and nothing
// to destroy (unlike a mutex and condition variable per completion).
//
// Thread-safety: every member may race freely with every other.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/clock.h"

namespace hora {

class DoneFlag {
 public:
  // True for the first caller only: it writes the result, then Set()s.
  bool Claim() { return !claimed_.test_and_set(std::memory_order_acq_rel); }
  // Publishes what the claimer wrote and wakes every waiter.
  void Set();
  bool IsSet() const { return (state_.load(std::memory_order_acquire) & kDone) != 0; }
  // Not set, not claimed, as new: only while nobody else can reach the flag.
  void Reset() {
    state_.store(0, std::memory_order_relaxed);
    claimed_.clear(std::memory_order_relaxed);
  }
  // Sleeps until set or `deadline`; returns IsSet(). Callers spin first
  // where completions are microseconds away.
  bool WaitUntil(TimePoint deadline);

 private:
  static constexpr uint32_t kDone = 1;
  static constexpr uint32_t kWaiter = 2;  // a thread sleeps (or is about to) on state_
  std::atomic<uint32_t> state_{0};
  std::atomic_flag claimed_;
};

}  // namespace hora
