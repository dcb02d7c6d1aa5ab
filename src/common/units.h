// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Parsing and printing byte sizes: "4", "64K", "1M", "2G" (binary units,
// K = 1024), used by the config table and the algorithm override strings;
// printing durations for reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"

namespace hora {

// Returns nullopt on anything but digits followed by an optional K/M/G
// (upper or lower case, optional trailing "B" or "iB").
std::optional<uint64_t> ParseBytes(std::string_view text);

// "512 B", "64 KiB", "1.5 MiB".
std::string FormatBytes(uint64_t bytes);
// "12 bytes"; "4 MiB (4194304 bytes)" where FormatBytes rounds.
std::string ExactBytes(uint64_t bytes);

// "0.3", "61": seconds as a report says them (two digits below 10 s).
std::string FormatSeconds(Duration d);

}  // namespace hora
