// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/drive_gate.h"

namespace hora {

bool DriveGate::Drive(const DoneFlag& done, TimePoint until) {
  Driver* driver;
  {
    MutexLock lock(mu_);
    if (driver_ == nullptr) return false;
    driver = driver_;
    ++inside_;
  }
  const bool drove = driver->Drive(done, until);
  {
    MutexLock lock(mu_);
    if (--inside_ == 0 && driver_ == nullptr) left_.notify_all();
  }
  return drove;
}

void DriveGate::Close() {
  MutexLock lock(mu_);
  driver_ = nullptr;
  // (The predicate runs with mu_ held, where the analysis cannot see it.)
  left_.wait(lock.native(), [&]() HORA_NO_THREAD_SAFETY_ANALYSIS { return inside_ == 0; });
}

}  // namespace hora
