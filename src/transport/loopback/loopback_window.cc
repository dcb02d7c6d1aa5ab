// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "transport/loopback/loopback_window.h"

#include <atomic>
#include <string>

#include "transport/loopback/loopback_transport.h"

namespace hora {
namespace {

// How long a waiter spins before it sleeps, and its longest single sleep.
constexpr Duration kSpin = std::chrono::microseconds(20);
constexpr Duration kSleepSlice = std::chrono::milliseconds(10);

}  // namespace

LoopbackWindowGroup::LoopbackWindowGroup(int size, size_t bytes_per_rank)
    : bytes(bytes_per_rank), lines(new Line[static_cast<size_t>(size)]) {
  for (int k = 0; k < size; ++k) {
    storage.push_back(std::make_unique<std::byte[]>(bytes + 64));
    auto addr = reinterpret_cast<uintptr_t>(storage.back().get());
    regions.push_back(reinterpret_cast<std::byte*>((addr + 63) & ~uintptr_t{63}));
  }
}

LoopbackWindow::LoopbackWindow(int rank, int size, uint32_t context,
                               std::shared_ptr<LoopbackWindowGroup> group, const LoopbackHub& hub,
                               int generation, std::vector<int> members)
    : SharedWindow(rank, size),
      context_(context),
      group_(std::move(group)),
      hub_(hub),
      generation_(generation),
      members_(std::move(members)) {}

bool LoopbackWindow::PeerAhead() const {
  for (int k = 0; k < size(); ++k) {
    if (group_->lines[static_cast<size_t>(k)].step.load(std::memory_order_acquire) > step_)
      return true;
  }
  return false;
}

void LoopbackWindow::Publish(uint64_t word) {
  const uint64_t step = ++step_;
  first_ = 0;
  LoopbackWindowGroup::Line& mine = group_->lines[static_cast<size_t>(rank())];
  mine.word[step & 1u].store(word, std::memory_order_relaxed);
  // As ShmWindow::Publish: only the step's last arrival wakes the waiters
  // (seq_cst store and first look: of the last two, one sees the other).
  mine.step.store(step, std::memory_order_seq_cst);
  if (Arrived(std::memory_order_seq_cst)) {
    { MutexLock lock(group_->mu); }  // a waiter is asleep or sees the step
    group_->cv.notify_all();
  }
}

bool LoopbackWindow::Arrived(std::memory_order order) {
  for (; first_ < size(); ++first_) {
    if (group_->lines[static_cast<size_t>(first_)].step.load(order) < step_) return false;
  }
  return true;
}

std::string LoopbackWindow::Missing() const {
  std::string missing;
  int count = 0;
  for (int k = 0; k < size(); ++k) {
    if (group_->lines[static_cast<size_t>(k)].step.load(std::memory_order_acquire) >= step_)
      continue;
    missing += (missing.empty() ? "" : ", ") + std::to_string(Member(k));
    ++count;
  }
  return (count == 1 ? "rank " : "ranks ") + missing;
}

Status LoopbackWindow::WaitStep(TimePoint deadline) {
  if (SpinUntil([&] { return Arrived(); }, kSpin)) return Status::Ok();
  MutexLock lock(group_->mu);
  for (;;) {
    const TimePoint now = Clock::now();
    if (Arrived()) return Status::Ok();
    if (hub_.any_lost()) return hub_.lost();  // (as a shared-memory window's step)
    for (int k = first_; k < size(); ++k) {
      if (group_->lines[static_cast<size_t>(k)].step.load(std::memory_order_acquire) >= step_)
        continue;
      if (hub_.closed(Member(k)) >= generation_) {
        return UnavailableError("rank " + std::to_string(Member(k)) +
                                " closed its transport (its session ended)");
      }
    }
    if (now >= deadline) {
      return TimeoutError("waiting for " + Missing() + " at step " + std::to_string(step_) +
                          " of the shared-memory window (context " + std::to_string(context_) +
                          ")");
    }
    group_->cv.wait_until(lock.native(), std::min(deadline, now + kSleepSlice));
  }
}

}  // namespace hora
