// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "common/units.h"

#include <cctype>
#include <cstdio>
#include <limits>

namespace hora {

std::optional<uint64_t> ParseBytes(std::string_view text) {
  size_t i = 0;
  uint64_t value = 0;
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return std::nullopt;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
    ++i;
  }
  std::string_view suffix = text.substr(i);
  uint64_t mult = 1;
  if (!suffix.empty()) {
    switch (std::toupper(static_cast<unsigned char>(suffix[0]))) {
      case 'K':
        mult = 1ull << 10;
        break;
      case 'M':
        mult = 1ull << 20;
        break;
      case 'G':
        mult = 1ull << 30;
        break;
      case 'B':
        mult = 1;
        break;
      default:
        return std::nullopt;
    }
    std::string_view rest = suffix.substr(1);
    if (mult == 1 && !rest.empty()) return std::nullopt;
    if (!rest.empty() && rest != "B" && rest != "b" && rest != "iB" && rest != "ib")
      return std::nullopt;
  }
  if (value > std::numeric_limits<uint64_t>::max() / mult) return std::nullopt;
  return value * mult;
}

std::string FormatBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else if (v == static_cast<double>(static_cast<uint64_t>(v))) {
    std::snprintf(buf, sizeof buf, "%.0f %s", v, units[u]);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  }
  return buf;
}

std::string ExactBytes(uint64_t bytes) {
  const std::string exact = std::to_string(bytes) + " bytes";
  return bytes < 1024 ? exact : FormatBytes(bytes) + " (" + exact + ")";
}

std::string FormatSeconds(Duration d) {
  const double s = DurationToSeconds(d);
  char secs[32];
  std::snprintf(secs, sizeof secs, s < 10 ? "%.2g" : "%.0f", s);
  return secs;
}

}  // namespace hora
