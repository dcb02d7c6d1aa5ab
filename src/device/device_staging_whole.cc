// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The route table's last row, "staged": Adasum, and the collectives whose
// output Hora allocates (allgather, reducescatter, alltoall), copied in
// whole to pinned memory, run there by the host backend, and their results
// copied back before the handles complete.
#include "device/device_staging.h"
#include "engine/run_batch.h"

namespace hora {

Status DeviceStaging::RunStagedWhole(const RouteAsk& ask) {
  CollectiveBackend& data = ask.data;
  const std::vector<TensorRecord*>& batch = ask.batch;
  const RequestMeta& m = ask.m;
  const int rank = ask.rank;
  const int size = ask.size;
  const size_t bytes = Layout(batch);
  // Where the backend runs: the pinned copies. When the device fails before
  // the collective (no memory, a copy that fails or times out), the
  // collective still runs -- the other ranks are in it, and a rank that left
  // it would leave them waiting -- on host scratch holding identity values
  // (as a joined rank's), and this rank's handles fail with the error. The
  // others' fail too, told after the collective (batch_verdict.h), and get
  // no results.
  Status staged = Prepare(bytes, batch.size() > 1 ? bytes : 0);
  if (staged.ok()) {
    // (Queued after the last batch's copies out, which read the pinned
    // buffer: the wait covers them.)
    staged = CopyIn(batch, bytes);
    if (staged.ok()) staged = Sync("copying the inputs to host memory");
    if (!staged.ok()) {
      LetGoPinned();
      MarkDoneOrSync(batch, rank);  // (copies that may still read the inputs)
    }
  }
  std::byte* area = pinned_;
  if (staged.ok()) {
    HostPartsIn(batch, area);  // a joined rank's placeholders, fused with GPU tensors
  } else {
    area = IdentityScratch(batch, bytes);
  }
  saved_.clear();
  for (size_t i = 0; i < batch.size(); ++i) {
    TensorRecord& p = *batch[i];
    saved_.emplace_back(p.input, p.output);
    p.input = area + offsets_[i];
    p.output = p.input;
  }
  const Status st = RunPlannedBatch(data, batch, rank, size, ask.fusion);
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i]->input = saved_[i].first;
    batch[i]->output = saved_[i].second;
  }
  const Status told =
      ShareVerdict(data, m, rank, size, staged.ok() ? BatchPart::kWhole : BatchPart::kPlaceholders);
  HORA_RETURN_IF_ERROR(staged);
  HORA_RETURN_IF_ERROR(st);
  HORA_RETURN_IF_ERROR(told);
  if (m.op == OpType::kAllreduce) {  // (Adasum)
    Status back = CopyOut(batch, bytes);
    if (back.ok()) back = Sync("copying the results to the device");
    if (!back.ok()) MarkDoneOrSync(batch, rank);  // (copies that may still write the outputs)
    return back;
  }
  return ResultToDevice(*batch.front());  // allgather, reducescatter, alltoall
}

}  // namespace hora
