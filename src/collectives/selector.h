// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Choosing an algorithm is data, kept apart from the algorithms: a cost model
// (alpha = latency per message, beta = seconds per byte moved, gamma =
// seconds per byte reduced) predicts each algorithm's time from the world
// size and message size, and the cheapest wins. HORA_ALLREDUCE_ALGO and
// HORA_BROADCAST_ALGO override it, for all sizes ("ring") or per size range
// ("rd:0-64K,ring:64K-": ranges are [low, high) in bytes, an open high end
// means no limit, sizes outside every range fall back to the cost model).
//
// An override naming an unknown algorithm, or a malformed range, is an error
// at Session creation naming the variable, the value and the accepted names.
//
// shared_memory runs only on a Comm with a shared window (ranks of one host:
// transport/shared_window.h). Where one exists it is chosen for every size
// (one copy in and out and 1-2 steps per chunk beat the point-to-point
// algorithms at every size measured: docs/dev/performance.md); where none exists
// the cost model picks among the others, and an override naming it falls
// back to the cost model too.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "common/config.h"
#include "hora/status.h"

namespace hora {

enum class AllreduceAlgorithm { kRing, kRecursiveDoubling, kHalvingDoubling, kSharedMemory };
enum class BroadcastAlgorithm { kBinomial, kScatterAllgather };

inline constexpr AllreduceAlgorithm kAllAllreduceAlgorithms[] = {
    AllreduceAlgorithm::kRing, AllreduceAlgorithm::kRecursiveDoubling,
    AllreduceAlgorithm::kHalvingDoubling, AllreduceAlgorithm::kSharedMemory};
inline constexpr BroadcastAlgorithm kAllBroadcastAlgorithms[] = {
    BroadcastAlgorithm::kBinomial, BroadcastAlgorithm::kScatterAllgather};

// Registry entry of one algorithm.
struct AlgorithmInfo {
  const char* name;         // canonical, used in overrides and logs
  const char* alias;        // short form accepted in overrides
  const char* description;  // one line
};

const AlgorithmInfo& Info(AllreduceAlgorithm a);
const AlgorithmInfo& Info(BroadcastAlgorithm a);

struct CostModel {
  double alpha_s;           // per message
  double beta_s_per_byte;   // per byte sent
  double gamma_s_per_byte;  // per byte reduced

  static CostModel FromConfig(const Config& c);
  double Allreduce(AllreduceAlgorithm a, int n, size_t bytes) const;
  double Broadcast(BroadcastAlgorithm a, int n, size_t bytes) const;
};

class Selector {
 public:
  static Result<Selector> Create(const Config& config);

  // `shared`: the Comm has a usable shared window.
  AllreduceAlgorithm ChooseAllreduce(int world_size, size_t bytes, bool shared = false) const;
  BroadcastAlgorithm ChooseBroadcast(int world_size, size_t bytes) const;
  const CostModel& cost_model() const { return model_; }

 private:
  template <typename A>
  struct Range {
    size_t low;
    std::optional<size_t> high;  // exclusive; nullopt = unbounded
    A algorithm;
  };
  template <typename A>
  static Result<std::vector<Range<A>>> ParseOverride(const char* variable,
                                                     const std::string& value);
  template <typename A>
  static std::optional<A> Lookup(const std::vector<Range<A>>& ranges, size_t bytes);

  CostModel model_{};
  std::vector<Range<AllreduceAlgorithm>> allreduce_override_;
  std::vector<Range<BroadcastAlgorithm>> broadcast_override_;
};

}  // namespace hora
