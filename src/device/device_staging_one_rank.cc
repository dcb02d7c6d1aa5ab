// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The route "one_rank" (device_routes.cc): a one-rank set's allreduce or
// broadcast, whose result is its input, scaled as the reduction says, made
// on the GPU without a trip through host memory. (Unless
// HORA_GPU_BACKEND=nccl sends it to NCCL.)
//
// Its cost: one rank on an H200, 4 B in 10.5 us and 64 MiB in 74.3 us
// (hora-bench, docs/dev/gpu_runs.md, 2026-11-27): about 1,000 GB/s.
#include "device/device_staging.h"

#include "kernels/reduce.h"

namespace hora {

struct OneRankRoute;

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

template <>
const DeviceStaging::RouteRow& DeviceStaging::Row<OneRankRoute>() {
  static constexpr RouteRow kRow = {
      "one_rank",
      "a one-rank set's allreduce or broadcast, on its GPU alone "
      "(device_staging_one_rank.cc)",
      {10.5, 1000},
      [](DeviceStaging& s, const RouteAsk& a) {
        return RunsOnOneRank(a.batch, a.size, a.joined_any) &&
               !(s.routing_.nccl == NcclMode::kNccl && s.nccl_.Wants(a.m, a.bytes, a.joined_any));
      },
      [](DeviceStaging& s, const RouteAsk& a, bool*) {
        const std::vector<TensorRecord*>& batch = a.batch;
        const RequestMeta& m = a.m;
        const size_t esize = DataTypeSize(m.dtype);
        s.parts_.clear();
        for (const TensorRecord* p : batch) {
          const size_t bytes = static_cast<size_t>(p->meta.num_elements()) * esize;
          if (bytes > 0 && p->input != p->output) s.parts_.push_back({p->output, p->input, bytes});
        }
        Status st = s.parts_.empty() ? Status::Ok() : s.device_->BatchedCopy(s.parts_, s.stream_);
        if (m.op == OpType::kAllreduce) {
          const Reduction& r = m.reduction;
          // (bool goes through Scale(1.0), so that its values are 0/1 as on the CPU.)
          const bool prescale = r.prescale_factor != 1.0 || m.dtype == DataType::kBool;
          const bool finalize = kernels::NeedsFinalize(m.dtype, r.op, 1, r.postscale_factor);
          for (const TensorRecord* p : batch) {
            const size_t count = static_cast<size_t>(p->meta.num_elements());
            if (count == 0) continue;
            if (st.ok() && prescale) {
              st = s.device_->Scale(m.dtype, r.prescale_factor, p->output, p->output, count,
                                    s.stream_);
            }
            if (st.ok() && finalize) {
              st = s.device_->Finalize(m.dtype, r.op, 1, r.postscale_factor, p->output, count,
                                       s.stream_);
            }
          }
        }
        // (The handles hold the event of what was queued; when that fails,
        // the host waits for it before they complete.)
        Status marked = s.MarkDone(batch, a.rank);
        if (!marked.ok()) marked = s.Sync("finishing a one-rank collective on the GPU");
        HORA_RETURN_IF_ERROR(st);
        return marked;
      }};
  return kRow;
}

}  // namespace hora
