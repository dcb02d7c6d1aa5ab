// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The route "nccl" (device_routes.cc; device_nccl.h): allreduce and
// broadcast in the device fusion buffer, and the collectives whose output
// Hora allocates, through NCCL.
//
// Its cost is nil: NCCL's own settings (HORA_GPU_BACKEND,
// HORA_NCCL_MIN_BYTES) say which batches it may take, and it takes every
// one they give it. (A one-rank batch is one_rank's, unless
// HORA_GPU_BACKEND=nccl or HORA_GPU_ROUTE says otherwise.)
#include "device/device_staging.h"

#include "engine/allocated_outputs.h"

namespace hora {

struct NcclRoute;

template <>
const DeviceStaging::RouteRow& DeviceStaging::Row<NcclRoute>() {
  static constexpr RouteRow kRow = {
      "nccl",
      "through NCCL, by HORA_GPU_BACKEND and HORA_NCCL_MIN_BYTES (device_staging_nccl.cc)",
      {0, 0},
      [](DeviceStaging& s, const RouteAsk& a) {
        // (Named by HORA_GPU_ROUTE: whatever HORA_NCCL_MIN_BYTES.)
        if (!s.nccl_.Wants(a.m, a.named ? SIZE_MAX : a.bytes, a.joined_any)) return false;
        return a.named || s.routing_.nccl == NcclMode::kNccl ||
               !RunsOnOneRank(a.batch, a.size, a.joined_any);
      },
      [](DeviceStaging& s, const RouteAsk& a, bool* declined) -> Status {
        const Result<bool> ready = s.nccl_.Ready(a.data, a.rank, a.size);
        if (!ready.ok()) {
          // Its communicator aborted: this rank says so where the others
          // check before their calls (RunOnNccl), and none makes them.
          // (NCCL unusable under HORA_GPU_BACKEND=nccl fails every rank
          // alike: nothing to say.)
          if (s.nccl_.broken()) {
            (void)s.ShareVerdict(a.data, a.m, a.rank, a.size, BatchPart::kLeftNccl, true);
          }
          return ready.status();
        }
        if (!*ready) {  // (auto, and NCCL cannot be used)
          *declined = true;
          return Status::Ok();
        }
        const bool shaped = a.m.op != OpType::kAllreduce && a.m.op != OpType::kBroadcast;
        return shaped ? s.RunShapedOnNccl(a.data, *a.batch.front(), a.rank, a.size)
                      : s.RunOnNccl(a.data, a.batch, a.rank, a.size);
      }};
  return kRow;
}

Status DeviceStaging::RunOnNccl(CollectiveBackend& data, const std::vector<TensorRecord*>& batch,
                                int rank, int size) {
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
  const size_t count = bytes / DataTypeSize(m.dtype);
  if (st.ok() && m.op == OpType::kAllreduce && m.reduction.prescale_factor != 1.0 && count > 0) {
    st = device_->Scale(m.dtype, m.reduction.prescale_factor, area, area, count, stream_);
  }
  // Before the call, every rank says whether it can take part (its copies
  // and prescale queued without error): where one cannot, no rank calls
  // NCCL for this batch (its sequence of calls stays the same on every
  // rank), and every rank's handles fail naming it.
  const Status told = ShareVerdict(data, m, rank, size, Part(st), true);
  if (!st.ok() || !told.ok()) {
    MarkDoneOrSync(batch, rank);  // (copies that may still read the inputs)
    HORA_RETURN_IF_ERROR(st.WithContext("NCCL"));
    return told;
  }
  // The call, in this set's turn at NCCL on this rank (nccl_order.h).
  NcclOrder::Turn turn;
  st = TakeTurn(batch, rank, &turn);
  if (st.ok()) {
    st = m.op == OpType::kBroadcast ? nccl_.Broadcast(area, bytes, m.root)
                                    : nccl_.Allreduce(area, count, m, size);
  }
  EndTurn(turn, st);
  if (st.ok() && batch.size() > 1) st = Packing(batch, false);
  Status marked = MarkDone(batch, rank);
  if (marked.ok() && st.ok()) NcclQueued(m, rank);
  if (!marked.ok()) marked = SyncAfterNccl();
  // (A device that failed, or whose work did not end in time: this rank's
  // NCCL work cannot be made, and the others' waits for it.)
  if (!marked.ok()) nccl_.Abort(marked.ToString());
  HORA_RETURN_IF_ERROR(st.WithContext("NCCL"));
  return marked;
}

BatchPart DeviceStaging::Part(Status& st) {
  // (A wait above for the device may have aborted the communicator, a peer
  // being lost behind NCCL's work: this rank left NCCL, and says so.)
  if (nccl_.broken()) {
    if (st.ok()) st = nccl_.why_broken();
    return BatchPart::kLeftNccl;
  }
  return st.ok() ? BatchPart::kWhole : BatchPart::kCannot;
}

Status DeviceStaging::SyncAfterNccl() {
  HORA_RETURN_IF_ERROR(Sync("waiting for NCCL"));
  // (The wait may have aborted the communicator, a peer being lost: then
  // this batch's calls were cut short too.)
  if (nccl_.broken()) return nccl_.why_broken();
  return Status::Ok();
}

Status DeviceStaging::TakeTurn(const std::vector<TensorRecord*>& batch, int rank,
                               NcclOrder::Turn* turn) {
  Result<NcclOrder::Turn> got = nccl_.AwaitTurn(batch, rank);
  Status st = got.status();
  if (got.ok()) {
    *turn = std::move(*got);
    // On the GPU too, after the last turn's calls of another set.
    const auto* last = dynamic_cast<const NcclTurnMark*>(turn->previous().get());
    if (last == nullptr) return Status::Ok();
    follows_other_sets_ = true;
    st = device_->StreamWait(stream_, last->event);
    if (st.ok()) return st;
    st = st.WithContext("making the stream wait for another process set's NCCL calls");
  }
  // The other ranks agreed to make the calls, and make them: as after a
  // call that failed, this rank's communicator is aborted (failing its
  // NCCL batches not yet done: OnAbort), and its next NCCL batch makes
  // every rank start anew (batch_verdict.h).
  nccl_.Abort(st.ToString());
  return st;
}

void DeviceStaging::EndTurn(NcclOrder::Turn& turn, const Status& called) {
  if (called.ok() && turn.held()) {
    if (!turn_mark_) {
      if (Result<gpu::Event> e = device_->CreateEvent(); e.ok()) {
        turn_mark_ = std::make_shared<NcclTurnMark>(device_, *e);
      }
    }
    // (Without a mark, the next turn of another set waits for an earlier
    // one: a looser order, where the device failed anyway.)
    if (turn_mark_ && device_->Record(turn_mark_->event, stream_).ok()) turn.Leave(turn_mark_);
  }
  turn.End();
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
  const RequestMeta& m = p.meta;
  const ShapedPlan plan = PlanShaped(m, p.rows, rank, size);
  const std::vector<TensorRecord*> batch{&p};
  // Where a rank cannot take part (no memory for its output, or for its
  // prescaled input), it says so before the call, as RunOnNccl's do, and no
  // rank makes it.
  auto cannot = [&](Status why) {
    MarkDoneOrSync(batch, rank);  // (a prescale that may still read the input)
    (void)ShareVerdict(data, m, rank, size, Part(why), true);
    return why.WithContext("NCCL");
  };
  Result<void*> mem = device_->Allocate(plan.out_bytes);
  if (!mem.ok()) return cannot(mem.status());
  std::shared_ptr<gpu::Device> device = device_;
  Tensor out = Tensor::Adopt(
      TensorView(*mem, m.dtype, plan.shape, {DeviceType::kCUDA, device_->info().ordinal}),
      [device](void* q) { (void)device->Free(q); });
  const void* in = p.input;
  const size_t count = m.num_elements();
  if (m.op == OpType::kReducescatter && m.reduction.prescale_factor != 1.0 && count > 0) {
    Status scaled = Prepare(0, m.num_bytes());
    if (scaled.ok()) {
      scaled =
          device_->Scale(m.dtype, m.reduction.prescale_factor, packed_, p.input, count, stream_);
    }
    if (!scaled.ok()) return cannot(scaled);
    in = packed_;
  }
  if (nccl_.broken()) return cannot(nccl_.why_broken());  // (aborted by the wait above)
  if (Status told = ShareVerdict(data, m, rank, size, BatchPart::kWhole, true); !told.ok()) {
    MarkDoneOrSync(batch, rank);
    return told;
  }
  // The calls, in this set's turn at NCCL on this rank (nccl_order.h).
  NcclOrder::Turn turn;
  Status st = TakeTurn(batch, rank, &turn);
  if (st.ok()) {
    switch (m.op) {
      case OpType::kAllgather:
        st = nccl_.Allgather(p.input, out.data(), plan, rank);
        break;
      case OpType::kAlltoall:
        st = nccl_.Alltoall(p.input, out.data(), plan, rank);
        break;
      default:  // reducescatter
        st = nccl_.Reducescatter(in, out.data(), plan, m, rank, size);
        break;
    }
  }
  EndTurn(turn, st);
  Status marked = MarkDone(batch, rank);
  if (marked.ok() && st.ok()) NcclQueued(m, rank);
  if (!marked.ok()) marked = SyncAfterNccl();
  // (A device that failed, or whose work did not end in time: this rank's
  // NCCL work cannot be made, and the others' waits for it.)
  if (!marked.ok()) nccl_.Abort(marked.ToString());
  HORA_RETURN_IF_ERROR(st.WithContext("NCCL"));
  HORA_RETURN_IF_ERROR(marked);
  p.result = std::move(out);
  p.received_splits = plan.received_splits;
  return Status::Ok();
}

}  // namespace hora
