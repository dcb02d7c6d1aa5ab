// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "api/key_recording_store.h"

#include <gtest/gtest.h>

#include <memory>

#include "store/memory_store.h"

namespace hora {
namespace {

bool Has(Store& s, const std::string& key) { return s.Get(key, Duration::zero()).ok(); }

// The keys set through it are deleted, once; counters (which number the
// Sessions to come) and keys set by others stay; after that nothing more
// is recorded (a failure report set later stays).
TEST(KeyRecordingStore, DeletesTheKeysSetThroughItThenRecordsNoMore) {
  auto inner = std::make_shared<MemoryStore>();
  ASSERT_TRUE(inner->Set("theirs", Bytes{1}).ok());
  KeyRecordingStore store(inner);
  ASSERT_TRUE(store.Set("s1/addr/0", Bytes{1}).ok());
  ASSERT_TRUE(store.Set("s1/shm/names/0", Bytes{2}).ok());
  ASSERT_TRUE(store.Set("s1/addr/0", Bytes{3}).ok());  // (set twice: deleted once)
  ASSERT_TRUE(store.Add("sessions/0", 1).ok());
  EXPECT_TRUE(Has(store, "s1/addr/0"));
  EXPECT_EQ(store.DeleteRecorded(), 2u);
  EXPECT_FALSE(Has(*inner, "s1/addr/0"));
  EXPECT_FALSE(Has(*inner, "s1/shm/names/0"));
  EXPECT_TRUE(Has(*inner, "theirs"));
  Result<int64_t> n = inner->Add("sessions/0", 0);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1);
  ASSERT_TRUE(store.Set("failure/1", Bytes{4}).ok());
  EXPECT_EQ(store.DeleteRecorded(), 0u);
  EXPECT_TRUE(Has(*inner, "failure/1"));
}

}  // namespace
}  // namespace hora
