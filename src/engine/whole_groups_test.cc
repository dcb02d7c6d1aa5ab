// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// WholeGroups: a group is whole once all of its members were counted,
// whether they come one after another or mixed with other groups' and
// lone tensors.
#include "engine/whole_groups.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hora {
namespace {

RequestMeta Member(const std::string& group, uint32_t size) {
  RequestMeta m;
  m.group = group;
  m.group_size = size;
  return m;
}

TEST(WholeGroups, AGroupIsWholeOnceEveryMemberWasCountedInAnyOrder) {
  const RequestMeta a = Member("a", 3), b = Member("bb", 2), lone = Member("", 0);
  const RequestMeta other_a = Member("a", 3);  // (another string, the same group)
  WholeGroups g;
  EXPECT_TRUE(g.Whole(lone));
  EXPECT_FALSE(g.Whole(a));  // (never counted)
  for (const RequestMeta* m : {&a, &b, &lone, &other_a, &lone}) g.Count(*m);
  EXPECT_FALSE(g.Whole(a));  // 2 of 3
  EXPECT_FALSE(g.Whole(b));
  g.Count(b);
  EXPECT_TRUE(g.Whole(b));
  EXPECT_FALSE(g.Whole(other_a));
  g.Count(a);  // (after a Whole: the count it remembered moves too)
  EXPECT_TRUE(g.Whole(other_a));
  EXPECT_TRUE(g.Whole(a));
  EXPECT_TRUE(g.Whole(b));
  EXPECT_FALSE(g.Whole(Member("c", 1)));
  EXPECT_TRUE(g.Whole(lone));
}

TEST(WholeGroups, LongRunsOfOneGroupAndTheirNeighbours) {
  std::vector<RequestMeta> metas;
  for (int i = 0; i < 1000; ++i) metas.push_back(Member("layers", 1000));
  for (int i = 0; i < 5; ++i) metas.push_back(Member("head", 6));
  WholeGroups g;
  for (const RequestMeta& m : metas) g.Count(m);
  EXPECT_TRUE(g.Whole(metas.front()));
  EXPECT_FALSE(g.Whole(metas.back()));  // 5 of 6
  EXPECT_TRUE(g.Whole(metas[999]));
}

}  // namespace
}  // namespace hora
