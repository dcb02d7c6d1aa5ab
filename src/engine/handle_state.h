// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The shared completion state behind a Handle (include/hora/handle.h).
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/done_flag.h"
#include "engine/drive_gate.h"
#include "gpu/device_done.h"
#include "hora/handle.h"

namespace hora {

struct Handle::State {
  explicit State(std::string n, Duration wait_spin = Duration::zero())
      : name(std::move(n)), spin(wait_spin) {}
  // First call wins; wakes every waiter.
  // `on_device`: GPU tensors' results still being copied (device_done.h).
  void Complete(Status st, std::optional<Tensor> out = std::nullopt,
                std::vector<int64_t> received = {},
                std::shared_ptr<DeviceDone> on_device = nullptr);

  // The engine keeps a finished tensor's completion for the name's next
  // one (TensorRecord::kept): a steady step allocates no completions.
  // True when `kept` is the only Handle on it (acquire: whatever the other
  // holders did with it happened before).
  bool OnlyHolder() const { return holders.load(std::memory_order_acquire) == 1; }
  // As new, for the next tensor of the same name: only when OnlyHolder()
  // and done.
  void Renew();

  // Every Handle on it (the last one gone deletes it).
  std::atomic<uint32_t> holders{0};

  const std::string name;
  const Duration spin;  // how long Wait spins before it sleeps (see SpinUntil)
  // The engine's, for a waiter to run cycles itself during its spin (null:
  // it only spins); set before the handle is shared.
  std::shared_ptr<DriveGate> gate;
  // The result below is written once, by the first Complete(), before done
  // is set, and never after: readers that saw done read it without a lock.
  DoneFlag done;
  Status status;
  std::optional<Tensor> output;
  std::vector<int64_t> received_splits;  // alltoall
  std::shared_ptr<DeviceDone> on_device;
};

// A handle that is already failed with `st` (bad input at submission).
inline Handle FailedHandle(const std::string& name, Status st) {
  Handle h(new Handle::State(name));
  h.state()->Complete(std::move(st));
  return h;
}

}  // namespace hora
