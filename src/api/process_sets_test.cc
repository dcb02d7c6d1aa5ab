// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Process sets, ranks as threads: sets added collectively, collectives on
// disjoint and overlapping sets running at once with the global set (each
// set with its own engine and cache), results checked against sums computed
// here, on the sets' own shared windows; errors that name the lists, the
// set and the rank; ids and context slots reused after removal.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <thread>

#include "support/thread_ranks.h"

namespace hora {
namespace {

using testing::ExpectAllOk;
using testing::TestSettings;
using testing::ThreadRanks;

constexpr auto kWait = std::chrono::seconds(60);

Status Expect(bool ok, const std::string& what) { return ok ? Status::Ok() : InternalError(what); }

double Value(int rank, int step, int i) { return rank * 1000.0 + step * 10.0 + i; }

// Every rank in its parity set (evens, odds) and the global set at once:
// allreduce, allgather (dim 0 differs), broadcast (root: the set's last
// rank, a session rank), alltoall and reducescatter, over several steps.
TEST(ProcessSets, ParitySetsRunAtOnceWithTheGlobalSet) {
  for (int n : {2, 3, 5}) {
    SCOPED_TRACE("world " + std::to_string(n));
    ThreadRanks ranks(n, TestSettings());
    ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
      std::vector<int> evens, odds;
      for (int r = 0; r < n; ++r) (r % 2 ? odds : evens).push_back(r);
      HORA_ASSIGN_OR_RETURN(int even_id, s.AddProcessSet(evens));
      HORA_ASSIGN_OR_RETURN(int odd_id, odds.empty() ? Result<int>(-1) : s.AddProcessSet(odds));
      const std::vector<int>& mine = rank % 2 ? odds : evens;
      const int set = rank % 2 ? odd_id : even_id;
      const int set_rank =
          static_cast<int>(std::find(mine.begin(), mine.end(), rank) - mine.begin());
      const int m = static_cast<int>(mine.size());
      for (int step = 0; step < 4; ++step) {
        const std::string tag = " step " + std::to_string(step);
        std::vector<double> in(7), local(7), global(7);
        for (int i = 0; i < 7; ++i) in[i] = global[i] = Value(rank, step, i);
        auto flat = [](std::vector<double>& v) {
          return TensorView::Flat(v.data(), DataType::kFloat64, v.size());
        };
        // Same names in every set: names are per set.
        Handle a = s.AllreduceAsync("grad", flat(in), flat(local), {ReduceOp::kSum}, set);
        Handle g = s.AllreduceAsync("grad", flat(global), flat(global), {ReduceOp::kSum});
        std::vector<int32_t> rows(static_cast<size_t>(rank + 1) * 2, rank);
        Handle ag =
            s.AllgatherAsync("rows", TensorView(rows.data(), DataType::kInt32, {rank + 1, 2}), set);
        std::vector<int64_t> b(3, rank);
        Handle bc = s.BroadcastAsync("b", TensorView::Flat(b.data(), DataType::kInt64, 3),
                                     mine.back(), set);
        // Alltoall: set rank p receives p+1 rows from each member.
        std::vector<int64_t> splits(static_cast<size_t>(m));
        std::iota(splits.begin(), splits.end(), 1);
        std::vector<float> a2a(static_cast<size_t>(m * (m + 1) / 2), static_cast<float>(rank));
        Handle aa = s.AlltoallAsync(
            "a2a", TensorView::Flat(a2a.data(), DataType::kFloat32, a2a.size()), splits, set);
        std::vector<float> rs(static_cast<size_t>(2 * m), static_cast<float>(rank + step));
        Handle hr =
            s.ReducescatterAsync("rs", TensorView::Flat(rs.data(), DataType::kFloat32, rs.size()),
                                 {ReduceOp::kSum}, set);
        for (Handle* h : {&a, &g, &ag, &bc, &aa, &hr}) HORA_RETURN_IF_ERROR(h->Wait(kWait));
        for (int i = 0; i < 7; ++i) {
          double want_local = 0, want_global = 0;
          for (int p : mine) want_local += Value(p, step, i);
          for (int p = 0; p < n; ++p) want_global += Value(p, step, i);
          HORA_RETURN_IF_ERROR(Expect(local[i] == want_local && global[i] == want_global,
                                      "allreduce" + tag + ": set sum " + std::to_string(local[i]) +
                                          " (want " + std::to_string(want_local) + "), global " +
                                          std::to_string(global[i]) + " (want " +
                                          std::to_string(want_global) + ")"));
        }
        const auto* got = static_cast<const int32_t*>(ag.output()->data());
        size_t at = 0;
        for (int p : mine) {
          for (int k = 0; k < (p + 1) * 2; ++k, ++at) {
            HORA_RETURN_IF_ERROR(Expect(got[at] == p, "allgather" + tag + ": row of rank " +
                                                          std::to_string(p) + " holds " +
                                                          std::to_string(got[at])));
          }
        }
        HORA_RETURN_IF_ERROR(Expect(ag.output()->shape()[0] == static_cast<int64_t>(at / 2),
                                    "allgather" + tag + ": wrong row count"));
        HORA_RETURN_IF_ERROR(Expect(b[0] == mine.back() && b[2] == mine.back(),
                                    "broadcast" + tag + ": got " + std::to_string(b[0])));
        const auto* recv = static_cast<const float*>(aa.output()->data());
        for (int q = 0; q < m; ++q) {
          for (int k = 0; k <= set_rank; ++k) {
            const float v = recv[q * (set_rank + 1) + k];
            HORA_RETURN_IF_ERROR(Expect(v == static_cast<float>(mine[static_cast<size_t>(q)]),
                                        "alltoall" + tag + ": from set rank " + std::to_string(q) +
                                            " got " + std::to_string(v)));
          }
        }
        float want_rs = 0;
        for (int p : mine) want_rs += static_cast<float>(p + step);
        const auto* slice = static_cast<const float*>(hr.output()->data());
        HORA_RETURN_IF_ERROR(
            Expect(hr.output()->num_elements() == 2 && slice[0] == want_rs && slice[1] == want_rs,
                   "reducescatter" + tag + ": got " + std::to_string(slice[0])));
      }
      // Each set has its own cache: steps after the first ran from it.
      const Session::EngineCounters c = s.engine_counters(set);
      HORA_RETURN_IF_ERROR(Expect(c.cache_hits > 0 && c.tensors >= 20,
                                  "set engine: " + std::to_string(c.cache_hits) + " cache hits, " +
                                      std::to_string(c.tensors) + " tensors"));
      if (odd_id > 0) HORA_RETURN_IF_ERROR(s.RemoveProcessSet(odd_id));
      return s.RemoveProcessSet(even_id);
    }));
  }
}

