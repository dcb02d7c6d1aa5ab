// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// DeviceStaging's batches through NCCL (device_staging.h, device_nccl.h):
// allreduce and broadcast in the device fusion buffer, and the collectives
// whose output Hora allocates.
#include "engine/device_staging.h"

#include "collectives/allreduce_common.h"
#include "engine/allocated_outputs.h"

namespace hora {

Status DeviceStaging::RunOnNccl(CollectiveBackend& data, const std::vector<TensorRecord*>& batch,
                                int rank, int size) {
  ++nccl_batches_;
  const RequestMeta& m = batch.front()->meta;
  const size_t bytes = Layout(batch);
  TensorRecord& first = *batch.front();
  const bool gives = m.op == OpType::kAllreduce || rank == m.root;  // (its data goes in)
  // Where NCCL works: the device fusion buffer (a fused batch), else the
  // tensor's output, with its input copied there first.
  std::byte* area = static_cast<std::byte*>(first.output);
  Status st;
  if (batch.size() > 1) {
    st = Prepare(0, bytes);
    area = st.ok() ? packed_ : nullptr;
    if (st.ok()) st = Packing(batch, true);
  } else if (first.input != first.output && bytes > 0 && gives) {
    st = device_->Copy(first.output, first.input, bytes, gpu::CopyKind::kDeviceToDevice, stream_);
  }
  if (!st.ok() && gives) {
    // NCCL is called whatever happened before, since the other ranks are in
    // it: this rank gives identity values instead (zeros for a broadcast),
    // as a joined rank does, in a buffer of its own, and its handles fail.
    // The others' fail too, told after the call (batch_verdict.h).
    Status own = Prepare(0, bytes);
    area = own.ok() ? packed_ : nullptr;
    if (own.ok() && bytes > 0) {
      own = m.op == OpType::kAllreduce
                ? device_->FillIdentity(m.dtype, ReducingOp(m.reduction.op), area,
                                        bytes / DataTypeSize(m.dtype), stream_)
                : device_->Memset(area, 0, bytes, stream_);
    }
    if (!own.ok()) {
      // No buffer to give: leave NCCL (the others' calls then fail or time
      // out, rather than reduce what this rank has not got).
      nccl_.Abort("rank " + std::to_string(rank) + " could not take part: " + own.ToString());
      (void)MarkDone(batch, rank);
      (void)Told(data, m, rank, size, BatchPart::kLeftNccl);
      return st.WithContext("NCCL");
    }
  }
  const Status called = m.op == OpType::kBroadcast
                            ? nccl_.Broadcast(area, bytes, m.root)
                            : nccl_.Allreduce(area, bytes / DataTypeSize(m.dtype), m, size);
  // (A call that was not queued here leaves the others' waiting in NCCL.)
  BatchPart mine = !st.ok() && gives ? BatchPart::kStandIns : BatchPart::kWhole;
  if (!called.ok()) mine = BatchPart::kRefused;
  const Status told = Told(data, m, rank, size, mine);
  if (st.ok()) st = called;
  if (st.ok()) st = told;
  if (st.ok() && batch.size() > 1) st = Packing(batch, false);
  Status marked = MarkDone(batch, rank);
  if (!marked.ok()) marked = Sync("waiting for NCCL");
  HORA_RETURN_IF_ERROR(st.WithContext("NCCL"));
  return marked;
}

size_t DeviceStaging::RouteBytes(const std::vector<TensorRecord*>& batch, int size) {
  const size_t bytes = Layout(batch);
  const RequestMeta& m = batch.front()->meta;
  if (m.op != OpType::kAllgather && m.op != OpType::kAlltoall) return bytes;
  // (Each rank's input differs: the decision's rows, which every rank has.)
  int64_t rows = 0;
  for (int64_t r : batch.front()->rows) rows += r;
  const size_t all = static_cast<size_t>(rows) * m.row_elements() * DataTypeSize(m.dtype);
  return m.op == OpType::kAllgather ? all : all / static_cast<size_t>(size);
}

Status DeviceStaging::RunShapedOnNccl(CollectiveBackend& data, TensorRecord& p, int rank,
                                      int size) {
  ++nccl_batches_;
  const RequestMeta& m = p.meta;
  const ShapedPlan plan = PlanShaped(m, p.rows, rank, size);
  const std::vector<TensorRecord*> batch{&p};
  // Where a rank cannot take part (no memory for its output, or for its
  // prescaled input), it leaves NCCL, and tells the others, which leave it
  // too: their calls fail, rather than use what this rank has not got.
  auto leave = [&](const Status& why) {
    nccl_.Abort("rank " + std::to_string(rank) + " could not take part: " + why.ToString());
    (void)Told(data, m, rank, size, BatchPart::kLeftNccl);
    return why.WithContext("NCCL");
  };
  Result<void*> mem = device_->Allocate(plan.out_bytes);
  if (!mem.ok()) return leave(mem.status());
  std::shared_ptr<gpu::Device> device = device_;
  Tensor out = Tensor::Adopt(
      TensorView(*mem, m.dtype, plan.shape, {DeviceType::kCUDA, device_->info().ordinal}),
      [device](void* q) { (void)device->Free(q); });
  Status st;
  switch (m.op) {
    case OpType::kAllgather:
      st = nccl_.Allgather(p.input, out.data(), plan, rank);
      break;
    case OpType::kAlltoall:
      st = nccl_.Alltoall(p.input, out.data(), plan, rank);
      break;
    default: {  // reducescatter
      const void* in = p.input;
      const size_t count = m.num_elements();
      if (m.reduction.prescale_factor != 1.0 && count > 0) {
        Status scaled = Prepare(0, m.num_bytes());
        if (scaled.ok()) {
          scaled = device_->Scale(m.dtype, m.reduction.prescale_factor, packed_, p.input, count,
                                  stream_);
        }
        if (!scaled.ok()) return leave(scaled);
        in = packed_;
      }
      st = nccl_.Reducescatter(in, out.data(), plan, m, rank, size);
      break;
    }
  }
  const Status told = Told(data, m, rank, size, st.ok() ? BatchPart::kWhole : BatchPart::kRefused);
  if (st.ok()) st = told;
  Status marked = MarkDone(batch, rank);
  if (!marked.ok()) marked = Sync("waiting for NCCL");
  HORA_RETURN_IF_ERROR(st.WithContext("NCCL"));
  HORA_RETURN_IF_ERROR(marked);
  p.result = std::move(out);
  p.received_splits = plan.received_splits;
  return Status::Ok();
}

}  // namespace hora
