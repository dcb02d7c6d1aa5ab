// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Ring reduce-scatter with arbitrary (uneven, possibly zero) splits: the
// input is copied (and prescaled) into a working buffer, n-1 ring steps leave
// block r reduced on rank r, which is finalized into the output.
#include <cstring>
#include <numeric>

#include "collectives/algorithms.h"
#include "collectives/allreduce_common.h"
#include "collectives/ring_phases.h"
#include "kernels/reduce.h"

namespace hora {

Status ReducescatterRing(Comm& comm, const void* in, void* out, std::span<const size_t> counts,
                         DataType dtype, const Reduction& reduction) {
  CollectiveScope scope(comm, "reducescatter", "ring");
  const int n = comm.size();
  const size_t r = static_cast<size_t>(comm.rank());
  HORA_RETURN_IF_ERROR(CheckSplitCount(comm, "reducescatter", "splits", counts.size()));
  const size_t esize = DataTypeSize(dtype);
  const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
  const size_t my_offset = std::accumulate(counts.begin(), counts.begin() + r, size_t{0});

  // Working copy: slots 0 and 1 belong to the ring phase.
  auto* work = static_cast<std::byte*>(comm.Scratch(2, total * esize));
  AllreduceArgs view{in, work, total, dtype, reduction};
  AllreducePrologue(view);
  HORA_RETURN_IF_ERROR(
      RingReduceScatterInPlace(comm, work, counts, dtype, ReducingOp(reduction.op), /*phase=*/0));
  AllreduceFinalize(view, n, my_offset, counts[r]);
  if (counts[r] > 0) std::memcpy(out, work + my_offset * esize, counts[r] * esize);
  return Status::Ok();
}

}  // namespace hora