// A set of two ranks or more has shared windows of its own: a cached
// step's allreduce rides with its negotiation's step (which only a set with
// windows does), and allreduces from one element to several rounds of the
// window match the sums computed here; a set of one rank has none.
TEST(ProcessSets, ASetOfRanksRunsOnSharedWindowsOfItsOwn) {
  for (int n : {3, 4}) {
    SCOPED_TRACE("world " + std::to_string(n));
    ThreadRanks ranks(n, TestSettings());
    ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
      std::vector<int> rest, first = {0};
      for (int r = 1; r < n; ++r) rest.push_back(r);
      HORA_ASSIGN_OR_RETURN(int many, s.AddProcessSet(rest));
      HORA_ASSIGN_OR_RETURN(int one, s.AddProcessSet(first));
      const int set = rank == 0 ? one : many;
      const std::vector<int>& mine = rank == 0 ? first : rest;
      const int steps = 4;
      for (int step = 0; step < steps; ++step) {
        std::vector<double> a(3), b(5);
        for (size_t i = 0; i < a.size(); ++i) a[i] = Value(rank, step, static_cast<int>(i));
        for (size_t i = 0; i < b.size(); ++i) b[i] = -Value(rank, step, static_cast<int>(i));
        std::vector<TensorView> views = {TensorView::Flat(a.data(), DataType::kFloat64, 3),
                                         TensorView::Flat(b.data(), DataType::kFloat64, 5)};
        for (Handle& h : s.GroupedAllreduceAsync("g", views, views, {ReduceOp::kSum}, set))
          HORA_RETURN_IF_ERROR(h.Wait(kWait));
        for (size_t i = 0; i < b.size(); ++i) {
          double want = 0;
          for (int p : mine) want -= Value(p, step, static_cast<int>(i));
          HORA_RETURN_IF_ERROR(Expect(
              b[i] == want,
              "grouped allreduce step " + std::to_string(step) + ": " + std::to_string(b[i])));
        }
      }
      const uint64_t carried = s.engine_counters(set).carried_batches;
      HORA_RETURN_IF_ERROR(Expect(carried == (mine.size() > 1 ? steps - 1u : 0u),
                                  "a set of " + std::to_string(mine.size()) + " carried " +
                                      std::to_string(carried) + " steps"));
      for (size_t count : {size_t{1}, size_t{4099}, size_t{600001}}) {
        std::vector<float> v(count);
        for (size_t i = 0; i < count; ++i)
          v[i] = static_cast<float>(rank + static_cast<int>(i % 3));
        Handle h = s.AllreduceAsync(
            "big" + std::to_string(count), TensorView::Flat(v.data(), DataType::kFloat32, count),
            TensorView::Flat(v.data(), DataType::kFloat32, count), {ReduceOp::kSum}, set);
        HORA_RETURN_IF_ERROR(h.Wait(kWait));
        for (size_t i = 0; i < count; ++i) {
          float want = 0;
          for (int p : mine) want += static_cast<float>(p + static_cast<int>(i % 3));
          if (v[i] != want) {
            return InternalError(std::to_string(count) + " elements: [" + std::to_string(i) +
                                 "] = " + std::to_string(v[i]));
          }
        }
      }
      HORA_RETURN_IF_ERROR(s.RemoveProcessSet(one));
      return s.RemoveProcessSet(many);
    }));
  }
}

