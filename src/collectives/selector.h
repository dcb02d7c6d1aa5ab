// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Which algorithm runs a collective: data, kept apart from the algorithms,
// whose names, needs and cost formulas are rows of registry.h.
//
// A selection is a list of size ranges, each naming an algorithm, in the
// syntax of HORA_ALLREDUCE_ALGO, HORA_BROADCAST_ALGO and
// HORA_REDUCESCATTER_ALGO: a name alone for
// every size ("ring"), or ranges ("rd:0-64K,ring:64K-": [low, high) in bytes,
// an open high end means no limit). The selector's list is the user's
// override followed by the default selection below. For a call of `bytes`
// bytes the first range holding `bytes` names the algorithm; where no range
// holds it, or the algorithm named cannot run on this Comm (its row needs a
// shared window the Comm lacks), the cost model picks the cheapest row that
// can (alpha = latency per message, beta = seconds per byte moved, gamma =
// seconds per byte reduced; HORA_COST_*).
//
// The default allreduce selection is shared_memory for every size: on a Comm
// with a shared window (ranks of one host: transport/shared_window.h) one copy
// in and out and 1-2 steps per chunk beat the point-to-point algorithms at
// every size measured (docs/dev/performance.md); on any other Comm it cannot
// run, so every size goes to the cost model. The same rule makes an override
// naming shared_memory fall back to the cost model where there is no window,
// and an override's ranges win over the window where they apply. Broadcast
// has no default ranges: the cost model picks every size. Reducescatter's
// default is shared_memory for every size, as allreduce's: 1.7-4x faster
// than the ring at every size measured from 2 to 8 ranks
// (docs/dev/performance.md, session 65).
//
// An override naming an unknown algorithm, or a malformed range, is an error
// at Session creation naming the variable, the value and the accepted names.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "collectives/registry.h"
#include "common/config.h"
#include "hora/status.h"

namespace hora {

// The default selections, in the override syntax (see above).
inline constexpr std::string_view kDefaultAllreduceSelection = "shared_memory";
inline constexpr std::string_view kDefaultBroadcastSelection = "";
inline constexpr std::string_view kDefaultReducescatterSelection = "shared_memory";
// HORA_ALLTOALL_ALGO=auto: the window takes blocks of one round's slot
// below kAlltoallSharedBelowBytes (HORA_SHM_SINGLE_COPY_BYTES' default), at
// two ranks of kAlltoallSharedPairBytes at most.
inline constexpr size_t kAlltoallSharedBelowBytes = size_t{256} << 10;
inline constexpr size_t kAlltoallSharedPairBytes = size_t{16} << 10;

class Selector {
 public:
  static Result<Selector> Create(const Config& config);
  // This selector with `allreduce_algo` (HORA_ALLREDUCE_ALGO's syntax) in
  // place of its allreduce override.
  Result<Selector> WithAllreduce(std::string_view allreduce_algo) const;

  // `shared`: the Comm has a usable shared window. The row returned lives
  // in registry.h's tables (static storage).
  const AllreduceAlgorithm& ChooseAllreduce(int world_size, size_t bytes,
                                            bool shared = false) const;
  // The same, the cost model's picks made with `model` (this one's
  // placed on hosts: CostModel::OnHosts).
  const AllreduceAlgorithm& ChooseAllreduce(int world_size, size_t bytes, bool shared,
                                            const CostModel& model) const;
  const BroadcastAlgorithm& ChooseBroadcast(int world_size, size_t bytes,
                                            bool shared = false) const;
  // `bytes`: the whole input's.
  const ReducescatterAlgorithm& ChooseReducescatter(int world_size, size_t bytes,
                                                    bool shared = false) const;
  // Whether an allgather runs on the shared window (AllgatherShared) rather
  // than AllgatherRing, as HORA_ALLGATHER_ALGO says: `shared`, the Comm has
  // a usable window; `pair`, two ranks would exchange their blocks in place
  // (pair_in_place.h), which was faster there. Alike on every rank when its
  // arguments are.
  bool AllgatherOnWindow(bool shared, bool pair) const;
  // Whether an alltoall whose every rank knows every rank's splits runs on
  // the shared window (AlltoallShared) rather than AlltoallPairwise, as
  // HORA_ALLTOALL_ALGO says: `shared`, the Comm has a usable window;
  // `largest_block`, the largest block any rank sends another; `slot`,
  // AlltoallSharedSlotBytes (a round's piece of a block). `auto` takes it
  // for blocks of one round below kAlltoallSharedBelowBytes (at two ranks,
  // of kAlltoallSharedPairBytes at most). Alike on every rank when its
  // arguments are.
  bool AlltoallOnWindow(int world_size, bool shared, size_t largest_block, size_t slot) const;
  const CostModel& cost_model() const { return model_; }

 private:
  template <typename Algorithm>
  struct Range {
    size_t low;
    std::optional<size_t> high;  // exclusive; nullopt = unbounded
    const Algorithm* algorithm;
  };
  template <typename Algorithm>
  static Result<std::vector<Range<Algorithm>>> Parse(std::string_view variable,
                                                     std::string_view value);
  template <typename Algorithm>
  const Algorithm& Choose(const std::vector<Range<Algorithm>>& ranges, int world_size, size_t bytes,
                          bool shared, const CostModel& model) const;

  CostModel model_{};
  // The user's override, then the default selection.
  std::vector<Range<AllreduceAlgorithm>> allreduce_;
  std::vector<Range<BroadcastAlgorithm>> broadcast_;
  std::vector<Range<ReducescatterAlgorithm>> reducescatter_;
  std::string allgather_ = "auto";
  std::string alltoall_ = "auto";
};

}  // namespace hora
