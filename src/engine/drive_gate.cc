// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/drive_gate.h"

namespace hora {

bool DriveGate::Drive(const DoneFlag& done, TimePoint until) {
  Driver* driver;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (driver_ == nullptr) return false;
    driver = driver_;
    ++inside_;
  }
  const bool drove = driver->Drive(done, until);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (--inside_ == 0 && driver_ == nullptr) left_.notify_all();
  }
  return drove;
}

void DriveGate::Close() {
  std::unique_lock<std::mutex> lock(mu_);
  driver_ = nullptr;
  left_.wait(lock, [&] { return inside_ == 0; });
}

}  // namespace hora
