// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "api/abortable_store.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "store/memory_store.h"

namespace hora {
namespace {

// A wait ends soon after the abort key is set, with its value as the
// reason; without it, a wait ends as the store's would: with the key's
// value, or a timeout naming the whole wait.
TEST(AbortableStore, AWaitEndsWhenTheAbortKeyIsSet) {
  auto inner = std::make_shared<MemoryStore>();
  AbortableStore store(inner, "abort", std::chrono::milliseconds(20));
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::string why = "worker h/1 of world 2 ended while the world was forming";
    ASSERT_TRUE(inner->Set("abort", Bytes(why.begin(), why.end())).ok());
  });
  const TimePoint start = Clock::now();
  Result<Bytes> got = store.Get("peer/1", std::chrono::seconds(60));
  later.join();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(got.status().message(), "worker h/1 of world 2 ended while the world was forming");
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(store.Wait({"peer/1"}, std::chrono::seconds(60)).code(), StatusCode::kUnavailable);
}

TEST(AbortableStore, WithoutAnAbortItWaitsAsTheStoreDoes) {
  auto inner = std::make_shared<MemoryStore>();
  AbortableStore store(inner, "abort", std::chrono::milliseconds(20));
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    ASSERT_TRUE(inner->Set("peer/1", Bytes{7}).ok());
  });
  Result<Bytes> got = store.Get("peer/1", std::chrono::seconds(60));
  later.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, Bytes{7});
  EXPECT_TRUE(store.Wait({"peer/1"}, std::chrono::milliseconds(1)).ok());
  const Status late = store.Wait({"peer/2", "peer/3"}, std::chrono::milliseconds(150));
  EXPECT_EQ(late.code(), StatusCode::kTimeout);
  EXPECT_NE(late.message().find("timed out after 0.15"), std::string::npos) << late.message();
  EXPECT_NE(late.message().find("peer/2, peer/3"), std::string::npos) << late.message();
  ASSERT_TRUE(store.Set("k", Bytes{1}).ok());
  EXPECT_EQ(*store.Add("n", 2), 2);
  EXPECT_TRUE(*store.Delete("k"));
}

}  // namespace
}  // namespace hora
