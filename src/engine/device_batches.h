// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The engine's seam to the GPU (docs/dev/design.md §9): whatever runs the
// batches of GPU tensors. The engine runs a host batch on its
// CollectiveBackend (run_batch.h) and hands a GPU batch here, one call
// (Run); it knows nothing of how: staging through pinned memory, device
// windows, NCCL and its turns are the device backend's (src/device/),
// which the Session makes and hands to the engine. The other calls tell it
// what it needs to know of the engine's life: tensors claimed and released
// (NCCL's turns), the cycles (to watch the GPU's work), a failure, the
// stop everywhere and the engine's end.
//
// Not thread-safe, but for Claimed and Released (from the submitting
// threads and the cycle) and Cancel (from the engine's destructor): the
// engine's cycle calls the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "engine/tensor_records.h"
#include "hora/status.h"

namespace hora {

class DeviceBatches {
 public:
  virtual ~DeviceBatches() = default;

  // Whether `batch` (of one collective) is the device backend's: GPU
  // tensors' records, or a joined rank's placeholders for them.
  static bool Takes(const std::vector<TensorRecord*>& batch) {
    return batch.front()->meta.device == DeviceType::kCUDA;
  }
  // Runs `batch` as RunPlannedBatch runs a host batch (`joined_any`: some
  // rank had joined when it was decided; `fusion`: the engine's host fusion
  // buffer). The batch's handles may complete before the GPU is done: each
  // GPU tensor's record then holds the event its results wait for
  // (TensorRecord::on_device).
  virtual Status Run(const std::vector<TensorRecord*>& batch, bool joined_any,
                     std::vector<std::byte>* fusion) = 0;
  // Whether a one-rank engine may run `m`'s tensor at submission, alone
  // (engine_at_submission.cc).
  virtual bool RunsAtSubmission(const RequestMeta& m) const = 0;

  // A tensor claimed its record (`p`), and its record is released (finished
  // or failed): NCCL's turn numbers.
  virtual void Claimed(TensorRecord& p) = 0;
  virtual void Released(TensorRecord& p) = 0;

  // Looks at the GPU's work still under way (each cycle, and while idle);
  // `stopped`: the engine has stopped, no batch follows. Returns false
  // where there was nothing to look at (then, once stopped, nothing will
  // come).
  virtual bool Watch(TimePoint now, bool stopped) = 0;
  // The engine failed (a peer may be lost): ends the GPU work that waits
  // for other ranks, naming `why`.
  virtual void Abort(const std::string& why) = 0;
  // Collective: the engine stops on every rank.
  virtual Status Close() = 0;
  // The engine is being destroyed: a batch waiting for its turn fails (from
  // any thread).
  virtual void Cancel() = 0;

  // Batches run so far (failed or not), and how many went each way, by the
  // way's name (the device backend's routes: one_rank, nccl, window, ...),
  // for EngineStats.
  virtual uint64_t batches() const = 0;
  virtual std::map<std::string, uint64_t> route_batches() const = 0;
};

}  // namespace hora
