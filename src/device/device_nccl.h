// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// GPU collectives through NCCL (docs/dev/gpu.md, "NCCL"), for the engine's
// batches of GPU tensors (device_staging.h hands them over):
//  - which batches (Wants), by the Session's routing settings (gpu_routing.h,
//    which ranks agree on): HORA_GPU_BACKEND=nccl,
//    every allreduce and reducescatter NCCL takes (backends/nccl/nccl.h:
//    NcclTakes) and every broadcast, allgather and alltoall; auto, those
//    of HORA_NCCL_MIN_BYTES or more (a size every rank computes alike);
//    hora, none. Never a batch decided while a rank had joined (its
//    placeholders are host memory). Every process set's engine has its own
//    communicator, on its own stream (device_staging.h). Every input of the
//    choice is the same on every rank.
//  - the communicator, at the first such batch (Ready), collectively over
//    the engine's data backend: each rank loads the library
//    (HORA_NCCL_LIBRARY) and says whether it could, with its GPU's identity;
//    rank 0's id goes along. Ranks sharing a GPU (NCCL needs one each), or a
//    rank that could not load or init, leave every rank without NCCL: with
//    auto, a warning and Hora's paths; with nccl, the batch fails on every
//    rank, naming why.
//  - a batch: packed by one batched copy into the device fusion buffer (a
//    single tensor: in its output), prescaled there (by the caller, before
//    the ranks agree to make the calls), reduced by NCCL
//    (average as a sum), finalized, unpacked; all queued on the rank's
//    stream, and the handles hold the event after it (async completion).
//    Allgather, reducescatter and alltoall write an output Hora allocates on
//    the device: one NCCL call where every rank's part is the same size,
//    else one group of point-to-point calls (or of reduces, one per part).
//  - the calls of a batch are made in this set's turn (nccl_order.h),
//    awaited once the ranks agreed to make them: one set at a time on a
//    rank, in the order the rank's tensors were submitted, so that sets
//    sharing ranks reach NCCL in one order on every rank where their
//    tensors were submitted in one order. A rank whose turn does not come
//    (HORA_TIMEOUT_S, the engine stopping) makes no call and aborts its
//    communicator, as after a call that failed.
//  - a call that fails (refused, in progress past the timeout, or a
//    communicator that reports an error of its own) aborts the
//    communicator: that rank's next NCCL batch fails, naming it, and every
//    rank then makes a new one (Restart, batch_verdict.h). The other
//    ranks' calls, queued by then, wait on their GPUs for that rank's until
//    that next batch; the engine watches such work, and aborts at the
//    timeout (DeviceStaging::WatchNccl). At the engine's
//    end the communicator is aborted, not destroyed, so that work that
//    never ends (a peer lost while NCCL waited for it) cannot hold the end
//    up.
//
// Not thread-safe: the engine's cycle uses it.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "backends/backend.h"
#include "backends/nccl/nccl.h"
#include "common/logging.h"
#include "device/gpu_routing.h"
#include "device/nccl_order.h"
#include "engine/allocated_outputs.h"
#include "engine/tensor_records.h"
#include "gpu/device.h"

namespace hora {

class DeviceNccl {
 public:
  struct Settings {
    NcclSource nccl;  // HORA_NCCL_LIBRARY's
    const Logger* logger = nullptr;
    // The rank's order of NCCL calls across its process sets (null: this
    // set's batches need no turn) and this set's id there; a batch waits
    // for its turn at most `turn_timeout` (twice HORA_TIMEOUT_S: a backstop,
    // since another set's tensor that never runs fails at HORA_TIMEOUT_S
    // itself; zero: as long as it takes), warning every `warn_every`
    // (HORA_STALL_WARNING_S).
    NcclOrder* order = nullptr;
    int set = 0;
    Duration turn_timeout{};
    Duration warn_every{};
    std::string label;  // the set's, for warnings: "process set 2 (ranks 0, 2)" (empty: global)
    GpuRouting routing;
  };
  DeviceNccl(std::shared_ptr<gpu::Device> device, gpu::Stream stream, Duration timeout,
             Settings settings);
  ~DeviceNccl();
  DeviceNccl(const DeviceNccl&) = delete;
  DeviceNccl& operator=(const DeviceNccl&) = delete;

