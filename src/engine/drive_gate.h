// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// How a thread waiting on a handle runs its engine's cycles itself
// (Engine::Drive) instead of handing the work to the engine's thread and
// back: on a host with no spare core per rank, those two hand-offs are two
// thread switches per collective. The gate outlives the engine (handles hold
// it); the engine closes it before it goes, waiting for drivers inside.
//
// Thread-safety: every member from any thread.
#pragma once

#include <condition_variable>
#include "common/clock.h"
#include "common/done_flag.h"
#include "common/mutex.h"

namespace hora {

class Driver {
 public:
  // Runs cycles on the calling thread until `done` is set or `until`
  // passes (a cycle under way is finished first; the first runs whatever
  // `until`, which callers read from the clock just before); returns at
  // once when the engine's own thread is in a cycle. True if it ran any.
  virtual bool Drive(const DoneFlag& done, TimePoint until) = 0;

 protected:
  ~Driver() = default;
};

class DriveGate {
 public:
  explicit DriveGate(Driver* driver) : driver_(driver) {}
  // Driver::Drive, or false once the gate is closed.
  bool Drive(const DoneFlag& done, TimePoint until);
  // No driver enters after this returns, and none is inside.
  void Close();

 private:
  Mutex mu_;
  std::condition_variable left_;
  Driver* driver_ HORA_GUARDED_BY(mu_);  // null once closed
  int inside_ HORA_GUARDED_BY(mu_) = 0;
};

}  // namespace hora
