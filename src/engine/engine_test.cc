// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The engine with ranks as threads: shuffled submission orders, the
// response cache (hits, steady state without the coordinator, invalidation
// by shape or reduction, eviction, capacity 0), fusion with scale factors, mismatches that fail one
// tensor on every rank while others go on, stalls, duplicate names.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "common/clock.h"
#include "support/reference.h"
#include "support/thread_ranks.h"

namespace hora {
namespace {

using testing::CompareFilledAllreduce;
using testing::ExpectAllOk;
using testing::FillInput;
using testing::TestSettings;
using testing::ThreadRanks;

constexpr auto kWait = std::chrono::seconds(60);

struct Named {
  std::string name;
  DataType dtype;
  size_t count;
};

std::vector<Named> Model(int tensors, size_t base) {
  const DataType types[] = {DataType::kFloat32, DataType::kInt32, DataType::kBFloat16,
                            DataType::kFloat64};
  std::vector<Named> m;
  for (int i = 0; i < tensors; ++i) {
    m.push_back({"layer" + std::to_string(i), types[i % 4], base + static_cast<size_t>(i * 7)});
  }
  return m;
}

// Every rank submits `model` in its own shuffled order, waits, and checks
// each result against the reference. Runs `steps` times.
std::vector<Status> RunSteps(ThreadRanks& ranks, const std::vector<Named>& model, int steps,
                             const Reduction& red) {
  const int n = ranks.size();
  return ranks.Run([&](int rank, Session& s) -> Status {
    std::mt19937 rng(static_cast<uint32_t>(rank * 7919 + 1));
    for (int step = 0; step < steps; ++step) {
      std::vector<size_t> order(model.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<std::vector<uint8_t>> bufs(model.size());
      std::vector<Handle> handles(model.size());
      for (size_t i : order) {
        const Named& t = model[i];
        bufs[i].resize(t.count * DataTypeSize(t.dtype));
        FillInput(t.dtype, red.op, bufs[i].data(), t.count, 1000 * step + i, rank);
        TensorView v = TensorView::Flat(bufs[i].data(), t.dtype, t.count);
        handles[i] = s.AllreduceAsync(t.name, v, v, red);
      }
      for (size_t i = 0; i < model.size(); ++i) {
        HORA_RETURN_IF_ERROR(handles[i].Wait(kWait));
        const Named& t = model[i];
        const std::string diff =
            CompareFilledAllreduce(n, t.dtype, red, 1000 * step + i, bufs[i].data(), t.count);
        if (!diff.empty()) {
          return InternalError("step " + std::to_string(step) + " " + t.name + ": " + diff);
        }
      }
    }
    return Status::Ok();
  });
}

class EngineWorlds : public ::testing::TestWithParam<int> {};

TEST_P(EngineWorlds, ShuffledSubmissionsMatchTheReference) {
  ThreadRanks ranks(GetParam(), TestSettings());
  ExpectAllOk(RunSteps(ranks, Model(12, 1), 3, {ReduceOp::kSum}));
  ExpectAllOk(RunSteps(ranks, Model(5, 1031), 2, {ReduceOp::kAverage, 0.5, 3.0}));
  ExpectAllOk(RunSteps(ranks, Model(4, 0), 1, {ReduceOp::kMax}));
}

TEST_P(EngineWorlds, SteadyStateNeedsNoCoordinator) {
  ThreadRanks ranks(GetParam(), TestSettings());
  const auto model = Model(20, 3);
  ExpectAllOk(RunSteps(ranks, model, 2, {ReduceOp::kSum}));  // warm the cache
  std::vector<Session::EngineCounters> before;
  for (int r = 0; r < ranks.size(); ++r) before.push_back(ranks.session(r).engine_counters());
  ExpectAllOk(RunSteps(ranks, model, 5, {ReduceOp::kSum}));
  for (int r = 0; r < ranks.size(); ++r) {
    const auto after = ranks.session(r).engine_counters();
    EXPECT_EQ(after.slow_cycles, before[r].slow_cycles) << "rank " << r;
    EXPECT_EQ(after.coordinator_bytes, before[r].coordinator_bytes) << "rank " << r;
    EXPECT_EQ(after.cache_hits - before[r].cache_hits, 5u * model.size()) << "rank " << r;
    EXPECT_EQ(after.cache_misses, before[r].cache_misses) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, EngineWorlds, ::testing::Values(1, 2, 3, 4, 5));

TEST(Engine, WithoutTheCacheEveryStepAsksTheCoordinator) {
  ThreadRanks ranks(3, TestSettings({{"HORA_CACHE_CAPACITY", "0"}}));
  const auto model = Model(6, 5);
  ExpectAllOk(RunSteps(ranks, model, 4, {ReduceOp::kSum}));
  for (int r = 0; r < 3; ++r) {
    const auto c = ranks.session(r).engine_counters();
    EXPECT_EQ(c.cache_hits, 0u);
    EXPECT_EQ(c.cache_misses, 4u * model.size());
    EXPECT_GE(c.slow_cycles, 4u);
    EXPECT_GT(c.coordinator_bytes, 0u);
  }
}

TEST(Engine, EvictionKeepsCachesIdentical) {
  // Three tensors through a cache of two: each step evicts; results stay right.
  ThreadRanks ranks(3, TestSettings({{"HORA_CACHE_CAPACITY", "2"}}));
  ExpectAllOk(RunSteps(ranks, Model(3, 9), 4, {ReduceOp::kSum}));
  for (int r = 0; r < 3; ++r) EXPECT_GT(ranks.session(r).engine_counters().cache_evictions, 0u);
}

TEST(Engine, ChangedParametersInvalidateTheEntryEverywhere) {
  ThreadRanks ranks(3, TestSettings());
  ExpectAllOk(RunSteps(ranks, {{"w", DataType::kFloat32, 16}}, 2, {ReduceOp::kSum}));
  // Same name, new size, on every rank: the cached entry is dropped and renegotiated.
  ExpectAllOk(RunSteps(ranks, {{"w", DataType::kFloat32, 40}}, 2, {ReduceOp::kSum}));
  for (int r = 0; r < 3; ++r) {
    const auto c = ranks.session(r).engine_counters();
    EXPECT_EQ(c.cache_invalidations, 1u) << "rank " << r;
    EXPECT_EQ(c.cache_hits, 2u) << "rank " << r;  // the second step of each size
  }
}

TEST(Engine, ChangedReductionWithTheSameShapeIsNoCacheHit) {
  // A name's tensor asks what the last one asked, but for its reduction: a
  // hit would run it with the cached (old) reduction.
  ThreadRanks ranks(3, TestSettings());
  const std::vector<Named> model = {{"g", DataType::kFloat32, 24}};
  ExpectAllOk(RunSteps(ranks, model, 2, {ReduceOp::kSum}));
  ExpectAllOk(RunSteps(ranks, model, 2, {ReduceOp::kMax}));
  ExpectAllOk(RunSteps(ranks, model, 2, {ReduceOp::kSum, 2.0, 1.0}));
  ExpectAllOk(RunSteps(ranks, model, 2, {ReduceOp::kSum, 2.0, 0.5}));
  for (int r = 0; r < 3; ++r) {
    const auto c = ranks.session(r).engine_counters();
    EXPECT_EQ(c.cache_invalidations, 3u) << "rank " << r;
    EXPECT_EQ(c.cache_hits, 4u) << "rank " << r;  // the second step of each
  }
}

TEST(Engine, MismatchFailsThatTensorOnEveryRankAndOthersGoOn) {
  ThreadRanks ranks(3, TestSettings());
  auto st = ranks.Run([&](int rank, Session& s) -> Status {
    std::vector<float> x(rank == 1 ? 5 : 4, 1.0f), y(8, 1.0f);
    Handle hx = s.AllreduceAsync("x", TensorView::Flat(x.data(), DataType::kFloat32, x.size()),
                                 TensorView::Flat(x.data(), DataType::kFloat32, x.size()));
    Handle hy = s.AllreduceAsync("y", TensorView::Flat(y.data(), DataType::kFloat32, 8),
                                 TensorView::Flat(y.data(), DataType::kFloat32, 8));
    HORA_RETURN_IF_ERROR(hy.Wait(kWait));
    if (y[0] != 3.0f) return InternalError("y not reduced");
    Status sx = hx.Wait(kWait);
    if (sx.code() != StatusCode::kMismatch) return InternalError("x: " + sx.ToString());
    for (const char* part : {"'x'", "rank 0 float32[4] sum", "rank 1 float32[5] sum",
                             "rank 2 float32[4] sum", "disagree"}) {
      if (sx.message().find(part) == std::string::npos) {
        return InternalError("message lacks '" + std::string(part) + "': " + sx.message());
      }
    }
    // The engine goes on: the name is free again and works when ranks agree.
    std::vector<float> z(4, 2.0f);
    Handle again = s.AllreduceAsync("x", TensorView::Flat(z.data(), DataType::kFloat32, 4),
                                    TensorView::Flat(z.data(), DataType::kFloat32, 4));
    HORA_RETURN_IF_ERROR(again.Wait(kWait));
    return z[0] == 6.0f ? Status::Ok() : InternalError("x after the mismatch");
  });
  ExpectAllOk(st);
}

TEST(Engine, OpMismatchNamesBothOps) {
  ThreadRanks ranks(2, TestSettings());
  auto st = ranks.Run([&](int rank, Session& s) -> Status {
    std::vector<float> x(4, 1.0f);
    TensorView v = TensorView::Flat(x.data(), DataType::kFloat32, 4);
    Handle h = rank == 0 ? s.AllreduceAsync("t", v, v) : s.BroadcastAsync("t", v, 0);
    Status st = h.Wait(kWait);
    // Both ops, each with its rank ("allreduce 't': ranks disagree: rank 0
    // float32[4] sum; rank 1 broadcast float32[4] root 0").
    const std::string& m = st.message();
    if (st.code() != StatusCode::kMismatch || m.find("allreduce 't'") == std::string::npos ||
        m.find("rank 0 float32[4] sum") == std::string::npos ||
        m.find("rank 1 broadcast float32[4] root 0") == std::string::npos)
      return InternalError(st.ToString());
    return Status::Ok();
  });
  ExpectAllOk(st);
}

TEST(Engine, FusionPacksSmallTensorsWithScaleFactors) {
  ThreadRanks ranks(4, TestSettings({{"HORA_FUSION_THRESHOLD_BYTES", "1M"}}));
  std::vector<Named> model;
  for (int i = 0; i < 40; ++i) model.push_back({"g" + std::to_string(i), DataType::kFloat32, 33});
  ExpectAllOk(RunSteps(ranks, model, 3, {ReduceOp::kAverage, 2.0, 0.25}));
  // Element sizes 1, 2 and 8 too, each kind's batch one small window chunk
  // of many tensors (reduced whole, then copied out).
  std::vector<Named> mixed;
  const DataType types[] = {DataType::kInt8, DataType::kFloat16, DataType::kUInt8, DataType::kInt64,
                            DataType::kBFloat16};
  for (int i = 0; i < 30; ++i)
    mixed.push_back({"m" + std::to_string(i), types[i % 5], static_cast<size_t>(1 + i % 7)});
  ExpectAllOk(RunSteps(ranks, mixed, 2, {ReduceOp::kSum}));
  ExpectAllOk(RunSteps(ranks, mixed, 2, {ReduceOp::kMax}));
  uint64_t fused = 0;
  for (int r = 0; r < 4; ++r) fused += ranks.session(r).engine_counters().fused_batches;
  EXPECT_GT(fused, 0u);
}

TEST(Engine, BroadcastAndBarrier) {
  ThreadRanks ranks(3, TestSettings());
  auto st = ranks.Run([&](int rank, Session& s) -> Status {
    std::vector<int64_t> b(1000, rank);
    Handle h = s.BroadcastAsync("b", TensorView::Flat(b.data(), DataType::kInt64, b.size()), 2);
    HORA_RETURN_IF_ERROR(h.Wait(kWait));
    if (!std::all_of(b.begin(), b.end(), [](int64_t v) { return v == 2; }))
      return InternalError("broadcast values");
    return s.BarrierAsync().Wait(kWait);
  });
  ExpectAllOk(st);
}

TEST(Engine, DuplicateInFlightNameIsAnError) {
  ThreadRanks ranks(2, TestSettings());
  auto st = ranks.Run([&](int rank, Session& s) -> Status {
    std::vector<float> a(4, 1.0f), b(4, 1.0f);
    TensorView va = TensorView::Flat(a.data(), DataType::kFloat32, 4);
    TensorView vb = TensorView::Flat(b.data(), DataType::kFloat32, 4);
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    Handle h1 = s.AllreduceAsync("d", va, va);
    Handle h2 = s.AllreduceAsync("d", vb, vb);
    Status s2 = h2.Wait(kWait);
    HORA_RETURN_IF_ERROR(h1.Wait(kWait));
    if (s2.ok() || s2.message().find("already in flight") == std::string::npos)
      return InternalError("second 'd': " + s2.ToString());
    return Status::Ok();
  });
  ExpectAllOk(st);
}

// The engine keeps a record per name for the next tensor of that name:
// a name comes back with other shapes and values, and a group refused for a
// clash releases the names it had claimed.
TEST(Engine, NamesAreReusedAndARefusedGroupReleasesItsNames) {
  ThreadRanks ranks(2, TestSettings());
  auto st = ranks.Run([&](int rank, Session& s) -> Status {
    for (int step = 0; step < 6; ++step) {
      const size_t n = step < 3 ? 3 : 3 + static_cast<size_t>(step) * 5;
      std::vector<float> x(n, static_cast<float>(rank + step));
      TensorView v = TensorView::Flat(x.data(), DataType::kFloat32, n);
      HORA_RETURN_IF_ERROR(s.AllreduceAsync("r", v, v).Wait(kWait));
      for (float got : x) {
        if (got != static_cast<float>(1 + 2 * step))
          return InternalError("step " + std::to_string(step) + ": " + std::to_string(got));
      }
    }
    std::vector<float> a(4, 1.0f), b(4, 2.0f), c(4, 3.0f);
    std::vector<TensorView> group = {TensorView::Flat(a.data(), DataType::kFloat32, 4),
                                     TensorView::Flat(b.data(), DataType::kFloat32, 4)};
    Handle lone = s.AllreduceAsync("g.1", TensorView::Flat(c.data(), DataType::kFloat32, 4),
                                   TensorView::Flat(c.data(), DataType::kFloat32, 4));
    std::vector<Handle> refused = s.GroupedAllreduceAsync("g", group, group);
    for (Handle& h : refused) {
      Status r = h.Wait(kWait);
      if (r.ok() || r.message().find("'g.1' is already in flight") == std::string::npos)
        return InternalError("refused group: " + r.ToString());
    }
    HORA_RETURN_IF_ERROR(lone.Wait(kWait));
    for (Handle& h : s.GroupedAllreduceAsync("g", group, group))
      HORA_RETURN_IF_ERROR(h.Wait(kWait));
    if (a[0] != 2.0f || b[3] != 4.0f || c[1] != 6.0f) return InternalError("group values");
    return Status::Ok();
  });
  ExpectAllOk(st);
}

// Records of finished names are kept for their next tensors, but no more
// than 4096 of them (the cache's capacity here is below that), and none for
// unnamed tensors, whose generated names never come back.
TEST(Engine, NameRecordsStayBounded) {
  ThreadRanks ranks(2, TestSettings());
  auto st = ranks.Run([&](int rank, Session& s) -> Status {
    float x = 0;
    TensorView v = TensorView::Flat(&x, DataType::kFloat32, 1);
    auto check = [&](uint64_t lo, uint64_t hi, const char* when) -> Status {
      const uint64_t n = s.engine_counters().name_records;
      if (n < lo || n > hi)
        return InternalError(std::string(when) + ": " + std::to_string(n) + " name records");
      return Status::Ok();
    };
    for (int i = 0; i < 4300; ++i) {
      x = static_cast<float>(rank + i);
      HORA_RETURN_IF_ERROR(s.AllreduceAsync("e" + std::to_string(i), v, v).Wait(kWait));
      if (x != static_cast<float>(1 + 2 * i)) return InternalError("e" + std::to_string(i));
    }
    HORA_RETURN_IF_ERROR(check(4096, 4096, "after 4300 names"));
    for (int i = 0; i < 50; ++i) HORA_RETURN_IF_ERROR(s.AllreduceAsync("", v, v).Wait(kWait));
    HORA_RETURN_IF_ERROR(check(4096, 4096, "after 50 unnamed"));
    // The oldest names were dropped; they come back as new ones.
    x = 1.0f;
    HORA_RETURN_IF_ERROR(s.AllreduceAsync("e0", v, v).Wait(kWait));
    if (x != 2.0f) return InternalError("e0 again");
    return check(4096, 4096, "after e0 again");
  });
  ExpectAllOk(st);
}

// The response cache knows tensors by name: an unnamed tensor's generated
// name never comes back, so each one goes through the coordinator (a slow
// cycle), where a name that comes back is a cache hit (docs/guide/tuning.md).
TEST(Engine, UnnamedTensorsGoThroughTheCoordinatorEveryTime) {
  ThreadRanks ranks(2, TestSettings());
  ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
    float x = 0;
    TensorView v = TensorView::Flat(&x, DataType::kFloat32, 1);
    for (const std::string name : {"", "named"}) {
      const Session::EngineCounters before = s.engine_counters();
      for (int i = 0; i < 20; ++i) {
        x = static_cast<float>(rank + i);
        HORA_RETURN_IF_ERROR(s.AllreduceAsync(name, v, v).Wait(kWait));
        if (x != static_cast<float>(1 + 2 * i)) return InternalError("'" + name + "' values");
      }
      const Session::EngineCounters after = s.engine_counters();
      const uint64_t hits = after.cache_hits - before.cache_hits;
      const uint64_t slow = after.slow_cycles - before.slow_cycles;
      if (name.empty() ? (hits != 0 || slow < 20) : (hits < 19 || slow > 2)) {
        return InternalError("'" + name + "': " + std::to_string(hits) + " cache hits, " +
                             std::to_string(slow) + " slow cycles for 20 allreduces");
      }
    }
    return Status::Ok();
  }));
}

// Rank 1 never submits 'late': it must still join the others' cycles (an
// idle engine, IdleBackoff::JoinDue) for the stall report to name it. Also with a
// cache so large that its bit vector does not fit the shared window (the
// AND then goes point to point, and the window says nothing of who waits),
// and once 'late' is in the response cache (`cached`: every rank ran it
// before; the bit-vector AND alone cannot tell who lacks it, so a tensor
// that waits goes back to the coordinator, saying how long it waited).
void StallReportNamesTheMissingRank(const std::string& cache_capacity, bool cached) {
  ThreadRanks ranks(3, TestSettings({{"HORA_STALL_WARNING_S", "0.4"},
                                     {"HORA_STALL_SHUTDOWN_S", "1.5"},
                                     {"HORA_CACHE_CAPACITY", cache_capacity},
                                     {"HORA_LOG_LEVEL", "warning"}}));
  ::testing::internal::CaptureStderr();
  auto st = ranks.Run([&](int rank, Session& s) -> Status {
    std::vector<float> x(4, 1.0f);
    TensorView v = TensorView::Flat(x.data(), DataType::kFloat32, 4);
    for (int step = 0; cached && step < 3; ++step) {
      HORA_RETURN_IF_ERROR(s.AllreduceAsync("late", v, v).Wait(kWait));
    }
    HORA_RETURN_IF_ERROR(s.BarrierAsync().Wait(kWait));
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(3));
      return Status::Ok();
    }
    const TimePoint start = Clock::now();
    Status late = s.AllreduceAsync("late", v, v).Wait(kWait);
    const double secs = DurationToSeconds(Clock::now() - start);
    if (late.code() != StatusCode::kTimeout) return InternalError("late: " + late.ToString());
    if (late.message().find("stalled (HORA_STALL_SHUTDOWN_S): allreduce 'late' has waited") ==
            std::string::npos ||
        late.message().find("for rank 1 (submitted by ranks 0, 2)") == std::string::npos) {
      return InternalError("late: " + late.message());
    }
    // Failed at the shutdown time, counted from its submission.
    if (secs < 1.4 || secs > 2.9) return InternalError("late failed after " + std::to_string(secs));
    return Status::Ok();
  });
  const std::string err = ::testing::internal::GetCapturedStderr();
  ExpectAllOk(st);
  EXPECT_NE(err.find("stall: allreduce 'late' has waited"), std::string::npos) << err;
  EXPECT_NE(err.find("for rank 1 (submitted by ranks 0, 2)"), std::string::npos) << err;
  EXPECT_EQ(err.find("stall: barrier"), std::string::npos) << err;
}