// Overlapping sets {0,1,2} and {1,2,3}: ranks 1 and 2 run both at once.
TEST(ProcessSets, OverlappingSetsShareRanks) {
  ThreadRanks ranks(4, TestSettings());
  ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
    const std::vector<int> low = {0, 1, 2}, high = {3, 2, 1};  // any order
    HORA_ASSIGN_OR_RETURN(int lo, s.AddProcessSet(low));
    HORA_ASSIGN_OR_RETURN(int hi, s.AddProcessSet(high));
    const std::map<int, std::vector<int>> sets = s.ProcessSets();
    HORA_RETURN_IF_ERROR(Expect(sets.size() == 3 && sets.at(hi) == std::vector<int>({1, 2, 3}),
                                "ProcessSets() lists " + std::to_string(sets.size()) + " sets"));
    for (int step = 0; step < 3; ++step) {
      int32_t x = rank + step, y = 10 * rank + step;
      Handle hx, hy;
      if (rank <= 2)
        hx = s.AllreduceAsync("x", TensorView::Flat(&x, DataType::kInt32, 1),
                              TensorView::Flat(&x, DataType::kInt32, 1), {ReduceOp::kSum}, lo);
      if (rank >= 1)
        hy = s.AllreduceAsync("x", TensorView::Flat(&y, DataType::kInt32, 1),
                              TensorView::Flat(&y, DataType::kInt32, 1), {ReduceOp::kMax}, hi);
      if (rank <= 2) {
        HORA_RETURN_IF_ERROR(hx.Wait(kWait));
        HORA_RETURN_IF_ERROR(Expect(x == 3 + 3 * step, "low set sum " + std::to_string(x)));
      }
      if (rank >= 1) {
        HORA_RETURN_IF_ERROR(hy.Wait(kWait));
        HORA_RETURN_IF_ERROR(Expect(y == 30 + step, "high set max " + std::to_string(y)));
      }
    }
    // A barrier on one set while the other set's members are elsewhere.
    if (rank >= 1) HORA_RETURN_IF_ERROR(s.BarrierAsync(hi).Wait(kWait));
    HORA_RETURN_IF_ERROR(s.RemoveProcessSet(lo));
    return s.RemoveProcessSet(hi);
  }));
}

