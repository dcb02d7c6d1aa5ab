// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "common/logging.h"

#include <cstdio>
#include <string>

namespace hora {

void Logger::Log(LogLevel level, const std::string& message) const {
  if (!Enabled(level)) return;
  static constexpr const char* kNames[] = {"TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "OFF"};
  // Control characters (a NUL in a tensor name would end the line early, a
  // newline would forge one) are written as \xNN.
  // (A logger of no rank, -1, is the launcher's or its store's.)
  std::string line = rank_ >= 0 ? "[hora rank " + std::to_string(rank_) + "] " : "[hora] ";
  line += kNames[static_cast<int>(level)];
  line += ": ";
  line.reserve(line.size() + message.size() + 1);
  for (const char c : message) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      line += "\\x";
      line += kHex[u >> 4];
      line += kHex[u & 15];
    } else {
      line += c;
    }
  }
  line += '\n';
  // One write per line: stdio locks the stream, so lines never interleave.
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace hora
