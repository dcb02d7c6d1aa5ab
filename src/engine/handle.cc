// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/handle_state.h"

#include <algorithm>

#include "common/clock.h"

namespace hora {

void Handle::State::Complete(Status st, std::optional<Tensor> out, std::vector<int64_t> received) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (done.load(std::memory_order_relaxed)) return;
    status = std::move(st);
    output = std::move(out);
    received_splits = std::move(received);
    done.store(true, std::memory_order_release);
  }
  cv.notify_all();
}

bool Handle::Poll() const {
  return state_ == nullptr || state_->done.load(std::memory_order_acquire);
}

Status Handle::Wait(std::chrono::nanoseconds timeout) const {
  if (state_ == nullptr) return InvalidArgument("empty handle");
  // Small collectives finish within microseconds: spin before sleeping.
  // The status is written before `done` is set and never after.
  // One deadline covers the spin and the sleep.
  State& s = *state_;
  const TimePoint deadline = Clock::now() + timeout;
  if (SpinUntil([&] { return s.done.load(std::memory_order_acquire); },
                std::min<Duration>(timeout, s.spin))) {
    return s.status;
  }
  std::unique_lock<std::mutex> lock(state_->mu);
  if (!state_->cv.wait_until(lock, deadline,
                             [&] { return state_->done.load(std::memory_order_acquire); })) {
    return TimeoutError("handle of '" + state_->name + "': not done after " +
                        std::to_string(std::chrono::duration<double>(timeout).count()) + " s");
  }
  return state_->status;
}

Status Handle::status() const {
  if (state_ == nullptr) return InvalidArgument("empty handle");
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->done.load(std::memory_order_relaxed)) {
    return UnavailableError("handle of '" + state_->name + "': not done yet");
  }
  return state_->status;
}

const std::vector<int64_t>* Handle::received_splits() const {
  if (state_ == nullptr || !Poll()) return nullptr;
  return &state_->received_splits;
}

const Tensor* Handle::output() const {
  if (state_ == nullptr || !Poll()) return nullptr;
  return state_->output ? &*state_->output : nullptr;
}

}  // namespace hora
