// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The engine's control messages, over its own Comm (a tag context apart
// from the data): the bitwise-AND allreduce of the fast path, and the
// gather to the coordinator and broadcast from it of the slow path.
#pragma once

#include <bit>
#include <cstdint>
#include <span>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/comm.h"

namespace hora {

// Calls f(b) for every bit b < nbits that is set in `words` (skipping zero
// words: a cycle's vector is mostly empty).
template <typename F>
void ForEachSetBit(const uint64_t* words, size_t nbits, F&& f) {
  for (size_t w = 0; w * 64 < nbits; ++w) {
    for (uint64_t bits = words[w]; bits != 0; bits &= bits - 1) {
      const size_t b = w * 64 + static_cast<size_t>(std::countr_zero(bits));
      if (b >= nbits) return;
      f(b);
    }
  }
}

// words[i] = AND over ranks of words[i]: on the Comm's shared window where it
// has one (one step), else recursive doubling (any world size).
Status AllreduceAnd(Comm& comm, std::span<uint64_t> words);

// Whether AllreduceAnd (and AllreduceAndCarrying) of `words` words runs on
// the Comm's shared window: it has a usable one, and `words` fit half of it.
bool AndOnWindow(const Comm& comm, size_t words);

// An allreduce that may go along with the bit vector (AllreduceAndCarrying).
// Its data goes in the shared window of `comm`, the Comm (other than the
// control one) that would run it on its own.
struct CarriedAllreduce {
  Comm* comm = nullptr;
  std::span<const AllreducePart> parts;
  DataType dtype = DataType::kFloat32;
  Reduction reduction;
};

// Bytes of data AllreduceAndCarrying can carry in `data`'s window along
// with `words` words on `control`'s: 0 where either has no shared window.
size_t CarriableBytes(const Comm& control, const Comm& data, size_t words);

// AllreduceAnd on `control`, with `carried`'s data (null: none) sent in the
// same step where both Comms have a shared window and the data fits
// (CarriableBytes; otherwise it is not sent): each rank writes it to the
// half of its data window that the data Comm's next step would use, while
// the others may still be on their way. If every rank carried the same
// allreduce (dtype, size, reduction) and every rank's words but the last
// (the status word) are equal, runs that allreduce to its end on the data
// Comm and returns true: it saves the step of a separate allreduce.
// Otherwise returns false, the data Comm is as it was, and nothing is
// written to the parts' outputs. `words` holds the AND either way.
Result<bool> AllreduceAndCarrying(Comm& control, std::span<uint64_t> words,
                                  const CarriedAllreduce* carried);

// Every rank's `mine` arrives at `root`, in rank order (others get nothing).
Result<std::vector<std::vector<uint8_t>>> GatherBytes(Comm& comm, int root,
                                                      const std::vector<uint8_t>& mine);

// root's `data` replaces `data` on every rank.
Status BroadcastBytes(Comm& comm, int root, std::vector<uint8_t>& data);

}  // namespace hora
