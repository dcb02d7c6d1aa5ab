// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A ControlPlane (backends/control_plane.h) for N ranks in one process, each
// rank's used by a thread of its own: every call meets the same call of the
// other ranks and is computed in memory, with no transport. It counts the
// calls (a fast-path cycle makes no gather), can carry float32 sums (every
// rank's carried description and words compared, as the real one does),
// and can fail a call, for the negotiator's unit tests.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/control_plane.h"
#include "common/clock.h"

namespace hora::testing {

class FakeControlWorld {
 public:
  explicit FakeControlWorld(int size);
  ~FakeControlWorld();

  ControlPlane& plane(int rank);
  int size() const { return size_; }

  // Whether AndCarrying carries (float32 sums only); off: it never does.
  void set_carry(bool on) { carry_ = on; }
  // The next call of each rank fails with `status` (on every rank alike).
  void FailNextCall(Status status);
  // How long a call waits for the other ranks' same call (30 s unless set):
  // past it, that rank's call fails naming the ranks that never came, and
  // is withdrawn.
  void set_timeout(Duration timeout) { timeout_ = timeout; }

  struct Calls {
    int ands = 0;
    int carried_ands = 0;  // AndCarrying with something carried
    int carried_runs = 0;  // ... that ran
    int gathers = 0;
    int broadcasts = 0;
  };
  Calls calls() const;  // (rank 0's)

 private:
  class Plane;
  friend class Plane;
  // Every rank deposits `mine` and gets all ranks' deposits once all came
  // (or, after the timeout, `*fail`).
  std::vector<std::vector<uint8_t>> Exchange(int rank, std::vector<uint8_t> mine, Status* fail);

  const int size_;
  bool carry_ = false;
  Duration timeout_ = std::chrono::seconds(30);
  std::vector<std::unique_ptr<Plane>> planes_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  int arrived_ = 0;
  std::vector<bool> here_;  // the ranks in the current call
  std::vector<std::vector<uint8_t>> slots_, done_;
  Status fail_next_, call_fail_;
  Calls calls_;
};

}  // namespace hora::testing
