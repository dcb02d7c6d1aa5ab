// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// ElasticDriver on a store alone: what a poll costs in store requests, and
// what a member that ends leaves there (elastic_worlds_test.cc runs
// workers' Sessions through a driver).
#include "elastic_driver.h"

#include <gtest/gtest.h>

#include <string>

#include "launch/elastic_place.h"
#include "store/memory_store.h"

namespace hora::horarun {
namespace {

using Clock = ElasticPlanner::Clock;

// A store that counts the driver's requests (every one is a round trip to
// horarun's store server).
class CountingStore final : public Store {
 public:
  Status Set(const std::string& key, const Bytes& value) override {
    ++requests;
    return inner.Set(key, value);
  }
  Result<Bytes> Get(const std::string& key, Duration timeout) override {
    ++requests;
    return inner.Get(key, timeout);
  }
  Result<int64_t> Add(const std::string& key, int64_t delta) override {
    ++requests;
    return inner.Add(key, delta);
  }
  Status Wait(const std::vector<std::string>& keys, Duration timeout) override {
    ++requests;
    return inner.Wait(keys, timeout);
  }
  Result<bool> Delete(const std::string& key) override {
    ++requests;
    return inner.Delete(key);
  }
  MemoryStore inner;
  int requests = 0;
};

TEST(ElasticDriver, APollWhileNobodyArrivesIsOneStoreRequest) {
  // 64 workers started. Until one arrives, each poll reads the arrivals
  // counter only (but for the first, and one a second, which read every
  // worker's key). Workers that count themselves there (their own key,
  // then the counter) are seen at the next poll; workers that do not (of
  // another version) at the next read of every key, a second on at most.
  CountingStore store;
  ElasticPlanner::Settings settings;
  settings.min_np = 1;
  settings.max_np = 64;
  ElasticDriver driver(store, "job", settings);
  const Clock::time_point t0 = Clock::now();
  auto at = [&](int ms) { return t0 + std::chrono::milliseconds(ms); };
  for (int i = 0; i < 64; ++i) driver.Started("h/" + std::to_string(i), "h", t0);
  auto poll = [&](int ms, int want_requests, size_t want_world) {
    const int before = store.requests;
    auto d = driver.Poll(at(ms));
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->assign.size(), want_world) << "at " << ms << " ms";
    EXPECT_EQ(store.requests - before, want_requests) << "at " << ms << " ms";
  };
  auto arrive = [&](bool count) {
    for (int i = 0; i < 64; ++i) {
      ASSERT_TRUE(store.inner.Add(ElasticArrivalKey("job", "h/" + std::to_string(i)), 1).ok());
      if (count) {
        ASSERT_TRUE(store.inner.Add(ElasticArrivalsKey("job"), 1).ok());
      }
    }
  };
  for (int ms = 0; ms < 200; ms += 20) poll(ms, ms == 0 ? 65 : 1, 0);
  arrive(/*count=*/false);  // (workers of another version)
  poll(500, 1, 0);          // not read yet
  poll(1000, 129, 64);      // every key a second on: the world forms (64 answers)
  arrive(/*count=*/true);   // (the next init() of each, counted)
  // Read at once: the next world, each worker's answer to its first
  // arrival deleted (64 requests more), the new one there.
  poll(1020, 129 + 64, 64);
  poll(1040, 1, 0);
  EXPECT_FALSE(store.inner.Get(ElasticAssignmentKey("job", "h/7", 1), Duration::zero()).ok());
  EXPECT_TRUE(store.inner.Get(ElasticAssignmentKey("job", "h/7", 2), Duration::zero()).ok());
}

// A member of the latest world that ends marks that world broken in the
// store (what its members still connecting stop waiting on); a worker that
// was in no world, or only an older one, does not.
TEST(ElasticDriver, AMemberThatEndsMarksItsWorldBroken) {
  MemoryStore store;
  ElasticPlanner::Settings settings;
  settings.min_np = 1;
  settings.max_np = 3;
  ElasticDriver driver(store, "job", settings);
  const Clock::time_point t0 = Clock::now();
  for (const char* id : {"h/0", "h/1"}) driver.Started(id, "h", t0);
  for (const char* id : {"h/0", "h/1"}) {
    ASSERT_TRUE(store.Add(ElasticArrivalKey("job", id), 1).ok());
    ASSERT_TRUE(store.Add(ElasticArrivalsKey("job"), 1).ok());
  }
  auto d = driver.Poll(t0);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(d->assign.size(), 2u);
  driver.Started("h/2", "h", t0);  // (in no world yet)
  driver.Ended("h/2", t0);
  EXPECT_FALSE(store.Get(ElasticBrokenKey("job", 1), Duration::zero()).ok());
  driver.Ended("h/1", t0);
  auto why = store.Get(ElasticBrokenKey("job", 1), Duration::zero());
  ASSERT_TRUE(why.ok());
  EXPECT_EQ(std::string(why->begin(), why->end()),
            "worker h/1 of world 1 ended while the world was forming");
  EXPECT_TRUE(driver.Poll(t0).ok());
}

}  // namespace
}  // namespace hora::horarun
