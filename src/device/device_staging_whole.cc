// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The route "staged" (device_routes.cc): Adasum, and the collectives whose
// output Hora allocates (allgather, reducescatter, alltoall), copied in
// whole to pinned memory, run there by the host backend, and their results
// copied back before the handles complete. It fits every batch: the route
// of last resort.
//
// Its cost: two ranks sharing one H200, HORA_GPU_IPC=0
// HORA_STAGING_CHUNK_BYTES=0: 64 MiB in 25,984 us, 2.6 GB/s
// (docs/dev/gpu_runs.md, 2026-11-26); its fixed part is the chunked route's.
#include "device/device_staging.h"
#include "engine/run_batch.h"

namespace hora {

struct StagedRoute;

template <>
const DeviceStaging::RouteRow& DeviceStaging::Row<StagedRoute>() {
  static constexpr RouteRow kRow = {
      "staged",
      "staged through pinned memory whole: every collective (device_staging_whole.cc)",
      {33, 2.6},
      [](DeviceStaging&, const RouteAsk&) { return true; },
      [](DeviceStaging& s, const RouteAsk& ask, bool*) {
        const std::vector<TensorRecord*>& batch = ask.batch;
        const RequestMeta& m = ask.m;
        const size_t bytes = s.Layout(batch);
        // Where the backend runs: the pinned copies. When the device fails
        // before the collective (no memory, a copy that fails or times
        // out), the collective still runs -- the other ranks are in it, and
        // a rank that left it would leave them waiting -- on host scratch
        // holding identity values (as a joined rank's), and this rank's
        // handles fail with the error. The others' fail too, told after the
        // collective (batch_verdict.h), and get no results.
        Status staged = s.Prepare(bytes, batch.size() > 1 ? bytes : 0);
        if (staged.ok()) {
          // (Queued after the last batch's copies out, which read the
          // pinned buffer: the wait covers them.)
          staged = s.CopyIn(batch, bytes);
          if (staged.ok()) staged = s.Sync("copying the inputs to host memory");
          if (!staged.ok()) {
            s.LetGoPinned();
            s.MarkDoneOrSync(batch, ask.rank);  // (copies that may still read the inputs)
          }
        }
        std::byte* area = s.pinned_;
        if (staged.ok()) {
          s.HostPartsIn(batch, area);  // a joined rank's placeholders, fused with GPU tensors
        } else {
          area = s.IdentityScratch(batch, bytes);
        }
        s.saved_.clear();
        for (size_t i = 0; i < batch.size(); ++i) {
          TensorRecord& p = *batch[i];
          s.saved_.emplace_back(p.input, p.output);
          p.input = area + s.offsets_[i];
          p.output = p.input;
        }
        const Status st = RunPlannedBatch(ask.data, batch, ask.rank, ask.size, ask.fusion);
        for (size_t i = 0; i < batch.size(); ++i) {
          batch[i]->input = s.saved_[i].first;
          batch[i]->output = s.saved_[i].second;
        }
        const Status told =
            s.ShareVerdict(ask.data, m, ask.rank, ask.size,
                           staged.ok() ? BatchPart::kWhole : BatchPart::kPlaceholders);
        HORA_RETURN_IF_ERROR(staged);
        HORA_RETURN_IF_ERROR(st);
        HORA_RETURN_IF_ERROR(told);
        if (m.op == OpType::kAllreduce) {  // (Adasum)
          Status back = s.CopyOut(batch, bytes);
          if (back.ok()) back = s.Sync("copying the results to the device");
          // (copies that may still write the outputs)
          if (!back.ok()) s.MarkDoneOrSync(batch, ask.rank);
          return back;
        }
        return s.ResultToDevice(*batch.front());  // allgather, reducescatter, alltoall
      }};
  return kRow;
}

}  // namespace hora