TEST(Engine, StallReportNamesTheMissingRankAndShutdownFailsIt) {
  StallReportNamesTheMissingRank("1024", false);
}

TEST(Engine, StallReportNamesTheMissingRankWithABitVectorOffTheWindow) {
  StallReportNamesTheMissingRank("200000", false);  // 6,251 words: more than half of 64 KiB
}

TEST(Engine, StallReportNamesTheMissingRankOfACachedTensor) {
  StallReportNamesTheMissingRank("1024", true);
}

// A rank busy elsewhere (loading data) for longer than any default bound is
// slow, not lost: the others wait for it, by default with no timeout, and
// a stall report names the operation and the rank. Its engine runs from
// the start: it negotiates while its user code is busy.
TEST(Engine, ASlowRankIsWaitedForAndReported) {
  ThreadRanks ranks(2, TestSettings({{"HORA_STALL_WARNING_S", "0.3"},
                                     {"HORA_TIMEOUT_S", "0"},
                                     {"HORA_LOG_LEVEL", "warning"}}));
  ::testing::internal::CaptureStderr();
  auto st = ranks.Run([&](int rank, Session& s) -> Status {
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    return s.BarrierAsync().Wait(kWait);
  });
  const std::string err = ::testing::internal::GetCapturedStderr();
  ExpectAllOk(st);
  EXPECT_NE(err.find("stall: barrier has waited"), std::string::npos) << err;
  EXPECT_NE(err.find("for rank 0 (submitted by rank 1)"), std::string::npos) << err;
}

