// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Ring allreduce (Patarasuk & Yuan): the message is cut into n blocks; n-1
// steps of reduce-scatter leave block r fully reduced on rank r, which
// finalizes it (average, postscale: 1/n of the work per rank), and n-1 steps
// of allgather deliver every block everywhere. Each block travels in segments
// so that sending, receiving and reducing overlap.
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/allreduce_common.h"
#include "collectives/partition.h"
#include "collectives/ring_phases.h"

namespace hora {

Status AllreduceRing(Comm& comm, const AllreduceArgs& args) {
  CollectiveScope scope(comm, "allreduce", "ring");
  const int n = comm.size();
  const int r = comm.rank();
  AllreducePrologue(args);

  const EvenPartition part{args.count, static_cast<size_t>(n)};
  std::vector<size_t> counts(static_cast<size_t>(n));
  std::vector<size_t> bytes(static_cast<size_t>(n));
  for (size_t b = 0; b < counts.size(); ++b) {
    counts[b] = part.size(b);
    bytes[b] = counts[b] * DataTypeSize(args.dtype);
  }

  HORA_RETURN_IF_ERROR(RingReduceScatterInPlace(comm, args.out, counts, args.dtype,
                                                ReducingOp(args.reduction.op), /*phase=*/0));
  AllreduceFinalize(args, n, part.offset(static_cast<size_t>(r)), counts[static_cast<size_t>(r)]);
  return RingAllgatherInPlace(comm, args.out, bytes, /*phase=*/1);
}

}  // namespace hora
