// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Tensor fusion (docs/dev/design.md §4): which of the tensors decided in one cycle
// run together in one buffer. Allreduces of the same dtype, op, scale
// factors and device are packed, in decision order, into batches of at most
// `threshold` bytes (a larger tensor runs alone); other collectives run one
// by one. Batches run in the order of their first member. The plan depends
// only on the decisions, so every rank makes the same one.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/messages.h"

namespace hora {

// Indices into `tensors`, one list per batch. threshold 0: no fusion.
// group_fusion false: members of a group are fused only with each other.
std::vector<std::vector<size_t>> PlanBatches(const std::vector<const RequestMeta*>& tensors,
                                             uint64_t threshold, bool group_fusion);
// Whether PlanBatches makes one batch of all of `tensors` (not empty), in
// one pass that allocates nothing (a cached cycle asks every step); the
// tensors' bytes in `bytes` when it does.
bool FusesIntoOneBatch(const std::vector<const RequestMeta*>& tensors, uint64_t threshold,
                       bool group_fusion, uint64_t* bytes);

}  // namespace hora
