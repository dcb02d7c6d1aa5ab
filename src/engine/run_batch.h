// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// One planned batch (fusion.h) of this rank's tensors, run on the
// collective backend.
#pragma once

#include <cstddef>
#include <vector>

#include "backends/backend.h"
#include "common/output_pool.h"
#include "engine/tensor_records.h"

namespace hora {

// Runs `batch` (its tensors' records, all of one collective; only
// allreduces come several to a batch) on `data`, this rank being `rank` of
// `size`: a fused allreduce goes through `fusion`, the fusion buffer, unless
// the backend reads the tensors where they are. A collective whose output
// Hora allocates leaves it, and alltoall's received splits, in the record;
// its memory comes from `outputs` (null: fresh memory).
Status RunPlannedBatch(CollectiveBackend& data, const std::vector<TensorRecord*>& batch, int rank,
                       int size, std::vector<std::byte>* fusion, OutputPool* outputs = nullptr);

}  // namespace hora
