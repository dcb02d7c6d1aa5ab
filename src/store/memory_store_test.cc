// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "store/memory_store.h"

#include <gtest/gtest.h>

#include <thread>

namespace hora {
namespace {

using std::chrono::milliseconds;

TEST(MemoryStore, SetGetDelete) {
  MemoryStore s;
  ASSERT_TRUE(s.Set("a", {1, 2, 3}).ok());
  auto v = s.Get("a", milliseconds(10));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, (Bytes{1, 2, 3}));
  ASSERT_TRUE(s.Set("a", {9}).ok());
  EXPECT_EQ(*s.Get("a", milliseconds(10)), Bytes{9});
  EXPECT_TRUE(*s.Delete("a"));
  EXPECT_FALSE(*s.Delete("a"));
}

TEST(MemoryStore, GetWaitsForALaterSet) {
  MemoryStore s;
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(30));
    ASSERT_TRUE(s.Set("late", {7}).ok());
  });
  auto v = s.Get("late", std::chrono::seconds(10));
  setter.join();
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, Bytes{7});
}

TEST(MemoryStore, WaitTimesOutNamingMissingKeys) {
  MemoryStore s;
  ASSERT_TRUE(s.Set("here", {}).ok());
  Status st = s.Wait({"here", "missing"}, milliseconds(20));
  EXPECT_EQ(st.code(), StatusCode::kTimeout);
  EXPECT_NE(st.message().find("'missing'"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("'here'"), std::string::npos) << st.message();
}

TEST(MemoryStore, AddIsAtomicAcrossThreads) {
  MemoryStore s;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) ASSERT_TRUE(s.Add("n", 1).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(*s.Add("n", 0), 8000);
  EXPECT_EQ(*s.Add("n", -8000), 0);
  ASSERT_TRUE(s.Set("text", {1, 2, 3}).ok());
  EXPECT_EQ(s.Add("text", 1).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hora
