// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// What one size of a sweep moves (element counts in nccl-tests' terms), the
// input each rank starts from, and the check of an output against a
// reference computed here, independently of every implementation measured.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "args.h"

namespace hora::bench {

struct Layout {
  size_t in_count = 0;   // elements each rank passes in
  size_t out_count = 0;  // elements each rank gets back
  size_t chunk = 0;      // allgather, alltoall, reducescatter: elements per rank-block
  // The size reported (nccl-tests): allreduce and broadcast the buffer,
  // allgather the output, reducescatter the input, alltoall what one rank sends.
  uint64_t size_bytes = 0;
  double busbw_factor = 1;  // busbw = algbw * factor
};

// The layout for about `bytes` at `ranks` ranks (at least one element per rank-block).
Layout MakeLayout(Collective c, DataType t, uint64_t bytes, int ranks);

// Rank `rank`'s input, `layout.in_count` elements of args.dtype.
std::vector<uint8_t> MakeInput(const Args& args, const Layout& layout, int rank);

// Elements of `out` (layout.out_count of args.dtype, on rank `rank` of
// `ranks`) that differ from the reference beyond the dtype's rounding.
long CountWrong(const Args& args, const Layout& layout, int rank, int ranks, const uint8_t* out);

}  // namespace hora::bench
