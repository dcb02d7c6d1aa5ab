// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The pieces of the shared-window allreduce (AllreducePartsShared), for a
// caller that puts a chunk of data in the window within a step of its own:
// the engine sends its cycle's cached allreduce along with its bit vector
// (AllreduceBitwiseAndCarrying, bitwise_and.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/comm.h"

namespace hora {

// The parts of a packed allreduce as one sequence of elements.
class SharedParts {
 public:
  explicit SharedParts(std::span<const AllreducePart> parts);
  size_t total() const { return total_; }

  // fn(part, offset in part, offset in the sequence, count) for each stretch
  // of [begin, end) that lies in one part, in order.
  template <typename Fn>
  void Visit(size_t begin, size_t end, Fn&& fn) const;

 private:
  std::span<const AllreducePart> parts_;
  std::vector<size_t> starts_;
  size_t total_ = 0;
};

// Elements [offset, offset + size) of a chunk.
struct ChunkPiece {
  size_t offset = 0;
  size_t size = 0;
};

// The piece of a chunk of `count` elements that this rank reduces and that
// it may leave out of its copy in (SharedCopyIn's `skip`), reading its input
// in place instead: its own piece in the two-step path (above 16 KiB), where
// no other rank reads this rank's copy of it; none where the copy in scales
// (a prescale, or bool's 0/1), or in the one-step path.
ChunkPiece SharedOwnPiece(const Comm& comm, DataType dtype, const Reduction& reduction,
                          size_t count);

// Copies (or prescales) elements [begin, begin + count) of the parts'
// inputs to `dst`, but for the chunk's elements `skip` (left unwritten).
void SharedCopyIn(const SharedParts& parts, DataType dtype, const Reduction& reduction,
                  size_t begin, size_t count, std::byte* dst, ChunkPiece skip = {});

// Every rank's copy of elements [begin, begin + count) lies in its region at
// byte `base` (a multiple of 64), but for the piece `skipped` of this rank's
// (SharedOwnPiece, read from the parts' inputs instead), and the step that
// put it there is over: reduces them into the parts' outputs (one more step
// above 16 KiB).
Status SharedReduceChunk(Comm& comm, const SharedParts& parts, DataType dtype,
                         const Reduction& reduction, size_t base, size_t begin, size_t count,
                         ChunkPiece skipped = {});

template <typename Fn>
void SharedParts::Visit(size_t begin, size_t end, Fn&& fn) const {
  // The last part starting at or before `begin`.
  size_t i = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), begin) -
                                 starts_.begin());
  i = i == 0 ? 0 : i - 1;
  for (size_t at = begin; at < end && i < parts_.size(); ++i) {
    const size_t part_end = starts_[i] + parts_[i].count;
    if (part_end <= at) continue;
    const size_t stop = std::min(end, part_end);
    fn(parts_[i], at - starts_[i], at, stop - at);
    at = stop;
  }
}

}  // namespace hora
