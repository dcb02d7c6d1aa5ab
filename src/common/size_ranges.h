// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Settings that name, by message size, what runs it: HORA_ALLREDUCE_ALGO
// and HORA_BROADCAST_ALGO (collectives/selector.h), HORA_GPU_ROUTE
// (device/gpu_routing.h). One syntax for all: a name alone for every size
// ("ring"), or ranges ("rd:0-64K,ring:64K-": [low, high) in bytes, an open
// high end means no limit), separated by commas.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hora/status.h"

namespace hora {

struct NamedRange {
  size_t low = 0;
  std::optional<size_t> high;  // exclusive; nullopt: unbounded
  std::string name;
  bool Holds(size_t bytes) const { return bytes >= low && (!high || bytes < *high); }
};

// Parses `value` of setting `variable`, whose names are of `noun`s
// ("algorithm"). `known` says whether a name is accepted; `accepted` lists
// those for the error, which names the variable, the value and what is
// wrong. An empty value is no range.
Result<std::vector<NamedRange>> ParseNamedRanges(std::string_view variable, std::string_view value,
                                                 std::string_view noun,
                                                 const std::function<bool(std::string_view)>& known,
                                                 const std::string& accepted);

// The first of `ranges` that holds `bytes`, or null.
const NamedRange* FindRange(const std::vector<NamedRange>& ranges, size_t bytes);

}  // namespace hora
