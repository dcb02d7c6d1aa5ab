// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "collectives/selector.h"

#include <string>

#include "common/units.h"

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

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    parts.push_back(
        s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

}  // namespace

template <typename Algorithm>
Result<std::vector<Selector::Range<Algorithm>>> Selector::Parse(std::string_view variable,
                                                                std::string_view value) {
  std::vector<Range<Algorithm>> ranges;
  if (value.empty()) return ranges;
  auto bad = [&](const std::string& why) {
    return InvalidArgument(std::string(variable) + "='" + std::string(value) +
                           "' is invalid: " + why +
                           "; accepted: a name, or name:LOW-HIGH ranges separated by commas "
                           "(sizes like 0, 64K, 4M; HIGH may be empty), with names " +
                           AcceptedNames<Algorithm>());
  };
  for (std::string_view item : Split(value, ',')) {
    const size_t colon = item.find(':');
    std::string_view name = item.substr(0, colon);
    const Algorithm* algo = FindAlgorithm<Algorithm>(name);
    if (algo == nullptr) return bad("unknown algorithm '" + std::string(name) + "'");
    if (colon == std::string_view::npos) {
      ranges.push_back({0, std::nullopt, algo});
      continue;
    }
    std::string_view range = item.substr(colon + 1);
    const size_t dash = range.find('-');
    if (dash == std::string_view::npos) return bad("range '" + std::string(range) + "' has no '-'");
    auto low = ParseBytes(range.substr(0, dash));
    if (!low) return bad("bad size '" + std::string(range.substr(0, dash)) + "'");
    std::optional<size_t> high;
    if (dash + 1 < range.size()) {
      auto h = ParseBytes(range.substr(dash + 1));
      if (!h) return bad("bad size '" + std::string(range.substr(dash + 1)) + "'");
      if (*h <= *low) return bad("empty range '" + std::string(range) + "'");
      high = *h;
    }
    ranges.push_back({*low, high, algo});
  }
  return ranges;
}

Result<Selector> Selector::Create(const Config& config) {
  Selector s;
  s.model_ = CostModel::FromConfig(config);
  HORA_ASSIGN_OR_RETURN(s.allreduce_,
                        Parse<AllreduceAlgorithm>("HORA_ALLREDUCE_ALGO", config.allreduce_algo));
  HORA_ASSIGN_OR_RETURN(
      auto allreduce_default,
      Parse<AllreduceAlgorithm>("the default allreduce selection", kDefaultAllreduceSelection));
  s.allreduce_.insert(s.allreduce_.end(), allreduce_default.begin(), allreduce_default.end());
  HORA_ASSIGN_OR_RETURN(s.broadcast_,
                        Parse<BroadcastAlgorithm>("HORA_BROADCAST_ALGO", config.broadcast_algo));
  HORA_ASSIGN_OR_RETURN(
      auto broadcast_default,
      Parse<BroadcastAlgorithm>("the default broadcast selection", kDefaultBroadcastSelection));
  s.broadcast_.insert(s.broadcast_.end(), broadcast_default.begin(), broadcast_default.end());
  return s;
}

template <typename Algorithm>
const Algorithm& Selector::Choose(const std::vector<Range<Algorithm>>& ranges, int world_size,
                                  size_t bytes, bool shared) const {
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
    const double t = model_.Predict(a, world_size, bytes);
    if (best == nullptr || t < best_t) {
      best = &a;
      best_t = t;
    }
  }
  return *best;
}

const AllreduceAlgorithm& Selector::ChooseAllreduce(int world_size, size_t bytes,
                                                    bool shared) const {
  return Choose(allreduce_, world_size, bytes, shared);
}

const BroadcastAlgorithm& Selector::ChooseBroadcast(int world_size, size_t bytes) const {
  return Choose(broadcast_, world_size, bytes, /*shared=*/false);
}

}  // namespace hora
