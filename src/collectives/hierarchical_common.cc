// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "collectives/hierarchical_common.h"

#include "collectives/allreduce_common.h"

namespace hora {

HostBlocks::HostBlocks(const Comm& host, const AllreduceArgs& args)
    : counts(static_cast<size_t>(host.size())), bytes(counts.size()) {
  const size_t local = counts.size();
  for (size_t l = 0; l < local; ++l) {
    counts[l] = args.count / local + (l < args.count % local ? 1 : 0);
    bytes[l] = counts[l] * DataTypeSize(args.dtype);
  }
}

Result<std::byte*> ReduceWithinHost(Comm& host, Comm& across, const HostBlocks& blocks,
                                    const AllreduceArgs& args) {
  const auto place = static_cast<size_t>(host.rank());
  auto* block = static_cast<std::byte*>(across.Scratch(3, blocks.bytes[place]));
  const Reduction r{ReducingOp(args.reduction.op), args.reduction.prescale_factor, 1.0};
  HORA_RETURN_IF_ERROR(ReducescatterRing(host, args.in, block, blocks.counts, args.dtype, r));
  return block;
}

}  // namespace hora
