// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "gpu/lazy_device.h"

namespace hora::gpu {

Result<std::shared_ptr<Device>> LazyDevice::Get(int ordinal) {
  MutexLock lock(mu_);
  return GetLocked(ordinal);
}

Result<std::shared_ptr<Device>> LazyDevice::GetLocked(int ordinal) {
  if (ordinal_) {
    if (*ordinal_ != ordinal) {
      return InvalidArgument("tensor on cuda:" + std::to_string(ordinal) +
                             ", but this rank works on cuda:" + std::to_string(*ordinal_) +
                             " (one GPU per rank: put every tensor of a rank on its GPU, as "
                             "torch.cuda.set_device(hvd.local_rank()) does)");
    }
    if (!failed_.ok()) return failed_;
    return device_;
  }
  ordinal_ = ordinal;
  Result<std::unique_ptr<Device>> opened = open_(ordinal);
  if (!opened.ok()) {
    failed_ = opened.status().WithContext("GPU tensors (HORA_DEVICE=" + kind_ + ")");
    return failed_;
  }
  std::shared_ptr<Device> device(std::move(opened).value());
  Result<Stream> stream = device->CreateStream();
  if (!stream.ok()) {
    failed_ = stream.status().WithContext("GPU tensors (HORA_DEVICE=" + kind_ + ")");
    return failed_;
  }
  device_ = std::move(device);
  stream_ = *stream;
  pointers_ = std::make_unique<PointerCache>(*device_, PointerCache::Policy::kVerify);
  return device_;
}

LazyDevice::~LazyDevice() {
  MutexLock lock(mu_);
  if (device_ && stream_.id != 0) (void)device_->DestroyStream(stream_);  // (waits for it)
}

Stream LazyDevice::stream() const {
  MutexLock lock(mu_);
  return stream_;
}

Status LazyDevice::CheckTensorMemory(int ordinal, const void* p, size_t bytes) {
  MutexLock lock(mu_);
  // (Every GPU tensor of a step comes here: the open device and a cached
  // range that holds the tensor make no string and, within a round, no
  // query.)
  if (!ordinal_ || *ordinal_ != ordinal || !device_) {
    HORA_RETURN_IF_ERROR(GetLocked(ordinal).status());
  }
  if (bytes == 0) return Status::Ok();  // (no memory is read)
  const auto at = reinterpret_cast<uintptr_t>(p);
  // Each allocation's identity is checked again on its first use in a
  // round (kRecheckEvery): memory freed and allocated again at the same
  // address, smaller, is then seen as the new allocation.
  if (const TimePoint now = Clock::now(); now - round_began_ >= kRecheckEvery) {
    pointers_->BeginBatch();
    round_began_ = now;
  }
  HORA_ASSIGN_OR_RETURN(PointerInfo info, pointers_->Lookup(p));
  auto fits = [&] {
    return info.kind == MemoryKind::kDevice && (info.device < 0 || info.device == ordinal) &&
           at + bytes <= info.base + info.size;
  };
  if (fits()) return Status::Ok();
  // (Checked in this round, the memory may have been freed and allocated
  // again since. Before refusing, ask the device afresh.)
  pointers_->Clear();
  HORA_ASSIGN_OR_RETURN(info, pointers_->Lookup(p));
  if (fits()) return Status::Ok();
  const std::string where = "cuda:" + std::to_string(ordinal);
  if (info.kind == MemoryKind::kDevice && info.device >= 0 && info.device != ordinal) {
    return InvalidArgument("its memory is on cuda:" + std::to_string(info.device) + ", not " +
                           where);
  }
  if (info.kind != MemoryKind::kDevice) {
    return InvalidArgument(std::string("its memory is ") +
                           (info.kind == MemoryKind::kPinned ? "pinned host" : "host") +
                           " memory, not memory of " + where);
  }
  if (at + bytes > info.base + info.size) {
    return InvalidArgument("its " + std::to_string(bytes) + " bytes run past the end of its " +
                           where + " allocation (" + std::to_string(info.size) +
                           " bytes, of which " + std::to_string(info.base + info.size - at) +
                           " from the tensor on)");
  }
  return Status::Ok();
}

std::shared_ptr<Device> LazyDevice::opened() const {
  MutexLock lock(mu_);
  return device_;
}

}  // namespace hora::gpu
