// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The job's id, and the rank that failed first by its own account: the
// reports ranks write to the job's store before they tear down
// (launch/failure_report.h).
#include <chrono>
#include <optional>
#include <string>

#include "job_run.h"
#include "launch/failure_report.h"

namespace hora::horarun::job_internal {

std::string Job::JobId() const {
  const auto job = spec_.env.find("HORA_JOB_ID");
  return job == spec_.env.end() ? std::string() : job->second;
}

std::optional<FailureReport> Job::FirstFailure() {
  const std::string job = JobId();
  if (!store_ || job.empty()) return std::nullopt;
  const Result<int64_t> n = store_->Add(FailureCountKey(job), 0);
  if (!n.ok() || *n < 1) return std::nullopt;
  // The first rank's own failure; a failure caused by a peer (its
  // connection lost: a rank killed by a signal, which reports nothing) is
  // never the first, whenever it came.
  for (int64_t i = 1; i <= *n; ++i) {
    // (Counted just before it is written: a moment for the write.)
    const Result<Bytes> v = store_->Get(FailureKey(job, i), std::chrono::milliseconds(500));
    if (!v.ok()) continue;
    std::optional<FailureReport> report = ParseFailure(std::string(v->begin(), v->end()));
    if (report && !report->caused_by_peer) return report;
  }
  return std::nullopt;
}

}  // namespace hora::horarun::job_internal
