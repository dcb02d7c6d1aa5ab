// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// How Hora's collectives lay out a 64-bit Tag (collectives/comm.h builds
// them): context (6 bits) | call sequence (18) | phase (4) | step (18) |
// segment (18). A transport matches tags whole and need not know this; one
// that must pack them into fewer bits (MPI offers 15 to 31) reads the
// fields here.
#pragma once

#include <cstdint>
#include <string>

namespace hora::tag_layout {

inline constexpr int kContextShift = 58;
inline constexpr int kContextBits = 64 - kContextShift;
inline constexpr uint32_t kMaxContexts = 1u << kContextBits;
inline constexpr int kSequenceShift = 40;
inline constexpr uint64_t kSequenceMask = 0x3ffff;
// (No algorithm uses phase 15: with it, a tag of context 63 whose other
// fields are all at their maximum would reach the TCP transport's control
// tags, ~0 - 2 and up.)
inline constexpr int kPhaseShift = 36;
inline constexpr int kPhaseBits = 4;
inline constexpr uint64_t kPhaseMask = 0xf;
inline constexpr int kStepShift = 18;
inline constexpr uint64_t kStepMask = 0x3ffff;
inline constexpr uint64_t kSegmentMask = 0x3ffff;

// A tag as people read it in an error: "call 5, phase 1, step 3, segment 0
// of context 2" (the fields above; the call counts the group's collectives,
// so two ranks that disagree on one message show where they stand), or
// "control message" for a transport's own (phase 15).
inline std::string Describe(uint64_t tag) {
  const uint64_t phase = (tag >> kPhaseShift) & kPhaseMask;
  if (phase == kPhaseMask) return "control message";
  return "call " + std::to_string((tag >> kSequenceShift) & kSequenceMask) + ", phase " +
         std::to_string(phase) + ", step " + std::to_string((tag >> kStepShift) & kStepMask) +
         ", segment " + std::to_string(tag & kSegmentMask) + " of context " +
         std::to_string(tag >> kContextShift);
}

}  // namespace hora::tag_layout
