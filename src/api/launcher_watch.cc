// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "api/launcher_watch.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>

#include "common/process_alive.h"
#include "common/thread_name.h"
#include "launch/launcher_identity.h"

namespace hora {

std::unique_ptr<LauncherWatch> LauncherWatch::Start(const std::string& identity,
                                                    const Logger& logger) {
  const std::optional<int> pid = LocalLauncherPid(identity);
  if (!pid || !ProcessRuns(*pid)) return nullptr;  // (gone already: the start fails anyway)
  std::unique_ptr<LauncherWatch> w(new LauncherWatch(*pid, logger));
  w->thread_ = std::thread([raw = w.get()] { raw->Loop(); });
  return w;
}

LauncherWatch::~LauncherWatch() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LauncherWatch::Loop() {
  NameThisThread("hora-launcher");
  MutexLock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock.native(), std::chrono::milliseconds(500));
    if (stop_ || ProcessRuns(pid_)) continue;
    logger_.Error("horarun (pid " + std::to_string(pid_) +
                  "), which started this rank, is gone: ending this process (SIGTERM, then "
                  "SIGKILL in 5 s)");
    kill(getpid(), SIGTERM);
    if (!cv_.wait_for(lock.native(), std::chrono::seconds(5),
                      [&]() HORA_NO_THREAD_SAFETY_ANALYSIS { return stop_; })) {
      kill(getpid(), SIGKILL);
    }
  }
}

}  // namespace hora
