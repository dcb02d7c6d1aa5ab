// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "launch/elastic_place.h"

#include <gtest/gtest.h>

namespace hora {
namespace {

TEST(ElasticPlace, AnAssignmentRoundTrips) {
  ElasticPlace p;
  p.generation = 3;
  p.layout = {5, 6, 1, 2, 2, 3, ""};
  const std::string text = FormatElasticPlace(p);
  EXPECT_EQ(text, "3 5 6 1 2 2 3");
  auto back = ParseElasticAssignment(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->generation, 3);
  EXPECT_EQ(back->layout.rank, 5);
  EXPECT_EQ(back->layout.size, 6);
  EXPECT_EQ(back->layout.local_rank, 1);
  EXPECT_EQ(back->layout.local_size, 2);
  EXPECT_EQ(back->layout.cross_rank, 2);
  EXPECT_EQ(back->layout.cross_size, 3);
}

TEST(ElasticPlace, TheHostUpdateCountsRoundTripWhenSaid) {
  ElasticPlace p;
  p.generation = 2;
  p.layout = {0, 1, 0, 1, 0, 1, ""};
  EXPECT_EQ(p.hosts_added, -1);
  auto none = ParseElasticAssignment(FormatElasticPlace(p));
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->hosts_added, -1);
  EXPECT_EQ(none->hosts_removed, -1);
  p.hosts_added = 4;
  p.hosts_removed = 0;
  const std::string text = FormatElasticPlace(p);
  EXPECT_EQ(text, "2 0 1 0 1 0 1 4 0");
  auto back = ParseElasticAssignment(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->hosts_added, 4);
  EXPECT_EQ(back->hosts_removed, 0);
  EXPECT_EQ(back->layout.size, 1);
}

TEST(ElasticPlace, AnEndIsAnAbortWithItsWhy) {
  auto end = ParseElasticAssignment(FormatElasticEnd("only 1 worker(s) left"));
  EXPECT_EQ(end.status().code(), StatusCode::kAborted);
  EXPECT_EQ(end.status().message(), "only 1 worker(s) left");
}

TEST(ElasticPlace, MalformedTextIsNamed) {
  for (const char* bad :
       {"", "1 2 3", "1 0 1 0 1 0 1 extra", "0 0 1 0 1 0 1", "1 2 2 0 1 0 1", "x 0 1 0 1 0 1",
        "1 0 1 0 1 0 1 3", "1 0 1 0 1 0 1 3 -1", "1 0 1 0 1 0 1 3 4 5"}) {
    auto p = ParseElasticAssignment(bad);
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(p.status().message().find(std::string("'") + bad + "'"), std::string::npos) << bad;
  }
  EXPECT_EQ(ElasticAssignmentKey("j", "h/0/1", 2), "hora/j/elastic/assign/h/0/1/2");
  EXPECT_EQ(ElasticArrivalKey("j", "h/0/1"), "hora/j/elastic/arrive/h/0/1");
}

}  // namespace
}  // namespace hora
