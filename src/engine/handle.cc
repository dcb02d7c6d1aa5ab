// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/handle_state.h"

#include <algorithm>

#include "common/clock.h"

namespace hora {

void Handle::State::Complete(Status st, std::optional<Tensor> out, std::vector<int64_t> received) {
  if (!done.Claim()) return;
  status = std::move(st);
  output = std::move(out);
  received_splits = std::move(received);
  done.Set();
}

bool Handle::Poll() const { return state_ == nullptr || state_->done.IsSet(); }

Status Handle::Wait(std::chrono::nanoseconds timeout) const {
  if (state_ == nullptr) return InvalidArgument("empty handle");
  // Small collectives finish within microseconds: spin before sleeping.
  // One deadline covers the spin and the sleep.
  State& s = *state_;
  if (s.done.IsSet()) return s.status;  // (waiting on a step's handles: most are done)
  const TimePoint deadline = DeadlineAfter(Clock::now(), timeout);
  // During its spin the waiter runs the engine's cycles itself (unless the
  // engine's thread is in one): no hand-off to that thread and back. A cycle
  // under way is finished first, so this may outlast `timeout` by one cycle.
  if (s.gate && s.spin > Duration::zero() && timeout > Duration::zero()) {
    s.gate->Drive(s.done, std::min(deadline, Clock::now() + s.spin));
  }
  if (SpinUntil([&] { return s.done.IsSet(); }, std::min<Duration>(timeout, s.spin)) ||
      s.done.WaitUntil(deadline)) {
    return s.status;
  }
  return TimeoutError("handle of '" + s.name + "': not done after " +
                      std::to_string(std::chrono::duration<double>(timeout).count()) + " s");
}

Status Handle::status() const {
  if (state_ == nullptr) return InvalidArgument("empty handle");
  if (!state_->done.IsSet()) {
    return UnavailableError("handle of '" + state_->name + "': not done yet");
  }
  return state_->status;
}

const std::vector<int64_t>* Handle::received_splits() const {
  if (state_ == nullptr || !Poll()) return nullptr;
  return &state_->received_splits;
}

std::optional<Tensor> Handle::TakeOutput() {
  if (state_ == nullptr || !Poll() || !state_->output) return std::nullopt;
  std::optional<Tensor> out = std::move(state_->output);
  state_->output.reset();
  return out;
}

const Tensor* Handle::output() const {
  if (state_ == nullptr || !Poll()) return nullptr;
  return state_->output ? &*state_->output : nullptr;
}

}  // namespace hora
