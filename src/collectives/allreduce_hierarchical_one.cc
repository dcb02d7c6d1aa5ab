// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Hierarchical allreduce with one rank a host crossing (algorithms.h): the
// ring reduce-scatter within the host, the blocks gathered to the host's
// first rank, its allreduce of the whole message with the other hosts'
// first ranks and the finalization, and the broadcast within the host.
#include <cstring>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/allreduce_common.h"
#include "collectives/hierarchical_common.h"
#include "collectives/registry.h"

namespace hora {

Status AllreduceHierarchicalOne(Comm& host, Comm& across,
                                const AllreduceAlgorithm& across_algorithm,
                                const BroadcastAlgorithm& broadcast, const AllreduceArgs& args) {
  const HostBlocks blocks(host, args);
  HORA_ASSIGN_OR_RETURN(std::byte * block, ReduceWithinHost(host, across, blocks, args));
  auto* out = static_cast<std::byte*>(args.out);
  const int first = 0;  // the host's rank that crosses
  {
    CollectiveScope scope(host, "allreduce", "hierarchical, one rank a host across: gather");
    const auto place = static_cast<size_t>(host.rank());
    if (host.rank() == first) {
      std::vector<Request> receives;
      size_t offset = blocks.bytes[0];
      for (size_t l = 1; l < blocks.bytes.size(); offset += blocks.bytes[l++]) {
        if (blocks.bytes[l] == 0) continue;
        receives.push_back(host.Irecv(static_cast<int>(l), Comm::LocalTag(0, 0, 0), out + offset,
                                      blocks.bytes[l]));
      }
      // (`block` is scratch: it never overlaps the output.)
      if (blocks.bytes[0] > 0) std::memcpy(out, block, blocks.bytes[0]);
      for (const Request& r : receives) HORA_RETURN_IF_ERROR(host.Wait(r));
    } else if (blocks.bytes[place] > 0) {
      HORA_RETURN_IF_ERROR(
          host.Wait(host.Isend(first, Comm::LocalTag(0, 0, 0), block, blocks.bytes[place])));
    }
  }
  if (host.rank() == first) {
    if (across.size() > 1) {
      const AllreduceArgs whole{out, out, args.count, args.dtype,
                                Reduction{ReducingOp(args.reduction.op), 1.0, 1.0}};
      HORA_RETURN_IF_ERROR(across_algorithm.run(across, whole));
    }
    AllreduceFinalize(AllreduceArgs{out, out, args.count, args.dtype, args.reduction},
                      host.size() * across.size(), 0, args.count);
  }
  return broadcast.run(host, out, args.count * DataTypeSize(args.dtype), first);
}

}  // namespace hora
