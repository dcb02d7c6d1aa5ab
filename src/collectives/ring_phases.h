// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The two halves of every ring algorithm, pipelined by segments. Used by ring
// allreduce, reduce-scatter, allgather and the scatter-allgather broadcast.
// Each runs inside the caller's CollectiveScope; `phase` keeps the tags of
// two phases of one collective apart.
#pragma once

#include <span>

#include "collectives/comm.h"
#include "hora/types.h"

namespace hora {

// In-place ring reduce-scatter: `data` is divided into comm.size() blocks
// (block b: counts[b] elements starting at sum(counts[0..b))). On return,
// block rank() of `data` holds the reduction over all ranks of that block.
// Other blocks hold partial results. `op` must not be kAverage.
Status RingReduceScatterInPlace(Comm& comm, void* data, std::span<const size_t> counts,
                                DataType dtype, ReduceOp op, uint32_t phase);

// In-place ring allgather: block b (bytes[b] bytes at sum(bytes[0..b))) is
// taken from rank b and delivered to every rank.
Status RingAllgatherInPlace(Comm& comm, void* data, std::span<const size_t> bytes, uint32_t phase);

}  // namespace hora
