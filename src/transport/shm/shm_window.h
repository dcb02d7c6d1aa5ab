// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The shm transport's shared windows (transport/shared_window.h). Every rank
// creates one segment "/hora-<job_id>-win-<rank>" at rendezvous, beside its
// channels, and every peer maps it; it holds that rank's side of the
// windows of all kSharedWindowContexts contexts:
//   0                 magic, version, bytes, closed, heartbeat (one cache line)
//   64 (1 + c)        context c's step line: {step, word[2]} (one cache line)
//   kDataOffset + ... context c's region, SharedWindowBytes(c) bytes
// A rank writes only its own segment. Step stores the word of the step
// (word[step % 2]) and then the step number (seq_cst); a waiter reads the
// peers' step numbers (acquire). It polls them like a channel wait (spin,
// yielding the core where ranks outnumber cores), then sleeps on its
// doorbell; the step's last arrival (a rank that sees every step number
// there once it published its own) rings every peer's doorbell.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "transport/shared_window.h"

namespace hora {

class ShmTransport;

struct alignas(64) ShmWindowLine {
  std::atomic<uint64_t> step{0};
  std::atomic<uint64_t> word[2] = {};  // relaxed; ordered by `step`
};

// A segment holds the windows of contexts `first` to kSharedWindowContexts
// - 1: a transport's, all of them (first 0); a process set's (GroupWindows),
// its data's and its control's (first 1), "/hora-<job_id>-set<key>-win-
// <rank>-<creator>".
class ShmWindowSegment {
 public:
  static size_t SegmentBytes(uint32_t first = 0);
  // Lays out empty windows in a freshly created (zeroed) segment.
  static void Initialize(void* segment, uint32_t first = 0);
  // Checks magic, version and size; `name` is for messages.
  static Status Check(const void* segment, const std::string& name, uint32_t first = 0);
  static ShmWindowLine* Line(void* segment, uint32_t context);
  static std::byte* Region(void* segment, uint32_t context, uint32_t first = 0);
  // The owner's transport is gone (set by its destructor; read by peers).
  static void MarkClosed(void* segment);
  static bool Closed(const void* segment);
  // The owner's heartbeat counter (shm_liveness.cc): the owner bumps it, its
  // peers read it.
  static void Beat(void* segment);
  static uint64_t Heartbeat(const void* segment);
};

class ShmWindow final : public SharedWindow {
 public:
  // `segments[k]`: rank k's window segment as mapped here (its windows
  // from context `first` on). `transport` (whose windows these are) gives
  // the doorbells, the poll settings and the peers' liveness; it outlives
  // the window. `members`: the transport's ranks of a group's window (rank
  // k of the window is the transport's members[k]); empty: all of them.
  ShmWindow(ShmTransport& transport, uint32_t context, const std::vector<void*>& segments,
            std::vector<int> members = {}, uint32_t first = 0);

  size_t bytes() const override { return bytes_; }
  std::byte* local() override { return regions_[static_cast<size_t>(rank())]; }
  const std::byte* region(int k) const override { return regions_[static_cast<size_t>(k)]; }
  uint64_t word(int k) const override {
    return lines_[static_cast<size_t>(k)]->word[step_ & 1u].load(std::memory_order_relaxed);
  }

  bool PeerAhead() const override;
  std::string Missing() const override;

 protected:
  void Publish(uint64_t word) override;
  Status WaitStep(TimePoint deadline) override;

 private:
  // Whether every rank has reached step_ (ranks before first_ have).
  bool Arrived(std::memory_order order = std::memory_order_acquire);
  // The transport's rank of window rank k.
  int Member(size_t k) const { return members_.empty() ? static_cast<int>(k) : members_[k]; }

  ShmTransport& transport_;
  const std::vector<int> members_;
  const uint32_t context_;
  const size_t bytes_;
  std::vector<ShmWindowLine*> lines_;
  std::vector<std::byte*> regions_;
  uint64_t step_ = 0;
  size_t first_ = 0;  // ranks before it have reached step_
};

}  // namespace hora
