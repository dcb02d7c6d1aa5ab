// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The collectives whose output Hora allocates -- allgather, reducescatter,
// alltoall -- sized from the coordinator's decision (ShapedPlan, the same
// for every path) and run on the backend (RunWithAllocatedOutput).
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "backends/backend.h"
#include "common/output_pool.h"
#include "engine/messages.h"
#include "hora/tensor.h"

namespace hora {

struct AllocatedOutput {
  std::optional<Tensor> tensor;
  std::vector<int64_t> received_splits;  // alltoall: rows received from each rank
};

// What a shaped collective moves, for this rank.
struct ShapedPlan {
  std::vector<int64_t> shape;            // the output's
  std::vector<size_t> send;              // alltoall: bytes to each rank
  std::vector<size_t> recv;              // allgather, alltoall: bytes from each rank
  std::vector<size_t> all;               // alltoall: bytes every rank sends each, rank-major
  std::vector<size_t> counts;            // reducescatter: elements of each rank's part
  std::vector<int64_t> received_splits;  // alltoall: rows from each rank
  size_t out_bytes = 0;
};

// `m`'s plan (this rank's input) with the decision's `rows` (allgather:
// each rank's dimension 0; alltoall: every rank's splits, rank-major), this
// rank being `rank` of `size`.
ShapedPlan PlanShaped(const RequestMeta& m, std::span<const int64_t> rows, int rank, int size);

// Runs `m` as planned on `data`, `input` this rank's. The output's memory
// comes from `outputs` (its memory faulted in already, when a freed output
// of about its size left some there); null: fresh memory.
Status RunWithAllocatedOutput(CollectiveBackend& data, const RequestMeta& m,
                              std::span<const int64_t> rows, int rank, int size, const void* input,
                              OutputPool* outputs, AllocatedOutput* out);

}  // namespace hora
