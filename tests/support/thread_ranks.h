// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Test harness: N ranks as N threads of the test process, each with its own
// Session over one ThreadWorld (in-memory store + loopback transport).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hora/hora.h"

namespace hora::testing {

using Settings = std::map<std::string, std::string>;

class ThreadRanks {
 public:
  // Creates `n` Sessions with `settings` (the process environment is not
  // read, so tests do not depend on the caller's HORA_* variables). Fails
  // the current test if a Session cannot be created.
  ThreadRanks(int n, const Settings& settings);
  // The same with each rank's own settings.
  ThreadRanks(int n, const std::function<Settings(int rank)>& settings_of);

  int size() const { return static_cast<int>(sessions_.size()); }
  Session& session(int rank) { return *sessions_[static_cast<size_t>(rank)]; }

  // Runs fn(rank, session) on one thread per rank and returns each rank's
  // result. Ranks for which `participate` is false do not call fn (their
  // status is OK).
  std::vector<Status> Run(const std::function<Status(int, Session&)>& fn,
                          const std::function<bool(int)>& participate = nullptr);

  // Ends `rank`'s Session, as shutdown() does (called from its thread in
  // Run, which must not use it after).
  void Close(int rank) { sessions_[static_cast<size_t>(rank)].reset(); }
  // From now on, every rank's transport says `rank` was lost, as when its
  // process ends (LoopbackHub::Lose); its thread goes on.
  void Lose(int rank);

 private:
  std::shared_ptr<ThreadWorld> world_;
  std::vector<std::unique_ptr<Session>> sessions_;
};

// Adds a test failure for every rank whose status is not OK, naming it.
void ExpectAllOk(const std::vector<Status>& statuses);

// Settings with a short timeout suited to tests (HORA_TIMEOUT_S=60 unless given).
Settings TestSettings(Settings extra = {});

}  // namespace hora::testing
