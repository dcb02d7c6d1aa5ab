// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "device/device_staging.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "collectives/allreduce_common.h"
#include "device/staged_chunks.h"
#include "engine/run_batch.h"
#include "kernels/reduction_identity.h"

namespace hora {
namespace {

// Buffers grow to the next power of two of what a batch needs (at least
// 64 KiB), so that a run of growing batches reallocates a few times only.
size_t Grown(size_t need) {
  size_t n = size_t{64} << 10;
  while (n < need) n *= 2;
  return n;
}

}  // namespace

DeviceStaging::~DeviceStaging() {
  // NCCL's work first: it may never end (a peer lost), and the frees below
  // wait for the device.
  nccl_.Abort("the engine ended");
  nccl_.OnAbort(nullptr);  // (its members go before nccl_)
  // Freeing waits for the device's queued work (as cudaFree does); errors
  // here have nobody to go to.
  if (pinned_ != nullptr) (void)device_->FreePinned(pinned_);
  if (packed_ != nullptr) (void)device_->Free(packed_);
  if (event_.id != 0) (void)device_->DestroyEvent(event_);
  for (gpu::Event e : chunk_events_) (void)device_->DestroyEvent(e);
  if (follow_.id != 0) (void)device_->DestroyEvent(follow_);
  // (The window, which a failed engine leaves open, uses the stream as it
  // goes: before it. Its last wait is the device's own, this object going.)
  if (window_ != nullptr) window_->AwaitWith(nullptr);
  window_.reset();
  FreeWindowPinned();
  if (stream_.id != rank_stream_.id) (void)device_->DestroyStream(stream_);  // (drains it first)
}

Status DeviceStaging::FollowTheRankStream() {
  if (stream_.id == rank_stream_.id) return Status::Ok();
  if (follow_.id == 0) {
    HORA_ASSIGN_OR_RETURN(follow_, device_->CreateEvent());
  }
  HORA_RETURN_IF_ERROR(device_->Record(follow_, rank_stream_));
  return device_->StreamWait(stream_, follow_);
}

Status DeviceStaging::Prepare(size_t pinned, size_t on_device) {
  if (!prepared_) {
    HORA_ASSIGN_OR_RETURN(event_, device_->CreateEvent());
    prepared_ = true;
  }
  // A buffer too small goes (freed: Free waits for the device's work on
  // it) and a larger one comes.
  auto grow = [&](std::byte*& buffer, size_t& have, size_t need, bool host) -> Status {
    if (need <= have) return Status::Ok();
    if (buffer != nullptr) {
      // (The free waits for the device, unbounded: NCCL's work, which may
      // wait for a rank that will not come, is waited for first, bounded,
      // and cut short past the timeout, as WatchNccl would.)
      PruneNcclPending();
      if (!nccl_pending_.empty()) {
        if (Status st = Sync("waiting for NCCL's work before a larger buffer"); !st.ok()) {
          nccl_.Abort(st.ToString());
          return st;
        }
      }
      HORA_RETURN_IF_ERROR(host ? device_->FreePinned(buffer) : device_->Free(buffer));
    }
    buffer = nullptr;
    have = 0;
    const size_t n = Grown(need);
    HORA_ASSIGN_OR_RETURN(void* p, host ? device_->AllocatePinned(n) : device_->Allocate(n));
    buffer = static_cast<std::byte*>(p);
    have = n;
    return Status::Ok();
  };
  HORA_RETURN_IF_ERROR(grow(pinned_, pinned_bytes_, pinned, true));
  return grow(packed_, packed_bytes_, on_device, false);
}

Status DeviceStaging::Sync(const char* step) {
  HORA_RETURN_IF_ERROR(device_->Record(event_, stream_));
  const Status st = AwaitDevice(event_);
  if (!st.ok()) return st.WithContext(step);
  return st;
}

size_t DeviceStaging::Layout(const std::vector<TensorRecord*>& batch) {
  offsets_.clear();
  size_t end = 0;
  for (const TensorRecord* p : batch) {
    offsets_.push_back(end);
    end += p->meta.num_bytes();
  }
  return end;
}

Status DeviceStaging::CopyIn(const std::vector<TensorRecord*>& batch, size_t bytes) {
  if (batch.size() == 1) {
    const TensorRecord& p = *batch.front();
    if (p.meta.num_bytes() == 0) return Status::Ok();
    return device_->Copy(pinned_, p.input, p.meta.num_bytes(), gpu::CopyKind::kDeviceToHost,
                         stream_);
  }
  HORA_RETURN_IF_ERROR(Packing(batch, true));
  return device_->Copy(pinned_, packed_, bytes, gpu::CopyKind::kDeviceToHost, stream_);
}

void DeviceStaging::HostPartsIn(const std::vector<TensorRecord*>& batch, std::byte* area) {
  for (size_t i = 0; i < batch.size(); ++i) {
    const size_t n = batch[i]->meta.num_bytes();
    if (n > 0 && !OnDevice(*batch[i])) std::memcpy(area + offsets_[i], batch[i]->input, n);
  }
}

void DeviceStaging::FillIdentityValues(const std::vector<TensorRecord*>& batch, std::byte* area) {
  for (size_t i = 0; i < batch.size(); ++i) {
    const RequestMeta& m = batch[i]->meta;
    if (m.op == OpType::kAllreduce || m.op == OpType::kReducescatter) {
      kernels::FillIdentity(m.dtype, m.reduction.op, area + offsets_[i], m.num_elements());
    } else {
      std::memset(area + offsets_[i], 0, m.num_bytes());
    }
  }
}

Status DeviceStaging::CopyOut(const std::vector<TensorRecord*>& batch, size_t bytes) {
  if (batch.size() == 1) {
    const TensorRecord& p = *batch.front();
    if (p.meta.num_bytes() == 0) return Status::Ok();
    return device_->Copy(p.output, pinned_, p.meta.num_bytes(), gpu::CopyKind::kHostToDevice,
                         stream_);
  }
  HORA_RETURN_IF_ERROR(
      device_->Copy(packed_, pinned_, bytes, gpu::CopyKind::kHostToDevice, stream_));
  return Packing(batch, false);
}

Status DeviceStaging::ResultToDevice(TensorRecord& p) {
  if (!p.result) return Status::Ok();
  const Tensor& host = *p.result;
  const size_t bytes = host.num_bytes();
  HORA_RETURN_IF_ERROR(Prepare(bytes, 0));
  HORA_ASSIGN_OR_RETURN(void* mem, device_->Allocate(bytes));
  std::shared_ptr<gpu::Device> device = device_;
  Tensor out = Tensor::Adopt(
      TensorView(mem, host.dtype(), host.shape(), {DeviceType::kCUDA, device_->info().ordinal}),
      [device](void* q) { (void)device->Free(q); });
  if (bytes > 0) {
    std::memcpy(pinned_, host.data(), bytes);
    HORA_RETURN_IF_ERROR(device_->Copy(mem, pinned_, bytes, gpu::CopyKind::kHostToDevice, stream_));
    HORA_RETURN_IF_ERROR(Sync("copying the output to the device"));
  }
  p.result = std::move(out);
  return Status::Ok();
}

void DeviceStaging::LetGoPinned() {
  // The device may still write the pinned buffer: it is let go (not freed),
  // and the next batch allocates another. The last batch's copies back read
  // the old one: nothing needs to wait for them now.
  pinned_ = nullptr;
  pinned_bytes_ = 0;
  last_done_.reset();
}

std::byte* DeviceStaging::IdentityScratch(const std::vector<TensorRecord*>& batch, size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  FillIdentityValues(batch, scratch_.data());
  return scratch_.data();
}

Status DeviceStaging::WaitLastDone() {
  if (!last_done_) return Status::Ok();
  HORA_RETURN_IF_ERROR(AwaitDevice([&](TimePoint end) { return last_done_->Wait(end); }));
  last_done_.reset();
  return Status::Ok();
}

Status DeviceStaging::Run(CollectiveBackend& data, const std::vector<TensorRecord*>& batch,
                          int rank, int size, std::vector<std::byte>* fusion, bool joined_any) {
  const RequestMeta& m = batch.front()->meta;
  if (m.op == OpType::kBarrier || m.op == OpType::kJoin) {
    return RunPlannedBatch(data, batch, rank, size, fusion);  // (no tensor)
  }
  // (A failure here is the device's: the collective still runs, as for a
  // failed copy in, and this rank's handles fail.)
  const Status followed = FollowTheRankStream();
  const Status st = Route(data, batch, rank, size, fusion, joined_any);
  if (followed.ok() || !st.ok()) return st;
  return followed.WithContext("making this process set's GPU stream wait for the rank's");
}

Status DeviceStaging::QueueCopiesIn(const std::vector<TensorRecord*>& batch, size_t bytes,
                                    size_t chunk) {
  const std::byte* from = static_cast<const std::byte*>(batch.front()->input);
  if (batch.size() > 1) {
    HORA_RETURN_IF_ERROR(Packing(batch, true));
    from = packed_;
  }
  const size_t step = chunk == 0 ? std::max<size_t>(bytes, 1) : chunk;
  size_t k = 0;
  for (size_t offset = 0; offset < bytes || k == 0; offset += step, ++k) {
    const size_t n = std::min(step, bytes - offset);
    if (n > 0) {
      HORA_RETURN_IF_ERROR(
          device_->Copy(pinned_ + offset, from + offset, n, gpu::CopyKind::kDeviceToHost, stream_));
    }
    HORA_RETURN_IF_ERROR(device_->Record(chunk_events_[k], stream_));
  }
  return Status::Ok();
}

Status DeviceStaging::Packing(const std::vector<TensorRecord*>& batch, bool in) {
  parts_.clear();
  for (size_t i = 0; i < batch.size(); ++i) {
    TensorRecord& p = *batch[i];
    const size_t n = p.meta.num_bytes();
    if (n == 0 || !OnDevice(p)) continue;
    std::byte* packed = packed_ + offsets_[i];
    parts_.push_back(in ? gpu::CopyPart{packed, p.input, n} : gpu::CopyPart{p.output, packed, n});
  }
  return device_->BatchedCopy(parts_, stream_);
}

Status DeviceStaging::ChunkEvents(size_t n) {
  while (chunk_events_.size() < n) {
    HORA_ASSIGN_OR_RETURN(const gpu::Event e, device_->CreateEvent());
    chunk_events_.push_back(e);
  }
  return Status::Ok();
}

Status DeviceStaging::ShareVerdict(CollectiveBackend& data, const RequestMeta& m, int rank,
                                   int size, BatchPart mine, bool before_call) {
  const BatchVerdict v = AgreeOnBatch(data, m, rank, size, mine, verdict_, before_call);
  if (v.left_nccl) {
    const std::string why =
        "a rank's was aborted, found at " + std::string(OpTypeName(m.op)) + " '" + m.name + "'";
    nccl_.Restart(why);  // (failing the NCCL batches it cuts short: OnAbort)
  }
  return v.status();
}

void DeviceStaging::MarkDoneOrSync(const std::vector<TensorRecord*>& batch, int rank) {
  if (!MarkDone(batch, rank).ok()) (void)Sync("finishing a failed batch");
}

Status DeviceStaging::MarkDone(const std::vector<TensorRecord*>& batch, int rank) {
  if (!done_events_) done_events_ = std::make_shared<DoneEvents>(device_);
  HORA_ASSIGN_OR_RETURN(const gpu::Event e, done_events_->Take());
  const RequestMeta& m = batch.front()->meta;
  auto done = std::make_shared<DeviceDone>(
      done_events_, e, DeviceDone::Batch{OpTypeName(m.op), m.name, batch.size() - 1, rank});
  HORA_RETURN_IF_ERROR(device_->Record(e, stream_));
  for (TensorRecord* p : batch) {
    if (OnDevice(*p)) p->on_device = done;
  }
  last_done_ = std::move(done);
  return Status::Ok();
}

}  // namespace hora
