// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/run_batch.h"

#include "engine/allocated_outputs.h"

namespace hora {
namespace {

Status RunAllreduce(CollectiveBackend& data, const std::vector<TensorRecord*>& batch,
                    std::vector<std::byte>* fusion) {
  const RequestMeta& m = batch.front()->meta;
  // Joined ranks contribute identity values; Average still divides by the
  // whole set's size, as Horovod's (a joined rank counts as a zero).
  if (batch.size() == 1) {
    const TensorRecord& p = *batch.front();
    return data.Allreduce({p.input, p.output, m.num_elements(), m.dtype, m.reduction});
  }
  std::vector<AllreducePart> parts;
  parts.reserve(batch.size());
  for (const TensorRecord* p : batch)
    parts.push_back({p->input, p->output, p->meta.num_elements()});
  return data.AllreduceParts(parts, m.dtype, m.reduction, *fusion);
}

}  // namespace

Status RunPlannedBatch(CollectiveBackend& data, const std::vector<TensorRecord*>& batch, int rank,
                       int size, std::vector<std::byte>* fusion, OutputPool* outputs) {
  const RequestMeta& m = batch.front()->meta;
  switch (m.op) {
    case OpType::kAllreduce:
      return RunAllreduce(data, batch, fusion);
    case OpType::kBroadcast:
      return data.Broadcast(batch.front()->input, m.num_bytes(), m.root);
    case OpType::kBarrier:
      return data.Barrier();
    case OpType::kJoin:  // applied where decided (Engine::ApplyJoin), never batched
      return Status::Ok();
    case OpType::kAllgather:
    case OpType::kReducescatter:
    case OpType::kAlltoall: {
      TensorRecord& p = *batch.front();
      AllocatedOutput out;
      const Status st = RunWithAllocatedOutput(data, m, p.rows, rank, size, p.input, outputs, &out);
      p.result = std::move(out.tensor);
      p.received_splits = std::move(out.received_splits);
      return st;
    }
  }
  return Status::Ok();
}

}  // namespace hora