// HORA_TIMEOUT_S, when a user sets it, fails a collective that waits that
// long for a rank, naming the setting, the tensor and the rank.
TEST(Engine, CollectiveTimeoutFailsAWaitingTensor) {
  ThreadRanks ranks(2, TestSettings({{"HORA_TIMEOUT_S", "0.5"}, {"HORA_STALL_WARNING_S", "0"}}));
  auto st = ranks.Run([&](int rank, Session& s) -> Status {
    std::vector<float> x(4, 1.0f);
    TensorView v = TensorView::Flat(x.data(), DataType::kFloat32, 4);
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      return Status::Ok();
    }
    Status late = s.AllreduceAsync("w", v, v).Wait(kWait);
    if (late.code() != StatusCode::kTimeout ||
        late.message().find("timed out (HORA_TIMEOUT_S): allreduce 'w' has waited") ==
            std::string::npos ||
        late.message().find("for rank 1") == std::string::npos) {
      return InternalError("w: " + late.ToString());
    }
    return Status::Ok();
  });
  ExpectAllOk(st);
}

// Rank 1 submits the group late: on rank 0 no member finishes before it
// does, and then all finish, with the right values, also from the cache.
TEST(Engine, GroupRunsOnlyWhenWholeEverywhere) {
  ThreadRanks ranks(3, TestSettings());
  auto st = ranks.Run([&](int rank, Session& s) -> Status {
    for (int step = 0; step < 3; ++step) {
      std::vector<std::vector<float>> bufs = {std::vector<float>(5, rank + 1.0f),
                                              std::vector<float>(700, 2.0f * rank),
                                              std::vector<float>(1, 1.0f)};
      std::vector<TensorView> views;
      for (auto& b : bufs)
        views.push_back(TensorView::Flat(b.data(), DataType::kFloat32, b.size()));
      if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::vector<Handle> hs = s.GroupedAllreduceAsync("grp", views, views);
      if (hs.size() != 3) return InternalError("3 handles expected");
      if (rank == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        for (auto& h : hs)
          if (h.Poll()) return InternalError("a member finished before rank 1 submitted");
      }
      for (auto& h : hs) HORA_RETURN_IF_ERROR(h.Wait(kWait));
      if (bufs[0][4] != 6.0f || bufs[1][699] != 6.0f || bufs[2][0] != 3.0f)
        return InternalError("group values");
    }
    const auto c = s.engine_counters();
    if (c.cache_hits != 6) return InternalError("hits " + std::to_string(c.cache_hits));
    return Status::Ok();
  });
  ExpectAllOk(st);
}

// Bad input on every rank: each rank's handle fails with its own error
// once every rank has submitted the call (a call one rank alone refuses:
// Failure.ACallOneRankRefusesFailsOnEveryRankAndLaterCallsLineUp).
TEST(Engine, BadInputFailsTheHandleWithTheRanksOwnError) {
  ThreadRanks ranks(2, TestSettings());
  ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
    std::vector<float> x(4);
    std::vector<double> y(4);
    Status e = s.AllreduceAsync("m", TensorView::Flat(x.data(), DataType::kFloat32, 4),
                                TensorView::Flat(y.data(), DataType::kFloat64, 4))
                   .Wait(kWait);
    EXPECT_EQ(e.code(), StatusCode::kInvalidArgument) << e.ToString();
    EXPECT_NE(e.message().find("rank " + std::to_string(rank) + ": allreduce 'm': output"),
              std::string::npos)
        << e.ToString();
    Status b =
        s.BroadcastAsync("r", TensorView::Flat(x.data(), DataType::kFloat32, 4), 5).Wait(kWait);
    EXPECT_NE(b.message().find("root rank 5 is outside [0, 2)"), std::string::npos) << b.ToString();
    return Status::Ok();
  }));
}

}  // namespace
}  // namespace hora
