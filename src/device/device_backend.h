// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The device backend: the engine's batches of GPU tensors (the seam is
// engine/device_batches.h), one per engine. The Session makes it beside
// the engine's host backend and hands it to the engine.
//
// It opens its way through the GPU (DeviceStaging: pinned buffers, the
// engine's stream, the device window, NCCL) at the first GPU batch, from
// the device the Session opened when the tensor was submitted. A joined
// rank's placeholders for GPU tensors' collectives (host memory, identity
// values) it runs on the host backend as the other ranks' staged batches
// run, in chunks or whole, and tells them what it gave (batch_verdict.h).
// NCCL's calls take their turns in the rank's order (nccl_order.h), as
// process set `set_id`; the turns are numbered at submission (Claimed).
//
// Not thread-safe, but as DeviceBatches says.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "common/config.h"
#include "common/logging.h"
#include "device/device_staging.h"
#include "device/gpu_routing.h"
#include "device/nccl_order.h"
#include "engine/device_batches.h"
#include "gpu/lazy_device.h"

namespace hora {

class DeviceBackend final : public DeviceBatches {
 public:
  // Where it runs: the Session's devices and NCCL turn order (both outlive
  // it), and the engine's host backend `data`, its ranks and `label` (a
  // process set's, "" for the global set's). `lost_peer`: a peer lost,
  // named, or OK (the watch of NCCL's work asks).
  struct Place {
    gpu::LazyDevice* devices = nullptr;
    NcclOrder* nccl_order = nullptr;
    int set_id = 0;
    CollectiveBackend* data = nullptr;
    int rank = 0;
    int size = 1;
    std::string label;
    std::function<Status()> lost_peer;
    NcclSource nccl;     // which NCCL it loads
    GpuRouting routing;  // the Session's (gpu_routing.h)
    // The set's data Comm where Hora's backend runs it (null: none), for
    // the device windows, and the selector of the host tiers' algorithms.
    Comm* data_comm = nullptr;
    const Selector* selector = nullptr;
  };
  DeviceBackend(const Config& config, const Logger& logger, Place place);
  ~DeviceBackend() override;  // forgets the set's turns
  DeviceBackend(const DeviceBackend&) = delete;
  DeviceBackend& operator=(const DeviceBackend&) = delete;

  Status Run(const std::vector<TensorRecord*>& batch, bool joined_any,
             std::vector<std::byte>* fusion) override;
  bool RunsAtSubmission(const RequestMeta& m) const override;
  void Claimed(TensorRecord& p) override;
  void Released(TensorRecord& p) override;
  bool Watch(TimePoint now, bool stopped) override;
  void Abort(const std::string& why) override;
  Status Close() override;
  void Cancel() override;
  uint64_t batches() const override;
  std::map<std::string, uint64_t> route_batches() const override;

 private:
  // A joined rank's placeholders (host memory) for GPU tensors' collective.
  Status RunPlaceholders(const std::vector<TensorRecord*>& batch, std::vector<std::byte>* fusion);
  // Makes staging_ at the first GPU batch.
  Status Open();

  const Config config_;
  const Logger logger_;
  const Place place_;
  const GpuRouting& routing_ = place_.routing;
  std::unique_ptr<DeviceStaging> staging_;
  std::vector<uint8_t> verdict_;  // (RunPlaceholders' AgreeOnBatch)
};

}  // namespace hora
