// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Waiters that run the engine's cycles themselves (Engine::Drive): results
// still match the reference, with one and with several waiting threads per
// rank; waiters do drive (counted) unless spinning is off; work no thread
// waits on still runs after waiters drove; idle engines on one host do not
// cycle while no rank waits, and look less often the longer they idle, yet
// work submitted ahead of its wait still starts within a cycle time; a waiter inside the engine
// when its session goes gets an error, not a hang or a crash.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "support/reference.h"
#include "support/thread_ranks.h"

namespace hora {
namespace {

using testing::Compare;
using testing::ExpectAllOk;
using testing::FillInput;
using testing::ReferenceAllreduce;
using testing::TestSettings;
using testing::ThreadRanks;

constexpr auto kWait = std::chrono::seconds(60);

// One allreduce of `count` floats named `name`, seeded by `seed`, submitted
// and waited for at once; the result is checked against the reference.
Status ReduceAndCheck(Session& s, int rank, int size, const std::string& name, size_t count,
                      uint64_t seed) {
  const Reduction red{ReduceOp::kSum};
  std::vector<float> x(count);
  FillInput(DataType::kFloat32, red.op, x.data(), count, seed, rank);
  TensorView v = TensorView::Flat(x.data(), DataType::kFloat32, count);
  HORA_RETURN_IF_ERROR(s.AllreduceAsync(name, v, v, red).Wait(kWait));
  std::vector<std::vector<float>> in(static_cast<size_t>(size), std::vector<float>(count));
  std::vector<const void*> ptrs;
  for (int r = 0; r < size; ++r) {
    FillInput(DataType::kFloat32, red.op, in[static_cast<size_t>(r)].data(), count, seed, r);
    ptrs.push_back(in[static_cast<size_t>(r)].data());
  }
  const std::string diff =
      Compare(ReferenceAllreduce(DataType::kFloat32, red, ptrs, count), x.data(), 0, count);
  if (!diff.empty()) return InternalError(name + " (seed " + std::to_string(seed) + "): " + diff);
  return Status::Ok();
}

// Every rank: `steps` times, submit one tensor and wait for it at once.
std::vector<Status> PingPong(ThreadRanks& ranks, int steps) {
  return ranks.Run([&](int rank, Session& s) -> Status {
    for (int step = 0; step < steps; ++step) {
      const size_t count = step % 3 == 0 ? 1 : static_cast<size_t>(1 + step * 37 % 2000);
      HORA_RETURN_IF_ERROR(
          ReduceAndCheck(s, rank, ranks.size(), "t", count, static_cast<uint64_t>(step)));
    }
    return Status::Ok();
  });
}

TEST(EngineDrive, WaitersRunTheCyclesAndResultsMatch) {
  for (int n : {1, 2, 3}) {
    ThreadRanks ranks(n, TestSettings({{"HORA_WAIT_SPIN_US", "200"}}));
    ExpectAllOk(PingPong(ranks, 200));
    for (int r = 0; r < n; ++r) {
      const auto c = ranks.session(r).engine_counters();
      EXPECT_EQ(c.tensors, 200u) << "world " << n << " rank " << r;
      // A waiter spinning on its handle runs the cycle unless the engine's
      // thread is in one; over 200 waits some do.
      EXPECT_GT(c.driven_cycles, 0u) << "world " << n << " rank " << r;
      EXPECT_LE(c.driven_cycles, c.cycles) << "world " << n << " rank " << r;
    }
  }
}

TEST(EngineDrive, WithoutSpinningOnlyTheEngineThreadCycles) {
  ThreadRanks ranks(2, TestSettings({{"HORA_WAIT_SPIN_US", "0"}}));
  ExpectAllOk(PingPong(ranks, 50));
  for (int r = 0; r < 2; ++r) {
    const auto c = ranks.session(r).engine_counters();
    EXPECT_EQ(c.tensors, 50u) << "rank " << r;
    EXPECT_EQ(c.driven_cycles, 0u) << "rank " << r;
  }
}

TEST(EngineDrive, SeveralWaitersPerRankShareTheCycles) {
  constexpr int kThreads = 4;
  constexpr int kSteps = 40;
  ThreadRanks ranks(3, TestSettings({{"HORA_WAIT_SPIN_US", "200"}}));
  ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
    std::vector<Status> results(kThreads);
    std::vector<std::thread> threads;
    for (int k = 0; k < kThreads; ++k) {
      threads.emplace_back([&, k] {
        for (int step = 0; step < kSteps && results[static_cast<size_t>(k)].ok(); ++step) {
          results[static_cast<size_t>(k)] =
              ReduceAndCheck(s, rank, ranks.size(), "w" + std::to_string(k),
                             static_cast<size_t>(1 + (k * 101 + step * 13) % 700),
                             static_cast<uint64_t>(k * 1000 + step));
        }
      });
    }
    for (auto& t : threads) t.join();
    for (const Status& st : results) HORA_RETURN_IF_ERROR(st);
    return Status::Ok();
  }));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(ranks.session(r).engine_counters().tensors, static_cast<uint64_t>(kThreads * kSteps))
        << "rank " << r;
  }
}

