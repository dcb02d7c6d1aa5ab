// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// horarun --host-discovery-script (elastic mode): the script is run, with
// no arguments, when the job starts and every second after (a second after
// the last run started, one run at a time, beside the job's loop); each line of
// its output names a host that may run workers: "host" (with
// --slots-per-host slots) or "host:slots". Blank lines and lines starting
// with '#' are skipped. A script that fails (a non-zero exit, a line that
// is not a host, or no answer within its timeout) changes nothing: horarun
// says why and keeps the hosts it had.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hora/status.h"
#include "hosts.h"

namespace hora::horarun {

// The hosts in a script's output, in the order given (a host named twice:
// an error). `slots_per_host`: for "host" lines (0: such a line is an
// error naming the flag).
Result<std::vector<HostSlots>> ParseDiscoveredHosts(const std::string& output, int slots_per_host);

// Runs `script` (its stdin /dev/null) and returns its standard output; an
// error names the script and says what went wrong (it could not start, its
// exit status, or no end within `timeout`, after which it is killed), with
// the last of what it wrote to its standard error (which is not shown
// otherwise: a script run every second would repeat it). Where
// `cancel` becomes true the script is killed and the run ends (Aborted).
Result<std::string> RunDiscoveryScript(const std::string& script, std::chrono::milliseconds timeout,
                                       const std::atomic<bool>* cancel = nullptr);

// The script run on a thread of its own, so that a slow one (a scheduler's
// API taking seconds) does not hold up the loop that forwards the ranks'
// output and handles their deaths and signals. One run at a time.
class BackgroundDiscovery {
 public:
  BackgroundDiscovery(std::string script, std::chrono::milliseconds timeout);
  ~BackgroundDiscovery();  // kills a run in progress and waits for its thread
  BackgroundDiscovery(const BackgroundDiscovery&) = delete;
  BackgroundDiscovery& operator=(const BackgroundDiscovery&) = delete;

  // Starts a run unless one is in progress or its result not yet taken;
  // true when it started one.
  bool Start();
  // The last run's result, once, when it has ended.
  std::optional<Result<std::string>> Take();

 private:
  const std::string script_;
  const std::chrono::milliseconds timeout_;
  std::atomic<bool> cancel_{false};
  std::mutex mu_;
  bool running_ = false;                       // (mu_)
  std::optional<Result<std::string>> result_;  // (mu_)
  std::thread thread_;
};

}  // namespace hora::horarun
