// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The collectives whose output Hora allocates -- allgather, reducescatter,
// alltoall -- run on the backend, sized from the coordinator's decision.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "backends/backend.h"
#include "engine/messages.h"
#include "hora/tensor.h"

namespace hora {

struct AllocatedOutput {
  std::optional<Tensor> tensor;
  std::vector<int64_t> received_splits;  // alltoall: rows received from each rank
};

// Runs `m` (this rank's `input`) with the decision's `rows` (allgather:
// each rank's dimension 0; alltoall: every rank's splits, rank-major) on
// `data`, this rank being `rank` of `size`.
Status RunWithAllocatedOutput(CollectiveBackend& data, const RequestMeta& m,
                              std::span<const int64_t> rows, int rank, int size, const void* input,
                              AllocatedOutput* out);

}  // namespace hora