// Every rank gets the same error, naming what was wrong, and the session
// goes on (a later add and collectives work).
TEST(ProcessSets, BadCallsFailClearlyOnEveryRank) {
  ThreadRanks ranks(3, TestSettings());
  ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
    auto expect_error = [&](const Status& st, const std::string& text) {
      return Expect(!st.ok() && st.message().find(text) != std::string::npos,
                    "expected an error containing '" + text + "', got " + st.ToString());
    };
    // Ranks disagree: rank 2 asks for another set.
    std::vector<int> mine = rank == 2 ? std::vector<int>{0, 2} : std::vector<int>{0, 1};
    HORA_RETURN_IF_ERROR(
        expect_error(s.AddProcessSet(mine).status(), "rank 0 gave [0, 1], rank 2 gave [0, 2]"));
    HORA_RETURN_IF_ERROR(
        expect_error(s.AddProcessSet(std::vector<int>{0, 0}).status(), "rank 0 is listed twice"));
    HORA_RETURN_IF_ERROR(expect_error(s.AddProcessSet(std::vector<int>{1, 3}).status(),
                                      "rank 3 of [1, 3] is outside [0, 3)"));
    HORA_RETURN_IF_ERROR(
        expect_error(s.AddProcessSet(std::vector<int>{}).status(), "at least one rank"));
    HORA_RETURN_IF_ERROR(expect_error(s.AddProcessSet(std::vector<int>{2, 0, 1}).status(),
                                      "process set 0 already has ranks [0, 1, 2]"));
    HORA_RETURN_IF_ERROR(expect_error(s.RemoveProcessSet(0), "cannot be removed"));
    HORA_RETURN_IF_ERROR(
        expect_error(s.RemoveProcessSet(rank == 1 ? 5 : 4), "rank 0 gave [4], rank 1 gave [5]"));
    HORA_ASSIGN_OR_RETURN(int id, s.AddProcessSet(std::vector<int>{0, 2}));
    float v = 1.0f;
    const TensorView t = TensorView::Flat(&v, DataType::kFloat32, 1);
    if (rank == 1) {  // not a member
      HORA_RETURN_IF_ERROR(expect_error(s.AllreduceAsync("v", t, t, {}, id).Wait(kWait),
                                        "rank 1: allreduce 'v': rank 1 is not in process set " +
                                            std::to_string(id) + " (ranks 0, 2)"));
    } else {
      HORA_RETURN_IF_ERROR(expect_error(s.BroadcastAsync("b", t, 1, id).Wait(kWait),
                                        "root rank 1 is not in process set"));
      // A shape mismatch inside the set names the set, and its ranks and
      // roots as the job numbers them (not their places in the set: rank 2
      // is the set's second); the set goes on.
      std::vector<float> w(static_cast<size_t>(rank + 1), 1.0f);
      const TensorView wv = TensorView::Flat(w.data(), DataType::kFloat32, w.size());
      const std::string set = "process set " + std::to_string(id) + " (ranks 0, 2): rank " +
                              std::to_string(rank) + ": ";
      HORA_RETURN_IF_ERROR(expect_error(
          s.AllreduceAsync("w", wv, wv, {ReduceOp::kSum}, id).Wait(kWait),
          set + "allreduce 'w': ranks disagree: rank 0 float32[1] sum; rank 2 float32[3] sum"));
      HORA_RETURN_IF_ERROR(expect_error(
          s.BroadcastAsync("b", t, rank, id).Wait(kWait),
          set +
              "broadcast 'b': ranks disagree: rank 0 float32[1] root 0; rank 2 float32[1] root 2"));
      HORA_RETURN_IF_ERROR(s.AllreduceAsync("v", t, t, {ReduceOp::kSum}, id).Wait(kWait));
      HORA_RETURN_IF_ERROR(Expect(v == 2.0f, "sum over {0, 2}: " + std::to_string(v)));
    }
    HORA_RETURN_IF_ERROR(s.RemoveProcessSet(id));
    HORA_RETURN_IF_ERROR(expect_error(s.AllreduceAsync("v", t, t, {}, id).Wait(kWait),
                                      "there is no process set " + std::to_string(id)));
    HORA_RETURN_IF_ERROR(expect_error(s.RemoveProcessSet(id), "there is no process set"));
    // The global set is untouched.
    v = 1.0f;
    HORA_RETURN_IF_ERROR(s.AllreduceAsync("v", t, t, {ReduceOp::kSum}).Wait(kWait));
    return Expect(v == 3.0f, "global sum " + std::to_string(v));
  }));
}

