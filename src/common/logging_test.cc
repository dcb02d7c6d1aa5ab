// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "common/logging.h"

#include <gtest/gtest.h>

#include <string>

namespace hora {
namespace {

// A tensor name may hold any byte: a NUL must not cut the line short, and a
// newline must not start a line of its own (a forged log line).
TEST(Logger, ControlCharactersAreEscapedNotCut) {
  Logger logger(LogLevel::kWarning, 3);
  ::testing::internal::CaptureStderr();
  static constexpr char kLine[] = "stall: allreduce 'a\0b\nc' has waited 60 s for rank 1";
  logger.Warning(std::string(kLine, sizeof kLine - 1));
  logger.Info("not shown");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err,
            "[hora rank 3] WARNING: stall: allreduce 'a\\x00b\\x0ac' has waited 60 s for rank 1\n");
}

// The launcher and its store log as no rank: "[hora]", never "rank -1".
TEST(Logger, NoRankIsNotRankMinusOne) {
  Logger logger(LogLevel::kWarning, -1);
  ::testing::internal::CaptureStderr();
  logger.Warning("store: a connection from 10.0.0.9 failed authentication");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "[hora] WARNING: store: a connection from 10.0.0.9 failed authentication\n");
}

}  // namespace
}  // namespace hora