  // Whether a batch of `m`'s collective, `bytes` in all, goes to NCCL when
  // it can be used.
  bool Wants(const RequestMeta& m, size_t bytes, bool joined_any) const;
  // Whether NCCL may take a tensor of `m` in a set of `size` ranks,
  // whatever its batch's size and joins.
  static bool MayTake(const RequestMeta& m, int size, const GpuRouting& routing);
  // Waits for this set's turn to make `batch`'s calls (nccl_order.h); with
  // no order, a turn at once. The turn must end before the next call.
  Result<NcclOrder::Turn> AwaitTurn(const std::vector<TensorRecord*>& batch, int rank);
  // Collective at the first call, and at the first after Restart (the same
  // point on every rank): makes the communicator. Then: whether there is
  // one; under HORA_GPU_BACKEND=nccl, an error (the same on every
  // rank) where there is none; and this rank's error where its
  // communicator was aborted (broken).
  Result<bool> Ready(CollectiveBackend& data, int rank, int size);

  // Ends the communicator's work at once (the engine's end, or an error).
  void Abort(const std::string& why);
  // `f(why)` runs at every abort, before the communicator's queued work is
  // cut short: its owner fails what had not ended (device_staging.h).
  void OnAbort(std::function<void(const std::string&)> f) { on_abort_ = std::move(f); }
  // An error NCCL reports of its own while work is queued (a peer's failure
  // seen over the network, ncclRemoteError; its kernels wait on), or OK
  // (none, or no communicator).
  Status AsyncError() const;
  // Whether the communicator was aborted on an error (Ready then fails).
  bool broken() const { return !broken_.ok(); }
  const Status& why_broken() const { return broken_; }
  const Settings& settings() const { return settings_; }
  // Aborts the communicator, and makes the next Ready make another: every
  // rank calls it at the same batch (a rank left NCCL: batch_verdict.h),
  // so that their next NCCL batch starts afresh together.
  void Restart(const std::string& why);

  // Queues `m`'s collective on `count` elements at `data` (device memory, in
  // place, prescaled already); `world` ranks.
  Status Allreduce(void* data, size_t count, const RequestMeta& m, int world);
  Status Broadcast(void* data, size_t bytes, int root);
  // The shaped collectives, into `out` (device memory) as `plan` says
  // (allocated_outputs.h); this rank is `rank`. Uneven parts go as one
  // group of sends and receives (allgather, alltoall) or reduces
  // (reducescatter); this rank's own part by a copy on the device.
  // Reducescatter's `in` is prescaled already; it is finalized here.
  Status Allgather(const void* in, void* out, const ShapedPlan& plan, int rank);
  Status Alltoall(const void* in, void* out, const ShapedPlan& plan, int rank);
  Status Reducescatter(const void* in, void* out, const ShapedPlan& plan, const RequestMeta& m,
                       int rank, int world);

 private:
  // Aborts the communicator when `failed` (a call's error) left it broken.
  void AbortIfBroken(const Status& failed);
  // OK where there is a communicator to call; else why not (it was aborted
  // after Ready, by a wait that found a peer lost: device_staging.h).
  Status Usable() const;
  // Runs `calls` (each given the communicator) as one NCCL group; the first
  // error, the group ended whatever happened.
  Status Grouped(const std::function<Status(NcclComm&)>& calls);
  // Ready's first call.
  Status MakeCommunicator(CollectiveBackend& data, int rank, int size);
  // The library (HORA_NCCL_LIBRARY), loaded at the first call.
  Status LoadLibrary();

  const std::shared_ptr<gpu::Device> device_;
  const gpu::Stream stream_;
  const Duration timeout_;
  const Settings settings_;
  bool tried_ = false;
  Status unusable_;  // why there is no communicator (after the first try)
  Status broken_;    // why it was aborted (an error of NCCL's)
  std::unique_ptr<NcclLibrary> library_;
  std::unique_ptr<NcclComm> comm_;  // (goes before the library)
  std::vector<uint64_t> numbers_;   // (AwaitTurn's, for its turn)
  std::function<void(const std::string&)> on_abort_;
};

}  // namespace hora
