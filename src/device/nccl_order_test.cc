// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// NcclOrder: turns go to batches in the order of their tensors' numbers
// (the rank's submission order), one set at a time; a set's batches keep
// the order its ranks agreed on; a wait ends in an error naming what it
// waited for (timeout, the engine stopping), never in silence.
#include "device/nccl_order.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <list>
#include <string>
#include <thread>
#include <vector>

namespace hora {
namespace {

using namespace std::chrono_literals;

NcclOrder::Wait Bounded(Duration timeout, const Logger* logger = nullptr,
                        Duration warn_every = Duration::zero()) {
  return {timeout, warn_every, logger, [] { return std::string("rank 0: allreduce 'x'"); }};
}

// Whether `f` is still waiting after a while (it waits for a turn).
bool StillWaiting(std::future<void>& f) { return f.wait_for(100ms) == std::future_status::timeout; }

TEST(NcclOrder, ASetAloneHasItsTurnsAtOnce) {
  NcclOrder order;
  const std::string a = "a", b = "b";
  std::vector<uint64_t> first{order.Submitted(0, &a)};
  std::vector<uint64_t> second{order.Submitted(0, &b)};
  EXPECT_LT(first[0], second[0]);
  for (auto* batch : {&second, &first}) {  // (in the order its ranks agreed on)
    Result<NcclOrder::Turn> t = order.Await(0, *batch, Bounded(1s));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
  }
}

TEST(NcclOrder, ABatchWaitsForAnotherSetsTensorSubmittedBefore) {
  NcclOrder order;
  const std::string g = "g", s = "s";
  const uint64_t global = order.Submitted(0, &g);  // first on this rank
  std::vector<uint64_t> of_set{order.Submitted(1, &s)};
  std::atomic<bool> made{false};
  std::future<void> set_batch = std::async(std::launch::async, [&] {
    Result<NcclOrder::Turn> t = order.Await(1, of_set, Bounded(10s));
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    made = true;
  });
  EXPECT_TRUE(StillWaiting(set_batch));
  EXPECT_FALSE(made);
  // The global set's tensor runs (its batch's turn ends): the set's goes.
  std::vector<uint64_t> global_batch{global};
  { ASSERT_TRUE(order.Await(0, global_batch, Bounded(1s)).ok()); }
  set_batch.get();
  EXPECT_TRUE(made);
}

TEST(NcclOrder, ATensorFinishedOtherwiseHoldsNobodyBack) {
  NcclOrder order;
  const std::string g = "g", s = "s";
  const uint64_t global = order.Submitted(0, &g);
  std::vector<uint64_t> of_set{order.Submitted(1, &s)};
  std::future<void> set_batch = std::async(
      std::launch::async, [&] { EXPECT_TRUE(order.Await(1, of_set, Bounded(10s)).ok()); });
  EXPECT_TRUE(StillWaiting(set_batch));
  order.Finished(0, global);  // (on Hora's own path, or failed)
  set_batch.get();
}

TEST(NcclOrder, TensorsSubmittedLaterHoldNobodyBack) {
  NcclOrder order;
  const std::string g = "g", s = "s";
  std::vector<uint64_t> global{order.Submitted(0, &g)};
  (void)order.Submitted(1, &s);  // submitted after: its set waits, not the global one
  Result<NcclOrder::Turn> t = order.Await(0, global, Bounded(1s));
  EXPECT_TRUE(t.ok()) << t.status().ToString();
}

// A set whose ranks agreed to run a later tensor first: its batch's place
// is that tensor's, so another set's batch between the two does not wait
// for its earlier tensor (which comes after, in the set's order), and its
// earlier tensor's batch keeps the later place. Without that the two sets
// would wait for each other.
TEST(NcclOrder, ASetsOwnOrderRaisesItsPlaces) {
  NcclOrder order;
  const std::string a1 = "a1", b = "b", a2 = "a2";
  std::vector<uint64_t> first_of_a{order.Submitted(1, &a1)};
  std::vector<uint64_t> of_b{order.Submitted(2, &b)};
  std::vector<uint64_t> second_of_a{order.Submitted(1, &a2)};
  std::vector<std::string> made;
  Mutex mu;
  auto note = [&](const char* what) {
    MutexLock lock(mu);
    made.push_back(what);
  };
  // Set 1 runs a2 before a1; set 2 runs b.
  std::future<void> set1 = std::async(std::launch::async, [&] {
    {
      Result<NcclOrder::Turn> t = order.Await(1, second_of_a, Bounded(10s));
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      note("a2");
    }
    Result<NcclOrder::Turn> t = order.Await(1, first_of_a, Bounded(10s));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    note("a1");
  });
  EXPECT_TRUE(StillWaiting(set1));  // a2 comes after b
  std::future<void> set2 = std::async(std::launch::async, [&] {
    Result<NcclOrder::Turn> t = order.Await(2, of_b, Bounded(10s));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    note("b");
  });
  set2.get();
  set1.get();
  EXPECT_EQ(made, (std::vector<std::string>{"b", "a2", "a1"}));
}

// A set that starts waiting with a later place than its earliest unrun
// tensor holds the others back less from then on: they are woken at once.
// (Set 1 runs y3 before y1; set 2's x2 waited for y1.)
TEST(NcclOrder, ASetThatStartsWaitingWakesTheOthers) {
  NcclOrder order;
  const std::string y1 = "y1", x2 = "x2", y3 = "y3";
  (void)order.Submitted(1, &y1);
  std::vector<uint64_t> of_x{order.Submitted(2, &x2)};
  std::vector<uint64_t> of_y{order.Submitted(1, &y3)};
  const auto start = std::chrono::steady_clock::now();
  std::future<void> x = std::async(std::launch::async, [&] {
    EXPECT_TRUE(order.Await(2, of_x, Bounded(20s)).ok());  // (no warnings to wake it)
  });
  EXPECT_TRUE(StillWaiting(x));  // behind y1
  std::future<void> y =
      std::async(std::launch::async, [&] { EXPECT_TRUE(order.Await(1, of_y, Bounded(20s)).ok()); });
  x.get();
  y.get();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "x2 slept until its timeout";
}

// A batch whose turn did not come still sets its set's place: the set's
// next batch, of an earlier tensor, keeps it, as on the ranks where the
// turn came.
TEST(NcclOrder, AMissedTurnStillSetsTheSetsPlace) {
  NcclOrder order;
  const std::string a1 = "a1", b2 = "b2", a3 = "a3";
  std::vector<uint64_t> first_of_a{order.Submitted(1, &a1)};
  (void)order.Submitted(2, &b2);  // never runs here
  std::vector<uint64_t> second_of_a{order.Submitted(1, &a3)};
  EXPECT_EQ(order.Await(1, second_of_a, Bounded(200ms)).status().code(), StatusCode::kTimeout);
  // a1's batch comes after a3's: its place is a3's, behind b2 still.
  EXPECT_EQ(order.Await(1, first_of_a, Bounded(200ms)).status().code(), StatusCode::kTimeout);
}

TEST(NcclOrder, OneSetHoldsTheTurnAtATime) {
  NcclOrder order;
  const std::string g = "g", s = "s";
  std::vector<uint64_t> global{order.Submitted(0, &g)};
  std::vector<uint64_t> of_set{order.Submitted(1, &s)};
  Result<NcclOrder::Turn> held = order.Await(0, global, Bounded(1s));
  ASSERT_TRUE(held.ok());
  std::future<void> set_batch = std::async(
      std::launch::async, [&] { EXPECT_TRUE(order.Await(1, of_set, Bounded(10s)).ok()); });
  EXPECT_TRUE(StillWaiting(set_batch));
  held->End();
  set_batch.get();
}

TEST(NcclOrder, AWaitThatTimesOutNamesWhatItWaitedFor) {
  NcclOrder order;
  const std::string g = "grad.7", s = "s";
  (void)order.Submitted(0, &g);
  std::vector<uint64_t> of_set{order.Submitted(3, &s)};
  Logger logger(LogLevel::kWarning, 0);
  ::testing::internal::CaptureStderr();
  Result<NcclOrder::Turn> t = order.Await(3, of_set, Bounded(700ms, &logger, 200ms));
  const std::string warned = ::testing::internal::GetCapturedStderr();
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kTimeout);
  const std::string m = t.status().message();
  EXPECT_NE(m.find("the global process set's 'grad.7'"), std::string::npos) << m;
  EXPECT_NE(m.find("one order on every rank"), std::string::npos) << m;
  EXPECT_NE(warned.find("rank 0: allreduce 'x' has waited"), std::string::npos) << warned;
  EXPECT_NE(warned.find("'grad.7'"), std::string::npos) << warned;
  // The failed batch holds nobody back: its set's next tensor, and the
  // global set's, have their turns.
  std::vector<uint64_t> global{1};
  EXPECT_TRUE(order.Await(0, global, Bounded(1s)).ok());
}

TEST(NcclOrder, CancelFailsAWaitingBatchButNotOneThatCanGo) {
  NcclOrder order;
  const std::string g = "g", s = "s", t = "t";
  (void)order.Submitted(0, &g);
  std::vector<uint64_t> of_set{order.Submitted(1, &s)};
  std::future<Status> waiting = std::async(std::launch::async, [&] {
    return order.Await(1, of_set, Bounded(Duration::zero())).status();  // (no timeout)
  });
  ASSERT_EQ(waiting.wait_for(100ms), std::future_status::timeout);
  order.Cancel(1);
  const Status st = waiting.get();
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
  order.Finished(0, 1);
  std::vector<uint64_t> next{order.Submitted(1, &t)};
  EXPECT_TRUE(order.Await(1, next, Bounded(1s)).ok());  // (nothing before it: it goes)
}

TEST(NcclOrder, AForgottenSetHoldsNobodyBack) {
  NcclOrder order;
  const std::string g = "g", s = "s";
  (void)order.Submitted(2, &g);
  std::vector<uint64_t> of_set{order.Submitted(1, &s)};
  std::future<void> set_batch = std::async(
      std::launch::async, [&] { EXPECT_TRUE(order.Await(1, of_set, Bounded(10s)).ok()); });
  EXPECT_TRUE(StillWaiting(set_batch));
  order.Forget(2);
  set_batch.get();
}

// The GPU's side: a turn gets the mark the last turn left where that was
// another set's (its own set's stream keeps the order by itself), and a
// mark outlives a set that is forgotten.
TEST(NcclOrder, ATurnGetsTheMarkOfTheLastTurnOfAnotherSet) {
  struct Named final : NcclOrder::Mark {
    explicit Named(std::string n) : name(std::move(n)) {}
    std::string name;
  };
  auto name_of = [](const NcclOrder::Turn& t) {
    const auto* m = dynamic_cast<const Named*>(t.previous().get());
    return m == nullptr ? std::string("none") : m->name;
  };
  NcclOrder order;
  const std::string x = "x";
  std::list<std::vector<uint64_t>> batches;  // (a turn holds its batch's numbers)
  auto turn = [&](int set) {
    const std::vector<uint64_t>& batch = batches.emplace_back(1, order.Submitted(set, &x));
    Result<NcclOrder::Turn> t = order.Await(set, batch, Bounded(1s));
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? std::move(*t) : NcclOrder::Turn();
  };
  {
    NcclOrder::Turn a = turn(1);
    EXPECT_TRUE(a.held());
    EXPECT_EQ(name_of(a), "none");
    a.Leave(std::make_shared<Named>("a1"));
  }
  {
    NcclOrder::Turn a = turn(1);  // (the same set: none)
    EXPECT_EQ(name_of(a), "none");
    a.Leave(std::make_shared<Named>("a2"));
  }
  {
    NcclOrder::Turn b = turn(2);
    NcclOrder::Turn moved = std::move(b);
    EXPECT_FALSE(b.held());  // NOLINT(bugprone-use-after-move): a moved-from turn is empty
    EXPECT_EQ(name_of(moved), "a2");
    moved.Leave(std::make_shared<Named>("b1"));
  }
  {
    NcclOrder::Turn a = turn(1);
    EXPECT_EQ(name_of(a), "b1");
    // (No mark left: the next turn of another set gets b1's still.)
  }
  order.Forget(2);
  NcclOrder::Turn c = turn(3);
  EXPECT_EQ(name_of(c), "b1");
  EXPECT_FALSE(NcclOrder::Turn().held());
}

}  // namespace
}  // namespace hora
