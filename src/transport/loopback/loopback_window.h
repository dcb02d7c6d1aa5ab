// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The loopback transport's shared windows (transport/shared_window.h): ranks
// are threads, so a window is plain memory of the hub that every rank's
// transport points into. A Step publishes like the shm window (word, then
// step number), and the step's last arrival wakes sleepers; a waiter spins briefly and
// then sleeps on the group's condition variable, in slices, so that it also
// notices a rank whose transport closed.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "transport/shared_window.h"

namespace hora {

class LoopbackHub;

// One context's window, shared by the ranks of a hub.
struct LoopbackWindowGroup {
  LoopbackWindowGroup(int size, size_t bytes);

  struct alignas(64) Line {
    std::atomic<uint64_t> step{0};
    std::atomic<uint64_t> word[2] = {};  // relaxed; ordered by `step`
  };
  const size_t bytes;
  std::unique_ptr<Line[]> lines;
  std::vector<std::unique_ptr<std::byte[]>> storage;
  std::vector<std::byte*> regions;  // 64-byte aligned, into storage
  Mutex mu;  // guards no data (the lines are atomic): sleepers wait on cv under it
  std::condition_variable cv;
};

class LoopbackWindow final : public SharedWindow {
 public:
  // `hub` (which outlives the window) says which ranks' transports of
  // `generation` closed. `members`: the hub's ranks of a group's window
  // (rank k of the window is the hub's members[k]); empty: all of them.
  LoopbackWindow(int rank, int size, uint32_t context, std::shared_ptr<LoopbackWindowGroup> group,
                 const LoopbackHub& hub, int generation, std::vector<int> members = {});

  size_t bytes() const override { return group_->bytes; }
  std::byte* local() override { return group_->regions[static_cast<size_t>(rank())]; }
  const std::byte* region(int k) const override { return group_->regions[static_cast<size_t>(k)]; }
  uint64_t word(int k) const override {
    return group_->lines[static_cast<size_t>(k)].word[step_ & 1u].load(std::memory_order_relaxed);
  }

  bool PeerAhead() const override;
  std::string Missing() const override;

 protected:
  void Publish(uint64_t word) override;
  Status WaitStep(TimePoint deadline) override;

 private:
  const uint32_t context_;
  std::shared_ptr<LoopbackWindowGroup> group_;
  const LoopbackHub& hub_;
  const int generation_;
  const std::vector<int> members_;
  uint64_t step_ = 0;
  int first_ = 0;  // ranks before it have reached step_
  // Whether every rank has reached step_ (ranks before first_ have).
  bool Arrived(std::memory_order order = std::memory_order_acquire);
  // The hub's rank of window rank k.
  int Member(int k) const { return members_.empty() ? k : members_[static_cast<size_t>(k)]; }
};

}  // namespace hora
