// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Scatter-allgather broadcast (van de Geijn): the root sends block b of the
// message to rank b, then a ring allgather delivers every block everywhere.
// Each rank sends and receives about 2(n-1)/n of the message instead of the
// binomial tree's log2(n) whole copies: for large messages. Where every
// block is read in place (shared memory's single copy), or
// HORA_BLOCKS_AT_ONCE=1, the allgather posts every block at once
// (blocks_at_once.h).
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/blocks_at_once.h"
#include "collectives/partition.h"
#include "collectives/ring_phases.h"

namespace hora {

Status BroadcastScatterAllgather(Comm& comm, void* data, size_t bytes, int root) {
  CollectiveScope scope(comm, "broadcast", "scatter_allgather");
  const int n = comm.size();
  const int r = comm.rank();
  HORA_RETURN_IF_ERROR(CheckBroadcastRoot(comm, root));
  if (n == 1) return Status::Ok();
  const EvenPartition part{bytes, static_cast<size_t>(n)};
  auto* base = static_cast<std::byte*>(data);
  std::vector<size_t> sizes(static_cast<size_t>(n));
  for (size_t b = 0; b < sizes.size(); ++b) sizes[b] = part.size(b);

  if (r == root) {
    std::vector<Request> sends;
    for (int b = 0; b < n; ++b) {
      if (b == root || sizes[static_cast<size_t>(b)] == 0) continue;
      sends.push_back(comm.Isend(b, Comm::LocalTag(0, 0, 0),
                                 base + part.offset(static_cast<size_t>(b)),
                                 sizes[static_cast<size_t>(b)]));
    }
    for (const Request& s : sends) HORA_RETURN_IF_ERROR(comm.Wait(s));
  } else if (sizes[static_cast<size_t>(r)] > 0) {
    Request rq =
        comm.Irecv(root, Comm::LocalTag(0, 0, 0), base + part.offset(static_cast<size_t>(r)),
                   sizes[static_cast<size_t>(r)]);
    HORA_RETURN_IF_ERROR(comm.Wait(rq));
  }
  if (AllgatherAtOnce(comm, sizes)) {
    scope.SetAlgorithm("scatter_allgather, at once");
    return AllgatherBlocksAtOnce(comm, data, sizes, /*phase=*/1, /*skip=*/root);
  }
  return RingAllgatherInPlace(comm, data, sizes, /*phase=*/1);
}

}  // namespace hora
