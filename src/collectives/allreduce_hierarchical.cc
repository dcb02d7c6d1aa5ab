// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Hierarchical allreduce for a job spanning hosts (algorithms.h): a ring
// reduce-scatter among the host's ranks, an allreduce of each block among
// the ranks at its place on every host (all places at once, so every rank
// of a host sends over its link), the finalization, and a ring allgather of
// the blocks within the host.
#include <cstring>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/allreduce_common.h"
#include "collectives/registry.h"

namespace hora {

Status AllreduceHierarchical(Comm& host, Comm& across, const AllreduceAlgorithm& across_algorithm,
                             const AllreduceArgs& args) {
  const size_t local = static_cast<size_t>(host.size());
  const size_t place = static_cast<size_t>(host.rank());
  const size_t esize = DataTypeSize(args.dtype);
  std::vector<size_t> counts(local), bytes(local);
  for (size_t l = 0; l < local; ++l) {
    counts[l] = args.count / local + (l < args.count % local ? 1 : 0);
    bytes[l] = counts[l] * esize;
  }
  const size_t mine = counts[place];
  // The block lives in the across Comm's scratch: the host Comm's slots are
  // the ring's and the reduce-scatter's working copy (slot 2).
  auto* block = static_cast<std::byte*>(across.Scratch(3, mine * esize));
  const ReduceOp reducing = ReducingOp(args.reduction.op);
  HORA_RETURN_IF_ERROR(ReducescatterRing(host, args.in, block, counts, args.dtype,
                                         Reduction{reducing, args.reduction.prescale_factor, 1.0}));
  if (across.size() > 1) {
    const AllreduceArgs part{block, block, mine, args.dtype, Reduction{reducing, 1.0, 1.0}};
    HORA_RETURN_IF_ERROR(across_algorithm.run(across, part));
  }
  AllreduceFinalize(AllreduceArgs{block, block, mine, args.dtype, args.reduction},
                    host.size() * across.size(), 0, mine);
  return AllgatherRing(host, block, args.out, bytes);
}

}  // namespace hora
