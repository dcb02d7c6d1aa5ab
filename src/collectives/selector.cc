// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "collectives/selector.h"

#include <algorithm>
#include <string>

#include "common/size_ranges.h"

namespace hora {
namespace {

template <typename Algorithm>
std::string AcceptedNames() {
  std::string s;
  for (const Algorithm& a : Algorithms<Algorithm>()) {
    s += (s.empty() ? "" : ", ") + std::string(a.name) + " (" + a.alias + ")";
  }
  return s;
}

}  // namespace

template <typename Algorithm>
Result<std::vector<Selector::Range<Algorithm>>> Selector::Parse(std::string_view variable,
                                                                std::string_view value) {
  HORA_ASSIGN_OR_RETURN(
      std::vector<NamedRange> named,
      ParseNamedRanges(
          variable, value, "algorithm",
          [](std::string_view name) { return FindAlgorithm<Algorithm>(name) != nullptr; },
          AcceptedNames<Algorithm>()));
  std::vector<Range<Algorithm>> ranges;
  for (const NamedRange& r : named) {
    ranges.push_back({r.low, r.high, FindAlgorithm<Algorithm>(r.name)});
  }
  return ranges;
}

Result<Selector> Selector::Create(const Config& config) {
  Selector s;
  s.model_ = CostModel::FromConfig(config);
  HORA_ASSIGN_OR_RETURN(s.broadcast_,
                        Parse<BroadcastAlgorithm>("HORA_BROADCAST_ALGO", config.broadcast_algo));
  HORA_ASSIGN_OR_RETURN(
      auto broadcast_default,
      Parse<BroadcastAlgorithm>("the default broadcast selection", kDefaultBroadcastSelection));
  s.broadcast_.insert(s.broadcast_.end(), broadcast_default.begin(), broadcast_default.end());
  HORA_ASSIGN_OR_RETURN(s.reducescatter_, Parse<ReducescatterAlgorithm>("HORA_REDUCESCATTER_ALGO",
                                                                        config.reducescatter_algo));
  HORA_ASSIGN_OR_RETURN(auto reducescatter_default,
                        Parse<ReducescatterAlgorithm>("the default reducescatter selection",
                                                      kDefaultReducescatterSelection));
  s.reducescatter_.insert(s.reducescatter_.end(), reducescatter_default.begin(),
                          reducescatter_default.end());
  if (!config.allgather_algo.empty()) s.allgather_ = config.allgather_algo;
  if (!config.alltoall_algo.empty()) s.alltoall_ = config.alltoall_algo;
  return s.WithAllreduce(config.allreduce_algo);
}

Result<Selector> Selector::WithAllreduce(std::string_view allreduce_algo) const {
  Selector s = *this;
  HORA_ASSIGN_OR_RETURN(s.allreduce_,
                        Parse<AllreduceAlgorithm>("HORA_ALLREDUCE_ALGO", allreduce_algo));
  HORA_ASSIGN_OR_RETURN(
      auto allreduce_default,
      Parse<AllreduceAlgorithm>("the default allreduce selection", kDefaultAllreduceSelection));
  s.allreduce_.insert(s.allreduce_.end(), allreduce_default.begin(), allreduce_default.end());
  return s;
}

template <typename Algorithm>
const Algorithm& Selector::Choose(const std::vector<Range<Algorithm>>& ranges, int world_size,
                                  size_t bytes, bool shared, const CostModel& model) const {
  for (const auto& r : ranges) {
    if (bytes >= r.low && (!r.high || bytes < *r.high)) {
      if (RunsOn(r.algorithm->needs, shared)) return *r.algorithm;
      break;  // named, but cannot run here: the cost model decides
    }
  }
  const Algorithm* best = nullptr;
  double best_t = 0.0;
  for (const Algorithm& a : Algorithms<Algorithm>()) {
    if (!RunsOn(a.needs, shared)) continue;
    const double t = model.Predict(a, world_size, bytes);
    if (best == nullptr || t < best_t) {
      best = &a;
      best_t = t;
    }
  }
  return *best;
}

const AllreduceAlgorithm& Selector::ChooseAllreduce(int world_size, size_t bytes,
                                                    bool shared) const {
  return Choose(allreduce_, world_size, bytes, shared, model_);
}

const AllreduceAlgorithm& Selector::ChooseAllreduce(int world_size, size_t bytes, bool shared,
                                                    const CostModel& model) const {
  return Choose(allreduce_, world_size, bytes, shared, model);
}

const BroadcastAlgorithm& Selector::ChooseBroadcast(int world_size, size_t bytes,
                                                    bool shared) const {
  return Choose(broadcast_, world_size, bytes, shared, model_);
}

bool Selector::AllgatherOnWindow(bool shared, bool pair) const {
  if (!shared || allgather_ == "ring") return false;
  return allgather_ == "shared_memory" || !pair;
}

bool Selector::AlltoallOnWindow(int world_size, bool shared, size_t largest_block,
                                size_t slot) const {
  if (!shared || slot == 0 || alltoall_ == "pairwise") return false;
  if (alltoall_ == "shared_memory") return true;
  // One round of blocks below the size a shared-memory pair may read in
  // place (one copy, where the window copies twice), and at two ranks small
  // blocks only: each rank on a core of its own, the pairs' slots pipeline a
  // send's copy in with its copy out, which the window's round does one
  // after the other (docs/dev/performance.md, session 66).
  const size_t most = world_size == 2 ? kAlltoallSharedPairBytes : kAlltoallSharedBelowBytes - 1;
  return largest_block <= std::min(slot, most);
}

const ReducescatterAlgorithm& Selector::ChooseReducescatter(int world_size, size_t bytes,
                                                            bool shared) const {
  return Choose(reducescatter_, world_size, bytes, shared, model_);
}

}  // namespace hora
