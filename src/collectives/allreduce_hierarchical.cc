// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Hierarchical allreduce for a job spanning hosts (algorithms.h): a ring
// reduce-scatter among the host's ranks, an allreduce of each block among
// the ranks at its place on every host (all places at once, so every rank
// of a host sends over its link), the finalization, and a ring allgather of
// the blocks within the host. Or, with one rank a host crossing, a gather
// of the blocks to the host's first rank, its allreduce of the whole
// message across hosts, and a broadcast within the host.
#include <cstring>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/allreduce_common.h"
#include "collectives/registry.h"

namespace hora {

namespace {

// Messages up to this size are broadcast within the host by a binomial
// tree (one step at two ranks a host), larger ones scattered and gathered.
constexpr size_t kBinomialMaxBytes = 64 << 10;

// Block l of the host's L: its elements, and its bytes.
struct HostBlocks {
  HostBlocks(const Comm& host, const AllreduceArgs& args)
      : counts(static_cast<size_t>(host.size())), bytes(counts.size()) {
    const size_t local = counts.size();
    for (size_t l = 0; l < local; ++l) {
      counts[l] = args.count / local + (l < args.count % local ? 1 : 0);
      bytes[l] = counts[l] * DataTypeSize(args.dtype);
    }
  }
  std::vector<size_t> counts, bytes;
};

// Reduces within the host: block `place` (reduced, not finalized) in the
// across Comm's scratch (the host Comm's slots are the ring's and the
// reduce-scatter's working copy, slot 2).
Result<std::byte*> ReduceWithinHost(Comm& host, Comm& across, const HostBlocks& blocks,
                                    const AllreduceArgs& args) {
  const auto place = static_cast<size_t>(host.rank());
  auto* block = static_cast<std::byte*>(across.Scratch(3, blocks.bytes[place]));
  const Reduction r{ReducingOp(args.reduction.op), args.reduction.prescale_factor, 1.0};
  HORA_RETURN_IF_ERROR(ReducescatterRing(host, args.in, block, blocks.counts, args.dtype, r));
  return block;
}

}  // namespace

Status AllreduceHierarchical(Comm& host, Comm& across, const AllreduceAlgorithm& across_algorithm,
                             const AllreduceArgs& args) {
  const HostBlocks blocks(host, args);
  const std::vector<size_t>& bytes = blocks.bytes;
  const size_t mine = blocks.counts[static_cast<size_t>(host.rank())];
  HORA_ASSIGN_OR_RETURN(std::byte * block, ReduceWithinHost(host, across, blocks, args));
  const ReduceOp reducing = ReducingOp(args.reduction.op);
  if (across.size() > 1) {
    const AllreduceArgs part{block, block, mine, args.dtype, Reduction{reducing, 1.0, 1.0}};
    HORA_RETURN_IF_ERROR(across_algorithm.run(across, part));
  }
  AllreduceFinalize(AllreduceArgs{block, block, mine, args.dtype, args.reduction},
                    host.size() * across.size(), 0, mine);
  return AllgatherRing(host, block, args.out, bytes);
}

Status AllreduceHierarchicalOne(Comm& host, Comm& across,
                                const AllreduceAlgorithm& across_algorithm,
                                const AllreduceArgs& args) {
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
      if (blocks.bytes[0] > 0) std::memmove(out, block, blocks.bytes[0]);
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
  const size_t total = args.count * DataTypeSize(args.dtype);
  return total <= kBinomialMaxBytes ? BroadcastBinomial(host, out, total, first)
                                    : BroadcastScatterAllgather(host, out, total, first);
}

}  // namespace hora