// After waiters drove the cycles, a submission no longer wakes the engine's
// thread (a waiter runs it), but work that no thread waits on still runs:
// the engine's thread takes it up a cycle time later. Polled, not waited.
TEST(EngineDrive, AfterWaitersDroveWorkNobodyWaitsOnStillRuns) {
  const int n = 3;
  ThreadRanks ranks(n, TestSettings({{"HORA_WAIT_SPIN_US", "200"}, {"HORA_CYCLE_TIME_MS", "2"}}));
  ExpectAllOk(PingPong(ranks, 20));  // waiters drive: submissions defer to them
  ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
    const size_t count = 333;
    const Reduction red{ReduceOp::kSum};
    std::vector<float> x(count);
    FillInput(DataType::kFloat32, red.op, x.data(), count, 7, rank);
    TensorView v = TensorView::Flat(x.data(), DataType::kFloat32, count);
    const uint64_t driven = s.engine_counters().driven_cycles;
    Handle h = s.AllreduceAsync("polled", v, v, red);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!h.Poll()) {
      if (std::chrono::steady_clock::now() > give_up) return InternalError("never ran");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    HORA_RETURN_IF_ERROR(h.status());
    if (s.engine_counters().driven_cycles != driven) {
      return InternalError("a cycle was driven, but no thread waited");
    }
    std::vector<std::vector<float>> in(n, std::vector<float>(count));
    std::vector<const void*> ptrs;
    for (int r = 0; r < n; ++r) {
      FillInput(DataType::kFloat32, red.op, in[static_cast<size_t>(r)].data(), count, 7, r);
      ptrs.push_back(in[static_cast<size_t>(r)].data());
    }
    const std::string diff =
        Compare(ReferenceAllreduce(DataType::kFloat32, red, ptrs, count), x.data(), 0, count);
    return diff.empty() ? Status::Ok() : InternalError("polled: " + diff);
  }));
  ExpectAllOk(PingPong(ranks, 5));  // and waiters drive again
}

// Rank 0 submitted "late" (5 ones, `x`, its handle `late`): the other
// ranks submit it too, and rank 0's handle completes with their sum.
void SubmitLateOnTheOthers(ThreadRanks& ranks, Handle& late, const std::vector<float>& x) {
  ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
    if (rank == 0) return late.Wait(kWait);
    std::vector<float> y(5, 1.0f);
    TensorView w = TensorView::Flat(y.data(), DataType::kFloat32, y.size());
    return s.AllreduceAsync("late", w, w).Wait(kWait);
  }));
  EXPECT_EQ(x, std::vector<float>(5, static_cast<float>(ranks.size())));
}

// On one host (a shared window), an idle engine joins the others only when
// one of them waits for it: with every rank idle, no cycles run at all
// (Horovod's engines cycle every cycle time). After the pause, work runs as
// before.
TEST(EngineDrive, IdleEnginesDoNotCycleWhileNoRankWaits) {
  const int n = 3;
  ThreadRanks ranks(n, TestSettings({{"HORA_CYCLE_TIME_MS", "1"}}));
  ExpectAllOk(PingPong(ranks, 10));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // (the last cycles end)
  std::vector<uint64_t> before;
  for (int r = 0; r < n; ++r) before.push_back(ranks.session(r).engine_counters().cycles);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // 100 cycle times
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(ranks.session(r).engine_counters().cycles, before[static_cast<size_t>(r)])
        << "rank " << r;
  }
  ExpectAllOk(PingPong(ranks, 10));
}

