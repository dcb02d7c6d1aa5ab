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
  const TimePoint deadline = Clock::now() + timeout;
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

const Tensor* Handle::output() const {
  if (state_ == nullptr || !Poll()) return nullptr;
  return state_->output ? &*state_->output : nullptr;
}

}  // namespace hora
