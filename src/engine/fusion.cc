// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/fusion.h"

namespace hora {
namespace {

bool Fusable(const RequestMeta& a, const RequestMeta& b, bool group_fusion) {
  if (!group_fusion && a.group != b.group) return false;
  return a.op == OpType::kAllreduce && b.op == OpType::kAllreduce && a.dtype == b.dtype &&
         a.device == b.device && a.reduction.op == b.reduction.op &&
         a.reduction.prescale_factor == b.reduction.prescale_factor &&
         a.reduction.postscale_factor == b.reduction.postscale_factor;
}

}  // namespace

bool FusesIntoOneBatch(const std::vector<const RequestMeta*>& tensors, uint64_t threshold,
                       bool group_fusion, uint64_t* bytes) {
  const RequestMeta& head = *tensors.front();
  uint64_t total = head.num_bytes();
  // (A lone tensor is a batch, whatever its size; more fuse when each can
  // join the head's batch as PlanBatches puts them: fusable with the head,
  // within the threshold so far.)
  if (tensors.size() > 1) {
    if (head.op != OpType::kAllreduce || threshold == 0 || total > threshold) return false;
    for (size_t i = 1; i < tensors.size(); ++i) {
      const RequestMeta& m = *tensors[i];
      total += m.num_bytes();
      if (!Fusable(head, m, group_fusion) || total > threshold) return false;
    }
  }
  *bytes = total;
  return true;
}

std::vector<std::vector<size_t>> PlanBatches(const std::vector<const RequestMeta*>& tensors,
                                             uint64_t threshold, bool group_fusion) {
  std::vector<std::vector<size_t>> batches;
  std::vector<size_t> open;  // batches that may still grow
  std::vector<uint64_t> open_bytes;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const RequestMeta& m = *tensors[i];
    const uint64_t bytes = m.num_bytes();
    bool placed = false;
    if (m.op == OpType::kAllreduce && threshold > 0) {
      for (size_t k = 0; k < open.size() && !placed; ++k) {
        const RequestMeta& head = *tensors[batches[open[k]].front()];
        if (Fusable(head, m, group_fusion) && open_bytes[k] + bytes <= threshold) {
          batches[open[k]].push_back(i);
          open_bytes[k] += bytes;
          placed = true;
        }
      }
    }
    if (!placed) {
      batches.push_back({i});
      if (m.op == OpType::kAllreduce && threshold > 0) {
        open.push_back(batches.size() - 1);
        open_bytes.push_back(bytes);
      }
    }
  }
  return batches;
}

}  // namespace hora