// A rank that is late to add_process_set (or never comes) is reported as
// such: the stall report names the call, not the allgather inside it.
TEST(ProcessSets, AStallInAddProcessSetNamesIt) {
  ThreadRanks ranks(3, TestSettings({{"HORA_STALL_WARNING_S", "0.3"},
                                     {"HORA_TIMEOUT_S", "0"},
                                     {"HORA_LOG_LEVEL", "warning"}}));
  ::testing::internal::CaptureStderr();
  auto st = ranks.Run([&](int rank, Session& s) -> Status {
    if (rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    HORA_ASSIGN_OR_RETURN(const int id, s.AddProcessSet(std::vector<int>{0, 1}));
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    return s.RemoveProcessSet(id);
  });
  const std::string err = ::testing::internal::GetCapturedStderr();
  ExpectAllOk(st);
  EXPECT_NE(err.find("stall: rank 0: add_process_set([0, 1]) has waited"), std::string::npos)
      << err;
  EXPECT_NE(err.find("stall: rank 1: remove_process_set(1) has waited"), std::string::npos) << err;
  EXPECT_NE(err.find("for rank 2 (allgather, "), std::string::npos) << err;
}

// 29 sets besides the global one fit at once; the next is refused; after a
// removal its context slot is reused and the new set works.
TEST(ProcessSets, SlotLimitAndReuse) {
  ThreadRanks ranks(6, TestSettings());
  ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
    std::vector<int> ids;
    for (int mask = 1; ids.size() < 29; ++mask) {  // subsets of ranks 0..5 by bit mask
      std::vector<int> members;
      for (int r = 0; r < 6; ++r)
        if (mask & (1 << r)) members.push_back(r);
      if (members.size() == 6) continue;
      HORA_ASSIGN_OR_RETURN(int id, s.AddProcessSet(members));
      ids.push_back(id);
    }
    Status full = s.AddProcessSet(std::vector<int>{1, 2, 3, 4, 5}).status();
    HORA_RETURN_IF_ERROR(
        Expect(!full.ok() && full.message().find("30 process sets exist") != std::string::npos,
               "30th set: " + full.ToString()));
    HORA_RETURN_IF_ERROR(s.RemoveProcessSet(ids[3]));
    HORA_ASSIGN_OR_RETURN(int id, s.AddProcessSet(std::vector<int>{1, 2, 3, 4, 5}));
    HORA_RETURN_IF_ERROR(Expect(id == 30, "id " + std::to_string(id) + ", want 30"));
    if (rank >= 1) {
      int64_t x = rank;
      const TensorView t = TensorView::Flat(&x, DataType::kInt64, 1);
      HORA_RETURN_IF_ERROR(s.AllreduceAsync("x", t, t, {ReduceOp::kSum}, id).Wait(kWait));
      HORA_RETURN_IF_ERROR(Expect(x == 15, "sum over 1..5: " + std::to_string(x)));
    }
    for (int k : ids)
      if (k != ids[3]) HORA_RETURN_IF_ERROR(s.RemoveProcessSet(k));
    return s.RemoveProcessSet(id);
  }));
}

}  // namespace
}  // namespace hora
