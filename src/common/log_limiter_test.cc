// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "common/log_limiter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hora {
namespace {

using std::chrono::seconds;

TEST(LogLimiter, AFewPerWindowThenTheCount) {
  LogLimiter limiter(2, seconds(10));
  std::vector<std::string> said;
  auto say = [&](const std::string& m) { said.push_back(m); };
  const TimePoint t0 = Clock::now();
  for (int i = 0; i < 5; ++i) limiter.Note(t0 + seconds(i), "refused " + std::to_string(i), say);
  EXPECT_EQ(said, (std::vector<std::string>{"refused 0", "refused 1"}));
  EXPECT_EQ(limiter.held(), 3u);
  EXPECT_EQ(limiter.window_end(), t0 + seconds(10));
  limiter.Flush(t0 + seconds(9), say);  // the window is not over
  EXPECT_EQ(said.size(), 2u);
  limiter.Note(t0 + seconds(12), "refused 5", say);  // a new window: the count, then it
  ASSERT_EQ(said.size(), 4u);
  EXPECT_EQ(said[2], "... and 3 more like it in the last 12 s");
  EXPECT_EQ(said[3], "refused 5");
  limiter.Flush(t0 + seconds(13), say, true);  // nothing held: nothing said
  EXPECT_EQ(said.size(), 4u);
}

}  // namespace
}  // namespace hora
