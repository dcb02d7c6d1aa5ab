// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/autotuner.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace hora {
namespace {

constexpr size_t kDims = 5;  // fusion, cycle time, cache, allreduce algorithm, hierarchical
// Names kept while looking for the first that comes twice (then forgotten).
constexpr size_t kMaxNamesSeen = 1 << 16;

template <typename T>
void AddValue(std::vector<T>& values, const T& v) {
  if (std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
}

double Mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace

const char* Autotuner::kLogHeader =
    "sample,phase,fusion_threshold_bytes,cycle_time_ms,cache_capacity,allreduce_algo,"
    "hierarchical_allreduce,seconds,bytes,score_bytes_per_s";

TuningSpace TuningSpace::Around(const Tunables& start, bool point_to_point, bool several_hosts) {
  TuningSpace s;
  s.fusion_threshold_bytes.push_back(start.fusion_threshold_bytes);
  for (uint64_t mib : {1, 4, 16, 64, 128}) AddValue(s.fusion_threshold_bytes, mib << 20);
  std::sort(s.fusion_threshold_bytes.begin(), s.fusion_threshold_bytes.end());
  s.cycle_time_ms.push_back(start.cycle_time_ms);
  for (double ms : {0.5, 1.0, 2.5, 5.0, 10.0}) AddValue(s.cycle_time_ms, ms);
  std::sort(s.cycle_time_ms.begin(), s.cycle_time_ms.end());
  s.cache_capacity.push_back(start.cache_capacity);
  if (start.cache_capacity > 0) s.cache_capacity.push_back(0);
  s.allreduce_algo.push_back(start.allreduce_algo);
  if (point_to_point) {
    for (const char* a : {"", "rd:0-16K,ring:16K-", "rd:0-256K,ring:256K-", "rd:0-4M,ring:4M-"})
      AddValue(s.allreduce_algo, std::string(a));
  }
  s.hierarchy.push_back(start.hierarchy);
  if (several_hosts) {
    for (Hierarchy h : {Hierarchy::kAuto, Hierarchy::kOn, Hierarchy::kOne, Hierarchy::kOff})
      AddValue(s.hierarchy, h);
  }
  return s;
}

Autotuner::Autotuner(const AutotuneOptions& options, const Tunables& start, TuningSpace space,
                     std::function<void(const std::string&)> log_line)
    : options_(options),
      space_(std::move(space)),
      log_line_(std::move(log_line)),
      trying_(start),
      best_(start),
      warmups_left_(std::max(0, options.warmup_samples)) {
  if (warmups_left_ == 0) phase_ = Phase::kBase;
  if (log_line_) log_line_(kLogHeader);
}

size_t Autotuner::Values(size_t dim) const {
  switch (dim) {
    case 0:
      return space_.fusion_threshold_bytes.size();
    case 1:
      return space_.cycle_time_ms.size();
    case 2:
      return space_.cache_capacity.size();
    case 3:
      return space_.allreduce_algo.size();
    default:
      return space_.hierarchy.size();
  }
}

Tunables Autotuner::With(size_t dim, size_t i) const {
  Tunables t = best_;
  switch (dim) {
    case 0:
      t.fusion_threshold_bytes = space_.fusion_threshold_bytes[i];
      break;
    case 1:
      t.cycle_time_ms = space_.cycle_time_ms[i];
      break;
    case 2:
      t.cache_capacity = space_.cache_capacity[i];
      break;
    case 3:
      t.allreduce_algo = space_.allreduce_algo[i];
      break;
    default:
      t.hierarchy = space_.hierarchy[i];
      break;
  }
  return t;
}

size_t Autotuner::BestIndex(size_t dim) const {
  for (size_t i = 0; i < Values(dim); ++i) {
    if (With(dim, i) == best_) return i;
  }
  return 0;  // (the start is in every list)
}

void Autotuner::Log(const char* phase, const Tunables& t, double seconds, uint64_t bytes,
                    double score) {
  if (!log_line_) return;
  char nums[160];
  std::snprintf(nums, sizeof nums, "%.6f,%llu,%.0f", seconds,
                static_cast<unsigned long long>(bytes), score);
  char head[160];
  std::snprintf(head, sizeof head, "%d,%s,%llu,%g,%llu,", samples_, phase,
                static_cast<unsigned long long>(t.fusion_threshold_bytes), t.cycle_time_ms,
                static_cast<unsigned long long>(t.cache_capacity));
  // (The algorithm's ranges hold commas: quoted.)
  log_line_(std::string(head) + "\"" + t.allreduce_algo + "\"," + HierarchyName(t.hierarchy) + "," +
            nums);
}

Autotuner::NoStep Autotuner::NoStepFound(bool named, TimePoint now) {
  constexpr uint64_t kFinishedToWarn = 10000;
  if (no_step_said_ || !mark_.empty() || phase_ == Phase::kDone ||
      options_.no_step_warn_after == Duration::zero()) {
    return NoStep::kNotYet;
  }
  if (finished_++ == 0) first_finished_ = now;
  if (!named) ++unnamed_;
  if (finished_ < kFinishedToWarn || now - first_finished_ < options_.no_step_warn_after) {
    return NoStep::kNotYet;
  }
  no_step_said_ = true;
  return 2 * unnamed_ >= finished_ ? NoStep::kUnnamed : NoStep::kNamesNew;
}

std::optional<Tunables> Autotuner::Finished(std::string_view name, uint64_t bytes, TimePoint now) {
  if (phase_ == Phase::kDone) return std::nullopt;
  if (mark_.empty()) {
    // The first name to come again marks the steps; this is its mark 1.
    if (seen_.size() > kMaxNamesSeen) seen_.clear();
    if (seen_.insert(std::string(name)).second) return std::nullopt;
    mark_ = std::string(name);
    seen_.clear();
  }
  if (name != mark_) {
    if (marks_ >= 2) bytes_ += bytes;
    return std::nullopt;
  }
  ++marks_;
  // Mark 1 begins the step left out; mark 2 begins the sample.
  if (marks_ < 2) return std::nullopt;
  if (marks_ == 2) {
    started_ = now;
    bytes_ = 0;
    return std::nullopt;
  }
  bytes_ += bytes;
  if (marks_ < 2 + options_.steps_per_sample) return std::nullopt;
  const double seconds = std::chrono::duration<double>(now - started_).count();
  const double score = seconds > 0 ? static_cast<double>(bytes_) / seconds : 0;
  const uint64_t bytes_scored = bytes_;
  ++samples_;
  const Tunables scored = trying_;
  const char* phase = phase_ == Phase::kWarmup        ? "warmup"
                      : phase_ == Phase::kBase        ? "start"
                      : phase_ == Phase::kTrial       ? "trial"
                      : phase_ == Phase::kConfirmBest ? "again_best"
                                                      : "again_challenger";
  Log(phase, scored, seconds, bytes_scored, score);
  std::optional<Tunables> next = SampleEnded(score);
  if (!next || *next == trying_) {
    // The same settings again (or done): the next sample begins now.
    marks_ = 2;
    started_ = now;
    bytes_ = 0;
    return std::nullopt;
  }
  trying_ = *next;
  marks_ = 0;
  return next;
}

std::optional<Tunables> Autotuner::SampleEnded(double score) {
  switch (phase_) {
    case Phase::kWarmup:
      if (--warmups_left_ <= 0) phase_ = Phase::kBase;
      return best_;
    case Phase::kBase:
      best_scores_ = {score};
      dim_ = 0;
      value_ = SIZE_MAX;
      trial_scores_.assign(Values(0), -1);
      phase_ = Phase::kTrial;
      return Next();
    case Phase::kTrial:
      trial_scores_[value_] = score;
      return Next();
    case Phase::kConfirmBest:
      best_scores_.push_back(score);
      phase_ = Phase::kConfirmWinner;
      return With(dim_, winner_);
    case Phase::kConfirmWinner:
      if ((winner_score_ + score) / 2 > Mean(best_scores_)) {
        best_ = With(dim_, winner_);
        best_scores_ = {winner_score_, score};
      }
      phase_ = Phase::kTrial;
      ++dim_;
      value_ = SIZE_MAX;
      if (dim_ < kDims) trial_scores_.assign(Values(dim_), -1);
      return Next();
    case Phase::kDone:
      break;
  }
  return std::nullopt;
}

std::optional<Tunables> Autotuner::Next() {
  while (dim_ < kDims) {
    const size_t best_index = BestIndex(dim_);
    // The next value of this tunable to score.
    for (size_t i = value_ == SIZE_MAX ? 0 : value_ + 1; i < Values(dim_); ++i) {
      if (i == best_index) continue;
      value_ = i;
      return With(dim_, i);
    }
    // All scored: the best of them against the best so far.
    size_t top = best_index;
    double top_score = Mean(best_scores_);
    for (size_t i = 0; i < trial_scores_.size(); ++i) {
      if (i != best_index && trial_scores_[i] > top_score) {
        top = i;
        top_score = trial_scores_[i];
      }
    }
    if (top != best_index) {
      winner_ = top;
      winner_score_ = top_score;
      phase_ = Phase::kConfirmBest;
      return best_;
    }
    ++dim_;
    value_ = SIZE_MAX;
    if (dim_ < kDims) trial_scores_.assign(Values(dim_), -1);
  }
  phase_ = Phase::kDone;
  Log("chosen", best_, 0, 0, Mean(best_scores_));
  return best_;
}

}  // namespace hora
