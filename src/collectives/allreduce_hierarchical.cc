// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Hierarchical allreduce for a job spanning hosts (algorithms.h): a ring
// reduce-scatter among the host's ranks, an allreduce of each block among
// the ranks at its place on every host (all places at once, so every rank
// of a host sends over its link), the finalization, and a ring allgather of
// the blocks within the host.
#include "collectives/algorithms.h"
#include "collectives/allreduce_common.h"
#include "collectives/hierarchical_common.h"
#include "collectives/registry.h"

namespace hora {

Status AllreduceHierarchical(Comm& host, Comm& across, const AllreduceAlgorithm& across_algorithm,
                             const AllreduceArgs& args) {
  const HostBlocks blocks(host, args);
  const size_t mine = blocks.counts[static_cast<size_t>(host.rank())];
  HORA_ASSIGN_OR_RETURN(std::byte * block, ReduceWithinHost(host, across, blocks, args));
  if (across.size() > 1) {
    const AllreduceArgs part{block, block, mine, args.dtype,
                             Reduction{ReducingOp(args.reduction.op), 1.0, 1.0}};
    HORA_RETURN_IF_ERROR(across_algorithm.run(across, part));
  }
  AllreduceFinalize(AllreduceArgs{block, block, mine, args.dtype, args.reduction},
                    host.size() * across.size(), 0, mine);
  return AllgatherRing(host, block, args.out, blocks.bytes);
}

}  // namespace hora
