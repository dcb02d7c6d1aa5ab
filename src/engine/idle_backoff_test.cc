// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/idle_backoff.h"

#include "engine/engine.h"

#include <gtest/gtest.h>

namespace hora {
namespace {

using std::chrono::milliseconds;

TEST(IdleBackoff, BackoffDoublesUpToSixteenCycleTimesAndBusyResets) {
  IdleBackoff looks(milliseconds(5));
  EXPECT_EQ(looks.every(), milliseconds(5));
  const Duration expected[] = {milliseconds(10), milliseconds(20), milliseconds(40),
                               milliseconds(80), milliseconds(80)};
  for (Duration d : expected) {
    looks.Backoff();
    EXPECT_EQ(looks.every(), d);
  }
  looks.Busy();
  EXPECT_EQ(looks.every(), milliseconds(5));
}

TEST(IdleBackoff, NextLookCountsFromTheLaterOfLastCycleAndLastLook) {
  IdleBackoff looks(milliseconds(5));
  const TimePoint t0 = Clock::now();
  EXPECT_EQ(looks.NextLook(t0), t0 + milliseconds(5));
  // A look that joined nothing, after the last cycle: the idle time counts from it.
  EXPECT_FALSE(looks.JoinDue(t0 + milliseconds(7), false, 1));
  EXPECT_EQ(looks.IdleSince(t0), t0 + milliseconds(7));
  EXPECT_EQ(looks.NextLook(t0), t0 + milliseconds(7) + milliseconds(10));  // (backed off)
  // A cycle after that look: from its end.
  EXPECT_EQ(looks.IdleSince(t0 + milliseconds(9)), t0 + milliseconds(9));
}

TEST(IdleBackoff, JoinsWhereNobodyCanTell) {
  IdleBackoff looks(milliseconds(5));
  EXPECT_TRUE(looks.JoinDue(Clock::now(), std::nullopt, 1));
  EXPECT_EQ(looks.every(), milliseconds(5));
}

TEST(IdleBackoff, WhereNobodyCanTellTheJoinedCycleSetsTheNextLook) {
  IdleBackoff looks(milliseconds(5));
  const TimePoint t0 = Clock::now();
  ASSERT_TRUE(looks.JoinDue(t0, std::nullopt, 1));
  looks.Joined(/*idle_everywhere=*/true);
  EXPECT_EQ(looks.every(), milliseconds(10));
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(looks.JoinDue(t0, std::nullopt, 1));
    looks.Joined(true);
  }
  EXPECT_EQ(looks.every(), milliseconds(80));  // (16 cycle times at most)
  EXPECT_EQ(looks.NextLook(t0), t0 + milliseconds(80));
  // Some rank had tensors: one cycle time again.
  ASSERT_TRUE(looks.JoinDue(t0, std::nullopt, 1));
  looks.Joined(false);
  EXPECT_EQ(looks.every(), milliseconds(5));
}

TEST(IdleBackoff, NobodyWaitingBacksOff) {
  IdleBackoff looks(milliseconds(5));
  const TimePoint now = Clock::now();
  EXPECT_FALSE(looks.JoinDue(now, false, 1));
  EXPECT_FALSE(looks.JoinDue(now, false, 1));
  EXPECT_EQ(looks.every(), milliseconds(20));
}

TEST(IdleBackoff, AWaitingRankIsJoinedAtTheSecondLookWithNoCycleBetween) {
  IdleBackoff looks(milliseconds(5));
  const TimePoint now = Clock::now();
  looks.Backoff();
  // It came since the last look: not yet, and looks are a cycle time again.
  EXPECT_FALSE(looks.JoinDue(now, true, 100));
  EXPECT_EQ(looks.every(), milliseconds(5));
  // Still waiting, no cycle since: join.
  EXPECT_TRUE(looks.JoinDue(now, true, 100));
  // A cycle ran between (end 200): the rank waiting now is a new wait.
  IdleBackoff other(milliseconds(5));
  EXPECT_FALSE(other.JoinDue(now, true, 100));
  EXPECT_FALSE(other.JoinDue(now, true, 200));
  EXPECT_TRUE(other.JoinDue(now, true, 200));
  // Nobody waiting in between forgets the earlier wait.
  IdleBackoff third(milliseconds(5));
  EXPECT_FALSE(third.JoinDue(now, true, 100));
  EXPECT_FALSE(third.JoinDue(now, false, 100));
  EXPECT_FALSE(third.JoinDue(now, true, 100));
}

// HORA_CYCLE_TIME_MS=0 (Horovod's no wait) is the shortest cycle, not a
// busy loop; other values are as given.
TEST(CycleTime, ZeroIsTheShortest) {
  EXPECT_EQ(CycleTimeOf(0), std::chrono::microseconds(100));
  EXPECT_EQ(CycleTimeOf(2.5), std::chrono::microseconds(2500));
}

}  // namespace
}  // namespace hora
