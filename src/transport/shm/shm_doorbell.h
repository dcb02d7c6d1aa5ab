// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The word one rank sleeps on when it has nothing to do: each rank owns a
// small shared segment holding a doorbell, and every peer rings it after
// publishing data for that rank or freeing a slot that rank waits for. The
// owner spins first (ShmTransport::Wait) and only then sleeps here, with a
// futex on a 32-bit word of the shared segment (FUTEX_WAIT, not the private
// variant: the waker may be another process with another mapping).
//
// Protocol (no lost wake-ups, and no system call when nobody sleeps):
//   owner:  seen = PrepareSleep();  // sleepers++ (an acq_rel RMW), read seq
//           if (!made progress when looking at every channel again) Sleep(seen, bound);
//           FinishSleep();          // sleepers--
//   waker:  publish the change (release store); Ring();
// Ring() reads `sleepers` with an acq_rel RMW, so either it sees the owner
// registered (and bumps seq, then FUTEX_WAKE: the sleep returns or never
// starts, since the kernel compares seq with `seen`), or the owner's
// registration came later and its second look at the channels sees the change.
//
// Thread-safety: Ring() from any thread of any process; the other methods
// only from the owner's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/clock.h"
#include "hora/status.h"

namespace hora {

class ShmDoorbell {
 public:
  static constexpr size_t kSegmentBytes = 4096;
  // Lays out a doorbell in a freshly created (zeroed) segment.
  static void Initialize(void* segment);
  static Status Check(const void* segment, const std::string& name);

  ShmDoorbell() = default;
  explicit ShmDoorbell(void* segment);

  // Waker: wakes the owner if it sleeps or is about to.
  void Ring();

  // Owner: see the protocol above. Sleep returns after a ring, after
  // `bound`, or spuriously; the caller re-checks its condition.
  uint32_t PrepareSleep();
  void Sleep(uint32_t seen, Duration bound);
  void FinishSleep();

 private:
  struct Word;
  Word* word_ = nullptr;
};

}  // namespace hora
