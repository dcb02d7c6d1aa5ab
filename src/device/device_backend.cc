// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "device/device_backend.h"

#include "device/batch_verdict.h"
#include "device/staged_chunks.h"
#include "engine/run_batch.h"

namespace hora {

DeviceBackend::DeviceBackend(const Config& config, const Logger& logger, Place place)
    : config_(config), logger_(logger), place_(std::move(place)) {}

DeviceBackend::~DeviceBackend() {
  if (place_.nccl_order != nullptr) place_.nccl_order->Forget(place_.set_id);
}

Status DeviceBackend::Run(const std::vector<TensorRecord*>& batch, bool joined_any,
                          std::vector<std::byte>* fusion) {
  if (!DeviceStaging::AnyOnDevice(batch)) return RunPlaceholders(batch, fusion);
  HORA_RETURN_IF_ERROR(Open());
  const Status st =
      staging_->Run(*place_.data, batch, place_.rank, place_.size, fusion, joined_any);
  if (st.ok()) return st;
  return st.WithContext("rank " + std::to_string(place_.rank) + " on " + staging_->device_name());
}

Status DeviceBackend::RunPlaceholders(const std::vector<TensorRecord*>& batch,
                                      std::vector<std::byte>* fusion) {
  CollectiveBackend& data = *place_.data;
  const RequestMeta& m = batch.front()->meta;
  // In chunks, as the others' staged batch goes (with what each rank gave
  // it: batch_verdict.h).
  if (RunsInChunks(m)) {
    return RunPlaceholdersInChunks(data, batch, fusion, place_.rank, place_.size,
                                   routing_.staging_chunk);
  }
  Status st = RunPlannedBatch(data, batch, place_.rank, place_.size, fusion);
  if (m.op != OpType::kBarrier && m.op != OpType::kJoin && place_.size > 1) {
    // Whole: the others' staged batch ends with what each rank gave it. The
    // placeholders' results are nobody's: only a failure to agree matters.
    const Status told =
        AgreeOnBatch(data, m, place_.rank, place_.size, BatchPart::kWhole, verdict_).ran;
    if (st.ok()) st = told;
  }
  return st;
}

Status DeviceBackend::Open() {
  if (staging_) return Status::Ok();
  // The Session opened the device when the tensor was submitted.
  std::shared_ptr<gpu::Device> device =
      place_.devices != nullptr ? place_.devices->opened() : nullptr;
  if (!device) return InternalError("a GPU tensor reached an engine without a device");
  // The device's copies are bounded by HORA_TIMEOUT_S, or, where that is
  // 0 (no timeout), by 10 minutes: Hora's stream waits only for its own
  // copies and for the producers of the tensors it was handed (their
  // queued kernels), and a step that takes that long is a GPU that hangs.
  const double bound = config_.timeout_s > 0 ? config_.timeout_s : 600.0;
  // The global set's engine works on the rank's stream; another set's on
  // a stream of its own (device_staging.h says why).
  const gpu::Stream rank_stream = place_.devices->stream();
  gpu::Stream stream = rank_stream;
  if (!place_.label.empty()) {
    // (Without one, this set works on the rank's stream: the collective
    // must still run, the other ranks are in it.)
    Result<gpu::Stream> own = device->CreateStream();
    if (own.ok()) {
      stream = *own;
    } else {
      logger_.Warning(place_.label + ": no GPU stream of its own (" + own.status().ToString() +
                      "); it shares the rank's");
    }
  }
  staging_ = std::make_unique<DeviceStaging>(
      std::move(device), stream, rank_stream, SecondsToDuration(bound),
      DeviceStaging::Windows{place_.data_comm, place_.selector, config_.gpu_ipc == "1",
                             config_.gpu_window_bytes, &logger_,
                             SecondsToDuration(config_.timeout_s > 0 ? bound / 2 : bound)},
      DeviceNccl::Settings{place_.nccl, &logger_, place_.nccl_order, place_.set_id,
                           SecondsToDuration(config_.timeout_s * 2),
                           SecondsToDuration(config_.stall_warning_s), place_.label, routing_},
      place_.lost_peer);
  return Status::Ok();
}

bool DeviceBackend::RunsAtSubmission(const RequestMeta& m) const {
  // (Not what HORA_GPU_BACKEND=nccl sends to NCCL: its first batch sets
  // NCCL up, which is a cycle's work, not a submitting thread's.)
  return place_.size == 1 && m.device == DeviceType::kCUDA && m.group.empty() &&
         routing_.nccl != NcclMode::kNccl &&
         (m.op == OpType::kBroadcast ||
          (m.op == OpType::kAllreduce && m.reduction.op != ReduceOp::kAdasum));
}

void DeviceBackend::Claimed(TensorRecord& p) {
  if (place_.nccl_order != nullptr && DeviceNccl::MayTake(p.meta, place_.size, routing_)) {
    p.nccl_number = place_.nccl_order->Submitted(place_.set_id, &p.meta.name);
  }
}

void DeviceBackend::Released(TensorRecord& p) {
  if (place_.nccl_order != nullptr) {
    place_.nccl_order->Finished(place_.set_id, std::exchange(p.nccl_number, 0));
  }
}

bool DeviceBackend::Watch(TimePoint now, bool stopped) {
  if (!staging_) return false;
  if (stopped && !staging_->WatchesNccl()) return false;
  staging_->WatchNccl(now, stopped);
  return true;
}

void DeviceBackend::Abort(const std::string& why) {
  if (staging_) staging_->AbortNccl(why);
}

Status DeviceBackend::Close() { return staging_ ? staging_->CloseWindow() : Status::Ok(); }

void DeviceBackend::Cancel() {
  if (place_.nccl_order != nullptr) place_.nccl_order->Cancel(place_.set_id);
}

uint64_t DeviceBackend::batches() const { return staging_ ? staging_->batches() : 0; }

std::map<std::string, uint64_t> DeviceBackend::route_batches() const {
  std::map<std::string, uint64_t> counts;
  if (staging_) {
    for (const auto& [name, n] : staging_->route_batches()) counts[name] = n;
  }
  return counts;
}

}  // namespace hora
