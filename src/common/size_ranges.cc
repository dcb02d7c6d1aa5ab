// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "common/size_ranges.h"

#include "common/units.h"

namespace hora {
namespace {

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

Result<std::vector<NamedRange>> ParseNamedRanges(std::string_view variable, std::string_view value,
                                                 std::string_view noun,
                                                 const std::function<bool(std::string_view)>& known,
                                                 const std::string& accepted) {
  std::vector<NamedRange> ranges;
  if (value.empty()) return ranges;
  auto bad = [&](const std::string& why) {
    return InvalidArgument(std::string(variable) + "='" + std::string(value) +
                           "' is invalid: " + why +
                           "; accepted: a name, or name:LOW-HIGH ranges separated by commas "
                           "(sizes like 0, 64K, 4M; HIGH may be empty), with names " +
                           accepted);
  };
  for (std::string_view item : Split(value, ',')) {
    const size_t colon = item.find(':');
    std::string_view name = item.substr(0, colon);
    if (!known(name)) return bad("unknown " + std::string(noun) + " '" + std::string(name) + "'");
    if (colon == std::string_view::npos) {
      ranges.push_back({0, std::nullopt, std::string(name)});
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
    ranges.push_back({*low, high, std::string(name)});
  }
  return ranges;
}

const NamedRange* FindRange(const std::vector<NamedRange>& ranges, size_t bytes) {
  for (const NamedRange& r : ranges) {
    if (r.Holds(bytes)) return &r;
  }
  return nullptr;
}

}  // namespace hora
