// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// DeviceStaging's batches at one rank (device_staging.h): an allreduce or a
// broadcast whose result is its input, scaled as the reduction says, made
// on the GPU without a trip through host memory.
#include "device/device_staging.h"

#include "kernels/reduce.h"

namespace hora {

bool DeviceStaging::RunsOnOneRank(const std::vector<TensorRecord*>& batch, int size,
                                  bool joined_any) {
  if (size != 1 || joined_any) return false;
  const RequestMeta& m = batch.front()->meta;
  const bool fits = m.op == OpType::kBroadcast ||
                    (m.op == OpType::kAllreduce && m.reduction.op != ReduceOp::kAdasum);
  if (!fits) return false;
  for (const TensorRecord* p : batch) {
    if (!OnDevice(*p)) return false;
  }
  return true;
}

Status DeviceStaging::RunOnOneRank(const std::vector<TensorRecord*>& batch, int rank) {
  ++one_rank_batches_;
  const RequestMeta& m = batch.front()->meta;
  const size_t esize = DataTypeSize(m.dtype);
  parts_.clear();
  for (const TensorRecord* p : batch) {
    const size_t bytes = static_cast<size_t>(p->meta.num_elements()) * esize;
    if (bytes > 0 && p->input != p->output) parts_.push_back({p->output, p->input, bytes});
  }
  Status st = parts_.empty() ? Status::Ok() : device_->BatchedCopy(parts_, stream_);
  if (m.op == OpType::kAllreduce) {
    const Reduction& r = m.reduction;
    // (bool goes through Scale(1.0), so that its values are 0/1 as on the CPU.)
    const bool prescale = r.prescale_factor != 1.0 || m.dtype == DataType::kBool;
    const bool finalize = kernels::NeedsFinalize(m.dtype, r.op, 1, r.postscale_factor);
    for (const TensorRecord* p : batch) {
      const size_t count = static_cast<size_t>(p->meta.num_elements());
      if (count == 0) continue;
      if (st.ok() && prescale) {
        st = device_->Scale(m.dtype, r.prescale_factor, p->output, p->output, count, stream_);
      }
      if (st.ok() && finalize) {
        st = device_->Finalize(m.dtype, r.op, 1, r.postscale_factor, p->output, count, stream_);
      }
    }
  }
  // (The handles hold the event of what was queued; when that fails, the
  // host waits for it before they complete.)
  Status marked = MarkDone(batch, rank);
  if (!marked.ok()) marked = Sync("finishing a one-rank collective on the GPU");
  HORA_RETURN_IF_ERROR(st);
  return marked;
}

}  // namespace hora
