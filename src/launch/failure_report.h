// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A rank's own failure, told to horarun through the job's store before the
// rank tears down (Session::ReportFailure): when one rank raises, its peers
// fail too ("rank 1 is gone"), and one of them may end first; horarun names
// the rank whose report came first, with what it said (an exception's last
// line), instead of whichever process it saw end first. Reports are numbered
// in the order the store received them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace hora {

struct FailureReport {
  std::string who;   // "rank 1", or "worker host/2 (rank 1)"
  std::string what;  // "ValueError: bad batch"
  // The rank failed because a peer was lost or ended (its connection lost,
  // the peer's Session shut down): not the job's first failure, whenever
  // its report came.
  bool caused_by_peer = false;
};

// The counter each report adds 1 to, and report n's key (n from 1).
std::string FailureCountKey(const std::string& job);
std::string FailureKey(const std::string& job, int64_t n);

// Set by horarun when a rank of a job that is not elastic ends (its value
// says which and how: "rank 1 (pid 42 on host) exited with code 0"): a rank
// still connecting stops waiting for it (api/abortable_store.h), where it
// would wait for the start timeout and then blame the settings.
std::string RankEndedKey(const std::string& job);

// "who\nown\nwhat" or "who\npeer\nwhat" (an older Hora's "who\nwhat" reads
// as its own).
std::string FormatFailure(const FailureReport& report);
// nullopt for a value that is not one.
std::optional<FailureReport> ParseFailure(const std::string& value);

}  // namespace hora
