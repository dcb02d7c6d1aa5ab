// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/handle_state.h"

#include <algorithm>

#include "common/clock.h"

namespace hora {

void Handle::State::Complete(Status st, std::optional<Tensor> out, std::vector<int64_t> received,
                             std::shared_ptr<DeviceDone> device) {
  if (!done.Claim()) return;
  status = std::move(st);
  output = std::move(out);
  received_splits = std::move(received);
  on_device = std::move(device);
  done.Set();
}

void Handle::State::Renew() {
  status = Status::Ok();
  output.reset();
  received_splits.clear();
  on_device.reset();
  done.Reset();
}

Handle::Handle(State* state) : state_(state) {
  state_->holders.fetch_add(1, std::memory_order_relaxed);
}

Handle::Handle(const Handle& other) : state_(other.state_) {
  if (state_ != nullptr) state_->holders.fetch_add(1, std::memory_order_relaxed);
}

Handle& Handle::operator=(const Handle& other) {
  Handle copy(other);
  std::swap(state_, copy.state_);
  return *this;
}

Handle& Handle::operator=(Handle&& other) noexcept {
  Handle taken(std::move(other));
  std::swap(state_, taken.state_);
  return *this;
}

Handle::~Handle() {
  // (acq_rel: every holder's use happens before the delete, and before the
  // engine's reuse, which OnlyHolder() reads with acquire)
  if (state_ != nullptr && state_->holders.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    delete state_;
  }
}

namespace {

// Waits until the engine completed `s` (not its copies on the GPU), at
// most until `deadline`: false if not by then.
bool WaitForEngine(Handle::State& s, std::chrono::nanoseconds timeout, TimePoint now,
                   TimePoint deadline) {
  if (s.done.IsSet()) return true;  // (waiting on a step's handles: most are done)
  // Small collectives finish within microseconds: spin before sleeping.
  // During its spin the waiter runs the engine's cycles itself (unless the
  // engine's thread is in one): no hand-off to that thread and back. A cycle
  // under way is finished first, so this may outlast `timeout` by one cycle.
  if (s.gate && s.spin > Duration::zero() && timeout > Duration::zero()) {
    s.gate->Drive(s.done, std::min(deadline, now + s.spin));
  }
  return SpinUntil([&] { return s.done.IsSet(); }, std::min<Duration>(timeout, s.spin)) ||
         s.done.WaitUntil(deadline);
}

Status NotDone(const Handle::State& s, std::chrono::nanoseconds timeout) {
  return TimeoutError("handle of '" + s.name + "': not done after " +
                      std::to_string(std::chrono::duration<double>(timeout).count()) + " s");
}

}  // namespace

bool Handle::Poll() const {
  return state_ == nullptr ||
         (state_->done.IsSet() && (!state_->on_device || state_->on_device->Reached()));
}

bool Handle::Finished() const { return state_ == nullptr || state_->done.IsSet(); }

Status Handle::Wait(std::chrono::nanoseconds timeout) const {
  if (state_ == nullptr) return InvalidArgument("empty handle");
  // One deadline covers the engine and the GPU.
  State& s = *state_;
  // (Done already, as most of a step's handles are: no clock to read.)
  if (s.done.IsSet() && !s.on_device) return s.status;
  const TimePoint now = Clock::now();
  const TimePoint deadline = DeadlineAfter(now, timeout);
  if (!WaitForEngine(s, timeout, now, deadline)) return NotDone(s, timeout);
  if (!s.on_device) return s.status;
  // (A failed batch may have queued copies too: they are waited for, so that
  // the caller may free its tensors once this returns.)
  const Status copies = s.on_device->Wait(deadline);
  if (copies.code() == StatusCode::kTimeout || s.status.ok()) return copies;
  return s.status;
}

Status Handle::StreamWait(uint64_t stream, std::chrono::nanoseconds timeout) const {
  if (state_ == nullptr) return InvalidArgument("empty handle");
  State& s = *state_;
  const TimePoint now = Clock::now();
  if (!WaitForEngine(s, timeout, now, DeadlineAfter(now, timeout))) return NotDone(s, timeout);
  if (!s.on_device) return s.status;
  const Status handed = s.on_device->HandTo(stream);
  return s.status.ok() ? handed : s.status;
}

Status Handle::status() const {
  if (state_ == nullptr) return InvalidArgument("empty handle");
  if (!Poll()) return UnavailableError("handle of '" + state_->name + "': not done yet");
  if (!state_->status.ok() || !state_->on_device) return state_->status;
  return state_->on_device->Wait(Clock::now());  // (reached: its outcome)
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
