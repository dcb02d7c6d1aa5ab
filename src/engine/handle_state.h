// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The shared completion state behind a Handle (include/hora/handle.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "hora/handle.h"

namespace hora {

struct Handle::State {
  explicit State(std::string n, Duration wait_spin = Duration::zero())
      : name(std::move(n)), spin(wait_spin) {}
  // First call wins; wakes every waiter.
  void Complete(Status st, std::optional<Tensor> out = std::nullopt,
                std::vector<int64_t> received = {});

  const std::string name;
  const Duration spin;  // how long Wait spins before it sleeps (see SpinUntil)
  std::atomic<bool> done{false};
  std::mutex mu;
  std::condition_variable cv;
  Status status;                         // guarded by mu
  std::optional<Tensor> output;          // guarded by mu
  std::vector<int64_t> received_splits;  // alltoall; guarded by mu
};

// A handle that is already failed with `st` (bad input at submission).
inline Handle FailedHandle(const std::string& name, Status st) {
  auto state = std::make_shared<Handle::State>(name);
  state->Complete(std::move(st));
  return Handle(std::move(state));
}

}  // namespace hora
