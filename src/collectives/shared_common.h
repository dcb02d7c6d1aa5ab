// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Pieces shared by the collectives written on a SharedWindow
// (transport/shared_window.h): the word a collective publishes with its first
// step, naming the collective, the data type and the size, and the check of
// the words every rank published, so that ranks that called different
// collectives or sizes fail alike (a Mismatch naming each rank's call) with
// their window still usable, instead of reading each other's regions wrongly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "collectives/comm.h"
#include "hora/types.h"

namespace hora {

enum class SharedCall : uint8_t {
  kAllreduce = 1,
  kBarrier = 2,
  kBitwiseAnd = 3,
  kDeviceWindow = 4,     // a GPU window's setup or teardown (device_window.h)
  kDeviceAllreduce = 5,  // allreduce_device_window.h
  kBroadcast = 6,        // its root (mod 256) where the data type goes
  kReducescatter = 7,
  kAllgather = 8,
  kAlltoall = 9,  // its data type's byte the splits' hash
};

// `bytes` must be below 2^45.
uint64_t SharedWord(SharedCall call, DataType dtype, uint64_t bytes);

// A collective whose ranks split its data (allgather, reducescatter) names
// the split in its first step's word too, so that ranks that agree on the
// total but not on its split fail alike: 8 bits of a hash of `splits`.
uint8_t SplitsHash(std::span<const size_t> splits);
// Reducescatter's word carries its data type, so the hash goes in the size
// field above its low kSplitSizeBits bits (reducescatters of 2^37 bytes or
// more run on the ring).
inline constexpr int kSplitSizeBits = 37;

// Takes the collective's first step with SharedWord(call, dtype, bytes) and
// checks that every rank published the same word. Every collective on a
// window calls NextHalf() once before it (and once per further chunk), so
// that after a Mismatch the ranks' halves are still in step.
Status SharedFirstStep(Comm& comm, SharedCall call, DataType dtype, uint64_t bytes);

// What a rank says with a flagged step, in a collective in which a rank may
// fail on its own (its device) and must still take every step.
enum class RankState : uint8_t {
  kOk = 0,
  kFailed = 1,  // this rank failed, and its device has done all it was given
  kStuck = 2,   // it failed, and its device may still be at work (a wait timed out)
};
// What every rank said: `failed` names the ranks that failed ("rank 2",
// "ranks 0, 3"; empty when none), `several` whether more than one did,
// `stuck` whether any said kStuck, `first` the first of them (as the
// Comm numbers its ranks; -1 when none). The same on every rank.
struct StepVerdict {
  std::string failed;
  bool several = false;
  bool stuck = false;
  int first = -1;
};

// SharedFirstStep for such a collective: `state` goes with this rank's
// word, and `*verdict` says what every rank's said. Ranks that called
// different collectives or sizes are still a Mismatch.
Status SharedFirstStepFlagged(Comm& comm, SharedCall call, DataType dtype, uint64_t bytes,
                              RankState state, StepVerdict* verdict);
// A later step of such a collective: `state` and `*verdict` as there.
Status SharedFlaggedStep(Comm& comm, RankState state, StepVerdict* verdict);

// Whether the *_shared algorithms can run on `comm`: it has a window (which
// is not broken) and more than one rank.
inline bool SharedUsable(const Comm& comm) {
  return comm.size() > 1 && comm.window() != nullptr && !comm.window()->broken();
}

}  // namespace hora
