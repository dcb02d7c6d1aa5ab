// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Autotuning's search (HORA_AUTOTUNE; docs/dev/autotune.md): on the first
// rank, it scores the settings in force by the bytes the engine's
// collectives finish per second, and decides which settings to try next.
// The engine hands it every finished tensor; when a sample ends it returns
// the Tunables every rank switches to (the negotiator carries them).
//
// Steps. A training step submits the same tensors each time: the first
// tensor name to come a second time (names seen once, such as a first
// broadcast of the parameters, are passed over) is the step's mark, and a
// step ends each time it comes again. A sample is `steps_per_sample` steps,
// after the step in which the switch to the sample's settings lands and
// one more step, left out. Its score is the bytes finished over those steps by the time
// they took.
//
// The search: coordinate descent with a confirmation. After
// `warmup_samples` samples left out, the starting settings are scored; then
// one tunable at a time, each of its other values is scored with the
// others at their best so far. A value that beats the best is scored once
// more beside the best scored once more, and wins only if its two
// samples' mean beats the best's: one lucky sample on a noisy machine does
// not move the choice. After the last tunable the best settings stay, and
// the search is done. It needs (values - 1) samples per tunable, plus two
// per confirmation: against a grid search over every combination, the sum
// of the lists' lengths rather than their product.
//
// Every sample is one line of the CSV log (its settings, its score, what
// it was for), and the choice is the last.
//
// Not thread-safe: the engine's cycle's.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "common/clock.h"
#include "engine/tunables.h"

namespace hora {

struct AutotuneOptions {
  int warmup_samples = 3;
  int steps_per_sample = 10;
  // NoStepFound's time from the first tensor to finish (zero: never warn).
  Duration no_step_warn_after = std::chrono::seconds(60);
};

// The values each tunable may take (the starting value among them); a
// list of one value is not tuned.
struct TuningSpace {
  std::vector<uint64_t> fusion_threshold_bytes;
  std::vector<double> cycle_time_ms;
  std::vector<uint64_t> cache_capacity;
  std::vector<std::string> allreduce_algo;
  std::vector<Hierarchy> hierarchy;

  // The default space around `start`: fusion thresholds of 1 to 128 MiB,
  // cycle times of 0.5 to 10 ms, the response cache on and off (if on at
  // the start), the point where recursive doubling gives way to the ring
  // (only where `point_to_point`: ranks that do not all share memory), and
  // hierarchical allreduce by the cost model, on (every rank of a host
  // crossing), on with one rank a host, and off (only where
  // `several_hosts`).
  static TuningSpace Around(const Tunables& start, bool point_to_point, bool several_hosts);
};

class Autotuner {
 public:
  // `log_line` gets the CSV log, the header first (null: no log).
  Autotuner(const AutotuneOptions& options, const Tunables& start, TuningSpace space,
            std::function<void(const std::string&)> log_line);

  // A tensor of `bytes` bytes finished at `now`. Returns the settings to
  // switch to when a sample ends with other settings to try (or the best,
  // at the end); nullopt otherwise.
  std::optional<Tunables> Finished(std::string_view name, uint64_t bytes, TimePoint now);

  // Why no step is found, for a warning that such a job is never scored:
  // its tensors are unnamed (an unnamed one's generated name is new each
  // call), or their names are new each step (a step number in the name).
  enum class NoStep { kNotYet, kUnnamed, kNamesNew };
  // A tensor finished at `now`, `named` or not: once, when no step has
  // been found by the 10,000th tensor to finish and no_step_warn_after
  // since the first, why (the most of them unnamed or not); kNotYet
  // otherwise. (Both, as a model's start-up broadcasts and first step may
  // be more than 10,000 tensors, each name new, before a name comes again.)
  NoStep NoStepFound(bool named, TimePoint now);
  // NoStepFound's count of tensors finished, and the seconds since the first.
  uint64_t no_step_count() const { return finished_; }
  double no_step_seconds(TimePoint now) const { return DurationToSeconds(now - first_finished_); }

  bool done() const { return phase_ == Phase::kDone; }
  const Tunables& best() const { return best_; }
  int samples() const { return samples_; }

  static const char* kLogHeader;

 private:
  enum class Phase { kWarmup, kBase, kTrial, kConfirmBest, kConfirmWinner, kDone };
  // The settings the next sample scores, or nullopt once the search ends.
  std::optional<Tunables> Next();
  // The settings of the best so far, with tunable `dim` at value `index`.
  Tunables With(size_t dim, size_t index) const;
  size_t Values(size_t dim) const;
  size_t BestIndex(size_t dim) const;
  void Log(const char* phase, const Tunables& t, double seconds, uint64_t bytes, double score);
  // A sample of the settings in force ended with `score`: what comes next.
  std::optional<Tunables> SampleEnded(double score);

  const AutotuneOptions options_;
  const TuningSpace space_;
  const std::function<void(const std::string&)> log_line_;
  Phase phase_ = Phase::kWarmup;
  uint64_t finished_ = 0;  // NoStepFound's counts
  uint64_t unnamed_ = 0;
  TimePoint first_finished_{};
  bool no_step_said_ = false;
  Tunables trying_;  // in force
  Tunables best_;
  std::vector<double> best_scores_;
  size_t dim_ = 0;    // the tunable being tuned
  size_t value_ = 0;  // the value being scored
  size_t winner_ = 0;
  double winner_score_ = 0;
  std::vector<double> trial_scores_;  // this tunable's, by value (-1: not scored)
  int samples_ = 0;
  int warmups_left_;

  // Steps.
  std::string mark_;                      // the first name that came twice ("": none yet)
  std::unordered_set<std::string> seen_;  // names seen before the mark was found
  int marks_ = 0;                         // marks seen since the settings in force came (Finished)
  bool skip_step_ = true;
  TimePoint started_{};
  uint64_t bytes_ = 0;
};

}  // namespace hora
