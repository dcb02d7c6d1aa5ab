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

class ShmWindowSegment {
 public:
  static size_t SegmentBytes();
  // Lays out empty windows in a freshly created (zeroed) segment.
  static void Initialize(void* segment);
  // Checks magic, version and size; `name` is for messages.
  static Status Check(const void* segment, const std::string& name);
  static ShmWindowLine* Line(void* segment, uint32_t context);
  static std::byte* Region(void* segment, uint32_t context);
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
  // `segments[k]`: rank k's window segment as mapped here. `transport`
  // (whose windows these are) gives the doorbells, the poll settings and
  // the peers' liveness; it outlives the window.
  ShmWindow(ShmTransport& transport, uint32_t context, const std::vector<void*>& segments);

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

  ShmTransport& transport_;
  const uint32_t context_;
  const size_t bytes_;
  std::vector<ShmWindowLine*> lines_;
  std::vector<std::byte*> regions_;
  uint64_t step_ = 0;
  size_t first_ = 0;  // ranks before it have reached step_
};

}  // namespace hora