// An idle engine's looks come further apart while no rank waits for it (a
// look a cycle time apart would be 100 in 100 cycle times), and it still
// joins a rank that waits for it after a long idle spell.
TEST(EngineDrive, IdleWakeupsComeFurtherApartAndAWaitingRankIsStillJoined) {
  const int n = 3;
  ThreadRanks ranks(n, TestSettings({{"HORA_CYCLE_TIME_MS", "1"}}));
  ExpectAllOk(PingPong(ranks, 10));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::vector<Session::EngineCounters> before;
  for (int r = 0; r < n; ++r) before.push_back(ranks.session(r).engine_counters());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // 100 cycle times
  for (int r = 0; r < n; ++r) {
    const auto looks = ranks.session(r).engine_counters().idle_wakeups -
                       before[static_cast<size_t>(r)].idle_wakeups;
    EXPECT_GT(looks, 0u) << "rank " << r;
    EXPECT_LT(looks, 30u) << "rank " << r;
  }
  // Rank 0 waits in a cycle for ranks 1 and 2, which have nothing to do.
  std::vector<float> x(5, 1.0f);
  TensorView v = TensorView::Flat(x.data(), DataType::kFloat32, x.size());
  Handle late = ranks.session(0).AllreduceAsync("late", v, v);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  bool joined = false;
  while (!joined && std::chrono::steady_clock::now() < deadline) {
    joined = true;
    for (int r = 1; r < n; ++r) {
      joined = joined &&
               ranks.session(r).engine_counters().cycles > before[static_cast<size_t>(r)].cycles;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(joined);
  EXPECT_FALSE(late.Poll());  // (the others have not submitted it)
  SubmitLateOnTheOthers(ranks, late, x);
}

// Where nobody can tell who waits (the AND goes point to point, as across
// hosts: here a bit vector too large for the shared window), an idle engine
// joins a cycle at every look; the cycles in which no rank had tensors come
// further apart on every rank (100 in 100 cycle times before). While a rank's
// tensor waits for the others, their idle engines join every cycle time
// again (its stall reports need their cycles).
TEST(EngineDrive, IdleCyclesComeFurtherApartWhereNobodyCanTellWhoWaits) {
  const int n = 3;
  ThreadRanks ranks(n,
                    TestSettings({{"HORA_CYCLE_TIME_MS", "1"}, {"HORA_CACHE_CAPACITY", "200000"}}));
  ExpectAllOk(PingPong(ranks, 10));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // (backed off by now)
  auto cycles = [&] {
    std::vector<uint64_t> c;
    for (int r = 0; r < n; ++r) c.push_back(ranks.session(r).engine_counters().cycles);
    return c;
  };
  std::vector<uint64_t> before = cycles();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // 100 cycle times
  std::vector<uint64_t> after = cycles();
  for (size_t r = 0; r < n; ++r) {
    EXPECT_GT(after[r], before[r]) << "rank " << r << " stopped cycling";
    EXPECT_LT(after[r] - before[r], 30u) << "rank " << r;
  }
  // Rank 0's tensor waits for ranks 1 and 2: they cycle every cycle time
  // (backed off, at most 13 cycles in 200 ms).
  std::vector<float> x(5, 1.0f);
  TensorView v = TensorView::Flat(x.data(), DataType::kFloat32, x.size());
  Handle late = ranks.session(0).AllreduceAsync("late", v, v);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  before = cycles();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  after = cycles();
  for (size_t r = 1; r < n; ++r) EXPECT_GT(after[r] - before[r], 25u) << "rank " << r;
  EXPECT_FALSE(late.Poll());
  SubmitLateOnTheOthers(ranks, late, x);
  ExpectAllOk(PingPong(ranks, 5));
}

// Work submitted ahead of its wait (as a backward pass's) while waiters
// drive: once such work has gone a cycle time with no waiter, the engine's
// thread runs the next within about a cycle time of its submission, even
// when its idle looks have grown to 16 cycle times apart.
TEST(EngineDrive, WorkSubmittedAheadOfItsWaitStartsWithinACycleTime) {
  const int n = 3;
  ThreadRanks ranks(n, TestSettings({{"HORA_CYCLE_TIME_MS", "5"}}));
  for (int trial = 0; trial < 4; ++trial) {
    ExpectAllOk(PingPong(ranks, 5));                              // waiters drive
    std::this_thread::sleep_for(std::chrono::milliseconds(250));  // looks 80 ms apart
    std::vector<double> took_ms(n, 0.0);
    ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
      std::vector<float> x(7, 1.0f);
      TensorView v = TensorView::Flat(x.data(), DataType::kFloat32, x.size());
      const auto start = std::chrono::steady_clock::now();
      Handle h = s.AllreduceAsync("ahead", v, v);
      while (!h.Poll()) std::this_thread::sleep_for(std::chrono::microseconds(200));
      took_ms[static_cast<size_t>(rank)] =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      HORA_RETURN_IF_ERROR(h.status());
      if (x != std::vector<float>(7, static_cast<float>(n)))
        return InternalError("rank " + std::to_string(rank) + ": wrong sum");
      return Status::Ok();
    }));
    if (trial == 0) continue;  // (the first such work may wait for a look)
    for (int r = 0; r < n; ++r)
      EXPECT_LT(took_ms[static_cast<size_t>(r)], 45.0) << "trial " << trial << " rank " << r;
  }
}

// Rank 0 waits on a tensor no other rank submits (driving idle cycles while
// it spins) when every session is destroyed: the wait ends with the
// engine's stop error, well before its own timeout.
TEST(EngineDrive, WaiterWhenTheSessionGoesGetsAnError) {
  auto ranks = std::make_unique<ThreadRanks>(2, TestSettings({{"HORA_WAIT_SPIN_US", "100000"}}));
  ExpectAllOk(ranks->Run([&](int, Session& s) { return s.BarrierAsync().Wait(kWait); }));
  std::vector<float> x(4, 1.0f);
  TensorView v = TensorView::Flat(x.data(), DataType::kFloat32, 4);
  Handle lonely = ranks->session(0).AllreduceAsync("lonely", v, v);
  std::atomic<bool> waiting{false};
  Status got;
  std::chrono::steady_clock::duration took{};
  std::thread waiter([&] {
    waiting = true;
    const auto start = std::chrono::steady_clock::now();
    got = lonely.Wait(kWait);
    took = std::chrono::steady_clock::now() - start;
  });
  while (!waiting) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let it drive a while
  ranks.reset();
  waiter.join();
  EXPECT_FALSE(got.ok());
  EXPECT_NE(got.code(), StatusCode::kTimeout) << got.ToString();
  EXPECT_LT(took, std::chrono::seconds(30)) << got.ToString();
}

}  // namespace
}  // namespace hora
