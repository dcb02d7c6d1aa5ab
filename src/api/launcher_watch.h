// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A rank that outlives the horarun that started it ends itself. horarun's
// own links to its ranks (the kernel's parent-death signal, its watcher
// process) reach a rank's first process and its process group, but a rank
// wrapped in `sh -c` whose horarun and watcher were killed together
// (`pkill -9 horarun`) keeps running with neither. So the Session watches
// horarun too (HORA_LAUNCHER, launch/launcher_identity.h): a thread looks
// twice a second, and once horarun is gone it says so and sends this
// process SIGTERM, then SIGKILL after 5 s.
#pragma once

#include <condition_variable>
#include <memory>
#include <string>
#include <thread>

#include "common/logging.h"
#include "common/mutex.h"

namespace hora {

class LauncherWatch {
 public:
  // Watches the launcher `identity` names; null when it names none this
  // process can see (unset, another host's: nothing to watch).
  static std::unique_ptr<LauncherWatch> Start(const std::string& identity, const Logger& logger);
  ~LauncherWatch();  // stops the watch
  LauncherWatch(const LauncherWatch&) = delete;
  LauncherWatch& operator=(const LauncherWatch&) = delete;

 private:
  LauncherWatch(int pid, const Logger& logger) : pid_(pid), logger_(logger) {}
  void Loop() HORA_EXCLUDES(mu_);

  const int pid_;
  const Logger logger_;
  Mutex mu_;
  std::condition_variable cv_;
  bool stop_ HORA_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace hora
