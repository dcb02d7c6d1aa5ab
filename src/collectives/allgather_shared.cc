// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Allgather on a shared window (transport/shared_window.h): in each round
// every rank copies a piece of its block (up to half its region) into its
// region, one step, and then copies every other rank's piece out of theirs
// into its output; its own block goes from its input to its output
// directly. Rounds alternate the regions' halves (NextHalf), so that a
// round's pieces stay readable while the next round's are written.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/shared_common.h"

namespace hora {

Status AllgatherShared(Comm& comm, const void* in, void* out,
                       std::span<const size_t> bytes_per_rank) {
  CollectiveScope scope(comm, "allgather", "shared_memory");
  const int n = comm.size();
  const auto r = static_cast<size_t>(comm.rank());
  HORA_RETURN_IF_ERROR(CheckSplitCount(comm, "allgather", "sizes", bytes_per_rank.size()));
  std::vector<size_t> offset(static_cast<size_t>(n), 0);
  for (size_t q = 1; q < offset.size(); ++q) offset[q] = offset[q - 1] + bytes_per_rank[q - 1];
  const size_t total = offset.back() + bytes_per_rank.back();
  auto* dst = static_cast<std::byte*>(out);
  const auto* mine = static_cast<const std::byte*>(in);
  if (n == 1) {
    if (bytes_per_rank[0] > 0 && mine != dst) std::memmove(dst, mine, bytes_per_rank[0]);
    return Status::Ok();
  }
  SharedWindow& w = *comm.window();
  const size_t piece = w.bytes() / 2;
  const size_t longest = *std::max_element(bytes_per_rank.begin(), bytes_per_rank.end());
  size_t done = 0;
  bool first = true;
  do {
    const size_t half = w.NextHalf() * piece;
    auto length = [&](size_t q) {
      return std::min(piece, bytes_per_rank[q] - std::min(bytes_per_rank[q], done));
    };
    if (length(r) > 0) std::memcpy(w.local() + half, mine + done, length(r));
    if (first) {
      // (The data type's byte holds the split's hash: bytes have no type.)
      HORA_RETURN_IF_ERROR(SharedFirstStep(
          comm, SharedCall::kAllgather, static_cast<DataType>(SplitsHash(bytes_per_rank)), total));
      first = false;
    } else {
      HORA_RETURN_IF_ERROR(comm.WindowStep(0));
    }
    for (size_t q = 0; q < static_cast<size_t>(n); ++q) {
      if (q != r && length(q) > 0) {
        std::memcpy(dst + offset[q] + done, w.region(static_cast<int>(q)) + half, length(q));
      }
    }
    done += piece;
  } while (done < longest);
  if (bytes_per_rank[r] > 0 && mine != dst + offset[r]) {
    std::memmove(dst + offset[r], mine, bytes_per_rank[r]);
  }
  return Status::Ok();
}

}  // namespace hora
