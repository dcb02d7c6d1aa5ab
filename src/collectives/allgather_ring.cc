// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Ring allgather with per-rank sizes: each rank places its block in the
// output, then n-1 steps pass blocks around the ring (block r-s at step s),
// forwarding each segment as soon as it has arrived. Where every block is
// read in place (shared memory's single copy), every block at once instead.
#include <cstring>
#include <numeric>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/ring_phases.h"

namespace hora {
namespace {

// Whether every rank's block is read in place by every other (shared
// memory's single copy): the same answer on every rank (ReadsInPlace).
bool EveryBlockReadInPlace(Transport& t, std::span<const size_t> bytes_per_rank) {
  const int n = static_cast<int>(bytes_per_rank.size());
  if (n <= 2) return false;  // (one exchange: the ring's already)
  for (int a = 0; a < n; ++a) {
    const size_t bytes = bytes_per_rank[static_cast<size_t>(a)];
    for (int b = 0; b < n && bytes > 0; ++b) {
      if (b != a && !t.ReadsInPlace(a, b, bytes)) return false;
    }
  }
  return true;
}

// Each rank sends its block, already in place in `out`, to every other at
// once, and receives theirs: with the blocks read in place a send costs
// its rank nothing, and no block waits for a neighbour to pass it on (np
// 8, 16 MiB: 14.5-15.3 ms by the ring, 10.6-11.0 so; docs/dev/performance.md).
Status AllgatherAtOnce(Comm& comm, void* out, std::span<const size_t> bytes_per_rank) {
  const int n = comm.size();
  const int r = comm.rank();
  std::vector<size_t> off(static_cast<size_t>(n) + 1, 0);
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) off[i + 1] = off[i] + bytes_per_rank[i];
  auto* o = static_cast<std::byte*>(out);
  std::vector<Request> reqs;
  reqs.reserve(2 * static_cast<size_t>(n - 1));
  for (int s = 1; s < n; ++s) {
    const auto from = static_cast<size_t>((r - s + n) % n);
    reqs.push_back(comm.Irecv(static_cast<int>(from),
                              Comm::LocalTag(0, static_cast<uint32_t>(s), 0), o + off[from],
                              bytes_per_rank[from]));
  }
  const auto me = static_cast<size_t>(r);
  for (int s = 1; s < n; ++s) {
    reqs.push_back(comm.Isend((r + s) % n, Comm::LocalTag(0, static_cast<uint32_t>(s), 0),
                              o + off[me], bytes_per_rank[me]));
  }
  // (A failure leaves the rest to the scope, which cancels them.)
  for (const Request& q : reqs) HORA_RETURN_IF_ERROR(comm.Wait(q));
  return Status::Ok();
}

}  // namespace

Status AllgatherRing(Comm& comm, const void* in, void* out,
                     std::span<const size_t> bytes_per_rank) {
  CollectiveScope scope(comm, "allgather", "ring");
  const size_t r = static_cast<size_t>(comm.rank());
  if (bytes_per_rank.size() != static_cast<size_t>(comm.size())) {
    return InvalidArgument("allgather: " + std::to_string(bytes_per_rank.size()) +
                           " sizes given for a world of " + std::to_string(comm.size()));
  }
  const size_t offset =
      std::accumulate(bytes_per_rank.begin(), bytes_per_rank.begin() + r, size_t{0});
  auto* mine = static_cast<std::byte*>(out) + offset;
  if (bytes_per_rank[r] > 0 && in != mine) std::memmove(mine, in, bytes_per_rank[r]);
  if (EveryBlockReadInPlace(comm.transport(), bytes_per_rank)) {
    return AllgatherAtOnce(comm, out, bytes_per_rank);
  }
  return RingAllgatherInPlace(comm, out, bytes_per_rank, /*phase=*/0);
}

}  // namespace hora
