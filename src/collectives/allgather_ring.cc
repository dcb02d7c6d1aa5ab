// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Ring allgather with per-rank sizes: each rank places its block in the
// output, then n-1 steps pass blocks around the ring (block r-s at step s),
// forwarding each segment as soon as it has arrived. Where every block is
// read in place (shared memory's single copy), or HORA_BLOCKS_AT_ONCE=1,
// every block at once instead; two ranks that read each other's large
// blocks in place exchange them so (pair_in_place.h).
#include <cstring>
#include <numeric>

#include "collectives/algorithms.h"
#include "collectives/blocks_at_once.h"
#include "collectives/pair_in_place.h"
#include "collectives/ring_phases.h"

namespace hora {

Status AllgatherRing(Comm& comm, const void* in, void* out,
                     std::span<const size_t> bytes_per_rank) {
  CollectiveScope scope(comm, "allgather", "ring");
  const size_t r = static_cast<size_t>(comm.rank());
  HORA_RETURN_IF_ERROR(CheckSplitCount(comm, "allgather", "sizes", bytes_per_rank.size()));
  const size_t offset =
      std::accumulate(bytes_per_rank.begin(), bytes_per_rank.begin() + r, size_t{0});
  auto* mine = static_cast<std::byte*>(out) + offset;
  if (comm.size() == 2 && PairInPlace(comm, bytes_per_rank[r], bytes_per_rank[1 - r])) {
    // The peer reads `in` while this rank copies it into place; `in` is
    // either that place or apart from `out`.
    scope.SetAlgorithm("pair_in_place");
    const size_t peer_offset = r == 0 ? bytes_per_rank[0] : 0;
    return ExchangePairInPlace(comm, in, bytes_per_rank[r],
                               static_cast<std::byte*>(out) + peer_offset, bytes_per_rank[1 - r],
                               mine, in, bytes_per_rank[r]);
  }
  if (AllgatherAtOnce(comm, bytes_per_rank)) {
    // Its readers read `in` while this rank copies it into place.
    scope.SetAlgorithm("at_once");
    return AllgatherBlocksAtOnce(comm, out, bytes_per_rank, /*phase=*/0, /*skip=*/-1,
                                 in != mine ? in : nullptr);
  }
  if (bytes_per_rank[r] > 0 && in != mine) std::memmove(mine, in, bytes_per_rank[r]);
  return RingAllgatherInPlace(comm, out, bytes_per_rank, /*phase=*/0);
}

}  // namespace hora
