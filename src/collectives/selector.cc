// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "collectives/selector.h"

#include <cmath>
#include <span>

#include "common/units.h"

namespace hora {
namespace {

constexpr AlgorithmInfo kAllreduceInfo[] = {
    {"ring", "ring", "reduce-scatter + allgather around a ring; bandwidth-optimal"},
    {"recursive_doubling", "rd", "log2(n) whole-buffer exchanges; fewest rounds, small messages"},
    {"halving_doubling", "hd",
     "Rabenseifner: recursive-halving reduce-scatter + recursive-doubling allgather"},
    {"shared_memory", "shm",
     "one copy into a shared window read in place by every rank; ranks of one host"},
};
constexpr AlgorithmInfo kBroadcastInfo[] = {
    {"binomial", "tree", "binomial tree; log2(n) rounds of the whole message"},
    {"scatter_allgather", "sag", "scatter from the root then ring allgather; large messages"},
};

double Log2Ceil(int n) { return n <= 1 ? 0.0 : std::ceil(std::log2(static_cast<double>(n))); }

template <typename A>
std::span<const A> AllOf();
template <>
std::span<const AllreduceAlgorithm> AllOf() {
  return kAllAllreduceAlgorithms;
}
template <>
std::span<const BroadcastAlgorithm> AllOf() {
  return kAllBroadcastAlgorithms;
}

template <typename A>
std::optional<A> ByName(std::string_view name) {
  for (A a : AllOf<A>()) {
    if (name == Info(a).name || name == Info(a).alias) return a;
  }
  return std::nullopt;
}

template <typename A>
std::string AcceptedNames() {
  std::string s;
  for (A a : AllOf<A>()) {
    s += (s.empty() ? "" : ", ") + std::string(Info(a).name) + " (" + Info(a).alias + ")";
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

const AlgorithmInfo& Info(AllreduceAlgorithm a) { return kAllreduceInfo[static_cast<int>(a)]; }
const AlgorithmInfo& Info(BroadcastAlgorithm a) { return kBroadcastInfo[static_cast<int>(a)]; }

CostModel CostModel::FromConfig(const Config& c) {
  return {c.cost_alpha_us * 1e-6, 1.0 / (c.cost_bandwidth_gbps * 1e9),
          1.0 / (c.cost_reduce_gbps * 1e9)};
}

double CostModel::Allreduce(AllreduceAlgorithm a, int n, size_t bytes) const {
  if (n <= 1) return 0.0;
  const double B = static_cast<double>(bytes);
  const double frac = static_cast<double>(n - 1) / n;
  int p = 1;
  while (p * 2 <= n) p *= 2;
  // Folding a non-power of two costs two extra whole-message steps.
  const double fold = (p == n) ? 0.0 : 2 * (alpha_s + B * beta_s_per_byte) + B * gamma_s_per_byte;
  switch (a) {
    case AllreduceAlgorithm::kRing:
      return 2 * (n - 1) * alpha_s + 2 * frac * B * beta_s_per_byte + frac * B * gamma_s_per_byte;
    case AllreduceAlgorithm::kRecursiveDoubling: {
      const double rounds = Log2Ceil(p);
      return fold + rounds * (alpha_s + B * beta_s_per_byte + B * gamma_s_per_byte);
    }
    case AllreduceAlgorithm::kHalvingDoubling: {
      const double pf = static_cast<double>(p - 1) / p;
      return fold + 2 * Log2Ceil(p) * alpha_s + 2 * pf * B * beta_s_per_byte +
             pf * B * gamma_s_per_byte;
    }
    case AllreduceAlgorithm::kSharedMemory:
      // Two steps; every byte copied in and out once and reduced once.
      return 2 * alpha_s + 2 * B * beta_s_per_byte + frac * B * gamma_s_per_byte;
  }
  return 0.0;
}

double CostModel::Broadcast(BroadcastAlgorithm a, int n, size_t bytes) const {
  if (n <= 1) return 0.0;
  const double B = static_cast<double>(bytes);
  const double frac = static_cast<double>(n - 1) / n;
  switch (a) {
    case BroadcastAlgorithm::kBinomial:
      return Log2Ceil(n) * (alpha_s + B * beta_s_per_byte);
    case BroadcastAlgorithm::kScatterAllgather:
      // The root's n-1 scatter sends leave its link one after another.
      return (n - 1) * alpha_s + frac * B * beta_s_per_byte + (n - 1) * alpha_s +
             frac * B * beta_s_per_byte;
  }
  return 0.0;
}

template <typename A>
Result<std::vector<Selector::Range<A>>> Selector::ParseOverride(const char* variable,
                                                                const std::string& value) {
  std::vector<Range<A>> ranges;
  if (value.empty()) return ranges;
  auto bad = [&](const std::string& why) {
    return InvalidArgument(std::string(variable) + "='" + value + "' is invalid: " + why +
                           "; accepted: a name, or name:LOW-HIGH ranges separated by commas "
                           "(sizes like 0, 64K, 4M; HIGH may be empty), with names " +
                           AcceptedNames<A>());
  };
  for (std::string_view item : Split(value, ',')) {
    const size_t colon = item.find(':');
    std::string_view name = item.substr(0, colon);
    auto algo = ByName<A>(name);
    if (!algo) return bad("unknown algorithm '" + std::string(name) + "'");
    if (colon == std::string_view::npos) {
      ranges.push_back({0, std::nullopt, *algo});
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
    ranges.push_back({*low, high, *algo});
  }
  return ranges;
}

template <typename A>
std::optional<A> Selector::Lookup(const std::vector<Range<A>>& ranges, size_t bytes) {
  for (const auto& r : ranges) {
    if (bytes >= r.low && (!r.high || bytes < *r.high)) return r.algorithm;
  }
  return std::nullopt;
}

Result<Selector> Selector::Create(const Config& config) {
  Selector s;
  s.model_ = CostModel::FromConfig(config);
  HORA_ASSIGN_OR_RETURN(s.allreduce_override_, ParseOverride<AllreduceAlgorithm>(
                                                   "HORA_ALLREDUCE_ALGO", config.allreduce_algo));
  HORA_ASSIGN_OR_RETURN(s.broadcast_override_, ParseOverride<BroadcastAlgorithm>(
                                                   "HORA_BROADCAST_ALGO", config.broadcast_algo));
  return s;
}

AllreduceAlgorithm Selector::ChooseAllreduce(int world_size, size_t bytes, bool shared) const {
  if (auto a = Lookup(allreduce_override_, bytes)) {
    if (shared || *a != AllreduceAlgorithm::kSharedMemory) return *a;
  } else if (shared) {
    return AllreduceAlgorithm::kSharedMemory;
  }
  AllreduceAlgorithm best = AllreduceAlgorithm::kRing;
  double best_t = model_.Allreduce(best, world_size, bytes);
  for (AllreduceAlgorithm a : kAllAllreduceAlgorithms) {
    if (a == AllreduceAlgorithm::kSharedMemory) continue;
    const double t = model_.Allreduce(a, world_size, bytes);
    if (t < best_t) {
      best = a;
      best_t = t;
    }
  }
  return best;
}

BroadcastAlgorithm Selector::ChooseBroadcast(int world_size, size_t bytes) const {
  if (auto a = Lookup(broadcast_override_, bytes)) return *a;
  const double tree = model_.Broadcast(BroadcastAlgorithm::kBinomial, world_size, bytes);
  const double sag = model_.Broadcast(BroadcastAlgorithm::kScatterAllgather, world_size, bytes);
  return sag < tree ? BroadcastAlgorithm::kScatterAllgather : BroadcastAlgorithm::kBinomial;
}

}  // namespace hora
