// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The settings autotuning changes while a job runs (HORA_AUTOTUNE;
// docs/dev/autotune.md), as one value that the first rank decides and every
// rank applies at the same cycle: the negotiator plans with its fusion
// threshold and cache capacity, the engine looks with its cycle time, and
// the backend chooses allreduce algorithms with its override and
// hierarchical switch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/config.h"

namespace hora {

struct Tunables {
  uint64_t fusion_threshold_bytes = 0;
  double cycle_time_ms = 1;
  uint64_t cache_capacity = 0;
  // HORA_ALLREDUCE_ALGO's syntax ("": the cost model and the defaults).
  std::string allreduce_algo;
  Hierarchy hierarchy = Hierarchy::kOff;

  static Tunables FromConfig(const Config& config);
  bool operator==(const Tunables&) const = default;

  // The bytes the first rank broadcasts, and back (nullopt: malformed).
  std::vector<uint8_t> Encode() const;
  static std::optional<Tunables> Decode(const std::vector<uint8_t>& bytes);
};

}  // namespace hora
