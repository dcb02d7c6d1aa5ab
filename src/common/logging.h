// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A small per-Session logger: messages below the configured level are
// dropped; others go to stderr as one line, prefixed with "[hora rank R]"
// (or "[hora]" for a logger of no rank, -1: the launcher and its store).
// No global logger exists, so ranks running as threads log independently.
#pragma once

#include <string>

#include "common/config.h"

namespace hora {

class Logger {
 public:
  Logger(LogLevel level, int rank) : level_(level), rank_(rank) {}

  bool Enabled(LogLevel level) const { return level >= level_ && level_ != LogLevel::kOff; }
  void Log(LogLevel level, const std::string& message) const;

  void Debug(const std::string& m) const { Log(LogLevel::kDebug, m); }
  void Info(const std::string& m) const { Log(LogLevel::kInfo, m); }
  void Warning(const std::string& m) const { Log(LogLevel::kWarning, m); }
  void Error(const std::string& m) const { Log(LogLevel::kError, m); }

 private:
  LogLevel level_;
  int rank_;
};

}  // namespace hora
