// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The device a Session works its GPU tensors on, opened at the first one: a
// job that never passes a GPU tensor never initialises CUDA. One device per
// Session (one GPU per rank, as Horovod and NCCL have it): a tensor on
// another ordinal is refused, naming both.
//
// It also checks, at submission, that a tensor said to be on the GPU is in
// one of its allocations, through a pointer cache (a steady step asks the
// driver once per allocation per millisecond at most, not once per tensor).
//
// Thread-safe: every member may be called from any thread; the device opens
// once.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/mutex.h"
#include "gpu/device.h"
#include "gpu/pointer_cache.h"

namespace hora::gpu {

class LazyDevice {
 public:
  // Opens the device of an ordinal: a CUDA device, or the host device (a
  // test double), as the composition root chose (backends/device_choice.h).
  using Opener = std::function<Result<std::unique_ptr<Device>>(int ordinal)>;
  // `kind`: the HORA_DEVICE setting, for errors; `open`: how its device opens.
  LazyDevice(std::string kind, Opener open) : kind_(std::move(kind)), open_(std::move(open)) {}

  // The device of ordinal `ordinal` (opened now if none is open), or why
  // there is none: no CUDA in this build, no usable GPU, or another
  // ordinal already open. A failure to open is kept: later calls return it
  // without trying again.
  Result<std::shared_ptr<Device>> Get(int ordinal) HORA_EXCLUDES(mu_);

  // Checks that the `bytes` at `p` lie in one allocation of device memory of
  // the device of `ordinal` (opened now if none is). Through the pointer
  // cache: the device is asked once per allocation per kRecheckEvery (the
  // allocation's buffer id, to see memory freed and allocated again at the
  // same address), not once per tensor.
  Status CheckTensorMemory(int ordinal, const void* p, size_t bytes) HORA_EXCLUDES(mu_);
  static constexpr Duration kRecheckEvery = std::chrono::milliseconds(1);

  // The open device, or null (never opens one).
  std::shared_ptr<Device> opened() const HORA_EXCLUDES(mu_);
  // The rank's one stream on it, made when it opened (0 before): every copy
  // Hora makes of GPU tensors is queued there, and a framework hands a
  // tensor over by making this stream wait for the tensor's producer
  // (DLPack's stream argument: Stream::id is the native handle).
  Stream stream() const HORA_EXCLUDES(mu_);

  ~LazyDevice();

 private:
  Result<std::shared_ptr<Device>> GetLocked(int ordinal) HORA_REQUIRES(mu_);

  const std::string kind_;
  const Opener open_;
  mutable Mutex mu_;
  std::optional<int> ordinal_ HORA_GUARDED_BY(mu_);  // what was opened, or tried
  std::shared_ptr<Device> device_ HORA_GUARDED_BY(mu_);
  std::unique_ptr<PointerCache> pointers_ HORA_GUARDED_BY(mu_);  // of device_
  TimePoint round_began_ HORA_GUARDED_BY(mu_);                   // (kRecheckEvery)
  Stream stream_ HORA_GUARDED_BY(mu_);
  Status failed_ HORA_GUARDED_BY(mu_);
};

}  // namespace hora::gpu
