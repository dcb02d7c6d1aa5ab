// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Reduce-scatter on a shared window (transport/shared_window.h). In each
// round every rank copies (prescaling) a piece of each other rank's block
// into its region, one step, and then reduces the same piece of its own
// block straight into its output: its own input read where it is, the
// others' pieces read from their regions. Rounds alternate the regions'
// halves (NextHalf), so that a round's pieces stay readable while the next
// round's are written. Against the ring, which copies the whole input into
// a working buffer, passes n-1 blocks around and copies its block out: one
// copy of (n-1)/n of the input per rank, no working buffer and one step a
// round (docs/dev/performance.md, session 65).
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/allreduce_common.h"
#include "collectives/shared_common.h"
#include "kernels/reduce.h"

namespace hora {

Status ReducescatterShared(Comm& comm, const void* in, void* out, std::span<const size_t> counts,
                           DataType dtype, const Reduction& reduction) {
  // (Half a region holds a 64-byte piece for every rank up to 16,384 ranks
  // of a host, and the first step's word the size up to 2^37 bytes;
  // beyond, the ring.)
  const size_t all = std::accumulate(counts.begin(), counts.end(), size_t{0});
  if (comm.window() == nullptr ||
      comm.window()->bytes() / 2 / 64 < static_cast<size_t>(comm.size()) ||
      all * DataTypeSize(dtype) >= (uint64_t{1} << kSplitSizeBits)) {
    return ReducescatterRing(comm, in, out, counts, dtype, reduction);
  }
  CollectiveScope scope(comm, "reducescatter", "shared_memory");
  const int n = comm.size();
  const auto r = static_cast<size_t>(comm.rank());
  HORA_RETURN_IF_ERROR(CheckSplitCount(comm, "reducescatter", "splits", counts.size()));
  const size_t esize = DataTypeSize(dtype);
  std::vector<size_t> offset(static_cast<size_t>(n), 0);
  for (size_t q = 1; q < offset.size(); ++q) offset[q] = offset[q - 1] + counts[q - 1];
  const auto* src = static_cast<const std::byte*>(in);
  auto* dst = static_cast<std::byte*>(out);
  const AllreduceArgs mine{src + offset[r] * esize, dst, counts[r], dtype, reduction};
  if (n == 1) {
    AllreducePrologue(mine);
    AllreduceFinalize(mine, n, 0, counts[r]);
    return Status::Ok();
  }
  // A round's piece of each block: as many elements as n pieces fit in half
  // a region, each starting on a 64-byte boundary (every element size
  // divides 64).
  SharedWindow& w = *comm.window();
  const size_t half_bytes = w.bytes() / 2;
  const size_t piece = std::max<size_t>(1, half_bytes / static_cast<size_t>(n) / 64) * 64 / esize;
  const size_t longest = *std::max_element(counts.begin(), counts.end());
  const bool scales = reduction.prescale_factor != 1.0 || dtype == DataType::kBool;
  const ReduceOp op = ReducingOp(reduction.op);
  size_t done = 0;
  bool first = true;
  do {
    const size_t half = w.NextHalf() * half_bytes;
    auto length = [&](size_t q) { return std::min(piece, counts[q] - std::min(counts[q], done)); };
    for (size_t q = 0; q < static_cast<size_t>(n); ++q) {
      if (q == r || length(q) == 0) continue;
      std::byte* to = w.local() + half + q * piece * esize;
      const std::byte* from = src + (offset[q] + done) * esize;
      if (scales) {
        kernels::Scale(dtype, reduction.prescale_factor, to, from, length(q));
      } else {
        std::memcpy(to, from, length(q) * esize);
      }
    }
    if (first) {
      const uint64_t split = uint64_t{SplitsHash(counts)} << kSplitSizeBits;
      HORA_RETURN_IF_ERROR(
          SharedFirstStep(comm, SharedCall::kReducescatter, dtype, split | (all * esize)));
      first = false;
    } else {
      HORA_RETURN_IF_ERROR(comm.WindowStep(0));
    }
    if (const size_t len = length(r); len > 0) {
      // The others' copies of this piece, folded in rank order after this
      // rank's own input (prescaled into the output first where it scales).
      std::byte* acc = dst + done * esize;
      const std::byte* own = src + (offset[r] + done) * esize;
      const size_t at = half + r * piece * esize;
      int k = r == 0 ? 1 : 0;
      if (scales) {
        kernels::Scale(dtype, reduction.prescale_factor, acc, own, len);
      } else {
        kernels::Reduce3(dtype, op, acc, own, w.region(k) + at, len);
        ++k;
      }
      for (; k < n; ++k) {
        if (static_cast<size_t>(k) != r) kernels::Reduce(dtype, op, acc, w.region(k) + at, len);
      }
    }
    done += piece;
  } while (done < longest);
  AllreduceFinalize(mine, n, 0, counts[r]);
  return Status::Ok();
}

}  // namespace hora
