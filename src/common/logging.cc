// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "common/logging.h"

#include <cstdio>

namespace hora {

void Logger::Log(LogLevel level, const std::string& message) const {
  if (!Enabled(level)) return;
  static constexpr const char* kNames[] = {"TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "OFF"};
  // One fprintf per line: stdio locks the stream, so lines never interleave.
  std::fprintf(stderr, "[hora rank %d] %s: %s\n", rank_, kNames[static_cast<int>(level)],
               message.c_str());
}

}  // namespace hora
