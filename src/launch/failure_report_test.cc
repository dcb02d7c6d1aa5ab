// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "launch/failure_report.h"

#include <gtest/gtest.h>

namespace hora {
namespace {

TEST(FailureReports, ReadBackAsWritten) {
  for (bool by_peer : {false, true}) {
    const FailureReport report{"worker h/2 (rank 1)", "ValueError: bad batch\nwith a line",
                               by_peer};
    const std::optional<FailureReport> back = ParseFailure(FormatFailure(report));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->who, report.who);
    EXPECT_EQ(back->what, report.what);
    EXPECT_EQ(back->caused_by_peer, by_peer);
  }
}

TEST(FailureReports, OtherTextIsNone) {
  for (const char* text : {"", "rank 1", "\nown\nx"}) {
    EXPECT_FALSE(ParseFailure(text).has_value()) << text;
  }
  // An older Hora's report (no kind line): its own.
  const std::optional<FailureReport> old = ParseFailure("rank 1\nValueError: x\ny");
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->what, "ValueError: x\ny");
  EXPECT_FALSE(old->caused_by_peer);
}

}  // namespace
}  // namespace hora
