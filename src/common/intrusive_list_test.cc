// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "common/intrusive_list.h"

#include <gtest/gtest.h>

#include <vector>

namespace hora {
namespace {

struct Item {
  int id = 0;
  Item* prev = nullptr;
  Item* next = nullptr;
  Item* other_prev = nullptr;
  Item* other_next = nullptr;
};
using List = IntrusiveList<Item, &Item::prev, &Item::next>;
using Other = IntrusiveList<Item, &Item::other_prev, &Item::other_next>;

std::vector<int> Ids(const List& l) {
  std::vector<int> ids;
  for (Item* i = l.front(); i != nullptr; i = i->next) ids.push_back(i->id);
  return ids;
}

TEST(IntrusiveList, AppendsAndRemovesAnywhere) {
  Item items[5];
  for (int i = 0; i < 5; ++i) items[i].id = i;
  List l;
  EXPECT_TRUE(l.empty());
  for (Item& i : items) l.PushBack(&i);
  EXPECT_EQ(Ids(l), (std::vector<int>{0, 1, 2, 3, 4}));
  l.Remove(&items[2]);  // middle
  l.Remove(&items[0]);  // first
  l.Remove(&items[4]);  // last
  EXPECT_EQ(Ids(l), (std::vector<int>{1, 3}));
  EXPECT_EQ(l.size(), 2u);
  l.PushBack(&items[0]);  // back on, at the end
  EXPECT_EQ(Ids(l), (std::vector<int>{1, 3, 0}));
  l.Remove(&items[1]);
  l.Remove(&items[3]);
  l.Remove(&items[0]);
  EXPECT_TRUE(l.empty());
  EXPECT_EQ(l.front(), nullptr);
  EXPECT_EQ(items[0].prev, nullptr);
  EXPECT_EQ(items[0].next, nullptr);
}

TEST(IntrusiveList, TwoListsThroughOneElement) {
  Item a, b;
  a.id = 1;
  b.id = 2;
  List l;
  Other o;
  l.PushBack(&a);
  l.PushBack(&b);
  o.PushBack(&b);
  o.PushBack(&a);
  l.Remove(&a);
  EXPECT_EQ(Ids(l), (std::vector<int>{2}));
  EXPECT_EQ(o.front(), &b);
  EXPECT_EQ(b.other_next, &a);
  EXPECT_EQ(o.size(), 2u);
}

}  // namespace
}  // namespace hora
