// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// What both hierarchical allreduces (algorithms.h) do first: a ring
// reduce-scatter among the host's ranks, block l of the message reduced
// over the host on local rank l.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/comm.h"

namespace hora {

// Block l of the host's L: its elements and its bytes (the first
// count % L blocks one element more).
struct HostBlocks {
  HostBlocks(const Comm& host, const AllreduceArgs& args);
  std::vector<size_t> counts, bytes;
};

// This rank's block, reduced over the host with the prescale and not
// finalized, in `across`'s scratch (the host Comm's slots are the ring's
// and the reduce-scatter's working copy, slot 2).
Result<std::byte*> ReduceWithinHost(Comm& host, Comm& across, const HostBlocks& blocks,
                                    const AllreduceArgs& args);

}  // namespace hora
