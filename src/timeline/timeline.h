// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Timeline (docs/dev/design.md §2): a Chrome-trace JSON file (chrome://tracing,
// Perfetto) with one row per tensor and its phases as spans: queued,
// negotiating (waiting for the other ranks and the coordinator), and the
// collective itself (with the fusion copies in and out when fused).
//
// Events are queued by the engine thread and written by the timeline's own
// thread. The file is a JSON array that is complete after every write: each
// batch of events is written over the closing bracket and ends with a new
// one, so the file parses even when the job is killed. A size cap
// (HORA_TIMELINE_MAX_MB) ends recording with a final "truncated" event. A
// write that fails (a full disk, a file size limit) ends it too: the file is
// put back as it was before that write (still valid JSON), and the logger
// says so once.
//
// Thread-safety: every method from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "hora/status.h"

namespace hora {

class Timeline {
 public:
  // Opens (truncates) `path`; a directory, a missing directory or an
  // unwritable file is an error naming the path and the reason.
  static Result<std::unique_ptr<Timeline>> Open(const std::string& path, int rank,
                                                uint64_t max_bytes, const Logger& logger);
  ~Timeline();  // writes what is queued and closes
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // A span [start, end) of phase `phase` on the row of tensor `tensor`.
  void Span(const std::string& tensor, const char* phase, TimePoint start, TimePoint end,
            const std::string& args_json = "");
  const std::string& path() const { return path_; }

 private:
  Timeline(int fd, std::string path, int rank, uint64_t max_bytes, const Logger& logger);
  // After a failed write (`err`): the file as before it, recording ended.
  void WriteFailed(int err) HORA_EXCLUDES(mu_);
  void WriterLoop();
  // The row (thread id) of `tensor`; emits its name on first use.
  int RowOf(const std::string& tensor) HORA_REQUIRES(mu_);

  const int fd_;
  const std::string path_;
  const int rank_;
  const uint64_t max_bytes_;
  const Logger logger_;
  const TimePoint epoch_;

  Mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> queue_ HORA_GUARDED_BY(mu_);  // encoded events
  std::unordered_map<std::string, int> rows_ HORA_GUARDED_BY(mu_);
  bool closing_ HORA_GUARDED_BY(mu_) = false;
  bool truncated_ HORA_GUARDED_BY(mu_) = false;
  uint64_t queued_bytes_ HORA_GUARDED_BY(mu_) = 0;

  uint64_t offset_ = 0;  // writer: where the closing bracket starts
  bool first_ = true;    // writer: no event written yet
  bool failed_ = false;  // writer: a write failed; nothing more is written
  std::thread writer_;
};

// JSON string literal of `s` (quotes and escapes).
std::string JsonQuote(const std::string& s);

}  // namespace hora
